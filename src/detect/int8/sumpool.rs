//! `FastSumPool`: stands in for tract's `OptSumPool` on f32 NCHW tensors with `Valid` padding
//! (the INT8 graphs' 2×2 stride-2 average pools of the feature pyramid, done in float).
//! tract visits every window through a generic patch walker; this reads each window's rows
//! directly. Each output is the same float sum, in the same order (the window's values row
//! by row, through `Iterator::sum`, as tract's), times the same reciprocal of the count.
//!
//! In the INT8 graphs each pool reads a dequantization of an int8 tensor that nothing else
//! reads: [`fuse_dequantizations`] makes the pool read the int8 tensor and dequantize as it
//! goes, through a 256-entry table computed by tract's own dequantization of every int8
//! value. The float tensor in between (1 MB at the 416×416 input) is never written; the
//! outputs are the same bits. And where the pool's sum goes only into an addition whose sum
//! goes only into a quantization (the pyramid's `Add` → `QuantizeLinear`), the pool does
//! both in the same pass ([`fuse_add_quantize`]): each pooled float plus the other
//! operand's float (IEEE addition is commutative: the graph's order gives the same bits),
//! quantized by the rounding helper [`super::quant::FastQuantize`] uses.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::cnn::{OptSumPool, PaddingSpec};
use tract_onnx::tract_core::ops::nn::DataFormat;

use tract_onnx::tract_core::ops::quant::DequantizeLinearF32;

use tract_onnx::tract_core::ops::binary::OptBinUnicast;
use tract_onnx::tract_core::ops::math::Add;

use super::fallback::eval_or_tract_op;
use super::quant::{quantize, FastQuantize};

/// The op that replaces one `OptSumPool`.
#[derive(Debug, Clone, PartialEq)]
pub struct FastSumPool {
    /// The op it replaces: its output facts are ours, and it runs for any input this op does
    /// not handle.
    inner: OptSumPool,
    kernel: [usize; 2],
    stride: [usize; 2],
    /// When the input is int8: the float value of each byte (the dequantization it absorbed).
    table: Option<Arc<[f32; 256]>>,
    /// The addition and quantization it absorbed, if any: a second input then.
    then: Option<AddQuantize>,
}

/// An addition of a second f32 input of the output's shape, then a quantization as
/// `FastQuantize`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct AddQuantize {
    /// tract's multiplier (the reciprocal of the ONNX scale), as its bits.
    multiplier_bits: u32,
    zero_point: i32,
    /// The output's type.
    dt: DatumType,
}

// Equal ops compute the same: the tables hold tract's dequantized values (never NaN).
impl Eq for FastSumPool {}

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
            table: None,
            then: None,
        })
    }

    /// This pool with `quantize` of its sum with another f32 tensor absorbed; `None` when it
    /// absorbed one already.
    fn with_add_quantize(&self, quantize: &FastQuantize) -> Option<FastSumPool> {
        if self.then.is_some() {
            return None;
        }
        let (multiplier, zero_point, dt) = quantize.params();
        Some(FastSumPool {
            then: Some(AddQuantize {
                multiplier_bits: multiplier.to_bits(),
                zero_point,
                dt,
            }),
            ..self.clone()
        })
    }

    /// This pool reading the int8 input of `deq` instead of its float output; `None` when
    /// the pool already reads int8 or the table cannot be made.
    pub fn with_dequantization(&self, deq: &DequantizeLinearF32) -> Option<FastSumPool> {
        if self.table.is_some() || self.then.is_some() {
            return None;
        }
        let table = super::quant::dequantization_table(deq)?;
        let table: [f32; 256] = table.as_slice().try_into().ok()?;
        Some(FastSumPool {
            table: Some(Arc::new(table)),
            ..self.clone()
        })
    }

    /// The pooled floats of the one input.
    fn pool(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TValue> {
        let Some(table) = &self.table else {
            let mut out = eval_or_tract_op(&self.inner, ctx, inputs, |inputs| match inputs {
                [input] => self.run(ctx, input),
                _ => Ok(None),
            })?;
            return out
                .pop()
                .context("FastSumPool: tract's pool gave no output");
        };
        let [input] = &*inputs else {
            bail!("FastSumPool takes one input, got {}", inputs.len());
        };
        if let Some(out) = self.run(ctx, input)? {
            return Ok(out);
        }
        // A shape this op does not walk: tract's pool on the dequantized values.
        let values = input.try_as_plain_ram()?;
        let floats: Vec<f32> = values
            .as_slice::<i8>()?
            .iter()
            .map(|&v| table[v as u8 as usize])
            .collect();
        let floats = Tensor::from_shape(input.shape(), &floats)?;
        let mut out = self.inner.eval(ctx, tvec!(floats.into_tvalue()))?;
        out.pop()
            .context("FastSumPool: tract's pool gave no output")
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
        let data = input.try_as_plain_ram()?;
        let src = match &self.table {
            None => Values::Float(data.as_slice::<f32>()?),
            Some(table) => Values::Int8(data.as_slice::<i8>()?, table),
        };
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
                    let planes = first / unit * h * w..(first + dst.len()) / unit * h * w;
                    let geometry = ([h, w], [oh, ow], [kh, kw], [sy, sx]);
                    match src {
                        Values::Float(v) => v.get(planes).is_some_and(|planes| {
                            super::wide::run(
                                #[inline(always)]
                                || sum_planes(planes, |x| x, dst, geometry, div),
                            );
                            true
                        }),
                        Values::Int8(v, table) => v.get(planes).is_some_and(|planes| {
                            super::wide::run(
                                #[inline(always)]
                                || {
                                    sum_planes(
                                        planes,
                                        |x| table[x as u8 as usize],
                                        dst,
                                        geometry,
                                        div,
                                    )
                                },
                            );
                            true
                        }),
                    }
                })
            })?;
        ensure!(ok, "FastSumPool: planes out of range");
        Ok(Some(out))
    }
}

/// Makes every [`FastSumPool`] that is the only reader of an int8 tensor's dequantization
/// (not a model output) read the int8 tensor itself ([`FastSumPool::with_dequantization`]);
/// returns how many. The dequantizations fall out of the graph.
pub fn fuse_dequantizations(model: &mut TypedModel) -> TractResult<usize> {
    let outputs = model.output_outlets()?.to_vec();
    let mut fused = Vec::new();
    for node in model.nodes() {
        let Some(pool) = node.op_as::<FastSumPool>() else {
            continue;
        };
        let &[outlet] = &*node.inputs else {
            continue;
        };
        let producer = model.node(outlet.node);
        let Some(deq) = producer.op_as::<DequantizeLinearF32>() else {
            continue;
        };
        let &[source] = &*producer.inputs else {
            continue;
        };
        if model.outlet_successors(outlet).len() != 1
            || outputs.contains(&outlet)
            || model.outlet_fact(source)?.datum_type.unquantized() != i8::datum_type()
        {
            continue;
        }
        if let Some(op) = pool.with_dequantization(deq) {
            fused.push((node.id, source, op));
        }
    }
    super::rewrite::replace_reading(model, fused)
}

impl AddQuantize {
    /// `pooled + addend`, quantized, into a tensor of the output type.
    fn apply(&self, ctx: &EvalContext, pooled: &Tensor, addend: &Tensor) -> TractResult<TValue> {
        ensure!(
            pooled.shape() == addend.shape(),
            "FastSumPool: adding a {:?} tensor to the pooled {:?}",
            addend.shape(),
            pooled.shape()
        );
        let (p, a) = (pooled.try_as_plain_ram()?, addend.try_as_plain_ram()?);
        let (p, a) = (p.as_slice::<f32>()?, a.as_slice::<f32>()?);
        let multiplier = f32::from_bits(self.multiplier_bits);
        const BLOCK: usize = 256;
        let (out, ok) = super::tensors::tensor_filled(ctx, pooled.shape(), self.dt, |out| {
            super::par::for_chunks(out, BLOCK, |first, dst| {
                let mut sums = [0.0f32; BLOCK];
                for (k, d) in dst.chunks_mut(BLOCK).enumerate() {
                    let at = first + k * BLOCK;
                    let (Some(p), Some(a)) = (p.get(at..at + d.len()), a.get(at..at + d.len()))
                    else {
                        return false;
                    };
                    let sums = &mut sums[..d.len()];
                    for ((s, &x), &y) in sums.iter_mut().zip(p).zip(a) {
                        *s = x + y;
                    }
                    quantize(sums, d, multiplier, self.zero_point);
                }
                true
            })
        })?;
        ensure!(
            ok,
            "FastSumPool: the sum's inputs are shorter than its output"
        );
        Ok(out)
    }
}

/// Makes every [`FastSumPool`] whose sum only an `Add` of another f32 tensor of the same
/// shape reads, whose sum only a [`FastQuantize`] reads (none of them a model output), do
/// the addition and the quantization too; returns how many. The add and the quantization
/// fall out of the graph.
pub fn fuse_add_quantize(model: &mut TypedModel) -> TractResult<usize> {
    let mut done = 0;
    // One at a time, the graph searched again after each patch.
    while let Some((pool_id, addend, last, op)) = next_add_quantize(model)? {
        let name = model.node(last).name.clone();
        let source = model.node(pool_id).inputs[0];
        let mut patch = TypedModelPatch::default();
        let source = patch.tap_model(model, source)?;
        let addend = patch.tap_model(model, addend)?;
        let wired = patch.wire_node(format!("{name}.pool_add"), op, &[source, addend])?;
        patch.shunt_outside(model, OutletId::new(last, 0), wired[0])?;
        patch
            .apply(model)
            .with_context(|| format!("fusing the pool, add and quantization ending at {name}"))?;
        *model = std::mem::take(model).into_compact()?;
        done += 1;
    }
    Ok(done)
}

/// The first pool → add → quantization [`fuse_add_quantize`] takes: the pool's node, the
/// add's other input, the quantization's node and the fused op.
fn next_add_quantize(
    model: &TypedModel,
) -> TractResult<Option<(usize, OutletId, usize, FastSumPool)>> {
    let outputs = model.output_outlets()?.to_vec();
    let only_reader = |outlet: OutletId| -> Option<InletId> {
        let succ = model.outlet_successors(outlet);
        (succ.len() == 1 && !outputs.contains(&outlet)).then(|| succ[0])
    };
    for node in model.nodes() {
        let Some(pool) = node.op_as::<FastSumPool>() else {
            continue;
        };
        if pool.then.is_some() || node.inputs.len() != 1 {
            continue;
        }
        let pooled = OutletId::new(node.id, 0);
        let Some(add_inlet) = only_reader(pooled) else {
            continue;
        };
        let add = model.node(add_inlet.node);
        if !add
            .op_as::<OptBinUnicast>()
            .is_some_and(|op| op.binop.is::<Add>())
            || add.inputs.len() != 2
        {
            continue;
        }
        let addend = add.inputs[1 - add_inlet.slot];
        let pooled_fact = model.outlet_fact(pooled)?;
        let same = |f: &TypedFact| {
            f.datum_type == f32::datum_type()
                && f.shape.as_concrete().is_some()
                && f.shape == pooled_fact.shape
        };
        if !same(model.outlet_fact(addend)?) || !same(&add.outputs[0].fact) || !same(pooled_fact) {
            continue;
        }
        let Some(q_inlet) = only_reader(OutletId::new(add.id, 0)) else {
            continue;
        };
        let Some(q) = model.node(q_inlet.node).op_as::<FastQuantize>() else {
            continue;
        };
        if let Some(op) = pool.with_add_quantize(q) {
            return Ok(Some((node.id, addend, q_inlet.node, op)));
        }
    }
    Ok(None)
}

/// What a pool reads: floats, or int8 values and the float of each byte.
#[derive(Clone, Copy)]
enum Values<'a> {
    Float(&'a [f32]),
    Int8(&'a [i8], &'a [f32; 256]),
}

/// The sums (times `div`, when given) of `kh × kw` windows at strides `sy`, `sx` over the
/// row-major `h × w` planes of `src`, each value read as `value(x)`, into the `oh × ow`
/// planes of `out`, in tract's order.
#[inline(always)]
fn sum_planes<T: Copy>(
    src: &[T],
    value: impl Fn(T) -> f32,
    out: &mut [f32],
    ([h, w], [oh, ow], [kh, kw], [sy, sx]): ([usize; 2], [usize; 2], [usize; 2], [usize; 2]),
    div: Option<f32>,
) {
    for (plane, dst) in src
        .chunks_exact(h * w)
        .zip(out.chunks_exact_mut((oh * ow).max(1)))
    {
        for (oy, drow) in dst.chunks_exact_mut(ow.max(1)).enumerate() {
            let rows = &plane[oy * sy * w..(oy * sy + kh) * w];
            if kh == 2 && kw == 2 && sx == 2 {
                // The shipped pools: pairs of each row, without an index to check.
                let (r0, r1) = rows.split_at(w);
                let pairs = r0.chunks_exact(2).zip(r1.chunks_exact(2));
                for (d, (p0, p1)) in drow.iter_mut().zip(pairs) {
                    let sum = [p0[0], p0[1], p1[0], p1[1]]
                        .into_iter()
                        .map(&value)
                        .sum::<f32>();
                    *d = div.map_or(sum, |q| sum * q);
                }
            } else if kh == 2 && kw == 2 {
                let (r0, r1) = rows.split_at(w);
                for (ox, d) in drow.iter_mut().enumerate() {
                    let x = ox * sx;
                    let sum = [r0[x], r0[x + 1], r1[x], r1[x + 1]]
                        .into_iter()
                        .map(&value)
                        .sum::<f32>();
                    *d = div.map_or(sum, |q| sum * q);
                }
            } else {
                for (ox, d) in drow.iter_mut().enumerate() {
                    let x = ox * sx;
                    let sum = rows
                        .chunks_exact(w)
                        .flat_map(|r| &r[x..x + kw])
                        .map(|&v| value(v))
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
    fn eval(&self, ctx: &EvalContext, mut inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let addend = match self.then {
            Some(_) => {
                ensure!(
                    inputs.len() == 2,
                    "FastSumPool with an add takes two inputs, got {}",
                    inputs.len()
                );
                inputs.pop()
            }
            None => None,
        };
        let pooled = self.pool(ctx, inputs)?;
        match (self.then, addend) {
            (Some(then), Some(addend)) => Ok(tvec!(then.apply(ctx, &pooled, &addend)?)),
            _ => Ok(tvec!(pooled)),
        }
    }

    op_out_of_plan!();
}

impl TypedOp for FastSumPool {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let Some(input) = inputs.first() else {
            bail!("FastSumPool takes an input");
        };
        // The pool's facts as tract's on the floats it reads (the same shape, f32).
        let floats = f32::fact(input.shape.clone());
        let mut facts = self.inner.output_facts(&[&floats])?;
        if let (Some(then), Some(fact)) = (self.then, facts.first_mut()) {
            *fact = then.dt.fact(fact.shape.clone());
        }
        Ok(facts)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};
    use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;

    /// tract's valid-padded NCHW `OptSumPool` over an f32 input of `shape`, and that input's fact.
    fn tract_pool(
        shape: [usize; 4],
        kernel: [usize; 2],
        strides: [usize; 2],
        normalize: bool,
    ) -> (OptSumPool, TypedFact) {
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
        let pool = OptSumPool {
            geometry: spec.compute_geo(&fact.shape).unwrap(),
            pool_spec: spec,
            count_include_pad: false,
            normalize,
        };
        (pool, fact)
    }

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
                let (theirs, fact) = tract_pool(shape, kernel, strides, normalize);
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

    /// The loops as [`super::super::wide::run`] compiles them (with AVX2 on an x86_64 CPU that
    /// has it) against their baseline twin: the same bits, from float and int8 planes, at the
    /// shipped 2×2/2 windows and the general ones, with and without the division.
    #[test]
    fn wide_and_portable_sums_are_the_same_bits() {
        use super::super::wide;
        let table: [f32; 256] = std::array::from_fn(|i| (i as u8 as i8 as f32 - 3.0) * 0.0071);
        for ([h, w], [kh, kw], [sy, sx]) in [
            ([52usize, 52usize], [2usize, 2usize], [2usize, 2usize]),
            ([7, 9], [2, 2], [2, 2]),
            ([9, 11], [2, 2], [1, 2]),
            ([9, 6], [3, 2], [2, 1]),
        ] {
            let (oh, ow) = ((h - kh) / sy + 1, (w - kw) / sx + 1);
            let planes = 3;
            let floats: Vec<f32> = (0..planes * h * w)
                .map(|i| match i % 7 {
                    0 => -0.0,
                    1 => 1e8 + i as f32,
                    _ => (i as f32 * 0.37).sin() * 3.1,
                })
                .collect();
            let bytes: Vec<i8> = (0..planes * h * w)
                .map(|i| (i * 37 % 256) as u8 as i8)
                .collect();
            let geometry = ([h, w], [oh, ow], [kh, kw], [sy, sx]);
            for div in [None, Some(0.25f32)] {
                let mut a = vec![0f32; planes * oh * ow];
                let mut b = a.clone();
                wide::run(
                    #[inline(always)]
                    || sum_planes(&floats, |x| x, &mut a, geometry, div),
                );
                wide::portable(|| sum_planes(&floats, |x| x, &mut b, geometry, div));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&a),
                    bits(&b),
                    "float {h}x{w} {kh}x{kw}/{sy},{sx} {div:?}"
                );
                let value = |x: i8| table[x as u8 as usize];
                wide::run(
                    #[inline(always)]
                    || sum_planes(&bytes, value, &mut a, geometry, div),
                );
                wide::portable(|| sum_planes(&bytes, value, &mut b, geometry, div));
                assert_eq!(
                    bits(&a),
                    bits(&b),
                    "int8 {h}x{w} {kh}x{kw}/{sy},{sx} {div:?}"
                );
            }
        }
    }

    /// Reading int8 through the dequantization's table: the bits of tract's dequantize then
    /// pool, on every int8 value, 2×2/2 and 3×3/1, on one and two threads; and the same bits
    /// through tract's pool for a shape the op does not walk (a plane smaller than the kernel).
    #[test]
    fn a_pool_reading_int8_equals_tract_s_dequantize_then_pool() {
        let ctx = EvalContext::out_of_plan();
        let deq = DequantizeLinearF32 {
            scale: 0.0371,
            zero_point: -3,
        };
        let table = crate::detect::int8::quant::dequantization_table(&deq).unwrap();
        for (shape, kernel, strides) in [
            ([1usize, 4, 16, 16], [2usize, 2], [2usize, 2]),
            ([1, 3, 7, 9], [3, 3], [1, 1]),
            ([1, 8, 96, 96], [2, 2], [2, 2]),
            ([1, 2, 1, 5], [2, 2], [2, 2]),
        ] {
            let (theirs, fact) = tract_pool(shape, kernel, strides, true);
            let ours = FastSumPool::for_op(&theirs, &fact)
                .and_then(|p| p.with_dequantization(&deq))
                .expect("taken");
            assert!(ours.with_dequantization(&deq).is_none(), "fused once only");
            let n: usize = shape.iter().product();
            let q: Vec<i8> = (0..n).map(|i| (i * 37 % 256) as u8 as i8).collect();
            let q = Tensor::from_shape(&shape, &q).unwrap();
            let floats = deq
                .eval_out_of_plan(tvec!(q.clone().into_tvalue()))
                .unwrap()
                .unwrap();
            assert_eq!(
                floats[0]
                    .try_as_plain_ram()
                    .unwrap()
                    .as_slice::<f32>()
                    .unwrap()[..256.min(n)],
                q.try_as_plain_ram().unwrap().as_slice::<i8>().unwrap()[..256.min(n)]
                    .iter()
                    .map(|&v| table[v as u8 as usize])
                    .collect::<Vec<_>>()[..],
                "the table is tract's dequantization"
            );
            let bits = |t: &TValue| -> Vec<u32> {
                t.to_plain_array_view::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            if shape[2] < kernel[0] {
                // tract's pool itself refuses a plane smaller than its kernel: so does ours.
                assert!(
                    ours.eval(&ctx, tvec!(q.into_tvalue())).is_err()
                        == theirs.eval(&ctx, floats).is_err()
                );
                continue;
            }
            let want = theirs.eval(&ctx, floats).unwrap();
            let got = ours.eval(&ctx, tvec!(q.clone().into_tvalue())).unwrap();
            let got2 = multithread_tract_scope(Executor::multithread(2), || {
                ours.eval(&ctx, tvec!(q.clone().into_tvalue())).unwrap()
            });
            assert_eq!(want[0].shape(), got[0].shape());
            assert_eq!(bits(&want[0]), bits(&got[0]), "{shape:?} {kernel:?}");
            assert_eq!(bits(&want[0]), bits(&got2[0]), "2 threads, {shape:?}");
            let facts = ours.output_facts(&[&i8::fact(shape)]).unwrap();
            assert_eq!(facts[0].datum_type, f32::datum_type());
            assert_eq!(facts[0].shape.as_concrete().unwrap(), got[0].shape());

            // With the add and the quantization after it: tract's pool, the float sum, then
            // FastQuantize (itself tested against tract's rounding), byte for byte.
            let q_op = FastQuantize::for_op(
                &ElementWiseOp(
                    Box::new(tract_onnx::tract_core::ops::quant::QuantizeLinearI8 {
                        scale: 1.0 / 0.043,
                        zero_point: 5,
                    }),
                    None,
                ),
                &f32::fact(want[0].shape()),
                &i8::fact(want[0].shape()),
            )
            .expect("a quantization");
            let fused = ours.with_add_quantize(&q_op).expect("taken");
            assert!(fused.with_add_quantize(&q_op).is_none(), "fused once only");
            let pooled = want[0].to_plain_array_view::<f32>().unwrap();
            let addend: Vec<f32> = (0..pooled.len())
                .map(|i| (i as f32 * 0.61).cos() * 4.0)
                .collect();
            let sums: Vec<f32> = pooled.iter().zip(&addend).map(|(x, y)| y + x).collect();
            let sums = Tensor::from_shape(want[0].shape(), &sums).unwrap();
            let want_q = q_op.eval(&ctx, tvec!(sums.into_tvalue())).unwrap();
            let addend = Tensor::from_shape(want[0].shape(), &addend).unwrap();
            let inputs = || tvec!(q.clone().into_tvalue(), addend.clone().into_tvalue());
            let got_q = fused.eval(&ctx, inputs()).unwrap();
            let got_q2 = multithread_tract_scope(Executor::multithread(2), || {
                fused.eval(&ctx, inputs()).unwrap()
            });
            let bytes = |t: &TValue| -> Vec<i8> {
                t.try_as_plain_ram()
                    .unwrap()
                    .as_slice::<i8>()
                    .unwrap()
                    .to_vec()
            };
            assert_eq!(bytes(&want_q[0]), bytes(&got_q[0]), "{shape:?} {kernel:?}");
            assert_eq!(bytes(&want_q[0]), bytes(&got_q2[0]), "2 threads, {shape:?}");
            let facts = fused
                .output_facts(&[&i8::fact(shape), &f32::fact(want[0].shape())])
                .unwrap();
            assert_eq!(facts[0].datum_type, q_op.params().2);
            assert!(
                fused.eval(&ctx, tvec!(q.clone().into_tvalue())).is_err(),
                "the addend missing"
            );
        }
    }
}
