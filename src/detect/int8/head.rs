//! The detection heads' outputs in one pass: [`FastHead`].
//!
//! Each NanoDet head ends in an int8 convolution whose `[1, C, H, W]` output the graph
//! dequantizes to floats, splits along the channels into the class scores and the box
//! distances, passes the scores through a sigmoid, and reshapes and transposes each part to
//! `[1, H·W, channels]`: five float tensors of up to 1.3 MB written and read for the
//! stride-8 head alone. [`FastHead`] does it as one op: an int8 value has 256 possible
//! values, so each part's float values (dequantized, and for the scores through the
//! sigmoid) are a 256-entry table, computed at load by tract's own ops on every int8 value,
//! and the op writes each output by table lookups straight in its transposed layout. The
//! outputs are tract's, bit for bit.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::Slice;
use tract_onnx::tract_core::ops::change_axes::{AxisOp, IntoShape};
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::quant::DequantizeLinearF32;

/// One output of a [`FastHead`]: input channels `start..end`, each value mapped by `table`
/// (indexed by the int8 value's byte), written as `[1, H·W, end − start]`.
#[derive(Debug, Clone, PartialEq)]
struct Part {
    start: usize,
    end: usize,
    table: Vec<f32>,
}

/// A head's dequantize → channel split → (sigmoid) → reshape → transpose, as one op reading
/// the head convolution's int8 `[1, C, H, W]` output (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct FastHead {
    /// Channels, rows and columns of the input.
    chw: [usize; 3],
    parts: Vec<Part>,
}

impl Eq for FastHead {}

/// The chain from a channel slice to its output, if it is one [`FastHead`] writes: the
/// slice's channels, the last node and the value table (the dequantization `deq`, then the
/// sigmoid when there is one).
fn part_of(
    model: &TypedModel,
    slice: usize,
    [c, h, w]: [usize; 3],
    deq: &[f32],
) -> Option<(Part, usize)> {
    let node = model.node(slice);
    let op = node.op_as::<Slice>()?;
    let (start, end) = (op.start.to_usize().ok()?, op.end.to_usize().ok()?);
    if op.axis != 1 || start >= end || end > c {
        return None;
    }
    let n = end - start;
    let only_successor = |id: usize| -> Option<usize> {
        let outputs = &model.node(id).outputs;
        let is_output = model.outputs.contains(&OutletId::new(id, 0));
        match (outputs.as_slice(), is_output) {
            ([o], false) if o.successors.len() == 1 => Some(o.successors[0].node),
            _ => None,
        }
    };
    let mut table = deq.to_vec();
    let mut next = only_successor(slice)?;
    if let Some(ew) = model.node(next).op_as::<ElementWiseOp>() {
        if ew.0.name() != "Sigmoid" {
            return None;
        }
        let values = tensor1(&table);
        let out = ew.eval_out_of_plan(tvec!(values.into_tvalue())).ok()??;
        table = floats(out.first()?)?;
        next = only_successor(next)?;
    }
    model.node(next).op_as::<IntoShape>()?;
    let flat = model.node(next).outputs.first()?.fact.shape.as_concrete()?;
    if flat != [1, n, h * w] {
        return None;
    }
    let last = only_successor(next)?;
    let last_node = model.node(last);
    if last_node.op_as::<AxisOp>()? != &AxisOp::Move(1, 2) {
        return None;
    }
    let fact = &last_node.outputs.first()?.fact;
    if fact.datum_type != f32::datum_type() || fact.shape.as_concrete()? != [1, h * w, n] {
        return None;
    }
    if !model.outputs.contains(&OutletId::new(last, 0)) {
        return None;
    }
    Some((Part { start, end, table }, last))
}

/// The values of a float tensor.
fn floats(t: &Tensor) -> Option<Vec<f32>> {
    Some(t.try_as_plain_ram().ok()?.as_slice::<f32>().ok()?.to_vec())
}

impl FastHead {
    /// The op for the head whose dequantization is node `id`, with the input it reads and the
    /// last node of each of its outputs; `None` when the node is not such a head's.
    pub fn for_node(model: &TypedModel, id: usize) -> Option<(FastHead, OutletId, Vec<usize>)> {
        let node = model.node(id);
        let deq = node.op_as::<DequantizeLinearF32>()?;
        let input = *node.inputs.first()?;
        let fact = model.outlet_fact(input).ok()?;
        let &[1, c, h, w] = fact.shape.as_concrete()? else {
            return None;
        };
        if fact.datum_type != i8::datum_type() {
            return None;
        }
        let by_byte = super::quant::dequantization_table(deq)?;
        let slices = &node.outputs.first()?.successors;
        if slices.len() < 2 || node.outputs.len() != 1 {
            return None;
        }
        let mut parts = Vec::new();
        let mut lasts = Vec::new();
        for s in slices {
            let (part, last) = part_of(model, s.node, [c, h, w], &by_byte)?;
            parts.push(part);
            lasts.push(last);
        }
        Some((
            FastHead {
                chw: [c, h, w],
                parts,
            },
            input,
            lasts,
        ))
    }

    /// Writes part `part` of the int8 `input` (`[C, H·W]` row-major) into `out`
    /// (`[H·W, end − start]`), on the model's threads in chunks of whole blocks of positions.
    fn write(&self, part: &Part, input: &[i8], out: &mut [f32]) {
        let hw = self.chw[1] * self.chw[2];
        let n = (part.end - part.start).max(1);
        // Blocks of positions, so that the reads (one row per channel) and the writes (one
        // row per position) both stay in the cache.
        const BLOCK: usize = 32;
        super::par::for_chunks(out, n * BLOCK, |first, chunk| {
            let start = first / n;
            let end = (start + chunk.len() / n).min(hw);
            for p0 in (start..end).step_by(BLOCK) {
                let p1 = (p0 + BLOCK).min(end);
                for (j, c) in (part.start..part.end).enumerate() {
                    let row = &input[c * hw + p0..c * hw + p1];
                    for (dp, &v) in row.iter().enumerate() {
                        chunk[(p0 - start + dp) * n + j] = part.table[v as u8 as usize];
                    }
                }
            }
            true
        });
    }
}

impl Op for FastHead {
    fn name(&self) -> StaticName {
        "FastHead".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let [c, h, w] = self.chw;
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| format!("{}..{}", p.start, p.end))
            .collect();
        Ok(vec![format!(
            "int8 {c}×{h}×{w} → channels {} as [1, {}, n] floats",
            parts.join(", "),
            h * w
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for FastHead {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [input] = &*inputs else {
            bail!("FastHead takes one input, got {}", inputs.len());
        };
        let [c, h, w] = self.chw;
        ensure!(
            input.shape() == [1, c, h, w],
            "FastHead: input shape {:?}, planned for [1, {c}, {h}, {w}]",
            input.shape()
        );
        let values = input.try_as_plain_ram()?;
        let values = values.as_slice::<i8>()?;
        let mut outputs = TVec::new();
        for part in &self.parts {
            let shape = [1, h * w, part.end - part.start];
            let (out, ()) = super::recycle::output_whole(ctx, f32::datum_type(), &shape, |t| {
                let mut view = t.try_as_plain_ram_mut()?;
                self.write(part, values, view.as_slice_mut::<f32>()?);
                Ok(())
            })?;
            outputs.push(out);
        }
        Ok(outputs)
    }

    op_out_of_plan!();
}

impl TypedOp for FastHead {
    fn output_facts(&self, _inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let hw = self.chw[1] * self.chw[2];
        Ok(self
            .parts
            .iter()
            .map(|p| f32::fact([1, hw, p.end - p.start]))
            .collect())
    }

    as_op!();
}

/// Replaces, in an optimized INT8 model, every head [`FastHead::for_node`] takes by one
/// [`FastHead`]; returns how many.
pub fn install(model: &mut TypedModel) -> TractResult<usize> {
    let mut done = 0;
    loop {
        let found = model
            .nodes()
            .iter()
            .find_map(|n| FastHead::for_node(model, n.id));
        let Some((op, input, lasts)) = found else {
            break;
        };
        let name = model.node(input.node).name.clone();
        let mut patch = TypedModelPatch::default();
        let tap = patch.tap_model(model, input)?;
        let wired = patch.wire_node(format!("{name}.head"), op, &[tap])?;
        for (last, out) in lasts.iter().zip(wired.iter()) {
            patch.shunt_outside(model, OutletId::new(*last, 0), *out)?;
        }
        patch
            .apply(model)
            .with_context(|| format!("fusing the head reading {name}"))?;
        *model = std::mem::take(model).into_compact()?;
        done += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{input, optimized, outputs};
    use super::*;

    #[test]
    fn heads_give_tract_s_outputs_bit_for_bit() {
        for (file, size) in [
            ("models/nanodet-g-416-int8.onnx", 416),
            ("models/nanodet-g-320-int8.onnx", 320),
        ] {
            let theirs = optimized(file, size);
            let mut ours = theirs.clone();
            assert_eq!(install(&mut ours).unwrap(), 3, "{file}: heads fused");
            assert!(ours.nodes().len() < theirs.nodes().len());
            let x = input(size as usize);
            let (a, b) = (outputs(theirs, &x), outputs(ours, &x));
            assert_eq!(a.len(), b.len());
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                assert_eq!(a.shape(), b.shape(), "{file}: output {i}");
                let bits = |t: &Tensor| -> Vec<u32> {
                    floats(t).unwrap().iter().map(|v| v.to_bits()).collect()
                };
                assert!(bits(a) == bits(b), "{file}: output {i} differs");
            }
        }
    }

    #[test]
    fn a_head_whose_output_is_read_elsewhere_is_left_alone() {
        let mut model = optimized("models/nanodet-g-416-int8.onnx", 416);
        // Make one head's dequantized tensor a model output too: its chain is then not
        // the op's alone.
        let deq = (0..model.nodes().len())
            .find(|&id| FastHead::for_node(&model, id).is_some())
            .unwrap();
        let mut outs = model.outputs.clone();
        let slice = model.node(deq).outputs[0].successors[0].node;
        outs.push(OutletId::new(slice, 0));
        model.select_output_outlets(&outs).unwrap();
        assert_eq!(install(&mut model).unwrap(), 2);
    }
}
