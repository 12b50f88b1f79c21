//! `FastUpsampleAdd`: the INT8 graphs' feature-pyramid step `Resize` (×2 bilinear) → `Add`
//! (→ `QuantizeLinear`), where the added tensor is an int8 tensor that tract dequantizes
//! first, and so is the resized one when nothing else reads its dequantization. In the
//! shipped graphs: `Resize__108` → `Add_86` (the resized floats a dequantization another
//! node reads too, so read as they are; an int8 tensor dequantized added; float out, read by
//! two nodes) and `Resize__112` → `Add_107` → its quantization (`Add_86`'s floats resized,
//! an int8 tensor dequantized added, int8 out). tract writes a float tensor at each step (the
//! 128×52×52 resize alone ≈ 1 ms of an x86 image); this op reads the int8 (or float) inputs
//! and writes the int8 (or float) output one channel plane at a time, its floats in two
//! scratch buffers of one plane (16 KB at the shipped shapes).
//!
//! Every value is the same float as tract's chain: the dequantization `(q − zp) as f32 ·
//! scale` (tract's `DequantizeLinearF32`); the resize axis after axis as tract's `Resize`
//! (the outer axis as `resample_axis`: `0.0`, then `+= w · s` per non-zero tap in order; the
//! innermost by [`super::resize`]'s prepared plan, which reproduces it); the add (IEEE
//! addition is commutative, so the graph's operand order gives the same bits either way); the
//! quantization by the shared rounding helper that
//! [`super::quant::FastQuantize`] uses.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::binary::OptBinUnicast;
use tract_onnx::tract_core::ops::math::Add;
use tract_onnx::tract_core::ops::nn::resize::Resize;
use tract_onnx::tract_core::ops::quant::DequantizeLinearF32;

use super::quant::{quantize, FastQuantize};
use super::resize::{taps2, FastResize, Innermost, Taps2};

/// How an input arrives: a float tensor, or an int8 tensor dequantized on the fly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operand {
    /// An f32 tensor, read as it is.
    Float,
    /// An int8 tensor, each value `(q − zero_point) as f32 · scale` (tract's
    /// `DequantizeLinearF32`); the scale as its bits.
    Int8 {
        /// The scale's bits.
        scale_bits: u32,
        /// The zero point.
        zero_point: i32,
    },
}

impl Operand {
    /// The int8 dequantization `op` stands for.
    fn of_dequantize(op: &DequantizeLinearF32) -> Self {
        Operand::Int8 {
            scale_bits: op.scale.to_bits(),
            zero_point: op.zero_point,
        }
    }
}

/// How the output leaves: as floats, or quantized to an int8 type as `FastQuantize` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Output {
    /// The f32 sum.
    Float,
    /// `round_half_even(sum · multiplier) + zero_point`, clamped, of type `dt`.
    Int8 {
        /// tract's multiplier (the reciprocal of the ONNX scale) as its bits.
        multiplier_bits: u32,
        /// The zero point.
        zero_point: i32,
        /// The output's 1-byte type.
        dt: DatumType,
    },
}

/// The op that replaces one `Resize` → `Add` (→ `QuantizeLinear`) chain and the
/// dequantizations it absorbs. Inputs: the tensor resized (`[.., h_in, w_in]`) and the tensor
/// added (`[.., h_out, w_out]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastUpsampleAdd {
    /// The resized input.
    x: Operand,
    /// The added input.
    y: Operand,
    out: Output,
    /// tract's resize, whose plans for the two innermost axes this op follows.
    resize: Resize,
    /// The scales of the two innermost axes (bits), as tract's resize derives them.
    scale_bits: [u32; 2],
    /// The input's shape; the output's is the same with the two innermost axes `out_hw`.
    shape_in: TVec<usize>,
    out_hw: [usize; 2],
}

/// The resize `node`'s input and output shapes and per-axis scales, when it is one this op
/// fuses: a concrete f32 input, constant scales or sizes, the innermost two axes resampled
/// and no other.
fn resize_shapes(
    model: &TypedModel,
    node: &TypedNode,
    resize: &Resize,
) -> Option<(TVec<usize>, TVec<usize>, TVec<f32>)> {
    let x_fact = model.outlet_fact(*node.inputs.first()?).ok()?;
    let shape_in: TVec<usize> = x_fact.shape.as_concrete()?.into();
    let rank = shape_in.len();
    if x_fact.datum_type != f32::datum_type() || rank < 2 {
        return None;
    }
    let konst = |ix: Option<usize>| -> Option<Option<Arc<Tensor>>> {
        match ix {
            None => Some(None),
            Some(i) => Some(Some(
                model
                    .outlet_fact(*node.inputs.get(i)?)
                    .ok()?
                    .konst
                    .clone()?,
            )),
        }
    };
    let scales = konst(resize.optional_scales_input)?;
    let sizes = konst(resize.optional_sizes_input)?;
    let shape_out = resize
        .compute_output_shape(&shape_in, scales.as_deref(), sizes.as_deref())
        .ok()?;
    let out_fact = &node.outputs.first()?.fact;
    if out_fact.shape.as_concrete()? != &*shape_out || out_fact.datum_type != f32::datum_type() {
        return None;
    }
    let scales: TVec<f32> = match scales.filter(|s| s.len() == rank) {
        Some(s) => s
            .cast_to::<f32>()
            .ok()?
            .try_as_plain_ram()
            .ok()?
            .as_slice::<f32>()
            .ok()?
            .into(),
        None => shape_out
            .iter()
            .zip(&shape_in)
            .map(|(o, i)| *o as f32 / *i as f32)
            .collect(),
    };
    for axis in 0..rank {
        let kept = shape_in[axis] == shape_out[axis] && scales[axis] == 1.0;
        if kept != (axis + 2 < rank) {
            return None;
        }
    }
    Some((shape_in, shape_out, scales))
}

impl FastUpsampleAdd {
    /// The op for `resize` (linear or nearest, both innermost axes resampled with the given
    /// scales, every other axis kept) from `shape_in` to its two innermost lengths `out_hw`,
    /// with `inputs` = (the resized operand, the added operand); `None` for a shape or plan it
    /// does not compute.
    pub fn new(
        resize: &Resize,
        scales: [f32; 2],
        shape_in: &[usize],
        out_hw: [usize; 2],
        inputs: (Operand, Operand),
        out: Output,
    ) -> Option<Self> {
        let (x, y) = inputs;
        let op = FastUpsampleAdd {
            x,
            y,
            out,
            resize: resize.clone(),
            scale_bits: scales.map(f32::to_bits),
            shape_in: shape_in.into(),
            out_hw,
        };
        let rank = shape_in.len();
        (rank >= 2 && shape_in.iter().all(|&d| d > 0) && op.plans().is_some()).then_some(op)
    }

    /// The outer axis's taps per output row and the innermost axis's prepared plan; `None`
    /// when either plan is one this op does not compute (windows over 2, out-of-range taps).
    fn plans(&self) -> Option<(Vec<Taps2>, Innermost)> {
        let rank = self.shape_in.len();
        let (h_in, w_in) = (self.shape_in[rank - 2], self.shape_in[rank - 1]);
        let [h_out, w_out] = self.out_hw;
        let [sh, sw] = self.scale_bits.map(f32::from_bits);
        let h = taps2(&self.resize.plan_axis(sh, h_in, h_out), h_in)?;
        let w = Innermost::new(&self.resize.plan_axis(sw, w_in, w_out), w_in)?;
        (h.len() == h_out && w.len_out() == w_out && h_out > 0 && w_out > 0).then_some((h, w))
    }

    /// The output's shape.
    fn shape_out(&self) -> TVec<usize> {
        let rank = self.shape_in.len();
        let mut shape = self.shape_in.clone();
        shape[rank - 2] = self.out_hw[0];
        shape[rank - 1] = self.out_hw[1];
        shape
    }

    /// What the op writes, for the load report: whether it absorbed the dequantization of
    /// the resized input and the quantization of the sum.
    pub fn absorbs(&self) -> (bool, bool) {
        (
            matches!(self.x, Operand::Int8 { .. }),
            matches!(self.out, Output::Int8 { .. }),
        )
    }

    /// The op for the chain whose `Resize` (now a [`FastResize`]) is node `resize_id` of an
    /// optimized model: `(op, resized source, added source, last node replaced)`, or `None`
    /// when the chain is not exactly one this op reproduces.
    pub fn for_chain(
        model: &TypedModel,
        resize_id: usize,
    ) -> Option<(Self, OutletId, OutletId, usize)> {
        let node = model.node(resize_id);
        let resize = node.op_as::<FastResize>()?.resize();
        let only_reader = |outlet: OutletId| -> Option<InletId> {
            let succ = model.outlet_successors(outlet);
            let is_output = model.output_outlets().ok()?.contains(&outlet);
            (succ.len() == 1 && !is_output).then(|| succ[0])
        };
        let x_outlet = *node.inputs.first()?;
        let (shape_in, shape_out, scales) = resize_shapes(model, node, resize)?;
        let rank = shape_in.len();
        // The add: the resize's only reader, of two f32 tensors of the output's shape.
        let add_inlet = only_reader(OutletId::new(resize_id, 0))?;
        let add = model.node(add_inlet.node);
        if !add
            .op_as::<OptBinUnicast>()
            .is_some_and(|op| op.binop.is::<Add>())
            || add.inputs.len() != 2
        {
            return None;
        }
        let y_outlet = add.inputs[1 - add_inlet.slot];
        let y_fact = model.outlet_fact(y_outlet).ok()?;
        let add_fact = &add.outputs.first()?.fact;
        for fact in [y_fact, add_fact] {
            if fact.datum_type != f32::datum_type() || fact.shape.as_concrete()? != &*shape_out {
                return None;
            }
        }
        // The added tensor: an int8 tensor's dequantization that only the add reads (what
        // makes this an int8 graph's chain).
        let dequantized = |outlet: OutletId| -> Option<(Operand, OutletId)> {
            let producer = model.node(outlet.node);
            let op = producer.op_as::<DequantizeLinearF32>()?;
            let source = *producer.inputs.first()?;
            let fact = model.outlet_fact(source).ok()?;
            (fact.datum_type == DatumType::I8 && only_reader(outlet).is_some())
                .then(|| (Operand::of_dequantize(op), source))
        };
        let (y, y_source) = dequantized(y_outlet)?;
        // The resized tensor: likewise when only the resize reads its dequantization, else
        // the floats as they are.
        let (x, x_source) = dequantized(x_outlet).unwrap_or((Operand::Float, x_outlet));
        // The sum: quantized by its only reader, or read as floats.
        let sum = OutletId::new(add.id, 0);
        let quantized = only_reader(sum).and_then(|inlet| {
            let q = model.node(inlet.node).op_as::<FastQuantize>()?;
            let (multiplier, zero_point, dt) = q.params();
            Some((
                Output::Int8 {
                    multiplier_bits: multiplier.to_bits(),
                    zero_point,
                    dt,
                },
                inlet.node,
            ))
        });
        let (out, last) = quantized.unwrap_or((Output::Float, add.id));
        let hw = [shape_out[rank - 2], shape_out[rank - 1]];
        let op = FastUpsampleAdd::new(
            resize,
            [scales[rank - 2], scales[rank - 1]],
            &shape_in,
            hw,
            (x, y),
            out,
        )?;
        Some((op, x_source, y_source, last))
    }

    /// Computes the output planes `first_plane ..` that fill `dst` (whole planes of `h_out ·
    /// w_out`), writing each through `store(sums, plane)`; false when an input is too short.
    /// A plane's floats stay in two scratch buffers of at most a few tens of KB. Inlined
    /// whole (down to the row loops), so that [`super::wide::run`] compiles it with AVX2.
    #[inline(always)]
    fn planes<T>(
        &self,
        inputs: (&Source, &Source),
        plans: &(Vec<Taps2>, Innermost),
        first_plane: usize,
        dst: &mut [T],
        store: impl Fn(&[f32], &mut [T]),
    ) -> bool {
        let rank = self.shape_in.len();
        let (h_in, w_in) = (self.shape_in[rank - 2], self.shape_in[rank - 1]);
        let [h_out, w_out] = self.out_hw;
        let (h_taps, w_plan) = plans;
        let (x, y) = inputs;
        let mut columns = vec![0f32; h_out * w_in];
        let mut sums = vec![0f32; h_out * w_out];
        for (p, out) in dst.chunks_exact_mut(h_out * w_out).enumerate() {
            let plane = first_plane + p;
            // The outer axis, as `resample_axis`: 0.0, then `+= w · s` per tap in order.
            for (column, taps) in columns.chunks_exact_mut(w_in).zip(h_taps) {
                column.fill(0.0);
                for k in 0..taps.n {
                    let at = (plane * h_in + taps.index[k]) * w_in;
                    if !x.accumulate(at, taps.weight[k], column) {
                        return false;
                    }
                }
            }
            // The innermost axis, every row of the plane.
            w_plan.rows(&columns, &mut sums);
            // The add.
            if !y.add_to(plane * h_out * w_out, &mut sums) {
                return false;
            }
            store(&sums, out);
        }
        true
    }
}

/// An input's values, read as floats the way the chain's dequantization gives them.
enum Source<'a> {
    Float(&'a [f32]),
    Int8(&'a [i8], f32, i32),
}

impl<'a> Source<'a> {
    fn new(t: &'a Tensor, how: Operand) -> TractResult<Self> {
        let ram = t.try_as_plain_ram()?;
        Ok(match how {
            Operand::Float => Source::Float(ram.as_slice::<f32>()?),
            Operand::Int8 {
                scale_bits,
                zero_point,
            } => {
                ensure!(
                    t.datum_type() == DatumType::I8,
                    "FastUpsampleAdd: int8 input expected, got {:?}",
                    t.datum_type()
                );
                Source::Int8(
                    ram.as_slice::<i8>()?,
                    f32::from_bits(scale_bits),
                    zero_point,
                )
            }
        })
    }

    /// `acc[i] += w · value(at + i)` (the value dequantized first); false when out of range.
    #[inline(always)]
    fn accumulate(&self, at: usize, w: f32, acc: &mut [f32]) -> bool {
        let n = acc.len();
        match self {
            Source::Float(v) => match v.get(at..at + n) {
                Some(src) => acc.iter_mut().zip(src).for_each(|(a, &s)| *a += w * s),
                None => return false,
            },
            Source::Int8(v, scale, zp) => match v.get(at..at + n) {
                Some(src) => acc
                    .iter_mut()
                    .zip(src)
                    .for_each(|(a, &q)| *a += w * dequantize(q, *scale, *zp)),
                None => return false,
            },
        }
        true
    }

    /// `row[i] += value(at + i)` (the value dequantized first); false when out of range.
    #[inline(always)]
    fn add_to(&self, at: usize, row: &mut [f32]) -> bool {
        let n = row.len();
        match self {
            Source::Float(v) => match v.get(at..at + n) {
                Some(src) => row.iter_mut().zip(src).for_each(|(r, &s)| *r += s),
                None => return false,
            },
            Source::Int8(v, scale, zp) => match v.get(at..at + n) {
                Some(src) => row
                    .iter_mut()
                    .zip(src)
                    .for_each(|(r, &q)| *r += dequantize(q, *scale, *zp)),
                None => return false,
            },
        }
        true
    }
}

/// tract's `DequantizeLinearF32` of one value: `(q − zero_point) as f32 · scale`.
#[inline(always)]
fn dequantize(q: i8, scale: f32, zero_point: i32) -> f32 {
    (q as i32 - zero_point) as f32 * scale
}

impl Op for FastUpsampleAdd {
    fn name(&self) -> StaticName {
        "FastUpsampleAdd".into()
    }

    op_as_typed_op!();
}

impl EvalOp for FastUpsampleAdd {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [x, y] = &*inputs else {
            bail!("FastUpsampleAdd takes two inputs, got {}", inputs.len());
        };
        ensure!(
            x.shape() == &*self.shape_in,
            "FastUpsampleAdd: input shape {:?}, planned for {:?}",
            x.shape(),
            self.shape_in
        );
        let shape = self.shape_out();
        ensure!(
            y.shape() == &*shape,
            "FastUpsampleAdd: added shape {:?}, expected {:?}",
            y.shape(),
            shape
        );
        let plans = self
            .plans()
            .context("FastUpsampleAdd: the resize plan is no longer one it computes")?;
        let sources = (&Source::new(x, self.x)?, &Source::new(y, self.y)?);
        let plane = self.out_hw[0] * self.out_hw[1];
        let (out, ok) = match self.out {
            Output::Float => super::tensors::tensor_filled(
                ctx,
                &shape,
                f32::datum_type(),
                |out: &mut [f32]| {
                    super::par::for_chunks(out, plane, |first, dst| {
                        super::wide::run(
                            #[inline(always)]
                            || {
                                self.planes(sources, &plans, first / plane, dst, |s, d| {
                                    d.copy_from_slice(s)
                                })
                            },
                        )
                    })
                },
            )?,
            Output::Int8 {
                multiplier_bits,
                zero_point,
                dt,
            } => {
                let multiplier = f32::from_bits(multiplier_bits);
                super::tensors::tensor_filled(ctx, &shape, dt, |out: &mut [i8]| {
                    super::par::for_chunks(out, plane, |first, dst| {
                        super::wide::run(
                            #[inline(always)]
                            || {
                                self.planes(sources, &plans, first / plane, dst, |s, d| {
                                    quantize(s, d, multiplier, zero_point)
                                })
                            },
                        )
                    })
                })?
            }
        };
        ensure!(ok, "FastUpsampleAdd: rows out of range");
        Ok(tvec!(out))
    }

    op_out_of_plan!();
}

impl TypedOp for FastUpsampleAdd {
    fn output_facts(&self, _inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let shape = self.shape_out();
        Ok(tvec!(match self.out {
            Output::Float => f32::fact(&*shape),
            Output::Int8 { dt, .. } => dt.fact(&*shape),
        }))
    }

    as_op!();
}

/// Replaces, in an optimized model whose resizes are [`FastResize`]s, every chain
/// [`FastUpsampleAdd::for_chain`] takes by one [`FastUpsampleAdd`]; returns `(chains, resized
/// inputs' dequantizations absorbed, quantizations absorbed)`.
pub fn install(model: &mut TypedModel) -> TractResult<(usize, usize, usize)> {
    let mut done = (0, 0, 0);
    // One chain at a time, the graph searched again after each (a chain's output can be the
    // next one's resized input).
    loop {
        let found = model
            .nodes()
            .iter()
            .find_map(|n| FastUpsampleAdd::for_chain(model, n.id));
        let Some((op, x, y, last)) = found else {
            break;
        };
        let (deq, quant) = op.absorbs();
        let name = model.node(last).name.clone();
        let mut patch = TypedModelPatch::default();
        let x = patch.tap_model(model, x)?;
        let y = patch.tap_model(model, y)?;
        let wired = patch.wire_node(format!("{name}.upsample_add"), op, &[x, y])?;
        patch.shunt_outside(model, OutletId::new(last, 0), wired[0])?;
        patch
            .apply(model)
            .with_context(|| format!("fusing the upsample-add ending at {name}"))?;
        *model = std::mem::take(model).into_compact()?;
        done.0 += 1;
        done.1 += deq as usize;
        done.2 += quant as usize;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};
    use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
    use tract_onnx::tract_core::ops::nn::resize::{CoordTransformer, Interpolator, Nearest};
    use tract_onnx::tract_core::ops::quant::QuantizeLinearI8;

    fn random_i8(n: usize, seed: u32) -> Vec<i8> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 24) as u8 as i8
            })
            .collect()
    }

    /// tract's chain, op by op: dequantize, `Resize`, add (in the given order), quantize.
    #[allow(clippy::too_many_arguments)]
    fn tract_chain(
        resize: &Resize,
        x: &Tensor,
        y: &Tensor,
        dq: (DequantizeLinearF32, DequantizeLinearF32),
        x_dequantized: bool,
        resized_first: bool,
        quant: Option<&ElementWiseOp>,
        scales: &Tensor,
    ) -> Tensor {
        let ctx = EvalContext::out_of_plan();
        let xf = if x_dequantized {
            dq.0.eval(&ctx, tvec!(x.clone().into_tvalue()))
                .unwrap()
                .remove(0)
        } else {
            x.clone().into_tvalue()
        };
        let yf =
            dq.1.eval(&ctx, tvec!(y.clone().into_tvalue()))
                .unwrap()
                .remove(0);
        let r = resize
            .eval(&ctx, tvec!(xf, scales.clone().into_tvalue()))
            .unwrap()
            .remove(0);
        let add = tract_onnx::tract_core::ops::math::add();
        let (a, b) = if resized_first { (r, yf) } else { (yf, r) };
        let sum = add.eval(&ctx, tvec!(a, b)).unwrap().remove(0);
        match quant {
            Some(q) => q.eval(&ctx, tvec!(sum)).unwrap().remove(0).into_tensor(),
            None => sum.into_tensor(),
        }
    }

    /// The shipped graphs' resize: linear, half-pixel, scales from input 1.
    fn linear_half_pixel() -> Resize {
        Resize {
            coord_transformer: CoordTransformer::HalfPixel,
            interpolator: Interpolator::Linear,
            nearest: Nearest::Floor,
            optional_scales_input: Some(1),
            optional_sizes_input: None,
        }
    }

    /// The planes as [`super::super::wide::run`] compiles them (with AVX2 on an x86_64 CPU
    /// that has it) against their baseline twin: the same bits, int8 and float resized
    /// inputs, float and int8 outputs, the shipped 26×26 → 52×52 and an odd size.
    #[test]
    fn wide_and_portable_planes_are_the_same_bits() {
        use super::super::wide;
        let resize = linear_half_pixel();
        for shape in [[1usize, 5, 26, 26], [1, 3, 7, 9]] {
            let hw = [shape[2] * 2, shape[3] * 2];
            let (nx, ny) = (shape.iter().product::<usize>(), shape[1] * hw[0] * hw[1]);
            let xq = Tensor::from_shape(&shape, &random_i8(nx, 5)).unwrap();
            let xf: Vec<f32> = random_i8(nx, 6).iter().map(|&q| q as f32 * 0.013).collect();
            let xf = Tensor::from_shape(&shape, &xf).unwrap();
            let yq = Tensor::from_shape(&[1, shape[1], hw[0], hw[1]], &random_i8(ny, 8)).unwrap();
            let y = Operand::Int8 {
                scale_bits: 0.0051f32.to_bits(),
                zero_point: 2,
            };
            let x_int8 = Operand::Int8 {
                scale_bits: 0.0079f32.to_bits(),
                zero_point: -1,
            };
            for (x, how) in [(&xq, x_int8), (&xf, Operand::Float)] {
                let op =
                    FastUpsampleAdd::new(&resize, [2.0, 2.0], &shape, hw, (how, y), Output::Float)
                        .expect("a plan it computes");
                let plans = op.plans().expect("plans");
                let sources = (&Source::new(x, how).unwrap(), &Source::new(&yq, y).unwrap());
                let mut a = vec![0f32; ny];
                let mut b = a.clone();
                let copy = |s: &[f32], d: &mut [f32]| d.copy_from_slice(s);
                assert!(wide::run(
                    #[inline(always)]
                    || op.planes(sources, &plans, 0, &mut a, copy)
                ));
                assert!(wide::portable(
                    || op.planes(sources, &plans, 0, &mut b, copy)
                ));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{shape:?} {how:?}, float out");
                let quant = |s: &[f32], d: &mut [i8]| quantize(s, d, 1.0 / 0.0054, 1);
                let (mut qa, mut qb) = (vec![0i8; ny], vec![0i8; ny]);
                assert!(wide::run(
                    #[inline(always)]
                    || op.planes(sources, &plans, 0, &mut qa, quant)
                ));
                assert!(wide::portable(
                    || op.planes(sources, &plans, 0, &mut qb, quant)
                ));
                assert_eq!(qa, qb, "{shape:?} {how:?}, int8 out");
            }
        }
    }

    /// Byte-for-byte against tract's own ops, on random int8 inputs: odd and even sizes, one
    /// and several channels, the shipped shapes, scales and zero points (some clamping the
    /// output), int8 and float resized inputs, both operand orders, float and int8 outputs,
    /// on one thread and two.
    #[test]
    fn equals_tract_chain_byte_for_byte() {
        let resize = linear_half_pixel();
        let scales = Tensor::from_shape(&[4], &[1f32, 1.0, 2.0, 2.0]).unwrap();
        let mut checked = 0;
        for threads in [1usize, 2] {
            let executor = if threads == 1 {
                Executor::SingleThread
            } else {
                Executor::multithread(threads)
            };
            multithread_tract_scope(executor, || {
                for (i, (shape, (dx, dy), q)) in [
                    (
                        [1usize, 1, 1, 1],
                        ((0.05f32, 0), (0.03f32, 0)),
                        Some((1.0f32 / 0.06, 0)),
                    ),
                    (
                        [1, 3, 5, 7],
                        ((0.0045, 0), (0.0034, 0)),
                        Some((1.0 / 0.0057, 0)),
                    ),
                    (
                        [1, 2, 4, 9],
                        ((0.02, -5), (0.011, 7)),
                        Some((1.0 / 0.004, 3)),
                    ),
                    (
                        [1, 4, 7, 4],
                        ((0.3, 100), (0.2, -90)),
                        Some((1.0 / 0.01, -20)),
                    ),
                    ([2, 2, 3, 3], ((0.01, 3), (0.01, -3)), None),
                    ([1, 128, 10, 10], ((0.0034, 0), (0.0045, 0)), None),
                    (
                        [1, 128, 26, 26],
                        ((0.0079, 0), (0.0051, 0)),
                        Some((1.0 / 0.0054, 0)),
                    ),
                ]
                .into_iter()
                .enumerate()
                {
                    let out_shape = [shape[0], shape[1], shape[2] * 2, shape[3] * 2];
                    let nx: usize = shape.iter().product();
                    let ny: usize = out_shape.iter().product();
                    let xq = Tensor::from_shape(&shape, &random_i8(nx, 7 + i as u32)).unwrap();
                    let yq = Tensor::from_shape(&out_shape, &random_i8(ny, 99 + i as u32)).unwrap();
                    let dq = (
                        DequantizeLinearF32 {
                            scale: dx.0,
                            zero_point: dx.1,
                        },
                        DequantizeLinearF32 {
                            scale: dy.0,
                            zero_point: dy.1,
                        },
                    );
                    let quant = q.map(|(scale, zero_point)| {
                        ElementWiseOp(Box::new(QuantizeLinearI8 { scale, zero_point }), None)
                    });
                    // A float resized input: the int8 one dequantized by tract.
                    let ctx = EvalContext::out_of_plan();
                    let xf = dq.0.eval(&ctx, tvec!(xq.clone().into_tvalue())).unwrap()[0]
                        .clone()
                        .into_tensor();
                    for (x_int8, resized_first) in
                        [(true, true), (true, false), (false, true), (false, false)]
                    {
                        let x = if x_int8 { &xq } else { &xf };
                        let want = tract_chain(
                            &resize,
                            x,
                            &yq,
                            dq.clone(),
                            x_int8,
                            resized_first,
                            quant.as_ref(),
                            &scales,
                        );
                        let out = match q {
                            Some((scale, zero_point)) => Output::Int8 {
                                multiplier_bits: scale.to_bits(),
                                zero_point: i32::from(zero_point),
                                dt: DatumType::I8,
                            },
                            None => Output::Float,
                        };
                        let op = FastUpsampleAdd::new(
                            &resize,
                            [2.0, 2.0],
                            &shape,
                            [out_shape[2], out_shape[3]],
                            (
                                if x_int8 {
                                    Operand::of_dequantize(&dq.0)
                                } else {
                                    Operand::Float
                                },
                                Operand::of_dequantize(&dq.1),
                            ),
                            out,
                        )
                        .expect("a plan it computes");
                        let got = op
                            .eval(
                                &ctx,
                                tvec!(x.clone().into_tvalue(), yq.clone().into_tvalue()),
                            )
                            .unwrap()
                            .remove(0);
                        assert_eq!(want.shape(), got.shape());
                        assert_eq!(want.datum_type(), got.datum_type());
                        let what = format!("{shape:?} {x_int8} {resized_first} {threads}t");
                        if q.is_some() {
                            assert_eq!(
                                want.to_plain_array_view::<i8>().unwrap(),
                                got.to_plain_array_view::<i8>().unwrap(),
                                "{what}"
                            );
                        } else {
                            let bits = |t: &Tensor| -> Vec<u32> {
                                let v = t.to_plain_array_view::<f32>().unwrap();
                                v.iter().map(|f| f.to_bits()).collect()
                            };
                            assert_eq!(bits(&want), bits(&got), "{what}");
                        }
                        checked += 1;
                    }
                }
            });
        }
        assert_eq!(checked, 56);
    }

    /// A tiny typed model `DQ(a) → Resize → Add(DQ(b)) → Quantize`, optimized by tract: the
    /// chain becomes one op with the same bytes out; with `b`'s dequantization also a model
    /// output (read twice), or a cubic resize, nothing is replaced.
    #[test]
    fn install_takes_exactly_the_chain() {
        let (shape, out_shape) = ([1usize, 2, 5, 6], [1usize, 2, 10, 12]);
        for (case, interpolator) in [
            ("chain", Interpolator::Linear),
            ("dq read twice", Interpolator::Linear),
            ("cubic", Interpolator::Cubic),
        ] {
            let mut m = TypedModel::default();
            let a = m.add_source("a", i8::fact(shape)).unwrap();
            let b = m.add_source("b", i8::fact(out_shape)).unwrap();
            let dq = |scale, zero_point| DequantizeLinearF32 { scale, zero_point };
            let da = m.wire_node("da", dq(0.02, 3), &[a]).unwrap()[0];
            let db = m.wire_node("db", dq(0.03, -2), &[b]).unwrap()[0];
            let scales = m
                .add_const("scales", tensor1(&[1f32, 1.0, 2.0, 2.0]))
                .unwrap();
            let resize = Resize {
                coord_transformer: CoordTransformer::HalfPixel,
                interpolator,
                nearest: Nearest::Floor,
                optional_scales_input: Some(1),
                optional_sizes_input: None,
            };
            let r = m.wire_node("r", resize, &[da, scales]).unwrap()[0];
            let add = tract_onnx::tract_core::ops::math::add();
            let sum = m.wire_node("add", add, &[r, db]).unwrap()[0];
            let q = QuantizeLinearI8 {
                scale: 1.0 / 0.04,
                zero_point: 1,
            };
            let q = m
                .wire_node("q", ElementWiseOp(Box::new(q), None), &[sum])
                .unwrap()[0];
            let outputs = if case == "dq read twice" {
                vec![q, db]
            } else {
                vec![q]
            };
            m.select_output_outlets(&outputs).unwrap();
            let theirs = m.into_optimized().unwrap();
            let mut ours = theirs.clone();
            let report = super::super::install_with(&mut ours, true).unwrap();
            let fused = ours
                .nodes()
                .iter()
                .filter(|n| n.op_is::<FastUpsampleAdd>())
                .count();
            assert_eq!(fused, (case == "chain") as usize, "{case}");
            assert_eq!(report.upsample_adds_ours, fused, "{case}");
            let xa = Tensor::from_shape(&shape, &random_i8(60, 5)).unwrap();
            let xb = Tensor::from_shape(&out_shape, &random_i8(240, 6)).unwrap();
            let run = |m: TypedModel| {
                let inputs = tvec!(xa.clone().into(), xb.clone().into());
                let out = m.into_runnable().unwrap().run(inputs).unwrap();
                out[0].to_plain_array_view::<i8>().unwrap().to_owned()
            };
            assert_eq!(run(theirs), run(ours), "{case}");
        }
    }

    /// A plan it does not compute (cubic: four taps) is refused, not run.
    #[test]
    fn refuses_cubic_plans() {
        let resize = Resize {
            coord_transformer: CoordTransformer::HalfPixel,
            interpolator: Interpolator::Cubic,
            nearest: Nearest::Floor,
            optional_scales_input: Some(1),
            optional_sizes_input: None,
        };
        let int8 = Operand::Int8 {
            scale_bits: 0.1f32.to_bits(),
            zero_point: 0,
        };
        assert!(FastUpsampleAdd::new(
            &resize,
            [2.0, 2.0],
            &[1, 2, 4, 4],
            [8, 8],
            (int8, int8),
            Output::Float
        )
        .is_none());
    }
}
