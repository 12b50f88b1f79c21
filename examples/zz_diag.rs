// TEMPORARY diagnostics, not committed.
use std::io::BufRead;
use std::time::Duration;

use lookout::fidelity::replay::{self, Recording};
use lookout::fidelity::{evaluate, LabelledBox};
use lookout::schedule::{PlannerConfig, ScheduleKind};
use lookout::track::TrackerConfig;

fn load(path: &str) -> Recording {
    if !std::path::Path::new(path).exists() {
        let cfg = lookout::config::Config::default();
        let key = format!(
            "{}|{:?}",
            replay::recording_key(&cfg, &cfg.source.spec),
            None::<usize>
        );
        eprintln!("recording {} with {:?}", cfg.source.spec, cfg.model.precision);
        let rec = replay::record(&cfg, &cfg.source.spec, None).unwrap();
        rec.save(&key, std::path::Path::new(path)).unwrap();
    }
    let f = std::fs::File::open(path).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(f).read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let key = v["key"].as_str().unwrap().to_string();
    Recording::load(&key, std::path::Path::new(path))
        .unwrap()
        .unwrap()
}

fn main() {
    let paths = std::env::var("DIAG_REC").unwrap();
    let verbose = std::env::var("DIAG_V").is_ok();
    for path in paths.split(',') {
        let rec = load(path);
        let tracker: TrackerConfig =
            toml::from_str(&std::env::var("DIAG_TRACKER").unwrap_or_default()).unwrap();
        let idle = Duration::from_secs(10);
        let envf = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f32>().ok());
        let tune = |mut p: PlannerConfig| {
            if p.kind == ScheduleKind::Adaptive {
                if let Some(v) = envf("DIAG_EVERY") {
                    p.every = v as u32;
                }
                if let Some(v) = envf("DIAG_MINGAP") {
                    p.min_gap = v as u32;
                }
                if let Some(v) = envf("DIAG_MINCELLS") {
                    p.min_motion_cells = v as usize;
                }
                if let Some(v) = envf("DIAG_MARGIN") {
                    p.box_margin = v;
                }
            }
            p
        };
        let plans: Vec<PlannerConfig> =
            replay::standard_plans(5, idle).into_iter().map(tune).collect();
        let rows = replay::sweep(&rec, &tracker, &plans).unwrap();
        println!(
            "== {path}: {} frames LK_EXP={:?}",
            rec.frames.len(),
            std::env::var("LK_EXP").unwrap_or_default()
        );
        for r in &rows {
            let f = &r.fidelity;
            println!(
                "{:8} {:2}: cov {:.1}% ({}/{}) sw {:.2} ({} in {}) det/f {:.3} causes {:?} cpums {:.3}",
                r.schedule,
                r.detect_every,
                100.0 * f.coverage(),
                f.covered,
                f.reference,
                f.switches_per_100(),
                f.id_switches,
                f.matched_track_frames,
                r.detections_per_frame,
                r.causes,
                r.cpu_ms_per_frame
            );
        }
        if !verbose {
            continue;
        }
        let reference = rec.reference();
        for plan in [
            PlannerConfig::new(ScheduleKind::Fixed, 5, idle),
            tune(PlannerConfig::new(ScheduleKind::Adaptive, 5, idle)),
        ] {
            let run = replay::simulate(&rec, &tracker, plan).unwrap();
            let asked: Vec<usize> = run.asked.iter().map(|a| a.0).collect();
            // Uncovered analysis.
            let mut buckets = std::collections::BTreeMap::<String, usize>::new();
            for (k, dets) in reference.iter().enumerate() {
                let tr = &run.tracks[k];
                let since = asked
                    .iter()
                    .rev()
                    .find(|&&a| a <= k)
                    .map(|a| k - a)
                    .unwrap_or(99);
                for d in dets {
                    let bt = tr
                        .iter()
                        .filter(|t| lookout::detect::labels::confusable(t.class_id, d.class_id))
                        .max_by(|a, b| a.bbox.iou(&d.bbox).total_cmp(&b.bbox.iou(&d.bbox)));
                    let best = bt.map_or(0.0, |t| t.bbox.iou(&d.bbox));
                    if best >= 0.5 {
                        continue;
                    }
                    if let Some(t) = bt.filter(|_| best >= 0.1) {
                        let (tx, ty) = t.bbox.center();
                        let (dx, dy) = d.bbox.center();
                        let off = ((tx - dx).abs() / d.bbox.width()).max((ty - dy).abs() / d.bbox.height());
                        let sz = (t.bbox.area() / d.bbox.area()).sqrt();
                        let why = if off > 0.25 { "pos" } else if !(0.8..1.25).contains(&sz) { "size" } else { "both" };
                        *buckets.entry(format!("drift-why {why}")).or_default() += 1;
                    }
                    let w = d.bbox.width();
                    let score = rec.frames[k]
                        .dets
                        .iter()
                        .find(|x| x.bbox == d.bbox)
                        .map(|x| x.score)
                        .unwrap_or(0.0);
                    let cat = if best < 0.1 {
                        "none"
                    } else if best < 0.3 {
                        "low"
                    } else {
                        "drift"
                    };
                    let size = if w < 30.0 {
                        "<30"
                    } else if w < 60.0 {
                        "<60"
                    } else {
                        ">=60"
                    };
                    *buckets.entry(format!("{cat} {size}")).or_default() += 1;
                    *buckets.entry(format!("since {since}")).or_default() += 1;
                    if verbose && std::env::var("DIAG_VV").is_ok() {
                        println!(
                            "  k {k} since {since} cls {} w {:.0} h {:.0} score {score:.2} best {best:.2} box {:?}",
                            d.class_id,
                            w,
                            d.bbox.height(),
                            d.bbox.to_array()
                        );
                    }
                }
            }
            println!("{:?}: {:?}", plan.kind, buckets);
            let _ = LabelledBox {
                id: 0,
                class_id: 0,
                bbox: Default::default(),
            };
            let _ = evaluate;
        }
    }
}
