//! The detection vocabulary every module speaks: the model's class labels ([`labels`]), one
//! detected object ([`Detection`]), the default reporting threshold, and the
//! [`DetectionRound`] a detection run hands to the tracker. Imports nothing from the crate
//! but `geom`, so the tracker, the output and the configuration use it without importing
//! the detector.

pub mod labels;

pub use labels::{label, COCO80};

use crate::geom::BBox;

/// The default smallest score a detection is reported with (config `model.threshold`,
/// `lookout detect --threshold`, the golden self-check, `[tracker] confirm_score`).
pub const DEFAULT_SCORE_THRESHOLD: f32 = 0.35;

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

/// One detection run's objects as the tracker takes them: the `reported` ones, which the
/// model reports (score above its threshold), and the `weak` ones, scored at or below the
/// threshold but kept down to the tracker's floor (`[tracker] continue_score`), which may
/// only keep existing tracks. Made in one place, [`DetectionRound::split`], for the daemon
/// and the fidelity replay alike.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DetectionRound {
    /// Scored above the reporting threshold, best first.
    pub reported: Vec<Detection>,
    /// Scored at or below the reporting threshold, best first.
    pub weak: Vec<Detection>,
}

impl DetectionRound {
    /// `dets` (decoded down to the weak detections' floor) of the classes `labels` keeps
    /// (all when `None`), split at `threshold`: above it reported, as the decoder's own
    /// threshold does, at or below it weak.
    pub fn split(mut dets: Vec<Detection>, threshold: f32, labels: Option<&[usize]>) -> Self {
        if let Some(keep) = labels {
            dets.retain(|d| keep.contains(&d.class_id));
        }
        let weak = dets
            .iter()
            .filter(|d| d.score <= threshold)
            .cloned()
            .collect();
        dets.retain(|d| d.score > threshold);
        DetectionRound {
            reported: dets,
            weak,
        }
    }

    /// Every detection of the round, reported first.
    pub fn all(&self) -> impl Iterator<Item = &Detection> {
        self.reported.iter().chain(&self.weak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(class_id: usize, score: f32) -> Detection {
        Detection {
            class_id,
            score,
            bbox: BBox::new(0.0, 0.0, 10.0, 10.0),
        }
    }

    #[test]
    fn split_keeps_what_the_decoder_would_report() {
        let round = DetectionRound::split(vec![det(0, 0.9), det(0, 0.35), det(0, 0.3)], 0.35, None);
        assert_eq!(round.reported, vec![det(0, 0.9)]);
        assert_eq!(
            round.weak,
            vec![det(0, 0.35), det(0, 0.3)],
            "a score equal to the threshold is not reported"
        );
        let all: Vec<f32> = round.all().map(|d| d.score).collect();
        assert_eq!(all, vec![0.9, 0.35, 0.3]);
    }

    #[test]
    fn split_keeps_only_the_configured_labels() {
        let dets = vec![det(0, 0.9), det(2, 0.8), det(2, 0.3), det(0, 0.2)];
        let round = DetectionRound::split(dets, 0.35, Some(&[2]));
        assert_eq!(round.reported, vec![det(2, 0.8)]);
        assert_eq!(round.weak, vec![det(2, 0.3)]);
    }

    #[test]
    fn labels_outside_coco_are_named_by_id() {
        assert_eq!(label(0), "person");
        assert_eq!(label(80), "class_80");
        assert_eq!(labels::class_id("dog"), Some(16));
    }
}
