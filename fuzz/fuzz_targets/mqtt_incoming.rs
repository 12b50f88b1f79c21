//! What lookout reads from the broker: any topic and payload bytes (split at the first NUL)
//! through `mqtt::incoming::parse`. Only Home Assistant's `online` (white space around it
//! tolerated, 64 bytes at most) is a birth; everything else, of any size or encoding, is ignored, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout::mqtt::incoming::{parse, Incoming};

fuzz_target!(|data: &[u8]| {
    let (topic, payload) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"homeassistant/status"[..], data),
    };
    let topic = String::from_utf8_lossy(topic);
    let got = parse(&topic, payload);
    let online = !topic.is_empty()
        && payload.len() <= 64
        && std::str::from_utf8(payload).is_ok_and(|s| s.trim() == "online");
    assert_eq!(got == Incoming::HomeAssistantOnline, online, "{topic:?} {payload:?}");
});
