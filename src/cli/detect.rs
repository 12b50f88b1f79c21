//! `lookout detect IMAGE…`: one-shot detection on photos.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::cli::exit::Failure;
use crate::detect::{self, Detector, DetectorConfig, ModelSource, Precision};
use crate::geom::ResizeMode;
use crate::output::DetectionOut;

/// Arguments of `lookout detect`.
#[derive(Args, Debug, Clone)]
pub struct DetectArgs {
    /// JPEG or PNG files to look at.
    #[arg(required = true, value_name = "IMAGE")]
    pub images: Vec<PathBuf>,
    /// ONNX model file (default: a NanoDet-g 416 built into lookout, see --precision).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// The built-in model to run: `auto` (INT8 where an int8 kernel beats FP32: 8-bit
    /// dot products, or any 64-bit ARM CPU; FP32 elsewhere), `int8` or `fp32`.
    #[arg(
        long,
        value_enum,
        value_name = "P",
        default_value = "auto",
        conflicts_with = "model"
    )]
    pub precision: Precision,
    /// Minimum score to report, 0..1.
    #[arg(long, value_name = "X", default_value_t = crate::vocab::DEFAULT_SCORE_THRESHOLD,
          value_parser = unit_interval)]
    pub threshold: f32,
    /// Threads for the model's matrix products, at least 1.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = threads)]
    pub threads: usize,
    /// Fit images by stretching instead of letterboxing.
    #[arg(long)]
    pub stretch: bool,
    /// One JSON object per image on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--threads`: 1..=64, as `model.threads` allows.
fn threads(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if (1..=64).contains(&n) {
        Ok(n)
    } else {
        Err("must be 1..=64".into())
    }
}

/// `--threshold`: a score in 0..=1.
fn unit_interval(s: &str) -> Result<f32, String> {
    let x: f32 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err("must be a score in 0..=1".into())
    }
}

/// One image's result, as printed by `--json`.
#[derive(Serialize, Debug)]
pub struct ImageResult {
    /// The path as given.
    pub file: String,
    /// Image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
    /// Objects found, best first.
    pub detections: Vec<DetectionOut>,
}

/// Runs the subcommand. Errors that concern one image are printed as they happen and the
/// other images still processed; then the result is [`Failure::Reported`] (exit status 1).
pub fn run(args: &DetectArgs) -> Result<(), Failure> {
    let cfg = DetectorConfig {
        model: args
            .model
            .clone()
            .map_or_else(|| ModelSource::embedded(args.precision), ModelSource::File),
        score_threshold: args.threshold,
        threads: args.threads,
        resize: if args.stretch {
            ResizeMode::Stretch
        } else {
            ResizeMode::Letterbox
        },
        ..DetectorConfig::default()
    };
    let detector = Detector::load(&cfg).map_err(anyhow::Error::from)?;
    let mut all_ok = true;
    for path in &args.images {
        let result = detect::read_rgb_image(path).and_then(|(rgb, w, h)| {
            detector
                .detect_rgb(&rgb, w, h)
                .map(|d| (d, w, h))
                .map_err(|e| format!("{}: {e}", path.display()))
        });
        let (dets, width, height) = match result {
            Ok(r) => r,
            Err(msg) => {
                eprintln!("lookout: {msg}");
                all_ok = false;
                continue;
            }
        };
        let res = ImageResult {
            file: path.display().to_string(),
            width,
            height,
            detections: dets.iter().map(DetectionOut::of_detection).collect(),
        };
        let text = if args.json {
            serde_json::to_string(&res).map_err(anyhow::Error::from)? + "\n"
        } else {
            table(&res)
        };
        crate::cli::out(&text)?;
    }
    if all_ok {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// One image's result as a table for people.
fn table(res: &ImageResult) -> String {
    use std::fmt::Write as _;
    let mut t = format!(
        "{} ({}x{}): {} object(s)\n",
        res.file,
        res.width,
        res.height,
        res.detections.len()
    );
    if res.detections.is_empty() {
        return t;
    }
    let _ = writeln!(
        t,
        "  {:<16} {:>6}  {:>7} {:>7} {:>7} {:>7}",
        "label", "score", "x0", "y0", "x1", "y1"
    );
    for d in &res.detections {
        let [x0, y0, x1, y1] = d.bbox;
        let _ = writeln!(
            t,
            "  {:<16} {:>6.2}  {:>7.1} {:>7.1} {:>7.1} {:>7.1}",
            d.label, d.score, x0, y0, x1, y1
        );
    }
    t
}
