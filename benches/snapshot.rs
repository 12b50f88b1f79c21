//! Cost of one snapshot on the `lookout-snapshot` thread, from a camera frame of the bundled
//! clip (640×480 MJPEG) to the JPEG that is published: the frame decoded to RGB
//! (`preprocess::frame_to_rgb`), then cropped around a person-sized box, the box drawn, scaled
//! to the default 270 px and encoded at quality 70 (`snapshot::picture::render`); and the same
//! for the whole frame (`crop = false`); and the encode alone, of the decoded frame at its own
//! 640×480. This is the work between an event's best moment and its picture on the broker;
//! the tracker thread only hands the frame over.
//!
//! Run: `cargo bench --bench snapshot -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use lookout::frame::{monotonic_now, Frame, PixelFormat};
use lookout::geom::BBox;
use lookout::preprocess::{frame_to_rgb, Scratch};
use lookout::snapshot::picture::{render, Style};
use lookout::source::DEMO_CLIP;

/// The first JPEG of the bundled clip (SOI … EOI).
fn first_frame() -> Frame {
    let start = DEMO_CLIP
        .windows(2)
        .position(|w| w == [0xFF, 0xD8])
        .unwrap_or(0);
    let end = DEMO_CLIP[start..]
        .windows(2)
        .position(|w| w == [0xFF, 0xD9])
        .map(|e| start + e + 2)
        .unwrap_or(DEMO_CLIP.len());
    Frame {
        seq: 0,
        captured_at: monotonic_now(),
        width: 640,
        height: 480,
        format: PixelFormat::Mjpeg,
        data: DEMO_CLIP[start..end].to_vec(),
    }
}

fn bench_snapshot(c: &mut Criterion) {
    let frame = first_frame();
    let person = BBox {
        x0: 300.0,
        y0: 150.0,
        x1: 360.0,
        y1: 330.0,
    };
    let mut g = c.benchmark_group("snapshot 640x480 mjpeg");
    for (name, crop) in [("crop (default)", true), ("whole frame", false)] {
        let style = Style {
            crop,
            bounding_box: true,
            height: 270,
            quality: 70,
        };
        let mut scratch = Scratch::default();
        g.bench_function(format!("decode + {name} + encode"), |b| {
            b.iter(|| {
                let rgb = frame_to_rgb(black_box(&frame), &mut scratch).unwrap_or_default();
                black_box(render(&rgb, 640, 480, &person, &style).unwrap_or_default())
            })
        });
    }
    // The encode alone: the decoded 640×480 frame at its own size (no scaling), box drawn.
    let mut scratch = Scratch::default();
    let rgb = frame_to_rgb(&frame, &mut scratch).unwrap_or_default();
    let whole = Style {
        crop: false,
        bounding_box: true,
        height: 480,
        quality: 70,
    };
    g.bench_function("encode 640x480 (whole frame, no scaling)", |b| {
        b.iter(|| black_box(render(black_box(&rgb), 640, 480, &person, &whole).unwrap_or_default()))
    });
    g.finish();
}

criterion_group!(benches, bench_snapshot);
criterion_main!(benches);
