//! Tracking fidelity on the bundled clip (`cargo bench --bench fidelity`): the model runs on
//! every frame once (the reference); lockstep runs with a detection every N = 1, 2, 3, 5, 10
//! frames and with the adaptive schedule are replayed from that recording
//! (`lookout::fidelity::replay`) and scored for coverage of the reference detections (same
//! class, IoU ≥ 0.5), identity switches against the N = 1 tracks, detections and CPU per
//! frame. Prints a Markdown table.
//!
//! `LOOKOUT_FIDELITY_CONFIG=FILE` evaluates other settings (e.g. a `[tracker]` table);
//! `LOOKOUT_FIDELITY_SOURCE=SPEC` another recording.

use std::time::Duration;

use lookout::config::Config;
use lookout::fidelity::replay;
use lookout::schedule::{PlannerConfig, ScheduleKind};

fn main() -> anyhow::Result<()> {
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let cfg = match std::env::var_os("LOOKOUT_FIDELITY_CONFIG") {
        Some(p) => Config::load(std::path::Path::new(&p))?,
        None => Config::default(),
    };
    let spec = std::env::var("LOOKOUT_FIDELITY_SOURCE").unwrap_or(cfg.source.spec.clone());
    let rec = replay::record(&cfg, &spec, quick.then_some(30))?;
    let idle = Duration::from_secs_f64(cfg.pipeline.idle_detect_interval);
    let mut plans: Vec<PlannerConfig> = [1, 2, 3, 5, 10]
        .iter()
        .map(|&n| PlannerConfig::new(ScheduleKind::Fixed, n, idle))
        .collect();
    plans.push(PlannerConfig::new(
        ScheduleKind::Adaptive,
        cfg.pipeline.detect_every,
        idle,
    ));
    let rows = replay::sweep(&rec, &cfg.tracker, &plans)?;
    let base = rows.first().map_or(1.0, |r| r.cpu_ms_per_frame);
    println!(
        "\nTracking fidelity, {spec} ({} frames, {}x{}), lockstep:\n",
        rec.frames.len(),
        rec.frame_size.0,
        rec.frame_size.1
    );
    println!("| schedule | coverage of per-frame detections | id switches / 100 track-frames | detections / frame | CPU ms / frame | CPU vs N=1 |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let f = &r.fidelity;
        println!(
            "| {} | {:.1} % ({}/{}) | {:.2} ({} in {}) | {:.2} | {:.1} | {:.2} |",
            match r.schedule {
                "fixed" => format!("N = {}", r.detect_every),
                s => format!("{s} (≤ {})", r.detect_every),
            },
            100.0 * f.coverage(),
            f.covered,
            f.reference,
            f.switches_per_100(),
            f.id_switches,
            f.matched_track_frames,
            r.detections_per_frame,
            r.cpu_ms_per_frame,
            r.cpu_ms_per_frame / base
        );
    }
    Ok(())
}
