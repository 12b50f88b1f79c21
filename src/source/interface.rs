//! What every source offers and reports: the [`FrameSource`] trait, its options, counters
//! and errors. A leaf of `source/`: the backends (`replay/`, `v4l2/`) and the pipeline import
//! these, and this file imports nothing from `source/`.

use std::path::PathBuf;
use std::time::Duration;

use crate::frame::{Frame, PixelFormat};

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

/// Options for [`open`](super::open). Camera fields are ignored by recordings and vice versa.
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
    #[error("unknown source {spec:?}: expected /dev/videoN, FILE.mjpeg, FILE.mjpg, FILE.y4m, a directory of JPEG/PNG images, `exec:COMMAND ARGS…` or `demo`")]
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
    /// A command source (`exec:…`) that cannot run as written: its command line does not
    /// split into words, or its program is missing or not executable.
    #[error("{spec}: {message}")]
    Command {
        /// The spec as given.
        spec: String,
        /// What is wrong, and what was expected.
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
    /// lookout does not read) or holds no usable frame (a 0-byte file, an empty directory), a
    /// command (`exec:`) that cannot be started.
    /// `lookout run` exits 78 for these (no restart loop), as for a missing file.
    pub fn is_configuration_problem(&self) -> bool {
        matches!(
            self,
            SourceError::UnknownSpec { .. }
                | SourceError::NotCapture { .. }
                | SourceError::File { .. }
                | SourceError::BadFile { .. }
                | SourceError::Empty { .. }
                | SourceError::Command { .. }
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
