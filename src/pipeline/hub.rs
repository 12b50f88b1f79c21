//! The state the pipeline's three threads share, behind one mutex and one condition variable.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::error::ThreadPanic;
use super::summary::ThreadCpu;
use crate::frame::Frame;
use crate::source;
use crate::vocab::DetectionRound;

/// Where detection requests go: the detector thread's one-job slot.
pub(super) trait DetectorSlot {
    /// Hands `frame` to the detector and returns true, or returns false (and drops the
    /// frame) when the detector is still busy with an earlier one.
    fn submit(&mut self, frame: Frame) -> bool;
}

/// A detection result travelling back to the tracker.
#[derive(Debug)]
pub(super) struct DetResult {
    pub(super) seq: u64,
    pub(super) dets: Result<DetectionRound, String>,
    pub(super) preprocess: Duration,
    pub(super) model: Duration,
    pub(super) postprocess: Duration,
    /// The frame the model ran on, handed back (where snapshots are taken).
    pub(super) frame: Frame,
}

/// State shared by the three threads, behind one mutex + condvar.
#[derive(Default)]
pub(super) struct Shared {
    /// The newest captured frame not yet taken by the tracker.
    pub(super) frame: Option<Frame>,
    /// Frames replaced in the slot before the tracker took them.
    pub(super) replaced: u64,
    /// Frames the source delivered.
    pub(super) captured: u64,
    /// Stale buffers the source itself discarded (camera), as last reported.
    pub(super) source_dropped: u64,
    /// Damaged frames the source skipped (torn JPEG, short V4L2 buffer, driver error flag), as
    /// last reported.
    pub(super) source_corrupt: u64,
    /// The frame waiting for the detector (at most one: requests while busy are skipped).
    pub(super) job: Option<Frame>,
    /// The detector is working on a frame.
    pub(super) detector_busy: bool,
    /// Finished detections, oldest first.
    pub(super) results: VecDeque<DetResult>,
    /// The source ended (or failed: `error`).
    pub(super) source_done: bool,
    /// A fatal source error.
    pub(super) error: Option<source::SourceError>,
    /// Everyone stops.
    pub(super) shutdown: bool,
    /// The detector thread has ended.
    pub(super) detector_exited: bool,
    /// When (monotonic clock) the source last reported a lost camera or a failed reopen attempt (`None` while
    /// frames flow). A source busy reopening a vanished camera is alive, not hung: the
    /// tracker keeps the watchdog fed while these reports keep coming.
    pub(super) source_reconnecting: Option<Duration>,
    /// Those reports are of a camera that was missing at start and has not appeared yet
    /// (rather than one that was lost).
    pub(super) source_waiting: bool,
    /// Time in `source.next()` per delivered frame, left here by the capture thread when it
    /// ends (moved into the run's total).
    pub(super) capture_time: Option<crate::stats::Latency>,
    /// CPU time of each thread, written by the thread as it ends.
    pub(super) thread_cpu: ThreadCpu,
    /// A pipeline thread panicked (the first one): the run ends with it.
    pub(super) panicked: Option<ThreadPanic>,
    /// Another camera of the same run failed: this one ends too (as if stopped).
    pub(super) aborted: bool,
}

#[derive(Default)]
pub(super) struct Hub {
    pub(super) state: Mutex<Shared>,
    pub(super) cv: Condvar,
}

impl Hub {
    pub(super) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panicking thread poisons the lock; the data is still consistent counters/slots.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn wait<'a>(
        &self,
        g: MutexGuard<'a, Shared>,
        t: Duration,
    ) -> MutexGuard<'a, Shared> {
        match self.cv.wait_timeout(g, t) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        }
    }
}

impl DetectorSlot for Shared {
    fn submit(&mut self, frame: Frame) -> bool {
        if self.detector_busy {
            return false;
        }
        self.detector_busy = true;
        self.job = Some(frame);
        true
    }
}

/// The tracker thread's requests: into the shared job slot, waking the detector.
impl DetectorSlot for &Hub {
    fn submit(&mut self, frame: Frame) -> bool {
        let taken = self.lock().submit(frame);
        if taken {
            self.cv.notify_all();
        }
        taken
    }
}
