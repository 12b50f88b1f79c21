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
pub mod events;
pub mod fidelity;
pub mod files;
pub mod frame;
pub mod geom;
pub mod interrupt;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod mqtt;
pub mod notify;
pub mod output;
pub mod pipeline;
pub mod preprocess;
pub mod quantize;
pub mod schedule;
pub mod service;
pub mod snapshot;
pub mod source;
pub mod stats;
pub mod sysinfo;
pub mod track;
pub mod vocab;
