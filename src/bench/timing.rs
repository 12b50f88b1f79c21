//! The model alone: inference timed on the golden images, outside the pipeline.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::figures::{round, ModelFigures};
use crate::detect::{self, Detector};
use crate::geom::ResizeMode;
use crate::preprocess;

/// A detection in model-input pixels, as in `golden/detections.json`.
#[derive(Clone, Debug, Serialize)]
pub struct PlainDetection {
    /// Class id.
    pub class_id: usize,
    /// COCO label.
    pub label: String,
    /// Score.
    pub score: f32,
    /// `[x0, y0, x1, y1]` in model-input pixels.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
}

/// Timing of the model on one photo.
#[derive(Clone, Debug, Serialize)]
pub struct ImageTiming {
    /// Photo name.
    pub image: String,
    /// Median of the timed runs, ms.
    pub median_ms: f64,
    /// Fastest run, ms.
    pub min_ms: f64,
    /// Detections (score > 0.35, NMS 0.6) in model-input pixels.
    pub detections: Vec<PlainDetection>,
}

/// `--inference-only`: `Detector::run_raw` (the network, nothing else) timed on the golden
/// photos at the model's input size, after 3 warm-up runs per photo.
#[derive(Clone, Debug, Serialize)]
pub struct InferenceTiming {
    /// The model.
    pub model: ModelFigures,
    /// Timed runs per photo.
    pub runs_per_image: usize,
    /// Median over every timed run, ms.
    pub median_ms: f64,
    /// Fastest run, ms.
    pub min_ms: f64,
    /// Per photo.
    pub images: Vec<ImageTiming>,
}

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
        let mut last = None;
        for _ in 0..3 {
            last = det.run_raw(&input).ok();
        }
        let mut ms = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t0 = Instant::now();
            if let Ok(raw) = det.run_raw(&input) {
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
                last = Some(raw);
            }
        }
        let dets = last
            .map(|raw| {
                detect::nms(
                    detect::decode::decode(&raw, w as usize, h as usize, 0.35),
                    0.6,
                    100,
                )
            })
            .unwrap_or_default();
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
                    label: detect::label(d.class_id),
                    score: d.score,
                    bbox: [d.bbox.x0, d.bbox.y0, d.bbox.x1, d.bbox.y1],
                })
                .collect(),
        });
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    InferenceTiming {
        model: ModelFigures {
            name: info.name.clone(),
            datum: info.datum.to_string(),
            input_w: w,
            input_h: h,
            threads: info.threads,
            load_time_ms: round(info.load_time.as_secs_f64() * 1e3, 1),
        },
        runs_per_image: runs,
        median_ms: round(median(&mut all), 3),
        min_ms: round(if min.is_finite() { min } else { 0.0 }, 3),
        images,
    }
}
