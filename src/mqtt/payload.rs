//! Topic names and message bodies: the shapes Frigate's users already automate
//! (`<prefix>/events` with `{type, before, after}`, counts per camera and label, a retained
//! snapshot per label, `<prefix>/stats`), built from lookout's events and stats. Pure
//! functions, so the bytes are tested without a broker.

use serde_json::{json, Map, Value};

use crate::events::Event;
use crate::geom::BBox;
use crate::stats::Report;
use crate::vocab::labels;

/// Availability payloads (Home Assistant knows only these two words).
pub const ONLINE: &str = "online";
/// See [`ONLINE`]: also sent on a clean stop, and the last will.
pub const OFFLINE: &str = "offline";

/// The topics of one camera under one prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct Topics {
    prefix: String,
    camera: String,
}

/// A label as one topic level and id: `traffic light` → `traffic_light`.
pub fn label_level(class_id: usize) -> String {
    labels::label(class_id).replace(' ', "_")
}

impl Topics {
    /// Topics under `prefix` for `camera`.
    pub fn new(prefix: &str, camera: &str) -> Topics {
        Topics {
            prefix: prefix.to_string(),
            camera: camera.to_string(),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The camera's name.
    pub fn camera(&self) -> &str {
        &self.camera
    }

    /// `<prefix>/available`: `online` / `offline`, retained; the last will.
    pub fn available(&self) -> String {
        format!("{}/available", self.prefix)
    }

    /// `<prefix>/events`: event messages, not retained.
    pub fn events(&self) -> String {
        format!("{}/events", self.prefix)
    }

    /// `<prefix>/<camera>/<label>`: how many such objects are events now, retained.
    pub fn count(&self, label: &str) -> String {
        format!("{}/{}/{label}", self.prefix, self.camera)
    }

    /// `<prefix>/<camera>/all`: how many events are under way now, retained.
    pub fn count_all(&self) -> String {
        self.count("all")
    }

    /// `<prefix>/<camera>/<label>/snapshot`: the latest event's best picture (JPEG), retained.
    pub fn snapshot(&self, label: &str) -> String {
        format!("{}/{}/{label}/snapshot", self.prefix, self.camera)
    }

    /// `<prefix>/<camera>/detect/set`: read, `ON` / `OFF` switches the camera's detection.
    pub fn detect_set(&self) -> String {
        format!("{}/{}/detect/set", self.prefix, self.camera)
    }

    /// `<prefix>/<camera>/detect/state`: `ON` / `OFF`, whether the camera detects, retained.
    pub fn detect_state(&self) -> String {
        format!("{}/{}/detect/state", self.prefix, self.camera)
    }

    /// `<prefix>/stats`: the stats window's figures, not retained.
    pub fn stats(&self) -> String {
        format!("{}/stats", self.prefix)
    }
}

/// `[x0, y0, x1, y1]` in whole frame pixels.
fn box_px(b: &BBox) -> [i64; 4] {
    [
        b.x0.round() as i64,
        b.y0.round() as i64,
        b.x1.round() as i64,
        b.y1.round() as i64,
    ]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// What an event's messages carry beyond the [`Event`] itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventContext {
    /// The event id as published: `<start time>-<event number>`, unique across restarts.
    pub id: String,
    /// Wall-clock start, seconds since the Unix epoch.
    pub start_time: f64,
    /// Wall-clock time of this message's frame.
    pub frame_time: f64,
    /// Wall-clock end (on `end` only).
    pub end_time: Option<f64>,
    /// Every zone the object has been in.
    pub entered_zones: Vec<String>,
    /// The snapshot taken, if any: its frame time, box and score.
    pub snapshot: Option<(f64, BBox, f32)>,
}

/// The `after` (or `before`) object of an event message: Frigate's field names for what
/// lookout knows, lookout's own under distinct names (`event_number`, `track_id`).
pub fn event_object(e: &Event, camera: &str, ctx: &EventContext) -> Value {
    let b = &e.bbox;
    let (w, h) = (b.x1 - b.x0, b.y1 - b.y0);
    let area = (w.max(0.0) * h.max(0.0)).round() as i64;
    let ratio = if h > 0.0 { round3((w / h) as f64) } else { 0.0 };
    let snapshot = match &ctx.snapshot {
        Some((t, sb, score)) => json!({
            "frame_time": round3(*t),
            "box": box_px(sb),
            "area": ((sb.x1 - sb.x0) * (sb.y1 - sb.y0)).round() as i64,
            "score": round3(*score as f64),
        }),
        None => Value::Null,
    };
    json!({
        "id": ctx.id,
        "camera": camera,
        "frame_time": round3(ctx.frame_time),
        "label": labels::label(e.class_id),
        "sub_label": Value::Null,
        "score": round3(e.last_score as f64),
        "top_score": round3(e.score as f64),
        "false_positive": false,
        "start_time": round3(ctx.start_time),
        "end_time": ctx.end_time.map(round3),
        "box": box_px(b),
        "area": area,
        "ratio": ratio,
        "current_zones": e.zones,
        "entered_zones": ctx.entered_zones,
        "has_snapshot": ctx.snapshot.is_some(),
        "has_clip": false,
        "snapshot": snapshot,
        "active": true,
        "stationary": false,
        "event_number": e.id,
        "track_id": e.track_id,
    })
}

/// The kind of an event message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The object became an event.
    New,
    /// Its label, zones, track or snapshot changed.
    Update,
    /// It left.
    End,
}

impl EventKind {
    /// `new`, `update` or `end`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::New => "new",
            EventKind::Update => "update",
            EventKind::End => "end",
        }
    }
}

/// An `<prefix>/events` message: `{"type", "before", "after"}`; `before` is the previous
/// message's `after` (the same as `after` on `new`).
pub fn event_message(kind: EventKind, before: Option<&Value>, after: &Value) -> Vec<u8> {
    let before = before.unwrap_or(after);
    let v = json!({"type": kind.as_str(), "before": before, "after": after});
    v.to_string().into_bytes()
}

/// What the stats message carries besides the window's report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsContext {
    /// Seconds since lookout started.
    pub uptime: f64,
    /// SoC temperature, where known.
    pub cpu_temperature: Option<f64>,
    /// MQTT messages sent so far.
    pub mqtt_sent: u64,
    /// MQTT messages dropped so far.
    pub mqtt_dropped: u64,
}

/// A camera's entry in the stats message's `cameras` object (Frigate's names).
pub fn camera_entry(r: &Report) -> Value {
    json!({
        "camera_fps": r.capture_fps,
        "process_fps": r.fps,
        "detection_fps": r.detect_fps,
        "skipped_fps": 0.0,
        "frames_dropped": r.frames_dropped,
        "frame_age_ms": r.frame_age_ms,
    })
}

/// The `<prefix>/stats` message of `camera`'s stats window: the journal's stats fields (same
/// names, lower case) at the top level, with `camera` naming whose they are, plus Frigate's
/// `service`, `cameras` (every camera's latest window: `cameras`, which holds `camera`'s
/// entry too) and `detectors` objects.
pub fn stats_message(
    r: &Report,
    camera: &str,
    cameras: &Map<String, Value>,
    ctx: &StatsContext,
) -> Vec<u8> {
    let mut top = match serde_json::to_value(r) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    top.insert("camera".into(), json!(camera));
    top.insert("mqtt_sent".into(), json!(ctx.mqtt_sent));
    top.insert("mqtt_dropped".into(), json!(ctx.mqtt_dropped));
    top.insert("cpu_temperature".into(), json!(ctx.cpu_temperature));
    top.insert(
        "service".into(),
        json!({"uptime": ctx.uptime.round(), "version": env!("CARGO_PKG_VERSION")}),
    );
    let mut cams = cameras.clone();
    cams.entry(camera).or_insert_with(|| camera_entry(r));
    top.insert("cameras".into(), Value::Object(cams));
    top.insert(
        "detectors".into(),
        json!({"cpu": {"inference_speed": r.model_time_ms}}),
    );
    Value::Object(top).to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event {
            id: 7,
            track_id: 12,
            class_id: 0,
            score: 0.81,
            last_score: 0.64,
            bbox: BBox {
                x0: 10.2,
                y0: 20.0,
                x1: 50.0,
                y1: 120.4,
            },
            best_bbox: BBox::default(),
            zones: vec!["drive".into()],
            seq: 40,
            seconds: 2.5,
        }
    }

    #[test]
    fn topics_follow_the_prefix_camera_label_layout() {
        let t = Topics::new("lookout", "front");
        assert_eq!(t.available(), "lookout/available");
        assert_eq!(t.events(), "lookout/events");
        assert_eq!(t.count("person"), "lookout/front/person");
        assert_eq!(t.count_all(), "lookout/front/all");
        assert_eq!(t.snapshot("person"), "lookout/front/person/snapshot");
        assert_eq!(t.stats(), "lookout/stats");
        assert_eq!(label_level(9), "traffic_light");
    }

    #[test]
    fn an_event_object_has_frigates_fields() {
        let ctx = EventContext {
            id: "1700000000.5-7".into(),
            start_time: 1_700_000_000.5,
            frame_time: 1_700_000_003.0,
            end_time: None,
            entered_zones: vec!["drive".into()],
            snapshot: None,
        };
        let v = event_object(&event(), "front", &ctx);
        assert_eq!(v["id"], "1700000000.5-7");
        assert_eq!(v["camera"], "front");
        assert_eq!(v["label"], "person");
        assert_eq!(v["score"], 0.64);
        assert_eq!(v["top_score"], 0.81);
        assert_eq!(v["box"], json!([10, 20, 50, 120]));
        assert_eq!(v["area"], 3996); // 39.8 × 100.4
        assert_eq!(v["end_time"], Value::Null);
        assert_eq!(v["current_zones"], json!(["drive"]));
        assert_eq!(v["has_snapshot"], false);
        assert_eq!(v["false_positive"], false);
        let m: Value = serde_json::from_slice(&event_message(EventKind::New, None, &v)).unwrap();
        assert_eq!(m["type"], "new");
        assert_eq!(m["before"], m["after"]);
    }

    #[test]
    fn stats_carry_the_journal_fields_and_frigates_objects() {
        let r = Report {
            fps: 10.0,
            capture_fps: 10.0,
            detect_fps: 2.0,
            model_time_ms: 80.5,
            model_time_p95_ms: 90.0,
            model_time_max_ms: 95.0,
            track_time_ms: 1.2,
            frame_age_ms: 30.0,
            frame_age_p95_ms: 40.0,
            frames_dropped: 1,
            frames_corrupt: 0,
            detect_motion: 0,
            detect_uncertain: 0,
            detect_interval: 20,
            detect_idle: 0,
            tracks_lines_lost: 0,
            tracks: 2,
        };
        let v: Value = serde_json::from_slice(&stats_message(
            &r,
            "front",
            &Map::new(),
            &StatsContext::default(),
        ))
        .unwrap();
        assert_eq!(v["fps"], 10.0);
        assert_eq!(v["model_time_ms"], 80.5);
        assert_eq!(v["cameras"]["front"]["detection_fps"], 2.0);
        assert_eq!(v["detectors"]["cpu"]["inference_speed"], 80.5);
        assert_eq!(v["service"]["version"], env!("CARGO_PKG_VERSION"));
    }
}
