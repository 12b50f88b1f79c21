//! `FastTapsPack`: a [`FastTaps`] whose only reader is a [`FastPackI8`], as one op. The
//! shipped graphs feed every in-graph im2col straight into the activation packing of a 1×1
//! convolution, batched over output rows (k = taps × channels, mn = the row). Instead of
//! writing the whole im2col tensor (29 MB per 416² image) and reading it back to pack it,
//! this writes a band of a few output rows' k×mn matrices (about 256 KB: it stays in the L2
//! cache) and packs them from there, band after band, bands split over the model's threads.

use tract_onnx::tract_core::internal::*;

use super::fast_pack::{pack_with, FastPackI8};
use super::pack::{self, Source};
use super::taps::FastTaps;

/// About this many bytes of im2col are written and packed at a time (a few output rows):
/// they stay in the L2 cache of a Pi 4 or 5 between the two.
const BAND_BYTES: usize = 256 * 1024;

/// The op that replaces a `FastTaps` → `FastPackI8` pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastTapsPack {
    taps: FastTaps,
    pack: FastPackI8,
}

impl FastTapsPack {
    /// The fused op, when `taps` are planar (an NCHW convolution's im2col) and `pack` packs
    /// their output with k on the channel axis and mn on the innermost one.
    pub fn for_pair(taps: &FastTaps, pack: &FastPackI8) -> Option<Self> {
        (taps.planar() && pack.k_axis == 1 && pack.mn_axis == 3).then(|| FastTapsPack {
            taps: taps.clone(),
            pack: pack.clone(),
        })
    }

    fn run(&self, input: &Tensor) -> TractResult<Option<Tensor>> {
        let &[n, k, ho, wo] = self.taps.out_shape() else {
            return Ok(None);
        };
        let src = input.as_bytes();
        let layout = self.pack.layout;
        let fill_byte = self.taps.fill();
        let out_shape = self.pack.inner.output_shape(self.taps.out_shape());
        // Bands of output rows of about BAND_BYTES of im2col, within one batch item.
        let band = (BAND_BYTES / (k * wo).max(1)).clamp(1, ho.max(1));
        let unit = |first_item: usize, _: usize, outs: &mut [&mut [u8]]| -> bool {
            let (b, y0) = (first_item / ho.max(1), first_item % ho.max(1));
            let rows = outs.len();
            let mut m = vec![fill_byte; k * rows * wo];
            if y0 + rows > ho || !self.taps.write_rows(src, b, [y0, y0 + rows], &mut m) {
                return false;
            }
            outs.iter_mut().enumerate().all(|(j, out)| {
                let src = Source {
                    data: &m[j * wo..],
                    k,
                    mn: wo,
                    row_stride: rows * wo,
                };
                pack::pack(layout, &src, 0, out)
            })
        };
        // Units must not straddle two batch items: with several, one row per unit.
        let unit_items = if n > 1 && ho % band != 0 { 1 } else { band };
        pack_with(
            &*self.pack.format,
            layout,
            [k, wo],
            n * ho,
            unit_items,
            &out_shape,
            input.datum_type(),
            unit,
        )
    }
}

impl Op for FastTapsPack {
    fn name(&self) -> StaticName {
        "FastTapsPack".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let mut info = self.taps.info()?;
        info.extend(self.pack.info()?);
        Ok(info)
    }

    op_as_typed_op!();
}

impl EvalOp for FastTapsPack {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [input] = &*inputs else {
            bail!("FastTapsPack takes one input, got {}", inputs.len());
        };
        if let Some(t) = self.run(input)? {
            return Ok(tvec!(t.into_tvalue()));
        }
        // Anything unexpected: the two ops one after the other.
        let taps = self.taps.eval(ctx, inputs)?;
        self.pack.eval(ctx, taps)
    }

    op_out_of_plan!();
}

impl TypedOp for FastTapsPack {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let taps = self.taps.output_facts(inputs)?;
        self.pack.output_facts(&[&taps[0]])
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::super::fast_pack::tests::{noise_i8, packed_items};
    use super::*;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};

    /// Every im2col → pack pair of an INT8 model with the recipe's in-graph im2col (as tract
    /// optimized it here): the fused op's packed bytes against the two ops run one after the
    /// other, on random inputs, on 1 and 2 threads.
    #[test]
    fn equals_taps_then_pack_on_an_in_graph_im2col_model() {
        {
            let (file, size) = super::super::tests::I2CS_INT8;
            let mut model = super::super::tests::optimized(file, size);
            super::super::install_stages(&mut model, true, false).expect("install");
            let ctx = EvalContext::out_of_plan();
            let mut seen = 0;
            for node in model.nodes() {
                let Some(pack) = node.op_as::<FastPackI8>() else {
                    continue;
                };
                let producer = model.node(node.inputs[0].node);
                let Some(taps) = producer.op_as::<FastTaps>() else {
                    continue;
                };
                let fused = FastTapsPack::for_pair(taps, pack)
                    .unwrap_or_else(|| panic!("{file}: {} not fused", node.name));
                let fact = model.outlet_fact(producer.inputs[0]).unwrap();
                let shape: Vec<usize> = fact.shape.as_concrete().unwrap().to_vec();
                let x =
                    Tensor::from_shape(&shape, &noise_i8(shape.iter().product(), node.id as u64))
                        .unwrap()
                        .cast_to_dt(fact.datum_type)
                        .unwrap()
                        .into_owned();
                let t = taps.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
                let want = pack.eval(&ctx, t).unwrap();
                assert_eq!(
                    fused.output_facts(&[fact]).unwrap()[0].shape,
                    node.outputs[0].fact.shape,
                    "{file}: {}",
                    node.name
                );
                for threads in [1, 2] {
                    let got = multithread_tract_scope(Executor::multithread(threads), || {
                        fused.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap()
                    });
                    assert_eq!(
                        packed_items(&got[0], pack.layout),
                        packed_items(&want[0], pack.layout),
                        "{file}: {} on {threads} thread(s)",
                        node.name
                    );
                }
                seen += 1;
            }
            // 27 where every pack is one lookout writes; 19 on a CPU with AMX (tract packs the
            // other im2cols as AMX tiles, which stay tract's).
            assert!(seen >= 15, "{file}: only {seen} pairs");
        }
    }
}
