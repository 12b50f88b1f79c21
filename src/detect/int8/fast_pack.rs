//! `FastPackI8`: stands in for tract's `OptMatMulPack` on int8 activations and writes the same
//! packed panels with [`super::pack`], split over the model's threads.

use rayon::prelude::*;
use tract_linalg::multithread::{current_tract_executor, Executor};
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::matmul::pack::OptMatMulPack;
use tract_onnx::tract_core::tract_linalg::mmm::{
    EagerPackedInput, MMMInputFormat, MMMInputValue, PackedExoticFact, PackedMatrixStorage,
};
use tract_onnx::tract_core::tract_linalg::pack::{PackedFormat, PackedI8K4};

use super::fallback::eval_or_tract_op;
use super::pack::{self, Layout, Source};

/// Below this many packed bytes per call the work stays on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 * 1024;

/// Zeroed bytes after every packed matrix lookout writes. tract's AMX int8 kernel loads its B
/// operand in whole 64-deep tiles (16 rows of 64 bytes) and relies on the A operand's zero
/// padding past k: it reads up to 60 × 16 bytes past the last panel's data. tract's own
/// packing allocates no slack either, so a packed matrix ending at the end of a mapping (a
/// large, page-aligned allocation) made the kernel fault (SIGSEGV, seen in the test suite on
/// a Sapphire Rapids CPU). The slack makes those reads land on zeros inside the allocation.
pub(super) const PANEL_SLACK: usize = 1024;

/// The op that replaces one `OptMatMulPack` (one packer, int8, mn contiguous).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastPackI8 {
    /// The op it replaces: its output facts are ours, and it runs whenever an input does not
    /// have the expected layout (never, for a typed model's contiguous tensors).
    pub(super) inner: OptMatMulPack,
    /// tract's packing format (copied into every packed value).
    pub(super) format: Box<dyn MMMInputFormat>,
    pub(super) layout: Layout,
    pub(super) k_axis: usize,
    pub(super) mn_axis: usize,
}

impl FastPackI8 {
    /// Builds the replacement for `op`, whose input fact is `input` and output fact `output`;
    /// `None` when the op is not one this packer reproduces (not int8, several packers, an
    /// unknown format, or mn not the innermost axis).
    pub fn for_op(op: &OptMatMulPack, input: &TypedFact, output: &TypedFact) -> Option<Self> {
        if input.datum_type.size_of() != 1 || !input.datum_type.unquantized().is_integer() {
            return None;
        }
        let fact = output
            .exotic_fact
            .as_ref()?
            .downcast_ref::<tract_onnx::tract_core::ops::matmul::pack::DynPackedExoticFact>(
        )?;
        if fact.packers.len() != 1 {
            return None;
        }
        let format = fact.packers[0].clone();
        let layout = layout_of(&*format)?;
        let mapping = op.axes_mapping(&[input], &[output]).ok()?;
        let axis_of = |repr: char| -> Option<usize> {
            mapping
                .iter_all_axes()
                .find(|a| a.repr == repr)
                .and_then(|a| a.inputs[0].first().copied())
        };
        let (k_axis, mn_axis) = (axis_of('K')?, axis_of('M')?);
        if mn_axis + 1 != input.rank() || k_axis == mn_axis {
            return None;
        }
        Some(FastPackI8 {
            inner: op.clone(),
            format,
            layout,
            k_axis,
            mn_axis,
        })
    }

    fn pack_all(&self, input: &Tensor) -> TractResult<Option<Tensor>> {
        let shape = input.shape();
        let strides = input.strides();
        if strides[self.mn_axis] != 1 || strides[self.k_axis] < 0 {
            return Ok(None);
        }
        let (k, mn) = (shape[self.k_axis], shape[self.mn_axis]);
        let row_stride = strides[self.k_axis] as usize;
        let bytes: &[u8] = input.as_bytes();
        let mut batch_shape: TVec<usize> = shape.into();
        batch_shape[self.k_axis] = 1;
        batch_shape[self.mn_axis] = 1;
        // Byte offset of every batch item (all axes but k and mn), in row-major order: the
        // order `PackedMatrixStorage::new_batched` expects.
        let mut items: Vec<usize> = vec![0];
        for (axis, &n) in batch_shape.iter().enumerate() {
            if n > 1 {
                let s = strides[axis] as usize;
                items = items
                    .iter()
                    .flat_map(|&o| (0..n).map(move |i| o + i * s))
                    .collect();
            }
        }
        let out_shape = self.inner.output_shape(shape);
        pack_items(
            &*self.format,
            self.layout,
            bytes,
            &items,
            [k, mn, row_stride],
            &out_shape,
            input.datum_type(),
        )
    }
}

/// Packs the `k`×`mn` matrices of `bytes` starting at each offset of `items` (rows
/// `row_stride` apart, mn contiguous) into tract's `format` (whose panels are `layout`), split
/// over the model's threads; the packed values in a batched storage of shape `out_shape`.
/// `None` when a matrix does not fit in `bytes`.
pub fn pack_items(
    format: &dyn MMMInputFormat,
    layout: Layout,
    bytes: &[u8],
    items: &[usize],
    [k, mn, row_stride]: [usize; 3],
    out_shape: &[usize],
    dt: DatumType,
) -> TractResult<Option<Tensor>> {
    let fill = |item: usize, first: usize, outs: &mut [&mut [u8]]| -> bool {
        let (Some(data), [out]) = (bytes.get(items[item]..), outs) else {
            return false;
        };
        let src = Source {
            data,
            k,
            mn,
            row_stride,
        };
        pack::pack(layout, &src, first, out)
    };
    pack_with(format, layout, [k, mn], items.len(), 0, out_shape, dt, fill)
}

/// The packed values of `n_items` k×mn matrices in tract's `format` (panels `layout`),
/// zeroed, then written by `fill(first_item, first_panel, outs)` in work units run on the
/// model's threads: `unit_items` whole items each (`outs` holds their panels, `first_panel`
/// is 0), or with `unit_items` 0, runs of about 16 KB of one item's panels (`outs` holds
/// that run). `None` when a call of `fill` fails.
#[allow(clippy::too_many_arguments)]
pub fn pack_with<F>(
    format: &dyn MMMInputFormat,
    layout: Layout,
    [k, mn]: [usize; 2],
    n_items: usize,
    unit_items: usize,
    out_shape: &[usize],
    dt: DatumType,
    fill: F,
) -> TractResult<Option<Tensor>>
where
    F: Fn(usize, usize, &mut [&mut [u8]]) -> bool + Sync,
{
    let pl = layout.panel_len(k);
    let panels = layout.panels(mn);
    let align = match layout {
        Layout::Plain { align, .. } => align.max(16),
        Layout::K4 { .. } => 64,
    };
    let len = panels * pl;
    let mem = std::alloc::Layout::from_size_align(len + PANEL_SLACK, align)?;
    let mut blobs: Vec<Blob> = (0..n_items)
        .map(|_| {
            // SAFETY: `mem` is a valid layout (checked above); the bytes are zeroed
            // before anything reads or hands them out.
            let mut blob = unsafe { Blob::for_layout(mem) };
            blob.as_bytes_mut().fill(0);
            blob
        })
        .collect();
    // Work units: runs of panels of one item, about 16 KB each, or runs of whole items.
    let mut units: Vec<(usize, usize, Vec<&mut [u8]>)> = Vec::new();
    if unit_items == 0 {
        let per_unit = (16 * 1024 / pl.max(1)).max(1);
        for (item, blob) in blobs.iter_mut().enumerate() {
            for (j, chunk) in blob.as_bytes_mut()[..len]
                .chunks_mut(per_unit * pl)
                .enumerate()
            {
                units.push((item, j * per_unit, vec![chunk]));
            }
        }
    } else {
        for (u, run) in blobs.chunks_mut(unit_items).enumerate() {
            let outs = run
                .iter_mut()
                .map(|b| &mut b.as_bytes_mut()[..len])
                .collect();
            units.push((u * unit_items, 0, outs));
        }
    }
    let run = |(item, first, outs): &mut (usize, usize, Vec<&mut [u8]>)| fill(*item, *first, outs);
    let total = panels * pl * n_items;
    let ok = match current_tract_executor() {
        Executor::MultiThread(pool)
            if pool.current_num_threads() > 1 && total >= PARALLEL_MIN_BYTES =>
        {
            pool.install(|| units.par_iter_mut().all(run))
        }
        _ => units.iter_mut().all(run),
    };
    if !ok {
        return Ok(None);
    }
    let values: TVec<Box<dyn MMMInputValue>> = blobs
        .into_iter()
        .map(|blob| {
            Box::new(EagerPackedInput {
                fact: PackedExoticFact {
                    format: tract_onnx::tract_core::dyn_clone::clone_box(format),
                    mn: mn.to_dim(),
                    k,
                },
                packed: Arc::new(blob),
                panel_bytes: pl,
                mn,
            }) as Box<dyn MMMInputValue>
        })
        .collect();
    Ok(Some(
        PackedMatrixStorage::new_batched(out_shape, values).into_tensor(dt),
    ))
}

/// The panel layout of a tract packing format, when it is one [`pack`] writes.
pub fn layout_of(format: &dyn MMMInputFormat) -> Option<Layout> {
    if let Some(f) = format.downcast_ref::<PackedI8K4>() {
        return Some(Layout::K4 { r: f.r });
    }
    if let Some(f) = format.downcast_ref::<PackedFormat>() {
        if f.dt.size_of() == 1 && f.dt.unquantized().is_integer() {
            return Some(Layout::Plain {
                r: f.r,
                align: f.alignment_bytes,
                pad_records: f.end_padding_record,
            });
        }
    }
    None
}

impl Op for FastPackI8 {
    fn name(&self) -> StaticName {
        "FastPackI8".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "{:?} (lookout's packer for tract's {}). k axis: {}, mn axis: {}",
            self.layout, self.format, self.k_axis, self.mn_axis
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for FastPackI8 {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        eval_or_tract_op(&self.inner, ctx, inputs, |inputs| match inputs {
            [input] => self.pack_all(input),
            _ => Ok(None),
        })
    }

    op_out_of_plan!();
}

impl TypedOp for FastPackI8 {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        self.inner.output_facts(inputs)
    }

    fn axes_mapping(
        &self,
        inputs: &[&TypedFact],
        outputs: &[&TypedFact],
    ) -> TractResult<AxesMapping> {
        self.inner.axes_mapping(inputs, outputs)
    }

    as_op!();
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use tract_onnx::tract_core::tract_linalg::mmm::MMMInputValue;

    pub(in crate::detect::int8) use super::super::qconv::noise_i8;

    /// The bytes of every packed value of a `PackedMatrixStorage` tensor, with the region each
    /// layout defines (Plain: the data records of each panel; K4: everything).
    pub(in crate::detect::int8) fn packed_items(t: &Tensor, layout: Layout) -> Vec<Vec<u8>> {
        let storage = t
            .try_storage_as::<PackedMatrixStorage>()
            .expect("packed storage");
        storage
            .values()
            .iter()
            .map(|v| {
                let e = v
                    .downcast_ref::<EagerPackedInput>()
                    .expect("eager packed input");
                defined(e.packed.as_bytes(), layout, e.fact.k, e.mn)
            })
            .collect()
    }

    fn defined(bytes: &[u8], layout: Layout, k: usize, mn: usize) -> Vec<u8> {
        let pl = layout.panel_len(k);
        // tract's packing is exact; lookout's has PANEL_SLACK zeroed bytes after it.
        let len = pl * layout.panels(mn);
        assert!(
            bytes.len() == len || bytes.len() == len + PANEL_SLACK,
            "packed length"
        );
        assert!(bytes[len..].iter().all(|&b| b == 0), "slack not zeroed");
        let bytes = &bytes[..len];
        match layout {
            Layout::K4 { .. } => bytes.to_vec(),
            Layout::Plain { r, .. } => bytes
                .chunks_exact(pl)
                .flat_map(|p| p[..k * r].iter().copied())
                .collect(),
        }
    }

    fn one_value(v: &dyn MMMInputValue) -> &EagerPackedInput {
        v.downcast_ref::<EagerPackedInput>().expect("eager")
    }

    /// Our packer against tract's own, for every format lookout can meet on a Pi or a PC
    /// (K4 for the dot-product kernels, 8- and 4-lane plain panels), on random int8 matrices of
    /// the shipped models' geometries and odd ones, at byte level.
    #[test]
    fn equals_tract_packers_byte_for_byte() {
        let formats: Vec<Box<dyn MMMInputFormat>> = vec![
            Box::new(PackedI8K4::new(8)),
            Box::new(PackedI8K4::new(16)),
            Box::new(PackedFormat::new(DatumType::I8, 8, 16)),
            Box::new(PackedFormat::new(DatumType::I8, 8, 1).with_end_padding_record(0)),
            Box::new(PackedFormat::new(DatumType::I8, 4, 4)),
        ];
        // (k, mn): 3x3 i2c convs (k = 9·C) on 52/26/13-wide rows, 1x1 convs, the stem's 27,
        // and odd shapes (k not a multiple of 4, mn under one panel).
        let shapes = [
            (864, 52),
            (1152, 26),
            (96, 52),
            (27, 208),
            (2160, 13),
            (5, 3),
            (7, 9),
            (1, 17),
            (130, 33),
        ];
        for format in &formats {
            let layout = layout_of(&**format).expect("a layout we write");
            for &(k, mn) in &shapes {
                let data = noise_i8(k * mn, (k * 1000 + mn) as u64);
                let t = Tensor::from_shape(&[k, mn], &data).unwrap();
                let theirs = format.prepare_one_view(&t.view(), 0, 1).unwrap();
                let theirs = one_value(&*theirs);
                assert_eq!(theirs.panel_bytes, layout.panel_len(k), "{format:?} k={k}");
                let mut ours = vec![0xA5; layout.panel_len(k) * layout.panels(mn)];
                // SAFETY: an i8 slice viewed as the same number of u8.
                let bytes = unsafe { t.as_slice_unchecked::<u8>() };
                let src = Source {
                    data: bytes,
                    k,
                    mn,
                    row_stride: mn,
                };
                assert!(pack::pack(layout, &src, 0, &mut ours));
                assert_eq!(
                    defined(theirs.packed.as_bytes(), layout, k, mn),
                    defined(&ours, layout, k, mn),
                    "{format:?} k={k} mn={mn}"
                );
            }
        }
    }

    /// Every int8 pack of the shipped models, as tract optimized them on this CPU: our op and
    /// the `OptMatMulPack` it replaces, on the same random input, give the same packed bytes
    /// for every batch item, with the same facts; on 1 and on 2 threads.
    #[test]
    fn replaces_every_pack_of_the_shipped_models_exactly() {
        for (file, size) in [
            ("models/nanodet-g-416-int8.onnx", 416),
            ("models/nanodet-g-320-int8.onnx", 320),
            super::super::tests::I2CS_INT8,
        ] {
            let model = super::super::tests::optimized(file, size);
            let mut seen = 0;
            for node in model.nodes() {
                let Some(op) = node.op_as::<OptMatMulPack>() else {
                    continue;
                };
                let input = model.outlet_fact(node.inputs[0]).unwrap();
                let Some(ours) = FastPackI8::for_op(op, input, &node.outputs[0].fact) else {
                    // Only a packing lookout does not write may be left (on a CPU with AMX,
                    // tract packs some activations as AMX A tiles).
                    let fact = node.outputs[0].fact.exotic_fact.as_ref().and_then(|f| {
                        f.downcast_ref::<tract_onnx::tract_core::ops::matmul::pack::DynPackedExoticFact>()
                    });
                    assert!(
                        fact.is_some_and(|f| f.packers.iter().all(|p| layout_of(&**p).is_none())),
                        "{file}: {} not taken",
                        node.name
                    );
                    continue;
                };
                assert_eq!(
                    ours.output_facts(&[input]).unwrap(),
                    op.output_facts(&[input]).unwrap()
                );
                let shape: Vec<usize> = input.shape.as_concrete().unwrap().to_vec();
                let data = noise_i8(shape.iter().product(), node.id as u64);
                let x = Tensor::from_shape(&shape, &data)
                    .unwrap()
                    .cast_to_dt(input.datum_type)
                    .unwrap()
                    .into_owned();
                let ctx = EvalContext::out_of_plan();
                let theirs = op.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap();
                let want = packed_items(&theirs[0], ours.layout);
                for threads in [1, 2] {
                    let got = tract_linalg::multithread::multithread_tract_scope(
                        Executor::multithread(threads),
                        || ours.eval(&ctx, tvec!(x.clone().into_tvalue())).unwrap(),
                    );
                    assert_eq!(got[0].shape(), theirs[0].shape(), "{}", node.name);
                    assert_eq!(
                        packed_items(&got[0], ours.layout),
                        want,
                        "{file}: {} on {threads} thread(s)",
                        node.name
                    );
                }
                seen += 1;
            }
            // With the in-graph im2col: 33 where every pack is one lookout writes, 25 on a CPU
            // with AMX. Without (the shipped files): the six 1×1 convs' packs (tract lowers the
            // 3×3 convs with its eager im2col, which packs itself).
            let least = if file == super::super::tests::I2CS_INT8.0 {
                20
            } else {
                6
            };
            assert!(seen >= least, "{file}: only {seen} int8 packs");
        }
    }
}
