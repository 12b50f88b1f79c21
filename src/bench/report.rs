//! The wire format of `lookout bench --json` (`lookout-bench/1`, documented in
//! `docs/bench-schema.json` and checked against it by `tests/bench_schema.rs`).
//!
//! Every type serialized into the report is declared here, and none of them is a pipeline,
//! stats or sysinfo struct: renaming a field inside the daemon cannot change the document
//! users' scripts read. The conversions from those internals live beside the code that
//! measures (`figures.rs`, `golden.rs`, `timing.rs`, `mod.rs`). Keys and their order are an
//! interface: change them only with the schema (and bump [`SCHEMA_ID`] when a key changes
//! meaning).

use serde::Serialize;

/// The identifier in [`BenchReport::schema`]; bump when keys change meaning.
pub const SCHEMA_ID: &str = "lookout-bench/1";

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
    /// `--sweep fidelity`: tracking fidelity of each schedule, replayed from one recording.
    pub fidelity: Option<FidelityReport>,
    /// `--sweep input-size`: each input size's detections and events against the truth.
    pub input_size: Option<InputSizeReport>,
    /// Peak resident memory of the process (`VmHWM`), KiB.
    pub peak_rss_kib: Option<u64>,
    /// Total benchmark time including loading and self-checks, s.
    pub total_s: f64,
}

// ───────────────────────────── settings ─────────────────────────────

/// How long each run lasts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// This many processed frames.
    Frames(u64),
    /// This many seconds.
    Seconds(f64),
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
    /// Sweep, if any (its CLI name: `threads`, `detect-every`, `model`).
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

// ───────────────────────────── the machine ─────────────────────────────

/// The machine (`sysinfo::SystemInfo`'s facts) plus temperature and throttling around the
/// benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct SystemFigures {
    /// Board model (`/proc/device-tree/model`).
    pub board: Option<String>,
    /// CPU model.
    pub cpu_model: String,
    /// ARM `CPU part` (e.g. `0xd08` = Cortex-A72), when reported.
    pub cpu_part: Option<String>,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// Rust target architecture of this binary.
    pub arch: String,
    /// Kernel release.
    pub kernel: Option<String>,
    /// OS name.
    pub os: Option<String>,
    /// glibc version.
    pub glibc: Option<String>,
    /// The CPU features that decide which matrix kernels tract picks.
    pub cpu_features: Vec<String>,
    /// 8-bit dot-product instructions.
    pub dotprod: bool,
    /// The matrix-product kernels tract-linalg selects.
    pub matmul_kernel: String,
    /// Before the first run.
    pub thermal_before: ThermalFigures,
    /// After the last run.
    pub thermal_after: ThermalFigures,
    /// Throttling, under-voltage or a frequency cap happened during the benchmark.
    pub throttled_during_bench: bool,
}

/// Temperature, clock and throttling at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThermalFigures {
    /// Highest temperature of the thermal zones, °C.
    pub temp_c: Option<f64>,
    /// Current clock of CPU 0 in MHz.
    pub cpu_mhz: Option<f64>,
    /// Raw `vcgencmd get_throttled` value (e.g. `0x50005`).
    pub throttled: Option<String>,
    /// The bits of `throttled` in words.
    pub throttled_flags: Vec<String>,
}

// ───────────────────────────── the golden self-check ─────────────────────────────

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

// ───────────────────────────── one run ─────────────────────────────

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
    /// Why the run ended (`limit`, `end_of_source`, `stopped`, `reload`).
    pub end: String,
    /// Wall time, s.
    pub wall_s: f64,
    /// Frame counters.
    pub frames: FrameCounts,
    /// Why the rates and CPU shares of this run are not given (`None` when they are): no frame
    /// was captured, or the run lasted under [`MIN_MEASURED_WINDOW`] — a count over a
    /// window that short is noise (a 0.01 s run once showed 7726 % of the machine busy).
    ///
    /// [`MIN_MEASURED_WINDOW`]: super::MIN_MEASURED_WINDOW
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
    pub core_map: CoreMapFigures,
    /// Each camera's share of the run, in the order given (one entry for a single source;
    /// with several `--source` or `[[camera]]` tables the figures above are their total).
    pub cameras: Vec<CameraFigures>,
}

/// One camera's figures in a run.
#[derive(Clone, Debug, Serialize)]
pub struct CameraFigures {
    /// The camera's name (`cam1`, `cam2`… for `--source`, else its `[[camera]]` name).
    pub name: String,
    /// Source description.
    pub source: String,
    /// Processed frames per second (`None` when the camera's run is not measured).
    pub fps: Option<f64>,
    /// Frames per second the source delivered (`None` when not measured).
    pub capture_fps: Option<f64>,
    /// Model runs per second for this camera (`None` when not measured).
    pub detect_fps: Option<f64>,
    /// Frame age at publication.
    pub frame_age: Percentiles,
    /// Frame counters.
    pub frames: FrameCounts,
    /// The ground truth (`--truth`, on a timed run) this camera's `truth` is against.
    pub truth_file: Option<String>,
    /// What this camera's run (its tracks file) scored against `truth_file`; `None` without.
    pub truth: Option<TruthScores>,
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
    /// lookout's own int8 path in the model (`None` for a float model).
    pub int8_path: Option<String>,
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

/// The thread → core map of a run (`pipeline::CoreMap`'s plan); `None` = not pinned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CoreMapFigures {
    /// Capture thread core.
    pub capture: Option<usize>,
    /// Tracker thread core.
    pub track: Option<usize>,
    /// Detector thread core.
    pub detect: Option<usize>,
    /// Cores of the model's matmul pool (when threads > 1).
    pub matmul: Vec<usize>,
}

/// The closing recommendation of a sweep (or the verdict of a single run).
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    /// The recommended row's setting, `None` when no row keeps up.
    pub setting: Option<String>,
    /// One sentence for people.
    pub text: String,
}

// ───────────────────────────── the model alone ─────────────────────────────

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
    /// Where the timed runs' time went, by op, most first (every node's evaluation timed).
    pub ops: Vec<OpTiming>,
}

/// One op's time in the timed runs of `--inference-only`.
#[derive(Clone, Debug, Serialize)]
pub struct OpTiming {
    /// The op's name as tract reports it (`QConvI8`, `FastLut`, tract's `Conv`, …).
    pub op: String,
    /// Nodes of the network running it.
    pub nodes: usize,
    /// Mean time per run, all its nodes together, ms.
    pub ms_per_run: f64,
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
    /// Detections (decoded as the golden data was: see `golden::decode_as_golden`) in
    /// model-input pixels.
    pub detections: Vec<PlainDetection>,
}

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

// ───────────────────────────── tracking fidelity ─────────────────────────────

/// A fidelity row's scores against hand-checked ground truth (serialized as is).
pub use crate::fidelity::truth::{ObjectEvents, TruthScores};

/// `--sweep fidelity`: the model ran once on every frame of the source (the *reference*: the
/// every-frame detections); each schedule was then replayed in *lockstep* (every frame tracked,
/// every detection it asks for applied before the next frame) from that recording.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityReport {
    /// Source spec.
    pub source: String,
    /// Frames recorded.
    pub frames: u64,
    /// Frame width, pixels.
    pub frame_width: u32,
    /// Frame height, pixels.
    pub frame_height: u32,
    /// The recording's frame rate (10 when the source says none): the adaptive schedule's clock.
    pub source_fps: f64,
    /// Reference detections over all frames (of a `car` and a `truck` on one object, one).
    pub reference_detections: u64,
    /// Mean time of one detection while recording (frame → tensor, model, decoding), ms.
    pub detect_ms: f64,
    /// Mean time of one gray plane while recording, ms.
    pub gray_ms: f64,
    /// Wall time of the recording, s.
    pub record_s: f64,
    /// The adaptive schedule's heartbeat while nothing is tracked or moving, s.
    pub idle_detect_interval_s: f64,
    /// The ground truth the rows' `truth` scores are against (`--truth`), if any.
    pub truth_file: Option<String>,
    /// One row per schedule: fixed N = 1, 2, 3, 5, 10, then adaptive.
    pub rows: Vec<FidelityRow>,
}

/// One schedule's fidelity against the reference.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityRow {
    /// `N=1` … `N=10`, `adaptive`.
    pub name: String,
    /// `fixed` or `adaptive`.
    pub schedule: String,
    /// The fixed interval, or the adaptive schedule's longest gap while anything is tracked.
    pub detect_every: u32,
    /// Share of the reference detections a confirmed track of the same (or a confusable)
    /// class matches at IoU ≥ 0.5 in the same frame, 0..1.
    pub coverage: f64,
    /// Reference detections covered.
    pub covered: u64,
    /// Identity switches of the N = 1 tracks (the ground-truth trajectories).
    pub id_switches: u64,
    /// Ground-truth track-frames matched by a track.
    pub matched_track_frames: u64,
    /// `id_switches` per 100 `matched_track_frames`.
    pub id_switches_per_100: f64,
    /// Model runs.
    pub detections: u64,
    /// Model runs per frame.
    pub detections_per_frame: f64,
    /// Model runs by the cause that asked for them (a fixed schedule: all `interval`).
    pub causes: DetectCauses,
    /// The reference detections not covered, by what the last detection before them saw;
    /// they sum to reference − covered.
    pub misses: MissCauses,
    /// Estimated CPU per frame, ms: gray plane and tracker as measured in the replay, plus
    /// the mean detection time × detections per frame.
    pub cpu_ms_per_frame: f64,
    /// `cpu_ms_per_frame` ÷ that of N = 1.
    pub cpu_vs_n1: f64,
    /// Events started (tracks that became events by the `[events]` rules).
    pub events: u64,
    /// Scores against the ground truth (`--truth`); `null` without one.
    pub truth: Option<TruthScores>,
}

/// Uncovered reference detections of a fidelity row, by what the schedule's last detection at
/// or before the missed frame saw of the object (the same object: IoU ≥ 0.3, same or
/// confusable class). See [`crate::fidelity::Misses`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MissCauses {
    /// Not reported (nor seen weakly) by the last detection: appeared since, or missed by the
    /// model on that frame.
    pub unreported: u64,
    /// Seen by the last detection only below the reporting threshold.
    pub weak: u64,
    /// Reported by the last detection, but no track's box is on it now (nor where the
    /// model boxed it on the frames before and after).
    pub moved: u64,
    /// As `moved`, but a track is where the model boxed the object on the frames before and
    /// after: the model's box jumped on this frame.
    pub jumped: u64,
    /// A track is on it with a label the reference does not share.
    pub label: u64,
    /// Missed on a frame the detector ran on.
    pub at_detection: u64,
}

/// Model runs by cause (the journal's `DETECT_*` counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DetectCauses {
    /// The longest gap (`detect_every` frames) passed.
    pub interval: u64,
    /// Motion outside the tracks.
    pub motion: u64,
    /// A track needed fresh evidence.
    pub uncertain: u64,
    /// The idle heartbeat.
    pub idle: u64,
}

/// What a sweep varies (serialized as its command-line name in the report's settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Sweep {
    /// `model.threads` from 1 to the number of cores.
    Threads,
    /// `pipeline.detect_every` over 1, 2, 3, 5, 10.
    DetectEvery,
    /// Every `.onnx` file in the models directory.
    Model,
    /// Tracking fidelity: the model once on every frame of the source, then fixed N = 1, 2,
    /// 3, 5, 10 and the adaptive schedule replayed in lockstep from that recording.
    Fidelity,
    /// Model input sizes from 320×256 to 640×480 (and the `"auto"` one): the model on every
    /// frame at each, scored against the truth by object height, and its events.
    InputSize,
}

/// An input-size row's detections on every frame against the truth (serialized as is).
pub use crate::fidelity::detections::{DetectionTruth, HeightRecall};

/// `--sweep input-size`: the model ran once on every frame of the source at each input size;
/// each size's recording was scored against the truth frame by frame (the model's own boxes,
/// by object height) and replayed at the configured schedules for the event scores.
#[derive(Clone, Debug, Serialize)]
pub struct InputSizeReport {
    /// Source spec.
    pub source: String,
    /// Frames recorded per size.
    pub frames: u64,
    /// Frame width, pixels.
    pub frame_width: u32,
    /// Frame height, pixels.
    pub frame_height: u32,
    /// The ground truth scored against (`--truth`), if any.
    pub truth_file: Option<String>,
    /// The size the model file declares, `[width, height]`.
    pub declared: [u32; 2],
    /// The size `input_size = "auto"` gives these frames, `[width, height]`.
    pub auto: [u32; 2],
    /// Rounds of the interleaved timing (each size once per round, on the same frame).
    pub timing_rounds: u32,
    /// One row per size, smallest first.
    pub rows: Vec<InputSizeRow>,
}

/// One input size.
#[derive(Clone, Debug, Serialize)]
pub struct InputSizeRow {
    /// Input width, pixels.
    pub width: u32,
    /// Input height, pixels.
    pub height: u32,
    /// Input pixels per frame pixel along each side (the letterbox scale): how large an
    /// object is for the model.
    pub scale: f64,
    /// Share of the input's pixels that are padding, 0..1.
    pub padding: f64,
    /// Model time alone (the network on a prepared input), median of the interleaved rounds, ms.
    pub model_ms: f64,
    /// `model_ms` ÷ that of the declared size.
    pub model_vs_declared: f64,
    /// Mean time of one detection while recording (frame → tensor, model, decoding), ms.
    pub detect_ms: f64,
    /// Every frame's reported detections against the truth; `null` without one.
    pub detections: Option<DetectionTruth>,
    /// Events against the truth at a fixed `pipeline.detect_every`; `null` without a truth.
    pub events_fixed: Option<TruthScores>,
    /// Events against the truth with the adaptive schedule; `null` without a truth.
    pub events_adaptive: Option<TruthScores>,
}
