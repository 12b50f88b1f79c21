//! Recordings as frame sources: MJPEG streams, Y4M files, directories of images, and the demo
//! clip built into the binary. Played back like a camera (each frame at its due time) or as
//! fast as asked, optionally looped.
//!
//! **Corrupt frames.** MJPEG data is split on JPEG markers by a small structural scanner that
//! walks marker segments and entropy-coded data to the EOI marker; a frame cut short (the
//! stream ends, or a new SOI appears inside it), junk where a marker should be, or a header
//! zune-jpeg cannot parse is skipped and counted in [`SourceStats::corrupt`] — never fatal.
//! Frames are *not* fully decoded here (that would double the decode cost; preprocessing
//! decodes once): bit errors inside the entropy data of a structurally sound JPEG surface as
//! a decode error in preprocessing, which the caller counts.
//!
//! **Bounded memory.** Recordings are streamed, never read whole: an MJPEG file or FIFO holds
//! one frame in memory (at most [`MAX_JPEG_FRAME`], 16 MiB; a longer one is skipped as
//! corrupt), a Y4M file one frame (its size follows from the header's bounded sides), and a
//! frame from a FIFO is delivered as soon as it has arrived. Image files are read whole, each
//! at most [`files::IMAGE_LIMIT`]; a FIFO or device among them is skipped with a warning. A
//! recording path naming a directory or a device (`/dev/zero`) is refused at open.
//!
//! **Frame rates.** A Y4M file's own `F` rate is played within 1..=1000 fps
//! (`MIN_Y4M_FPS`, `MAX_Y4M_FPS` in `y4m.rs`): a rate outside (`F1:10`, a time-lapse or a
//! corrupt header; `F1000000000:1`) is clamped with a warning naming the file.
//!
//! **Empty and absurd recordings.** A recording that holds no usable frame is an error, not
//! an empty run: at open when it can be told cheaply (an MJPEG stream without one complete
//! JPEG, a Y4M file shorter than the one frame its header claims), else on the first
//! [`FrameSource::next`] that finds the source ended without having delivered anything. A
//! frame side over [`MAX_FRAME_SIDE`] is refused from the header, before anything is
//! allocated for it.
//!
//! [`MAX_FRAME_SIDE`]: crate::frame::MAX_FRAME_SIDE

use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod dir;
mod mjpeg;
mod pipe;
mod raw;

/// The bundled demo clip: 200 frames of OpenCV's `vtest.avi`, 640×480 JPEGs, 10 fps
/// (provenance and licence in `tests/data/demo/README.md`).
pub static DEMO_CLIP: &[u8] = include_bytes!("../../../tests/data/demo/vtest-640x480-10fps.mjpeg");
/// Frame rate of [`DEMO_CLIP`].
pub const DEMO_FPS: f64 = 10.0;
pub(crate) use mjpeg::is_complete_jpeg;
pub use mjpeg::MAX_JPEG_FRAME;
mod y4m;

pub use dir::read_rgb_image;
use dir::ImageDir;
use mjpeg::MjpegStream;
use raw::{Raw, ReadSeek};
use y4m::Y4mStream;

use super::interface::{
    FrameSource, Pacing, SourceError, SourceOptions, SourceStats, DEFAULT_REPLAY_FPS,
};
use crate::files;
use crate::frame::{monotonic_now, Frame};
use crate::interrupt::Interrupt;

/// A recording played back as a [`FrameSource`].
pub struct ReplaySource {
    name: String,
    path: PathBuf,
    kind: Kind,
    fps: f64,
    pacer: Pacer,
    looped: bool,
    delivered_since_rewind: u64,
    seq: u64,
    stats: SourceStats,
}

enum Kind {
    Mjpeg(MjpegStream),
    Y4m(Y4mStream),
    Dir(ImageDir),
}

impl ReplaySource {
    /// The demo clip built into the binary (640×480 MJPEG, 10 fps, 200 frames).
    ///
    /// # Errors
    /// Only if the embedded clip were broken ([`SourceError::Empty`]).
    pub fn demo(opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let fps = opts.replay_fps.unwrap_or(DEMO_FPS);
        let stream = MjpegStream::open(Box::new(Cursor::new(DEMO_CLIP)), PathBuf::from("demo"))?;
        Ok(Self::with(
            "demo clip (640x480 MJPEG)".into(),
            PathBuf::from("demo"),
            Kind::Mjpeg(stream),
            fps,
            opts,
        ))
    }

    /// A file (or FIFO) of concatenated JPEGs, streamed frame by frame and paced at
    /// `opts.replay_fps` (default 10 fps). Opening reads up to the first usable frame (for a
    /// FIFO, waits for it).
    ///
    /// # Errors
    /// [`SourceError::File`] if it cannot be read, [`SourceError::BadFile`] if it is a
    /// directory or a device, [`SourceError::Empty`] if it holds no complete JPEG with a
    /// readable header of at most [`MAX_FRAME_SIDE`] per side.
    ///
    /// [`MAX_FRAME_SIDE`]: crate::frame::MAX_FRAME_SIDE
    pub fn mjpeg_file(path: &Path, opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let file = open_recording(path, "MJPEG recording")?;
        Self::mjpeg_from(path, readable(file, opts), opts)
    }

    /// Concatenated JPEGs already in memory, played like [`ReplaySource::mjpeg_file`]; `path`
    /// only names the stream in messages. The entry point of the `mjpeg` fuzz target.
    ///
    /// # Errors
    /// As [`ReplaySource::mjpeg_file`], less the read.
    pub fn mjpeg_bytes(
        path: &Path,
        data: Vec<u8>,
        opts: &SourceOptions,
    ) -> Result<ReplaySource, SourceError> {
        Self::mjpeg_from(path, Box::new(Cursor::new(data)), opts)
    }

    /// Concatenated JPEGs streamed from any reader, played like [`ReplaySource::mjpeg_file`]
    /// (looping seeks to its start); `path` only names the stream in messages. The entry
    /// point of the `mjpeg_stream` fuzz target, which feeds bytes in arbitrary pieces.
    ///
    /// # Errors
    /// As [`ReplaySource::mjpeg_file`], less the open.
    pub fn mjpeg_reader<R: std::io::Read + std::io::Seek + Send + 'static>(
        path: &Path,
        input: R,
        opts: &SourceOptions,
    ) -> Result<ReplaySource, SourceError> {
        Self::mjpeg_from(path, Box::new(input), opts)
    }

    fn mjpeg_from(
        path: &Path,
        input: Box<dyn ReadSeek>,
        opts: &SourceOptions,
    ) -> Result<ReplaySource, SourceError> {
        let stream = MjpegStream::open(input, path.to_path_buf())?;
        let fps = opts.replay_fps.unwrap_or(DEFAULT_REPLAY_FPS);
        Ok(Self::with(
            format!("MJPEG file {}", path.display()),
            path.to_path_buf(),
            Kind::Mjpeg(stream),
            fps,
            opts,
        ))
    }

    /// A YUV4MPEG2 file (`C420*` or no C tag → YU12, `C422` → 422P, `Cmono` → GREY), paced at
    /// its `F` rate unless `opts.replay_fps` overrides it.
    ///
    /// # Errors
    /// [`SourceError::File`] if it cannot be read, [`SourceError::BadFile`] for a header that
    /// is not Y4M, a colour space lookout does not read or a side over [`MAX_FRAME_SIDE`],
    /// [`SourceError::Empty`] for a file that ends before its first frame is complete.
    ///
    /// [`MAX_FRAME_SIDE`]: crate::frame::MAX_FRAME_SIDE
    pub fn y4m_file(path: &Path, opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let file = open_recording(path, "Y4M recording")?;
        let len = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        Self::y4m_from(path, readable(file, opts), len, opts)
    }

    /// A YUV4MPEG2 stream already in memory, played like [`ReplaySource::y4m_file`]; `path`
    /// only names the stream in messages. The entry point of the `y4m` fuzz target.
    ///
    /// # Errors
    /// As [`ReplaySource::y4m_file`], less the read.
    pub fn y4m_bytes(
        path: &Path,
        data: Vec<u8>,
        opts: &SourceOptions,
    ) -> Result<ReplaySource, SourceError> {
        let len = data.len() as u64;
        Self::y4m_from(path, Box::new(Cursor::new(data)), Some(len), opts)
    }

    /// A YUV4MPEG2 stream from any reader (a pipe: never rewound), played like
    /// [`ReplaySource::y4m_file`]; `path` only names the stream in messages.
    ///
    /// # Errors
    /// As [`ReplaySource::y4m_file`], less the open; a stream too short for one frame is
    /// found out by the first [`FrameSource::next`].
    pub fn y4m_reader<R: std::io::Read + std::io::Seek + Send + 'static>(
        path: &Path,
        input: R,
        opts: &SourceOptions,
    ) -> Result<ReplaySource, SourceError> {
        Self::y4m_from(path, Box::new(input), None, opts)
    }

    fn y4m_from(
        path: &Path,
        input: Box<dyn ReadSeek>,
        len: Option<u64>,
        opts: &SourceOptions,
    ) -> Result<ReplaySource, SourceError> {
        let stream = Y4mStream::open(path, input, len)?;
        let fps = opts.replay_fps.or(stream.fps).unwrap_or(DEFAULT_REPLAY_FPS);
        let desc = format!(
            "Y4M file {} ({} {}x{})",
            path.display(),
            stream.format,
            stream.width,
            stream.height
        );
        Ok(Self::with(
            desc,
            path.to_path_buf(),
            Kind::Y4m(stream),
            fps,
            opts,
        ))
    }

    /// The `.jpg`/`.jpeg`/`.png` files of a directory, sorted by name, paced at
    /// `opts.replay_fps` (default 10 fps). JPEGs are delivered as MJPEG frames, PNGs as RGB.
    ///
    /// # Errors
    /// [`SourceError::File`] if the directory cannot be listed, [`SourceError::Empty`] if it
    /// holds no image.
    pub fn image_dir(path: &Path, opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let dir = ImageDir::open(path)?;
        let fps = opts.replay_fps.unwrap_or(DEFAULT_REPLAY_FPS);
        let desc = format!("{} images in {}", dir.files.len(), path.display());
        Ok(Self::with(
            desc,
            path.to_path_buf(),
            Kind::Dir(dir),
            fps,
            opts,
        ))
    }

    fn with(
        name: String,
        path: PathBuf,
        kind: Kind,
        fps: f64,
        opts: &SourceOptions,
    ) -> ReplaySource {
        let fps = if fps.is_finite() && fps > 0.0 {
            fps
        } else {
            DEFAULT_REPLAY_FPS
        };
        ReplaySource {
            name,
            path,
            kind,
            fps,
            pacer: Pacer {
                interrupt: opts.interrupt.clone(),
                ..Pacer::new(match opts.pace {
                    Pacing::RealTime => Some(Duration::from_secs_f64(1.0 / fps)),
                    Pacing::AsFastAsPossible => None,
                })
            },
            looped: opts.looped,
            delivered_since_rewind: 0,
            seq: 0,
            stats: SourceStats::default(),
        }
    }

    fn read_raw(&mut self) -> Result<Option<Raw>, SourceError> {
        match &mut self.kind {
            Kind::Mjpeg(s) => s.next_frame(&mut self.stats),
            Kind::Y4m(s) => s.next_frame(&mut self.stats),
            Kind::Dir(d) => Ok(d.next_frame(&mut self.stats)),
        }
    }

    /// Why the last frame the backend skipped was skipped, if it skipped any.
    fn last_problem(&self) -> Option<&str> {
        match &self.kind {
            Kind::Mjpeg(s) => s.last_problem.as_deref(),
            Kind::Y4m(s) => s.last_problem.as_deref(),
            Kind::Dir(d) => d.last_problem.as_deref(),
        }
    }

    fn rewind(&mut self) -> Result<(), SourceError> {
        match &mut self.kind {
            Kind::Mjpeg(s) => s.rewind(),
            Kind::Y4m(s) => s.rewind(),
            Kind::Dir(d) => {
                d.next = 0;
                Ok(())
            }
        }
    }
}

/// A recording's reader: a FIFO through [`pipe::Pipe`] (its waits for the writer end with
/// the run), a regular file as it is.
fn readable(file: File, opts: &SourceOptions) -> Box<dyn ReadSeek> {
    use std::os::unix::fs::FileTypeExt;
    match file.metadata() {
        Ok(m) if m.file_type().is_fifo() => Box::new(pipe::Pipe::new(file, opts.interrupt.clone())),
        _ => Box::new(file),
    }
}

/// Opens a recording to stream it: a regular file or a FIFO ([`files::open_stream`]).
fn open_recording(path: &Path, what: &'static str) -> Result<File, SourceError> {
    files::open_stream(path, what).map_err(|e| match e {
        files::FileError::Io { kind, reason, .. } => SourceError::File {
            path: path.to_path_buf(),
            source: std::io::Error::new(kind, reason),
        },
        other => SourceError::BadFile {
            path: path.to_path_buf(),
            message: other.to_string(),
        },
    })
}

impl FrameSource for ReplaySource {
    fn next(&mut self) -> Result<Option<Frame>, SourceError> {
        let raw = match self.read_raw() {
            Ok(raw) => raw,
            // A FIFO's writer stalled and the run is ending: nothing is lost (the stream keeps
            // what it has), the next run reads on.
            Err(SourceError::File { source, .. })
                if source.kind() == std::io::ErrorKind::TimedOut
                    && self.pacer.interrupt.is_raised() =>
            {
                return Err(SourceError::Timeout {
                    device: self.path.display().to_string(),
                    timeout: Duration::ZERO,
                })
            }
            Err(e) => return Err(e),
        };
        let raw = match raw {
            Some(r) => r,
            // Loop only if the last pass produced something, so an all-corrupt file ends.
            // Ended without a single frame: that is a broken recording, not an empty run.
            None if self.stats.delivered == 0 => {
                return Err(SourceError::Empty {
                    path: self.path.clone(),
                    message: format!(
                        "the recording ended before its first complete frame ({} skipped{})",
                        self.stats.corrupt,
                        self.last_problem()
                            .map_or(String::new(), |p| format!("; last: {p}"))
                    ),
                })
            }
            None if self.looped && self.delivered_since_rewind > 0 => {
                self.rewind()?;
                self.delivered_since_rewind = 0;
                match self.read_raw()? {
                    Some(r) => r,
                    None => return Ok(None),
                }
            }
            None => return Ok(None),
        };
        self.pacer.wait();
        let frame = Frame {
            seq: self.seq,
            captured_at: monotonic_now(),
            width: raw.width,
            height: raw.height,
            format: raw.format,
            data: raw.data,
        };
        self.seq += 1;
        self.delivered_since_rewind += 1;
        self.stats.delivered += 1;
        Ok(Some(frame))
    }

    fn stats(&self) -> SourceStats {
        self.stats
    }

    fn fps(&self) -> Option<f64> {
        Some(self.fps)
    }

    fn unpaced(&self) -> bool {
        self.pacer.interval.is_none()
    }

    fn interrupt(&self) -> Option<Interrupt> {
        Some(self.pacer.interrupt.clone())
    }

    fn describe(&self) -> String {
        format!(
            "{} at {:.2} fps{}{}",
            self.name,
            self.fps,
            if self.pacer.interval.is_none() {
                " (unpaced)"
            } else {
                ""
            },
            if self.looped { ", looped" } else { "" }
        )
    }
}

/// Sleeps until each frame's due time, like a camera producing at a fixed rate. A consumer
/// that falls more than one interval behind does not get a burst of catch-up frames: the
/// schedule restarts from now.
/// Its sleep ends early when the run's interrupt is raised (a stop never waits a whole
/// frame interval, however long a file says it is).
struct Pacer {
    interval: Option<Duration>,
    next_due: Option<Instant>,
    interrupt: Interrupt,
}

impl Pacer {
    fn new(interval: Option<Duration>) -> Pacer {
        Pacer {
            interval,
            next_due: None,
            interrupt: Interrupt::new(),
        }
    }

    fn wait(&mut self) {
        let Some(iv) = self.interval else { return };
        let now = Instant::now();
        self.next_due = Some(match self.next_due {
            None => now + iv,
            Some(due) if due > now => {
                self.interrupt.sleep_until(due);
                due + iv
            }
            Some(due) if now - due > iv => now + iv,
            Some(due) => due + iv,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_without_interval_never_sleeps() {
        let mut p = Pacer::new(None);
        p.wait();
        assert!(p.next_due.is_none());
    }
}
