//! The model's own boxes on every frame against the ground truth, by how tall the true object
//! is: what a larger or smaller model input finds and what it invents, before any tracking or
//! event rule (`lookout bench --sweep input-size`).

use super::truth::{match_frame, Truth, MATCH_IOU};
use super::LabelledBox;
use crate::vocab::Detection;

/// True objects under this many pixels tall (their box in the frame) are *small*...
pub const SMALL_BELOW: f32 = 24.0;
/// ... and over this many *large*; between the two, *middle*.
pub const LARGE_ABOVE: f32 = 48.0;

/// Scored true boxes of one height class, and how many a detection matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct HeightRecall {
    /// Scored true boxes (one per object per frame) of this height.
    pub boxes: u64,
    /// Those a detection matched (IoU ≥ 0.5, same or confusable class).
    pub found: u64,
    /// `found` ÷ `boxes`, 0..1 (null when there are no such boxes).
    pub recall: Option<f64>,
}

impl HeightRecall {
    fn add(&mut self, found: bool) {
        self.boxes += 1;
        self.found += u64::from(found);
    }

    fn finish(&mut self) {
        self.recall = (self.boxes > 0).then(|| round4(self.found as f64 / self.boxes as f64));
    }
}

/// Every frame's detections against the truth.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct DetectionTruth {
    /// Frames scored (those the truth covers).
    pub frames: u64,
    /// True objects under 24 px tall.
    pub small: HeightRecall,
    /// 24 to 48 px tall.
    pub middle: HeightRecall,
    /// Over 48 px tall.
    pub large: HeightRecall,
    /// All heights.
    pub all: HeightRecall,
    /// Detections matching no true box, scored or not (of the classes counted).
    pub false_boxes: u64,
    /// `false_boxes` per frame.
    pub false_boxes_per_frame: f64,
}

/// Scores `frames` (frame `k` = truth frame `k`; each frame's detections above the reporting
/// threshold) against `truth`. Only detections of the `classes` given count as false boxes
/// (all when `None`): a label the events never report costs nothing.
pub fn score_detections<'a>(
    truth: &Truth,
    frames: impl IntoIterator<Item = &'a [Detection]>,
    classes: Option<&[usize]>,
) -> DetectionTruth {
    score_boxes(
        truth,
        frames.into_iter().map(|dets| {
            dets.iter()
                .filter(|d| classes.is_none_or(|c| c.contains(&d.class_id)))
                .map(|d| LabelledBox {
                    id: 0,
                    class_id: d.class_id,
                    bbox: d.bbox,
                })
                .collect()
        }),
    )
}

/// [`score_detections`] of any boxes per frame (a run's tracks, say), every box counted.
pub fn score_boxes(
    truth: &Truth,
    frames: impl IntoIterator<Item = Vec<LabelledBox>>,
) -> DetectionTruth {
    let mut s = DetectionTruth::default();
    for (k, pred) in frames.into_iter().enumerate().take(truth.frames()) {
        let tb = truth.at(k);
        let matched = match_frame(&pred, tb, MATCH_IOU);
        let mut found = vec![false; tb.len()];
        for &(_, j) in &matched {
            found[j] = true;
        }
        for (t, &f) in tb.iter().zip(&found) {
            if !t.scored {
                continue;
            }
            let h = t.bbox.height();
            let bin = if h < SMALL_BELOW {
                &mut s.small
            } else if h > LARGE_ABOVE {
                &mut s.large
            } else {
                &mut s.middle
            };
            bin.add(f);
            s.all.add(f);
        }
        s.false_boxes += (pred.len() - matched.len()) as u64;
        s.frames += 1;
    }
    for bin in [&mut s.small, &mut s.middle, &mut s.large, &mut s.all] {
        bin.finish();
    }
    s.false_boxes_per_frame = if s.frames == 0 {
        0.0
    } else {
        round4(s.false_boxes as f64 / s.frames as f64)
    };
    s
}

fn round4(v: f64) -> f64 {
    (v * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::BBox;

    fn det(class_id: usize, x: f32, y: f32, w: f32, h: f32) -> Detection {
        Detection {
            class_id,
            score: 0.8,
            bbox: BBox::new(x, y, x + w, y + h),
        }
    }

    #[test]
    fn recall_is_split_by_height_and_unmatched_boxes_are_false() {
        // Frame 1: a small person (found), a middle one (missed), a large car (found), an
        // unscored person (a box on it is neither found nor false). Frame 2: nothing true.
        let truth = Truth::parse(
            "1,1,10,10,8,20,1,0,1\n1,2,100,10,15,40,1,0,1\n1,3,200,10,90,60,1,2,1\n1,4,400,10,20,50,0,0,1\n2,9,0,0,1,1,0,0,1\n",
            "t",
        )
        .expect("truth parses");
        let f1 = vec![
            det(0, 10.0, 10.0, 8.0, 20.0),
            det(2, 200.0, 10.0, 90.0, 60.0),
            det(0, 400.0, 10.0, 20.0, 50.0),
            det(0, 600.0, 10.0, 20.0, 50.0),  // false
            det(58, 700.0, 10.0, 20.0, 50.0), // a potted plant: not a counted class
        ];
        let f2 = vec![det(0, 50.0, 50.0, 20.0, 50.0)]; // false
        let s = score_detections(&truth, [f1.as_slice(), f2.as_slice()], Some(&[0, 2]));
        assert_eq!(s.frames, 2);
        assert_eq!(
            (s.small.boxes, s.small.found, s.small.recall),
            (1, 1, Some(1.0))
        );
        assert_eq!(
            (s.middle.boxes, s.middle.found, s.middle.recall),
            (1, 0, Some(0.0))
        );
        assert_eq!((s.large.boxes, s.large.found), (1, 1));
        assert_eq!((s.all.boxes, s.all.found), (3, 2));
        assert_eq!(s.false_boxes, 2);
        assert_eq!(s.false_boxes_per_frame, 1.0);
        let every_class = score_detections(&truth, [f1.as_slice(), f2.as_slice()], None);
        assert_eq!(every_class.false_boxes, 3);
    }

    #[test]
    fn no_boxes_of_a_height_leave_its_recall_null() {
        let truth = Truth::parse("1,1,10,10,90,60,1,0,1\n", "t").expect("truth parses");
        let s = score_detections(&truth, [&[][..]], None);
        assert_eq!(s.small.recall, None);
        assert_eq!(s.large.recall, Some(0.0));
    }
}
