//! Event settings: the `[events]` table (which tracks become events) and the `[zones]` table
//! (named areas of the frame an event reports it is in), with defaults for a Pi camera that
//! watches people, vehicles and pets, and validation that names the offending key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::polygon::Polygon;
use crate::vocab::labels;

/// What a Pi camera is usually there for: people, vehicles and pets.
pub const DEFAULT_LABELS: [&str; 8] = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "bus",
    "truck",
    "cat",
    "dog",
];

/// Settings of the event rules ([`super::Events`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    /// Labels that can become events (COCO names). Empty = every label.
    pub labels: Vec<String>,
    /// A track becomes an event only when the median score of its detections reaches this.
    pub min_score: f32,
    /// ... or reaches this lower median once its object has walked at least one box height
    /// (the taller of its first box and its box now) from where it was first seen (small,
    /// distant people score lower than near ones; a phantom on a cone or a sign stays put).
    /// Equal to `min_score` (or 1): off.
    pub min_score_moving: f32,
    /// ... and it was matched by at least this many detections (the first one included).
    pub min_detections: u32,
    /// ... and it has been tracked for at least this many seconds.
    pub min_seconds: f64,
    /// Smallest box height in frame pixels, per label (`person = 30`): smaller objects do not
    /// start events (an event already under way goes on when its object gets smaller).
    pub min_height: BTreeMap<String, f32>,
    /// An event whose track was lost waits this many seconds for its object to be found again
    /// (a new track of the same kind where the lost one was heading) before it ends: one
    /// object that the tracker loses for a moment stays one event.
    pub rejoin_seconds: f64,
    /// Areas where nothing becomes an event: polygons of `[x, y]` points in fractions of the
    /// frame (0..1, origin top left), tested against the bottom centre of the object's box
    /// (where it stands).
    pub masks: Vec<Vec<[f32; 2]>>,
    /// Names of `[zones]`: when given, an object becomes an event only inside one of them.
    pub zones: Vec<String>,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            labels: DEFAULT_LABELS.iter().map(|s| s.to_string()).collect(),
            min_score: 0.5,
            min_score_moving: 0.4,
            min_detections: 2,
            min_seconds: 0.0,
            min_height: BTreeMap::new(),
            rejoin_seconds: 3.0,
            masks: Vec::new(),
            zones: Vec::new(),
        }
    }
}

/// The `[zones]` table: a name for each area, `name = [[x, y], …]` in frame fractions.
pub type ZonesConfig = BTreeMap<String, Vec<[f32; 2]>>;

/// A bad setting: the dotted key (from the configuration's top level) and what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct EventsConfigError {
    /// Dotted key path, e.g. `events.min_score` or `zones.drive`.
    pub key: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

fn err(key: impl Into<String>, message: impl Into<String>) -> EventsConfigError {
    EventsConfigError {
        key: key.into(),
        message: message.into(),
    }
}

/// The settings checked and compiled: class ids, polygons, per-class heights.
#[derive(Clone, Debug)]
pub struct Rules {
    /// Sorted class ids that may become events (empty = all).
    pub classes: Vec<usize>,
    /// Median detection score needed.
    pub min_score: f32,
    /// Median detection score needed once the object has moved a box height.
    pub min_score_moving: f32,
    /// Detections needed.
    pub min_detections: u32,
    /// Seconds tracked needed.
    pub min_seconds: f64,
    /// `(class id, height in pixels)`.
    pub min_height: Vec<(usize, f32)>,
    /// Seconds a lost event waits.
    pub rejoin_seconds: f64,
    /// Masks.
    pub masks: Vec<Polygon>,
    /// Every zone, by name.
    pub zones: Vec<(String, Polygon)>,
    /// Indices into `zones` of the required ones (empty = none required).
    pub required: Vec<usize>,
}

impl Rules {
    /// Checks `[events]` and `[zones]` together (a required zone must exist); every problem
    /// found, each naming its key.
    pub fn new(cfg: &EventsConfig, zones: &ZonesConfig) -> Result<Rules, Vec<EventsConfigError>> {
        let mut problems = Vec::new();
        let mut classes = Vec::new();
        for (i, name) in cfg.labels.iter().enumerate() {
            match labels::class_id(name) {
                Some(id) => classes.push(id),
                None => problems.push(err(
                    format!("events.labels[{i}]"),
                    format!("unknown label {name:?}; use one of the COCO-80 names, such as \"person\" or \"car\""),
                )),
            }
        }
        classes.sort_unstable();
        classes.dedup();
        let range = |key: &str, v: f64, lo: f64, hi: f64, problems: &mut Vec<_>| {
            if !(v.is_finite() && v >= lo && v <= hi) {
                problems.push(err(
                    format!("events.{key}"),
                    format!("must be between {lo} and {hi}, got {v}"),
                ));
            }
        };
        range("min_score", cfg.min_score.into(), 0.0, 1.0, &mut problems);
        range(
            "min_score_moving",
            cfg.min_score_moving.into(),
            0.0,
            1.0,
            &mut problems,
        );
        range(
            "min_detections",
            cfg.min_detections.into(),
            1.0,
            1000.0,
            &mut problems,
        );
        range("min_seconds", cfg.min_seconds, 0.0, 3600.0, &mut problems);
        range(
            "rejoin_seconds",
            cfg.rejoin_seconds,
            0.0,
            3600.0,
            &mut problems,
        );
        let mut min_height = Vec::new();
        for (name, &h) in &cfg.min_height {
            let key = format!("events.min_height.{name}");
            match labels::class_id(name) {
                None => problems.push(err(
                    key,
                    format!("unknown label {name:?}; use a COCO-80 name"),
                )),
                Some(_) if !(h.is_finite() && (0.0..=16384.0).contains(&h)) => problems.push(err(
                    key,
                    format!("must be a height in pixels between 0 and 16384, got {h}"),
                )),
                Some(id) => min_height.push((id, h)),
            }
        }
        let mut masks = Vec::new();
        for (i, pts) in cfg.masks.iter().enumerate() {
            match Polygon::new(pts) {
                Ok(p) => masks.push(p),
                Err(m) => problems.push(err(format!("events.masks[{i}]"), m)),
            }
        }
        let (zones_checked, required) = check_zones(cfg, zones, &mut problems);
        if !problems.is_empty() {
            return Err(problems);
        }
        // `required` indexes `zones` by the map's order, which is `polys`' order when every
        // zone is valid (checked above).
        Ok(Rules {
            classes,
            min_score: cfg.min_score,
            min_score_moving: cfg.min_score_moving,
            min_detections: cfg.min_detections,
            min_seconds: cfg.min_seconds,
            min_height,
            rejoin_seconds: cfg.rejoin_seconds,
            masks,
            zones: zones_checked,
            required,
        })
    }

    /// Whether class `id` may become an event.
    pub fn allows(&self, class_id: usize) -> bool {
        self.classes.is_empty() || self.classes.binary_search(&class_id).is_ok()
    }

    /// The smallest box height for class `id`, pixels.
    pub fn min_height_of(&self, class_id: usize) -> f32 {
        self.min_height
            .iter()
            .find(|(c, _)| *c == class_id)
            .map_or(0.0, |(_, h)| *h)
    }
}

/// `[zones]` and `events.zones`: the zones' polygons by name, and the indices of the required
/// ones; what is wrong goes to `problems`.
fn check_zones(
    cfg: &EventsConfig,
    zones: &ZonesConfig,
    problems: &mut Vec<EventsConfigError>,
) -> (Vec<(String, Polygon)>, Vec<usize>) {
    let mut polys = Vec::new();
    for (name, pts) in zones {
        if !valid_zone_name(name) {
            let why = "a zone name is 1 to 64 letters, digits, '_' or '-' (it goes into the journal's ZONES field, comma-separated)";
            problems.push(err(format!("zones.{name}"), why));
            continue;
        }
        match Polygon::new(pts) {
            Ok(p) => polys.push((name.clone(), p)),
            Err(m) => problems.push(err(format!("zones.{name}"), m)),
        }
    }
    let mut required = Vec::new();
    for (i, name) in cfg.zones.iter().enumerate() {
        match zones.keys().position(|z| z == name) {
            Some(idx) => required.push(idx),
            None => problems.push(err(
                format!("events.zones[{i}]"),
                format!(
                    "no zone named {name:?} in [zones] (zones defined: {})",
                    if zones.is_empty() {
                        "none".to_string()
                    } else {
                        zones.keys().cloned().collect::<Vec<_>>().join(", ")
                    }
                ),
            )),
        }
    }
    (polys, required)
}

/// Zone names go into comma-separated journal fields and MQTT topics: plain words only.
fn valid_zone_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_an_empty_table_gives_them() {
        let cfg: EventsConfig = toml::from_str("").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg, EventsConfig::default());
        let rules = Rules::new(&cfg, &ZonesConfig::new()).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(
            rules.allows(0) && rules.allows(2) && !rules.allows(4),
            "person, car, not airplane"
        );
    }

    #[test]
    fn every_bad_key_is_named() {
        let cfg: EventsConfig = toml::from_str(
            "labels = [\"person\", \"unicorn\"]\nmin_score = 1.5\nmin_score_moving = -0.1\nzones = [\"drive\"]\nmasks = [[[0.0, 0.0], [1.0, 1.0]]]\n[min_height]\nperson = -3\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let zones: ZonesConfig = toml::from_str("lawn = [[0.0, 0.0], [0.5, 0.0], [0.5, 2.0]]\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<String> = Rules::new(&cfg, &zones)
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.key)
            .collect();
        for k in [
            "events.labels[1]",
            "events.min_score",
            "events.min_score_moving",
            "events.min_height.person",
            "events.masks[0]",
            "zones.lawn",
            "events.zones[0]",
        ] {
            assert!(keys.iter().any(|x| x == k), "{k} not in {keys:?}");
        }
    }

    #[test]
    fn zone_names_are_plain_words() {
        let zones: ZonesConfig = toml::from_str("\"a,b\" = [[0.0, 0.0], [0.5, 0.0], [0.5, 0.5]]\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let e = Rules::new(&EventsConfig::default(), &zones)
            .err()
            .unwrap_or_default();
        assert!(e.first().is_some_and(|e| e.key == "zones.a,b"));
    }
}
