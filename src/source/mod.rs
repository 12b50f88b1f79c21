//! Where frames come from: a V4L2 camera, a recording, a command's output, or the demo clip
//! built into the binary.
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
//! | `exec:COMMAND ARGS…` | [`exec::ExecSource`], MJPEG or YUV4MPEG2 from the command's stdout |
//! | `demo` | the bundled clip (`tests/data/demo/`), 640×480 MJPEG at 10 fps |
//!
//! Anything else (`clip.avi`, an empty string) is [`SourceError::UnknownSpec`].
//!
//! Errors are transient or fatal ([`SourceError::is_transient`]): a camera that times out or is
//! unplugged keeps its source object alive and later calls to [`FrameSource::next`] recover.

pub mod exec;
mod interface;
pub mod newest;
pub mod replay;
pub mod v4l2;

use std::path::{Path, PathBuf};

pub use interface::{
    is_camera_name, FrameSource, Pacing, SourceError, SourceOptions, SourceStats,
    DEFAULT_REPLAY_FPS,
};
pub use v4l2::{list_devices, DeviceInfo};

pub use replay::{DEMO_CLIP, DEMO_FPS};
/// The spec that selects [`DEMO_CLIP`].
pub const DEMO_SPEC: &str = "demo";

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
    /// A command whose stdout is MJPEG or YUV4MPEG2: `exec:COMMAND ARGS…` (the text after
    /// the prefix, split into words when the source opens).
    Exec(String),
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
        if let Some(command) = s.strip_prefix(exec::PREFIX) {
            return Ok(Spec::Exec(command.trim().to_string()));
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

    /// True for a live source: a camera, or a command (restarted when it ends; it cannot be
    /// rewound or replayed).
    pub fn is_live(&self) -> bool {
        matches!(self, Spec::Camera(_) | Spec::Exec(_))
    }

    /// The file, directory or device the spec names (`None` for the built-in demo clip).
    pub fn path(&self) -> Option<&Path> {
        match self {
            Spec::Camera(d) => Some(Path::new(d)),
            Spec::Mjpeg(p) | Spec::Y4m(p) | Spec::Dir(p) => Some(p),
            Spec::Demo | Spec::Exec(_) => None,
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
        Spec::Exec(command) => Box::new(exec::ExecSource::open(
            &format!("{}{command}", exec::PREFIX),
            opts,
        )?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        assert_eq!(
            p(" exec: rpicam-vid -o - "),
            Ok(Spec::Exec("rpicam-vid -o -".into()))
        );
        assert!(Spec::Exec("x".into()).is_live() && !Spec::Exec("x".into()).is_camera());
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
