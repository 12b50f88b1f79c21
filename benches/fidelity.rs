//! Tracking fidelity (`cargo bench --bench fidelity`): a thin wrapper over what
//! `lookout bench --sweep fidelity` runs (`lookout::bench::run`; the table is
//! `lookout::cli::bench::render_table`'s). The model runs once on every frame of the source
//! (the reference); fixed N = 1, 2, 3, 5, 10 and the adaptive schedule are replayed in
//! lockstep from that recording and scored for coverage of the reference detections, id
//! switches against the N = 1 tracks, detections and CPU per frame.
//!
//! `LOOKOUT_FIDELITY_CONFIG=FILE` evaluates other settings (e.g. a `[tracker]` table);
//! `LOOKOUT_FIDELITY_SOURCE=SPEC` another recording; `LOOKOUT_FIDELITY_TRUTH=FILE` scores every
//! schedule against that ground truth too (events per object, false events, missed).

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;

use lookout::bench::{self, BenchSettings, Limit, Progress, Sweep};

/// The phases on one stderr line rewritten in place, when stderr is a terminal.
struct Line(bool);

impl Progress for Line {
    fn phase(&mut self, message: &str) {
        if self.0 {
            eprint!("\r\x1b[2K{message}");
            let _ = std::io::stderr().flush();
        }
    }
    fn finish(&mut self) {
        if self.0 {
            eprintln!();
        }
    }
}

fn main() -> anyhow::Result<()> {
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let settings = BenchSettings {
        config_file: std::env::var_os("LOOKOUT_FIDELITY_CONFIG").map(PathBuf::from),
        sources: std::env::var("LOOKOUT_FIDELITY_SOURCE")
            .ok()
            .into_iter()
            .collect(),
        limit: quick.then_some(Limit::Frames(30)),
        sweep: Some(Sweep::Fidelity),
        detect_every: None,
        schedule: None,
        realtime: false,
        model: None,
        precision: None,
        tracks_out: None,
        threads: None,
        inference_only: None,
        truth: std::env::var_os("LOOKOUT_FIDELITY_TRUTH")
            .map(PathBuf::from)
            .into_iter()
            .collect(),
        stop: Default::default(),
        outlets: Default::default(),
    };
    let report = bench::run(&settings, &mut Line(std::io::stderr().is_terminal()))?;
    print!("{}", lookout::cli::bench::render_table(&report));
    Ok(())
}
