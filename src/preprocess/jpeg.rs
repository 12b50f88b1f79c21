//! MJPEG frames: decoding a JPEG into packed RGB with zune-jpeg, once per frame
//! ([`Decoded`] keeps the last one for the tensor and gray paths alike).

use std::time::Duration;

/// Identity of the frame whose JPEG is decoded in [`super::Scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DecodedKey {
    pub(super) seq: u64,
    pub(super) captured_at: Duration,
    pub(super) len: usize,
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
    use zune_jpeg::zune_core::{
        bytestream::ZCursor, colorspace::ColorSpace, options::DecoderOptions,
    };
    let opts = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut dec = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(jpeg), opts);
    dec.decode_headers().map_err(|e| format!("{e:?}"))?;
    let info = dec.info().ok_or("no frame header")?;
    let size = dec.output_buffer_size().ok_or("no output size")?;
    let (w, h) = (info.width as u32, info.height as u32);
    if size != w as usize * h as usize * 3 {
        return Err(format!("decoder output {size} bytes is not RGB {w}x{h}"));
    }
    out.resize(size, 0);
    dec.decode_into(out).map_err(|e| format!("{e:?}"))?;
    Ok((w, h))
}

/// Decodes only a JPEG's luma (its Y component; no chroma IDCT, upsampling or colour
/// conversion) into `out`, one byte per pixel, row after row; returns its size. A grayscale
/// JPEG gives its one component.
///
/// # Errors
/// The decoder's message for a JPEG that does not decode.
pub fn decode_jpeg_luma(jpeg: &[u8], out: &mut Vec<u8>) -> Result<(u32, u32), String> {
    use zune_jpeg::zune_core::{
        bytestream::ZCursor, colorspace::ColorSpace, options::DecoderOptions,
    };
    let opts = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::Luma);
    let mut dec = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(jpeg), opts);
    dec.decode_headers().map_err(|e| format!("{e:?}"))?;
    let info = dec.info().ok_or("no frame header")?;
    let size = dec.output_buffer_size().ok_or("no output size")?;
    let (w, h) = (info.width as u32, info.height as u32);
    if size != w as usize * h as usize {
        return Err(format!("decoder output {size} bytes is not luma {w}x{h}"));
    }
    out.resize(size, 0);
    dec.decode_into(out).map_err(|e| format!("{e:?}"))?;
    Ok((w, h))
}
