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
//! recommend the cheapest setting that keeps up ([`recommend`]).
//!
//! This module prints nothing; `cli::bench` renders a [`BenchReport`] as a table or JSON.
//!
//! One file per job: `golden.rs` (the self-check and where golden data and models are found),
//! `figures.rs` (one run's figures and the recommendation), `timing.rs` (the model alone);
//! this file holds the settings, the report and the orchestration ([`run`]).
//!
//! [`Summary`]: pipeline::Summary

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{Config, ConfigErrors};
use crate::detect::{Detector, ModelSource};
use crate::pipeline::{self, Parts, PipelineError, Reconcile, RunOptions};
use crate::source::{Pacing, Spec};
use crate::sysinfo::{self, CpuTimes, SystemInfo, Thermal};

mod figures;
mod golden;
mod timing;

pub use figures::{
    figures, recommend, CoreFigures, CpuFigures, FrameCounts, KeepUp, ModelFigures, Percentiles,
    Recommendation, RunFigures, StageFigures, ThreadFigures, MIN_MEASURED_WINDOW,
};
use figures::{mm_cpu, round};
pub use golden::{
    find_golden_dir, find_models_dir, golden_key, onnx_files, self_check, CheckStatus, ImageCheck,
    ModelCheck, SelfCheck,
};
pub use timing::{time_inference, ImageTiming, InferenceTiming, PlainDetection};

/// Frame rate assumed for recordings that do not say (the demo clip's rate).
pub const DEFAULT_TARGET_FPS: f64 = 10.0;
/// Length of a single benchmark run when neither frames nor seconds are given.
pub const DEFAULT_SECONDS: f64 = 20.0;
/// Length of each row of a sweep when neither frames nor seconds are given.
pub const DEFAULT_SWEEP_SECONDS: f64 = 8.0;
/// Detection intervals tried by `--sweep detect-every`.
pub const DETECT_EVERY_SWEEP: [u32; 5] = [1, 2, 3, 5, 10];
/// FP32 raw outputs must match onnxruntime's golden outputs within this (tests use 1e-4).
pub const FP32_TOLERANCE: f32 = 1e-3;
/// The top detection must overlap the golden one at least this much.
pub const MIN_TOP_IOU: f32 = 0.9;
/// Environment variable naming a golden directory to use instead of the shipped one.
pub const GOLDEN_ENV: &str = "LOOKOUT_GOLDEN_DIR";
/// The file the embedded model is known as in `golden/detections.json`.
pub const EMBEDDED_MODEL_FILE: &str = "nanodet-g-416-int8.onnx";

/// How long each run lasts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// This many processed frames.
    Frames(u64),
    /// This many seconds.
    Seconds(f64),
}

/// What a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Sweep {
    /// `model.threads` from 1 to the number of cores.
    Threads,
    /// `pipeline.detect_every` over 1, 2, 3, 5, 10.
    DetectEvery,
    /// Every `.onnx` file in the models directory.
    Model,
}

/// Everything `lookout bench` was asked for, after the command line was parsed and checked
/// (`cli::bench::BenchArgs`: ranges and conflicting flags are refused there).
#[derive(Clone, Debug, Serialize)]
pub struct BenchSettings {
    /// The configuration file, if any (else built-in defaults).
    pub config_file: Option<PathBuf>,
    /// Source override.
    pub source: Option<String>,
    /// Run length (per row of a sweep); `None` = the defaults above.
    pub limit: Option<Limit>,
    /// The sweep, if any.
    pub sweep: Option<Sweep>,
    /// `pipeline.detect_every` override.
    pub detect_every: Option<u32>,
    /// `model.file` override.
    pub model: Option<PathBuf>,
    /// Tracks file (as `lookout run --tracks-out`).
    pub tracks_out: Option<PathBuf>,
    /// `model.threads` override.
    pub threads: Option<usize>,
    /// Time only the model on the golden photos (no pipeline), this many runs per photo: the
    /// mode `scripts/peer_compare.py` uses to compare with onnxruntime.
    pub inference_only: Option<usize>,
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

/// System facts plus temperature and throttling around the benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct SystemFigures {
    /// Static facts.
    #[serde(flatten)]
    pub info: SystemInfo,
    /// Before the first run.
    pub thermal_before: Thermal,
    /// After the last run.
    pub thermal_after: Thermal,
    /// Throttling, under-voltage or a frequency cap happened during the benchmark.
    pub throttled_during_bench: bool,
}

/// The settings a benchmark actually used.
#[derive(Clone, Debug, Serialize)]
pub struct EffectiveSettings {
    /// `pipeline` (the daemon's threads on a source) or `inference-only` (the model alone).
    pub mode: String,
    /// Configuration file, or `null` for built-in defaults.
    pub config_file: Option<String>,
    /// Source spec.
    pub source: String,
    /// Files loop and are played as fast as possible; cameras run at their rate.
    pub pacing: String,
    /// Run length per row.
    pub limit: Limit,
    /// Sweep, if any.
    pub sweep: Option<Sweep>,
    /// `pipeline.detect_every` (before a detect-every sweep).
    pub detect_every: u32,
    /// `model.file` or `embedded`.
    pub model: String,
    /// `model.threads` (before a threads sweep).
    pub threads: usize,
    /// Tracks file.
    pub tracks_out: Option<String>,
    /// The rate the recommendation aims at.
    pub target_fps: f64,
}

/// Everything `lookout bench` measured: what `--json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Format identifier of this document.
    pub schema: String,
    /// lookout's version.
    pub lookout_version: String,
    /// The settings used.
    pub settings: EffectiveSettings,
    /// The machine.
    pub system: SystemFigures,
    /// The golden self-check.
    pub self_check: SelfCheck,
    /// False when the self-check failed or the machine throttled.
    pub trustworthy: bool,
    /// One row per run.
    pub runs: Vec<RunFigures>,
    /// The recommendation of a sweep.
    pub recommendation: Option<Recommendation>,
    /// `--inference-only`: the model timed alone on the golden photos.
    pub inference: Option<InferenceTiming>,
    /// Peak resident memory of the process (`VmHWM`), KiB.
    pub peak_rss_kib: Option<u64>,
    /// Total benchmark time including loading and self-checks, s.
    pub total_s: f64,
}

/// The identifier in [`BenchReport::schema`]; bump when keys change meaning.
pub const SCHEMA_ID: &str = "lookout-bench/1";

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
                        c.model.input_size.clear();
                    })
                })
                .collect()
        }
    })
}

/// Loads the configuration and applies the command line's overrides; files loop so a timed run
/// never ends early.
pub fn effective_config(s: &BenchSettings) -> Result<Config, BenchError> {
    let mut cfg = match &s.config_file {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    if let Some(src) = &s.source {
        cfg.source.spec = src.clone();
    }
    if let Some(n) = s.detect_every {
        cfg.pipeline.detect_every = n;
    }
    if let Some(m) = &s.model {
        cfg.model.file = m.display().to_string();
    }
    if let Some(t) = s.threads {
        cfg.model.threads = t;
    }
    if !is_camera(&cfg.source.spec) {
        cfg.source.looped = true;
    }
    let problems = cfg.problems();
    if !problems.is_empty() {
        let file = s
            .config_file
            .as_ref()
            .map_or("<command line>".to_string(), |p| p.display().to_string());
        // The overrides come from the command line: no line to point at.
        return Err(ConfigErrors::from_problems(&file, None, problems).into());
    }
    Ok(cfg)
}

/// True when the spec names a camera (runs at its own rate); a spec that does not parse is
/// reported by validation.
fn is_camera(spec: &str) -> bool {
    Spec::parse(spec).is_ok_and(|s| s.is_camera())
}

/// Runs the benchmark: self-checks, runs every row, gathers the report.
pub fn run(s: &BenchSettings, progress: &mut dyn Progress) -> Result<BenchReport, BenchError> {
    let started = Instant::now();
    let base = effective_config(s)?;
    let limit = s.limit.unwrap_or(Limit::Seconds(if s.sweep.is_some() {
        DEFAULT_SWEEP_SECONDS
    } else {
        DEFAULT_SECONDS
    }));
    let rows = rows_for(&base, s.sweep)?;
    let golden = find_golden_dir();
    let mut check = SelfCheck::new(&golden);
    let thermal_before = Thermal::read();
    let info = SystemInfo::read();
    let mut figures_rows = Vec::new();
    let mut inference = None;
    let rows = match s.inference_only {
        None => rows,
        Some(runs) => {
            let Ok(g) = &golden else {
                return Err(BenchError::Usage(format!(
                    "--inference-only times the golden photos, and there are none: {}",
                    golden.as_ref().err().map_or("", |e| e.as_str())
                )));
            };
            progress.phase("loading the model");
            let det = Detector::load(&base.detector()).map_err(PipelineError::from)?;
            progress.phase(&format!("self-check against {}", g.display()));
            check.add(self_check(&det, g));
            progress.phase(&format!("timing the model, {runs} runs per photo"));
            inference = Some(time_inference(&det, g, runs.max(1)));
            Vec::new()
        }
    };
    let mut parts: Option<(Config, Parts)> = None;
    let mut checked: Vec<(String, usize)> = Vec::new();
    let mut target_fps = DEFAULT_TARGET_FPS;
    let n = rows.len();
    for (i, row) in rows.into_iter().enumerate() {
        let cfg = row.cfg;
        let tag = if n > 1 {
            format!("[{}/{n}] {}: ", i + 1, row.label)
        } else {
            String::new()
        };
        // Reuse the loaded model when only scheduling changed; always reopen the source and
        // start a fresh tracker.
        let mut p = match parts.take() {
            Some((old, mut p)) if p.keeps_model(&old, &cfg) => {
                progress.phase(&format!("{tag}opening the source"));
                let fresh = Reconcile {
                    pace: Some(Pacing::AsFastAsPossible),
                    restart: true,
                };
                p.reconcile(&old, &cfg, fresh)?.into_result()?;
                p
            }
            other => {
                drop(other); // release the previous model and its thread pool first
                progress.phase(&format!("{tag}loading the model"));
                pipeline::build(&cfg, Some(Pacing::AsFastAsPossible))?
            }
        };
        target_fps = p.source.fps().unwrap_or(DEFAULT_TARGET_FPS);
        let info_m = p.detector.info().clone();
        let id = (info_m.name.clone(), info_m.input_w as usize);
        if !checked.contains(&id) {
            checked.push(id);
            if let Ok(g) = &golden {
                progress.phase(&format!("{tag}self-check against {}", g.display()));
                check.add(self_check(&p.detector, g));
            }
        }
        progress.phase(&format!(
            "{tag}running {}",
            match limit {
                Limit::Frames(f) => format!("{f} frames"),
                Limit::Seconds(x) => format!("{x} s"),
            }
        ));
        let opts = RunOptions {
            pace: Some(Pacing::AsFastAsPossible),
            log_events: false,
            max_frames: match limit {
                Limit::Frames(f) => Some(f),
                Limit::Seconds(_) => None,
            },
            max_duration: match limit {
                Limit::Seconds(x) => Some(Duration::from_secs_f64(x)),
                Limit::Frames(_) => None,
            },
            tracks_out: s.tracks_out.clone(),
            ..RunOptions::default()
        };
        let tasks0 = sysinfo::task_cpu_times();
        let sys0 = CpuTimes::read();
        let summary = pipeline::run_with(&cfg, &opts, &mut p)?;
        let sys1 = CpuTimes::read();
        let tasks1 = sysinfo::task_cpu_times();
        figures_rows.push(figures(
            &row.label,
            &summary,
            cfg.pipeline.detect_every,
            &mm_cpu(&tasks0, &tasks1),
            sys1.busy_since(&sys0),
            target_fps,
        ));
        progress.finish();
        parts = Some((cfg, p));
    }
    drop(parts);
    let thermal_after = Thermal::read();
    let throttled = thermal_after.throttled_during(&thermal_before);
    let recommendation = if s.sweep.is_some() {
        recommend(&figures_rows)
    } else {
        None
    };
    let trustworthy = check.trustworthy() && !throttled;
    Ok(BenchReport {
        schema: SCHEMA_ID.into(),
        lookout_version: env!("CARGO_PKG_VERSION").into(),
        settings: EffectiveSettings {
            mode: if s.inference_only.is_some() {
                "inference-only"
            } else {
                "pipeline"
            }
            .into(),
            config_file: s.config_file.as_ref().map(|p| p.display().to_string()),
            source: base.source.spec.clone(),
            pacing: if is_camera(&base.source.spec) {
                "camera rate".into()
            } else {
                "looped, as fast as possible".into()
            },
            limit,
            sweep: s.sweep,
            detect_every: base.pipeline.detect_every,
            model: if base.model.file.is_empty() {
                ModelSource::Embedded.display_name()
            } else {
                base.model.file.clone()
            },
            threads: base.model.threads,
            tracks_out: s.tracks_out.as_ref().map(|p| p.display().to_string()),
            target_fps,
        },
        system: SystemFigures {
            info,
            thermal_before,
            thermal_after,
            throttled_during_bench: throttled,
        },
        self_check: check,
        trustworthy,
        runs: figures_rows,
        recommendation,
        inference,
        peak_rss_kib: sysinfo::peak_rss_kib(),
        total_s: round(started.elapsed().as_secs_f64(), 2),
    })
}
