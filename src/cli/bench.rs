//! `lookout bench`: runs the real pipeline on the camera or the bundled clip and prints what it
//! costs — a table for people (over SSH, on the Pi) or one JSON document (`--json`, schema in
//! `docs/bench-schema.json`).
//!
//! Exit status: 0 when measured, 2 when the golden self-check failed (the numbers were
//! measured on a model that computes something else), 78 for a bad configuration, 64 for a
//! command line clap refuses (`BenchArgs`), 1 for any other failure.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::bench::{
    self, BenchError, BenchReport, BenchSettings, CheckStatus, Limit, Progress, Sweep,
};
use crate::detect::Precision;
use crate::pipeline::CoreMap;
use crate::schedule::ScheduleKind;

mod fidelity_table;
mod size_table;
pub use fidelity_table::{render_fidelity, render_run_truth};
pub use size_table::render_input_size;

/// Exit status when the self-check failed.
pub const EXIT_SELF_CHECK_FAILED: u8 = 2;

/// Arguments of `lookout bench`. Every check of the command line alone (ranges, flags that
/// exclude each other) is declared here, so clap refuses a bad command line before anything
/// is loaded; what depends on the configuration is checked by `bench::effective_config`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Configuration file (TOML). Without it: built-in defaults (bundled demo clip, embedded model).
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Source: /dev/videoN, FILE.mjpeg, FILE.y4m, DIR/, `exec:COMMAND ARGS…` or `demo`
    /// (overrides the configuration). Files loop and play as fast as possible; a camera runs
    /// at its own rate; a command's every frame is taken in order (restarted when it ends).
    /// Give it several times for several cameras at once (cam1, cam2…), sharing one model
    /// as `lookout run` does: the report gives each camera's figures and their total
    /// (`--source demo --source demo` measures what a second camera costs). Without it, a
    /// configuration's `[[camera]]` tables are the cameras. Not with --sweep.
    #[arg(long, value_name = "SPEC")]
    pub source: Vec<String>,
    /// Run for this many seconds (each row of a sweep). Default: 20 s, 8 s per sweep row.
    #[arg(
        long,
        value_name = "S",
        conflicts_with = "frames",
        value_parser = positive_seconds,
        allow_negative_numbers = true
    )]
    pub seconds: Option<f64>,
    /// Run until this many frames were processed (each row of a sweep). Files play as fast as
    /// possible and the tracker handles ~100 fps, so a few dozen frames last well under a
    /// second and may see a single model run: use --seconds for model statistics.
    #[arg(
        long,
        value_name = "N",
        value_parser = at_least_one::<u64>,
        allow_negative_numbers = true
    )]
    pub frames: Option<u64>,
    /// Print one JSON document (schema: docs/bench-schema.json) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Repeat the run over model threads (1..=cores), detection intervals (1,2,3,5,10) or every
    /// .onnx file in the models directory, and recommend a setting. `fidelity`: run the model
    /// once on every frame of the source (a file: --frames caps it), then score fixed N = 1, 2,
    /// 3, 5, 10 and the adaptive schedule, replayed in lockstep, against those detections.
    /// `input-size`: run the model once on every frame at each input size from 320x256 to
    /// 640x480 (and the "auto" one), time it, and with --truth score each size's detections
    /// by object height and its events.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub sweep: Option<Sweep>,
    /// Run the detector every N frames (overrides `pipeline.detect_every`).
    #[arg(long, value_name = "N")]
    pub detect_every: Option<u32>,
    /// When the detector runs (overrides `pipeline.schedule`): `fixed` every N frames, or
    /// `adaptive` (motion, uncertain tracks, a heartbeat when nothing moves).
    #[arg(long, value_enum, value_name = "KIND")]
    pub schedule: Option<ScheduleKind>,
    /// Play a file source at its own frame rate, as a camera would deliver it, instead of as
    /// fast as possible: what the daemon costs on such a camera (e.g. a still scene's CPU).
    #[arg(long, conflicts_with_all = ["sweep", "inference_only"])]
    pub realtime: bool,
    /// ONNX model file (overrides `model.file`).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// The built-in model to run (overrides `model.precision` and `model.file`): `auto` picks
    /// INT8 where an int8 kernel beats FP32 (8-bit dot products, or any 64-bit ARM CPU),
    /// FP32 elsewhere.
    #[arg(long, value_enum, value_name = "P", conflicts_with = "model")]
    pub precision: Option<Precision>,
    /// Write one JSON line per processed frame (tracks) to FILE, as `lookout run` does. It
    /// records one run: not with --sweep.
    #[arg(long, value_name = "FILE", conflicts_with = "sweep")]
    pub tracks_out: Option<PathBuf>,
    /// Score against this hand-checked ground truth of the source (MOT format,
    /// `frame,id,x,y,w,h,conf,class,visibility`; see tests/data/truth/README.md): events per
    /// true object, false events, missed objects, time to event, box recall/precision and
    /// IDF1. With `--sweep fidelity`: every schedule. On a run: what each camera's run found
    /// (its tracks file, frame N of the recording = truth frame N + 1; frames it skipped count
    /// as empty) — give it once per camera, in the order of the cameras.
    #[arg(long, value_name = "FILE", conflicts_with = "inference_only")]
    pub truth: Vec<PathBuf>,
    /// Threads for the model's matrix products (overrides `model.threads`).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Time the model alone (no pipeline) on the golden photos, RUNS timed runs per photo —
    /// what scripts/peer_compare.py compares with onnxruntime. Not with --sweep or --tracks-out.
    #[arg(
        long,
        value_name = "RUNS",
        value_parser = at_least_one::<usize>,
        conflicts_with_all = ["sweep", "tracks_out"]
    )]
    pub inference_only: Option<usize>,
}

/// `--frames`, `--inference-only`: a whole number, at least 1.
fn at_least_one<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
    T::Err: std::fmt::Display,
{
    let n: T = s.parse().map_err(|e| format!("{e}"))?;
    if n < T::from(1) {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

/// The longest `--seconds` accepted: a year.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// `--seconds`: a positive, finite number of seconds, at most [`MAX_SECONDS`].
fn positive_seconds(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if x > 0.0 && x <= MAX_SECONDS {
        Ok(x)
    } else {
        Err(format!(
            "must be a positive number of seconds, at most {MAX_SECONDS} (a year)"
        ))
    }
}

impl BenchArgs {
    /// The library's settings for these arguments.
    pub fn settings(&self) -> BenchSettings {
        BenchSettings {
            config_file: self.config.clone(),
            sources: self.source.clone(),
            limit: match (self.frames, self.seconds) {
                (Some(f), _) => Some(Limit::Frames(f)),
                (None, Some(s)) => Some(Limit::Seconds(s)),
                (None, None) => None,
            },
            sweep: self.sweep,
            detect_every: self.detect_every,
            schedule: self.schedule,
            realtime: self.realtime,
            model: self.model.clone(),
            precision: self.precision,
            tracks_out: self.tracks_out.clone(),
            threads: self.threads,
            inference_only: self.inference_only,
            truth: self.truth.clone(),
            stop: Default::default(),
            outlets: Default::default(),
        }
    }
}

/// How `bench` ended.
#[derive(Debug)]
pub enum BenchOutcome {
    /// Measured and self-checked (or no golden data): exit 0.
    Ok,
    /// Measured, but the self-check failed: exit 2.
    SelfCheckFailed,
}

/// A spinner on stderr, only when stderr is a terminal.
struct Spinner {
    bar: Option<indicatif::ProgressBar>,
}

impl Spinner {
    fn new() -> Spinner {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            {
                b.set_style(style);
            }
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Spinner { bar }
    }
}

impl Progress for Spinner {
    fn phase(&mut self, message: &str) {
        if let Some(b) = &self.bar {
            b.set_message(message.to_string());
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// How long a stop waits for the phase under way to end with what it measured so far (a
/// pipeline run ends within a second; loading a model or a self-check may not).
const STOP_GRACE: Duration = Duration::from_millis(900);

/// Runs the subcommand and prints the report on stdout. SIGINT/SIGTERM end it early: the run
/// under way stops and the report covers what ran until then; a phase that cannot stop
/// (loading the model, the self-check) ends it with no report. Either way the exit is clean.
pub fn run(args: &BenchArgs) -> Result<BenchOutcome, BenchError> {
    let signals = crate::service::Signals::install()
        .map_err(|e| BenchError::Usage(format!("cannot install signal handlers: {e}")))?;
    let mut settings = args.settings();
    settings.stop = signals.stop.clone();
    // A configuration with [mqtt] or [snapshots] on: their cost is part of what is measured.
    let mut running = match &args.config {
        Some(path) => match crate::config::Config::load(path) {
            Ok(cfg) => Some(
                crate::cli::outlets::Running::start(&cfg, Some(path)).map_err(BenchError::Usage)?,
            ),
            Err(_) => None, // bench::run reports the configuration's errors
        },
        None => None,
    };
    if let Some(r) = &running {
        settings.outlets = r.outlets();
        if !settings.outlets.is_empty() {
            eprintln!(
                "lookout bench: MQTT/snapshots on, as configured: their cost is in the figures"
            );
        }
    }
    let work = move || {
        let mut spinner = Spinner::new();
        bench::run(&settings, &mut spinner)
    };
    let report = crate::pipeline::unless_stopped_within(&signals.stop, STOP_GRACE, None, work);
    if let Some(r) = running.as_mut() {
        r.stop();
    }
    let report = report?;
    let stopped = signals.stop.load(std::sync::atomic::Ordering::Relaxed);
    let Some(report) = report else {
        eprintln!("lookout bench: stopped by signal before a measurement finished: no report");
        return Ok(BenchOutcome::Ok);
    };
    let report = report?;
    let out = if args.json {
        serde_json::to_string_pretty(&report)
            .map_err(|e| BenchError::Usage(format!("cannot render the report as JSON: {e}")))?
            + "\n"
    } else {
        render_table(&report)
    };
    // A closed pipe (`bench | head`) ends the output, not the process with a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    if stopped {
        eprintln!("lookout bench: stopped by signal: the report covers what ran until then");
    }
    if report.self_check.status == CheckStatus::Failed {
        eprintln!(
            "lookout bench: SELF-CHECK FAILED — the model does not reproduce the golden outputs; the numbers above are not trustworthy (exit status {EXIT_SELF_CHECK_FAILED})"
        );
        return Ok(BenchOutcome::SelfCheckFailed);
    }
    Ok(BenchOutcome::Ok)
}

fn opt<T: std::fmt::Display>(o: &Option<T>) -> String {
    o.as_ref().map_or("?".to_string(), |v| v.to_string())
}

/// The report as text tables, for people: a table printer, linear and long on purpose (one
/// `writeln!` per line of output, in the order printed).
pub fn render_table(r: &BenchReport) -> String {
    let mut o = String::new();
    let s = &r.settings;
    let sys = &r.system;
    let limit = s.limit;
    if r.inference.is_some() {
        let _ = writeln!(
            o,
            "lookout bench {} — the model alone on the golden photos (no pipeline)",
            r.lookout_version
        );
    } else if let Some(f) = &r.fidelity {
        let _ = writeln!(
            o,
            "lookout bench {} — tracking fidelity on {}: {} frames, {}x{}, the model on every frame once ({:.1} s, {:.1} ms per detection)",
            r.lookout_version, f.source, f.frames, f.frame_width, f.frame_height, f.record_s, f.detect_ms
        );
    } else if let Some(f) = &r.input_size {
        let _ = writeln!(
            o,
            "lookout bench {} — model input sizes on {}: {} frames, {}x{}, the model on every frame once at each size{}",
            r.lookout_version,
            f.source,
            f.frames,
            f.frame_width,
            f.frame_height,
            f.truth_file.as_deref().map(|t| format!(", scored against {t}")).unwrap_or_default()
        );
    } else {
        let _ = writeln!(
            o,
            "lookout bench {} — source {} ({}), {limit}{}",
            r.lookout_version,
            s.source,
            s.pacing,
            if r.runs.len() > 1 { " per row" } else { "" }
        );
    }
    let _ = writeln!(
        o,
        "system: {} | {} × {} ({}) | kernel {} | {} | glibc {}",
        sys.board.as_deref().unwrap_or("board unknown"),
        sys.cpu_model,
        sys.cores,
        sys.arch,
        opt(&sys.kernel),
        sys.os.as_deref().unwrap_or("OS unknown"),
        opt(&sys.glibc)
    );
    let _ = writeln!(
        o,
        "tract kernels: {} | dot product: {} | features: {}",
        sys.matmul_kernel,
        if sys.dotprod { "yes" } else { "no" },
        if sys.cpu_features.is_empty() {
            "-".to_string()
        } else {
            sys.cpu_features.join(" ")
        }
    );
    let t = |x: Option<f64>, unit: &str| x.map_or("?".to_string(), |v| format!("{v:.1} {unit}"));
    let _ = writeln!(
        o,
        "thermal: {} → {}, CPU0 clock {} → {}, throttling: {}",
        t(sys.thermal_before.temp_c, "°C"),
        t(sys.thermal_after.temp_c, "°C"),
        t(sys.thermal_before.cpu_mhz, "MHz"),
        t(sys.thermal_after.cpu_mhz, "MHz"),
        match (&sys.thermal_before.throttled, &sys.thermal_after.throttled) {
            (Some(b), Some(a)) if sys.throttled_during_bench => format!(
                "YES during the bench ({b} → {a}: {}) — figures are lower than the machine can do",
                sys.thermal_after.throttled_flags.join(", ")
            ),
            (Some(b), Some(a)) => format!("none ({b} → {a})"),
            _ => "unknown (no vcgencmd)".to_string(),
        }
    );
    let sc = &r.self_check;
    match sc.status {
        CheckStatus::Skipped if sc.golden_dir.is_none() => {
            let _ = writeln!(
                o,
                "{}",
                sc.reason
                    .as_deref()
                    .unwrap_or("self-check skipped: no golden data")
            );
        }
        status => {
            for m in &sc.models {
                let ok = m.images.iter().filter(|x| x.ok).count();
                let _ = writeln!(
                    o,
                    "self-check {}: {} ({}/{} photos{}){}",
                    match m.status {
                        CheckStatus::Passed => "passed",
                        CheckStatus::Failed => "FAILED",
                        CheckStatus::Skipped => "skipped",
                    },
                    m.golden_key,
                    ok,
                    m.images.len(),
                    m.images
                        .iter()
                        .filter_map(|x| x.max_abs_diff)
                        .fold(None, |a: Option<f32>, d| Some(a.map_or(d, |a| a.max(d))))
                        .map_or(String::new(), |d| format!(", raw max |Δ| {d:.1e}")),
                    m.reason
                        .as_deref()
                        .map_or(String::new(), |r| format!(": {r}"))
                );
            }
            if status == CheckStatus::Failed {
                let _ = writeln!(
                    o,
                    "!!! SELF-CHECK FAILED: a model does not reproduce the golden outputs in {} — the numbers below are NOT trustworthy",
                    opt(&sc.golden_dir)
                );
            }
        }
    }
    for run in &r.runs {
        o.push('\n');
        render_run(&mut o, run, r.runs.len() > 1);
    }
    if r.runs.len() > 1 {
        o.push('\n');
        let _ = writeln!(
            o,
            "{:<34} {:>8} {:>9} {:>10} {:>8} {:>11} {:>6}",
            "setting", "fps", "detect/s", "model p50", "CPU %", "proj. CPU %", "keeps"
        );
        for run in &r.runs {
            let model = run
                .stages
                .iter()
                .find(|s| s.name == "model")
                .map_or(0.0, |s| s.p50_ms);
            let _ = writeln!(
                o,
                "{:<34} {:>8} {:>9} {:>7.1} ms {:>8} {:>11.1} {:>6}",
                run.setting,
                fixed(run.fps, 1),
                fixed(run.detect_fps, 2),
                model,
                fixed(run.cpu.utilisation_pct, 1),
                run.keep_up.projected_cpu_pct,
                if run.keep_up.keeps_up { "yes" } else { "no" }
            );
        }
        let _ = writeln!(
            o,
            "(CPU % = process CPU ÷ wall ÷ cores while running as fast as possible; proj. CPU % = one core's % needed at {} fps)",
            r.settings.target_fps
        );
    }
    if let Some(f) = &r.fidelity {
        o.push('\n');
        o.push_str(&render_fidelity(f));
    }
    if let Some(f) = &r.input_size {
        o.push('\n');
        o.push_str(&render_input_size(f));
    }
    if let Some(inf) = &r.inference {
        let m = &inf.model;
        let _ = writeln!(
            o,
            "\nmodel alone: {}, {}, {}x{}, {} thread(s), load+optimize {:.0} ms{}, {} runs per photo",
            m.name,
            m.datum,
            m.input_w,
            m.input_h,
            m.threads,
            m.load_time_ms,
            int8_path(m),
            inf.runs_per_image
        );
        for i in &inf.images {
            let top = i.detections.first().map_or("nothing".to_string(), |d| {
                format!("{} {:.2}", d.label, d.score)
            });
            let _ = writeln!(
                o,
                "  {:<12} median {:>8.2} ms  fastest {:>8.2} ms  top: {top}",
                i.image, i.median_ms, i.min_ms
            );
        }
        let _ = writeln!(
            o,
            "  all photos   median {:>8.2} ms  fastest {:>8.2} ms",
            inf.median_ms, inf.min_ms
        );
        let total: f64 = inf.ops.iter().map(|op| op.ms_per_run).sum();
        if total > 0.0 {
            let _ = writeln!(o, "  per op, mean ms per run (all photos):");
            for op in &inf.ops {
                let _ = writeln!(
                    o,
                    "    {:<28} {:>3} node(s) {:>8.3} ms {:>5.1} %",
                    op.op,
                    op.nodes,
                    op.ms_per_run,
                    100.0 * op.ms_per_run / total
                );
            }
        }
    }
    if let Some(rec) = &r.recommendation {
        let _ = writeln!(o, "{}", rec.text);
    }
    let _ = writeln!(
        o,
        "peak RSS {} | total {:.1} s{}",
        r.peak_rss_kib
            .map_or("?".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        r.total_s,
        if r.trustworthy {
            ""
        } else {
            " | NOT TRUSTWORTHY (see above)"
        }
    );
    o
}

/// One run's block of the table (model line, stage table, rates, CPU, keep-up): a table
/// printer, linear and long on purpose.
fn render_run(o: &mut String, run: &bench::RunFigures, titled: bool) {
    let m = &run.model;
    if titled {
        let _ = writeln!(o, "── {} ──", run.setting);
    }
    let _ = writeln!(
        o,
        "model: {}, {}, {}x{}, {} thread(s), load+optimize {:.0} ms{} | detect every {} | {} | {} ({:.1} s)",
        m.name, m.datum, m.input_w, m.input_h, m.threads, m.load_time_ms, int8_path(m), run.detect_every,
        core_map(&run.core_map).describe(), run.end, run.wall_s
    );
    let _ = writeln!(
        o,
        "{:<38} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "stage", "p50 ms", "p95 ms", "max ms", "count", "CPU share"
    );
    for s in &run.stages {
        let _ = writeln!(
            o,
            "{:<38} {:>9.2} {:>9.2} {:>9.2} {:>9} {:>10}",
            s.what,
            s.p50_ms,
            s.p95_ms,
            s.max_ms,
            s.count,
            s.cpu_share_pct
                .map_or("(in above)".to_string(), |p| format!("{p:.1}%"))
        );
    }
    let f = &run.frames;
    let (Some(fps), Some(detect_fps), Some(capture_fps), Some(cores_busy), Some(util)) = (
        run.fps,
        run.detect_fps,
        run.capture_fps,
        run.cpu.cores_busy,
        run.cpu.utilisation_pct,
    ) else {
        // Rates and CPU shares over an empty or sub-second window mean nothing: say why.
        let _ = writeln!(
            o,
            "end to end: {} captured, {} processed, {} detections in {:.2} s — no rates or CPU shares: {}",
            f.captured,
            f.processed,
            f.detections,
            run.wall_s,
            run.not_measured.as_deref().unwrap_or("not measured")
        );
        render_cameras(o, run);
        render_run_truth(o, run);
        return;
    };
    let _ = writeln!(
        o,
        "end to end: {fps:.1} fps processed, {detect_fps:.2} detections/s, source delivered {capture_fps:.1} fps ({} captured, {} dropped, {} detections skipped while busy), frame age {:.1} ms p50 / {:.1} ms p95",
        f.captured, f.dropped, f.detect_skipped,
        run.frame_age.p50_ms, run.frame_age.p95_ms
    );
    let c = &run.cpu;
    let threads: Vec<String> = c
        .threads
        .iter()
        .map(|t| {
            format!(
                "{} {}%{}",
                t.name.trim_start_matches("lookout-"),
                fixed(t.pct_of_core, 0),
                t.core.map_or(String::new(), |c| format!(" @{c}"))
            )
        })
        .collect();
    let _ = writeln!(
        o,
        "CPU: {cores_busy:.2} cores busy ({util:.0}% of the machine); threads: {}",
        threads.join(", ")
    );
    if !c.per_core.is_empty() {
        let cores: Vec<String> = c
            .per_core
            .iter()
            .map(|k| {
                format!(
                    "core {} ({}) {}%",
                    k.core,
                    k.threads
                        .iter()
                        .map(|t| t.trim_start_matches("lookout-"))
                        .collect::<Vec<_>>()
                        .join("+"),
                    fixed(k.pct, 0)
                )
            })
            .collect();
        let _ = writeln!(o, "pinned cores: {}", cores.join(", "));
    }
    if !c.system_per_core_pct.is_empty() {
        let all: Vec<String> = c
            .system_per_core_pct
            .iter()
            .map(|p| format!("{p:.0}%"))
            .collect();
        let _ = writeln!(
            o,
            "whole machine per core (all processes): {}",
            all.join(" ")
        );
    }
    let k = &run.keep_up;
    let _ = writeln!(
        o,
        "keeps up with {} fps: {} (detector {:.1}/s, needs {:.1}/s; tracker {} fps); projected CPU at {} fps ≈ {:.0}% of one core",
        k.target_fps,
        if k.keeps_up { "yes" } else { "NO" },
        k.detect_capacity_fps,
        k.needed_detect_fps,
        fixed(k.track_capacity_fps, 0),
        k.target_fps,
        k.projected_cpu_pct
    );
    render_cameras(o, run);
    render_run_truth(o, run);
}

/// Each camera's line when a run has several (the figures above are their total).
fn render_cameras(o: &mut String, run: &bench::RunFigures) {
    if run.cameras.len() < 2 {
        return;
    }
    let _ = writeln!(
        o,
        "{:<12} {:>8} {:>9} {:>10} {:>10} {:>9} {:>9} {:>11}  source",
        "camera", "fps", "detect/s", "age p50", "age p95", "frames", "dropped", "detections"
    );
    for c in &run.cameras {
        let _ = writeln!(
            o,
            "{:<12} {:>8} {:>9} {:>7.1} ms {:>7.1} ms {:>9} {:>9} {:>11}  {}",
            c.name,
            fixed(c.fps, 1),
            fixed(c.detect_fps, 2),
            c.frame_age.p50_ms,
            c.frame_age.p95_ms,
            c.frames.processed,
            c.frames.dropped,
            c.frames.detections,
            c.source
        );
    }
}

/// The pipeline's core map back from the report's, for its one description text.
fn core_map(c: &bench::CoreMapFigures) -> CoreMap {
    CoreMap {
        capture: c.capture,
        track: c.track,
        detect: c.detect,
        matmul: c.matmul.clone(),
    }
}

/// A figure with `digits` decimals, or `-` when there is none (a run too short to measure).
fn fixed(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// ", own int8 ops: …" for an int8 model, else nothing.
fn int8_path(m: &crate::bench::report::ModelFigures) -> String {
    m.int8_path
        .as_deref()
        .map(|p| format!(", {p}"))
        .unwrap_or_default()
}
