//! The golden self-check: each model against the outputs shipped in `models/golden/`, and
//! where that data and the models are found. Its comparisons ([`FP32_TOLERANCE`],
//! [`compare_top`], [`decode_as_golden`]) are the ones `tests/detect.rs` asserts: one
//! definition of "matches the golden data" for the product and the tests.

use std::path::{Path, PathBuf};

use super::report::{CheckStatus, ImageCheck, ModelCheck, SelfCheck};
use super::GOLDEN_ENV;
use crate::detect::{self, Detector, DetectorConfig, ModelInfo, RawOutputs};
use crate::geom::{BBox, Mapping, ResizeMode};
use crate::preprocess;
use crate::vocab::{self, Detection};

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
        Some(file) => file.to_string(),
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
    format!("{} {:.2}", vocab::label(d.class_id), d.score)
}

/// FP32 raw outputs must match onnxruntime's golden outputs within this (largest absolute
/// difference over the six outputs): the self-check and `tests/detect.rs` both use it.
pub const FP32_TOLERANCE: f32 = 1e-3;
/// The top detection must overlap the golden one at least this much (IoU).
pub const MIN_TOP_IOU: f32 = 0.9;
/// When only one side (ours or the golden data) has a top detection, its score must be below
/// this: a detection right at the score threshold may fall either side of it by rounding.
pub const LONE_TOP_MAX_SCORE: f32 = 0.40;

/// A golden detection as stored in `detections.json` (model-input pixels).
#[derive(serde::Deserialize, Debug, Clone, PartialEq)]
pub struct GoldenDetection {
    /// Class id.
    pub class_id: usize,
    /// Score.
    pub score: f32,
    /// `[x0, y0, x1, y1]`.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
}

impl GoldenDetection {
    /// The box.
    pub fn bbox(&self) -> BBox {
        BBox::new(self.bbox[0], self.bbox[1], self.bbox[2], self.bbox[3])
    }

    fn describe(&self) -> String {
        format!("{} {:.2}", vocab::label(self.class_id), self.score)
    }
}

/// Decodes raw outputs as the golden data was decoded: the detector's default score and NMS
/// thresholds ([`DetectorConfig::default`]), boxes in model-input pixels (`w`×`h`), best first.
pub fn decode_as_golden(raw: &RawOutputs, w: u32, h: u32) -> Vec<Detection> {
    let d = DetectorConfig::default();
    let cands = detect::decode::decode(raw, w as usize, h as usize, d.score_threshold);
    detect::nms(cands, d.iou_threshold, d.max_detections)
}

/// The largest |ours − golden| over two output vectors; a NaN on either side counts as
/// infinitely far.
pub fn max_abs_diff(ours: &[f32], golden: &[f32]) -> f32 {
    ours.iter()
        .zip(golden)
        .map(|(o, g)| {
            if g.is_nan() || o.is_nan() {
                f32::INFINITY
            } else {
                (g - o).abs()
            }
        })
        .fold(0.0f32, f32::max)
}

/// Little-endian f32s, as the golden `.f32` files store raw outputs (trailing bytes ignored).
pub fn f32s_from_le_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Compares our top detection with the golden one: same class and IoU ≥ [`MIN_TOP_IOU`];
/// one side empty only below [`LONE_TOP_MAX_SCORE`]. `Ok` carries the IoU of the two top
/// boxes (when both exist), `Err` what differs, in words.
pub fn compare_top(ours: &[Detection], golden: &[GoldenDetection]) -> Result<Option<f32>, String> {
    match (ours.first(), golden.first()) {
        (None, None) => Ok(None),
        (Some(o), Some(g)) => {
            let iou = o.bbox.iou(&g.bbox());
            if o.class_id != g.class_id {
                Err(format!(
                    "top detection is {}, golden says {}",
                    describe(o),
                    g.describe()
                ))
            } else if iou < MIN_TOP_IOU {
                Err(format!(
                    "top {} box has IoU {iou:.2} with the golden box (< {MIN_TOP_IOU})",
                    vocab::label(o.class_id)
                ))
            } else {
                Ok(Some(iou))
            }
        }
        (lone_ours, lone_golden) => {
            let s = lone_ours.map(|d| d.score).or(lone_golden.map(|g| g.score));
            if s.is_some_and(|s| s >= LONE_TOP_MAX_SCORE) {
                Err(format!(
                    "top detection {} vs golden {}",
                    lone_ours.map_or("none".to_string(), describe),
                    lone_golden.map_or("none".to_string(), GoldenDetection::describe)
                ))
            } else {
                Ok(None)
            }
        }
    }
}

/// Checks one loaded model against the golden data in `dir` (see `models/README.md`): the
/// stretch-resized photo at the model's input size goes in with an identity mapping; FP32 raw
/// outputs must be within [`FP32_TOLERANCE`] of onnxruntime's (when the golden `.f32` exists),
/// and the top detection (decoded as the golden data was: [`decode_as_golden`]) must match the
/// golden one ([`compare_top`]).
pub fn self_check(det: &Detector, dir: &Path) -> ModelCheck {
    let info = det.info();
    let key = golden_key(info);
    let check = ModelCheck {
        model: info.name.clone(),
        golden_key: key.clone(),
        status: CheckStatus::Skipped,
        reason: None,
        images: Vec::new(),
    };
    let per_image = match golden_entries(dir, &key, info) {
        Ok(p) => p,
        Err((status, why)) => return check.concluded(status, why),
    };
    let mut golden = GoldenPhotos {
        dir,
        key: &key,
        input: vec![0.0f32; det.input_len()],
    };
    let images = per_image
        .iter()
        .map(|(img, dets)| golden.check(det, img, dets))
        .collect();
    ModelCheck { images, ..check }.judged()
}

/// The golden entries (`photo → detections`) for `key` in `dir/detections.json`, when they were
/// made at the model's input size; otherwise the status and reason the check ends with.
fn golden_entries(
    dir: &Path,
    key: &str,
    info: &ModelInfo,
) -> Result<serde_json::Map<String, serde_json::Value>, (CheckStatus, String)> {
    let json_path = dir.join("detections.json");
    let all: serde_json::Value = std::fs::read(&json_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|e| {
            let why = format!("golden file {} is unreadable: {e}", json_path.display());
            (CheckStatus::Failed, why)
        })?;
    let skip = |why: String| (CheckStatus::Skipped, why);
    let Some(per_image) = all.get(key).and_then(|v| v.as_object()) else {
        return Err(skip(format!("no golden data for model {key}")));
    };
    let (w, h) = (info.input_w, info.input_h);
    match key_size(key) {
        Some(s) if (s, s) == (w, h) => Ok(per_image.clone()),
        Some(s) => Err(skip(format!(
            "golden data for {key} is at {s}x{s}, the model runs at {w}x{h}"
        ))),
        None => Err(skip(format!("golden data for {key}: input size unknown"))),
    }
}

/// The golden photos of one model, and the input tensor they are loaded into.
struct GoldenPhotos<'a> {
    dir: &'a Path,
    key: &'a str,
    input: Vec<f32>,
}

impl GoldenPhotos<'_> {
    /// Compares the model's answer on photo `img` with its golden entry `golden`.
    fn check(&mut self, det: &Detector, img: &str, golden: &serde_json::Value) -> ImageCheck {
        let mut ic = ImageCheck {
            image: img.to_string(),
            max_abs_diff: None,
            ours: None,
            golden: None,
            iou: None,
            ok: true,
            problem: None,
        };
        let mut problems: Vec<String> = Vec::new();
        let golden: Vec<GoldenDetection> = match serde_json::from_value(golden.clone()) {
            Ok(g) => g,
            Err(e) => {
                problems.push(format!(
                    "{}: entry {}/{img} is malformed: {e}",
                    self.dir.join("detections.json").display(),
                    self.key
                ));
                Vec::new()
            }
        };
        match self.run(det, img) {
            Err(e) => problems.push(e),
            Ok(raw) => {
                let info = det.info();
                let (w, h) = (info.input_w, info.input_h);
                if info.datum == "f32" {
                    let (diff, problem) = self.compare_raw_fp32(img, w, &raw);
                    ic.max_abs_diff = diff;
                    problems.extend(problem);
                }
                let ident = Mapping::new(w, h, w, h, ResizeMode::Stretch);
                let mut ours = decode_as_golden(&raw, w, h);
                for d in &mut ours {
                    d.bbox = ident.to_image(&d.bbox);
                }
                ic.ours = ours.first().map(describe);
                ic.golden = golden.first().map(GoldenDetection::describe);
                match compare_top(&ours, &golden) {
                    Ok(iou) => ic.iou = iou,
                    Err(e) => {
                        // Both tops exist: their IoU is worth reporting even on a mismatch.
                        ic.iou = ours
                            .first()
                            .zip(golden.first())
                            .map(|(o, g)| o.bbox.iou(&g.bbox()));
                        problems.push(e);
                    }
                }
            }
        }
        if !problems.is_empty() {
            ic.ok = false;
            ic.problem = Some(problems.join("; "));
        }
        ic
    }

    /// The model's raw outputs on the photo `<img>-<W>x<H>.png`, stretch-loaded exactly.
    fn run(&mut self, det: &Detector, img: &str) -> Result<RawOutputs, String> {
        let info = det.info();
        let (w, h) = (info.input_w, info.input_h);
        let png = self.dir.join(format!("{img}-{w}x{h}.png"));
        let (rgb, iw, ih) = detect::read_rgb_image(&png)?;
        if (iw, ih) != (w, h) {
            return Err(format!("{}: is {iw}x{ih}, expected {w}x{h}", png.display()));
        }
        preprocess::rgb_to_tensor(&rgb, w, h, w, h, ResizeMode::Stretch, &mut self.input)
            .map_err(|e| format!("{}: {e}", png.display()))?;
        det.run_raw(&self.input).map_err(|e| e.to_string())
    }

    /// FP32 models: the largest difference from onnxruntime's raw outputs
    /// (`ort-fp32-<W>-<img>.f32`, when it exists) and the problem, if any.
    fn compare_raw_fp32(
        &self,
        img: &str,
        w: u32,
        raw: &RawOutputs,
    ) -> (Option<f32>, Option<String>) {
        let f32_path = self.dir.join(format!("ort-fp32-{w}-{img}.f32"));
        let Ok(bytes) = std::fs::read(&f32_path) else {
            return (None, None);
        };
        let ours = raw.concatenated();
        if bytes.len() != ours.len() * 4 {
            let problem = format!(
                "{}: {} bytes, expected {} (the six outputs as f32)",
                f32_path.display(),
                bytes.len(),
                ours.len() * 4
            );
            return (None, Some(problem));
        }
        let max = max_abs_diff(&ours, &f32s_from_le_bytes(&bytes));
        let problem = (max > FP32_TOLERANCE).then(|| {
            format!(
                "raw outputs differ from onnxruntime by up to {max:.2e} (> {FP32_TOLERANCE:.0e})"
            )
        });
        (Some(max), problem)
    }
}

impl ModelCheck {
    /// Ends the check early with `status` and `reason`.
    fn concluded(mut self, status: CheckStatus, reason: String) -> ModelCheck {
        self.status = status;
        self.reason = Some(reason);
        self
    }

    /// The verdict over the compared photos: passed when every photo passed, skipped when
    /// there were none, failed otherwise (the reason names each failing photo).
    fn judged(self) -> ModelCheck {
        if self.images.is_empty() {
            let why = format!("no golden photos for model {}", self.golden_key);
            return self.concluded(CheckStatus::Skipped, why);
        }
        let bad: Vec<String> = self
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
            ModelCheck {
                status: CheckStatus::Passed,
                ..self
            }
        } else {
            self.concluded(CheckStatus::Failed, bad.join(" | "))
        }
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
            int8_path: None,
        };
        assert_eq!(golden_key(&info), "nanodet-g-416-int8.onnx");
        info.name = "/x/y/nanodet-g-320-int8.onnx".into();
        assert_eq!(golden_key(&info), "nanodet-g-320-int8.onnx");
        assert_eq!(key_size("nanodet-g-320-int8.onnx"), Some(320));
        assert_eq!(key_size("model.onnx"), None);
    }
}
