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
//! MJPEG files are read into memory whole (the demo clip is in the binary anyway); Y4M files
//! are streamed frame by frame.
//!
//! **Empty and absurd recordings.** A recording that holds no usable frame is an error, not
//! an empty run: at open when it can be told cheaply (an MJPEG stream without one complete
//! JPEG, a Y4M file shorter than the one frame its header claims), else on the first
//! [`FrameSource::next`] that finds the source ended without having delivered anything. A
//! frame side over [`MAX_FRAME_SIDE`] is refused from the header, before anything is
//! allocated for it.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{FrameSource, Pacing, SourceError, SourceOptions, SourceStats, DEFAULT_REPLAY_FPS};
use crate::frame::{monotonic_now, Frame, PixelFormat, MAX_FRAME_SIDE};

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

/// What a backend yields before pacing and numbering.
struct Raw {
    width: u32,
    height: u32,
    format: PixelFormat,
    data: Vec<u8>,
}

impl ReplaySource {
    /// The demo clip built into the binary (640×480 MJPEG, 10 fps, 200 frames).
    ///
    /// # Errors
    /// Only if the embedded clip were broken ([`SourceError::Empty`]).
    pub fn demo(opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let fps = opts.replay_fps.unwrap_or(super::DEMO_FPS);
        let stream = MjpegStream::new(Cow::Borrowed(super::DEMO_CLIP), PathBuf::from("demo"))?;
        Ok(Self::with(
            "demo clip (640x480 MJPEG)".into(),
            PathBuf::from("demo"),
            Kind::Mjpeg(stream),
            fps,
            opts,
        ))
    }

    /// A file of concatenated JPEGs, paced at `opts.replay_fps` (default 10 fps).
    ///
    /// # Errors
    /// [`SourceError::File`] if it cannot be read, [`SourceError::Empty`] if it holds no
    /// complete JPEG with a readable header of at most [`MAX_FRAME_SIDE`] per side.
    pub fn mjpeg_file(path: &Path, opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let data = std::fs::read(path).map_err(|source| SourceError::File {
            path: path.to_path_buf(),
            source,
        })?;
        Self::mjpeg_bytes(path, data, opts)
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
        let stream = MjpegStream::new(Cow::Owned(data), path.to_path_buf())?;
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
    pub fn y4m_file(path: &Path, opts: &SourceOptions) -> Result<ReplaySource, SourceError> {
        let file = File::open(path).map_err(|source| SourceError::File {
            path: path.to_path_buf(),
            source,
        })?;
        let len = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        Self::y4m_from(path, Box::new(file), len, opts)
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
            pacer: Pacer::new(match opts.pace {
                Pacing::RealTime => Some(Duration::from_secs_f64(1.0 / fps)),
                Pacing::AsFastAsPossible => None,
            }),
            looped: opts.looped,
            delivered_since_rewind: 0,
            seq: 0,
            stats: SourceStats::default(),
        }
    }

    fn read_raw(&mut self) -> Result<Option<Raw>, SourceError> {
        match &mut self.kind {
            Kind::Mjpeg(s) => Ok(s.next_frame(&mut self.stats)),
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
            Kind::Mjpeg(s) => {
                s.pos = 0;
                Ok(())
            }
            Kind::Y4m(s) => s.rewind(),
            Kind::Dir(d) => {
                d.next = 0;
                Ok(())
            }
        }
    }
}

impl FrameSource for ReplaySource {
    fn next(&mut self) -> Result<Option<Frame>, SourceError> {
        let raw = match self.read_raw()? {
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
struct Pacer {
    interval: Option<Duration>,
    next_due: Option<Instant>,
}

impl Pacer {
    fn new(interval: Option<Duration>) -> Pacer {
        Pacer {
            interval,
            next_due: None,
        }
    }

    fn wait(&mut self) {
        let Some(iv) = self.interval else { return };
        let now = Instant::now();
        self.next_due = Some(match self.next_due {
            None => now + iv,
            Some(due) if due > now => {
                std::thread::sleep(due - now);
                due + iv
            }
            Some(due) if now - due > iv => now + iv,
            Some(due) => due + iv,
        });
    }
}

/// Where the structural scan of one JPEG ended.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// A complete JPEG ends (exclusive) here.
    Complete(usize),
    /// Not a valid JPEG; the structure breaks at this offset.
    Broken(usize),
    /// The data ends inside the JPEG.
    Truncated,
}

/// Finds the next JPEG start (`FF D8 FF`) at or after `from`.
pub(crate) fn find_soi(data: &[u8], from: usize) -> Option<usize> {
    let hay = data.get(from..)?;
    hay.windows(3)
        .position(|w| w == [0xFF, 0xD8, 0xFF])
        .map(|p| p + from)
}

/// Walks one JPEG starting at the SOI at `start`: marker segments by their lengths, entropy
/// data up to the next real marker (`FF` followed by neither `00`, `FF` nor RSTn), repeated
/// for progressive scans, until EOI.
fn scan_jpeg(data: &[u8], start: usize) -> Scan {
    let len = data.len();
    let mut i = start + 2;
    loop {
        // Marker segment parsing.
        if i + 1 >= len {
            return Scan::Truncated;
        }
        if data[i] != 0xFF {
            return Scan::Broken(i);
        }
        let marker = data[i + 1];
        match marker {
            0xFF => {
                i += 1;
                continue;
            }
            0xD8 => return Scan::Broken(i),
            0xD9 => return Scan::Complete(i + 2),
            0x01 | 0xD0..=0xD7 => {
                i += 2;
                continue;
            }
            // SOFn/DHT/DAC, DQT, SOS, DNL, DRI, DHP, EXP, APPn, JPGn, COM
            0xC0..=0xCF | 0xDA..=0xDF | 0xE0..=0xEF | 0xF0..=0xFE => {}
            _ => return Scan::Broken(i),
        }
        if i + 3 >= len {
            return Scan::Truncated;
        }
        let seg = u16::from_be_bytes([data[i + 2], data[i + 3]]) as usize;
        if seg < 2 {
            return Scan::Broken(i);
        }
        i += 2 + seg;
        if marker != 0xDA {
            continue;
        }
        // Entropy-coded data after SOS.
        loop {
            let Some(p) = data
                .get(i..)
                .and_then(|s| s.iter().position(|&b| b == 0xFF))
            else {
                return Scan::Truncated;
            };
            let j = i + p;
            if j + 1 >= len {
                return Scan::Truncated;
            }
            match data[j + 1] {
                0x00 | 0xD0..=0xD7 => i = j + 2,
                0xFF => i = j + 1,
                0xD9 => return Scan::Complete(j + 2),
                0xD8 => return Scan::Broken(j),
                _ => {
                    // Another segment (DHT, SOS of a progressive scan, DRI…).
                    i = j;
                    break;
                }
            }
        }
    }
}

/// Reads a JPEG's size from its header with zune-jpeg. `Err` carries the decoder's message.
pub(crate) fn jpeg_size(jpeg: &[u8]) -> Result<(u32, u32), String> {
    let cursor = zune_jpeg::zune_core::bytestream::ZCursor::new(jpeg);
    let mut dec = zune_jpeg::JpegDecoder::new(cursor);
    dec.decode_headers().map_err(|e| format!("{e:?}"))?;
    let info = dec.info().ok_or_else(|| "no frame header".to_string())?;
    let (w, h) = (u32::from(info.width), u32::from(info.height));
    if w == 0 || h == 0 {
        return Err("zero-sized image".into());
    }
    if w > MAX_FRAME_SIDE || h > MAX_FRAME_SIDE {
        return Err(format!(
            "the header claims {w}x{h}, over the {MAX_FRAME_SIDE}-pixel limit per side"
        ));
    }
    Ok((w, h))
}

/// Concatenated JPEGs in memory.
struct MjpegStream {
    data: Cow<'static, [u8]>,
    path: PathBuf,
    pos: usize,
    /// Why the last skipped frame was skipped.
    last_problem: Option<String>,
}

impl MjpegStream {
    /// Checks there is at least one usable frame (a cheap scan: the data is in memory), so an
    /// empty or all-broken stream is an error at open.
    fn new(data: Cow<'static, [u8]>, path: PathBuf) -> Result<MjpegStream, SourceError> {
        if find_soi(&data, 0).is_none() {
            return Err(SourceError::Empty {
                path,
                message: format!(
                    "{} bytes without a JPEG start marker (FF D8 FF); expected concatenated JPEG images",
                    data.len()
                ),
            });
        }
        let mut s = MjpegStream {
            data,
            path,
            pos: 0,
            last_problem: None,
        };
        let mut probe = SourceStats::default();
        if s.next_frame(&mut probe).is_none() {
            return Err(SourceError::Empty {
                path: s.path,
                message: format!(
                    "{} bytes, {} JPEG start marker(s), none starts a usable image; last: {}",
                    s.data.len(),
                    probe.corrupt,
                    s.last_problem.as_deref().unwrap_or("?")
                ),
            });
        }
        s.pos = 0;
        s.last_problem = None;
        Ok(s)
    }

    fn next_frame(&mut self, stats: &mut SourceStats) -> Option<Raw> {
        loop {
            let start = find_soi(&self.data, self.pos)?;
            let scan = scan_jpeg(&self.data, start);
            // Resume right after a broken or cut-off SOI: a frame hidden behind a bogus
            // segment length (or a cut-off one) is found again.
            self.pos = match scan {
                Scan::Complete(end) => end,
                Scan::Broken(_) | Scan::Truncated => start + 2,
            };
            let problem = match scan {
                Scan::Complete(end) => {
                    let jpeg = &self.data[start..end];
                    match jpeg_size(jpeg) {
                        Ok((width, height)) => {
                            return Some(Raw {
                                width,
                                height,
                                format: PixelFormat::Mjpeg,
                                data: jpeg.to_vec(),
                            })
                        }
                        Err(e) => format!("the JPEG at byte {start} has a bad header: {e}"),
                    }
                }
                Scan::Broken(at) => {
                    format!("the JPEG at byte {start} breaks its structure at byte {at}")
                }
                Scan::Truncated => format!(
                    "the JPEG at byte {start} is truncated (the data ends at byte {} inside it)",
                    self.data.len()
                ),
            };
            stats.corrupt += 1;
            log::debug!("{}: skipped: {problem}", self.path.display());
            self.last_problem = Some(problem);
        }
    }
}

/// What a Y4M stream is read from: a file, or bytes in memory.
trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// A YUV4MPEG2 stream read frame by frame.
struct Y4mStream {
    path: PathBuf,
    reader: BufReader<Box<dyn ReadSeek>>,
    data_start: u64,
    width: u32,
    height: u32,
    format: PixelFormat,
    fps: Option<f64>,
    frame_len: usize,
    frame_no: u64,
    /// Why the last frame was not delivered (a truncated one).
    last_problem: Option<String>,
}

impl Y4mStream {
    /// Reads and checks the header. `len` (the stream's length, when known) lets a file too
    /// short for one frame be refused here rather than end the run with nothing.
    fn open(
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
        let mut tokens = text.split(' ');
        if tokens.next() != Some("YUV4MPEG2") {
            return Err(bad(
                "not a Y4M file: the first line does not start with `YUV4MPEG2`".into(),
            ));
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
                "F" => {
                    let mut nd = val.split(':');
                    let n = nd.next().and_then(|n| n.parse::<f64>().ok());
                    let d = nd.next().and_then(|d| d.parse::<f64>().ok());
                    if let (Some(n), Some(d)) = (n, d) {
                        if n > 0.0 && d > 0.0 && (n / d).is_finite() {
                            fps = Some(n / d);
                        }
                    }
                }
                "C" => colour = val.to_string(),
                _ => {}
            }
        }
        let (Some(width), Some(height)) = (width, height) else {
            return Err(bad(format!("Y4M header {text:?} lacks a valid W or H")));
        };
        if width == 0 || height == 0 {
            return Err(bad(format!("Y4M header {text:?} has a zero size")));
        }
        if width > MAX_FRAME_SIDE || height > MAX_FRAME_SIDE {
            return Err(bad(format!(
                "the Y4M header claims {width}x{height}, over the {MAX_FRAME_SIDE}-pixel limit per side (no camera or recording lookout reads is that large: a corrupt header?)"
            )));
        }
        let format = match colour.as_str() {
            c if c.starts_with("420") => PixelFormat::Yu12,
            "422" => PixelFormat::Yuv422p,
            "mono" => PixelFormat::Grey,
            other => {
                return Err(bad(format!(
                "Y4M colour space C{other} is not supported (expected C420*, C422 or Cmono, 8-bit)"
            )))
            }
        };
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

    fn rewind(&mut self) -> Result<(), SourceError> {
        self.frame_no = 0;
        self.reader
            .seek(SeekFrom::Start(self.data_start))
            .map(|_| ())
            .map_err(|source| SourceError::File {
                path: self.path.clone(),
                source,
            })
    }

    fn next_frame(&mut self, stats: &mut SourceStats) -> Result<Option<Raw>, SourceError> {
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

/// The images of a directory, sorted by file name.
struct ImageDir {
    files: Vec<PathBuf>,
    next: usize,
    /// Why the last skipped image was skipped.
    last_problem: Option<String>,
}

impl ImageDir {
    fn open(path: &Path) -> Result<ImageDir, SourceError> {
        let rd = std::fs::read_dir(path).map_err(|source| SourceError::File {
            path: path.to_path_buf(),
            source,
        })?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| image_kind(p).is_some())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(SourceError::Empty {
                path: path.to_path_buf(),
                message: "no .jpg, .jpeg or .png files in the directory".into(),
            });
        }
        Ok(ImageDir {
            files,
            next: 0,
            last_problem: None,
        })
    }

    fn next_frame(&mut self, stats: &mut SourceStats) -> Option<Raw> {
        while let Some(path) = self.files.get(self.next) {
            self.next += 1;
            match load_image(path) {
                Ok(raw) => return Some(raw),
                Err(e) => {
                    stats.corrupt += 1;
                    log::warn!("{}: skipped: {e}", path.display());
                    self.last_problem = Some(format!("{}: {e}", path.display()));
                }
            }
        }
        None
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ImageKind {
    Jpeg,
    Png,
}

fn image_kind(p: &Path) -> Option<ImageKind> {
    let ext = p.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "jpg" | "jpeg" => Some(ImageKind::Jpeg),
        "png" => Some(ImageKind::Png),
        _ => None,
    }
}

fn load_image(path: &Path) -> Result<Raw, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    match image_kind(path) {
        Some(ImageKind::Jpeg) => {
            let start = find_soi(&bytes, 0).ok_or("no JPEG start marker")?;
            let end = match scan_jpeg(&bytes, start) {
                Scan::Complete(end) => end,
                Scan::Broken(at) => return Err(format!("broken JPEG structure at byte {at}")),
                Scan::Truncated => return Err("truncated JPEG".into()),
            };
            let (width, height) = jpeg_size(&bytes[start..end])?;
            Ok(Raw {
                width,
                height,
                format: PixelFormat::Mjpeg,
                data: bytes[start..end].to_vec(),
            })
        }
        Some(ImageKind::Png) => {
            // The size limit is checked against the header, before the decoder allocates.
            let mut reader =
                image::ImageReader::with_format(Cursor::new(&bytes), image::ImageFormat::Png);
            let mut limits = image::Limits::default();
            limits.max_image_width = Some(MAX_FRAME_SIDE);
            limits.max_image_height = Some(MAX_FRAME_SIDE);
            reader.limits(limits);
            let img = reader
                .decode()
                .map_err(|e| format!("bad PNG: {e}"))?
                .to_rgb8();
            Ok(Raw {
                width: img.width(),
                height: img.height(),
                format: PixelFormat::Rgb24,
                data: img.into_raw(),
            })
        }
        None => Err("not a .jpg, .jpeg or .png file".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_jpeg() -> Vec<u8> {
        // SOI, a DQT-like segment, SOS, entropy data with stuffed FF00 and RST, EOI
        let mut v = vec![0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x04, 1, 2];
        v.extend([0xFF, 0xDA, 0x00, 0x03, 9]);
        v.extend([0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56]);
        v.extend([0xFF, 0xD9]);
        v
    }

    #[test]
    fn scanner_finds_eoi_past_stuffed_bytes() {
        let j = tiny_jpeg();
        assert_eq!(scan_jpeg(&j, 0), Scan::Complete(j.len()));
    }

    #[test]
    fn scanner_flags_truncation_and_new_soi() {
        let j = tiny_jpeg();
        assert_eq!(scan_jpeg(&j[..j.len() - 3], 0), Scan::Truncated);
        let mut two = j[..j.len() - 2].to_vec();
        let at = two.len();
        two.extend(&j);
        assert_eq!(scan_jpeg(&two, 0), Scan::Broken(at));
    }

    #[test]
    fn pacer_without_interval_never_sleeps() {
        let mut p = Pacer::new(None);
        p.wait();
        assert!(p.next_due.is_none());
    }
}
