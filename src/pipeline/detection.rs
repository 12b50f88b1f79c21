//! The detector thread: the newest requested frame → tensor → model → a detection round
//! (decoded down to `floor`, only the configured labels, split by the model's threshold into
//! reported and weak detections: [`Detector::detect_round`]).

use std::time::{Duration, Instant};

use std::sync::Arc;

use super::desk::Desk;
use super::hub::{DetResult, Hub};
use crate::detect::{Detector, RawOutputs};
use crate::frame::Frame;
use crate::geom::ResizeMode;
use crate::preprocess::{self, Scratch};
use crate::sysinfo::thread_cpu_time;

/// What the detector does with a frame besides the model: how frames become its input and
/// which detections it keeps (per camera: `floor` and `labels` are each camera's own).
pub(super) struct Settings<'a> {
    pub(super) delay: Duration,
    pub(super) resize: ResizeMode,
    pub(super) floor: f32,
    pub(super) labels: Option<&'a [usize]>,
}

/// The detector's buffers, kept across frames.
struct Bench {
    info: crate::detect::ModelInfo,
    input: preprocess::ModelInput,
    scratch: Scratch,
    /// The model's outputs, reused from frame to frame.
    raw: RawOutputs,
}

impl Bench {
    fn new(det: &Detector) -> Bench {
        Bench {
            info: det.info().clone(),
            input: det.new_input(),
            scratch: Scratch::default(),
            raw: RawOutputs::default(),
        }
    }

    /// One frame through preprocessing, the model and decoding.
    fn detect(&mut self, det: &Detector, frame: Frame, s: &Settings) -> DetResult {
        super::panics::working_on(frame.seq);
        super::panics::injected_panic("detection", frame.seq);
        let t0 = Instant::now();
        let mapped = preprocess::frame_to_input(
            &frame,
            self.info.input_w,
            self.info.input_h,
            s.resize,
            &mut self.input,
            &mut self.scratch,
        );
        let t1 = Instant::now();
        let (dets, model, post) = match mapped {
            Err(e) => (
                Err(format!("frame {}: {e}", frame.seq)),
                Duration::ZERO,
                Duration::ZERO,
            ),
            Ok(map) => match det.run_input_into(&self.input, &mut self.raw) {
                Err(e) => (Err(e.to_string()), t1.elapsed(), Duration::ZERO),
                Ok(()) => {
                    let t2 = Instant::now();
                    let d = det.detect_round(&self.raw, &map, s.floor, s.labels);
                    (Ok(d), t2 - t1, t2.elapsed())
                }
            },
        };
        if !s.delay.is_zero() {
            std::thread::sleep(s.delay);
        }
        DetResult {
            seq: frame.seq,
            dets,
            preprocess: t1 - t0,
            model,
            postprocess: post,
            frame,
        }
    }
}

/// Hands a result back to its camera's tracker and frees the camera's job slot.
fn deliver(hub: &Hub, result: DetResult) {
    let mut g = hub.lock();
    g.results.push_back(result);
    g.detector_busy = false;
    drop(g);
    hub.cv.notify_all();
}

/// The detector takes a camera's job (if a request still holds one) and marks the camera busy
/// until the result is delivered, so its run does not end while a frame is in work even when
/// the previous result's delivery cleared the mark with this frame waiting.
pub(super) fn take_job(hub: &Hub) -> Option<Frame> {
    let mut g = hub.lock();
    let job = g.job.take();
    if job.is_some() {
        g.detector_busy = true;
    }
    job
}

/// One camera's detector: waits on the camera's hub for a job.
pub(super) fn detect_loop(det: &Detector, hub: &Hub, s: &Settings) {
    let mut bench = Bench::new(det);
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
        let result = bench.detect(det, frame, s);
        deliver(hub, result);
    }
}

/// The detector shared by several cameras: waits on the desk, serves the camera whose turn
/// comes next (the waiting camera served least recently, see `desk`), with that camera's
/// settings; returns its thread's CPU time.
pub(super) fn shared_detect_loop(
    det: &Detector,
    desk: &Desk,
    hubs: &[Arc<Hub>],
    settings: &[Settings],
) -> Duration {
    let mut bench = Bench::new(det);
    loop {
        let index = {
            let mut g = desk.lock();
            loop {
                if g.shutdown {
                    return thread_cpu_time();
                }
                if let Some(i) = g.next_turn() {
                    break i;
                }
                g = desk.wait(g, Duration::from_millis(100));
            }
        };
        let (Some(hub), Some(s)) = (hubs.get(index), settings.get(index)) else {
            continue;
        };
        if let Some(frame) = take_job(hub) {
            let result = bench.detect(det, frame, s);
            deliver(hub, result);
        }
    }
}
