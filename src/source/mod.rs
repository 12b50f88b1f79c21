//! Where frames come from: a V4L2 camera, a recording, or the demo clip built into the binary.
//!
//! Every backend implements [`FrameSource`]; [`open`] turns a user's source spec into one.
//! Sources never convert pixels (see `preprocess`): a frame carries the camera's bytes.
//!
//! Spec grammar (one string, as in the config file and on the command line), parsed in one
//! place, [`Spec::parse`], which configuration validation, [`open`] and `bench` all use:
//!
//! | spec | backend |
//! |---|---|
//! | `/dev/videoN` (any path under `/dev/`) | [`v4l2::V4l2Source`], mmap streaming, newest-frame |
//! | `FILE.mjpeg`, `FILE.mjpg` | [`replay::ReplaySource`], concatenated JPEGs |
//! | `FILE.y4m` | [`replay::ReplaySource`], YUV4MPEG2 4:2:0 / 4:2:2 / mono |
//! | `DIR/` (or any directory) | [`replay::ReplaySource`], JPEG/PNG images sorted by name |
//! | `demo` | the bundled clip (`tests/data/demo/`), 640×480 MJPEG at 10 fps |
//!
//! Anything else (`clip.avi`, an empty string) is [`SourceError::UnknownSpec`].
//!
//! Errors are transient or fatal ([`SourceError::is_transient`]): a camera that times out or is
//! unplugged keeps its source object alive and later calls to [`FrameSource::next`] recover.

pub mod newest;
pub mod replay;
pub mod v4l2;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::frame::{Frame, PixelFormat};

pub use v4l2::{list_devices, DeviceInfo};

/// The bundled demo clip: 200 frames of OpenCV's `vtest.avi`, 640×480 JPEGs, 10 fps
/// (provenance and licence in `tests/data/demo/README.md`).
pub static DEMO_CLIP: &[u8] = include_bytes!("../../tests/data/demo/vtest-640x480-10fps.mjpeg");
/// Frame rate of [`DEMO_CLIP`].
pub const DEMO_FPS: f64 = 10.0;
/// The spec that selects [`DEMO_CLIP`].
pub const DEMO_SPEC: &str = "demo";

/// A producer of frames. Plain synchronous code: the pipeline runs it on its own thread.
pub trait FrameSource {
    /// The next frame; `Ok(None)` when a finite source (a file that does not loop) has ended.
    ///
    /// A camera returns the newest frame it has, dropping older ready ones (counted in
    /// [`SourceStats::dropped_stale`]). Transient errors ([`SourceError::is_transient`]) leave
    /// the source usable: call `next` again.
    fn next(&mut self) -> Result<Option<Frame>, SourceError>;

    /// Counters since the source was opened.
    fn stats(&self) -> SourceStats;

    /// Nominal frame rate: the negotiated camera rate, or the rate a file is paced at.
    fn fps(&self) -> Option<f64>;

    /// The interrupt that ends this source's waits (pacing, reopen back-off, polls, a
    /// stalled FIFO writer) early: the pipeline lowers it when a run starts and raises it when
    /// the run ends. `None` for sources that never wait long.
    fn interrupt(&self) -> Option<crate::interrupt::Interrupt> {
        None
    }

    /// One line for logs: what this source is (device and negotiated mode, or file).
    fn describe(&self) -> String;

    /// True when frames come as fast as they are asked for (a recording played unpaced):
    /// nothing else limits the rate, so a consumer should take them one at a time. Cameras
    /// and paced replays deliver at their own rate.
    fn unpaced(&self) -> bool {
        false
    }
}

/// Counters a source keeps; all monotonically increasing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SourceStats {
    /// Frames handed out by [`FrameSource::next`].
    pub delivered: u64,
    /// Frames that were ready but replaced by a newer one before anyone asked (camera only).
    pub dropped_stale: u64,
    /// Frames skipped because they were damaged (bad JPEG, driver error flag, short buffer).
    pub corrupt: u64,
    /// Times a lost camera was opened again.
    pub reopens: u64,
    /// Times `next` waited the whole poll timeout without a frame.
    pub timeouts: u64,
}

/// How a recording is played back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pacing {
    /// Each frame is delivered at its due time at the file's frame rate, like a camera.
    #[default]
    RealTime,
    /// Frames are delivered as fast as they are asked for (benchmarks, tests).
    AsFastAsPossible,
}

/// Options for [`open`]. Camera fields are ignored by recordings and vice versa.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceOptions {
    /// Requested width in pixels (camera); `None` keeps the device's current width.
    pub width: Option<u32>,
    /// Requested height in pixels (camera); `None` keeps the device's current height.
    pub height: Option<u32>,
    /// Requested pixel format (camera); `None` picks the first of YUYV, NV12, YU12, UYVY,
    /// MJPG, GREY, RGB3 the device offers.
    pub format: Option<PixelFormat>,
    /// Requested frame rate (camera); `None` keeps the device's current rate.
    pub fps: Option<u32>,
    /// Playback pacing of recordings.
    pub pace: Pacing,
    /// Start a recording again when it ends.
    pub looped: bool,
    /// Frame rate for recordings that carry none (MJPEG, image directories); Y4M files use
    /// their own `F` header unless this is set. Default 10 fps.
    pub replay_fps: Option<f64>,
    /// Number of V4L2 buffers (2–3 keeps the newest frame fresh; more only adds latency).
    pub buffers: u32,
    /// How long `next` waits for a camera before returning [`SourceError::Timeout`].
    pub timeout: Duration,
    /// A camera device (`/dev/video*`, `/dev/v4l/…`) that is not there yet is waited for
    /// (opened with back-off on each `next`, [`SourceError::WaitingForDevice`] meanwhile)
    /// instead of being an error: the daemon's `[source] wait_for_camera`. Tools (bench,
    /// capture) leave it off and fail at once.
    pub wait_for_device: bool,
    /// Ends the source's waits early (see [`FrameSource::interrupt`]).
    pub interrupt: crate::interrupt::Interrupt,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            width: None,
            height: None,
            format: None,
            fps: None,
            pace: Pacing::RealTime,
            looped: false,
            replay_fps: None,
            buffers: 3,
            timeout: Duration::from_secs(2),
            wait_for_device: false,
            interrupt: crate::interrupt::Interrupt::new(),
        }
    }
}

/// Frame rate used for recordings that carry none.
pub const DEFAULT_REPLAY_FPS: f64 = 10.0;

/// Everything that can go wrong opening or reading a source. Each message names the device or
/// file and says what was expected.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The spec matches no backend.
    #[error("unknown source {spec:?}: expected /dev/videoN, FILE.mjpeg, FILE.mjpg, FILE.y4m, a directory of JPEG/PNG images, or `demo`")]
    UnknownSpec {
        /// The spec as given.
        spec: String,
    },
    /// A file or directory could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file's content is not what its extension promises.
    #[error("{}: {message}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, and what was expected.
        message: String,
    },
    /// A recording holds no usable frame at all.
    #[error("{}: no usable frames ({message})", path.display())]
    Empty {
        /// The file or directory.
        path: PathBuf,
        /// What was found instead.
        message: String,
    },
    /// The camera device node cannot be opened.
    #[error("cannot open camera {device}: {source} (`lookout devices` lists the cameras present)")]
    NoDevice {
        /// Device path.
        device: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The device exists but is not a streaming video capture device.
    #[error("{device} is not a streaming V4L2 capture device (driver {driver}, card {card:?})")]
    NotCapture {
        /// Device path.
        device: String,
        /// Driver name.
        driver: String,
        /// Card name.
        card: String,
    },
    /// The camera cannot do what was asked; the message lists what it can.
    #[error("{device}: {message}")]
    Negotiate {
        /// Device path.
        device: String,
        /// What was asked and what the device offers.
        message: String,
    },
    /// A V4L2 call failed for a reason other than the camera going away.
    #[error("{device}: {op} failed: {source}")]
    Device {
        /// Device path.
        device: String,
        /// The operation (ioctl name).
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// No frame arrived within the poll timeout (transient).
    #[error("{device}: no frame within {timeout:?} (camera silent or stalled)")]
    Timeout {
        /// Device path.
        device: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The camera went away (unplugged, ENODEV/EIO); the source will try to reopen it on the
    /// following calls (transient).
    #[error("{device}: camera lost ({source}); will reopen it")]
    Disconnected {
        /// Device path.
        device: String,
        /// The OS error that revealed it.
        source: std::io::Error,
    },
    /// A lost camera is still missing; the next call retries after `retry_in` (transient).
    #[error("{device}: camera still missing after {attempts} reopen attempts ({reason}); next try in {retry_in:?}")]
    Reconnecting {
        /// Device path.
        device: String,
        /// Reopen attempts so far.
        attempts: u32,
        /// Why the last attempt failed.
        reason: String,
        /// Back-off before the next attempt.
        retry_in: Duration,
    },
    /// The camera was not there when the daemon started and has not appeared yet; the next
    /// call tries again after `retry_in` (transient: a USB camera that enumerates late).
    #[error("{device}: waiting for the camera to appear ({attempts} attempts so far: {reason}); next try in {retry_in:?}")]
    WaitingForDevice {
        /// Device path.
        device: String,
        /// Attempts to open it so far.
        attempts: u32,
        /// Why the last attempt failed.
        reason: String,
        /// Back-off before the next attempt.
        retry_in: Duration,
    },
}

impl SourceError {
    /// True for a source that can never work as configured, whatever is retried: a spec no
    /// backend reads, a device that is not a capture device, a recording that cannot be
    /// read, is not a recording (a directory or a device named `x.mjpeg`, a Y4M colour space
    /// lookout does not read) or holds no usable frame (a 0-byte file, an empty directory).
    /// `lookout run` exits 78 for these (no restart loop), as for a missing file.
    pub fn is_configuration_problem(&self) -> bool {
        matches!(
            self,
            SourceError::UnknownSpec { .. }
                | SourceError::NotCapture { .. }
                | SourceError::File { .. }
                | SourceError::BadFile { .. }
                | SourceError::Empty { .. }
        )
    }

    /// True for errors after which calling [`FrameSource::next`] again makes sense.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SourceError::Timeout { .. }
                | SourceError::Disconnected { .. }
                | SourceError::Reconnecting { .. }
                | SourceError::WaitingForDevice { .. }
        )
    }
}

/// Whether `device` is a name a camera can appear under later (`/dev/videoN`, or a udev
/// link under `/dev/v4l/`): the names the daemon waits for when they are missing. Any other
/// missing path under `/dev/` can never become a camera.
pub fn is_camera_name(device: &str) -> bool {
    device.starts_with("/dev/video") || device.starts_with("/dev/v4l/")
}

/// What a source spec names: the one parser of the grammar in the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// A V4L2 device: any path under `/dev/`.
    Camera(String),
    /// Concatenated JPEGs: `FILE.mjpeg` / `FILE.mjpg` (any case).
    Mjpeg(PathBuf),
    /// YUV4MPEG2: `FILE.y4m` (any case).
    Y4m(PathBuf),
    /// A directory of JPEG/PNG images: a path ending in `/`, or an existing directory.
    Dir(PathBuf),
    /// The clip built into the binary: `demo`.
    Demo,
}

impl Spec {
    /// Classifies a spec (surrounding blanks ignored). Decided by its text, except that a
    /// path without a trailing `/` is asked whether it is an existing directory (one `stat`);
    /// whether files exist is not checked here (that is [`open`]'s and the configuration's
    /// environment check's business).
    ///
    /// # Errors
    /// [`SourceError::UnknownSpec`] for an empty spec and for a file of a kind no backend
    /// reads (e.g. `clip.avi`).
    pub fn parse(spec: &str) -> Result<Spec, SourceError> {
        let s = spec.trim();
        let unknown = || SourceError::UnknownSpec {
            spec: spec.to_string(),
        };
        if s == DEMO_SPEC {
            return Ok(Spec::Demo);
        }
        if s.is_empty() {
            return Err(unknown());
        }
        if s.starts_with("/dev/") {
            return Ok(Spec::Camera(s.to_string()));
        }
        let path = Path::new(s);
        if s.ends_with('/') || path.is_dir() {
            return Ok(Spec::Dir(path.to_path_buf()));
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("mjpeg") | Some("mjpg") => Ok(Spec::Mjpeg(path.to_path_buf())),
            Some("y4m") => Ok(Spec::Y4m(path.to_path_buf())),
            _ => Err(unknown()),
        }
    }

    /// True for a V4L2 camera (frames come at the device's pace; it never ends).
    pub fn is_camera(&self) -> bool {
        matches!(self, Spec::Camera(_))
    }

    /// The file, directory or device the spec names (`None` for the built-in demo clip).
    pub fn path(&self) -> Option<&Path> {
        match self {
            Spec::Camera(d) => Some(Path::new(d)),
            Spec::Mjpeg(p) | Spec::Y4m(p) | Spec::Dir(p) => Some(p),
            Spec::Demo => None,
        }
    }
}

/// Opens the source a spec names (see the module documentation for the grammar).
///
/// # Errors
/// One clear [`SourceError`] per bad spec: unknown extension, missing or unreadable file,
/// missing device, a device that cannot deliver the requested mode.
pub fn open(spec: &str, opts: &SourceOptions) -> Result<Box<dyn FrameSource + Send>, SourceError> {
    open_spec(&Spec::parse(spec)?, opts)
}

/// Opens an already parsed spec.
///
/// # Errors
/// As [`open`], except for the spec's grammar.
pub fn open_spec(
    spec: &Spec,
    opts: &SourceOptions,
) -> Result<Box<dyn FrameSource + Send>, SourceError> {
    Ok(match spec {
        Spec::Demo => Box::new(replay::ReplaySource::demo(opts)?),
        Spec::Camera(device) if opts.wait_for_device => {
            Box::new(v4l2::V4l2Source::open_or_wait(device, opts)?)
        }
        Spec::Camera(device) => Box::new(v4l2::V4l2Source::open(device, opts)?),
        Spec::Dir(path) => Box::new(replay::ReplaySource::image_dir(path, opts)?),
        Spec::Mjpeg(path) => Box::new(replay::ReplaySource::mjpeg_file(path, opts)?),
        Spec::Y4m(path) => Box::new(replay::ReplaySource::y4m_file(path, opts)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_extension_is_a_clear_error() {
        let err = open("clip.avi", &SourceOptions::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("clip.avi") && err.contains("FILE.y4m"),
            "{err}"
        );
    }

    #[test]
    fn specs_parse_to_one_kind_each() {
        let p = |s: &str| Spec::parse(s).map_err(|e| e.to_string());
        assert_eq!(p("demo"), Ok(Spec::Demo));
        assert_eq!(p(" /dev/video0 "), Ok(Spec::Camera("/dev/video0".into())));
        assert_eq!(p("a/clip.MJPG"), Ok(Spec::Mjpeg("a/clip.MJPG".into())));
        assert_eq!(p("clip.mjpeg"), Ok(Spec::Mjpeg("clip.mjpeg".into())));
        assert_eq!(p("x.y4m"), Ok(Spec::Y4m("x.y4m".into())));
        assert_eq!(p("frames/"), Ok(Spec::Dir("frames/".into())));
        let dir = std::env::temp_dir();
        let dir_s = dir.to_string_lossy().trim_end_matches('/').to_string();
        assert_eq!(p(&dir_s), Ok(Spec::Dir(PathBuf::from(&dir_s))));
        for bad in ["", "  ", "clip.avi", "frames"] {
            assert!(p(bad).is_err(), "{bad:?} parsed");
        }
        assert!(Spec::Camera("/dev/video1".into()).is_camera());
        assert!(!Spec::Demo.is_camera());
    }

    #[test]
    fn transient_errors_are_marked() {
        let t = SourceError::Timeout {
            device: "/dev/video0".into(),
            timeout: Duration::from_secs(1),
        };
        assert!(t.is_transient());
        let u = SourceError::UnknownSpec { spec: "x".into() };
        assert!(!u.is_transient());
    }
}
