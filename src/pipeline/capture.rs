//! The capture thread: the source's frames into the newest-frame slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::hub::Hub;
use crate::frame::monotonic_now;
use crate::source::{self, FrameSource};
use crate::sysinfo::thread_cpu_time;

/// The capture thread. `wait_for_slot`: hand out a frame only once the tracker took the
/// previous one (lockstep runs, recordings played as fast as possible); otherwise the newest
/// frame replaces an untaken one (a camera never waits).
pub(super) fn capture_loop(
    src: &mut (dyn FrameSource + Send),
    hub: &Hub,
    stop: &AtomicBool,
    wait_for_slot: bool,
) {
    let mut next_time = crate::stats::Latency::default();
    let mut timeouts = crate::logging::RateLimit::per_minute();
    let mut last_corrupt = 0;
    loop {
        if stop.load(Ordering::Relaxed) || hub.lock().shutdown {
            break;
        }
        if wait_for_slot {
            // Wait until the tracker took the previous frame: nothing is dropped.
            let mut g = hub.lock();
            while g.frame.is_some() && !g.shutdown && !stop.load(Ordering::Relaxed) {
                g = hub.wait(g, Duration::from_millis(100));
            }
            if g.shutdown || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let t0 = Instant::now();
        let next = src.next();
        // Damaged frames are skipped inside `next` (whatever it returns): count them now.
        let corrupt = src.stats().corrupt;
        if corrupt != last_corrupt {
            last_corrupt = corrupt;
            hub.lock().source_corrupt = corrupt;
        }
        match next {
            Ok(Some(frame)) => {
                super::panics::working_on(frame.seq);
                super::panics::injected_panic("capture", frame.seq);
                next_time.record(t0.elapsed());
                let dropped = src.stats().dropped_stale;
                let mut g = hub.lock();
                g.source_reconnecting = None;
                g.source_waiting = false;
                g.captured += 1;
                g.source_dropped = dropped;
                if g.frame.replace(frame).is_some() {
                    g.replaced += 1;
                }
                drop(g);
                hub.cv.notify_all();
            }
            Ok(None) => break,
            Err(e) if e.is_transient() => {
                let attempts = match &e {
                    source::SourceError::Disconnected { .. } => Some(0),
                    source::SourceError::Reconnecting { attempts, .. }
                    | source::SourceError::WaitingForDevice { attempts, .. } => Some(*attempts),
                    _ => None,
                };
                let waiting = matches!(e, source::SourceError::WaitingForDevice { .. });
                let mut g = hub.lock();
                g.source_reconnecting = attempts.map(|_| monotonic_now());
                g.source_waiting = waiting;
                drop(g);
                // A camera may stay away for hours: the first attempts are logged, then one
                // a minute or so (the back-off tops out at 5 s). A silent camera times out
                // every poll: its warning is rate-limited (one a minute, with the count).
                match attempts {
                    Some(a) if a > 3 && a % 12 != 0 => {
                        log::debug!(LOOKOUT_EVENT = "source_error"; "{e}")
                    }
                    Some(_) => log::warn!(LOOKOUT_EVENT = "source_error"; "{e}"),
                    None => match timeouts.hit(monotonic_now()) {
                        Some(held) if held.count > 0 => {
                            log::warn!(LOOKOUT_EVENT = "source_error", HELD_BACK = held.count; "{e} ({held})")
                        }
                        Some(_) => log::warn!(LOOKOUT_EVENT = "source_error"; "{e}"),
                        None => log::debug!(LOOKOUT_EVENT = "source_error"; "{e}"),
                    },
                }
            }
            Err(e) => {
                log::error!(LOOKOUT_EVENT = "source_error"; "{e}");
                hub.lock().error = Some(e);
                break;
            }
        }
    }
    let mut g = hub.lock();
    g.source_done = true;
    g.capture_time = Some(next_time);
    g.thread_cpu.capture = thread_cpu_time();
    drop(g);
    hub.cv.notify_all();
}

#[cfg(test)]
mod tests {
    //! `capture_loop` runs on the test thread against a scripted source that looks at the hub
    //! each time it is asked for a frame: no other thread, no clock.
    use super::*;
    use crate::frame::{Frame, PixelFormat};
    use crate::source::{SourceError, SourceStats};
    use std::collections::VecDeque;
    use std::sync::Arc;

    struct Scripted {
        hub: Arc<Hub>,
        script: VecDeque<Result<Option<Frame>, SourceError>>,
        /// Whether the hub said "reopening a lost camera" at each call.
        reopening: Vec<bool>,
    }

    impl FrameSource for Scripted {
        fn next(&mut self) -> Result<Option<Frame>, SourceError> {
            self.reopening
                .push(self.hub.lock().source_reconnecting.is_some());
            self.script.pop_front().unwrap_or(Ok(None))
        }
        fn stats(&self) -> SourceStats {
            SourceStats {
                dropped_stale: 4,
                ..SourceStats::default()
            }
        }
        fn fps(&self) -> Option<f64> {
            None
        }
        fn describe(&self) -> String {
            "scripted".into()
        }
    }

    fn frame(seq: u64) -> Result<Option<Frame>, SourceError> {
        Ok(Some(Frame {
            seq,
            captured_at: Duration::ZERO,
            width: 4,
            height: 4,
            format: PixelFormat::Grey,
            data: vec![0; 16],
        }))
    }

    fn run(script: Vec<Result<Option<Frame>, SourceError>>) -> (Arc<Hub>, Vec<bool>) {
        let hub = Arc::new(Hub::default());
        let mut src = Scripted {
            hub: hub.clone(),
            script: script.into(),
            reopening: Vec::new(),
        };
        capture_loop(&mut src, &hub, &AtomicBool::new(false), false);
        (hub, src.reopening)
    }

    #[test]
    fn a_lost_camera_being_reopened_is_reported_until_frames_flow_but_a_hang_is_not() {
        let device = || "/dev/video-test".to_string();
        let (hub, reopening) = run(vec![
            frame(1),
            Err(SourceError::Disconnected {
                device: device(),
                source: std::io::Error::from_raw_os_error(libc::ENODEV),
            }),
            Err(SourceError::Reconnecting {
                device: device(),
                attempts: 1,
                reason: "No such file or directory".into(),
                retry_in: Duration::from_millis(100),
            }),
            Err(SourceError::Timeout {
                device: device(),
                timeout: Duration::from_millis(100),
            }),
            Err(SourceError::Reconnecting {
                device: device(),
                attempts: 2,
                reason: "No such file or directory".into(),
                retry_in: Duration::from_millis(100),
            }),
            frame(2),
        ]);
        // What the hub said when each call started, i.e. after the previous call's outcome:
        // frame, lost, reopening, poll timeout (a hang: not reported), reopening, frame, end.
        assert_eq!(reopening, [false, false, true, true, false, true, false]);
        let g = hub.lock();
        assert!(g.source_done && g.error.is_none());
        assert_eq!((g.captured, g.replaced, g.source_dropped), (2, 1, 4));
        assert_eq!(
            g.frame.as_ref().map(|f| f.seq),
            Some(2),
            "the newest frame waits"
        );
    }

    #[test]
    fn a_fatal_source_error_ends_capture_and_is_kept_for_the_run() {
        let (hub, _) = run(vec![
            frame(1),
            Err(SourceError::UnknownSpec {
                spec: "clip.avi".into(),
            }),
            frame(2),
        ]);
        let g = hub.lock();
        assert!(g.source_done);
        assert!(matches!(&g.error, Some(SourceError::UnknownSpec { spec }) if spec == "clip.avi"));
        assert_eq!(g.captured, 1, "nothing is read after a fatal error");
    }
}
