//! Class-aware non-maximum suppression (boxes and IoU are in `geom`, detections in `vocab`).

pub use crate::geom::BBox;
use crate::vocab::Detection;

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
