//! The tracker's gray plane of a frame: an area-averaged, downscaled luma plane.

use super::jpeg::{decode_frame, DecodedKey, Output};
use super::layout::{layout, Layout};
use super::{check_size, prepare, PreprocessError, Scratch};
use crate::frame::{Frame, GrayImage, PixelFormat};

/// A downscaled luma plane of any [`Frame`] for tracking: at most `max_width` pixels wide,
/// the aspect ratio kept, each gray pixel the average of the frame pixels it covers (area
/// average). YUV formats read Y directly (limited-range values, as the camera sends them);
/// RGB uses `(77·R + 150·G + 29·B) / 256` (BT.601 luma). `out.scale` is frame pixels per
/// gray pixel. An MJPEG frame decodes only its JPEG's luma (no chroma, no colour conversion:
/// about half the work of a colour decode), unless [`frame_to_tensor`](super::frame_to_tensor)
/// already decoded the same frame in colour with the same scratch: then that is reused, its
/// luma computed as for RGB (within 2 levels of the JPEG's own).
///
/// # Errors
/// A frame over [`MAX_FRAME_SIDE`](crate::frame::MAX_FRAME_SIDE) per side or shorter than its format needs, an MJPEG frame that does not decode, a zero size.
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
    let result = source(frame, scratch).map(|src| {
        out.width = gw;
        out.height = gh;
        out.scale = scale;
        out.data.clear();
        out.data.reserve(gw as usize * gh as usize);
        acc.resize(gw as usize, 0);
        let pair = cols.iter().all(|&(c0, c1)| c1 - c0 == 2);
        if pair && rows.iter().all(|&(r0, r1)| r1 - r0 == 2) && halve(src, &mut out.data, gw, gh) {
            return;
        }
        for &(r0, r1) in rows.iter() {
            acc.fill(0);
            for r in r0..r1 {
                let (row, step): (&[u8], usize) = match src {
                    Source::Plane {
                        data,
                        offset,
                        stride,
                        step,
                    } => (&data[offset + r as usize * stride..], step),
                    Source::Rgb { data, width } => {
                        let px = &data[r as usize * width * 3..][..width * 3];
                        luma.clear();
                        luma.extend(px.chunks_exact(3).map(|p| {
                            ((77 * p[0] as u32 + 150 * p[1] as u32 + 29 * p[2] as u32) >> 8) as u8
                        }));
                        (&luma, 1)
                    }
                };
                add_row(&mut acc, row, step, &cols, pair);
            }
            push_means(&mut out.data, &acc, &cols, r1 - r0, pair);
        }
    });
    scratch.gray_cols = std::mem::take(&mut cols);
    scratch.gray_rows = std::mem::take(&mut rows);
    scratch.gray_acc = acc;
    scratch.gray_luma = luma;
    result
}

/// Adds one source row's luma to the column sums `acc` (sample `c` of the row at `c·step`).
/// Columns all two wide (`pair`: a frame exactly twice the plane's width) sum in pairs, which
/// the compiler vectorises; any other ratio walks each column's range.
fn add_row(acc: &mut [u32], row: &[u8], step: usize, cols: &[(u32, u32)], pair: bool) {
    if pair && step == 1 {
        for (a, p) in acc.iter_mut().zip(row.chunks_exact(2)) {
            *a += p[0] as u32 + p[1] as u32;
        }
        return;
    }
    // Packed 4:2:2 (YUYV, UYVY): the two luma samples of a pair are 2 bytes apart, each pair
    // in 4 bytes (the last row of UYVY ends one byte short).
    let n = acc.len();
    if pair && step == 2 && n > 0 && row.len() > 4 * (n - 1) + 2 {
        // Whole 4-byte groups (vectorised), then the last pair when its group is cut short.
        let whole = (row.len() / 4).min(n);
        for (a, p) in acc[..whole].iter_mut().zip(row.chunks_exact(4)) {
            *a += p[0] as u32 + p[2] as u32;
        }
        if whole < n {
            acc[n - 1] += row[4 * (n - 1)] as u32 + row[4 * (n - 1) + 2] as u32;
        }
        return;
    }
    for (a, &(c0, c1)) in acc.iter_mut().zip(cols) {
        let mut s = 0u32;
        for c in c0..c1 {
            s += row[c as usize * step] as u32;
        }
        *a += s;
    }
}

/// The plane of a frame exactly twice its size both ways, for a luma plane or packed 4:2:2
/// source (`step` 1 or 2): each output the rounded mean of a 2×2 block, two rows at a time
/// ([`quad_means`]). Returns false, writing nothing, for other sources.
fn halve(src: Source, out: &mut Vec<u8>, gw: u32, gh: u32) -> bool {
    let Source::Plane {
        data,
        offset,
        stride,
        step: step @ (1 | 2),
    } = src
    else {
        return false;
    };
    let gw = gw as usize;
    out.resize(gw * gh as usize, 0);
    // The last luma sample of a row: packed 4:2:2 ends a byte or two after it.
    let len = 2 * step * (gw - 1) + step + 1;
    for (y, dst) in out.chunks_exact_mut(gw).enumerate() {
        let top = &data[offset + 2 * y * stride..][..len];
        let bottom = &data[offset + (2 * y + 1) * stride..][..len];
        if step == 1 {
            quad_means::<1>(top, bottom, dst);
        } else {
            quad_means::<2>(top, bottom, dst);
        }
    }
    true
}

/// `dst[i]` = the rounded mean of the 2×2 block of luma samples `2i` and `2i + 1` of `top` and
/// `bottom` (as [`push_means`] rounds a 2×2 sum), sample `c` of a row at byte `c·STEP` (1: a
/// luma plane; 2: packed 4:2:2). Whole blocks of 16 outputs first, in 16-bit lanes the
/// compiler vectorises, then the rest.
fn quad_means<const STEP: usize>(top: &[u8], bottom: &[u8], dst: &mut [u8]) {
    const BLOCK: usize = 16;
    let blocks = top
        .chunks_exact(2 * STEP * BLOCK)
        .zip(bottom.chunks_exact(2 * STEP * BLOCK))
        .zip(dst.chunks_exact_mut(BLOCK));
    let mut done = 0;
    for ((t, b), d) in blocks {
        let mut sums = [0u16; BLOCK];
        if STEP == 1 {
            for (k, s) in sums.iter_mut().enumerate() {
                *s = t[2 * k] as u16 + t[2 * k + 1] as u16 + b[2 * k] as u16 + b[2 * k + 1] as u16;
            }
        } else {
            // Packed 4:2:2 as little-endian words: luma in bytes 0 and 2 of each; both
            // rows' lumas summed in two 16-bit halves, then the halves.
            let (tw, _) = t.as_chunks::<4>();
            let (bw, _) = b.as_chunks::<4>();
            let mut halves = [0u32; BLOCK];
            for ((h, p), q) in halves.iter_mut().zip(tw).zip(bw) {
                *h =
                    (u32::from_le_bytes(*p) & 0x00ff_00ff) + (u32::from_le_bytes(*q) & 0x00ff_00ff);
            }
            for (s, h) in sums.iter_mut().zip(halves) {
                *s = ((h & 0xffff) + (h >> 16)) as u16;
            }
        }
        for (o, s) in d.iter_mut().zip(sums) {
            *o = ((s + 2) >> 2) as u8;
        }
        done += BLOCK;
    }
    for (k, o) in dst.iter_mut().enumerate().skip(done) {
        let (i, j) = (2 * STEP * k, 2 * STEP * k + STEP);
        let s = top[i] as u16 + top[j] as u16 + bottom[i] as u16 + bottom[j] as u16;
        *o = ((s + 2) >> 2) as u8;
    }
}

/// Appends the rounded mean of each column sum `acc` over `nrows` rows to `out`.
fn push_means(out: &mut Vec<u8>, acc: &[u32], cols: &[(u32, u32)], nrows: u32, pair: bool) {
    if pair && nrows == 2 {
        // 2×2 boxes: the rounded mean is a shift (no division per pixel).
        out.extend(acc.iter().map(|&a| ((a + 2) >> 2) as u8));
        return;
    }
    for (&a, &(c0, c1)) in acc.iter().zip(cols) {
        let n = nrows * (c1 - c0);
        out.push(((a + n / 2) / n) as u8);
    }
}

/// Where a frame's luma is read from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// A luma plane: sample `c` of row `r` at `offset + r·stride + c·step`.
    Plane {
        data: &'a [u8],
        offset: usize,
        stride: usize,
        step: usize,
    },
    /// Packed RGB, `width` pixels a row.
    Rgb { data: &'a [u8], width: usize },
}

/// The frame's luma: the frame itself for raw formats, the colour decode already in
/// `scratch` for an MJPEG frame decoded for the model, else the JPEG's luma decoded into
/// `scratch.gray_jpeg`.
fn source<'a>(frame: &'a Frame, scratch: &'a mut Scratch) -> Result<Source<'a>, PreprocessError> {
    let w = frame.width;
    if frame.format == PixelFormat::Mjpeg && scratch.decoded.key != Some(DecodedKey::of(frame)) {
        decode_frame(frame, &mut scratch.gray_jpeg, Output::Luma)?;
        return Ok(Source::Plane {
            data: &scratch.gray_jpeg,
            offset: 0,
            stride: w as usize,
            step: 1,
        });
    }
    let (lay, data) = prepare(frame, &mut scratch.decoded)?;
    Ok(match lay {
        Layout::Yuv { y, .. } => Source::Plane {
            data,
            offset: y.base + y.first,
            stride: y.stride,
            step: y.step,
        },
        Layout::Rgb { .. } => Source::Rgb {
            data,
            width: w as usize,
        },
    })
}
