//! The capture thread: the source's frames into the newest-frame slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::hub::Hub;
use super::thread_cpu_time;
use crate::frame::monotonic_now;
use crate::source::{self, FrameSource};

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
    loop {
        if stop.load(Ordering::Relaxed) || hub.lock().shutdown {
            break;
        }
        if wait_for_slot {
            // Wait until the tracker took the previous frame: nothing is dropped.
            let mut g = hub.lock();
            while g.frame.is_some() && !g.shutdown {
                g = hub.wait(g, Duration::from_millis(100));
            }
            if g.shutdown {
                break;
            }
        }
        let t0 = Instant::now();
        match src.next() {
            Ok(Some(frame)) => {
                next_time.record(t0.elapsed());
                let dropped = src.stats().dropped_stale;
                let mut g = hub.lock();
                g.source_reconnecting = None;
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
                    source::SourceError::Reconnecting { attempts, .. } => Some(*attempts),
                    _ => None,
                };
                hub.lock().source_reconnecting = attempts.map(|_| monotonic_now());
                // A camera may stay away for hours: the first attempts are logged, then one
                // a minute or so (the back-off tops out at 5 s).
                match attempts {
                    Some(a) if a > 3 && a % 12 != 0 => {
                        log::debug!(LOOKOUT_EVENT = "source_error"; "{e}")
                    }
                    _ => log::warn!(LOOKOUT_EVENT = "source_error"; "{e}"),
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
