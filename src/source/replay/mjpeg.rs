//! MJPEG: concatenated JPEGs streamed from a file, a FIFO or memory, split by a structural
//! scanner that resumes as bytes arrive (see the parent module's notes on corrupt frames).

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::raw::{Raw, ReadSeek};
use crate::frame::{PixelFormat, MAX_FRAME_SIDE};
use crate::source::interface::{SourceError, SourceStats};

/// Where the structural scan of one JPEG ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Scan {
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

/// True when `data` starts with a JPEG that is whole: its structure walks from SOI to EOI
/// (bytes a camera adds after the EOI are allowed). A torn frame — a USB transfer cut short, a
/// buffer with a short `bytesused` — is not.
pub(crate) fn is_complete_jpeg(data: &[u8]) -> bool {
    find_soi(data, 0) == Some(0) && matches!(scan_jpeg(data, 0), Scan::Complete(_))
}

/// Where a structural scan stopped when the data ran out, to resume it once more data has
/// been appended (the scan of a longer prefix goes exactly as far the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ScanState {
    /// The offset to go on from.
    at: usize,
    /// Inside entropy-coded data (after SOS) rather than between marker segments.
    entropy: bool,
}

impl ScanState {
    /// The scan of a JPEG whose SOI is at `start`.
    pub(super) fn at_soi(start: usize) -> ScanState {
        ScanState {
            at: start + 2,
            entropy: false,
        }
    }
}

/// Walks one JPEG starting at the SOI at `start`: marker segments by their lengths, entropy
/// data up to the next real marker (`FF` followed by neither `00`, `FF` nor RSTn), repeated
/// for progressive scans, until EOI.
pub(super) fn scan_jpeg(data: &[u8], start: usize) -> Scan {
    scan_from(data, ScanState::at_soi(start)).0
}

/// [`scan_jpeg`] from a saved state; with [`Scan::Truncated`] it also returns where to
/// resume when more data is there.
pub(super) fn scan_from(data: &[u8], state: ScanState) -> (Scan, ScanState) {
    let len = data.len();
    let ScanState {
        at: mut i,
        mut entropy,
    } = state;
    let truncated = |at, entropy| (Scan::Truncated, ScanState { at, entropy });
    loop {
        if entropy {
            // Entropy-coded data after SOS.
            let Some(p) = data
                .get(i..)
                .and_then(|s| s.iter().position(|&b| b == 0xFF))
            else {
                return truncated(i.max(len), true);
            };
            let j = i + p;
            if j + 1 >= len {
                return truncated(j, true);
            }
            match data[j + 1] {
                0x00 | 0xD0..=0xD7 => i = j + 2,
                0xFF => i = j + 1,
                0xD9 => return (Scan::Complete(j + 2), state),
                0xD8 => return (Scan::Broken(j), state),
                _ => {
                    // Another segment (DHT, SOS of a progressive scan, DRI…).
                    i = j;
                    entropy = false;
                }
            }
            continue;
        }
        // Marker segment parsing.
        if i + 1 >= len {
            return truncated(i, false);
        }
        if data[i] != 0xFF {
            return (Scan::Broken(i), state);
        }
        let marker = data[i + 1];
        match marker {
            0xFF => {
                i += 1;
                continue;
            }
            0xD8 => return (Scan::Broken(i), state),
            0xD9 => return (Scan::Complete(i + 2), state),
            0x01 | 0xD0..=0xD7 => {
                i += 2;
                continue;
            }
            // SOFn/DHT/DAC, DQT, SOS, DNL, DRI, DHP, EXP, APPn, JPGn, COM
            0xC0..=0xCF | 0xDA..=0xDF | 0xE0..=0xEF | 0xF0..=0xFE => {}
            _ => return (Scan::Broken(i), state),
        }
        if i + 3 >= len {
            return truncated(i, false);
        }
        let seg = u16::from_be_bytes([data[i + 2], data[i + 3]]) as usize;
        if seg < 2 {
            return (Scan::Broken(i), state);
        }
        i += 2 + seg;
        entropy = marker == 0xDA;
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

/// The largest JPEG frame an MJPEG stream may hold (16 MiB: a 4096×4096 JPEG at the
/// highest quality is about 10 MiB). A frame that has not ended by then is skipped as
/// corrupt, and the buffer never holds more than this plus one read.
pub const MAX_JPEG_FRAME: usize = 16 << 20;

/// The least read from the input at a time.
const READ_CHUNK: usize = 64 << 10;

/// Concatenated JPEGs read as a stream (a file, a FIFO, or bytes in memory), one frame at a
/// time: memory is one frame (at most [`MAX_JPEG_FRAME`]) plus one read, whatever the
/// length of the recording, and a frame is delivered as soon as its end marker has arrived.
pub(super) struct MjpegStream {
    input: Box<dyn ReadSeek>,
    path: PathBuf,
    /// Bytes read and not consumed yet; `buf[0]` is byte `base` of the stream.
    buf: Vec<u8>,
    base: u64,
    /// The input has ended (a read returned 0).
    eof: bool,
    /// The first frame, read at open to check the stream holds one, and the frames skipped
    /// before it.
    first: Option<(Raw, u64)>,
    /// Why the last skipped frame was skipped.
    pub(super) last_problem: Option<String>,
}

impl MjpegStream {
    /// Reads up to the first usable frame, so an empty or all-broken stream is an error at
    /// open (for a FIFO, this waits for the first frame).
    pub(super) fn open(
        input: Box<dyn ReadSeek>,
        path: PathBuf,
    ) -> Result<MjpegStream, SourceError> {
        let mut s = MjpegStream {
            input,
            path,
            buf: Vec::new(),
            base: 0,
            eof: false,
            first: None,
            last_problem: None,
        };
        let mut probe = SourceStats::default();
        match s.next_frame(&mut probe)? {
            Some(raw) => {
                s.first = Some((raw, probe.corrupt));
                Ok(s)
            }
            None if probe.corrupt == 0 => Err(SourceError::Empty {
                message: format!(
                    "{} bytes without a JPEG start marker (FF D8 FF); expected concatenated JPEG images",
                    s.base
                ),
                path: s.path,
            }),
            None => Err(SourceError::Empty {
                message: format!(
                    "{} bytes, {} JPEG start marker(s), none starts a usable image; last: {}",
                    s.base,
                    probe.corrupt,
                    s.last_problem.as_deref().unwrap_or("?")
                ),
                path: s.path,
            }),
        }
    }

    /// Starts the stream again from its first byte.
    pub(super) fn rewind(&mut self) -> Result<(), SourceError> {
        self.input
            .seek(SeekFrom::Start(0))
            .map_err(|source| SourceError::File {
                path: self.path.clone(),
                source,
            })?;
        self.buf.clear();
        self.base = 0;
        self.eof = false;
        self.first = None;
        Ok(())
    }

    /// Drops the first `n` buffered bytes.
    fn consume(&mut self, n: usize) {
        let n = n.min(self.buf.len());
        self.buf.drain(..n);
        self.base += n as u64;
    }

    /// Appends what one read returns, up to `want` bytes (at least [`READ_CHUNK`]); sets
    /// `eof` when the input has ended.
    fn fill(&mut self, want: usize) -> Result<(), SourceError> {
        let old = self.buf.len();
        self.buf.resize(old + want.max(READ_CHUNK), 0);
        loop {
            match self.input.read(&mut self.buf[old..]) {
                Ok(n) => {
                    self.buf.truncate(old + n);
                    self.eof = n == 0;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    self.buf.truncate(old);
                    return Err(SourceError::File {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// The buffer's capacity (bounded by one frame plus one read; tests check it).
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    pub(super) fn next_frame(
        &mut self,
        stats: &mut SourceStats,
    ) -> Result<Option<Raw>, SourceError> {
        if let Some((raw, skipped)) = self.first.take() {
            stats.corrupt += skipped;
            return Ok(Some(raw));
        }
        loop {
            // The next JPEG start; junk before it is dropped (all but two bytes, which may
            // begin a start marker the next read completes).
            let start = loop {
                if let Some(at) = find_soi(&self.buf, 0) {
                    break at;
                }
                let keep = self.buf.len().min(2);
                self.consume(self.buf.len() - keep);
                if self.eof {
                    self.consume(keep);
                    return Ok(None);
                }
                self.fill(READ_CHUNK)?;
            };
            self.consume(start);
            let at = self.base;
            // Scan as bytes arrive, resuming where the last scan ran out of data; read sizes
            // double with the frame so a large frame costs few reads.
            let mut state = ScanState::at_soi(0);
            let scan = loop {
                match scan_from(&self.buf, state) {
                    (Scan::Truncated, _) if self.eof => break Scan::Truncated,
                    (Scan::Truncated, _) if self.buf.len() >= MAX_JPEG_FRAME => {
                        break Scan::Broken(usize::MAX)
                    }
                    (Scan::Truncated, resume) => {
                        state = resume;
                        let room = MAX_JPEG_FRAME - self.buf.len();
                        self.fill(self.buf.len().min(room))?;
                    }
                    (done, _) => break done,
                }
            };
            let problem = match scan {
                Scan::Complete(end) => {
                    let jpeg = &self.buf[..end];
                    match jpeg_size(jpeg) {
                        Ok((width, height)) => {
                            let data = jpeg.to_vec();
                            self.consume(end);
                            self.shrink();
                            return Ok(Some(Raw {
                                width,
                                height,
                                format: PixelFormat::Mjpeg,
                                data,
                            }));
                        }
                        Err(e) => format!("the JPEG at byte {at} has a bad header: {e}"),
                    }
                }
                Scan::Broken(usize::MAX) => format!(
                    "the JPEG at byte {at} has not ended after {} bytes, the {} MiB limit of a frame",
                    self.buf.len(),
                    MAX_JPEG_FRAME >> 20
                ),
                Scan::Broken(b) => format!(
                    "the JPEG at byte {at} breaks its structure at byte {}",
                    at + b as u64
                ),
                Scan::Truncated => format!(
                    "the JPEG at byte {at} is truncated (the data ends at byte {} inside it)",
                    at + self.buf.len() as u64
                ),
            };
            // Resume right after a broken or cut-off SOI: a frame hidden behind a bogus
            // segment length (or a cut-off one) is found again.
            self.consume(2);
            stats.corrupt += 1;
            log::debug!("{}: skipped: {problem}", self.path.display());
            self.last_problem = Some(problem);
        }
    }

    /// Gives back memory a large frame left in the buffer.
    fn shrink(&mut self) {
        let floor = 4 * READ_CHUNK;
        if self.buf.capacity() > floor && self.buf.capacity() > 4 * self.buf.len() {
            self.buf.shrink_to(floor.max(2 * self.buf.len()));
        }
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

    /// A stream of `frames` copies of `jpeg`, each behind `junk` bytes of junk, produced as
    /// it is read (nothing is held), handed out in reads of at most `piece` bytes.
    struct Generated {
        jpeg: Vec<u8>,
        junk: usize,
        frames: u64,
        piece: usize,
        pos: u64,
    }

    impl std::io::Read for Generated {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let unit = (self.junk + self.jpeg.len()) as u64;
            let total = unit * self.frames;
            let n = buf.len().min(self.piece).min((total - self.pos) as usize);
            for b in &mut buf[..n] {
                let k = (self.pos % unit) as usize;
                *b = if k < self.junk {
                    0x55
                } else {
                    self.jpeg[k - self.junk]
                };
                self.pos += 1;
            }
            Ok(n)
        }
    }

    impl std::io::Seek for Generated {
        fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
            if let SeekFrom::Start(p) = to {
                self.pos = p;
            }
            Ok(self.pos)
        }
    }

    /// A tiny JPEG with `pad` bytes of entropy data, with a header zune-jpeg reads.
    fn jpeg_with_entropy(pad: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut buf, 50);
        let r = image::ImageEncoder::write_image(
            enc,
            &[7u8; 8 * 8 * 3],
            8,
            8,
            image::ExtendedColorType::Rgb8,
        );
        assert!(r.is_ok());
        // Pad the entropy data just before the EOI (0x00 bytes: no marker).
        let eoi = buf.len() - 2;
        buf.splice(eoi..eoi, std::iter::repeat_n(0u8, pad));
        buf
    }

    fn stream(g: Generated) -> MjpegStream {
        let s = MjpegStream::open(Box::new(g), PathBuf::from("gen.mjpeg"));
        s.unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_long_stream_is_read_in_a_buffer_the_size_of_a_frame() {
        // 2000 frames of ~20 KiB behind 5 KiB of junk each: a 50 MB stream.
        let jpeg = jpeg_with_entropy(20_000);
        let mut s = stream(Generated {
            jpeg: jpeg.clone(),
            junk: 5_000,
            frames: 2000,
            piece: 1 << 20,
            pos: 0,
        });
        let mut stats = SourceStats::default();
        let mut n = 0;
        let mut most = 0;
        while let Some(raw) = s.next_frame(&mut stats).unwrap() {
            assert_eq!(raw.data, jpeg);
            n += 1;
            most = most.max(s.capacity());
        }
        assert_eq!((n, stats.corrupt), (2000, 0));
        assert!(most <= 4 * READ_CHUNK, "the buffer grew to {most} bytes");
    }

    #[test]
    fn a_frame_over_the_limit_is_skipped_and_the_buffer_stays_bounded() {
        let big = jpeg_with_entropy(MAX_JPEG_FRAME + 1000);
        let small = jpeg_with_entropy(10);
        let data = [small.clone(), big, small.clone()].concat();
        let mut s = MjpegStream::open(
            Box::new(std::io::Cursor::new(data)),
            PathBuf::from("big.mjpeg"),
        )
        .unwrap();
        let mut stats = SourceStats::default();
        let mut frames = Vec::new();
        while let Some(raw) = s.next_frame(&mut stats).unwrap() {
            assert!(s.capacity() <= 2 * MAX_JPEG_FRAME + 2 * READ_CHUNK);
            frames.push(raw.data);
        }
        assert_eq!(frames, [small.clone(), small]);
        assert!(stats.corrupt >= 1);
        let problem = s.last_problem.unwrap_or_default();
        assert!(problem.contains("16 MiB limit"), "{problem}");
    }

    #[test]
    fn frames_do_not_depend_on_how_the_bytes_arrive() {
        let jpeg = jpeg_with_entropy(300);
        let frames = |piece| {
            let mut s = stream(Generated {
                jpeg: jpeg.clone(),
                junk: 3,
                frames: 5,
                piece,
                pos: 0,
            });
            let mut stats = SourceStats::default();
            let mut v = Vec::new();
            while let Some(raw) = s.next_frame(&mut stats).unwrap() {
                v.push(raw.data);
            }
            (v, stats.corrupt)
        };
        let whole = frames(1 << 20);
        assert_eq!(whole.0.len(), 5);
        for piece in [1, 2, 3, 7, 64, 1000] {
            assert_eq!(frames(piece), whole, "reads of {piece} bytes");
        }
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
    fn a_complete_jpeg_is_whole_and_a_torn_one_is_not() {
        let j = tiny_jpeg();
        assert!(is_complete_jpeg(&j));
        let mut padded = j.clone();
        padded.extend([0u8; 16]); // cameras pad buffers after the EOI
        assert!(is_complete_jpeg(&padded));
        for cut in [0, 1, 2, 5, j.len() / 2, j.len() - 1] {
            assert!(!is_complete_jpeg(&j[..cut]), "torn at {cut}");
        }
        assert!(!is_complete_jpeg(&j[2..]), "no SOI at the start");
    }
}
