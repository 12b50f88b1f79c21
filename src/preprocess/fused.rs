//! The fused loops that sample a frame into the model's input in one pass: colour convert
//! (BT.601, see the module documentation of `preprocess`), resize and normalize, per output
//! row ([`fused_yuv`], [`fused_rgb`]), with the taps cached in [`Scratch`] per geometry.

use super::layout::{ColTap, Layout, PlaneGeom, RowTap, TensorKey};
use super::{prepare, NormRows, PreprocessError, Quantization, Scratch, Store, MEAN_BGR, STD_BGR};
use crate::frame::Frame;

/// BT.601 limited-range YCbCr → RGB coefficients (see the module documentation).
pub(super) const YUV_Y: f32 = 1.164_383;
pub(super) const YUV_RV: f32 = 1.596_027;
pub(super) const YUV_GU: f32 = -0.391_762;
pub(super) const YUV_GV: f32 = -0.812_968;
pub(super) const YUV_BU: f32 = 2.017_232;

impl Scratch {
    /// Taps depend only on geometry: recomputes them (and sizes the row buffers) when `key`
    /// differs from the last call's.
    pub(super) fn set_taps(&mut self, key: TensorKey, inner_w: usize, inner_h: usize) {
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
    pub(super) fn fuse<T: Store>(
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
