//! lookout: an object-detection daemon for the Raspberry Pi.
//!
//! Frames come from a V4L2 camera or a recording (`source`), are turned into the model's
//! input (`preprocess`), an INT8 NanoDet run by tract finds objects (`detect`). See
//! `ARCHITECTURE.md` for the map of the code.

// Nothing outside tests may panic on bad input (tests/tidy.rs checks this line is here).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod bench;
pub mod cli;
pub mod config;
pub mod detect;
pub mod fidelity;
pub mod frame;
pub mod geom;
pub mod logging;
pub mod memory;
pub mod output;
pub mod pipeline;
pub mod preprocess;
pub mod schedule;
pub mod service;
pub mod source;
pub mod stats;
pub mod sysinfo;
pub mod track;

/// TEMPORARY experiment switches (LK_EXP=a,b,c).
pub fn exp(name: &str) -> bool {
    static SET: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        std::env::var("LK_EXP")
            .unwrap_or_default()
            .split(',')
            .map(str::to_string)
            .collect()
    })
    .iter()
    .any(|s| s == name)
}

/// TEMPORARY experiment parameter: env `LK_<NAME>` as a number, else `default`.
pub fn expv(name: &str, default: f32) -> f32 {
    std::env::var(format!("LK_{name}"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
