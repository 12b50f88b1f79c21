//! The Y4M path: arbitrary bytes as a recording (`ReplaySource::y4m_bytes`: header, FRAME
//! lines, sizes, truncation), every frame through preprocessing.
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
    if let Ok(mut src) = ReplaySource::y4m_bytes(Path::new("fuzz.y4m"), data.to_vec(), &opts) {
        common::drain(&mut src);
    }
});
