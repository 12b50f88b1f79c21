//! The model-output decoder: arbitrary raw outputs (any lengths, any floats: NaN, ±inf,
//! denormals), input and image sizes, thresholds in the ranges validation lets through →
//! `decode`, `nms` and the mapping back to the image, as `Detector::postprocess` does. No
//! panic; every box finite, ordered, inside the model input before mapping and inside the
//! image after; at most `max_detections`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lookout::detect::decode::{self, RawOutputs, NUM_CLASSES, REG_MAX, STRIDES};
use lookout::detect::{nms, BBox};
use lookout::preprocess::{Mapping, ResizeMode};

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let n = N.min(self.0.len());
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        b
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
}

fn inside(b: &BBox, w: f32, h: f32) -> bool {
    [b.x0, b.y0, b.x1, b.y1].iter().all(|v| v.is_finite())
        && 0.0 <= b.x0
        && b.x0 <= b.x1
        && b.x1 <= w
        && 0.0 <= b.y0
        && b.y0 <= b.y1
        && b.y1 <= h
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let sel = input.u8();
    let input_w = 1 + usize::from(input.u16() % 320);
    let input_h = 1 + usize::from(input.u16() % 320);
    let image_w = 1 + input.u32() % 16384;
    let image_h = 1 + input.u32() % 16384;
    // Thresholds as validation lets them through: score in (0, 1), IoU in (0, 1].
    let score_threshold = (f32::from(input.u16()) + 1.0) / 65_538.0;
    let iou_threshold = (f32::from(input.u16()) + 1.0) / 65_536.0;
    let max_detections = usize::from(input.u16() % 1001);
    let mode = if sel & 1 != 0 {
        ResizeMode::Stretch
    } else {
        ResizeMode::Letterbox
    };
    // Lengths: what the input size implies (sel bit 1), or arbitrary.
    let mut lens = Vec::new();
    for &s in &STRIDES {
        let cells = (input_w / s) * (input_h / s);
        if sel & 2 != 0 {
            lens.push((cells * NUM_CLASSES, cells * 4 * (REG_MAX + 1)));
        } else {
            lens.push((usize::from(input.u16()), usize::from(input.u16())));
        }
    }
    // The values: the rest of the input as floats, cycled.
    let pool: Vec<f32> = input
        .0
        .chunks(4)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            f32::from_le_bytes(b)
        })
        .collect();
    let mut next = pool.iter().copied().cycle();
    let mut fill = |n: usize| -> Vec<f32> {
        if pool.is_empty() {
            vec![0.0; n]
        } else {
            (&mut next).take(n).collect()
        }
    };
    let mut raw = RawOutputs::default();
    for (c, r) in lens {
        raw.cls.push(fill(c));
        raw.reg.push(fill(r));
    }
    let cands = decode::decode(&raw, input_w, input_h, score_threshold);
    for d in &cands {
        assert!(d.class_id < NUM_CLASSES, "class {}", d.class_id);
        assert!(!d.score.is_nan() && d.score > score_threshold);
        assert!(
            inside(&d.bbox, input_w as f32, input_h as f32),
            "box {:?} outside the {input_w}x{input_h} input",
            d.bbox
        );
    }
    let kept = nms(cands, iou_threshold, max_detections);
    assert!(kept.len() <= max_detections);
    let map = Mapping::new(image_w, image_h, input_w as u32, input_h as u32, mode);
    for d in &kept {
        let b = map.to_image(&d.bbox);
        assert!(
            inside(&b, image_w as f32, image_h as f32),
            "box {b:?} outside the {image_w}x{image_h} image ({map:?})"
        );
    }
});
