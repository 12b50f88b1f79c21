//! Errors of preprocessing.

use crate::frame::{PixelFormat, MAX_FRAME_SIDE};

/// Errors of preprocessing: sizes that do not add up, frames that cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum PreprocessError {
    /// A raw frame's data is shorter than its format and size need.
    #[error(
        "frame {seq}: {format} {width}x{height} needs {expected} bytes, the frame holds {found}"
    )]
    ShortFrame {
        /// Frame sequence number.
        seq: u64,
        /// Pixel format.
        format: PixelFormat,
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// Bytes needed.
        expected: usize,
        /// Bytes present.
        found: usize,
    },
    /// A frame declares a side over [`MAX_FRAME_SIDE`].
    #[error("frame {seq}: {width}x{height} is over the {MAX_FRAME_SIDE}-pixel limit per side")]
    TooLarge {
        /// Frame sequence number.
        seq: u64,
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
    },
    /// An MJPEG frame does not decode.
    #[error("frame {seq}: JPEG does not decode: {message}")]
    Decode {
        /// Frame sequence number.
        seq: u64,
        /// The decoder's message.
        message: String,
    },
    /// An MJPEG frame decodes to a different size than the frame declares.
    #[error("frame {seq}: JPEG is {found_w}x{found_h}, the frame says {width}x{height}")]
    JpegSize {
        /// Frame sequence number.
        seq: u64,
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// Decoded width.
        found_w: u32,
        /// Decoded height.
        found_h: u32,
    },
    /// A zero-sized frame or model input.
    #[error("frame {seq}: zero size ({width}x{height} into {input_w}x{input_h})")]
    ZeroSize {
        /// Frame sequence number.
        seq: u64,
        /// Frame width.
        width: u32,
        /// Frame height.
        height: u32,
        /// Target width.
        input_w: u32,
        /// Target height.
        input_h: u32,
    },
    /// The image buffer is shorter than its declared size.
    #[error("image buffer holds {found} bytes, its size needs {expected}")]
    BadInput {
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        found: usize,
    },
    /// The tensor buffer does not match the model input.
    #[error("tensor buffer holds {found} floats, the model input needs {expected}")]
    BadOutput {
        /// Floats needed.
        expected: usize,
        /// Floats given.
        found: usize,
    },
}
