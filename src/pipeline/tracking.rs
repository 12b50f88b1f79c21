//! The tracker thread: waits on the hub and lets the [`Scheduler`] decide (its rules and
//! their tests live in `scheduler.rs`).

use std::time::Duration;

use super::error::PipelineError;
use super::hub::{DetectorSlot, Hub};
use super::options::RunOptions;
use super::panics;
use super::scheduler::{MonotonicClock, RunOutcome, Scheduler};
use crate::config::Config;
use crate::events::Events;
use crate::output::TracksWriter;
use crate::track::Tracker;

/// The longest the tracker sleeps without a wake-up: how often it looks at the stop and
/// reload flags and at a capture thread reopening a lost camera.
const POLL: Duration = Duration::from_millis(100);

/// The tracker thread's loop: wait for a frame, a result, the source's end or a stop; then
/// apply the results, step the frame (asking `detector` for detections), and see whether the
/// run is over.
pub(super) fn track_loop(
    cfg: &Config,
    opts: &RunOptions,
    hub: &Hub,
    detector: &mut dyn DetectorSlot,
    tracker: &mut Tracker,
    events: &mut Events,
    writer: Option<&mut TracksWriter>,
) -> Result<RunOutcome, PipelineError> {
    let mut s = Scheduler::new(cfg, opts, tracker, &MonotonicClock)
        .with_writer(writer)
        .with_events(events);
    loop {
        let mut g = hub.lock();
        while !s.should_wake(&g) {
            s.while_waiting(&g);
            g = hub.wait(g, POLL);
        }
        if let Some(p) = &g.panicked {
            // Another pipeline thread is gone: the run ends now (see `panics`).
            return Err(PipelineError::Panicked(p.clone()));
        }
        let taken = s.take(&mut g);
        drop(g);
        hub.cv.notify_all(); // lockstep capture waits for the slot to empty
        s.on_results(taken.results);
        if let Some(frame) = taken.frame {
            panics::working_on(frame.seq);
            panics::injected_panic("tracking", frame.seq);
            s.on_frame(frame, detector);
        }
        if let Some(end) = s.tick() {
            return Ok(s.finish(end));
        }
    }
}
