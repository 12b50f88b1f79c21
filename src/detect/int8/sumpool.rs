//! `FastSumPool`: stands in for tract's `OptSumPool` on f32 NCHW tensors with `Valid` padding
//! (the INT8 graphs' 2×2 stride-2 average pools of the feature pyramid, done in float).
//! tract visits every window through a generic patch walker; this reads each window's rows
//! directly. Each output is the same float sum, in the same order (the window's values row
//! by row, through `Iterator::sum`, as tract's), times the same reciprocal of the count.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::cnn::{OptSumPool, PaddingSpec};
use tract_onnx::tract_core::ops::nn::DataFormat;

use super::fallback::eval_or_tract_op;

/// The op that replaces one `OptSumPool`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastSumPool {
    /// The op it replaces: its output facts are ours, and it runs for any input this op does
    /// not handle.
    inner: OptSumPool,
    kernel: [usize; 2],
    stride: [usize; 2],
}

impl FastSumPool {
    /// The replacement for `op` on an input of fact `input`: f32, NCHW, 2-D, no dilation,
    /// `Valid` padding (every window whole, so the count is the kernel's size).
    pub fn for_op(op: &OptSumPool, input: &TypedFact) -> Option<Self> {
        let spec = &op.pool_spec;
        if input.datum_type != DatumType::F32
            || spec.data_format != DataFormat::NCHW
            || spec.kernel_shape.len() != 2
            || input.rank() != 4
            || !matches!(spec.padding, PaddingSpec::Valid)
            || spec
                .dilations
                .as_ref()
                .is_some_and(|d| d.iter().any(|&x| x != 1))
        {
            return None;
        }
        let stride = match &spec.strides {
            Some(s) if s.len() == 2 => [s[0], s[1]],
            None => [1, 1],
            _ => return None,
        };
        let kernel = [spec.kernel_shape[0], spec.kernel_shape[1]];
        (!kernel.contains(&0) && !stride.contains(&0)).then(|| FastSumPool {
            inner: op.clone(),
            kernel,
            stride,
        })
    }

    fn run(&self, ctx: &EvalContext, input: &Tensor) -> TractResult<Option<TValue>> {
        let &[n, c, h, w] = input.shape() else {
            return Ok(None);
        };
        let [kh, kw] = self.kernel;
        let [sy, sx] = self.stride;
        if h < kh || w < kw {
            return Ok(None);
        }
        let (oh, ow) = ((h - kh) / sy + 1, (w - kw) / sx + 1);
        let src = input.try_as_plain_ram()?.as_slice::<f32>()?;
        let div = if self.inner.normalize {
            Some(((kh * kw) as f32).recip())
        } else {
            None
        };
        // Whole planes per chunk, side by side on the model's threads.
        let unit = (oh * ow).max(1);
        let (out, ok) =
            super::tensors::tensor_filled(ctx, &[n, c, oh, ow], f32::datum_type(), |out| {
                super::par::for_chunks(out, unit, |first, dst| {
                    match src.get(first / unit * h * w..(first + dst.len()) / unit * h * w) {
                        Some(planes) => {
                            sum_planes(planes, [h, w], dst, [oh, ow], [kh, kw], [sy, sx], div);
                            true
                        }
                        None => false,
                    }
                })
            })?;
        ensure!(ok, "FastSumPool: planes out of range");
        Ok(Some(out))
    }
}

/// The sums (times `div`, when given) of `kh × kw` windows at strides `sy`, `sx` over the
/// row-major `h × w` planes of `src`, into the `oh × ow` planes of `out`, in tract's order.
fn sum_planes(
    src: &[f32],
    [h, w]: [usize; 2],
    out: &mut [f32],
    [oh, ow]: [usize; 2],
    [kh, kw]: [usize; 2],
    [sy, sx]: [usize; 2],
    div: Option<f32>,
) {
    for (plane, dst) in src
        .chunks_exact(h * w)
        .zip(out.chunks_exact_mut((oh * ow).max(1)))
    {
        for (oy, drow) in dst.chunks_exact_mut(ow.max(1)).enumerate() {
            let rows = &plane[oy * sy * w..(oy * sy + kh) * w];
            if kh == 2 && kw == 2 {
                let (r0, r1) = rows.split_at(w);
                for (ox, d) in drow.iter_mut().enumerate() {
                    let x = ox * sx;
                    let sum = [r0[x], r0[x + 1], r1[x], r1[x + 1]]
                        .into_iter()
                        .sum::<f32>();
                    *d = div.map_or(sum, |q| sum * q);
                }
            } else {
                for (ox, d) in drow.iter_mut().enumerate() {
                    let x = ox * sx;
                    let sum = rows
                        .chunks_exact(w)
                        .flat_map(|r| &r[x..x + kw])
                        .copied()
                        .sum::<f32>();
                    *d = div.map_or(sum, |q| sum * q);
                }
            }
        }
    }
}

impl Op for FastSumPool {
    fn name(&self) -> StaticName {
        "FastSumPool".into()
    }

    op_as_typed_op!();
}

impl EvalOp for FastSumPool {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        eval_or_tract_op(&self.inner, ctx, inputs, |inputs| match inputs {
            [input] => self.run(ctx, input),
            _ => Ok(None),
        })
    }

    op_out_of_plan!();
}

impl TypedOp for FastSumPool {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};

    /// Against tract's `OptSumPool`, bit for bit: 2×2/2 as in the shipped graphs, 3×3/1,
    /// 3×2/2 on odd sizes, normalized or not, with values whose sums round differently by
    /// order (and −0.0).
    #[test]
    fn equals_tract_sum_pool() {
        let ctx = EvalContext::out_of_plan();
        let mut checked = 0;
        for (shape, kernel, strides) in [
            ([1usize, 3, 8, 8], [2usize, 2], [2usize, 2]),
            ([2, 2, 7, 9], [2, 2], [2, 2]),
            ([1, 2, 7, 9], [3, 3], [1, 1]),
            ([1, 1, 9, 6], [3, 2], [2, 2]),
            // Above the parallel threshold: planes on two threads (below).
            ([1, 8, 96, 96], [2, 2], [2, 2]),
        ] {
            for normalize in [true, false] {
                let spec = tract_onnx::tract_core::ops::cnn::PoolSpec {
                    data_format: DataFormat::NCHW,
                    kernel_shape: kernel.iter().copied().collect(),
                    padding: PaddingSpec::Valid,
                    dilations: None,
                    strides: Some(strides.iter().copied().collect()),
                    input_channels: shape[1],
                    output_channels: shape[1],
                };
                let fact = f32::fact(shape);
                let theirs = OptSumPool {
                    geometry: spec.compute_geo(&fact.shape).unwrap(),
                    pool_spec: spec,
                    count_include_pad: false,
                    normalize,
                };
                let ours = FastSumPool::for_op(&theirs, &fact).expect("taken");
                let n: usize = shape.iter().product();
                let data: Vec<f32> = (0..n)
                    .map(|i| match i % 5 {
                        0 => -0.0,
                        1 => 1e8 + i as f32,
                        2 => -1e8,
                        _ => (i as f32 * 0.37).sin() * 3.1,
                    })
                    .collect();
                let x = Tensor::from_shape(&shape, &data).unwrap();
                let want = theirs.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
                let got = ours.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
                let got2 = multithread_tract_scope(Executor::multithread(2), || {
                    ours.eval(&ctx, tvec!(x.into_tvalue())).unwrap()
                });
                assert_eq!(want[0].shape(), got[0].shape());
                let bits = |t: &TValue| -> Vec<u32> {
                    t.to_plain_array_view::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect()
                };
                assert_eq!(
                    bits(&want[0]),
                    bits(&got[0]),
                    "{shape:?} {kernel:?} {normalize}"
                );
                assert_eq!(bits(&want[0]), bits(&got2[0]), "2 threads, {shape:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 10);
    }
}
