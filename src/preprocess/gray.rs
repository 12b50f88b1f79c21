//! The tracker's gray plane of a frame: an area-averaged, downscaled luma plane.

use super::layout::{layout, Layout};
use super::{check_size, prepare, PreprocessError, Scratch};
use crate::frame::{Frame, GrayImage};

/// A downscaled luma plane of any [`Frame`] for tracking: at most `max_width` pixels wide,
/// the aspect ratio kept, each gray pixel the average of the frame pixels it covers (area
/// average). YUV formats read Y directly (limited-range values, as the camera sends them);
/// RGB and MJPEG use `(77·R + 150·G + 29·B) / 256` (BT.601 luma). `out.scale` is frame
/// pixels per gray pixel. MJPEG frames reuse a decode already done by [`frame_to_tensor`](super::frame_to_tensor)
/// with the same scratch.
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
