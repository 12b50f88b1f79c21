//! The in-graph im2col subgraphs replaced before tract optimizes the model, not after.
//!
//! The shipped INT8 graphs carry 27 of them: a `Pad`, 9 strided slices with their constant
//! bounds, a `Concat` (`taps`). That is two thirds of the typed graph's nodes (689 against
//! the FP32 graph's 213), and tract's declutter and codegen passes cost far more than in
//! proportion to the node count: every patch they apply walks the whole graph. Replacing
//! each subgraph by one [`FastTaps`] while the model is only typed lets tract optimize a
//! graph of the FP32 one's size.
//!
//! The typed subgraph still holds ONNX-style `StridedSlice`s (bounds as constant inputs,
//! negative or saturated ends). Rather than read those here, each subgraph is copied into a
//! small model of its own, tract declutters that one (into the `Slice` / `Downsample` chains
//! [`FastTaps::for_node`] reads), and the op is built from it. Anything that does not come
//! out as such a chain is left alone: the pass after optimization still sees it.

use std::collections::HashMap;

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::array::TypedConcat;

use super::taps::FastTaps;

/// At most this many nodes are copied into the small model for one concat.
const MAX_NODES: usize = 64;

/// Ops a subgraph may hold between its root and the concat (by tract's op name): the
/// padding and slicing that the in-graph im2col is made of.
const MOVES: [&str; 4] = ["Pad", "StridedSlice", "Slice", "Downsample"];

/// Replaces, in a typed (not yet optimized) model, every `Concat` that is an in-graph im2col
/// of a 1-byte tensor by one [`FastTaps`]; returns how many.
pub fn install(model: &mut TypedModel) -> TractResult<usize> {
    let mut found = Vec::new();
    for node in model.nodes() {
        if node.op_is::<TypedConcat>() {
            if let Some((op, root)) = for_concat(model, node) {
                found.push((node.id, root, op));
            }
        }
    }
    super::rewrite::replace_reading(model, found)
}

/// The op for `concat` and the outlet it reads, when the subgraph ending at `concat` comes
/// out of tract's declutter as what [`FastTaps::for_node`] takes.
fn for_concat(model: &TypedModel, concat: &TypedNode) -> Option<(FastTaps, OutletId)> {
    let out_fact = concat.outputs.first()?;
    if out_fact.fact.datum_type.size_of() != 1 {
        return None;
    }
    let mut copy = Copy {
        model,
        small: TypedModel::default(),
        map: HashMap::new(),
        root: None,
        nodes: 0,
    };
    let out = copy.node(concat)?;
    let root = copy.root?;
    let mut small = copy.small;
    small.select_output_outlets(&out).ok()?;
    small.declutter().ok()?;
    let last = small.node(small.output_outlets().ok()?.first()?.node);
    let (op, source) = FastTaps::for_node(&small, last)?;
    let input = *small.input_outlets().ok()?.first()?;
    (source == input).then_some((op, root))
}

/// A copy of one subgraph into a small model of its own.
struct Copy<'a> {
    model: &'a TypedModel,
    small: TypedModel,
    /// Outlets of `model` to their copies in `small`.
    map: HashMap<OutletId, OutletId>,
    /// The one outlet outside the subgraph that it reads (the small model's source).
    root: Option<OutletId>,
    nodes: usize,
}

impl Copy<'_> {
    /// Copies `node` with what it reads; its outlets in the small model. `None` when the
    /// subgraph reads more than one outside outlet or is too big.
    fn node(&mut self, node: &TypedNode) -> Option<TVec<OutletId>> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return None;
        }
        let mut inputs = TVec::new();
        for &input in &node.inputs {
            inputs.push(self.outlet(input)?);
        }
        self.small
            .wire_node(&node.name, node.op.clone(), &inputs)
            .ok()
    }

    /// The copy of `outlet`: a copied node's output, or the small model's source when it is
    /// the first outlet read from outside the subgraph.
    fn outlet(&mut self, outlet: OutletId) -> Option<OutletId> {
        if let Some(&copied) = self.map.get(&outlet) {
            return Some(copied);
        }
        let model = self.model;
        let node = model.node(outlet.node);
        // Inside the subgraph: padding, slicing and the constants they read.
        let konst = node.inputs.is_empty() && node.op.name() == "Const";
        if konst || MOVES.contains(&&*node.op.name()) {
            let outputs = self.node(node)?;
            for (slot, &copied) in outputs.iter().enumerate() {
                self.map.insert(OutletId::new(outlet.node, slot), copied);
            }
            return outputs.get(outlet.slot).copied();
        }
        if self.root.replace(outlet).is_some() {
            return None;
        }
        let fact = model.outlet_fact(outlet).ok()?;
        let shape = fact.shape.as_concrete()?;
        let copied = self
            .small
            .add_source(
                "lookout.taps.root",
                TypedFact::dt_shape(fact.datum_type, shape),
            )
            .ok()?;
        self.map.insert(outlet, copied);
        Some(copied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::tract_core::ops::array::Slice;

    /// An INT8 graph with the recipe's in-graph im2col, typed: all 27 im2cols are taken, no
    /// pad or strided slice is left for tract to optimize, and the graph shrinks by more than
    /// a third.
    #[test]
    fn takes_every_im2col_of_the_typed_graph() {
        let (file, size) = super::super::tests::I2CS_INT8;
        let mut model = super::super::tests::typed(file, size);
        let before = model.nodes().len();
        assert_eq!(install(&mut model).unwrap(), 27);
        let names: Vec<String> = model.nodes().iter().map(|n| n.op.name().into()).collect();
        // (The head's own 6 slices are not strided slices and stay.)
        for gone in ["Pad", "StridedSlice"] {
            assert!(!names.iter().any(|n| n == gone), "a {gone} is left");
        }
        assert_eq!(names.iter().filter(|n| *n == "FastTaps").count(), 27);
        assert!(
            model.nodes().len() * 3 < before * 2,
            "{before} → {} nodes",
            model.nodes().len()
        );
    }

    /// Slices of two different tensors, or of a float tensor, are not an im2col.
    #[test]
    fn leaves_other_concats_alone() {
        for (dt, two_roots) in [(i8::datum_type(), true), (f32::datum_type(), false)] {
            let mut m = TypedModel::default();
            let a = m.add_source("a", dt.fact([1, 2, 4, 4])).unwrap();
            let b = m.add_source("b", dt.fact([1, 2, 4, 4])).unwrap();
            let sa = m.wire_node("sa", Slice::new(3, 0, 3), &[a]).unwrap()[0];
            let from = if two_roots { b } else { a };
            let sb = m.wire_node("sb", Slice::new(3, 1, 4), &[from]).unwrap()[0];
            let c = m.wire_node("cat", TypedConcat::new(1), &[sa, sb]).unwrap()[0];
            m.select_output_outlets(&[c]).unwrap();
            assert_eq!(install(&mut m).unwrap(), 0, "{dt:?}, two roots {two_roots}");
            assert!(m.nodes().iter().any(|n| n.op_is::<TypedConcat>()));
        }
    }

    /// A small im2col of slices (what `StridedSlice`s declutter into) is taken, and gives
    /// what tract gives.
    #[test]
    fn a_typed_im2col_of_slices_equals_tract() {
        let mut m = TypedModel::default();
        let x = m.add_source("x", i8::fact([1, 2, 5, 7])).unwrap();
        let mut taps = Vec::new();
        for (i, (dy, dx)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            let r = m
                .wire_node(format!("r{i}"), Slice::new(2, dy, dy + 4), &[x])
                .unwrap()[0];
            let c = m
                .wire_node(format!("c{i}"), Slice::new(3, dx, dx + 6), &[r])
                .unwrap()[0];
            taps.push(c);
        }
        let c = m.wire_node("cat", TypedConcat::new(1), &taps).unwrap()[0];
        m.select_output_outlets(&[c]).unwrap();
        let mut ours = m.clone();
        assert_eq!(install(&mut ours).unwrap(), 1);
        assert_eq!(ours.nodes().len(), 2, "the source and FastTaps");
        let data: Vec<i8> = (0..70).map(|v| (v * 37 % 251) as u8 as i8).collect();
        let input = Tensor::from_shape(&[1, 2, 5, 7], &data).unwrap();
        let run = |m: TypedModel| {
            let plan = m.into_optimized().unwrap().into_runnable().unwrap();
            plan.run(tvec!(input.clone().into())).unwrap()[0]
                .clone()
                .into_tensor()
        };
        assert_eq!(run(m), run(ours));
    }
}
