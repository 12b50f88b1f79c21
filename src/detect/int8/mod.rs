//! lookout's own ops inside tract: they replace parts of tract's lowering in an optimized
//! model, through tract's public API (no fork), with identical results.
//!
//! - [`fast_pack::FastPackI8`]: tract's activation packing (`OptMatMulPack`) of int8 matmuls;
//! - [`downsample::FastDownsample`]: tract's strided slices (`Downsample`) of int8 tensors;
//! - [`maxpool::FastMaxPoolI8`]: tract's `OptMaxPool` on int8;
//! - [`resize::FastResize`]: tract's float `Resize` (in the FP32 graph too);
//! - [`upsample_add::FastUpsampleAdd`]: the INT8 graphs' ×2 upsampling, the add that reads
//!   it and the dequantizations and quantization around them, as one op;
//! - [`im2col::FastIm2col`]: tract's eager int8 `Im2Col` (the stem convolution's patches);
//! - [`quant::FastQuantize`]: tract's `QuantizeLinearI8` of float tensors;
//! - [`lut::FastLut`]: tract's 8-bit `LookupTable` (NEON table lookups on aarch64);
//! - [`sumpool::FastSumPool`]: tract's float `OptSumPool` (average pools) with valid padding;
//! - [`taps::FastTaps`]: the in-graph im2col (`Pad` → slices → `Concat`) of int8 tensors;
//!   [`taps_early::install`] puts it in before tract optimizes, so tract optimizes a graph a
//!   third the size;
//! - [`taps_pack::FastTapsPack`]: a `FastTaps` and the `FastPackI8` that reads it, as one op;
//! - [`concat::FastConcat`]: tract's `Concat`, copying each input's blocks in place (in the
//!   FP32 graph too);
//! - [`pad::FastPad`]: tract's zero `Pad` (the FP32 graph's, in front of each convolution),
//!   into a kept tensor;
//! - [`head::FastHead`]: a detection head's dequantize, channel split, sigmoid and
//!   transposes to its outputs, as one op writing them by table lookups;
//! - [`qconv::QConvI8`]: a quantized 1×1 convolution (and the im2col it reads) with tract's
//!   int8 kernel and fused requantization, put in before tract optimizes: tract's lowering of
//!   those convolutions (most of INT8's load time) never runs.
//!
//! `LOOKOUT_INT8_PACK=tract` in the environment keeps tract's own ops, for before/after
//! comparisons with one binary; `LOOKOUT_INT8_CONV=tract` keeps only tract's convolutions.
//!
//! The ops write their outputs into tensors a [`recycle::Recycler`] keeps from one inference
//! to the next (`LOOKOUT_INT8_RECYCLE=off`: new ones every time, for comparisons).

pub mod concat;
pub mod downsample;
mod fallback;
pub mod fast_pack;
pub mod head;
pub mod im2col;
pub mod input;
pub mod lut;
pub mod maxpool;
pub mod pack;
pub mod pad;
pub mod pairwise;
pub mod par;
pub mod qconv;
pub mod quant;
pub mod recycle;
pub mod resize;
mod rewrite;
pub mod stem;
pub mod sumpool;
pub mod taps;
pub mod taps_early;
pub mod taps_k4;
pub mod taps_pack;
pub(crate) mod tensors;
pub mod upsample_add;
pub mod wide;
pub mod winograd;

use rewrite::replace_reading;
use tract_onnx::prelude::*;
use tract_onnx::tract_core::ops::array::{Pad, TypedConcat};
use tract_onnx::tract_core::ops::cnn::conv::Im2Col;
use tract_onnx::tract_core::ops::cnn::{OptMaxPool, OptSumPool};
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::matmul::pack::OptMatMulPack;
use tract_onnx::tract_core::ops::nn::resize::Resize;
use tract_onnx::tract_core::ops::Downsample;

/// What [`install`] changed in a model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Quantized convolutions now [`qconv::QConvI8`] (taken before optimization, by
    /// [`install_early`]).
    pub convs_ours: usize,
    /// Quantized convolutions in the typed model (ours + tract's).
    pub convs_int8: usize,
    /// The kernels [`qconv::QConvI8`] runs (tract's, or lookout's pairwise one), and how many convolutions run each, most
    /// used first (the order they were first used in on a tie).
    pub conv_kernels: Vec<(String, usize)>,
    /// int8 activation packs now done by lookout's packer.
    pub packs_ours: usize,
    /// int8 activation packs in the model (ours + tract's).
    pub packs_int8: usize,
    /// Strided slices of int8 tensors now done by lookout.
    pub downsamples_ours: usize,
    /// int8 max-pools now done by lookout.
    pub maxpools_ours: usize,
    /// Float resizes now done by lookout (the FP32 model has them too), those taken into an
    /// upsample-add not counted.
    pub resizes_ours: usize,
    /// Resize → add (→ quantize) chains of the INT8 graphs, with the int8 dequantizations they
    /// read, now one [`upsample_add::FastUpsampleAdd`] each.
    pub upsample_adds_ours: usize,
    /// In-graph im2col subgraphs (pad, slices, concat) now one lookout op each (those taken
    /// before optimization, [`install_early`], are added by the caller).
    pub taps_ours: usize,
    /// 8-bit lookup tables (the INT8 graphs' activations) now done by lookout.
    pub luts_ours: usize,
    /// Of those, the tables applied by the [`qconv::QConvI8`] they follow, band by band
    /// ([`qconv::QConvI8::with_lut`]).
    pub luts_in_convs: usize,
    /// Eager int8 patch packings (`Im2Col`, the stem) now done by lookout.
    pub im2cols_ours: usize,
    /// In-graph im2cols packed row by row without the whole tensor in between.
    pub taps_packed: usize,
    /// In-graph im2cols written band by band by the [`qconv::QConvI8`] that reads them.
    pub taps_convs: usize,
    /// Float-to-int8 quantizations now done by lookout (those taken into an upsample-add not
    /// counted).
    pub quantizes_ours: usize,
    /// Float average pools now done by lookout.
    pub sumpools_ours: usize,
    /// Of those, the pools that read an int8 tensor and dequantize it as they go
    /// ([`sumpool::fuse_dequantizations`]).
    pub dequantizations_in_pools: usize,
    /// Float additions (and the quantizations of their sums) done by the pools they follow
    /// ([`sumpool::fuse_add_quantize`]).
    pub adds_in_pools: usize,
    /// Concatenations now done by lookout (into a kept tensor).
    pub concats_ours: usize,
    /// Zero paddings now done by lookout (into a kept tensor).
    pub pads_ours: usize,
    /// Detection heads whose dequantize, split, sigmoid and transposes are one
    /// [`head::FastHead`] each.
    pub heads_ours: usize,
    /// The input's quantization taken out of the graph and done by the preprocessing
    /// ([`input::take_input_quantization`]; set by the caller).
    pub input_by_preprocessing: bool,
}

impl Report {
    /// One phrase for the model-load log line and `lookout bench`, e.g. "own int8 ops: 34 of
    /// 34 convs (kernel …), 28 lookup tables, …", with "27 im2col concats (27 written by the
    /// convs)" for a graph with an in-graph im2col (with several kernels: "kernels A for 33, B
    /// for 1"; tract's, or lookout's `lookout_pairwise_i8_4x4`)
    /// (the kinds replaced at least once); `None` for a model without int8 packing (FP32,
    /// whose resizes are replaced all the same).
    pub fn describe(&self) -> Option<String> {
        if self.packs_int8 == 0 && self.convs_int8 == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if self.convs_int8 > 0 {
            parts.push(format!(
                "{} of {} convs{}",
                self.convs_ours,
                self.convs_int8,
                match &self.conv_kernels[..] {
                    [] => String::new(),
                    [(k, _)] => format!(" (kernel {k})"),
                    many => format!(
                        " (kernels {})",
                        many.iter()
                            .map(|(k, n)| format!("{k} for {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            ));
        }
        if self.packs_int8 > 0 {
            parts.push(format!("{} of {} packs", self.packs_ours, self.packs_int8));
        }
        if self.taps_ours + self.taps_convs > 0 {
            let mut how = Vec::new();
            if self.taps_convs > 0 {
                how.push(format!("{} written by the convs", self.taps_convs));
            }
            if self.taps_packed > 0 {
                how.push(format!("{} packed in bands", self.taps_packed));
            }
            parts.push(format!(
                "{} im2col concats{}",
                self.taps_ours + self.taps_convs,
                if how.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", how.join(", "))
                }
            ));
        }
        if self.luts_ours > 0 {
            parts.push(format!(
                "{} lookup table{}{}",
                self.luts_ours,
                if self.luts_ours == 1 { "" } else { "s" },
                if self.luts_in_convs > 0 {
                    format!(" ({} in the convs)", self.luts_in_convs)
                } else {
                    String::new()
                }
            ));
        }
        for (n, what) in [
            (self.im2cols_ours, "eager im2col"),
            (self.quantizes_ours, "quantization"),
            (self.downsamples_ours, "strided slice"),
            (self.maxpools_ours, "max-pool"),
            (self.sumpools_ours, "average pool"),
            (self.resizes_ours, "resize"),
            (self.upsample_adds_ours, "upsample-add"),
            (self.concats_ours, "concatenation"),
            (self.pads_ours, "padding"),
            (self.heads_ours, "head output"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
            }
        }
        if self.dequantizations_in_pools > 0 {
            let n = self.dequantizations_in_pools;
            let s = if n == 1 { "" } else { "s" };
            parts.push(format!("{n} dequantization{s} in the pools"));
        }
        if self.adds_in_pools > 0 {
            let n = self.adds_in_pools;
            let s = if n == 1 { "" } else { "s" };
            parts.push(format!("{n} add{s} and quantization{s} in the pools"));
        }
        if self.input_by_preprocessing {
            parts.push("input quantized by the preprocessing".to_string());
        }
        let forced = if self.packs_ours == 0 && tract_packing_forced() {
            " (LOOKOUT_INT8_PACK=tract)"
        } else if self.convs_ours == 0 && tract_conv_forced() {
            " (LOOKOUT_INT8_CONV=tract)"
        } else {
            ""
        };
        Some(format!("own int8 ops: {}{forced}", parts.join(", ")))
    }
}

impl Report {
    /// The input's quantization, counted among lookout's by [`install`], was taken out of the
    /// graph ([`input::take_input_quantization`]): the preprocessing does it now.
    pub fn input_taken(&mut self) {
        self.quantizes_ours = self.quantizes_ours.saturating_sub(1);
        self.input_by_preprocessing = true;
    }

    /// Adds what [`install_early`] did to this report of [`install`].
    pub fn merge_early(&mut self, early: Report) {
        self.taps_ours += early.taps_ours;
        self.taps_convs += early.taps_convs;
        self.convs_ours += early.convs_ours;
        self.convs_int8 += early.convs_int8;
        for (k, n) in early.conv_kernels {
            self.count_kernel(&k, n);
        }
    }

    /// Counts `n` more convolutions running tract's kernel `kernel`.
    fn count_kernel(&mut self, kernel: &str, n: usize) {
        match self.conv_kernels.iter_mut().find(|(k, _)| k == kernel) {
            Some((_, count)) => *count += n,
            None => self.conv_kernels.push((kernel.to_string(), n)),
        }
        // Most used first; a stable sort keeps first use first on a tie.
        self.conv_kernels
            .sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    }
}

/// True when the environment asks for tract's own packing (`LOOKOUT_INT8_PACK=tract`).
pub fn tract_packing_forced() -> bool {
    std::env::var("LOOKOUT_INT8_PACK").is_ok_and(|v| v == "tract")
}

/// Before tract optimizes a typed model: every in-graph im2col subgraph becomes one
/// [`taps::FastTaps`] ([`taps_early`]), then every quantized convolution that
/// [`qconv::QConvI8`] computes becomes one (absorbing the im2col it reads), unless the
/// environment asks for tract's ops (`LOOKOUT_INT8_PACK=tract`: all of them;
/// `LOOKOUT_INT8_CONV=tract`: the convolutions). Returns what it did, which the caller merges
/// into the [`Report`] of the [`install`] that follows ([`Report::merge_early`]).
pub fn install_early(model: &mut TypedModel) -> TractResult<Report> {
    let ours = !tract_packing_forced();
    install_early_with(model, ours, ours && !tract_conv_forced())
}

/// [`install_early`] with the choices made by the caller: `ours` for lookout's im2col ops,
/// `convs` for lookout's convolutions.
pub fn install_early_with(model: &mut TypedModel, ours: bool, convs: bool) -> TractResult<Report> {
    install_early_kernels(model, ours, convs, qconv::KernelPolicy::from_env())
}

/// [`install_early_with`], the convolutions' kernel as `policy` says.
pub fn install_early_kernels(
    model: &mut TypedModel,
    ours: bool,
    convs: bool,
    policy: qconv::KernelPolicy,
) -> TractResult<Report> {
    let mut report = Report {
        taps_ours: if ours { taps_early::install(model)? } else { 0 },
        ..Report::default()
    };
    let mut found = Vec::new();
    for node in model.nodes() {
        let Some(conv) = node.op_as::<tract_onnx::tract_core::ops::cnn::Conv>() else {
            continue;
        };
        if conv.q_params.is_none() {
            continue;
        }
        report.convs_int8 += 1;
        if !convs {
            continue;
        }
        // The im2col it reads, when nothing else reads it: written band by band by the conv.
        let input = node.inputs[0];
        let taps = model
            .node(input.node)
            .op_as::<taps::FastTaps>()
            .filter(|t| t.planar() && model.outlet_successors(input).len() == 1);
        let with_taps = taps.and_then(|t| {
            let op = qconv::QConvI8::for_node(model, node, Some(t.clone()), policy)?;
            Some((op, model.node(input.node).inputs[0], true))
        });
        if let Some((op, source, absorbed)) = with_taps.or_else(|| {
            Some((
                qconv::QConvI8::for_node(model, node, None, policy)?,
                input,
                false,
            ))
        }) {
            report.count_kernel(op.kernel_name(), 1);
            if absorbed {
                report.taps_ours -= 1;
                report.taps_convs += 1;
            }
            found.push((node.id, source, op));
        }
    }
    report.convs_ours = replace_reading(model, found)?;
    Ok(report)
}

/// True when the environment asks for tract's own quantized convolutions
/// (`LOOKOUT_INT8_CONV=tract`), lookout's other int8 ops staying.
pub fn tract_conv_forced() -> bool {
    std::env::var("LOOKOUT_INT8_CONV").is_ok_and(|v| v == "tract")
}

/// Replaces, in an optimized model, every int8 `OptMatMulPack` that lookout's packer
/// reproduces with [`fast_pack::FastPackI8`], unless the environment asks for tract's packing.
/// Anything else is left to tract.
pub fn install(model: &mut TypedModel) -> TractResult<Report> {
    install_with(model, !tract_packing_forced())
}

/// [`install`] with the choice made by the caller: `ours` false only counts the int8 packs.
pub fn install_with(model: &mut TypedModel, ours: bool) -> TractResult<Report> {
    install_stages(model, ours, true)
}

/// lookout's op in place of `node` (whose first input is `input`), counted in `report`;
/// `None` when it keeps tract's (`forced`: tract's ops asked for; only the int8 packs are
/// counted then).
fn ours_for(
    node: &TypedNode,
    input: &TypedFact,
    inputs: &[&TypedFact],
    forced: bool,
    report: &mut Report,
) -> Option<Box<dyn TypedOp>> {
    if let Some(op) = node.op_as::<Downsample>() {
        let ours = downsample::FastDownsample::for_op(op, input).filter(|_| !forced);
        report.downsamples_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<Im2Col>() {
        let ours = im2col::FastIm2col::for_op(op, input, &node.outputs[0].fact).filter(|_| !forced);
        report.im2cols_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<ElementWiseOp>() {
        if let Some(q) = quant::FastQuantize::for_op(op, input, &node.outputs[0].fact) {
            let ours = Some(q).filter(|_| !forced);
            report.quantizes_ours += ours.is_some() as usize;
            ours.map(|o| Box::new(o) as _)
        } else {
            let ours = lut::FastLut::for_op(op, input).filter(|_| !forced);
            report.luts_ours += ours.is_some() as usize;
            ours.map(|o| Box::new(o) as _)
        }
    } else if let Some(op) = node.op_as::<Resize>() {
        let ours = resize::FastResize::for_op(op, input).filter(|_| !forced);
        report.resizes_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<OptSumPool>() {
        let ours = sumpool::FastSumPool::for_op(op, input).filter(|_| !forced);
        report.sumpools_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<OptMaxPool>() {
        let ours = maxpool::FastMaxPoolI8::for_op(op, input).filter(|_| !forced);
        report.maxpools_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<OptMatMulPack>() {
        if input.datum_type.size_of() != 1 {
            return None;
        }
        report.packs_int8 += 1;
        let ours =
            fast_pack::FastPackI8::for_op(op, input, &node.outputs[0].fact).filter(|_| !forced);
        report.packs_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<TypedConcat>() {
        let ours = concat::FastConcat::for_op(op, inputs).filter(|_| !forced);
        report.concats_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else if let Some(op) = node.op_as::<Pad>() {
        let ours = pad::FastPad::for_op(op, input).filter(|_| !forced);
        report.pads_ours += ours.is_some() as usize;
        ours.map(|o| Box::new(o) as _)
    } else {
        None
    }
}

/// [`install_with`], with the last step, packing im2cols row by row, only when `fuse`.
fn install_stages(model: &mut TypedModel, ours: bool, fuse: bool) -> TractResult<Report> {
    let mut report = Report::default();
    let forced = !ours;
    if ours {
        // First the im2col subgraphs, while their slices are still tract's: each concat
        // becomes one op reading the pad's input, and the pad and slices fall out.
        let mut patches = Vec::new();
        for node in model.nodes() {
            if let Some((op, source)) = taps::FastTaps::for_node(model, node) {
                patches.push((node.id, source, op));
            }
        }
        report.taps_ours = replace_reading(model, patches)?;
    }
    // One patch per node, applied at once: a replaced node feeding another one (two strided
    // slices in a row) is then already the new op when its successor is tapped.
    for id in 0..model.nodes().len() {
        let node = model.node(id);
        let Some(&first_input) = node.inputs.first() else {
            continue;
        };
        let input = model.outlet_fact(first_input)?;
        let ours = {
            let facts = model.node_input_facts(id)?;
            ours_for(node, input, &facts, forced, &mut report)
        };
        if let Some(ours) = ours {
            let inputs = node.inputs.clone();
            TypedModelPatch::replace_single_op(model, node, &inputs, ours)?.apply(model)?;
        }
    }
    if report.packs_ours
        + report.downsamples_ours
        + report.maxpools_ours
        + report.resizes_ours
        + report.luts_ours
        + report.im2cols_ours
        + report.quantizes_ours
        + report.sumpools_ours
        + report.concats_ours
        + report.pads_ours
        > 0
    {
        // The replaced nodes are now dead; drop them so the plan holds only what runs.
        *model = std::mem::take(model).into_compact()?;
    }
    if ours {
        // The INT8 graphs' upsample → add (→ quantize) chains, their resizes and quantizations
        // now lookout's, as one op each; then the heads' float tails, one op each.
        let (chains, _, quantizations) = upsample_add::install(model)?;
        report.upsample_adds_ours = chains;
        report.resizes_ours = report.resizes_ours.saturating_sub(chains);
        report.quantizes_ours = report.quantizes_ours.saturating_sub(quantizations);
        report.heads_ours = head::install(model)?;
        report.dequantizations_in_pools = sumpool::fuse_dequantizations(model)?;
        let adds = sumpool::fuse_add_quantize(model)?;
        report.quantizes_ours = report.quantizes_ours.saturating_sub(adds);
        report.adds_in_pools = adds;
    }
    if ours && fuse {
        report.taps_packed = fuse_taps_into_packs(model)?;
    }
    if ours && !lut_fusion_off() {
        report.luts_in_convs = fuse_luts_into_convs(model)?;
    }
    Ok(report)
}

/// True when the environment keeps the lookup tables as ops of their own
/// (`LOOKOUT_INT8_LUT=separate`; for comparisons).
pub fn lut_fusion_off() -> bool {
    std::env::var("LOOKOUT_INT8_LUT").is_ok_and(|v| v == "separate")
}

/// Replaces every [`lut::FastLut`] that is the only reader of a [`qconv::QConvI8`]'s output
/// by that convolution with the table applied band by band ([`qconv::QConvI8::with_lut`]);
/// returns how many.
fn fuse_luts_into_convs(model: &mut TypedModel) -> TractResult<usize> {
    // One pair at a time: a fused convolution may read the table replaced just before it
    // (conv → table → conv → table), whose outlet the patch moves to the new node.
    let mut fused = 0;
    while let Some((id, source, op)) = next_lut_after_conv(model)? {
        let node = model.node(id);
        TypedModelPatch::replace_single_op(model, node, &[source], op)?.apply(model)?;
        fused += 1;
    }
    if fused > 0 {
        *model = std::mem::take(model).into_compact()?;
    }
    Ok(fused)
}

/// The first [`lut::FastLut`] that is the only reader of a [`qconv::QConvI8`]'s output (not
/// a model output): its node, the convolution's input and the fused op.
fn next_lut_after_conv(
    model: &TypedModel,
) -> TractResult<Option<(usize, OutletId, qconv::QConvI8)>> {
    let outputs = model.output_outlets()?;
    for node in model.nodes() {
        let Some(lut) = node.op_as::<lut::FastLut>() else {
            continue;
        };
        let &[outlet] = &*node.inputs else {
            continue;
        };
        let producer = model.node(outlet.node);
        let Some(conv) = producer.op_as::<qconv::QConvI8>() else {
            continue;
        };
        let &[source] = &*producer.inputs else {
            continue;
        };
        if model.outlet_successors(outlet).len() != 1 || outputs.contains(&outlet) {
            continue;
        }
        if let Some(op) = conv.with_lut(lut) {
            return Ok(Some((node.id, source, op)));
        }
    }
    Ok(None)
}

/// Replaces every `FastPackI8` that is the only reader of a `FastTaps` by one
/// [`taps_pack::FastTapsPack`] reading the taps' input; returns how many.
fn fuse_taps_into_packs(model: &mut TypedModel) -> TractResult<usize> {
    let mut fused = Vec::new();
    for node in model.nodes() {
        let Some(pack) = node.op_as::<fast_pack::FastPackI8>() else {
            continue;
        };
        let Some(&outlet) = node.inputs.first() else {
            continue;
        };
        let producer = model.node(outlet.node);
        let Some(taps) = producer.op_as::<taps::FastTaps>() else {
            continue;
        };
        if model.outlet_successors(outlet).len() != 1 || producer.inputs.len() != 1 {
            continue;
        }
        if let Some(op) = taps_pack::FastTapsPack::for_pair(taps, pack) {
            fused.push((node.id, producer.inputs[0], op));
        }
    }
    replace_reading(model, fused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{typed_model, DetectorConfig, ModelSource};
    use std::path::PathBuf;

    /// A shipped model, typed by tract (not optimized yet).
    pub(super) fn typed(file: &str, size: u32) -> TypedModel {
        typed_wh(file, size, size)
    }

    /// [`typed`] at a `w`×`h` input.
    pub(super) fn typed_wh(file: &str, w: u32, h: u32) -> TypedModel {
        let cfg = DetectorConfig {
            model: ModelSource::File(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file)),
            input_size: Some((w, h)),
            ..DetectorConfig::default()
        };
        typed_model(&cfg)
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .model
    }

    /// The shipped INT8 model, typed and optimized by tract, not yet touched by lookout.
    pub(super) fn optimized(file: &str, size: u32) -> TypedModel {
        typed(file, size).into_optimized().expect("optimize")
    }

    /// How many nodes of `model` run op `T`.
    fn count<T: Op>(model: &TypedModel) -> usize {
        model.nodes().iter().filter(|n| n.op_is::<T>()).count()
    }

    pub(super) fn outputs(model: TypedModel, input: &Tensor) -> Vec<Tensor> {
        let plan = model.into_runnable().expect("plan");
        plan.run(tvec!(input.clone().into()))
            .expect("run")
            .into_iter()
            .map(|t| t.into_tensor())
            .collect()
    }

    /// A camera-like input: smooth gradients plus noise, in the model's value range.
    pub(super) fn input(size: usize) -> Tensor {
        input_wh(size, size)
    }

    /// [`input`], `w` wide and `h` tall.
    pub(super) fn input_wh(w: usize, h: usize) -> Tensor {
        let mut s = 12345u32;
        let data: Vec<f32> = (0..3 * w * h)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let (c, y, x) = (i / (w * h), (i / w) % h, i % w);
                let smooth = ((x as f32 * 0.05 + c as f32).sin() + (y as f32 * 0.03).cos()) * 0.8;
                smooth + (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect();
        Tensor::from_shape(&[1, 3, h, w], &data).expect("tensor")
    }

    /// The shipped INT8 files and their input sizes.
    pub(super) const SHIPPED_INT8: [(&str, u32); 2] = [
        ("models/nanodet-g-416-int8.onnx", 416),
        ("models/nanodet-g-320-int8.onnx", 320),
    ];

    /// A 320 file made by the recipe with its in-graph im2col
    /// (`i2cs`: every 3×3 conv but the stem as pad → 9 slices → concat → 1×1): the subject of
    /// the tests of lookout's im2col ops, which such files still
    /// take. Its outputs are bit-identical to the shipped 320 file's.
    pub(super) const I2CS_INT8: (&str, u32) = ("tests/data/nanodet-g-320-int8-i2cs.onnx", 320);

    /// The shipped graphs' 3×3 stride-1 convolutions (the rest: the stride-2 ones and 1×1).
    const WINOGRAD_CONVS: usize = 24;

    /// The shipped files and the in-graph-im2col one, each with its number of im2cols.
    const ALL_INT8: [(&str, u32, usize); 3] = [
        (SHIPPED_INT8[0].0, SHIPPED_INT8[0].1, 0),
        (SHIPPED_INT8[1].0, SHIPPED_INT8[1].1, 0),
        (I2CS_INT8.0, I2CS_INT8.1, 27),
    ];

    #[test]
    fn shipped_int8_models_give_bit_identical_outputs_with_our_packing() {
        for (file, size, i2c) in ALL_INT8 {
            let x = input(size as usize);
            let theirs = optimized(file, size);
            // lookout's load: the im2cols before tract optimizes, the rest after.
            let mut ours = typed(file, size);
            let early = install_early_with(&mut ours, true, false).expect("early");
            let mut ours = ours.into_optimized().expect("optimize");
            let mut report = install_with(&mut ours, true).expect("install");
            assert_eq!(
                report.taps_ours, 0,
                "{file}: im2cols left to after optimizing"
            );
            assert_eq!(
                early.taps_ours, i2c,
                "{file}: im2cols taken before optimizing"
            );
            assert_eq!(early.convs_ours, 0, "{file}: convs left to tract");
            report.merge_early(early);
            assert!(report.packs_int8 > 0, "{file}: no int8 pack found");
            // Left to tract: only packings lookout's packer does not write (the AMX kernels'
            // activation tiles, on a CPU that has them).
            let unwritable = ours
                .nodes()
                .iter()
                .filter(|n| n.op_is::<OptMatMulPack>())
                .filter_map(|n| n.outputs[0].fact.exotic_fact.as_ref())
                .filter_map(|f| {
                    f.downcast_ref::<tract_onnx::tract_core::ops::matmul::pack::DynPackedExoticFact>()
                })
                .filter(|f| f.packers.iter().all(|p| fast_pack::layout_of(&**p).is_none()))
                .count();
            assert_eq!(
                report.packs_ours + unwritable,
                report.packs_int8,
                "{file}: some int8 packs lookout writes were left to tract"
            );
            let ours_n = count::<fast_pack::FastPackI8>(&ours);
            assert_eq!(
                ours_n,
                report.packs_ours - report.taps_packed,
                "{file}: packs in the plan"
            );
            assert_eq!(
                report.taps_packed > 0,
                i2c > 0,
                "{file}: im2cols packed row by row"
            );
            let fused_n = count::<taps_pack::FastTapsPack>(&ours);
            assert_eq!(fused_n, report.taps_packed, "{file}: fused ops in the plan");
            assert_eq!(report.taps_ours, i2c, "{file}: im2col subgraphs fused");
            assert!(report.luts_ours > 0, "{file}: no lookup table taken");
            // tract's eager im2cols: the stem's, and with no in-graph im2col every 3×3 conv's.
            assert_eq!(
                report.im2cols_ours,
                if i2c > 0 { 1 } else { 28 },
                "{file}: eager im2cols taken"
            );
            let luts_left = ours
                .nodes()
                .iter()
                .filter_map(|n| n.op_as::<ElementWiseOp>())
                .filter(|op| {
                    op.0.downcast_ref::<tract_onnx::tract_core::ops::quant::LookupTable>()
                        .is_some()
                })
                .count();
            assert_eq!(luts_left, 0, "{file}: lookup tables left to tract");
            let taps_n = count::<taps::FastTaps>(&ours);
            assert_eq!(
                taps_n,
                report.taps_ours - report.taps_packed,
                "{file}: im2col ops in the plan"
            );
            assert!(
                !ours
                    .nodes()
                    .iter()
                    .any(|n| n.op_is::<tract_onnx::tract_core::ops::array::Pad>()),
                "{file}: a pad is left"
            );
            // The pyramid's two upsample → add chains, one op each; no float resize left.
            assert_eq!(report.upsample_adds_ours, 2, "{file}: upsample-adds");
            assert_eq!(
                count::<upsample_add::FastUpsampleAdd>(&ours),
                2,
                "{file}: upsample-adds in the plan"
            );
            assert_eq!(report.resizes_ours, 0, "{file}: resizes left alone");
            assert_eq!(count::<resize::FastResize>(&ours), 0, "{file}: resizes");
            let down_n = count::<downsample::FastDownsample>(&ours);
            assert_eq!(
                down_n, report.downsamples_ours,
                "{file}: strided slices in the plan"
            );
            let counted = install_with(&mut theirs.clone(), false).expect("count");
            assert_eq!(counted.packs_ours, 0);
            assert_eq!(counted.packs_int8, report.packs_int8);
            let late = install_with(&mut theirs.clone(), true).expect("late");
            assert_eq!(
                late.taps_ours, i2c,
                "{file}: the pass after optimizing alone"
            );
            same_outputs(file, outputs(theirs, &x), outputs(ours, &x));
        }
    }

    /// The six outputs of two runs of a model, bit for bit.
    pub(super) fn same_outputs(file: &str, a: Vec<Tensor>, b: Vec<Tensor>) {
        {
            assert_eq!(a.len(), 6);
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                let a: Vec<f32> = a
                    .to_plain_array_view::<f32>()
                    .unwrap()
                    .iter()
                    .copied()
                    .collect();
                let b: Vec<f32> = b
                    .to_plain_array_view::<f32>()
                    .unwrap()
                    .iter()
                    .copied()
                    .collect();
                let same = a
                    .iter()
                    .zip(b)
                    .filter(|(x, y)| x.to_bits() == y.to_bits())
                    .count();
                assert_eq!(
                    same,
                    a.len(),
                    "{file}: output {i} differs in {} values",
                    a.len() - same
                );
            }
        }
    }

    /// Every quantized convolution becomes a `QConvI8` before tract
    /// optimizes, each writing the im2col it reads (the stem, 3×3 stride 2, its own), and the
    /// outputs stay bit-identical to tract's own lowering of the whole model.
    /// With tract's kernels as this CPU gets them, and with lookout's pairwise kernel (NEON on
    /// aarch64, its portable twin elsewhere).
    #[test]
    fn shipped_int8_models_give_bit_identical_outputs_with_our_convolutions() {
        // Whole-model runs cost about a minute each under qemu in CI: tract's choice on all
        // three files, and the pairwise kernel on the 320 file where it is lookout's choice
        // (aarch64: NEON) or cheap to run (x86: its portable twin). On 32-bit ARM lookout never
        // picks it, and its portable code under qemu-arm would take minutes.
        let [big, small, i2cs] = ALL_INT8;
        let (auto, pairwise) = (qconv::KernelPolicy::Auto, qconv::KernelPolicy::Pairwise);
        let mut runs = vec![(big, auto), (small, auto), (i2cs, auto)];
        if !cfg!(target_arch = "arm") {
            runs.push((small, pairwise));
            runs.push((small, qconv::KernelPolicy::Winograd));
        }
        for ((file, size, i2c), policy) in runs {
            let x = input(size as usize);
            let theirs = optimized(file, size);
            let mut ours = typed(file, size);
            let early = install_early_kernels(&mut ours, true, true, policy).expect("early");
            if policy == qconv::KernelPolicy::Pairwise {
                assert_eq!(
                    early.conv_kernels,
                    [(pairwise::NAME.to_string(), 34)],
                    "{file}: every weight in −127..=127"
                );
            }
            if policy == qconv::KernelPolicy::Winograd {
                assert_eq!(
                    early.conv_kernels,
                    [
                        (winograd::NAME.to_string(), WINOGRAD_CONVS),
                        (pairwise::NAME.to_string(), 34 - WINOGRAD_CONVS)
                    ],
                    "{file}: every 3×3 stride-1 convolution by Winograd"
                );
            }
            assert_eq!(
                early.convs_int8, 34,
                "{file}: quantized convs in the typed graph"
            );
            assert_eq!(
                early.convs_ours, 34,
                "{file}: all, the stem (3×3, stride 2) included"
            );
            assert_eq!(
                early.taps_convs, i2c,
                "{file}: every in-graph im2col written by its conv"
            );
            assert_eq!(early.taps_ours, 0, "{file}: no im2col left alone");
            assert!(!early.conv_kernels.is_empty());
            assert_eq!(
                count::<qconv::QConvI8>(&ours),
                34,
                "{file}: convs in the graph"
            );
            let mut ours = ours.into_optimized().expect("optimize");
            let mut report = install_with(&mut ours, true).expect("install");
            report.merge_early(early);
            assert_eq!(
                (report.luts_ours, report.luts_in_convs),
                (28, 28),
                "{file}: every lookup table applied by the conv it follows"
            );
            assert_eq!(
                count::<lut::FastLut>(&ours),
                0,
                "{file}: a table left alone"
            );
            assert_eq!(
                count::<qconv::QConvI8>(&ours),
                34,
                "{file}: convs in the plan"
            );
            assert_eq!(
                count::<taps::FastTaps>(&ours),
                0,
                "{file}: im2cols in the plan"
            );
            assert_eq!(
                count::<upsample_add::FastUpsampleAdd>(&ours),
                2,
                "{file}: upsample-adds in the plan"
            );
            let described = report.describe().expect("an int8 path");
            assert!(
                described.starts_with("own int8 ops: 34 of 34 convs (kernel"),
                "{described}"
            );
            same_outputs(file, outputs(theirs, &x), outputs(ours, &x));
        }
    }

    /// `input_size = "auto"` and `[W, H]` run the same weights at inputs shaped like the
    /// camera: lookout's int8 ops must stay bit-identical to tract's there too, on non-square
    /// maps and on grids of odd size (224×96: 7×3 cells at stride 32, upsampled to 14×6).
    #[test]
    fn int8_ops_are_bit_identical_at_camera_shaped_sizes() {
        let file = SHIPPED_INT8[0].0;
        for (w, h) in [
            (416u32, 352u32),
            (416, 320),
            (416, 256),
            (352, 416),
            (224, 96),
        ] {
            let x = input_wh(w as usize, h as usize);
            let theirs = typed_wh(file, w, h).into_optimized().expect("optimize");
            let mut ours = typed_wh(file, w, h);
            let early = install_early_kernels(&mut ours, true, true, qconv::KernelPolicy::Auto)
                .expect("early");
            let mut ours = ours.into_optimized().expect("optimize");
            let mut report = install_with(&mut ours, true).expect("install");
            report.merge_early(early);
            assert_eq!(
                count::<qconv::QConvI8>(&ours),
                34,
                "{file} at {w}x{h}: convs in the plan"
            );
            assert_eq!(
                count::<upsample_add::FastUpsampleAdd>(&ours),
                2,
                "{file} at {w}x{h}: upsample-adds in the plan"
            );
            assert_eq!(
                report.dequantizations_in_pools, 2,
                "{file} at {w}x{h}: the pyramid's pools read int8"
            );
            assert_eq!(
                report.adds_in_pools, 2,
                "{file} at {w}x{h}: the pyramid's pools add and quantize"
            );
            same_outputs(
                &format!("{file} at {w}x{h}"),
                outputs(theirs, &x),
                outputs(ours, &x),
            );
        }
    }

    #[test]
    fn a_float_model_gets_only_resizes_pads_and_concats_and_the_same_outputs() {
        // Small: FP32 under qemu-user on aarch64 costs minutes per 320² run (every `fmla` lane
        // is emulated); 96² still upsamples 3→6→12.
        let size = 96;
        let theirs = optimized("models/nanodet-g-416-fp32.onnx", size);
        let mut ours = theirs.clone();
        let report = install_with(&mut ours, true).expect("install");
        assert_eq!(
            report,
            Report {
                resizes_ours: report.resizes_ours,
                pads_ours: report.pads_ours,
                concats_ours: report.concats_ours,
                ..Report::default()
            }
        );
        assert!(report.resizes_ours > 0, "the FP32 graph upsamples");
        assert!(
            report.pads_ours >= 24,
            "the FP32 graph pads its 3×3 convolutions' inputs"
        );
        assert!(report.concats_ours > 0, "the FP32 graph concatenates");
        assert_eq!(report.describe(), None, "no int8 path to name");
        let x = input(size as usize);
        for (i, (a, b)) in outputs(theirs, &x)
            .iter()
            .zip(&outputs(ours, &x))
            .enumerate()
        {
            let a: Vec<u32> = a
                .to_plain_array_view::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            let b: Vec<u32> = b
                .to_plain_array_view::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(a, b, "output {i}");
        }
    }
}
