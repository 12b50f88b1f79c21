//! What a run is made of (model, source, tracker, core map), how it is built, and the one
//! place a running pipeline meets a new configuration ([`Parts::reconcile`]: the daemon's
//! reload, bench's rows).

use std::sync::Arc;

use super::cores::{pin, CoreMap};
use super::error::PipelineError;
use crate::config::{Camera, Config};
use crate::detect::Detector;
use crate::events::Events;
use crate::output::TracksWriter;
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
        wait_for_device: s.wait_for_camera,
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
    /// Which tracks are events, and the events under way (kept with the tracker: a reload
    /// that keeps the tracks keeps their events).
    pub events: Events,
    /// Thread → core map.
    pub core_map: CoreMap,
    /// The tracks file of the last run, kept open so the next run (after a reload) appends
    /// to it; `None` until a run opened one.
    pub tracks: Option<TracksWriter>,
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
    build_sharing(cfg, pace, &detector, core_map)
}

/// Builds the parts of every camera: one model (loaded once, shared), a source, tracker and
/// events per camera.
pub fn build_cameras(cams: &[Camera], pace: Option<Pacing>) -> Result<Vec<Parts>, PipelineError> {
    build_each_camera(cams, pace).map_err(|(_, e)| e)
}

/// As [`build_cameras`]; an error comes with the index in `cams` of the camera that could not
/// be built (0 for the model, loaded with the first camera).
pub fn build_each_camera(
    cams: &[Camera],
    pace: Option<Pacing>,
) -> Result<Vec<Parts>, (usize, PipelineError)> {
    let mut all: Vec<Parts> = Vec::with_capacity(cams.len());
    for (i, cam) in cams.iter().enumerate() {
        let parts = match all.first() {
            None => build(&cam.config, pace),
            Some(first) => {
                build_sharing(&cam.config, pace, &first.detector, first.core_map.clone())
            }
        };
        all.push(parts.map_err(|e| (i, e))?);
    }
    Ok(all)
}

/// A camera's parts around a model already loaded.
fn build_sharing(
    cfg: &Config,
    pace: Option<Pacing>,
    detector: &Arc<Detector>,
    core_map: CoreMap,
) -> Result<Parts, PipelineError> {
    let source = source::open(&cfg.source.spec, &source_options(cfg, pace))?;
    let tracker =
        Tracker::new(cfg.tracker.clone()).map_err(|e| PipelineError::Tracker(e.to_string()))?;
    let events = Events::new(
        cfg.event_rules()
            .map_err(|e| PipelineError::Events(e.to_string()))?,
    );
    Ok(Parts {
        detector: Arc::clone(detector),
        source,
        tracker,
        events,
        core_map,
        tracks: None,
    })
}

/// Brings every camera's parts in line with `new`, as [`Parts::reconcile`] does for one: the
/// model is loaded once (when `[model]` or the core map changed) and shared; a camera whose
/// name is new is built, one whose name is gone is dropped. What changed is what changed for
/// any camera.
///
/// # Errors
/// A model that cannot be loaded, or a new camera that cannot be built: nothing is replaced.
pub fn reconcile_cameras(
    parts: &mut Vec<Parts>,
    old: &[Camera],
    new: &[Camera],
    how: Reconcile,
) -> Result<Reconciled, PipelineError> {
    let (Some(old0), Some(new0), Some(first)) = (old.first(), new.first(), parts.first()) else {
        return Err(PipelineError::Cameras("no camera to reconcile".into()));
    };
    let mut done = Reconciled::default();
    let (detector, core_map) = if first.keeps_model(&old0.config, &new0.config) {
        (Arc::clone(&first.detector), first.core_map.clone())
    } else {
        let core_map = CoreMap::plan(&new0.config, &sysinfo::allowed_cores());
        let d = Arc::new(load_detector(&new0.config, &core_map)?);
        done.changed.push(Part::Model);
        (d, core_map)
    };
    // New cameras first: one that cannot be built leaves everything as it was.
    let mut built = Vec::with_capacity(new.len());
    for cam in new {
        built.push(match old.iter().any(|o| o.name == cam.name) {
            true => None,
            false => Some(build_sharing(
                &cam.config,
                how.pace,
                &detector,
                core_map.clone(),
            )?),
        });
    }
    let mut kept: Vec<Option<Parts>> = std::mem::take(parts).into_iter().map(Some).collect();
    let mut next = Vec::with_capacity(new.len());
    for (cam, fresh) in new.iter().zip(built) {
        let was = old.iter().position(|o| o.name == cam.name);
        let Some((i, mut p)) = was.and_then(|i| kept[i].take().map(|p| (i, p))) else {
            next.extend(fresh);
            push_once(&mut done.changed, Part::Source);
            push_once(&mut done.changed, Part::Tracker);
            continue;
        };
        p.detector = Arc::clone(&detector);
        p.core_map = core_map.clone();
        // The model is settled: compare the rest against the old camera with the new model.
        let mut before = old[i].config.clone();
        before.model = cam.config.model.clone();
        before.pipeline.pin_threads = cam.config.pipeline.pin_threads;
        let r = p.reconcile(&before, &cam.config, how)?;
        for c in r.changed {
            push_once(&mut done.changed, c);
        }
        done.kept.extend(r.kept);
        next.push(p);
    }
    if new.len() != old.len() {
        push_once(&mut done.changed, Part::Source);
    }
    *parts = next;
    Ok(done)
}

fn push_once(changed: &mut Vec<Part>, part: Part) {
    if !changed.contains(&part) {
        changed.push(part);
    }
}

/// A part of a run that a new configuration may replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The model (with its matmul pool and the core map).
    Model,
    /// The frame source.
    Source,
    /// The tracker (its tracks start over).
    Tracker,
    /// The event rules (`[events]`, `[zones]`): the events under way end.
    Events,
    /// Settings read at the start of each run (`[pipeline]`, `[output]`): nothing to rebuild.
    Settings,
}

impl Part {
    /// The name in the daemon's "reloaded" log line.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Model => "model",
            Part::Source => "source",
            Part::Tracker => "tracker",
            Part::Events => "events",
            Part::Settings => "pipeline/output",
        }
    }
}

/// How [`Parts::reconcile`] treats the source and the tracker.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reconcile {
    /// Replay pacing of a reopened source (`None`: as the configuration says).
    pub pace: Option<Pacing>,
    /// Reopen the source and start a fresh tracker even when their settings did not change
    /// (each bench row starts from the first frame with no tracks); a reload keeps them.
    pub restart: bool,
}

/// What [`Parts::reconcile`] did.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// What changed, in order: the parts replaced, and [`Part::Settings`] when only settings
    /// read at each run changed.
    pub changed: Vec<Part>,
    /// Parts that could not be built for the new configuration: the running ones stay.
    pub kept: Vec<(Part, PipelineError)>,
}

impl Reconciled {
    /// What changed, or the first part that could not be built (for callers that cannot run
    /// on with the old one).
    pub fn into_result(self) -> Result<Vec<Part>, PipelineError> {
        match self.kept.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(self.changed),
        }
    }
}

impl Parts {
    /// Whether the loaded model, with its pinned matmul pool, serves `new` as it serves `old`
    /// (same `[model]` settings, same core map).
    pub fn keeps_model(&self, old: &Config, new: &Config) -> bool {
        new.model == old.model
            && new.detector().input_size == old.detector().input_size
            && CoreMap::plan(new, &sysinfo::allowed_cores()) == self.core_map
    }

    /// Brings parts built for `old` in line with `new`, replacing only what changed: the model
    /// when `[model]` or the core map changed, the source when `[source]` did, the tracker when
    /// `[tracker]` did (with `how.restart`, the source and the tracker always).
    ///
    /// # Errors
    /// A model that cannot be loaded: nothing is replaced. A source or a tracker that cannot
    /// be built is not an error here: the running one stays, listed in [`Reconciled::kept`].
    pub fn reconcile(
        &mut self,
        old: &Config,
        new: &Config,
        how: Reconcile,
    ) -> Result<Reconciled, PipelineError> {
        let mut done = Reconciled::default();
        if !self.keeps_model(old, new) {
            let core_map = CoreMap::plan(new, &sysinfo::allowed_cores());
            self.detector = Arc::new(load_detector(new, &core_map)?);
            self.core_map = core_map;
            done.changed.push(Part::Model);
        }
        if how.restart || new.source != old.source {
            match source::open(&new.source.spec, &source_options(new, how.pace)) {
                Ok(s) => {
                    self.source = s;
                    done.changed.push(Part::Source);
                }
                Err(e) => done.kept.push((Part::Source, e.into())),
            }
        }
        let mut tracks_restarted = false;
        if how.restart || new.tracker != old.tracker {
            match Tracker::new(new.tracker.clone()) {
                Ok(t) => {
                    self.tracker = t;
                    tracks_restarted = true;
                    done.changed.push(Part::Tracker);
                }
                Err(e) => done
                    .kept
                    .push((Part::Tracker, PipelineError::Tracker(e.to_string()))),
            }
        }
        if new.events != old.events || new.zones != old.zones {
            match new.event_rules() {
                Ok(rules) => {
                    self.events.reconfigure(rules);
                    done.changed.push(Part::Events);
                }
                Err(e) => done
                    .kept
                    .push((Part::Events, PipelineError::Events(e.to_string()))),
            }
        } else if tracks_restarted {
            // The tracks the events followed are gone.
            self.events.finish();
        }
        if new.pipeline != old.pipeline || new.output != old.output {
            done.changed.push(Part::Settings);
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded model at a small input (quick to load) on the bundled clip, unpinned.
    fn small() -> Config {
        let mut c = Config::default();
        c.pipeline.pin_threads = false;
        c.model.threads = 1;
        c.model.input_size = crate::config::InputSize::List(vec![64, 64]);
        c
    }

    fn names(changed: &[Part]) -> Vec<&'static str> {
        changed.iter().map(|p| p.as_str()).collect()
    }

    #[test]
    fn reconcile_replaces_only_what_changed() {
        let old = small();
        let mut parts = build(&old, None).unwrap();
        let model = Arc::clone(&parts.detector);
        let mut new = old.clone();
        new.tracker.iou_threshold = 0.5;
        new.pipeline.detect_every = 2;
        let done = parts.reconcile(&old, &new, Reconcile::default()).unwrap();
        assert_eq!(names(&done.changed), ["tracker", "pipeline/output"]);
        assert!(done.kept.is_empty());
        assert!(
            Arc::ptr_eq(&model, &parts.detector),
            "the model was reloaded"
        );
        assert_eq!(parts.tracker.config().iou_threshold, 0.5);

        let done = parts.reconcile(&new, &new, Reconcile::default()).unwrap();
        assert!(done.changed.is_empty(), "{:?}", done.changed);

        new.model.input_size = crate::config::InputSize::List(vec![96, 96]);
        let done = parts.reconcile(&old, &new, Reconcile::default()).unwrap();
        assert_eq!(done.changed.first(), Some(&Part::Model));
        assert_eq!(parts.detector.info().input_w, 96);
    }

    #[test]
    fn under_auto_a_new_frame_shape_loads_the_model_at_its_size() {
        let mut old = small();
        old.model.input_size = crate::config::InputSize::Auto;
        let mut parts = build(&old, None).unwrap();
        let size = |p: &Parts| (p.detector.info().input_w, p.detector.info().input_h);
        assert_eq!(size(&parts), (416, 320), "4:3 frames of [source]");
        assert!(parts.keeps_model(&old, &old));
        let mut new = old.clone();
        new.source.width = 1280;
        new.source.height = 720;
        assert!(
            !parts.keeps_model(&old, &new),
            "[model] is the same, the size it comes to is not"
        );
        let done = parts.reconcile(&old, &new, Reconcile::default()).unwrap();
        assert!(done.changed.contains(&Part::Model), "{:?}", done.changed);
        assert_eq!(size(&parts), (416, 256));
    }

    #[test]
    fn restart_reopens_the_source_and_the_tracker_but_keeps_the_model() {
        let cfg = small();
        let mut parts = build(&cfg, None).unwrap();
        let model = Arc::clone(&parts.detector);
        assert!(parts.keeps_model(&cfg, &cfg));
        let how = Reconcile {
            pace: Some(Pacing::AsFastAsPossible),
            restart: true,
        };
        let done = parts.reconcile(&cfg, &cfg, how).unwrap();
        assert_eq!(names(&done.changed), ["source", "tracker"]);
        assert!(Arc::ptr_eq(&model, &parts.detector));
        assert!(parts.source.unpaced(), "reopened with the pacing asked for");
    }

    #[test]
    fn a_source_or_tracker_that_cannot_be_built_leaves_the_running_one() {
        let old = small();
        let mut parts = build(&old, None).unwrap();
        let mut new = old.clone();
        new.source.spec = "/nonexistent/clip.mjpeg".into();
        new.tracker.confirm_hits = 0;
        let done = parts.reconcile(&old, &new, Reconcile::default()).unwrap();
        assert!(done.changed.is_empty(), "{:?}", done.changed);
        let kept: Vec<(Part, String)> =
            done.kept.iter().map(|(p, e)| (*p, e.to_string())).collect();
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(kept[0].0, Part::Source);
        assert!(
            kept[0].1.contains("/nonexistent/clip.mjpeg"),
            "{}",
            kept[0].1
        );
        assert_eq!(kept[1].0, Part::Tracker);
        assert!(kept[1].1.contains("confirm_hits"), "{}", kept[1].1);
        assert_eq!(parts.tracker.config(), &old.tracker);
        assert!(
            parts.source.describe().contains("demo"),
            "{}",
            parts.source.describe()
        );
        // A caller that cannot run on with the old parts gets the first problem.
        let e = parts
            .reconcile(&old, &new, Reconcile::default())
            .unwrap()
            .into_result()
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/clip.mjpeg"), "{e}");
    }

    /// `names` as cameras of [`small`], each on the bundled clip.
    fn cams(names: &[&str]) -> Vec<Camera> {
        names
            .iter()
            .map(|n| {
                let mut config = small();
                config.mqtt.camera = n.to_string();
                Camera {
                    name: n.to_string(),
                    config,
                }
            })
            .collect()
    }

    /// Where a camera's source lives: the same open source after a reconcile, or a new one.
    fn source_at(p: &Parts) -> *const u8 {
        (&*p.source as *const (dyn FrameSource + Send)).cast()
    }

    #[test]
    fn reconcile_cameras_opens_the_new_closes_the_gone_and_keeps_the_rest_and_the_model() {
        let old = cams(&["front", "back"]);
        let mut parts = build_cameras(&old, None).unwrap();
        assert!(
            Arc::ptr_eq(&parts[0].detector, &parts[1].detector),
            "one model"
        );
        let model = Arc::clone(&parts[0].detector);
        let back = source_at(&parts[1]);
        // `front` goes, `side` comes, `back` stays and moves first.
        let new = cams(&["back", "side"]);
        let done = reconcile_cameras(&mut parts, &old, &new, Reconcile::default()).unwrap();
        assert_eq!(names(&done.changed), ["source", "tracker"]);
        assert!(done.kept.is_empty());
        assert_eq!(parts.len(), 2);
        assert_eq!(source_at(&parts[0]), back, "back keeps its open source");
        assert!(parts.iter().all(|p| Arc::ptr_eq(&p.detector, &model)));

        // Nothing changed: nothing replaced.
        let done = reconcile_cameras(&mut parts, &new, &new, Reconcile::default()).unwrap();
        assert!(done.changed.is_empty(), "{:?}", done.changed);

        // A new [model]: loaded once, shared by every camera.
        let mut bigger = new.clone();
        for c in &mut bigger {
            c.config.model.input_size = crate::config::InputSize::List(vec![96, 96]);
        }
        let done = reconcile_cameras(&mut parts, &new, &bigger, Reconcile::default()).unwrap();
        assert_eq!(names(&done.changed), ["model"]);
        assert!(!Arc::ptr_eq(&parts[0].detector, &model));
        assert!(Arc::ptr_eq(&parts[0].detector, &parts[1].detector));
        assert_eq!(parts[1].detector.info().input_w, 96);
    }

    #[test]
    fn a_new_camera_that_cannot_be_opened_leaves_every_camera_as_it_was() {
        let old = cams(&["front"]);
        let mut parts = build_cameras(&old, None).unwrap();
        let front = source_at(&parts[0]);
        let mut new = cams(&["front", "side"]);
        new[1].config.source.spec = "/nonexistent/side.mjpeg".into();
        let e = reconcile_cameras(&mut parts, &old, &new, Reconcile::default()).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/side.mjpeg"), "{e}");
        assert_eq!(parts.len(), 1);
        assert_eq!(source_at(&parts[0]), front);
    }

    #[test]
    fn a_model_that_cannot_be_loaded_changes_nothing() {
        let old = small();
        let mut parts = build(&old, None).unwrap();
        let model = Arc::clone(&parts.detector);
        let mut new = old.clone();
        new.model.file = "/nonexistent/model.onnx".into();
        new.tracker.iou_threshold = 0.5;
        let e = parts
            .reconcile(&old, &new, Reconcile::default())
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/model.onnx"), "{e}");
        assert!(Arc::ptr_eq(&model, &parts.detector));
        assert_eq!(parts.tracker.config(), &old.tracker, "nothing replaced");
    }
}
