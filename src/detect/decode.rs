//! NanoDet's GFL head: per-cell class scores (already sigmoid) and per-side distance
//! distributions (11 bins, "distribution focal loss") → candidate boxes in model-input pixels.

use super::nms::BBox;
use crate::vocab::Detection;

/// The feature-map strides of the three output levels, in output order.
pub const STRIDES: [usize; 3] = [8, 16, 32];
/// Output tensor names in the order the decoder expects them.
pub const OUTPUT_NAMES: [&str; 6] = ["cls_8", "reg_8", "cls_16", "reg_16", "cls_32", "reg_32"];
/// Bins per side of the distance distribution, minus one.
pub const REG_MAX: usize = 10;
/// Number of classes of the COCO head.
pub const NUM_CLASSES: usize = 80;

/// Raw outputs of one inference, `cls` and `reg` for each stride of [`STRIDES`].
#[derive(Clone, Debug, Default)]
pub struct RawOutputs {
    /// `cls[level]`: `cells × NUM_CLASSES` scores in 0..1, cells row-major.
    pub cls: Vec<Vec<f32>>,
    /// `reg[level]`: `cells × 4 × (REG_MAX + 1)` logits.
    pub reg: Vec<Vec<f32>>,
}

impl RawOutputs {
    /// All six outputs concatenated in [`OUTPUT_NAMES`] order (the golden-file layout).
    pub fn concatenated(&self) -> Vec<f32> {
        let mut v = Vec::new();
        for (c, r) in self.cls.iter().zip(&self.reg) {
            v.extend_from_slice(c);
            v.extend_from_slice(r);
        }
        v
    }
}

/// Expected value of a softmax distribution over bins 0..=REG_MAX.
fn expected_bin(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (mut sum, mut weighted) = (0.0f32, 0.0f32);
    for (j, &l) in logits.iter().enumerate() {
        let e = (l - max).exp();
        sum += e;
        weighted += e * j as f32;
    }
    if sum > 0.0 {
        weighted / sum
    } else {
        0.0
    }
}

/// Decodes every cell whose best class score exceeds `score_threshold` into a box in
/// model-input pixels (clamped to the input), before NMS.
pub fn decode(
    raw: &RawOutputs,
    input_w: usize,
    input_h: usize,
    score_threshold: f32,
) -> Vec<Detection> {
    let mut out = Vec::new();
    let bins = REG_MAX + 1;
    for (level, &stride) in STRIDES.iter().enumerate() {
        let (Some(cls), Some(reg)) = (raw.cls.get(level), raw.reg.get(level)) else {
            continue;
        };
        let cols = input_w / stride;
        let cells = cols * (input_h / stride);
        for cell in 0..cells.min(cls.len() / NUM_CLASSES) {
            let scores = &cls[cell * NUM_CLASSES..(cell + 1) * NUM_CLASSES];
            let (class_id, score) =
                scores
                    .iter()
                    .copied()
                    .enumerate()
                    .fold((0, f32::NEG_INFINITY), |best, (i, s)| {
                        if s > best.1 {
                            (i, s)
                        } else {
                            best
                        }
                    });
            if score <= score_threshold {
                continue;
            }
            let Some(dist) = reg.get(cell * 4 * bins..(cell + 1) * 4 * bins) else {
                continue;
            };
            let s = stride as f32;
            let cx = ((cell % cols) as f32 + 0.5) * s;
            let cy = ((cell / cols) as f32 + 0.5) * s;
            let d: [f32; 4] =
                std::array::from_fn(|k| expected_bin(&dist[k * bins..(k + 1) * bins]) * s);
            let bbox = BBox::new(
                (cx - d[0]).max(0.0),
                (cy - d[1]).max(0.0),
                (cx + d[2]).min(input_w as f32),
                (cy + d[3]).min(input_h as f32),
            );
            out.push(Detection {
                class_id,
                score,
                bbox,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_bin_of_a_peaked_distribution() {
        let mut l = [-50.0f32; 11];
        l[3] = 50.0;
        assert!((expected_bin(&l) - 3.0).abs() < 1e-4);
        let flat = [0.0f32; 11];
        assert!((expected_bin(&flat) - 5.0).abs() < 1e-4);
    }

    #[test]
    fn decodes_one_cell_into_its_box() {
        // 32x32 input: stride 8 → 4x4 cells; put a class-2 object at cell (row 1, col 2).
        let (w, h) = (32, 32);
        let mut raw = RawOutputs::default();
        for &s in &STRIDES {
            let cells = (w / s) * (h / s);
            raw.cls.push(vec![0.0; cells * NUM_CLASSES]);
            raw.reg.push(vec![-50.0; cells * 4 * (REG_MAX + 1)]);
        }
        let cell = 4 + 2;
        raw.cls[0][cell * NUM_CLASSES + 2] = 0.9;
        for k in 0..4 {
            raw.reg[0][cell * 44 + k * 11 + 1] = 50.0; // every side at 1 bin = 8 px
        }
        let dets = decode(&raw, w, h, 0.5);
        assert_eq!(dets.len(), 1);
        let d = &dets[0];
        assert_eq!(d.class_id, 2);
        // centre (20, 12), sides 8 px
        let b = d.bbox;
        assert!((b.x0 - 12.0).abs() < 1e-3 && (b.y0 - 4.0).abs() < 1e-3);
        assert!((b.x1 - 28.0).abs() < 1e-3 && (b.y1 - 20.0).abs() < 1e-3);
    }
}
