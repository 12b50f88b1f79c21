//! Zoomed looks between detections, scored against the ground truth (`cargo bench --bench
//! looks`). On frames between two whole-frame detections the model runs on one tile of the
//! frame (`LOOKOUT_LOOKS_TILE`, default 352x288: tiles at the frame's own scale, four of them
//! for 640×480, overlapping by at least 48 px) instead of idling, round robin or aimed at the
//! small tracks (`lookout::fidelity::looks`). Each recording is replayed with the default
//! tracker and event rules, INT8, fixed N = 5 and adaptive, without looks, with a look 4 or 2
//! frames after each detection or look, and — for the same model time spent otherwise — with
//! whole-frame detections at 512×384 and no looks.
//!
//! `LOOKOUT_LOOKS_SOURCES="A.mjpeg B.mjpeg"` picks the recordings (default: every recording
//! with a ground truth in `tests/data/truth/` and the bundled clip); each one's truth is the
//! `.gt.txt` beside it or of the same name in `tests/data/truth/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use lookout::config::{Config, InputSize};
use lookout::detect::{Detector, Precision};
use lookout::fidelity::detections::score_boxes;
use lookout::fidelity::looks::{record_looks, LookChoice, LookPlanner, LookRecording};
use lookout::fidelity::replay::{self, simulate_with_looks, Recording};
use lookout::fidelity::truth::{self, Truth};
use lookout::schedule::{PlannerConfig, ScheduleKind};

/// The truth directory and the bundled clip, from the crate root.
const TRUTH_DIR: &str = "tests/data/truth";
const CLIP: &str = "tests/data/demo/vtest-640x480-10fps.mjpeg";

/// The looks compared: none, then `(gap, choice)`.
const LOOKS: [Option<(u32, LookChoice)>; 4] = [
    None,
    Some((4, LookChoice::RoundRobin)),
    Some((4, LookChoice::Targeted)),
    Some((2, LookChoice::RoundRobin)),
];

/// The whole-frame size the looks are weighed against.
const LARGER: [u32; 2] = [512, 384];

/// One replay's figures.
#[derive(Default, Clone, Copy)]
struct Row {
    events: u64,
    objects_with_events: f64,
    false_events: u64,
    missed: u64,
    to_find: u64,
    found: [u64; 3],
    boxes: [u64; 3],
    model_ms: f64,
}

impl Row {
    fn add(&mut self, o: &Row) {
        self.events += o.events;
        self.objects_with_events += o.objects_with_events;
        self.false_events += o.false_events;
        self.missed += o.missed;
        self.to_find += o.to_find;
        for i in 0..3 {
            self.found[i] += o.found[i];
            self.boxes[i] += o.boxes[i];
        }
        self.model_ms += o.model_ms;
    }

    fn line(&self, what: &str) -> String {
        let pct = |i: usize| {
            if self.boxes[i] == 0 {
                "   –  ".to_string()
            } else {
                format!(
                    "{:5.1}%",
                    100.0 * self.found[i] as f64 / self.boxes[i] as f64
                )
            }
        };
        let epo = if self.objects_with_events > 0.0 {
            (self.events - self.false_events) as f64 / self.objects_with_events
        } else {
            0.0
        };
        format!(
            "{what:<34} {:>4} {:>5.2} {:>3} {:>3}/{:<3} {} {} {} {:>7.2}",
            self.events,
            epo,
            self.false_events,
            self.missed,
            self.to_find,
            pct(0),
            pct(1),
            pct(2),
            self.model_ms
        )
    }
}

fn truth_of(spec: &str) -> anyhow::Result<PathBuf> {
    let beside = PathBuf::from(spec.replace(".mjpeg", ".gt.txt"));
    if beside.exists() {
        return Ok(beside);
    }
    let name = beside
        .file_name()
        .context("recording without a file name")?;
    let there = Path::new(TRUTH_DIR).join(name);
    if there.exists() {
        Ok(there)
    } else {
        bail!("{spec}: no ground truth beside it or in {TRUTH_DIR}")
    }
}

fn sources() -> anyhow::Result<Vec<String>> {
    if let Ok(list) = std::env::var("LOOKOUT_LOOKS_SOURCES") {
        return Ok(list.split_whitespace().map(str::to_string).collect());
    }
    let mut out = vec![CLIP.to_string()];
    let mut found: Vec<String> = std::fs::read_dir(TRUTH_DIR)
        .with_context(|| format!("reading {TRUTH_DIR}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mjpeg"))
        .map(|p| p.display().to_string())
        .collect();
    found.sort();
    out.extend(found);
    Ok(out)
}

fn tile_size() -> anyhow::Result<(u32, u32)> {
    let v = std::env::var("LOOKOUT_LOOKS_TILE").unwrap_or_else(|_| "352x288".into());
    let (w, h) = v
        .split_once('x')
        .context("LOOKOUT_LOOKS_TILE: expected WxH")?;
    Ok((
        w.parse().context("LOOKOUT_LOOKS_TILE width")?,
        h.parse().context("LOOKOUT_LOOKS_TILE height")?,
    ))
}

fn replay_row(
    rec: &Recording,
    looks: Option<(&LookRecording, LookPlanner)>,
    cfg: &Config,
    plan: PlannerConfig,
    truth: &Truth,
) -> anyhow::Result<Row> {
    let rules = cfg.event_rules().map_err(|e| anyhow::anyhow!("{e}"))?;
    let look_ms = looks.as_ref().map_or(0.0, |(l, _)| l.look_ms());
    let run = simulate_with_looks(rec, &cfg.tracker, &rules, plan, looks)?;
    let s = truth::score(truth, &run.tracks, &run.events, rec.fps);
    let h = score_boxes(truth, run.tracks.iter().cloned());
    let frames = rec.frames.len().max(1) as f64;
    Ok(Row {
        events: s.events,
        objects_with_events: if s.events_per_object > 0.0 {
            (s.events - s.false_events) as f64 / s.events_per_object
        } else {
            0.0
        },
        false_events: s.false_events,
        missed: s.missed,
        to_find: s.objects_to_find,
        found: [h.small.found, h.middle.found, h.large.found],
        boxes: [h.small.boxes, h.middle.boxes, h.large.boxes],
        model_ms: (run.causes.total() as f64 * rec.detect_ms() + run.looks as f64 * look_ms)
            / frames,
    })
}

fn main() -> anyhow::Result<()> {
    // `cargo test --benches` runs bench binaries without `--bench`: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let limit = quick.then_some(8);
    let tile = tile_size()?;
    let specs = if quick {
        vec![CLIP.to_string()]
    } else {
        sources()?
    };
    let mut cfg = Config::default();
    cfg.model.precision = Precision::Int8;
    let mut look_cfg = cfg.clone();
    look_cfg.model.input_size = InputSize::List(vec![tile.0, tile.1]);
    let look_det = Detector::load(&look_cfg.detector())?;
    let mut larger_cfg = cfg.clone();
    larger_cfg.model.input_size = InputSize::List(LARGER.to_vec());
    let plans = [
        PlannerConfig::new(ScheduleKind::Fixed, 5, Duration::from_secs(4)),
        PlannerConfig::new(ScheduleKind::Adaptive, 5, Duration::from_secs(4)),
    ];
    let names: Vec<String> = LOOKS
        .iter()
        .map(|l| match l {
            None => "no looks".to_string(),
            Some((gap, c)) => format!("look {gap} frames after, {c:?}"),
        })
        .chain([format!(
            "{}x{} whole frames, no looks",
            LARGER[0], LARGER[1]
        )])
        .collect();
    let mut totals = vec![[Row::default(); 2]; names.len()];
    println!(
        "zoomed looks: tiles {}x{} at the frame's scale, INT8; events, events per object, false \
         events, missed, track recall by true height (<24 / 24-48 / >48 px), model ms per frame",
        tile.0, tile.1
    );
    for spec in &specs {
        let truth = Truth::load(&truth_of(spec)?)?;
        let rec = replay::record(&cfg, spec, limit)?;
        let larger = replay::record(&larger_cfg, spec, limit)?;
        let looks = record_looks(&look_det, &look_cfg, spec, tile, limit)?;
        println!(
            "\n{spec}: {} frames, {} tiles; detection {:.1} ms, look {:.1} ms, {}x{} detection {:.1} ms",
            rec.frames.len(),
            looks.tiles.len(),
            rec.detect_ms(),
            looks.look_ms(),
            LARGER[0],
            LARGER[1],
            larger.detect_ms()
        );
        for (p, plan) in plans.iter().enumerate() {
            for (i, name) in names.iter().enumerate() {
                let row = match LOOKS.get(i) {
                    Some(l) => {
                        let l = l.map(|(gap, c)| (&looks, LookPlanner::new(gap, c)));
                        replay_row(&rec, l, &cfg, *plan, &truth)?
                    }
                    None => replay_row(&larger, None, &larger_cfg, *plan, &truth)?,
                };
                totals[i][p].add(&row);
                println!("  {:<9}{}", plan.kind.as_str(), row.line(name));
            }
        }
    }
    println!("\nall recordings (model ms per frame summed over them):");
    for (p, plan) in plans.iter().enumerate() {
        for (i, name) in names.iter().enumerate() {
            println!("  {:<9}{}", plan.kind.as_str(), totals[i][p].line(name));
        }
    }
    Ok(())
}
