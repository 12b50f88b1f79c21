//! The im2col of a 3×3, stride-1, zero-padded convolution packed straight into tract's K4
//! panels of 16 lanes (`PackedI8K4 { r: 16 }`: the AVX-512 VNNI kernel's), without the
//! band's im2col being written first.
//!
//! The im2col's depth `k = 9·C` runs tap by tap (the taps' order, `FastTaps::same_3x3`),
//! channel by channel within a tap; its lanes are the band's output pixels. Lane `i` of tap
//! `(dy, dx)` and channel `ch` is the input's byte at `i + y0·w + (dy − 1)·w + dx − 1` of plane
//! `ch`, or 0 where that falls in the padding: every tap's lanes are one run of the input
//! plane, shifted, with some lanes masked. With `C` a multiple of 4 every K4 block (4 depths)
//! is 4 channels of one tap, so a block of a panel is 4 masked 16-byte loads, interleaved.
//! The bytes are those of [`super::pack::pack`] over the taps [`super::taps::FastTaps`]
//! writes (tests).

/// Lanes per panel.
const R: usize = 16;

/// Full panels packed together, so that each row's 64 bytes are read once for them.
#[cfg(target_arch = "x86_64")]
const GROUP: usize = 4;

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
}

impl Band {
    /// Bytes of packed panels the band needs.
    pub fn packed_len(&self) -> usize {
        let cols = self.y1.saturating_sub(self.y0) * self.w;
        cols.div_ceil(R) * 9 * self.c * R
    }

    /// Whether this band can be packed here: `c` a multiple of 4, rows inside the plane, and
    /// `src` holding `c` planes.
    fn fits(&self, src: &[u8], out: &[u8]) -> bool {
        self.c.is_multiple_of(4)
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

    /// The mask of the lanes of panel `p` that tap `(dy, dx)` reads from the input (bit `m`:
    /// lane `m`), and the input offset of its lane 0 (may be negative: lanes before the plane
    /// are masked).
    fn lanes(&self, p: usize, (dy, dx): (usize, usize)) -> (u16, isize) {
        let cols = (self.y1 - self.y0) * self.w;
        let first = self.y0 * self.w + p * R;
        let mut mask = 0u16;
        for m in 0..R.min(cols.saturating_sub(p * R)) {
            let (y, x) = ((first + m) / self.w, (first + m) % self.w);
            let inside = (1..=self.h).contains(&(y + dy)) && (1..=self.w).contains(&(x + dx));
            mask |= u16::from(inside) << m;
        }
        let shift = (dy as isize - 1) * self.w as isize + dx as isize - 1;
        (mask, first as isize + shift)
    }
}

/// Packs `band` of the 3×3 im2col of `src` (`c` planes of `h × w` bytes) with tap positions
/// `at` into `out` ([`Band::packed_len`] bytes), portable code. False (nothing written) when the band
/// does not fit.
pub fn pack_portable(src: &[u8], at: &[(usize, usize); 9], band: Band, out: &mut [u8]) -> bool {
    if !band.fits(src, out) {
        return false;
    }
    let (n, pl) = (band.h * band.w, 9 * band.c * R);
    for (p, panel) in out.chunks_exact_mut(pl).enumerate() {
        for (t, &tap) in at.iter().enumerate() {
            let (mask, first) = band.lanes(p, tap);
            for ch in 0..band.c {
                let kk = t * band.c + ch;
                let block = &mut panel[(kk / 4) * 4 * R..][..4 * R];
                for m in 0..R {
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

/// Packs like [`pack_portable`], with AVX-512 masked loads where the CPU has them
/// ([`simd_available`]); the same bytes (tests).
pub fn pack(src: &[u8], at: &[(usize, usize); 9], band: Band, out: &mut [u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if simd_available() {
        if !band.fits(src, out) {
            return false;
        }
        let pl = 9 * band.c * R;
        for (g, run) in out.chunks_mut(GROUP * pl).enumerate() {
            let panels = run.len() / pl;
            let mut lanes = [[(0u16, 0isize); 9]; GROUP];
            for (q, per_tap) in lanes.iter_mut().take(panels).enumerate() {
                for (l, &tap) in per_tap.iter_mut().zip(at) {
                    *l = band.lanes(g * GROUP + q, tap);
                }
            }
            // SAFETY: the CPU has AVX-512 F, BW and VL (checked above). Reads: every lane
            // `band.lanes` leaves in a mask is an input pixel of plane `ch` < c, inside
            // `src` (`fits`: c·h·w ≤ src.len()); masked-off lanes are not read. Writes: `run`
            // holds `panels` panels of `pl` = 9·c·16 bytes, each written block by block.
            unsafe { avx512::group(src, band, &lanes[..panels], run) };
        }
        return true;
    }
    pack_portable(src, at, band, out)
}

/// Whether [`pack`] uses its AVX-512 path on this CPU (F, BW, VL: every CPU with AVX-512
/// VNNI, the kernel these panels are for).
pub fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Band, R};

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
        let layout = Layout::K4 { r: R };
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
                for (y0, y1) in [(0, h), (0, 1), (h / 2, h), (h - 1, h), (1.min(h - 1), h)] {
                    if y0 >= y1 {
                        continue;
                    }
                    let band = Band { c, h, w, y0, y1 };
                    let want = reference(&src[..c * h * w], at, band);
                    let mut a = vec![0x5A; band.packed_len()];
                    let mut b = vec![0xA5; band.packed_len()];
                    assert!(pack_portable(&src, at, band, &mut a), "{band:?}");
                    assert!(pack(&src, at, band, &mut b), "{band:?}");
                    assert_eq!(a, want, "portable {band:?}");
                    assert_eq!(b, want, "pack {band:?} (SIMD: {})", simd_available());
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
        };
        let mut out = vec![0; good.packed_len()];
        assert!(pack(&src, &at, good, &mut out));
        for bad in [
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
