//! tract's `Concat` writing into a kept tensor: [`FastConcat`].
//!
//! The backbone joins feature maps along the channels (and the FP32 graph its heads'
//! outputs); tract stacks them into a new tensor at every inference. [`FastConcat`] copies each input's contiguous blocks into an output the
//! detector keeps between inferences ([`recycle`](super::recycle)): the same bytes, without
//! a new mapping of up to a megabyte per concatenation.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::TypedConcat;

/// A concatenation of tensors of plain values along `axis` (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastConcat {
    inner: TypedConcat,
}

impl FastConcat {
    /// The op for tract's `op` over inputs of `facts`; `None` unless every input has a known
    /// shape and the same type of plain values (the INT8 graphs' int8 feature maps, the FP32
    /// graph's floats).
    pub fn for_op(op: &TypedConcat, facts: &[&TypedFact]) -> Option<FastConcat> {
        let dt = facts.first()?.datum_type;
        let plain = dt.is_copy();
        let same = facts.iter().all(|f| {
            f.datum_type == dt && f.shape.as_concrete().is_some_and(|s| s.len() > op.axis)
        });
        (plain && same).then(|| FastConcat { inner: op.clone() })
    }

    /// The concatenation of `inputs`, in a tensor of `ctx`'s plan state when it keeps them;
    /// `None` when the inputs do not fit the op (then tract's runs).
    fn run(&self, ctx: &EvalContext, inputs: &[TValue]) -> TractResult<Option<TValue>> {
        let axis = self.inner.axis;
        let Some(first) = inputs.first() else {
            return Ok(None);
        };
        let dt = first.datum_type();
        let rank = first.rank();
        let fits = inputs.iter().all(|t| {
            t.datum_type() == dt
                && t.rank() == rank
                && t.shape()[..axis] == first.shape()[..axis]
                && t.shape()[axis + 1..] == first.shape()[axis + 1..]
        });
        if !fits || axis >= rank {
            return Ok(None);
        }
        let mut shape: TVec<usize> = first.shape().into();
        shape[axis] = inputs.iter().map(|t| t.shape()[axis]).sum();
        let outer: usize = shape[..axis].iter().product();
        let (out, ()) = super::recycle::output_whole(ctx, dt, &shape, |t| {
            let out = t.as_bytes_mut();
            let mut at = 0;
            for o in 0..outer {
                for input in inputs {
                    let bytes = input.as_bytes();
                    let block = bytes.len() / outer.max(1);
                    let src = &bytes[o * block..(o + 1) * block];
                    out[at..at + block].copy_from_slice(src);
                    at += block;
                }
            }
            ensure!(
                at == out.len(),
                "FastConcat: {at} of {} bytes written",
                out.len()
            );
            Ok(())
        })?;
        Ok(Some(out))
    }
}

impl Op for FastConcat {
    fn name(&self) -> StaticName {
        "FastConcat".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("axis: {}", self.inner.axis)])
    }

    op_as_typed_op!();
}

impl EvalOp for FastConcat {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        super::fallback::eval_or_tract_op(&self.inner, ctx, inputs, |inputs| self.run(ctx, inputs))
    }

    op_out_of_plan!();
}

impl TypedOp for FastConcat {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::super::recycle::tests::{context, with_recycler};
    use super::*;

    fn noise(shape: &[usize], seed: u8) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<i8> = (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) as i8)
            .collect();
        Tensor::from_shape(shape, &v).unwrap()
    }

    /// Byte for byte tract's concatenation, along every axis, with and without kept tensors,
    /// and again on a kept tensor that held another result.
    #[test]
    fn matches_tracts_concat_on_every_axis() {
        let shared = with_recycler();
        let kept = context(&shared);
        let plain = EvalContext::out_of_plan();
        for axis in 0..4 {
            let mut shapes = [[2, 3, 5, 7], [2, 3, 5, 7], [2, 3, 5, 7]];
            shapes[1][axis] = 4;
            shapes[2][axis] = 1;
            for round in 0..2u8 {
                let inputs: TVec<TValue> = shapes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| noise(s, i as u8 * 7 + round).into_tvalue())
                    .collect();
                let tract = TypedConcat { axis };
                let want = tract.eval(&plain, inputs.clone()).unwrap();
                let ours = FastConcat { inner: tract };
                for ctx in [&plain, &kept] {
                    let got = ours.eval(ctx, inputs.clone()).unwrap();
                    assert_eq!(got[0].shape(), want[0].shape(), "axis {axis}");
                    assert_eq!(
                        got[0].as_bytes(),
                        want[0].as_bytes(),
                        "axis {axis}, round {round}"
                    );
                }
            }
        }
    }

    /// Floats (the FP32 graph's) too, bit for bit, on a kept tensor.
    #[test]
    fn matches_tracts_concat_of_floats() {
        let shared = with_recycler();
        let kept = context(&shared);
        let facts = [f32::fact([1, 3, 4, 5]), f32::fact([1, 2, 4, 5])];
        let tract = TypedConcat { axis: 1 };
        let ours = FastConcat::for_op(&tract, &[&facts[0], &facts[1]]).expect("floats are ours");
        for round in 0..2u8 {
            let inputs: TVec<TValue> = [[1, 3, 4, 5], [1, 2, 4, 5]]
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let t = noise(s, i as u8 * 5 + round);
                    let v: Vec<f32> = t
                        .try_as_plain_ram()
                        .unwrap()
                        .as_slice::<i8>()
                        .unwrap()
                        .iter()
                        .map(|&x| x as f32 * 0.37)
                        .collect();
                    Tensor::from_shape(s, &v).unwrap().into_tvalue()
                })
                .collect();
            let want = tract.eval(&kept, inputs.clone()).unwrap();
            let got = ours.eval(&kept, inputs).unwrap();
            assert_eq!(got[0].shape(), want[0].shape());
            assert_eq!(got[0].as_bytes(), want[0].as_bytes(), "round {round}");
        }
    }

    #[test]
    fn inputs_of_different_types_go_to_tracts_op() {
        let a = noise(&[1, 2, 3], 1).into_tvalue();
        let b = Tensor::zero::<f32>(&[1, 2, 3]).unwrap().into_tvalue();
        let op = FastConcat {
            inner: TypedConcat { axis: 1 },
        };
        let ctx = EvalContext::out_of_plan();
        assert!(op.run(&ctx, &[a, b]).unwrap().is_none());
    }
}
