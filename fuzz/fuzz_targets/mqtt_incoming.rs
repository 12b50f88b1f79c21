//! What lookout reads from the broker: any topic and payload bytes (split at the first NUL)
//! through `mqtt::incoming::parse`. Only Home Assistant's `online` on its status topic is a
//! birth, and only `ON` / `OFF` on `lookout/<one level>/detect/set` a switch (white space
//! around either tolerated, 64 bytes at most); everything else, of any size or encoding, is
//! ignored, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout::mqtt::incoming::{parse, Incoming, Routes};

fuzz_target!(|data: &[u8]| {
    let (topic, payload) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"homeassistant/status"[..], data),
    };
    let topic = String::from_utf8_lossy(topic);
    let routes = Routes {
        birth: Some("homeassistant/status".into()),
        prefix: "lookout".into(),
    };
    let got = parse(&routes, &topic, payload);
    let word = (payload.len() <= 64)
        .then(|| std::str::from_utf8(payload).ok().map(str::trim))
        .flatten();
    let online = topic == "homeassistant/status" && word == Some("online");
    assert_eq!(got == Incoming::HomeAssistantOnline, online, "{topic:?} {payload:?}");
    if let Incoming::Detect { camera, on } = &got {
        assert_eq!(topic, format!("lookout/{camera}/detect/set"));
        assert!(!camera.is_empty() && !camera.contains(['/', '+', '#']));
        let word = word.map(str::to_ascii_uppercase);
        assert_eq!(word.as_deref(), Some(if *on { "ON" } else { "OFF" }));
    }
});
