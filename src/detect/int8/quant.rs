//! `FastQuantize`: stands in for tract's `QuantizeLinearI8` on float input (the INT8 graphs
//! quantize the image and three feature-pyramid sums). tract rounds each value with a
//! general round-half-to-even (exponent test, sign test, signed-zero fix-up), ≈ 9 NEON
//! instructions per value on a Pi 5. Here the rounding is the same `± 2²³ ∓ 2²³` trick
//! without the parts that cannot change an int8 result: a value of 2²³ or more in magnitude
//! clamps to the same end of the int8 range either way, and a zero of either sign is 0.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::quant::{DequantizeLinearF32, QuantizeLinearI8};

pub use crate::quantize::{quantize, quantize_portable};

/// The float that `deq` makes of each int8 value, indexed by the value's byte (0..=127, then
/// −128..=−1): tract's own dequantization run on all 256 values, so a lookup is its result
/// bit for bit. `None` if tract's op does not give one float per value.
pub(super) fn dequantization_table(deq: &DequantizeLinearF32) -> Option<Vec<f32>> {
    let all: Vec<i8> = (i8::MIN..=i8::MAX).collect();
    let out = deq
        .eval_out_of_plan(tvec!(tensor1(&all).into_tvalue()))
        .ok()??;
    let values = out.first()?.try_as_plain_ram().ok()?;
    let values = values.as_slice::<f32>().ok()?;
    if values.len() != 256 {
        return None;
    }
    Some(
        (0..=255u8)
            .map(|b| values[(b as i8 as i32 + 128) as usize])
            .collect(),
    )
}

/// The op that replaces one `QuantizeLinearI8` of an f32 tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastQuantize {
    /// tract's multiplier (its `scale` field: the reciprocal of the ONNX scale).
    scale_bits: u32,
    zero_point: i32,
    /// The output's type (int8, possibly with its quantization parameters).
    dt: DatumType,
}

impl FastQuantize {
    /// The replacement for `op` on an input of fact `input`, when it is a `QuantizeLinearI8`
    /// of f32 values.
    pub fn for_op(op: &ElementWiseOp, input: &TypedFact, output: &TypedFact) -> Option<Self> {
        let q = op.0.downcast_ref::<QuantizeLinearI8>()?;
        (input.datum_type == DatumType::F32 && output.datum_type.size_of() == 1).then(|| {
            FastQuantize {
                scale_bits: q.scale.to_bits(),
                zero_point: q.zero_point as i32,
                dt: output.datum_type,
            }
        })
    }

    /// tract's multiplier (the reciprocal of the ONNX scale), the zero point and the output's
    /// type.
    pub fn params(&self) -> (f32, i32, DatumType) {
        (f32::from_bits(self.scale_bits), self.zero_point, self.dt)
    }
}

impl Op for FastQuantize {
    fn name(&self) -> StaticName {
        "FastQuantize".into()
    }

    op_as_typed_op!();
}

impl EvalOp for FastQuantize {
    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [input] = &*inputs else {
            bail!("FastQuantize takes one input, got {}", inputs.len());
        };
        let src = input.try_as_plain_ram()?.as_slice::<f32>()?;
        let mut out = vec![0i8; src.len()];
        let scale = f32::from_bits(self.scale_bits);
        super::par::for_chunks(&mut out, 1, |first, chunk| {
            quantize(
                &src[first..first + chunk.len()],
                chunk,
                scale,
                self.zero_point,
            );
            true
        });
        Ok(tvec!(super::tensors::byte_tensor(
            input.shape(),
            out,
            self.dt
        )?
        .into_tvalue()))
    }

    op_out_of_plan!();
}

impl TypedOp for FastQuantize {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let Some(input) = inputs.first() else {
            bail!("FastQuantize takes one input");
        };
        Ok(tvec!(self.dt.fact(input.shape.clone())))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::tract_core::ops::quant::quantize_linear_f32_i8;

    /// Against tract's own rounding, value by value: ties at every half, the int8 range's
    /// ends, 2²³ and around it, zeros of both signs, denormals, NaN and (with a zero point of
    /// 0, where tract's addition cannot overflow) huge values and infinities, with several
    /// scales and zero points.
    #[test]
    fn equals_tract_quantize() {
        let mut values: Vec<f32> = vec![
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE / 2.0,
            f32::NAN,
            -f32::NAN,
        ];
        for i in -600..=600 {
            values.push(i as f32 * 0.5);
            values.push(i as f32 * 0.5 + 1e-3);
            values.push(i as f32 * 0.5 - 1e-3);
        }
        for e in [
            8_388_607.0f32,
            8_388_608.0,
            8_388_609.0,
            16_777_217.0,
            3e9,
            1e30,
        ] {
            values.push(e);
            values.push(-e);
        }
        let mut s = 0x2545_f491u32;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            values.push((s as i32) as f32 / 1.0e7);
        }
        let huge = |x: f32| !x.is_finite() || x.abs() >= 1.0e9;
        for (scale, zp) in [
            (1.0f32, 0i32),
            (7.3, -3),
            (0.037, 5),
            (25.5, -128),
            (3.0, 127),
        ] {
            let xs: Vec<f32> = values
                .iter()
                .copied()
                .chain([f32::INFINITY, f32::NEG_INFINITY])
                .filter(|&x| zp == 0 || !huge(x * scale))
                .collect();
            let mut got = vec![0i8; xs.len()];
            quantize(&xs, &mut got, scale, zp);
            let mut twin = vec![0i8; xs.len()];
            quantize_portable(&xs, &mut twin, scale, zp);
            assert_eq!(got, twin, "scale {scale} zp {zp}: SIMD and portable differ");
            // Every length around the 16-value step, from every offset of a few.
            for off in 0..3 {
                for len in 0..40 {
                    let part = &xs[off..off + len];
                    let (mut a, mut b) = (vec![0i8; len], vec![0i8; len]);
                    quantize(part, &mut a, scale, zp);
                    quantize_portable(part, &mut b, scale, zp);
                    assert_eq!(a, b, "len {len} off {off}");
                }
            }
            for (&x, &g) in xs.iter().zip(&got) {
                assert_eq!(
                    g,
                    quantize_linear_f32_i8(x, scale, zp),
                    "x {x:e} scale {scale} zp {zp}"
                );
            }
        }
    }

    /// The op against tract's `QuantizeLinearI8` op on a tensor.
    #[test]
    fn equals_tract_op() {
        let op = ElementWiseOp(
            Box::new(QuantizeLinearI8 {
                scale: 1.0 / 0.021,
                zero_point: -7,
            }),
            None,
        );
        let data: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.0123).collect();
        let x = Tensor::from_shape(&[2, 500], &data).unwrap();
        let fact = f32::fact([2, 500]);
        let out_fact = op.output_facts(&[&fact]).unwrap().remove(0);
        let ours = FastQuantize::for_op(&op, &fact, &out_fact).expect("taken");
        let ctx = EvalContext::out_of_plan();
        let want = op.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
        let got = ours.eval(&ctx, tvec!(x.into_tvalue())).unwrap();
        assert_eq!(want[0].datum_type(), got[0].datum_type());
        assert_eq!(
            want[0].to_plain_array_view::<i8>().unwrap(),
            got[0].to_plain_array_view::<i8>().unwrap()
        );
    }
}
