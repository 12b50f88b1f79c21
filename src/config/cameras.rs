//! `[[camera]]`: several cameras in one daemon. Each table names a camera, its source and what
//! it changes of the top-level settings; [`Config::cameras`] turns the file into one complete
//! configuration per camera (the top level with the camera's source and overrides), so every
//! part of a run reads its camera's settings as it reads a single camera's.
//!
//! With no `[[camera]]` the file is one camera named `[mqtt] camera`.

use serde::{Deserialize, Serialize};

use super::{Config, Problem, SourceConfig};
use crate::events::{EventsConfig, ZonesConfig};
use crate::schedule::ScheduleKind;

/// One `[[camera]]` table. An absent override keeps the top-level value.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CameraConfig {
    /// The camera's name in the journal (`CAMERA=`), MQTT topics, Home Assistant and the
    /// tracks file: 1–64 letters, digits, `_` or `-`.
    #[serde(default)]
    pub name: String,
    /// `[camera.source]`: the keys of `[source]` (required: a camera without one is an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceConfig>,
    /// `[pipeline] detect_every` for this camera.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect_every: Option<u32>,
    /// `[pipeline] schedule` for this camera.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleKind>,
    /// `[pipeline] idle_detect_interval` for this camera.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_detect_interval: Option<f64>,
    /// `[output] labels` for this camera (the labels the detector reports for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// `[camera.events]`: this camera's event rules (masks, required zones, …), in place of
    /// the whole `[events]` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventsConfig>,
    /// `[camera.zones]`: this camera's zones, in place of the whole `[zones]` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<ZonesConfig>,
}

/// One camera of a configuration, with the complete configuration it runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct Camera {
    /// Its name (also `config.mqtt.camera`).
    pub name: String,
    /// The top-level configuration with this camera's source and overrides; no `[[camera]]`.
    pub config: Config,
}

impl Config {
    /// The cameras this configuration runs: one per `[[camera]]`, or the file itself as one
    /// camera named `[mqtt] camera`.
    pub fn cameras(&self) -> Vec<Camera> {
        if self.camera.is_empty() {
            return vec![Camera {
                name: self.mqtt.camera.clone(),
                config: self.clone(),
            }];
        }
        self.camera.iter().map(|c| self.expand(c)).collect()
    }

    /// Whether this configuration has several cameras (`[[camera]]` tables).
    pub fn several_cameras(&self) -> bool {
        self.camera.len() > 1
    }

    /// The complete configuration of camera `c`.
    fn expand(&self, c: &CameraConfig) -> Camera {
        let mut cfg = self.clone();
        cfg.camera = Vec::new();
        cfg.mqtt.camera = c.name.clone();
        if let Some(s) = &c.source {
            cfg.source = s.clone();
        }
        if let Some(n) = c.detect_every {
            cfg.pipeline.detect_every = n;
        }
        if let Some(s) = c.schedule {
            cfg.pipeline.schedule = s;
        }
        if let Some(i) = c.idle_detect_interval {
            cfg.pipeline.idle_detect_interval = i;
        }
        if let Some(l) = &c.labels {
            cfg.output.labels = l.clone();
        }
        if let Some(e) = &c.events {
            cfg.events = e.clone();
        }
        if let Some(z) = &c.zones {
            cfg.zones = z.clone();
        }
        if self.camera.len() > 1 && !cfg.output.tracks_file.is_empty() {
            cfg.output.tracks_file = tracks_file_of(&cfg.output.tracks_file, &c.name);
        }
        Camera {
            name: c.name.clone(),
            config: cfg,
        }
    }

    /// `[[camera]]`: names, sources, and each camera's own settings (keys `camera[i].…`).
    /// `environment`: instead, ask the machine about each camera's source (file, device,
    /// command).
    pub(super) fn check_cameras(&self, environment: bool) -> Vec<Problem> {
        let mut p = Vec::new();
        if environment {
            for (i, c) in self.camera.iter().enumerate() {
                if c.source.is_some() {
                    let mut own = Vec::new();
                    super::check_source(&self.expand(c).config, &mut own);
                    p.extend(
                        own.into_iter()
                            .map(|q| Problem::new(format!("camera[{i}].{}", q.key), q.message)),
                    );
                }
            }
            return p;
        }
        if self.camera.is_empty() {
            return p;
        }
        if self.source != SourceConfig::default() {
            p.push(Problem::new(
                "source",
                "with [[camera]] tables each camera names its source in [camera.source]: \
                 move [source] into one of them",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.camera.iter().enumerate() {
            let key = |k: &str| format!("camera[{i}].{k}");
            if !crate::mqtt::config::is_plain_name(&c.name) {
                p.push(Problem::new(
                    key("name"),
                    format!(
                        "expected 1–64 letters, digits, '_' or '-' (a journal field, a topic level and a Home Assistant id), found {:?}",
                        c.name
                    ),
                ));
            } else if !seen.insert(c.name.as_str()) {
                p.push(Problem::new(
                    key("name"),
                    format!("{:?} names two cameras: each needs its own name", c.name),
                ));
            }
            if c.source.is_none() {
                p.push(Problem::new(
                    key("source"),
                    "expected a [camera.source] table with at least `spec` (the camera's device, file or command), found none",
                ));
                continue;
            }
            let own = self.expand(c).config.check_values();
            p.extend(own.into_iter().filter_map(|q| {
                let k = own_key(c, &q.key)?;
                Some(Problem::new(key(&k), q.message))
            }));
        }
        p
    }
}

/// The key of a camera's problem inside its `[[camera]]` table, or `None` for a problem of a
/// setting the camera does not set (reported once, at the top level).
fn own_key(c: &CameraConfig, key: &str) -> Option<String> {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    match section {
        "source" => Some(key.to_string()),
        "pipeline" => {
            let set = match rest {
                "detect_every" => c.detect_every.is_some(),
                "schedule" => c.schedule.is_some(),
                "idle_detect_interval" => c.idle_detect_interval.is_some(),
                _ => false,
            };
            set.then(|| rest.to_string())
        }
        "output" if rest == "labels" => c.labels.is_some().then(|| rest.to_string()),
        // Event rules name zones: a camera that sets either owns the problems of both.
        "events" | "zones" => (c.events.is_some() || c.zones.is_some()).then(|| key.to_string()),
        _ => None,
    }
}

/// The tracks file of camera `name` when there are several: the name inserted before the
/// extension (`/var/lib/lookout/tracks.jsonl` → `/var/lib/lookout/tracks.door.jsonl`), or
/// appended when there is none.
pub fn tracks_file_of(path: &str, name: &str) -> String {
    let p = std::path::Path::new(path);
    let stem = p.file_stem().map(|s| s.to_string_lossy().to_string());
    let ext = p.extension().map(|s| s.to_string_lossy().to_string());
    let file = match (stem, ext) {
        (Some(stem), Some(ext)) => format!("{stem}.{name}.{ext}"),
        (Some(stem), None) => format!("{stem}.{name}"),
        _ => return format!("{path}.{name}"),
    };
    match p.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.join(file).display().to_string(),
        None => file,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, crate::config::ConfigErrors> {
        Config::parse(text, "test.toml")
    }

    #[test]
    fn no_camera_table_is_one_camera_named_by_mqtt_camera() {
        let c = parse("[mqtt]\ncamera = \"porch\"\n").unwrap();
        let cams = c.cameras();
        assert_eq!(cams.len(), 1);
        assert_eq!(cams[0].name, "porch");
        assert_eq!(cams[0].config, c);
        assert_eq!(Config::default().cameras()[0].name, "camera");
    }

    #[test]
    fn each_camera_gets_its_source_and_overrides_and_inherits_the_rest() {
        let c = parse(
            "[pipeline]\ndetect_every = 4\n[output]\ntracks_file = \"/tmp/t.jsonl\"\n\
             [[camera]]\nname = \"door\"\ndetect_every = 2\nlabels = [\"person\"]\n[camera.source]\nspec = \"demo\"\n\
             [camera.zones]\nstep = [[0.0, 0.5], [1.0, 0.5], [1.0, 1.0]]\n\
             [[camera]]\nname = \"yard\"\n[camera.source]\nspec = \"demo\"\nfps = 5\n",
        )
        .unwrap();
        let cams = c.cameras();
        assert_eq!(cams.len(), 2);
        let (door, yard) = (&cams[0].config, &cams[1].config);
        assert_eq!(door.pipeline.detect_every, 2);
        assert_eq!(yard.pipeline.detect_every, 4);
        assert_eq!(door.output.labels, ["person"]);
        assert!(yard.output.labels.is_empty());
        assert!(door.zones.contains_key("step") && yard.zones.is_empty());
        assert_eq!(yard.source.fps, 5);
        assert_eq!(
            (door.mqtt.camera.as_str(), yard.mqtt.camera.as_str()),
            ("door", "yard")
        );
        assert_eq!(door.output.tracks_file, "/tmp/t.door.jsonl");
        assert!(door.camera.is_empty());
    }

    #[test]
    fn bad_cameras_are_errors_naming_the_key() {
        let keys = |text: &str| -> Vec<String> {
            parse(text)
                .unwrap_err()
                .0
                .into_iter()
                .map(|e| format!("{}@{}", e.key, e.line))
                .collect()
        };
        let cam = |name: &str| {
            format!("[[camera]]\nname = \"{name}\"\n[camera.source]\nspec = \"demo\"\n")
        };
        assert_eq!(
            keys(&format!("{}{}", cam("a"), cam("a"))),
            ["camera[1].name@6"]
        );
        assert_eq!(keys(&cam("front door")), ["camera[0].name@2"]);
        assert_eq!(keys("[[camera]]\nname = \"a\"\n"), ["camera[0].source@0"]);
        assert_eq!(
            keys(&format!("[source]\nspec = \"demo\"\nfps = 5\n{}", cam("a"))),
            ["source@1"]
        );
        assert_eq!(
            keys("[[camera]]\nname = \"a\"\ndetect_every = 0\n[camera.source]\nspec = \"/nonexistent.mjpeg\"\n"),
            ["camera[0].detect_every@3", "camera[0].source.spec@5"]
        );
        assert_eq!(
            keys("[[camera]]\nname = \"a\"\nlabels = [\"unicorn\"]\n[camera.source]\nspec = \"demo\"\n"),
            ["camera[0].labels@3"]
        );
        assert_eq!(
            keys(&format!(
                "{}[[camera]]\nname = \"b\"\n[camera.source]\nfps = 5\n",
                cam("a")
            )),
            ["camera[1].source.spec@0"]
        );
    }

    #[test]
    fn the_tracks_file_of_a_camera_has_its_name_before_the_extension() {
        assert_eq!(
            tracks_file_of("/a/tracks.jsonl", "door"),
            "/a/tracks.door.jsonl"
        );
        assert_eq!(tracks_file_of("tracks", "door"), "tracks.door");
        assert_eq!(tracks_file_of("t.jsonl", "x"), "t.x.jsonl");
    }
}
