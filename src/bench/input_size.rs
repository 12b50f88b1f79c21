//! `--sweep input-size`: which model input size to run at, measured. For each size the model
//! runs once on every frame of the source (a fidelity recording); each recording is scored
//! against the ground truth frame by frame — the model's own reported boxes, recall split by
//! the true object's height, and false boxes — and replayed at the configured fixed interval
//! and the adaptive schedule for the event scores. The model alone is timed apart, every size
//! once per round on the same prepared frame, rounds interleaved, so that a busy machine
//! slows every size alike.

use std::time::Instant;

use super::fidelity;
use super::figures::round;
use super::report::{InputSizeReport, InputSizeRow};
use crate::config::{auto_size, Config, ConfigErrors, InputSize};
use crate::detect::Detector;
use crate::fidelity::detections::score_detections;
use crate::fidelity::truth::{Truth, TruthScores};
use crate::geom::Mapping;
use crate::pipeline::PipelineError;
use crate::preprocess::{self, ModelInput, Scratch};
use crate::source::{self, Pacing, SourceOptions};

/// The sizes swept besides the declared and the `"auto"` ones: from 320×256 to the 640×480
/// of a VGA camera, all 4:3.
pub const SIZES: [(u32, u32); 5] = [(320, 256), (416, 320), (416, 416), (512, 384), (640, 480)];

/// Rounds of the interleaved model timing.
const TIMING_ROUNDS: u32 = 12;
/// Frames of the source the timing cycles through.
const TIMING_FRAMES: usize = 4;

/// Why the sweep could not run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A model that cannot be loaded at a size, a source that cannot be opened.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// `[events]` or `[tracker]` settings the replay cannot use.
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    /// A size's recording or its frames could not be made.
    #[error("--sweep input-size: {0}")]
    Record(String),
}

/// One size's model, and the timing frames prepared for it.
struct Sized {
    det: Detector,
    inputs: Vec<ModelInput>,
    times_ms: Vec<f64>,
}

/// Runs the sweep on `base`'s source (at most `max_frames` frames), scoring against `truth`
/// when given; `progress` gets a line per phase.
///
/// # Errors
/// A model that cannot be loaded at a size, a source that cannot be recorded.
pub fn sweep(
    base: &Config,
    max_frames: Option<usize>,
    truth: Option<&Truth>,
    progress: &mut dyn FnMut(&str),
) -> Result<InputSizeReport, SweepError> {
    let first = first_frames(base)?;
    let frame_size = first
        .first()
        .map_or((base.source.width, base.source.height), |f| {
            (f.width, f.height)
        });
    let auto = auto_size(frame_size.0, frame_size.1);
    let declared = {
        let mut c = base.clone();
        c.model.input_size = InputSize::default();
        let det = Detector::load(&c.detector()).map_err(PipelineError::from)?;
        (det.info().input_w, det.info().input_h)
    };
    let mut sizes: Vec<(u32, u32)> = SIZES.to_vec();
    for extra in [declared, auto] {
        if !sizes.contains(&extra) {
            sizes.push(extra);
        }
    }
    sizes.sort_by_key(|&(w, h)| (w * h, w));
    let setup = Setup {
        base,
        frame_size,
        first: &first,
        max_frames,
        truth,
    };
    let mut rows = Vec::new();
    let mut models = Vec::new();
    let mut frames = 0;
    for (i, &(w, h)) in sizes.iter().enumerate() {
        let tag = format!("[{}/{}] {w}x{h}", i + 1, sizes.len());
        let (row, model, n) = measure(&setup, (w, h), &tag, progress)?;
        frames = n;
        rows.push(row);
        models.push(model);
    }
    progress(&format!(
        "timing the model alone: {TIMING_ROUNDS} rounds, every size once a round"
    ));
    time_interleaved(&mut models);
    let declared_ms = sizes
        .iter()
        .position(|&s| s == declared)
        .map(|i| median(&models[i].times_ms));
    for (row, m) in rows.iter_mut().zip(&models) {
        let ms = median(&m.times_ms);
        row.model_ms = round(ms, 2);
        row.model_vs_declared = declared_ms
            .filter(|d| *d > 0.0)
            .map_or(0.0, |d| round(ms / d, 3));
    }
    Ok(InputSizeReport {
        source: base.source.spec.clone(),
        frames,
        frame_width: frame_size.0,
        frame_height: frame_size.1,
        truth_file: None,
        declared: [declared.0, declared.1],
        auto: [auto.0, auto.1],
        timing_rounds: TIMING_ROUNDS,
        rows,
    })
}

/// What every size of the sweep is measured on.
struct Setup<'a> {
    base: &'a Config,
    /// The source's frame size.
    frame_size: (u32, u32),
    /// The source's first frames, for the timing.
    first: &'a [crate::frame::Frame],
    max_frames: Option<usize>,
    truth: Option<&'a Truth>,
}

/// Records the source with the model at `w`×`h` and scores the recording: the size's row (its
/// model time still to be filled), its model with the timing frames, the frames recorded.
fn measure(
    setup: &Setup,
    (w, h): (u32, u32),
    tag: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(InputSizeRow, Sized, u64), SweepError> {
    let Setup {
        base,
        frame_size,
        first,
        max_frames,
        truth,
    } = *setup;
    progress(&format!("{tag}: loading the model"));
    let mut cfg = base.clone();
    cfg.model.input_size = InputSize::List(vec![w, h]);
    let det = Detector::load(&cfg.detector()).map_err(PipelineError::from)?;
    let t0 = Instant::now();
    let rec = fidelity::record(&det, &cfg, max_frames, &mut |line| {
        progress(&format!("{tag}: {line}"))
    })
    .map_err(|e| SweepError::Record(format!("at {w}x{h}: {e}")))?;
    let frames = rec.frames.len() as u64;
    let (mut fixed, mut adaptive) = (None, None);
    let mut detections = None;
    if let Some(t) = truth {
        let rules = cfg.event_rules()?;
        let report = fidelity::fidelity_report(&cfg, &rec, t0.elapsed(), &rules, Some(t))
            .map_err(|e| SweepError::Record(format!("[tracker] settings: {e}")))?;
        let pick = |pred: &dyn Fn(&str, u32) -> bool| -> Option<TruthScores> {
            report
                .rows
                .iter()
                .find(|r| pred(&r.schedule, r.detect_every))
                .and_then(|r| r.truth.clone())
        };
        let every = cfg.pipeline.detect_every;
        fixed = pick(&|s, n| s == "fixed" && n == every);
        adaptive = pick(&|s, _| s == "adaptive");
        detections = Some(score_detections(
            t,
            rec.frames.iter().map(|f| f.round.reported.as_slice()),
            Some(rules.classes.as_slice()).filter(|c| !c.is_empty()),
        ));
    }
    let map = Mapping::new(frame_size.0, frame_size.1, w, h, cfg.model.resize);
    let content = f64::from(frame_size.0)
        * f64::from(map.scale_x)
        * f64::from(frame_size.1)
        * f64::from(map.scale_y);
    let padding = 1.0 - content / (f64::from(w) * f64::from(h));
    let row = InputSizeRow {
        width: w,
        height: h,
        scale: round(f64::from(map.scale_x), 4),
        padding: round(padding.clamp(0.0, 1.0), 4),
        model_ms: 0.0,
        model_vs_declared: 0.0,
        detect_ms: round(rec.detect_ms(), 2),
        detections,
        events_fixed: fixed,
        events_adaptive: adaptive,
    };
    let inputs = prepare_inputs(&det, &cfg, first, tag)?;
    Ok((
        row,
        Sized {
            det,
            inputs,
            times_ms: Vec::new(),
        },
        frames,
    ))
}

/// Runs every size's model once per round on the same frame, rounds interleaved; a failed
/// run adds no time.
fn time_interleaved(models: &mut [Sized]) {
    for r in 0..TIMING_ROUNDS as usize {
        for m in models.iter_mut() {
            let Some(input) = m.inputs.get(r % m.inputs.len().max(1)) else {
                continue;
            };
            let t0 = Instant::now();
            if m.det.run_input(input).is_ok() {
                m.times_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
}

/// The first frames of the source (for the frame size and the timing).
fn first_frames(cfg: &Config) -> Result<Vec<crate::frame::Frame>, SweepError> {
    let opts = SourceOptions {
        pace: Pacing::AsFastAsPossible,
        ..SourceOptions::default()
    };
    let mut src = source::open(&cfg.source.spec, &opts).map_err(PipelineError::from)?;
    let mut frames = Vec::new();
    while frames.len() < TIMING_FRAMES {
        match src.next().map_err(PipelineError::from)? {
            Some(f) => frames.push(f),
            None => break,
        }
    }
    Ok(frames)
}

/// The timing frames as `det`'s inputs.
fn prepare_inputs(
    det: &Detector,
    cfg: &Config,
    frames: &[crate::frame::Frame],
    tag: &str,
) -> Result<Vec<ModelInput>, SweepError> {
    let (w, h) = (det.info().input_w, det.info().input_h);
    let mut scratch = Scratch::new();
    frames
        .iter()
        .map(|f| {
            let mut input = det.new_input();
            preprocess::frame_to_input(f, w, h, cfg.model.resize, &mut input, &mut scratch)
                .map_err(|e| SweepError::Record(format!("{tag}: {e}")))?;
            Ok(input)
        })
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}
