//! lookout's int8 matmul for CPUs without the dot product (the Pi 4's Cortex-A72, the Pi 3's
//! A53): 8-bit products widened pairwise.
//!
//! tract's int8 kernel there (`arm64simd_mmm_i32_8x8`) widens both operands to 16 bits and
//! multiplies with `smlal` by lane: 4 multiply-adds per instruction, 16 of them and 6 loads
//! and conversions per 64 products. Here both operands stay 8-bit and are laid out along k:
//! `smull` multiplies 8 pairs of bytes into 16-bit products, `smlal2` adds the next 8 pairs
//! to them (two products of a weight in −127..=127 and any int8 fit in 16 bits: at most
//! 2 · 127 · 128 = 32,512), and `sadalp` adds neighbouring 16-bit sums into 32-bit
//! accumulators: 16 multiply-adds in 3 instructions. A tile is 4 output channels × 4 pixels,
//! one 32-bit accumulator vector per output, reduced with `addp` at the end of k.
//!
//! The result is the raw i32 product matrix, which [`super::qconv::QConvI8`] hands to tract's
//! own kernel as an added tile (`FusedSpec::AddUnicast`) for the same bias, requantization and
//! clamp as before: the bytes written are tract's by construction.
//!
//! Layouts, both zero-padded (zeros add nothing to a product):
//! - weights ([`PackedWeights`]): blocks of 4 output channels × 16 k, `[m/4][k/16][4][16]`;
//! - activations ([`pack_columns`]): blocks of 4 pixels × 16 k, `[n/4][k/16][4][16]`, a
//!   transposition of the k × n rows that the convolution's im2col or input gives.
//!
//! NEON on aarch64 (the baseline there, no runtime check); everywhere else, and as the twin
//! the tests compare the NEON code with, a bounds-checked portable version.

use super::pack::Source;

/// Output channels per tile.
pub const MR: usize = 4;
/// Pixels per tile.
pub const NR: usize = 4;
/// Depth per block (one 16-byte vector).
pub const KB: usize = 16;

/// The name the load line and `lookout bench` give this kernel.
pub const NAME: &str = "lookout_pairwise_i8_4x4";

/// Bytes of one `[4][16]` block.
const BLOCK: usize = MR * KB;

/// Blocks of `b` covering `n`.
fn blocks(n: usize, b: usize) -> usize {
    n.div_ceil(b)
}

/// True when every weight is in −127..=127: two products then fit a 16-bit lane
/// (a −128 weight times a −128 activation, twice, would not).
pub fn weights_fit(w: &[i8]) -> bool {
    w.iter().all(|&v| v != i8::MIN)
}

/// Weights `[m, k]` (row-major) packed in the kernel's layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PackedWeights {
    m: usize,
    k: usize,
    data: Vec<i8>,
}

impl PackedWeights {
    /// `w` as `[m, k]`, or `None` when its length is not `m · k` or a weight is −128
    /// ([`weights_fit`]).
    pub fn new(w: &[i8], m: usize, k: usize) -> Option<Self> {
        if w.len() != m.checked_mul(k)? || !weights_fit(w) {
            return None;
        }
        let kbs = blocks(k, KB);
        let mut data = vec![0i8; blocks(m, MR) * kbs * BLOCK];
        for (row, src) in w.chunks_exact(k.max(1)).enumerate().take(m) {
            let (mb, r) = (row / MR, row % MR);
            for (kb, part) in src.chunks(KB).enumerate() {
                let at = (mb * kbs + kb) * BLOCK + r * KB;
                data[at..at + part.len()].copy_from_slice(part);
            }
        }
        Some(PackedWeights { m, k, data })
    }

    /// Output channels.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Depth.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Rows of the product matrix the kernel writes (`m` rounded up to whole tiles).
    pub fn m_padded(&self) -> usize {
        blocks(self.m, MR) * MR
    }
}

/// Bytes [`pack_columns`] writes for `k` × `n`.
pub fn packed_len(k: usize, n: usize) -> usize {
    blocks(n, NR) * blocks(k, KB) * BLOCK
}

/// Columns of the product matrix the kernel writes for `n` pixels (whole tiles).
pub fn n_padded(n: usize) -> usize {
    blocks(n, NR) * NR
}

/// Packs the `k` × `mn` rows of `src` into `out` (exactly [`packed_len`] bytes), padding
/// with zeros. False when `src` or `out` does not have that shape.
pub fn pack_columns(src: &Source, out: &mut [i8]) -> bool {
    if !src.is_valid() || out.len() != packed_len(src.k, src.mn) {
        return false;
    }
    #[cfg(target_arch = "aarch64")]
    {
        neon::pack_columns(src, out);
        true
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        pack_columns_portable(src, out, 0..usize::MAX, 0..usize::MAX);
        true
    }
}

/// The portable packer for pixels `cols` and depths `ks` of `src` (whole blocks are padded
/// with zeros past `src.mn` and `src.k`). `src` and `out` are checked by the caller's shape
/// test; every access here is bounds-checked regardless. (The tests' twin on aarch64.)
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn pack_columns_portable(
    src: &Source,
    out: &mut [i8],
    cols: std::ops::Range<usize>,
    ks: std::ops::Range<usize>,
) {
    let kbs = blocks(src.k, KB);
    let n_end = cols.end.min(n_padded(src.mn));
    let k_end = ks.end.min(kbs * KB);
    for p in cols.start..n_end {
        for kk in ks.start..k_end {
            let v = if p < src.mn && kk < src.k {
                src.data[kk * src.row_stride + p] as i8
            } else {
                0
            };
            out[((p / NR * kbs + kk / KB) * NR + p % NR) * KB + kk % KB] = v;
        }
    }
}

/// The raw products `W · X` of `weights` (`[m, k]`) and `n` packed columns (`x`, as
/// [`pack_columns`] wrote them) into `c`: row `i` at `c[i · stride ..]`, columns
/// `0..n_padded(n)`, rows `0..m_padded()`. False when a length does not fit.
pub fn matmul(weights: &PackedWeights, x: &[i8], n: usize, c: &mut [i32], stride: usize) -> bool {
    let (mp, np) = (weights.m_padded(), n_padded(n));
    if x.len() != packed_len(weights.k, n)
        || stride < np
        || (mp > 0 && c.len() < (mp - 1) * stride + np)
    {
        return false;
    }
    #[cfg(target_arch = "aarch64")]
    neon::matmul(weights, x, np, c, stride);
    #[cfg(not(target_arch = "aarch64"))]
    matmul_portable(weights, x, np, c, stride);
    true
}

/// The portable kernel: the same tiles and sums as the NEON one, bounds-checked (the tests'
/// twin on aarch64).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn matmul_portable(weights: &PackedWeights, x: &[i8], np: usize, c: &mut [i32], stride: usize) {
    let kbs = blocks(weights.k, KB);
    for mb in 0..weights.m_padded() / MR {
        let a = &weights.data[mb * kbs * BLOCK..(mb + 1) * kbs * BLOCK];
        for nb in 0..np / NR {
            let b = &x[nb * kbs * BLOCK..(nb + 1) * kbs * BLOCK];
            for i in 0..MR {
                for j in 0..NR {
                    let mut sum = 0i32;
                    for kb in 0..kbs {
                        let ra = &a[kb * BLOCK + i * KB..][..KB];
                        let rb = &b[kb * BLOCK + j * KB..][..KB];
                        sum += ra
                            .iter()
                            .zip(rb)
                            .map(|(&p, &q)| p as i32 * q as i32)
                            .sum::<i32>();
                    }
                    c[(mb * MR + i) * stride + nb * NR + j] = sum;
                }
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{blocks, PackedWeights, Source, BLOCK, KB, MR, NR};
    use std::arch::aarch64::*;

    /// 16 rows of 16 bytes transposed in registers: `r[i]` becomes column `i`.
    /// Four rounds of `trn1`/`trn2` on 1-, 2-, 4- and 8-byte elements.
    #[inline(always)]
    fn transpose16(r: &mut [int8x16_t; 16]) {
        // SAFETY: register-only NEON operations (baseline on aarch64).
        unsafe {
            for i in (0..16).step_by(2) {
                let (a, b) = (r[i], r[i + 1]);
                r[i] = vtrn1q_s8(a, b);
                r[i + 1] = vtrn2q_s8(a, b);
            }
            for i in [0, 1, 4, 5, 8, 9, 12, 13] {
                let (a, b) = (vreinterpretq_s16_s8(r[i]), vreinterpretq_s16_s8(r[i + 2]));
                r[i] = vreinterpretq_s8_s16(vtrn1q_s16(a, b));
                r[i + 2] = vreinterpretq_s8_s16(vtrn2q_s16(a, b));
            }
            for i in [0, 1, 2, 3, 8, 9, 10, 11] {
                let (a, b) = (vreinterpretq_s32_s8(r[i]), vreinterpretq_s32_s8(r[i + 4]));
                r[i] = vreinterpretq_s8_s32(vtrn1q_s32(a, b));
                r[i + 4] = vreinterpretq_s8_s32(vtrn2q_s32(a, b));
            }
            for i in 0..8 {
                let (a, b) = (vreinterpretq_s64_s8(r[i]), vreinterpretq_s64_s8(r[i + 8]));
                r[i] = vreinterpretq_s8_s64(vtrn1q_s64(a, b));
                r[i + 8] = vreinterpretq_s8_s64(vtrn2q_s64(a, b));
            }
        }
    }

    /// [`super::pack_columns`]: blocks of 16 depths × 16 pixels transposed in registers;
    /// depths past `k` are zero rows, pixels past `mn` zero bytes (a partial group is copied
    /// into a zeroed 16-byte row first). The caller checked `src.is_valid()` and `out`'s
    /// length.
    pub(super) fn pack_columns(src: &Source, out: &mut [i8]) {
        let kbs = blocks(src.k, KB);
        let (stride, nbs) = (src.row_stride, blocks(src.mn, NR));
        for kb in 0..kbs {
            let rows = (src.k - kb * KB).min(KB);
            for g in 0..src.mn.div_ceil(16) {
                let (p0, width) = (g * 16, (src.mn - g * 16).min(16));
                // The block's rows: `rows` of them from byte `first`, `stride` apart.
                let first = kb * KB * stride + p0;
                let block = &src.data[first..first + (rows - 1) * stride + width];
                // SAFETY: a register-only NEON operation (baseline on aarch64).
                let mut r = [unsafe { vdupq_n_s8(0) }; 16];
                if width == 16 {
                    for (i, reg) in r.iter_mut().enumerate().take(rows) {
                        // SAFETY: row i's 16 bytes start at i · stride inside `block`
                        // (sliced above to end at the last row's 16th byte).
                        *reg = unsafe { vld1q_s8(block.as_ptr().add(i * stride) as *const i8) };
                    }
                } else {
                    for (i, reg) in r.iter_mut().enumerate().take(rows) {
                        let mut part = [0u8; 16];
                        part[..width].copy_from_slice(&block[i * stride..i * stride + width]);
                        // SAFETY: `part` is 16 bytes.
                        *reg = unsafe { vld1q_s8(part.as_ptr() as *const i8) };
                    }
                }
                transpose16(&mut r);
                // Pixels p0..p0 + 16 are the four column blocks p0 / 4 ..: each 4 × 16
                // contiguous bytes at depth block kb (the last ones may be past n_padded).
                for (q, cols) in r.chunks_exact(NR).enumerate() {
                    let nb = p0 / NR + q;
                    if nb >= nbs {
                        break;
                    }
                    let at = (nb * kbs + kb) * BLOCK;
                    let Some(dst) = out.get_mut(at..at + BLOCK) else {
                        break;
                    };
                    // SAFETY: `dst` is 64 bytes (checked just above); each store writes 16.
                    unsafe {
                        for (c, reg) in cols.iter().enumerate() {
                            vst1q_s8(dst.as_mut_ptr().add(c * KB), *reg);
                        }
                    }
                }
            }
        }
    }

    /// [`super::matmul`] with NEON; the caller checked every length.
    pub(super) fn matmul(
        weights: &PackedWeights,
        x: &[i8],
        np: usize,
        c: &mut [i32],
        stride: usize,
    ) {
        let kbs = blocks(weights.k, KB);
        let span = kbs * BLOCK;
        for mb in 0..weights.m_padded() / MR {
            let a = &weights.data[mb * span..(mb + 1) * span];
            for nb in 0..np / NR {
                let b = &x[nb * span..(nb + 1) * span];
                let rows = tile(a, b, kbs);
                for (i, row) in rows.iter().enumerate() {
                    let at = (mb * MR + i) * stride + nb * NR;
                    let dst = &mut c[at..at + NR];
                    // SAFETY: `dst` is 4 i32 (sliced, bounds-checked just above).
                    unsafe { vst1q_s32(dst.as_mut_ptr(), *row) };
                }
            }
        }
    }

    /// One 4 × 4 tile over `kbs` blocks of `a` and `b` (each `kbs · 64` bytes): the four
    /// output rows, each as 4 lanes (the tile's pixels).
    #[inline(always)]
    fn tile(a: &[i8], b: &[i8], kbs: usize) -> [int32x4_t; MR] {
        assert!(a.len() >= kbs * BLOCK && b.len() >= kbs * BLOCK);
        // SAFETY: every load reads 16 bytes at `kb · 64 + 16 · r` (r < 4, kb < kbs) of `a`
        // or `b`, inside the `kbs · 64` bytes asserted above; the rest is register-only.
        unsafe {
            let zero = vdupq_n_s32(0);
            let mut acc = [[zero; NR]; MR];
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            for kb in 0..kbs {
                let o = kb * BLOCK;
                let va = [
                    vld1q_s8(pa.add(o)),
                    vld1q_s8(pa.add(o + 16)),
                    vld1q_s8(pa.add(o + 32)),
                    vld1q_s8(pa.add(o + 48)),
                ];
                let vb = [
                    vld1q_s8(pb.add(o)),
                    vld1q_s8(pb.add(o + 16)),
                    vld1q_s8(pb.add(o + 32)),
                    vld1q_s8(pb.add(o + 48)),
                ];
                for i in 0..MR {
                    for j in 0..NR {
                        let p = vmull_s8(vget_low_s8(va[i]), vget_low_s8(vb[j]));
                        let p = vmlal_high_s8(p, va[i], vb[j]);
                        acc[i][j] = vpadalq_s16(acc[i][j], p);
                    }
                }
            }
            let mut rows = [zero; MR];
            for i in 0..MR {
                let lo = vpaddq_s32(acc[i][0], acc[i][1]);
                let hi = vpaddq_s32(acc[i][2], acc[i][3]);
                rows[i] = vpaddq_s32(lo, hi);
            }
            rows
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::int8::qconv::noise_i8;

    /// `W · X` the plain way, `w` `[m, k]` and `x` `[k, n]` with row stride `rs`.
    fn reference(w: &[i8], x: &[u8], m: usize, k: usize, n: usize, rs: usize) -> Vec<i32> {
        let mut c = vec![0i32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|kk| w[i * k + kk] as i32 * x[kk * rs + j] as i8 as i32)
                    .sum();
            }
        }
        c
    }

    fn no_min(v: Vec<i8>) -> Vec<i8> {
        v.into_iter().map(|b| b.max(-127)).collect()
    }

    /// Shapes with and without whole tiles and blocks, a row stride wider than the rows,
    /// and the extreme values (127 and −127 weights times −128 activations).
    #[test]
    fn products_match_the_plain_sums() {
        let cases = [
            (4, 16, 16, 16),
            (32, 27, 50, 53),
            (5, 33, 17, 17),
            (64, 288, 40, 40),
            (1, 1, 1, 3),
            (7, 200, 35, 64),
        ];
        for (case, &(m, k, n, rs)) in cases.iter().enumerate() {
            let mut w = no_min(noise_i8(m * k, 3 + case as u64));
            let mut x: Vec<u8> = noise_i8(k * rs, 9 + case as u64)
                .into_iter()
                .map(|v| v as u8)
                .collect();
            if case == 3 {
                // Worst case for the 16-bit pair sums, every product the same sign.
                w.iter_mut().for_each(|v| *v = -127);
                x.iter_mut().for_each(|v| *v = 0x80);
            }
            let src = Source {
                data: &x,
                k,
                mn: n,
                row_stride: rs,
            };
            let packed = PackedWeights::new(&w, m, k).unwrap();
            let mut cols = vec![1i8; packed_len(k, n)];
            assert!(pack_columns(&src, &mut cols), "case {case}");
            let mut portable = vec![7i8; cols.len()];
            pack_columns_portable(&src, &mut portable, 0..usize::MAX, 0..usize::MAX);
            assert_eq!(cols, portable, "case {case}: packers differ");
            let stride = n_padded(n) + 3;
            let mut c = vec![0i32; packed.m_padded() * stride];
            assert!(matmul(&packed, &cols, n, &mut c, stride), "case {case}");
            let want = reference(&w, &x, m, k, n, rs);
            for i in 0..m {
                assert_eq!(
                    &c[i * stride..i * stride + n],
                    &want[i * n..(i + 1) * n],
                    "case {case} ({m}×{k}·{k}×{n}), row {i}"
                );
            }
            let mut twin = vec![0i32; c.len()];
            matmul_portable(&packed, &cols, n_padded(n), &mut twin, stride);
            // On aarch64 `matmul` ran the NEON kernel: the portable twin must agree.
            assert_eq!(c, twin, "case {case}: kernel and portable twin differ");
        }
    }

    #[test]
    fn refuses_what_does_not_fit() {
        assert!(PackedWeights::new(&[1, -128, 3, 4], 2, 2).is_none(), "−128");
        assert!(PackedWeights::new(&[1, 2, 3], 2, 2).is_none(), "length");
        let w = PackedWeights::new(&[1, 2, 3, 4], 2, 2).unwrap();
        let x = [0u8; 8];
        let src = Source {
            data: &x,
            k: 2,
            mn: 4,
            row_stride: 4,
        };
        let mut short = vec![0i8; packed_len(2, 4) - 1];
        assert!(!pack_columns(&src, &mut short));
        let cols = vec![0i8; packed_len(2, 4)];
        let mut c = vec![0i32; 4 * 4 - 1];
        assert!(!matmul(&w, &cols, 4, &mut c, 4), "c too short");
        let mut c = vec![0i32; 4 * 4];
        assert!(!matmul(&w, &cols, 4, &mut c, 3), "stride under the tile");
        assert!(matmul(&w, &cols, 4, &mut c, 4));
    }
}
