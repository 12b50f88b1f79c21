//! The model alone: inference timed on the golden images, outside the pipeline.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::figures::round;
use super::golden::decode_as_golden;
use super::report::{ImageTiming, InferenceTiming, ModelFigures, OpTiming, PlainDetection};
use crate::detect::{self, Detector};
use crate::geom::ResizeMode;
use crate::preprocess;

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Times the network alone on every `<img>-<W>x<H>.png` of the golden directory.
pub fn time_inference(det: &Detector, dir: &Path, runs: usize) -> InferenceTiming {
    let info = det.info().clone();
    let (w, h) = (info.input_w, info.input_h);
    let suffix = format!("-{w}x{h}.png");
    let mut photos: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(&suffix)
                        .map(|img| (img.to_string(), e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    photos.sort();
    let mut input = vec![0.0f32; det.input_len()];
    let mut all = Vec::new();
    // `LOOKOUT_PROFILE_NODES=1`: one row per node of the network instead of one per op.
    let mut profile = detect::OpProfile::new(std::env::var_os("LOOKOUT_PROFILE_NODES").is_some());
    let mut images = Vec::new();
    for (img, png) in photos {
        let Ok((rgb, iw, ih)) = detect::read_rgb_image(&png) else {
            continue;
        };
        if (iw, ih) != (w, h)
            || preprocess::rgb_to_tensor(&rgb, w, h, w, h, ResizeMode::Stretch, &mut input).is_err()
        {
            continue;
        }
        // In the model's input type: an int8 model's input quantization is the
        // preprocessing's work, not the network's.
        let tensor = det.input_from_floats(&input);
        // One set of output vectors for every run, as the daemon's detector keeps it.
        let mut raw = detect::RawOutputs::default();
        // `ok`: whether the latest run succeeded (after a failed one `raw` means nothing).
        let mut ok = false;
        for _ in 0..3 {
            ok = det.run_input_into(&tensor, &mut raw).is_ok();
        }
        let mut ms = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t0 = Instant::now();
            ok = det
                .run_input_profiled(&tensor, &mut profile, &mut raw)
                .is_ok();
            if ok {
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        let dets = if ok {
            decode_as_golden(&raw, w, h)
        } else {
            Vec::new()
        };
        all.extend_from_slice(&ms);
        let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
        images.push(ImageTiming {
            image: img,
            median_ms: round(median(&mut ms), 3),
            min_ms: round(if min.is_finite() { min } else { 0.0 }, 3),
            detections: dets
                .iter()
                .map(|d| PlainDetection {
                    class_id: d.class_id,
                    label: crate::vocab::label(d.class_id),
                    score: d.score,
                    bbox: [d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1],
                })
                .collect(),
        });
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    InferenceTiming {
        model: ModelFigures::from(&info),
        runs_per_image: runs,
        median_ms: round(median(&mut all), 3),
        min_ms: round(if min.is_finite() { min } else { 0.0 }, 3),
        images,
        ops: profile
            .ops()
            .into_iter()
            .map(|o| OpTiming {
                op: o.op,
                nodes: o.nodes,
                ms_per_run: round(o.ms_per_run, 3),
            })
            .collect(),
    }
}
