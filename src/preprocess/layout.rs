//! Where a frame's samples are: each pixel format's planes ([`Layout`], [`PlaneGeom`]) and
//! the bilinear taps that sample them ([`Taps`], [`ColTap`], [`RowTap`]). Adding a pixel
//! format starts here.

use crate::frame::PixelFormat;
use crate::geom::ResizeMode;

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

/// One output column's two source samples as byte offsets within a source row, and the
/// weight of the second (1/256 units).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ColTap {
    pub(super) o0: u32,
    pub(super) o1: u32,
    pub(super) w1: u32,
}

/// One output row's two source rows as byte offsets into the frame, and the weight of the
/// second (1/256 units).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RowTap {
    pub(super) r0: u32,
    pub(super) r1: u32,
    pub(super) w1: u32,
}

/// Where one sampled channel lives in a frame buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PlaneGeom {
    /// Byte offset of the plane (its first row).
    pub(super) base: usize,
    /// Byte offset of the first sample within a row (packed formats interleave channels).
    pub(super) first: usize,
    /// Bytes between rows.
    pub(super) stride: usize,
    /// Bytes between horizontally adjacent samples.
    pub(super) step: usize,
    /// Samples per row.
    pub(super) width: u32,
    /// Rows.
    pub(super) height: u32,
}

impl PlaneGeom {
    pub(super) fn taps(
        &self,
        inner_w: usize,
        inner_h: usize,
        cols: &mut Vec<ColTap>,
        rows: &mut Vec<RowTap>,
    ) {
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
pub(super) enum Layout {
    /// Y, and Cb/Cr (`None` = grey): Cb's geometry, then Cr's `base` and `first` (Cr
    /// shares Cb's stride, step and size).
    Yuv {
        y: PlaneGeom,
        chroma: Option<(PlaneGeom, usize, usize)>,
    },
    /// Packed R, G, B bytes.
    Rgb { w: u32, h: u32 },
}

pub(super) fn layout(format: PixelFormat, w: u32, h: u32) -> Layout {
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
pub(super) struct TensorKey {
    pub(super) layout: Layout,
    pub(super) input_w: u32,
    pub(super) input_h: u32,
    pub(super) mode: ResizeMode,
}
