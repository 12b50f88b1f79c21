//! tract's zero `Pad` writing into a kept tensor: [`FastPad`].
//!
//! tract runs an FP32 convolution as an explicit `Pad` in front of its im2col, so the FP32
//! graphs pad every 3×3 convolution's input into a new tensor at every inference (27 of them,
//! up to 2.8 MB each at 416×416), each mapped, faulted in and filled. [`FastPad`] copies the
//! input's rows into an output the detector keeps between inferences
//! ([`recycle`](super::recycle)), already zeroed there: the same bytes.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::{Pad, PadMode};

/// A constant padding with zeros (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastPad {
    inner: Pad,
}

impl FastPad {
    /// The op for tract's `op` on an input of `fact`; `None` unless it pads with a zero
    /// constant (every byte of the value zero in the input's type) an input of plain values
    /// and known rank.
    pub fn for_op(op: &Pad, fact: &TypedFact) -> Option<FastPad> {
        let PadMode::Constant(value) = &op.mode else {
            return None;
        };
        let zero = value
            .cast_to_dt(fact.datum_type)
            .ok()
            .is_some_and(|v| v.as_bytes().iter().all(|&b| b == 0));
        let rank = fact.shape.rank();
        (zero && fact.datum_type.is_copy() && rank > 0 && op.pads.len() == rank)
            .then(|| FastPad { inner: op.clone() })
    }

    /// `input` padded, in a tensor of `ctx`'s plan state when it keeps them; `None` when the
    /// input does not fit the op (then tract's runs).
    fn run(&self, ctx: &EvalContext, input: &TValue) -> TractResult<Option<TValue>> {
        let pads = &self.inner.pads;
        let shape = input.shape();
        let rank = shape.len();
        if rank == 0 || pads.len() != rank || !input.datum_type().is_copy() {
            return Ok(None);
        }
        let out_shape: TVec<usize> = shape
            .iter()
            .zip(pads)
            .map(|(&d, &(a, b))| d + a + b)
            .collect();
        let size = input.datum_type().size_of();
        let (out, ()) = super::recycle::output(ctx, input.datum_type(), &out_shape, |t| {
            pad_into(
                input.as_bytes(),
                shape,
                &out_shape,
                pads,
                size,
                t.as_bytes_mut(),
            );
            Ok(())
        })?;
        Ok(Some(out))
    }
}

/// Copies `src` (elements of `size` bytes, C order, `shape`) into `dst`, a zeroed tensor of
/// `out_shape` (`shape` grown by `pads`, before and after, on each axis): one contiguous copy
/// per innermost row.
fn pad_into(
    src: &[u8],
    shape: &[usize],
    out_shape: &[usize],
    pads: &[(usize, usize)],
    size: usize,
    dst: &mut [u8],
) {
    let rank = shape.len();
    // Elements between two steps along each axis of the output.
    let mut stride = vec![1usize; rank];
    for ax in (0..rank - 1).rev() {
        stride[ax] = stride[ax + 1] * out_shape[ax + 1];
    }
    let width = shape[rank - 1];
    if width == 0 {
        return;
    }
    let row = width * size;
    for (r, chunk) in src.chunks_exact(row).enumerate() {
        let mut rest = r;
        let mut at = pads[rank - 1].0;
        for ax in (0..rank - 1).rev() {
            at += (rest % shape[ax] + pads[ax].0) * stride[ax];
            rest /= shape[ax];
        }
        dst[at * size..at * size + row].copy_from_slice(chunk);
    }
}

impl Op for FastPad {
    fn name(&self) -> StaticName {
        "FastPad".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("pads: {:?}", self.inner.pads)])
    }

    op_as_typed_op!();
}

impl EvalOp for FastPad {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        super::fallback::eval_or_tract_op(&self.inner, ctx, inputs, |inputs| match inputs {
            [input] => self.run(ctx, input),
            _ => Ok(None),
        })
    }

    op_out_of_plan!();
}

impl TypedOp for FastPad {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::super::recycle::tests::{context, with_recycler};
    use super::*;

    fn noise(shape: &[usize], seed: u32) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / 1e6 - 2000.0)
            .collect();
        Tensor::from_shape(shape, &v).unwrap()
    }

    /// Bit for bit tract's padding, for pads on every axis and on none, ranks 1 to 4, with and
    /// without kept tensors, and again on a kept tensor that held another result.
    #[test]
    fn matches_tracts_pad() {
        let shared = with_recycler();
        let kept = context(&shared);
        let plain = EvalContext::out_of_plan();
        type Case<'a> = (&'a [usize], &'a [(usize, usize)]);
        let cases: [Case; 5] = [
            (&[1, 3, 7, 5], &[(0, 0), (0, 0), (1, 1), (1, 1)]),
            (&[2, 3, 4, 6], &[(1, 0), (0, 2), (2, 1), (0, 3)]),
            (&[1, 1, 1, 1], &[(0, 0), (0, 0), (0, 0), (0, 0)]),
            (&[5, 4], &[(1, 2), (3, 0)]),
            (&[9], &[(2, 1)]),
        ];
        for (shape, pads) in cases {
            let tract = Pad::new(pads.to_vec(), PadMode::Constant(Arc::new(0.0f32.into())));
            let fact = f32::fact(shape);
            let ours = FastPad::for_op(&tract, &fact).expect("a zero pad of f32 is ours");
            for round in 0..2u32 {
                let input = tvec!(noise(shape, round * 77 + 5).into_tvalue());
                let want = tract.eval(&plain, input.clone()).unwrap();
                for ctx in [&plain, &kept] {
                    let got = ours.eval(ctx, input.clone()).unwrap();
                    assert_eq!(got[0].shape(), want[0].shape(), "{shape:?} {pads:?}");
                    assert_eq!(
                        got[0].as_bytes(),
                        want[0].as_bytes(),
                        "{shape:?} {pads:?}, round {round}"
                    );
                }
            }
        }
    }

    /// A pad with another value, or by reflection, stays tract's.
    #[test]
    fn other_pads_are_left_to_tract() {
        let fact = f32::fact([1, 2, 3]);
        let pads = vec![(0, 0), (1, 1), (1, 1)];
        let one = Pad::new(pads.clone(), PadMode::Constant(Arc::new(1.0f32.into())));
        let reflect = Pad::new(pads, PadMode::Reflect);
        assert!(FastPad::for_op(&one, &fact).is_none());
        assert!(FastPad::for_op(&reflect, &fact).is_none());
    }
}
