//! Tracking fidelity: how well tracks produced with a detection every N frames cover the
//! detections the model would have made on *every* frame, and how stable their ids are.
//!
//! Pure functions over per-frame boxes; [`replay`] makes the per-frame boxes of lockstep runs
//! from one recording of the model's detections.

pub mod detections;
pub mod looks;
pub mod replay;
pub mod truth;

use std::collections::HashMap;

use crate::geom::BBox;
use crate::vocab::labels;

/// A labelled box in one frame (a detection or a track).
#[derive(Clone, Debug, PartialEq)]
pub struct LabelledBox {
    /// Track id (0 for detections).
    pub id: u64,
    /// Class id.
    pub class_id: usize,
    /// Box in frame pixels.
    pub bbox: BBox,
}

/// Why a recording could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The source could not be opened or read.
    #[error("source {spec}: {source}")]
    Source {
        /// The source spec.
        spec: String,
        /// What went wrong.
        source: crate::source::SourceError,
    },
    /// The model could not be loaded or run.
    #[error(transparent)]
    Detect(#[from] crate::detect::DetectError),
    /// A frame could not be converted.
    #[error("frame {seq}: {message}")]
    Frame {
        /// The frame number.
        seq: u64,
        /// What went wrong.
        message: String,
    },
    /// The source held no frame.
    #[error("source {0}: no frame to record")]
    Empty(String),
}

impl RecordError {
    /// What turns a source error of `spec` into a [`RecordError`].
    pub fn of_source(spec: &str) -> impl Fn(crate::source::SourceError) -> RecordError + '_ {
        move |e| RecordError::Source {
            spec: spec.to_string(),
            source: e,
        }
    }
}

/// Opens the source `spec` to be recorded: read as fast as it decodes.
pub fn open_recording(
    spec: &str,
) -> Result<Box<dyn crate::source::FrameSource + Send>, RecordError> {
    let opts = crate::source::SourceOptions {
        pace: crate::source::Pacing::AsFastAsPossible,
        ..crate::source::SourceOptions::default()
    };
    crate::source::open(spec, &opts).map_err(RecordError::of_source(spec))
}

/// The figures of one run against the reference.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Fidelity {
    /// Reference detections (all frames).
    pub reference: usize,
    /// Reference detections with a track of the same (or a confusable) class at IoU ≥ 0.5 in
    /// the same frame.
    pub covered: usize,
    /// Identity switches of ground-truth trajectories (reference tracks).
    pub id_switches: usize,
    /// Ground-truth track-frames matched by a track (the denominator of the switch rate).
    pub matched_track_frames: usize,
}

impl Fidelity {
    /// Covered share, 0..1.
    pub fn coverage(&self) -> f64 {
        if self.reference == 0 {
            1.0
        } else {
            self.covered as f64 / self.reference as f64
        }
    }
    /// Id switches per 100 matched track-frames.
    pub fn switches_per_100(&self) -> f64 {
        if self.matched_track_frames == 0 {
            0.0
        } else {
            100.0 * self.id_switches as f64 / self.matched_track_frames as f64
        }
    }
}

/// Greedy matching of the same or confusable classes ([`labels::confusable`]: a `truck`
/// track covers a `car` detection of the same object) by IoU ≥ `min_iou`, best pairs first: `(a index, b index)`.
fn match_boxes(a: &[LabelledBox], b: &[LabelledBox], min_iou: f32) -> Vec<(usize, usize)> {
    let mut used = (vec![false; a.len()], vec![false; b.len()]);
    take_best(pairs_by_iou(a, b, min_iou, |_, _| true), &mut used)
}

/// Every pair of `a` and `b` of confusable classes at IoU ≥ `min_iou` that `allow` lets
/// through, as `(IoU, a index, b index)`.
fn pairs_by_iou(
    a: &[LabelledBox],
    b: &[LabelledBox],
    min_iou: f32,
    allow: impl Fn(&LabelledBox, &LabelledBox) -> bool,
) -> Vec<(f32, usize, usize)> {
    let mut pairs = Vec::new();
    for (i, x) in a.iter().enumerate() {
        for (j, y) in b.iter().enumerate() {
            let iou = x.bbox.iou(&y.bbox);
            if labels::confusable(x.class_id, y.class_id) && iou >= min_iou && allow(x, y) {
                pairs.push((iou, i, j));
            }
        }
    }
    pairs
}

/// Takes `pairs` best IoU first, each side at most once (`used` marks the sides taken, and
/// is updated): `(a index, b index)`.
fn take_best(
    mut pairs: Vec<(f32, usize, usize)>,
    used: &mut (Vec<bool>, Vec<bool>),
) -> Vec<(usize, usize)> {
    pairs.sort_by(|p, q| q.0.total_cmp(&p.0));
    let mut out = Vec::new();
    for (_, i, j) in pairs {
        if !used.0[i] && !used.1[j] {
            used.0[i] = true;
            used.1[j] = true;
            out.push((i, j));
        }
    }
    out
}

/// An uncovered reference detection and a box of the last detection round before it are taken
/// for the same object at this IoU or more (the object moves for up to `N − 1` frames in between,
/// so the bar is lower than coverage's 0.5).
pub const SAME_OBJECT_IOU: f32 = 0.3;

/// What one detection round of a run gave the tracker: the boxes the model reported and the
/// weak ones (below the reporting threshold, down to `[tracker] continue_score`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Round {
    /// Reported detections.
    pub reported: Vec<LabelledBox>,
    /// Weak detections.
    pub weak: Vec<LabelledBox>,
}

/// Where a run's uncovered reference detections were lost, judged by the last detection round
/// the run made at or before the missed frame. The five counts sum to `reference − covered`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Misses {
    /// The last round did not report the object (nor see it weakly), or there was no round
    /// yet: an object that appeared since, or one the model missed on that frame. Only an
    /// earlier or extra detection finds these (a shorter interval, the adaptive schedule's
    /// motion cause).
    pub unreported: usize,
    /// The last round saw the object only below the reporting threshold: a track it kept may
    /// cover the frame; a new object waits for the next round.
    pub weak: usize,
    /// The last round reported the object, yet no track covers it now: the track's box moved
    /// off the object (drift between detections), or the track ended.
    pub moved: usize,
    /// As `moved`, but a track of the object's class is where the model boxed the object on
    /// the frames just before and after (IoU ≥ 0.5 with the mean of those two boxes): the
    /// model's box jumped on this frame (an arm, a stride, a neighbour), which no track
    /// following the object covers.
    pub jumped: usize,
    /// A track is on the object (IoU ≥ 0.5) with a label that is not confusable with the
    /// reference's (the track keeps its voted label; the model changed its mind).
    pub label: usize,
    /// The round ran on the missed frame itself and no track covers what it reported (a
    /// duplicate box, or a tentative track waiting for its second detection).
    pub at_detection: usize,
}

impl Misses {
    /// All uncovered reference detections.
    pub fn total(&self) -> usize {
        self.unreported + self.weak + self.moved + self.jumped + self.label + self.at_detection
    }
}

/// Sorts the reference detections `tracks` does not cover (the same matching as [`evaluate`])
/// into [`Misses`]. `rounds[k]` is the detection round a run made on frame `k`, if any; all
/// slices are indexed by frame.
pub fn explain_misses(
    reference: &[Vec<LabelledBox>],
    tracks: &[Vec<LabelledBox>],
    rounds: &[Option<Round>],
) -> Misses {
    let mut m = Misses::default();
    let empty = Vec::new();
    let mut last: Option<(usize, &Round)> = None;
    for (f, refs) in reference.iter().enumerate() {
        if let Some(Some(r)) = rounds.get(f) {
            last = Some((f, r));
        }
        let t = tracks.get(f).unwrap_or(&empty);
        let mut covered = vec![false; refs.len()];
        for (i, _) in match_boxes(refs, t, 0.5) {
            covered[i] = true;
        }
        for (b, _) in refs.iter().zip(&covered).filter(|(_, c)| !**c) {
            let near = |boxes: &[LabelledBox]| {
                boxes.iter().any(|x| {
                    labels::confusable(b.class_id, x.class_id)
                        && b.bbox.iou(&x.bbox) >= SAME_OBJECT_IOU
                })
            };
            let other_label = t
                .iter()
                .any(|x| !labels::confusable(b.class_id, x.class_id) && b.bbox.iou(&x.bbox) >= 0.5);
            match last {
                _ if other_label => m.label += 1,
                Some((k, _)) if k == f => m.at_detection += 1,
                Some((_, r)) if near(&r.reported) => {
                    let steady = steady_box(reference, f, b);
                    let on_steady = steady.is_some_and(|s| {
                        t.iter().any(|x| {
                            labels::confusable(b.class_id, x.class_id) && s.iou(&x.bbox) >= 0.5
                        })
                    });
                    if on_steady {
                        m.jumped += 1;
                    } else {
                        m.moved += 1;
                    }
                }
                Some((_, r)) if near(&r.weak) => m.weak += 1,
                _ => m.unreported += 1,
            }
        }
    }
    m
}

/// The mean of the reference boxes of `b`'s object on frames `f − 1` and `f + 1` (the
/// best-overlapping box of a confusable class at IoU ≥ [`SAME_OBJECT_IOU`] on each), if both
/// frames have one.
fn steady_box(reference: &[Vec<LabelledBox>], f: usize, b: &LabelledBox) -> Option<BBox> {
    let around = |k: usize| {
        reference
            .get(k)?
            .iter()
            .filter(|x| labels::confusable(b.class_id, x.class_id))
            .map(|x| (b.bbox.iou(&x.bbox), x.bbox))
            .filter(|(iou, _)| *iou >= SAME_OBJECT_IOU)
            .max_by(|p, q| p.0.total_cmp(&q.0))
            .map(|(_, x)| x)
    };
    let (p, n) = (around(f.checked_sub(1)?)?, around(f + 1)?);
    Some(BBox::new(
        (p.x0 + n.x0) * 0.5,
        (p.y0 + n.y0) * 0.5,
        (p.x1 + n.x1) * 0.5,
        (p.y1 + n.y1) * 0.5,
    ))
}

/// Scores `tracks` (per frame) against reference detections and reference (ground-truth)
/// tracks of the same frames. All three slices are indexed by frame.
pub fn evaluate(
    reference_dets: &[Vec<LabelledBox>],
    gt_tracks: &[Vec<LabelledBox>],
    tracks: &[Vec<LabelledBox>],
) -> Fidelity {
    let mut f = Fidelity::default();
    let empty = Vec::new();
    for (k, dets) in reference_dets.iter().enumerate() {
        let t = tracks.get(k).unwrap_or(&empty);
        f.reference += dets.len();
        f.covered += match_boxes(dets, t, 0.5).len();
    }
    let mut last_id: HashMap<u64, u64> = HashMap::new();
    for (k, gts) in gt_tracks.iter().enumerate() {
        let t = tracks.get(k).unwrap_or(&empty);
        for (i, j) in match_tracks(gts, t, &last_id, 0.5) {
            f.matched_track_frames += 1;
            let (gt, id) = (gts[i].id, t[j].id);
            if let Some(prev) = last_id.insert(gt, id) {
                if prev != id {
                    f.id_switches += 1;
                }
            }
        }
    }
    f
}

/// Matches reference tracks `gts` with `tracks` in one frame the CLEAR MOT way (Bernardin &
/// Stiefelhagen, 2008): a reference track whose last matched track (`last_id`) is still
/// there, of a confusable class and at IoU ≥ `min_iou`, keeps it (the better-overlapping
/// one, if two claim it); the rest are matched
/// greedily ([`match_boxes`]). Without the first step, two people walking side by side whose
/// tracks both overlap both of them would count a switch whenever the IoU order flips, though
/// no track changed its object.
fn match_tracks(
    gts: &[LabelledBox],
    tracks: &[LabelledBox],
    last_id: &HashMap<u64, u64>,
    min_iou: f32,
) -> Vec<(usize, usize)> {
    let mut used = (vec![false; gts.len()], vec![false; tracks.len()]);
    // Two reference tracks on one object (two boxes the model gave one person) may both claim
    // the same track: the better-overlapping one keeps it.
    let kept = pairs_by_iou(gts, tracks, min_iou, |g, t| {
        last_id.get(&g.id) == Some(&t.id)
    });
    let mut out = take_best(kept, &mut used);
    out.extend(take_best(
        pairs_by_iou(gts, tracks, min_iou, |_, _| true),
        &mut used,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(id: u64, x: f32) -> LabelledBox {
        LabelledBox {
            id,
            class_id: 0,
            bbox: BBox::new(x, 0.0, x + 10.0, 10.0),
        }
    }

    fn labelled(class_id: usize, x: f32) -> LabelledBox {
        LabelledBox {
            class_id,
            ..b(0, x)
        }
    }

    #[test]
    fn misses_are_sorted_by_what_the_last_detection_saw() {
        // Frame 0: a round reports a person at x 0 and sees one at x 40 weakly; nothing is
        // tracked on frame 0, so both of frame 0's reference boxes are missed on a detection
        // frame. Frame 2 (no round; the last is frame 0's): the reference has five people.
        let round = Round {
            reported: vec![labelled(0, 0.0)],
            weak: vec![labelled(0, 40.0)],
        };
        let reference = vec![
            vec![labelled(0, 0.0), labelled(0, 40.0)],
            vec![],
            vec![
                labelled(0, 2.0),   // reported at frame 0, not covered: moved
                labelled(0, 41.0),  // weak at frame 0: weak
                labelled(0, 80.0),  // nothing at frame 0: unreported
                labelled(0, 120.0), // a `bird` track on it: label
                labelled(0, 160.0), // covered
            ],
        ];
        let tracks = vec![
            vec![],
            vec![],
            vec![b(1, 10.0), labelled(14, 120.0), b(2, 160.0)],
        ];
        let rounds = vec![Some(round), None, None];
        let m = explain_misses(&reference, &tracks, &rounds);
        assert_eq!(
            m,
            Misses {
                unreported: 1,
                weak: 1,
                moved: 1,
                jumped: 0,
                label: 1,
                at_detection: 2,
            }
        );
        let f = evaluate(&reference, &[], &tracks);
        assert_eq!(m.total(), f.reference - f.covered);
        // Before the first round everything missed is unreported.
        let none = explain_misses(&reference, &tracks, &[None, None, None]);
        assert_eq!((none.unreported, none.label), (5, 1));
    }

    #[test]
    fn a_box_that_jumps_on_one_frame_is_told_from_a_track_that_moved_off() {
        // The model boxes a person at x 0 on frames 0 and 2 but at x 5 on frame 1; the track
        // stays at x 0. On frame 1 the track misses the reference box (IoU 0.33) yet is on
        // the mean of its neighbours: jumped. Frame 3's box (x 5 again) has a neighbour on
        // one side only: moved.
        let reference = vec![
            vec![b(0, 0.0)],
            vec![b(0, 5.0)],
            vec![b(0, 0.0)],
            vec![b(0, 5.0)],
        ];
        let tracks = vec![vec![b(1, 0.0)]; 4];
        let rounds = vec![
            Some(Round {
                reported: vec![b(0, 0.0)],
                weak: vec![],
            }),
            None,
            None,
            None,
        ];
        let m = explain_misses(&reference, &tracks, &rounds);
        assert_eq!((m.jumped, m.moved, m.total()), (1, 1, 2), "{m:?}");
    }

    #[test]
    fn perfect_tracks_cover_everything_without_switches() {
        let dets = vec![vec![b(0, 0.0)], vec![b(0, 2.0)]];
        let gt = vec![vec![b(1, 0.0)], vec![b(1, 2.0)]];
        let f = evaluate(&dets, &gt, &gt);
        assert_eq!(
            (
                f.reference,
                f.covered,
                f.id_switches,
                f.matched_track_frames
            ),
            (2, 2, 0, 2)
        );
        assert_eq!(f.coverage(), 1.0);
    }

    #[test]
    fn a_changed_id_is_one_switch_and_a_missing_box_is_uncovered() {
        let dets = vec![vec![b(0, 0.0)], vec![b(0, 2.0)], vec![b(0, 4.0)]];
        let gt = vec![vec![b(1, 0.0)], vec![b(1, 2.0)], vec![b(1, 4.0)]];
        let tracks = vec![vec![b(7, 0.0)], vec![], vec![b(8, 4.0)]];
        let f = evaluate(&dets, &gt, &tracks);
        assert_eq!((f.covered, f.id_switches), (2, 1));
        assert!((f.switches_per_100() - 50.0).abs() < 1e-9);
    }

    #[test]
    fn of_two_reference_tracks_claiming_one_track_the_better_overlapping_keeps_it() {
        // Reference tracks 1 and 2 are two boxes the model gave one person at different
        // times; track 7 was last matched to each. In the third frame both claim 7: 2 sits on
        // it exactly, 1 only at IoU 0.54, and a neighbour track 8 would fit 2 but not 1.
        let gt = vec![vec![b(1, 0.0)], vec![b(2, 0.0)], vec![b(1, 3.0), b(2, 0.0)]];
        let tracks = vec![
            vec![b(7, 0.0)],
            vec![b(7, 0.0)],
            vec![b(7, 0.0), b(8, -3.0)],
        ];
        let f = evaluate(&gt, &gt, &tracks);
        assert_eq!((f.id_switches, f.matched_track_frames), (0, 3));
    }

    #[test]
    fn a_track_still_on_its_object_keeps_it_when_a_neighbour_overlaps_more() {
        // Two people side by side (reference tracks 1 and 2), tracked as 7 and 8. In the
        // second frame track 8 drifts to overlap person 1 better than track 7 does, while
        // track 7 still covers person 1 at IoU ≥ 0.5: no id changed its object (CLEAR MOT),
        // and greedy best-IoU-first matching alone would count a switch (1: 7 → 8).
        let at = |id, x0: f32, x1: f32| LabelledBox {
            id,
            class_id: 0,
            bbox: BBox::new(x0, 0.0, x1, 10.0),
        };
        let gt = vec![
            vec![at(1, 0.0, 10.0), at(2, 8.0, 18.0)],
            vec![at(1, 0.0, 10.0), at(2, 8.0, 18.0)],
        ];
        let tracks = vec![
            vec![at(7, 0.0, 10.0), at(8, 8.0, 18.0)],
            vec![at(7, 2.5, 12.5), at(8, 1.0, 11.0)],
        ];
        assert!(BBox::new(0.0, 0.0, 10.0, 10.0).iou(&tracks[1][1].bbox) > 0.8);
        assert!(BBox::new(0.0, 0.0, 10.0, 10.0).iou(&tracks[1][0].bbox) >= 0.5);
        let f = evaluate(&gt, &gt, &tracks);
        assert_eq!(f.id_switches, 0);
        // The same frames without the first one: nothing to keep, greedy decides.
        let f = evaluate(&gt[1..], &gt[1..], &tracks[1..]);
        assert_eq!(f.matched_track_frames, 1);
    }
}
