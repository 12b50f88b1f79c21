//! What a run is made of (model, source, tracker, core map) and how it is built.

use std::sync::Arc;

use super::cores::{pin, CoreMap};
use super::PipelineError;
use crate::config::Config;
use crate::detect::Detector;
use crate::source::{self, FrameSource, Pacing, SourceOptions};
use crate::sysinfo;
use crate::track::Tracker;

/// The source options a configuration asks for.
pub fn source_options(cfg: &Config, pace: Option<Pacing>) -> SourceOptions {
    let s = &cfg.source;
    let nz = |v: u32| (v > 0).then_some(v);
    SourceOptions {
        width: nz(s.width),
        height: nz(s.height),
        // Validation rejects a format that does not parse, so `None` here means "" (best).
        format: cfg.pixel_format(),
        fps: nz(s.fps),
        pace: pace.unwrap_or(if s.realtime {
            Pacing::RealTime
        } else {
            Pacing::AsFastAsPossible
        }),
        looped: s.looped,
        replay_fps: nz(s.fps).map(f64::from),
        ..SourceOptions::default()
    }
}

/// What a run is made of; kept across runs so a reload restarts only what changed.
pub struct Parts {
    /// The loaded model (shared with the detector thread of a run).
    pub detector: Arc<Detector>,
    /// The open source.
    pub source: Box<dyn FrameSource + Send>,
    /// The tracker and its tracks.
    pub tracker: Tracker,
    /// Thread → core map.
    pub core_map: CoreMap,
}

/// Loads the model with a matmul pool pinned as the core map says.
pub fn load_detector(cfg: &Config, core_map: &CoreMap) -> Result<Detector, PipelineError> {
    let pool = if cfg.model.threads > 1 {
        let matmul = core_map.matmul.clone();
        let p = rayon::ThreadPoolBuilder::new()
            .num_threads(cfg.model.threads)
            .thread_name(|i| format!("lookout-mm-{i}"))
            .start_handler(move |i| pin(matmul.get(i).copied(), "model matmul"))
            .build()
            .map_err(|e| PipelineError::Thread(format!("model pool: {e}")))?;
        Some(Arc::new(p))
    } else {
        None
    };
    Ok(Detector::load_with_pool(&cfg.detector(), pool)?)
}

/// Builds every part for `cfg`: model, source, tracker, core map.
pub fn build(cfg: &Config, pace: Option<Pacing>) -> Result<Parts, PipelineError> {
    let core_map = CoreMap::plan(cfg, &sysinfo::allowed_cores());
    let detector = Arc::new(load_detector(cfg, &core_map)?);
    let source = source::open(&cfg.source.spec, &source_options(cfg, pace))?;
    let tracker =
        Tracker::new(cfg.tracker.clone()).map_err(|e| PipelineError::Tracker(e.to_string()))?;
    Ok(Parts {
        detector,
        source,
        tracker,
        core_map,
    })
}
