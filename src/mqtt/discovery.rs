//! Home Assistant MQTT discovery: retained `<discovery_prefix>/<component>/<node>/<object>/config`
//! messages that make lookout's entities appear with no YAML. One device per lookout
//! instance; per camera and label an occupancy `binary_sensor`, a count `sensor` and (with
//! snapshots) an `image`; diagnostic sensors from the stats message. Every entity is
//! unavailable while lookout is (`<prefix>/available`).

use serde_json::{json, Value};

use super::payload::Topics;

/// What the entities are made from.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoveryInput {
    /// Home Assistant's discovery prefix.
    pub prefix: String,
    /// The client id (the device's name; its id in plain characters is the node id).
    pub client_id: String,
    /// The camera's topics.
    pub topics: Topics,
    /// The label levels announced (`person`, `car`, …).
    pub labels: Vec<String>,
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

/// The diagnostic sensors: object id suffix, name, stats field, unit.
const DIAGNOSTICS: [(&str, &str, &str, &str); 6] = [
    ("fps", "Frames per second", "fps", "fps"),
    ("detect_fps", "Detections per second", "detect_fps", "Hz"),
    ("model_ms", "Model time", "model_time_ms", "ms"),
    ("frame_age_ms", "Frame age", "frame_age_ms", "ms"),
    ("frames_dropped", "Frames dropped", "frames_dropped", ""),
    ("mqtt_dropped", "MQTT messages dropped", "mqtt_dropped", ""),
];

/// Every discovery message, `(topic, payload)`, in a stable order.
pub fn messages(d: &DiscoveryInput) -> Vec<(String, Vec<u8>)> {
    let node = node_id(&d.client_id);
    let camera = d.topics.camera();
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
    let mut out = Vec::new();
    let mut labels: Vec<&str> = d.labels.iter().map(String::as_str).collect();
    labels.push("all");
    for label in labels {
        let name = label.replace('_', " ");
        let state = d.topics.count(label);
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
                    "image_topic": d.topics.snapshot(label),
                    "content_type": "image/jpeg",
                }),
            ));
        }
    }
    let mut diagnostics: Vec<(&str, &str, &str, &str)> = DIAGNOSTICS.to_vec();
    if d.temperature {
        diagnostics.push((
            "cpu_temperature",
            "CPU temperature",
            "cpu_temperature",
            "°C",
        ));
    }
    for (suffix, name, field, unit) in diagnostics {
        let mut body = json!({
            "name": format!("{camera} {}", name.to_lowercase()),
            "state_topic": d.topics.stats(),
            "value_template": format!("{{{{ value_json.{field} }}}}"),
            "state_class": "measurement",
            "entity_category": "diagnostic",
        });
        if !unit.is_empty() {
            body["unit_of_measurement"] = json!(unit);
        }
        if suffix == "cpu_temperature" {
            body["device_class"] = json!("temperature");
        }
        out.push(entity("sensor", format!("{camera}_{suffix}"), body));
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
            labels: vec!["person".into(), "car".into()],
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
        assert!(topics.contains(&"homeassistant/sensor/lookout-pi_local/front_model_ms/config"));
        assert!(!topics.iter().any(|t| t.contains("all_snapshot")));
        assert!(!topics.iter().any(|t| t.contains("cpu_temperature")));
        // 3 labels (all included) × occupancy + count, 2 snapshots, 6 diagnostics.
        assert_eq!(m.len(), 3 * 2 + 2 + 6);
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
