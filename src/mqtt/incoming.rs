//! What lookout accepts from the broker: Home Assistant's birth message and the detection
//! switch of each camera (`<prefix>/<camera>/detect/set`, `ON` / `OFF`). Any other topic or
//! payload — whatever its size or bytes — is ignored (`fuzz/fuzz_targets/mqtt_incoming.rs`).

use std::time::Duration;

/// The longest payload read; anything longer is ignored unread.
const MAX_PAYLOAD: usize = 64;

/// An incoming message, understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// Home Assistant (re)started: discovery and states are to be sent again.
    HomeAssistantOnline,
    /// Switch `camera`'s detection on or off. The camera is one topic level; whether the
    /// configuration has it is for the caller to check.
    Detect {
        /// The camera's name as the topic gives it.
        camera: String,
        /// `ON` (true) or `OFF`.
        on: bool,
    },
    /// Anything else.
    Ignored,
}

/// The topics read: Home Assistant's status topic (when discovery is on) and the commands
/// under lookout's prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    /// `<discovery_prefix>/status`, if discovery is on.
    pub birth: Option<String>,
    /// `[mqtt] topic_prefix`.
    pub prefix: String,
}

impl Routes {
    /// The topic filters to subscribe to.
    pub fn filters(&self) -> Vec<String> {
        let mut f: Vec<String> = self.birth.iter().cloned().collect();
        f.push(format!("{}/+/detect/set", self.prefix));
        f
    }
}

/// The payload as a trimmed word of at most [`MAX_PAYLOAD`] bytes.
fn word(payload: &[u8]) -> Option<&str> {
    if payload.len() > MAX_PAYLOAD {
        return None;
    }
    std::str::from_utf8(payload).ok().map(str::trim)
}

/// Reads an incoming message on `topic`: `online` on the birth topic; `ON` or `OFF` (any
/// case) on `<prefix>/<camera>/detect/set`; white space around a payload tolerated.
pub fn parse(routes: &Routes, topic: &str, payload: &[u8]) -> Incoming {
    if topic.is_empty() {
        return Incoming::Ignored;
    }
    let Some(word) = word(payload) else {
        return Incoming::Ignored;
    };
    if routes.birth.as_deref() == Some(topic) {
        return match word {
            "online" => Incoming::HomeAssistantOnline,
            _ => Incoming::Ignored,
        };
    }
    let camera = topic
        .strip_prefix(routes.prefix.as_str())
        .and_then(|t| t.strip_prefix('/'))
        .and_then(|t| t.strip_suffix("/detect/set"));
    let Some(camera) = camera.filter(|c| !c.is_empty() && !c.contains(['/', '+', '#'])) else {
        return Incoming::Ignored;
    };
    let on = if word.eq_ignore_ascii_case("ON") {
        true
    } else if word.eq_ignore_ascii_case("OFF") {
        false
    } else {
        return Incoming::Ignored;
    };
    Incoming::Detect {
        camera: camera.to_string(),
        on,
    }
}

/// A random delay of up to a second before answering a birth message.
pub fn jitter() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(u64::from(nanos % 1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Routes {
        Routes {
            birth: Some("homeassistant/status".into()),
            prefix: "lookout".into(),
        }
    }

    #[test]
    fn only_online_is_a_birth() {
        let r = routes();
        let status = "homeassistant/status";
        assert_eq!(parse(&r, status, b"online"), Incoming::HomeAssistantOnline);
        assert_eq!(
            parse(&r, status, b" online\n"),
            Incoming::HomeAssistantOnline
        );
        assert_eq!(parse(&r, status, b"offline"), Incoming::Ignored);
        assert_eq!(parse(&r, status, &[0xff, 0xfe]), Incoming::Ignored);
        assert_eq!(parse(&r, status, &[b'o'; 100_000]), Incoming::Ignored);
        let no_discovery = Routes {
            birth: None,
            ..routes()
        };
        assert_eq!(parse(&no_discovery, status, b"online"), Incoming::Ignored);
        assert!(jitter() < Duration::from_secs(1));
    }

    #[test]
    fn on_or_off_on_a_cameras_detect_set_switches_it() {
        let r = routes();
        let detect = |camera: &str, on| Incoming::Detect {
            camera: camera.into(),
            on,
        };
        assert_eq!(
            parse(&r, "lookout/yard/detect/set", b"OFF"),
            detect("yard", false)
        );
        assert_eq!(
            parse(&r, "lookout/yard/detect/set", b"on\n"),
            detect("yard", true)
        );
        assert_eq!(
            parse(&r, "lookout/front door/detect/set", b"On"),
            detect("front door", true)
        );
        for (topic, payload) in [
            ("lookout/yard/detect/set", &b"1"[..]),
            ("lookout/yard/detect/set", b"ONE"),
            ("lookout/yard/detect/set", b""),
            ("lookout/yard/detect/state", b"OFF"),
            ("lookout//detect/set", b"OFF"),
            ("lookout/a/b/detect/set", b"OFF"),
            ("lookoutx/yard/detect/set", b"OFF"),
            ("frigate/yard/detect/set", b"OFF"),
            ("lookout/yard/detect/set", &[b' '; 65]),
        ] {
            assert_eq!(
                parse(&r, topic, payload),
                Incoming::Ignored,
                "{topic} {payload:?}"
            );
        }
        assert_eq!(
            r.filters(),
            ["homeassistant/status", "lookout/+/detect/set"]
        );
    }
}
