//! `FastIm2col`: stands in for tract's eager `Im2Col` on an int8 NCHW input (the shipped
//! graphs' stem: 3 channels, 3×3, stride 2, the one convolution the recipe's in-graph
//! im2col leaves to tract). tract walks the patches element by element through its packing
//! writer (≈ 17 M instructions per 416² image on a Pi 5); this gathers the k×mn patch matrix
//! row by row (k = channel, kernel row, kernel column; mn = output row, column, as tract
//! orders them) and packs it with [`super::pack`] into the same panels.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::cnn::conv::Im2Col;
use tract_onnx::tract_core::ops::nn::DataFormat;
use tract_onnx::tract_core::tract_linalg::mmm::{MMMInputFormat, PackedExoticFact};

use super::fallback::eval_or_tract_op;
use super::fast_pack::{layout_of, pack_items};
use super::pack::Layout;
use super::taps::gather;

/// The geometry of one 2-D convolution's patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Geometry {
    /// Batch, channels, input height and width.
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    /// Kernel height and width, strides, padding before, output height and width.
    kh: usize,
    kw: usize,
    sy: usize,
    sx: usize,
    pt: usize,
    pl: usize,
    oh: usize,
    ow: usize,
}

/// The op that replaces one `Im2Col` of an int8 NCHW input.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastIm2col {
    /// The op it replaces: its output facts are ours.
    inner: Im2Col,
    format: Box<dyn MMMInputFormat>,
    layout: Layout,
    geo: Geometry,
}

impl FastIm2col {
    /// The replacement for `op` with input fact `input` and output fact `output`, when the
    /// input is a concrete 1-byte NCHW (or CHW) tensor, one group, a 2-D kernel without
    /// dilation, and the packing one [`super::pack`] writes.
    pub fn for_op(op: &Im2Col, input: &TypedFact, output: &TypedFact) -> Option<Self> {
        let spec = &op.pool_spec;
        let has_n = match spec.data_format {
            DataFormat::NCHW => true,
            DataFormat::CHW => false,
            _ => return None,
        };
        if input.datum_type.size_of() != 1
            || !input.datum_type.unquantized().is_integer()
            || op.group != 1
            || spec.kernel_shape.len() != 2
            || spec.dilations().iter().any(|&d| d != 1)
        {
            return None;
        }
        let shape = input.shape.as_concrete()?;
        let (n, dims) = if has_n {
            (*shape.first()?, shape.get(1..)?)
        } else {
            (1, shape)
        };
        let &[c, h, w] = dims else { return None };
        let padding = spec.computed_padding(&[h, w]);
        let strides = spec.strides();
        let pof = output
            .exotic_fact
            .as_ref()?
            .downcast_ref::<PackedExoticFact>()?;
        let layout = layout_of(&*pof.format)?;
        let geo = Geometry {
            n,
            c,
            h,
            w,
            kh: spec.kernel_shape[0],
            kw: spec.kernel_shape[1],
            sy: *strides.first()?,
            sx: *strides.get(1)?,
            pt: padding.first()?.pad_before,
            pl: padding.get(1)?.pad_before,
            oh: padding.first()?.convoluted,
            ow: padding.get(1)?.convoluted,
        };
        let k = geo.c * geo.kh * geo.kw;
        (pof.k == k && pof.mn.as_i64() == Some((geo.oh * geo.ow) as i64) && geo.sy * geo.sx > 0)
            .then(|| FastIm2col {
                inner: op.clone(),
                format: pof.format.clone(),
                layout,
                geo,
            })
    }

    /// The k×mn patch matrix of every batch item, one after the other; `fill` in the padding.
    fn patches(&self, src: &[u8], fill: u8) -> Option<Vec<u8>> {
        let g = self.geo;
        let (k, mn) = (g.c * g.kh * g.kw, g.oh * g.ow);
        if src.len() != g.n * g.c * g.h * g.w {
            return None;
        }
        let mut out = vec![fill; g.n * k * mn];
        for (item, m) in out.chunks_exact_mut((k * mn).max(1)).enumerate() {
            for (row_k, row) in m.chunks_exact_mut(mn.max(1)).enumerate() {
                let (ci, ky, kx) = (row_k / (g.kh * g.kw), (row_k / g.kw) % g.kh, row_k % g.kw);
                let plane = src.get((item * g.c + ci) * g.h * g.w..)?;
                // Output columns reading the input: ox*sx + kx - pl in 0..w.
                let lo = g.pl.saturating_sub(kx).div_ceil(g.sx).min(g.ow);
                let hi = (g.w + g.pl)
                    .checked_sub(kx)
                    .map_or(0, |e| e.div_ceil(g.sx))
                    .min(g.ow)
                    .max(lo);
                if lo == hi {
                    continue;
                }
                for (oy, out_row) in row.chunks_exact_mut(g.ow.max(1)).enumerate() {
                    let Some(iy) = (oy * g.sy + ky).checked_sub(g.pt).filter(|&y| y < g.h) else {
                        continue;
                    };
                    let first = (iy * g.w + lo * g.sx + kx).checked_sub(g.pl)?;
                    let span = plane.get(first..first + (hi - lo - 1) * g.sx + 1)?;
                    gather(span, &mut out_row[lo..hi], g.sx);
                }
            }
        }
        Some(out)
    }

    fn run(&self, inputs: &[TValue]) -> TractResult<Option<Tensor>> {
        let Some(input) = inputs.first() else {
            return Ok(None);
        };
        if input.datum_type().size_of() != 1 {
            return Ok(None);
        }
        // tract reads the pad value as one element of the input's type from the start of the
        // second input's storage (a 32-bit zero point: its low byte); zero without one.
        let fill = match inputs.get(1) {
            Some(t) => match t.as_bytes().first() {
                Some(&b) => b,
                None => return Ok(None),
            },
            None => 0,
        };
        let Some(m) = self.patches(input.as_bytes(), fill) else {
            return Ok(None);
        };
        let g = self.geo;
        let (k, mn) = (g.c * g.kh * g.kw, g.oh * g.ow);
        let items: Vec<usize> = (0..g.n).map(|i| i * k * mn).collect();
        pack_items(
            &*self.format,
            self.layout,
            &m,
            &items,
            [k, mn, mn],
            &[g.n, 1],
            input.datum_type(),
        )
    }
}

impl Op for FastIm2col {
    fn name(&self) -> StaticName {
        "FastIm2col".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("{:?} into {:?}", self.geo, self.layout)])
    }

    op_as_typed_op!();
}

impl EvalOp for FastIm2col {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        eval_or_tract_op(&self.inner, ctx, inputs, |inputs| self.run(inputs))
    }

    op_out_of_plan!();
}

impl TypedOp for FastIm2col {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::super::fast_pack::tests::{noise_i8, packed_items};
    use super::*;
    use tract_onnx::tract_core::ops::cnn::PaddingSpec;
    use tract_onnx::tract_core::ops::matmul::optimized::OptMatMul;

    /// An input shape, kernel, strides and padding.
    type Case = ([usize; 4], [usize; 2], [usize; 2], PaddingSpec);

    /// Against tract's own `Im2Col`, packed bytes compared: the shipped stem, then the same
    /// kernel (tract's int8 kernel and packing for the stem on this machine) on other
    /// geometries — strides 1–3, 1×1/3×3/5×3 kernels, explicit, same and valid padding, odd
    /// sizes, a batch of two — with a 32-bit pad value (tract reads its low byte) and none.
    #[test]
    fn equals_tract_im2col() {
        let model = super::super::tests::optimized("models/nanodet-g-416-int8.onnx", 416);
        let node = model
            .nodes()
            .iter()
            .find(|n| n.op_is::<Im2Col>())
            .expect("the stem's im2col");
        let stem = node.op_as::<Im2Col>().unwrap();
        let consumer = model
            .nodes()
            .iter()
            .find(|n| n.inputs.first().map(|o| o.node) == Some(node.id))
            .and_then(|n| n.op_as::<OptMatMul>())
            .expect("its matmul");
        let mmm = consumer.mmm[0].clone();
        let format = node.outputs[0]
            .fact
            .exotic_fact
            .as_ref()
            .and_then(|f| f.downcast_ref::<PackedExoticFact>())
            .expect("packed fact")
            .format
            .clone();
        let packing = mmm
            .packings()
            .iter()
            .position(|(_, b)| format!("{b:?}") == format!("{format:?}"))
            .expect("the stem's packing among the kernel's");
        let pad =
            |b: usize, a: usize| PaddingSpec::ExplicitOnnxPool(tvec![b, b], tvec![a, a], false);
        let cases: Vec<Case> = vec![
            (
                [1, 3, 416, 416],
                [3, 3],
                [2, 2],
                stem.pool_spec.padding.clone(),
            ),
            ([1, 3, 11, 9], [3, 3], [2, 2], pad(1, 1)),
            ([1, 3, 11, 9], [3, 3], [1, 1], pad(1, 1)),
            ([2, 2, 7, 13], [5, 3], [1, 2], PaddingSpec::SameUpper),
            ([1, 4, 8, 8], [1, 1], [1, 1], PaddingSpec::Valid),
            ([1, 1, 10, 17], [3, 3], [3, 3], pad(2, 0)),
            ([1, 3, 5, 5], [3, 3], [2, 1], PaddingSpec::SameLower),
        ];
        let ctx = EvalContext::out_of_plan();
        for (i, (shape, kernel, strides, padding)) in cases.into_iter().enumerate() {
            let mut spec = stem.pool_spec.clone();
            spec.kernel_shape = kernel.iter().copied().collect();
            spec.strides = Some(strides.iter().copied().collect());
            spec.padding = padding;
            spec.input_channels = shape[1];
            let k = shape[1] * kernel[0] * kernel[1];
            let fact = i8::fact(shape);
            let theirs = Im2Col::new(spec, 1, k, &fact.shape, mmm.clone(), packing).unwrap();
            let out = theirs.output_facts(&[&fact]).unwrap().remove(0);
            let ours = FastIm2col::for_op(&theirs, &fact, &out)
                .unwrap_or_else(|| panic!("case {i}: not taken"));
            let x =
                Tensor::from_shape(&shape, &noise_i8(shape.iter().product(), i as u64)).unwrap();
            for pad_value in [Some(tensor0(0x1234_56F9i32)), Some(tensor0(0i32)), None] {
                let mut inputs = tvec!(x.clone().into_tvalue());
                if let Some(p) = &pad_value {
                    inputs.push(p.clone().into_tvalue());
                }
                let want = theirs.eval(&ctx, inputs.clone()).unwrap();
                let got = ours.eval(&ctx, inputs).unwrap();
                assert_eq!(got[0].shape(), want[0].shape(), "case {i}");
                assert_eq!(
                    packed_items(&got[0], ours.layout),
                    packed_items(&want[0], ours.layout),
                    "case {i}, pad {pad_value:?}"
                );
            }
        }
    }
}
