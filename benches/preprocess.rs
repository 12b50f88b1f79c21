//! Preprocessing speed: the fused frame → tensor path per pixel format, against a naive
//! decode → RGB image → `image::imageops::resize` → normalize path, and against the physical
//! floors — a `memcpy` of the frame and a `memcpy` of a buffer the size of the output tensor.
//! Plus the gray plane for tracking, and the two JPEG decoders (zune-jpeg vs `image`).
//!
//! Run: `cargo bench --bench preprocess -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lookout::detect::int8::quant::quantize;
use lookout::frame::{Frame, GrayImage, PixelFormat};
use lookout::preprocess::{
    decode_jpeg_luma, decode_jpeg_rgb, frame_to_gray, frame_to_input, frame_to_tensor, Mapping,
    ModelInput, Quantization, ResizeMode, Scratch, MEAN_BGR, STD_BGR,
};

const INPUT: u32 = 416;

/// A plausible frame: smooth gradients in every plane (content does not change the raw paths'
/// cost; it does change JPEG's).
fn make_frame(format: PixelFormat, w: u32, h: u32) -> Frame {
    let rgb: Vec<u8> = (0..h)
        .flat_map(|y| {
            (0..w).flat_map(move |x| {
                [
                    (x * 255 / w) as u8,
                    (y * 255 / h) as u8,
                    ((x + y) * 127 / (w + h)) as u8 + 64,
                ]
            })
        })
        .collect();
    let data = match format {
        PixelFormat::Mjpeg => {
            let mut buf = Vec::new();
            let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut buf, 80);
            let _ =
                image::ImageEncoder::write_image(enc, &rgb, w, h, image::ExtendedColorType::Rgb8);
            buf
        }
        PixelFormat::Rgb24 => rgb,
        other => {
            let len = other.frame_len(w, h).unwrap_or(0);
            (0..len).map(|i| (i * 7 % 200) as u8 + 16).collect()
        }
    };
    Frame {
        seq: 0,
        captured_at: lookout::frame::monotonic_now(),
        width: w,
        height: h,
        format,
        data,
    }
}

/// Naive reference: full-size RGB image (BT.601 limited range, per pixel), then
/// `image::imageops::resize` (Triangle = bilinear) to the letterbox size, then normalize.
fn naive(frame: &Frame, out: &mut [f32]) {
    let (w, h) = (frame.width as usize, frame.height as usize);
    let rgb = match frame.format {
        PixelFormat::Mjpeg => match image::load_from_memory(&frame.data) {
            Ok(img) => img.to_rgb8(),
            Err(_) => return,
        },
        PixelFormat::Rgb24 => {
            image::RgbImage::from_raw(w as u32, h as u32, frame.data.clone()).unwrap_or_default()
        }
        f => {
            let mut img = image::RgbImage::new(w as u32, h as u32);
            for y in 0..h {
                for x in 0..w {
                    let (yy, u, v) = sample_yuv(frame, f, x, y);
                    let c = 1.164_383 * (yy - 16.0);
                    let r = c + 1.596_027 * (v - 128.0);
                    let g = c - 0.391_762 * (u - 128.0) - 0.812_968 * (v - 128.0);
                    let b = c + 2.017_232 * (u - 128.0);
                    img.put_pixel(
                        x as u32,
                        y as u32,
                        image::Rgb([r, g, b].map(|c| c.clamp(0.0, 255.0) as u8)),
                    );
                }
            }
            img
        }
    };
    let m = Mapping::new(
        frame.width,
        frame.height,
        INPUT,
        INPUT,
        ResizeMode::Letterbox,
    );
    let iw = (frame.width as f32 * m.scale_x).round() as u32;
    let ih = (frame.height as f32 * m.scale_y).round() as u32;
    let small = image::imageops::resize(&rgb, iw, ih, image::imageops::FilterType::Triangle);
    let plane = (INPUT * INPUT) as usize;
    for c in 0..3 {
        out[c * plane..(c + 1) * plane].fill(-MEAN_BGR[c] / STD_BGR[c]);
    }
    for (x, y, p) in small.enumerate_pixels() {
        let i = (y + m.pad_y as u32) as usize * INPUT as usize + (x + m.pad_x as u32) as usize;
        for c in 0..3 {
            out[c * plane + i] = (p.0[2 - c] as f32 - MEAN_BGR[c]) / STD_BGR[c];
        }
    }
}

fn sample_yuv(f: &Frame, format: PixelFormat, x: usize, y: usize) -> (f32, f32, f32) {
    let (w, h) = (f.width as usize, f.height as usize);
    let d = &f.data;
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let (yy, u, v) = match format {
        PixelFormat::Yuyv => {
            let b = y * cw * 4 + (x / 2) * 4;
            (d[y * cw * 4 + x * 2], d[b + 1], d[b + 3])
        }
        PixelFormat::Uyvy => {
            let b = y * cw * 4 + (x / 2) * 4;
            (d[y * cw * 4 + x * 2 + 1], d[b], d[b + 2])
        }
        PixelFormat::Nv12 => {
            let c = w * h + (y / 2) * cw * 2 + (x / 2) * 2;
            (d[y * w + x], d[c], d[c + 1])
        }
        PixelFormat::Yu12 => {
            let c = (y / 2) * cw + x / 2;
            (d[y * w + x], d[w * h + c], d[w * h + cw * ch + c])
        }
        PixelFormat::Yuv422p => {
            let c = y * cw + x / 2;
            (d[y * w + x], d[w * h + c], d[w * h + cw * h + c])
        }
        _ => (d[y * w + x], 128, 128),
    };
    (yy as f32, u as f32, v as f32)
}

fn bench_tensor(c: &mut Criterion) {
    let formats = [
        PixelFormat::Yuyv,
        PixelFormat::Uyvy,
        PixelFormat::Nv12,
        PixelFormat::Yu12,
        PixelFormat::Grey,
        PixelFormat::Rgb24,
        PixelFormat::Mjpeg,
    ];
    let tensor_len = (3 * INPUT * INPUT) as usize;
    for (w, h) in [(640u32, 480u32), (1280, 720)] {
        let mut g = c.benchmark_group(format!("tensor_{w}x{h}"));
        // The output floor: writing a tensor-sized buffer (2 MB of f32 at 416²).
        let src_t = vec![0.5f32; tensor_len];
        let mut dst_t = vec![0.0f32; tensor_len];
        g.bench_function("memcpy_output_tensor", |b| {
            b.iter(|| dst_t.copy_from_slice(black_box(&src_t)))
        });
        for format in formats {
            let frame = make_frame(format, w, h);
            let mut out = vec![0.0f32; tensor_len];
            let mut scratch = Scratch::new();
            let mut copy = vec![0u8; frame.data.len()];
            g.throughput(Throughput::Bytes(frame.data.len() as u64));
            g.bench_with_input(BenchmarkId::new("memcpy_frame", format), &frame, |b, f| {
                b.iter(|| copy.copy_from_slice(black_box(&f.data)))
            });
            g.bench_with_input(BenchmarkId::new("fused", format), &frame, |b, f| {
                b.iter(|| {
                    // A new seq each time so MJPEG is really decoded, not served from cache.
                    let mut f2 = Frame {
                        data: Vec::new(),
                        ..f.clone()
                    };
                    std::mem::swap(&mut f2.data, &mut copy);
                    f2.data.copy_from_slice(&f.data);
                    f2.seq = f2.seq.wrapping_add(1);
                    let r = frame_to_tensor(
                        &f2,
                        INPUT,
                        INPUT,
                        ResizeMode::Letterbox,
                        &mut out,
                        &mut scratch,
                    );
                    std::mem::swap(&mut f2.data, &mut copy);
                    black_box(r.is_ok())
                })
            });
            g.bench_with_input(BenchmarkId::new("naive", format), &frame, |b, f| {
                b.iter(|| naive(black_box(f), &mut out))
            });
            if w == 640 {
                // An int8 model's input: quantized in the fused loop, against
                // the float tensor quantized afterwards (as the graph's own `QuantizeLinear`
                // would). The shipped files' input quantization.
                let quant = Quantization {
                    scale: 53.44,
                    zero_point: 0,
                };
                let mut out_q = ModelInput::I8(vec![0; tensor_len], quant);
                let mut bytes = vec![0i8; tensor_len];
                g.bench_with_input(BenchmarkId::new("fused_int8", format), &frame, |b, f| {
                    b.iter(|| {
                        let r = frame_to_input(
                            black_box(f),
                            INPUT,
                            INPUT,
                            ResizeMode::Letterbox,
                            &mut out_q,
                            &mut scratch,
                        );
                        black_box(r.is_ok())
                    })
                });
                g.bench_with_input(
                    BenchmarkId::new("fused_then_quantize", format),
                    &frame,
                    |b, f| {
                        b.iter(|| {
                            let r = frame_to_tensor(
                                black_box(f),
                                INPUT,
                                INPUT,
                                ResizeMode::Letterbox,
                                &mut out,
                                &mut scratch,
                            );
                            quantize(&out, &mut bytes, quant.scale, quant.zero_point);
                            black_box(r.is_ok())
                        })
                    },
                );
            }
        }
        g.finish();
    }
}

fn bench_gray(c: &mut Criterion) {
    let mut g = c.benchmark_group("gray_640x480_to_320");
    for format in [
        PixelFormat::Yuyv,
        PixelFormat::Nv12,
        PixelFormat::Grey,
        PixelFormat::Rgb24,
        PixelFormat::Mjpeg,
    ] {
        // MJPEG: a scratch that never decodes the frame in colour, as on the tracker's
        // thread: the JPEG's luma alone is decoded on every call.
        let frame = make_frame(format, 640, 480);
        let mut scratch = Scratch::new();
        let mut out = GrayImage::default();
        g.bench_with_input(BenchmarkId::new("gray", format), &frame, |b, f| {
            b.iter(|| black_box(frame_to_gray(f, 320, &mut out, &mut scratch).is_ok()))
        });
    }
    // The same plane the colour way: a full RGB decode, then luma from the RGB.
    let jpeg = make_frame(PixelFormat::Mjpeg, 640, 480);
    let mut rgb = Frame {
        data: Vec::new(),
        format: PixelFormat::Rgb24,
        ..jpeg.clone()
    };
    let mut scratch = Scratch::new();
    let mut out = GrayImage::default();
    g.bench_function(BenchmarkId::new("gray", "MJPG_via_colour_decode"), |b| {
        b.iter(|| {
            let ok = decode_jpeg_rgb(&jpeg.data, &mut rgb.data).is_ok();
            black_box(ok && frame_to_gray(&rgb, 320, &mut out, &mut scratch).is_ok())
        })
    });
    g.finish();
}

fn bench_jpeg(c: &mut Criterion) {
    let mut g = c.benchmark_group("jpeg_decode");
    for (w, h) in [(640u32, 480u32), (1280, 720)] {
        let frame = make_frame(PixelFormat::Mjpeg, w, h);
        let mut buf = Vec::new();
        g.bench_with_input(
            BenchmarkId::new("zune_jpeg", format!("{w}x{h}")),
            &frame,
            |b, f| b.iter(|| black_box(decode_jpeg_rgb(&f.data, &mut buf).is_ok())),
        );
        g.bench_with_input(
            BenchmarkId::new("zune_jpeg_luma_only", format!("{w}x{h}")),
            &frame,
            |b, f| b.iter(|| black_box(decode_jpeg_luma(&f.data, &mut buf).is_ok())),
        );
        g.bench_with_input(
            BenchmarkId::new("image_crate", format!("{w}x{h}")),
            &frame,
            |b, f| {
                b.iter(|| {
                    black_box(
                        image::load_from_memory(&f.data)
                            .map(|i| i.to_rgb8().len())
                            .ok(),
                    )
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench_tensor, bench_gray, bench_jpeg);
criterion_main!(benches);
