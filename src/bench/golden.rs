//! The golden self-check: each model against the outputs shipped in `models/golden/`, and
//! where that data and the models are found.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{EMBEDDED_MODEL_FILE, FP32_TOLERANCE, GOLDEN_ENV, MIN_TOP_IOU};
use crate::detect::{self, Detection, Detector, ModelInfo};
use crate::geom::{BBox, Mapping, ResizeMode};
use crate::preprocess;

/// Where the golden data is: `$LOOKOUT_GOLDEN_DIR`, `models/golden` under the current
/// directory and under each ancestor of the executable, `/usr/share/lookout/models/golden`.
/// A directory counts when it has `detections.json`. `Err` says why none was found.
pub fn find_golden_dir() -> Result<PathBuf, String> {
    let has_data = |d: &Path| d.join("detections.json").is_file();
    if let Some(d) = std::env::var_os(GOLDEN_ENV) {
        // An explicit directory is the only one looked at.
        let d = PathBuf::from(d);
        return if has_data(&d) {
            Ok(d)
        } else {
            Err(format!(
                "self-check skipped: no golden data ({GOLDEN_ENV}={} has no detections.json)",
                d.display()
            ))
        };
    }
    data_dirs("models/golden", "/usr/share/lookout/models/golden")
        .into_iter()
        .find(|d| has_data(d))
        .ok_or_else(|| "self-check skipped: no golden data".to_string())
}

/// Where model files are: `models/` under the current directory and under each ancestor of
/// the executable, then `/usr/share/lookout/models`; the first that has an `.onnx` file.
pub fn find_models_dir() -> Option<PathBuf> {
    data_dirs("models", "/usr/share/lookout/models")
        .into_iter()
        .find(|d| !onnx_files(d).is_empty())
}

/// Candidate directories `rel` under the current directory and the executable's ancestors,
/// then `system`.
fn data_dirs(rel: &str, system: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        out.push(cwd.join(rel));
    }
    if let Ok(exe) = std::env::current_exe() {
        out.extend(exe.ancestors().skip(1).map(|a| a.join(rel)));
    }
    out.push(PathBuf::from(system));
    out
}

/// The `.onnx` files of a directory, sorted by name.
pub fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "onnx") && p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Outcome of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Every golden comparison held.
    Passed,
    /// At least one comparison failed: the model computes something else.
    Failed,
    /// Nothing to compare with.
    Skipped,
}

/// One photo's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ImageCheck {
    /// Photo name (`astronaut`, …).
    pub image: String,
    /// FP32 only: largest |tract − onnxruntime| over the raw outputs.
    pub max_abs_diff: Option<f32>,
    /// Our top detection `label score`.
    pub ours: Option<String>,
    /// The golden top detection `label score`.
    pub golden: Option<String>,
    /// IoU of the two top boxes.
    pub iou: Option<f32>,
    /// Whether this photo passed.
    pub ok: bool,
    /// What failed, in words.
    pub problem: Option<String>,
}

/// The self-check of one model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelCheck {
    /// The model as the pipeline names it.
    pub model: String,
    /// Its key in `detections.json`.
    pub golden_key: String,
    /// Outcome.
    pub status: CheckStatus,
    /// Why it was skipped, or a summary of what failed.
    pub reason: Option<String>,
    /// Per-photo comparisons.
    pub images: Vec<ImageCheck>,
}

/// The self-check of every timed model.
#[derive(Clone, Debug, Serialize)]
pub struct SelfCheck {
    /// Worst outcome over the models (failed > passed > skipped).
    pub status: CheckStatus,
    /// The golden directory used.
    pub golden_dir: Option<String>,
    /// Why the whole check was skipped.
    pub reason: Option<String>,
    /// One entry per distinct model.
    pub models: Vec<ModelCheck>,
}

impl SelfCheck {
    pub(super) fn new(golden: &Result<PathBuf, String>) -> SelfCheck {
        SelfCheck {
            status: CheckStatus::Skipped,
            golden_dir: golden.as_ref().ok().map(|g| g.display().to_string()),
            reason: golden.as_ref().err().cloned(),
            models: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, m: ModelCheck) {
        self.status = match (self.status, m.status) {
            (CheckStatus::Failed, _) | (_, CheckStatus::Failed) => CheckStatus::Failed,
            (CheckStatus::Passed, _) | (_, CheckStatus::Passed) => CheckStatus::Passed,
            _ => CheckStatus::Skipped,
        };
        self.models.push(m);
    }

    /// Whether the timings can be trusted (nothing failed).
    pub fn trustworthy(&self) -> bool {
        self.status != CheckStatus::Failed
    }
}

/// The name of a model in `detections.json`: the embedded model's file name, or the file name.
pub fn golden_key(info: &ModelInfo) -> String {
    match info.name.strip_prefix("embedded:") {
        Some(_) => EMBEDDED_MODEL_FILE.to_string(),
        None => Path::new(&info.name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| info.name.clone()),
    }
}

/// The input size a golden key was made at (`nanodet-g-416-int8.onnx` → 416).
fn key_size(key: &str) -> Option<u32> {
    key.split(['-', '_', '.'])
        .find_map(|p| p.parse::<u32>().ok().filter(|n| *n >= 32))
}

fn describe(d: &Detection) -> String {
    format!("{} {:.2}", detect::label(d.class_id), d.score)
}

/// A golden detection as stored in `detections.json`.
#[derive(serde::Deserialize, Debug, Clone)]
struct GoldenDet {
    class_id: usize,
    score: f32,
    #[serde(rename = "box")]
    bbox: [f32; 4],
}

/// Checks one loaded model against the golden data in `dir` (see `models/README.md`): the
/// stretch-resized photo at the model's input size goes in with an identity mapping; FP32 raw
/// outputs must be within [`FP32_TOLERANCE`] of onnxruntime's (when the golden `.f32` exists),
/// and the top detection (score > 0.35, NMS 0.6, as the golden data was decoded) must have the
/// golden class and IoU ≥ [`MIN_TOP_IOU`].
pub fn self_check(det: &Detector, dir: &Path) -> ModelCheck {
    let info = det.info();
    let key = golden_key(info);
    let mut check = ModelCheck {
        model: info.name.clone(),
        golden_key: key.clone(),
        status: CheckStatus::Skipped,
        reason: None,
        images: Vec::new(),
    };
    let skip = |mut c: ModelCheck, why: String| {
        c.reason = Some(why);
        c
    };
    let fail = |mut c: ModelCheck, why: String| {
        c.status = CheckStatus::Failed;
        c.reason = Some(why);
        c
    };
    let json_path = dir.join("detections.json");
    let all: serde_json::Value = match std::fs::read(&json_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            return fail(
                check,
                format!("golden file {} is unreadable: {e}", json_path.display()),
            )
        }
    };
    let Some(per_image) = all.get(&key).and_then(|v| v.as_object()) else {
        return skip(check, format!("no golden data for model {key}"));
    };
    let (w, h) = (info.input_w, info.input_h);
    match key_size(&key) {
        Some(s) if (s, s) == (w, h) => {}
        Some(s) => {
            return skip(
                check,
                format!("golden data for {key} is at {s}x{s}, the model runs at {w}x{h}"),
            )
        }
        None => return skip(check, format!("golden data for {key}: input size unknown")),
    }
    let mut input = vec![0.0f32; det.input_len()];
    let ident = Mapping::new(w, h, w, h, ResizeMode::Stretch);
    for (img, golden) in per_image {
        let mut ic = ImageCheck {
            image: img.clone(),
            max_abs_diff: None,
            ours: None,
            golden: None,
            iou: None,
            ok: true,
            problem: None,
        };
        let mut problems: Vec<String> = Vec::new();
        let png = dir.join(format!("{img}-{w}x{h}.png"));
        let golden: Vec<GoldenDet> = match serde_json::from_value(golden.clone()) {
            Ok(g) => g,
            Err(e) => {
                problems.push(format!(
                    "{}: entry {key}/{img} is malformed: {e}",
                    json_path.display()
                ));
                Vec::new()
            }
        };
        let raw = detect::read_rgb_image(&png)
            .and_then(|(rgb, iw, ih)| {
                if (iw, ih) != (w, h) {
                    return Err(format!("{}: is {iw}x{ih}, expected {w}x{h}", png.display()));
                }
                preprocess::rgb_to_tensor(&rgb, w, h, w, h, ResizeMode::Stretch, &mut input)
                    .map_err(|e| format!("{}: {e}", png.display()))
            })
            .and_then(|_| det.run_raw(&input).map_err(|e| e.to_string()));
        match raw {
            Err(e) => problems.push(e),
            Ok(raw) => {
                if info.datum == "f32" {
                    let f32_path = dir.join(format!("ort-fp32-{w}-{img}.f32"));
                    if let Ok(bytes) = std::fs::read(&f32_path) {
                        let ours = raw.concatenated();
                        if bytes.len() != ours.len() * 4 {
                            problems.push(format!(
                                "{}: {} bytes, expected {} (the six outputs as f32)",
                                f32_path.display(),
                                bytes.len(),
                                ours.len() * 4
                            ));
                        } else {
                            let max = bytes
                                .chunks_exact(4)
                                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                                .zip(&ours)
                                .map(|(g, o)| {
                                    if g.is_nan() || o.is_nan() {
                                        f32::INFINITY
                                    } else {
                                        (g - o).abs()
                                    }
                                })
                                .fold(0.0f32, f32::max);
                            ic.max_abs_diff = Some(max);
                            if max > FP32_TOLERANCE {
                                problems.push(format!(
                                    "raw outputs differ from onnxruntime by up to {max:.2e} (> {FP32_TOLERANCE:.0e})"
                                ));
                            }
                        }
                    }
                }
                let cands = detect::decode::decode(&raw, w as usize, h as usize, 0.35);
                let mut ours = detect::nms(cands, 0.6, 100);
                for d in &mut ours {
                    d.bbox = ident.to_image(&d.bbox);
                }
                ic.ours = ours.first().map(describe);
                ic.golden = golden
                    .first()
                    .map(|g| format!("{} {:.2}", detect::label(g.class_id), g.score));
                match (ours.first(), golden.first()) {
                    (None, None) => {}
                    (Some(o), Some(g)) => {
                        let iou = o
                            .bbox
                            .iou(&BBox::new(g.bbox[0], g.bbox[1], g.bbox[2], g.bbox[3]));
                        ic.iou = Some(iou);
                        if o.class_id != g.class_id {
                            problems.push(format!(
                                "top detection is {}, golden says {} {:.2}",
                                describe(o),
                                detect::label(g.class_id),
                                g.score
                            ));
                        } else if iou < MIN_TOP_IOU {
                            problems.push(format!(
                                "top {} box has IoU {iou:.2} with the golden box (< {MIN_TOP_IOU})",
                                detect::label(o.class_id)
                            ));
                        }
                    }
                    (lone_ours, lone_golden) => {
                        // One side empty is tolerated only right at the score threshold.
                        let s = lone_ours.map(|d| d.score).or(lone_golden.map(|g| g.score));
                        if s.is_some_and(|s| s >= 0.40) {
                            problems.push(format!(
                                "top detection {} vs golden {}",
                                ic.ours.as_deref().unwrap_or("none"),
                                ic.golden.as_deref().unwrap_or("none")
                            ));
                        }
                    }
                }
            }
        }
        if !problems.is_empty() {
            ic.ok = false;
            ic.problem = Some(problems.join("; "));
        }
        check.images.push(ic);
    }
    if check.images.is_empty() {
        return skip(check, format!("no golden photos for model {key}"));
    }
    let bad: Vec<String> = check
        .images
        .iter()
        .filter(|i| !i.ok)
        .map(|i| {
            format!(
                "{}: {}",
                i.image,
                i.problem.as_deref().unwrap_or("mismatch")
            )
        })
        .collect();
    if bad.is_empty() {
        check.status = CheckStatus::Passed;
        check
    } else {
        fail(check, bad.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn golden_keys_and_sizes() {
        let mut info = ModelInfo {
            name: "embedded:nanodet-g-416-int8.onnx".into(),
            input_w: 416,
            input_h: 416,
            datum: "int8",
            threads: 1,
            load_time: Duration::ZERO,
        };
        assert_eq!(golden_key(&info), "nanodet-g-416-int8.onnx");
        info.name = "/x/y/nanodet-g-320-int8.onnx".into();
        assert_eq!(golden_key(&info), "nanodet-g-320-int8.onnx");
        assert_eq!(key_size("nanodet-g-320-int8.onnx"), Some(320));
        assert_eq!(key_size("model.onnx"), None);
    }
}
