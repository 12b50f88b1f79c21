//! What an object looks like, cheaply: the brightness of its box in the tracker's gray plane,
//! as a small histogram per horizontal band (head and shoulders, body, legs for a person).
//! Two boxes of the same person a few seconds apart share their bands' brightness; two people
//! in differently light clothes do not. The tracker weighs its pairings of tracks and
//! detections by it (and refuses a pairing of clearly different looks); the events use it to
//! tell whether a new track is a lost event's object again, or someone else.
//!
//! The gray plane is what the tracker already has on every frame, so this costs one pass over
//! the box's pixels (a few hundred to a few thousand at the tracker's resolution), taken only
//! when a detection has just placed the box.

use crate::frame::GrayImage;
use crate::geom::BBox;

/// How much a track's look counts in its pairing with a detection: the pair's IoU is weighed
/// by `1 − LOOK_WEIGHT + LOOK_WEIGHT × similarity`.
pub const LOOK_WEIGHT: f32 = 0.5;
/// A track is never paired with a detection whose box no other detection covers and whose
/// look is less alike its own than this ([`Appearance::similarity`]): another object in its
/// place (where people cross, a track otherwise takes whoever stands where it is). Chosen
/// with the ground-truth replay (`lookout bench --sweep fidelity --truth`, all eight
/// recordings, both precisions): 0.75 / 0.85 / 0.9 took the rows over 1.2 events per object
/// from 6 to 5 / 4 / 4 and false events from 11 to 9 / 7 / 6, but at 0.9 IDF1 fell; the
/// stricter the gate, the less room for a look to change with the light (docs/tracking.md).
pub const LOOK_GATE: f32 = 0.85;

/// The look of a detection in a round.
#[derive(Clone, Debug)]
pub enum DetectionLook {
    /// No look: the frame has gone by, or the box is too small or outside the plane.
    Unknown,
    /// Another detection covers much of its box: the bands mix two objects; it weighs the
    /// pairing but neither refuses it nor is learned.
    Covered(Appearance),
    /// A look of its object alone.
    Clear(Appearance),
}

/// The affinity of a track whose look is `track` with a detection whose look is `det` (see
/// [`super::assoc::assign_with`]): 1 without both looks, 0 for a clear look less alike than
/// [`LOOK_GATE`], else weighed by [`LOOK_WEIGHT`].
pub fn affinity(track: Option<&Appearance>, det: &DetectionLook) -> f32 {
    let (Some(known), DetectionLook::Clear(look) | DetectionLook::Covered(look)) = (track, det)
    else {
        return 1.0;
    };
    let alike = known.similarity(look);
    if alike < LOOK_GATE && matches!(det, DetectionLook::Clear(_)) {
        return 0.0;
    }
    1.0 - LOOK_WEIGHT + LOOK_WEIGHT * alike
}

/// Histogram bins per band (brightness 0–255 in equal steps, each pixel shared linearly
/// between its two nearest bins so that a small change of light moves weight, not counts).
const BINS: usize = 8;
/// The bands, as fractions of the box's height from its top.
const BANDS: [(f32, f32); 3] = [(0.08, 0.40), (0.40, 0.70), (0.70, 0.95)];
/// The share of the box's width kept, centred (the sides are mostly background).
const KEEP_WIDTH: f32 = 0.6;
/// Fewest gray pixels per band for a usable histogram.
const MIN_PIXELS: usize = 12;
/// The weight of a new look in the running model.
const LEARN: f32 = 0.3;

/// A box's look: per band, a normalised brightness histogram.
#[derive(Clone, Debug, PartialEq)]
pub struct Appearance {
    bands: [[f32; BINS]; BANDS.len()],
}

impl Appearance {
    /// The look of `bbox` (frame pixels) in `gray`; `None` when the box holds too few gray
    /// pixels (small, mostly outside the frame) or the plane is unusable.
    pub fn of(gray: &GrayImage, bbox: &BBox) -> Option<Appearance> {
        let (w, h) = (gray.width as usize, gray.height as usize);
        Appearance::look(&gray.data, w, h, gray.scale, bbox, f32::from)
    }

    /// The look of `bbox` (frame pixels) in a gray plane held as `f32` brightness 0–255 (the
    /// tracker's pyramid base), `width × height`, `scale` frame pixels per plane pixel; `None`
    /// as for [`Appearance::of`].
    pub fn of_plane(
        data: &[f32],
        width: usize,
        height: usize,
        scale: f32,
        bbox: &BBox,
    ) -> Option<Appearance> {
        Appearance::look(data, width, height, scale, bbox, |v| v)
    }

    /// [`Appearance::of`] over a plane of any pixel type, `value` giving its brightness.
    fn look<T: Copy>(
        data: &[T],
        w: usize,
        h: usize,
        scale: f32,
        bbox: &BBox,
        value: impl Fn(T) -> f32,
    ) -> Option<Appearance> {
        if !(scale.is_finite() && scale > 0.0) || data.len() != w * h || w == 0 {
            return None;
        }
        let s = 1.0 / scale;
        let (cx, _) = bbox.center();
        let half = bbox.width() * KEEP_WIDTH / 2.0;
        let x0 = ((cx - half) * s).max(0.0) as usize;
        let x1 = (((cx + half) * s).max(0.0) as usize).min(w);
        let mut bands = [[0.0f32; BINS]; BANDS.len()];
        for (band, &(top, bottom)) in bands.iter_mut().zip(BANDS.iter()) {
            let y0 = ((bbox.y0 + top * bbox.height()) * s).max(0.0) as usize;
            let y1 = (((bbox.y0 + bottom * bbox.height()) * s).max(0.0) as usize).min(h);
            if x1 <= x0 || y1 <= y0 || (x1 - x0) * (y1 - y0) < MIN_PIXELS {
                return None;
            }
            for row in data[y0 * w..y1 * w].chunks_exact(w) {
                for &v in &row[x0..x1] {
                    add_soft(band, value(v));
                }
            }
            let total: f32 = band.iter().sum();
            band.iter_mut().for_each(|b| *b /= total);
        }
        Some(Appearance { bands })
    }

    /// How alike two looks are: the mean over bands of the Bhattacharyya coefficient, 1 for
    /// the same histograms, 0 for histograms with no brightness in common.
    pub fn similarity(&self, other: &Appearance) -> f32 {
        let sum: f32 = self
            .bands
            .iter()
            .zip(other.bands.iter())
            .map(|(a, b)| {
                a.iter()
                    .zip(b.iter())
                    .map(|(p, q)| (p * q).sqrt())
                    .sum::<f32>()
            })
            .sum();
        (sum / BANDS.len() as f32).clamp(0.0, 1.0)
    }

    /// Folds `new` into the look in `slot`, or puts it there when there is none yet.
    pub fn fold(slot: &mut Option<Appearance>, new: &Appearance) {
        match slot {
            Some(known) => known.learn(new),
            None => *slot = Some(new.clone()),
        }
    }

    /// Folds a new look of the same object into this one (a running average, so that one
    /// odd frame — a passer-by in front — does not replace it).
    pub fn learn(&mut self, new: &Appearance) {
        for (a, b) in self.bands.iter_mut().zip(new.bands.iter()) {
            for (p, q) in a.iter_mut().zip(b.iter()) {
                *p += LEARN * (q - *p);
            }
        }
    }
}

/// Adds brightness `v` (0–255) to `band`, shared between the two nearest bin centres.
fn add_soft(band: &mut [f32; BINS], v: f32) {
    let pos = (v.clamp(0.0, 255.0) + 0.5) * BINS as f32 / 256.0 - 0.5;
    let lo = pos.floor();
    let frac = pos - lo;
    let lo = lo as isize;
    let clamp = |i: isize| i.clamp(0, BINS as isize - 1) as usize;
    band[clamp(lo)] += 1.0 - frac;
    band[clamp(lo + 1)] += frac;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 160×120 plane (scale 4: a 640×480 frame) of value `bg`, with a figure at gray
    /// x 40..50, y 20..80 whose top half is `top` and bottom half `bottom`.
    fn plane(bg: u8, top: u8, bottom: u8) -> GrayImage {
        let (w, h) = (160usize, 120usize);
        let mut data = vec![bg; w * h];
        for y in 20..80 {
            for x in 40..50 {
                data[y * w + x] = if y < 50 { top } else { bottom };
            }
        }
        GrayImage {
            width: w as u32,
            height: h as u32,
            scale: 4.0,
            data,
        }
    }

    const FIGURE: BBox = BBox {
        x0: 160.0,
        y0: 80.0,
        x1: 200.0,
        y1: 320.0,
    };

    fn look(g: &GrayImage) -> Appearance {
        Appearance::of(g, &FIGURE).unwrap_or_else(|| panic!("no look"))
    }

    #[test]
    fn the_same_figure_is_alike_and_other_clothes_are_not() {
        let dark_coat = look(&plane(128, 30, 60));
        let same_on_other_ground = look(&plane(220, 30, 60));
        let light_coat = look(&plane(128, 200, 60));
        assert!(dark_coat.similarity(&dark_coat) > 0.999);
        assert!(dark_coat.similarity(&same_on_other_ground) > 0.95);
        let other = dark_coat.similarity(&light_coat);
        assert!(other < 0.75, "{other}");
        // Symmetric.
        assert!((other - light_coat.similarity(&dark_coat)).abs() < 1e-6);
    }

    #[test]
    fn learning_moves_the_model_towards_the_new_look() {
        let a = look(&plane(128, 30, 60));
        let b = look(&plane(128, 200, 60));
        let mut m = a.clone();
        m.learn(&b);
        assert!(m.similarity(&b) > a.similarity(&b));
        assert!(m.similarity(&a) < 1.0);
    }

    #[test]
    fn tiny_outside_or_unusable_boxes_have_no_look() {
        let g = plane(128, 30, 60);
        assert!(Appearance::of(&g, &BBox::new(160.0, 80.0, 164.0, 90.0)).is_none());
        assert!(Appearance::of(&g, &BBox::new(700.0, 500.0, 800.0, 700.0)).is_none());
        let mut bad = g.clone();
        bad.data.pop();
        assert!(Appearance::of(&bad, &FIGURE).is_none());
        bad = g;
        bad.scale = 0.0;
        assert!(Appearance::of(&bad, &FIGURE).is_none());
    }

    #[test]
    fn soft_bins_keep_every_pixels_weight() {
        for v in [0u8, 1, 15, 16, 17, 100, 250, 255] {
            let mut band = [0.0; BINS];
            add_soft(&mut band, f32::from(v));
            assert!((band.iter().sum::<f32>() - 1.0).abs() < 1e-6, "{v}");
        }
    }
}
