//! Packing int8 activations into the panel layouts of tract's int8 matrix kernels, fast.
//!
//! tract packs the activation side (B) of every int8 matmul before the kernel runs. For the
//! layouts lookout's models produce — `k` rows, each holding `mn` contiguous bytes (NCHW
//! channels × pixels) — tract 0.23.9 writes one byte at a time: `PackedI8K4::pack_view` (the
//! dot-product kernels: Pi 5, x86 VNNI) and `PackedFormat::pack_t` for 8-bit panels narrower
//! than 16 bytes (`KOutWriter`: Pi 4 aarch64, armv7, x86 AVX2). On a Pi 5 that byte loop was
//! 30 % of an INT8 inference, on a Pi 4 16 % (docs/int8.md).
//!
//! The layouts, for panel `p` of `r` lanes (`m` = lane, `k` = depth):
//! - **K4** (`PackedI8K4{r}`): `out[p·P + (k/4)·4r + 4m + k%4] = src[k][p·r + m]`,
//!   `P = ⌈k/4⌉·4·r`; lanes past `mn` and depths past `k` are zero.
//! - **Plain** (`PackedFormat{I8, r, align, pad}`): `out[p·P + k·r + m] = src[k][p·r + m]`,
//!   `P = ⌈(k + pad)·r / align⌉·align`; everything past the data is zero here (tract leaves
//!   the padding records uninitialised; its kernels never read them into results).
//!
//! Each layout has a bounds-checked portable packer and, for 8- and 16-lane K4 panels, a SIMD one
//! (SSE2 on x86_64, NEON on aarch64) that the tests compare byte for byte with the portable twin and
//! with tract's own packer.

/// Which panel layout to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// tract's `PackedI8K4 { r }`: four consecutive depths per lane (dot-product kernels).
    K4 {
        /// Lanes per panel.
        r: usize,
    },
    /// tract's `PackedFormat { dt: I8, r, alignment_bytes, end_padding_record }`.
    Plain {
        /// Lanes per panel.
        r: usize,
        /// Panel length is a multiple of this many bytes.
        align: usize,
        /// Extra depth records of padding at the end of each panel.
        pad_records: usize,
    },
}

impl Layout {
    /// Lanes per panel.
    pub fn r(&self) -> usize {
        match *self {
            Layout::K4 { r } | Layout::Plain { r, .. } => r,
        }
    }

    /// Bytes of one panel for depth `k`.
    pub fn panel_len(&self, k: usize) -> usize {
        match *self {
            Layout::K4 { r } => k.div_ceil(4) * 4 * r,
            Layout::Plain {
                r,
                align,
                pad_records,
            } => ((k + pad_records) * r).div_ceil(align.max(1)) * align.max(1),
        }
    }

    /// Panels needed for `mn` lanes.
    pub fn panels(&self, mn: usize) -> usize {
        mn.div_ceil(self.r())
    }
}

/// A k-major int8 matrix: `k` rows of `mn` contiguous bytes, row `i` at `data[i·row_stride..]`.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The bytes (int8 values as stored).
    pub data: &'a [u8],
    /// Depth (rows).
    pub k: usize,
    /// Lanes (bytes per row).
    pub mn: usize,
    /// Distance between rows, in bytes (≥ `mn`).
    pub row_stride: usize,
}

impl Source<'_> {
    /// True when every row lies inside `data`.
    pub fn is_valid(&self) -> bool {
        self.row_stride >= self.mn
            && (self.k == 0
                || (self.k - 1)
                    .checked_mul(self.row_stride)
                    .and_then(|o| o.checked_add(self.mn))
                    .is_some_and(|end| end <= self.data.len()))
    }
}

/// Bytes of a row that one group of full panels reads ([`pack`]): a cache line.
const GROUP_BYTES: usize = 64;

/// Packs panels `first..first + out.len() / panel_len` of `src` into `out` (whole panels, zero
/// padding included), with the portable bounds-checked code. Returns `false` (writing nothing)
/// when `out` is not a whole number of panels or `src` is not valid.
pub fn pack_portable(layout: Layout, src: &Source, first: usize, out: &mut [u8]) -> bool {
    let pl = layout.panel_len(src.k);
    if !src.is_valid() || pl == 0 || !out.len().is_multiple_of(pl) {
        return false;
    }
    let r = layout.r();
    for (i, panel) in out.chunks_exact_mut(pl).enumerate() {
        panel.fill(0);
        let m0 = (first + i) * r;
        let pw = r.min(src.mn.saturating_sub(m0));
        for kk in 0..src.k {
            let row = &src.data[kk * src.row_stride + m0..][..pw];
            match layout {
                Layout::K4 { r } => {
                    let block = &mut panel[(kk / 4) * 4 * r..][..4 * r];
                    for (m, &v) in row.iter().enumerate() {
                        block[4 * m + kk % 4] = v;
                    }
                }
                Layout::Plain { r, .. } => panel[kk * r..][..pw].copy_from_slice(row),
            }
        }
    }
    true
}

/// Packs like [`pack_portable`], with SIMD for 8- and 16-lane K4 panels (16: the AMX and
/// AVX-512 16×16 kernels) and fixed-size copies for 8- and 4-lane plain panels (x86 AVX2 and the Pi 4's aarch64 kernel; armv7); the result is
/// byte-identical (tests). A last, partial panel is first gathered into a zero-padded
/// scratch copy as wide as a panel, so it takes the same path.
pub fn pack(layout: Layout, src: &Source, first: usize, out: &mut [u8]) -> bool {
    let pl = layout.panel_len(src.k);
    if !src.is_valid() || pl == 0 || !out.len().is_multiple_of(pl) {
        return false;
    }
    match layout {
        Layout::K4 { r: 8 } => pack_lanes::<8, _, _>(
            src,
            first,
            out,
            pl,
            k4_full_panels::<8>,
            k4_clear_lanes::<8>,
        ),
        Layout::K4 { r: 16 } => pack_lanes::<16, _, _>(
            src,
            first,
            out,
            pl,
            k4_full_panels::<16>,
            k4_clear_lanes::<16>,
        ),
        Layout::Plain { r: 8, .. } => pack_lanes::<8, _, _>(
            src,
            first,
            out,
            pl,
            plain_full_panels::<8>,
            plain_clear_lanes::<8>,
        ),
        Layout::Plain { r: 4, .. } => pack_lanes::<4, _, _>(
            src,
            first,
            out,
            pl,
            plain_full_panels::<4>,
            plain_clear_lanes::<4>,
        ),
        _ => return pack_portable(layout, src, first, out),
    }
    true
}

/// Runs `full` on every panel of `R` lanes: full panels in groups of up to [`GROUP_BYTES`] / `R`
/// (`full(src, m0, panels, out)` writes `panels` consecutive panels, `out` being theirs), so
/// that each row's bytes for the group are one cache line, read once for all of its panels. A
/// partial panel (`pw` < `R` lanes of data) is packed whole from the rows' next bytes when they
/// are inside the source (the rows of a batched tensor or a band buffer are followed by more
/// data), then its lanes from `pw` on cleared by `clear`; else through a zero-padded `k × R` copy.
fn pack_lanes<const R: usize, F, C>(
    src: &Source,
    first: usize,
    out: &mut [u8],
    pl: usize,
    full: F,
    clear: C,
) where
    F: Fn(&Source, usize, usize, &mut [u8]),
    C: Fn(&mut [u8], usize, usize),
{
    let group = (GROUP_BYTES / R).max(1);
    let panels = out.len() / pl;
    // Panels `first..first + whole` hold R lanes of data each.
    let whole = (src.mn / R).saturating_sub(first).min(panels);
    let (body, rest) = out.split_at_mut(whole * pl);
    for (g, run) in body.chunks_mut(group * pl).enumerate() {
        full(src, (first + g * group) * R, run.len() / pl, run);
    }
    let mut scratch = Vec::new();
    for (i, panel) in rest.chunks_exact_mut(pl).enumerate() {
        let m0 = (first + whole + i) * R;
        // Panels past `whole` are partial (pw < R) or empty.
        let pw = R.min(src.mn.saturating_sub(m0));
        if pw == 0 {
            panel.fill(0);
            continue;
        }
        let wide = Source { mn: m0 + R, ..*src };
        if wide.is_valid() {
            full(&wide, m0, 1, panel);
            clear(panel, src.k, pw);
            continue;
        }
        scratch.clear();
        scratch.resize(src.k * R, 0);
        for (kk, row) in scratch.chunks_exact_mut(R).enumerate() {
            let from = kk * src.row_stride + m0;
            // A fixed-size read where R bytes are there to read (every row but the last
            // ones), then the lanes past the data cleared: no `memcpy` call per row.
            let mut buf = [0u8; R];
            match src
                .data
                .get(from..from + R)
                .and_then(|b| <[u8; R]>::try_from(b).ok())
            {
                Some(b) => {
                    for (j, (d, s)) in buf.iter_mut().zip(b).enumerate() {
                        *d = if j < pw { s } else { 0 };
                    }
                }
                None => {
                    for (d, s) in buf.iter_mut().zip(&src.data[from..from + pw]) {
                        *d = *s;
                    }
                }
            }
            row.copy_from_slice(&buf);
        }
        let padded = Source {
            data: &scratch,
            k: src.k,
            mn: R,
            row_stride: R,
        };
        full(&padded, 0, 1, panel);
    }
}

/// Zeroes lanes `pw..R` of the `k` depths of a plain panel (`k` records of `R` bytes).
fn plain_clear_lanes<const R: usize>(panel: &mut [u8], k: usize, pw: usize) {
    for record in panel.chunks_exact_mut(R).take(k) {
        // A fixed-size select, not a `memset` call per record.
        for (j, b) in record.iter_mut().enumerate() {
            if j >= pw {
                *b = 0;
            }
        }
    }
}

/// Zeroes lanes `pw..R` of every block of 4 depths of a K4 panel (blocks of `R` × 4 bytes,
/// lane-major), the depth tail's block included.
fn k4_clear_lanes<const R: usize>(panel: &mut [u8], k: usize, pw: usize) {
    for block in panel.chunks_exact_mut(R * 4).take(k.div_ceil(4)) {
        for (j, b) in block.iter_mut().enumerate() {
            if j >= 4 * pw {
                *b = 0;
            }
        }
    }
}

/// `panels` consecutive full plain panels of `R` lanes from lane `m0` (each `out.len() /
/// panels` bytes): depth by depth, one `R`-byte copy per panel (a single load and store).
fn plain_full_panels<const R: usize>(src: &Source, m0: usize, panels: usize, out: &mut [u8]) {
    let pl = out.len() / panels.max(1);
    for kk in 0..src.k {
        let from = kk * src.row_stride + m0;
        for (q, panel) in out.chunks_exact_mut(pl).enumerate() {
            let at = from + q * R;
            let row: [u8; R] = src.data[at..at + R].try_into().unwrap_or([0; R]);
            panel[kk * R..][..R].copy_from_slice(&row);
        }
    }
    for panel in out.chunks_exact_mut(pl) {
        panel[src.k * R..].fill(0);
    }
}

/// `panels` consecutive full K4 panels of `R` = 8 or 16 lanes from lane `m0` (lanes `m0..m0 +
/// panels·R` all inside `src.mn`; each panel `out.len() / panels` bytes), block by block: the
/// four rows of a block are read once for all the panels.
fn k4_full_panels<const R: usize>(src: &Source, m0: usize, panels: usize, out: &mut [u8]) {
    let k4 = src.k / 4;
    let block = 4 * R;
    let pl = out.len() / panels.max(1);
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // The last row read is row 4·k4 − 1 at bytes m0..m0 + panels·R; the caller guarantees
        // m0 + panels·R ≤ mn and `src.is_valid()`, so all reads are inside `src.data`. Writes:
        // 4·R bytes per block and panel, k4 blocks ≤ pl / (4·R) per panel.
        assert!(m0 + panels * R <= src.mn && src.is_valid() && pl >= k4 * block);
        if k4 > 0 && panels > 0 {
            // SAFETY: bounds as argued above: every R-byte read starts at
            // (4·b + j)·row_stride + m0 + q·R with 4·b + j < k and m0 + (q + 1)·R ≤ mn, so it
            // ends at or before (k − 1)·row_stride + mn ≤ data.len(); every 4·R-byte write
            // ends at or before q·pl + 4·R·k4 ≤ (q + 1)·pl ≤ out.len().
            unsafe {
                let (base, out) = (src.data.as_ptr(), out.as_mut_ptr());
                let shape = [src.row_stride, m0, k4, panels, pl];
                // One call per width, so that each sees a constant `step` it can inline.
                match R {
                    8 => k4_blocks::<8>(base, shape, out, simd::k4_r8_block),
                    _ => k4_blocks::<16>(base, shape, out, simd::k4_r16_block),
                }
            };
        }
    }
    for (q, panel) in out.chunks_exact_mut(pl).enumerate() {
        let m0 = m0 + q * R;
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        for b in 0..k4 {
            k4_block_portable::<R>(src, m0, b, &mut panel[b * block..][..block]);
        }
        // The depth tail (k % 4 rows) and the zero padding after the data.
        let done = k4 * block;
        panel[done..].fill(0);
        for kk in k4 * 4..src.k {
            let row = &src.data[kk * src.row_stride + m0..][..R];
            for (m, &v) in row.iter().enumerate() {
                panel[done + 4 * m + kk % 4] = v;
            }
        }
    }
}

/// The portable twin of one SIMD K4 block: depths `4b..4b + 4`, lanes `m0..m0 + R`.
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), allow(dead_code))]
fn k4_block_portable<const R: usize>(src: &Source, m0: usize, b: usize, out: &mut [u8]) {
    for j in 0..4 {
        let row = &src.data[(4 * b + j) * src.row_stride + m0..][..R];
        for (m, &v) in row.iter().enumerate() {
            out[4 * m + j] = v;
        }
    }
}

/// Walks `blocks` K4 blocks of `panels` consecutive panels of `R` lanes (`shape` = `[stride,
/// m0, blocks, panels, pl]`): block `b` reads rows `4b..4b + 4` (`panels·R` bytes each, from
/// `base + row·stride + m0`) and writes `4·R` bytes at `out + q·pl + 4·R·b` for each panel
/// `q`, through `step`, the architecture's interleave of one block.
///
/// # Safety
/// Every read `base + (4b + j)·stride + m0 .. + panels·R` and every write
/// `out + q·pl + 4·R·b .. + 4·R`, for `b < blocks`, `j < 4`, `q < panels`, must be in bounds,
/// and `step` must read and write only those bytes.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
unsafe fn k4_blocks<const R: usize>(
    base: *const u8,
    [stride, m0, blocks, panels, pl]: [usize; 5],
    out: *mut u8,
    step: unsafe fn([*const u8; 4], *mut u8),
) {
    for b in 0..blocks {
        for q in 0..panels {
            // SAFETY: the caller guarantees that these four rows and this block's output are
            // in bounds, and that `step` touches nothing else.
            unsafe {
                let row = |j: usize| base.add((4 * b + j) * stride + m0 + q * R);
                step(
                    [row(0), row(1), row(2), row(3)],
                    out.add(q * pl + 4 * R * b),
                );
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// One K4 block of 8 lanes: the 8 bytes at each of `rows` interleaved into 32 bytes at
    /// `out` (SSE2 unpacks).
    ///
    /// # Safety
    /// `rows[j] .. + 8` must be readable and `out .. + 32` writable.
    pub(super) unsafe fn k4_r8_block(rows: [*const u8; 4], out: *mut u8) {
        // SAFETY: in bounds by the caller's contract; SSE2 is part of x86_64; unaligned loads
        // and stores are used throughout.
        unsafe {
            let row = |j: usize| rows[j] as *const __m128i;
            let ab = _mm_unpacklo_epi8(_mm_loadl_epi64(row(0)), _mm_loadl_epi64(row(1))); // a0 b0 a1 b1 …
            let cd = _mm_unpacklo_epi8(_mm_loadl_epi64(row(2)), _mm_loadl_epi64(row(3))); // c0 d0 …
            let o = out as *mut __m128i;
            _mm_storeu_si128(o, _mm_unpacklo_epi16(ab, cd)); // lanes 0..4: a b c d each
            _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab, cd)); // lanes 4..8
        }
    }

    /// One K4 block of 16 lanes (the AMX/AVX-512 kernels' `PackedI8K4 { r: 16 }`): the 16
    /// bytes at each of `rows` interleaved into 64 bytes at `out` (SSE2 unpacks).
    ///
    /// # Safety
    /// `rows[j] .. + 16` must be readable and `out .. + 64` writable.
    pub(super) unsafe fn k4_r16_block(rows: [*const u8; 4], out: *mut u8) {
        // SAFETY: in bounds by the caller's contract; SSE2 is part of x86_64; unaligned loads
        // and stores are used throughout.
        unsafe {
            let row = |j: usize| _mm_loadu_si128(rows[j] as *const __m128i);
            let (a, bb, c, d) = (row(0), row(1), row(2), row(3));
            let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, bb), _mm_unpackhi_epi8(a, bb));
            let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d));
            let o = out as *mut __m128i;
            _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo)); // lanes 0..4
            _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo)); // 4..8
            _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi)); // 8..12
            _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi)); // 12..16
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod simd {
    use std::arch::aarch64::*;

    /// One K4 block of 8 lanes: the 8 bytes at each of `rows` interleaved into 32 bytes at
    /// `out` (`st4`).
    ///
    /// # Safety
    /// `rows[j] .. + 8` must be readable and `out .. + 32` writable.
    pub(super) unsafe fn k4_r8_block(rows: [*const u8; 4], out: *mut u8) {
        // SAFETY: in bounds by the caller's contract; NEON is part of aarch64;
        // `vld1_u8`/`vst4_u8` have no alignment requirement.
        unsafe {
            let v = uint8x8x4_t(
                vld1_u8(rows[0]),
                vld1_u8(rows[1]),
                vld1_u8(rows[2]),
                vld1_u8(rows[3]),
            );
            vst4_u8(out, v);
        }
    }

    /// One K4 block of 16 lanes: the 16 bytes at each of `rows` interleaved into 64 bytes at
    /// `out` (`st4`).
    ///
    /// # Safety
    /// `rows[j] .. + 16` must be readable and `out .. + 64` writable.
    pub(super) unsafe fn k4_r16_block(rows: [*const u8; 4], out: *mut u8) {
        // SAFETY: in bounds by the caller's contract; NEON is part of aarch64;
        // `vld1q_u8`/`vst4q_u8` have no alignment requirement.
        unsafe {
            let v = uint8x16x4_t(
                vld1q_u8(rows[0]),
                vld1q_u8(rows[1]),
                vld1q_u8(rows[2]),
                vld1q_u8(rows[3]),
            );
            vst4q_u8(out, v);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `n` pseudo-random bytes from `seed` (xorshift).
    pub(crate) fn noise(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 7) as u8
            })
            .collect()
    }

    fn layouts() -> Vec<Layout> {
        vec![
            Layout::K4 { r: 8 },
            Layout::K4 { r: 16 },
            Layout::K4 { r: 4 },
            Layout::Plain {
                r: 8,
                align: 1,
                pad_records: 1,
            },
            Layout::Plain {
                r: 8,
                align: 16,
                pad_records: 1,
            },
            Layout::Plain {
                r: 4,
                align: 4,
                pad_records: 0,
            },
        ]
    }

    #[test]
    fn simd_and_portable_agree_on_odd_shapes() {
        for layout in layouts() {
            for &(k, mn, extra) in &[
                (1, 1, 0),
                (3, 7, 0),
                (4, 8, 0),
                (5, 9, 3),
                (27, 52, 0),
                (864, 52, 0),
                (97, 13, 5),
                (16, 17, 1),
                (9, 40, 2),
                (288, 35, 0),
                (36, 150, 0),
                (8, 260, 4),
                (5, 64, 0),
                (13, 1000, 7),
            ] {
                let stride = mn + extra;
                let data = noise(k * stride, (k * 31 + mn) as u32);
                let src = Source {
                    data: &data,
                    k,
                    mn,
                    row_stride: stride,
                };
                let pl = layout.panel_len(k);
                let n = layout.panels(mn);
                let mut a = vec![0xAA; n * pl];
                let mut b = vec![0x55; n * pl];
                assert!(pack_portable(layout, &src, 0, &mut a));
                assert!(pack(layout, &src, 0, &mut b));
                assert_eq!(a, b, "{layout:?} k={k} mn={mn} stride={stride}");
                // Panels packed from the middle equal the same panels of the whole.
                if n > 1 {
                    let mut c = vec![0x11; (n - 1) * pl];
                    assert!(pack(layout, &src, 1, &mut c));
                    assert_eq!(&a[pl..], &c[..]);
                }
            }
        }
    }

    #[test]
    fn portable_follows_the_documented_layouts() {
        let (k, mn) = (6, 10);
        let data: Vec<u8> = (0..(k * mn) as u8).collect();
        let src = Source {
            data: &data,
            k,
            mn,
            row_stride: mn,
        };
        let at = |kk: usize, m: usize| data[kk * mn + m];
        let l = Layout::K4 { r: 8 };
        let pl = l.panel_len(k);
        assert_eq!(pl, 8 * 8);
        let mut out = vec![0xFF; 2 * pl];
        assert!(pack_portable(l, &src, 0, &mut out));
        for p in 0..2 {
            for kk in 0..8 {
                for m in 0..8 {
                    let want = if kk < k && p * 8 + m < mn {
                        at(kk, p * 8 + m)
                    } else {
                        0
                    };
                    assert_eq!(out[p * pl + (kk / 4) * 32 + 4 * m + kk % 4], want);
                }
            }
        }
        let l = Layout::Plain {
            r: 8,
            align: 16,
            pad_records: 1,
        };
        let pl = l.panel_len(k);
        assert_eq!(pl, 64);
        let mut out = vec![0xFF; 2 * pl];
        assert!(pack_portable(l, &src, 0, &mut out));
        for p in 0..2 {
            for kk in 0..k {
                for m in 0..8 {
                    let want = if p * 8 + m < mn { at(kk, p * 8 + m) } else { 0 };
                    assert_eq!(out[p * pl + kk * 8 + m], want);
                }
            }
            assert!(out[p * pl + k * 8..(p + 1) * pl].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let data = vec![0u8; 10];
        let src = Source {
            data: &data,
            k: 3,
            mn: 4,
            row_stride: 4,
        };
        let l = Layout::K4 { r: 8 };
        let mut out = vec![0; l.panel_len(3)];
        assert!(!pack(l, &src, 0, &mut out), "rows past the end of the data");
        let src = Source {
            data: &data,
            k: 2,
            mn: 4,
            row_stride: 4,
        };
        let mut short = vec![0; l.panel_len(2) - 1];
        assert!(!pack(l, &src, 0, &mut short), "not a whole panel");
        assert!(!pack_portable(l, &src, 0, &mut short));
    }
}
