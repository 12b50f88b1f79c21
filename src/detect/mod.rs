//! The detector: loads an ONNX NanoDet (FP32 or INT8) with tract once, for one fixed input
//! size, and turns input tensors into detections. The only module that knows about tract.

pub mod ceiling;
pub mod decode;
pub mod embedded;
mod input_tensor;
pub mod int8;
pub mod nms;
pub mod profile;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tract_linalg::multithread::{multithread_tract_scope, Executor};
use tract_onnx::prelude::*;

pub use decode::{RawOutputs, OUTPUT_NAMES};
pub use nms::{nms, BBox};
pub use profile::{OpProfile, OpTime};

use crate::files;
use crate::preprocess::{self, Mapping, ModelInput, ResizeMode};
use crate::vocab::{Detection, DetectionRound, DEFAULT_SCORE_THRESHOLD};

pub use embedded::{Choice, Embedded, Precision};

/// Where the model comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// One of the models compiled into the binary (so `lookout` works with no files around
    /// it), and why it was chosen.
    Embedded(Choice),
    /// An ONNX file.
    File(PathBuf),
}

impl ModelSource {
    /// The embedded model `precision` asks for on this CPU (see [`embedded::choose`]).
    pub fn embedded(precision: Precision) -> ModelSource {
        ModelSource::Embedded(embedded::choose_for_this_cpu(precision))
    }

    /// A human-readable name: the path, or `embedded:<file name>`.
    pub fn display_name(&self) -> String {
        match self {
            ModelSource::Embedded(c) => format!("embedded:{}", c.model.file_name()),
            ModelSource::File(p) => p.display().to_string(),
        }
    }

    /// Why this embedded model runs (`None` for a file).
    pub fn reason(&self) -> Option<&str> {
        match self {
            ModelSource::Embedded(c) => Some(&c.reason),
            ModelSource::File(_) => None,
        }
    }
}

/// Everything that decides how the detector is built and how its output is filtered.
#[derive(Clone, Debug)]
pub struct DetectorConfig {
    /// The model.
    pub model: ModelSource,
    /// Input `(width, height)`; `None` takes the size the model file declares.
    pub input_size: Option<(u32, u32)>,
    /// Why `input_size` is what it is, when the configuration chose it (`"auto"`): said on
    /// the load line.
    pub input_size_why: Option<String>,
    /// Threads for tract's matrix products (1 = single-threaded).
    pub threads: usize,
    /// Minimum class score to report.
    pub score_threshold: f32,
    /// Class-aware NMS IoU threshold.
    pub iou_threshold: f32,
    /// Most detections returned per image.
    pub max_detections: usize,
    /// How images are fitted into the input.
    pub resize: ResizeMode,
}

/// The default NMS IoU threshold (config `model.iou_threshold`).
pub const DEFAULT_IOU_THRESHOLD: f32 = 0.6;
/// The default most detections per image (config `model.max_detections`).
pub const DEFAULT_MAX_DETECTIONS: usize = 100;

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            model: ModelSource::embedded(Precision::Auto),
            input_size: None,
            input_size_why: None,
            threads: 1,
            score_threshold: DEFAULT_SCORE_THRESHOLD,
            iou_threshold: DEFAULT_IOU_THRESHOLD,
            max_detections: DEFAULT_MAX_DETECTIONS,
            resize: ResizeMode::Letterbox,
        }
    }
}

/// What can go wrong loading or running a model. Every variant names the model.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// The file cannot be read: missing, not a regular file, or over
    /// [`crate::files::MODEL_LIMIT`]. The message names the file.
    #[error("model {model}: {error}")]
    Read {
        /// Model name.
        model: String,
        /// What went wrong reading it.
        error: crate::files::FileError,
    },
    /// The bytes are not an ONNX model tract can parse.
    #[error("model {model}: not a valid ONNX model ({reason})")]
    NotOnnx {
        /// Model name.
        model: String,
        /// Parser message.
        reason: String,
    },
    /// The model is ONNX, but not a NanoDet-shaped detector lookout can use.
    #[error("model {model}: {reason}")]
    WrongShape {
        /// Model name.
        model: String,
        /// What does not fit.
        reason: String,
    },
    /// Inference failed at run time.
    #[error("model {model}: inference failed: {reason}")]
    Run {
        /// Model name.
        model: String,
        /// Engine message.
        reason: String,
    },
    /// The image does not fit the preprocessing.
    #[error(transparent)]
    Preprocess(#[from] preprocess::PreprocessError),
}

/// Facts about the loaded model, for logs and benchmarks.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// File or embedded name.
    pub name: String,
    /// Input width.
    pub input_w: u32,
    /// Input height.
    pub input_h: u32,
    /// `int8` when the graph computes on quantized tensors, else `f32`.
    pub datum: &'static str,
    /// Threads used by matrix products.
    pub threads: usize,
    /// Time to parse, type, optimize and plan the model.
    pub load_time: Duration,
    /// lookout's own int8 path in this model, e.g. "own int8 ops: 34 of 34 convs (kernel
    /// arm64simd_mmm_i32_8x8_dot), 28 lookup tables, …" (`None` for a float model).
    pub int8_path: Option<String>,
}

type Plan = Arc<TypedSimplePlan>;

/// A loaded, optimized model ready to run, plus its decoding settings.
pub struct Detector {
    plan: Plan,
    /// The plan's state kept between inferences, with the op outputs it recycles
    /// ([`int8::recycle`]); empty while an inference has it out.
    state: Mutex<Option<TypedSimpleState>>,
    executor: Executor,
    info: ModelInfo,
    cfg: DetectorConfig,
    /// Set when the model takes int8 quantized by the preprocessing.
    input_quant: Option<int8::input::InputQuant>,
    /// The input tensor kept from one inference for the next (a new one of 0.5–2 MB would
    /// be mapped and faulted in page by page every time: `memory::limit_allocator`); empty
    /// while an inference has it out.
    kept_input: Mutex<Option<Arc<Tensor>>>,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector")
            .field("info", &self.info)
            .finish()
    }
}

/// A model parsed, checked and typed for one input size (not optimized yet).
struct Typed {
    model: TypedModel,
    name: String,
    w: u32,
    h: u32,
    datum: &'static str,
    /// Score outputs whose quantization caps them below [`MIN_SCORE_CEILING`].
    capped: Vec<ceiling::OutputCeiling>,
}

/// A score output that cannot carry at least this score is quantized wrongly:
/// the load log warns about it and the INT8 gate refuses such a file.
pub const MIN_SCORE_CEILING: f32 = 0.99;

/// Reads the model's bytes (the embedded model or a file).
fn model_bytes(model: &ModelSource) -> Result<std::borrow::Cow<'static, [u8]>, DetectError> {
    Ok(match model {
        ModelSource::Embedded(c) => c.model.bytes().into(),
        ModelSource::File(p) => files::read_bounded(p, files::MODEL_LIMIT, "model file")
            .map_err(|error| DetectError::Read {
                model: model.display_name(),
                error,
            })?
            .into(),
    })
}

/// The largest value each output of the model can carry (see [`ceiling`]), in the order of
/// the file's outputs.
///
/// # Errors
/// The file cannot be read or is not ONNX.
pub fn output_ceilings(model: &ModelSource) -> Result<Vec<ceiling::OutputCeiling>, DetectError> {
    let bytes = model_bytes(model)?;
    ceiling::output_ceilings(&bytes).map_err(|reason| DetectError::NotOnnx {
        model: model.display_name(),
        reason,
    })
}

/// Reads, parses and types the model, checking its input and outputs.
fn typed_model(cfg: &DetectorConfig) -> Result<Typed, DetectError> {
    let name = cfg.model.display_name();
    let bytes = model_bytes(&cfg.model)?;
    let not_onnx = |e: TractError| DetectError::NotOnnx {
        model: name.clone(),
        reason: first_line(&e),
    };
    let wrong = |reason: String| DetectError::WrongShape {
        model: name.clone(),
        reason,
    };
    // Parse the protobuf once: the score ceilings are read from it, then tract builds the model.
    let onnx = tract_onnx::onnx();
    let proto = onnx
        .proto_model_for_read(&mut &bytes[..])
        .map_err(not_onnx)?;
    let capped = proto
        .graph
        .as_ref()
        .map(ceiling::graph_ceilings)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.output.starts_with("cls_") && c.max_score() < MIN_SCORE_CEILING)
        .collect();
    let mut model = onnx.model_for_proto_model(&proto).map_err(not_onnx)?;
    if model.inputs.len() != 1 {
        return Err(wrong(format!(
            "has {} inputs, expected one image input",
            model.inputs.len()
        )));
    }
    let declared = declared_input_shape(&model);
    let (w, h) = input_size(cfg.input_size, declared.as_deref()).map_err(wrong)?;
    model.select_outputs_by_name(OUTPUT_NAMES).map_err(|e| {
        wrong(format!(
            "lacks the NanoDet outputs {OUTPUT_NAMES:?} ({})",
            first_line(&e)
        ))
    })?;
    if declared.as_deref() != Some(&[1, 3, h as usize, w as usize][..]) {
        // Another size than the file declares: the shapes the file records for intermediate
        // tensors (ONNX value_info) hold for the declared size only; let tract infer them anew.
        forget_intermediate_shapes(&mut model);
    }
    let model = model
        .with_input_fact(0, f32::fact([1, 3, h as usize, w as usize]).into())
        .and_then(|m| m.into_typed())
        .map_err(|e| {
            wrong(format!(
                "does not accept a [1, 3, {h}, {w}] f32 input: {}",
                first_line(&e)
            ))
        })?;
    // Check the output shapes before optimizing, so a wrong head says so clearly.
    check_outputs(&model, w, h).map_err(wrong)?;
    let datum = datum_of(&model);
    Ok(Typed {
        model,
        name,
        w,
        h,
        datum,
        capped,
    })
}

/// The input shape the file declares, when it is concrete.
fn declared_input_shape(model: &InferenceModel) -> Option<Vec<usize>> {
    model
        .input_fact(0)
        .ok()
        .and_then(|f| f.shape.as_concrete_finite().ok().flatten())
        .map(|s| s.to_vec())
}

/// Largest model input side in pixels (the file's declared size and `model.input_size`).
pub const MAX_INPUT_SIDE: u32 = 2048;
/// Largest model input area in pixels, width × height (2048×1152, e.g. 1920×1088 or
/// 1536×1536): NanoDet's activations grow with the area, and at this size an FP32 model
/// already needs hundreds of MB, as much as a Pi can give. A file declaring more (say
/// 8192×8192, 2 GiB for one activation) is refused when it is checked, not when the
/// detector thread allocates.
pub const MAX_INPUT_PIXELS: u64 = 2048 * 1152;

/// Why an input size is unusable (`None`: it is fine): both sides positive multiples of 32,
/// each at most [`MAX_INPUT_SIDE`], the area at most [`MAX_INPUT_PIXELS`].
pub fn input_size_problem(w: u64, h: u64) -> Option<String> {
    if w == 0 || h == 0 || !w.is_multiple_of(32) || !h.is_multiple_of(32) {
        return Some(format!(
            "input size {w}x{h}: both sides must be positive multiples of 32"
        ));
    }
    if w > u64::from(MAX_INPUT_SIDE) || h > u64::from(MAX_INPUT_SIDE) || w * h > MAX_INPUT_PIXELS {
        return Some(format!(
            "input size {w}x{h} is over lookout's limit of {MAX_INPUT_SIDE} pixels per side and {MAX_INPUT_PIXELS} pixels in all (2048x1152); a smaller input (model.input_size) or model is needed"
        ));
    }
    None
}

/// The input size to run at: the one asked for, else the file's `[1, 3, H, W]`; bounded as
/// [`input_size_problem`] says.
fn input_size(asked: Option<(u32, u32)>, declared: Option<&[usize]>) -> Result<(u32, u32), String> {
    let (w, h) = match (asked, declared) {
        (Some((w, h)), _) => (u64::from(w), u64::from(h)),
        (None, Some([1, 3, h, w])) => (*w as u64, *h as u64),
        (None, other) => {
            return Err(format!(
                "input shape {other:?} is not [1, 3, H, W]; give the input size explicitly"
            ));
        }
    };
    if let Some(problem) = input_size_problem(w, h) {
        return Err(problem);
    }
    // Both are at most MAX_INPUT_SIDE now.
    Ok((w as u32, h as u32))
}

/// Checks that the typed model's outputs are NanoDet's heads at a `w`×`h` input: f32, with
/// the class scores and box distributions of each stride's cells.
fn check_outputs(model: &TypedModel, w: u32, h: u32) -> Result<(), String> {
    for (i, (name_i, &stride)) in OUTPUT_NAMES.iter().zip(&[8, 8, 16, 16, 32, 32]).enumerate() {
        let fact = model.output_fact(i).map_err(|e| first_line(&e))?;
        let cells = (w as usize / stride) * (h as usize / stride);
        let per_cell = if i % 2 == 0 {
            decode::NUM_CLASSES
        } else {
            4 * (decode::REG_MAX + 1)
        };
        let shape = fact.shape.as_concrete().map(|s| s.to_vec());
        let ok = shape
            .as_deref()
            .is_some_and(|s| s.iter().product::<usize>() == cells * per_cell);
        if !ok || fact.datum_type != f32::datum_type() {
            return Err(format!(
                "output {name_i} is {:?} {:?}, expected f32 with {cells}x{per_cell} values",
                fact.datum_type, shape
            ));
        }
    }
    Ok(())
}

/// `int8` when any tensor of the model is quantized, else `f32`.
fn datum_of(model: &TypedModel) -> &'static str {
    if model
        .nodes()
        .iter()
        .any(|n| n.outputs.iter().any(|o| is_quantized(o.fact.datum_type)))
    {
        "int8"
    } else {
        "f32"
    }
}

/// Resets every tensor fact except the input's to "unknown shape" (keeping known datum
/// types), so a fully convolutional graph can be typed at another input size.
fn forget_intermediate_shapes(model: &mut InferenceModel) {
    let inputs = model
        .input_outlets()
        .map(|o| o.to_vec())
        .unwrap_or_default();
    for node in 0..model.nodes().len() {
        for slot in 0..model.nodes()[node].outputs.len() {
            let outlet = OutletId::new(node, slot);
            if inputs.contains(&outlet) {
                continue;
            }
            let dt = model
                .outlet_fact(outlet)
                .ok()
                .and_then(|f| tract_onnx::tract_hir::infer::Factoid::concretize(&f.datum_type));
            let fact = dt.map_or_else(InferenceFact::default, InferenceFact::dt);
            // Cannot fail: the outlet exists.
            let _ = model.set_outlet_fact(outlet, fact);
        }
    }
}

fn is_quantized(dt: DatumType) -> bool {
    matches!(dt, DatumType::I8 | DatumType::U8) || dt.is_quantized()
}

impl Detector {
    /// Loads and optimizes the model with tract's own matmul threading (`threads` threads in a
    /// private pool when more than one).
    pub fn load(cfg: &DetectorConfig) -> Result<Detector, DetectError> {
        let executor = if cfg.threads > 1 {
            Executor::multithread_with_name(cfg.threads, "lookout-mm")
        } else {
            Executor::SingleThread
        };
        Self::load_with_executor(cfg, executor)
    }

    /// Loads the model and runs its matrix products on `pool` (the pipeline builds a pinned
    /// rayon pool and hands it over here).
    pub fn load_with_pool(
        cfg: &DetectorConfig,
        pool: Option<Arc<rayon::ThreadPool>>,
    ) -> Result<Detector, DetectError> {
        let executor = match pool {
            Some(p) => Executor::MultiThread(p),
            None => Executor::SingleThread,
        };
        Self::load_with_executor(cfg, executor)
    }

    /// Checks without optimizing (a fraction of a load's cost) that the model can be used as
    /// configured: the file is readable, is ONNX, has one image input accepting the input size
    /// and the NanoDet outputs. Returns the input `(width, height)` and the datum (`int8`/`f32`).
    pub fn check(cfg: &DetectorConfig) -> Result<(u32, u32, &'static str), DetectError> {
        let t = typed_model(cfg)?;
        Ok((t.w, t.h, t.datum))
    }

    fn load_with_executor(
        cfg: &DetectorConfig,
        executor: Executor,
    ) -> Result<Detector, DetectError> {
        let t0 = Instant::now();
        let Typed {
            mut model,
            name,
            w,
            h,
            datum,
            capped,
        } = typed_model(cfg)?;
        let wrong = |reason: String| DetectError::WrongShape {
            model: name.clone(),
            reason,
        };
        let int8_wrong = |e: anyhow::Error| {
            wrong(format!(
                "lookout's int8 path cannot take it: {}",
                first_line(&e)
            ))
        };
        // The in-graph im2cols go first, so that tract optimizes a graph a third the size.
        let early = int8::install_early(&mut model).map_err(int8_wrong)?;
        let mut optimized = model
            .into_optimized()
            .map_err(|e| wrong(format!("tract cannot optimize it: {}", first_line(&e))))?;
        let mut int8 = int8::install(&mut optimized).map_err(int8_wrong)?;
        int8.merge_early(early);
        let input_quant =
            int8::input::take_input_quantization(&mut optimized).map_err(int8_wrong)?;
        if input_quant.is_some() {
            int8.input_taken();
        }
        let plan = optimized
            .into_runnable()
            .map_err(|e| wrong(format!("tract cannot plan it: {}", first_line(&e))))?;
        let threads = match &executor {
            Executor::MultiThread(p) => p.current_num_threads(),
            _ => 1,
        };
        let info = ModelInfo {
            name,
            input_w: w,
            input_h: h,
            datum,
            threads,
            load_time: t0.elapsed(),
            int8_path: int8.describe(),
        };
        log::info!(
            "model {} loaded: input {}x{}, {}, {} thread(s), load+optimize {:.0} ms{}{}{}",
            info.name,
            info.input_w,
            info.input_h,
            info.datum,
            info.threads,
            info.load_time.as_secs_f64() * 1e3,
            info.int8_path
                .as_deref()
                .map(|p| format!(", {p}"))
                .unwrap_or_default(),
            cfg.model
                .reason()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            cfg.input_size_why
                .as_deref()
                .map(|r| format!("; {r}"))
                .unwrap_or_default()
        );
        for c in &capped {
            log::warn!(
                "model {}: output {} cannot carry a score above {:.3} (quantized after its last \
                 float op, at {}): objects it should score higher are reported at that score or \
                 missed; quantize it with float outputs (lookout's models/README.md)",
                info.name,
                c.output,
                c.max_score(),
                c.set_by
            );
        }
        Ok(Detector {
            plan,
            state: Mutex::new(None),
            executor,
            info,
            cfg: cfg.clone(),
            input_quant,
            kept_input: Mutex::new(None),
        })
    }

    /// The op outputs this detector keeps from one inference for the next
    /// ([`int8::recycle`]): how many, and their bytes (none before the first inference, and
    /// none while an inference runs).
    pub fn kept_outputs(&self) -> (usize, usize) {
        self.state
            .lock()
            .ok()
            .and_then(|kept| {
                let state = kept.as_ref()?;
                let recycler = state.turn_state.shared.get::<int8::recycle::Recycler>()?;
                Some(recycler.kept())
            })
            .unwrap_or((0, 0))
    }

    /// The address of the input tensor this detector keeps for its next inference (`None`
    /// before the first and while an inference runs): the same from one inference to the
    /// next when the tensor is reused.
    pub fn kept_input(&self) -> Option<usize> {
        let kept = self.kept_input.lock().ok()?;
        kept.as_ref().map(|t| Arc::as_ptr(t) as usize)
    }

    /// Facts about the loaded model.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The settings this detector was built with.
    pub fn config(&self) -> &DetectorConfig {
        &self.cfg
    }

    /// Number of floats of one input tensor (`3 × H × W`).
    pub fn input_len(&self) -> usize {
        3 * self.info.input_w as usize * self.info.input_h as usize
    }

    /// A buffer for one input tensor in the type the model takes: int8 when its input
    /// quantization was moved into the preprocessing
    /// ([`preprocess::frame_to_input`] writes it), else floats.
    pub fn new_input(&self) -> ModelInput {
        match self.input_quant {
            Some(q) => ModelInput::I8(vec![0; self.input_len()], q.quant),
            None => ModelInput::F32(vec![0.0; self.input_len()]),
        }
    }

    /// Runs the network on a preprocessed NCHW tensor and returns its six raw outputs. For a
    /// model that takes int8 the floats are quantized first (as the graph did).
    pub fn run_raw(&self, input: &[f32]) -> Result<RawOutputs, DetectError> {
        let mut raw = RawOutputs::default();
        self.run_tensor(self.float_tensor(input)?, None, &mut raw)?;
        Ok(raw)
    }

    /// [`Detector::run_raw`], timing every node of the network into `profile` (by op name).
    /// The clock is read twice per node: ~100 nodes add microseconds to a run of milliseconds.
    pub fn run_raw_profiled(
        &self,
        input: &[f32],
        profile: &mut OpProfile,
    ) -> Result<RawOutputs, DetectError> {
        let mut raw = RawOutputs::default();
        self.run_tensor(self.float_tensor(input)?, Some(profile), &mut raw)?;
        Ok(raw)
    }

    /// Runs the network on an input made by [`Detector::new_input`] and filled by the
    /// preprocessing.
    pub fn run_input(&self, input: &ModelInput) -> Result<RawOutputs, DetectError> {
        let mut raw = RawOutputs::default();
        self.run_input_into(input, &mut raw)?;
        Ok(raw)
    }

    /// [`Detector::run_input`] writing the outputs into `raw`, whose vectors are reused: a
    /// caller that keeps one `RawOutputs` from frame to frame copies the outputs into memory
    /// it already has (the six outputs are 1.9 MB at 416×416). Nothing in `raw` is
    /// meaningful after an error.
    pub fn run_input_into(
        &self,
        input: &ModelInput,
        raw: &mut RawOutputs,
    ) -> Result<(), DetectError> {
        self.run_tensor(self.input_tensor(input)?, None, raw)
    }

    /// [`Detector::run_input_into`], timing every node into `profile` (see
    /// [`Detector::run_raw_profiled`]).
    pub fn run_input_profiled(
        &self,
        input: &ModelInput,
        profile: &mut OpProfile,
        raw: &mut RawOutputs,
    ) -> Result<(), DetectError> {
        self.run_tensor(self.input_tensor(input)?, Some(profile), raw)
    }

    fn run_err(&self, e: TractError) -> DetectError {
        DetectError::Run {
            model: self.info.name.clone(),
            reason: first_line(&e),
        }
    }

    /// The kept plan state, or a new one (the first inference, or one running beside another
    /// on the same detector) with a [`Recycler`](int8::recycle::Recycler) of its own.
    fn take_state(&self) -> TractResult<TypedSimpleState> {
        if let Some(state) = self.state.lock().ok().and_then(|mut kept| kept.take()) {
            return Ok(state);
        }
        let mut state = self.plan.spawn()?;
        if !int8::recycle::recycling_off() {
            state
                .turn_state
                .shared
                .insert(int8::recycle::Recycler::default());
        }
        Ok(state)
    }

    /// Keeps `state`, which has just run an inference, for the next (unless another is kept
    /// already); what its recycler kept that this inference did not use is dropped. A state
    /// whose run failed never comes here: it is dropped with everything it holds.
    fn keep_state(&self, state: TypedSimpleState) {
        if let Some(recycler) = state.turn_state.shared.get::<int8::recycle::Recycler>() {
            recycler.end_turn();
        }
        if let Ok(mut kept) = self.state.lock() {
            kept.get_or_insert(state);
        }
    }

    /// Runs the plan on `tensor` (kept afterwards for the next inference) into `raw`.
    fn run_tensor(
        &self,
        tensor: Arc<Tensor>,
        profile: Option<&mut OpProfile>,
        raw: &mut RawOutputs,
    ) -> Result<(), DetectError> {
        // The whole plan runs on one of the model's own threads when there is a pool: then
        // each op that splits its work over the pool (the convolutions' bands, the chunked
        // elementwise ops) starts its share at once on this thread and only hands the rest to
        // the other worker, instead of handing everything to the pool and sleeping until it is
        // done (two thread wake-ups per op fewer, ≈ 40 µs each on a 2-core VM).
        let executor = self.executor.clone();
        let input = TValue::from_const(tensor.clone());
        let work = move || -> TractResult<()> {
            multithread_tract_scope(executor, || {
                let mut state = self.take_state()?;
                let outputs = match profile {
                    None => state.run(tvec!(input))?,
                    Some(profile) => {
                        let outputs = state.run_plan_with_eval(
                            tvec!(input),
                            |ctx, op_state, node, ins| {
                                let t0 = Instant::now();
                                let out =
                                    tract_onnx::tract_core::plan::eval(ctx, op_state, node, ins);
                                profile.add(&node.op().name(), &node.name, node.id, t0.elapsed());
                                out
                            },
                        )?;
                        profile.runs += 1;
                        outputs
                    }
                };
                self.keep_state(state);
                // Even outputs are scores, odd ones box logits, level by level.
                raw.cls.resize_with(outputs.len().div_ceil(2), Vec::new);
                raw.reg.resize_with(outputs.len() / 2, Vec::new);
                for (i, t) in outputs.iter().enumerate() {
                    let view = t.to_plain_array_view::<f32>()?;
                    let v = if i % 2 == 0 {
                        &mut raw.cls[i / 2]
                    } else {
                        &mut raw.reg[i / 2]
                    };
                    v.clear();
                    // Outputs are contiguous: one copy, not an n-dimensional walk per element.
                    match view.as_slice() {
                        Some(s) => v.extend_from_slice(s),
                        None => v.extend(view.iter().copied()),
                    }
                }
                Ok(())
            })
        };
        let ran = match &self.executor {
            Executor::MultiThread(pool) if pool.current_num_threads() > 1 => pool.install(work),
            _ => work(),
        };
        if let Ok(mut kept) = self.kept_input.lock() {
            kept.get_or_insert(tensor);
        }
        ran.map_err(|e| self.run_err(e))
    }

    /// Decodes raw outputs into detections mapped to image pixels through `map`.
    pub fn postprocess(&self, raw: &RawOutputs, map: &Mapping) -> Vec<Detection> {
        self.postprocess_down_to(raw, map, self.cfg.score_threshold)
    }

    /// [`Detector::postprocess`] keeping detections down to `floor` when that is below the
    /// reporting threshold (the tracker's weak detections, `[tracker] continue_score`). NMS
    /// keeps higher scores first, so the detections at or above the threshold are exactly
    /// those [`Detector::postprocess`] returns.
    pub fn postprocess_down_to(
        &self,
        raw: &RawOutputs,
        map: &Mapping,
        floor: f32,
    ) -> Vec<Detection> {
        let cands = decode::decode(
            raw,
            self.info.input_w as usize,
            self.info.input_h as usize,
            floor.min(self.cfg.score_threshold),
        );
        let mut dets = nms(cands, self.cfg.iou_threshold, self.cfg.max_detections);
        for d in &mut dets {
            d.bbox = map.to_image(&d.bbox);
        }
        dets
    }

    /// The tracker's [`DetectionRound`] of raw outputs: decoded down to `floor`, only the
    /// classes `labels` keeps (all when `None`), split at this model's reporting threshold.
    /// The one place the threshold divides reported from weak detections.
    pub fn detect_round(
        &self,
        raw: &RawOutputs,
        map: &Mapping,
        floor: f32,
        labels: Option<&[usize]>,
    ) -> DetectionRound {
        DetectionRound::split(
            self.postprocess_down_to(raw, map, floor),
            self.cfg.score_threshold,
            labels,
        )
    }

    /// Runs on a preprocessed tensor and returns detections in image pixels.
    pub fn detect_tensor(
        &self,
        input: &[f32],
        map: &Mapping,
    ) -> Result<Vec<Detection>, DetectError> {
        let raw = self.run_raw(input)?;
        Ok(self.postprocess(&raw, map))
    }

    /// Preprocesses a packed RGB image and detects objects in it.
    pub fn detect_rgb(
        &self,
        rgb: &[u8],
        width: u32,
        height: u32,
    ) -> Result<Vec<Detection>, DetectError> {
        let mut input = self.new_input();
        let map = preprocess::rgb_to_input(
            rgb,
            width,
            height,
            self.info.input_w,
            self.info.input_h,
            self.cfg.resize,
            &mut input,
        )?;
        Ok(self.postprocess(&self.run_input(&input)?, &map))
    }
}

/// The first line of an engine error (tract chains long contexts).
fn first_line(e: &TractError) -> String {
    let s = format!("{e:#}");
    s.lines().next().unwrap_or("unknown error").to_string()
}

/// Reads an image file (JPEG or PNG) as packed RGB, checked as the directory source checks
/// its images (see [`crate::source::replay::read_rgb_image`]).
pub fn read_rgb_image(path: &Path) -> Result<(Vec<u8>, u32, u32), String> {
    crate::source::replay::read_rgb_image(path)
}
