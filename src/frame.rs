//! The unit of work of the whole pipeline: one captured image with its sequence number and
//! capture time, in whatever pixel format the source produced.
//!
//! Sources never convert: conversion is fused into preprocessing (see `preprocess`), so a
//! frame carries the camera's bytes untouched.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The largest width or height, in pixels, lookout accepts in a frame. Above any camera a Pi
/// drives (the HQ camera's 4056×3040, UVC 4K) and 8K UHD's 7680: a header claiming more is
/// corrupt or hostile. Sources refuse it from the header and preprocessing refuses such a
/// frame, both before sizing a buffer or table from it.
pub const MAX_FRAME_SIDE: u32 = 8192;

/// Pixel layouts lookout understands. The names follow V4L2's FourCCs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// Packed 4:2:2, Y0 U Y1 V (`YUYV`).
    Yuyv,
    /// Packed 4:2:2, U Y0 V Y1 (`UYVY`).
    Uyvy,
    /// Planar 4:2:0: Y plane, then interleaved UV plane (`NV12`).
    Nv12,
    /// Planar 4:2:0: Y, U, V planes (`YU12`, also called I420).
    Yu12,
    /// Planar 4:2:2: Y, U, V planes, chroma at full height (Y4M `C422`).
    Yuv422p,
    /// 8-bit luma only (`GREY`).
    Grey,
    /// Packed 8-bit R, G, B (`RGB3`).
    Rgb24,
    /// One JPEG image per frame (`MJPG`).
    Mjpeg,
}

impl PixelFormat {
    /// Every format lookout reads, in the order error messages list them.
    pub const ALL: [PixelFormat; 8] = [
        PixelFormat::Yuyv,
        PixelFormat::Uyvy,
        PixelFormat::Nv12,
        PixelFormat::Yu12,
        PixelFormat::Yuv422p,
        PixelFormat::Grey,
        PixelFormat::Rgb24,
        PixelFormat::Mjpeg,
    ];

    /// Other names accepted for a format (by the config file and the command line alike),
    /// with the format each means.
    pub const ALIASES: [(&'static str, PixelFormat); 8] = [
        ("MJPEG", PixelFormat::Mjpeg),
        ("JPEG", PixelFormat::Mjpeg),
        ("I420", PixelFormat::Yu12),
        ("YUV420", PixelFormat::Yu12),
        ("GRAY", PixelFormat::Grey),
        ("Y8", PixelFormat::Grey),
        ("RGB", PixelFormat::Rgb24),
        ("RGB24", PixelFormat::Rgb24),
    ];

    /// The accepted names for error messages: `YUYV, UYVY, …, MJPG (aliases: MJPEG, …)`.
    pub fn accepted_names() -> String {
        let fourccs: Vec<String> = Self::ALL.iter().map(|f| f.to_string()).collect();
        let aliases: Vec<&str> = Self::ALIASES.iter().map(|(a, _)| *a).collect();
        format!(
            "{} (aliases: {}; any case)",
            fourccs.join(", "),
            aliases.join(", ")
        )
    }

    /// The V4L2 FourCC of this format.
    pub fn fourcc(self) -> [u8; 4] {
        match self {
            PixelFormat::Yuyv => *b"YUYV",
            PixelFormat::Uyvy => *b"UYVY",
            PixelFormat::Nv12 => *b"NV12",
            PixelFormat::Yu12 => *b"YU12",
            PixelFormat::Yuv422p => *b"422P",
            PixelFormat::Grey => *b"GREY",
            PixelFormat::Rgb24 => *b"RGB3",
            PixelFormat::Mjpeg => *b"MJPG",
        }
    }

    /// The format for a V4L2 FourCC, if lookout supports it.
    pub fn from_fourcc(code: [u8; 4]) -> Option<PixelFormat> {
        Self::ALL.into_iter().find(|f| f.fourcc() == code)
    }

    /// Bytes an image of this size needs, or `None` for compressed formats.
    pub fn frame_len(self, width: u32, height: u32) -> Option<usize> {
        let (w, h) = (width as usize, height as usize);
        let chroma_420 = w.div_ceil(2) * h.div_ceil(2);
        match self {
            PixelFormat::Yuyv | PixelFormat::Uyvy => Some(w.div_ceil(2) * 4 * h),
            PixelFormat::Nv12 | PixelFormat::Yu12 => Some(w * h + 2 * chroma_420),
            PixelFormat::Yuv422p => Some(w * h + 2 * w.div_ceil(2) * h),
            PixelFormat::Grey => Some(w * h),
            PixelFormat::Rgb24 => Some(w * h * 3),
            PixelFormat::Mjpeg => None,
        }
    }
}

/// A pixel format name that is neither a FourCC lookout reads nor one of its aliases.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown pixel format {name:?}: expected a FourCC lookout reads, one of {}",
    PixelFormat::accepted_names()
)]
pub struct UnknownPixelFormat {
    /// The name as given.
    pub name: String,
}

/// The one parser of pixel format names (config `source.format`, `--format` options): a
/// FourCC (`YUYV`, `MJPG`, …) or an alias (`MJPEG`, `I420`, …), in any case, surrounding
/// blanks ignored. An empty string is not a format (callers treat it as "no preference").
impl FromStr for PixelFormat {
    type Err = UnknownPixelFormat;

    fn from_str(name: &str) -> Result<PixelFormat, UnknownPixelFormat> {
        let up = name.trim().to_ascii_uppercase();
        Self::ALIASES
            .iter()
            .find(|(alias, _)| *alias == up)
            .map(|(_, f)| *f)
            .or_else(|| Self::ALL.into_iter().find(|f| f.to_string() == up))
            .ok_or_else(|| UnknownPixelFormat {
                name: name.to_string(),
            })
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.fourcc()))
    }
}

/// One captured image.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Sequence number given by the source, strictly increasing; gaps mean dropped frames.
    pub seq: u64,
    /// Capture time on the `CLOCK_MONOTONIC` time line (see [`monotonic_now`]).
    pub captured_at: Duration,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Layout of `data`.
    pub format: PixelFormat,
    /// The pixels, tightly packed (no row padding) in `format`.
    pub data: Vec<u8>,
}

/// A downscaled 8-bit luma image for tracking, with its scale back to the frame.
#[derive(Clone, Debug, Default)]
pub struct GrayImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Frame pixels per gray pixel (≥ 1): a gray coordinate times `scale` is a frame coordinate.
    pub scale: f32,
    /// Row-major luma, `width × height` bytes, no padding.
    pub data: Vec<u8>,
}

/// Now, on the same `CLOCK_MONOTONIC` time line as V4L2 buffer timestamps, so that
/// `monotonic_now() - frame.captured_at` is the frame's age.
pub fn monotonic_now() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourcc_round_trip() {
        for f in [
            PixelFormat::Yuyv,
            PixelFormat::Nv12,
            PixelFormat::Grey,
            PixelFormat::Mjpeg,
        ] {
            assert_eq!(PixelFormat::from_fourcc(f.fourcc()), Some(f));
        }
        assert_eq!(PixelFormat::from_fourcc(*b"XXXX"), None);
    }

    #[test]
    fn names_fourccs_and_aliases_parse_to_one_format() {
        for f in PixelFormat::ALL {
            assert_eq!(f.to_string().parse(), Ok(f));
            assert_eq!(f.to_string().to_lowercase().parse(), Ok(f));
        }
        assert_eq!(" mjpeg ".parse(), Ok(PixelFormat::Mjpeg));
        assert_eq!("I420".parse(), Ok(PixelFormat::Yu12));
        assert_eq!("gray".parse(), Ok(PixelFormat::Grey));
        assert_eq!("422p".parse(), Ok(PixelFormat::Yuv422p));
        for bad in ["H264", "YUVY", "", "YUV"] {
            let e = bad.parse::<PixelFormat>().unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            for f in PixelFormat::ALL {
                assert!(msg.contains(&f.to_string()), "{msg} lacks {f}");
            }
        }
    }

    #[test]
    fn frame_sizes() {
        assert_eq!(PixelFormat::Yuyv.frame_len(640, 480), Some(640 * 480 * 2));
        assert_eq!(
            PixelFormat::Nv12.frame_len(640, 480),
            Some(640 * 480 * 3 / 2)
        );
        assert_eq!(PixelFormat::Mjpeg.frame_len(640, 480), None);
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_now();
        let b = monotonic_now();
        assert!(b >= a);
    }
}
