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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{Config, ConfigErrors};
use crate::detect::{self, Detection, Detector, ModelInfo, ModelSource};
use crate::geom::{BBox, Mapping, ResizeMode};
use crate::pipeline::{
    self, CoreMap, EndReason, Parts, PipelineError, Reconcile, RunOptions, Summary,
};
use crate::preprocess;
use crate::source::{Pacing, Spec};
use crate::stats::Latency;
use crate::sysinfo::{self, CpuTimes, SystemInfo, TaskCpu, Thermal};

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

/// Everything `lookout bench` was asked for, after the command line was parsed.
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
    /// The arguments do not make sense together.
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

// ───────────────────────────── golden self-check ─────────────────────────────

/// Where the golden data is: `$LOOKOUT_GOLDEN_DIR`, `models/golden` under the current
/// directory and under each ancestor of the executable, `/usr/share/lookout/models/golden`.
/// A directory counts when it has `detections.json`. `Err` says why none was found.
pub fn find_golden_dir() -> Result<PathBuf, String> {
    let has_data = |d: &Path| d.join("detections.json").is_file();
    if let Some(d) = std::env::var_os(GOLDEN_ENV) {
        // An explicit directory is the only one looked at.
        let d = PathBuf::from(d);
        return if has_data(&d) {
            Ok(d)
        } else {
            Err(format!(
                "self-check skipped: no golden data ({GOLDEN_ENV}={} has no detections.json)",
                d.display()
            ))
        };
    }
    data_dirs("models/golden", "/usr/share/lookout/models/golden")
        .into_iter()
        .find(|d| has_data(d))
        .ok_or_else(|| "self-check skipped: no golden data".to_string())
}

/// Where model files are: `models/` under the current directory and under each ancestor of
/// the executable, then `/usr/share/lookout/models`; the first that has an `.onnx` file.
pub fn find_models_dir() -> Option<PathBuf> {
    data_dirs("models", "/usr/share/lookout/models")
        .into_iter()
        .find(|d| !onnx_files(d).is_empty())
}

/// Candidate directories `rel` under the current directory and the executable's ancestors,
/// then `system`.
fn data_dirs(rel: &str, system: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        out.push(cwd.join(rel));
    }
    if let Ok(exe) = std::env::current_exe() {
        out.extend(exe.ancestors().skip(1).map(|a| a.join(rel)));
    }
    out.push(PathBuf::from(system));
    out
}

/// The `.onnx` files of a directory, sorted by name.
pub fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "onnx") && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Outcome of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Every golden comparison held.
    Passed,
    /// At least one comparison failed: the model computes something else.
    Failed,
    /// Nothing to compare with.
    Skipped,
}

/// One photo's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ImageCheck {
    /// Photo name (`astronaut`, …).
    pub image: String,
    /// FP32 only: largest |tract − onnxruntime| over the raw outputs.
    pub max_abs_diff: Option<f32>,
    /// Our top detection `label score`.
    pub ours: Option<String>,
    /// The golden top detection `label score`.
    pub golden: Option<String>,
    /// IoU of the two top boxes.
    pub iou: Option<f32>,
    /// Whether this photo passed.
    pub ok: bool,
    /// What failed, in words.
    pub problem: Option<String>,
}

/// The self-check of one model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelCheck {
    /// The model as the pipeline names it.
    pub model: String,
    /// Its key in `detections.json`.
    pub golden_key: String,
    /// Outcome.
    pub status: CheckStatus,
    /// Why it was skipped, or a summary of what failed.
    pub reason: Option<String>,
    /// Per-photo comparisons.
    pub images: Vec<ImageCheck>,
}

/// The self-check of every timed model.
#[derive(Clone, Debug, Serialize)]
pub struct SelfCheck {
    /// Worst outcome over the models (failed > passed > skipped).
    pub status: CheckStatus,
    /// The golden directory used.
    pub golden_dir: Option<String>,
    /// Why the whole check was skipped.
    pub reason: Option<String>,
    /// One entry per distinct model.
    pub models: Vec<ModelCheck>,
}

impl SelfCheck {
    fn new(golden: &Result<PathBuf, String>) -> SelfCheck {
        SelfCheck {
            status: CheckStatus::Skipped,
            golden_dir: golden.as_ref().ok().map(|g| g.display().to_string()),
            reason: golden.as_ref().err().cloned(),
            models: Vec::new(),
        }
    }

    fn add(&mut self, m: ModelCheck) {
        self.status = match (self.status, m.status) {
            (CheckStatus::Failed, _) | (_, CheckStatus::Failed) => CheckStatus::Failed,
            (CheckStatus::Passed, _) | (_, CheckStatus::Passed) => CheckStatus::Passed,
            _ => CheckStatus::Skipped,
        };
        self.models.push(m);
    }

    /// Whether the timings can be trusted (nothing failed).
    pub fn trustworthy(&self) -> bool {
        self.status != CheckStatus::Failed
    }
}

/// The name of a model in `detections.json`: the embedded model's file name, or the file name.
pub fn golden_key(info: &ModelInfo) -> String {
    match info.name.strip_prefix("embedded:") {
        Some(_) => EMBEDDED_MODEL_FILE.to_string(),
        None => Path::new(&info.name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| info.name.clone()),
    }
}

/// The input size a golden key was made at (`nanodet-g-416-int8.onnx` → 416).
fn key_size(key: &str) -> Option<u32> {
    key.split(['-', '_', '.'])
        .find_map(|p| p.parse::<u32>().ok().filter(|n| *n >= 32))
}

fn describe(d: &Detection) -> String {
    format!("{} {:.2}", detect::label(d.class_id), d.score)
}

/// A golden detection as stored in `detections.json`.
#[derive(serde::Deserialize, Debug, Clone)]
struct GoldenDet {
    class_id: usize,
    score: f32,
    #[serde(rename = "box")]
    bbox: [f32; 4],
}

/// Checks one loaded model against the golden data in `dir` (see `models/README.md`): the
/// stretch-resized photo at the model's input size goes in with an identity mapping; FP32 raw
/// outputs must be within [`FP32_TOLERANCE`] of onnxruntime's (when the golden `.f32` exists),
/// and the top detection (score > 0.35, NMS 0.6, as the golden data was decoded) must have the
/// golden class and IoU ≥ [`MIN_TOP_IOU`].
pub fn self_check(det: &Detector, dir: &Path) -> ModelCheck {
    let info = det.info();
    let key = golden_key(info);
    let mut check = ModelCheck {
        model: info.name.clone(),
        golden_key: key.clone(),
        status: CheckStatus::Skipped,
        reason: None,
        images: Vec::new(),
    };
    let skip = |mut c: ModelCheck, why: String| {
        c.reason = Some(why);
        c
    };
    let fail = |mut c: ModelCheck, why: String| {
        c.status = CheckStatus::Failed;
        c.reason = Some(why);
        c
    };
    let json_path = dir.join("detections.json");
    let all: serde_json::Value = match std::fs::read(&json_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            return fail(
                check,
                format!("golden file {} is unreadable: {e}", json_path.display()),
            )
        }
    };
    let Some(per_image) = all.get(&key).and_then(|v| v.as_object()) else {
        return skip(check, format!("no golden data for model {key}"));
    };
    let (w, h) = (info.input_w, info.input_h);
    match key_size(&key) {
        Some(s) if (s, s) == (w, h) => {}
        Some(s) => {
            return skip(
                check,
                format!("golden data for {key} is at {s}x{s}, the model runs at {w}x{h}"),
            )
        }
        None => return skip(check, format!("golden data for {key}: input size unknown")),
    }
    let mut input = vec![0.0f32; det.input_len()];
    let ident = Mapping::new(w, h, w, h, ResizeMode::Stretch);
    for (img, golden) in per_image {
        let mut ic = ImageCheck {
            image: img.clone(),
            max_abs_diff: None,
            ours: None,
            golden: None,
            iou: None,
            ok: true,
            problem: None,
        };
        let mut problems: Vec<String> = Vec::new();
        let png = dir.join(format!("{img}-{w}x{h}.png"));
        let golden: Vec<GoldenDet> = match serde_json::from_value(golden.clone()) {
            Ok(g) => g,
            Err(e) => {
                problems.push(format!(
                    "{}: entry {key}/{img} is malformed: {e}",
                    json_path.display()
                ));
                Vec::new()
            }
        };
        let raw = detect::read_rgb_image(&png)
            .and_then(|(rgb, iw, ih)| {
                if (iw, ih) != (w, h) {
                    return Err(format!("{}: is {iw}x{ih}, expected {w}x{h}", png.display()));
                }
                preprocess::rgb_to_tensor(&rgb, w, h, w, h, ResizeMode::Stretch, &mut input)
                    .map_err(|e| format!("{}: {e}", png.display()))
            })
            .and_then(|_| det.run_raw(&input).map_err(|e| e.to_string()));
        match raw {
            Err(e) => problems.push(e),
            Ok(raw) => {
                if info.datum == "f32" {
                    let f32_path = dir.join(format!("ort-fp32-{w}-{img}.f32"));
                    if let Ok(bytes) = std::fs::read(&f32_path) {
                        let ours = raw.concatenated();
                        if bytes.len() != ours.len() * 4 {
                            problems.push(format!(
                                "{}: {} bytes, expected {} (the six outputs as f32)",
                                f32_path.display(),
                                bytes.len(),
                                ours.len() * 4
                            ));
                        } else {
                            let max = bytes
                                .chunks_exact(4)
                                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                                .zip(&ours)
                                .map(|(g, o)| {
                                    if g.is_nan() || o.is_nan() {
                                        f32::INFINITY
                                    } else {
                                        (g - o).abs()
                                    }
                                })
                                .fold(0.0f32, f32::max);
                            ic.max_abs_diff = Some(max);
                            if max > FP32_TOLERANCE {
                                problems.push(format!(
                                    "raw outputs differ from onnxruntime by up to {max:.2e} (> {FP32_TOLERANCE:.0e})"
                                ));
                            }
                        }
                    }
                }
                let cands = detect::decode::decode(&raw, w as usize, h as usize, 0.35);
                let mut ours = detect::nms(cands, 0.6, 100);
                for d in &mut ours {
                    d.bbox = ident.to_image(&d.bbox);
                }
                ic.ours = ours.first().map(describe);
                ic.golden = golden
                    .first()
                    .map(|g| format!("{} {:.2}", detect::label(g.class_id), g.score));
                match (ours.first(), golden.first()) {
                    (None, None) => {}
                    (Some(o), Some(g)) => {
                        let iou = o
                            .bbox
                            .iou(&BBox::new(g.bbox[0], g.bbox[1], g.bbox[2], g.bbox[3]));
                        ic.iou = Some(iou);
                        if o.class_id != g.class_id {
                            problems.push(format!(
                                "top detection is {}, golden says {} {:.2}",
                                describe(o),
                                detect::label(g.class_id),
                                g.score
                            ));
                        } else if iou < MIN_TOP_IOU {
                            problems.push(format!(
                                "top {} box has IoU {iou:.2} with the golden box (< {MIN_TOP_IOU})",
                                detect::label(o.class_id)
                            ));
                        }
                    }
                    (lone_ours, lone_golden) => {
                        // One side empty is tolerated only right at the score threshold.
                        let s = lone_ours.map(|d| d.score).or(lone_golden.map(|g| g.score));
                        if s.is_some_and(|s| s >= 0.40) {
                            problems.push(format!(
                                "top detection {} vs golden {}",
                                ic.ours.as_deref().unwrap_or("none"),
                                ic.golden.as_deref().unwrap_or("none")
                            ));
                        }
                    }
                }
            }
        }
        if !problems.is_empty() {
            ic.ok = false;
            ic.problem = Some(problems.join("; "));
        }
        check.images.push(ic);
    }
    if check.images.is_empty() {
        return skip(check, format!("no golden photos for model {key}"));
    }
    let bad: Vec<String> = check
        .images
        .iter()
        .filter(|i| !i.ok)
        .map(|i| {
            format!(
                "{}: {}",
                i.image,
                i.problem.as_deref().unwrap_or("mismatch")
            )
        })
        .collect();
    if bad.is_empty() {
        check.status = CheckStatus::Passed;
        check
    } else {
        fail(check, bad.join(" | "))
    }
}

// ───────────────────────────── one run's figures ─────────────────────────────

/// Percentiles of one stage.
#[derive(Clone, Debug, Serialize)]
pub struct StageFigures {
    /// Stage key (`capture`, `gray`, `track`, `preprocess`, `model`, `postprocess`).
    pub name: String,
    /// What the stage is, for people.
    pub what: String,
    /// Samples.
    pub count: u64,
    /// p50 in ms.
    pub p50_ms: f64,
    /// p95 in ms.
    pub p95_ms: f64,
    /// Max in ms.
    pub max_ms: f64,
    /// Summed wall time in the stage, ms.
    pub total_ms: f64,
    /// CPU time attributed to the stage, ms (see [`RunFigures::stages`]); `None` for a
    /// sub-stage already counted in its parent.
    pub cpu_ms: Option<f64>,
    /// `cpu_ms` as a share (0..100 %) of the process CPU time.
    pub cpu_share_pct: Option<f64>,
}

/// Percentiles of a latency, in ms.
#[derive(Clone, Debug, Serialize)]
pub struct Percentiles {
    /// p50.
    pub p50_ms: f64,
    /// p95.
    pub p95_ms: f64,
    /// Max.
    pub max_ms: f64,
}

impl From<&Latency> for Percentiles {
    fn from(l: &Latency) -> Self {
        Percentiles {
            p50_ms: round(l.quantile_ms(0.5), 3),
            p95_ms: round(l.quantile_ms(0.95), 3),
            max_ms: round(l.max_ms(), 3),
        }
    }
}

/// The model that ran.
#[derive(Clone, Debug, Serialize)]
pub struct ModelFigures {
    /// File or `embedded:…`.
    pub name: String,
    /// `int8` or `f32`.
    pub datum: String,
    /// Input width.
    pub input_w: u32,
    /// Input height.
    pub input_h: u32,
    /// Matmul threads.
    pub threads: usize,
    /// Parse + optimize + plan time, ms.
    pub load_time_ms: f64,
}

/// Frame counters of a run.
#[derive(Clone, Debug, Serialize)]
pub struct FrameCounts {
    /// Delivered by the source.
    pub captured: u64,
    /// Processed by the tracker.
    pub processed: u64,
    /// Dropped (replaced in the newest-frame slot, or stale in the camera).
    pub dropped: u64,
    /// Model runs.
    pub detections: u64,
    /// Detection requests skipped because the detector was busy.
    pub detect_skipped: u64,
}

/// CPU time of one thread (or group of threads) during a run.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadFigures {
    /// Thread name (`lookout-capture`, `lookout-track`, `lookout-detect`, `lookout-mm-N`).
    pub name: String,
    /// The core it was pinned to.
    pub core: Option<usize>,
    /// CPU seconds.
    pub cpu_s: f64,
    /// CPU time ÷ wall time, % of one core (`None` when the run is not measured: see
    /// [`RunFigures::not_measured`]).
    pub pct_of_core: Option<f64>,
}

/// Utilisation of one core by lookout's pinned threads.
#[derive(Clone, Debug, Serialize)]
pub struct CoreFigures {
    /// Core number.
    pub core: usize,
    /// The threads pinned to it.
    pub threads: Vec<String>,
    /// Their CPU time ÷ wall time, % (`None` when the run is not measured).
    pub pct: Option<f64>,
}

/// CPU use of a run.
#[derive(Clone, Debug, Serialize)]
pub struct CpuFigures {
    /// Process CPU seconds.
    pub process_s: f64,
    /// Process CPU ÷ wall: cores kept busy (`None` when the run is not measured).
    pub cores_busy: Option<f64>,
    /// `cores_busy` as % of all cores (`None` when the run is not measured).
    pub utilisation_pct: Option<f64>,
    /// Per thread.
    pub threads: Vec<ThreadFigures>,
    /// Per pinned core (empty when nothing is pinned).
    pub per_core: Vec<CoreFigures>,
    /// Busy share of every CPU of the machine (all processes, `/proc/stat`), %.
    pub system_per_core_pct: Vec<f64>,
}

/// Can this setting follow the source in real time, and what would it cost?
#[derive(Clone, Debug, Serialize)]
pub struct KeepUp {
    /// The rate to follow: the camera's, or the recording's (10 fps for the clip).
    pub target_fps: f64,
    /// Detections per second needed (`target_fps / detect_every`).
    pub needed_detect_fps: f64,
    /// Detections per second the detector can do (1000 ÷ p50 of preprocess + model + decode).
    pub detect_capacity_fps: f64,
    /// Frames per second the tracker managed (as fast as possible) — its capacity (`None`
    /// when the run is not measured).
    pub track_capacity_fps: Option<f64>,
    /// Both capacities reach the target (never for a run that is not measured).
    pub keeps_up: bool,
    /// Projected CPU at the target rate, % of one core: per-frame capture + tracking CPU ×
    /// target fps + per-detection CPU × needed detections per second.
    pub projected_cpu_pct: f64,
}

/// The figures of one run (one row of a sweep).
#[derive(Clone, Debug, Serialize)]
pub struct RunFigures {
    /// What this row changes (`default`, `threads=2`, `detect_every=5`, `model=…`).
    pub setting: String,
    /// The model.
    pub model: ModelFigures,
    /// Source description.
    pub source: String,
    /// Source frame rate, if known.
    pub source_fps: Option<f64>,
    /// `pipeline.detect_every`.
    pub detect_every: u32,
    /// Why the run ended (`limit`, `end_of_source`, `stopped`).
    pub end: String,
    /// Wall time, s.
    pub wall_s: f64,
    /// Frame counters.
    pub frames: FrameCounts,
    /// Why the rates and CPU shares of this run are not given (`None` when they are): no frame
    /// was captured, or the run lasted under [`MIN_MEASURED_WINDOW`] — a count over a
    /// window that short is noise (a 0.01 s run once showed 7726 % of the machine busy).
    pub not_measured: Option<String>,
    /// Processed frames per second (`None` when the run is not measured).
    pub fps: Option<f64>,
    /// Frames per second the source delivered (`None` when the run is not measured).
    pub capture_fps: Option<f64>,
    /// Model runs per second (`None` when the run is not measured).
    pub detect_fps: Option<f64>,
    /// Frame age at publication.
    pub frame_age: Percentiles,
    /// Stages: `capture` (source.next; CPU = the capture thread), `track` (CPU = the tracker
    /// thread) with its part `gray`, `preprocess` and `postprocess` (CPU = their wall time on the
    /// detector thread), `model` (CPU = detector thread + matmul pool − preprocess − postprocess).
    pub stages: Vec<StageFigures>,
    /// CPU use.
    pub cpu: CpuFigures,
    /// Real-time verdict.
    pub keep_up: KeepUp,
    /// The thread → core map.
    pub core_map: CoreMap,
}

/// The shortest run whose rates and CPU shares are reported (see [`RunFigures::not_measured`]).
pub const MIN_MEASURED_WINDOW: Duration = Duration::from_secs(1);

/// Why a run of `wall` seconds that captured `captured` frames is too small to measure rates
/// over, or `None` when it is not.
fn not_measured(captured: u64, wall: f64) -> Option<String> {
    let min = MIN_MEASURED_WINDOW.as_secs_f64();
    if captured == 0 {
        Some(format!(
            "no frame was captured in {wall:.2} s: there is nothing to measure"
        ))
    } else if wall < min {
        Some(format!(
            "the run lasted {wall:.2} s, under the {min:.0} s needed for rates and CPU shares to mean anything (ask for more --frames or --seconds)"
        ))
    } else {
        None
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

fn end_name(e: &EndReason) -> &'static str {
    match e {
        EndReason::EndOfSource => "end_of_source",
        EndReason::Limit => "limit",
        EndReason::Stopped => "stopped",
        EndReason::Reload => "reload",
    }
}

/// CPU seconds of the matmul pool threads between two task snapshots.
fn mm_cpu(before: &[TaskCpu], after: &[TaskCpu]) -> Vec<(String, Duration)> {
    after
        .iter()
        .filter(|t| t.name.starts_with("lookout-mm"))
        .map(|t| {
            let b = before
                .iter()
                .find(|x| x.tid == t.tid)
                .map_or(Duration::ZERO, |x| x.cpu);
            (t.name.clone(), t.cpu.saturating_sub(b))
        })
        .collect()
}

/// Turns a pipeline summary into a row of figures.
pub fn figures(
    setting: &str,
    s: &Summary,
    detect_every: u32,
    mm: &[(String, Duration)],
    system_busy: Vec<f64>,
    target_fps: f64,
) -> RunFigures {
    let t = &s.total;
    let wall = t.elapsed.as_secs_f64().max(1e-9);
    let unmeasured = not_measured(t.captured, wall);
    let measured = unmeasured.is_none();
    // Per wall-second figures, only over a window long enough to mean something.
    let per_wall = |x: f64, digits: i32| measured.then(|| round(x / wall, digits));
    let rate = |n: u64| per_wall(n as f64, 2);
    let proc_ms = s.cpu_time.as_secs_f64() * 1e3;
    let share = |ms: f64| (proc_ms > 0.0).then(|| round(100.0 * ms / proc_ms, 1));
    let mm_ms: f64 = mm.iter().map(|(_, d)| d.as_secs_f64() * 1e3).sum();
    let tc = &s.thread_cpu;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let model_cpu =
        (ms(tc.detect) + mm_ms - t.preprocess.sum_ms() - t.postprocess.sum_ms()).max(0.0);
    let stage = |name: &str, what: &str, l: &Latency, cpu: Option<f64>| StageFigures {
        name: name.into(),
        what: what.into(),
        count: l.count(),
        p50_ms: round(l.quantile_ms(0.5), 3),
        p95_ms: round(l.quantile_ms(0.95), 3),
        max_ms: round(l.max_ms(), 3),
        total_ms: round(l.sum_ms(), 1),
        cpu_ms: cpu.map(|c| round(c, 1)),
        cpu_share_pct: cpu.and_then(share),
    };
    let stages = vec![
        stage(
            "capture",
            "capture (source.next)",
            &t.capture,
            Some(ms(tc.capture)),
        ),
        stage(
            "track",
            "tracking (gray + step)",
            &t.track,
            Some(ms(tc.track)),
        ),
        stage(
            "gray",
            "  of which frame→gray (+JPEG decode)",
            &t.gray,
            None,
        ),
        stage(
            "preprocess",
            "preprocess (frame→tensor)",
            &t.preprocess,
            Some(t.preprocess.sum_ms()),
        ),
        stage("model", "model (tract)", &t.model, Some(model_cpu)),
        stage(
            "postprocess",
            "decode + NMS",
            &t.postprocess,
            Some(t.postprocess.sum_ms()),
        ),
    ];
    let cm = &s.core_map;
    let mut threads = vec![
        ("lookout-capture".to_string(), cm.capture, tc.capture),
        ("lookout-track".to_string(), cm.track, tc.track),
        ("lookout-detect".to_string(), cm.detect, tc.detect),
    ];
    for (name, d) in mm {
        let core = name
            .rsplit('-')
            .next()
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| cm.matmul.get(i).copied());
        threads.push((name.clone(), core, *d));
    }
    let thread_figs: Vec<ThreadFigures> = threads
        .iter()
        .map(|(n, c, d)| ThreadFigures {
            name: n.clone(),
            core: *c,
            cpu_s: round(d.as_secs_f64(), 3),
            pct_of_core: per_wall(100.0 * d.as_secs_f64(), 1),
        })
        .collect();
    let mut per_core: BTreeMap<usize, (Vec<String>, f64)> = BTreeMap::new();
    for (n, c, d) in &threads {
        if let Some(c) = c {
            let e = per_core.entry(*c).or_default();
            e.0.push(n.clone());
            e.1 += d.as_secs_f64();
        }
    }
    let per_core = per_core
        .into_iter()
        .map(|(core, (threads, cpu))| CoreFigures {
            core,
            threads,
            pct: per_wall(100.0 * cpu, 1),
        })
        .collect();
    let cores = sysinfo::core_count() as f64;
    let cores_busy = s.cpu_time.as_secs_f64() / wall;
    // Real-time verdict.
    let det_ms =
        t.preprocess.quantile_ms(0.5) + t.model.quantile_ms(0.5) + t.postprocess.quantile_ms(0.5);
    let detect_capacity = if det_ms > 0.0 { 1000.0 / det_ms } else { 0.0 };
    let track_capacity = per_wall(t.processed as f64, 1);
    let every = f64::from(detect_every.max(1));
    let needed = target_fps / every;
    let per = |d: Duration, n: u64| {
        if n > 0 {
            d.as_secs_f64() / n as f64
        } else {
            0.0
        }
    };
    let per_frame = per(tc.capture, t.captured) + per(tc.track, t.processed);
    let per_detection = per(
        tc.detect + Duration::from_secs_f64(mm_ms / 1e3),
        t.detections,
    );
    RunFigures {
        setting: setting.to_string(),
        model: ModelFigures {
            name: s.model.name.clone(),
            datum: s.model.datum.to_string(),
            input_w: s.model.input_w,
            input_h: s.model.input_h,
            threads: s.model.threads,
            load_time_ms: round(s.model.load_time.as_secs_f64() * 1e3, 1),
        },
        source: s.source.clone(),
        source_fps: s.source_fps,
        detect_every,
        end: end_name(&s.end).to_string(),
        wall_s: round(wall, 3),
        frames: FrameCounts {
            captured: t.captured,
            processed: t.processed,
            dropped: t.dropped,
            detections: t.detections,
            detect_skipped: t.detect_skipped,
        },
        not_measured: unmeasured.clone(),
        fps: rate(t.processed),
        capture_fps: rate(t.captured),
        detect_fps: rate(t.detections),
        frame_age: Percentiles::from(&t.age),
        stages,
        cpu: CpuFigures {
            process_s: round(s.cpu_time.as_secs_f64(), 3),
            cores_busy: measured.then(|| round(cores_busy, 2)),
            utilisation_pct: measured.then(|| round(100.0 * cores_busy / cores, 1)),
            threads: thread_figs,
            per_core,
            system_per_core_pct: system_busy.into_iter().map(|b| round(b, 1)).collect(),
        },
        keep_up: KeepUp {
            target_fps,
            needed_detect_fps: round(needed, 2),
            detect_capacity_fps: round(detect_capacity, 2),
            track_capacity_fps: track_capacity,
            keeps_up: t.detections > 0
                && detect_capacity >= needed
                && track_capacity.is_some_and(|c| c >= target_fps),
            projected_cpu_pct: round(100.0 * (per_frame * target_fps + per_detection * needed), 1),
        },
        core_map: s.core_map.clone(),
    }
}

/// The closing recommendation of a sweep (or the verdict of a single run).
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    /// The recommended row's setting, `None` when no row keeps up.
    pub setting: Option<String>,
    /// One sentence for people.
    pub text: String,
}

/// Picks, among the rows that keep up with the target rate, the one with the lowest projected
/// CPU; with none, says so and names the fastest detector.
pub fn recommend(rows: &[RunFigures]) -> Option<Recommendation> {
    let first = rows.first()?;
    let target = first.keep_up.target_fps;
    let best = rows.iter().filter(|r| r.keep_up.keeps_up).min_by(|a, b| {
        a.keep_up
            .projected_cpu_pct
            .total_cmp(&b.keep_up.projected_cpu_pct)
    });
    Some(match best {
        Some(r) => {
            let mut text = format!(
                "recommended: {} — keeps up with {target} fps at the lowest CPU (≈{:.0}% of one core projected at {target} fps; detector {:.1}/s ≥ {:.1}/s needed)",
                r.setting, r.keep_up.projected_cpu_pct, r.keep_up.detect_capacity_fps, r.keep_up.needed_detect_fps
            );
            // For detection intervals the cheapest is always the sparsest; name the densest too.
            let dense = rows
                .iter()
                .filter(|r| r.keep_up.keeps_up && r.setting.starts_with("detect_every="))
                .min_by_key(|r| r.detect_every);
            if let Some(d) = dense.filter(|d| d.setting != r.setting) {
                text.push_str(&format!(
                    "; the most frequent detection that still keeps up: {} (≈{:.0}%)",
                    d.setting, d.keep_up.projected_cpu_pct
                ));
            }
            Recommendation {
                setting: Some(r.setting.clone()),
                text,
            }
        }
        None => {
            let fastest = rows.iter().max_by(|a, b| {
                a.keep_up
                    .detect_capacity_fps
                    .total_cmp(&b.keep_up.detect_capacity_fps)
            });
            Recommendation {
                setting: None,
                text: format!(
                    "no setting keeps up with {target} fps{}",
                    fastest.map_or(String::new(), |f| format!(
                        "; the fastest detector is {} at {:.1}/s (needs {:.1}/s)",
                        f.setting, f.keep_up.detect_capacity_fps, f.keep_up.needed_detect_fps
                    ))
                ),
            }
        }
    })
}

// ───────────────────────────── the model alone ─────────────────────────────

/// A detection in model-input pixels, as in `golden/detections.json`.
#[derive(Clone, Debug, Serialize)]
pub struct PlainDetection {
    /// Class id.
    pub class_id: usize,
    /// COCO label.
    pub label: String,
    /// Score.
    pub score: f32,
    /// `[x0, y0, x1, y1]` in model-input pixels.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
}

/// Timing of the model on one photo.
#[derive(Clone, Debug, Serialize)]
pub struct ImageTiming {
    /// Photo name.
    pub image: String,
    /// Median of the timed runs, ms.
    pub median_ms: f64,
    /// Fastest run, ms.
    pub min_ms: f64,
    /// Detections (score > 0.35, NMS 0.6) in model-input pixels.
    pub detections: Vec<PlainDetection>,
}

/// `--inference-only`: `Detector::run_raw` (the network, nothing else) timed on the golden
/// photos at the model's input size, after 3 warm-up runs per photo.
#[derive(Clone, Debug, Serialize)]
pub struct InferenceTiming {
    /// The model.
    pub model: ModelFigures,
    /// Timed runs per photo.
    pub runs_per_image: usize,
    /// Median over every timed run, ms.
    pub median_ms: f64,
    /// Fastest run, ms.
    pub min_ms: f64,
    /// Per photo.
    pub images: Vec<ImageTiming>,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Times the network alone on every `<img>-<W>x<H>.png` of the golden directory.
pub fn time_inference(det: &Detector, dir: &Path, runs: usize) -> InferenceTiming {
    let info = det.info().clone();
    let (w, h) = (info.input_w, info.input_h);
    let suffix = format!("-{w}x{h}.png");
    let mut photos: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(&suffix)
                        .map(|img| (img.to_string(), e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    photos.sort();
    let mut input = vec![0.0f32; det.input_len()];
    let mut all = Vec::new();
    let mut images = Vec::new();
    for (img, png) in photos {
        let Ok((rgb, iw, ih)) = detect::read_rgb_image(&png) else {
            continue;
        };
        if (iw, ih) != (w, h)
            || preprocess::rgb_to_tensor(&rgb, w, h, w, h, ResizeMode::Stretch, &mut input).is_err()
        {
            continue;
        }
        let mut last = None;
        for _ in 0..3 {
            last = det.run_raw(&input).ok();
        }
        let mut ms = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t0 = Instant::now();
            if let Ok(raw) = det.run_raw(&input) {
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
                last = Some(raw);
            }
        }
        let dets = last
            .map(|raw| {
                detect::nms(
                    detect::decode::decode(&raw, w as usize, h as usize, 0.35),
                    0.6,
                    100,
                )
            })
            .unwrap_or_default();
        all.extend_from_slice(&ms);
        let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
        images.push(ImageTiming {
            image: img,
            median_ms: round(median(&mut ms), 3),
            min_ms: round(if min.is_finite() { min } else { 0.0 }, 3),
            detections: dets
                .iter()
                .map(|d| PlainDetection {
                    class_id: d.class_id,
                    label: detect::label(d.class_id),
                    score: d.score,
                    bbox: [d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1],
                })
                .collect(),
        });
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    InferenceTiming {
        model: ModelFigures {
            name: info.name.clone(),
            datum: info.datum.to_string(),
            input_w: w,
            input_h: h,
            threads: info.threads,
            load_time_ms: round(info.load_time.as_secs_f64() * 1e3, 1),
        },
        runs_per_image: runs,
        median_ms: round(median(&mut all), 3),
        min_ms: round(if min.is_finite() { min } else { 0.0 }, 3),
        images,
    }
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
    if s.sweep.is_some() && s.tracks_out.is_some() {
        return Err(BenchError::Usage(
            "--tracks-out records one run; it cannot be combined with --sweep".into(),
        ));
    }
    if let Some(Limit::Frames(0)) = s.limit {
        return Err(BenchError::Usage("--frames must be at least 1".into()));
    }
    if let Some(Limit::Seconds(x)) = s.limit {
        if !(x > 0.0 && x.is_finite()) {
            return Err(BenchError::Usage(format!(
                "--seconds must be a positive number, found {x}"
            )));
        }
    }
    let base = effective_config(s)?;
    if s.inference_only.is_some() && (s.sweep.is_some() || s.tracks_out.is_some()) {
        return Err(BenchError::Usage(
            "--inference-only times the model alone; it cannot be combined with --sweep or --tracks-out".into(),
        ));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(total: crate::stats::Window, cpu_time: Duration) -> Summary {
        Summary {
            total,
            report: crate::stats::Window::default().report(0),
            model: ModelInfo {
                name: "m".into(),
                input_w: 416,
                input_h: 416,
                datum: "int8",
                threads: 1,
                load_time: Duration::ZERO,
            },
            source: "demo".into(),
            source_fps: Some(10.0),
            tracks_started: 0,
            tracks_ended: 0,
            cpu_time,
            end: EndReason::Limit,
            core_map: CoreMap::default(),
            thread_cpu: Default::default(),
        }
    }

    fn row(setting: &str, every: u32, cap: f64, cpu: f64, ok: bool) -> RunFigures {
        let s = summary(Default::default(), Duration::ZERO);
        let mut f = figures(setting, &s, every, &[], vec![], 10.0);
        f.keep_up.keeps_up = ok;
        f.keep_up.detect_capacity_fps = cap;
        f.keep_up.projected_cpu_pct = cpu;
        f
    }

    #[test]
    fn recommends_the_cheapest_row_that_keeps_up() {
        let rows = vec![
            row("detect_every=1", 1, 8.0, 120.0, false),
            row("detect_every=2", 2, 8.0, 70.0, true),
            row("detect_every=5", 5, 8.0, 30.0, true),
        ];
        let r = recommend(&rows).unwrap();
        assert_eq!(r.setting.as_deref(), Some("detect_every=5"));
        assert!(r.text.contains("detect_every=2"), "{}", r.text);
        let none = recommend(&rows[..1]).unwrap();
        assert_eq!(none.setting, None);
        assert!(none.text.contains("no setting keeps up"), "{}", none.text);
    }

    #[test]
    fn rates_and_cpu_shares_need_frames_and_a_second() {
        let window = |captured: u64, ms: u64| crate::stats::Window {
            captured,
            processed: captured,
            detections: captured / 5,
            elapsed: Duration::from_millis(ms),
            ..Default::default()
        };
        // Nothing captured in 5 ms with 0.77 s of CPU (model load): once "154 cores busy".
        let empty = figures(
            "default",
            &summary(window(0, 5), Duration::from_millis(770)),
            5,
            &[],
            vec![],
            10.0,
        );
        let why = empty.not_measured.as_deref().unwrap_or_default();
        assert!(why.contains("no frame was captured"), "{why}");
        assert_eq!(
            (empty.fps, empty.capture_fps, empty.detect_fps),
            (None, None, None)
        );
        assert_eq!(
            (empty.cpu.cores_busy, empty.cpu.utilisation_pct),
            (None, None)
        );
        assert!(empty.cpu.threads.iter().all(|t| t.pct_of_core.is_none()));
        assert!(!empty.keep_up.keeps_up && empty.keep_up.track_capacity_fps.is_none());
        // Frames, but over 0.4 s: still not a measurement.
        let short = figures(
            "default",
            &summary(window(10, 400), Duration::from_millis(800)),
            5,
            &[],
            vec![],
            10.0,
        );
        let why = short.not_measured.as_deref().unwrap_or_default();
        assert!(why.contains("0.40 s") && why.contains("1 s"), "{why}");
        assert_eq!(short.fps, None);
        // Two seconds: measured.
        let long = figures(
            "default",
            &summary(window(40, 2000), Duration::from_millis(1000)),
            5,
            &[],
            vec![],
            10.0,
        );
        assert_eq!(long.not_measured, None);
        assert_eq!((long.fps, long.detect_fps), (Some(20.0), Some(4.0)));
        assert_eq!(long.cpu.cores_busy, Some(0.5));
        assert_eq!(long.keep_up.track_capacity_fps, Some(20.0));
    }

    #[test]
    fn golden_keys_and_sizes() {
        let mut info = ModelInfo {
            name: "embedded:nanodet-g-416-int8.onnx".into(),
            input_w: 416,
            input_h: 416,
            datum: "int8",
            threads: 1,
            load_time: Duration::ZERO,
        };
        assert_eq!(golden_key(&info), "nanodet-g-416-int8.onnx");
        info.name = "/x/y/nanodet-g-320-int8.onnx".into();
        assert_eq!(golden_key(&info), "nanodet-g-320-int8.onnx");
        assert_eq!(key_size("nanodet-g-320-int8.onnx"), Some(320));
        assert_eq!(key_size("model.onnx"), None);
    }
}
