//! `FastMaxPoolI8`: stands in for tract's `OptMaxPool` on signed int8 NCHW tensors (the shipped
//! graphs' stem pooling, 3×3 stride 2, explicit padding). tract visits every window through a
//! generic patch walker (≈ 7 % of a Pi 5 INT8 image); this takes the maximum of the window's
//! rows first (a loop the compiler vectorizes), then across each window's columns. Padding
//! takes no part, and a window with nothing valid gives −128, as in tract.

use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::cnn::OptMaxPool;
use tract_onnx::tract_core::ops::cnn::PaddingSpec;
use tract_onnx::tract_core::ops::nn::DataFormat;

use super::fallback::eval_or_tract_op;
use super::taps::gather;

/// Geometry of one 2-D pooling, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pool2d {
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Strides along height and width.
    pub stride: [usize; 2],
    /// Padding before the first row and column.
    pub pad: [usize; 2],
}

/// The op that replaces one `OptMaxPool`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastMaxPoolI8 {
    /// The op it replaces: its output facts are ours, and it runs for any input this op does
    /// not handle.
    inner: OptMaxPool,
    kernel: [usize; 2],
    stride: [usize; 2],
    pad: Pad,
}

/// How the padding before the first row and column is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pad {
    /// Given.
    Before([usize; 2]),
    /// ONNX `SAME_UPPER` (`upper`) or `SAME_LOWER`: from the input and output sizes.
    Same { upper: bool },
}

impl FastMaxPoolI8 {
    /// The replacement for `op` on an input of fact `input`: NCHW, signed int8, 2-D, no
    /// dilation, no index output, explicit or no padding.
    pub fn for_op(op: &OptMaxPool, input: &TypedFact) -> Option<Self> {
        let spec = &op.pool_spec;
        if input.datum_type.unquantized() != DatumType::I8
            || op.with_index_outputs.is_some()
            || spec.data_format != DataFormat::NCHW
            || spec.kernel_shape.len() != 2
            || input.rank() != 4
            || spec
                .dilations
                .as_ref()
                .is_some_and(|d| d.iter().any(|&x| x != 1))
        {
            return None;
        }
        let pad = match &spec.padding {
            PaddingSpec::Valid => Pad::Before([0, 0]),
            PaddingSpec::Explicit(before, _) | PaddingSpec::ExplicitOnnxPool(before, _, _) => {
                Pad::Before([*before.first()?, *before.get(1)?])
            }
            PaddingSpec::SameUpper => Pad::Same { upper: true },
            PaddingSpec::SameLower => Pad::Same { upper: false },
        };
        let stride = match &spec.strides {
            Some(s) if s.len() == 2 => [s[0], s[1]],
            None => [1, 1],
            _ => return None,
        };
        let kernel = [spec.kernel_shape[0], spec.kernel_shape[1]];
        if kernel.contains(&0) || stride.contains(&0) {
            return None;
        }
        Some(FastMaxPoolI8 {
            inner: op.clone(),
            kernel,
            stride,
            pad,
        })
    }

    /// The pooled `input` of `out_shape`, in a tensor the plan state keeps ([`recycle`]); `None`
    /// when the op does not handle this input.
    ///
    /// [`recycle`]: super::recycle
    fn run(&self, ctx: &EvalContext, input: &Tensor, out_shape: &[usize]) -> Option<TValue> {
        let shape = input.shape();
        if shape.len() != 4 || out_shape.len() != 4 || shape[..2] != out_shape[..2] {
            return None;
        }
        let values = input.try_as_plain_ram().ok()?;
        let values = values.as_slice::<i8>().ok()?;
        let pad = match self.pad {
            Pad::Before(p) => p,
            Pad::Same { upper } => [0, 1].map(|a| {
                let total = ((out_shape[2 + a].max(1) - 1) * self.stride[a] + self.kernel[a])
                    .saturating_sub(shape[2 + a]);
                if upper {
                    total / 2
                } else {
                    total - total / 2
                }
            }),
        };
        let geo = Pool2d {
            kernel: self.kernel,
            stride: self.stride,
            pad,
        };
        let (plane_in, plane_out) = (shape[2] * shape[3], out_shape[2] * out_shape[3]);
        if values.len() != shape.iter().product::<usize>() {
            return None;
        }
        // Whole planes per chunk, side by side on the model's threads.
        let (out, ok) = super::tensors::tensor_filled(
            ctx,
            out_shape,
            input.datum_type(),
            |out: &mut [i8]| {
                super::par::for_chunks(out, plane_out.max(1), |first, dst| {
                    let p0 = first / plane_out.max(1);
                    let planes = dst.len() / plane_out.max(1);
                    let Some(src) = values.get(p0 * plane_in..(p0 + planes) * plane_in) else {
                        return false;
                    };
                    max_pool(
                        src,
                        [planes, shape[2], shape[3]],
                        dst,
                        [out_shape[2], out_shape[3]],
                        geo,
                    )
                    .is_some()
                })
            },
        )
        .ok()?;
        ok.then_some(out)
    }
}

/// Max pooling of `planes` row-major `h × w` int8 planes into `oh × ow` ones. `None` when the
/// buffer sizes do not match.
pub fn max_pool(
    src: &[i8],
    [planes, h, w]: [usize; 3],
    out: &mut [i8],
    [oh, ow]: [usize; 2],
    geo: Pool2d,
) -> Option<()> {
    if src.len() != planes * h * w || out.len() != planes * oh * ow {
        return None;
    }
    if out.is_empty() {
        return Some(());
    }
    let [kh, kw] = geo.kernel;
    let [sh, sw] = geo.stride;
    let [ph, pw] = geo.pad;
    let mut rows = vec![i8::MIN; w];
    // For 3-wide windows: wide[x] = max(rows[x..x + 3]), every column (vectorized); an
    // inner output column is then one element of it.
    let mut wide = vec![i8::MIN; w.saturating_sub(2)];
    // Output columns whose window lies wholly inside the row: ox_lo..ox_hi.
    let ox_lo = pw.div_ceil(sw).min(ow);
    let ox_hi = if w + pw >= kw {
        ((w + pw - kw) / sw + 1).min(ow)
    } else {
        0
    };
    let fast = kw == 3 && ox_lo < ox_hi;
    for (plane, dst) in src.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)) {
        for (oy, orow) in dst.chunks_exact_mut(ow).enumerate() {
            // Maximum over the window's valid rows, column by column (vectorized).
            rows.fill(i8::MIN);
            let y0 = oy * sh;
            for y in y0.max(ph)..(y0 + kh).min(h + ph) {
                let line = &plane[(y - ph) * w..][..w];
                for (m, &v) in rows.iter_mut().zip(line) {
                    *m = (*m).max(v);
                }
            }
            let mut done = 0..0;
            if fast {
                for (((m, &a), &b), &c) in
                    wide.iter_mut().zip(&rows).zip(&rows[1..]).zip(&rows[2..])
                {
                    *m = a.max(b).max(c);
                }
                let from = &wide[ox_lo * sw - pw..];
                let cols = &mut orow[ox_lo..ox_hi];
                if sw == 2 {
                    // Even elements: de-interleaving loads (the bytes' order is all a
                    // gather sees, so signed bytes go through as they are).
                    let span = &from[..(2 * cols.len()).saturating_sub(1).min(from.len())];
                    gather(
                        bytemuck::cast_slice(span),
                        bytemuck::cast_slice_mut(cols),
                        2,
                    );
                } else {
                    for (o, &v) in cols.iter_mut().zip(from.iter().step_by(sw)) {
                        *o = v;
                    }
                }
                done = ox_lo..ox_hi;
            }
            // The other columns (and every column of other window widths), one by one.
            for ox in (0..done.start).chain(done.end..ow) {
                let x0 = ox * sw;
                let (a, b) = (x0.max(pw) - pw, (x0 + kw).min(w + pw).saturating_sub(pw));
                orow[ox] = rows
                    .get(a..b.max(a))
                    .and_then(|r| r.iter().copied().max())
                    .unwrap_or(i8::MIN);
            }
        }
    }
    Some(())
}

impl Op for FastMaxPoolI8 {
    fn name(&self) -> StaticName {
        "FastMaxPoolI8".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "kernel {:?} stride {:?} padding {:?}",
            self.kernel, self.stride, self.pad
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for FastMaxPoolI8 {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        eval_or_tract_op(&self.inner, ctx, inputs, |inputs| {
            let [input] = inputs else {
                return Ok(None);
            };
            let fact = TypedFact::dt_shape(input.datum_type(), input.shape());
            let out = self.inner.output_facts(&[&fact])?;
            Ok(out
                .first()
                .and_then(|f| f.shape.as_concrete())
                .and_then(|shape| self.run(ctx, input, shape)))
        })
    }

    op_out_of_plan!();
}

impl TypedOp for FastMaxPoolI8 {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};
    use tract_onnx::tract_core::ops::cnn::PoolSpec;

    /// A `MaxPool` as tract declares it, for the tests' reference.
    fn reference(spec: PoolSpec) -> tract_onnx::tract_core::ops::cnn::MaxPool {
        tract_onnx::tract_core::ops::cnn::MaxPool::new(spec, None)
    }

    fn run_both(shape: [usize; 4], kernel: [usize; 2], stride: [usize; 2], pad: PaddingSpec) {
        let n: usize = shape.iter().product();
        let data: Vec<i8> = (0..n).map(|i| (i * 97 % 253) as u8 as i8).collect();
        let x = Tensor::from_shape(&shape, &data).unwrap();
        let spec = PoolSpec::new(
            DataFormat::NCHW,
            tvec!(kernel[0], kernel[1]),
            pad.clone(),
            None,
            Some(tvec!(stride[0], stride[1])),
            shape[1],
            shape[1],
        );
        // tract's own lowering of the declared op, as in an optimized model.
        let mut model = TypedModel::default();
        let src = model.add_source("x", i8::fact(shape)).unwrap();
        let out = model.wire_node("pool", reference(spec), &[src]).unwrap();
        model.select_output_outlets(&out).unwrap();
        let model = model.into_optimized().unwrap();
        let node = model
            .nodes()
            .iter()
            .find(|n| n.op_is::<OptMaxPool>())
            .expect("tract lowers MaxPool to OptMaxPool");
        let op = node.op_as::<OptMaxPool>().unwrap();
        let ours = FastMaxPoolI8::for_op(op, &i8::fact(shape))
            .unwrap_or_else(|| panic!("not taken: {op:?}"));
        let ctx = EvalContext::out_of_plan();
        let want = op.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
        let got = ours.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
        // On two threads too (planes split between them once the output is large enough).
        let got2 = multithread_tract_scope(Executor::multithread(2), || {
            ours.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap()
        });
        assert_eq!(
            want[0].shape(),
            got[0].shape(),
            "{kernel:?} {stride:?} {pad:?}"
        );
        let v = |t: &TValue| -> Vec<i8> {
            t.to_plain_array_view::<i8>()
                .unwrap()
                .iter()
                .copied()
                .collect()
        };
        assert_eq!(
            v(&want[0]),
            v(&got[0]),
            "{shape:?} {kernel:?} {stride:?} {pad:?}"
        );
        assert_eq!(v(&want[0]), v(&got2[0]), "2 threads, {shape:?}");
    }

    #[test]
    fn equals_tract_max_pool() {
        // Widths past 32 and 64: the vector blocks of the stride-2 columns and their tail.
        for shape in [
            [1, 3, 9, 11],
            [1, 2, 8, 8],
            [2, 1, 5, 4],
            [1, 2, 5, 69],
            [1, 1, 4, 40],
        ] {
            for (kernel, stride) in [
                ([3, 3], [2, 2]),
                ([2, 2], [2, 2]),
                ([3, 3], [1, 1]),
                ([2, 3], [1, 2]),
            ] {
                for pad in [
                    PaddingSpec::Valid,
                    PaddingSpec::SameUpper,
                    PaddingSpec::SameLower,
                    PaddingSpec::Explicit(tvec!(1, 1), tvec!(1, 1)),
                    PaddingSpec::Explicit(tvec!(0, 1), tvec!(1, 0)),
                    PaddingSpec::ExplicitOnnxPool(tvec!(1, 1), tvec!(1, 1), false),
                ] {
                    run_both(shape, kernel, stride, pad);
                }
            }
        }
        // The stem's pool at its size (above the parallel threshold: planes on two threads).
        run_both(
            [1, 8, 208, 208],
            [3, 3],
            [2, 2],
            PaddingSpec::Explicit(tvec!(1, 1), tvec!(1, 1)),
        );
    }
}
