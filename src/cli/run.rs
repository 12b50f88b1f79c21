//! `lookout run [--config FILE]`: the daemon. With no configuration it runs the built-in
//! defaults — the embedded model on the bundled demo clip — and ends with the clip.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use clap::Args;

use crate::cli::exit::Failure;
use crate::cli::outlets::Running;
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
///
/// The signal handlers come first, before any work: a SIGHUP while starting is a reload once
/// running, a SIGTERM at any stage (reading the configuration, loading the model, a reload
/// loading a new one) ends the daemon within a second, with status 0.
pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let signals =
        Signals::install().map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
    match &args.config {
        None => log::info!(
            LOOKOUT_EVENT = "config";
            "no configuration given: built-in defaults, bundled demo clip (640x480, 10 fps, 200 frames) with the built-in model for this CPU; use --config FILE for a camera"
        ),
        Some(p) => log::info!(LOOKOUT_EVENT = "config"; "configuration {}", p.display()),
    }
    let cfg = load_config(args.config.as_ref())?;
    check_tracks_out(args, &cfg)?;
    let notifier = Arc::new(Notifier::from_env());
    let stopped_while = |what: &str| {
        log::info!(LOOKOUT_EVENT = "summary"; "stopped by signal while {what}");
        notifier.stopping();
        Ok(())
    };
    if signals.stop.load(Ordering::Relaxed) {
        return stopped_while("reading the configuration");
    }
    let built = {
        let cfg = cfg.clone();
        // No watchdog pings before READY: start-up has systemd's TimeoutStartSec instead.
        pipeline::unless_stopped(&signals.stop, None, move || {
            pipeline::build_each_camera(&cfg.cameras(), None)
        })
        .map_err(anyhow::Error::from)?
    };
    let Some(built) = built else {
        return stopped_while("starting (loading the model, opening the source)");
    };
    // With `[[camera]]` tables, a source is named by its camera's key.
    let spec_key = |i: usize| match cfg.camera.is_empty() {
        true => "source.spec".to_string(),
        false => format!("camera[{i}].source.spec"),
    };
    let mut parts = built.map_err(|(i, e)| startup_error(args, &spec_key(i), e))?;
    let mut cfg = cfg;
    let mut running = Running::start(&cfg, args.config.as_deref()).map_err(anyhow::Error::msg)?;
    let mut opts = RunOptions {
        tracks_out: args.tracks_out.clone(),
        stop: signals.stop.clone(),
        reload: signals.reload.clone(),
        notifier: Some(notifier.clone()),
        outlets: running.outlets(),
        switches: running.switches(),
        ..RunOptions::default()
    };
    // Only the last run's summaries are kept (a daemon reloaded every minute for months must
    // not grow), and the frames of all of them, per camera.
    let mut frames = Frames::default();
    let last = loop {
        let summaries = pipeline::run_cameras(&cfg.cameras(), &opts, &mut parts).map_err(|e| {
            running.stop();
            anyhow::Error::from(e)
        })?;
        frames.add(&summaries);
        if !summaries.iter().any(|s| s.end == EndReason::Reload) {
            break summaries;
        }
        signals.reload.store(false, Ordering::Relaxed);
        notifier.reloading();
        // Loading a new model takes seconds on a Pi (minutes under emulation): the watchdog is
        // fed meanwhile, and a stop does not wait for it.
        let args2 = args.clone();
        let old = cfg.clone();
        let reloaded = pipeline::unless_stopped(&signals.stop, Some(&notifier), move || {
            reload(&args2, &mut cfg, &mut parts);
            (cfg, parts)
        })
        .map_err(anyhow::Error::from)?;
        let Some((c, p)) = reloaded else {
            frames.log(&summaries);
            running.stop();
            return stopped_while("reloading");
        };
        (cfg, parts) = (c, p);
        if let Err(e) = running.reconfigure(&old, &cfg, args.config.as_deref()) {
            log::error!(LOOKOUT_EVENT = "reload_rejected"; "MQTT/snapshots not restarted: {e}");
        }
        opts.outlets = running.outlets();
        // What the ended run and a replaced model freed goes back to the kernel now, not at
        // the next stats report: a reload costs no memory however often it comes.
        crate::memory::release_free_memory();
        notifier.reloaded();
    };
    notifier.stopping();
    frames.log(&last);
    running.stop();
    Ok(())
}

/// The frames each camera processed over every run of the daemon.
#[derive(Default)]
struct Frames(std::collections::BTreeMap<String, u64>);

impl Frames {
    fn add(&mut self, summaries: &[Summary]) {
        for s in summaries {
            *self.0.entry(s.camera.clone()).or_insert(0) += s.total.processed;
        }
    }

    /// The `summary` journal entry of each camera's last run.
    fn log(&self, summaries: &[Summary]) {
        for s in summaries {
            log_summary(s, self.0.get(&s.camera).copied().unwrap_or(0));
        }
    }
}

/// `--tracks-out FILE` that can never work (a name longer than the system allows, the
/// configuration or the model itself) is refused before anything starts (exit 64).
fn check_tracks_out(args: &RunArgs, cfg: &Config) -> Result<(), Failure> {
    let Some(path) = &args.tracks_out else {
        return Ok(());
    };
    let mut keep = Vec::new();
    if let Some(c) = &args.config {
        keep.push((c.as_path(), "configuration file"));
    }
    let model = std::path::Path::new(&cfg.model.file);
    if !cfg.model.file.is_empty() {
        keep.push((model, "model file"));
    }
    match crate::output::tracks_path_problem(path, &keep) {
        Some(why) => Err(Failure::Usage(format!("--tracks-out: {why}"))),
        None => Ok(()),
    }
}

/// A model that cannot be used, or a source spec no backend reads (named `spec_key`), is a
/// configuration problem
/// (exit 78, no restart loop), even when it slipped past validation (a file changed in
/// between); anything else is a runtime failure.
fn startup_error(args: &RunArgs, spec_key: &str, e: pipeline::PipelineError) -> Failure {
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
            Problem::new(spec_key, s.to_string())
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
fn reload(args: &RunArgs, cfg: &mut Config, parts: &mut Vec<Parts>) {
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
    let how = pipeline::Reconcile::default();
    let done = match pipeline::reconcile_cameras(parts, &cfg.cameras(), &new.cameras(), how) {
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
    use crate::stats::{log_event, JournalField as F};
    let r = &s.report;
    let how = match s.end {
        EndReason::EndOfSource => "end of source",
        EndReason::Limit => "limit reached",
        EndReason::Stopped => "stopped by signal",
        EndReason::Reload => "reload",
    };
    log_event(
        module_path!(),
        "summary",
        Some(&s.camera),
        &[
            F::Fps(r.fps),
            F::DetectFps(r.detect_fps),
            F::ModelTimeMs(r.model_time_ms),
            F::ModelTimeP95Ms(r.model_time_p95_ms),
            F::TrackTimeMs(r.track_time_ms),
            F::FrameAgeMs(r.frame_age_ms),
            F::FrameAgeP95Ms(r.frame_age_p95_ms),
            F::FramesDropped(s.total.dropped),
            F::FramesCorrupt(s.total.corrupt),
            F::Tracks(s.tracks_started),
            F::Events(s.events_started),
            F::TracksLinesLost(s.total.tracks_lines_lost),
            F::Frames(frames),
        ],
        format_args!(
            "summary ({how}): {frames} frames at {:.1} fps, {} detections (model {:.1} ms p50 / {:.1} ms p95), tracking {:.2} ms/frame, frame age {:.0} ms p50, {} dropped, {} event(s) from {} track(s){}{}",
            r.fps, s.total.detections, r.model_time_ms, r.model_time_p95_ms, r.track_time_ms, r.frame_age_ms, s.total.dropped, s.events_started, s.tracks_started,
            match s.total.corrupt {
                0 => String::new(),
                n => format!(", {n} damaged frame(s) skipped"),
            },
            match s.total.tracks_lines_lost {
                0 => String::new(),
                n => format!(", {n} tracks file line(s) lost"),
            }
        ),
    );
}
