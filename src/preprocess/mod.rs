//! Image → model input tensor: resize (letterbox or stretch), colour order and normalization,
//! in one pass over the output, with no intermediate image.
//!
//! The detector wants NCHW f32, **BGR**, `(px − mean) / std` (see `models/README.md`). The
//! geometric part is described by a [`Mapping`], which also maps boxes back to the image.
//!
//! [`frame_to_tensor`] takes a camera [`Frame`] in any [`PixelFormat`] straight to that tensor:
//! for each output pixel it bilinearly samples Y, U and V (each on its own grid, so 4:2:2 and
//! 4:2:0 chroma is upsampled by the same bilinear filter), converts to RGB with the **BT.601
//! limited-range** matrix and normalizes — no full-size RGB image is ever built for raw
//! formats. The matrix (Y in 16..235, Cb/Cr in 16..240):
//!
//! ```text
//! R = 1.164383·(Y−16)                     + 1.596027·(Cr−128)
//! G = 1.164383·(Y−16) − 0.391762·(Cb−128) − 0.812968·(Cr−128)
//! B = 1.164383·(Y−16) + 2.017232·(Cb−128)
//! ```
//!
//! Interpolating YCbCr and then converting equals converting and then interpolating (the
//! matrix is affine) except for the final clamp to 0..255, so the result matches
//! [`rgb_to_tensor`] on the converted image up to rounding. Chroma samples are taken as
//! centred between their luma pixels (JPEG/MPEG-1 siting).
//!
//! MJPEG frames are decoded once with zune-jpeg into [`Scratch`] (zune-jpeg has no
//! reduced-scale decoding) and the RGB path samples that; [`frame_to_gray`] on the same frame
//! with the same scratch reuses the decoded image, and on any other MJPEG frame decodes only
//! the JPEG's luma. All per-frame buffers live in [`Scratch`],
//! so after the first frame of a given geometry the raw-format paths allocate nothing
//! (zune-jpeg allocates internally per decode).
//!
//! One file per stage: `layout` (where each pixel format's samples are, and the bilinear
//! taps), `fused` (the one-pass convert + resize + normalize loops), `jpeg` (MJPEG
//! decoding), `gray` (the tracker's gray plane), `error`; this file holds the entry points,
//! [`Scratch`] and the element types ([`ModelInput`], [`Quantization`]).

mod error;
mod fused;
mod gray;
mod jpeg;
mod layout;

use crate::frame::{Frame, PixelFormat, MAX_FRAME_SIDE};
pub use crate::geom::{Mapping, ResizeMode};
pub use error::PreprocessError;
pub use gray::frame_to_gray;
pub use jpeg::{decode_jpeg_luma, decode_jpeg_rgb};
use jpeg::{Decoded, DecodedKey};
pub use layout::Taps;
use layout::{layout, ColTap, Layout, RowTap, TensorKey};

/// Per-channel mean, in B, G, R order (NanoDet's training normalization).
pub const MEAN_BGR: [f32; 3] = [103.53, 116.28, 123.675];
/// Per-channel standard deviation, in B, G, R order.
pub const STD_BGR: [f32; 3] = [57.375, 57.12, 58.395];

/// The int8 model's input quantization, done here as the normalization's last step:
/// `round_half_even(x · scale) + zero_point`, clamped to int8 — the graph's own
/// `QuantizeLinear` (tract's form: `scale` is the reciprocal of the ONNX scale), moved out of
/// the model by `crate::detect::int8::input`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantization {
    /// The multiplier (1 / the ONNX scale).
    pub scale: f32,
    /// The zero point.
    pub zero_point: i32,
}

impl Quantization {
    /// Ignored by the float paths, which take no quantization.
    const NONE: Quantization = Quantization {
        scale: 1.0,
        zero_point: 0,
    };
}

/// A tensor element the fused loops can write: a float as computed, or that float quantized.
/// The loops compute each output row's floats first — into the output itself for `f32`, into
/// a scratch row for `i8`, quantized into the output afterwards in one vectorized pass
/// ([`crate::quantize::quantize`]): a value-by-value conversion inside the colour loop costs
/// twice the whole float path (`benches/preprocess.rs`, `fused_int8`).
trait Store: Copy + Default {
    /// One value (the padding).
    fn store(x: f32, q: Quantization) -> Self;
    /// Where a row of `out`'s floats is computed: `out` itself, or `tmp` sized to it.
    fn floats<'a>(out: &'a mut [Self], tmp: &'a mut Vec<f32>) -> &'a mut [f32];
    /// After the row's floats are in [`Store::floats`]: `tmp` quantized into `out` (`i8`).
    fn finish(tmp: &[f32], out: &mut [Self], q: Quantization);
}

impl Store for f32 {
    #[inline(always)]
    fn store(x: f32, _: Quantization) -> f32 {
        x
    }

    #[inline(always)]
    fn floats<'a>(out: &'a mut [f32], _: &'a mut Vec<f32>) -> &'a mut [f32] {
        out
    }

    #[inline(always)]
    fn finish(_: &[f32], _: &mut [f32], _: Quantization) {}
}

impl Store for i8 {
    #[inline(always)]
    fn store(x: f32, q: Quantization) -> i8 {
        crate::quantize::quantize_one(x, q.scale, q.zero_point)
    }

    #[inline(always)]
    fn floats<'a>(out: &'a mut [i8], tmp: &'a mut Vec<f32>) -> &'a mut [f32] {
        tmp.resize(out.len(), 0.0);
        &mut tmp[..]
    }

    #[inline(always)]
    fn finish(tmp: &[f32], out: &mut [i8], q: Quantization) {
        crate::quantize::quantize(tmp, out, q.scale, q.zero_point);
    }
}

/// Scratch rows for [`Store::floats`], one per output channel (B, G, R).
type NormRows = [Vec<f32>; 3];

/// One input tensor's buffer, in the type the model takes: floats, or int8 quantized by the
/// preprocessing ([`Quantization`]). `crate::detect::Detector::new_input` makes the right one.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelInput {
    /// NCHW floats.
    F32(Vec<f32>),
    /// NCHW int8, each value the float quantized as given.
    I8(Vec<i8>, Quantization),
}

/// Packed RGB (`width × height × 3` bytes) → NCHW BGR normalized tensor of
/// `3 × input_h × input_w` floats written into `out`. Returns the mapping for boxes.
///
/// # Panics
/// Never on bad sizes: a wrong `rgb` or `out` length is reported as an error.
pub fn rgb_to_tensor(
    rgb: &[u8],
    width: u32,
    height: u32,
    input_w: u32,
    input_h: u32,
    mode: ResizeMode,
    out: &mut [f32],
) -> Result<Mapping, PreprocessError> {
    let (size, input) = ((width, height), (input_w, input_h));
    rgb_to_elems(rgb, size, input, mode, out, Quantization::NONE)
}

/// [`rgb_to_tensor`] into `out` in the model's input type (quantized as it is written for an
/// int8 model, as [`frame_to_input`]).
///
/// # Errors
/// As [`rgb_to_tensor`].
pub fn rgb_to_input(
    rgb: &[u8],
    width: u32,
    height: u32,
    input_w: u32,
    input_h: u32,
    mode: ResizeMode,
    out: &mut ModelInput,
) -> Result<Mapping, PreprocessError> {
    let (size, input) = ((width, height), (input_w, input_h));
    match out {
        ModelInput::F32(v) => rgb_to_tensor(rgb, width, height, input_w, input_h, mode, v),
        ModelInput::I8(v, q) => rgb_to_elems(rgb, size, input, mode, v, *q),
    }
}

/// [`rgb_to_tensor`] for either element type.
fn rgb_to_elems<T: Store>(
    rgb: &[u8],
    (width, height): (u32, u32),
    (input_w, input_h): (u32, u32),
    mode: ResizeMode,
    out: &mut [T],
    q: Quantization,
) -> Result<Mapping, PreprocessError> {
    let need = width as usize * height as usize * 3;
    if width == 0 || height == 0 || rgb.len() < need {
        return Err(PreprocessError::BadInput {
            expected: need,
            found: rgb.len(),
        });
    }
    let plane = input_w as usize * input_h as usize;
    if out.len() != 3 * plane {
        return Err(PreprocessError::BadOutput {
            expected: 3 * plane,
            found: out.len(),
        });
    }
    let map = Mapping::new(width, height, input_w, input_h, mode);
    let (x_off, y_off) = (map.pad_x as usize, map.pad_y as usize);
    let inner_w = ((width as f32 * map.scale_x).round() as usize).min(input_w as usize - x_off);
    let inner_h = ((height as f32 * map.scale_y).round() as usize).min(input_h as usize - y_off);
    // Black padding, normalized.
    let pad: [T; 3] = std::array::from_fn(|c| T::store(-MEAN_BGR[c] / STD_BGR[c], q));
    for c in 0..3 {
        out[c * plane..(c + 1) * plane].fill(pad[c]);
    }
    // Per-channel affine: value = px * a + b, with the 1/256² of the two lerps folded into a.
    let a: [f32; 3] = std::array::from_fn(|c| 1.0 / (STD_BGR[c] * 65536.0));
    let b: [f32; 3] = std::array::from_fn(|c| -MEAN_BGR[c] / STD_BGR[c]);
    let tx = Taps::new(width, inner_w as u32);
    let ty = Taps::new(height, inner_h as u32);
    let stride = width as usize * 3;
    let (out_b, rest) = out.split_at_mut(plane);
    let (out_g, out_r) = rest.split_at_mut(plane);
    let [mut nb, mut ng, mut nr] = NormRows::default();
    for oy in 0..inner_h {
        let r0 = &rgb[ty.i0[oy] as usize * stride..][..stride];
        let r1 = &rgb[ty.i1[oy] as usize * stride..][..stride];
        let wy1 = ty.w1[oy] as u32;
        let wy0 = 256 - wy1;
        let row = (oy + y_off) * input_w as usize + x_off;
        let ob = &mut out_b[row..row + inner_w];
        let og = &mut out_g[row..row + inner_w];
        let or = &mut out_r[row..row + inner_w];
        let (fb, fg, fr) = (
            T::floats(ob, &mut nb),
            T::floats(og, &mut ng),
            T::floats(or, &mut nr),
        );
        for ox in 0..inner_w {
            let (x0, x1) = (tx.i0[ox] as usize * 3, tx.i1[ox] as usize * 3);
            let wx1 = tx.w1[ox] as u32;
            let wx0 = 256 - wx1;
            let px = |c: usize| {
                let top = r0[x0 + c] as u32 * wx0 + r0[x1 + c] as u32 * wx1;
                let bot = r1[x0 + c] as u32 * wx0 + r1[x1 + c] as u32 * wx1;
                (top * wy0 + bot * wy1) as f32
            };
            fr[ox] = px(0) * a[2] + b[2];
            fg[ox] = px(1) * a[1] + b[1];
            fb[ox] = px(2) * a[0] + b[0];
        }
        T::finish(&nb, ob, q);
        T::finish(&ng, og, q);
        T::finish(&nr, or, q);
    }
    Ok(map)
}

/// Reusable buffers for [`frame_to_tensor`] and [`frame_to_gray`]: taps for the last geometry,
/// row buffers, the decoded RGB of the last MJPEG frame. Keep one per preprocessing thread.
#[derive(Debug, Default)]
pub struct Scratch {
    key: Option<TensorKey>,
    y_cols: Vec<ColTap>,
    y_rows: Vec<RowTap>,
    c_cols: Vec<ColTap>,
    c_rows: Vec<RowTap>,
    row_a: Vec<f32>,
    row_b: Vec<f32>,
    row_c: Vec<f32>,
    blend_a: Vec<u16>,
    blend_b: Vec<u16>,
    blend_c: Vec<u16>,
    norm: NormRows,
    decoded: Decoded,
    gray_key: Option<(Layout, u32, u32)>,
    gray_cols: Vec<(u32, u32)>,
    gray_rows: Vec<(u32, u32)>,
    gray_acc: Vec<u32>,
    gray_luma: Vec<u8>,
    gray_jpeg: Vec<u8>,
}

impl Scratch {
    /// Empty scratch; buffers grow on first use.
    pub fn new() -> Scratch {
        Scratch::default()
    }
}

/// Refuses a frame whose declared size is over [`MAX_FRAME_SIDE`] or, for raw formats, more
/// than its data holds — before anything (taps, row tables) is sized from that declaration.
fn check_size(frame: &Frame) -> Result<(), PreprocessError> {
    let (w, h) = (frame.width, frame.height);
    if w > MAX_FRAME_SIDE || h > MAX_FRAME_SIDE {
        return Err(PreprocessError::TooLarge {
            seq: frame.seq,
            width: w,
            height: h,
        });
    }
    match frame.format.frame_len(w, h) {
        Some(need) if frame.data.len() < need => Err(PreprocessError::ShortFrame {
            seq: frame.seq,
            format: frame.format,
            width: w,
            height: h,
            expected: need,
            found: frame.data.len(),
        }),
        _ => Ok(()),
    }
}

/// Checks a raw frame's length, or decodes an MJPEG frame into `scratch.decoded` (once per
/// frame), and returns the layout to sample plus the buffer holding the samples.
fn prepare<'a>(
    frame: &'a Frame,
    decoded: &'a mut Decoded,
) -> Result<(Layout, &'a [u8]), PreprocessError> {
    let (w, h) = (frame.width, frame.height);
    if frame.format != PixelFormat::Mjpeg {
        check_size(frame)?;
        return Ok((layout(frame.format, w, h), &frame.data));
    }
    let key = DecodedKey::of(frame);
    if decoded.key != Some(key) {
        decoded.key = None;
        jpeg::decode_frame(frame, &mut decoded.rgb, jpeg::Output::Rgb)?;
        decoded.key = Some(key);
    }
    Ok((Layout::Rgb { w, h }, &decoded.rgb))
}

/// Any [`Frame`] → NCHW BGR normalized tensor of `3 × input_h × input_w` floats in `out`, in
/// one pass over the output (see the module documentation). Returns the [`Mapping`] for
/// boxes. `scratch` keeps taps and buffers between calls.
///
/// # Errors
/// A frame over [`MAX_FRAME_SIDE`] per side or shorter than its format needs, an MJPEG frame that does not decode or whose size
/// differs from the frame's, a zero size, or an `out` of the wrong length.
pub fn frame_to_tensor(
    frame: &Frame,
    input_w: u32,
    input_h: u32,
    mode: ResizeMode,
    out: &mut [f32],
    scratch: &mut Scratch,
) -> Result<Mapping, PreprocessError> {
    frame_to_elems(
        frame,
        input_w,
        input_h,
        mode,
        out,
        Quantization::NONE,
        scratch,
    )
}

/// Any [`Frame`] → packed 8-bit RGB at the frame's own size, for pictures of it (snapshots):
/// an MJPEG frame is decoded, RGB copied, the YUV formats converted by the same BT.601 path
/// as the model's input (sampled 1:1, then the normalization undone).
///
/// # Errors
/// As [`frame_to_tensor`].
pub fn frame_to_rgb(frame: &Frame, scratch: &mut Scratch) -> Result<Vec<u8>, PreprocessError> {
    let (w, h) = (frame.width as usize, frame.height as usize);
    // MJPEG (decoded once, checked against the frame's size) and RGB: packed RGB already.
    if let (Layout::Rgb { .. }, data) = prepare(frame, &mut scratch.decoded)? {
        return Ok(data[..w * h * 3].to_vec());
    }
    let plane = w * h;
    let mut t = vec![0f32; 3 * plane];
    frame_to_tensor(
        frame,
        frame.width,
        frame.height,
        ResizeMode::Stretch,
        &mut t,
        scratch,
    )?;
    let mut rgb = vec![0u8; 3 * plane];
    for (i, px) in rgb.chunks_exact_mut(3).enumerate() {
        // The tensor is BGR planes; RGB out.
        for (c, bgr) in [2usize, 1, 0].into_iter().enumerate() {
            let v = t[bgr * plane + i] * STD_BGR[bgr] + MEAN_BGR[bgr];
            px[c] = v.round().clamp(0.0, 255.0) as u8;
        }
    }
    Ok(rgb)
}

/// [`frame_to_tensor`] into `out` in the model's input type: for an int8 model each value is
/// quantized as it is written (the graph's input quantization, done here: same float, same
/// rounding, so the same bytes).
///
/// # Errors
/// As [`frame_to_tensor`].
pub fn frame_to_input(
    frame: &Frame,
    input_w: u32,
    input_h: u32,
    mode: ResizeMode,
    out: &mut ModelInput,
    scratch: &mut Scratch,
) -> Result<Mapping, PreprocessError> {
    match out {
        ModelInput::F32(v) => frame_to_tensor(frame, input_w, input_h, mode, v, scratch),
        ModelInput::I8(v, q) => frame_to_elems(frame, input_w, input_h, mode, v, *q, scratch),
    }
}

/// [`frame_to_tensor`] for either element type.
fn frame_to_elems<T: Store>(
    frame: &Frame,
    input_w: u32,
    input_h: u32,
    mode: ResizeMode,
    out: &mut [T],
    q: Quantization,
    scratch: &mut Scratch,
) -> Result<Mapping, PreprocessError> {
    check_tensor_args(frame, input_w, input_h, out.len())?;
    let (w, h) = (frame.width, frame.height);
    let map = Mapping::new(w, h, input_w, input_h, mode);
    let (x_off, y_off) = (map.pad_x as usize, map.pad_y as usize);
    let inner_w = ((w as f32 * map.scale_x).round() as usize).min(input_w as usize - x_off);
    let inner_h = ((h as f32 * map.scale_y).round() as usize).min(input_h as usize - y_off);
    let lay = layout(frame.format, w, h);
    scratch.set_taps(
        TensorKey {
            layout: lay,
            input_w,
            input_h,
            mode,
        },
        inner_w,
        inner_h,
    );
    let plane = input_w as usize * input_h as usize;
    let (out_b, rest) = out.split_at_mut(plane);
    let (out_g, out_r) = rest.split_at_mut(plane);
    let mut outs = [out_b, out_g, out_r];
    let iw = input_w as usize;
    fill_padding(&mut outs, iw, (x_off, y_off), (inner_w, inner_h), q);
    scratch.fuse(frame, lay, outs, iw, (x_off, y_off), q)?;
    Ok(map)
}

/// The checks of [`frame_to_tensor`]'s arguments: no zero size, a frame its format's size
/// fits, an output of `3 × input_w × input_h` floats.
fn check_tensor_args(
    frame: &Frame,
    input_w: u32,
    input_h: u32,
    out_len: usize,
) -> Result<(), PreprocessError> {
    let (w, h) = (frame.width, frame.height);
    if w == 0 || h == 0 || input_w == 0 || input_h == 0 {
        return Err(PreprocessError::ZeroSize {
            seq: frame.seq,
            width: w,
            height: h,
            input_w,
            input_h,
        });
    }
    check_size(frame)?;
    let plane = input_w as usize * input_h as usize;
    if out_len != 3 * plane {
        return Err(PreprocessError::BadOutput {
            expected: 3 * plane,
            found: out_len,
        });
    }
    Ok(())
}

/// Fills the padding of each output plane (the bands outside the `inner` image placed at
/// `off`; rows of `iw` values) with the value black normalizes (and quantizes) to.
fn fill_padding<T: Store>(
    outs: &mut [&mut [T]; 3],
    iw: usize,
    (x_off, y_off): (usize, usize),
    (inner_w, inner_h): (usize, usize),
    q: Quantization,
) {
    for (c, o) in outs.iter_mut().enumerate() {
        let pad = T::store(-MEAN_BGR[c] / STD_BGR[c], q);
        for (y, row) in o.chunks_exact_mut(iw).enumerate() {
            if y < y_off || y >= y_off + inner_h {
                row.fill(pad);
            } else {
                row[..x_off].fill(pad);
                row[x_off + inner_w..].fill(pad);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_colour_normalizes_exactly_and_pads_black() {
        let (w, h) = (64u32, 32u32);
        let rgb: Vec<u8> = (0..w * h).flat_map(|_| [200u8, 100, 50]).collect();
        let mut out = vec![0.0; 3 * 32 * 32];
        rgb_to_tensor(&rgb, w, h, 32, 32, ResizeMode::Letterbox, &mut out).unwrap();
        let plane = 32 * 32;
        let at = |c: usize, y: usize, x: usize| out[c * plane + y * 32 + x];
        // row 16 is inside the image: B=50, G=100, R=200
        assert!((at(0, 16, 5) - (50.0 - MEAN_BGR[0]) / STD_BGR[0]).abs() < 1e-4);
        assert!((at(2, 16, 5) - (200.0 - MEAN_BGR[2]) / STD_BGR[2]).abs() < 1e-4);
        // row 0 is padding (image is 32x16 centred at rows 8..24)
        assert!((at(1, 0, 5) + MEAN_BGR[1] / STD_BGR[1]).abs() < 1e-4);
    }

    #[test]
    fn short_buffers_are_errors() {
        let mut out = vec![0.0; 3 * 16];
        assert!(rgb_to_tensor(&[0; 10], 4, 4, 4, 4, ResizeMode::Stretch, &mut out).is_err());
        assert!(rgb_to_tensor(&[0; 48], 4, 4, 8, 8, ResizeMode::Stretch, &mut out).is_err());
    }
}
