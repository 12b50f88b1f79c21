//! Boxes, intersection-over-union and class-aware non-maximum suppression.

use serde::{Deserialize, Serialize};

/// An axis-aligned box `[x0, y0, x1, y1]` (x0 ≤ x1, y0 ≤ y1), in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct BBox {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Bottom edge.
    pub y1: f32,
}

impl BBox {
    /// A box from its corners.
    pub fn new(x0: f32, y0: f32, x1: f32, y1: f32) -> BBox {
        BBox { x0, y0, x1, y1 }
    }
    /// Width (never negative).
    pub fn width(&self) -> f32 {
        (self.x1 - self.x0).max(0.0)
    }
    /// Height (never negative).
    pub fn height(&self) -> f32 {
        (self.y1 - self.y0).max(0.0)
    }
    /// Area (never negative).
    pub fn area(&self) -> f32 {
        self.width() * self.height()
    }
    /// Centre point.
    pub fn center(&self) -> (f32, f32) {
        ((self.x0 + self.x1) * 0.5, (self.y0 + self.y1) * 0.5)
    }
    /// Intersection over union, 0 when either box is empty.
    pub fn iou(&self, other: &BBox) -> f32 {
        let ix = (self.x1.min(other.x1) - self.x0.max(other.x0)).max(0.0);
        let iy = (self.y1.min(other.y1) - self.y0.max(other.y0)).max(0.0);
        let inter = ix * iy;
        let union = self.area() + other.area() - inter;
        if union > 0.0 {
            inter / union
        } else {
            0.0
        }
    }
    /// As the `[x0, y0, x1, y1]` array used in JSON output.
    pub fn to_array(&self) -> [f32; 4] {
        [self.x0, self.y0, self.x1, self.y1]
    }
}

/// One detected object.
#[derive(Clone, Debug, PartialEq)]
pub struct Detection {
    /// Index into the model's label list.
    pub class_id: usize,
    /// Confidence in 0..1.
    pub score: f32,
    /// Box in the pixel space of whatever the caller mapped it to.
    pub bbox: BBox,
}

/// Class-aware NMS: keeps the best-scoring box of each cluster of same-class boxes whose IoU
/// exceeds `iou_threshold`. Returns at most `max_detections`, best first.
pub fn nms(mut dets: Vec<Detection>, iou_threshold: f32, max_detections: usize) -> Vec<Detection> {
    dets.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut keep: Vec<Detection> = Vec::with_capacity(dets.len().min(max_detections));
    for d in dets {
        if keep.len() >= max_detections {
            break;
        }
        let suppressed = keep
            .iter()
            .any(|k| k.class_id == d.class_id && k.bbox.iou(&d.bbox) > iou_threshold);
        if !suppressed {
            keep.push(d);
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(class_id: usize, score: f32, x0: f32) -> Detection {
        Detection {
            class_id,
            score,
            bbox: BBox::new(x0, 0.0, x0 + 10.0, 10.0),
        }
    }

    #[test]
    fn iou_of_identical_disjoint_and_half_overlapping_boxes() {
        let a = BBox::new(0.0, 0.0, 10.0, 10.0);
        assert!((a.iou(&a) - 1.0).abs() < 1e-6);
        assert_eq!(a.iou(&BBox::new(20.0, 20.0, 30.0, 30.0)), 0.0);
        let b = BBox::new(5.0, 0.0, 15.0, 10.0);
        assert!((a.iou(&b) - 50.0 / 150.0).abs() < 1e-6);
        assert_eq!(BBox::new(1.0, 1.0, 1.0, 1.0).iou(&a), 0.0);
    }

    #[test]
    fn nms_is_class_aware_and_keeps_the_best() {
        let out = nms(
            vec![det(0, 0.5, 1.0), det(0, 0.9, 0.0), det(1, 0.8, 0.0)],
            0.5,
            10,
        );
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].class_id, out[0].score), (0, 0.9));
        assert_eq!((out[1].class_id, out[1].score), (1, 0.8));
    }

    #[test]
    fn nms_respects_max_detections() {
        let dets = (0..10)
            .map(|i| det(0, i as f32 / 10.0, i as f32 * 100.0))
            .collect();
        let out = nms(dets, 0.5, 3);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].score, 0.9);
    }
}
