//! MJPEG frames: decoding a JPEG with zune-jpeg into packed RGB, once per frame ([`Decoded`]
//! keeps the last one for the tensor and gray paths alike), or into its luma alone (the gray
//! plane of a frame the model does not take).

use std::time::Duration;

use super::error::PreprocessError;
use crate::frame::Frame;

/// Identity of the frame whose JPEG is decoded in [`super::Scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DecodedKey {
    pub(super) seq: u64,
    pub(super) captured_at: Duration,
    pub(super) len: usize,
}

impl DecodedKey {
    /// The identity of `frame`.
    pub(super) fn of(frame: &Frame) -> DecodedKey {
        DecodedKey {
            seq: frame.seq,
            captured_at: frame.captured_at,
            len: frame.data.len(),
        }
    }
}

/// Decodes `frame`'s JPEG into `out` as `output`.
///
/// # Errors
/// A JPEG that does not decode, or decodes to another size than the frame declares.
pub(super) fn decode_frame(
    frame: &Frame,
    out: &mut Vec<u8>,
    output: Output,
) -> Result<(), PreprocessError> {
    let (dw, dh) =
        decode_jpeg_as(&frame.data, out, output).map_err(|message| PreprocessError::Decode {
            seq: frame.seq,
            message,
        })?;
    if (dw, dh) != (frame.width, frame.height) {
        return Err(PreprocessError::JpegSize {
            seq: frame.seq,
            width: frame.width,
            height: frame.height,
            found_w: dw,
            found_h: dh,
        });
    }
    Ok(())
}

/// The decoded RGB of the last MJPEG frame.
#[derive(Debug, Default)]
pub(super) struct Decoded {
    pub(super) key: Option<DecodedKey>,
    pub(super) rgb: Vec<u8>,
}

/// Decodes a JPEG into packed RGB in `out` (resized to fit) with zune-jpeg; returns its size.
///
/// # Errors
/// The decoder's message for a JPEG that does not decode.
pub fn decode_jpeg_rgb(jpeg: &[u8], out: &mut Vec<u8>) -> Result<(u32, u32), String> {
    decode_jpeg_as(jpeg, out, Output::Rgb)
}

/// Decodes only a JPEG's luma (its Y component; no chroma IDCT, upsampling or colour
/// conversion) into `out`, one byte per pixel, row after row; returns its size. A grayscale
/// JPEG gives its one component.
///
/// # Errors
/// The decoder's message for a JPEG that does not decode.
pub fn decode_jpeg_luma(jpeg: &[u8], out: &mut Vec<u8>) -> Result<(u32, u32), String> {
    decode_jpeg_as(jpeg, out, Output::Luma)
}

/// What a decode writes: packed RGB, or the luma alone.
#[derive(Clone, Copy)]
pub(super) enum Output {
    Rgb,
    Luma,
}

/// Decodes a JPEG with zune-jpeg into `out` (resized to fit) as `output`; returns its size.
fn decode_jpeg_as(jpeg: &[u8], out: &mut Vec<u8>, output: Output) -> Result<(u32, u32), String> {
    use zune_jpeg::zune_core::{
        bytestream::ZCursor, colorspace::ColorSpace, options::DecoderOptions,
    };
    let (space, channels, name) = match output {
        Output::Rgb => (ColorSpace::RGB, 3, "RGB"),
        Output::Luma => (ColorSpace::Luma, 1, "luma"),
    };
    let opts = DecoderOptions::default().jpeg_set_out_colorspace(space);
    let mut dec = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(jpeg), opts);
    dec.decode_headers().map_err(|e| format!("{e:?}"))?;
    let info = dec.info().ok_or("no frame header")?;
    let size = dec.output_buffer_size().ok_or("no output size")?;
    let (w, h) = (info.width as u32, info.height as u32);
    if size != w as usize * h as usize * channels {
        return Err(format!("decoder output {size} bytes is not {name} {w}x{h}"));
    }
    out.resize(size, 0);
    dec.decode_into(out).map_err(|e| format!("{e:?}"))?;
    Ok((w, h))
}
