//! Lockstep runs replayed without re-running the model: a [`Recording`] holds, for every frame
//! of a source, the tracker's gray plane and the model's detections; [`simulate`] then steps a
//! [`Tracker`] and a [`Planner`] through it exactly as the pipeline does in lockstep (step the
//! frame, decide, and when a detection is due apply that frame's detections before the next
//! frame), so any schedule and tracker setting is scored in milliseconds.
//!
//! Why this equals a lockstep run of the pipeline: in lockstep the tracker takes frame `k + 1`
//! only after the detection it asked for on frame `k` came back, and the detector's answer
//! for frame `k` is a pure function of the frame (same model, same preprocessing). The
//! reference detections *are* those answers. What the replay cannot show is the detector's
//! latency in a live run (there the detections of frame `k` arrive a few frames later).

use std::io::{self, BufRead as _, Read as _, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use super::truth::{Truth, TruthScores};
use crate::config::Config;
use crate::detect::Detector;
use crate::events::{Events, Rules};
use crate::fidelity::LabelledBox;
use crate::frame::GrayImage;
use crate::geom::BBox;
use crate::preprocess::{self, Scratch};
use crate::schedule::{Cause, Planner, PlannerConfig, ScheduleKind};
use crate::track::{Track, TrackConfigError, TrackEvent, Tracker, TrackerConfig};
use crate::vocab::{Detection, DetectionRound};

/// One frame of a [`Recording`].
#[derive(Clone, Debug)]
pub struct RecordedFrame {
    /// The source's frame number.
    pub seq: u64,
    /// The frame's time in the recording (frame number ÷ the source's frame rate).
    pub at: Duration,
    /// The tracker's gray plane of the frame.
    pub gray: GrayImage,
    /// The model's detection round on the frame (the configuration's label filter applied).
    pub round: DetectionRound,
}

/// Every frame of a source with its gray plane and detections, and what they cost.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// The frames, in order.
    pub frames: Vec<RecordedFrame>,
    /// Frame → tensor, model and decoding, summed over every frame (wall clock, the model's
    /// own threads).
    pub detect_time: Duration,
    /// Frame → gray plane, summed.
    pub gray_time: Duration,
    /// The source's frame size.
    pub frame_size: (u32, u32),
    /// The source's frame rate (10 fps when it says none).
    pub fps: f64,
    /// The model's reporting threshold the rounds were split at (saved with them, so a
    /// loaded recording splits its detections the same way).
    pub threshold: f32,
}

impl Recording {
    /// Mean time of one detection (preprocessing, model, decoding).
    pub fn detect_ms(&self) -> f64 {
        self.detect_time.as_secs_f64() * 1e3 / self.frames.len().max(1) as f64
    }

    /// The detections per frame as labelled boxes (the fidelity reference): one per object,
    /// so of a `car` and a `truck` boxing the same object only the better-scoring one counts
    /// ([`crate::track::duplicates`]).
    pub fn reference(&self) -> Vec<Vec<LabelledBox>> {
        self.frames
            .iter()
            .map(|f| {
                let reported = &f.round.reported;
                let primary = crate::track::duplicates(reported, &vec![true; reported.len()]);
                reported
                    .iter()
                    .zip(primary)
                    .filter(|(_, p)| p.is_none())
                    .map(|(d, _)| LabelledBox {
                        id: 0,
                        class_id: d.class_id,
                        bbox: d.bbox,
                    })
                    .collect()
            })
            .collect()
    }
}

/// The header of a saved [`Recording`] (one JSON line; the gray planes' bytes follow it).
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedHeader {
    /// What the recording was made of (see [`Recording::save`]).
    key: String,
    detect_time_s: f64,
    gray_time_s: f64,
    frame_size: (u32, u32),
    fps: f64,
    #[serde(default)]
    threshold: f32,
    frames: Vec<SavedFrame>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SavedFrame {
    seq: u64,
    at_s: f64,
    width: u32,
    height: u32,
    scale: f32,
    /// `(class_id, score, [x0, y0, x1, y1])`.
    dets: Vec<(usize, f32, [f32; 4])>,
}

/// What a recording depends on besides the tracker: the source, the model and its settings,
/// the weak detections' floor, the gray plane's width, the label filter and the frame limit
/// (the key [`Recording::save`] stores).
pub fn recording_key(cfg: &Config, max_frames: Option<usize>) -> String {
    let m = &cfg.model;
    format!(
        "{}|{}|{:?}|{:?}|{}|{}|{}|{}|{:?}|{}|{:?}|{max_frames:?}",
        cfg.source.spec,
        m.file,
        m.precision,
        m.input_size,
        m.threshold,
        cfg.detection_floor(),
        m.iou_threshold,
        m.max_detections,
        m.resize,
        cfg.pipeline.track_width,
        cfg.label_filter()
    )
}

impl Recording {
    /// Writes the recording to `path` (a JSON header line holding `key`, the detections and
    /// timings, then every gray plane's bytes), so that tracker or planner changes can be
    /// replayed without running the model again (`LOOKOUT_FIDELITY_RECORDING`).
    pub fn save(&self, key: &str, path: &Path) -> io::Result<()> {
        let header = SavedHeader {
            key: key.to_string(),
            detect_time_s: self.detect_time.as_secs_f64(),
            gray_time_s: self.gray_time.as_secs_f64(),
            frame_size: self.frame_size,
            fps: self.fps,
            threshold: self.threshold,
            frames: self
                .frames
                .iter()
                .map(|f| SavedFrame {
                    seq: f.seq,
                    at_s: f.at.as_secs_f64(),
                    width: f.gray.width,
                    height: f.gray.height,
                    scale: f.gray.scale,
                    dets: f
                        .round
                        .all()
                        .map(|d| (d.class_id, d.score, d.bbox.to_array()))
                        .collect(),
                })
                .collect(),
        };
        let mut out = io::BufWriter::new(std::fs::File::create(path)?);
        serde_json::to_writer(&mut out, &header)?;
        out.write_all(b"\n")?;
        for f in &self.frames {
            out.write_all(&f.gray.data)?;
        }
        out.flush()
    }

    /// Reads a recording written by [`Recording::save`]; `Ok(None)` when it was made with
    /// another `key` (another source, model or gray width).
    pub fn load(key: &str, path: &Path) -> io::Result<Option<Recording>> {
        let file = std::fs::File::open(path)?;
        let file_len = file.metadata()?.len();
        let mut input = io::BufReader::new(file);
        let mut line = String::new();
        input.read_line(&mut line)?;
        let header: SavedHeader = serde_json::from_str(&line)?;
        if header.key != key {
            return Ok(None);
        }
        // The planes must fill the rest of the file exactly: a damaged header must not make
        // us allocate what is not there.
        let planes = header.frames.iter().try_fold(0u64, |sum, f| {
            sum.checked_add(u64::from(f.width).checked_mul(u64::from(f.height))?)
        });
        if planes != Some(file_len.saturating_sub(line.len() as u64)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the gray planes do not match the header",
            ));
        }
        let mut frames = Vec::with_capacity(header.frames.len());
        for f in header.frames {
            let mut data = vec![0u8; f.width as usize * f.height as usize];
            input.read_exact(&mut data)?;
            frames.push(RecordedFrame {
                seq: f.seq,
                at: Duration::try_from_secs_f64(f.at_s).unwrap_or_default(),
                gray: GrayImage {
                    width: f.width,
                    height: f.height,
                    scale: f.scale,
                    data,
                },
                round: DetectionRound::split(
                    f.dets
                        .into_iter()
                        .map(|(class_id, score, [x0, y0, x1, y1])| Detection {
                            class_id,
                            score,
                            bbox: BBox::new(x0, y0, x1, y1),
                        })
                        .collect(),
                    header.threshold,
                    None,
                ),
            });
        }
        Ok(Some(Recording {
            frames,
            detect_time: Duration::try_from_secs_f64(header.detect_time_s).unwrap_or_default(),
            gray_time: Duration::try_from_secs_f64(header.gray_time_s).unwrap_or_default(),
            frame_size: header.frame_size,
            fps: header.fps,
            threshold: header.threshold,
        }))
    }
}

pub use super::RecordError;

/// Runs the model of `cfg` on every frame of `spec` (at most `max_frames`), as fast as
/// possible, and keeps each frame's gray plane and detections.
pub fn record(
    cfg: &Config,
    spec: &str,
    max_frames: Option<usize>,
) -> Result<Recording, RecordError> {
    let det = Detector::load(&cfg.detector())?;
    record_with(&det, cfg, spec, max_frames, &mut |_| {})
}

/// [`record`] with a loaded model (`cfg`'s gray-plane width and label filter apply);
/// `on_frame(n)` is called after each of the `n` frames recorded so far (progress).
pub fn record_with(
    det: &Detector,
    cfg: &Config,
    spec: &str,
    max_frames: Option<usize>,
    on_frame: &mut dyn FnMut(usize),
) -> Result<Recording, RecordError> {
    let src_err = RecordError::of_source(spec);
    let mut src = super::open_recording(spec)?;
    let fps = src
        .fps()
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(10.0);
    let labels = cfg.label_filter();
    let (w, h) = (det.info().input_w, det.info().input_h);
    let mut input = det.new_input();
    let mut scratch = Scratch::default();
    // The model's outputs, reused from frame to frame as the daemon's detector does.
    let mut raw = crate::detect::RawOutputs::default();
    let mut rec = Recording {
        fps,
        threshold: cfg.model.threshold,
        ..Recording::default()
    };
    let floor = cfg.detection_floor();
    while let Some(frame) = src.next().map_err(&src_err)? {
        if max_frames.is_some_and(|m| rec.frames.len() >= m) {
            break;
        }
        let frame_err = |e: preprocess::PreprocessError| RecordError::Frame {
            seq: frame.seq,
            message: e.to_string(),
        };
        let t0 = Instant::now();
        let mut gray = GrayImage::default();
        preprocess::frame_to_gray(&frame, cfg.pipeline.track_width, &mut gray, &mut scratch)
            .map_err(frame_err)?;
        let t1 = Instant::now();
        let map =
            preprocess::frame_to_input(&frame, w, h, cfg.model.resize, &mut input, &mut scratch)
                .map_err(frame_err)?;
        det.run_input_into(&input, &mut raw)?;
        let round = det.detect_round(&raw, &map, floor, labels.as_deref());
        rec.gray_time += t1 - t0;
        rec.detect_time += t1.elapsed();
        rec.frame_size = (frame.width, frame.height);
        rec.frames.push(RecordedFrame {
            seq: frame.seq,
            at: Duration::from_secs_f64(rec.frames.len() as f64 / fps),
            gray,
            round,
        });
        on_frame(rec.frames.len());
    }
    if rec.frames.is_empty() {
        return Err(RecordError::Empty(spec.to_string()));
    }
    Ok(rec)
}

/// Detections asked for, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CauseCounts {
    /// `detect_every` frames passed.
    pub interval: u64,
    /// Motion outside the tracks.
    pub motion: u64,
    /// A track needed fresh evidence.
    pub uncertain: u64,
    /// The idle heartbeat.
    pub idle: u64,
}

impl CauseCounts {
    /// Counts one detection of `cause`.
    pub fn add(&mut self, cause: Cause) {
        match cause {
            Cause::Interval => self.interval += 1,
            Cause::Motion => self.motion += 1,
            Cause::Uncertain => self.uncertain += 1,
            Cause::Idle => self.idle += 1,
        }
    }

    /// All detections.
    pub fn total(&self) -> u64 {
        self.interval + self.motion + self.uncertain + self.idle
    }
}

/// What a replayed run produced.
#[derive(Clone, Debug, Default)]
pub struct SimRun {
    /// The confirmed tracks of every frame, as the tracks file would hold them.
    pub tracks: Vec<Vec<LabelledBox>>,
    /// Detections run, by cause.
    pub causes: CauseCounts,
    /// Every detection run: the frame's index in the recording and why.
    pub asked: Vec<(usize, Cause)>,
    /// By frame: the detection round the tracker got on that frame (reported and weak
    /// boxes), if one ran.
    pub rounds: Vec<Option<super::Round>>,
    /// Tracker steps, detection matching and scheduling decisions, summed (this thread).
    pub track_time: Duration,
    /// The events in view on every frame (`id` = the event id), by the `[events]` rules.
    pub events: Vec<Vec<LabelledBox>>,
    /// Events started.
    pub events_started: u64,
    /// Zoomed looks run ([`simulate_with_looks`]).
    pub looks: u64,
}

/// Replays `rec` in lockstep with a tracker of `tracker` settings, the event rules `rules`
/// and a planner of `plan`.
pub fn simulate(
    rec: &Recording,
    tracker: &TrackerConfig,
    rules: &Rules,
    plan: PlannerConfig,
) -> Result<SimRun, TrackConfigError> {
    simulate_with_looks(rec, tracker, rules, plan, None)
}

/// [`simulate`] with zoomed looks between detections: on a frame without a detection, when
/// `looks` says one is due, the tracker takes that tile's recorded detections
/// ([`Tracker::apply_look`]).
pub fn simulate_with_looks(
    rec: &Recording,
    tracker: &TrackerConfig,
    rules: &Rules,
    plan: PlannerConfig,
    mut looks: Option<(&super::looks::LookRecording, super::looks::LookPlanner)>,
) -> Result<SimRun, TrackConfigError> {
    let mut t = Tracker::new(tracker.clone())?;
    let mut events = Events::new(rules.clone());
    let mut planner = Planner::new(plan);
    let mut run = SimRun::default();
    for (k, f) in rec.frames.iter().enumerate() {
        let t0 = Instant::now();
        t.step(f.seq, &f.gray);
        let detected = planner.decide(&f.gray, &t, f.at);
        if let Some((lr, lp)) = looks.as_mut() {
            if detected.is_some() {
                lp.detected();
            } else if let Some(tile) = lp.decide(&t, &lr.tiles) {
                if let Some(round) = lr.rounds.get(k).and_then(|r| r.get(tile)) {
                    t.apply_look(f.seq, &usable(round, tracker), &lr.tiles[tile]);
                    run.looks += 1;
                }
            }
        }
        if let Some(cause) = detected {
            planner.handed_out(cause, f.at);
            let round = usable(&f.round, tracker);
            let outcome = t.apply_detection_round(f.seq, &round);
            planner.applied(outcome.started);
            run.causes.add(cause);
            run.asked.push((k, cause));
            run.rounds.resize(k, None);
            run.rounds.push(Some(super::Round {
                reported: round.reported.iter().map(labelled).collect(),
                weak: round.weak.iter().map(labelled).collect(),
            }));
        }
        let ended: Vec<Track> = t
            .drain_events()
            .into_iter()
            .filter_map(|e| match e {
                TrackEvent::Ended(tr) => Some(tr),
                TrackEvent::Started(_) => None,
            })
            .collect();
        events.update_seen(
            f.seq,
            f.at,
            rec.frame_size,
            Some(&f.gray),
            t.confirmed(),
            &ended,
        );
        events.drain();
        run.track_time += t0.elapsed();
        run.tracks.push(
            t.tracks()
                .map(|tr| LabelledBox {
                    id: tr.id,
                    class_id: tr.class_id,
                    bbox: tr.bbox,
                })
                .collect(),
        );
        run.events.push(
            events
                .in_view()
                .map(|e| LabelledBox {
                    id: e.id,
                    class_id: e.class_id,
                    bbox: e.bbox,
                })
                .collect(),
        );
    }
    run.events_started = events.started();
    Ok(run)
}

/// `round` as the tracker takes it: weak detections under `continue_score` dropped.
fn usable(round: &DetectionRound, tracker: &TrackerConfig) -> DetectionRound {
    let mut round = round.clone();
    round.weak.retain(|d| d.score >= tracker.continue_score);
    round
}

/// The fixed intervals a fidelity sweep compares (N = 1 first: the id-switch reference).
pub const FIXED_INTERVALS: [u32; 5] = [1, 2, 3, 5, 10];

/// The schedules of a fidelity sweep: fixed N over [`FIXED_INTERVALS`], then the adaptive
/// schedule with `detect_every` as its longest gap and `idle_interval` as its heartbeat.
pub fn standard_plans(detect_every: u32, idle_interval: Duration) -> Vec<PlannerConfig> {
    let mut plans: Vec<PlannerConfig> = FIXED_INTERVALS
        .iter()
        .map(|&n| PlannerConfig::new(ScheduleKind::Fixed, n, idle_interval))
        .collect();
    plans.push(PlannerConfig::new(
        ScheduleKind::Adaptive,
        detect_every,
        idle_interval,
    ));
    plans
}

/// One row of a fidelity sweep.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepRow {
    /// `"fixed"` or `"adaptive"`.
    pub schedule: &'static str,
    /// The fixed interval, or the adaptive schedule's longest gap.
    pub detect_every: u32,
    /// Coverage and id switches against the reference.
    pub fidelity: super::Fidelity,
    /// Where the uncovered reference detections were lost.
    pub misses: super::Misses,
    /// Detections run, by cause.
    pub causes: CauseCounts,
    /// Detections per frame.
    pub detections_per_frame: f64,
    /// Estimated CPU per frame, ms: the gray plane and the tracker's work as measured in the
    /// replay, plus the recording's mean detection time × detections per frame.
    pub cpu_ms_per_frame: f64,
    /// Events started.
    pub events: u64,
    /// Scores against the ground truth, when there is one.
    pub truth: Option<TruthScores>,
}

/// Scores each of `plans` on `rec` against the reference of every-frame detections (id
/// switches count against the tracks of the first plan: make it fixed N = 1), and against
/// `truth` when given.
pub fn sweep(
    rec: &Recording,
    tracker: &TrackerConfig,
    rules: &Rules,
    plans: &[PlannerConfig],
    truth: Option<&Truth>,
) -> Result<Vec<SweepRow>, TrackConfigError> {
    let reference = rec.reference();
    let frames = rec.frames.len().max(1) as f64;
    let gray_ms = rec.gray_time.as_secs_f64() * 1e3 / frames;
    let mut gt: Option<Vec<Vec<LabelledBox>>> = None;
    let mut rows = Vec::with_capacity(plans.len());
    for plan in plans {
        let run = simulate(rec, tracker, rules, *plan)?;
        let gt_tracks = gt.get_or_insert_with(|| run.tracks.clone());
        let fidelity = super::evaluate(&reference, gt_tracks, &run.tracks);
        let misses = super::explain_misses(&reference, &run.tracks, &run.rounds);
        let per_frame = run.causes.total() as f64 / frames;
        rows.push(SweepRow {
            schedule: plan.kind.as_str(),
            detect_every: plan.every,
            fidelity,
            misses,
            causes: run.causes,
            detections_per_frame: per_frame,
            cpu_ms_per_frame: gray_ms
                + run.track_time.as_secs_f64() * 1e3 / frames
                + per_frame * rec.detect_ms(),
            events: run.events_started,
            truth: truth.map(|t| super::truth::score(t, &run.tracks, &run.events, rec.fps)),
        });
    }
    Ok(rows)
}

/// A detection as a labelled box (no id).
fn labelled(d: &Detection) -> LabelledBox {
    LabelledBox {
        id: 0,
        class_id: d.class_id,
        bbox: d.bbox,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Recording {
        let person = Detection {
            class_id: 0,
            score: 0.75,
            bbox: BBox::new(1.0, 2.0, 5.5, 6.0),
        };
        let weak = Detection {
            score: 0.3,
            ..person.clone()
        };
        let frame = |seq: u64, fill: u8, reported: Vec<Detection>| RecordedFrame {
            seq,
            at: Duration::from_millis(100 * seq),
            gray: GrayImage {
                width: 4,
                height: 3,
                scale: 2.0,
                data: vec![fill; 12],
            },
            round: DetectionRound {
                reported,
                weak: vec![weak.clone()],
            },
        };
        Recording {
            frames: vec![frame(0, 7, vec![person]), frame(1, 9, Vec::new())],
            detect_time: Duration::from_millis(120),
            gray_time: Duration::from_millis(3),
            frame_size: (8, 6),
            fps: 10.0,
            threshold: 0.35,
        }
    }

    #[test]
    fn a_saved_recording_loads_back_only_under_its_key() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("rec.bin");
        let rec = tiny();
        rec.save("clip|model", &path)
            .unwrap_or_else(|e| panic!("{e}"));
        let back = Recording::load("clip|model", &path)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("same key"));
        assert_eq!(back.frames.len(), 2);
        let (g0, r0) = (&back.frames[0].gray, &rec.frames[0].gray);
        assert_eq!(
            (g0.width, g0.height, g0.scale),
            (r0.width, r0.height, r0.scale)
        );
        assert_eq!(g0.data, r0.data);
        assert_eq!(back.frames[1].gray.data, vec![9; 12]);
        assert_eq!(back.frames[0].round, rec.frames[0].round);
        assert_eq!(back.frames[1].round.weak.len(), 1);
        assert_eq!(back.frames[1].at, Duration::from_millis(100));
        assert_eq!(
            (back.frame_size, back.fps, back.threshold),
            ((8, 6), 10.0, 0.35)
        );
        assert_eq!(back.detect_time, rec.detect_time);
        assert!(Recording::load("other clip|model", &path)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none());
    }

    #[test]
    fn a_truncated_recording_is_an_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("rec.bin");
        tiny().save("k", &path).unwrap_or_else(|e| panic!("{e}"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap_or_else(|e| panic!("{e}"));
        assert!(Recording::load("k", &path).is_err());
        std::fs::write(&path, b"not json\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(Recording::load("k", &path).is_err());
    }
}
