//! Scores against hand-checked ground truth: what a person watching the camera would count.
//! Did each real object get **one** event, did anything that is not there get one, how soon,
//! and how well do the tracks' boxes and ids follow the objects frame by frame.
//!
//! The truth is a MOT-format file (`frame,id,x,y,w,h,conf,class,visibility`, one box per
//! line; `frame` 1-based, the box in pixels, `conf` 1 = an object to find, 0 = one that is
//! there but not scored, `class` a COCO index of `models/labels.txt`): see
//! `tests/data/truth/README.md`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use pathfinding::kuhn_munkres::kuhn_munkres;
use pathfinding::matrix::Matrix;

use super::LabelledBox;
use crate::files;
use crate::geom::BBox;
use crate::vocab::labels;

/// The largest truth file read (a 24-hour recording at 10 fps with 20 objects is ~60 MB).
pub const TRUTH_LIMIT: u64 = 128 << 20;
/// Boxes match at this IoU for recall, precision and IDF1 (the MOT convention).
pub const MATCH_IOU: f32 = 0.5;
/// An event's box is about a true object when they overlap at least this much (an event's
/// box lags its object between detections; the question is only which object it is about).
pub const EVENT_IOU: f32 = 0.3;
/// Objects visible at least this long must get an event...
pub const MISSED_MIN_SECONDS: f64 = 2.0;
/// ... when at least this tall (pixels, their tallest scored box).
pub const MISSED_MIN_HEIGHT: f32 = 20.0;

/// One box of the truth.
#[derive(Clone, Debug, PartialEq)]
pub struct TruthBox {
    /// The object's identity.
    pub id: u64,
    /// COCO class index.
    pub class_id: usize,
    /// Box in frame pixels.
    pub bbox: BBox,
    /// `conf` 1: to be found; 0: there, but neither required nor a false positive.
    pub scored: bool,
}

/// Ground truth of a recording: the boxes of each frame (index 0 = MOT frame 1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Truth {
    /// Boxes by frame.
    pub frames: Vec<Vec<TruthBox>>,
}

/// A truth file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TruthError {
    /// Not readable (missing, not a regular file, too big).
    #[error("ground truth {0}")]
    Read(#[from] files::FileError),
    /// A line that is not `frame,id,x,y,w,h,conf,class,visibility`.
    #[error("ground truth {file}:{line}: {message}")]
    Line {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl Truth {
    /// Reads a truth file (a regular file of at most [`TRUTH_LIMIT`] bytes).
    pub fn load(path: &Path) -> Result<Truth, TruthError> {
        let text = files::read_bounded_text(path, TRUTH_LIMIT, "ground truth file")?;
        Truth::parse(&text, &path.display().to_string())
    }

    /// Parses MOT lines; `file` names the text in errors. Blank lines and `#` comments are
    /// skipped.
    pub fn parse(text: &str, file: &str) -> Result<Truth, TruthError> {
        let mut frames: Vec<Vec<TruthBox>> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |message: String| TruthError::Line {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 8 {
                return Err(bad(format!(
                    "expected frame,id,x,y,w,h,conf,class,visibility; found {} field(s)",
                    f.len()
                )));
            }
            let int = |k: usize, what: &str| {
                f[k].parse::<f64>()
                    .ok()
                    .filter(|v| v.fract() == 0.0 && *v >= 0.0 && *v < 1e9)
                    .map(|v| v as u64)
                    .ok_or_else(|| bad(format!("{what} must be a whole number, found {:?}", f[k])))
            };
            let num = |k: usize, what: &str| {
                f[k].parse::<f32>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| bad(format!("{what} must be a number, found {:?}", f[k])))
            };
            let frame = int(0, "frame")?;
            if frame == 0 || frame > 10_000_000 {
                return Err(bad(format!("frame numbers start at 1, found {frame}")));
            }
            let id = int(1, "id")?;
            let (x, y, w, h) = (num(2, "x")?, num(3, "y")?, num(4, "w")?, num(5, "h")?);
            if w <= 0.0 || h <= 0.0 {
                return Err(bad(format!("the box must have a size, found {w}x{h}")));
            }
            let conf = num(6, "conf")?;
            let class_id = int(7, "class")? as usize;
            if class_id >= labels::COCO80.len() {
                return Err(bad(format!(
                    "class {class_id} is not a COCO index (0..{})",
                    labels::COCO80.len() - 1
                )));
            }
            let k = frame as usize - 1;
            if frames.len() <= k {
                frames.resize_with(k + 1, Vec::new);
            }
            frames[k].push(TruthBox {
                id,
                class_id,
                bbox: BBox::new(x, y, x + w, y + h),
                scored: conf > 0.0,
            });
        }
        Ok(Truth { frames })
    }

    /// Frames up to the last one with a box.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// The boxes of frame `k` (0-based; none past the truth's end).
    pub fn at(&self, k: usize) -> &[TruthBox] {
        self.frames.get(k).map_or(&[], Vec::as_slice)
    }
}

/// What a run looks like against the truth.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TruthScores {
    /// True objects (ids with at least one scored box).
    pub objects: u64,
    /// Events started.
    pub events: u64,
    /// Events per true object that any event is about, mean (1 = every object one event). An
    /// event is about the object its box was on most often.
    pub events_per_object: f64,
    /// The most event ids one true object got.
    pub events_per_object_max: u64,
    /// Events about no true object (their box overlaps none, scored or not, on most of their
    /// frames).
    pub false_events: u64,
    /// `false_events` ÷ `events` (0 when there are none).
    pub false_event_share: f64,
    /// True objects scored for at least 2 s and at least 20 px tall: what must get an event.
    pub objects_to_find: u64,
    /// Of those, the ones no event's box was ever on.
    pub missed: u64,
    /// `missed` ÷ `objects_to_find` (0 when there are none).
    pub missed_share: f64,
    /// Seconds from an object's first scored frame to the first frame an event's box is on it,
    /// median (null when no object got an event).
    pub time_to_event_p50_s: Option<f64>,
    /// The same, 90th percentile.
    pub time_to_event_p90_s: Option<f64>,
    /// Scored true boxes matched by a track's box (IoU ≥ 0.5, same or confusable class), 0..1.
    pub recall: f64,
    /// Track boxes matching a true box, of those not on an unscored object, 0..1.
    pub precision: f64,
    /// Identity F1 of the tracks: the share of boxes whose track id is the one globally
    /// assigned to their true object, 0..1.
    pub idf1: f64,
    /// Every true object and the events about it, by id: where the splits and the misses
    /// are.
    pub objects_detail: Vec<ObjectEvents>,
    /// The ids of the false events.
    pub false_event_ids: Vec<u64>,
}

/// One true object of a [`TruthScores`] and the events about it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ObjectEvents {
    /// Its id in the truth file.
    pub id: u64,
    /// Its first scored frame (1-based, as in the truth file).
    pub first_frame: u64,
    /// Frames it is scored on.
    pub scored_frames: u64,
    /// Its tallest scored box, pixels.
    pub tallest_px: f64,
    /// Whether it must get an event (scored ≥ 2 s, ≥ 20 px tall at its tallest).
    pub to_find: bool,
    /// The events about it, by id (more than one: a split). An event is about the object
    /// its box was on most often, so an object may have had an event on it for a while and
    /// none about it.
    pub events: Vec<u64>,
    /// The first frame an event's box was on it (1-based), if any (none on an object to
    /// find: missed).
    pub first_event_frame: Option<u64>,
}

/// Greedy best-IoU matching of predictions to truth boxes of a frame (same or confusable
/// class, IoU ≥ `min_iou`; the fidelity scores' own matching): `(prediction index, truth index)`.
pub(super) fn match_frame(
    pred: &[LabelledBox],
    truth: &[TruthBox],
    min_iou: f32,
) -> Vec<(usize, usize)> {
    let truth: Vec<LabelledBox> = truth
        .iter()
        .map(|t| LabelledBox {
            id: t.id,
            class_id: t.class_id,
            bbox: t.bbox,
        })
        .collect();
    super::match_boxes(pred, &truth, min_iou)
}

/// The `q` quantile (0..1) of sorted values.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let k = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[k.min(sorted.len() - 1)])
}

/// Per true object: its first scored frame, scored frames, tallest scored box.
#[derive(Default)]
struct ObjectLife {
    first: usize,
    scored_frames: usize,
    tallest: f32,
}

/// Scores a run's per-frame `tracks` and `events` (both as labelled boxes whose `id` is the
/// track or event id; frame `k` of the run is truth frame `k`) against `truth`, at `fps`.
pub fn score(
    truth: &Truth,
    tracks: &[Vec<LabelledBox>],
    events: &[Vec<LabelledBox>],
    fps: f64,
) -> TruthScores {
    let frames = tracks.len().max(events.len());
    let fps = if fps > 0.0 { fps } else { 10.0 };
    // The true objects' lives.
    let mut lives: BTreeMap<u64, ObjectLife> = BTreeMap::new();
    for k in 0..frames {
        for t in truth.at(k).iter().filter(|t| t.scored) {
            let l = lives.entry(t.id).or_insert(ObjectLife {
                first: k,
                ..ObjectLife::default()
            });
            l.scored_frames += 1;
            l.tallest = l.tallest.max(t.bbox.height());
        }
    }
    // Events: which true object each event's box is on, frame by frame (one event per object
    // and frame, best overlaps first), and the object each event is about: the one it was on
    // most often.
    let mut event_frames: HashMap<u64, (usize, usize)> = HashMap::new(); // id → (frames, on any truth)
    let mut on_object: HashMap<(u64, u64), usize> = HashMap::new(); // (event, object) → frames
    let mut first_event: BTreeMap<u64, usize> = BTreeMap::new();
    for k in 0..frames {
        let tb = truth.at(k);
        let ev = events.get(k).map_or(&[][..], Vec::as_slice);
        for e in ev {
            event_frames.entry(e.id).or_default().0 += 1;
        }
        for (i, j) in match_frame(ev, tb, EVENT_IOU) {
            if let Some(entry) = event_frames.get_mut(&ev[i].id) {
                entry.1 += 1;
            }
            if lives.contains_key(&tb[j].id) {
                *on_object.entry((ev[i].id, tb[j].id)).or_default() += 1;
                first_event.entry(tb[j].id).or_insert(k);
            }
        }
    }
    let mut about: HashMap<u64, (u64, usize)> = HashMap::new(); // event → (object, frames)
    for (&(e, o), &n) in &on_object {
        let best = about.entry(e).or_insert((o, n));
        if n > best.1 || (n == best.1 && o < best.0) {
            *best = (o, n);
        }
    }
    let mut object_events: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for (&e, &(o, _)) in &about {
        object_events.entry(o).or_default().insert(e);
    }
    let mut s = TruthScores {
        objects: lives.len() as u64,
        events: event_frames.len() as u64,
        ..TruthScores::default()
    };
    let false_ids: BTreeSet<u64> = event_frames
        .iter()
        .filter(|(_, (n, on))| 2 * on < *n)
        .map(|(&id, _)| id)
        .collect();
    s.false_events = false_ids.len() as u64;
    s.false_event_ids = false_ids.into_iter().collect();
    s.false_event_share = ratio(s.false_events, s.events);
    let counts: Vec<u64> = object_events.values().map(|e| e.len() as u64).collect();
    s.events_per_object = ratio(counts.iter().sum(), counts.len() as u64);
    s.events_per_object_max = counts.iter().copied().max().unwrap_or(0);
    let min_frames = (MISSED_MIN_SECONDS * fps).round() as usize;
    for (id, l) in &lives {
        if l.scored_frames >= min_frames && l.tallest >= MISSED_MIN_HEIGHT {
            s.objects_to_find += 1;
            if !first_event.contains_key(id) {
                s.missed += 1;
            }
        }
    }
    s.missed_share = ratio(s.missed, s.objects_to_find);
    s.objects_detail = objects_detail(&lives, &object_events, &first_event, min_frames);
    let mut delays: Vec<f64> = first_event
        .iter()
        .filter_map(|(id, &k)| {
            lives
                .get(id)
                .map(|l| k.saturating_sub(l.first) as f64 / fps)
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    s.time_to_event_p50_s = quantile(&delays, 0.5).map(round3);
    s.time_to_event_p90_s = quantile(&delays, 0.9).map(round3);
    let boxes = box_scores(truth, tracks);
    s.recall = boxes.0;
    s.precision = boxes.1;
    s.idf1 = boxes.2;
    s.events_per_object = round3(s.events_per_object);
    s.false_event_share = round3(s.false_event_share);
    s.missed_share = round3(s.missed_share);
    s
}

/// Every true object of `lives` with the events about it and its first event's frame.
fn objects_detail(
    lives: &BTreeMap<u64, ObjectLife>,
    object_events: &BTreeMap<u64, BTreeSet<u64>>,
    first_event: &BTreeMap<u64, usize>,
    min_frames: usize,
) -> Vec<ObjectEvents> {
    lives
        .iter()
        .map(|(&id, l)| ObjectEvents {
            id,
            first_frame: l.first as u64 + 1,
            scored_frames: l.scored_frames as u64,
            tallest_px: f64::from(l.tallest).round(),
            to_find: l.scored_frames >= min_frames && l.tallest >= MISSED_MIN_HEIGHT,
            events: object_events
                .get(&id)
                .map(|e| e.iter().copied().collect())
                .unwrap_or_default(),
            first_event_frame: first_event.get(&id).map(|&k| k as u64 + 1),
        })
        .collect()
}

/// Recall, precision and IDF1 of the tracks' boxes.
fn box_scores(truth: &Truth, tracks: &[Vec<LabelledBox>]) -> (f64, f64, f64) {
    let (mut gt, mut pred, mut tp) = (0u64, 0u64, 0u64);
    // Frames a (truth id, track id) pair overlapped at MATCH_IOU.
    let mut pair: HashMap<(u64, u64), u64> = HashMap::new();
    for (k, ts) in tracks.iter().enumerate() {
        let tb = truth.at(k);
        gt += tb.iter().filter(|t| t.scored).count() as u64;
        let matched = match_frame(ts, tb, MATCH_IOU);
        let mut on_unscored = 0;
        for &(i, j) in &matched {
            if tb[j].scored {
                tp += 1;
                *pair.entry((tb[j].id, ts[i].id)).or_default() += 1;
            } else {
                on_unscored += 1;
            }
        }
        pred += (ts.len() - on_unscored) as u64;
    }
    let idtp = best_assignment(&pair);
    let idf1 = if gt + pred == 0 {
        1.0
    } else {
        2.0 * idtp as f64 / (gt + pred) as f64
    };
    (
        round3(if gt == 0 { 1.0 } else { tp as f64 / gt as f64 }),
        round3(if pred == 0 {
            1.0
        } else {
            tp as f64 / pred as f64
        }),
        round3(idf1),
    )
}

/// The largest total of `pair` counts with each truth id and each track id used once.
fn best_assignment(pair: &HashMap<(u64, u64), u64>) -> u64 {
    if pair.is_empty() {
        return 0;
    }
    let gts: Vec<u64> = pair
        .keys()
        .map(|k| k.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let trs: Vec<u64> = pair
        .keys()
        .map(|k| k.1)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (rows, cols, transpose) = if gts.len() <= trs.len() {
        (&gts, &trs, false)
    } else {
        (&trs, &gts, true)
    };
    let mut m = Matrix::new(rows.len(), cols.len(), 0i64);
    for (r, a) in rows.iter().enumerate() {
        for (c, b) in cols.iter().enumerate() {
            let key = if transpose { (*b, *a) } else { (*a, *b) };
            m[(r, c)] = pair.get(&key).copied().unwrap_or(0) as i64;
        }
    }
    let (total, _) = kuhn_munkres(&m);
    total.max(0) as u64
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(id: u64, class_id: usize, x: f32) -> LabelledBox {
        LabelledBox {
            id,
            class_id,
            bbox: BBox::new(x, 100.0, x + 40.0, 200.0),
        }
    }

    /// Two people for 30 frames (10 fps): id 1 at x = 100, id 2 at x = 400, plus an unscored
    /// person at x = 250.
    fn truth() -> Truth {
        let mut text = String::from("# frame,id,x,y,w,h,conf,class,visibility\n");
        for f in 1..=30 {
            text += &format!("{f},1,100,100,40,100,1,0,1\n{f},2,400,100,40,100,1,0,1\n{f},3,250,100,40,100,0,0,0.2\n");
        }
        Truth::parse(&text, "t").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn one_event_per_object_is_perfect_and_a_split_and_a_phantom_count() {
        let t = truth();
        let tracks: Vec<Vec<LabelledBox>> = (0..30)
            .map(|_| vec![lb(7, 0, 100.0), lb(8, 0, 400.0)])
            .collect();
        let s = score(&t, &tracks, &tracks, 10.0);
        assert_eq!(
            (s.objects, s.events, s.false_events, s.missed),
            (2, 2, 0, 0)
        );
        assert_eq!(
            (s.events_per_object, s.recall, s.precision, s.idf1),
            (1.0, 1.0, 1.0, 1.0)
        );
        assert_eq!(s.time_to_event_p50_s, Some(0.0));

        // Object 1 gets events 1 then 2 (split at frame 15), object 2 none until frame 10,
        // a phantom event 9 sits on the lawn, and event 5 on the unscored person is neither
        // false nor counted.
        let events: Vec<Vec<LabelledBox>> = (0..30)
            .map(|k| {
                let mut v = vec![
                    lb(if k < 15 { 1 } else { 2 }, 0, 100.0),
                    lb(9, 0, 550.0),
                    lb(5, 0, 250.0),
                ];
                if k >= 10 {
                    v.push(lb(3, 0, 402.0));
                }
                v
            })
            .collect();
        let s = score(&t, &tracks, &events, 10.0);
        assert_eq!(s.events, 5);
        assert_eq!(s.false_events, 1, "{s:?}");
        assert_eq!(s.events_per_object, 1.5);
        assert_eq!(s.events_per_object_max, 2);
        assert_eq!(s.missed, 0);
        assert_eq!(s.time_to_event_p90_s, Some(1.0));
        // By object: 1 split into events 1 and 2, 2 found at frame 11 by event 3; the
        // phantom named.
        let by_id: Vec<(u64, Vec<u64>, Option<u64>, bool)> = s
            .objects_detail
            .iter()
            .map(|o| (o.id, o.events.clone(), o.first_event_frame, o.to_find))
            .collect();
        assert_eq!(
            by_id,
            vec![(1, vec![1, 2], Some(1), true), (2, vec![3], Some(11), true)]
        );
        assert_eq!(s.false_event_ids, vec![9]);
        assert_eq!(
            (
                s.objects_detail[0].first_frame,
                s.objects_detail[0].scored_frames
            ),
            (1, 30)
        );
        assert_eq!(s.objects_detail[0].tallest_px, 100.0);
    }

    #[test]
    fn an_object_without_an_event_is_missed_and_id_switches_lower_idf1() {
        let t = truth();
        let tracks: Vec<Vec<LabelledBox>> = (0..30)
            .map(|k| vec![lb(if k < 15 { 7 } else { 9 }, 0, 100.0)])
            .collect();
        let events: Vec<Vec<LabelledBox>> = (0..30).map(|_| vec![lb(1, 0, 100.0)]).collect();
        let s = score(&t, &tracks, &events, 10.0);
        assert_eq!((s.objects_to_find, s.missed), (2, 1));
        assert_eq!(s.recall, 0.5);
        assert_eq!(s.precision, 1.0);
        // 60 true boxes, 30 track boxes, 15 of them on the id assigned to object 1.
        assert_eq!(s.idf1, round3(30.0 / 90.0));
    }

    #[test]
    fn bad_lines_are_named() {
        let e = Truth::parse("1,1,0,0,10,10,1,0,1\n0,1,0,0,10,10,1,0,1\n", "f.txt").err();
        assert!(e.is_some_and(|e| e.to_string().contains("f.txt:2")));
        assert!(Truth::parse("1,1,0,0,10,10,1,99,1\n", "f").is_err());
        assert!(Truth::parse("1,1,0,0,-1,10,1,0,1\n", "f").is_err());
        assert!(Truth::parse("1,1,x,0,10,10,1,0,1\n", "f").is_err());
        assert_eq!(Truth::parse("", "f").map(|t| t.frames.len()).ok(), Some(0));
    }
}
