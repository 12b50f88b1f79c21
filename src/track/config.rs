//! Tracker settings: what the `[tracker]` table of the configuration file holds, with defaults
//! suited to people and cars at 10 fps on a 640×480 camera whose gray plane is 320×240, and
//! validation that names the offending key.

use serde::{Deserialize, Serialize};

use super::motion::KalmanParams;
use super::visual::{self, VisualParams};
use crate::vocab::labels;

/// Settings of the [`Tracker`](super::Tracker).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrackerConfig {
    /// Smallest IoU between a detection and a track's box (at the detection's frame) for them
    /// to be associated.
    pub iou_threshold: f32,
    /// Matched detections (the first included) a tentative track needs to be confirmed,
    /// reported and given an id.
    pub confirm_hits: u32,
    /// A detection at least this confident confirms its track at once (one hit) when it is
    /// fresh (made on the current or the previous frame; a late one's box is where the object
    /// was); weaker ones still need `confirm_hits`. Above 1 turns this off. The default, 0.35,
    /// is the default `[model] threshold`: what the model reports on a fresh frame is
    /// reported at once, as detection on every frame would; a weak detection that the next
    /// round does not see again ends after `max_misses` rounds.
    pub confirm_score: f32,
    /// Weak detections: the model's answers scoring below `[model] threshold` but at least
    /// this keep an existing confirmed track (they correct its box and count as its match for
    /// the round) without ever being reported or starting a track. An object whose score
    /// dips under the threshold for one detection then keeps its box and id instead of
    /// drifting or ending. At or above the model's threshold this is off. Default 0.3 (the
    /// model's default threshold is 0.35): chosen by fidelity replay (docs/tracking.md),
    /// where it raised coverage and lowered id switches on every total.
    pub continue_score: f32,
    /// Consecutive detection rounds a confirmed track may go unmatched; it ends at this many.
    /// Scales with the detection interval by construction: it counts rounds, not frames.
    /// A tentative track ends at its second miss in a row.
    pub max_misses: u32,
    /// Frames a track may go without any matched detection before it ends (caps coasting when
    /// detections are stalled); stretched to 1.5 detection cycles when the detector is slower
    /// than that (see [`super::cadence`]).
    pub max_age_frames: u32,
    /// Consecutive frames the visual update may fail before the track ends.
    pub max_visual_failures: u32,
    /// Smallest fraction of a box's area that must lie inside the frame; below it the object
    /// has left and the track ends.
    pub min_visible: f32,
    /// Frames of box history kept per track, to associate late detections with where the
    /// track was at the detection's frame. Detections older than this are matched against the
    /// oldest entry.
    pub history_len: usize,
    /// Labels of the classes to track (COCO names such as `"person"`); empty tracks all.
    pub classes: Vec<String>,
    /// The per-object visual update.
    pub visual: VisualConfig,
    /// The motion model.
    pub kalman: KalmanConfig,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            iou_threshold: 0.3,
            confirm_hits: 2,
            confirm_score: crate::vocab::DEFAULT_SCORE_THRESHOLD,
            continue_score: 0.3,
            max_misses: 2,
            max_age_frames: 60,
            max_visual_failures: 10,
            min_visible: 0.3,
            history_len: 64,
            classes: Vec::new(),
            visual: VisualConfig::default(),
            kalman: KalmanConfig::default(),
        }
    }
}

/// Settings of the median-flow visual update (pyramidal Lucas–Kanade on a grid of points).
/// Pixel sizes are on the gray plane the tracker is given (typically half the frame size).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VisualConfig {
    /// Run the visual update; when false the boxes move by the motion model alone between
    /// detections.
    pub enabled: bool,
    /// Side of the square patch matched around each point, gray pixels, odd, 5..=21.
    pub patch_size: u32,
    /// How far from the motion model's prediction an object may be found in the next frame,
    /// gray pixels (sets the pyramid depth), 1..=128.
    pub search_radius: f32,
    /// Points per box side; the box is sampled on a `grid × grid` lattice, 2..=10.
    pub grid: u32,
    /// Largest forward–backward error of a usable point, gray pixels.
    pub max_fb_error: f32,
    /// Most iterations per pyramid level, 1..=50.
    pub max_iterations: u32,
    /// Largest size change per frame accepted from the visual update (1.1 = ±10 %); larger
    /// estimates count as failures.
    pub max_scale_change: f32,
}

impl Default for VisualConfig {
    fn default() -> Self {
        VisualConfig {
            enabled: true,
            patch_size: 9,
            search_radius: 16.0,
            grid: 5,
            max_fb_error: 1.0,
            max_iterations: 8,
            max_scale_change: 1.1,
        }
    }
}

/// Noise of the constant-velocity Kalman filter, as fractions of the box size (the geometric
/// mean of its width and height), standard deviations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KalmanConfig {
    /// Process noise of position and size per frame.
    pub process_position: f32,
    /// Process noise of velocity per frame (how fast objects may change speed).
    pub process_velocity: f32,
    /// Measurement noise of the visual update.
    pub visual_noise: f32,
    /// Measurement noise of a detection.
    pub detection_noise: f32,
}

impl Default for KalmanConfig {
    fn default() -> Self {
        KalmanConfig {
            process_position: 0.01,
            process_velocity: 0.01,
            visual_noise: 0.02,
            detection_noise: 0.03,
        }
    }
}

/// A setting outside its allowed range. `field` is the key inside the tracker table, such as
/// `visual.patch_size`; the caller prefixes the table's own path.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct TrackConfigError {
    /// Dotted key path inside the tracker table.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl TrackConfigError {
    fn new(field: &str, message: String) -> TrackConfigError {
        TrackConfigError {
            field: field.to_string(),
            message,
        }
    }

    /// The same error with `prefix.` put before the field (e.g. `tracker`).
    pub fn with_prefix(mut self, prefix: &str) -> TrackConfigError {
        self.field = format!("{prefix}.{}", self.field);
        self
    }
}

fn in_range(field: &str, value: f32, lo: f32, hi: f32) -> Result<(), TrackConfigError> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err(TrackConfigError::new(
            field,
            format!("must be between {lo} and {hi}, got {value}"),
        ))
    }
}

fn in_range_u(field: &str, value: u64, lo: u64, hi: u64) -> Result<(), TrackConfigError> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(TrackConfigError::new(
            field,
            format!("must be between {lo} and {hi}, got {value}"),
        ))
    }
}

impl TrackerConfig {
    /// Checks every setting; the error names the first bad key.
    pub fn validate(&self) -> Result<(), TrackConfigError> {
        in_range("iou_threshold", self.iou_threshold, 0.01, 1.0)?;
        in_range_u("confirm_hits", self.confirm_hits.into(), 1, 100)?;
        in_range("confirm_score", self.confirm_score, 0.0, 2.0)?;
        in_range("continue_score", self.continue_score, 0.01, 1.0)?;
        in_range_u("max_misses", self.max_misses.into(), 1, 1000)?;
        in_range_u("max_age_frames", self.max_age_frames.into(), 1, 1_000_000)?;
        in_range_u(
            "max_visual_failures",
            self.max_visual_failures.into(),
            1,
            1_000_000,
        )?;
        in_range("min_visible", self.min_visible, 0.0, 1.0)?;
        in_range_u("history_len", self.history_len as u64, 2, 4096)?;
        self.class_ids()?;
        let v = &self.visual;
        in_range_u("visual.patch_size", v.patch_size.into(), 5, 21)?;
        if v.patch_size.is_multiple_of(2) {
            return Err(TrackConfigError::new(
                "visual.patch_size",
                format!(
                    "must be odd (the patch is centred on its point), got {}",
                    v.patch_size
                ),
            ));
        }
        in_range("visual.search_radius", v.search_radius, 1.0, 128.0)?;
        in_range_u("visual.grid", v.grid.into(), 2, 10)?;
        in_range("visual.max_fb_error", v.max_fb_error, 0.05, 20.0)?;
        in_range_u("visual.max_iterations", v.max_iterations.into(), 1, 50)?;
        in_range("visual.max_scale_change", v.max_scale_change, 1.0, 2.0)?;
        let k = &self.kalman;
        in_range("kalman.process_position", k.process_position, 1e-4, 1.0)?;
        in_range("kalman.process_velocity", k.process_velocity, 1e-4, 1.0)?;
        in_range("kalman.visual_noise", k.visual_noise, 1e-4, 1.0)?;
        in_range("kalman.detection_noise", k.detection_noise, 1e-4, 1.0)?;
        Ok(())
    }

    /// The class ids named by `classes`, sorted (empty = every class).
    pub fn class_ids(&self) -> Result<Vec<usize>, TrackConfigError> {
        let mut ids = Vec::with_capacity(self.classes.len());
        for (i, name) in self.classes.iter().enumerate() {
            match labels::class_id(name) {
                Some(id) => ids.push(id),
                None => {
                    return Err(TrackConfigError::new(
                        &format!("classes[{i}]"),
                        format!("unknown label {name:?}; use one of the COCO-80 names, such as \"person\" or \"car\""),
                    ));
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    pub(crate) fn kalman_params(&self) -> KalmanParams {
        KalmanParams {
            process_position: self.kalman.process_position,
            process_velocity: self.kalman.process_velocity,
        }
    }

    pub(crate) fn visual_params(&self) -> VisualParams {
        let patch_size = self.visual.patch_size as usize;
        VisualParams {
            patch_size,
            levels: visual::VisualParams::levels_for(patch_size, self.visual.search_radius),
            grid: self.visual.grid as usize,
            max_fb_error: self.visual.max_fb_error,
            max_iterations: self.visual.max_iterations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_empty_table_gives_defaults() {
        TrackerConfig::default()
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
        let cfg: TrackerConfig = toml::from_str("").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg, TrackerConfig::default());
    }

    #[test]
    fn partial_tables_keep_other_defaults() {
        let cfg: TrackerConfig = toml::from_str("confirm_hits = 3\n[visual]\ngrid = 4\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.confirm_hits, 3);
        assert_eq!(cfg.visual.grid, 4);
        assert_eq!(cfg.visual.patch_size, VisualConfig::default().patch_size);
        assert_eq!(cfg.kalman, KalmanConfig::default());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = toml::from_str::<TrackerConfig>("iou = 0.5").err();
        assert!(err.is_some_and(|e| e.to_string().contains("iou")));
        assert!(toml::from_str::<TrackerConfig>("[visual]\nradius = 3").is_err());
    }

    #[test]
    fn errors_name_the_field() {
        let mut cfg = TrackerConfig::default();
        cfg.visual.patch_size = 8;
        let err = cfg.validate().err().map(|e| e.with_prefix("tracker"));
        assert_eq!(
            err.as_ref().map(|e| e.field.as_str()),
            Some("tracker.visual.patch_size")
        );

        let cfg = TrackerConfig {
            iou_threshold: f32::NAN,
            ..TrackerConfig::default()
        };
        assert_eq!(
            cfg.validate().err().map(|e| e.field),
            Some("iou_threshold".to_string())
        );

        let cfg = TrackerConfig {
            classes: vec!["person".into(), "unicorn".into()],
            ..TrackerConfig::default()
        };
        let err = cfg.validate().err();
        assert_eq!(err.as_ref().map(|e| e.field.as_str()), Some("classes[1]"));
        assert!(err.is_some_and(|e| e.message.contains("unicorn")));

        let mut cfg = TrackerConfig::default();
        cfg.kalman.detection_noise = 0.0;
        assert_eq!(
            cfg.validate().err().map(|e| e.field),
            Some("kalman.detection_noise".to_string())
        );
    }

    #[test]
    fn class_names_resolve_to_ids() {
        let cfg = TrackerConfig {
            classes: vec!["car".into(), "person".into(), "car".into()],
            ..TrackerConfig::default()
        };
        assert_eq!(cfg.class_ids(), Ok(vec![0, 2]));
    }
}
