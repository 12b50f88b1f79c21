//! The seam between the pipeline and what lookout tells beyond the journal and the tracks
//! file (MQTT, Home Assistant, snapshots, metrics): an [`Outlet`] the tracker thread hands
//! what happened, never waiting on it. An outlet that has work to do (a network, an encoder)
//! queues it for a thread of its own and returns at once. The other way, [`DetectSwitches`]
//! carry what an operator asks of a running camera (MQTT `<prefix>/<camera>/detect/set`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::events::{Event, EventRecord};
use crate::frame::Frame;
use crate::stats::{Report, Window};
use crate::vocab::Detection;

/// Receives what the tracker thread saw. Every method is called on the tracker thread and
/// must return within microseconds: queue, never wait. The defaults ignore the call.
///
/// Each call names the camera it is about (`[[camera]] name`, or `[mqtt] camera` with one
/// camera): with several cameras, their tracker threads call the same outlets.
pub trait Outlet: Send + Sync {
    /// An event started, changed or ended (the journal's `event_start`/`event_update`/
    /// `event_end`), in the order they happened.
    fn event(&self, _camera: &str, _record: &EventRecord) {}

    /// A detection round was applied: `frame` is the frame the model ran on, `reported` its
    /// detections above the threshold, `in_view` the events under way once the round was
    /// taken into account. Where snapshots are chosen.
    fn detected(
        &self,
        _camera: &str,
        _frame: &Arc<Frame>,
        _reported: &[Detection],
        _in_view: &[Event],
    ) {
    }

    /// A stats window closed (every `pipeline.stats_interval`): its counters and the
    /// journal's `stats` figures.
    fn stats(&self, _camera: &str, _window: &Window, _report: &Report) {}
}

/// Several outlets as one, each called in turn.
#[derive(Default, Clone)]
pub struct Outlets(pub Vec<Arc<dyn Outlet>>);

impl Outlets {
    /// No outlet: nothing to call.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Outlet for Outlets {
    fn event(&self, camera: &str, record: &EventRecord) {
        for o in &self.0 {
            o.event(camera, record);
        }
    }

    fn detected(
        &self,
        camera: &str,
        frame: &Arc<Frame>,
        reported: &[Detection],
        in_view: &[Event],
    ) {
        for o in &self.0 {
            o.detected(camera, frame, reported, in_view);
        }
    }

    fn stats(&self, camera: &str, window: &Window, report: &Report) {
        for o in &self.0 {
            o.stats(camera, window, report);
        }
    }
}

impl std::fmt::Debug for Outlets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Outlets({})", self.0.len())
    }
}

/// What the outlets themselves did, shared with whoever reports it (metrics, the journal's
/// stats). Counters only grow.
#[derive(Debug, Default)]
pub struct Counters {
    /// MQTT messages handed to the broker's connection.
    pub mqtt_sent: std::sync::atomic::AtomicU64,
    /// MQTT messages dropped: the queue was full, or the broker was away.
    pub mqtt_dropped: std::sync::atomic::AtomicU64,
    /// Whether the MQTT client is connected now.
    pub mqtt_connected: std::sync::atomic::AtomicBool,
    /// Snapshots encoded.
    pub snapshots: std::sync::atomic::AtomicU64,
    /// Snapshots that could not be made (encoding, disk) or were dropped (queue full).
    pub snapshots_failed: std::sync::atomic::AtomicU64,
}

/// Whether each camera runs its detector: on at start, switched by an operator (MQTT
/// `<prefix>/<camera>/detect/set`) while lookout runs, kept across reloads, not across
/// restarts. The tracker thread reads its camera's switch on every frame (one atomic load);
/// while it is off the camera's tracks end, no detection is asked for, and frames still flow
/// (stats, watchdog).
#[derive(Debug, Default)]
pub struct DetectSwitches {
    map: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl DetectSwitches {
    /// `camera`'s switch (made on the first call, on).
    pub fn of(&self, camera: &str) -> Arc<AtomicBool> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(camera.to_string())
            .or_insert_with(|| Arc::new(AtomicBool::new(true)))
            .clone()
    }

    /// Whether `camera` detects now.
    pub fn is_on(&self, camera: &str) -> bool {
        self.of(camera).load(Ordering::Relaxed)
    }

    /// Switches `camera`'s detection; true when that changed it.
    pub fn set(&self, camera: &str, on: bool) -> bool {
        self.of(camera).swap(on, Ordering::Relaxed) != on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_camera_detects_until_switched_off_and_each_camera_has_its_own_switch() {
        let s = DetectSwitches::default();
        let yard = s.of("yard");
        assert!(s.is_on("yard") && yard.load(Ordering::Relaxed));
        assert!(s.set("yard", false), "a change");
        assert!(!s.set("yard", false), "no change");
        assert!(
            !yard.load(Ordering::Relaxed),
            "the tracker's handle sees it"
        );
        assert!(s.is_on("door"));
        assert!(s.set("yard", true) && yard.load(Ordering::Relaxed));
    }
}
