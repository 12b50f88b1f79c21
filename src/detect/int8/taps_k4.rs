//! The im2col of a 3×3, stride-1, zero-padded convolution packed straight into tract's K4
//! panels (`PackedI8K4 { r }`: 16 lanes for the AVX-512 VNNI kernel, 8 for the 64-bit ARM
//! dot-product kernel), without the band's im2col being written first.
//!
//! The im2col's depth `k = 9·C` runs tap by tap (the taps' order, `FastTaps::same_3x3`),
//! channel by channel within a tap; its lanes are the band's output pixels. Lane `i` of tap
//! `(dy, dx)` and channel `ch` is the input's byte at `i + y0·w + (dy − 1)·w + dx − 1` of plane
//! `ch`, or 0 where that falls in the padding: every tap's lanes are one run of the input
//! plane, shifted, with some lanes masked. With `C` a multiple of 4 every K4 block (4 depths)
//! is 4 channels of one tap, so a block of a panel is 4 masked loads of `r` bytes,
//! interleaved (AVX-512: masked loads; NEON: plain loads where every lane is inside the
//! plane, lanes masked in the register or read one by one at the plane's ends).
//! The bytes are those of [`super::pack::pack`] over the taps [`super::taps::FastTaps`]
//! writes (tests).

/// Bytes of each input row read together: a cache line, for `64 / r` panels side by side.
const LINE: usize = 64;

/// The shape of one band's packing.
#[derive(Clone, Copy, Debug)]
pub struct Band {
    /// Input channels (a multiple of 4).
    pub c: usize,
    /// Input (and output) plane height and width.
    pub h: usize,
    /// See `h`.
    pub w: usize,
    /// The band's output rows `y0..y1`.
    pub y0: usize,
    /// See `y0`.
    pub y1: usize,
    /// Lanes per panel: 8 or 16.
    pub r: usize,
}

impl Band {
    /// Bytes of packed panels the band needs.
    pub fn packed_len(&self) -> usize {
        let cols = self.y1.saturating_sub(self.y0) * self.w;
        cols.div_ceil(self.r) * 9 * self.c * self.r
    }

    /// Whether this band can be packed here: 8 or 16 lanes, `c` a multiple of 4, rows inside
    /// the plane, and `src` holding `c` planes.
    fn fits(&self, src: &[u8], out: &[u8]) -> bool {
        matches!(self.r, 8 | 16)
            && self.c.is_multiple_of(4)
            && self.c > 0
            && self.y0 < self.y1
            && self.y1 <= self.h
            && self
                .c
                .checked_mul(self.h)
                .and_then(|n| n.checked_mul(self.w))
                .is_some_and(|n| n <= src.len())
            && out.len() == self.packed_len()
    }

    /// For each tap `at[t] = (dy, dx)`: the mask of the lanes of panel `p` it reads from the
    /// input (bit `m`: lane `m`), and the input offset of its lane 0 (may be negative: lanes
    /// before the plane are masked). A lane's row is inside for `dy` when `y + dy − 1` is a
    /// row of the plane, its column likewise for `dx`, and a tap's mask is the two masks'
    /// intersection. The panel's lanes are taken a row at a time: a run of lanes in one row
    /// shares the row masks, and of its columns only the row's first (for `dx = 0`) and last
    /// (for `dx = 2`) can fall outside.
    fn lanes(&self, p: usize, at: &[(usize, usize); 9]) -> [(u16, isize); 9] {
        let cols = (self.y1 - self.y0) * self.w;
        let first = self.y0 * self.w + p * self.r;
        let (mut y, mut x) = (first / self.w, first % self.w);
        let (mut rows, mut columns) = ([0u32; 3], [0u32; 3]);
        let lanes = self.r.min(cols.saturating_sub(p * self.r));
        let mut m = 0;
        while m < lanes {
            let len = (self.w - x).min(lanes - m);
            let run = ((1u32 << len) - 1) << m;
            for (d, mask) in rows.iter_mut().enumerate() {
                if (1..=self.h).contains(&(y + d)) {
                    *mask |= run;
                }
            }
            columns[0] |= if x == 0 { run & !(1 << m) } else { run };
            columns[1] |= run;
            columns[2] |= if x + len == self.w {
                run & !(1 << (m + len - 1))
            } else {
                run
            };
            m += len;
            (x, y) = (0, y + 1);
        }
        at.map(|(dy, dx)| {
            // At most 16 lanes: the masks fit u16.
            let mask = rows.get(dy).zip(columns.get(dx)).map_or(0, |(r, c)| r & c) as u16;
            let shift = (dy as isize - 1) * self.w as isize + dx as isize - 1;
            (mask, first as isize + shift)
        })
    }
}

/// Packs `band` of the 3×3 im2col of `src` (`c` planes of `h × w` bytes) with tap positions
/// `at` into `out` ([`Band::packed_len`] bytes), portable code. False (nothing written) when the band
/// does not fit.
pub fn pack_portable(src: &[u8], at: &[(usize, usize); 9], band: Band, out: &mut [u8]) -> bool {
    if !band.fits(src, out) {
        return false;
    }
    let (n, r) = (band.h * band.w, band.r);
    for (p, panel) in out.chunks_exact_mut(9 * band.c * r).enumerate() {
        for (t, &(mask, first)) in band.lanes(p, at).iter().enumerate() {
            for ch in 0..band.c {
                let kk = t * band.c + ch;
                let block = &mut panel[(kk / 4) * 4 * r..][..4 * r];
                for m in 0..r {
                    let v = if mask >> m & 1 == 1 {
                        src[ch * n + (first + m as isize) as usize]
                    } else {
                        0
                    };
                    block[4 * m + kk % 4] = v;
                }
            }
        }
    }
    true
}

/// Packs like [`pack_portable`], with SIMD where [`simd_for`] says so; the same bytes
/// (tests).
pub fn pack(src: &[u8], at: &[(usize, usize); 9], band: Band, out: &mut [u8]) -> bool {
    if !simd_for(band.r) {
        return pack_portable(src, at, band, out);
    }
    if !band.fits(src, out) {
        return false;
    }
    let (r, pl) = (band.r, 9 * band.c * band.r);
    let group = LINE / r;
    for (g, run) in out.chunks_mut(group * pl).enumerate() {
        let panels = run.len() / pl;
        let mut lanes = [[(0u16, 0isize); 9]; LINE / 8];
        for (q, per_tap) in lanes.iter_mut().take(panels).enumerate() {
            *per_tap = band.lanes(g * group + q, at);
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: the CPU has AVX-512 F, BW and VL and r = 16 (`simd_for`). Reads: every
            // lane `band.lanes` leaves in a mask is an input pixel of plane `ch` < c, inside
            // `src` (`fits`: c·h·w ≤ src.len()); masked-off lanes are not read. Writes: `run`
            // holds `panels` panels of `pl` = 9·c·16 bytes, each written block by block.
            unsafe { avx512::group(src, band, &lanes[..panels], run) };
        }
        #[cfg(target_arch = "aarch64")]
        neon::group(src, band, &lanes[..panels], run);
    }
    true
}

/// Whether [`pack`] has a SIMD path for panels of `r` lanes on this CPU: 16 with AVX-512 F,
/// BW and VL (every CPU with AVX-512 VNNI, the kernel these panels are for); 8 on 64-bit ARM
/// (NEON, always there; the dot-product kernel's panels).
pub fn simd_for(r: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        r == 16
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
    }
    #[cfg(target_arch = "aarch64")]
    {
        r == 8
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = r;
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::Band;

    /// Lanes per panel.
    const R: usize = 16;

    /// Packs the panels of `out` (consecutive, `9·c·16` bytes each), panel `q` reading with
    /// `lanes[q][t]` (mask, input offset of lane 0) for tap `t`; block by block, the group's
    /// panels side by side.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VL. For every tap, panel and channel `ch < band.c`,
    /// each lane `m` set in the mask must have `ch·h·w + offset + m` inside `src`; `out` must
    /// hold `lanes.len()` panels of `9·band.c·16` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn group(
        src: &[u8],
        band: Band,
        lanes: &[[(u16, isize); 9]],
        out: &mut [u8],
    ) {
        let (n, c) = (band.h * band.w, band.c);
        let pl = 9 * c * R;
        let (base, dst) = (src.as_ptr(), out.as_mut_ptr());
        for t in 0..9 {
            for ch0 in (0..c).step_by(4) {
                let block = (t * c + ch0) / 4 * 4 * R;
                for (q, per_tap) in lanes.iter().enumerate() {
                    let (mask, first) = per_tap[t];
                    // SAFETY: by the caller's contract the unmasked lanes of each row are
                    // inside `src` (the pointer itself may point before or past it:
                    // `wrapping_offset`, and masked-off lanes are never accessed); the 64-byte
                    // store is block `block` of panel `q`, inside `out`.
                    unsafe {
                        let row = |j: usize| {
                            let at = base.wrapping_offset(((ch0 + j) * n) as isize + first);
                            _mm_maskz_loadu_epi8(mask, at as *const i8)
                        };
                        let (a, b, cc, d) = (row(0), row(1), row(2), row(3));
                        let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
                        let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(cc, d), _mm_unpackhi_epi8(cc, d));
                        let o = dst.add(q * pl + block) as *mut __m128i;
                        _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo));
                        _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo));
                        _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi));
                        _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi));
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::Band;

    /// Lanes per panel.
    const R: usize = 8;

    /// Packs the panels of `out` (consecutive, `9·c·8` bytes each) like `avx512::group`,
    /// panel `q` reading with `lanes[q][t]` (mask, input offset of lane 0) for tap `t`; tap
    /// by tap, panel by panel, its `c / 4` blocks in a row. Where a tap's rows of all `c`
    /// planes lie inside `src` each row is one load, its masked-off lanes cleared after it
    /// unless the mask is full; otherwise rows are read lane by lane. Nothing is written when
    /// `src` or `out` is shorter than the band needs.
    pub(super) fn group(src: &[u8], band: Band, lanes: &[[(u16, isize); 9]], out: &mut [u8]) {
        let (n, c) = (band.h * band.w, band.c);
        let pl = 9 * c * R;
        let planes = c.checked_mul(n).filter(|&len| c >= 4 && len <= src.len());
        let panels = lanes.len().checked_mul(pl).filter(|&len| len <= out.len());
        if planes.is_none() || panels.is_none() {
            return;
        }
        const BITS: [u8; R] = [1, 2, 4, 8, 16, 32, 64, 128];
        for t in 0..9 {
            for (q, per_tap) in lanes.iter().enumerate() {
                let (mask, first) = per_tap[t];
                let to = &mut out[q * pl + t * c * R..][..c * R];
                // The first plane's row starts at `f`; the last one's 8 bytes end inside `src`.
                let whole = usize::try_from(first)
                    .ok()
                    .filter(|&f| mask != 0 && f + (c - 1) * n + R <= src.len());
                if mask == 0 {
                    // The tap reads only padding here (a row above or below the plane).
                    to.fill(0);
                    continue;
                }
                // SAFETY: `BITS` holds the 8 bytes the load reads; the rest is register
                // arithmetic (NEON is part of every 64-bit ARM CPU).
                let keep = unsafe { vtst_u8(vdup_n_u8(mask as u8), vld1_u8(BITS.as_ptr())) };
                let Some(f) = whole else {
                    for (b, block) in to.chunks_exact_mut(4 * R).enumerate() {
                        let row = |j: usize| {
                            read_row(src, ((4 * b + j) * n) as isize + first, mask, keep)
                        };
                        let rows = uint8x8x4_t(row(0), row(1), row(2), row(3));
                        // SAFETY: `block` is 32 bytes long (`chunks_exact_mut`), which is
                        // what the 4-way interleaving store of four 8-byte vectors writes.
                        unsafe { vst4_u8(block.as_mut_ptr(), rows) };
                    }
                    continue;
                };
                let mask = mask as u8;
                for (b, block) in to.chunks_exact_mut(4 * R).enumerate() {
                    // SAFETY: the 4 rows start at `f + (4b + j)·n` with `4b + j < c`, so each
                    // one's 8 bytes end by `f + (c − 1)·n + 8 ≤ src.len()` (checked above);
                    // `block` is the 32 bytes the interleaving store writes.
                    unsafe {
                        let at = src.as_ptr().add(f + 4 * b * n);
                        let mut rows = uint8x8x4_t(
                            vld1_u8(at),
                            vld1_u8(at.add(n)),
                            vld1_u8(at.add(2 * n)),
                            vld1_u8(at.add(3 * n)),
                        );
                        if mask != u8::MAX {
                            rows.0 = vand_u8(rows.0, keep);
                            rows.1 = vand_u8(rows.1, keep);
                            rows.2 = vand_u8(rows.2, keep);
                            rows.3 = vand_u8(rows.3, keep);
                        }
                        vst4_u8(block.as_mut_ptr(), rows);
                    }
                }
            }
        }
    }

    /// The 8 lanes of `src` from `start` on, lanes not set in `mask` (`keep`: the same mask
    /// as a byte per lane) zero, for a row that reaches before or past `src` (its lanes
    /// outside `src` are masked). One load of the 8 bytes of `src` nearest the row, its lanes
    /// moved into place by a table lookup (an index outside the 8 loaded bytes gives 0), then
    /// masked; lane by lane, bounds-checked, when `src` is shorter than 8 bytes.
    fn read_row(src: &[u8], start: isize, mask: u16, keep: uint8x8_t) -> uint8x8_t {
        let Some(last) = src.len().checked_sub(R) else {
            let mut lanes = [0u8; R];
            for (m, lane) in lanes.iter_mut().enumerate() {
                if mask >> m & 1 == 1 {
                    *lane = usize::try_from(start + m as isize)
                        .ok()
                        .and_then(|i| src.get(i).copied())
                        .unwrap_or(0);
                }
            }
            // SAFETY: `lanes` holds the 8 bytes the load reads.
            return unsafe { vld1_u8(lanes.as_ptr()) };
        };
        let at = start.clamp(0, last as isize);
        const IOTA: [u8; R] = [0, 1, 2, 3, 4, 5, 6, 7];
        // Lane m of the row is byte `m + start − at` of the load; for the lanes `mask` keeps
        // (inside `src`) that is 0..8, the others are cleared whatever the lookup gave.
        let shift = (start - at) as u8;
        // SAFETY: `at` ≤ `src.len()` − 8, so the load's 8 bytes are inside `src`; `IOTA`
        // holds the 8 bytes its load reads; the rest is register arithmetic.
        unsafe {
            let bytes = vld1_u8(src.as_ptr().add(at as usize));
            let index = vadd_u8(vld1_u8(IOTA.as_ptr()), vdup_n_u8(shift));
            vand_u8(vtbl1_u8(bytes, index), keep)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::int8::pack::tests::noise;
    use crate::detect::int8::pack::{self, Layout, Source};

    /// The im2col of rows y0..y1, written plainly (k = 9·c rows of the band's pixels), then
    /// packed by [`pack::pack_portable`]: what the op did before.
    fn reference(src: &[u8], at: &[(usize, usize); 9], b: Band) -> Vec<u8> {
        let cols = (b.y1 - b.y0) * b.w;
        let k = 9 * b.c;
        let mut taps = vec![0u8; k * cols];
        for (t, &(dy, dx)) in at.iter().enumerate() {
            for ch in 0..b.c {
                for i in 0..cols {
                    let (y, x) = (b.y0 + i / b.w, i % b.w);
                    let (sy, sx) = (y + dy, x + dx);
                    if (1..=b.h).contains(&sy) && (1..=b.w).contains(&sx) {
                        taps[(t * b.c + ch) * cols + i] =
                            src[ch * b.h * b.w + (sy - 1) * b.w + sx - 1];
                    }
                }
            }
        }
        let layout = Layout::K4 { r: b.r };
        let mut out = vec![0xEE; layout.panels(cols) * layout.panel_len(k)];
        let s = Source {
            data: &taps,
            k,
            mn: cols,
            row_stride: cols,
        };
        assert!(pack::pack_portable(layout, &s, 0, &mut out));
        out
    }

    /// Both packers against the im2col-then-pack reference, byte for byte: widths below,
    /// at and above a panel, odd sizes, bands at the top, middle and bottom, tap orders
    /// shuffled, several channel counts.
    #[test]
    fn equals_im2col_then_pack() {
        let order: [(usize, usize); 9] = [
            (0, 0),
            (0, 1),
            (0, 2),
            (1, 0),
            (1, 1),
            (1, 2),
            (2, 0),
            (2, 1),
            (2, 2),
        ];
        let mut shuffled = order;
        shuffled.reverse();
        shuffled.swap(2, 6);
        for (c, h, w) in [
            (4, 1, 1),
            (4, 3, 5),
            (8, 7, 16),
            (12, 5, 17),
            (4, 9, 52),
            (16, 13, 13),
        ] {
            let src = noise(c * h * w + 3, (c * 131 + h * 7 + w) as u32);
            for at in [&order, &shuffled] {
                let bands = [(0, h), (0, 1), (h / 2, h), (h - 1, h), (1.min(h - 1), h)];
                for ((y0, y1), r) in bands.into_iter().flat_map(|b| [(b, 8), (b, 16)]) {
                    if y0 >= y1 {
                        continue;
                    }
                    let band = Band { c, h, w, y0, y1, r };
                    let want = reference(&src[..c * h * w], at, band);
                    let mut a = vec![0x5A; band.packed_len()];
                    let mut b = vec![0xA5; band.packed_len()];
                    assert!(pack_portable(&src, at, band, &mut a), "{band:?}");
                    assert!(pack(&src, at, band, &mut b), "{band:?}");
                    assert_eq!(a, want, "portable {band:?}");
                    assert_eq!(b, want, "pack {band:?} (SIMD: {})", simd_for(r));
                    // Nothing after the planes: the rows at the input's end are read there.
                    let mut e = vec![0xA5; band.packed_len()];
                    assert!(pack(&src[..c * h * w], at, band, &mut e), "{band:?}");
                    assert_eq!(e, want, "pack, input without slack {band:?}");
                }
            }
        }
    }

    /// [`Band::lanes`] lane by lane: each lane's row and column checked on its own.
    fn lanes_one_by_one(b: &Band, p: usize, at: &[(usize, usize); 9]) -> [(u16, isize); 9] {
        let cols = (b.y1 - b.y0) * b.w;
        let first = b.y0 * b.w + p * b.r;
        at.map(|(dy, dx)| {
            let mut mask = 0u16;
            for m in 0..b.r.min(cols.saturating_sub(p * b.r)) {
                let (y, x) = ((first + m) / b.w, (first + m) % b.w);
                if (1..=b.h).contains(&(y + dy)) && (1..=b.w).contains(&(x + dx)) {
                    mask |= 1 << m;
                }
            }
            let shift = (dy as isize - 1) * b.w as isize + dx as isize - 1;
            (mask, first as isize + shift)
        })
    }

    #[test]
    fn lanes_by_rows_equal_lanes_one_by_one() {
        let at: [(usize, usize); 9] = std::array::from_fn(|t| (t / 3, t % 3));
        for r in [8, 16] {
            for w in 1usize..=20 {
                for h in 1usize..=5 {
                    for (y0, y1) in [(0, h), (h / 2, h), (0, h.div_ceil(2))] {
                        if y0 >= y1 {
                            continue;
                        }
                        let b = Band {
                            c: 4,
                            h,
                            w,
                            y0,
                            y1,
                            r,
                        };
                        for p in 0..((y1 - y0) * w).div_ceil(r) {
                            assert_eq!(
                                b.lanes(p, &at),
                                lanes_one_by_one(&b, p, &at),
                                "{b:?}, panel {p}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let src = vec![0u8; 4 * 3 * 3];
        let at = [(1, 1); 9];
        let good = Band {
            c: 4,
            h: 3,
            w: 3,
            y0: 0,
            y1: 3,
            r: 8,
        };
        for r in [8, 16] {
            let good = Band { r, ..good };
            let mut out = vec![0; good.packed_len()];
            assert!(pack(&src, &at, good, &mut out));
            assert!(pack_portable(&src, &at, good, &mut out));
        }
        for bad in [
            Band { r: 4, ..good },
            Band {
                r: 16,
                c: 3,
                ..good
            },
            Band { c: 3, ..good },
            Band { h: 4, ..good },
            Band { y1: 4, ..good },
            Band { y0: 3, ..good },
        ] {
            let mut out = vec![0; bad.packed_len()];
            assert!(!pack(&src, &at, bad, &mut out), "{bad:?}");
            assert!(!pack_portable(&src, &at, bad, &mut out), "{bad:?}");
        }
        let mut short = vec![0; good.packed_len() - 1];
        assert!(!pack(&src, &at, good, &mut short));
    }
}
