//! lookout's int8 activation packer against tract's own, per panel format and per geometry of
//! the shipped INT8 model (one `OptMatMulPack` batch item: `k` rows of `mn` contiguous bytes).
//! K4 is the dot-product kernels' layout (Pi 5, x86 VNNI); Plain(8) the 8-lane layout of the
//! Pi 4's aarch64 kernel and x86 AVX2. Both sides write the same bytes (tests in
//! `src/detect/int8/`); the ratio is what counts, on ARM as instructions (docs/performance.md).
//!
//! `int8_ops`: lookout's quantization and lookup-table ops against tract's, on tensors of the
//! shipped graph's sizes (the pyramid's 128×52×52 float sum; a 32×104×104 activation).
//!
//! `int8_upsample_add`: the pyramid's upsample → add → quantize at the shipped 416 graph's
//! shape (float 128×26×26 resized ×2, int8 128×52×52 added, int8 out): tract's ops one after
//! the other (`tract`), the same chain with lookout's resize and quantization as the graph ran
//! it before the fused op (`separate`), and lookout's `FastUpsampleAdd` (`lookout`). Same
//! bytes (tests in `src/detect/int8/upsample_add.rs`).
//!
//! `int8_conv`: lookout's `QConvI8` against tract's own lowering of the same quantized
//! convolution (both on tract's int8 kernels, one thread), at the shipped model's im2col
//! geometries (1×1 with k = 9 × channels), a 1×1 head conv and the stem (3×3, stride 2, whose
//! im2col `QConvI8` writes itself). Same outputs bit for bit (tests).
//!
//! `int8_conv3x3`: the shipped model's 3×3 stride-1 convolutions (channels in = out, at each
//! pyramid level) with lookout's kernels for CPUs without the dot product: the pairwise
//! matmul over the im2col (`pairwise`) and Winograd F(2×2, 3×3) (`winograd`). Same outputs bit
//! for bit (tests). Off aarch64 both run their portable code: count them on the Pi's code
//! path (`lookout bench --inference-only` under the ARM proxy, docs/performance.md).
//!
//! `int8_model`: the built-in FP32 and INT8 models, whole (preprocessing, inference, decoding)
//! on `tests/data/chelsea.jpg`, at 1 and 2 threads, one after the other in one run (compare
//! ratios; `lookout bench --inference-only` gives the same on a Pi).
//!
//! Run: `cargo bench --bench int8 -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lookout::detect::embedded::Precision;
use lookout::detect::int8::fast_pack::layout_of;
use lookout::detect::int8::lut::FastLut;
use lookout::detect::int8::pack::{pack, Source};
use lookout::detect::int8::qconv::KernelPolicy;
use lookout::detect::int8::qconv::{window_conv_model, Window};
use lookout::detect::int8::quant::FastQuantize;
use lookout::detect::int8::resize::FastResize;
use lookout::detect::int8::upsample_add::{FastUpsampleAdd, Operand, Output};
use lookout::detect::int8::{install_early_kernels, install_early_with};
use lookout::detect::{read_rgb_image, Detector, DetectorConfig, ModelSource};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::{EvalContext, EvalOp, TypedOp};
use tract_onnx::tract_core::ops::element_wise::ElementWiseOp;
use tract_onnx::tract_core::ops::nn::resize::{CoordTransformer, Interpolator, Nearest, Resize};
use tract_onnx::tract_core::ops::quant::{DequantizeLinearF32, LookupTable, QuantizeLinearI8};
use tract_onnx::tract_core::tract_linalg::mmm::MMMInputFormat;
use tract_onnx::tract_core::tract_linalg::pack::{PackedFormat, PackedI8K4};

fn bench_pack(c: &mut Criterion) {
    let formats: Vec<(&str, Box<dyn MMMInputFormat>)> = vec![
        ("k4r8", Box::new(PackedI8K4::new(8))),
        ("plain8", Box::new(PackedFormat::new(DatumType::I8, 8, 16))),
    ];
    // 3x3 stride-1 i2c conv on a 52-wide row (k = 9·96), the 1x1 head convs, a 13-wide row.
    let shapes = [(864usize, 52usize), (96, 52), (2160, 13)];
    let mut g = c.benchmark_group("int8_pack");
    for (fname, format) in &formats {
        let layout = layout_of(&**format).expect("layout");
        for &(k, mn) in &shapes {
            let data: Vec<i8> = (0..k * mn).map(|i| (i * 7 % 251) as i8).collect();
            let t = Tensor::from_shape(&[k, mn], &data).expect("tensor");
            g.throughput(Throughput::Bytes((k * mn) as u64));
            let id = format!("{fname}/{k}x{mn}");
            g.bench_with_input(BenchmarkId::new("tract", &id), &t, |b, t| {
                b.iter(|| black_box(format.prepare_one_view(&t.view(), 0, 1).expect("pack")))
            });
            g.bench_with_input(BenchmarkId::new("lookout", &id), &data, |b, data| {
                let bytes: Vec<u8> = data.iter().map(|&v| v as u8).collect();
                let src = Source {
                    data: &bytes,
                    k,
                    mn,
                    row_stride: mn,
                };
                b.iter(|| {
                    // Like the op: a fresh zeroed buffer per call.
                    let mut out = vec![0u8; layout.panel_len(k) * layout.panels(mn)];
                    assert!(pack(layout, &src, 0, &mut out));
                    black_box(out)
                })
            });
        }
    }
    g.finish();
}

fn bench_ops(c: &mut Criterion) {
    let ctx = EvalContext::out_of_plan();
    let mut g = c.benchmark_group("int8_ops");
    // QuantizeLinear of the pyramid's float sum into int8.
    let shape = [1usize, 128, 52, 52];
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i % 977) as f32 - 488.0) * 0.013).collect();
    let x = Tensor::from_shape(&shape, &data).expect("tensor");
    let tract_q = ElementWiseOp(
        Box::new(QuantizeLinearI8 {
            scale: 1.0 / 0.021,
            zero_point: -7,
        }),
        None,
    );
    let fact = f32::fact(shape);
    let out = tract_q.output_facts(&[&fact]).expect("facts").remove(0);
    let ours_q = FastQuantize::for_op(&tract_q, &fact, &out).expect("taken");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("quantize/tract", |b| {
        b.iter(|| black_box(tract_q.eval(&ctx, tvec!(x.clone().into_tvalue()))))
    });
    g.bench_function("quantize/lookout", |b| {
        b.iter(|| black_box(ours_q.eval(&ctx, tvec!(x.clone().into_tvalue()))))
    });
    // The LeakyReLU lookup table on a stem-sized activation (a shared input: both copy).
    let shape = [1usize, 32, 104, 104];
    let n: usize = shape.iter().product();
    let bytes: Vec<i8> = (0..n).map(|i| (i * 31 % 256) as u8 as i8).collect();
    let x = Tensor::from_shape(&shape, &bytes)
        .expect("tensor")
        .into_tvalue();
    let table: Vec<u8> = (0..=255u8).map(|v| v.wrapping_mul(3)).collect();
    let tract_lut = ElementWiseOp(
        Box::new(LookupTable {
            table: tract_onnx::tract_core::tract_linalg::routines::lut_u8(&table).expect("lut"),
        }),
        None,
    );
    let ours_lut = FastLut::for_op(&tract_lut, &i8::fact(shape)).expect("taken");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("lut/tract", |b| {
        b.iter(|| black_box(tract_lut.eval(&ctx, tvec!(x.clone()))))
    });
    g.bench_function("lut/lookout", |b| {
        b.iter(|| black_box(ours_lut.eval(&ctx, tvec!(x.clone()))))
    });
    g.finish();
}

fn bench_conv(c: &mut Criterion) {
    let mut g = c.benchmark_group("int8_conv");
    // (k, m, side, window): the 3×3 convs' im2cols at each pyramid level, a 1×1 head conv,
    // and the stem (3×3, stride 2, 3 → 32 channels on the 416² input, TF "SAME" padding).
    let stem = Window {
        kernel: [3, 3],
        strides: [2, 2],
        pads: [(0, 1), (0, 1)],
    };
    for (k, m, side, win) in [
        (288usize, 32usize, 104usize, Window::ONE),
        (576, 64, 52, Window::ONE),
        (1152, 128, 26, Window::ONE),
        (2304, 256, 13, Window::ONE),
        (128, 128, 52, Window::ONE),
        (3, 32, 416, stem),
    ] {
        let model = window_conv_model(k, m, [side, side], win, 0, 7).expect("model");
        let tract_plan = model
            .clone()
            .into_optimized()
            .and_then(|m| m.into_runnable())
            .expect("tract plan");
        let mut ours = model;
        let report = install_early_with(&mut ours, true, true).expect("install");
        assert_eq!(report.convs_ours, 1, "not taken");
        let our_plan = ours
            .into_optimized()
            .and_then(|m| m.into_runnable())
            .expect("our plan");
        let data: Vec<i8> = (0..k * side * side).map(|i| (i * 7 % 251) as i8).collect();
        let x = Tensor::from_shape(&[1, k, side, side], &data)
            .expect("tensor")
            .into_tvalue();
        let [kh, kw] = win.kernel;
        let out = (side / win.strides[0]) * (side / win.strides[1]);
        g.throughput(Throughput::Elements((k * kh * kw * m * out) as u64));
        let id = format!("{k}to{m}/{side}x{side}/{kh}x{kw}s{}", win.strides[0]);
        g.bench_with_input(BenchmarkId::new("tract", &id), &x, |b, x| {
            b.iter(|| black_box(tract_plan.run(tvec!(x.clone())).expect("run")))
        });
        g.bench_with_input(BenchmarkId::new("lookout", &id), &x, |b, x| {
            b.iter(|| black_box(our_plan.run(tvec!(x.clone())).expect("run")))
        });
    }
    g.finish();
}

fn bench_conv3x3(c: &mut Criterion) {
    let mut g = c.benchmark_group("int8_conv3x3");
    let same = Window {
        kernel: [3, 3],
        strides: [1, 1],
        pads: [(1, 1), (1, 1)],
    };
    for (ch, side) in [(32usize, 104usize), (64, 52), (128, 26), (256, 13)] {
        let model = window_conv_model(ch, ch, [side, side], same, 0, 7).expect("model");
        let data: Vec<i8> = (0..ch * side * side).map(|i| (i * 7 % 251) as i8).collect();
        let x = Tensor::from_shape(&[1, ch, side, side], &data)
            .expect("tensor")
            .into_tvalue();
        g.throughput(Throughput::Elements((9 * ch * ch * side * side) as u64));
        for (name, policy) in [
            ("pairwise", KernelPolicy::Pairwise),
            ("winograd", KernelPolicy::Winograd),
        ] {
            let mut ours = model.clone();
            install_early_kernels(&mut ours, true, true, policy).expect("install");
            let plan = ours
                .into_optimized()
                .and_then(|m| m.into_runnable())
                .expect("plan");
            let id = format!("{ch}to{ch}/{side}x{side}");
            g.bench_with_input(BenchmarkId::new(name, &id), &x, |b, x| {
                b.iter(|| black_box(plan.run(tvec!(x.clone())).expect("run")))
            });
        }
    }
    g.finish();
}

fn bench_upsample_add(c: &mut Criterion) {
    let ctx = EvalContext::out_of_plan();
    let mut g = c.benchmark_group("int8_upsample_add");
    let (shape_in, shape_out) = ([1usize, 128, 26, 26], [1usize, 128, 52, 52]);
    let n_in: usize = shape_in.iter().product();
    let n_out: usize = shape_out.iter().product();
    let xs: Vec<f32> = (0..n_in)
        .map(|i| ((i % 613) as f32 - 306.0) * 0.004)
        .collect();
    let x = Tensor::from_shape(&shape_in, &xs)
        .expect("tensor")
        .into_tvalue();
    let ys: Vec<i8> = (0..n_out).map(|i| (i * 37 % 256) as u8 as i8).collect();
    let y = Tensor::from_shape(&shape_out, &ys)
        .expect("tensor")
        .into_tvalue();
    let scales = Tensor::from_shape(&[4], &[1f32, 1.0, 2.0, 2.0])
        .expect("tensor")
        .into_tvalue();
    let resize = Resize {
        coord_transformer: CoordTransformer::HalfPixel,
        interpolator: Interpolator::Linear,
        nearest: Nearest::Floor,
        optional_scales_input: Some(1),
        optional_sizes_input: None,
    };
    let dq = DequantizeLinearF32 {
        scale: 0.0051,
        zero_point: 0,
    };
    let q = ElementWiseOp(
        Box::new(QuantizeLinearI8 {
            scale: 1.0 / 0.0054,
            zero_point: 0,
        }),
        None,
    );
    let fact = f32::fact(shape_out);
    let q_out = q.output_facts(&[&fact]).expect("facts").remove(0);
    let our_q = FastQuantize::for_op(&q, &fact, &q_out).expect("taken");
    let our_resize = FastResize::for_op(&resize, &f32::fact(shape_in)).expect("taken");
    let add = tract_onnx::tract_core::ops::math::add();
    let chain = |resize: &dyn EvalOp, quant: &dyn EvalOp| {
        let yf = dq.eval(&ctx, tvec!(y.clone())).expect("dq").remove(0);
        let r = resize
            .eval(&ctx, tvec!(x.clone(), scales.clone()))
            .expect("resize")
            .remove(0);
        let sum = add.eval(&ctx, tvec!(yf, r)).expect("add").remove(0);
        quant.eval(&ctx, tvec!(sum)).expect("quantize")
    };
    let fused = FastUpsampleAdd::new(
        &resize,
        [2.0, 2.0],
        &shape_in,
        [52, 52],
        (
            Operand::Float,
            Operand::Int8 {
                scale_bits: dq.scale.to_bits(),
                zero_point: 0,
            },
        ),
        Output::Int8 {
            multiplier_bits: (1.0f32 / 0.0054).to_bits(),
            zero_point: 0,
            dt: DatumType::I8,
        },
    )
    .expect("a plan it computes");
    let ours = || {
        fused
            .eval(&ctx, tvec!(x.clone(), y.clone()))
            .expect("fused")
    };
    assert_eq!(
        chain(&resize, &q)[0]
            .to_plain_array_view::<i8>()
            .expect("i8"),
        ours()[0].to_plain_array_view::<i8>().expect("i8"),
        "the fused op and tract's chain differ"
    );
    g.throughput(Throughput::Elements(n_out as u64));
    g.bench_function("tract", |b| b.iter(|| black_box(chain(&resize, &q))));
    g.bench_function("separate", |b| {
        b.iter(|| black_box(chain(&our_resize, &our_q)))
    });
    g.bench_function("lookout", |b| b.iter(|| black_box(ours())));
    g.finish();
}

fn bench_model(c: &mut Criterion) {
    let photo = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/chelsea.jpg");
    let (rgb, w, h) = read_rgb_image(std::path::Path::new(photo)).expect("photo");
    let mut g = c.benchmark_group("int8_model");
    g.sample_size(10);
    for threads in [1usize, 2] {
        for (name, precision) in [("fp32", Precision::Fp32), ("int8", Precision::Int8)] {
            let cfg = DetectorConfig {
                model: ModelSource::embedded(precision),
                threads,
                ..DetectorConfig::default()
            };
            let detector = Detector::load(&cfg).expect("load");
            g.bench_function(format!("{name}/{threads}t"), |b| {
                b.iter(|| black_box(detector.detect_rgb(&rgb, w, h).expect("detect")))
            });
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_pack,
    bench_ops,
    bench_upsample_add,
    bench_conv,
    bench_conv3x3,
    bench_model
);
criterion_main!(benches);
