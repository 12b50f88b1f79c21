//! `FastDownsample`: stands in for tract's `Downsample` (every `stride`-th element along one
//! axis) on 1-byte tensors. The shipped INT8 graphs feed their stride-2 3×3 convolutions
//! through 9 strided slices each; tract evaluates those through a generic n-dimensional
//! ndarray walk (≈ 34 instructions per element on a Pi 5); this is a row copy, or a strided
//! byte gather when the axis is the innermost one.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::Downsample;

use super::fallback::eval_or_tract_op;

/// The op that replaces one `Downsample` on an int8 tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastDownsample {
    /// The op it replaces: its output facts are ours, and it runs for any input this op does
    /// not handle (never, for a typed model's contiguous int8 tensors).
    inner: Downsample,
}

impl FastDownsample {
    /// The replacement for `op` on an input of fact `input`, when it is a forward stride on
    /// a 1-byte type.
    pub fn for_op(op: &Downsample, input: &TypedFact) -> Option<Self> {
        (input.datum_type.size_of() == 1 && op.stride > 0 && op.axis < input.rank())
            .then(|| FastDownsample { inner: op.clone() })
    }

    /// The replaced op's axis, stride and first index (`modulo`).
    pub fn params(&self) -> (usize, isize, usize) {
        (self.inner.axis, self.inner.stride, self.inner.modulo)
    }

    fn run(&self, input: &Tensor) -> Option<Tensor> {
        let shape = input.shape();
        let axis = self.inner.axis;
        let stride = usize::try_from(self.inner.stride).ok()?;
        let n_in = *shape.get(axis)?;
        if input.datum_type().size_of() != 1 || self.inner.modulo > n_in || stride == 0 {
            return None;
        }
        let n_out = (n_in - self.inner.modulo).div_ceil(stride);
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let mut out_shape: TVec<usize> = shape.into();
        out_shape[axis] = n_out;
        let src: &[u8] = input.as_bytes();
        let mut out = vec![0u8; outer * n_out * inner];
        downsample(
            src,
            &mut out,
            [outer, n_in, inner],
            n_out,
            self.inner.modulo,
            stride,
        )?;
        // The vector becomes the tensor's storage: no second copy.
        super::tensors::byte_tensor(&out_shape, out, input.datum_type()).ok()
    }
}

/// Every `stride`-th index, from `first`, of the middle axis of a row-major
/// `[outer, n_in, inner]` byte array, into `[outer, n_out, inner]`. `None` if the sizes do
/// not fit.
pub fn downsample(
    src: &[u8],
    out: &mut [u8],
    [outer, n_in, inner]: [usize; 3],
    n_out: usize,
    first: usize,
    stride: usize,
) -> Option<()> {
    if src.len() != outer * n_in * inner
        || out.len() != outer * n_out * inner
        || (n_out > 0 && first + (n_out - 1) * stride >= n_in)
    {
        return None;
    }
    if outer * n_out * inner == 0 {
        return Some(());
    }
    for (o, dst) in out.chunks_exact_mut(n_out * inner).enumerate() {
        let plane = &src[o * n_in * inner..][..n_in * inner];
        if inner == 1 && stride == 2 {
            // Pairs: the compiler turns this into de-interleaving loads (NEON `ld2`).
            let pairs = plane[first..].chunks_exact(2);
            let last = pairs.remainder().first().copied();
            let mut n = 0;
            for (d, p) in dst.iter_mut().zip(pairs) {
                *d = p[0];
                n += 1;
            }
            if let (Some(d), Some(v)) = (dst.get_mut(n), last) {
                *d = v;
            }
        } else if inner == 1 {
            for (d, s) in dst.iter_mut().zip(plane[first..].iter().step_by(stride)) {
                *d = *s;
            }
        } else {
            for (j, row) in dst.chunks_exact_mut(inner).enumerate() {
                row.copy_from_slice(&plane[(first + j * stride) * inner..][..inner]);
            }
        }
    }
    Some(())
}

impl Op for FastDownsample {
    fn name(&self) -> StaticName {
        "FastDownsample".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        self.inner.info()
    }

    op_as_typed_op!();
}

impl EvalOp for FastDownsample {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        eval_or_tract_op(&self.inner, ctx, inputs, |inputs| match inputs {
            [input] => Ok(self.run(input)),
            _ => Ok(None),
        })
    }

    op_out_of_plan!();
}

impl TypedOp for FastDownsample {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    fn axes_mapping(
        &self,
        inputs: &[&TypedFact],
        outputs: &[&TypedFact],
    ) -> TractResult<AxesMapping> {
        self.inner.axes_mapping(inputs, outputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against tract's own `Downsample` on int8 tensors of every axis, stride and offset the
    /// shipped graphs use, and odd ones (odd lengths, an offset past the end).
    #[test]
    fn equals_tract_downsample() {
        let shape = [1usize, 5, 7, 9];
        let n: usize = shape.iter().product();
        let data: Vec<i8> = (0..n).map(|i| (i * 37 % 251) as u8 as i8).collect();
        let x = Tensor::from_shape(&shape, &data).unwrap();
        let ctx = EvalContext::out_of_plan();
        let mut checked = 0;
        for axis in 0..4 {
            for stride in 1..=3isize {
                for modulo in 0..=shape[axis] + 1 {
                    let op = Downsample::new(axis, stride, modulo);
                    let fact = i8::fact(shape);
                    let Some(ours) = FastDownsample::for_op(&op, &fact) else {
                        panic!("not taken: {op:?}")
                    };
                    let want = op.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
                    let got = ours.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
                    assert_eq!(want[0].shape(), got[0].shape(), "{op:?}");
                    if want[0].len() > 0 {
                        let bytes = |t: &TValue| -> Vec<i8> {
                            t.to_plain_array_view::<i8>()
                                .unwrap()
                                .iter()
                                .copied()
                                .collect()
                        };
                        assert_eq!(bytes(&want[0]), bytes(&got[0]), "{op:?}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 50);
    }

    #[test]
    fn refuses_sizes_that_do_not_fit() {
        let src = [1u8, 2, 3, 4];
        let mut out = [0u8; 2];
        assert_eq!(downsample(&src, &mut out, [1, 4, 1], 2, 0, 2), Some(()));
        assert_eq!(out, [1, 3]);
        assert_eq!(
            downsample(&src, &mut out, [1, 4, 1], 2, 1, 3),
            None,
            "past the end"
        );
        assert_eq!(
            downsample(&src, &mut out, [1, 5, 1], 2, 0, 2),
            None,
            "wrong input size"
        );
    }
}
