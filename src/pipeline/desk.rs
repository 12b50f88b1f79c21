//! Several cameras, one detector: the detector's desk, where each camera's tracker leaves word
//! that its job slot holds a frame. Of the cameras waiting, the detector serves the one it
//! served least recently (the one waiting longest among those never served yet), so no camera
//! starves, whatever the others ask, and cameras that all ask more than the detector can do
//! get equal shares, whenever their frames happen to arrive.
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
    /// The turn at which each camera was last served (0: never); turns count up from 1.
    pub(super) served: Vec<u64>,
    /// The last turn given.
    pub(super) turn: u64,
    /// Every camera's run has ended: the detector stops.
    pub(super) shutdown: bool,
    /// The detector thread has ended.
    pub(super) exited: bool,
}

impl Requests {
    /// The camera to serve next, its request taken off the desk: of those waiting, the one
    /// served least recently; among equals, the one whose request waits longest.
    pub(super) fn next_turn(&mut self) -> Option<usize> {
        let (i, _) = self
            .pending
            .iter()
            .enumerate()
            .filter_map(|(i, at)| at.map(|at| (i, at)))
            .min_by_key(|&(i, at)| (self.served.get(i).copied().unwrap_or(0), at, i))?;
        self.pending[i] = None;
        self.turn += 1;
        if let Some(s) = self.served.get_mut(i) {
            *s = self.turn;
        }
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
                served: vec![0; cameras],
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
    /// Puts `frame` in the camera's job slot and leaves word on the desk. The slot holds one
    /// frame beside the one the detector may be working on for this camera: a camera whose
    /// frame arrives while its previous one is being detected keeps its turn on the desk
    /// rather than waiting for its next frame, so what each camera gets does not depend on
    /// when its frames happen to arrive against the detector's rounds. While a request waits
    /// (other cameras served first), a newer one replaces the waiting frame and keeps its
    /// place: the detector gets the camera's newest frame, not one that aged while it waited;
    /// such a request is not a detection of its own (false: counted as skipped).
    fn submit(&mut self, frame: Frame) -> bool {
        let mut g = self.hub.lock();
        if let Some(waiting) = g.job.as_mut() {
            *waiting = frame;
            return false;
        }
        g.job = Some(frame);
        g.detector_busy = true;
        drop(g);
        self.hub.cv.notify_all();
        self.desk.request(self.index, monotonic_now());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::detection::take_job;

    #[test]
    fn the_camera_served_least_recently_goes_first_and_each_request_once() {
        let mut r = Requests {
            pending: vec![None; 4],
            served: vec![0; 4],
            ..Requests::default()
        };
        assert_eq!(r.next_turn(), None);
        r.pending[2] = Some(Duration::from_millis(30));
        r.pending[0] = Some(Duration::from_millis(50));
        r.pending[3] = Some(Duration::from_millis(10));
        // None served yet: the request waiting longest first.
        assert_eq!(r.next_turn(), Some(3));
        // Camera 3 asks again at once: the others, waiting longer, come first.
        r.pending[3] = Some(Duration::from_millis(60));
        assert_eq!(r.next_turn(), Some(2));
        // Camera 2 asks again before camera 0's request: camera 0 still comes first, then 3
        // (served before 2), then 2, although 2 asked before 3.
        r.pending[2] = Some(Duration::from_millis(55));
        assert_eq!(r.next_turn(), Some(0));
        assert_eq!(r.next_turn(), Some(3));
        assert_eq!(r.next_turn(), Some(2));
        assert_eq!(r.next_turn(), None);
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
        assert!(!slot.submit(frame(2)), "one job waiting at most");
        // Still waiting for the detector: the newer frame replaced the waiting one.
        assert_eq!(hub.lock().job.as_ref().map(|f| f.seq), Some(2));
        assert_eq!(desk.lock().next_turn(), Some(1));
        assert_eq!(desk.lock().next_turn(), None, "one request on the desk");
        // The detector took it and works on it: the next request waits on the desk, its turn
        // kept, and a newer one replaces it there.
        assert_eq!(take_job(&hub).map(|f| f.seq), Some(2));
        assert!(
            slot.submit(frame(3)),
            "the next detection, behind the one in work"
        );
        assert!(!slot.submit(frame(4)), "one job waiting at most");
        assert_eq!(hub.lock().job.as_ref().map(|f| f.seq), Some(4));
        assert_eq!(desk.lock().next_turn(), Some(1));
        // Its result delivered, the waiting frame still counts the camera as busy once taken.
        hub.lock().detector_busy = false;
        assert_eq!(take_job(&hub).map(|f| f.seq), Some(4));
        assert!(
            hub.lock().detector_busy,
            "in work: the camera's run cannot end under it"
        );
    }
}
