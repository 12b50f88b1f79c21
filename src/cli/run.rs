//! `lookout run [--config FILE]`: the daemon. With no configuration it runs the built-in
//! defaults — the embedded model on the bundled demo clip — and ends with the clip.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::cli::exit::Failure;
use crate::config::{Config, ConfigErrors, Problem};
use crate::pipeline::{self, EndReason, Part, Parts, RunOptions, Summary};
use crate::service::{Notifier, Signals};

/// Arguments of `lookout run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Configuration file (TOML). Without it: built-in defaults on the bundled demo clip.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write one JSON line per processed frame (tracks with ids and boxes) to FILE.
    #[arg(long, value_name = "FILE")]
    pub tracks_out: Option<PathBuf>,
}

/// Loads the configuration named on the command line, or the built-in defaults.
pub fn load_config(path: Option<&PathBuf>) -> Result<Config, ConfigErrors> {
    match path {
        Some(p) => Config::load(p),
        None => Ok(Config::default()),
    }
}

/// Runs the daemon until the source ends or a signal stops it. A bad configuration is
/// [`Failure::Config`] (exit status 78), anything else [`Failure::Runtime`].
pub fn run(args: &RunArgs) -> Result<(), Failure> {
    match &args.config {
        None => log::info!(
            LOOKOUT_EVENT = "config";
            "no configuration given: built-in defaults, bundled demo clip (640x480, 10 fps, 200 frames) with the built-in model for this CPU; use --config FILE for a camera"
        ),
        Some(p) => log::info!(LOOKOUT_EVENT = "config"; "configuration {}", p.display()),
    }
    let mut cfg = load_config(args.config.as_ref())?;
    let signals =
        Signals::install().map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
    let notifier = Arc::new(Notifier::from_env());
    let mut parts = pipeline::build(&cfg, None).map_err(|e| startup_error(args, e))?;
    let opts = RunOptions {
        tracks_out: args.tracks_out.clone(),
        stop: signals.stop.clone(),
        reload: signals.reload.clone(),
        notifier: Some(notifier.clone()),
        ..RunOptions::default()
    };
    let mut all: Vec<Summary> = Vec::new();
    loop {
        let summary = pipeline::run_with(&cfg, &opts, &mut parts).map_err(anyhow::Error::from)?;
        let end = summary.end.clone();
        all.push(summary);
        if end != EndReason::Reload {
            break;
        }
        signals
            .reload
            .store(false, std::sync::atomic::Ordering::Relaxed);
        notifier.reloading();
        // Loading a new model takes seconds on a Pi (minutes under emulation).
        pipeline::keeping_watchdog_fed(Some(&notifier), || reload(args, &mut cfg, &mut parts));
        notifier.reloaded();
    }
    notifier.stopping();
    if let Some(last) = all.last() {
        log_summary(last, all.iter().map(|s| s.total.processed).sum());
    }
    Ok(())
}

/// A model that cannot be used, or a source spec no backend reads, is a configuration problem
/// (exit 78, no restart loop), even when it slipped past validation (a file changed in
/// between); anything else is a runtime failure.
fn startup_error(args: &RunArgs, e: pipeline::PipelineError) -> Failure {
    use crate::detect::DetectError;
    let problem = match e {
        pipeline::PipelineError::Detect(
            d @ (DetectError::Read { .. }
            | DetectError::NotOnnx { .. }
            | DetectError::WrongShape { .. }),
        ) => Problem::new("model.file", d.to_string()),
        // A spec that can never be a camera (a device that is not a V4L2 capture device,
        // such as a metadata node or /dev/null) is a configuration problem; a camera that is
        // merely missing is waited for (`source.wait_for_camera`).
        pipeline::PipelineError::Source(s) if s.is_configuration_problem() => {
            Problem::new("source.spec", s.to_string())
        }
        other => return Failure::Runtime(other.into()),
    };
    let file = args
        .config
        .as_ref()
        .map_or("<built-in>".into(), |p| p.display().to_string());
    // Where the file still says it, point at the line.
    let text = args.config.as_ref().and_then(|p| {
        crate::files::read_bounded_text(p, crate::files::CONFIG_LIMIT, "configuration file").ok()
    });
    Failure::Config(ConfigErrors::from_problems(
        &file,
        text.as_deref(),
        vec![problem],
    ))
}

/// Applies a new configuration after SIGHUP, restarting only what changed; an invalid one is
/// logged with its reasons and the running one stays.
fn reload(args: &RunArgs, cfg: &mut Config, parts: &mut Parts) {
    let Some(path) = &args.config else {
        log::warn!(LOOKOUT_EVENT = "reload"; "SIGHUP: no configuration file to reload (running built-in defaults)");
        return;
    };
    let new = match Config::load(path) {
        Ok(c) => c,
        Err(errs) => {
            for e in &errs.0 {
                log::error!(LOOKOUT_EVENT = "reload_rejected", CONFIG_KEY = e.key.as_str(); "reload rejected: {e}");
            }
            log::warn!(LOOKOUT_EVENT = "reload_rejected"; "keeping the running configuration");
            return;
        }
    };
    let done = match parts.reconcile(cfg, &new, pipeline::Reconcile::default()) {
        Ok(done) => done,
        Err(e) => {
            log::error!(LOOKOUT_EVENT = "reload_rejected"; "reload rejected: {e}; keeping the running configuration");
            return;
        }
    };
    for (part, e) in &done.kept {
        match part {
            Part::Source => {
                log::error!(LOOKOUT_EVENT = "reload_rejected"; "new source rejected, keeping the old one: {e}")
            }
            _ => {
                log::error!(LOOKOUT_EVENT = "reload_rejected"; "new {} settings rejected: {e}", part.as_str())
            }
        }
    }
    *cfg = new;
    let what = if done.changed.is_empty() {
        "nothing changed".to_string()
    } else {
        let names: Vec<&str> = done.changed.iter().map(|p| p.as_str()).collect();
        names.join(", ")
    };
    log::info!(LOOKOUT_EVENT = "reloaded"; "configuration {} reloaded: {what}", path.display());
}

fn log_summary(s: &Summary, frames: u64) {
    let r = &s.report;
    let how = match s.end {
        EndReason::EndOfSource => "end of source",
        EndReason::Limit => "limit reached",
        EndReason::Stopped => "stopped by signal",
        EndReason::Reload => "reload",
    };
    log::info!(
        LOOKOUT_EVENT = "summary",
        FPS = r.fps,
        DETECT_FPS = r.detect_fps,
        MODEL_TIME_MS = r.model_time_ms,
        MODEL_TIME_P95_MS = r.model_time_p95_ms,
        TRACK_TIME_MS = r.track_time_ms,
        FRAME_AGE_MS = r.frame_age_ms,
        FRAME_AGE_P95_MS = r.frame_age_p95_ms,
        FRAMES_DROPPED = s.total.dropped,
        FRAMES_CORRUPT = s.total.corrupt,
        TRACKS = s.tracks_started,
        TRACKS_LINES_LOST = s.total.tracks_lines_lost,
        FRAMES = frames;
        "summary ({how}): {frames} frames at {:.1} fps, {} detections (model {:.1} ms p50 / {:.1} ms p95), tracking {:.2} ms/frame, frame age {:.0} ms p50, {} dropped, {} track(s) seen{}{}",
        r.fps, s.total.detections, r.model_time_ms, r.model_time_p95_ms, r.track_time_ms, r.frame_age_ms, s.total.dropped, s.tracks_started,
        match s.total.corrupt {
            0 => String::new(),
            n => format!(", {n} damaged frame(s) skipped"),
        },
        match s.total.tracks_lines_lost {
            0 => String::new(),
            n => format!(", {n} tracks file line(s) lost"),
        }
    );
}
