//! The INT8 graphs' first op quantizes the normalized image (`QuantizeLinear`, 3·H·W values,
//! read once and written once more). [`take_input_quantization`] moves it out of the graph:
//! the model then takes the int8 tensor, and the preprocessing writes it directly — the same
//! `round_half_even(x · scale) + zero_point` on the same float `x`, one value at a time in the
//! fused frame → tensor loop (`crate::preprocess::frame_to_input`), so the bytes the first
//! convolution reads are the graph's own.

use tract_onnx::tract_core::internal::*;

use super::quant::FastQuantize;
use crate::preprocess::Quantization;

/// How an int8 model's input is quantized by lookout (the graph's quantization, taken out).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InputQuant {
    /// The multiplier and zero point.
    pub quant: Quantization,
    /// The model input's type (int8 with the graph's quantization parameters).
    pub dt: DatumType,
}

/// In an optimized model whose single f32 input is read by one [`FastQuantize`] and nothing
/// else, makes that quantization's output the model's input (the float input and the op
/// leave the plan) and returns its parameters; `None` (the model unchanged) otherwise — an
/// FP32 model, tract's own quantization (`LOOKOUT_INT8_PACK=tract`), an input read twice.
pub fn take_input_quantization(model: &mut TypedModel) -> TractResult<Option<InputQuant>> {
    let &[input] = model.input_outlets()? else {
        return Ok(None);
    };
    if model.outlet_fact(input)?.datum_type != DatumType::F32 {
        return Ok(None);
    }
    let &[reader] = model.outlet_successors(input) else {
        return Ok(None);
    };
    let node = model.node(reader.node);
    let Some(q) = node.op_as::<FastQuantize>() else {
        return Ok(None);
    };
    let out = OutletId::new(node.id, 0);
    if model.output_outlets()?.contains(&out) {
        return Ok(None);
    }
    let (scale, zero_point, dt) = q.params();
    // The quantization's output becomes the input: compaction turns the node into a source
    // (tract replaces a non-source input node by one of its fact) and drops the float input.
    model.set_input_outlets(&[out])?;
    *model = std::mem::take(model).into_compact()?;
    Ok(Some(InputQuant {
        quant: Quantization { scale, zero_point },
        dt,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::quant::quantize;
    use super::super::tests::{input, optimized, outputs, same_outputs, typed, SHIPPED_INT8};
    use super::super::{install_early, install_with};
    use super::*;

    /// The shipped INT8 files at a small size (whole-model runs under qemu in CI): lookout's
    /// load takes the input quantization out of the graph, and the model fed the int8 tensor
    /// quantized outside gives the outputs, bit for bit, of the model that quantized it itself.
    #[test]
    fn shipped_int8_models_take_their_input_quantized_with_the_same_outputs() {
        for ((file, _), size) in SHIPPED_INT8.into_iter().zip([96, 128]) {
            let x = input(size);
            let mut with = typed(file, size as u32);
            install_early(&mut with).expect("early");
            let mut with = with.into_optimized().expect("optimize");
            install_with(&mut with, true).expect("install");
            let mut without = with.clone();
            let q = take_input_quantization(&mut without)
                .expect("take")
                .unwrap_or_else(|| panic!("{file}: the input's quantization stays in the graph"));
            let fact = without
                .outlet_fact(without.input_outlets().unwrap()[0])
                .unwrap();
            assert_eq!(
                fact.datum_type, q.dt,
                "{file}: the input is the int8 tensor"
            );
            assert_eq!(fact.shape.as_concrete(), Some(&[1, 3, size, size][..]));
            assert!(
                without
                    .nodes()
                    .iter()
                    .all(|n| !n.op_is::<FastQuantize>()
                        || n.inputs.first().map(|i| i.node) != Some(0)),
                "{file}: nothing quantizes the input in the graph"
            );
            assert!(
                without.nodes().len() < with.nodes().len(),
                "{file}: the quantization left the plan"
            );
            let floats = x
                .try_as_plain_ram()
                .unwrap()
                .as_slice::<f32>()
                .unwrap()
                .to_vec();
            let mut bytes = vec![0i8; floats.len()];
            quantize(&floats, &mut bytes, q.quant.scale, q.quant.zero_point);
            let xq = super::super::tensors::byte_tensor(&[1, 3, size, size], bytes, q.dt).unwrap();
            same_outputs(file, outputs(with, &x), outputs(without, &xq));
        }
    }

    /// A float model, and an INT8 model whose quantization is still tract's op
    /// (`LOOKOUT_INT8_PACK=tract`), keep their float input.
    #[test]
    fn float_inputs_stay_where_nothing_of_ours_quantizes_them() {
        let mut fp32 = optimized("models/nanodet-g-416-fp32.onnx", 96);
        assert_eq!(take_input_quantization(&mut fp32).unwrap(), None);
        let mut tracts = optimized(SHIPPED_INT8[1].0, 96);
        install_with(&mut tracts, false).expect("install");
        let before = tracts.nodes().len();
        assert_eq!(take_input_quantization(&mut tracts).unwrap(), None);
        assert_eq!(tracts.nodes().len(), before);
    }
}
