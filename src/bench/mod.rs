//! Benchmark mode: runs the *real* pipeline ([`pipeline::build`] + [`pipeline::run_with`], the
//! daemon's own code) on a camera or a recording played as fast as possible, and turns its
//! [`Summary`] into the figures `lookout bench` prints: per-stage latencies and CPU shares,
//! end-to-end rates, CPU per thread and per pinned core, memory, and whether the setting keeps
//! up with the source.
//!
//! Before timing, each model is checked against the golden outputs shipped in `models/golden/`
//! ([`self_check`]): numbers measured on a model that computes something else are worthless,
//! so a mismatch makes the report say so (and `lookout bench` exit with status 2).
//!
//! Sweeps ([`Sweep`]) repeat the run over model threads, detection intervals or model files and
//! recommend the cheapest setting that keeps up ([`recommend`]). `--sweep fidelity` is not a
//! pipeline run: it records the source once (the model on every frame) and replays the
//! detection schedules from it ([`crate::fidelity::replay`]), scoring each against the
//! every-frame detections.
//!
//! This module prints nothing; `cli::bench` renders a [`BenchReport`] as a table or JSON.
//!
//! One file per job: `report.rs` (the types `--json` serializes: the wire format, owned here and
//! checked against `docs/bench-schema.json` by `tests/bench_schema.rs`), `golden.rs` (the
//! self-check, shared with `tests/detect.rs`, and where golden data and models are found),
//! `figures.rs` (one run's figures and the recommendation), `timing.rs` (the model alone),
//! `fidelity.rs` (`--sweep fidelity`: recording with progress, the replay's rows → report);
//! this file holds the settings and the orchestration ([`run`]).
//!
//! [`Summary`]: pipeline::Summary

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{tracks_file_of, Camera, Config, ConfigErrors};
use crate::detect::{Detector, ModelSource, Precision};
use crate::fidelity::replay;
use crate::notify::Outlets;
use crate::pipeline::{self, Parts, PipelineError, Reconcile, RunOptions};
use crate::schedule::ScheduleKind;
use crate::source::{Pacing, Spec};
use crate::sysinfo::{self, CpuTimes, SystemInfo, Thermal};

mod fidelity;
mod figures;
mod golden;
mod input_size;
pub mod report;
mod timing;
pub mod truth_run;

pub use fidelity::fidelity_report;
pub use figures::{camera_figures, cameras_figures, figures, recommend, MIN_MEASURED_WINDOW};
use figures::{mm_cpu, round};
pub use golden::{
    compare_top, decode_as_golden, f32s_from_le_bytes, find_golden_dir, find_models_dir,
    golden_key, max_abs_diff, onnx_files, self_check, GoldenDetection, FP32_TOLERANCE,
    LONE_TOP_MAX_SCORE, MIN_TOP_IOU,
};
pub use report::{
    BenchReport, CameraFigures, CheckStatus, CoreFigures, CoreMapFigures, CpuFigures, DetectCauses,
    EffectiveSettings, FidelityReport, FidelityRow, FrameCounts, ImageCheck, ImageTiming,
    InferenceTiming, KeepUp, Limit, MissCauses, ModelCheck, ModelFigures, Percentiles,
    PlainDetection, Recommendation, RunFigures, SelfCheck, StageFigures, Sweep, SystemFigures,
    ThermalFigures, ThreadFigures, SCHEMA_ID,
};
pub use timing::time_inference;

/// Frame rate assumed for recordings that do not say (the demo clip's rate).
pub const DEFAULT_TARGET_FPS: f64 = 10.0;
/// Length of a single benchmark run when neither frames nor seconds are given.
pub const DEFAULT_SECONDS: f64 = 20.0;
/// Length of each row of a sweep when neither frames nor seconds are given.
pub const DEFAULT_SWEEP_SECONDS: f64 = 8.0;
/// Detection intervals tried by `--sweep detect-every`.
pub const DETECT_EVERY_SWEEP: [u32; 5] = [1, 2, 3, 5, 10];
/// Environment variable naming a golden directory to use instead of the shipped one.
pub const GOLDEN_ENV: &str = "LOOKOUT_GOLDEN_DIR";

impl fmt::Display for Limit {
    /// `40 frames` or `8 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Frames(n) => write!(f, "{n} frames"),
            Limit::Seconds(x) => write!(f, "{x} s"),
        }
    }
}

/// Everything `lookout bench` was asked for, after the command line was parsed and checked
/// (`cli::bench::BenchArgs`: ranges and conflicting flags are refused there).
#[derive(Clone, Debug)]
pub struct BenchSettings {
    /// The configuration file, if any (else built-in defaults).
    pub config_file: Option<PathBuf>,
    /// Source overrides: one (a single camera, as the configuration's), or several (one
    /// camera each, named `cam1`, `cam2`…, sharing one detector as `lookout run` does).
    pub sources: Vec<String>,
    /// Run length (per row of a sweep); `None` = the defaults above.
    pub limit: Option<Limit>,
    /// The sweep, if any.
    pub sweep: Option<Sweep>,
    /// `pipeline.detect_every` override.
    pub detect_every: Option<u32>,
    /// `pipeline.schedule` override.
    pub schedule: Option<ScheduleKind>,
    /// Play a file at its own frame rate (like a camera) instead of as fast as possible.
    pub realtime: bool,
    /// `model.file` override.
    pub model: Option<PathBuf>,
    /// `model.precision` override (the built-in model to run).
    pub precision: Option<Precision>,
    /// Tracks file (as `lookout run --tracks-out`).
    pub tracks_out: Option<PathBuf>,
    /// `model.threads` override.
    pub threads: Option<usize>,
    /// Time only the model on the golden photos (no pipeline), this many runs per photo: the
    /// mode `scripts/peer_compare.py` uses to compare with onnxruntime.
    pub inference_only: Option<usize>,
    /// Ground truths (MOT format) to score against: with `--sweep fidelity` one, the source's;
    /// on a timed run one per camera, in the cameras' order, scoring what each camera's run
    /// wrote to its tracks file ([`truth_run`]).
    pub truth: Vec<PathBuf>,
    /// Set (by SIGINT/SIGTERM) to end the benchmark early: the run under way ends within a
    /// second and the report covers what ran until then.
    pub stop: Arc<AtomicBool>,
    /// MQTT and snapshots, when the configuration turns them on (their cost is measured with
    /// the pipeline's).
    pub outlets: Outlets,
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The configuration is invalid (exit status 78).
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    /// The pipeline failed (source, model, thread).
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// What was asked for cannot be done here (no models directory for a model sweep, no
    /// golden photos to time the model on).
    #[error("{0}")]
    Usage(String),
    /// A command line that cannot work whatever the machine (a sweep of several cameras):
    /// exit status 64.
    #[error("{0}")]
    CommandLine(String),
    /// `--sweep fidelity`: the source could not be recorded (opened, read, converted).
    #[error("--sweep fidelity: {0}")]
    Record(#[from] crate::fidelity::replay::RecordError),
    /// `--truth FILE` cannot be read or is not a MOT-format ground truth.
    #[error("--truth: {0}")]
    Truth(#[from] crate::fidelity::truth::TruthError),
}

impl From<input_size::SweepError> for BenchError {
    fn from(e: input_size::SweepError) -> BenchError {
        match e {
            input_size::SweepError::Pipeline(p) => BenchError::Pipeline(p),
            input_size::SweepError::Config(c) => BenchError::Config(c),
            input_size::SweepError::Record(m) => {
                BenchError::Usage(format!("--sweep input-size: {m}"))
            }
        }
    }
}

impl From<truth_run::ScoringError> for BenchError {
    fn from(e: truth_run::ScoringError) -> BenchError {
        match e {
            truth_run::ScoringError::CommandLine(m) => BenchError::CommandLine(m),
            truth_run::ScoringError::Usage(m) => BenchError::Usage(m),
            truth_run::ScoringError::Truth(t) => BenchError::Truth(t),
        }
    }
}

/// Progress callbacks (the CLI draws a spinner; tests and JSON runs ignore them).
pub trait Progress {
    /// A new phase: loading, self-check, row `i` of `n`.
    fn phase(&mut self, message: &str);
    /// The current phase is done.
    fn finish(&mut self) {}
}

/// A [`Progress`] that shows nothing.
pub struct NoProgress;
impl Progress for NoProgress {
    fn phase(&mut self, _: &str) {}
}

// ───────────────────────────── the whole benchmark ─────────────────────────────

/// One row to run: the configuration and its label.
struct Row {
    label: String,
    cfg: Config,
}

fn rows_for(base: &Config, sweep: Option<Sweep>) -> Result<Vec<Row>, BenchError> {
    let row = |label: String, f: &dyn Fn(&mut Config)| {
        let mut cfg = base.clone();
        f(&mut cfg);
        Row { label, cfg }
    };
    Ok(match sweep {
        None => vec![row("default".into(), &|_| {})],
        // Not pipeline runs: replayed from one recording (`Bench::fidelity`).
        Some(Sweep::Fidelity | Sweep::InputSize) => Vec::new(),
        Some(Sweep::Threads) => (1..=sysinfo::core_count())
            .map(|n| row(format!("threads={n}"), &|c| c.model.threads = n))
            .collect(),
        Some(Sweep::DetectEvery) => DETECT_EVERY_SWEEP
            .iter()
            .map(|&n| {
                row(format!("detect_every={n}"), &|c| {
                    c.pipeline.detect_every = n
                })
            })
            .collect(),
        Some(Sweep::Model) => {
            let dir = find_models_dir().ok_or_else(|| {
                BenchError::Usage(
                    "--sweep model: no models directory with .onnx files found (looked for models/ in the current directory and above the executable, and /usr/share/lookout/models)".into(),
                )
            })?;
            onnx_files(&dir)
                .into_iter()
                .map(|p| {
                    let name = p
                        .file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                    row(format!("model={name}"), &|c| {
                        c.model.file = p.display().to_string();
                        c.model.precision = Precision::Auto;
                        c.model.input_size = crate::config::InputSize::default();
                    })
                })
                .collect()
        }
    })
}

/// Loads the configuration and applies the command line's overrides; files loop so a timed run
/// never ends early. With several `--source`, the configuration's source is the first.
pub fn effective_config(s: &BenchSettings) -> Result<Config, BenchError> {
    let mut cfg = match &s.config_file {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    if let Some(src) = s.sources.first() {
        // The command line's sources replace the configuration's cameras.
        cfg.camera.clear();
        cfg.source.spec = src.clone();
    }
    let source = cfg.source.clone();
    apply_overrides(&mut cfg, s);
    if !cfg.camera.is_empty() {
        // `[[camera]]` tables: each camera's source is set up in `bench_cameras`; the top
        // level has none.
        cfg.source = source;
    }
    check(s, cfg.problems())?;
    Ok(cfg)
}

/// The command line's overrides of one camera's configuration.
fn apply_overrides(cfg: &mut Config, s: &BenchSettings) {
    if let Some(n) = s.detect_every {
        cfg.pipeline.detect_every = n;
    }
    if let Some(k) = s.schedule {
        cfg.pipeline.schedule = k;
    }
    if let Some(m) = &s.model {
        cfg.model.file = m.display().to_string();
        cfg.model.precision = Precision::Auto;
    }
    if let Some(p) = s.precision {
        cfg.model.file.clear();
        cfg.model.precision = p;
    }
    if let Some(t) = s.threads {
        cfg.model.threads = t;
    }
    if !is_camera(&cfg.source.spec) {
        cfg.source.looped = true;
    }
    // A benchmark measures a camera that is there: a missing one is an error at once.
    cfg.source.wait_for_camera = false;
}

/// `problems` as the benchmark's configuration error, if any.
fn check(s: &BenchSettings, problems: Vec<crate::config::Problem>) -> Result<(), BenchError> {
    if problems.is_empty() {
        return Ok(());
    }
    let file = s
        .config_file
        .as_ref()
        .map_or("<command line>".to_string(), |p| p.display().to_string());
    // The overrides come from the command line: no line to point at.
    Err(ConfigErrors::from_problems(&file, None, problems).into())
}

/// The cameras of a benchmark of several at once: one per `--source` when there are several
/// (named `cam1`, `cam2`…), or the configuration's `[[camera]]` tables when no `--source` is
/// given; `None` for a single camera.
pub fn bench_cameras(s: &BenchSettings, base: &Config) -> Result<Option<Vec<Camera>>, BenchError> {
    let mut cams = if s.sources.len() > 1 {
        let mut problems = Vec::new();
        let cams: Vec<Camera> =
            s.sources
                .iter()
                .enumerate()
                .map(|(i, spec)| {
                    let name = format!("cam{}", i + 1);
                    let mut cfg = base.clone();
                    cfg.source.spec = spec.clone();
                    cfg.mqtt.camera = name.clone();
                    if !cfg.output.tracks_file.is_empty() {
                        cfg.output.tracks_file = tracks_file_of(&cfg.output.tracks_file, &name);
                    }
                    apply_overrides(&mut cfg, s);
                    problems.extend(cfg.problems().into_iter().map(|p| {
                        crate::config::Problem::new(format!("{name}.{}", p.key), p.message)
                    }));
                    Camera { name, config: cfg }
                })
                .collect();
        check(s, problems)?;
        cams
    } else if s.sources.is_empty() && base.several_cameras() {
        base.cameras()
    } else {
        return Ok(None);
    };
    for c in &mut cams {
        apply_overrides(&mut c.config, s);
    }
    if s.sweep.is_some() {
        return Err(BenchError::CommandLine(format!(
            "--sweep runs one camera, and {} are asked for: pass a single --source",
            cams.len()
        )));
    }
    Ok(Some(cams))
}

/// True when the spec names a camera (runs at its own rate); a spec that does not parse is
/// reported by validation.
fn is_camera(spec: &str) -> bool {
    Spec::parse(spec).is_ok_and(|s| s.is_camera())
}

/// True when the spec names a live source: a camera or a command (`exec:`), which cannot be
/// replayed.
fn is_live(spec: &str) -> bool {
    Spec::parse(spec).is_ok_and(|s| s.is_live())
}

/// Runs the benchmark: self-checks, runs every row (or times the model alone, or records the
/// source and replays the fidelity sweep), gathers the report.
pub fn run(s: &BenchSettings, progress: &mut dyn Progress) -> Result<BenchReport, BenchError> {
    let started = Instant::now();
    let base = effective_config(s)?;
    let fidelity_sweep = s.sweep == Some(Sweep::Fidelity) && s.inference_only.is_none();
    let size_sweep = s.sweep == Some(Sweep::InputSize) && s.inference_only.is_none();
    if fidelity_sweep || size_sweep {
        check_fidelity_settings(s, &base)?;
    }
    let mut limit = s.limit.unwrap_or(Limit::Seconds(if s.sweep.is_some() {
        DEFAULT_SWEEP_SECONDS
    } else {
        DEFAULT_SECONDS
    }));
    let cameras = match s.inference_only {
        Some(_) => None,
        None => bench_cameras(s, &base)?,
    };
    let rows = rows_for(&base, s.sweep)?;
    let golden = find_golden_dir();
    let thermal_before = Thermal::read();
    let info = SystemInfo::read();
    let mut bench = Bench {
        golden: &golden,
        check: SelfCheck::new(&golden),
        checked: Vec::new(),
        progress,
        pace: if s.realtime {
            Pacing::RealTime
        } else {
            Pacing::AsFastAsPossible
        },
        stop: s.stop.clone(),
        outlets: s.outlets.clone(),
    };
    let mut fidelity = None;
    let mut input_size = None;
    let (runs, inference, target_fps) = match s.inference_only {
        Some(runs) => {
            let timing = bench.time_model(&base, runs)?;
            (Vec::new(), Some(timing), DEFAULT_TARGET_FPS)
        }
        None if fidelity_sweep => {
            let (max_frames, truth) = recording_limits(s)?;
            let mut report = bench.fidelity(&base, max_frames, truth.as_ref())?;
            report.truth_file = s.truth.first().map(|p| p.display().to_string());
            limit = Limit::Frames(report.frames);
            let fps = report.source_fps;
            fidelity = Some(report);
            (Vec::new(), None, fps)
        }
        None if size_sweep => {
            let report = bench.input_sizes(&base, s)?;
            limit = Limit::Frames(report.frames);
            input_size = Some(report);
            (Vec::new(), None, DEFAULT_TARGET_FPS)
        }
        None => {
            let mut scoring = truth_run::Scoring::prepare(
                &s.truth,
                s.sweep.is_some(),
                &base,
                cameras.as_deref(),
            )?;
            let tracks_out = scoring.tracks_out(s.tracks_out.as_ref())?;
            let (mut runs, fps) = match &cameras {
                Some(cams) => bench.run_cameras(cams, limit, tracks_out.as_ref())?,
                None => bench.run_rows(rows, limit, tracks_out.as_ref())?,
            };
            scoring.score(&mut runs, tracks_out.as_ref())?;
            (runs, None, fps)
        }
    };
    let thermal_after = Thermal::read();
    let throttled = thermal_after.throttled_during(&thermal_before);
    let recommendation = s.sweep.and_then(|_| recommend(&runs));
    let check = bench.check;
    Ok(BenchReport {
        schema: SCHEMA_ID.into(),
        lookout_version: env!("CARGO_PKG_VERSION").into(),
        settings: effective_settings(s, &base, cameras.as_deref(), limit, target_fps),
        system: system_figures(info, &thermal_before, &thermal_after, throttled),
        trustworthy: check.trustworthy() && !throttled,
        self_check: check,
        runs,
        recommendation,
        inference,
        fidelity,
        input_size,
        peak_rss_kib: sysinfo::peak_rss_kib(),
        total_s: round(started.elapsed().as_secs_f64(), 2),
    })
}

/// What a sweep that records its source is bounded by: `--frames`, and the `--truth` it is
/// scored against.
fn recording_limits(
    s: &BenchSettings,
) -> Result<(Option<usize>, Option<crate::fidelity::truth::Truth>), BenchError> {
    let max_frames = match s.limit {
        Some(Limit::Frames(n)) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => None,
    };
    let truth = match s.truth.first() {
        Some(p) => Some(crate::fidelity::truth::Truth::load(p)?),
        None => None,
    };
    Ok((max_frames, truth))
}

/// What `--sweep fidelity` and `--sweep input-size` cannot do: replay a camera (they record
/// every frame in order, and a camera drops frames while the model runs), or stop after a
/// time (they record whole sources).
fn check_fidelity_settings(s: &BenchSettings, base: &Config) -> Result<(), BenchError> {
    let sweep = match s.sweep {
        Some(Sweep::InputSize) => "--sweep input-size",
        _ => "--sweep fidelity",
    };
    if is_live(&base.source.spec) {
        return Err(BenchError::Usage(format!(
            "{sweep} replays a recording, and {} is a camera or a command: record it first (lookout capture) and pass the file with --source",
            base.source.spec
        )));
    }
    if s.truth.len() > 1 {
        return Err(BenchError::CommandLine(format!(
            "{sweep} scores one source, and {} --truth files are given",
            s.truth.len()
        )));
    }
    if let Some(Limit::Seconds(_)) = s.limit {
        return Err(BenchError::Usage(format!(
            "{sweep} records the whole source: limit it with --frames N, not --seconds"
        )));
    }
    Ok(())
}

/// The state of a benchmark between its runs: the self-check so far and the models it covered.
struct Bench<'a> {
    golden: &'a Result<PathBuf, String>,
    check: SelfCheck,
    /// The models already self-checked: (name, input width).
    checked: Vec<(String, usize)>,
    progress: &'a mut dyn Progress,
    /// How files play: as fast as possible, or at their frame rate (`--realtime`).
    pace: Pacing,
    /// Ends the run under way, and skips the rows after it.
    stop: Arc<AtomicBool>,
    /// What else hears of the runs (MQTT, snapshots).
    outlets: Outlets,
}

impl Bench<'_> {
    /// `--inference-only`: loads the model, self-checks it and times it alone on the golden
    /// photos, `runs` timed runs per photo.
    fn time_model(&mut self, base: &Config, runs: usize) -> Result<InferenceTiming, BenchError> {
        let g = match self.golden {
            Ok(g) => g,
            Err(why) => {
                return Err(BenchError::Usage(format!(
                    "--inference-only times the golden photos, and there are none: {why}"
                )))
            }
        };
        self.progress.phase("loading the model");
        let det = Detector::load(&base.detector()).map_err(PipelineError::from)?;
        self.progress
            .phase(&format!("self-check against {}", g.display()));
        self.check.add(self_check(&det, g));
        self.progress
            .phase(&format!("timing the model, {runs} runs per photo"));
        Ok(time_inference(&det, g, runs.max(1)))
    }

    /// `--sweep fidelity`: loads the model, self-checks it, records the source (the model on
    /// every frame) and replays every schedule from the recording.
    fn fidelity(
        &mut self,
        base: &Config,
        max_frames: Option<usize>,
        truth: Option<&crate::fidelity::truth::Truth>,
    ) -> Result<FidelityReport, BenchError> {
        self.progress.phase("loading the model");
        let det = Detector::load(&base.detector()).map_err(PipelineError::from)?;
        if let Ok(g) = self.golden {
            self.progress
                .phase(&format!("self-check against {}", g.display()));
            self.check.add(self_check(&det, g));
        }
        let t0 = Instant::now();
        let progress = &mut *self.progress;
        let rec =
            fidelity::record_or_reuse(&det, base, max_frames, &mut |line| progress.phase(line))?;
        let record_time = t0.elapsed();
        self.progress.finish();
        self.progress.phase(&format!(
            "replaying {} schedules over {} frames",
            replay::FIXED_INTERVALS.len() + 1,
            rec.frames.len()
        ));
        let rules = base.event_rules()?;
        let report = fidelity::fidelity_report(base, &rec, record_time, &rules, truth)
            .map_err(|e| BenchError::Usage(format!("[tracker] settings: {e}")))?;
        self.progress.finish();
        Ok(report)
    }

    /// `--sweep input-size`: the model on every frame of the source at each size, scored
    /// against the truth of `--truth` when given.
    fn input_sizes(
        &mut self,
        base: &Config,
        s: &BenchSettings,
    ) -> Result<report::InputSizeReport, BenchError> {
        let (max_frames, truth) = recording_limits(s)?;
        let progress = &mut *self.progress;
        let mut report = input_size::sweep(base, max_frames, truth.as_ref(), &mut |line| {
            progress.phase(line)
        })?;
        self.progress.finish();
        report.truth_file = s.truth.first().map(|p| p.display().to_string());
        Ok(report)
    }

    /// Runs every row through the real pipeline, reusing the loaded model when only
    /// scheduling changes; returns the rows' figures and the rate they aimed at.
    fn run_rows(
        &mut self,
        rows: Vec<Row>,
        limit: Limit,
        tracks_out: Option<&PathBuf>,
    ) -> Result<(Vec<RunFigures>, f64), BenchError> {
        let mut parts: Option<(Config, Parts)> = None;
        let mut target_fps = DEFAULT_TARGET_FPS;
        let mut out = Vec::new();
        let n = rows.len();
        for (i, row) in rows.into_iter().enumerate() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let tag = if n > 1 {
                format!("[{}/{n}] {}: ", i + 1, row.label)
            } else {
                String::new()
            };
            let mut p = self.parts_for(parts.take(), &row.cfg, &tag)?;
            target_fps = p.source.fps().unwrap_or(DEFAULT_TARGET_FPS);
            self.self_check_once(&p, &tag);
            self.progress.phase(&format!("{tag}running {limit}"));
            let mut opts = run_options(limit, tracks_out, self.pace);
            opts.stop = self.stop.clone();
            opts.outlets = self.outlets.clone();
            out.push(run_row(&row, &opts, &mut p, target_fps)?);
            self.progress.finish();
            parts = Some((row.cfg, p));
        }
        Ok((out, target_fps))
    }

    /// Runs several cameras at once through the daemon's own multi-camera pipeline (one
    /// model, one shared detector): one row, whose figures are the cameras' total, with each
    /// camera's in `cameras`. The rate aimed at is the sum of the cameras' rates.
    fn run_cameras(
        &mut self,
        cams: &[Camera],
        limit: Limit,
        tracks_out: Option<&PathBuf>,
    ) -> Result<(Vec<RunFigures>, f64), BenchError> {
        self.progress.phase(&format!(
            "loading the model, opening {} sources",
            cams.len()
        ));
        let mut parts = pipeline::build_cameras(cams, Some(self.pace))?;
        let target_fps: f64 = parts
            .iter()
            .map(|p| p.source.fps().unwrap_or(DEFAULT_TARGET_FPS))
            .sum();
        if let Some(p) = parts.first() {
            self.self_check_once(p, "");
        }
        self.progress
            .phase(&format!("running {limit}, {} cameras", cams.len()));
        let mut opts = run_options(limit, tracks_out, self.pace);
        opts.stop = self.stop.clone();
        opts.outlets = self.outlets.clone();
        let tasks0 = sysinfo::task_cpu_times();
        let sys0 = CpuTimes::read();
        let summaries = pipeline::run_cameras(cams, &opts, &mut parts)?;
        let sys1 = CpuTimes::read();
        let tasks1 = sysinfo::task_cpu_times();
        self.progress.finish();
        let detect_every = cams.first().map_or(1, |c| c.config.pipeline.detect_every);
        let run = cameras_figures(
            "default",
            &summaries,
            detect_every,
            &mm_cpu(&tasks0, &tasks1),
            sys1.busy_since(&sys0),
            target_fps,
        );
        Ok((run.into_iter().collect(), target_fps))
    }

    /// The pipeline's parts for `cfg`: the previous row's, reconciled (a fresh source and
    /// tracker, the same model), when only scheduling changed; else built anew.
    fn parts_for(
        &mut self,
        previous: Option<(Config, Parts)>,
        cfg: &Config,
        tag: &str,
    ) -> Result<Parts, BenchError> {
        match previous {
            Some((old, mut p)) if p.keeps_model(&old, cfg) => {
                self.progress.phase(&format!("{tag}opening the source"));
                let fresh = Reconcile {
                    pace: Some(self.pace),
                    restart: true,
                };
                p.reconcile(&old, cfg, fresh)?.into_result()?;
                Ok(p)
            }
            other => {
                drop(other); // release the previous model and its thread pool first
                self.progress.phase(&format!("{tag}loading the model"));
                Ok(pipeline::build(cfg, Some(self.pace))?)
            }
        }
    }

    /// Self-checks the row's model against the golden data, once per distinct model.
    fn self_check_once(&mut self, p: &Parts, tag: &str) {
        let info = p.detector.info();
        let id = (info.name.clone(), info.input_w as usize);
        if self.checked.contains(&id) {
            return;
        }
        self.checked.push(id);
        if let Ok(g) = self.golden {
            self.progress
                .phase(&format!("{tag}self-check against {}", g.display()));
            self.check.add(self_check(&p.detector, g));
        }
    }
}

/// The options of one timed run: `pace` (as fast as possible unless `--realtime`), no
/// journal events, `limit`.
fn run_options(limit: Limit, tracks_out: Option<&PathBuf>, pace: Pacing) -> RunOptions {
    RunOptions {
        pace: Some(pace),
        log_events: false,
        max_frames: match limit {
            Limit::Frames(f) => Some(f),
            Limit::Seconds(_) => None,
        },
        max_duration: match limit {
            Limit::Seconds(x) => Some(Duration::from_secs_f64(x)),
            Limit::Frames(_) => None,
        },
        tracks_out: tracks_out.cloned(),
        ..RunOptions::default()
    }
}

/// Runs one row through the pipeline and measures it (CPU of the matmul pool and of the
/// whole machine around the run).
fn run_row(
    row: &Row,
    opts: &RunOptions,
    p: &mut Parts,
    target_fps: f64,
) -> Result<RunFigures, BenchError> {
    let tasks0 = sysinfo::task_cpu_times();
    let sys0 = CpuTimes::read();
    let summary = pipeline::run_with(&row.cfg, opts, p)?;
    let sys1 = CpuTimes::read();
    let tasks1 = sysinfo::task_cpu_times();
    Ok(figures(
        &row.label,
        &summary,
        row.cfg.pipeline.detect_every,
        &mm_cpu(&tasks0, &tasks1),
        sys1.busy_since(&sys0),
        target_fps,
    ))
}

/// The settings the report says were used.
fn effective_settings(
    s: &BenchSettings,
    base: &Config,
    cameras: Option<&[Camera]>,
    limit: Limit,
    target_fps: f64,
) -> EffectiveSettings {
    EffectiveSettings {
        mode: if s.inference_only.is_some() {
            "inference-only"
        } else if s.sweep == Some(Sweep::Fidelity) {
            "fidelity"
        } else if s.sweep == Some(Sweep::InputSize) {
            "input-size"
        } else {
            "pipeline"
        }
        .into(),
        config_file: s.config_file.as_ref().map(|p| p.display().to_string()),
        source: match cameras {
            Some(cams) => cams
                .iter()
                .map(|c| c.config.source.spec.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            None => base.source.spec.clone(),
        },
        pacing: if matches!(s.sweep, Some(Sweep::Fidelity | Sweep::InputSize))
            && s.inference_only.is_none()
        {
            "every frame once, as fast as possible".into()
        } else if is_camera(&base.source.spec) {
            "camera rate".into()
        } else if is_live(&base.source.spec) && s.realtime {
            "the command's rate, newest frame kept".into()
        } else if is_live(&base.source.spec) {
            "every frame the command writes, in order".into()
        } else if s.realtime {
            "looped, at the file's frame rate".into()
        } else {
            "looped, as fast as possible".into()
        },
        limit,
        sweep: s.sweep,
        detect_every: base.pipeline.detect_every,
        model: if base.model.file.is_empty() {
            ModelSource::embedded(base.model.precision).display_name()
        } else {
            base.model.file.clone()
        },
        threads: base.model.threads,
        tracks_out: s.tracks_out.as_ref().map(|p| p.display().to_string()),
        target_fps,
    }
}

/// The machine's facts and its temperature around the benchmark, as the report carries them.
fn system_figures(
    info: SystemInfo,
    before: &Thermal,
    after: &Thermal,
    throttled: bool,
) -> SystemFigures {
    SystemFigures {
        board: info.board,
        cpu_model: info.cpu_model,
        cpu_part: info.cpu_part,
        cores: info.cores,
        arch: info.arch,
        kernel: info.kernel,
        os: info.os,
        glibc: info.glibc,
        cpu_features: info.cpu_features,
        dotprod: info.dotprod,
        matmul_kernel: info.matmul_kernel,
        thermal_before: ThermalFigures::from(before),
        thermal_after: ThermalFigures::from(after),
        throttled_during_bench: throttled,
    }
}

impl From<&Thermal> for ThermalFigures {
    fn from(t: &Thermal) -> Self {
        ThermalFigures {
            temp_c: t.temp_c,
            cpu_mhz: t.cpu_mhz,
            throttled: t.throttled.clone(),
            throttled_flags: t.throttled_flags.clone(),
        }
    }
}
