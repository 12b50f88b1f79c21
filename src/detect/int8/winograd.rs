//! lookout's int8 3×3 stride-1 convolution by Winograd's F(2×2, 3×3), exact in integers, for
//! CPUs without the dot product (the Pi 4's Cortex-A72, the Pi 3's A53).
//!
//! A direct 3×3 convolution does 9 multiply-adds per output pixel, input channel and output
//! channel; F(2×2, 3×3) computes a 2×2 tile of outputs from a 4×4 tile of inputs with 16
//! products instead of 36, 2.25× fewer. The transforms are scaled to integers: with
//! `G' = 2G`,
//!
//! ```text
//! G' = | 2  0  0 |   Bᵀ = | 1  0 −1  0 |   Aᵀ = | 1  1  1  0 |
//!      | 1  1  1 |        | 0  1  1  0 |        | 0  1 −1 −1 |
//!      | 1 −1  1 |        | 0 −1  1  0 |
//!      | 0  0  2 |        | 0  1  0 −1 |
//! ```
//!
//! `Aᵀ[(G'gG'ᵀ) ⊙ (BᵀdB)]A` is exactly 4 × the tile of the direct convolution, so the products
//! this module writes are, bit for bit, the direct convolution's i32 sums (the tests compare
//! them with a plain loop). The ranges fit: weights in −127..=127 give transformed weights
//! within ±9·127 = ±1,143 and int8 inputs transformed inputs within ±4·128 = ±512, both
//! i16; a product is within ±585,216 and the output transform adds 9 sums of `c` of them,
//! which stays inside i32 for `c` ≤ [`MAX_CHANNELS`].
//!
//! The 16 element-wise products over the input channels are 16 matmuls of i16 values:
//! `smlal` by lane, 4 multiply-adds per instruction, on tiles of 8 output channels × 8
//! output tiles (16 accumulator registers). Against the [`super::pairwise`] kernel's 16
//! multiply-adds in 3 instructions, the 2.25× fewer products leave the 3×3 convolutions about
//! 0.8× the instructions, transforms included, and the whole model 0.85× on the Pi 4 proxy
//! (docs/int8.md). With the dot product (Pi 5) tract's SDOT kernel stays: 16 multiply-adds per
//! instruction, which 16-bit products cannot beat.
//!
//! Layouts (all zero-padded):
//! - weights ([`Weights`]): `[16][m/8][c][8]` i16, the 8 output channels of a block last;
//! - transformed inputs: `[16][tiles/8][c][8]` i16, the 8 tiles of a block last;
//! - sums of one block: `[16][8 channels][8 tiles]` i32.
//!
//! NEON on aarch64 (the baseline there, no runtime check); everywhere else, and as the twin
//! the tests compare the NEON code with, a bounds-checked portable version.

/// The name the load line and `lookout bench` give this kernel.
pub const NAME: &str = "lookout_winograd_f2x3_i16";

/// The most input channels whose sums are sure to fit i32 (module doc).
pub const MAX_CHANNELS: usize = 400;

/// Output channels per block.
const MB: usize = 8;
/// Tiles per block.
const TB: usize = 8;
/// Positions of a 4×4 transformed tile.
const P: usize = 16;

/// A 3×3 convolution's weights, transformed and packed once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Weights {
    m: usize,
    c: usize,
    data: Vec<i16>,
}

impl Weights {
    /// The transformed weights of `m` output channels over `c` input channels from an
    /// im2col'd 3×3 convolution's `[m, 9·c]` weights: tap `t` (input channel `i` of output
    /// `o` at `w[o · 9c + t · c + i]`) at kernel position `at[t]` = `(dy, dx)`. `None` when
    /// the lengths do not match, the taps are not the 9 positions once each, `c` is 0 or
    /// above [`MAX_CHANNELS`], or a weight is −128 (its transform could leave the range).
    pub fn from_taps(w: &[i8], m: usize, c: usize, at: [(usize, usize); 9]) -> Option<Self> {
        if c == 0 || c > MAX_CHANNELS || m == 0 || w.len() != m * 9 * c || w.contains(&i8::MIN) {
            return None;
        }
        let mut tap_of = [usize::MAX; 9];
        for (t, &(dy, dx)) in at.iter().enumerate() {
            let slot = tap_of.get_mut(dy * 3 + dx).filter(|_| dx < 3)?;
            if *slot != usize::MAX {
                return None;
            }
            *slot = t;
        }
        let mbs = m.div_ceil(MB);
        let mut data = vec![0i16; P * mbs * c * MB];
        for (o, row) in w.chunks_exact(9 * c).enumerate() {
            // Each kernel position's c weights, and where position p of channel 0 goes.
            let g: [&[i8]; 9] = std::array::from_fn(|q| &row[tap_of[q] * c..][..c]);
            let base: [usize; P] = std::array::from_fn(|p| (p * mbs + o / MB) * c * MB + o % MB);
            for i in 0..c {
                let at = |q: usize| g[q][i] as i16;
                let k = [
                    [at(0), at(1), at(2)],
                    [at(3), at(4), at(5)],
                    [at(6), at(7), at(8)],
                ];
                let u = transform_weights(&k);
                for (&b, &v) in base.iter().zip(u.iter().flatten()) {
                    data[b + i * MB] = v;
                }
            }
        }
        Some(Weights { m, c, data })
    }

    /// Input channels.
    pub fn c(&self) -> usize {
        self.c
    }

    /// The weights of position `p`, output block `mb`: `c × 8` values.
    fn block(&self, p: usize, mb: usize) -> &[i16] {
        let span = self.c * MB;
        let at = (p * self.m.div_ceil(MB) + mb) * span;
        &self.data[at..at + span]
    }
}

/// `G' g G'ᵀ` of one 3×3 kernel.
#[inline(always)]
fn transform_weights(g: &[[i16; 3]; 3]) -> [[i16; 4]; 4] {
    // Written out: array `map`s stay calls in the load's loop.
    #[inline(always)]
    fn g_row(r: [i16; 3]) -> [i16; 4] {
        [2 * r[0], r[0] + r[1] + r[2], r[0] - r[1] + r[2], 2 * r[2]]
    }
    let [a, b, c] = *g;
    // G' g: the rows of the 4×3 intermediate, then each row · G'ᵀ.
    let sum = [a[0] + b[0] + c[0], a[1] + b[1] + c[1], a[2] + b[2] + c[2]];
    let alt = [a[0] - b[0] + c[0], a[1] - b[1] + c[1], a[2] - b[2] + c[2]];
    [
        g_row([2 * a[0], 2 * a[1], 2 * a[2]]),
        g_row(sum),
        g_row(alt),
        g_row([2 * c[0], 2 * c[1], 2 * c[2]]),
    ]
}

/// A thread's working memory, kept between calls: the band's transformed inputs, its
/// padded input rows with their row transforms, and one block's sums.
#[derive(Debug, Default)]
pub struct Scratch {
    inputs: Vec<i16>,
    rows: Vec<i16>,
    sums: Vec<i32>,
}

/// The i32 sums of the 3×3, stride-1, zero-padded (1 each side) convolution of `input`
/// (`c` planes of `h × w` int8 bytes) with `weights`, for output rows `y0..y1`: channel
/// `o`'s row `y`, column `x` at `out[o · stride + (y − y0) · w + x]`. False, writing nothing,
/// when the shapes do not fit.
pub fn products(
    weights: &Weights,
    input: &[u8],
    [h, w]: [usize; 2],
    [y0, y1]: [usize; 2],
    scratch: &mut Scratch,
    out: &mut [i32],
    stride: usize,
) -> bool {
    let (m, c) = (weights.m, weights.c);
    let rows = y1.saturating_sub(y0);
    if y1 > h
        || rows == 0
        || w == 0
        || stride < rows * w
        || input.len() < c * h * w
        || out.len() < (m - 1) * stride + rows * w
    {
        return false;
    }
    let (tr, tc) = (rows.div_ceil(2), w.div_ceil(2));
    let tbs = (tr * tc).div_ceil(TB);
    scratch.inputs.clear();
    scratch.inputs.resize(P * tbs * c * TB, 0);
    let tiles = &mut scratch.inputs;
    transform_inputs(input, [h, w], y0, [tr, tc], c, &mut scratch.rows, tiles);
    scratch.sums.resize(P * MB * TB, 0);
    for mb in 0..m.div_ceil(MB) {
        for tb in 0..tbs {
            for p in 0..P {
                let a = weights.block(p, mb);
                let at = (p * tbs + tb) * c * TB;
                let b = &scratch.inputs[at..at + c * TB];
                let sums = &mut scratch.sums[p * MB * TB..(p + 1) * MB * TB];
                block_sums(a, b, c, sums);
            }
            write_block(&scratch.sums, mb, tb, [m, tc], [rows, w], out, stride);
        }
    }
    true
}

/// The transformed 4×4 input tiles of a band: tile `(ty, tx)` reads input rows
/// `y0 + 2ty − 1 ..+ 4` and columns `2tx − 1 ..+ 4`, zeros outside the image.
///
/// Per channel, the band's input rows are widened once into zero-padded rows; then per tile
/// row, in passes over whole rows: `Bᵀ·` down every column of its four rows, split into even
/// and odd columns ([`vertical`]); `·B` along the rows ([`horizontal`]: tile `tx` reads
/// columns `2tx ..+ 4`, i.e. even `tx`, odd `tx`, even `tx + 1`, odd `tx + 1`), 16 rows of
/// tiles; then each run of tiles moved into its block ([`scatter`]). The rows are padded to
/// whole vectors of 8, so the passes have no remainder loop.
fn transform_inputs(
    input: &[u8],
    [h, w]: [usize; 2],
    y0: usize,
    [tr, tc]: [usize; 2],
    c: usize,
    scratch: &mut Vec<i16>,
    out: &mut [i16],
) {
    let per_position = (tr * tc).div_ceil(TB) * c * TB;
    let Row {
        tiles: tcp,
        half,
        span,
    } = Row::of(tc);
    // The band's input rows y0 − 1 ..= y0 + 2tr, padded: tile row ty reads rows 2ty ..+ 4.
    let padded_rows = 2 * tr + 2;
    scratch.clear();
    // The tiles' rows, and a block's width more: a block move may read past the last row.
    scratch.resize(padded_rows * span + 8 * half + P * tcp + TB, 0);
    let (padded, rest) = scratch.split_at_mut(padded_rows * span);
    let (cols, tiles) = rest.split_at_mut(8 * half);
    for (i, plane) in input.chunks_exact(h * w).take(c).enumerate() {
        for (r, row) in padded.chunks_exact_mut(span).enumerate() {
            match (y0 + r).checked_sub(1).filter(|&y| y < h) {
                Some(y) => widen(&plane[y * w..(y + 1) * w], &mut row[1..=w]),
                None => row[1..=w].fill(0),
            }
        }
        for ty in 0..tr {
            vertical(&padded[2 * ty * span..(2 * ty + 4) * span], cols, half);
            horizontal(cols, tiles, tcp);
            // The tile row in runs that each go to one block.
            let mut tx = 0;
            while tx < tc {
                let t = ty * tc + tx;
                let n = (TB - t % TB).min(tc - tx);
                // A short run moves a whole block's 8 values (one vector move, not a copy
                // value by value) when the extra ones land where later runs write: this
                // channel's next lanes (the next tile row's tiles, or padding) and the next
                // channel's first ones. Not for the last channel: its extra values would land
                // in the next block's first channel, already written.
                let run = Run {
                    tx,
                    n: if i + 1 < c { TB } else { n },
                    at: (t / TB * c + i) * TB + t % TB,
                };
                scatter(tiles, tcp, run, out, per_position);
                tx += n;
            }
        }
    }
}

/// `dst[i] = src[i]` read as int8, widened to i16 (`dst` as long as `src`): in blocks of 8
/// (vector code), the last block overlapping the one before it when the length is not a
/// multiple of 8 (the same values written twice) instead of a value-by-value tail.
fn widen(src: &[u8], dst: &mut [i16]) {
    let n = src.len().min(dst.len());
    let block = |s: &[u8], d: &mut [i16]| {
        for (d, &b) in d[..8].iter_mut().zip(&s[..8]) {
            *d = b as i8 as i16;
        }
    };
    if n < 8 {
        for (d, &b) in dst.iter_mut().zip(src) {
            *d = b as i8 as i16;
        }
        return;
    }
    for (s, d) in src[..n].chunks_exact(8).zip(dst[..n].chunks_exact_mut(8)) {
        block(s, d);
    }
    if !n.is_multiple_of(8) {
        block(&src[n - 8..n], &mut dst[n - 8..n]);
    }
}

/// A run of tiles of a tile row that goes to one block: from tile `tx`, `n` (≤ 8) of them,
/// to offset `at` of each position's values.
#[derive(Clone, Copy)]
struct Run {
    tx: usize,
    n: usize,
    at: usize,
}

/// Copies `run` of each of the 16 rows of `tiles` (`tcp` apart; a run may read past its row)
/// to `out`, position `p` at `run.at + p · per_position`.
fn scatter(tiles: &[i16], tcp: usize, run: Run, out: &mut [i16], per_position: usize) {
    #[cfg(target_arch = "aarch64")]
    if run.n == TB {
        neon::scatter_block(tiles, tcp, run, out, per_position);
        return;
    }
    scatter_portable(tiles, tcp, run, out, per_position);
}

/// The portable [`scatter`] (on aarch64 for runs shorter than a block, and the tests' twin).
fn scatter_portable(tiles: &[i16], tcp: usize, run: Run, out: &mut [i16], per_position: usize) {
    let Run { tx, n, at } = run;
    for p in 0..P {
        let dst = &mut out[p * per_position + at..][..n];
        let src = &tiles[p * tcp + tx..][..n];
        // A fixed 8-step loop, not a `memcpy` call for a few values.
        for (k, (d, &v)) in dst.iter_mut().zip(src).enumerate().take(TB) {
            if k < n {
                *d = v;
            }
        }
    }
}

/// The padded sizes of one tile row of `tc` tiles, all multiples of 8: `tiles` ≥ `tc`;
/// `half` (even or odd input columns) ≥ `tiles + 1`, which [`horizontal`] reads; `span`
/// (a padded input row) = 2 · `half` ≥ the `2tc + 2` columns the tiles read.
struct Row {
    tiles: usize,
    half: usize,
    span: usize,
}

impl Row {
    fn of(tc: usize) -> Row {
        let tiles = tc.div_ceil(8) * 8;
        let half = tiles + 8;
        Row {
            tiles,
            half,
            span: 2 * half,
        }
    }
}

/// `Bᵀd` down the columns of four padded rows (each 2 · `half` wide, `half` a multiple of
/// 8): row `k` of the result into `cols[k]` (its even columns) and `cols[4 + k]` (its odd
/// ones), `half` each.
fn vertical(padded: &[i16], cols: &mut [i16], half: usize) {
    #[cfg(target_arch = "aarch64")]
    neon::vertical(padded, cols, half);
    #[cfg(not(target_arch = "aarch64"))]
    vertical_portable(padded, cols, half);
}

/// `·B` along the rows: for each row `k` of `Bᵀd` (even columns `cols[k]`, odd `cols[4 + k]`,
/// `tiles + 8` each), the four values of every tile into rows `4k ..+ 4` of `out` (`tiles`
/// each, a multiple of 8).
fn horizontal(cols: &[i16], out: &mut [i16], tiles: usize) {
    #[cfg(target_arch = "aarch64")]
    neon::horizontal(cols, out, tiles);
    #[cfg(not(target_arch = "aarch64"))]
    horizontal_portable(cols, out, tiles);
}

/// The portable [`vertical`] (the tests' twin on aarch64).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn vertical_portable(padded: &[i16], cols: &mut [i16], half: usize) {
    let span = 2 * half;
    for q in 0..half {
        let at = |r: usize, x: usize| padded[r * span + 2 * q + x];
        for x in 0..2 {
            let k0 = 4 * x;
            cols[k0 * half + q] = at(0, x) - at(2, x);
            cols[(k0 + 1) * half + q] = at(1, x) + at(2, x);
            cols[(k0 + 2) * half + q] = at(2, x) - at(1, x);
            cols[(k0 + 3) * half + q] = at(1, x) - at(3, x);
        }
    }
}

/// The portable [`horizontal`] (the tests' twin on aarch64).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn horizontal_portable(cols: &[i16], out: &mut [i16], tiles: usize) {
    let half = tiles + 8;
    for k in 0..4 {
        let (e, o) = (
            &cols[k * half..(k + 1) * half],
            &cols[(4 + k) * half..(5 + k) * half],
        );
        for t in 0..tiles {
            let r = 4 * k * tiles + t;
            out[r] = e[t] - e[t + 1];
            out[r + tiles] = o[t] + e[t + 1];
            out[r + 2 * tiles] = e[t + 1] - o[t];
            out[r + 3 * tiles] = o[t] - o[t + 1];
        }
    }
}

/// Output block `mb`, tile block `tb`: the sums of its 16 positions transformed back and
/// written where they are inside the band. The transform runs on the block's 8 tiles at once
/// (lane-wise, which the compiler vectorises), per output channel.
#[inline(never)]
fn write_block(
    sums: &[i32],
    mb: usize,
    tb: usize,
    [m, tc]: [usize; 2],
    [rows, w]: [usize; 2],
    out: &mut [i32],
    stride: usize,
) {
    for r in 0..MB.min(m.saturating_sub(mb * MB)) {
        let o = mb * MB + r;
        let y = output_transform(sums, r);
        // The block's 8 tiles side by side in one tile row, all inside: two output rows of
        // 16 values each, interleaved from the lanes.
        let (t0, base) = (tb * TB, o * stride);
        let (ty, tx0) = (t0 / tc, t0 % tc);
        if tx0 + TB <= tc && 2 * ty + 2 <= rows && 2 * (tx0 + TB) <= w {
            for (dy, [even, odd]) in y.iter().enumerate() {
                let at = base + (2 * ty + dy) * w + 2 * tx0;
                let dst = &mut out[at..at + 2 * TB];
                for ((pair, &a), &b) in dst.chunks_exact_mut(2).zip(even).zip(odd) {
                    pair[0] = a;
                    pair[1] = b;
                }
            }
            continue;
        }
        for l in 0..TB {
            let t = tb * TB + l;
            let (ty, tx) = (t / tc, t % tc);
            if 2 * ty >= rows {
                break;
            }
            for (dy, row) in y.iter().enumerate() {
                let yy = 2 * ty + dy;
                if yy >= rows {
                    continue;
                }
                for (dx, v) in row.iter().enumerate() {
                    let xx = 2 * tx + dx;
                    if xx < w {
                        out[base + yy * w + xx] = v[l];
                    }
                }
            }
        }
    }
}

/// One value per tile of a block.
type Lanes = [i32; TB];

/// `Aᵀ s A / 4` for output channel `r` of a block's sums (`[16][8][8]`): the 2 × 2 outputs,
/// each for the block's 8 tiles. Exact: every sum is 4 × the direct convolution's.
fn output_transform(sums: &[i32], r: usize) -> [[Lanes; 2]; 2] {
    #[cfg(target_arch = "aarch64")]
    return neon::output_transform(sums, r);
    #[cfg(not(target_arch = "aarch64"))]
    output_transform_portable(sums, r)
}

/// The portable [`output_transform`] (the tests' twin on aarch64).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn output_transform_portable(sums: &[i32], r: usize) -> [[Lanes; 2]; 2] {
    let add3 =
        |a: &Lanes, b: &Lanes, c: &Lanes| -> Lanes { std::array::from_fn(|l| a[l] + b[l] + c[l]) };
    let sub3 =
        |a: &Lanes, b: &Lanes, c: &Lanes| -> Lanes { std::array::from_fn(|l| a[l] - b[l] - c[l]) };
    let s: [Lanes; P] = std::array::from_fn(|p| {
        let at = (p * MB + r) * TB;
        std::array::from_fn(|l| sums[at + l])
    });
    // Aᵀ s: two rows of four columns, then · A.
    let top: [Lanes; 4] = std::array::from_fn(|j| add3(&s[j], &s[4 + j], &s[8 + j]));
    let bottom: [Lanes; 4] = std::array::from_fn(|j| sub3(&s[4 + j], &s[8 + j], &s[12 + j]));
    let quarter = |v: Lanes| v.map(|x| x >> 2);
    [
        [
            quarter(add3(&top[0], &top[1], &top[2])),
            quarter(sub3(&top[1], &top[2], &top[3])),
        ],
        [
            quarter(add3(&bottom[0], &bottom[1], &bottom[2])),
            quarter(sub3(&bottom[1], &bottom[2], &bottom[3])),
        ],
    ]
}

/// One position's 8 × 8 block of sums over `c` channels: `a` is `c × 8` weights (output
/// channels last), `b` is `c × 8` transformed inputs (tiles last); `sums[o · 8 + t]`.
fn block_sums(a: &[i16], b: &[i16], c: usize, sums: &mut [i32]) {
    #[cfg(target_arch = "aarch64")]
    neon::block_sums(a, b, c, sums);
    #[cfg(not(target_arch = "aarch64"))]
    block_sums_portable(a, b, c, sums);
}

/// The portable [`block_sums`] (the tests' twin on aarch64).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn block_sums_portable(a: &[i16], b: &[i16], c: usize, sums: &mut [i32]) {
    let mut acc = [[0i32; TB]; MB];
    for (wa, xb) in a.chunks_exact(MB).zip(b.chunks_exact(TB)).take(c) {
        for (row, &u) in acc.iter_mut().zip(wa) {
            for (s, &v) in row.iter_mut().zip(xb) {
                *s += u as i32 * v as i32;
            }
        }
    }
    for (dst, row) in sums.chunks_exact_mut(TB).zip(&acc) {
        dst.copy_from_slice(row);
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{MB, TB};
    use std::arch::aarch64::*;

    /// [`super::vertical`] with NEON: 8 column pairs at a time (`vld2q` splits even and odd
    /// columns).
    pub(super) fn vertical(padded: &[i16], cols: &mut [i16], half: usize) {
        let span = 2 * half;
        assert!(half.is_multiple_of(8) && padded.len() >= 4 * span && cols.len() >= 8 * half);
        // SAFETY: for q < half (a multiple of 8), the loads read 16 i16 at `r · span + 2q`
        // (r < 4): inside row r, since 2q + 16 ≤ 2 · half = span, and the rows inside
        // `padded` (asserted); the stores write 8 i16 at `k · half + q` (k < 8), inside
        // `cols` (asserted). The rest is register-only.
        unsafe {
            let (pr, pc) = (padded.as_ptr(), cols.as_mut_ptr());
            for q in (0..half).step_by(8) {
                let a = vld2q_s16(pr.add(2 * q));
                let b = vld2q_s16(pr.add(span + 2 * q));
                let c = vld2q_s16(pr.add(2 * span + 2 * q));
                let d = vld2q_s16(pr.add(3 * span + 2 * q));
                let rows = [(a.0, b.0, c.0, d.0, 0), (a.1, b.1, c.1, d.1, 4)];
                for (a, b, c, d, k0) in rows {
                    vst1q_s16(pc.add(k0 * half + q), vsubq_s16(a, c));
                    vst1q_s16(pc.add((k0 + 1) * half + q), vaddq_s16(b, c));
                    vst1q_s16(pc.add((k0 + 2) * half + q), vsubq_s16(c, b));
                    vst1q_s16(pc.add((k0 + 3) * half + q), vsubq_s16(b, d));
                }
            }
        }
    }

    /// [`super::scatter`] with NEON for a whole block: 16 moves of 8 values.
    pub(super) fn scatter_block(
        tiles: &[i16],
        tcp: usize,
        run: super::Run,
        out: &mut [i16],
        per_position: usize,
    ) {
        let super::Run { tx, n, at } = run;
        assert!(n == TB && tiles.len() >= 15 * tcp + tx + TB);
        assert!(out.len() >= 15 * per_position + at + TB);
        // SAFETY: for p < 16 the load reads 8 i16 at `p · tcp + tx` of `tiles` and the store
        // writes 8 i16 at `p · per_position + at` of `out`, both inside the lengths asserted
        // above.
        unsafe {
            let (src, dst) = (tiles.as_ptr().add(tx), out.as_mut_ptr().add(at));
            for p in 0..16 {
                vst1q_s16(dst.add(p * per_position), vld1q_s16(src.add(p * tcp)));
            }
        }
    }

    /// [`super::horizontal`] with NEON: 8 tiles at a time.
    pub(super) fn horizontal(cols: &[i16], out: &mut [i16], tiles: usize) {
        let half = tiles + 8;
        assert!(tiles.is_multiple_of(8) && cols.len() >= 8 * half && out.len() >= 16 * tiles);
        // SAFETY: for t < tiles (a multiple of 8), the loads read 8 i16 at `j · half + t` and
        // `j · half + t + 1` (j < 8): inside `cols`, since t + 9 ≤ tiles + 1 < half; the
        // stores write 8 i16 at `r · tiles + t` (r < 16), inside `out` (asserted).
        unsafe {
            let (pc, pt) = (cols.as_ptr(), out.as_mut_ptr());
            for k in 0..4 {
                let (e, o) = (pc.add(k * half), pc.add((4 + k) * half));
                let v = pt.add(4 * k * tiles);
                for t in (0..tiles).step_by(8) {
                    let (e0, e1) = (vld1q_s16(e.add(t)), vld1q_s16(e.add(t + 1)));
                    let (o0, o1) = (vld1q_s16(o.add(t)), vld1q_s16(o.add(t + 1)));
                    vst1q_s16(v.add(t), vsubq_s16(e0, e1));
                    vst1q_s16(v.add(tiles + t), vaddq_s16(o0, e1));
                    vst1q_s16(v.add(2 * tiles + t), vsubq_s16(e1, o0));
                    vst1q_s16(v.add(3 * tiles + t), vsubq_s16(o0, o1));
                }
            }
        }
    }

    /// [`super::output_transform`] with NEON: the 8 tiles as two vectors of 4.
    pub(super) fn output_transform(sums: &[i32], r: usize) -> [[super::Lanes; 2]; 2] {
        use super::P;
        assert!(r < MB && sums.len() >= P * MB * TB);
        let mut y = [[[0i32; TB]; 2]; 2];
        for half in 0..2 {
            // SAFETY: the loads read 4 i32 at `(p · 8 + r) · 8 + 4 · half` for p < 16, r < 8,
            // half < 2: inside the asserted 16 · 8 · 8 values; the stores write 4 i32 at
            // `4 · half` of an 8-value array. The rest is register-only.
            unsafe {
                let ps = sums.as_ptr();
                let s: [int32x4_t; 16] =
                    std::array::from_fn(|p| vld1q_s32(ps.add((p * MB + r) * TB + 4 * half)));
                let add3 = |a, b, c| vaddq_s32(vaddq_s32(a, b), c);
                let sub3 = |a, b, c| vsubq_s32(vsubq_s32(a, b), c);
                let top: [int32x4_t; 4] = std::array::from_fn(|j| add3(s[j], s[4 + j], s[8 + j]));
                let bottom: [int32x4_t; 4] =
                    std::array::from_fn(|j| sub3(s[4 + j], s[8 + j], s[12 + j]));
                let rows = [top, bottom];
                for (dy, t) in rows.iter().enumerate() {
                    let even = vshrq_n_s32::<2>(add3(t[0], t[1], t[2]));
                    let odd = vshrq_n_s32::<2>(sub3(t[1], t[2], t[3]));
                    vst1q_s32(y[dy][0].as_mut_ptr().add(4 * half), even);
                    vst1q_s32(y[dy][1].as_mut_ptr().add(4 * half), odd);
                }
            }
        }
        y
    }

    /// [`super::block_sums`] with NEON: per input channel one load of 8 weights and one of
    /// 8 tiles, 16 `smlal` by lane into 16 accumulators.
    pub(super) fn block_sums(a: &[i16], b: &[i16], c: usize, sums: &mut [i32]) {
        assert!(a.len() >= c * MB && b.len() >= c * TB && sums.len() >= MB * TB);
        // SAFETY: the loads read 8 i16 at `i · 8` of `a` and `b` for i < c, inside the
        // lengths asserted above; the stores write 4 i32 at `o · 8` and `o · 8 + 4` of
        // `sums` for o < 8, inside its asserted 64; the rest is register-only.
        unsafe {
            let zero = vdupq_n_s32(0);
            let mut lo = [zero; MB];
            let mut hi = [zero; MB];
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            for i in 0..c {
                let u = vld1q_s16(pa.add(i * MB));
                let v = vld1q_s16(pb.add(i * TB));
                let vl = vget_low_s16(v);
                macro_rules! lane {
                    ($o:literal) => {
                        lo[$o] = vmlal_laneq_s16::<$o>(lo[$o], vl, u);
                        hi[$o] = vmlal_high_laneq_s16::<$o>(hi[$o], v, u);
                    };
                }
                lane!(0);
                lane!(1);
                lane!(2);
                lane!(3);
                lane!(4);
                lane!(5);
                lane!(6);
                lane!(7);
            }
            let ps = sums.as_mut_ptr();
            for o in 0..MB {
                vst1q_s32(ps.add(o * TB), lo[o]);
                vst1q_s32(ps.add(o * TB + 4), hi[o]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::int8::qconv::noise_i8;

    /// The direct convolution, plainly: what the products must equal.
    fn direct(
        g: &[i8],
        x: &[u8],
        [m, c]: [usize; 2],
        [h, w]: [usize; 2],
        [y0, y1]: [usize; 2],
    ) -> Vec<i32> {
        let mut out = vec![0i32; m * (y1 - y0) * w];
        for o in 0..m {
            for y in y0..y1 {
                for xx in 0..w {
                    let mut s = 0i32;
                    for i in 0..c {
                        for dy in 0..3 {
                            for dx in 0..3 {
                                let (yy, xs) = (y + dy, xx + dx);
                                if yy == 0 || xs == 0 || yy > h || xs > w {
                                    continue;
                                }
                                let v = x[i * h * w + (yy - 1) * w + xs - 1] as i8 as i32;
                                s += g[((o * c + i) * 3 + dy) * 3 + dx] as i32 * v;
                            }
                        }
                    }
                    out[o * (y1 - y0) * w + (y - y0) * w + xx] = s;
                }
            }
        }
        out
    }

    fn no_min(v: Vec<i8>) -> Vec<i8> {
        v.into_iter().map(|b| b.max(-127)).collect()
    }

    /// The positions in an order other than row by row, as an im2col may have them.
    const AT: [(usize, usize); 9] = [
        (1, 1),
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 2),
        (2, 0),
        (2, 1),
        (2, 2),
    ];

    /// `g` (`[m][c][3][3]`) in the taps' order of [`AT`].
    fn taps_order(g: &[i8], m: usize, c: usize) -> Vec<i8> {
        let mut w = vec![0i8; m * 9 * c];
        for o in 0..m {
            for (t, &(dy, dx)) in AT.iter().enumerate() {
                for i in 0..c {
                    w[o * 9 * c + t * c + i] = g[((o * c + i) * 3 + dy) * 3 + dx];
                }
            }
        }
        w
    }

    fn weights(g: &[i8], m: usize, c: usize) -> Weights {
        Weights::from_taps(&taps_order(g, m, c), m, c, AT).unwrap()
    }

    /// Every length, a multiple of 8 or not, against the value-by-value widening.
    #[test]
    fn widen_equals_the_plain_loop() {
        let src: Vec<u8> = (0..40u32).map(|i| (i * 97 + 200) as u8).collect();
        for n in 0..=src.len() {
            let mut ours = vec![7i16; n];
            widen(&src[..n], &mut ours);
            let plain: Vec<i16> = src[..n].iter().map(|&b| b as i8 as i16).collect();
            assert_eq!(ours, plain, "length {n}");
        }
    }

    /// Bit for bit the direct convolution's sums, for odd and even sizes, 1×1 and 1-row
    /// maps, channel counts that leave partial blocks, bands anywhere in the map.
    #[test]
    fn products_equal_the_direct_convolution() {
        let cases: [([usize; 2], [usize; 2], [usize; 2]); 8] = [
            ([8, 8], [6, 6], [0, 6]),
            ([16, 32], [13, 11], [0, 13]),
            ([5, 3], [1, 1], [0, 1]),
            ([9, 17], [7, 10], [3, 6]),
            ([24, 40], [26, 27], [5, 12]),
            ([1, 1], [2, 5], [1, 2]),
            ([33, 64], [52, 52], [20, 29]),
            ([8, 130], [9, 9], [0, 9]),
        ];
        let mut scratch = Scratch::default();
        for (n, &([m, c], [h, w], [y0, y1])) in cases.iter().enumerate() {
            let g = no_min(noise_i8(m * c * 9, 7 + n as u64));
            let x: Vec<u8> = noise_i8(c * h * w, 70 + n as u64)
                .into_iter()
                .map(|v| v as u8)
                .collect();
            let want = direct(&g, &x, [m, c], [h, w], [y0, y1]);
            let stride = (y1 - y0) * w;
            let mut got = vec![i32::MIN; m * stride];
            let wts = weights(&g, m, c);
            assert!(products(
                &wts,
                &x,
                [h, w],
                [y0, y1],
                &mut scratch,
                &mut got,
                stride
            ));
            assert_eq!(got, want, "case {n}");
        }
    }

    /// The largest sums the ranges allow (every weight ±127 against every input −128, at the
    /// most channels) come out exact: nothing overflows.
    #[test]
    fn extreme_values_do_not_overflow() {
        let (m, c, h, w) = (2, MAX_CHANNELS, 4, 4);
        for sign in [1i8, -1] {
            let g = vec![127 * sign; m * c * 9];
            let x = vec![0x80u8; c * h * w];
            let want = direct(&g, &x, [m, c], [h, w], [0, h]);
            let mut got = vec![0; m * h * w];
            let wts = weights(&g, m, c);
            let mut s = Scratch::default();
            assert!(products(&wts, &x, [h, w], [0, h], &mut s, &mut got, h * w));
            assert_eq!(got, want, "sign {sign}");
        }
        // Alternating signs make the transforms' largest values.
        let g: Vec<i8> = (0..m * c * 9)
            .map(|i| if i % 2 == 0 { 127 } else { -127 })
            .collect();
        let x: Vec<u8> = (0..c * h * w)
            .map(|i| if (i + i / w) % 2 == 0 { 0x80 } else { 0x7f })
            .collect();
        let want = direct(&g, &x, [m, c], [h, w], [0, h]);
        let mut got = vec![0; m * h * w];
        let wts = weights(&g, m, c);
        let mut s = Scratch::default();
        assert!(products(&wts, &x, [h, w], [0, h], &mut s, &mut got, h * w));
        assert_eq!(got, want);
    }

    /// What cannot be exact or does not fit is refused.
    #[test]
    fn refuses_what_does_not_fit() {
        let ones = |m: usize, c: usize| vec![1i8; m * 9 * c];
        let big = MAX_CHANNELS + 1;
        assert!(Weights::from_taps(&ones(4, big), 4, big, AT).is_none());
        assert!(Weights::from_taps(&ones(4, 0), 4, 0, AT).is_none());
        assert!(Weights::from_taps(&ones(4, 3)[1..], 4, 3, AT).is_none());
        let mut min = ones(4, 3);
        min[50] = -128;
        assert!(Weights::from_taps(&min, 4, 3, AT).is_none());
        let mut twice = AT;
        twice[8] = twice[7];
        assert!(Weights::from_taps(&ones(4, 3), 4, 3, twice).is_none());
        let mut outside = AT;
        outside[8] = (0, 3);
        assert!(Weights::from_taps(&ones(4, 3), 4, 3, outside).is_none());
        let wts = Weights::from_taps(&ones(2, 3), 2, 3, AT).unwrap();
        let x = vec![0u8; 3 * 4 * 4];
        let mut s = Scratch::default();
        let mut out = vec![0; 2 * 16];
        assert!(!products(
            &wts,
            &x[1..],
            [4, 4],
            [0, 4],
            &mut s,
            &mut out,
            16
        ));
        assert!(!products(&wts, &x, [4, 4], [0, 5], &mut s, &mut out, 16));
        assert!(!products(&wts, &x, [4, 4], [2, 2], &mut s, &mut out, 16));
        assert!(!products(
            &wts,
            &x,
            [4, 4],
            [0, 4],
            &mut s,
            &mut out[1..],
            16
        ));
        assert!(!products(&wts, &x, [4, 4], [0, 4], &mut s, &mut out, 15));
        assert!(products(&wts, &x, [4, 4], [0, 4], &mut s, &mut out, 16));
    }

    /// The NEON row transforms equal the portable twins' (aarch64 only: elsewhere they are
    /// the same functions), for widths with and without a partial vector.
    #[test]
    fn row_transforms_equal_the_portable_twins() {
        for tc in [1usize, 7, 8, 13, 26, 52] {
            let Row { tiles, half, span } = Row::of(tc);
            let padded: Vec<i16> = noise_i8(4 * span, tc as u64)
                .into_iter()
                .map(i16::from)
                .collect();
            let (mut a, mut b) = (vec![0i16; 8 * half], vec![1i16; 8 * half]);
            vertical(&padded, &mut a, half);
            vertical_portable(&padded, &mut b, half);
            assert_eq!(a, b, "vertical, tc = {tc}");
            let (mut x, mut y) = (vec![0i16; P * tiles], vec![1i16; P * tiles]);
            horizontal(&a, &mut x, tiles);
            horizontal_portable(&a, &mut y, tiles);
            assert_eq!(x, y, "horizontal, tc = {tc}");
        }
    }

    /// The NEON block copy equals the portable twin's (aarch64 only: elsewhere it is the
    /// same function).
    #[test]
    fn scatter_equals_the_portable_twin() {
        let tcp = 24;
        let tiles: Vec<i16> = noise_i8(P * tcp, 5).into_iter().map(i16::from).collect();
        for run in [
            Run { tx: 0, n: 8, at: 3 },
            Run {
                tx: 16,
                n: 8,
                at: 0,
            },
            Run { tx: 5, n: 3, at: 9 },
        ] {
            let (mut a, mut b) = (vec![0i16; 16 * 40], vec![0i16; 16 * 40]);
            scatter(&tiles, tcp, run, &mut a, 40);
            scatter_portable(&tiles, tcp, run, &mut b, 40);
            assert_eq!(a, b);
        }
    }

    /// The NEON output transform equals the portable twin's (aarch64 only: elsewhere they
    /// are the same function).
    #[test]
    fn output_transform_equals_the_portable_twin() {
        let sums: Vec<i32> = noise_i8(P * MB * TB, 3)
            .into_iter()
            .map(|v| v as i32 * 4099)
            .collect();
        for r in 0..MB {
            assert_eq!(
                output_transform(&sums, r),
                output_transform_portable(&sums, r)
            );
        }
    }

    /// The NEON block sums equal the portable twin's (aarch64 only: elsewhere they are the
    /// same function).
    #[test]
    fn block_sums_equal_the_portable_twin() {
        for c in [1, 7, 64, 131] {
            let a: Vec<i16> = noise_i8(c * MB, c as u64)
                .into_iter()
                .map(|v| v as i16 * 9)
                .collect();
            let b: Vec<i16> = noise_i8(c * TB, 50 + c as u64)
                .into_iter()
                .map(|v| v as i16 * 4)
                .collect();
            let (mut x, mut y) = (vec![0; MB * TB], vec![1; MB * TB]);
            block_sums(&a, &b, c, &mut x);
            block_sums_portable(&a, &b, c, &mut y);
            assert_eq!(x, y, "c = {c}");
        }
    }
}
