//! Association of late detections with tracks: each track's recent boxes by frame (so a
//! detection made on frame `k` is compared with where the tracks were at `k`, not where they
//! are now), and an optimal one-to-one assignment by IoU (Hungarian algorithm, gated by an IoU
//! threshold and class equality).

use std::collections::VecDeque;

use pathfinding::kuhn_munkres::kuhn_munkres;
use pathfinding::matrix::Matrix;

use crate::geom::BBox;
use crate::vocab::labels;

/// A track's box at each of its last frames, oldest first, at most `capacity` entries.
#[derive(Clone, Debug)]
pub struct History {
    entries: VecDeque<(u64, BBox)>,
    capacity: usize,
}

impl History {
    /// An empty history keeping at most `capacity` (≥ 1) frames.
    pub fn new(capacity: usize) -> History {
        let capacity = capacity.max(1);
        History {
            entries: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Records the box at `seq`. An entry for the same `seq` is replaced; an older `seq` than
    /// the newest entry is ignored (history only moves forward).
    pub fn push(&mut self, seq: u64, bbox: BBox) {
        match self.entries.back_mut() {
            Some((s, b)) if *s == seq => *b = bbox,
            Some((s, _)) if *s > seq => {}
            _ => {
                if self.entries.len() == self.capacity {
                    self.entries.pop_front();
                }
                self.entries.push_back((seq, bbox));
            }
        }
    }

    /// The oldest frame recorded.
    pub fn first_seq(&self) -> Option<u64> {
        self.entries.front().map(|e| e.0)
    }

    /// The box at `seq`: the recorded one, linearly interpolated between the neighbouring
    /// entries when that frame was not recorded, and the nearest end outside the range.
    pub fn at(&self, seq: u64) -> Option<BBox> {
        let (first, last) = (self.entries.front()?, self.entries.back()?);
        if seq <= first.0 {
            return Some(first.1);
        }
        if seq >= last.0 {
            return Some(last.1);
        }
        let i = self.entries.partition_point(|e| e.0 < seq);
        let (s1, b1) = self.entries[i];
        if s1 == seq || i == 0 {
            return Some(b1);
        }
        let (s0, b0) = self.entries[i - 1];
        let t = (seq - s0) as f32 / (s1 - s0) as f32;
        let lerp = |a: f32, b: f32| a + (b - a) * t;
        Some(BBox::new(
            lerp(b0.x0, b1.x0),
            lerp(b0.y0, b1.y0),
            lerp(b0.x1, b1.x1),
            lerp(b0.y1, b1.y1),
        ))
    }

    /// Applies `f` to every entry recorded at or after `seq`.
    pub fn map_from(&mut self, seq: u64, mut f: impl FnMut(&BBox) -> BBox) {
        for (s, b) in self.entries.iter_mut().rev() {
            if *s < seq {
                break;
            }
            *b = f(b);
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One candidate of an assignment problem: a box and its class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// The box (for tracks: where the track was at the detection's frame).
    pub bbox: BBox,
    /// Class id.
    pub class_id: usize,
}

/// A pair of different but confusable classes ([`labels::confusable`]) weighs this much of
/// its IoU, so that the same class wins a tie.
const CROSS_CLASS_WEIGHT: f32 = 0.9;

/// IoU is scaled to integers with this factor for the Hungarian solver.
const IOU_SCALE: f32 = 100_000.0;

/// The best one-to-one pairing of `tracks` and `dets` by total IoU, keeping only pairs of the
/// same or confusable classes with IoU ≥ `iou_threshold`. Returns `(track index, detection index)` pairs.
pub fn assign(tracks: &[Candidate], dets: &[Candidate], iou_threshold: f32) -> Vec<(usize, usize)> {
    assign_with(tracks, dets, iou_threshold, |_, _| 1.0)
}

/// [`assign`] with each pair's IoU weighed by `affinity(track index, detection index)`, 0..1:
/// how alike the two look where that is known (1: nothing against the pair). A pair of
/// affinity 0 is never made; otherwise the gate stays on the IoU alone, so the affinity only
/// chooses between pairs that overlap enough.
pub fn assign_with(
    tracks: &[Candidate],
    dets: &[Candidate],
    iou_threshold: f32,
    affinity: impl Fn(usize, usize) -> f32,
) -> Vec<(usize, usize)> {
    if tracks.is_empty() || dets.is_empty() {
        return Vec::new();
    }
    let gate = |ti: usize, di: usize| -> i64 {
        let (t, d) = (&tracks[ti], &dets[di]);
        if !labels::confusable(t.class_id, d.class_id) {
            return 0;
        }
        // A pair of confusable classes (car / truck) counts a little less than the same class.
        let weight = if t.class_id == d.class_id {
            1.0
        } else {
            CROSS_CLASS_WEIGHT
        };
        let iou = t.bbox.iou(&d.bbox);
        let like = affinity(ti, di);
        if iou.is_finite() && iou >= iou_threshold && like > 0.0 {
            // At least 1 so that a gated pair always beats no pair.
            ((iou * weight * like.min(1.0) * IOU_SCALE) as i64).max(1)
        } else {
            0
        }
    };
    // kuhn_munkres needs rows ≤ columns: put the smaller side in the rows.
    let transpose = tracks.len() > dets.len();
    let (rows, cols) = if transpose {
        (dets.len(), tracks.len())
    } else {
        (tracks.len(), dets.len())
    };
    let mut weights = Matrix::new(rows, cols, 0i64);
    let mut any = false;
    for r in 0..rows {
        for c in 0..cols {
            let w = if transpose { gate(c, r) } else { gate(r, c) };
            any |= w > 0;
            weights[(r, c)] = w;
        }
    }
    if !any {
        return Vec::new();
    }
    let (_, assignment) = kuhn_munkres(&weights);
    assignment
        .into_iter()
        .enumerate()
        .filter(|&(r, c)| weights[(r, c)] > 0)
        .map(|(r, c)| if transpose { (c, r) } else { (r, c) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bx(x: f32, y: f32, s: f32) -> BBox {
        BBox::new(x, y, x + s, y + s)
    }

    fn cand(x: f32, y: f32, class_id: usize) -> Candidate {
        Candidate {
            bbox: bx(x, y, 10.0),
            class_id,
        }
    }

    #[test]
    fn history_interpolates_and_forgets() {
        let mut h = History::new(3);
        assert_eq!(h.at(5), None);
        h.push(10, bx(0.0, 0.0, 10.0));
        h.push(14, bx(8.0, 0.0, 10.0));
        h.push(13, bx(99.0, 0.0, 10.0)); // older than the newest: ignored
        assert_eq!(h.len(), 2);
        assert_eq!(h.at(12), Some(bx(4.0, 0.0, 10.0)));
        assert_eq!(h.at(3), Some(bx(0.0, 0.0, 10.0)));
        assert_eq!(h.at(99), Some(bx(8.0, 0.0, 10.0)));
        h.push(14, bx(9.0, 0.0, 10.0)); // same frame: replaced
        assert_eq!(h.at(14), Some(bx(9.0, 0.0, 10.0)));
        h.push(15, bx(10.0, 0.0, 10.0));
        h.push(16, bx(11.0, 0.0, 10.0));
        assert_eq!(h.len(), 3);
        assert_eq!(h.first_seq(), Some(14));
        h.map_from(15, |b| BBox::new(b.x0 + 1.0, b.y0, b.x1 + 1.0, b.y1));
        assert_eq!(h.at(14), Some(bx(9.0, 0.0, 10.0)));
        assert_eq!(h.at(16), Some(bx(12.0, 0.0, 10.0)));
    }

    #[test]
    fn assignment_maximises_total_overlap() {
        // Greedy would give det 0 to track 0 (IoU higher), leaving track 1 without a match.
        let tracks = [cand(0.0, 0.0, 0), cand(4.0, 0.0, 0)];
        let dets = [cand(2.0, 0.0, 0), cand(-2.0, 0.0, 0)];
        let mut pairs = assign(&tracks, &dets, 0.3);
        pairs.sort_unstable();
        assert_eq!(pairs, vec![(0, 1), (1, 0)]);
    }

    #[test]
    fn affinity_chooses_between_overlapping_pairs_and_zero_forbids_a_pair() {
        // Two tracks side by side, two detections each between them: by IoU alone track 0
        // takes detection 0; a look that says otherwise swaps the pairs.
        let tracks = [cand(0.0, 0.0, 0), cand(4.0, 0.0, 0)];
        let dets = [cand(1.0, 0.0, 0), cand(3.0, 0.0, 0)];
        let mut by_iou = assign_with(&tracks, &dets, 0.3, |_, _| 1.0);
        by_iou.sort_unstable();
        assert_eq!(by_iou, vec![(0, 0), (1, 1)]);
        let crossed = |t: usize, d: usize| if t == d { 0.5 } else { 1.0 };
        let mut by_look = assign_with(&tracks, &dets, 0.3, crossed);
        by_look.sort_unstable();
        assert_eq!(by_look, vec![(0, 1), (1, 0)]);
        // Affinity 0: the pair is not made even when it is the only one.
        assert!(assign_with(&tracks[..1], &dets[..1], 0.3, |_, _| 0.0).is_empty());
        // Either shape (more tracks than detections is solved transposed).
        assert_eq!(
            assign_with(&tracks, &dets[..1], 0.3, |t, _| if t == 0 {
                0.0
            } else {
                1.0
            }),
            vec![(1, 0)]
        );
    }

    #[test]
    fn assignment_respects_gates_and_either_shape() {
        let tracks = [cand(0.0, 0.0, 0), cand(100.0, 0.0, 0), cand(200.0, 0.0, 1)];
        // One far detection, one of the wrong class, one matching track 1.
        let dets = [
            cand(500.0, 0.0, 0),
            cand(200.0, 0.0, 0),
            cand(101.0, 0.0, 0),
        ];
        assert_eq!(assign(&tracks, &dets, 0.3), vec![(1, 2)]);
        // More tracks than detections (transposed internally).
        assert_eq!(assign(&tracks, &dets[2..], 0.3), vec![(1, 0)]);
        // More detections than tracks.
        assert_eq!(assign(&tracks[1..2], &dets, 0.3), vec![(0, 2)]);
        assert!(assign(&[], &dets, 0.3).is_empty());
        assert!(assign(&tracks, &dets[..1], 0.3).is_empty());
    }
}
