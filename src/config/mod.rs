//! The configuration file (TOML): serde structs with defaults, strict parsing (unknown keys
//! are errors) and validation whose every error names the key path, the line and column,
//! what was expected and what was found.
//!
//! Validation has two stages (after ripgrep's low-/high-level arguments):
//! [`Config::check_values`] looks at the values alone (ranges, names, the pixel format) and
//! touches nothing; [`check_environment`] asks the machine (the source's file or device, the
//! model file, the cores this process may use, the tracks file's directory). Both return
//! [`Problem`]s; [`ConfigErrors::from_problems`] turns them into located errors.
//!
//! With no file at all, [`Config::default`] runs the bundled demo clip with the embedded
//! model — the README's "main job". The shipped `systemd/lookout.toml` names `/dev/video0`.

mod cameras;
mod input_size;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::detect::{DetectorConfig, ModelSource, Precision};
use crate::events::{EventsConfig, Rules, ZonesConfig};
use crate::files;
use crate::frame::PixelFormat;
use crate::geom::ResizeMode;
use crate::metrics::MetricsConfig;
use crate::mqtt::MqttConfig;
use crate::schedule::ScheduleKind;
use crate::snapshot::SnapshotsConfig;
use crate::source::Spec;
use crate::track::TrackerConfig;
use crate::vocab::labels;

pub use cameras::{tracks_file_of, Camera, CameraConfig};
pub use input_size::{auto_size, InputSize, AUTO_WIDTH};

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where frames come from.
    pub source: SourceConfig,
    /// The detector.
    pub model: ModelConfig,
    /// Scheduling and threads.
    pub pipeline: PipelineConfig,
    /// The tracker.
    pub tracker: TrackerConfig,
    /// What is reported and where.
    pub output: OutputConfig,
    /// Which tracks become events (true positives worth telling about).
    pub events: EventsConfig,
    /// Named areas of the frame, `name = [[x, y], …]` in fractions of the frame.
    pub zones: ZonesConfig,
    /// The MQTT broker (events, counts, snapshots, stats, Home Assistant discovery).
    pub mqtt: MqttConfig,
    /// Pictures of events.
    pub snapshots: SnapshotsConfig,
    /// The Prometheus exporter (`/metrics`, node_exporter text file).
    pub metrics: MetricsConfig,
    /// `[[camera]]`: several cameras sharing one detector (see [`Config::cameras`]); none =
    /// `[source]` is the one camera.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub camera: Vec<CameraConfig>,
}

/// `[source]`
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SourceConfig {
    /// `/dev/videoN`, `FILE.mjpeg`, `FILE.y4m`, `DIR/`, `exec:COMMAND ARGS…`, or `demo` (the
    /// bundled clip): see [`Spec::parse`].
    pub spec: String,
    /// Requested capture width (V4L2); 0 = the device's current setting.
    pub width: u32,
    /// Requested capture height (V4L2); 0 = the device's current setting.
    pub height: u32,
    /// Requested pixel format (V4L2): a FourCC or an alias, as [`PixelFormat`]'s `FromStr`
    /// reads it (`YUYV`, `MJPG`, `MJPEG`, …); empty = best available. See [`Config::pixel_format`].
    pub format: String,
    /// Requested frame rate (V4L2) or replay rate for files without one; 0 = default.
    pub fps: u32,
    /// Replay files at their frame rate (like a camera); false = as fast as possible.
    pub realtime: bool,
    /// Start a file over when it ends.
    #[serde(rename = "loop")]
    pub looped: bool,
    /// A camera (`/dev/videoN`, `/dev/v4l/…`) missing when the daemon starts is waited for
    /// (back-off up to 5 s, the watchdog fed, STATUS saying so) instead of being a
    /// configuration error: USB cameras can enumerate after the service starts.
    pub wait_for_camera: bool,
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            spec: "demo".into(),
            width: 640,
            height: 480,
            format: String::new(),
            fps: 0,
            realtime: true,
            looped: false,
            wait_for_camera: true,
        }
    }
}

/// `[model]`
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// ONNX file; empty = a NanoDet-g 416 built into the binary, chosen by `precision`.
    pub file: String,
    /// Which built-in model runs when `file` is empty: `auto` (INT8 where an int8 kernel beats
    /// FP32: 8-bit dot products, or any 64-bit ARM CPU; else FP32), `int8` or `fp32`.
    pub precision: Precision,
    /// Input `[width, height]` (multiples of 32); empty = what the model file declares;
    /// `"auto"` = shaped like the source's frames ([`InputSize::resolve`]).
    pub input_size: InputSize,
    /// Minimum score of a detection, 0..1.
    pub threshold: f32,
    /// Class-aware NMS IoU threshold, 0..1.
    pub iou_threshold: f32,
    /// Most detections per frame.
    pub max_detections: usize,
    /// Threads for the model's matrix products.
    pub threads: usize,
    /// `letterbox` or `stretch`.
    pub resize: ResizeMode,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            file: String::new(),
            precision: Precision::Auto,
            input_size: InputSize::default(),
            threshold: crate::vocab::DEFAULT_SCORE_THRESHOLD,
            iou_threshold: crate::detect::DEFAULT_IOU_THRESHOLD,
            max_detections: crate::detect::DEFAULT_MAX_DETECTIONS,
            threads: 1,
            resize: ResizeMode::Letterbox,
        }
    }
}

/// `[pipeline]`
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// Run the detector every N frames (it runs asynchronously; tracking fills the gaps); with
    /// the adaptive schedule, the longest gap between detections while anything is tracked.
    pub detect_every: u32,
    /// `"adaptive"`: motion, uncertain tracks and a heartbeat ask for detections;
    /// `"fixed"`: every `detect_every` frames (see `schedule`).
    pub schedule: ScheduleKind,
    /// Adaptive schedule: seconds between heartbeat detections while nothing is tracked and
    /// nothing moves.
    pub idle_detect_interval: f64,
    /// Pin threads to cores (false: let the kernel schedule them).
    pub pin_threads: bool,
    /// Core for the capture thread; absent = automatic (see ARCHITECTURE.md).
    pub capture_core: Option<usize>,
    /// Core for the tracking thread; absent = automatic.
    pub track_core: Option<usize>,
    /// Cores for the detector (first one runs the detector thread, all of them the model's
    /// matrix products); empty = automatic.
    pub detect_cores: Vec<usize>,
    /// Seconds between stats reports.
    pub stats_interval: f64,
    /// Width of the grayscale plane the tracker works on (frames are downscaled to it).
    pub track_width: u32,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            detect_every: 5,
            schedule: ScheduleKind::default(),
            idle_detect_interval: 10.0,
            pin_threads: true,
            capture_core: None,
            track_core: None,
            detect_cores: Vec::new(),
            stats_interval: 10.0,
            track_width: 320,
        }
    }
}

/// `[output]`
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// COCO labels to report; empty = all 80.
    pub labels: Vec<String>,
    /// Write one JSON line per processed frame here; empty = off.
    pub tracks_file: String,
    /// Size (MB, fractions allowed) at which the tracks file is renamed to `….1` (replacing
    /// the previous one) and a new one started: the two never hold more than twice this.
    pub tracks_max_mb: f64,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            labels: Vec::new(),
            tracks_file: String::new(),
            tracks_max_mb: 64.0,
        }
    }
}

impl OutputConfig {
    /// `tracks_max_mb` in bytes (1 MB = 2²⁰ bytes).
    pub fn tracks_max_bytes(&self) -> u64 {
        (self.tracks_max_mb * 1024.0 * 1024.0) as u64
    }
}

/// A configuration problem, located in the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: {key}: {message}")]
pub struct ConfigError {
    /// The file (or `<built-in>`).
    pub file: String,
    /// Dotted key path, e.g. `model.threshold`.
    pub key: String,
    /// 1-based line (0 when the key is absent from the file).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What was expected and what was found.
    pub message: String,
}

/// All problems found in one file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// One problem found by validation, not yet located in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, e.g. `source.format` (an index for array elements: `classes[1]`).
    pub key: String,
    /// What was expected and what was found.
    pub message: String,
}

impl Problem {
    /// A problem with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl ConfigErrors {
    /// The one conversion of [`Problem`]s into errors: each names `file` and, when the
    /// file's `text` is given and holds the key, the line and column of its value (else 0:0,
    /// e.g. for values that came from the command line).
    pub fn from_problems(file: &str, text: Option<&str>, problems: Vec<Problem>) -> ConfigErrors {
        ConfigErrors(
            problems
                .into_iter()
                .map(|Problem { key, message }| {
                    let (line, column) = text
                        .and_then(|t| span_of(t, &key).map(|s| line_col(t, s.start)))
                        .unwrap_or((0, 0));
                    ConfigError {
                        file: file.into(),
                        key,
                        line,
                        column,
                        message,
                    }
                })
                .collect(),
        )
    }
}

/// `0..4` for contiguous core ids, else the list (`[2, 3]`).
fn describe_cores(ids: &[usize]) -> String {
    match (ids.first(), ids.last()) {
        (Some(&a), Some(&b)) if b - a + 1 == ids.len() => format!("{a}..{}", b + 1),
        _ => format!("{ids:?}"),
    }
}

/// `[camera.source]` tables without `spec`, found in the file's text: the key defaults to the
/// bundled clip for `[source]`, but a camera that silently played the demo clip would be a
/// camera that is not watched.
fn camera_sources_without_spec(text: &str) -> Vec<Problem> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Vec::new(); // a syntax error is reported by the parser
    };
    let Some(cams) = doc.get("camera").and_then(|c| c.as_array()) else {
        return Vec::new();
    };
    cams.iter()
        .enumerate()
        .filter(|(_, c)| {
            c.get("source")
                .and_then(|s| s.as_table())
                .is_some_and(|s| !s.contains_key("spec"))
        })
        .map(|(i, _)| {
            Problem::new(
                format!("camera[{i}].source.spec"),
                "expected the camera's device, file or command (`spec = \"/dev/video0\"`, `\"exec:…\"`, …), found none",
            )
        })
        .collect()
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Byte span of the value at a dotted key path, if present in the document. A last part
/// with an index (`classes[1]`) locates that element of the array.
fn span_of(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let (name, index) = match part.strip_suffix(']').and_then(|p| p.split_once('[')) {
            Some((name, idx)) => (name, idx.parse::<usize>().ok()),
            None => (*part, None),
        };
        let (k, v) = table.iter().find(|(k, _)| k.get_ref().as_ref() == name)?;
        if let (Some(idx), toml::de::DeValue::Array(items)) = (index, v.get_ref()) {
            if let Some(item) = items.get(idx) {
                // An array of tables (`camera[1].name`) goes on into its element.
                match item.get_ref() {
                    toml::de::DeValue::Table(t) if i + 1 < parts.len() => {
                        table = t;
                        continue;
                    }
                    _ => return Some(item.span()),
                }
            }
        }
        if i + 1 == parts.len() {
            return Some(v.span().start.min(k.span().start)..v.span().end);
        }
        match v.get_ref() {
            toml::de::DeValue::Table(t) => table = t,
            _ => return Some(v.span()),
        }
    }
    None
}

impl Config {
    /// Reads, parses and validates a file: a regular file of at most
    /// [`files::CONFIG_LIMIT`] bytes (see [`files::read_bounded`]).
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        let file = path.display().to_string();
        let text = files::read_bounded_text(path, files::CONFIG_LIMIT, "configuration file")
            .map_err(|e| {
                ConfigErrors(vec![ConfigError {
                    file: file.clone(),
                    key: "(file)".into(),
                    line: 0,
                    column: 0,
                    message: e.to_string(),
                }])
            })?;
        let cfg = Config::parse(&text, &file)?;
        // The tracks file must not overwrite the configuration it is named in.
        let tracks = Path::new(&cfg.output.tracks_file);
        if !cfg.output.tracks_file.is_empty() {
            if let Some(why) =
                crate::output::tracks_path_problem(tracks, &[(path, "configuration file")])
            {
                let problem = Problem::new("output.tracks_file", why);
                return Err(ConfigErrors::from_problems(
                    &file,
                    Some(&text),
                    vec![problem],
                ));
            }
        }
        Ok(cfg)
    }

    /// Parses and validates TOML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        let de = toml::Deserializer::parse(text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            // Quote the offending line: TOML messages such as "duplicate key" do not name it.
            let quoted = match text.lines().nth(line.wrapping_sub(1)).map(str::trim) {
                Some(l) if !l.is_empty() => {
                    format!(" (in `{}`)", l.chars().take(80).collect::<String>())
                }
                _ => String::new(),
            };
            ConfigErrors(vec![ConfigError {
                file: file.into(),
                key: "(syntax)".into(),
                line,
                column,
                message: format!("not valid TOML: {}{quoted}", e.message().trim()),
            }])
        })?;
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            // An unknown key at the top level (even one named "") has no path: say where.
            let key = match e.path().to_string() {
                k if k.is_empty() || k == "." => "(top level)".to_string(),
                k => k,
            };
            let inner = e.into_inner();
            let (line, column) = inner.span().map_or((0, 0), |s| line_col(text, s.start));
            ConfigErrors(vec![ConfigError {
                file: file.into(),
                key,
                line,
                column,
                message: inner.message().trim().to_string(),
            }])
        })?;
        let mut problems = cfg.problems();
        problems.extend(camera_sources_without_spec(text));
        if problems.is_empty() {
            return Ok(cfg);
        }
        Err(ConfigErrors::from_problems(file, Some(text), problems))
    }

    /// Every problem: [`Config::check_values`], then [`check_environment`].
    pub fn problems(&self) -> Vec<Problem> {
        let mut p = self.check_values();
        p.extend(check_environment(self));
        p
    }

    /// The checks of the values alone (ranges, names, the pixel format): no file, device or
    /// system call is consulted, so the result depends on nothing but `self`.
    pub fn check_values(&self) -> Vec<Problem> {
        let mut p = Vec::new();
        self.check_source(&mut p);
        self.check_model(&mut p);
        self.check_pipeline(&mut p);
        if let Err(e) = self.tracker.validate() {
            let e = e.with_prefix("tracker");
            p.push(Problem::new(e.field, e.message));
        }
        self.check_output(&mut p);
        if let Err(errors) = Rules::new(&self.events, &self.zones) {
            p.extend(errors.into_iter().map(|e| Problem::new(e.key, e.message)));
        }
        p.extend(
            self.mqtt
                .check_values()
                .into_iter()
                .map(|e| Problem::new(e.key, e.message)),
        );
        p.extend(
            self.snapshots
                .check_values()
                .into_iter()
                .map(|(k, m)| Problem::new(k, m)),
        );
        p.extend(metrics_problems(self.metrics.check_values()));
        p.extend(self.check_cameras(false));
        p
    }

    /// The event rules of `[events]` and `[zones]`; a validated configuration's always build.
    pub fn event_rules(&self) -> Result<Rules, ConfigErrors> {
        Rules::new(&self.events, &self.zones).map_err(|errors| {
            let problems = errors
                .into_iter()
                .map(|e| Problem::new(e.key, e.message))
                .collect();
            ConfigErrors::from_problems("<configuration>", None, problems)
        })
    }

    /// `[source]`: spec, size, format, rate.
    fn check_source(&self, p: &mut Vec<Problem>) {
        let mut bad = |k: &str, m: String| p.push(Problem::new(k, m));
        let s = &self.source;
        if s.spec.trim().is_empty() {
            bad(
                "source.spec",
                format!("expected {SPEC_KINDS}, found an empty string"),
            );
        }
        if let Ok(Spec::Exec(command)) = Spec::parse(&s.spec) {
            if let Err(m) = crate::source::exec::command::split(&command) {
                bad("source.spec", m);
            }
        }
        if s.width > 16384 || s.height > 16384 || (s.width == 0) != (s.height == 0) {
            bad("source.width", format!("expected width and height both 0 (device default) or both in 1..=16384, found {}x{}", s.width, s.height));
        }
        if !s.format.is_empty() && s.format.parse::<PixelFormat>().is_err() {
            bad(
                "source.format",
                format!(
                    "expected a FourCC lookout reads, one of {}, or \"\" for the best the camera offers; found {:?}",
                    PixelFormat::accepted_names(),
                    s.format
                ),
            );
        }
        if s.fps > 1000 {
            bad(
                "source.fps",
                format!("expected 0 (default) or 1..=1000, found {}", s.fps),
            );
        }
    }

    /// `[model]`: input size, thresholds, detection count, threads.
    fn check_model(&self, p: &mut Vec<Problem>) {
        let mut bad = |k: &str, m: String| p.push(Problem::new(k, m));
        let m = &self.model;
        if !m.file.is_empty() && m.precision != Precision::Auto {
            bad(
                "model.precision",
                format!(
                    "chooses among the built-in models; with model.file set ({}) the file decides: \
                     remove model.precision or model.file",
                    m.file
                ),
            );
        }
        match &m.input_size {
            InputSize::Auto => {}
            InputSize::List(v) => match v.as_slice() {
            [] => {}
            [w, h] => {
                if let Some(problem) =
                    crate::detect::input_size_problem(u64::from(*w), u64::from(*h))
                {
                    bad(
                        "model.input_size",
                        format!("expected [width, height], multiples of 32 up to 2048, at most 2048x1152 pixels in all; {problem}"),
                    );
                }
            }
            other => bad(
                "model.input_size",
                format!("expected \"auto\", [] or [width, height], multiples of 32 up to 2048, found {other:?}"),
            ),
            },
        }
        if !(m.threshold > 0.0 && m.threshold < 1.0) {
            bad(
                "model.threshold",
                format!(
                    "expected a score in 0..1 (exclusive), found {}",
                    m.threshold
                ),
            );
        }
        if !(m.iou_threshold > 0.0 && m.iou_threshold <= 1.0) {
            bad(
                "model.iou_threshold",
                format!("expected a value in 0..=1, found {}", m.iou_threshold),
            );
        }
        if m.max_detections == 0 || m.max_detections > 1000 {
            bad(
                "model.max_detections",
                format!("expected 1..=1000, found {}", m.max_detections),
            );
        }
        if m.threads == 0 || m.threads > 64 {
            bad(
                "model.threads",
                format!("expected 1..=64, found {}", m.threads),
            );
        }
    }

    /// `[pipeline]`: detection interval, stats interval, tracking width.
    fn check_pipeline(&self, p: &mut Vec<Problem>) {
        let mut bad = |k: &str, m: String| p.push(Problem::new(k, m));
        let pl = &self.pipeline;
        if pl.detect_every == 0 || pl.detect_every > 1000 {
            bad(
                "pipeline.detect_every",
                format!("expected 1..=1000 frames, found {}", pl.detect_every),
            );
        }
        if !(pl.idle_detect_interval >= 0.1 && pl.idle_detect_interval <= 3600.0) {
            bad(
                "pipeline.idle_detect_interval",
                format!(
                    "expected seconds in 0.1..=3600, found {}",
                    pl.idle_detect_interval
                ),
            );
        }
        if !(pl.stats_interval >= 0.5 && pl.stats_interval <= 3600.0) {
            bad(
                "pipeline.stats_interval",
                format!(
                    "expected seconds in 0.5..=3600, found {}",
                    pl.stats_interval
                ),
            );
        }
        if !(32..=1920).contains(&pl.track_width) {
            bad(
                "pipeline.track_width",
                format!("expected 32..=1920 pixels, found {}", pl.track_width),
            );
        }
    }

    /// `[output]`: the labels to report, the size the tracks file rotates at.
    fn check_output(&self, p: &mut Vec<Problem>) {
        let mut bad = |k: &str, m: String| p.push(Problem::new(k, m));
        let mb = self.output.tracks_max_mb;
        if !(0.01..=1_048_576.0).contains(&mb) {
            bad(
                "output.tracks_max_mb",
                format!("expected megabytes in 0.01..=1048576 (fractions allowed), found {mb}"),
            );
        }
        for l in &self.output.labels {
            if labels::class_id(l).is_none() {
                bad(
                    "output.labels",
                    format!("expected COCO labels like \"person\", \"car\", \"cat\", found {l:?}"),
                );
            }
        }
    }

    /// The pixel format `[source] format` asks for (`None`: the best the camera offers).
    /// A validated configuration's format always parses.
    pub fn pixel_format(&self) -> Option<PixelFormat> {
        let f = self.source.format.trim();
        if f.is_empty() {
            None
        } else {
            f.parse().ok()
        }
    }

    /// The detector settings this configuration asks for.
    pub fn detector(&self) -> DetectorConfig {
        let m = &self.model;
        let (input_size, input_size_why) = m
            .input_size
            .resolve((self.source.width, self.source.height));
        DetectorConfig {
            model: if m.file.is_empty() {
                ModelSource::embedded(m.precision)
            } else {
                ModelSource::File(PathBuf::from(&m.file))
            },
            input_size,
            input_size_why,
            threads: m.threads,
            score_threshold: m.threshold,
            iou_threshold: m.iou_threshold,
            max_detections: m.max_detections,
            resize: m.resize,
        }
    }

    /// The lowest score the detector keeps: `[tracker] continue_score` when that is below
    /// `[model] threshold` (the tracker's weak detections, never reported), else the threshold.
    pub fn detection_floor(&self) -> f32 {
        self.tracker.continue_score.min(self.model.threshold)
    }

    /// Class ids to report (`None` = all).
    pub fn label_filter(&self) -> Option<Vec<usize>> {
        if self.output.labels.is_empty() {
            None
        } else {
            Some(
                self.output
                    .labels
                    .iter()
                    .filter_map(|l| labels::class_id(l))
                    .collect(),
            )
        }
    }

    /// The effective configuration as TOML (what `check-config` prints).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render: {e}"))
    }
}

/// What `source.spec` may name, for error messages.
const SPEC_KINDS: &str =
    "a device (/dev/videoN), a file (.mjpeg, .mjpg, .y4m), a directory of JPEG/PNG images, a command (exec:COMMAND ARGS…) or \"demo\"";

/// The checks that ask the machine: the source's device or file exists and is of a kind
/// lookout reads, the model file is a usable NanoDet ONNX model (parsed and typed, not
/// optimized), the configured cores are ones this process may run on, the tracks file's
/// directory exists.
pub fn check_environment(cfg: &Config) -> Vec<Problem> {
    let mut p = Vec::new();
    check_source(cfg, &mut p);
    check_model(cfg, &mut p);
    check_cores(cfg, &mut p);
    check_tracks_file(cfg, &mut p);
    for e in cfg.mqtt.check_environment() {
        p.push(Problem::new(e.key, e.message));
    }
    for (k, m) in cfg.snapshots.check_environment() {
        p.push(Problem::new(k, m));
    }
    p.extend(metrics_problems(cfg.metrics.check_environment()));
    p.extend(cfg.check_cameras(true));
    p
}

fn metrics_problems(errors: Vec<crate::metrics::MetricsConfigError>) -> Vec<Problem> {
    errors
        .into_iter()
        .map(|e| Problem::new(e.key, e.message))
        .collect()
}

/// `source.spec` names a device that is there (or one the daemon waits for), or a file of a
/// kind lookout reads.
fn check_source(cfg: &Config, p: &mut Vec<Problem>) {
    let mut bad = |k: &str, m: String| p.push(Problem::new(k, m));
    let spec = cfg.source.spec.trim();
    if spec.is_empty() {
        return;
    }
    match Spec::parse(spec) {
        Ok(Spec::Demo) => {}
        // A line that does not split is a value problem (`check_values`); here: can the
        // program be started?
        Ok(Spec::Exec(command)) => {
            let argv = crate::source::exec::command::split(&command).unwrap_or_default();
            if let Some(program) = argv.first() {
                if let Err(m) = crate::source::exec::command::resolve_in_env(program) {
                    bad(
                        "source.spec",
                        format!("expected a command lookout can start, found {spec}: {m}"),
                    );
                }
            }
        }
        Ok(Spec::Camera(device)) => {
            let waited_for = cfg.source.wait_for_camera && crate::source::is_camera_name(&device);
            if !Path::new(&device).exists() && !waited_for {
                bad(
                    "source.spec",
                    format!(
                        "expected an existing V4L2 device, found {device} (no such device{})",
                        if cfg.source.wait_for_camera {
                            "; lookout waits only for /dev/videoN and /dev/v4l/… names"
                        } else {
                            "; source.wait_for_camera = false"
                        }
                    ),
                );
            }
        }
        Ok(other) => {
            if other.path().is_some_and(|p| !p.exists()) {
                bad(
                    "source.spec",
                    format!("expected an existing file or directory, found {spec} (not found)"),
                );
            }
        }
        Err(_) if !Path::new(spec).exists() => bad(
            "source.spec",
            format!("expected an existing file or directory, found {spec} (not found)"),
        ),
        Err(_) => bad(
            "source.spec",
            format!("expected {SPEC_KINDS}, found {spec} (a kind of file lookout does not read)"),
        ),
    }
}

/// `model.file`, when set, is a readable NanoDet ONNX model.
fn check_model(cfg: &Config, p: &mut Vec<Problem>) {
    if cfg.model.file.is_empty() {
        return;
    }
    // Read (a bounded, regular file: never a FIFO that blocks or /dev/zero that fills the
    // memory), parse and type it (no optimization): a file that is not a NanoDet ONNX
    // model, one that declares an input too large, or one that rejects input_size is a
    // configuration error too.
    match crate::detect::Detector::check(&cfg.detector()) {
        Ok(_) => {}
        Err(crate::detect::DetectError::Read { error, .. }) => p.push(Problem::new(
            "model.file",
            format!("expected a readable ONNX file: {error}"),
        )),
        Err(e) => p.push(Problem::new(
            "model.file",
            format!("expected a NanoDet ONNX model: {e}"),
        )),
    }
}

/// The configured cores are ones this process may run on (all of them, or what
/// CPUAffinity=/taskset left).
fn check_cores(cfg: &Config, p: &mut Vec<Problem>) {
    let allowed = crate::sysinfo::allowed_cores();
    let core_ok = |c: usize| allowed.is_empty() || allowed.contains(&c);
    let cores_desc = describe_cores(&allowed);
    let pl = &cfg.pipeline;
    for (k, v) in [
        ("pipeline.capture_core", pl.capture_core),
        ("pipeline.track_core", pl.track_core),
    ] {
        if let Some(v) = v.filter(|v| !core_ok(*v)) {
            p.push(Problem::new(
                k,
                format!("expected one of the cores this process may use ({cores_desc}), found {v}"),
            ));
        }
    }
    if let Some(c) = pl.detect_cores.iter().find(|c| !core_ok(**c)) {
        p.push(Problem::new(
            "pipeline.detect_cores",
            format!("expected cores this process may use ({cores_desc}), found {c}"),
        ));
    }
}

/// `output.tracks_file`, when set, can be written: a name the system can hold, not the model
/// or the recording, in an existing directory.
fn check_tracks_file(cfg: &Config, p: &mut Vec<Problem>) {
    if cfg.output.tracks_file.is_empty() {
        return;
    }
    let tracks = Path::new(&cfg.output.tracks_file);
    let keep = [
        (Path::new(&cfg.model.file), "model file"),
        (Path::new(&cfg.source.spec), "recording"),
    ];
    if let Some(why) = crate::output::tracks_path_problem(tracks, &keep) {
        p.push(Problem::new("output.tracks_file", why));
    }
    let parent = tracks.parent().filter(|p| !p.as_os_str().is_empty());
    if parent.is_some_and(|p| !p.is_dir()) {
        p.push(Problem::new(
            "output.tracks_file",
            format!(
                "expected a path in an existing directory, found {}",
                cfg.output.tracks_file
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_size_auto_follows_the_source_s_frame_shape() {
        let cfg = |text: &str| Config::parse(text, "t.toml").expect("valid");
        let wide = cfg("[source]\nwidth = 1280\nheight = 720\n[model]\ninput_size = \"auto\"\n");
        let d = wide.detector();
        assert_eq!(d.input_size, Some((416, 256)));
        assert!(d.input_size_why.is_some_and(|w| w.contains("1280x720")));
        // The default source (640x480): 4:3.
        let vga = cfg("[model]\ninput_size = \"auto\"\n");
        assert_eq!(vga.detector().input_size, Some((416, 320)));
        // Not asked: the file's own size, nothing to explain.
        let plain = cfg("");
        assert_eq!(plain.detector().input_size, None);
        assert_eq!(plain.detector().input_size_why, None);
        // Written back as "auto" (what check-config prints parses again the same).
        assert_eq!(cfg(&wide.to_toml()).model.input_size, InputSize::Auto);
    }

    #[test]
    fn defaults_are_valid_and_run_the_demo() {
        let c = Config::parse("", "t.toml").unwrap();
        assert_eq!(c.source.spec, "demo");
        assert_eq!(c, Config::default());
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let e = Config::parse("[model]\nthreshhold = 0.5\n", "t.toml").unwrap_err();
        let e = &e.0[0];
        assert_eq!((e.line, e.key.as_str()), (2, "model.threshhold"));
        assert!(e.message.contains("unknown field"), "{}", e.message);
    }

    #[test]
    fn range_error_names_key_line_and_values() {
        let e = Config::parse("[pipeline]\n\ndetect_every = 0\n", "t.toml").unwrap_err();
        let e = &e.0[0];
        assert_eq!(
            (e.key.as_str(), e.line, e.column),
            ("pipeline.detect_every", 3, 1)
        );
        assert!(e.message.contains("found 0"));
    }

    #[test]
    fn wrong_type_names_the_key() {
        let e = Config::parse("[model]\nthreads = \"two\"\n", "t.toml").unwrap_err();
        assert_eq!(e.0[0].key, "model.threads");
        assert_eq!(e.0[0].line, 2);
    }

    #[test]
    fn array_element_errors_point_at_the_element() {
        let e = Config::parse(
            "[tracker]\nclasses = [\n  \"person\",\n  \"unicorn\",\n]\n",
            "t.toml",
        )
        .unwrap_err();
        let e = &e.0[0];
        assert_eq!(
            (e.key.as_str(), e.line, e.column),
            ("tracker.classes[1]", 4, 3)
        );
    }

    #[test]
    fn value_checks_need_no_machine_and_environment_checks_ask_it() {
        let mut c = Config::default();
        c.source.spec = "/dev/video-none".into();
        c.model.file = "/nonexistent/model.onnx".into();
        c.pipeline.capture_core = Some(100_000);
        assert_eq!(c.check_values(), Vec::new());
        // A missing camera is waited for (source.wait_for_camera, default true)…
        let keys: Vec<String> = check_environment(&c).into_iter().map(|p| p.key).collect();
        assert_eq!(
            keys,
            ["model.file", "pipeline.capture_core"].map(String::from)
        );
        // …unless waiting is turned off, or the name can never be a camera.
        for (spec, wait) in [("/dev/video-none", false), ("/dev/not-a-camera", true)] {
            c.source.spec = spec.into();
            c.source.wait_for_camera = wait;
            let keys: Vec<String> = check_environment(&c).into_iter().map(|p| p.key).collect();
            assert_eq!(
                keys,
                ["source.spec", "model.file", "pipeline.capture_core"].map(String::from),
                "{spec} wait_for_camera = {wait}"
            );
        }
        c.source.format = "H264".into();
        c.source.spec = "clip.avi".into();
        let values = c.check_values();
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].key, "source.format");
        assert!(
            values[0].message.contains("\"H264\""),
            "{}",
            values[0].message
        );
        c.source.format = " mjpeg ".into();
        assert_eq!(c.check_values(), Vec::new());
        assert_eq!(c.pixel_format(), Some(crate::frame::PixelFormat::Mjpeg));
    }

    #[test]
    fn syntax_errors_quote_the_line() {
        let e = Config::parse("[model]\nthreshold = 0.5\nthreshold = 0.6\n", "t.toml").unwrap_err();
        let e = &e.0[0];
        assert_eq!((e.key.as_str(), e.line), ("(syntax)", 3));
        assert!(e.message.contains("`threshold = 0.6`"), "{}", e.message);
    }
}
