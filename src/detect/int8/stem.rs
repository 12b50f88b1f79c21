//! The detector's first convolution — 3×3, stride 2, over the picture's few channels —
//! computed straight from its input with AVX-512 VNNI, without an im2col.
//!
//! Through a matmul this convolution is the most expensive per multiply-add of the shipped
//! model: its depth is only 27 (3 channels × 3 × 3), so tract's kernel spends more on each
//! 16×16 output tile's requantization and store than on its products, and the patches are
//! gathered, then packed, before the kernel runs. Here each output row is made from the
//! input rows it reads: one 64-byte byte-permute gives 16 outputs' window of one input row
//! (their 3 taps and a fourth of weight 0), `vpdpbusd` adds it into 16 output channels at a
//! time, and the sums are requantized in registers and stored 16 outputs at a time.
//!
//! Exactly tract's computation: the sums are integers (any order gives the same), the input
//! is offset to unsigned (`x + 128`) with `128·Σw` taken from the bias, and the requantization
//! `+ bias → scale → + y0 → clamp → i8` is done in `f64`, where it is exact: the bias-added sum
//! times the scale's 31-bit multiplier stays below 2⁵³ (checked when the weights are made), and
//! the conversion rounds half to even as tract's `RoundingPolicy::Even` does.
//! [`rows_portable`] is the plain twin (tract's own `Scaler` arithmetic); the tests compare
//! both, and the op against tract's kernel, bit for bit.

use tract_onnx::tract_core::tract_linalg::mmm::RoundingPolicy;
use tract_onnx::tract_core::tract_linalg::Scaler;

/// The kernel's name, for the load line.
pub const NAME: &str = "lookout_stem_3x3s2_avx512vnni";

/// The most input channels taken (a picture has 3).
pub const MAX_CHANNELS: usize = 4;

/// Output channels per block of accumulators (and outputs per vector).
const BLOCK: usize = 16;

/// The stem's weights, bias and requantization, ready for both code paths.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// Input and output channels (`m` a multiple of [`BLOCK`]).
    c: usize,
    m: usize,
    /// OIHW weights.
    plain: Vec<i8>,
    /// Per output channel and input row (`c·3 + ky`) the row's three taps as the bytes of one
    /// i32 (byte 3 zero): what `vpdpbusd` multiplies with four input bytes.
    rows: Vec<i32>,
    /// The bias, and the bias less `128·Σw` (for the inputs offset to unsigned).
    bias: Vec<i32>,
    offset_bias: Vec<i32>,
    scaler: Scaler,
    /// The scale as one `f64` (multiplier × 2^-shift).
    factor: f64,
    y0: i32,
    /// Padding before the first row and column.
    pads: [usize; 2],
}

impl std::hash::Hash for Weights {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.plain.hash(state);
        self.bias.hash(state);
        self.y0.hash(state);
        self.pads.hash(state);
    }
}

impl Weights {
    /// The weights of a 3×3 stride-2 convolution of `c` channels into `m` (OIHW `w`), its
    /// per-channel `bias`, requantization `scaler` and output zero point `y0`, padded by
    /// `pads` (rows, columns) before the input. `None` when the kernel does not compute it
    /// exactly: `m` not a multiple of 16, more than [`MAX_CHANNELS`], another rounding than
    /// half to even, or sums whose scaling could leave `f64`'s exact integers or `i32`.
    pub fn new(
        w: &[i8],
        [c, m]: [usize; 2],
        bias: &[i32],
        scaler: Scaler,
        y0: i32,
        pads: [usize; 2],
    ) -> Option<Weights> {
        if m == 0 || m % BLOCK != 0 || c == 0 || c > MAX_CHANNELS {
            return None;
        }
        if w.len() != m * c * 9 || bias.len() != m || scaler.policy != RoundingPolicy::Even {
            return None;
        }
        if pads[0] > 2 || pads[1] > 2 {
            return None;
        }
        let (mult, shift) = match scaler.mult {
            Some(mult) => (mult as i64, scaler.shift + 31),
            None => (1, scaler.shift),
        };
        let factor = mult as f64 * 2f64.powi(-i32::try_from(shift).ok()?);
        let mut rows = Vec::with_capacity(m * c * 3);
        let mut offset_bias = Vec::with_capacity(m);
        for (o, &b) in bias.iter().enumerate() {
            let ws = &w[o * c * 9..(o + 1) * c * 9];
            let sum: i64 = ws.iter().map(|&v| v as i64).sum();
            let abs: i64 = ws.iter().map(|&v| (v as i64).abs()).sum();
            // The largest |sum + bias|, its product with the multiplier, its scaled value.
            let bound = 128 * abs + (b as i64).abs();
            if bound.checked_mul(mult.abs())? >= 1 << 53
                || bound as f64 * factor.abs() + (y0 as f64).abs() >= 2_147_483_000.0
            {
                return None;
            }
            offset_bias.push(i32::try_from(b as i64 - 128 * sum).ok()?);
            for r in ws.chunks_exact(3) {
                rows.push(i32::from_le_bytes([r[0] as u8, r[1] as u8, r[2] as u8, 0]));
            }
        }
        Some(Weights {
            c,
            m,
            plain: w.to_vec(),
            rows,
            bias: bias.to_vec(),
            offset_bias,
            scaler,
            factor,
            y0,
            pads,
        })
    }

    /// Input channels.
    pub fn c(&self) -> usize {
        self.c
    }
}

/// Whether this CPU runs [`rows`]' vector code (AVX-512 F, BW, VBMI and VNNI: Ice Lake,
/// Sapphire Rapids, Zen 4 and later).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi")
            && is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The geometry of one call: input planes `h × w`, output planes `oh × ow`, output rows
/// `y0..y1` written.
#[derive(Debug, Clone, Copy)]
pub struct Band {
    pub input: [usize; 2],
    pub output: [usize; 2],
    pub rows: [usize; 2],
}

impl Band {
    /// Whether `input` (c planes) and `dst` (m planes of the band's rows) fit, and the output
    /// is what a 3×3 stride-2 window over the padded input gives.
    fn fits(&self, wts: &Weights, input: &[u8], dst: &[u8]) -> bool {
        let ([h, w], [oh, ow], [y0, y1]) = (self.input, self.output, self.rows);
        y0 <= y1
            && y1 <= oh
            && h > 0
            && w > 0
            && input.len() >= wts.c * h * w
            && dst.len() >= wts.m * (y1 - y0) * ow
            && 2 * (oh.max(1) - 1) + 3 <= h + wts.pads[0] + 2
            && 2 * (ow.max(1) - 1) + 3 <= w + wts.pads[1] + 2
    }
}

/// The input value of channel `ch` at padded position (`py`, `px`): 0 (the zero point)
/// in the padding.
#[inline]
fn at(wts: &Weights, input: &[u8], [h, w]: [usize; 2], ch: usize, py: usize, px: usize) -> i8 {
    let (y, x) = (py.wrapping_sub(wts.pads[0]), px.wrapping_sub(wts.pads[1]));
    if y < h && x < w {
        input[(ch * h + y) * w + x] as i8
    } else {
        0
    }
}

/// Output rows `band.rows` of every output channel into `dst` (`m` planes of
/// `(y1 − y0) × ow` bytes), from the int8 `input` (`c` planes): the plain sums and tract's
/// `Scaler`. `false` when the sizes do not fit.
pub fn rows_portable(wts: &Weights, input: &[u8], band: Band, dst: &mut [u8]) -> bool {
    if !band.fits(wts, input, dst) {
        return false;
    }
    let ([oh_rows0, oh_rows1], [_, ow]) = (band.rows, band.output);
    let rows = oh_rows1 - oh_rows0;
    for o in 0..wts.m {
        let ws = &wts.plain[o * wts.c * 9..(o + 1) * wts.c * 9];
        for (r, oy) in (oh_rows0..oh_rows1).enumerate() {
            for ox in 0..ow {
                let mut acc = 0i32;
                for ch in 0..wts.c {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let x = at(wts, input, band.input, ch, 2 * oy + ky, 2 * ox + kx);
                            acc += x as i32 * ws[(ch * 3 + ky) * 3 + kx] as i32;
                        }
                    }
                }
                let v = (acc + wts.bias[o]) * wts.scaler;
                let v = v
                    .saturating_add(wts.y0)
                    .clamp(i8::MIN as i32, i8::MAX as i32);
                dst[(o * rows + r) * ow + ox] = v as i8 as u8;
            }
        }
    }
    true
}

/// [`rows_portable`]'s result, with the vector code where the CPU has it ([`available`]);
/// `scratch` holds the padded input rows between calls.
pub fn rows(
    wts: &Weights,
    input: &[u8],
    band: Band,
    dst: &mut [u8],
    scratch: &mut Vec<u8>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !band.fits(wts, input, dst) {
            return false;
        }
        if available() {
            // The row buffers: each input row the band reads, offset to unsigned and padded
            // with the zero point (128 once offset) for 64-byte loads at every output's window.
            let ow = band.output[1];
            let stride = (2 * ow + 64).next_multiple_of(64);
            let groups = wts.c * 3;
            // Every byte of every row is written by `fill_rows` before it is read.
            scratch.resize(groups * stride, 0x80);
            for oy in band.rows[0]..band.rows[1] {
                fill_rows(wts, input, band, oy, stride, scratch);
                let r = oy - band.rows[0];
                // SAFETY: the CPU has AVX-512 F/BW/VBMI/VNNI (checked just above); `scratch`
                // holds `groups` rows of `stride` bytes, and the loads read 64 bytes from byte
                // 2·ox (ox < ow) of a row: 2·ow + 62 < stride. The stores write 16 bytes (fewer,
                // masked, at a row's end) of row `r` of each of the m planes of `dst`, whose
                // length `fits` checked.
                unsafe {
                    avx512::row(
                        wts,
                        scratch.as_ptr(),
                        stride,
                        ow,
                        dst.as_mut_ptr(),
                        r,
                        band.rows[1] - band.rows[0],
                    )
                };
            }
            return true;
        }
    }
    let _ = scratch;
    rows_portable(wts, input, band, dst)
}

/// The `c·3` input rows output row `oy` reads, into `scratch` (rows of `stride` bytes): byte
/// `2·ox + kx` of row `c·3 + ky` is the input at padded (`2·oy + ky`, `2·ox + kx`) plus 128.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn fill_rows(
    wts: &Weights,
    input: &[u8],
    band: Band,
    oy: usize,
    stride: usize,
    scratch: &mut [u8],
) {
    let [h, w] = band.input;
    let pl = wts.pads[1];
    for ch in 0..wts.c {
        for ky in 0..3 {
            let row = &mut scratch[(ch * 3 + ky) * stride..(ch * 3 + ky + 1) * stride];
            let y = (2 * oy + ky).wrapping_sub(wts.pads[0]);
            if y >= h {
                row.fill(0x80);
                continue;
            }
            let src = &input[(ch * h + y) * w..(ch * h + y + 1) * w];
            row[..pl].fill(0x80);
            let n = w.min(stride - pl);
            for (d, &s) in row[pl..pl + n].iter_mut().zip(src) {
                *d = s ^ 0x80;
            }
            row[pl + n..].fill(0x80);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Weights, BLOCK};
    use std::arch::x86_64::*;

    /// The byte permute of a 64-byte load into 16 outputs' windows: output j of a block reads
    /// bytes 2j .. 2j + 3 of a row (the fourth has weight 0).
    const WINDOWS: [u8; 64] = {
        let mut idx = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            idx[i] = (2 * (i / 4) + i % 4) as u8;
            i += 1;
        }
        idx
    };

    /// One output row `r` of the band: every output channel's `ow` outputs into `dst`
    /// (plane `o` at `o·rows·ow`, the row at `r·ow`), from the padded unsigned input rows
    /// in `rows` (`c·3` of `stride` bytes).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW, VBMI and VNNI; `rows` must be valid for reads of
    /// `c·3·stride` bytes with `stride ≥ 2·ow + 64`, and `dst` for writes of `m·band·ow`
    /// bytes with `r < band`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
    pub unsafe fn row(
        wts: &Weights,
        rows: *const u8,
        stride: usize,
        ow: usize,
        dst: *mut u8,
        r: usize,
        band: usize,
    ) {
        let groups = wts.c * 3;
        // SAFETY: `WINDOWS` is 64 bytes; the row loads read 64 bytes at 2·ox < 2·ow of a row of
        // `stride` ≥ 2·ow + 64 bytes; weights and biases are indexed below their lengths
        // (m·groups, m); the stores write within row r of each plane (caller's contract).
        unsafe {
            let idx = _mm512_loadu_si512(WINDOWS.as_ptr() as *const __m512i);
            let factor = _mm512_set1_pd(wts.factor);
            let y0 = _mm512_set1_epi32(wts.y0);
            let mut ox = 0;
            while ox < ow {
                let left = (ow - ox).min(BLOCK);
                let mask: __mmask16 = if left == BLOCK {
                    0xffff
                } else {
                    (1u16 << left) - 1
                };
                for ob in (0..wts.m).step_by(BLOCK) {
                    let mut acc = [_mm512_setzero_si512(); BLOCK];
                    for g in 0..groups {
                        let x = _mm512_loadu_si512(rows.add(g * stride + 2 * ox) as *const __m512i);
                        let x = _mm512_permutexvar_epi8(idx, x);
                        let ws = wts.rows.as_ptr().add(ob * groups + g);
                        for (o, a) in acc.iter_mut().enumerate() {
                            *a = _mm512_dpbusd_epi32(*a, x, _mm512_set1_epi32(*ws.add(o * groups)));
                        }
                    }
                    for (o, a) in acc.iter().enumerate() {
                        let v = _mm512_add_epi32(*a, _mm512_set1_epi32(wts.offset_bias[ob + o]));
                        let lo =
                            _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(v)), factor);
                        let hi = _mm512_mul_pd(
                            _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64::<1>(v)),
                            factor,
                        );
                        let lo = _mm512_cvt_roundpd_epi32::<
                            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                        >(lo);
                        let hi = _mm512_cvt_roundpd_epi32::<
                            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                        >(hi);
                        let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
                        let v = _mm512_add_epi32(v, y0);
                        let out = dst.add(((ob + o) * band + r) * ow + ox);
                        _mm512_mask_cvtsepi32_storeu_epi8(out as *mut i8, mask, v);
                    }
                }
                ox += BLOCK;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::int8::qconv::noise_i8;

    fn weights(c: usize, m: usize, seed: u64, scale: f32, y0: i32, pads: [usize; 2]) -> Weights {
        let w = noise_i8(m * c * 9, seed);
        let bias: Vec<i32> = noise_i8(m, seed + 1)
            .iter()
            .map(|&b| b as i32 * 41)
            .collect();
        Weights::new(
            &w,
            [c, m],
            &bias,
            Scaler::new(scale, RoundingPolicy::Even),
            y0,
            pads,
        )
        .expect("weights fit")
    }

    /// The vector code writes the portable twin's bytes: odd and even sizes, rows not a
    /// multiple of 16 outputs, bands starting anywhere, both paddings, scales that are a
    /// power of two, round many sums to a tie, and saturate.
    #[test]
    fn vector_rows_equal_the_portable_ones() {
        // (c, m, input [h, w], pads, scale, y0)
        type Case = (usize, usize, [usize; 2], [usize; 2], f32, i32);
        let cases: [Case; 6] = [
            (3, 32, [416, 416], [0, 0], 0.0043, 0),
            (3, 32, [61, 83], [1, 1], 0.0043, -7),
            (3, 16, [9, 37], [0, 1], 0.25, 3),
            (1, 48, [5, 3], [1, 1], 0.5, 0),
            (4, 16, [40, 130], [1, 0], 0.0625, -128),
            (3, 32, [20, 20], [0, 0], 0.9, 100),
        ];
        for (i, &(c, m, [h, w], pads, scale, y0)) in cases.iter().enumerate() {
            let wts = weights(c, m, 10 + i as u64, scale, y0, pads);
            let (oh, ow) = ((h + pads[0] + 1 - 3) / 2 + 1, (w + pads[1] + 1 - 3) / 2 + 1);
            let input: Vec<u8> = noise_i8(c * h * w, 30 + i as u64)
                .iter()
                .map(|&v| v as u8)
                .collect();
            for span in [[0, oh], [oh / 3, oh / 3 + 1], [oh / 2, oh]] {
                let band = Band {
                    input: [h, w],
                    output: [oh, ow],
                    rows: span,
                };
                let n = m * (span[1] - span[0]) * ow;
                let (mut want, mut got) = (vec![0u8; n], vec![1u8; n]);
                assert!(rows_portable(&wts, &input, band, &mut want), "case {i}");
                assert!(
                    rows(&wts, &input, band, &mut got, &mut Vec::new()),
                    "case {i}"
                );
                let diff = want.iter().zip(&got).filter(|(a, b)| a != b).count();
                assert_eq!(diff, 0, "case {i}, rows {span:?}: {diff} bytes differ");
                if i == 5 {
                    let saturated = want.iter().filter(|&&b| b == 127 || b == 128).count();
                    assert!(saturated > 0, "case {i} never saturates");
                }
            }
        }
    }

    /// What the kernel cannot compute exactly is refused, and a band that does not fit its
    /// buffers is an error, not a panic.
    #[test]
    fn refuses_what_it_cannot_compute() {
        let s = Scaler::new(0.004, RoundingPolicy::Even);
        let w = vec![1i8; 32 * 3 * 9];
        assert!(Weights::new(&w, [3, 32], &[0; 32], s, 0, [0, 0]).is_some());
        assert!(Weights::new(&w[..24 * 27], [3, 24], &[0; 24], s, 0, [0, 0]).is_none());
        assert!(Weights::new(&w, [3, 32], &[0; 31], s, 0, [0, 0]).is_none());
        let away = Scaler::new(0.004, RoundingPolicy::Away);
        assert!(Weights::new(&w, [3, 32], &[0; 32], away, 0, [0, 0]).is_none());
        assert!(Weights::new(&w, [3, 32], &[i32::MAX; 32], s, 0, [0, 0]).is_none());
        let big = Scaler::new(1_048_576.0, RoundingPolicy::Even);
        assert!(Weights::new(&w, [3, 32], &[0; 32], big, 0, [0, 0]).is_none());
        let wts = Weights::new(&w, [3, 32], &[0; 32], s, 0, [0, 0]).unwrap();
        let band = Band {
            input: [8, 8],
            output: [4, 4],
            rows: [0, 4],
        };
        let mut dst = vec![0u8; 32 * 4 * 4];
        assert!(!rows(&wts, &[0u8; 10], band, &mut dst, &mut Vec::new()));
        assert!(!rows(
            &wts,
            &[0u8; 3 * 64],
            band,
            &mut dst[..10],
            &mut Vec::new()
        ));
        let tall = Band {
            output: [9, 4],
            ..band
        };
        assert!(!rows_portable(&wts, &[0u8; 3 * 64], tall, &mut dst));
    }
}
