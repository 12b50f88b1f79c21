//! What lookout accepts from the broker: only Home Assistant's birth message. Any other
//! topic or payload — whatever its size or bytes — is ignored (`fuzz/fuzz_targets/mqtt_incoming.rs`).

use std::time::Duration;

/// An incoming message, understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// Home Assistant (re)started: discovery and states are to be sent again.
    HomeAssistantOnline,
    /// Anything else.
    Ignored,
}

/// Reads an incoming message on `topic` (already known to be Home Assistant's status topic
/// when it matters): `online`, with surrounding white space tolerated.
pub fn parse(topic: &str, payload: &[u8]) -> Incoming {
    if topic.is_empty() || payload.len() > 64 {
        return Incoming::Ignored;
    }
    match std::str::from_utf8(payload).map(str::trim) {
        Ok("online") => Incoming::HomeAssistantOnline,
        _ => Incoming::Ignored,
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

    #[test]
    fn only_online_is_a_birth() {
        assert_eq!(
            parse("homeassistant/status", b"online"),
            Incoming::HomeAssistantOnline
        );
        assert_eq!(
            parse("homeassistant/status", b" online\n"),
            Incoming::HomeAssistantOnline
        );
        assert_eq!(parse("homeassistant/status", b"offline"), Incoming::Ignored);
        assert_eq!(
            parse("homeassistant/status", &[0xff, 0xfe]),
            Incoming::Ignored
        );
        assert_eq!(
            parse("homeassistant/status", &[b'o'; 100_000]),
            Incoming::Ignored
        );
        assert!(jitter() < Duration::from_secs(1));
    }
}
