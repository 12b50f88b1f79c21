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
//! with the same scratch reuses the decoded image. All per-frame buffers live in [`Scratch`],
//! so after the first frame of a given geometry the raw-format paths allocate nothing
//! (zune-jpeg allocates internally per decode).

use std::time::Duration;

use crate::frame::{Frame, GrayImage, PixelFormat, MAX_FRAME_SIDE};
pub use crate::geom::{Mapping, ResizeMode};

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

/// Precomputed bilinear taps along one axis: for each output coordinate, the two source
/// indices and the weight of the second one (fixed point, 0..=256).
#[derive(Clone, Debug)]
pub struct Taps {
    /// First source index per output coordinate.
    pub i0: Vec<u32>,
    /// Second source index per output coordinate.
    pub i1: Vec<u32>,
    /// Weight of `i1` in 1/256 units.
    pub w1: Vec<u16>,
}

impl Taps {
    /// Taps for `out_len` output samples covering `src_len` source samples (pixel centres
    /// aligned, edges clamped).
    pub fn new(src_len: u32, out_len: u32) -> Taps {
        let scale = src_len as f32 / out_len.max(1) as f32;
        let last = src_len.saturating_sub(1);
        let mut t = Taps {
            i0: Vec::new(),
            i1: Vec::new(),
            w1: Vec::new(),
        };
        for o in 0..out_len {
            let x = ((o as f32 + 0.5) * scale - 0.5).max(0.0);
            let i0 = (x.floor() as u32).min(last);
            let frac = x - i0 as f32;
            t.i0.push(i0);
            t.i1.push((i0 + 1).min(last));
            t.w1.push((frac.clamp(0.0, 1.0) * 256.0).round() as u16);
        }
        t
    }
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

/// BT.601 limited-range YCbCr → RGB coefficients (see the module documentation).
const YUV_Y: f32 = 1.164_383;
const YUV_RV: f32 = 1.596_027;
const YUV_GU: f32 = -0.391_762;
const YUV_GV: f32 = -0.812_968;
const YUV_BU: f32 = 2.017_232;

/// One output column's two source samples as byte offsets within a source row, and the
/// weight of the second (1/256 units).
#[derive(Clone, Copy, Debug, Default)]
struct ColTap {
    o0: u32,
    o1: u32,
    w1: u32,
}

/// One output row's two source rows as byte offsets into the frame, and the weight of the
/// second (1/256 units).
#[derive(Clone, Copy, Debug, Default)]
struct RowTap {
    r0: u32,
    r1: u32,
    w1: u32,
}

/// Where one sampled channel lives in a frame buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PlaneGeom {
    /// Byte offset of the plane (its first row).
    base: usize,
    /// Byte offset of the first sample within a row (packed formats interleave channels).
    first: usize,
    /// Bytes between rows.
    stride: usize,
    /// Bytes between horizontally adjacent samples.
    step: usize,
    /// Samples per row.
    width: u32,
    /// Rows.
    height: u32,
}

impl PlaneGeom {
    fn taps(&self, inner_w: usize, inner_h: usize, cols: &mut Vec<ColTap>, rows: &mut Vec<RowTap>) {
        let tx = Taps::new(self.width, inner_w as u32);
        let ty = Taps::new(self.height, inner_h as u32);
        cols.clear();
        cols.extend((0..inner_w).map(|i| ColTap {
            o0: (self.first + tx.i0[i] as usize * self.step) as u32,
            o1: (self.first + tx.i1[i] as usize * self.step) as u32,
            w1: tx.w1[i] as u32,
        }));
        rows.clear();
        rows.extend((0..inner_h).map(|i| RowTap {
            r0: (self.base + ty.i0[i] as usize * self.stride) as u32,
            r1: (self.base + ty.i1[i] as usize * self.stride) as u32,
            w1: ty.w1[i] as u32,
        }));
    }
}

/// How the samples of a format are laid out: luma plus optional chroma, or packed RGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Y, and Cb/Cr (`None` = grey): Cb's geometry, then Cr's `base` and `first` (Cr
    /// shares Cb's stride, step and size).
    Yuv {
        y: PlaneGeom,
        chroma: Option<(PlaneGeom, usize, usize)>,
    },
    /// Packed R, G, B bytes.
    Rgb { w: u32, h: u32 },
}

fn layout(format: PixelFormat, w: u32, h: u32) -> Layout {
    let (wu, hu) = (w as usize, h as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let y_plane = PlaneGeom {
        base: 0,
        first: 0,
        stride: wu,
        step: 1,
        width: w,
        height: h,
    };
    match format {
        PixelFormat::Yuyv | PixelFormat::Uyvy => {
            let stride = cw as usize * 4;
            let (yo, uo, vo) = if format == PixelFormat::Yuyv {
                (0, 1, 3)
            } else {
                (1, 0, 2)
            };
            Layout::Yuv {
                y: PlaneGeom {
                    base: 0,
                    first: yo,
                    stride,
                    step: 2,
                    width: w,
                    height: h,
                },
                chroma: Some((
                    PlaneGeom {
                        base: 0,
                        first: uo,
                        stride,
                        step: 4,
                        width: cw,
                        height: h,
                    },
                    0,
                    vo,
                )),
            }
        }
        PixelFormat::Nv12 => {
            let c = PlaneGeom {
                base: wu * hu,
                first: 0,
                stride: cw as usize * 2,
                step: 2,
                width: cw,
                height: ch,
            };
            Layout::Yuv {
                y: y_plane,
                chroma: Some((c, wu * hu, 1)),
            }
        }
        PixelFormat::Yu12 => {
            let c = PlaneGeom {
                base: wu * hu,
                first: 0,
                stride: cw as usize,
                step: 1,
                width: cw,
                height: ch,
            };
            Layout::Yuv {
                y: y_plane,
                chroma: Some((c, wu * hu + cw as usize * ch as usize, 0)),
            }
        }
        PixelFormat::Yuv422p => {
            let c = PlaneGeom {
                base: wu * hu,
                first: 0,
                stride: cw as usize,
                step: 1,
                width: cw,
                height: h,
            };
            Layout::Yuv {
                y: y_plane,
                chroma: Some((c, wu * hu + cw as usize * hu, 0)),
            }
        }
        PixelFormat::Grey => Layout::Yuv {
            y: y_plane,
            chroma: None,
        },
        PixelFormat::Rgb24 | PixelFormat::Mjpeg => Layout::Rgb { w, h },
    }
}

/// The geometry a set of taps was computed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TensorKey {
    layout: Layout,
    input_w: u32,
    input_h: u32,
    mode: ResizeMode,
}

/// Identity of the frame whose JPEG is decoded in [`Scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DecodedKey {
    seq: u64,
    captured_at: Duration,
    len: usize,
}

/// The decoded RGB of the last MJPEG frame.
#[derive(Debug, Default)]
struct Decoded {
    key: Option<DecodedKey>,
    rgb: Vec<u8>,
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
    let key = DecodedKey {
        seq: frame.seq,
        captured_at: frame.captured_at,
        len: frame.data.len(),
    };
    if decoded.key != Some(key) {
        decoded.key = None;
        let (dw, dh) = decode_jpeg_rgb(&frame.data, &mut decoded.rgb).map_err(|message| {
            PreprocessError::Decode {
                seq: frame.seq,
                message,
            }
        })?;
        if (dw, dh) != (w, h) {
            return Err(PreprocessError::JpegSize {
                seq: frame.seq,
                width: w,
                height: h,
                found_w: dw,
                found_h: dh,
            });
        }
        decoded.key = Some(key);
    }
    Ok((Layout::Rgb { w, h }, &decoded.rgb))
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

impl Scratch {
    /// Taps depend only on geometry: recomputes them (and sizes the row buffers) when `key`
    /// differs from the last call's.
    fn set_taps(&mut self, key: TensorKey, inner_w: usize, inner_h: usize) {
        if self.key == Some(key) {
            return;
        }
        match key.layout {
            Layout::Yuv { y, chroma } => {
                y.taps(inner_w, inner_h, &mut self.y_cols, &mut self.y_rows);
                if let Some((c, _, _)) = chroma {
                    c.taps(inner_w, inner_h, &mut self.c_cols, &mut self.c_rows);
                }
            }
            Layout::Rgb { w, h } => {
                let g = PlaneGeom {
                    base: 0,
                    first: 0,
                    stride: w as usize * 3,
                    step: 3,
                    width: w,
                    height: h,
                };
                g.taps(inner_w, inner_h, &mut self.y_cols, &mut self.y_rows);
            }
        }
        self.row_a.resize(inner_w, 0.0);
        self.row_b.resize(inner_w, 0.0);
        self.row_c.resize(inner_w, 0.0);
        self.key = Some(key);
    }

    /// Samples the image part of the tensor with the taps of [`Scratch::set_taps`]: the fused
    /// colour-convert + resize + normalize loops ([`fused_yuv`], [`fused_rgb`]).
    fn fuse<T: Store>(
        &mut self,
        frame: &Frame,
        lay: Layout,
        outs: [&mut [T]; 3],
        iw: usize,
        (x_off, y_off): (usize, usize),
        q: Quantization,
    ) -> Result<(), PreprocessError> {
        // Split borrows: the sample buffer may live in scratch (decoded MJPEG).
        let mut rows = (
            std::mem::take(&mut self.row_a),
            std::mem::take(&mut self.row_b),
            std::mem::take(&mut self.row_c),
        );
        let mut blends = (
            std::mem::take(&mut self.blend_a),
            std::mem::take(&mut self.blend_b),
            std::mem::take(&mut self.blend_c),
        );
        let mut norm = std::mem::take(&mut self.norm);
        let result = prepare(frame, &mut self.decoded).map(|(_, data)| {
            let taps = (&self.y_cols, &self.y_rows, &self.c_cols, &self.c_rows);
            match lay {
                Layout::Yuv { y, chroma } => {
                    let planes = YuvPlanes { y, chroma };
                    fused_yuv(
                        data,
                        planes,
                        taps,
                        &mut rows,
                        &mut blends,
                        &mut norm,
                        outs,
                        iw,
                        (x_off, y_off),
                        q,
                    )
                }
                Layout::Rgb { w, .. } => fused_rgb(
                    data,
                    w as usize * 3,
                    taps.0,
                    taps.1,
                    &mut rows,
                    &mut blends.0,
                    &mut norm,
                    outs,
                    iw,
                    (x_off, y_off),
                    q,
                ),
            }
        });
        self.row_a = rows.0;
        self.row_b = rows.1;
        self.row_c = rows.2;
        self.blend_a = blends.0;
        self.blend_b = blends.1;
        self.blend_c = blends.2;
        self.norm = norm;
        result
    }
}

/// Vertical pass: `out[i] = a[i]·(256−w1) + b[i]·w1` for one pair of source rows of `len`
/// bytes (contiguous, so the compiler vectorizes it). Values fit u16 (≤ 255·256).
#[inline(always)]
fn vblend(data: &[u8], r: RowTap, len: usize, out: &mut Vec<u16>) {
    out.resize(len, 0);
    let a = &data[r.r0 as usize..r.r0 as usize + len];
    let b = &data[r.r1 as usize..r.r1 as usize + len];
    let (w0, w1) = ((256 - r.w1) as u16, r.w1 as u16);
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = x as u16 * w0 + y as u16 * w1;
    }
}

/// Horizontal pass on a vertically blended row: the bilinear sample in 1/65536 units.
#[inline(always)]
fn hblend(row: &[u16], c: ColTap, delta: u32) -> u32 {
    row[(c.o0 + delta) as usize] as u32 * (256 - c.w1) + row[(c.o1 + delta) as usize] as u32 * c.w1
}

type TapRefs<'a> = (
    &'a Vec<ColTap>,
    &'a Vec<RowTap>,
    &'a Vec<ColTap>,
    &'a Vec<RowTap>,
);

/// The planes of a YUV layout.
struct YuvPlanes {
    y: PlaneGeom,
    chroma: Option<(PlaneGeom, usize, usize)>,
}

/// YUV (or grey) → tensor rows. Per output row: a vectorized vertical blend of the source rows
/// each plane needs (packed formats blend one row for all three channels; NV12 one row for
/// both chroma channels), a horizontal gather-and-blend per channel into f32 rows, then a
/// contiguous convert-and-normalize loop.
#[allow(clippy::too_many_arguments)]
fn fused_yuv<T: Store>(
    data: &[u8],
    planes: YuvPlanes,
    (y_cols, y_rows, c_cols, c_rows): TapRefs<'_>,
    (ry, ru, rv): &mut (Vec<f32>, Vec<f32>, Vec<f32>),
    (by, bu, bv): &mut (Vec<u16>, Vec<u16>, Vec<u16>),
    [nb, ng, nr]: &mut NormRows,
    [out_b, out_g, out_r]: [&mut [T]; 3],
    iw: usize,
    (x_off, y_off): (usize, usize),
    q: Quantization,
) {
    const INV: f32 = 1.0 / 65536.0;
    let inv_std: [f32; 3] = std::array::from_fn(|c| 1.0 / STD_BGR[c]);
    let bias: [f32; 3] = std::array::from_fn(|c| -MEAN_BGR[c] / STD_BGR[c]);
    let inner_w = y_cols.len();
    let y = planes.y;
    for (oy, &yr) in y_rows.iter().enumerate() {
        vblend(data, yr, y.stride, by);
        for (dst, &c) in ry.iter_mut().zip(y_cols.iter()) {
            *dst = hblend(by, c, 0) as f32 * INV - 16.0;
        }
        match planes.chroma {
            Some((u, v_base, v_first)) => {
                let cr = c_rows[oy];
                // Cb shares the luma row when interleaved with it (YUYV, UYVY).
                let shared_with_y =
                    u.base == y.base && u.stride == y.stride && u.height == y.height;
                if !shared_with_y {
                    vblend(data, cr, u.stride, bu);
                }
                let u_row: &[u16] = if shared_with_y { by } else { bu };
                // Cr shares Cb's row when interleaved with it (YUYV, UYVY, NV12).
                let v_row: &[u16] = if v_base == u.base {
                    u_row
                } else {
                    let vr = RowTap {
                        r0: cr.r0 - u.base as u32 + v_base as u32,
                        r1: cr.r1 - u.base as u32 + v_base as u32,
                        w1: cr.w1,
                    };
                    vblend(data, vr, u.stride, bv);
                    bv
                };
                let dv = (v_first - u.first) as u32;
                for ((du, dvv), &c) in ru.iter_mut().zip(rv.iter_mut()).zip(c_cols.iter()) {
                    *du = hblend(u_row, c, 0) as f32 * INV - 128.0;
                    *dvv = hblend(v_row, c, dv) as f32 * INV - 128.0;
                }
            }
            None => {
                ru.fill(0.0);
                rv.fill(0.0);
            }
        }
        let start = (oy + y_off) * iw + x_off;
        let ob = &mut out_b[start..start + inner_w];
        let og = &mut out_g[start..start + inner_w];
        let or = &mut out_r[start..start + inner_w];
        let (fb, fg, fr) = (T::floats(ob, nb), T::floats(og, ng), T::floats(or, nr));
        for i in 0..inner_w {
            let (y, u, v) = (ry[i] * YUV_Y, ru[i], rv[i]);
            let r = (y + YUV_RV * v).clamp(0.0, 255.0);
            let g = (y + YUV_GU * u + YUV_GV * v).clamp(0.0, 255.0);
            let b = (y + YUV_BU * u).clamp(0.0, 255.0);
            fr[i] = r * inv_std[2] + bias[2];
            fg[i] = g * inv_std[1] + bias[1];
            fb[i] = b * inv_std[0] + bias[0];
        }
        T::finish(nb, ob, q);
        T::finish(ng, og, q);
        T::finish(nr, or, q);
    }
}

/// Packed RGB → tensor rows (also the path of decoded MJPEG): vertical blend of the RGB row,
/// horizontal gather per channel, normalize.
#[allow(clippy::too_many_arguments)]
fn fused_rgb<T: Store>(
    data: &[u8],
    row_len: usize,
    cols: &[ColTap],
    rows: &[RowTap],
    (rr, rg, rb): &mut (Vec<f32>, Vec<f32>, Vec<f32>),
    blend: &mut Vec<u16>,
    [nb, ng, nr]: &mut NormRows,
    [out_b, out_g, out_r]: [&mut [T]; 3],
    iw: usize,
    (x_off, y_off): (usize, usize),
    q: Quantization,
) {
    let a: [f32; 3] = std::array::from_fn(|c| 1.0 / (STD_BGR[c] * 65536.0));
    let bias: [f32; 3] = std::array::from_fn(|c| -MEAN_BGR[c] / STD_BGR[c]);
    let inner_w = cols.len();
    for (oy, &r) in rows.iter().enumerate() {
        vblend(data, r, row_len, blend);
        for (((dr, dg), db), &c) in rr
            .iter_mut()
            .zip(rg.iter_mut())
            .zip(rb.iter_mut())
            .zip(cols.iter())
        {
            *dr = hblend(blend, c, 0) as f32;
            *dg = hblend(blend, c, 1) as f32;
            *db = hblend(blend, c, 2) as f32;
        }
        let start = (oy + y_off) * iw + x_off;
        let ob = &mut out_b[start..start + inner_w];
        let og = &mut out_g[start..start + inner_w];
        let or = &mut out_r[start..start + inner_w];
        let (fb, fg, fr) = (T::floats(ob, nb), T::floats(og, ng), T::floats(or, nr));
        for i in 0..inner_w {
            fr[i] = rr[i] * a[2] + bias[2];
            fg[i] = rg[i] * a[1] + bias[1];
            fb[i] = rb[i] * a[0] + bias[0];
        }
        T::finish(nb, ob, q);
        T::finish(ng, og, q);
        T::finish(nr, or, q);
    }
}

/// A downscaled luma plane of any [`Frame`] for tracking: at most `max_width` pixels wide,
/// the aspect ratio kept, each gray pixel the average of the frame pixels it covers (area
/// average). YUV formats read Y directly (limited-range values, as the camera sends them);
/// RGB and MJPEG use `(77·R + 150·G + 29·B) / 256` (BT.601 luma). `out.scale` is frame
/// pixels per gray pixel. MJPEG frames reuse a decode already done by [`frame_to_tensor`]
/// with the same scratch.
///
/// # Errors
/// A frame over [`MAX_FRAME_SIDE`] per side or shorter than its format needs, an MJPEG frame that does not decode, a zero size.
pub fn frame_to_gray(
    frame: &Frame,
    max_width: u32,
    out: &mut GrayImage,
    scratch: &mut Scratch,
) -> Result<(), PreprocessError> {
    let (w, h) = (frame.width, frame.height);
    if w == 0 || h == 0 || max_width == 0 {
        return Err(PreprocessError::ZeroSize {
            seq: frame.seq,
            width: w,
            height: h,
            input_w: max_width,
            input_h: 0,
        });
    }
    check_size(frame)?;
    let gw = w.min(max_width);
    let scale = w as f32 / gw as f32;
    let gh = ((h as f32 / scale).round() as u32).clamp(1, h);
    let lay = layout(frame.format, w, h);
    if scratch.gray_key != Some((lay, gw, gh)) {
        let ranges = |src: u32, dst: u32| -> Vec<(u32, u32)> {
            (0..dst)
                .map(|i| {
                    let a = (i as u64 * src as u64 / dst as u64) as u32;
                    let b = (((i + 1) as u64 * src as u64 / dst as u64) as u32)
                        .max(a + 1)
                        .min(src);
                    (a, b)
                })
                .collect()
        };
        scratch.gray_cols = ranges(w, gw);
        scratch.gray_rows = ranges(h, gh);
        scratch.gray_key = Some((lay, gw, gh));
    }
    let mut cols = std::mem::take(&mut scratch.gray_cols);
    let mut rows = std::mem::take(&mut scratch.gray_rows);
    let mut acc = std::mem::take(&mut scratch.gray_acc);
    let mut luma = std::mem::take(&mut scratch.gray_luma);
    let result = prepare(frame, &mut scratch.decoded).map(|(lay, data)| {
        out.width = gw;
        out.height = gh;
        out.scale = scale;
        out.data.clear();
        out.data.reserve(gw as usize * gh as usize);
        acc.resize(gw as usize, 0);
        let (offset, stride, step) = match lay {
            Layout::Yuv { y, .. } => (y.base + y.first, y.stride, y.step),
            Layout::Rgb { .. } => (0, w as usize, 1),
        };
        for &(r0, r1) in rows.iter() {
            acc.fill(0);
            for r in r0..r1 {
                let row: &[u8] = match lay {
                    Layout::Yuv { .. } => &data[offset + r as usize * stride..],
                    Layout::Rgb { .. } => {
                        let src = &data[r as usize * w as usize * 3..][..w as usize * 3];
                        luma.clear();
                        luma.extend(src.chunks_exact(3).map(|p| {
                            ((77 * p[0] as u32 + 150 * p[1] as u32 + 29 * p[2] as u32) >> 8) as u8
                        }));
                        &luma
                    }
                };
                for (a, &(c0, c1)) in acc.iter_mut().zip(cols.iter()) {
                    let mut s = 0u32;
                    for c in c0..c1 {
                        s += row[c as usize * step] as u32;
                    }
                    *a += s;
                }
            }
            let nrows = r1 - r0;
            for (&a, &(c0, c1)) in acc.iter().zip(cols.iter()) {
                let n = nrows * (c1 - c0);
                out.data.push(((a + n / 2) / n) as u8);
            }
        }
    });
    scratch.gray_cols = std::mem::take(&mut cols);
    scratch.gray_rows = std::mem::take(&mut rows);
    scratch.gray_acc = acc;
    scratch.gray_luma = luma;
    result
}

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
