//! `QConvI8`: lookout's int8 1×1 convolution, put in place of tract's quantized `Conv` before
//! tract optimizes the model.
//!
//! The shipped INT8 graphs compute every convolution but the stem as a 1×1 `QLinearConv`
//! over an in-graph im2col (or over the activations themselves). tract lowers each of them
//! into a "dequantizing" einsum patch of about 60 nodes and ten axis fixes before it picks a
//! kernel, then runs one small matmul per output row. The lowering is most of INT8's load
//! time; the per-row matmuls are a kernel driver's worth of overhead per image.
//!
//! This op runs the same computation with tract's own int8 kernel, picked the way tract picks
//! it (`MmmDispatch::native()`), and the same fused requantization tract ends with:
//! `+ bias (per row) → QScale(scale) → + y0 → min 127 → max −128 → store i8`, the scale
//! being `Scaler::new(xs·ks / ys, RoundingPolicy::Even)` as tract builds it. The weights are
//! packed once, when the op is built. At run time the output is cut into bands of whole
//! output rows (about 128 KB of packed activations); each band's activations are
//! packed by lookout's packer ([`super::pack`]) into a buffer that stays in the cache and the
//! kernel writes the band's output in place. Bands run on the model's threads. When the
//! convolution reads a [`FastTaps`] (an in-graph im2col) and nothing else does, the taps are
//! written band by band too, so the im2col tensor never exists whole.
//!
//! It takes a convolution only when it is exactly what it computes: a 2-D kernel without
//! dilation (a window larger than 1×1 or a stride: the op writes its im2col itself), one
//! group, NCHW, int8 in and out, per-tensor scales, zero input and weight zero points, and a
//! kernel whose packing lookout's packer writes. Anything else stays tract's. On x86 with
//! AVX-512 VNNI the stem's 3×3 stride-2 window over a few channels skips the im2col and the
//! matmul: lookout's [`stem`] convolution computes those bands from the input.

use std::sync::Arc;

use rayon::prelude::*;
use tract_linalg::multithread::{current_tract_executor, multithread_tract_scope, Executor};
use tract_onnx::tract_core::internal::*;
use tract_onnx::tract_core::ops::cnn::{Conv, KernelFormat, PoolSpec};
use tract_onnx::tract_core::ops::nn::DataFormat;
use tract_onnx::tract_core::tract_linalg::mmm::RoundingPolicy;
use tract_onnx::tract_core::tract_linalg::mmm::{
    pick_by_shape, retain_best, AsInputValue, EagerPackedInput, FusedSpec, MMMInputFormat,
    MMMInputValue, MatMatMul, PackedExoticFact, Query, ScratchSpace,
};
use tract_onnx::tract_core::tract_linalg::{BinOp, MmmDispatch, Scaler, WeightType};

use super::fast_pack::{layout_of, PANEL_SLACK};
use super::lut::{lookup_in_place, lookup_into, FastLut};
use super::pack::{self, Layout, Source};
use super::pairwise::{self, PackedWeights};
use super::stem;
use super::taps::FastTaps;
use super::taps_k4;
use super::winograd;

/// About this many bytes of packed activations per band: they stay in the L2 cache of a
/// Pi 4 or 5 between being packed and being read by the kernel.
const BAND_BYTES: usize = 128 * 1024;

/// About this many bytes of transformed inputs per band for [`winograd`] (16 i16 values per
/// tile and input channel): they stay in the L2 cache of a Pi 4 or 5 while the band's
/// output channels are computed.
const WINOGRAD_BAND_BYTES: usize = 256 * 1024;

/// Alignment of the packed activations: a cache line, at least what any of tract's int8
/// kernels loads with aligned vector loads (64 bytes for AVX-512 and AMX).
const PANEL_ALIGN: usize = 64;

/// A thread's working memory for bands, kept between bands and frames (one allocation per
/// thread instead of three per band): the band's im2col rows, its packed activations (with
/// [`PANEL_SLACK`]), and the kernel's scratch space with the name of the kernel that made it.
/// With [`pairwise`]: the band's columns in its layout and the raw i32 products.
#[derive(Default)]
struct BandMemory {
    taps: Vec<u8>,
    blob: Option<Arc<Blob>>,
    scratch: Option<(String, Box<dyn ScratchSpace>)>,
    columns: Vec<i8>,
    products: Option<Tensor>,
    winograd: winograd::Scratch,
    /// With [`stem`]: the band's outputs, and its padded input rows.
    stem_out: Vec<u8>,
    stem_rows: Vec<u8>,
}

/// A [`QConvI8`]'s weights, packed once for the kernel that computes the products.
#[derive(Debug, Clone)]
enum Weights {
    /// In tract's kernel's A format (its matmul computes them).
    Tract(Arc<Box<dyn MMMInputValue>>),
    /// For lookout's [`pairwise`] kernel (tract's then adds them and requantizes).
    Pairwise(Arc<PackedWeights>),
    /// For lookout's [`winograd`] 3×3 convolution (tract's then adds them and requantizes).
    Winograd(Arc<winograd::Weights>),
    /// For lookout's [`stem`] convolution, which computes the whole band itself (the input's
    /// plane size with it).
    Stem(Arc<stem::Weights>, [usize; 2]),
}

impl PartialEq for Weights {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Weights::Tract(a), Weights::Tract(b)) => a.dyn_eq(&***b),
            (Weights::Pairwise(a), Weights::Pairwise(b)) => a == b,
            (Weights::Winograd(a), Weights::Winograd(b)) => a == b,
            (Weights::Stem(a, x), Weights::Stem(b, y)) => a == b && x == y,
            _ => false,
        }
    }
}

/// Which matmul a [`QConvI8`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPolicy {
    /// lookout's [`pairwise`] kernel, and its [`winograd`] convolution for the 3×3 stride-1
    /// convolutions, where tract's choice is its int8 kernel without the dot product on
    /// aarch64 (`arm64simd_mmm_i32_8x8`: Pi 4, Pi 3, Zero 2 W); tract's elsewhere.
    Auto,
    /// lookout's [`pairwise`] kernel wherever the weights fit (its portable code off
    /// aarch64: for tests), and never [`winograd`].
    Pairwise,
    /// lookout's [`winograd`] convolution for every 3×3 stride-1 convolution it computes
    /// exactly, its [`pairwise`] kernel for the others (portable code off aarch64: for
    /// tests).
    Winograd,
    /// tract's kernels only.
    Tract,
}

/// Whether 3×3 stride-1 convolutions may be packed straight from their input ([`taps_k4`]):
/// yes unless `LOOKOUT_INT8_TAPS=im2col` (A/B comparisons: the im2col written, then packed),
/// read once.
fn direct_3x3() -> bool {
    static DIRECT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DIRECT.get_or_init(|| std::env::var("LOOKOUT_INT8_TAPS").map_or(true, |v| v != "im2col"))
}

impl KernelPolicy {
    /// From `LOOKOUT_INT8_KERNEL`: [`pairwise::NAME`] asks for lookout's kernel, the name of
    /// one of tract's for tract's (which one is then picked in [`QConvI8::for_node`]),
    /// nothing for [`KernelPolicy::Auto`].
    pub fn from_env() -> Self {
        match std::env::var("LOOKOUT_INT8_KERNEL") {
            Ok(v) if v == pairwise::NAME => KernelPolicy::Pairwise,
            Ok(v) if v == winograd::NAME => KernelPolicy::Winograd,
            Ok(v) if !v.is_empty() => KernelPolicy::Tract,
            _ => KernelPolicy::Auto,
        }
    }

    /// Whether to run [`pairwise`] instead of tract's `kernel`.
    fn pairwise_over(self, kernel: &str) -> bool {
        match self {
            KernelPolicy::Auto => {
                cfg!(target_arch = "aarch64")
                    && kernel.starts_with("arm64simd_mmm_i32_8x8")
                    && !kernel.contains("dot")
            }
            KernelPolicy::Pairwise | KernelPolicy::Winograd => true,
            KernelPolicy::Tract => false,
        }
    }

    /// Whether to run [`winograd`] for the 3×3 stride-1 convolutions instead of tract's
    /// `kernel`.
    fn winograd_over(self, kernel: &str) -> bool {
        match self {
            KernelPolicy::Auto | KernelPolicy::Winograd => self.pairwise_over(kernel),
            KernelPolicy::Pairwise | KernelPolicy::Tract => false,
        }
    }
}

thread_local! {
    static BAND_MEMORY: std::cell::RefCell<BandMemory> = std::cell::RefCell::new(BandMemory::default());
}

/// What one band multiplies ([`QConvI8::band_source`]).
enum BandSource<'a> {
    /// A k × cols matrix (the input's columns or the written taps).
    Matrix(Source<'a>),
    /// A 3×3 same convolution's taps, to be packed straight from its input planes.
    Taps3x3([(usize, usize); 9], taps_k4::Band, &'a [u8]),
}

/// The op that replaces one quantized 1×1 `Conv`.
#[derive(Debug, Clone)]
pub struct QConvI8 {
    /// Output channels (the matmul's m).
    m: usize,
    /// Input channels (k).
    k: usize,
    /// tract's kernel and the index of its packing (with [`pairwise`], the kernel adds the
    /// products and requantizes).
    mmm: Box<dyn MatMatMul>,
    packing: usize,
    /// The weights, packed once for the kernel that computes the products.
    weights: Weights,
    /// The kernel's B format and its panel layout (what [`pack::pack`] writes).
    b_format: Box<dyn MMMInputFormat>,
    b_layout: Layout,
    /// Per output channel bias, i32, `[m]`.
    bias: Arc<Tensor>,
    scaler: Scaler,
    /// Output zero point, added after scaling.
    y0: Arc<Tensor>,
    /// Clamp bounds of the int8 output, as i32 scalars.
    lo: Arc<Tensor>,
    hi: Arc<Tensor>,
    /// The output's datum type (i8 or a quantized i8).
    out_dt: DatumType,
    /// When the convolution reads an in-graph im2col: the taps, written band by band (the
    /// op's input is then the taps' input).
    taps: Option<FastTaps>,
    /// The 8-bit lookup table (the graph's LeakyReLU, [`FastLut`]) that followed the
    /// convolution, applied to each band's output right after the kernel stored it, while it
    /// is in cache ([`QConvI8::with_lut`]).
    lut: Option<Box<[u8; 256]>>,
}

impl PartialEq for QConvI8 {
    fn eq(&self, other: &Self) -> bool {
        self.m == other.m
            && self.k == other.k
            && self.mmm.name() == other.mmm.name()
            && self.packing == other.packing
            && self.bias == other.bias
            && self.scaler == other.scaler
            && self.y0 == other.y0
            && self.out_dt == other.out_dt
            && self.taps == other.taps
            && self.weights == other.weights
            && self.lut == other.lut
    }
}
impl Eq for QConvI8 {}

impl std::hash::Hash for QConvI8 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.m.hash(state);
        self.k.hash(state);
        self.mmm.name().hash(state);
        self.bias.hash(state);
        self.scaler.hash(state);
        self.taps.hash(state);
        self.lut.hash(state);
        match &self.weights {
            Weights::Pairwise(w) => w.hash(state),
            Weights::Winograd(w) => w.hash(state),
            Weights::Stem(w, hw) => {
                w.hash(state);
                hw.hash(state);
            }
            Weights::Tract(_) => {}
        }
    }
}

/// The constant input `ix` of `node`, when it is one: a constant, or one op of constants
/// that tract would fold (the typed graph's bias is a `Cast` of a constant).
fn konst(model: &TypedModel, node: &TypedNode, ix: usize) -> Option<Arc<Tensor>> {
    let outlet = *node.inputs.get(ix)?;
    if let Some(k) = &model.outlet_fact(outlet).ok()?.konst {
        return Some(k.clone());
    }
    let producer = model.node(outlet.node);
    let inputs: TVec<TValue> = producer
        .inputs
        .iter()
        .map(|i| Some(model.outlet_fact(*i).ok()?.konst.clone()?.into_tvalue()))
        .collect::<Option<_>>()?;
    if inputs.is_empty() {
        return None;
    }
    let outputs = producer.op.eval_out_of_plan(inputs).ok()??;
    Some(outputs.get(outlet.slot)?.clone().into_arc_tensor())
}

/// A scalar constant as f32 (a scale), when it holds one value.
fn scalar_f32(t: &Tensor) -> Option<f32> {
    (t.len() == 1)
        .then(|| t.cast_to_scalar::<f32>().ok())
        .flatten()
}

/// A zero point as i32, when it holds one value.
fn zero_point(t: &Tensor) -> Option<i32> {
    if t.len() != 1 {
        return None;
    }
    let t = t.clone().into_tensor();
    let t = if t.datum_type().is_quantized() {
        t.cast_to_dt(t.datum_type().unquantized())
            .ok()?
            .into_owned()
    } else {
        t
    };
    t.cast_to_scalar::<i32>().ok()
}

/// tract's AMX tier answers its 8×8 AMX tile when m, n or k is small (k < 64: one AMX step
/// reads 64 bytes of depth). That kernel configures the tiles (`ldtilecfg`) and releases them on
/// every call, one call per 8×8 output tile: the stem (32×27, 208² outputs) took 22.6 ms there
/// on a Sapphire Rapids core, half of the whole INT8 image; with the 16-wide VNNI tile 1.7 ms,
/// with the 16×16 AMX tile 2.5 ms (`lookout bench --inference-only`, per-op table). So in its
/// place: the 16×16 AMX tile when k fills an AMX step, else the 16×16 VNNI tile, when suitable
/// and m fills 16 rows (a band's n always does).
///
/// On a CPU with AVX-512 VNNI and no AMX tract answers its 8×8 VNNI tile; the 16×16 one
/// (a whole 512-bit register per row of 16 outputs) is faster on every convolution of the
/// shipped model: 23.1 → 18.1 ms for all 34 on an AMD Zen 4 core (docs/int8.md). So it takes
/// that one's place too, when suitable and m fills 16 rows. Any other choice is kept.
fn past_small_amx_tile(
    mmm: Box<dyn MatMatMul>,
    packing: usize,
    suitable: &[tract_linalg::mmm::Suitable],
    m: usize,
    k: usize,
) -> (Box<dyn MatMatMul>, usize) {
    if m < 16 {
        return (mmm, packing);
    }
    let wide = match (mmm.name(), k >= 64) {
        ("avx512amx_mmm_i32_8x8", true) => "avx512amx_mmm_i32_16x16",
        ("avx512amx_mmm_i32_8x8", false) | ("avx512vnni_mmm_i32_8x8", _) => {
            "avx512vnni_mmm_i32_16x16"
        }
        _ => return (mmm, packing),
    };
    match suitable.iter().find(|(s, _, _)| s.name() == wide) {
        Some((s, p, _)) => (s.clone(), *p),
        None => (mmm, packing),
    }
}

/// Signed 8-bit, plain or quantized.
fn is_i8(dt: DatumType) -> bool {
    dt.unquantized() == DatumType::I8
}

/// The quantization of the convolution `node`: the output's zero point and the input,
/// kernel and output scales; `None` unless the input and kernel zero points are 0.
fn quant_params(model: &TypedModel, node: &TypedNode) -> Option<(i32, f32, f32, f32)> {
    let [x0, xs, k0, ks, y0, ys] = [3, 4, 5, 6, 7, 8].map(|ix| konst(model, node, ix));
    if zero_point(&*x0?)? != 0 || zero_point(&*k0?)? != 0 {
        return None;
    }
    let y0 = zero_point(&*y0?)?;
    Some((
        y0,
        scalar_f32(&*xs?)?,
        scalar_f32(&*ks?)?,
        scalar_f32(&*ys?)?,
    ))
}

/// The [m, k] weights packed once: lookout's pairwise layout where `policy` wants it for
/// the kernel `mmm_name`, else tract's packing `a_format`.
fn pack_weights(
    w_i8: &[i8],
    [m, k]: [usize; 2],
    policy: KernelPolicy,
    mmm_name: &str,
    a_format: &dyn MMMInputFormat,
) -> Option<Weights> {
    let pairwise = policy
        .pairwise_over(mmm_name)
        .then(|| PackedWeights::new(w_i8, m, k))
        .flatten();
    Some(match pairwise {
        Some(w) => Weights::Pairwise(Arc::new(w)),
        None => {
            let w2 = Tensor::from_shape(&[m, k], w_i8).ok()?;
            Weights::Tract(Arc::new(a_format.prepare_one(&w2, 1, 0).ok()?))
        }
    })
}

/// The thread's kept i32 products tensor when it holds `need` values, else a new one.
fn reuse_products(kept: &mut Option<Tensor>, need: usize) -> TractResult<Tensor> {
    match kept.take() {
        Some(t) if t.len() >= need => Ok(t),
        _ => Tensor::zero::<i32>(&[need]),
    }
}

/// [`winograd`]'s weights for a 3×3 stride-1 convolution whose im2col `taps` writes, when
/// `policy` wants Winograd over tract's `kernel` and the weights fit it (else the caller
/// packs them for the pairwise kernel or tract's).
fn winograd_weights(
    w_i8: &[i8],
    m: usize,
    taps: Option<&FastTaps>,
    policy: KernelPolicy,
    kernel: &str,
) -> Option<Weights> {
    if !policy.winograd_over(kernel) {
        return None;
    }
    let (at, c) = taps?.same_3x3()?;
    let w = winograd::Weights::from_taps(w_i8, m, c, at)?;
    Some(Weights::Winograd(Arc::new(w)))
}

/// The im2col of a convolution's window (`spec` over an input of shape `x_shape`), and its
/// padding before the rows and columns.
fn window_taps(
    spec: &PoolSpec,
    x_shape: &[usize],
    strides: [usize; 2],
    dt: DatumType,
) -> Option<(FastTaps, [usize; 2])> {
    let pads = spec.computed_padding(x_shape.get(2..)?);
    let pad = |d: usize| Some((pads.get(d)?.pad_before, pads.get(d)?.pad_after));
    let pads = [pad(0)?, pad(1)?];
    let kernel = [*spec.kernel_shape.first()?, *spec.kernel_shape.get(1)?];
    let taps = FastTaps::for_conv(x_shape, kernel, strides, pads, dt)?;
    Some((taps, [pads[0].0, pads[1].0]))
}

/// lookout's [`stem`] convolution for a 3×3 stride-2 window (`kernel`, `strides`, padding
/// `pads` before the `input` planes) over `c` channels into `m`, when `policy` leaves the
/// choice to lookout, the CPU runs it and it computes these weights (OIHW `w`), `bias` and
/// requantization exactly.
fn stem_weights(
    policy: KernelPolicy,
    w: &[u8],
    [c, m]: [usize; 2],
    bias: &[i32],
    (scaler, y0): (Scaler, i32),
    (kernel, strides, pads, input): ([usize; 2], [usize; 2], [usize; 2], [usize; 2]),
) -> Option<Weights> {
    if policy != KernelPolicy::Auto || kernel != [3, 3] || strides != [2, 2] || !stem::available() {
        return None;
    }
    let oihw: Vec<i8> = w.iter().map(|&b| b as i8).collect();
    let s = stem::Weights::new(&oihw, [c, m], bias, scaler, y0, pads)?;
    Some(Weights::Stem(Arc::new(s), input))
}

/// The bias of the convolution `node` as `m` i32 values (one per output channel, or one for
/// all), `None` when it is missing or of another length.
fn bias_of(model: &TypedModel, node: &TypedNode, m: usize) -> Option<Vec<i32>> {
    match konst(model, node, 2) {
        Some(b) if b.len() == m => Some(
            b.cast_to::<i32>()
                .ok()?
                .to_plain_array_view::<i32>()
                .ok()?
                .iter()
                .copied()
                .collect(),
        ),
        Some(b) if b.len() == 1 => Some(vec![b.cast_to_scalar::<i32>().ok()?; m]),
        _ => None,
    }
}

/// tract's choice of matmul kernel for `query` among those whose activation packing
/// lookout's packer writes (on a CPU with AMX, tract's first choice packs the activations as
/// A tiles), with its packing index.
fn choose_kernel(query: &Query, m: usize, k: usize) -> Option<(Box<dyn MatMatMul>, usize)> {
    let dispatch = MmmDispatch::native();
    let mut suitable = dispatch.suitable(query);
    suitable.retain(|(mmm, p, extractor)| {
        extractor.is_none()
            && mmm
                .packings()
                .get(*p)
                .is_some_and(|(_, b)| layout_of(&**b).is_some())
    });
    // `LOOKOUT_INT8_KERNEL=<name>` picks one of them by name (A/B comparisons).
    if let Ok(want) = std::env::var("LOOKOUT_INT8_KERNEL") {
        if suitable.iter().any(|(mmm, _, _)| mmm.name() == want) {
            suitable.retain(|(mmm, _, _)| mmm.name() == want);
        }
    }
    let (mmm, packing, _) = match dispatch.preferred(query, &suitable) {
        Some(chosen) => chosen,
        None => {
            // tract's generic rules, then the widest tile (as `MmmDispatch::pick`).
            retain_best(&mut suitable);
            let ix = pick_by_shape(query, &suitable).or_else(|| {
                (0..suitable.len()).max_by_key(|&i| suitable[i].0.mr() * suitable[i].0.nr())
            })?;
            suitable.swap_remove(ix)
        }
    };
    Some(past_small_amx_tile(mmm, packing, &suitable, m, k))
}

/// The weights (OIHW bytes, possibly typed as a quantized i8: read as plain i8) as an
/// [m, k] i8 matrix in the taps' order: kernel position first, then input channel (the same
/// for a 1×1 kernel). A 1×1 kernel is a copy; a window gathers each tap's row with a stride
/// (iterator adaptors or a loop per source byte cost 20+ instructions per weight on aarch64,
/// tens of millions at load: armcost).
fn weights_in_taps_order(wb: &[u8], m: usize, k: usize, c: usize, taps_n: usize) -> Vec<i8> {
    let mut w_i8: Vec<i8> = vec![0; m * k];
    for (per_out, dst) in wb.chunks_exact(c * taps_n).zip(w_i8.chunks_exact_mut(k)) {
        if taps_n == 1 {
            for (d, &b) in dst.iter_mut().zip(per_out) {
                *d = b as i8;
            }
            continue;
        }
        for (t, row) in dst.chunks_exact_mut(c).enumerate() {
            let from = &per_out[t..];
            for (ci, d) in row.iter_mut().enumerate() {
                *d = from[ci * taps_n] as i8;
            }
        }
    }
    w_i8
}

impl QConvI8 {
    /// The replacement for `node` when it is a quantized convolution this op computes exactly
    /// (module doc); `taps` when its input is an in-graph im2col it should write itself; the
    /// kernel as `policy` says.
    pub fn for_node(
        model: &TypedModel,
        node: &TypedNode,
        taps: Option<FastTaps>,
        policy: KernelPolicy,
    ) -> Option<Self> {
        let conv = node.op_as::<Conv>()?;
        if node.inputs.len() != 9 || conv.group != 1 || !conv.q_params.is_some_and(is_i8) {
            return None;
        }
        let spec = &conv.pool_spec;
        let ones = |v: &Option<TVec<usize>>| v.as_ref().is_none_or(|v| v.iter().all(|&s| s == 1));
        if spec.data_format != DataFormat::NCHW
            || spec.kernel_shape.len() != 2
            || !ones(&spec.dilations)
            || conv.kernel_fmt != KernelFormat::OIHW
        {
            return None;
        }
        let x_fact = model.outlet_fact(node.inputs[0]).ok()?;
        let out_fact = &node.outputs.first()?.fact;
        let x_shape = x_fact.shape.as_concrete()?;
        let out_shape = out_fact.shape.as_concrete()?;
        if !is_i8(x_fact.datum_type) || !is_i8(out_fact.datum_type) || x_shape.len() != 4 {
            return None;
        }
        let (c, m) = (spec.input_channels, spec.output_channels);
        let (kh, kw) = (spec.kernel_shape[0], spec.kernel_shape[1]);
        // A kernel larger than 1×1 or a stride: the op writes the convolution's im2col itself
        // (taps of the unpadded input, zeros for the padding: the input zero point is 0).
        let windowed = kh * kw != 1 || !ones(&spec.strides);
        let strides = spec.strides.as_ref().map_or([1, 1], |s| [s[0], s[1]]);
        let mut pads_before = [0, 0];
        let taps = match (windowed, taps) {
            (true, Some(_)) => return None,
            (true, None) => {
                let (t, before) = window_taps(spec, x_shape, strides, x_fact.datum_type)?;
                pads_before = before;
                Some(t)
            }
            (false, taps) => taps,
        };
        // The matmul's k, and the output's spatial size.
        let (k, [oh, ow]) = match &taps {
            Some(t) if windowed => (c * kh * kw, [t.out_shape()[2], t.out_shape()[3]]),
            _ => (c, [x_shape[2], x_shape[3]]),
        };
        if x_shape[1] != c || out_shape != [x_shape[0], m, oh, ow] {
            return None;
        }
        let w = konst(model, node, 1)?;
        if !is_i8(w.datum_type()) || w.len() != m * k {
            return None;
        }
        let (y0, xs, ks, ys) = quant_params(model, node)?;
        let bias = bias_of(model, node, m)?;
        let n = oh * ow;
        let query = Query {
            weight: WeightType::Plain(DatumType::I8),
            activation: DatumType::I8,
            accumulators: tvec!(DatumType::I32),
            store: Some(DatumType::I8),
            allow_extractor: false,
            m: Some(m),
            k: Some(k),
            n: Some(n),
        };
        let (mmm, packing) = choose_kernel(&query, m, k)?;
        let (a_format, b_format) = mmm.packings().get(packing)?;
        let b_layout = layout_of(&**b_format)?;
        let w_i8 = weights_in_taps_order(w.as_bytes(), m, k, c, kh * kw);
        let scaler = Scaler::new(xs * ks / ys, RoundingPolicy::Even);
        let window = ([kh, kw], strides, pads_before, [x_shape[2], x_shape[3]]);
        let stem = stem_weights(policy, w.as_bytes(), [c, m], &bias, (scaler, y0), window);
        let weights = match stem {
            Some(s) => s,
            None => winograd_weights(&w_i8, m, taps.as_ref(), policy, mmm.name())
                .or_else(|| pack_weights(&w_i8, [m, k], policy, mmm.name(), &**a_format))?,
        };
        let op = QConvI8 {
            m,
            k,
            mmm: mmm.clone(),
            packing,
            weights,
            b_format: b_format.clone(),
            b_layout,
            bias: Arc::new(Tensor::from_shape(&[m], &bias).ok()?),
            scaler,
            y0: Arc::new(tensor0(y0)),
            lo: Arc::new(tensor0(i8::MIN as i32)),
            hi: Arc::new(tensor0(i8::MAX as i32)),
            out_dt: out_fact.datum_type,
            taps,
            lut: None,
        };
        op.fusable().then_some(op)
    }

    /// This convolution followed by `lut` (which read its output and nothing else), as one
    /// op: each band looked up in place right after the kernel stored it. `None` when the
    /// table does not apply to this output (another type, or a table already there).
    pub fn with_lut(&self, lut: &FastLut) -> Option<Self> {
        if self.lut.is_some() || lut.datum_type() != self.out_dt {
            return None;
        }
        Some(QConvI8 {
            lut: Some(Box::new(*lut.table()?)),
            ..self.clone()
        })
    }

    /// Whether a lookup table runs after the kernel ([`QConvI8::with_lut`]).
    pub fn has_lut(&self) -> bool {
        self.lut.is_some()
    }

    /// Whether the kernel fuses every step of the requantization (else tract keeps the conv).
    fn fusable(&self) -> bool {
        let added = matches!(self.weights, Weights::Tract(_))
            || self.mmm.can_fuse(&FusedSpec::AddUnicast(
                // SAFETY: a spec built only to ask the kernel whether it fuses the step; it
                // is never run.
                unsafe {
                    self.mmm
                        .c_from_data_and_strides(4, 1, 1)
                        .wrap(&self.bias.view())
                },
            ));
        added && self.specs_then(|specs| specs.iter().all(|s| self.mmm.can_fuse(s)))
    }

    /// The fused steps after the matmul, without the store, handed to `f`.
    fn specs_then<R>(&self, f: impl FnOnce(&[FusedSpec]) -> R) -> R {
        let mut specs = vec![
            FusedSpec::BinPerRow(self.bias.view(), BinOp::Add),
            self.scaler.as_fused_spec(),
        ];
        if self.y0.cast_to_scalar::<i32>().unwrap_or(0) != 0 {
            specs.push(FusedSpec::BinScalar(&self.y0, BinOp::Add));
        }
        specs.push(FusedSpec::BinScalar(&self.hi, BinOp::Min));
        specs.push(FusedSpec::BinScalar(&self.lo, BinOp::Max));
        f(&specs)
    }

    /// The name of the kernel that computes the products (for the load line).
    pub fn kernel_name(&self) -> &str {
        match self.weights {
            Weights::Pairwise(_) => pairwise::NAME,
            Weights::Winograd(_) => winograd::NAME,
            Weights::Stem(..) => stem::NAME,
            Weights::Tract(_) => self.mmm.name(),
        }
    }

    /// The matmul's input shape `[batch, k, h, w]` for an op input of shape `input`.
    fn matmul_input_shape(&self, input: &[usize]) -> TVec<usize> {
        match &self.taps {
            Some(t) => t.out_shape().into(),
            None => input.into(),
        }
    }

    /// One band: output rows `y0..y0 + rows` of batch item `b` (`[b, y0, rows]`), of an input
    /// whose matmul shape is `k × h·w` (`[k, h, w]`), written into `out`, then looked up in
    /// the op's table when it has one.
    fn band(
        &self,
        mem: &mut BandMemory,
        src: &[u8],
        out: &Tensor,
        [b, y0, rows]: [usize; 3],
        [k, h, w]: [usize; 3],
    ) -> TractResult<()> {
        if let Weights::Stem(wts, input) = &self.weights {
            return self.band_stem(mem, wts, *input, src, out, [b, y0, rows], [h, w]);
        }
        self.band_products(mem, src, out, [b, y0, rows], [k, h, w])?;
        let Some(table) = &self.lut else {
            return Ok(());
        };
        let (n, y1) = (h * w, (y0 + rows).min(h));
        let cols = (y1 - y0) * w;
        ensure!(
            out.datum_type().size_of() == 1 && out.len() >= (b + 1) * self.m * n,
            "QConvI8: output of {} values for {} channels of {n}",
            out.len(),
            self.m
        );
        let base = b * self.m * n + y0 * w;
        // A band of whole planes is one run of bytes (all channels); else one run per channel.
        let (runs, len) = if cols == n {
            (1, self.m * n)
        } else {
            (self.m, cols)
        };
        for c in 0..runs {
            // SAFETY: run `c` is the bytes `base + c·n .. + len` of `out` (1-byte values,
            // bounds checked above): channel `c`'s rows y0..y1 of batch item `b`, or with
            // whole planes every channel's; the bytes this band's kernel just stored, which no
            // other band reads or writes; `out` is not read or moved while the bands run (as
            // for the kernel's store, which writes through the same shared tensor).
            let rows = unsafe {
                let first = out.as_ptr_unchecked::<u8>().add(base + c * n) as *mut u8;
                std::slice::from_raw_parts_mut(first, len)
            };
            lookup_in_place(rows, table);
        }
        Ok(())
    }

    /// A band with lookout's [`stem`] convolution: output rows `y0..y0 + rows` of batch item
    /// `b` (`h × w` output planes) straight from the input (`input` planes), into the thread's
    /// band buffer, then copied into `out` through the op's table when it has one.
    #[allow(clippy::too_many_arguments)]
    fn band_stem(
        &self,
        mem: &mut BandMemory,
        wts: &stem::Weights,
        input: [usize; 2],
        src: &[u8],
        out: &Tensor,
        [b, y0, rows]: [usize; 3],
        [h, w]: [usize; 2],
    ) -> TractResult<()> {
        let (n, y1) = (h * w, (y0 + rows).min(h));
        let cols = (y1 - y0) * w;
        let plane = wts.c() * input[0] * input[1];
        let x = src
            .get(b * plane..(b + 1) * plane)
            .context("QConvI8: input too short")?;
        mem.stem_out.resize(self.m * cols, 0);
        let band = stem::Band {
            input,
            output: [h, w],
            rows: [y0, y1],
        };
        ensure!(
            stem::rows(wts, x, band, &mut mem.stem_out, &mut mem.stem_rows),
            "QConvI8: rows {y0}..{y1} do not fit the stem convolution"
        );
        ensure!(
            out.datum_type().size_of() == 1 && out.len() >= (b + 1) * self.m * n,
            "QConvI8: output of {} values for {} channels of {n}",
            out.len(),
            self.m
        );
        for (o, from) in mem
            .stem_out
            .chunks_exact(cols.max(1))
            .take(self.m)
            .enumerate()
        {
            // SAFETY: bytes `(b·m + o)·n + y0·w .. + cols` of `out` (1-byte values, bounds
            // checked above): channel `o`'s rows y0..y1 of batch item `b`, which only this
            // band writes; `out` is not read or moved while the bands run (as for the
            // kernel's store in the other bands, which writes through the same tensor).
            let to = unsafe {
                let first = out
                    .as_ptr_unchecked::<u8>()
                    .add((b * self.m + o) * n + y0 * w);
                std::slice::from_raw_parts_mut(first as *mut u8, cols)
            };
            match &self.lut {
                Some(table) => lookup_into(from, to, table),
                None => to.copy_from_slice(from),
            }
        }
        Ok(())
    }

    /// [`QConvI8::band`] up to the kernel's store (the requantized int8 products).
    fn band_products(
        &self,
        mem: &mut BandMemory,
        src: &[u8],
        out: &Tensor,
        [b, y0, rows]: [usize; 3],
        [k, h, w]: [usize; 3],
    ) -> TractResult<()> {
        let n = h * w;
        let y1 = (y0 + rows).min(h);
        let cols = (y1 - y0) * w;
        let view = TensorView::offsetting(out, &[b, 0, y0, 0])?;
        if let Weights::Winograd(wg) = &self.weights {
            // Straight from the input: no im2col.
            return self.band_winograd(mem, wg, src, &view, [b, y0, y1], [h, w]);
        }
        let source = self.band_source(&mut mem.taps, src, [b, y0, y1], [k, h, w])?;
        let weights = match &self.weights {
            Weights::Tract(w) => w,
            Weights::Pairwise(w) => {
                let BandSource::Matrix(source) = &source else {
                    bail!("QConvI8: a pairwise band without its matrix");
                };
                let memory = (&mut mem.columns, &mut mem.products, &mut mem.scratch);
                return self.band_pairwise(memory, w, source, &view, n);
            }
            _ => bail!("QConvI8: a band without im2col reached it"),
        };
        let pl = self.b_layout.panel_len(k);
        let panels = self.b_layout.panels(cols);
        let len = panels * pl;
        // The packed activations: the thread's blob when no kernel run still holds it.
        let mut blob = mem
            .blob
            .take()
            .filter(|b| Arc::strong_count(b) == 1)
            .unwrap_or_default();
        let bytes = Arc::get_mut(&mut blob).context("QConvI8: packed band still in use")?;
        ensure!(
            std::alloc::Layout::from_size_align(len + PANEL_SLACK, PANEL_ALIGN).is_ok(),
            "QConvI8: {len} packed bytes"
        );
        // SAFETY: size and alignment form a valid layout (checked just above); the blob
        // reallocates only when it is smaller or less aligned, and the bytes read below are
        // packed or zeroed first.
        unsafe { bytes.ensure_size_and_align(len + PANEL_SLACK, PANEL_ALIGN) };
        let bytes = &mut bytes.as_bytes_mut()[..len + PANEL_SLACK];
        // The packer writes every byte of whole panels (padding included); only the slack is
        // left, zeroed here.
        bytes[len..].fill(0);
        let packed = match &source {
            BandSource::Taps3x3(at, band, input) => {
                taps_k4::pack(input, at, *band, &mut bytes[..len])
            }
            BandSource::Matrix(source) => pack::pack(self.b_layout, source, 0, &mut bytes[..len]),
        };
        ensure!(packed, "QConvI8: cannot pack rows {y0}..{y1}");
        let packed = EagerPackedInput {
            fact: PackedExoticFact {
                format: self.b_format.clone(),
                mn: cols.to_dim(),
                k,
            },
            packed: blob.clone(),
            panel_bytes: pl,
            mn: cols,
        };
        let ran = self.run_kernel(
            &mut mem.scratch,
            FusedSpec::AddMatMul {
                a: AsInputValue::Borrowed(&***weights),
                b: AsInputValue::Borrowed(&packed),
                packing: self.packing,
            },
            cols,
            &view,
            n,
        );
        drop(packed);
        mem.blob = Some(blob);
        ran
    }

    /// What a band of output rows `y0..y1` of batch item `b` multiplies (`[k, h, w]`: the
    /// matmul's depth and the output planes): the input's columns; the taps, written into
    /// `taps`; or, for a 3×3 same convolution feeding a dot-product kernel's K4 panels where
    /// [`taps_k4`] has SIMD for them, the input itself, packed straight from it.
    fn band_source<'a>(
        &self,
        taps: &'a mut Vec<u8>,
        src: &'a [u8],
        [b, y0, y1]: [usize; 3],
        [k, h, w]: [usize; 3],
    ) -> TractResult<BandSource<'a>> {
        let (n, cols) = (h * w, (y1 - y0) * w);
        let Some(op_taps) = &self.taps else {
            return Ok(BandSource::Matrix(Source {
                data: src
                    .get(b * k * n + y0 * w..)
                    .context("QConvI8: input too short")?,
                k,
                mn: cols,
                row_stride: n,
            }));
        };
        let direct = match (&self.weights, self.b_layout) {
            (Weights::Tract(_), Layout::K4 { r }) if taps_k4::simd_for(r) && direct_3x3() => {
                op_taps
                    .same_3x3()
                    .filter(|&(_, c)| 9 * c == k)
                    .map(|(at, c)| (r, at, c))
            }
            _ => None,
        };
        if let Some((r, at, c)) = direct {
            let band = taps_k4::Band { c, h, w, y0, y1, r };
            let input = src.get(b * c * n..).unwrap_or_default();
            return Ok(BandSource::Taps3x3(at, band, input));
        }
        // Sized only: the taps write every byte.
        taps.resize(k * cols, op_taps.fill());
        ensure!(
            op_taps.write_rows(src, b, [y0, y1], taps),
            "QConvI8: taps of rows {y0}..{y1} do not fit the input"
        );
        Ok(BandSource::Matrix(Source {
            data: taps,
            k,
            mn: cols,
            row_stride: cols,
        }))
    }

    /// A band with lookout's [`winograd`] convolution: the products of output rows `y0..y1`
    /// of batch item `b` straight from the input (`h × w` planes), then tract's kernel adds
    /// them and requantizes as after its own matmul.
    fn band_winograd(
        &self,
        mem: &mut BandMemory,
        wg: &winograd::Weights,
        src: &[u8],
        view: &TensorView,
        [b, y0, y1]: [usize; 3],
        [h, w]: [usize; 2],
    ) -> TractResult<()> {
        let (n, cols) = (h * w, (y1 - y0) * w);
        let plane = wg.c() * n;
        let input = src
            .get(b * plane..(b + 1) * plane)
            .context("QConvI8: input too short")?;
        let mut products = reuse_products(&mut mem.products, self.m * cols)?;
        let mut plain = products
            .as_plain_ram_mut()
            .context("QConvI8: products not in memory")?;
        let fits = winograd::products(
            wg,
            input,
            [h, w],
            [y0, y1],
            &mut mem.winograd,
            plain.as_slice_mut()?,
            cols,
        );
        ensure!(
            fits,
            "QConvI8: rows {y0}..{y1} do not fit the 3×3 convolution"
        );
        let kept = &mut mem.products;
        self.add_products(&mut mem.scratch, kept, products, [cols, cols], view, n)
    }

    /// A band with lookout's [`pairwise`] kernel: the band's columns packed in its layout,
    /// the raw products into the thread's i32 buffer, then tract's kernel adds them as a
    /// tile and requantizes as it does after its own matmul.
    #[allow(clippy::type_complexity)]
    fn band_pairwise(
        &self,
        (columns, kept_products, scratch): (
            &mut Vec<i8>,
            &mut Option<Tensor>,
            &mut Option<(String, Box<dyn ScratchSpace>)>,
        ),
        weights: &PackedWeights,
        source: &Source,
        view: &TensorView,
        n: usize,
    ) -> TractResult<()> {
        let cols = source.mn;
        columns.resize(pairwise::packed_len(source.k, cols), 0);
        ensure!(
            pairwise::pack_columns(source, columns),
            "QConvI8: cannot pack {} columns of depth {}",
            cols,
            source.k
        );
        let stride = pairwise::n_padded(cols);
        let need = weights.m_padded() * stride;
        let mut products = reuse_products(kept_products, need)?;
        let mut plain = products
            .as_plain_ram_mut()
            .context("QConvI8: products not in memory")?;
        let fits = pairwise::matmul(weights, columns, cols, plain.as_slice_mut()?, stride);
        ensure!(fits, "QConvI8: products of {cols} columns do not fit");
        self.add_products(scratch, kept_products, products, [cols, stride], view, n)
    }

    /// tract's kernel adds the raw i32 `products` (rows 0..m, `cols` columns, row stride
    /// `stride`, written by lookout's kernel) as a tile, then requantizes and stores the band
    /// into `view` as after its own matmul; the products tensor is kept for the next band.
    fn add_products(
        &self,
        scratch: &mut Option<(String, Box<dyn ScratchSpace>)>,
        kept_products: &mut Option<Tensor>,
        products: Tensor,
        [cols, stride]: [usize; 2],
        view: &TensorView,
        n: usize,
    ) -> TractResult<()> {
        ensure!(
            cols <= stride && products.len() >= (self.m - 1) * stride + cols,
            "QConvI8: {} products for {} rows of {cols}",
            products.len(),
            self.m
        );
        // SAFETY: the kernel reads rows 0..m, columns 0..cols of the products with a row
        // stride of `stride` i32: inside the tensor (its length checked just above), which is
        // not written or moved until the kernel returns.
        let added = unsafe {
            self.mmm
                .c_from_data_and_strides(4, stride as isize, 1)
                .wrap(&products.view())
        };
        let ran = self.run_kernel(scratch, FusedSpec::AddUnicast(added), cols, view, n);
        *kept_products = Some(products);
        ran
    }

    /// tract's kernel over a band of `cols` output columns: `first` (the matmul, or the
    /// products to add), the requantization, and the store into `view` (row stride `n`
    /// bytes), with the thread's scratch space for this kernel.
    fn run_kernel(
        &self,
        kept: &mut Option<(String, Box<dyn ScratchSpace>)>,
        first: FusedSpec,
        cols: usize,
        view: &TensorView,
        n: usize,
    ) -> TractResult<()> {
        // The kernel's scratch space, kept per thread for the kernel it was made by.
        let kept_here = kept.take().filter(|(name, _)| name == self.mmm.name());
        // SAFETY: the store writes rows 0..m, columns 0..cols of the band, from the view's
        // first byte with a row stride of n bytes: inside `out` (band rows y0..y1 of batch
        // item b, every channel). Bands write disjoint bytes, and `out` is not read or moved
        // while they run. The scratch space is this kernel's own (made by it, kept by name).
        let (ran, scratch) = unsafe {
            let mut scratch = match kept_here {
                Some((_, s)) => s,
                None => self.mmm.allocate_scratch_space(),
            };
            let store = self
                .mmm
                .c_from_data_and_strides(1, n as isize, 1)
                .wrap(view);
            self.specs_then(|tail| {
                let mut specs = Vec::with_capacity(tail.len() + 2);
                specs.push(first);
                specs.extend_from_slice(tail);
                specs.push(FusedSpec::Store(store));
                let ran = multithread_tract_scope(Executor::SingleThread, || {
                    self.mmm
                        .run_with_scratch_space(self.m, cols, &mut *scratch, &specs)
                });
                (ran, scratch)
            })
        };
        *kept = Some((self.mmm.name().to_string(), scratch));
        ran
    }

    /// The output's shape for `input`, an error when the input does not fit the op.
    fn output_shape(&self, input: &Tensor) -> TractResult<[usize; 4]> {
        let shape = self.matmul_input_shape(input.shape());
        let &[batch, k, h, w] = &*shape else {
            bail!("QConvI8: input of rank {} (4 expected)", shape.len());
        };
        ensure!(
            k == self.k,
            "QConvI8: {} input channels, {} expected",
            k,
            self.k
        );
        if self.taps.is_none() {
            ensure!(
                input.shape() == &*shape,
                "QConvI8: input shape {:?}",
                input.shape()
            );
        }
        Ok([batch, self.m, h, w])
    }

    /// Writes the convolution of `input` into `out`, of [`QConvI8::output_shape`] and the
    /// op's output type.
    fn run_into(&self, input: &Tensor, out: &mut Tensor) -> TractResult<()> {
        let [batch, k, h, w] = self.matmul_input_shape(input.shape())[..] else {
            bail!("QConvI8: input of rank {} (4 expected)", input.rank());
        };
        ensure!(
            out.shape() == [batch, self.m, h, w] && out.datum_type() == self.out_dt,
            "QConvI8: output {:?} {:?}",
            out.datum_type(),
            out.shape()
        );
        let out = &*out;
        let src = input.as_bytes();
        let pl = self.b_layout.panel_len(k);
        // Bands of whole output rows, about BAND_BYTES packed each, as many as a multiple of
        // the threads and even to a row, so that no thread waits for another's larger share.
        let rows =
            (BAND_BYTES / (pl / self.b_layout.r().max(1)).max(1) / w.max(1)).clamp(1, h.max(1));
        let threads = match current_tract_executor() {
            Executor::MultiThread(pool) => pool.current_num_threads(),
            _ => 1,
        };
        let per_item = match &self.weights {
            // Winograd computes outputs two rows at a time: bands of whole pairs of rows,
            // about WINOGRAD_BAND_BYTES of transformed inputs each (fewer padded tiles).
            Weights::Winograd(wg) => {
                let tile_rows = WINOGRAD_BAND_BYTES / (32 * wg.c()).max(1) / w.div_ceil(2).max(1);
                band_rows(h.div_ceil(2), tile_rows.max(1), threads)
            }
            .into_iter()
            .map(|(y0, n)| (2 * y0, (2 * n).min(h - 2 * y0)))
            .collect(),
            _ => band_rows(h, rows, threads),
        };
        let bands: Vec<(usize, usize, usize)> = (0..batch)
            .flat_map(|b| per_item.iter().map(move |&(y0, rows)| (b, y0, rows)))
            .collect();
        let out_ref = out;
        let band = |&(b, y0, rows): &(usize, usize, usize)| -> TractResult<()> {
            // The thread's band memory, kept between bands and frames; a fresh one only if the
            // thread's is in use (it never is: a band calls nothing that runs another band).
            BAND_MEMORY.with(|cell| match cell.try_borrow_mut() {
                Ok(mut mem) => self.band(&mut mem, src, out_ref, [b, y0, rows], [k, h, w]),
                Err(_) => self.band(
                    &mut BandMemory::default(),
                    src,
                    out_ref,
                    [b, y0, rows],
                    [k, h, w],
                ),
            })
        };
        match current_tract_executor() {
            Executor::MultiThread(pool) if pool.current_num_threads() > 1 && bands.len() > 1 => {
                pool.install(|| bands.par_iter().try_for_each(band))?
            }
            _ => bands.iter().try_for_each(band)?,
        }
        Ok(())
    }
}

impl Op for QConvI8 {
    fn name(&self) -> StaticName {
        "QConvI8".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "{}×{} int8 conv (as 1×1) with {} ({:?}, packing {}), scale {}{}{}",
            self.m,
            self.k,
            self.mmm.name(),
            self.b_layout,
            self.packing,
            self.scaler.scale,
            if self.taps.is_some() {
                ", im2col written in bands"
            } else {
                ""
            },
            if self.lut.is_some() {
                ", then its lookup table"
            } else {
                ""
            }
        )])
    }

    op_as_typed_op!();
}

impl EvalOp for QConvI8 {
    fn eval(&self, ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let [input] = &*inputs else {
            bail!("QConvI8 takes one input, got {}", inputs.len());
        };
        let shape = self.output_shape(input)?;
        let (out, ()) = super::recycle::output_whole(ctx, self.out_dt, &shape, |out| {
            self.run_into(input, out)
        })?;
        Ok(tvec!(out))
    }

    op_out_of_plan!();
}

impl TypedOp for QConvI8 {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let shape = inputs[0]
            .shape
            .as_concrete()
            .context("QConvI8: symbolic input shape")?;
        let s = self.matmul_input_shape(shape);
        Ok(tvec!(self.out_dt.fact([s[0], self.m, s[2], s[3]])))
    }

    as_op!();
}

/// The bands of an `h`-row output as `(first row, rows)`: at most `rows` rows each (the
/// cache-sized band), their count rounded up to a multiple of `threads` (when there are rows
/// enough), the rows shared evenly (the first `h mod count` bands one row more).
fn band_rows(h: usize, rows: usize, threads: usize) -> Vec<(usize, usize)> {
    if h == 0 {
        return Vec::new();
    }
    let by_size = h.div_ceil(rows.max(1));
    let count = by_size.div_ceil(threads.max(1)) * threads.max(1);
    let count = count.min(h).max(1);
    let (each, more) = (h / count, h % count);
    let mut y0 = 0;
    (0..count)
        .map(|i| {
            let n = each + usize::from(i < more);
            let band = (y0, n);
            y0 += n;
            band
        })
        .collect()
}

/// `n` pseudo-random int8 values from `seed` (xorshift): test and benchmark inputs.
#[doc(hidden)]
pub fn noise_i8(n: usize, seed: u64) -> Vec<i8> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as i8
        })
        .collect()
}

/// A model of one quantized 1×1 convolution (tract's `Conv`, as tract-onnx types a
/// `QLinearConv`) of a `[1, k, h, w]` int8 input to `m` channels, with pseudo-random weights
/// and biases from `seed` and output zero point `y0`: what the exactness tests and
/// `benches/int8.rs` compare this op with.
#[doc(hidden)]
pub fn one_conv_model(
    k: usize,
    m: usize,
    [h, w]: [usize; 2],
    y0: i8,
    seed: u64,
) -> TractResult<TypedModel> {
    conv_model(k, m, [h, w], y0, seed, 0, tensor0(0.0043f32))
}

/// A convolution's window: kernel size, strides and padding (`(before, after)` for the height,
/// then the width).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Vertical and horizontal strides.
    pub strides: [usize; 2],
    /// Zero padding before and after, height then width.
    pub pads: [(usize, usize); 2],
}

impl Window {
    /// 1×1, stride 1, no padding.
    pub const ONE: Window = Window {
        kernel: [1, 1],
        strides: [1, 1],
        pads: [(0, 0), (0, 0)],
    };
}

/// [`one_conv_model`] with the window `win` (e.g. the stem's 3×3, stride 2).
#[doc(hidden)]
pub fn window_conv_model(
    k: usize,
    m: usize,
    hw: [usize; 2],
    win: Window,
    y0: i8,
    seed: u64,
) -> TractResult<TypedModel> {
    conv_model_with(k, m, hw, win, y0, seed, 0, tensor0(0.0043f32))
}

/// [`one_conv_model`] with the input zero point `x0` and the weight scale `ks` (a scalar, or
/// one per output channel).
fn conv_model(
    k: usize,
    m: usize,
    hw: [usize; 2],
    y0: i8,
    seed: u64,
    x0: i32,
    ks: Tensor,
) -> TractResult<TypedModel> {
    conv_model_with(k, m, hw, Window::ONE, y0, seed, x0, ks)
}

#[allow(clippy::too_many_arguments)]
fn conv_model_with(
    k: usize,
    m: usize,
    [h, w]: [usize; 2],
    win: Window,
    y0: i8,
    seed: u64,
    x0: i32,
    ks: Tensor,
) -> TractResult<TypedModel> {
    let mut seeds = seed..;
    let mut noise = |n: usize| noise_i8(n, seeds.next().unwrap_or(seed));
    let mut model = TypedModel::default();
    let x = model.add_source("x", i8::fact([1, k, h, w]))?;
    let [kh, kw] = win.kernel;
    // Symmetric int8 weights (−127..=127), as quantizers write them.
    let w: Vec<i8> = noise(m * k * kh * kw)
        .iter()
        .map(|&v| v.max(-127))
        .collect();
    let weights = Tensor::from_shape(&[m, k, kh, kw], &w)?;
    let bias: Vec<i32> = noise(m).iter().map(|&b| b as i32 * 37).collect();
    let consts = [
        weights,
        Tensor::from_shape(&[m], &bias)?,
        tensor0(x0),
        tensor0(0.021f32),
        tensor0(0i32),
        ks,
        tensor0(y0 as i32),
        tensor0(0.117f32),
    ];
    let mut inputs = tvec![x];
    for (i, c) in consts.into_iter().enumerate() {
        inputs.push(model.add_const(format!("c{i}"), c)?);
    }
    let [(t, b), (l, r)] = win.pads;
    let conv = Conv {
        pool_spec: tract_onnx::tract_core::ops::cnn::PoolSpec {
            data_format: DataFormat::NCHW,
            kernel_shape: tvec![kh, kw],
            padding: tract_onnx::tract_core::ops::cnn::PaddingSpec::Explicit(
                tvec![t, l],
                tvec![b, r],
            ),
            dilations: None,
            strides: Some(tvec![win.strides[0], win.strides[1]]),
            input_channels: k,
            output_channels: m,
        },
        kernel_fmt: KernelFormat::OIHW,
        group: 1,
        q_params: Some(DatumType::I8),
    };
    let out = model.wire_node("conv", conv, &inputs)?;
    model.select_output_outlets(&out)?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_conv(k: usize, m: usize, hw: [usize; 2], y0: i8, seed: u64) -> TypedModel {
        one_conv_model(k, m, hw, y0, seed).unwrap()
    }

    fn run(model: TypedModel, x: &Tensor) -> Vec<u8> {
        let plan = model.into_optimized().unwrap().into_runnable().unwrap();
        let out = plan.run(tvec!(x.clone().into())).unwrap();
        out[0].as_bytes().to_vec()
    }

    /// `model` (one quantized conv) with the conv taken by `QConvI8` gives tract's bytes on
    /// `x`, at 1 and 2 threads, with tract's kernel, with lookout's pairwise one, (for a
    /// 3×3 stride-1 convolution) its Winograd one, and as this CPU runs it (with the [`stem`]
    /// convolution for a 3×3 stride-2 one where the CPU has it).
    fn assert_ours_match_tracts(model: TypedModel, x: &Tensor, case: &str) {
        let theirs = run(model.clone(), x);
        for policy in [
            KernelPolicy::Tract,
            KernelPolicy::Pairwise,
            KernelPolicy::Winograd,
            KernelPolicy::Auto,
        ] {
            let mut ours = model.clone();
            let report =
                super::super::install_early_kernels(&mut ours, true, true, policy).unwrap();
            assert_eq!(report.convs_ours, 1, "{case}: not taken");
            if policy == KernelPolicy::Pairwise {
                assert_eq!(
                    report.conv_kernels,
                    [(pairwise::NAME.to_string(), 1)],
                    "{case}"
                );
            }
            assert_same_bytes(&theirs, ours, x, &format!("{case}, {policy:?}"));
        }
    }

    /// `ours` run on `x` at 1 and 2 threads gives `theirs`.
    fn assert_same_bytes(theirs: &[u8], ours: TypedModel, x: &Tensor, case: &str) {
        for threads in [1, 2] {
            let executor = if threads == 1 {
                Executor::SingleThread
            } else {
                Executor::multithread(threads)
            };
            let got = multithread_tract_scope(executor, || run(ours.clone(), x));
            assert_eq!(got.len(), theirs.len(), "{case}");
            let diff = theirs.iter().zip(&got).filter(|(a, b)| a != b).count();
            assert_eq!(diff, 0, "{case}, {threads} threads: {diff} bytes differ");
        }
    }

    /// Bands cover every row once, in order, none larger than asked, as many as a multiple
    /// of the threads when the rows allow, and within one row of each other.
    #[test]
    fn bands_are_even_and_a_multiple_of_the_threads() {
        for h in 0..70 {
            for rows in 1..20 {
                for threads in 1..5 {
                    let bands = band_rows(h, rows, threads);
                    let mut next = 0;
                    for &(y0, n) in &bands {
                        assert_eq!(y0, next, "{h} {rows} {threads}");
                        assert!(n >= 1 && n <= rows, "{h} {rows} {threads}: {n} rows");
                        next += n;
                    }
                    assert_eq!(next, h);
                    let (lo, hi) = bands
                        .iter()
                        .fold((usize::MAX, 0), |(lo, hi), b| (lo.min(b.1), hi.max(b.1)));
                    assert!(h == 0 || hi - lo <= 1, "{h} {rows} {threads}: {bands:?}");
                    if h >= threads * h.div_ceil(rows) {
                        assert_eq!(bands.len() % threads, 0, "{h} {rows} {threads}");
                    }
                }
            }
        }
        assert_eq!(band_rows(13, 11, 2), [(0, 7), (7, 6)]);
        assert_eq!(band_rows(13, 11, 1), [(0, 7), (7, 6)]);
    }

    /// A convolution followed by a lookup table (the graphs' LeakyReLU) becomes one op, the
    /// table applied band by band after the kernel: tract's bytes at 1 and 2 threads, with
    /// tract's kernel and the pairwise one, for a tall map cut into bands, the stem's window
    /// and odd sizes.
    #[test]
    fn a_following_lookup_table_runs_inside_the_conv() {
        use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
        use tract_onnx::tract_core::ops::quant::LookupTable;
        let table: Vec<u8> = (0..=255u8)
            .map(|b| b.wrapping_mul(167).wrapping_add(13))
            .collect();
        let stem = Window {
            kernel: [3, 3],
            strides: [2, 2],
            pads: [(1, 1), (1, 1)],
        };
        let cases: [(usize, usize, [usize; 2], Window); 4] = [
            (64, 128, [104, 104], Window::ONE),
            (3, 24, [83, 61], stem),
            (17, 9, [7, 11], Window::ONE),
            (3, 32, [83, 61], stem),
        ];
        for (i, &(k, m, hw, win)) in cases.iter().enumerate() {
            let case = format!("case {i} ({k}→{m}, {hw:?})");
            let mut model = window_conv_model(k, m, hw, win, 0, 70 + i as u64).unwrap();
            let conv_out = model.output_outlets().unwrap()[0];
            let lut = LookupTable {
                table: tract_onnx::tract_core::tract_linalg::routines::lut_u8(&table).unwrap(),
            };
            let out = model
                .wire_node("lut", ElementWiseOp(Box::new(lut), None), &[conv_out])
                .unwrap();
            model.select_output_outlets(&out).unwrap();
            let x = Tensor::from_shape(
                &[1, k, hw[0], hw[1]],
                &noise_i8(k * hw[0] * hw[1], 90 + i as u64),
            )
            .unwrap();
            let theirs = run(model.clone(), &x);
            for policy in [
                KernelPolicy::Tract,
                KernelPolicy::Pairwise,
                KernelPolicy::Auto,
            ] {
                let mut ours = model.clone();
                super::super::install_early_kernels(&mut ours, true, true, policy).unwrap();
                let mut ours = ours.into_optimized().unwrap();
                let report = super::super::install_with(&mut ours, true).unwrap();
                assert_eq!((report.luts_ours, report.luts_in_convs), (1, 1), "{case}");
                assert!(ours.nodes().iter().all(|n| !n.op_is::<FastLut>()), "{case}");
                let plan = ours.into_runnable().unwrap();
                for threads in [1, 2] {
                    let executor = if threads == 1 {
                        Executor::SingleThread
                    } else {
                        Executor::multithread(threads)
                    };
                    let got = multithread_tract_scope(executor, || {
                        plan.run(tvec!(x.clone().into())).unwrap()[0]
                            .as_bytes()
                            .to_vec()
                    });
                    assert_eq!(got.len(), theirs.len(), "{case}");
                    let diff = theirs.iter().zip(&got).filter(|(a, b)| a != b).count();
                    assert_eq!(diff, 0, "{case}, {policy:?}, {threads} threads");
                }
            }
        }
    }

    /// Bit-exact against tract's own lowering, on random inputs, for channel counts that are
    /// and are not multiples of the kernel's tile, odd widths and heights, a band split (a
    /// tall map), a non-zero output zero point, and 1 and 2 threads.
    #[test]
    fn matches_tracts_quantized_conv_bit_for_bit() {
        let cases: [(usize, usize, [usize; 2], i8); 7] = [
            (36, 64, [52, 52], 0),
            (288, 32, [13, 13], 0),
            (5, 3, [1, 1], 0),
            (17, 9, [7, 11], 3),
            (64, 128, [104, 104], 0),
            (1, 1, [3, 2], -5),
            (96, 40, [26, 27], 0),
        ];
        for (i, &(k, m, hw, y0)) in cases.iter().enumerate() {
            let model = one_conv(k, m, hw, y0, 10 + i as u64);
            let x = Tensor::from_shape(
                &[1, k, hw[0], hw[1]],
                &noise_i8(k * hw[0] * hw[1], i as u64),
            )
            .unwrap();
            assert_ours_match_tracts(model, &x, &format!("case {i} ({k}→{m}, {hw:?})"));
        }
    }

    /// Convolutions with a window (the stem's 3×3 stride 2 and its padding, 3×3 stride 1,
    /// asymmetric padding, 5×3, strides that leave input rows and columns unread, no padding
    /// at all), bit-exact against tract's own lowering at 1 and 2 threads; the shapes are odd
    /// and the first one is tall enough to be cut into several bands.
    #[test]
    fn windowed_convolutions_match_tracts_bit_for_bit() {
        let win = |kernel, strides, pads| Window {
            kernel,
            strides,
            pads,
        };
        let cases = [
            // (k, m, [h, w], window, y0)
            (3, 32, [133, 67], win([3, 3], [2, 2], [(1, 1), (1, 1)]), 0),
            (3, 24, [20, 21], win([3, 3], [2, 2], [(0, 1), (0, 1)]), 0),
            (3, 32, [416, 416], win([3, 3], [2, 2], [(0, 1), (0, 1)]), 0),
            (3, 48, [64, 96], win([3, 3], [2, 2], [(0, 1), (0, 1)]), -5),
            (2, 16, [7, 5], win([3, 3], [2, 2], [(1, 1), (0, 0)]), 3),
            (8, 16, [13, 11], win([3, 3], [1, 1], [(1, 1), (1, 1)]), 2),
            (5, 7, [9, 10], win([5, 3], [1, 2], [(2, 1), (0, 2)]), 0),
            (6, 20, [17, 15], win([3, 3], [3, 2], [(0, 0), (0, 0)]), -3),
            (4, 16, [8, 8], win([1, 1], [2, 2], [(0, 0), (0, 0)]), 0),
        ];
        for (i, &(k, m, hw, w, y0)) in cases.iter().enumerate() {
            let model = window_conv_model(k, m, hw, w, y0, 40 + i as u64).unwrap();
            let x = Tensor::from_shape(
                &[1, k, hw[0], hw[1]],
                &noise_i8(k * hw[0] * hw[1], 90 + i as u64),
            )
            .unwrap();
            assert_ours_match_tracts(model, &x, &format!("case {i} ({w:?})"));
        }
    }

    /// The stem's window over 3 channels into a multiple of 16 is lookout's [`stem`]
    /// convolution where the CPU has AVX-512 VNNI (and tract's kernel elsewhere, or under any
    /// other policy); tract's bytes either way (`windowed_convolutions_match_tracts_bit_for_bit`).
    #[test]
    fn the_stem_runs_lookouts_direct_convolution_where_it_can() {
        let stem = Window {
            kernel: [3, 3],
            strides: [2, 2],
            pads: [(0, 1), (0, 1)],
        };
        for (m, hw) in [(32, [416, 416]), (32, [320, 416]), (16, [30, 34])] {
            let model = window_conv_model(3, m, hw, stem, 0, 9).unwrap();
            let mut ours = model.clone();
            let report =
                super::super::install_early_kernels(&mut ours, true, true, KernelPolicy::Auto)
                    .unwrap();
            let want = if stem::available() {
                stem::NAME
            } else {
                report.conv_kernels[0].0.as_str()
            };
            assert_eq!(report.conv_kernels, [(want.to_string(), 1)], "{m} {hw:?}");
            let mut tract_only = model;
            let report = super::super::install_early_kernels(
                &mut tract_only,
                true,
                true,
                KernelPolicy::Tract,
            )
            .unwrap();
            assert_ne!(report.conv_kernels[0].0, stem::NAME);
        }
        // 24 output channels (not a multiple of 16): tract's kernel.
        let mut model = window_conv_model(3, 24, [20, 20], stem, 0, 9).unwrap();
        let report =
            super::super::install_early_kernels(&mut model, true, true, KernelPolicy::Auto)
                .unwrap();
        assert_ne!(report.conv_kernels[0].0, stem::NAME);
    }

    /// 3×3 stride-1 convolutions padded by one (the graphs' im2col'd ones) by Winograd:
    /// tract's bytes at 1 and 2 threads, for a tall map cut into bands of odd and even rows,
    /// odd sizes, one pixel, one channel, partial blocks of channels, a non-zero output zero
    /// point; other windows keep the pairwise kernel under the same policy.
    #[test]
    fn winograd_convolutions_match_tracts_bit_for_bit() {
        let same = Window {
            kernel: [3, 3],
            strides: [1, 1],
            pads: [(1, 1), (1, 1)],
        };
        let cases: [(usize, usize, [usize; 2], i8); 6] = [
            (16, 24, [104, 52], 0),
            (8, 16, [13, 11], 2),
            (1, 1, [1, 1], 0),
            (130, 9, [7, 6], -4),
            (32, 64, [26, 26], 0),
            (3, 8, [2, 17], 0),
        ];
        for (i, &(k, m, hw, y0)) in cases.iter().enumerate() {
            let model = window_conv_model(k, m, hw, same, y0, 60 + i as u64).unwrap();
            let x = Tensor::from_shape(
                &[1, k, hw[0], hw[1]],
                &noise_i8(k * hw[0] * hw[1], 160 + i as u64),
            )
            .unwrap();
            let case = format!("case {i} ({k}→{m}, {hw:?})");
            let theirs = run(model.clone(), &x);
            let mut ours = model;
            let report =
                super::super::install_early_kernels(&mut ours, true, true, KernelPolicy::Winograd)
                    .unwrap();
            assert_eq!(
                report.conv_kernels,
                [(winograd::NAME.to_string(), 1)],
                "{case}"
            );
            assert_same_bytes(&theirs, ours, &x, &case);
        }
        let stem = Window {
            kernel: [3, 3],
            strides: [2, 2],
            pads: [(1, 1), (1, 1)],
        };
        let mut model = window_conv_model(3, 8, [9, 9], stem, 0, 1).unwrap();
        let report =
            super::super::install_early_kernels(&mut model, true, true, KernelPolicy::Winograd)
                .unwrap();
        assert_eq!(report.conv_kernels, [(pairwise::NAME.to_string(), 1)]);
    }

    /// What the op does not compute stays tract's: a dilation, groups, a float convolution.
    #[test]
    fn leaves_other_convolutions_to_tract() {
        for change in 0..3 {
            let mut model = one_conv(8, 8, [6, 6], 0, 1);
            let id = model.node_by_name("conv").unwrap().id;
            let conv = model.node_mut(id).op_as_mut::<Conv>().unwrap();
            match change {
                0 => conv.pool_spec.dilations = Some(tvec![2, 2]),
                1 => conv.group = 2,
                _ => conv.q_params = None,
            }
            let node = model.node(id);
            assert!(
                QConvI8::for_node(&model, node, None, KernelPolicy::Auto).is_none(),
                "change {change}"
            );
        }
        // A non-zero input zero point, per-channel weight scales.
        let per_channel = Tensor::from_shape(&[8], &[0.004f32; 8]).unwrap();
        for (x0, ks) in [(3, tensor0(0.0043f32)), (0, per_channel)] {
            let mut model = conv_model(8, 8, [6, 6], 0, 1, x0, ks).unwrap();
            let report = super::super::install_early_with(&mut model, true, true).unwrap();
            assert_eq!((report.convs_ours, report.convs_int8), (0, 1), "x0 {x0}");
        }
    }

    /// A −128 weight (two of its products could overflow a 16-bit pair sum) keeps tract's
    /// kernel for that convolution, with the same bytes, even when lookout's is asked for.
    #[test]
    fn a_minus_128_weight_keeps_tracts_kernel() {
        let mut model = one_conv(32, 8, [5, 7], 0, 4);
        let id = model.node_by_name("c0").unwrap().id;
        let w = model
            .node(id)
            .op_as::<tract_onnx::tract_core::ops::konst::Const>()
            .unwrap()
            .val()
            .clone();
        let mut w = w.into_tensor();
        w.as_bytes_mut()[5] = 0x80;
        let w = w.into_arc_tensor();
        let node = model.node_mut(id);
        node.outputs[0].fact = TypedFact::try_from(w.clone()).unwrap();
        node.op = Box::new(tract_onnx::tract_core::ops::konst::Const::new(w).unwrap());
        let x = Tensor::from_shape(&[1, 32, 5, 7], &noise_i8(32 * 35, 2)).unwrap();
        let theirs = run(model.clone(), &x);
        let mut ours = model;
        let report =
            super::super::install_early_kernels(&mut ours, true, true, KernelPolicy::Pairwise)
                .unwrap();
        assert_eq!(report.convs_ours, 1);
        assert_ne!(report.conv_kernels[0].0, pairwise::NAME);
        assert_same_bytes(&theirs, ours, &x, "a −128 weight");
    }
}
