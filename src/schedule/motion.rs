//! A cheap motion measure on the tracker's gray plane: frame differencing on a coarse grid,
//! with a noise floor taken from the frame itself and a one-step morphology that drops
//! isolated cells.
//!
//! Per frame it costs one pass over the plane (|cur − prev| summed per cell, ≈ 77 k pixels
//! at 320×240) and one over the grid (40×30 cells of 8×8 pixels).
//!
//! - **Noise floor**: the median of the cells' mean absolute differences. Most of a camera's
//!   view is still from one frame to the next, so the median is what sensor noise and
//!   compression make of a still scene; a global brightness change lifts it with everything
//!   else, so it does not read as motion.
//! - **A moving cell**: mean difference above `floor × floor_factor + min_delta` gray levels.
//! - **Morphology**: a moving cell counts only if one of its 8 neighbours moves too (single
//!   cells are noise, compression blocks or a flicker; a person 12 gray pixels wide at a
//!   distance still covers two cells).

use crate::frame::GrayImage;
use crate::geom::BBox;

/// Settings of the motion measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MotionParams {
    /// Side of a grid cell, gray pixels.
    pub cell: u32,
    /// Gray levels a cell's mean difference must exceed the (scaled) noise floor by.
    pub min_delta: f32,
    /// How many noise floors a cell's mean difference must reach.
    pub floor_factor: f32,
}

impl Default for MotionParams {
    fn default() -> Self {
        MotionParams {
            cell: 8,
            min_delta: 3.0,
            floor_factor: 2.0,
        }
    }
}

/// The motion of one frame against the previous one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MotionReport {
    /// Moving cells (after the morphology).
    pub moving: usize,
    /// Moving cells whose centre lies outside every box given to [`MotionGrid::report`].
    pub outside: usize,
    /// Of the `outside` cells, those not next to a cell that moved outside the boxes when
    /// [`MotionGrid::remember`] was last called (the last detection): motion in a new place.
    pub new_outside: usize,
    /// The noise floor, gray levels (mean absolute difference of a still cell).
    pub floor: f32,
}

/// Frame differencing on a grid; keeps the previous plane.
#[derive(Clone, Debug, Default)]
pub struct MotionGrid {
    params: MotionParams,
    prev: Vec<u8>,
    width: u32,
    height: u32,
    scale: f32,
    cols: usize,
    rows: usize,
    /// Per-cell sum of |cur − prev| (scratch).
    sums: Vec<u32>,
    /// Per-cell pixel count (edge cells may be smaller).
    counts: Vec<u32>,
    /// Per-cell mean difference (scratch, then sorted for the median).
    means: Vec<f32>,
    sorted: Vec<f32>,
    raw: Vec<bool>,
    moving: Vec<bool>,
    /// Cells next to (or at) motion outside the boxes at the last [`MotionGrid::remember`].
    seen: Vec<bool>,
    floor: f32,
    /// Whether `moving` describes the latest frame (false on the first frame or a size change).
    valid: bool,
}

impl MotionGrid {
    /// A grid with no previous frame.
    pub fn new(params: MotionParams) -> MotionGrid {
        MotionGrid {
            params: MotionParams {
                cell: params.cell.max(1),
                ..params
            },
            ..MotionGrid::default()
        }
    }

    /// Compares `gray` with the previous plane and keeps it for the next call. Returns false
    /// when there is nothing to compare with: the first frame, a different size or scale, or
    /// an unusable plane (which also forgets the previous one).
    pub fn update(&mut self, gray: &GrayImage) -> bool {
        let usable = gray.width > 0
            && gray.height > 0
            && gray.data.len() == gray.width as usize * gray.height as usize;
        if !usable {
            self.prev.clear();
            self.valid = false;
            return false;
        }
        let same = self.prev.len() == gray.data.len()
            && self.width == gray.width
            && self.height == gray.height
            && self.scale == gray.scale;
        if same {
            self.difference(gray);
            self.classify();
            self.valid = true;
        } else {
            self.resize(gray);
            self.valid = false;
        }
        self.prev.clear();
        self.prev.extend_from_slice(&gray.data);
        self.valid
    }

    fn resize(&mut self, gray: &GrayImage) {
        let c = self.params.cell as usize;
        self.width = gray.width;
        self.height = gray.height;
        self.scale = gray.scale;
        self.cols = (gray.width as usize).div_ceil(c);
        self.rows = (gray.height as usize).div_ceil(c);
        let n = self.cols * self.rows;
        self.counts = vec![0; n];
        for y in 0..gray.height as usize {
            for cx in 0..self.cols {
                let w = c.min(gray.width as usize - cx * c) as u32;
                self.counts[(y / c) * self.cols + cx] += w;
            }
        }
        self.sums = vec![0; n];
        self.means = vec![0.0; n];
        self.raw = vec![false; n];
        self.moving = vec![false; n];
        self.seen = vec![false; n];
    }

    /// Per-cell sums of absolute differences, row by row (the inner loop vectorizes).
    fn difference(&mut self, gray: &GrayImage) {
        let (w, c) = (self.width as usize, self.params.cell as usize);
        self.sums.iter_mut().for_each(|s| *s = 0);
        for (y, (cur, prev)) in gray
            .data
            .chunks_exact(w)
            .zip(self.prev.chunks_exact(w))
            .enumerate()
        {
            let row = &mut self.sums[(y / c) * self.cols..(y / c + 1) * self.cols];
            for ((a, b), sum) in cur.chunks(c).zip(prev.chunks(c)).zip(row.iter_mut()) {
                *sum += a
                    .iter()
                    .zip(b)
                    .map(|(&p, &q)| u32::from(p.abs_diff(q)))
                    .sum::<u32>();
            }
        }
    }

    /// Noise floor, thresholds, morphology.
    fn classify(&mut self) {
        for ((m, &s), &n) in self.means.iter_mut().zip(&self.sums).zip(&self.counts) {
            *m = s as f32 / n.max(1) as f32;
        }
        self.sorted.clear();
        self.sorted.extend_from_slice(&self.means);
        let mid = self.sorted.len() / 2;
        let floor = if self.sorted.is_empty() {
            0.0
        } else {
            *self.sorted.select_nth_unstable_by(mid, f32::total_cmp).1
        };
        self.floor = floor;
        let limit = floor * self.params.floor_factor + self.params.min_delta;
        for (r, &m) in self.raw.iter_mut().zip(&self.means) {
            *r = m > limit;
        }
        let (cols, rows) = (self.cols as isize, self.rows as isize);
        for y in 0..rows {
            for x in 0..cols {
                let i = (y * cols + x) as usize;
                self.moving[i] = self.raw[i]
                    && (-1..=1).any(|dy| {
                        (-1..=1).any(|dx| {
                            let (nx, ny) = (x + dx, y + dy);
                            (dx, dy) != (0, 0)
                                && (0..cols).contains(&nx)
                                && (0..rows).contains(&ny)
                                && self.raw[(ny * cols + nx) as usize]
                        })
                    });
            }
        }
    }

    /// The latest frame's motion; `boxes` (full-frame pixels, e.g. the tracks' boxes, grown a
    /// little by the caller) explain the motion inside them. All zero when [`update`] had
    /// nothing to compare.
    ///
    /// [`update`]: MotionGrid::update
    pub fn report<'b>(&self, boxes: impl IntoIterator<Item = &'b BBox> + Clone) -> MotionReport {
        if !self.valid {
            return MotionReport::default();
        }
        let mut r = MotionReport {
            floor: self.floor,
            ..MotionReport::default()
        };
        for (i, _) in self.moving.iter().enumerate().filter(|(_, m)| **m) {
            r.moving += 1;
            if self.outside(i, boxes.clone()) {
                r.outside += 1;
                r.new_outside += usize::from(!self.seen.get(i).copied().unwrap_or(false));
            }
        }
        r
    }

    /// Remembers where the latest frame moved outside `boxes` (and the cells next to it), for
    /// [`MotionReport::new_outside`]: call it when a detection runs. What moved there was
    /// looked at; motion that is still there (or one cell on) afterwards is most likely the
    /// same thing — a crowd the tracks do not cover, leaves, a screen — and does not need
    /// another look until the schedule's longest gap, while motion in a new place does.
    pub fn remember<'b>(&mut self, boxes: impl IntoIterator<Item = &'b BBox> + Clone) {
        self.seen.iter_mut().for_each(|s| *s = false);
        if !self.valid {
            return;
        }
        let (cols, rows) = (self.cols as isize, self.rows as isize);
        for i in 0..self.moving.len() {
            if !self.moving[i] || !self.outside(i, boxes.clone()) {
                continue;
            }
            let (x, y) = ((i % self.cols) as isize, (i / self.cols) as isize);
            for ny in (y - 1).max(0)..=(y + 1).min(rows - 1) {
                for nx in (x - 1).max(0)..=(x + 1).min(cols - 1) {
                    self.seen[(ny * cols + nx) as usize] = true;
                }
            }
        }
    }

    /// Whether cell `i`'s centre lies outside every one of `boxes` (full-frame pixels).
    fn outside<'b>(&self, i: usize, boxes: impl IntoIterator<Item = &'b BBox>) -> bool {
        let c = self.params.cell as f32 * self.scale;
        let (cx, cy) = (
            ((i % self.cols) as f32 + 0.5) * c,
            ((i / self.cols) as f32 + 0.5) * c,
        );
        !boxes
            .into_iter()
            .any(|b| cx >= b.x0 && cx <= b.x1 && cy >= b.y0 && cy <= b.y1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise source (xorshift), so tests need no crate.
    struct Noise(u64);
    impl Noise {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// Roughly Gaussian, σ ≈ `sigma` (sum of 4 uniforms).
        fn gauss(&mut self, sigma: f32) -> f32 {
            let s: f32 = (0..4).map(|_| (self.next() % 1000) as f32 / 1000.0).sum();
            (s - 2.0) * sigma * 1.73
        }
    }

    fn scene(noise: &mut Noise, sigma: f32, square: Option<(u32, u32)>) -> GrayImage {
        let (w, h) = (320u32, 240u32);
        let mut data = Vec::with_capacity((w * h) as usize);
        for y in 0..h {
            for x in 0..w {
                let base = 60.0 + ((x * 7 + y * 3) % 90) as f32;
                let v = match square {
                    Some((sx, sy)) if (sx..sx + 16).contains(&x) && (sy..sy + 32).contains(&y) => {
                        220.0
                    }
                    _ => base,
                };
                data.push((v + noise.gauss(sigma)).clamp(0.0, 255.0) as u8);
            }
        }
        GrayImage {
            width: w,
            height: h,
            scale: 2.0,
            data,
        }
    }

    #[test]
    fn sensor_noise_alone_is_no_motion() {
        let mut n = Noise(7);
        let mut g = MotionGrid::new(MotionParams::default());
        assert!(!g.update(&scene(&mut n, 3.0, None)));
        for _ in 0..20 {
            assert!(g.update(&scene(&mut n, 3.0, None)));
            let r = g.report(&[]);
            assert_eq!(r.moving, 0, "{r:?}");
            assert!(r.floor > 1.0, "noise must show in the floor: {r:?}");
        }
    }

    #[test]
    fn a_moving_object_is_motion_outside_unless_a_box_covers_it() {
        let mut n = Noise(11);
        let mut g = MotionGrid::new(MotionParams::default());
        g.update(&scene(&mut n, 2.0, Some((100, 100))));
        assert!(g.update(&scene(&mut n, 2.0, Some((108, 100)))));
        let r = g.report(&[]);
        assert!(r.moving >= 2 && r.outside == r.moving, "{r:?}");
        // The box in frame pixels (scale 2) covering both positions explains it.
        let cover = BBox::new(180.0, 180.0, 260.0, 280.0);
        let r = g.report(&[cover]);
        assert_eq!(r.outside, 0, "{r:?}");
        // Far away, it does not.
        assert_eq!(
            g.report(&[BBox::new(0.0, 0.0, 50.0, 50.0)]).outside,
            r.moving
        );
    }

    #[test]
    fn motion_where_the_last_detection_looked_is_not_new() {
        let mut n = Noise(13);
        let mut g = MotionGrid::new(MotionParams::default());
        g.update(&scene(&mut n, 2.0, Some((100, 100))));
        g.update(&scene(&mut n, 2.0, Some((104, 100))));
        let first = g.report(&[]);
        assert!(
            first.new_outside >= 2 && first.new_outside == first.outside,
            "{first:?}"
        );
        // A detection looks at it; the square moves on by a few pixels.
        g.remember(&[]);
        g.update(&scene(&mut n, 2.0, Some((108, 100))));
        let same_place = g.report(&[]);
        assert!(same_place.outside >= 2, "{same_place:?}");
        assert_eq!(same_place.new_outside, 0, "{same_place:?}");
        // Something starts moving far from it: that is new.
        g.update(&scene(&mut n, 2.0, Some((260, 20))));
        let elsewhere = g.report(&[]);
        assert!(elsewhere.new_outside >= 2, "{elsewhere:?}");
        assert!(elsewhere.new_outside < elsewhere.outside, "{elsewhere:?}");
    }

    #[test]
    fn a_global_brightness_change_is_not_motion() {
        let mut n = Noise(3);
        let mut g = MotionGrid::new(MotionParams::default());
        let a = scene(&mut n, 2.0, None);
        let mut b = scene(&mut n, 2.0, None);
        b.data.iter_mut().for_each(|p| *p = p.saturating_add(12));
        g.update(&a);
        g.update(&b);
        assert_eq!(g.report(&[]).moving, 0);
    }

    #[test]
    fn a_size_change_or_a_bad_plane_restarts_the_comparison() {
        let mut n = Noise(5);
        let mut g = MotionGrid::new(MotionParams::default());
        g.update(&scene(&mut n, 1.0, None));
        let bad = GrayImage {
            width: 10,
            height: 10,
            scale: 1.0,
            data: vec![0; 5],
        };
        assert!(!g.update(&bad));
        assert!(!g.update(&scene(&mut n, 1.0, None)));
        assert!(g.update(&scene(&mut n, 1.0, None)));
        let small = GrayImage {
            width: 33,
            height: 17,
            scale: 1.0,
            data: vec![9; 33 * 17],
        };
        assert!(!g.update(&small));
        assert!(g.update(&small));
        assert_eq!(g.report(&[]), MotionReport::default());
    }
}
