//! `FastResize`: stands in for tract's float `Resize` (the graphs' ×2 bilinear upsampling, in
//! the FP32 and the INT8 files alike). tract resamples axis after axis; along the innermost
//! axis each output is a run of length one, so its per-output bookkeeping (`fill`, window
//! slices, a one-element inner loop per tap) costs ≈ 8 % of a Pi 5 INT8 image. This computes
//! the same sums — `0.0`, then `+= w · s` for each non-zero tap in tap order — straight into
//! each output, so every result is the same float (Rust never fuses or reorders float
//! operations); other axes go through tract's own `resample_axis`.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::nn::resize::{resample_axis, AxisPlan, Resize};

use super::fallback::eval_or_tract_op;

/// The op that replaces one `Resize`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastResize {
    /// The op it replaces: its plans, shapes and facts are used as they are.
    inner: Resize,
}

impl FastResize {
    /// tract's op this one stands in for.
    pub fn resize(&self) -> &Resize {
        &self.inner
    }
}

impl FastResize {
    /// The replacement for `op` on an input of fact `input` (f32 only).
    pub fn for_op(op: &Resize, input: &TypedFact) -> Option<Self> {
        (input.datum_type == DatumType::F32).then(|| FastResize { inner: op.clone() })
    }

    /// tract's `Resize::eval`, step for step, with the innermost axis done by
    /// [`resample_innermost`].
    fn run(&self, inputs: &[TValue]) -> TractResult<Tensor> {
        let input = &inputs[0];
        let op = &self.inner;
        let scales = op.optional_scales_input.and_then(|ix| inputs.get(ix));
        let sizes = op.optional_sizes_input.and_then(|ix| inputs.get(ix));
        let output_shape =
            op.compute_output_shape(input.shape(), scales.map(|t| &**t), sizes.map(|t| &**t))?;
        let scales: TVec<f32> = if let Some(scales) = scales.filter(|s| s.len() == input.rank()) {
            scales.try_as_plain_ram()?.as_slice::<f32>()?.into()
        } else {
            output_shape
                .iter()
                .zip(input.shape())
                .map(|(o, i)| *o as f32 / *i as f32)
                .collect()
        };
        let mut shape: TVec<usize> = input.shape().into();
        let mut data: Vec<f32> = input.try_as_plain_ram()?.as_slice::<f32>()?.to_vec();
        let rank = shape.len();
        for (axis, scale) in scales.into_iter().enumerate() {
            let (len_in, len_out) = (shape[axis], output_shape[axis]);
            if len_in == len_out && scale == 1.0 {
                continue;
            }
            let plan = op.plan_axis(scale, len_in, len_out);
            let mut resampled = vec![0f32; data.len() / len_in * len_out];
            if axis + 1 == rank {
                // Whole rows per chunk, side by side on the model's threads.
                let ok = super::par::for_chunks(&mut resampled, len_out, |first, rows| {
                    let r0 = first / len_out;
                    let n = rows.len() / len_out;
                    match data.get(r0 * len_in..(r0 + n) * len_in) {
                        Some(src) => {
                            resample_innermost(src, len_in, &plan, rows);
                            true
                        }
                        None => false,
                    }
                });
                ensure!(ok, "FastResize: rows of axis {axis} out of range");
            } else {
                resample_axis(&data, &shape, axis, &plan, 0.0, &mut resampled);
            }
            data = resampled;
            shape[axis] = len_out;
        }
        Ok(tract_ndarray::ArrayD::from_shape_vec(&*shape, data)?.into_tensor())
    }
}

/// tract's `resample_axis` for the innermost axis (rows of `len_in` contiguous values): output
/// `x` of each row is `0.0`, then `+= w · s` over the plan's non-zero taps in order, or `0.0`
/// where the plan extrapolates (tract's Resize passes 0.0 as the extrapolation value).
pub fn resample_innermost(input: &[f32], len_in: usize, plan: &AxisPlan, output: &mut [f32]) {
    let len_out = plan.extrapolated.len();
    if len_in == 0 || len_out == 0 || plan.window == 0 {
        return;
    }
    match Innermost::new(plan, len_in) {
        Some(prepared) => prepared.rows(input, output),
        None => resample_general(input, len_in, plan, output),
    }
}

/// The non-zero taps (at most two, in the plan's order) of each output of an axis plan whose
/// window is at most 2 (linear and nearest), their indices checked against `len_in`: `None`
/// for any other plan (tract's own loop then runs, and panics where tract would).
pub(super) fn taps2(plan: &AxisPlan, len_in: usize) -> Option<Vec<Taps2>> {
    let (len_out, window) = (plan.extrapolated.len(), plan.window);
    if window == 0 || window > 2 || plan.indices.len() < window * len_out {
        return None;
    }
    let mut taps = vec![Taps2::default(); len_out];
    for (((t, &extrapolated), indices), weights) in taps
        .iter_mut()
        .zip(&plan.extrapolated)
        .zip(plan.indices.chunks_exact(window))
        .zip(plan.weights.chunks_exact(window))
    {
        if extrapolated {
            continue;
        }
        for (&i, &w) in indices.iter().zip(weights) {
            if w != 0.0 {
                if i >= len_in {
                    return None;
                }
                t.index[t.n] = i;
                t.weight[t.n] = w;
                t.n += 1;
            }
        }
    }
    Some(taps)
}

/// A linear or nearest plan of the innermost axis, prepared once for many rows: each output's
/// taps, and the run of outputs that a ×2 upsampling computes as contiguous sums.
#[derive(Clone, Debug)]
pub(super) struct Innermost {
    len_in: usize,
    taps: Vec<Taps2>,
    /// The first output of the periodic run and its number of output pairs (0: none).
    x0: usize,
    pairs: usize,
}

impl Innermost {
    /// The prepared plan for rows of `len_in` values; `None` for a plan [`taps2`] refuses.
    pub(super) fn new(plan: &AxisPlan, len_in: usize) -> Option<Self> {
        let taps = taps2(plan, len_in)?;
        let (x0, pairs) = periodic_run(&taps);
        Some(Innermost {
            len_in,
            taps,
            x0,
            pairs,
        })
    }

    /// The output length of a row.
    pub(super) fn len_out(&self) -> usize {
        self.taps.len()
    }

    /// Resamples each row of `len_in` values of `input` into a row of `output`, as tract's
    /// `resample_axis` would along the innermost axis. Inlined (into the upsample-add's
    /// planes, which [`super::wide::run`] compiles with AVX2).
    #[inline(always)]
    pub(super) fn rows(&self, input: &[f32], output: &mut [f32]) {
        let (len_in, len_out, taps) = (self.len_in, self.taps.len(), &self.taps[..]);
        if len_in == 0 || len_out == 0 {
            return;
        }
        // A ×2 upsampling's interior repeats with period 2, every index one further along:
        // those outputs are then sums of contiguous runs (vectorized), the rest per output.
        let (x0, pairs) = (self.x0, self.pairs);
        for (src, dst) in input
            .chunks_exact(len_in)
            .zip(output.chunks_exact_mut(len_out))
        {
            // The outputs before and after the run, one by one.
            let (before, rest) = dst.split_at_mut(x0.min(len_out));
            let after = rest.get_mut(2 * pairs..).unwrap_or_default();
            let ends = before.iter_mut().zip(taps).chain(
                after
                    .iter_mut()
                    .zip(taps.get(x0 + 2 * pairs..).unwrap_or_default()),
            );
            for (d, t) in ends {
                let mut acc = 0.0f32;
                if t.n > 0 {
                    acc += t.weight[0] * src[t.index[0]];
                }
                if t.n > 1 {
                    acc += t.weight[1] * src[t.index[1]];
                }
                *d = acc;
            }
            if pairs > 0 {
                let (a, b) = (taps[x0], taps[x0 + 1]);
                let run = |i: usize| &src[i..i + pairs];
                let (a0, a1, b0, b1) = (
                    run(a.index[0]),
                    run(a.index[1]),
                    run(b.index[0]),
                    run(b.index[1]),
                );
                let out = dst[x0..x0 + 2 * pairs].chunks_exact_mut(2);
                for ((((o, &a0), &a1), &b0), &b1) in out.zip(a0).zip(a1).zip(b0).zip(b1) {
                    // `0.0 +` first, as the per-output sum starts: it turns -0.0 into 0.0.
                    o[0] = (0.0 + a.weight[0] * a0) + a.weight[1] * a1;
                    o[1] = (0.0 + b.weight[0] * b0) + b.weight[1] * b1;
                }
            }
        }
    }
}

/// The longest run of output pairs from `x0` whose two-tap sums repeat with every index one
/// further per pair: `(x0, pairs)`, `pairs` 0 when there is none worth it.
fn periodic_run(taps: &[Taps2]) -> (usize, usize) {
    let shifted = |t: Taps2, j: usize| Taps2 {
        index: [t.index[0] + j, t.index[1] + j],
        ..t
    };
    let mut best = (0, 0);
    for x0 in 0..2 {
        let (Some(&a), Some(&b)) = (taps.get(x0), taps.get(x0 + 1)) else {
            continue;
        };
        if a.n != 2 || b.n != 2 {
            continue;
        }
        let pairs = (0..)
            .take_while(|&j| {
                taps.get(x0 + 2 * j) == Some(&shifted(a, j))
                    && taps.get(x0 + 2 * j + 1) == Some(&shifted(b, j))
            })
            .count();
        if pairs > best.1 {
            best = (x0, pairs);
        }
    }
    if best.1 < 4 {
        (0, 0)
    } else {
        best
    }
}

/// Up to two non-zero taps of one output: `n` of them, in the plan's order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Taps2 {
    /// How many of the taps are used (0 where the plan extrapolates or weighs all taps 0).
    pub(super) n: usize,
    /// The input indices of the taps.
    pub(super) index: [usize; 2],
    /// Their weights.
    pub(super) weight: [f32; 2],
}

/// [`resample_innermost`] for any plan: every tap looked up per output.
fn resample_general(input: &[f32], len_in: usize, plan: &AxisPlan, output: &mut [f32]) {
    let (len_out, window) = (plan.extrapolated.len(), plan.window);
    for (src, dst) in input
        .chunks_exact(len_in)
        .zip(output.chunks_exact_mut(len_out))
    {
        for (((d, &extrapolated), indices), weights) in dst
            .iter_mut()
            .zip(&plan.extrapolated)
            .zip(plan.indices.chunks_exact(window))
            .zip(plan.weights.chunks_exact(window))
        {
            let mut acc = 0.0f32;
            if !extrapolated {
                for (&i, &w) in indices.iter().zip(weights) {
                    if w != 0.0 {
                        acc += w * src[i];
                    }
                }
            }
            *d = acc;
        }
    }
}

impl Op for FastResize {
    fn name(&self) -> StaticName {
        "FastResize".into()
    }

    op_as_typed_op!();
}

impl EvalOp for FastResize {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        eval_or_tract_op(&self.inner, ctx, inputs, |inputs| {
            let f32_input = inputs
                .first()
                .is_some_and(|t| t.datum_type() == DatumType::F32);
            f32_input.then(|| self.run(inputs)).transpose()
        })
    }

    op_out_of_plan!();
}

impl TypedOp for FastResize {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::tract_core::ops::nn::resize::{CoordTransformer, Interpolator, Nearest};

    /// Against tract's own op, bit for bit, for the graphs' bilinear ×2 up and ×0.5 down
    /// (half-pixel) and other transforms, interpolators and odd sizes, with values of every
    /// sign and magnitude (and −0.0, which `0.0 + −0.0` turns into +0.0 in both).
    #[test]
    fn equals_tract_resize_bit_for_bit() {
        let ctx = EvalContext::out_of_plan();
        let mut checked = 0;
        for interpolator in [
            Interpolator::Linear,
            Interpolator::Nearest,
            Interpolator::Cubic,
        ] {
            for coord in [
                CoordTransformer::HalfPixel,
                CoordTransformer::AlignCorners,
                CoordTransformer::Asymmetric,
            ] {
                for (shape, sizes) in [
                    ([1usize, 2, 5, 7], [1usize, 2, 10, 14]),
                    ([1, 3, 4, 4], [1, 3, 2, 2]),
                    ([1, 1, 3, 5], [1, 1, 7, 9]),
                    ([2, 1, 6, 1], [2, 1, 12, 3]),
                    ([1, 2, 13, 26], [1, 2, 26, 52]),
                ] {
                    let op = Resize {
                        coord_transformer: coord.clone(),
                        interpolator: interpolator.clone(),
                        nearest: Nearest::Floor,
                        optional_scales_input: None,
                        optional_sizes_input: Some(1),
                    };
                    let n: usize = shape.iter().product();
                    let data: Vec<f32> = (0..n)
                        .map(|i| match i % 7 {
                            0 => -0.0,
                            1 => 1e-30,
                            _ => ((i as u64 * 2_654_435_761) % 1000) as f32 / 37.0 - 13.0,
                        })
                        .collect();
                    let x = Tensor::from_shape(&shape, &data).unwrap();
                    let s = Tensor::from_shape(&[4], &sizes.map(|v| v as i64)).unwrap();
                    let inputs = tvec!(x.into_tvalue(), s.into_tvalue());
                    let want = op.eval(&ctx, inputs.clone()).unwrap();
                    let ours = FastResize::for_op(&op, &f32::fact(shape)).unwrap();
                    let got = ours.eval(&ctx, inputs).unwrap();
                    assert_eq!(want[0].shape(), got[0].shape());
                    let bits = |t: &TValue| -> Vec<u32> {
                        let v = t.to_plain_array_view::<f32>().unwrap();
                        v.iter().map(|f| f.to_bits()).collect()
                    };
                    assert_eq!(
                        bits(&want[0]),
                        bits(&got[0]),
                        "{interpolator:?} {coord:?} {shape:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 45);
    }
}
