//! The MJPEG path: arbitrary bytes as a recording (`ReplaySource::mjpeg_bytes`: the stream
//! splitter, the JPEG header check), every frame through preprocessing (JPEG decode).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lookout::source::replay::ReplaySource;
use lookout::source::{Pacing, SourceOptions};

mod common;

fuzz_target!(|data: &[u8]| {
    let opts = SourceOptions {
        pace: Pacing::AsFastAsPossible,
        ..SourceOptions::default()
    };
    if let Ok(mut src) = ReplaySource::mjpeg_bytes(Path::new("fuzz.mjpeg"), data.to_vec(), &opts) {
        common::drain(&mut src);
    }
});
