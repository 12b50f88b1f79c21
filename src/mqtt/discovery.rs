//! Home Assistant MQTT discovery: retained `<discovery_prefix>/<component>/<node>/<object>/config`
//! messages that make lookout's entities appear with no YAML. One device per lookout
//! instance; per camera and label an occupancy `binary_sensor`, a count `sensor` and (with
//! snapshots) an `image`; per camera a `switch` for its detection; diagnostic sensors from the stats message: per camera its frame
//! rates, frame age and dropped frames (from the message's `cameras` object), once for the
//! device the model time, MQTT drops and CPU temperature. Every entity is unavailable while
//! lookout is (`<prefix>/available`).

use serde_json::{json, Value};

use super::payload::Topics;

/// What the entities are made from.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoveryInput {
    /// Home Assistant's discovery prefix.
    pub prefix: String,
    /// The client id (the device's name; its id in plain characters is the node id).
    pub client_id: String,
    /// The topics (`<prefix>/…`).
    pub topics: Topics,
    /// The cameras, each with the label levels announced for it (`person`, `car`, …).
    pub cameras: Vec<(String, Vec<String>)>,
    /// Whether snapshots are published (an `image` entity per label).
    pub snapshots: bool,
    /// Whether the board reports a CPU temperature.
    pub temperature: bool,
}

/// The client id in the characters Home Assistant accepts in ids.
pub fn node_id(client_id: &str) -> String {
    client_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A camera's diagnostic sensors: object id suffix, name, field of its entry in the stats
/// message's `cameras` object, unit.
const CAMERA_DIAGNOSTICS: [(&str, &str, &str, &str); 4] = [
    ("fps", "Frames per second", "process_fps", "fps"),
    ("detect_fps", "Detections per second", "detection_fps", "Hz"),
    ("frame_age_ms", "Frame age", "frame_age_ms", "ms"),
    ("frames_dropped", "Frames dropped", "frames_dropped", ""),
];

/// The device's diagnostic sensors: object id, name, stats message field, unit.
const DEVICE_DIAGNOSTICS: [(&str, &str, &str, &str); 2] = [
    ("model_ms", "Model time", "model_time_ms", "ms"),
    ("mqtt_dropped", "MQTT messages dropped", "mqtt_dropped", ""),
];

/// One discovery message: the entity's component, object id and body.
type Entity<'a> = dyn Fn(&str, String, Value) -> (String, Vec<u8>) + 'a;

/// `camera`'s per-label entities: occupancy, count and (with snapshots) the picture, for
/// each of `labels` and `all`.
fn label_entities(
    d: &DiscoveryInput,
    camera: &str,
    labels: &[String],
    entity: &Entity,
) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let topics = Topics::new(d.topics.prefix(), camera);
    let mut labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    labels.push("all");
    for label in labels {
        let name = label.replace('_', " ");
        let state = topics.count(label);
        out.push(entity(
            "binary_sensor",
            format!("{camera}_{label}_occupancy"),
            json!({
                "name": format!("{camera} {name} occupancy"),
                "device_class": "occupancy",
                "state_topic": state,
                "value_template": "{{ 'ON' if (value | int(0)) > 0 else 'OFF' }}",
            }),
        ));
        out.push(entity(
            "sensor",
            format!("{camera}_{label}_count"),
            json!({
                "name": format!("{camera} {name} count"),
                "state_topic": state,
                "state_class": "measurement",
                "icon": "mdi:counter",
            }),
        ));
        if d.snapshots && label != "all" {
            out.push(entity(
                "image",
                format!("{camera}_{label}_snapshot"),
                json!({
                    "name": format!("{camera} {name} snapshot"),
                    "image_topic": topics.snapshot(label),
                    "content_type": "image/jpeg",
                }),
            ));
        }
    }
    out
}

/// Every discovery message, `(topic, payload)`, in a stable order.
pub fn messages(d: &DiscoveryInput) -> Vec<(String, Vec<u8>)> {
    let node = node_id(&d.client_id);
    let device = json!({
        "identifiers": [node],
        "name": d.client_id,
        "manufacturer": "lookout",
        "model": "lookout object detection",
        "sw_version": env!("CARGO_PKG_VERSION"),
    });
    let origin = json!({"name": "lookout", "sw_version": env!("CARGO_PKG_VERSION")});
    let available = d.topics.available();
    let entity = |component: &str, object: String, mut body: Value| {
        let unique = format!("{node}_{object}");
        body["unique_id"] = json!(unique);
        body["object_id"] = json!(unique);
        body["device"] = device.clone();
        body["origin"] = origin.clone();
        body["availability_topic"] = json!(available);
        (
            format!("{}/{component}/{node}/{object}/config", d.prefix),
            body.to_string().into_bytes(),
        )
    };
    let diagnostic = |name: String, template: String, unit: &str| {
        let mut body = json!({
            "name": name,
            "state_topic": d.topics.stats(),
            "value_template": template,
            "state_class": "measurement",
            "entity_category": "diagnostic",
        });
        if !unit.is_empty() {
            body["unit_of_measurement"] = json!(unit);
        }
        body
    };
    let mut out = Vec::new();
    for (camera, labels) in &d.cameras {
        out.extend(label_entities(d, camera, labels, &entity));
        let topics = Topics::new(d.topics.prefix(), camera);
        out.push(entity(
            "switch",
            format!("{camera}_detect"),
            json!({
                "name": format!("{camera} detection"),
                "command_topic": topics.detect_set(),
                "state_topic": topics.detect_state(),
                "payload_on": "ON",
                "payload_off": "OFF",
                "icon": "mdi:cctv",
            }),
        ));
        // Every camera's latest window is in each stats message; a camera that has not
        // reported yet reads as unknown.
        for (suffix, name, field, unit) in CAMERA_DIAGNOSTICS {
            let template =
                format!("{{{{ (value_json.cameras.get('{camera}') or {{}}).get('{field}') }}}}");
            let body = diagnostic(format!("{camera} {}", name.to_lowercase()), template, unit);
            out.push(entity("sensor", format!("{camera}_{suffix}"), body));
        }
    }
    let mut device: Vec<(&str, &str, &str, &str)> = DEVICE_DIAGNOSTICS.to_vec();
    if d.temperature {
        device.push((
            "cpu_temperature",
            "CPU temperature",
            "cpu_temperature",
            "°C",
        ));
    }
    for (object, name, field, unit) in device {
        let mut body = diagnostic(
            name.to_string(),
            format!("{{{{ value_json.{field} }}}}"),
            unit,
        );
        if object == "cpu_temperature" {
            body["device_class"] = json!("temperature");
        }
        out.push(entity("sensor", object.to_string(), body));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> DiscoveryInput {
        DiscoveryInput {
            prefix: "homeassistant".into(),
            client_id: "lookout-pi.local".into(),
            topics: Topics::new("lookout", "front"),
            cameras: vec![("front".into(), vec!["person".into(), "car".into()])],
            snapshots: true,
            temperature: false,
        }
    }

    #[test]
    fn each_label_gets_occupancy_count_and_snapshot_entities() {
        let m = messages(&input());
        let topics: Vec<&str> = m.iter().map(|(t, _)| t.as_str()).collect();
        assert!(topics.contains(
            &"homeassistant/binary_sensor/lookout-pi_local/front_person_occupancy/config"
        ));
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/front_car_count/config"));
        assert!(
            topics.contains(&"homeassistant/image/lookout-pi_local/front_person_snapshot/config")
        );
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/front_all_count/config"));
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/front_fps/config"));
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/model_ms/config"));
        assert!(!topics.iter().any(|t| t.contains("all_snapshot")));
        assert!(!topics.iter().any(|t| t.contains("cpu_temperature")));
        let switch = &m
            .iter()
            .find(|(t, _)| t == "homeassistant/switch/lookout-pi_local/front_detect/config")
            .expect("the detection switch")
            .1;
        let switch: Value = serde_json::from_slice(switch).unwrap();
        assert_eq!(switch["command_topic"], "lookout/front/detect/set");
        assert_eq!(switch["state_topic"], "lookout/front/detect/state");
        assert_eq!(
            (&switch["payload_on"], &switch["payload_off"]),
            (&json!("ON"), &json!("OFF"))
        );
        // 3 labels (all included) × occupancy + count, 2 snapshots, the switch, 4 camera and
        // 2 device diagnostics.
        assert_eq!(m.len(), 3 * 2 + 2 + 1 + 4 + 2);
    }

    #[test]
    fn several_cameras_each_get_their_entities_and_the_device_its_own_once() {
        let mut d = input();
        d.cameras.push(("yard".into(), vec!["dog".into()]));
        let m = messages(&d);
        let topics: Vec<&str> = m.iter().map(|(t, _)| t.as_str()).collect();
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/yard_dog_count/config"));
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/yard_fps/config"));
        assert!(!topics.iter().any(|t| t.contains("yard_person")));
        // front: 15 as above less the 2 device ones; yard: 2 labels × 2, 1 snapshot, the
        // switch, 4 diagnostics; the device: 2.
        assert_eq!(m.len(), 13 + (2 * 2 + 1 + 1 + 4) + 2);
        let fps: Value =
            serde_json::from_slice(&m.iter().find(|(t, _)| t.contains("/yard_fps/")).unwrap().1)
                .unwrap();
        assert_eq!(
            fps["value_template"],
            "{{ (value_json.cameras.get('yard') or {}).get('process_fps') }}"
        );
        let person: Value = serde_json::from_slice(
            &m.iter()
                .find(|(t, _)| t.contains("/yard_dog_occupancy/"))
                .unwrap()
                .1,
        )
        .unwrap();
        assert_eq!(person["state_topic"], "lookout/yard/dog");
    }

    #[test]
    fn every_entity_is_unique_has_the_device_and_availability() {
        let m = messages(&input());
        let mut ids = std::collections::HashSet::new();
        for (topic, body) in &m {
            let v: Value = serde_json::from_slice(body).unwrap();
            assert!(
                ids.insert(v["unique_id"].as_str().unwrap().to_string()),
                "{topic}"
            );
            assert_eq!(v["availability_topic"], "lookout/available");
            assert_eq!(v["device"]["identifiers"][0], "lookout-pi_local");
        }
        let occ: Value = serde_json::from_slice(&m[0].1).unwrap();
        assert_eq!(occ["state_topic"], "lookout/front/person");
        assert_eq!(occ["device_class"], "occupancy");
    }
}
