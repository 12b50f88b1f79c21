//! Every pixel format through `frame_to_tensor`, against an independent reference: a smooth RGB
//! image is encoded into the format here (with this file's own BT.601 limited-range forward
//! transform and box-averaged chroma), converted back by the fused path, and compared with
//! `rgb_to_tensor` on the original RGB.
//!
//! Tolerances are in 8-bit pixel levels (the tensor difference times the channel's std):
//! RGB24 is the same arithmetic (≤ 0.01); GREY only quantizes Y (≤ 1); 4:2:2 and 4:2:0 add
//! chroma quantization and subsampling on a smooth image (≤ 2.5 and ≤ 4.5, the stretch case
//! being the worst); MJPEG at quality 95 adds JPEG loss (≤ 4). Mean errors are held to
//! ≤ 0.5 level (≤ 0.01 for RGB24). Measured when written: GREY 0.49, 4:2:2 1.3, 4:2:0 3.5,
//! MJPEG 2.0 levels max.

use lookout::detect::int8::quant::quantize_portable;
use lookout::frame::{Frame, GrayImage, PixelFormat};
use lookout::preprocess::{
    frame_to_gray, frame_to_input, frame_to_tensor, rgb_to_input, rgb_to_tensor, ModelInput,
    PreprocessError, Quantization, ResizeMode, Scratch, STD_BGR,
};

const W: u32 = 96;
const H: u32 = 64;
const IN: u32 = 48;

/// A smooth, colourful test image (low-frequency gradients and waves, all in gamut).
fn smooth_rgb(w: u32, h: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
            let r = 40.0 + 170.0 * fx;
            let g = 128.0 + 90.0 * (fy * std::f32::consts::PI * 1.5).sin();
            let b = 60.0 + 120.0 * (0.5 + 0.5 * ((fx + fy) * 4.0).cos());
            v.extend([r, g, b].map(|c| c.round().clamp(0.0, 255.0) as u8));
        }
    }
    v
}

/// BT.601 limited range, forward: RGB → (Y, Cb, Cr) as floats.
fn to_ycbcr(p: &[u8]) -> (f32, f32, f32) {
    let (r, g, b) = (p[0] as f32, p[1] as f32, p[2] as f32);
    let y = 16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0;
    let cb = 128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0;
    let cr = 128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0;
    (y, cb, cr)
}

fn q(v: f32) -> u8 {
    v.round().clamp(0.0, 255.0) as u8
}

/// Y plane and chroma planes averaged over `sx × sy` boxes.
fn planes(rgb: &[u8], w: u32, h: u32, sx: u32, sy: u32) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (w, h) = (w as usize, h as usize);
    let px: Vec<(f32, f32, f32)> = rgb.chunks_exact(3).map(to_ycbcr).collect();
    let y = px.iter().map(|p| q(p.0)).collect();
    let (cw, ch) = (w.div_ceil(sx as usize), h.div_ceil(sy as usize));
    let (mut u, mut v) = (Vec::new(), Vec::new());
    for cy in 0..ch {
        for cx in 0..cw {
            let (mut su, mut sv, mut n) = (0.0, 0.0, 0.0);
            for yy in cy * sy as usize..((cy + 1) * sy as usize).min(h) {
                for xx in cx * sx as usize..((cx + 1) * sx as usize).min(w) {
                    su += px[yy * w + xx].1;
                    sv += px[yy * w + xx].2;
                    n += 1.0;
                }
            }
            u.push(q(su / n));
            v.push(q(sv / n));
        }
    }
    (y, u, v)
}

fn encode(rgb: &[u8], w: u32, h: u32, format: PixelFormat) -> Vec<u8> {
    match format {
        PixelFormat::Rgb24 => rgb.to_vec(),
        PixelFormat::Grey => planes(rgb, w, h, 1, 1).0,
        PixelFormat::Yuyv | PixelFormat::Uyvy => {
            let (y, u, v) = planes(rgb, w, h, 2, 1);
            let cw = (w / 2) as usize;
            let mut out = Vec::new();
            for row in 0..h as usize {
                for c in 0..cw {
                    let (y0, y1) = (y[row * w as usize + 2 * c], y[row * w as usize + 2 * c + 1]);
                    let (cb, cr) = (u[row * cw + c], v[row * cw + c]);
                    if format == PixelFormat::Yuyv {
                        out.extend([y0, cb, y1, cr]);
                    } else {
                        out.extend([cb, y0, cr, y1]);
                    }
                }
            }
            out
        }
        PixelFormat::Yuv422p => {
            let (mut y, u, v) = planes(rgb, w, h, 2, 1);
            y.extend(u);
            y.extend(v);
            y
        }
        PixelFormat::Yu12 => {
            let (mut y, u, v) = planes(rgb, w, h, 2, 2);
            y.extend(u);
            y.extend(v);
            y
        }
        PixelFormat::Nv12 => {
            let (mut y, u, v) = planes(rgb, w, h, 2, 2);
            for (a, b) in u.iter().zip(v.iter()) {
                y.extend([*a, *b]);
            }
            y
        }
        PixelFormat::Mjpeg => {
            let mut buf = Vec::new();
            let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut buf, 95);
            let r =
                image::ImageEncoder::write_image(enc, rgb, w, h, image::ExtendedColorType::Rgb8);
            assert!(r.is_ok(), "JPEG encode failed: {r:?}");
            buf
        }
    }
}

fn frame(format: PixelFormat, data: Vec<u8>, w: u32, h: u32) -> Frame {
    Frame {
        seq: 7,
        captured_at: lookout::frame::monotonic_now(),
        width: w,
        height: h,
        format,
        data,
    }
}

/// (max, mean) difference in pixel levels between two tensors.
fn diff_levels(a: &[f32], b: &[f32]) -> (f32, f32) {
    let plane = a.len() / 3;
    let mut max = 0.0f32;
    let mut sum = 0.0f32;
    for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
        let d = (x - y).abs() * STD_BGR[i / plane];
        max = max.max(d);
        sum += d;
    }
    (max, sum / a.len() as f32)
}

fn check(format: PixelFormat, grey_image: bool, max_tol: f32, mean_tol: f32, mode: ResizeMode) {
    let mut rgb = smooth_rgb(W, H);
    if grey_image {
        for p in rgb.chunks_exact_mut(3) {
            let g = p[1];
            p.copy_from_slice(&[g, g, g]);
        }
    }
    let f = frame(format, encode(&rgb, W, H, format), W, H);
    let n = (3 * IN * IN) as usize;
    let (mut got, mut want) = (vec![0.0; n], vec![0.0; n]);
    let mut scratch = Scratch::new();
    let m1 = frame_to_tensor(&f, IN, IN, mode, &mut got, &mut scratch);
    let m2 = rgb_to_tensor(&rgb, W, H, IN, IN, mode, &mut want);
    assert!(m1.is_ok() && m2.is_ok(), "{format}: {m1:?} {m2:?}");
    let (m1, m2) = (m1.ok(), m2.ok());
    assert_eq!(m1, m2, "{format}: mappings differ");
    let (max, mean) = diff_levels(&got, &want);
    eprintln!("{format} {mode:?}: max {max:.3} levels, mean {mean:.3}");
    assert!(
        max <= max_tol && mean <= mean_tol,
        "{format}: max {max} (≤ {max_tol}), mean {mean} (≤ {mean_tol})"
    );
    // A second call with the same scratch (taps reused) gives the same tensor.
    let mut again = vec![0.0; n];
    assert!(frame_to_tensor(&f, IN, IN, mode, &mut again, &mut scratch).is_ok());
    assert_eq!(got, again, "{format}: scratch reuse changed the result");
    // An int8 model's input, quantized as it is written: the bytes of the float tensor
    // quantized afterwards (as the graph's own `QuantizeLinear` did), padding included. The
    // shipped files' input quantization (scale 1/0.0187…, zero point 0), one with a zero
    // point, and one coarse enough to clamp at both ends.
    for (scale, zero_point) in [(53.44f32, 0), (40.0, -9), (100.0, 3)] {
        let quant = Quantization { scale, zero_point };
        let mut want_q = vec![0i8; n];
        quantize_portable(&got, &mut want_q, scale, zero_point);
        let mut got_q = ModelInput::I8(vec![0; n], quant);
        let m3 = frame_to_input(&f, IN, IN, mode, &mut got_q, &mut scratch);
        assert_eq!(m3.ok(), m2, "{format}: int8 mapping differs");
        let mut want_rgb = vec![0i8; n];
        quantize_portable(&want, &mut want_rgb, scale, zero_point);
        let mut got_rgb = ModelInput::I8(vec![0; n], quant);
        let m4 = rgb_to_input(&rgb, W, H, IN, IN, mode, &mut got_rgb);
        assert_eq!(m4.ok(), m2, "{format}: int8 RGB mapping differs");
        assert_eq!(
            got_rgb,
            ModelInput::I8(want_rgb, quant),
            "{format} {mode:?}: int8 RGB input"
        );
        assert_eq!(
            got_q,
            ModelInput::I8(want_q, quant),
            "{format} {mode:?}: int8 input differs from the float one quantized (scale \
             {scale}, zero point {zero_point})"
        );
    }
    let mut floats = ModelInput::F32(vec![0.0; n]);
    assert!(frame_to_input(&f, IN, IN, mode, &mut floats, &mut scratch).is_ok());
    assert_eq!(
        floats,
        ModelInput::F32(got),
        "{format}: float input differs"
    );
}

#[test]
fn rgb24_matches_exactly() {
    check(
        PixelFormat::Rgb24,
        false,
        0.01,
        0.001,
        ResizeMode::Letterbox,
    );
}

#[test]
fn grey_matches() {
    check(PixelFormat::Grey, true, 1.0, 0.5, ResizeMode::Letterbox);
}

#[test]
fn yuyv_matches() {
    check(PixelFormat::Yuyv, false, 2.5, 0.5, ResizeMode::Letterbox);
    check(PixelFormat::Yuyv, false, 2.5, 0.5, ResizeMode::Stretch);
}

#[test]
fn uyvy_matches() {
    check(PixelFormat::Uyvy, false, 2.5, 0.5, ResizeMode::Letterbox);
}

#[test]
fn yuv422p_matches() {
    check(PixelFormat::Yuv422p, false, 2.5, 0.5, ResizeMode::Letterbox);
}

#[test]
fn nv12_matches() {
    check(PixelFormat::Nv12, false, 4.5, 0.5, ResizeMode::Letterbox);
    check(PixelFormat::Nv12, false, 4.5, 0.5, ResizeMode::Stretch);
}

#[test]
fn yu12_matches() {
    check(PixelFormat::Yu12, false, 4.5, 0.5, ResizeMode::Letterbox);
}

#[test]
fn mjpeg_matches() {
    check(PixelFormat::Mjpeg, false, 4.0, 0.5, ResizeMode::Letterbox);
}

#[test]
fn odd_sizes_do_not_panic() {
    for format in [
        PixelFormat::Yuyv,
        PixelFormat::Nv12,
        PixelFormat::Yu12,
        PixelFormat::Yuv422p,
    ] {
        let (w, h) = (33, 17);
        let rgb = smooth_rgb(w + 1, h + 1);
        let len = format.frame_len(w, h).unwrap_or(0);
        let data: Vec<u8> = rgb.iter().copied().cycle().take(len).collect();
        let f = frame(format, data, w, h);
        let mut out = vec![0.0; 3 * 20 * 20];
        let r = frame_to_tensor(
            &f,
            20,
            20,
            ResizeMode::Letterbox,
            &mut out,
            &mut Scratch::new(),
        );
        assert!(r.is_ok(), "{format} {w}x{h}: {r:?}");
        assert!(out.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn short_and_broken_frames_are_errors() {
    let mut out = vec![0.0; 3 * 16 * 16];
    let mut s = Scratch::new();
    let short = frame(PixelFormat::Yuyv, vec![0; 10], 8, 8);
    let e = frame_to_tensor(&short, 16, 16, ResizeMode::Letterbox, &mut out, &mut s);
    assert!(
        matches!(
            e,
            Err(PreprocessError::ShortFrame {
                seq: 7,
                expected: 128,
                found: 10,
                ..
            })
        ),
        "{e:?}"
    );
    let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("frame 7") && msg.contains("YUYV"), "{msg}");

    let junk = frame(
        PixelFormat::Mjpeg,
        vec![0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3],
        8,
        8,
    );
    let e = frame_to_tensor(&junk, 16, 16, ResizeMode::Letterbox, &mut out, &mut s);
    assert!(
        matches!(e, Err(PreprocessError::Decode { seq: 7, .. })),
        "{e:?}"
    );

    let rgb = smooth_rgb(16, 8);
    let wrong_size = frame(
        PixelFormat::Mjpeg,
        encode(&rgb, 16, 8, PixelFormat::Mjpeg),
        32,
        8,
    );
    let e = frame_to_tensor(&wrong_size, 16, 16, ResizeMode::Letterbox, &mut out, &mut s);
    assert!(
        matches!(e, Err(PreprocessError::JpegSize { found_w: 16, .. })),
        "{e:?}"
    );

    let ok = frame(PixelFormat::Grey, vec![0; 64], 8, 8);
    let e = frame_to_tensor(&ok, 16, 16, ResizeMode::Letterbox, &mut [0.0; 5], &mut s);
    assert!(matches!(e, Err(PreprocessError::BadOutput { .. })), "{e:?}");
}

/// The formats whose luma the gray plane reads directly, besides GREY.
const YUV_LAYOUTS: [PixelFormat; 5] = [
    PixelFormat::Yuyv,
    PixelFormat::Uyvy,
    PixelFormat::Nv12,
    PixelFormat::Yu12,
    PixelFormat::Yuv422p,
];

#[test]
fn gray_plane_is_an_area_average_of_y() {
    // Y plane with a known pattern: value = 2·x + y (small enough to stay in u8).
    let (w, h) = (64u32, 48u32);
    let y: Vec<u8> = (0..h)
        .flat_map(|yy| (0..w).map(move |xx| (2 * xx + yy) as u8))
        .collect();
    let mut s = Scratch::new();
    let mut g = GrayImage::default();
    let grey = frame(PixelFormat::Grey, y.clone(), w, h);
    assert!(frame_to_gray(&grey, 32, &mut g, &mut s).is_ok());
    assert_eq!((g.width, g.height), (32, 24));
    assert!((g.scale - 2.0).abs() < 1e-6);
    // 2x2 box at (gx, gy): mean of 2x+y over x∈{2gx,2gx+1}, y∈{2gy,2gy+1} = 4gx+1 + 2gy+0.5
    for gy in 0..24u32 {
        for gx in 0..32u32 {
            let want = (4 * gx + 2 * gy) as f32 + 1.5;
            let got = g.data[(gy * 32 + gx) as usize] as f32;
            assert!((got - want).abs() <= 0.5, "({gx},{gy}): {got} vs {want}");
        }
    }
    // Every YUV layout reads the same Y plane directly.
    let rgb = smooth_rgb(w, h);
    let reference = {
        let f = frame(
            PixelFormat::Grey,
            encode(&rgb, w, h, PixelFormat::Grey),
            w,
            h,
        );
        let mut g = GrayImage::default();
        assert!(frame_to_gray(&f, 40, &mut g, &mut Scratch::new()).is_ok());
        g
    };
    for format in YUV_LAYOUTS {
        let f = frame(format, encode(&rgb, w, h, format), w, h);
        let mut g = GrayImage::default();
        assert!(frame_to_gray(&f, 40, &mut g, &mut s).is_ok());
        assert_eq!(
            (g.width, g.height),
            (reference.width, reference.height),
            "{format}"
        );
        assert_eq!(g.data, reference.data, "{format}");
    }
    // Exactly half the width (the paired paths, in blocks of 16 and a rest): every layout
    // gives the rounded mean of each 2×2 box of its Y plane, computed here the plain way.
    for (w, h) in [(w, h), (70, 46), (30, 10), (2, 2)] {
        let rgb = smooth_rgb(w, h);
        let y_plane = encode(&rgb, w, h, PixelFormat::Grey);
        let halves: Vec<u8> = (0..h / 2)
            .flat_map(|gy| (0..w / 2).map(move |gx| (gx, gy)))
            .map(|(gx, gy)| {
                let at = |x: u32, y: u32| y_plane[(y * w + x) as usize] as u32;
                let (x, y) = (2 * gx, 2 * gy);
                ((at(x, y) + at(x + 1, y) + at(x, y + 1) + at(x + 1, y + 1) + 2) / 4) as u8
            })
            .collect();
        for format in std::iter::once(PixelFormat::Grey).chain(YUV_LAYOUTS) {
            let f = frame(format, encode(&rgb, w, h, format), w, h);
            let mut g = GrayImage::default();
            assert!(frame_to_gray(&f, w / 2, &mut g, &mut Scratch::new()).is_ok());
            assert_eq!((g.width, g.height), (w / 2, h / 2), "{format} {w}x{h}");
            assert_eq!(g.data, halves, "{format} {w}x{h} at half width");
        }
    }
    // Narrower than max_width: kept at full size, scale 1.
    let mut g = GrayImage::default();
    assert!(frame_to_gray(&grey, 1000, &mut g, &mut s).is_ok());
    assert_eq!((g.width, g.height, g.scale), (w, h, 1.0));
    assert_eq!(g.data, y);
}

#[test]
fn gray_plane_of_rgb_and_mjpeg_is_luma() {
    let (w, h) = (64u32, 48u32);
    let rgb = smooth_rgb(w, h);
    let mut s = Scratch::new();
    let mut g = GrayImage::default();
    assert!(frame_to_gray(
        &frame(PixelFormat::Rgb24, rgb.clone(), w, h),
        w,
        &mut g,
        &mut s
    )
    .is_ok());
    for (i, p) in rgb.chunks_exact(3).enumerate() {
        let want = 0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32;
        assert!(
            (g.data[i] as f32 - want).abs() <= 1.5,
            "pixel {i}: {} vs {want}",
            g.data[i]
        );
    }
    // MJPEG: tensor first, then gray from the same decoded image.
    let f = frame(
        PixelFormat::Mjpeg,
        encode(&rgb, w, h, PixelFormat::Mjpeg),
        w,
        h,
    );
    let mut out = vec![0.0; (3 * IN * IN) as usize];
    assert!(frame_to_tensor(&f, IN, IN, ResizeMode::Letterbox, &mut out, &mut s).is_ok());
    let mut gj = GrayImage::default();
    assert!(frame_to_gray(&f, w, &mut gj, &mut s).is_ok());
    let max = g
        .data
        .iter()
        .zip(&gj.data)
        .map(|(a, b)| (*a as i32 - *b as i32).abs())
        .max();
    assert!(max.is_some_and(|m| m <= 6), "MJPEG gray differs by {max:?}");
}

#[test]
fn mjpeg_gray_from_luma_alone_matches_the_colour_decode() {
    // A scratch that has not decoded the frame in colour decodes the JPEG's luma only; one
    // that has (the model took this frame) reuses the colour decode. Both planes must agree,
    // at full width and halved (the paired-column path).
    let (w, h) = (96u32, 64u32);
    let rgb = smooth_rgb(w, h);
    let f = frame(
        PixelFormat::Mjpeg,
        encode(&rgb, w, h, PixelFormat::Mjpeg),
        w,
        h,
    );
    for width in [w, w / 2, w / 3] {
        let mut luma_only = GrayImage::default();
        assert!(frame_to_gray(&f, width, &mut luma_only, &mut Scratch::new()).is_ok());
        let mut s = Scratch::new();
        let mut out = vec![0.0; (3 * IN * IN) as usize];
        assert!(frame_to_tensor(&f, IN, IN, ResizeMode::Letterbox, &mut out, &mut s).is_ok());
        let mut from_colour = GrayImage::default();
        assert!(frame_to_gray(&f, width, &mut from_colour, &mut s).is_ok());
        assert_eq!(
            (luma_only.width, luma_only.height, luma_only.scale),
            (from_colour.width, from_colour.height, from_colour.scale)
        );
        let max = luma_only
            .data
            .iter()
            .zip(&from_colour.data)
            .map(|(a, b)| (*a as i32 - *b as i32).abs())
            .max();
        assert!(
            max.is_some_and(|m| m <= 2),
            "width {width}: luma-only plane differs by {max:?}"
        );
    }
    // A damaged JPEG is an error on the luma path too, not a stale or empty plane.
    let mut broken = f.clone();
    broken.data = vec![0xFF, 0xD8, 0xFF, 0x42, 0x42];
    broken.seq += 1;
    let mut g = GrayImage::default();
    assert!(frame_to_gray(&broken, w, &mut g, &mut Scratch::new()).is_err());
}
