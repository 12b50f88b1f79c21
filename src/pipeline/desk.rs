//! Several cameras, one detector: the detector's desk, where each camera's tracker leaves word
//! that its job slot holds a frame. The detector serves the camera whose request is most
//! overdue — the one waiting longest — so no camera starves, whatever the others ask.
//!
//! Each camera keeps its own [`Hub`] (frame slot, job slot, results) exactly as a single
//! camera does; the desk only orders the requests. A single camera has no desk: its detector
//! waits on its hub.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::hub::{DetectorSlot, Hub};
use crate::frame::{monotonic_now, Frame};

/// The requests waiting for the shared detector, one slot per camera.
#[derive(Default)]
pub(super) struct Requests {
    /// When (monotonic clock) each camera's pending request was made; `None`: none pending.
    pub(super) pending: Vec<Option<Duration>>,
    /// Every camera's run has ended: the detector stops.
    pub(super) shutdown: bool,
    /// The detector thread has ended.
    pub(super) exited: bool,
}

impl Requests {
    /// The camera whose request waits longest, taken off the desk.
    pub(super) fn most_overdue(&mut self) -> Option<usize> {
        let (i, _) = self
            .pending
            .iter()
            .enumerate()
            .filter_map(|(i, at)| at.map(|at| (i, at)))
            .min_by_key(|&(i, at)| (at, i))?;
        self.pending[i] = None;
        Some(i)
    }
}

/// The desk: requests behind a mutex and the condition variable the detector waits on.
#[derive(Default)]
pub(super) struct Desk {
    state: Mutex<Requests>,
    pub(super) cv: Condvar,
}

impl Desk {
    /// A desk for `cameras` cameras.
    pub(super) fn new(cameras: usize) -> Desk {
        Desk {
            state: Mutex::new(Requests {
                pending: vec![None; cameras],
                ..Requests::default()
            }),
            cv: Condvar::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Requests> {
        // A panicking thread poisons the lock; the requests are still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn wait<'a>(
        &self,
        g: MutexGuard<'a, Requests>,
        t: Duration,
    ) -> MutexGuard<'a, Requests> {
        match self.cv.wait_timeout(g, t) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        }
    }

    /// Camera `index` has a frame in its job slot.
    fn request(&self, index: usize, at: Duration) {
        let mut g = self.lock();
        if let Some(p) = g.pending.get_mut(index) {
            p.get_or_insert(at);
        }
        drop(g);
        self.cv.notify_all();
    }

    /// Every camera is done: the detector ends.
    pub(super) fn close(&self) {
        self.lock().shutdown = true;
        self.cv.notify_all();
    }
}

/// One camera's way to the shared detector: its own job slot (as a single camera), and word
/// left on the desk.
pub(super) struct CameraSlot<'a> {
    pub(super) hub: &'a Hub,
    pub(super) desk: &'a Desk,
    pub(super) index: usize,
}

impl DetectorSlot for CameraSlot<'_> {
    /// Puts `frame` in the camera's job slot and leaves word on the desk. While the request
    /// waits for the shared detector (other cameras served first), a newer request replaces
    /// the waiting frame and keeps its place: the detector gets the camera's newest frame, not
    /// one that aged while it waited. Such a request, and any while the detector works on this
    /// camera's frame, is not a detection of its own (false: counted as skipped).
    fn submit(&mut self, frame: Frame) -> bool {
        let mut g = self.hub.lock();
        if let Some(waiting) = g.job.as_mut() {
            *waiting = frame;
            return false;
        }
        let taken = g.submit(frame);
        drop(g);
        if taken {
            self.hub.cv.notify_all();
            self.desk.request(self.index, monotonic_now());
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_waiting_longest_is_served_first_and_each_once() {
        let mut r = Requests {
            pending: vec![None; 4],
            ..Requests::default()
        };
        assert_eq!(r.most_overdue(), None);
        r.pending[2] = Some(Duration::from_millis(30));
        r.pending[0] = Some(Duration::from_millis(50));
        r.pending[3] = Some(Duration::from_millis(10));
        assert_eq!(r.most_overdue(), Some(3));
        // Camera 3 asks again at once: the others, waiting longer, come first.
        r.pending[3] = Some(Duration::from_millis(60));
        assert_eq!(r.most_overdue(), Some(2));
        assert_eq!(r.most_overdue(), Some(0));
        assert_eq!(r.most_overdue(), Some(3));
        assert_eq!(r.most_overdue(), None);
    }

    #[test]
    fn a_camera_slot_takes_one_job_at_a_time_and_tells_the_desk() {
        let hub = Hub::default();
        let desk = Desk::new(2);
        let frame = |seq| Frame {
            seq,
            captured_at: Duration::ZERO,
            width: 2,
            height: 2,
            format: crate::frame::PixelFormat::Grey,
            data: vec![0; 4],
        };
        let mut slot = CameraSlot {
            hub: &hub,
            desk: &desk,
            index: 1,
        };
        assert!(slot.submit(frame(1)));
        assert!(!slot.submit(frame(2)), "one job: never queued");
        // Still waiting for the detector: the newer frame replaced the waiting one.
        assert_eq!(hub.lock().job.as_ref().map(|f| f.seq), Some(2));
        assert_eq!(desk.lock().most_overdue(), Some(1));
        assert_eq!(desk.lock().most_overdue(), None, "one request on the desk");
        // The detector took it and works on it: requests are skipped until it is done.
        assert_eq!(hub.lock().job.take().map(|f| f.seq), Some(2));
        assert!(!slot.submit(frame(3)), "busy: skipped");
        assert!(hub.lock().job.is_none());
        assert_eq!(desk.lock().most_overdue(), None);
    }
}
