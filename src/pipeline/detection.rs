//! The detector thread: the newest requested frame → tensor → model → a detection round
//! (decoded down to `floor`, only the configured labels, split by the model's threshold into
//! reported and weak detections: [`Detector::detect_round`]).

use std::time::{Duration, Instant};

use super::hub::{DetResult, Hub};
use crate::detect::Detector;
use crate::geom::ResizeMode;
use crate::preprocess::{self, Scratch};
use crate::sysinfo::thread_cpu_time;

pub(super) fn detect_loop(
    det: &Detector,
    hub: &Hub,
    delay: Duration,
    resize: ResizeMode,
    floor: f32,
    labels: Option<&[usize]>,
) {
    let info = det.info().clone();
    let mut input = det.new_input();
    let mut scratch = Scratch::default();
    loop {
        let frame = {
            let mut g = hub.lock();
            loop {
                if g.shutdown {
                    g.thread_cpu.detect = thread_cpu_time();
                    return;
                }
                if let Some(f) = g.job.take() {
                    break f;
                }
                g = hub.wait(g, Duration::from_millis(100));
            }
        };
        super::panics::working_on(frame.seq);
        super::panics::injected_panic("detection", frame.seq);
        let t0 = Instant::now();
        let mapped = preprocess::frame_to_input(
            &frame,
            info.input_w,
            info.input_h,
            resize,
            &mut input,
            &mut scratch,
        );
        let t1 = Instant::now();
        let (dets, model, post) = match mapped {
            Err(e) => (
                Err(format!("frame {}: {e}", frame.seq)),
                Duration::ZERO,
                Duration::ZERO,
            ),
            Ok(map) => match det.run_input(&input) {
                Err(e) => (Err(e.to_string()), t1.elapsed(), Duration::ZERO),
                Ok(raw) => {
                    let t2 = Instant::now();
                    let d = det.detect_round(&raw, &map, floor, labels);
                    (Ok(d), t2 - t1, t2.elapsed())
                }
            },
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut g = hub.lock();
        g.results.push_back(DetResult {
            seq: frame.seq,
            dets,
            preprocess: t1 - t0,
            model,
            postprocess: post,
            frame,
        });
        g.detector_busy = false;
        drop(g);
        hub.cv.notify_all();
    }
}
