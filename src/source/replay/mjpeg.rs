//! MJPEG: concatenated JPEGs in memory, split by a structural scanner (see the parent
//! module's notes on corrupt frames).

use std::borrow::Cow;
use std::path::PathBuf;

use super::Raw;
use crate::frame::{PixelFormat, MAX_FRAME_SIDE};
use crate::source::{SourceError, SourceStats};

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

/// Walks one JPEG starting at the SOI at `start`: marker segments by their lengths, entropy
/// data up to the next real marker (`FF` followed by neither `00`, `FF` nor RSTn), repeated
/// for progressive scans, until EOI.
pub(super) fn scan_jpeg(data: &[u8], start: usize) -> Scan {
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
pub(super) struct MjpegStream {
    data: Cow<'static, [u8]>,
    path: PathBuf,
    pub(super) pos: usize,
    /// Why the last skipped frame was skipped.
    pub(super) last_problem: Option<String>,
}

impl MjpegStream {
    /// Checks there is at least one usable frame (a cheap scan: the data is in memory), so an
    /// empty or all-broken stream is an error at open.
    pub(super) fn new(data: Cow<'static, [u8]>, path: PathBuf) -> Result<MjpegStream, SourceError> {
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

    pub(super) fn next_frame(&mut self, stats: &mut SourceStats) -> Option<Raw> {
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
