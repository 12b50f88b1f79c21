//! The `[snapshots]` table: a picture of each event's best moment, published on MQTT
//! (retained, per label) and optionally kept on disk within bounds an SD card survives.

use serde::{Deserialize, Serialize};

/// Settings of [`super::Snapshots`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SnapshotsConfig {
    /// Take snapshots (published when MQTT is on, saved when `dir` is set).
    pub enabled: bool,
    /// Crop around the object (a square 1.2× its longer side, at least `height` pixels
    /// of the frame where it has them); false: the whole frame.
    pub crop: bool,
    /// Draw the object's box.
    pub bounding_box: bool,
    /// Height of the picture in pixels (16–2160).
    pub height: u32,
    /// JPEG quality (1–100).
    pub quality: u8,
    /// Directory to keep snapshots in; empty: none are saved.
    pub dir: String,
    /// Files kept at most in `dir` (the oldest go first).
    pub max_files: usize,
    /// Megabytes kept at most in `dir`.
    pub max_mb: f64,
    /// Days a snapshot is kept at most (0: no age limit).
    pub max_days: f64,
}

impl Default for SnapshotsConfig {
    fn default() -> Self {
        SnapshotsConfig {
            enabled: true,
            crop: true,
            bounding_box: true,
            height: 270,
            quality: 70,
            dir: String::new(),
            max_files: 1000,
            max_mb: 200.0,
            max_days: 10.0,
        }
    }
}

/// A problem with one key of `[snapshots]`: (key, message).
pub type SnapshotsConfigError = (String, String);

impl SnapshotsConfig {
    /// The checks of the values alone.
    pub fn check_values(&self) -> Vec<SnapshotsConfigError> {
        let mut p = Vec::new();
        let mut bad = |k: &str, m: &str| p.push((format!("snapshots.{k}"), m.to_string()));
        if !(16..=2160).contains(&self.height) {
            bad("height", "must be 16–2160 pixels");
        }
        if !(1..=100).contains(&self.quality) {
            bad("quality", "must be 1–100");
        }
        if !(1..=1_000_000).contains(&self.max_files) {
            bad("max_files", "must be 1–1000000");
        }
        if !(self.max_mb.is_finite() && self.max_mb > 0.0 && self.max_mb <= 1e6) {
            bad("max_mb", "must be more than 0 and at most 1000000");
        }
        if !(self.max_days.is_finite() && (0.0..=36500.0).contains(&self.max_days)) {
            bad("max_days", "must be 0 (no limit) to 36500");
        }
        p
    }

    /// The checks that look at the disk: `dir` is a directory lookout can write to (or can
    /// be made).
    pub fn check_environment(&self) -> Vec<SnapshotsConfigError> {
        if !self.enabled || self.dir.is_empty() {
            return Vec::new();
        }
        let dir = std::path::Path::new(&self.dir);
        let problem = match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => Some("is not a directory".to_string()),
            Ok(m) if m.permissions().readonly() => Some("is read-only".to_string()),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match dir.parent() {
                Some(p) if p.as_os_str().is_empty() || p.is_dir() => None,
                _ => Some("does not exist, nor does its parent".to_string()),
            },
            Err(e) => Some(e.to_string()),
        };
        problem
            .map(|m| vec![("snapshots.dir".to_string(), format!("{}: {m}", self.dir))])
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_key() {
        assert!(SnapshotsConfig::default().check_values().is_empty());
        let c = SnapshotsConfig {
            height: 0,
            quality: 101,
            max_mb: f64::NAN,
            ..SnapshotsConfig::default()
        };
        let keys: Vec<String> = c.check_values().into_iter().map(|e| e.0).collect();
        assert_eq!(
            keys,
            ["snapshots.height", "snapshots.quality", "snapshots.max_mb"]
        );
        let c = SnapshotsConfig {
            dir: "/proc/version".into(),
            ..SnapshotsConfig::default()
        };
        assert_eq!(c.check_environment()[0].0, "snapshots.dir");
    }
}
