//! `--sweep fidelity`: the model runs once on every frame of the source (the *reference*),
//! then fixed N = 1, 2, 3, 5, 10 and the adaptive schedule are replayed in *lockstep* from that
//! recording ([`crate::fidelity::replay`]) and scored against it. The conversion of the
//! replay's rows into the report's [`FidelityReport`] lives here.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::figures::round;
use super::report::{DetectCauses, FidelityReport, FidelityRow, MissCauses};
use crate::config::Config;
use crate::detect::Detector;
use crate::events::Rules;
use crate::fidelity::replay::{self, CauseCounts, Recording, SweepRow};
use crate::fidelity::truth::Truth;

/// Replays every schedule of [`replay::standard_plans`] (adaptive: `cfg`'s `detect_every` and
/// `idle_detect_interval`) on `rec` with `cfg`'s tracker and the event `rules`, scores each
/// against `truth` when given, and gathers the report.
pub fn fidelity_report(
    cfg: &Config,
    rec: &Recording,
    record_time: Duration,
    rules: &Rules,
    truth: Option<&Truth>,
) -> Result<FidelityReport, crate::track::TrackConfigError> {
    let idle = Duration::from_secs_f64(cfg.pipeline.idle_detect_interval);
    let plans = replay::standard_plans(cfg.pipeline.detect_every, idle);
    let rows = replay::sweep(rec, &cfg.tracker, rules, &plans, truth)?;
    let base = rows
        .first()
        .map(|r| r.cpu_ms_per_frame)
        .filter(|c| *c > 0.0)
        .unwrap_or(1.0);
    let frames = rec.frames.len();
    Ok(FidelityReport {
        source: cfg.source.spec.clone(),
        frames: frames as u64,
        frame_width: rec.frame_size.0,
        frame_height: rec.frame_size.1,
        source_fps: round(rec.fps, 3),
        reference_detections: rows.first().map_or(0, |r| r.fidelity.reference as u64),
        detect_ms: round(rec.detect_ms(), 2),
        gray_ms: round(rec.gray_time.as_secs_f64() * 1e3 / frames.max(1) as f64, 3),
        record_s: round(record_time.as_secs_f64(), 2),
        idle_detect_interval_s: cfg.pipeline.idle_detect_interval,
        truth_file: None,
        rows: rows.iter().map(|r| row(r, base)).collect(),
    })
}

/// Runs the model of `det` on every frame of `cfg`'s source (at most `max_frames`), calling
/// `progress` with a line to show after each frame.
pub fn record(
    det: &Detector,
    cfg: &Config,
    max_frames: Option<usize>,
    progress: &mut dyn FnMut(&str),
) -> Result<Recording, replay::RecordError> {
    let spec = &cfg.source.spec;
    let started = Instant::now();
    let of = max_frames.map_or(String::new(), |m| format!("/{m}"));
    progress(&format!("recording {spec}: the model on every frame"));
    replay::record_with(det, cfg, spec, max_frames, &mut |n| {
        let per = started.elapsed().as_secs_f64() * 1e3 / n.max(1) as f64;
        progress(&format!(
            "recording {spec}: the model on every frame — frame {n}{of} ({per:.0} ms per frame)"
        ));
    })
}

/// Environment: a file to keep the recording in between runs (development: iterate on tracker
/// or planner code without running the model on every frame again).
pub const RECORDING_ENV: &str = "LOOKOUT_FIDELITY_RECORDING";

/// [`record`], unless [`RECORDING_ENV`] names a file holding a recording of the same source,
/// model settings and frame limit: then that one is read instead. A fresh recording is
/// written there (a failure to write is reported as progress, not an error).
pub fn record_or_reuse(
    det: &Detector,
    cfg: &Config,
    max_frames: Option<usize>,
    progress: &mut dyn FnMut(&str),
) -> Result<Recording, replay::RecordError> {
    let Some(path) = std::env::var_os(RECORDING_ENV).map(PathBuf::from) else {
        return record(det, cfg, max_frames, progress);
    };
    let key = replay::recording_key(cfg, max_frames);
    match Recording::load(&key, &path) {
        Ok(Some(rec)) => {
            progress(&format!("reusing the recording in {}", path.display()));
            return Ok(rec);
        }
        Ok(None) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => progress(&format!(
            "could not read the recording in {} ({e}): recording again",
            path.display()
        )),
    }
    let rec = record(det, cfg, max_frames, progress)?;
    if let Err(e) = rec.save(&key, &path) {
        progress(&format!(
            "could not keep the recording in {}: {e}",
            path.display()
        ));
    }
    Ok(rec)
}

fn row(r: &SweepRow, base_cpu: f64) -> FidelityRow {
    let f = &r.fidelity;
    FidelityRow {
        name: match r.schedule {
            "fixed" => format!("N={}", r.detect_every),
            other => other.to_string(),
        },
        schedule: r.schedule.to_string(),
        detect_every: r.detect_every,
        coverage: round(f.coverage(), 4),
        covered: f.covered as u64,
        id_switches: f.id_switches as u64,
        matched_track_frames: f.matched_track_frames as u64,
        id_switches_per_100: round(f.switches_per_100(), 3),
        detections: r.causes.total(),
        detections_per_frame: round(r.detections_per_frame, 4),
        causes: causes(&r.causes),
        misses: misses(&r.misses),
        cpu_ms_per_frame: round(r.cpu_ms_per_frame, 3),
        cpu_vs_n1: round(r.cpu_ms_per_frame / base_cpu, 3),
        events: r.events,
        truth: r.truth.clone(),
    }
}

fn causes(c: &CauseCounts) -> DetectCauses {
    DetectCauses {
        interval: c.interval,
        motion: c.motion,
        uncertain: c.uncertain,
        idle: c.idle,
    }
}

fn misses(m: &crate::fidelity::Misses) -> MissCauses {
    MissCauses {
        unreported: m.unreported as u64,
        weak: m.weak as u64,
        moved: m.moved as u64,
        jumped: m.jumped as u64,
        label: m.label as u64,
        at_detection: m.at_detection as u64,
    }
}
