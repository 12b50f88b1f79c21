//! What a run is asked to do besides its configuration: [`RunOptions`] and the
//! [`Schedule`] of detection against tracking.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::notify::{DetectSwitches, Outlets};
use crate::service::Notifier;
use crate::source::Pacing;

/// How detection is scheduled against tracking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Real time: capture never waits, the detector runs asynchronously on the newest frame.
    Live,
    /// Every frame processed, every requested detection awaited (deterministic evaluation).
    Lockstep,
}

/// Everything a run needs besides the configuration.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Scheduling mode.
    pub schedule: Schedule,
    /// Override of the replay pacing (benchmarks play files as fast as possible).
    pub pace: Option<Pacing>,
    /// Stop after this many processed frames.
    pub max_frames: Option<u64>,
    /// Stop after this long.
    pub max_duration: Option<Duration>,
    /// Extra JSON Lines file of tracks per frame (overrides `output.tracks_file`).
    pub tracks_out: Option<PathBuf>,
    /// Log stats reports and track events (false for quiet benchmark sweeps).
    pub log_events: bool,
    /// Artificial extra detector latency (tests of the "never wait for the model" rule).
    pub detect_delay: Duration,
    /// Set to stop the run (signals); checked at least every 100 ms.
    pub stop: Arc<AtomicBool>,
    /// Set to end the run so the caller can reload its configuration (SIGHUP).
    pub reload: Arc<AtomicBool>,
    /// systemd notifications (READY after the first frame, watchdog while frames flow).
    pub notifier: Option<Arc<Notifier>>,
    /// What else hears of events, detections and stats (MQTT, snapshots, metrics).
    pub outlets: Outlets,
    /// Each camera's detection on or off (MQTT `<prefix>/<camera>/detect/set`); all on by
    /// default.
    pub switches: Arc<DetectSwitches>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            schedule: Schedule::Live,
            pace: None,
            max_frames: None,
            max_duration: None,
            tracks_out: None,
            log_events: true,
            detect_delay: Duration::ZERO,
            stop: Arc::new(AtomicBool::new(false)),
            reload: Arc::new(AtomicBool::new(false)),
            notifier: None,
            outlets: Outlets::default(),
            switches: Arc::new(DetectSwitches::default()),
        }
    }
}
