//! Plain geometry shared by preprocessing, detection, tracking and output: boxes
//! ([`BBox`]) and how an image is fitted into the model's input ([`ResizeMode`],
//! [`Mapping`]). Imports nothing from the crate, so every module may use it without
//! creating an import cycle (it used to live in `detect` and `preprocess`, which imported
//! each other for it; both still re-export these types under their old paths).

use serde::{Deserialize, Serialize};

/// An axis-aligned box `[x0, y0, x1, y1]` (x0 ≤ x1, y0 ≤ y1), in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct BBox {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Bottom edge.
    pub y1: f32,
}

impl BBox {
    /// A box from its corners.
    pub fn new(x0: f32, y0: f32, x1: f32, y1: f32) -> BBox {
        BBox { x0, y0, x1, y1 }
    }
    /// Width (never negative).
    pub fn width(&self) -> f32 {
        (self.x1 - self.x0).max(0.0)
    }
    /// Height (never negative).
    pub fn height(&self) -> f32 {
        (self.y1 - self.y0).max(0.0)
    }
    /// Area (never negative).
    pub fn area(&self) -> f32 {
        self.width() * self.height()
    }
    /// Centre point.
    pub fn center(&self) -> (f32, f32) {
        ((self.x0 + self.x1) * 0.5, (self.y0 + self.y1) * 0.5)
    }
    /// The share of this box's area inside `region`, 0..1 (0 for an empty box).
    pub fn share_inside(&self, region: &BBox) -> f32 {
        let w = (self.x1.min(region.x1) - self.x0.max(region.x0)).max(0.0);
        let h = (self.y1.min(region.y1) - self.y0.max(region.y0)).max(0.0);
        let area = self.area();
        if area > 0.0 {
            w * h / area
        } else {
            0.0
        }
    }
    /// Intersection over union, 0 when either box is empty.
    pub fn iou(&self, other: &BBox) -> f32 {
        let ix = (self.x1.min(other.x1) - self.x0.max(other.x0)).max(0.0);
        let iy = (self.y1.min(other.y1) - self.y0.max(other.y0)).max(0.0);
        let inter = ix * iy;
        let union = self.area() + other.area() - inter;
        if union > 0.0 {
            inter / union
        } else {
            0.0
        }
    }
    /// As the `[x0, y0, x1, y1]` array used in JSON output.
    pub fn to_array(&self) -> [f32; 4] {
        [self.x0, self.y0, self.x1, self.y1]
    }
}

/// How an image is fitted into the model's input rectangle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResizeMode {
    /// Keep the aspect ratio, centre the image, pad with black (what NanoDet was trained on).
    #[default]
    Letterbox,
    /// Scale each axis independently to fill the input.
    Stretch,
}

/// Where the image lands inside the model input: `input = image * scale + pad`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mapping {
    /// Horizontal scale image → input.
    pub scale_x: f32,
    /// Vertical scale image → input.
    pub scale_y: f32,
    /// Left padding in input pixels.
    pub pad_x: f32,
    /// Top padding in input pixels.
    pub pad_y: f32,
    /// Image width in pixels.
    pub image_w: u32,
    /// Image height in pixels.
    pub image_h: u32,
}

impl Mapping {
    /// The mapping of a `image_w × image_h` image into a `input_w × input_h` input.
    pub fn new(
        image_w: u32,
        image_h: u32,
        input_w: u32,
        input_h: u32,
        mode: ResizeMode,
    ) -> Mapping {
        let sx = input_w as f32 / image_w.max(1) as f32;
        let sy = input_h as f32 / image_h.max(1) as f32;
        match mode {
            ResizeMode::Stretch => Mapping {
                scale_x: sx,
                scale_y: sy,
                pad_x: 0.0,
                pad_y: 0.0,
                image_w,
                image_h,
            },
            ResizeMode::Letterbox => {
                let s = sx.min(sy);
                let (w, h) = ((image_w as f32 * s).round(), (image_h as f32 * s).round());
                Mapping {
                    scale_x: s,
                    scale_y: s,
                    pad_x: ((input_w as f32 - w) / 2.0).floor(),
                    pad_y: ((input_h as f32 - h) / 2.0).floor(),
                    image_w,
                    image_h,
                }
            }
        }
    }

    /// Maps a box from model-input pixels back to image pixels, clamped to the image.
    pub fn to_image(&self, b: &BBox) -> BBox {
        let (w, h) = (self.image_w as f32, self.image_h as f32);
        BBox::new(
            ((b.x0 - self.pad_x) / self.scale_x).clamp(0.0, w),
            ((b.y0 - self.pad_y) / self.scale_y).clamp(0.0, h),
            ((b.x1 - self.pad_x) / self.scale_x).clamp(0.0, w),
            ((b.y1 - self.pad_y) / self.scale_y).clamp(0.0, h),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_identical_disjoint_and_half_overlapping_boxes() {
        let a = BBox::new(0.0, 0.0, 10.0, 10.0);
        assert!((a.iou(&a) - 1.0).abs() < 1e-6);
        assert_eq!(a.iou(&BBox::new(20.0, 20.0, 30.0, 30.0)), 0.0);
        let b = BBox::new(5.0, 0.0, 15.0, 10.0);
        assert!((a.iou(&b) - 50.0 / 150.0).abs() < 1e-6);
        assert_eq!(BBox::new(1.0, 1.0, 1.0, 1.0).iou(&a), 0.0);
    }

    #[test]
    fn letterbox_mapping_centres_and_maps_back() {
        let m = Mapping::new(640, 480, 416, 416, ResizeMode::Letterbox);
        assert!((m.scale_x - 0.65).abs() < 1e-6);
        assert_eq!((m.pad_x, m.pad_y), (0.0, 52.0));
        let b = m.to_image(&BBox::new(0.0, 52.0, 416.0, 364.0));
        assert!((b.x1 - 640.0).abs() < 1e-3 && b.y0.abs() < 1e-3 && (b.y1 - 480.0).abs() < 1e-3);
    }
}
