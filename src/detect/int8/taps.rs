//! `FastTaps`: one op for the in-graph im2col of the shipped INT8 graphs. Their recipe
//! (`i2cs`, models/recipe/) turns every 3×3 convolution into `Pad` → 9 chains of `Slice` /
//! strided `Downsample` → `Concat` on the channel axis → a 1×1 convolution. tract evaluates
//! that as 1 + 3 + 9 + 9 full copies of the activations (pad, row slices, column slices,
//! concat), each a separate tensor. `FastTaps` writes the concat's output once, straight
//! from the unpadded input: a row copy per tap row (or a stride-2 gather), the padding
//! written as the pad's constant.
//!
//! It replaces a `Concat` whose every input is such a chain (any mix of slices and
//! downsamples, on any axes, including none) from one common node, optionally a constant
//! `Pad`; the chain's intermediate nodes then fall out of the plan unless something else
//! reads them.

use rayon::prelude::*;
use tract_linalg::multithread::{current_tract_executor, Executor};
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::{Pad, PadMode, Slice, TypedConcat};
use tract_onnx::tract_core::ops::Downsample;

use super::downsample::FastDownsample;

/// Below this many output bytes per call the work stays on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 * 1024;

/// Where one axis of a tap reads the padded input: index `offset + stride * i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct AxisMap {
    offset: usize,
    stride: usize,
}

/// One input of the replaced `Concat`: its shape and, per axis, where it reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Tap {
    shape: Vec<usize>,
    maps: Vec<AxisMap>,
    /// Where its output rows read, computed once when the taps are planar.
    rows: Option<TapRows>,
}

/// Where one planar tap's output rows read (see [`FastTaps::tap_rows`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TapRows {
    rows: Vec<Option<usize>>,
    lo: usize,
    hi: usize,
    first: usize,
}

/// The op that replaces a pad → slices → concat subgraph on a 1-byte tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastTaps {
    /// The concat axis.
    axis: usize,
    /// The shape of the (unpadded) input.
    in_shape: Vec<usize>,
    /// Padding per axis, before and after (zeros when there was no `Pad`).
    pads: Vec<(usize, usize)>,
    /// The pad's constant, as the one byte of the tensor's type.
    fill: u8,
    taps: Vec<Tap>,
    /// The output's type (the concat's).
    dt: DatumType,
    out_shape: Vec<usize>,
}

/// What a chain from the concat back to its root reads: the root outlet and the maps.
fn trace(
    model: &TypedModel,
    mut outlet: OutletId,
    rank: usize,
) -> Option<(OutletId, Vec<AxisMap>)> {
    let mut maps = vec![
        AxisMap {
            offset: 0,
            stride: 1
        };
        rank
    ];
    loop {
        let node = model.node(outlet.node);
        // `maps` turn an index of the concat's input into one of `outlet`; the node on the
        // way up maps its output index to its input's.
        if let Some(op) = node.op_as::<Slice>() {
            let start = op.start.as_i64().and_then(|s| usize::try_from(s).ok())?;
            op.end.as_i64()?;
            maps.get_mut(op.axis)?.offset += start;
        } else if let Some(op) = node.op_as::<Downsample>() {
            let stride = usize::try_from(op.stride).ok().filter(|&s| s > 0)?;
            let m = maps.get_mut(op.axis)?;
            m.offset = op.modulo + stride * m.offset;
            m.stride *= stride;
        } else if let Some(op) = node.op_as::<FastDownsample>() {
            let (axis, stride, modulo) = op.params();
            let stride = usize::try_from(stride).ok().filter(|&s| s > 0)?;
            let m = maps.get_mut(axis)?;
            m.offset = modulo + stride * m.offset;
            m.stride *= stride;
        } else {
            return Some((outlet, maps));
        }
        if node.inputs.len() != 1 {
            return None;
        }
        outlet = node.inputs[0];
    }
}

fn concrete(fact: &TypedFact) -> Option<Vec<usize>> {
    fact.shape.as_concrete().map(|s| s.to_vec())
}

impl FastTaps {
    /// The replacement for the `Concat` node `concat` of `model` and the outlet it reads, when
    /// all its inputs are slice/downsample chains from one node (through a constant `Pad` or
    /// not) on a 1-byte type with concrete shapes, the concat axis not the innermost one.
    pub fn for_node(model: &TypedModel, concat: &TypedNode) -> Option<(Self, OutletId)> {
        let op = concat.op_as::<TypedConcat>()?;
        let out_fact = &concat.outputs.first()?.fact;
        let dt = out_fact.datum_type;
        let rank = out_fact.rank();
        if dt.size_of() != 1 || op.axis + 1 >= rank || concat.inputs.len() < 2 {
            return None;
        }
        let out_shape = concrete(out_fact)?;
        let mut root = None;
        let mut taps = Vec::with_capacity(concat.inputs.len());
        for &input in &concat.inputs {
            let (r, maps) = trace(model, input, rank)?;
            if r == input || *root.get_or_insert(r) != r {
                return None;
            }
            let shape = concrete(model.outlet_fact(input).ok()?)?;
            taps.push(Tap {
                shape,
                maps,
                rows: None,
            });
        }
        let root = root?;
        // Through a constant pad to its input, when there is one.
        let root_node = model.node(root.node);
        let (source, pads, fill) = match root_node.op_as::<Pad>() {
            Some(Pad {
                pads,
                mode: PadMode::Constant(value),
            }) if root_node.inputs.len() == 1 => {
                let value = value.cast_to_dt(dt).ok()?;
                let &[fill] = value.as_bytes() else {
                    return None;
                };
                (root_node.inputs[0], pads.clone(), fill)
            }
            _ => (root, vec![(0, 0); rank], 0),
        };
        let source_fact = model.outlet_fact(source).ok()?;
        if source_fact.datum_type.size_of() != 1 || source_fact.rank() != rank || pads.len() != rank
        {
            return None;
        }
        let in_shape = concrete(source_fact)?;
        let mut taps = FastTaps {
            axis: op.axis,
            in_shape,
            pads,
            fill,
            taps,
            dt,
            out_shape,
        };
        if !taps.valid() {
            return None;
        }
        if taps.planar() {
            taps.fill_tap_rows();
        }
        Some((taps, source))
    }

    /// The im2col of a 2-D convolution of an NCHW input of shape `in_shape` (`[n, c, h, w]`)
    /// with kernel `[kh, kw]`, `strides` and `pads` (`(before, after)` for the height, then
    /// the width), padding with zeros: `kh·kw` taps in kernel order (row, then column), each
    /// `c` channels of `[n, c, oh, ow]`. What a `QConvI8` of a kernel larger than 1×1 writes
    /// band by band.
    pub(super) fn for_conv(
        in_shape: &[usize],
        [kh, kw]: [usize; 2],
        strides: [usize; 2],
        pads: [(usize, usize); 2],
        dt: DatumType,
    ) -> Option<Self> {
        let &[n, c, h, w] = in_shape else {
            return None;
        };
        let out = |size: usize, k: usize, s: usize, (a, b): (usize, usize)| {
            (size + a + b)
                .checked_sub(k)
                .filter(|_| s > 0)
                .map(|r| r / s + 1)
        };
        let (oh, ow) = (
            out(h, kh, strides[0], pads[0])?,
            out(w, kw, strides[1], pads[1])?,
        );
        let whole = AxisMap {
            offset: 0,
            stride: 1,
        };
        let taps = (0..kh * kw)
            .map(|t| Tap {
                shape: vec![n, c, oh, ow],
                maps: vec![
                    whole,
                    whole,
                    AxisMap {
                        offset: t / kw,
                        stride: strides[0],
                    },
                    AxisMap {
                        offset: t % kw,
                        stride: strides[1],
                    },
                ],
                rows: None,
            })
            .collect();
        let mut taps = FastTaps {
            axis: 1,
            in_shape: in_shape.to_vec(),
            pads: vec![(0, 0), (0, 0), pads[0], pads[1]],
            fill: 0,
            taps,
            dt,
            out_shape: vec![n, kh * kw * c, oh, ow],
        };
        if dt.size_of() != 1 || !taps.valid() || !taps.planar() {
            return None;
        }
        taps.fill_tap_rows();
        Some(taps)
    }

    /// Computes once where each (planar) tap's output rows read ([`Self::tap_rows`]).
    fn fill_tap_rows(&mut self) {
        let rows: Vec<TapRows> = self.taps.iter().map(|t| self.tap_rows(t)).collect();
        for (tap, rows) in self.taps.iter_mut().zip(rows) {
            tap.rows = Some(rows);
        }
    }

    /// The taps read inside the padded input and tile the output along the concat axis.
    fn valid(&self) -> bool {
        let rank = self.out_shape.len();
        let mut along = 0;
        for tap in &self.taps {
            if tap.shape.len() != rank || tap.maps.len() != rank {
                return false;
            }
            for d in 0..rank {
                let padded = self.in_shape[d] + self.pads[d].0 + self.pads[d].1;
                let n = tap.shape[d];
                let m = tap.maps[d];
                if n > 0 && m.offset + m.stride * (n - 1) >= padded {
                    return false;
                }
                if d != self.axis && n != self.out_shape[d] {
                    return false;
                }
            }
            along += tap.shape[self.axis];
        }
        along == self.out_shape[self.axis]
    }

    /// True when every tap reads whole channel planes of an NCHW input (the im2col of a 2-D
    /// convolution): concat on axis 1, no slicing or padding of axes 0 and 1.
    pub(super) fn planar(&self) -> bool {
        self.out_shape.len() == 4
            && self.axis == 1
            && self.pads[..2] == [(0, 0), (0, 0)]
            && self.taps.iter().all(|t| {
                t.shape[..2] == self.in_shape[..2]
                    && t.maps[..2].iter().all(|m| m.offset == 0 && m.stride == 1)
            })
    }

    /// Where one planar tap's output rows read: the input row of each output row (`None`:
    /// padding), and the output columns that read the input, `lo..hi`, from input column
    /// `first` every `stride`.
    fn tap_rows(&self, tap: &Tap) -> TapRows {
        let (hi, wi) = (self.in_shape[2], self.in_shape[3]);
        let (ho, wo) = (tap.shape[2], tap.shape[3]);
        let (my, mx) = (tap.maps[2], tap.maps[3]);
        let (pt, pl) = (self.pads[2].0, self.pads[3].0);
        let rows: Vec<Option<usize>> = (0..ho)
            .map(|y| {
                (my.offset + my.stride * y)
                    .checked_sub(pt)
                    .filter(|&p| p < hi)
            })
            .collect();
        let col = |x: usize| mx.offset + mx.stride * x;
        let lo = (0..wo).find(|&x| col(x) >= pl).unwrap_or(wo);
        let hi_x = (lo..wo).find(|&x| col(x) - pl >= wi).unwrap_or(wo);
        TapRows {
            rows,
            lo,
            hi: hi_x,
            first: col(lo).saturating_sub(pl),
        }
    }

    /// When the taps are a 3×3, stride-1 convolution's im2col of an NCHW input, zero-padded
    /// by one on each side ([`Self::planar`]): each tap's kernel position `(dy, dx)`, in
    /// concat order, every position once; with the input's channels.
    pub(super) fn same_3x3(&self) -> Option<([(usize, usize); 9], usize)> {
        if !self.planar()
            || self.taps.len() != 9
            || self.fill != 0
            || self.pads[2..] != [(1, 1), (1, 1)]
        {
            return None;
        }
        let mut at = [(0, 0); 9];
        let mut seen = [false; 9];
        for (tap, slot) in self.taps.iter().zip(&mut at) {
            let (my, mx) = (tap.maps[2], tap.maps[3]);
            if tap.shape[2..] != self.in_shape[2..]
                || my.stride != 1
                || mx.stride != 1
                || my.offset > 2
                || mx.offset > 2
                || std::mem::replace(&mut seen[my.offset * 3 + mx.offset], true)
            {
                return None;
            }
            *slot = (my.offset, mx.offset);
        }
        Some((at, self.in_shape[1]))
    }

    /// The output's shape.
    pub(super) fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// The padding byte.
    pub(super) fn fill(&self) -> u8 {
        self.fill
    }

    /// One tap's block for batch item `n` of an NCHW input, plane by plane ([`Self::planar`]).
    fn write_planes(&self, src: &[u8], n: usize, tap: &Tap, block: &mut [u8]) -> bool {
        self.write_band(src, n, tap, [0, tap.shape[2]], block)
    }

    /// Output rows `y0..y1` of one tap for batch item `n` of an NCHW input: every channel's
    /// rows, one channel after the other, into `block`, every byte of it (the padding with the
    /// fill byte). With a stride of 1 and rows as wide as the input's, each channel's rows are
    /// one copy of the shifted input, then the padding columns written over; otherwise row by
    /// row.
    fn write_band(
        &self,
        src: &[u8],
        n: usize,
        tap: &Tap,
        [y0, y1]: [usize; 2],
        block: &mut [u8],
    ) -> bool {
        let [_, c, hi, wi] = self.in_shape[..] else {
            return false;
        };
        let wo = tap.shape[3];
        let (my, mx) = (tap.maps[2], tap.maps[3]);
        let band = y1.saturating_sub(y0);
        if band * wo == 0 {
            return true;
        }
        let Some(TapRows {
            rows,
            lo,
            hi: hi_x,
            first,
        }) = &tap.rows
        else {
            return false;
        };
        let (lo, hi_x, first) = (*lo, *hi_x, *first);
        let n_cols = hi_x.saturating_sub(lo);
        // The band's rows that read the input (an interval for a stride of 1).
        let ya = (y0..y1).find(|&y| rows.get(y).copied().flatten().is_some());
        let yb = (y0..y1)
            .rev()
            .find(|&y| rows.get(y).copied().flatten().is_some())
            .map(|y| y + 1);
        let flat = my.stride == 1 && mx.stride == 1 && wo == wi;
        for (ch, plane) in block.chunks_exact_mut(band * wo).enumerate() {
            let Some(sp) = src.get((n * c + ch) * hi * wi..(n * c + ch + 1) * hi * wi) else {
                return false;
            };
            let (Some(ya), Some(yb), true) = (ya, yb, n_cols > 0) else {
                plane.fill(self.fill);
                continue;
            };
            // The padding rows above and below the rows that read the input.
            plane[..(ya - y0) * wo].fill(self.fill);
            plane[(yb - y0) * wo..].fill(self.fill);
            if flat {
                // Output index i of rows ya..yb reads input index i + shift: one copy,
                // clipped to the input plane; then the columns outside lo..hi get the fill.
                let Some(p0) = rows[ya] else {
                    return false;
                };
                let (d0, d1) = ((ya - y0) * wo, (yb - y0) * wo);
                let shift = (p0 * wi + first) as isize - (d0 + lo) as isize;
                let s0 = d0 as isize + shift;
                let skip = (-s0).max(0) as usize;
                let end = ((d1 as isize + shift).min(sp.len() as isize) - shift) as usize;
                let (Some(dst), Some(from)) = (
                    plane.get_mut(d0 + skip..end),
                    sp.get((s0 + skip as isize) as usize..(end as isize + shift) as usize),
                ) else {
                    return false;
                };
                dst.copy_from_slice(from);
                // Bytes the clipped copy left out (on padding columns; written over below).
                plane[d0..d0 + skip].fill(self.fill);
                plane[end..d1].fill(self.fill);
                fill_columns(plane, wo, d0..d1, (0..lo).chain(hi_x..wo), self.fill);
                continue;
            }
            for (y, row) in (y0..y1).zip(plane.chunks_exact_mut(wo)) {
                let Some(p) = rows[y] else {
                    row.fill(self.fill);
                    continue;
                };
                let start = p * wi + first;
                let Some(span) = sp.get(start..start + (n_cols - 1) * mx.stride + 1) else {
                    return false;
                };
                gather(span, &mut row[lo..hi_x], mx.stride);
            }
            // The padding columns of the rows that read the input.
            let rows_read = (ya - y0) * wo..(yb - y0) * wo;
            fill_columns(plane, wo, rows_read, (0..lo).chain(hi_x..wo), self.fill);
        }
        true
    }

    /// Output rows `y0..y1` of batch item `b` of planar taps: for each tap, each channel's
    /// rows, into `out` (`k` × band × `wo` bytes), every byte (the padding with the fill byte).
    pub(super) fn write_rows(
        &self,
        src: &[u8],
        b: usize,
        [y0, y1]: [usize; 2],
        out: &mut [u8],
    ) -> bool {
        let band = y1.saturating_sub(y0);
        let mut rest = out;
        for tap in &self.taps {
            let len = tap.shape[1] * band * tap.shape[3];
            if rest.len() < len {
                return false;
            }
            let (block, tail) = std::mem::take(&mut rest).split_at_mut(len);
            if !self.write_band(src, b, tap, [y0, y1], block) {
                return false;
            }
            rest = tail;
        }
        true
    }

    /// Writes the output from `src` (the input's bytes).
    fn run(&self, src: &[u8]) -> Option<Vec<u8>> {
        let rank = self.out_shape.len();
        if src.len() != self.in_shape.iter().product::<usize>() {
            return None;
        }
        let total: usize = self.out_shape.iter().product();
        let mut out = vec![self.fill; total];
        // Blocks: for each index of the axes before the concat axis, one per tap, in the
        // output's order; each is contiguous.
        let outer: usize = self.out_shape[..self.axis].iter().product();
        let inner: usize = self.out_shape[self.axis + 1..].iter().product();
        let mut blocks: Vec<(usize, &Tap, &mut [u8])> = Vec::new();
        let mut rest: &mut [u8] = &mut out;
        for o in 0..outer {
            for tap in &self.taps {
                let (block, tail) =
                    std::mem::take(&mut rest).split_at_mut(tap.shape[self.axis] * inner);
                blocks.push((o, tap, block));
                rest = tail;
            }
        }
        let planar = self.planar();
        let run = |(o, tap, block): &mut (usize, &Tap, &mut [u8])| {
            if planar {
                self.write_planes(src, *o, tap, block)
            } else {
                self.write_block(src, *o, tap, block, rank)
            }
        };
        let ok = match current_tract_executor() {
            Executor::MultiThread(pool)
                if pool.current_num_threads() > 1 && total >= PARALLEL_MIN_BYTES =>
            {
                pool.install(|| blocks.par_iter_mut().all(run))
            }
            _ => blocks.iter_mut().all(run),
        };
        ok.then_some(out)
    }

    /// One tap's block for the outer index `o`: every row (innermost axis) of it.
    fn write_block(&self, src: &[u8], o: usize, tap: &Tap, block: &mut [u8], rank: usize) -> bool {
        let last = rank - 1;
        let width = tap.shape[last];
        if width == 0 || block.is_empty() {
            return true;
        }
        // Row-major strides of the unpadded input.
        let mut in_strides = vec![1usize; rank];
        for d in (0..last).rev() {
            in_strides[d] = in_strides[d + 1] * self.in_shape[d + 1];
        }
        // The output coordinates of this block: `o` over the axes before the concat axis,
        // the tap's extent from it on.
        let mut extent = tap.shape.clone();
        let mut coord = vec![0usize; rank];
        let mut rem = o;
        for d in (0..self.axis).rev() {
            coord[d] = rem % self.out_shape[d];
            rem /= self.out_shape[d];
            extent[d] = coord[d] + 1;
        }
        // The innermost axis: which output columns read the input, and from where.
        let m = tap.maps[last];
        let (pad_before, in_w) = (self.pads[last].0, self.in_shape[last]);
        let first_col = |x: usize| m.offset + m.stride * x;
        let lo = (0..width)
            .find(|&x| first_col(x) >= pad_before)
            .unwrap_or(width);
        let hi = (lo..width)
            .find(|&x| first_col(x) - pad_before >= in_w)
            .unwrap_or(width);
        for row in block.chunks_exact_mut(width) {
            // Source offset of this row, or `None` where it is in the padding.
            let mut base = Some(0usize);
            for d in 0..last {
                let p = tap.maps[d].offset + tap.maps[d].stride * coord[d];
                base = match (base, p.checked_sub(self.pads[d].0)) {
                    (Some(b), Some(p)) if p < self.in_shape[d] => Some(b + p * in_strides[d]),
                    _ => None,
                };
            }
            if let (Some(base), true) = (base, lo < hi) {
                let start = base + first_col(lo) - pad_before;
                let n = hi - lo;
                // The row's source span; it lies inside the input by construction (`valid`,
                // `lo`, `hi`), checked all the same so a mistake is an error, not a panic.
                let Some(span) = src.get(start..start + (n - 1) * m.stride + 1) else {
                    return false;
                };
                gather(span, &mut row[lo..hi], m.stride);
            }
            // Next row: the innermost-but-one axis counts fastest.
            for d in (0..last).rev() {
                coord[d] += 1;
                if coord[d] < extent[d] {
                    break;
                }
                coord[d] = if d < self.axis { extent[d] - 1 } else { 0 };
            }
        }
        true
    }
}

/// Every `stride`-th byte of `span` from its first, into `dst`.
pub(super) fn gather(span: &[u8], dst: &mut [u8], stride: usize) {
    match stride {
        1 => {
            let n = dst.len().min(span.len());
            dst[..n].copy_from_slice(&span[..n]);
        }
        2 => {
            // 16 at a time from 32 bytes (fixed sizes: de-interleaving vector moves), the
            // last 16 overlapping the ones before when 32 bytes are there to read; then
            // whatever is left one by one.
            let n = dst.len();
            let mut i = 0;
            while i + 16 <= n && 2 * i + 32 <= span.len() {
                every_other_16(&span[2 * i..2 * i + 32], &mut dst[i..i + 16]);
                i += 16;
            }
            // (A row's span ends on its last byte read: the block ending one before the last
            // output is the last one with 32 bytes to read.)
            if i + 1 < n && n >= 17 && 2 * (n - 17) + 32 <= span.len() {
                let j = n - 17;
                every_other_16(&span[2 * j..2 * j + 32], &mut dst[j..j + 16]);
                i = n - 1;
            }
            // Rows too short for that: 8 at a time from 16 bytes, the same way.
            while i + 8 <= n && 2 * i + 16 <= span.len() {
                every_other_8(&span[2 * i..2 * i + 16], &mut dst[i..i + 8]);
                i += 8;
            }
            if i + 1 < n && n >= 9 && 2 * (n - 9) + 16 <= span.len() {
                let j = n - 9;
                every_other_8(&span[2 * j..2 * j + 16], &mut dst[j..j + 8]);
                i = n - 1;
            }
            for (d, s) in dst[i..]
                .iter_mut()
                .zip(span[2 * i.min(span.len() / 2)..].iter().step_by(2))
            {
                *d = *s;
            }
        }
        s => {
            for (d, v) in dst.iter_mut().zip(span.iter().step_by(s)) {
                *d = *v;
            }
        }
    }
}

/// Bytes 0, 2, …, 30 of `src` (32 bytes) into `dst` (16 bytes): one de-interleaving load
/// (NEON `ld2`) or two loads, masks and a pack (SSE2); [`every_other_16_portable`] elsewhere.
fn every_other_16(src: &[u8], dst: &mut [u8]) {
    let (Ok(src), Ok(dst)) = (
        <&[u8; 32]>::try_from(src),
        <&mut [u8; 16]>::try_from(&mut *dst),
    ) else {
        // Callers pass exactly 32 and 16 bytes; anything else takes the checked path.
        return every_other_16_portable(src, dst);
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: NEON is part of the aarch64 baseline; the load reads the 32 bytes of `src`,
    // the store writes the 16 bytes of `dst` (both fixed-size arrays).
    unsafe {
        use std::arch::aarch64::{vld2q_u8, vst1q_u8};
        let v = vld2q_u8(src.as_ptr());
        vst1q_u8(dst.as_mut_ptr(), v.0);
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86_64 baseline; the two unaligned loads read the 32 bytes
    // of `src`, the unaligned store writes the 16 bytes of `dst` (both fixed-size arrays).
    unsafe {
        use std::arch::x86_64::*;
        let p = src.as_ptr() as *const __m128i;
        let low = _mm_set1_epi16(0x00ff);
        let a = _mm_and_si128(_mm_loadu_si128(p), low);
        let b = _mm_and_si128(_mm_loadu_si128(p.add(1)), low);
        _mm_storeu_si128(dst.as_mut_ptr() as *mut __m128i, _mm_packus_epi16(a, b));
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    every_other_16_portable(src, dst);
}

/// Bytes 0, 2, …, 14 of `src` (16 bytes) into `dst` (8 bytes), as [`every_other_16`] does
/// for 32 (NEON `ld2` of 8-byte lanes; SSE2 one load, a mask and a pack);
/// [`every_other_16_portable`] elsewhere.
fn every_other_8(src: &[u8], dst: &mut [u8]) {
    let (Ok(src), Ok(dst)) = (
        <&[u8; 16]>::try_from(src),
        <&mut [u8; 8]>::try_from(&mut *dst),
    ) else {
        // Callers pass exactly 16 and 8 bytes; anything else takes the checked path.
        return every_other_16_portable(src, dst);
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: NEON is part of the aarch64 baseline; the load reads the 16 bytes of `src`,
    // the store writes the 8 bytes of `dst` (both fixed-size arrays).
    unsafe {
        use std::arch::aarch64::{vld2_u8, vst1_u8};
        let v = vld2_u8(src.as_ptr());
        vst1_u8(dst.as_mut_ptr(), v.0);
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86_64 baseline; the unaligned load reads the 16 bytes of
    // `src`, the 8-byte store writes the 8 bytes of `dst` (both fixed-size arrays).
    unsafe {
        use std::arch::x86_64::*;
        let a = _mm_and_si128(
            _mm_loadu_si128(src.as_ptr() as *const __m128i),
            _mm_set1_epi16(0x00ff),
        );
        _mm_storel_epi64(dst.as_mut_ptr() as *mut __m128i, _mm_packus_epi16(a, a));
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    every_other_16_portable(src, dst);
}

/// The bounds-checked twin of [`every_other_16`] and [`every_other_8`]: every other byte of
/// `src` into `dst`.
fn every_other_16_portable(src: &[u8], dst: &mut [u8]) {
    for (d, s) in dst.iter_mut().zip(src.iter().step_by(2)) {
        *d = *s;
    }
}

impl Op for FastTaps {
    fn name(&self) -> StaticName {
        "FastTaps".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "{} taps on axis {}, pads {:?}, fill {}",
            self.taps.len(),
            self.axis,
            self.pads,
            self.fill
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for FastTaps {
    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [input] = &*inputs else {
            bail!("FastTaps takes one input, got {}", inputs.len());
        };
        if input.shape() != &*self.in_shape || input.datum_type().size_of() != 1 {
            bail!(
                "FastTaps was built for a {:?} byte tensor, got {:?} {:?}",
                self.in_shape,
                input.datum_type(),
                input.shape()
            );
        }
        let Some(out) = self.run(input.as_bytes()) else {
            bail!("FastTaps: input of {} bytes does not fit", input.len());
        };
        Ok(tvec!(super::tensors::byte_tensor(
            &self.out_shape,
            out,
            self.dt
        )?
        .into_tvalue()))
    }

    op_out_of_plan!();
}

impl TypedOp for FastTaps {
    fn output_facts(&self, _inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(TypedFact::dt_shape(self.dt, &*self.out_shape)))
    }

    as_op!();
}

/// Writes `fill` into columns `xs` of the rows of `plane` (rows `wo` bytes wide) at bytes
/// `span`: a column or two of padding, as strided stores (a `fill` per row would be a call
/// each).
fn fill_columns(
    plane: &mut [u8],
    wo: usize,
    span: std::ops::Range<usize>,
    xs: impl Iterator<Item = usize>,
    fill: u8,
) {
    let Some(rows) = plane.get_mut(span) else {
        return;
    };
    for x in xs {
        let mut i = x;
        while i < rows.len() {
            rows[i] = fill;
            i += wo.max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a test subgraph reaches one tap: strided or not, per spatial axis.
    #[derive(Clone, Copy)]
    enum Step {
        /// `Slice` of `len` from `start`.
        Slice(usize, usize),
        /// `Downsample` by `stride` from `first`, then a `Slice` of `len`.
        Down(usize, usize, usize),
    }

    /// `x` (`shape`, int8) → optional `Pad(pads, fill)` → per tap, steps on axes 2 and 3 →
    /// `Concat` on axis 1.
    fn subgraph(
        shape: [usize; 4],
        pad: Option<(Vec<(usize, usize)>, i8)>,
        taps: &[(Step, Step)],
    ) -> TypedModel {
        let mut m = TypedModel::default();
        let x = m.add_source("x", i8::fact(shape)).unwrap();
        let root = match pad {
            Some((pads, fill)) => {
                let op = Pad {
                    pads,
                    mode: PadMode::Constant(Arc::new(tensor0(fill))),
                };
                m.wire_node("pad", op, &[x]).unwrap()[0]
            }
            None => x,
        };
        let mut ins = Vec::new();
        for (i, &(a, b)) in taps.iter().enumerate() {
            let mut o = root;
            for (axis, step) in [(2, a), (3, b)] {
                o = match step {
                    Step::Slice(start, len) => {
                        let op = Slice::new(axis, start, start + len);
                        m.wire_node(format!("s{i}.{axis}"), op, &[o]).unwrap()[0]
                    }
                    Step::Down(stride, first, len) => {
                        let op = Downsample::new(axis, stride as isize, first);
                        let d = m.wire_node(format!("d{i}.{axis}"), op, &[o]).unwrap()[0];
                        let op = Slice::new(axis, 0, len);
                        m.wire_node(format!("ds{i}.{axis}"), op, &[d]).unwrap()[0]
                    }
                };
            }
            ins.push(o);
        }
        let c = m.wire_node("concat", TypedConcat::new(1), &ins).unwrap()[0];
        m.select_output_outlets(&[c]).unwrap();
        m
    }

    /// An input shape, its optional pad (amounts, fill) and the taps.
    type Case = (
        [usize; 4],
        Option<(Vec<(usize, usize)>, i8)>,
        Vec<(Step, Step)>,
    );

    fn run(m: TypedModel, x: &Tensor) -> Vec<i8> {
        let plan = m.into_runnable().unwrap();
        let out = plan.run(tvec!(x.clone().into())).unwrap();
        out[0]
            .to_plain_array_view::<i8>()
            .unwrap()
            .iter()
            .copied()
            .collect()
    }

    /// 3×3 taps of a convolution of stride `s` on an `h`×`w` input padded by 1.
    fn conv_taps(h: usize, w: usize, s: usize) -> Vec<(Step, Step)> {
        let (oh, ow) = ((h + 2 - 3) / s + 1, (w + 2 - 3) / s + 1);
        let step = |k: usize, n: usize| {
            if s == 1 {
                Step::Slice(k, n)
            } else {
                Step::Down(s, k, n)
            }
        };
        (0..9).map(|t| (step(t / 3, oh), step(t % 3, ow))).collect()
    }

    /// Against tract's own evaluation of the subgraph, byte for byte: stride 1 and 2 convs on
    /// odd sizes, asymmetric pads, a non-zero fill, no pad at all, and taps of uneven shapes.
    #[test]
    fn equals_tract_pad_slice_concat() {
        let mut cases: Vec<Case> = Vec::new();
        for (h, w) in [(7, 9), (8, 8), (1, 5), (13, 2), (5, 40), (3, 67)] {
            for s in [1, 2] {
                let pads = vec![(0, 0), (0, 0), (1, 1), (1, 1)];
                cases.push(([1, 3, h, w], Some((pads, -3)), conv_taps(h, w, s)));
            }
        }
        // Asymmetric padding, reads reaching into every border.
        let pads = vec![(0, 0), (0, 0), (2, 0), (0, 3)];
        cases.push((
            [2, 2, 6, 5],
            Some((pads, 7)),
            vec![
                (Step::Slice(0, 3), Step::Slice(4, 4)),
                (Step::Down(2, 1, 3), Step::Down(2, 1, 4)),
                (Step::Slice(5, 3), Step::Down(2, 0, 4)),
            ],
        ));
        // No pad: plain slices of the input.
        cases.push((
            [1, 4, 5, 6],
            None,
            vec![
                (Step::Slice(1, 3), Step::Slice(2, 3)),
                (Step::Slice(0, 3), Step::Down(2, 1, 3)),
            ],
        ));
        let mut seed = 0x9e37_79b9u32;
        for (shape, pad, taps) in cases {
            let n: usize = shape.iter().product();
            let data: Vec<i8> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    (seed >> 24) as u8 as i8
                })
                .collect();
            let x = Tensor::from_shape(&shape, &data).unwrap();
            let theirs = subgraph(shape, pad.clone(), &taps);
            every_byte_of_bands_written(&theirs, &data);
            let mut ours = theirs.clone();
            let report = super::super::install_with(&mut ours, true).unwrap();
            assert_eq!(report.taps_ours, 1, "{shape:?} {pad:?}: not fused");
            assert_eq!(
                ours.nodes().len(),
                2,
                "{shape:?}: only the source and FastTaps remain"
            );
            assert_eq!(run(theirs, &x), run(ours, &x), "{shape:?} {pad:?}");
        }
    }

    /// The bands the convolution writes ([`FastTaps::write_rows`]) do not depend on what the
    /// buffer held: every byte is written, the padding with the fill byte.
    fn every_byte_of_bands_written(m: &TypedModel, data: &[i8]) {
        let concat = m.output_outlets().unwrap()[0].node;
        let Some((op, _)) = FastTaps::for_node(m, m.node(concat)) else {
            return;
        };
        let &[n, k, ho, wo] = op.out_shape() else {
            return;
        };
        if !op.planar() {
            return;
        }
        let src: Vec<u8> = data.iter().map(|&v| v as u8).collect();
        for b in 0..n {
            for (y0, y1) in [(0, ho), (0, 1), (ho / 2, ho), (ho - 1, ho), (1, ho.min(3))] {
                if y0 >= y1 {
                    continue;
                }
                let len = k * (y1 - y0) * wo;
                let mut filled = vec![op.fill(); len];
                let mut dirty = vec![!op.fill(); len];
                assert!(op.write_rows(&src, b, [y0, y1], &mut filled));
                assert!(op.write_rows(&src, b, [y0, y1], &mut dirty));
                assert_eq!(filled, dirty, "rows {y0}..{y1} of {:?}", op.out_shape());
            }
        }
    }

    /// A concat that is not a convolution's im2col (on a spatial axis, a tap slicing the
    /// channels) takes the general row-by-row path, and matches tract all the same.
    #[test]
    fn general_path_equals_tract() {
        let shape = [2usize, 3, 5, 6];
        let mut m = TypedModel::default();
        let x = m.add_source("x", i8::fact(shape)).unwrap();
        let pad = Pad {
            pads: vec![(0, 0), (0, 1), (1, 1), (2, 1)],
            mode: PadMode::Constant(Arc::new(tensor0(-5i8))),
        };
        let p = m.wire_node("pad", pad, &[x]).unwrap()[0];
        let chain = |m: &mut TypedModel, name: &str, ops: Vec<Box<dyn TypedOp>>| {
            let mut o = p;
            for (i, op) in ops.into_iter().enumerate() {
                o = m.wire_node(format!("{name}{i}"), op, &[o]).unwrap()[0];
            }
            o
        };
        let a = chain(
            &mut m,
            "a",
            vec![
                Box::new(Slice::new(1, 1, 4)),
                Box::new(Slice::new(2, 0, 3)),
                Box::new(Slice::new(3, 1, 7)),
            ],
        );
        let b = chain(
            &mut m,
            "b",
            vec![
                Box::new(Slice::new(1, 0, 3)),
                Box::new(Downsample::new(2, 2, 1)),
                Box::new(Downsample::new(3, 1, 3)),
            ],
        );
        let c = m.wire_node("concat", TypedConcat::new(2), &[a, b]).unwrap()[0];
        m.select_output_outlets(&[c]).unwrap();
        let (op, _) = FastTaps::for_node(&m, m.node(c.node)).expect("taken");
        assert!(!op.planar());
        let n: usize = shape.iter().product();
        let data: Vec<i8> = (0..n).map(|i| (i * 29 % 253) as u8 as i8).collect();
        let x = Tensor::from_shape(&shape, &data).unwrap();
        let mut ours = m.clone();
        let report = super::super::install_with(&mut ours, true).unwrap();
        assert_eq!(report.taps_ours, 1);
        assert_eq!(run(m, &x), run(ours, &x));
    }

    /// Concats that are not an im2col of one tensor stay tract's: an input that is the
    /// root itself, inputs from two different tensors, the innermost axis, a float type.
    #[test]
    fn leaves_other_concats_alone() {
        let mut m = TypedModel::default();
        let x = m.add_source("x", i8::fact([1, 2, 4, 4])).unwrap();
        let y = m.add_source("y", i8::fact([1, 2, 4, 4])).unwrap();
        let f = m.add_source("f", f32::fact([1, 2, 4, 4])).unwrap();
        let sx = m.wire_node("sx", Slice::new(2, 0, 4), &[x]).unwrap()[0];
        let sy = m.wire_node("sy", Slice::new(2, 0, 4), &[y]).unwrap()[0];
        let sf = m.wire_node("sf", Slice::new(2, 0, 2), &[f]).unwrap()[0];
        let sf2 = m.wire_node("sf2", Slice::new(2, 2, 4), &[f]).unwrap()[0];
        let sx2 = m.wire_node("sx2", Slice::new(3, 1, 3), &[x]).unwrap()[0];
        let sx3 = m.wire_node("sx3", Slice::new(3, 0, 2), &[x]).unwrap()[0];
        let cases = [
            ("root itself", TypedConcat::new(1), vec![sx, x]),
            ("two tensors", TypedConcat::new(1), vec![sx, sy]),
            ("innermost axis", TypedConcat::new(3), vec![sx2, sx3]),
            ("float", TypedConcat::new(1), vec![sf, sf2]),
        ];
        for (what, op, ins) in cases {
            let c = m.wire_node(what, op, &ins).unwrap()[0];
            assert!(
                FastTaps::for_node(&m, m.node(c.node)).is_none(),
                "{what}: taken"
            );
        }
        // The same graph's one im2col-like concat is taken.
        let ok = m.wire_node("ok", TypedConcat::new(1), &[sx2, sx3]).unwrap()[0];
        assert!(FastTaps::for_node(&m, m.node(ok.node)).is_some());
    }

    /// Every stride and length: the vector blocks, their overlapping last one and the
    /// byte-by-byte rest, against a plain strided read.
    #[test]
    fn gather_reads_every_stride_th_byte() {
        for stride in 1..=3usize {
            for n in 1..70usize {
                let span: Vec<u8> = (0..(n - 1) * stride + 1).map(|i| (i * 7) as u8).collect();
                let mut got = vec![0u8; n];
                gather(&span, &mut got, stride);
                let want: Vec<u8> = (0..n).map(|i| span[i * stride]).collect();
                assert_eq!(got, want, "stride {stride}, n {n}");
            }
        }
    }

    /// The SIMD 16-byte de-interleave against its portable twin.
    #[test]
    fn every_other_16_and_8_equal_their_portable_twin() {
        let src: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
        let (mut simd, mut portable) = ([0u8; 16], [0u8; 16]);
        every_other_16(&src, &mut simd);
        every_other_16_portable(&src, &mut portable);
        let (mut simd8, mut portable8) = ([0u8; 8], [0u8; 8]);
        every_other_8(&src[..16], &mut simd8);
        every_other_16_portable(&src[..16], &mut portable8);
        assert_eq!(simd8, portable8);
        assert_eq!(simd, portable);
        assert_eq!(portable[3], src[6]);
    }
}
