//! What a run reports when it ends: the [`Summary`], why it ended ([`EndReason`]) and the
//! threads' CPU time ([`ThreadCpu`]).

use std::time::Duration;

use super::cores::CoreMap;
use crate::detect::ModelInfo;
use crate::stats::{Report, Window};

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The recording ended.
    EndOfSource,
    /// `max_frames` or `max_duration` reached.
    Limit,
    /// Asked to stop (signal).
    Stopped,
    /// Asked to reload the configuration (signal).
    Reload,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The camera's name (`[[camera]] name`, or `[mqtt] camera` with one camera).
    pub camera: String,
    /// Counters and histograms of the whole run.
    pub total: Window,
    /// The figures of the whole run.
    pub report: Report,
    /// The model that ran.
    pub model: ModelInfo,
    /// Source description.
    pub source: String,
    /// Source frame rate, if known.
    pub source_fps: Option<f64>,
    /// Track start events.
    pub tracks_started: u64,
    /// Track end events.
    pub tracks_ended: u64,
    /// Events started (tracks that were true positives by the `[events]` rules).
    pub events_started: u64,
    /// Process CPU time spent during the run.
    pub cpu_time: Duration,
    /// Why it ended.
    pub end: EndReason,
    /// Which core each thread was pinned to (`None`: not pinned).
    pub core_map: CoreMap,
    /// CPU time each pipeline thread used, read by the thread itself as it ended.
    pub thread_cpu: ThreadCpu,
}

/// CPU time of the three pipeline threads over a run (`CLOCK_THREAD_CPUTIME_ID`, read by each
/// thread just before it ends: the threads are gone when the caller could look). The model's
/// matmul pool outlives the run; its threads are named `lookout-mm-N`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    /// `lookout-capture`.
    pub capture: Duration,
    /// `lookout-track`.
    pub track: Duration,
    /// `lookout-detect` (preprocessing, the model's own share on this thread, decode + NMS).
    pub detect: Duration,
}
