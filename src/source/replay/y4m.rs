//! YUV4MPEG2: a Y4M stream (file or bytes in memory) read frame by frame.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::raw::{Raw, ReadSeek};
use crate::frame::{PixelFormat, MAX_FRAME_SIDE};
use crate::source::interface::{SourceError, SourceStats};

/// A YUV4MPEG2 stream read frame by frame.
pub(super) struct Y4mStream {
    path: PathBuf,
    reader: BufReader<Box<dyn ReadSeek>>,
    data_start: u64,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) format: PixelFormat,
    pub(super) fps: Option<f64>,
    frame_len: usize,
    frame_no: u64,
    /// Why the last frame was not delivered (a truncated one).
    pub(super) last_problem: Option<String>,
}

/// What a Y4M header line says.
struct Header {
    width: u32,
    height: u32,
    format: PixelFormat,
    fps: Option<f64>,
}

impl Header {
    /// Parses the header line (without its newline); `Err` says what is wrong with it.
    fn parse(text: &str) -> Result<Header, String> {
        let mut tokens = text.split(' ');
        if tokens.next() != Some("YUV4MPEG2") {
            return Err("not a Y4M file: the first line does not start with `YUV4MPEG2`".into());
        }
        let (mut width, mut height, mut fps, mut colour) = (None, None, None, "420".to_string());
        for tok in tokens {
            // Tags are one ASCII letter; a token starting with anything else (bytes that are
            // not UTF-8 read as U+FFFD) is not one of ours and is ignored like unknown tags.
            let Some((tag, val)) = tok.get(..1).zip(tok.get(1..)) else {
                continue;
            };
            match tag {
                "W" => width = val.parse::<u32>().ok(),
                "H" => height = val.parse::<u32>().ok(),
                "F" => fps = parse_rate(val).or(fps),
                "C" => colour = val.to_string(),
                _ => {}
            }
        }
        let (Some(width), Some(height)) = (width, height) else {
            return Err(format!("Y4M header {text:?} lacks a valid W or H"));
        };
        if width == 0 || height == 0 {
            return Err(format!("Y4M header {text:?} has a zero size"));
        }
        if width > MAX_FRAME_SIDE || height > MAX_FRAME_SIDE {
            return Err(format!(
                "the Y4M header claims {width}x{height}, over the {MAX_FRAME_SIDE}-pixel limit per side (no camera or recording lookout reads is that large: a corrupt header?)"
            ));
        }
        let format = match colour.as_str() {
            c if c.starts_with("420") => PixelFormat::Yu12,
            "422" => PixelFormat::Yuv422p,
            "mono" => PixelFormat::Grey,
            other => {
                return Err(format!(
                "Y4M colour space C{other} is not supported (expected C420*, C422 or Cmono, 8-bit)"
            ))
            }
        };
        Ok(Header {
            width,
            height,
            format,
            fps,
        })
    }
}

/// A Y4M frame rate `N:D`, when both are positive and the rate finite.
fn parse_rate(val: &str) -> Option<f64> {
    let mut nd = val.split(':');
    let n = nd.next().and_then(|n| n.parse::<f64>().ok())?;
    let d = nd.next().and_then(|d| d.parse::<f64>().ok())?;
    (n > 0.0 && d > 0.0 && (n / d).is_finite()).then_some(n / d)
}

/// The slowest frame rate a Y4M file is played at (its `F` header says less: a time-lapse
/// or a corrupt header), so a paced replay never waits minutes between frames.
pub const MIN_Y4M_FPS: f64 = 1.0;
/// The fastest frame rate a Y4M file is played at, as `source.fps` allows at most.
pub const MAX_Y4M_FPS: f64 = 1000.0;

/// A Y4M header's rate clamped into [`MIN_Y4M_FPS`]..=[`MAX_Y4M_FPS`], with a warning naming
/// the file when it had to be (an explicit replay rate still overrides it).
fn bounded_rate(path: &Path, fps: f64) -> f64 {
    let bounded = fps.clamp(MIN_Y4M_FPS, MAX_Y4M_FPS);
    if bounded != fps {
        log::warn!(
            "{}: the Y4M header's frame rate {fps:.6} fps is outside {MIN_Y4M_FPS}..={MAX_Y4M_FPS}; playing at {bounded} fps",
            path.display()
        );
    }
    bounded
}

impl Y4mStream {
    /// Reads and checks the header. `len` (the stream's length, when known) lets a file too
    /// short for one frame be refused here rather than end the run with nothing.
    pub(super) fn open(
        path: &Path,
        input: Box<dyn ReadSeek>,
        len: Option<u64>,
    ) -> Result<Y4mStream, SourceError> {
        let file_err = |source| SourceError::File {
            path: path.to_path_buf(),
            source,
        };
        let bad = |message: String| SourceError::BadFile {
            path: path.to_path_buf(),
            message,
        };
        let mut reader = BufReader::new(input);
        let mut header = Vec::new();
        (&mut reader)
            .take(4096)
            .read_until(b'\n', &mut header)
            .map_err(file_err)?;
        if header.last() != Some(&b'\n') {
            return Err(bad(
                "no complete Y4M header line (expected `YUV4MPEG2 W.. H.. ...` ending in a newline)".into(),
            ));
        }
        let text = String::from_utf8_lossy(&header[..header.len() - 1]).into_owned();
        let Header {
            width,
            height,
            format,
            fps,
        } = Header::parse(&text).map_err(bad)?;
        let fps = fps.map(|f| bounded_rate(path, f));
        // Raw formats always have a length; sides ≤ MAX_FRAME_SIDE keep it small.
        let frame_len = format.frame_len(width, height).unwrap_or(0);
        let data_start = header.len() as u64;
        // One frame is a `FRAME` line (at least 6 bytes) and `frame_len` bytes of pixels.
        if let Some(len) = len {
            let body = len.saturating_sub(data_start);
            if body < 6 + frame_len as u64 {
                return Err(SourceError::Empty {
                    path: path.to_path_buf(),
                    message: format!(
                        "truncated first frame: the header claims {width}x{height} {format}, {frame_len} bytes per frame plus a FRAME line, and the file holds {body} bytes after its header"
                    ),
                });
            }
        }
        Ok(Y4mStream {
            path: path.to_path_buf(),
            reader,
            data_start,
            width,
            height,
            format,
            fps,
            frame_len,
            frame_no: 0,
            last_problem: None,
        })
    }

    pub(super) fn rewind(&mut self) -> Result<(), SourceError> {
        self.frame_no = 0;
        self.reader
            .seek(SeekFrom::Start(self.data_start))
            .map(|_| ())
            .map_err(|source| SourceError::File {
                path: self.path.clone(),
                source,
            })
    }

    pub(super) fn next_frame(
        &mut self,
        stats: &mut SourceStats,
    ) -> Result<Option<Raw>, SourceError> {
        let file_err = |source| SourceError::File {
            path: self.path.clone(),
            source,
        };
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(1024)
            .read_until(b'\n', &mut line)
            .map_err(file_err)?;
        if n == 0 {
            return Ok(None);
        }
        if !line.starts_with(b"FRAME") || line.last() != Some(&b'\n') {
            return Err(SourceError::BadFile {
                path: self.path.clone(),
                message: format!(
                    "frame {}: expected a `FRAME` header line, found {:?}",
                    self.frame_no,
                    String::from_utf8_lossy(&line[..line.len().min(16)])
                ),
            });
        }
        // Read what is there, up to one frame: a short last frame costs only what it holds.
        let mut data = Vec::with_capacity(self.frame_len);
        (&mut self.reader)
            .take(self.frame_len as u64)
            .read_to_end(&mut data)
            .map_err(file_err)?;
        if data.len() < self.frame_len {
            stats.corrupt += 1;
            let problem = format!(
                "frame {} truncated: {} of the {} bytes a {}x{} {} frame needs",
                self.frame_no,
                data.len(),
                self.frame_len,
                self.width,
                self.height,
                self.format
            );
            log::debug!("{}: {problem}", self.path.display());
            self.last_problem = Some(problem);
            return Ok(None);
        }
        self.frame_no += 1;
        Ok(Some(Raw {
            width: self.width,
            height: self.height,
            format: self.format,
            data,
        }))
    }
}
