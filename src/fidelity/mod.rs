//! Tracking fidelity: how well tracks produced with a detection every N frames cover the
//! detections the model would have made on *every* frame, and how stable their ids are.
//!
//! Pure functions over per-frame boxes; [`replay`] makes the per-frame boxes of lockstep runs
//! from one recording of the model's detections.

pub mod replay;

use std::collections::HashMap;

use crate::detect::labels;
use crate::geom::BBox;

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
