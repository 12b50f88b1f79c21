//! Tracking fidelity on the bundled clip (`cargo bench --bench fidelity`): the model on every
//! frame is the reference; runs with a detection every N = 1, 2, 3, 5, 10 frames (lockstep, so
//! every frame is processed and the result is deterministic) are scored for coverage of the
//! reference detections (same class, IoU ≥ 0.5), identity switches against the N = 1 tracks,
//! and process CPU time per frame. Prints a Markdown table (README, "Tracking fidelity").

use std::time::Duration;

use lookout::config::Config;
use lookout::detect::{labels, Detector};
use lookout::fidelity::{self, LabelledBox};
use lookout::pipeline::{self, RunOptions, Schedule};
use lookout::preprocess::{self, Scratch};
use lookout::source::{self, Pacing, SourceOptions};

type PerFrame = Vec<Vec<LabelledBox>>;

fn reference_detections(cfg: &Config) -> anyhow::Result<(PerFrame, Duration)> {
    let det = Detector::load(&cfg.detector())?;
    let opts = SourceOptions {
        pace: Pacing::AsFastAsPossible,
        ..SourceOptions::default()
    };
    let mut src = source::open(&cfg.source.spec, &opts)?;
    let (w, h) = (det.info().input_w, det.info().input_h);
    let mut input = vec![0.0f32; det.input_len()];
    let mut scratch = Scratch::default();
    let mut out = Vec::new();
    let mut model = Duration::ZERO;
    while let Some(frame) = src.next()? {
        let map =
            preprocess::frame_to_tensor(&frame, w, h, cfg.model.resize, &mut input, &mut scratch)?;
        let t0 = std::time::Instant::now();
        let dets = det.detect_tensor(&input, &map)?;
        model += t0.elapsed();
        out.push(
            dets.into_iter()
                .map(|d| LabelledBox {
                    id: 0,
                    class_id: d.class_id,
                    bbox: d.bbox,
                })
                .collect(),
        );
    }
    Ok((out, model))
}

fn tracks_of(path: &std::path::Path) -> anyhow::Result<PerFrame> {
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let mut boxes = Vec::new();
        for t in v["tracks"].as_array().into_iter().flatten() {
            let b: Vec<f32> = t["box"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_f64())
                .map(|x| x as f32)
                .collect();
            let class_id = t["label"]
                .as_str()
                .and_then(labels::class_id)
                .unwrap_or(usize::MAX);
            if b.len() == 4 {
                boxes.push(LabelledBox {
                    id: t["id"].as_u64().unwrap_or(0),
                    class_id,
                    bbox: lookout::detect::BBox::new(b[0], b[1], b[2], b[3]),
                });
            }
        }
        out.push(boxes);
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    // LOOKOUT_FIDELITY_CONFIG=FILE evaluates other settings (e.g. a [tracker] table);
    // LOOKOUT_FIDELITY_N=1,5 picks the N values (1 must come first: it is the id reference).
    let mut cfg = match std::env::var_os("LOOKOUT_FIDELITY_CONFIG") {
        Some(p) => Config::load(std::path::Path::new(&p))?,
        None => Config::default(),
    };
    cfg.source.realtime = false;
    let (reference, _) = reference_detections(&cfg)?;
    let frames = if quick { 30 } else { reference.len() };
    let reference = &reference[..frames.min(reference.len())];
    let ns: Vec<u32> = match std::env::var("LOOKOUT_FIDELITY_N") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) if quick => vec![1, 5],
        Err(_) => vec![1, 2, 3, 5, 10],
    };
    let dir = std::env::temp_dir().join(format!("lookout-fidelity-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    let mut gt: Option<PerFrame> = None;
    for &n in &ns {
        let mut c = cfg.clone();
        c.pipeline.detect_every = n;
        let path = dir.join(format!("tracks-{n}.jsonl"));
        let opts = RunOptions {
            schedule: Schedule::Lockstep,
            tracks_out: Some(path.clone()),
            log_events: false,
            max_frames: Some(frames as u64),
            ..RunOptions::default()
        };
        let s = pipeline::run(&c, &opts)?;
        let tracks = tracks_of(&path)?;
        let gt_tracks = gt.get_or_insert_with(|| tracks.clone()).clone();
        let f = fidelity::evaluate(reference, &gt_tracks, &tracks);
        let cpu_ms = s.cpu_time.as_secs_f64() * 1e3 / s.total.processed.max(1) as f64;
        rows.push((n, f, cpu_ms, s.total.processed));
    }
    let base = rows.first().map_or(1.0, |r| r.2);
    println!("\nTracking fidelity, bundled clip ({frames} frames, 640x480), default model and tracker:\n");
    println!("| detect_every | coverage of per-frame detections | id switches / 100 track-frames | CPU ms / frame | CPU vs N=1 |");
    println!("|---|---|---|---|---|");
    for (n, f, cpu, _) in &rows {
        println!(
            "| {n} | {:.1} % ({}/{}) | {:.2} ({} in {}) | {:.1} | {:.2} |",
            100.0 * f.coverage(),
            f.covered,
            f.reference,
            f.switches_per_100(),
            f.id_switches,
            f.matched_track_frames,
            cpu,
            cpu / base
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
