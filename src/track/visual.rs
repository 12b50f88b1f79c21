//! Per-object visual update on the grayscale plane: pyramidal Lucas–Kanade optical flow on a
//! grid of points inside each box, summarised by *median flow* (Kalal et al., "Forward-Backward
//! Error", 2010): every point is tracked forward to the new frame and back again; points whose
//! round trip does not come home (forward–backward error) or whose patch no longer matches
//! (residual) are dropped, and the box moves by the median displacement of the rest and scales
//! by the median change of the distances between them.
//!
//! Why median flow and not a correlation filter: it measures scale as well as position, needs
//! no FFT, degrades gracefully (it reports failure instead of silently locking on background),
//! and the medians ignore the background points a walking person's box always contains. The
//! caller's motion model supplies the expected displacement as the starting guess, so the
//! search only has to cover the deviation from constant velocity.
//!
//! All coordinates here are in gray-plane pixels. The image pyramid is built once per frame
//! and shared by every object; per-point work is a (patch+2)² template sample and a few
//! patch-sized iterations per level.

use crate::frame::GrayImage;
use crate::geom::BBox;

/// Settings of the visual update, already checked (see `TrackerConfig::validate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VisualParams {
    /// Side of the square Lucas–Kanade window, odd, gray pixels.
    pub patch_size: usize,
    /// Pyramid levels above the full-resolution one.
    pub levels: usize,
    /// Points per box side (the grid has `grid × grid` points).
    pub grid: usize,
    /// Largest forward–backward error of a usable point, gray pixels.
    pub max_fb_error: f32,
    /// Most Gauss–Newton iterations per pyramid level.
    pub max_iterations: u32,
}

impl VisualParams {
    /// The pyramid levels (above level 0) needed for a patch of `patch_size` to find motion up
    /// to `search_radius` gray pixels away from the guess. Lucas–Kanade converges reliably for
    /// displacements up to about a quarter of the patch at the coarsest level, and each level
    /// doubles that reach.
    pub fn levels_for(patch_size: usize, search_radius: f32) -> usize {
        let reach0 = ((patch_size / 2) as f32 * 0.5).max(1.0);
        let mut levels = 0;
        while levels < MAX_LEVELS && reach0 * ((1u32 << levels) as f32) < search_radius {
            levels += 1;
        }
        levels
    }
}

/// The most pyramid levels above level 0 ever used.
pub const MAX_LEVELS: usize = 4;
/// Iterations stop once a step is shorter than this, pixels of the level (full resolution,
/// and coarser levels).
const STEP_EPSILON: f32 = 0.05;
const COARSE_STEP_EPSILON: f32 = 0.2;
/// Search radius of the backward pass, gray pixels: it starts from the exact inverse of the
/// forward displacement, so a point that was followed correctly comes home at full
/// resolution, and one that was not should not be rescued by a coarse search.
const BACKWARD_RADIUS: f32 = 2.0;
/// Smallest mean minimum eigenvalue of the gradient matrix per window pixel: below it the
/// patch has too little texture for flow (roughly a 1 grey-level/pixel gradient).
const MIN_EIGEN: f32 = 1.0;
/// Fewest points that must survive the forward–backward check, absolutely and as a fraction
/// of the grid: a few consistent points among many failures are usually a false match.
const MIN_POINTS: usize = 3;
const MIN_POINT_FRACTION: f32 = 0.4;
/// Fraction of the box width left out on each side when placing points (the background
/// beside a person), and the same for the height.
const MARGIN_X: f32 = 0.15;
const MARGIN_Y: f32 = 0.10;

/// One pyramid level: a float image.
#[derive(Clone, Debug, Default)]
struct Plane {
    width: usize,
    height: usize,
    data: Vec<f32>,
}

/// An image pyramid of a gray plane: level 0 is the image, each next level half the size
/// (2×2 mean). Buffers are reused from frame to frame.
#[derive(Clone, Debug, Default)]
pub struct Pyramid {
    planes: Vec<Plane>,
    used: usize,
}

impl Pyramid {
    /// An empty pyramid.
    pub fn new() -> Pyramid {
        Pyramid::default()
    }

    /// Rebuilds the pyramid from `gray` with up to `levels` levels above level 0 (fewer if the
    /// image gets smaller than `min_side` pixels). Returns false, leaving the pyramid empty, if
    /// the image is empty or its data does not match its size.
    pub fn build(&mut self, gray: &GrayImage, levels: usize, min_side: usize) -> bool {
        let (w, h) = (gray.width as usize, gray.height as usize);
        self.used = 0;
        if w == 0 || h == 0 || w.checked_mul(h) != Some(gray.data.len()) {
            return false;
        }
        if self.planes.is_empty() {
            self.planes.push(Plane::default());
        }
        let base = &mut self.planes[0];
        base.width = w;
        base.height = h;
        // Resized (a no-op from the second frame of a size on) and overwritten: a loop over
        // two slices, which the compiler turns into vector conversions.
        base.data.resize(w * h, 0.0);
        for (d, &v) in base.data.iter_mut().zip(&gray.data) {
            *d = v as f32;
        }
        self.used = 1;
        for l in 1..=levels {
            let (pw, ph) = (self.planes[l - 1].width, self.planes[l - 1].height);
            let (nw, nh) = (pw / 2, ph / 2);
            if nw < min_side.max(2) || nh < min_side.max(2) {
                break;
            }
            if self.planes.len() <= l {
                self.planes.push(Plane::default());
            }
            let (lower, upper) = self.planes.split_at_mut(l);
            let src = &lower[l - 1];
            let dst = &mut upper[0];
            dst.width = nw;
            dst.height = nh;
            dst.data.resize(nw * nh, 0.0);
            for (y, row) in dst.data.chunks_exact_mut(nw).enumerate() {
                let r0 = &src.data[2 * y * pw..][..2 * nw];
                let r1 = &src.data[(2 * y + 1) * pw..][..2 * nw];
                for (d, (a, b)) in row
                    .iter_mut()
                    .zip(r0.chunks_exact(2).zip(r1.chunks_exact(2)))
                {
                    *d = 0.25 * (a[0] + a[1] + b[0] + b[1]);
                }
            }
            self.used = l + 1;
        }
        true
    }

    /// Levels in use (0 when empty).
    pub fn levels(&self) -> usize {
        self.used
    }

    /// Level 0 (the image, as `f32` brightness) and its width and height; `None` when empty.
    pub fn base(&self) -> Option<(&[f32], usize, usize)> {
        match self.planes.first() {
            Some(p) if self.used > 0 => Some((&p.data, p.width, p.height)),
            _ => None,
        }
    }

    /// Size of level 0.
    pub fn size(&self) -> (usize, usize) {
        match self.planes.first() {
            Some(p) if self.used > 0 => (p.width, p.height),
            _ => (0, 0),
        }
    }

    /// Swaps contents with `other` (used to keep the previous frame without copying).
    pub fn swap(&mut self, other: &mut Pyramid) {
        std::mem::swap(self, other);
    }
}

/// Samples an `n × n` patch whose top-left pixel is at `(x0, y0)` with bilinear
/// interpolation; pixels outside the image take the nearest edge value.
fn sample_patch(plane: &Plane, x0: f32, y0: f32, n: usize, out: &mut [f32]) {
    let fx0 = x0.floor();
    let fy0 = y0.floor();
    let (ax, ay) = (x0 - fx0, y0 - fy0);
    let w00 = (1.0 - ax) * (1.0 - ay);
    let w01 = ax * (1.0 - ay);
    let w10 = (1.0 - ax) * ay;
    let w11 = ax * ay;
    let (w, h) = (plane.width as isize, plane.height as isize);
    let (ix, iy) = (fx0 as isize, fy0 as isize);
    let out = &mut out[..n * n];
    if ix >= 0 && iy >= 0 && ix + (n as isize) < w && iy + (n as isize) < h {
        let (ix, iy, w) = (ix as usize, iy as usize, w as usize);
        for (j, row) in out.chunks_exact_mut(n).enumerate() {
            let r0 = &plane.data[(iy + j) * w + ix..][..n + 1];
            let r1 = &plane.data[(iy + j + 1) * w + ix..][..n + 1];
            // Zipped slices instead of indexing: no bounds checks, so the loop vectorises.
            let pairs = r0.iter().zip(&r0[1..]).zip(r1.iter().zip(&r1[1..]));
            for (o, ((&a, &b), (&c, &d))) in row.iter_mut().zip(pairs) {
                *o = w00 * a + w01 * b + w10 * c + w11 * d;
            }
        }
    } else {
        let at = |x: isize, y: isize| {
            let x = x.clamp(0, w - 1) as usize;
            let y = y.clamp(0, h - 1) as usize;
            plane.data[y * plane.width + x]
        };
        for (j, row) in out.chunks_exact_mut(n).enumerate() {
            let y = iy + j as isize;
            for (i, o) in row.iter_mut().enumerate() {
                let x = ix + i as isize;
                *o = w00 * at(x, y)
                    + w01 * at(x + 1, y)
                    + w10 * at(x, y + 1)
                    + w11 * at(x + 1, y + 1);
            }
        }
    }
}

/// Lanes of the partial sums in [`mismatch`]: independent accumulators let the compiler use
/// SIMD for what would otherwise be a serial floating-point reduction.
const LANES: usize = 8;

/// For the error `e = template − current` over a window: `(Σ e·gx, Σ e·gy)`, the
/// Gauss–Newton step's right-hand side.
fn mismatch(tmpl: &[f32], cur: &[f32], gx: &[f32], gy: &[f32]) -> (f32, f32) {
    let mut acc = [[0.0f32; LANES]; 2];
    let chunks = tmpl
        .chunks_exact(LANES)
        .zip(cur.chunks_exact(LANES))
        .zip(gx.chunks_exact(LANES).zip(gy.chunks_exact(LANES)));
    for ((t, c), (x, y)) in chunks {
        for l in 0..LANES {
            let e = t[l] - c[l];
            acc[0][l] += e * x[l];
            acc[1][l] += e * y[l];
        }
    }
    let [mut bx, mut by] = acc.map(|a| a.iter().sum::<f32>());
    let tail = tmpl.len() - tmpl.len() % LANES;
    for k in tail..tmpl.len().min(cur.len()).min(gx.len()).min(gy.len()) {
        let e = tmpl[k] - cur[k];
        bx += e * gx[k];
        by += e * gy[k];
    }
    (bx, by)
}

/// `Σ |template − current|` over a window (the patch residual, once per point: only the
/// finest level's last sample is kept).
fn abs_error(tmpl: &[f32], cur: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    for (t, c) in tmpl.chunks_exact(LANES).zip(cur.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += (t[l] - c[l]).abs();
        }
    }
    let mut err = acc.iter().sum::<f32>();
    let tail = tmpl.len() - tmpl.len() % LANES;
    for k in tail..tmpl.len().min(cur.len()) {
        err += (tmpl[k] - cur[k]).abs();
    }
    err
}

/// The gradient matrix of a window: `(Σ gx², Σ gx·gy, Σ gy²)`.
fn structure_tensor(gx: &[f32], gy: &[f32]) -> (f32, f32, f32) {
    let mut acc = [[0.0f32; LANES]; 3];
    for (x, y) in gx.chunks_exact(LANES).zip(gy.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[0][l] += x[l] * x[l];
            acc[1][l] += x[l] * y[l];
            acc[2][l] += y[l] * y[l];
        }
    }
    let [mut xx, mut xy, mut yy] = acc.map(|a| a.iter().sum::<f32>());
    let tail = gx.len() - gx.len() % LANES;
    for (x, y) in gx[tail..].iter().zip(gy.get(tail..).unwrap_or(&[])) {
        xx += x * x;
        xy += x * y;
        yy += y * y;
    }
    (xx, xy, yy)
}

/// Pyramidal Lucas–Kanade for single points, with reusable scratch buffers.
#[derive(Clone, Debug)]
struct LucasKanade {
    half: usize,
    win: usize,
    max_iterations: u32,
    /// (win+2)² sample around the template, for gradients.
    border: Vec<f32>,
    tmpl: Vec<f32>,
    gx: Vec<f32>,
    gy: Vec<f32>,
    cur: Vec<f32>,
}

/// Where a point went, and how well its patch matched there.
#[derive(Clone, Copy, Debug)]
struct PointFlow {
    x: f32,
    y: f32,
    /// Mean absolute intensity difference of the window at the end, grey levels.
    residual: f32,
}

impl LucasKanade {
    fn new(patch_size: usize, max_iterations: u32) -> LucasKanade {
        let win = patch_size | 1;
        let n = win * win;
        LucasKanade {
            half: win / 2,
            win,
            max_iterations,
            border: vec![0.0; (win + 2) * (win + 2)],
            tmpl: vec![0.0; n],
            gx: vec![0.0; n],
            gy: vec![0.0; n],
            cur: vec![0.0; n],
        }
    }

    /// Loads the template around `(lx, ly)` of `plane` and its gradients (central
    /// differences on a one-pixel-wider sample) into `tmpl`, `gx`, `gy`. Once per point and
    /// pyramid level.
    #[inline]
    fn load_template(&mut self, plane: &Plane, lx: f32, ly: f32) {
        let win = self.win;
        let bw = win + 2;
        let origin = (lx - (self.half + 1) as f32, ly - (self.half + 1) as f32);
        sample_patch(plane, origin.0, origin.1, bw, &mut self.border);
        let rows = self.tmpl.chunks_exact_mut(win).zip(
            self.gx
                .chunks_exact_mut(win)
                .zip(self.gy.chunks_exact_mut(win)),
        );
        for (j, (t, (gx, gy))) in rows.enumerate() {
            let up = &self.border[j * bw + 1..][..win];
            let mid = &self.border[(j + 1) * bw..][..bw];
            let down = &self.border[(j + 2) * bw + 1..][..win];
            t.copy_from_slice(&mid[1..=win]);
            for (g, (&l, &r)) in gx.iter_mut().zip(mid.iter().zip(&mid[2..])) {
                *g = 0.5 * (r - l);
            }
            for (g, (&u, &d)) in gy.iter_mut().zip(up.iter().zip(down)) {
                *g = 0.5 * (d - u);
            }
        }
    }

    /// Tracks the point `(px, py)` of `from` into `to`, starting from displacement `guess`,
    /// using pyramid levels `0..=max_level` (as far as both pyramids have them).
    fn track(
        &mut self,
        from: &Pyramid,
        to: &Pyramid,
        px: f32,
        py: f32,
        guess: (f32, f32),
        max_level: usize,
    ) -> Option<PointFlow> {
        let levels = from.levels().min(to.levels()).min(max_level + 1);
        if levels == 0 {
            return None;
        }
        let top = levels - 1;
        let top_scale = 1.0 / (1u32 << top) as f32;
        let (mut dx, mut dy) = (guess.0 * top_scale, guess.1 * top_scale);
        let mut residual = f32::INFINITY;
        let win = self.win;
        let n = win * win;
        let inv_n = 1.0 / n as f32;
        for level in (0..levels).rev() {
            let scale = 1.0 / (1u32 << level) as f32;
            let (fp, tp) = (&from.planes[level], &to.planes[level]);
            let (lx, ly) = (px * scale, py * scale);
            self.load_template(fp, lx, ly);
            let (gxx, gxy, gyy) = structure_tensor(&self.gx, &self.gy);
            let det = gxx * gyy - gxy * gxy;
            let min_eig = 0.5 * (gxx + gyy) - (0.25 * (gxx - gyy).powi(2) + gxy * gxy).sqrt();
            if min_eig * inv_n < MIN_EIGEN || det <= f32::EPSILON {
                // Too flat at this level: keep the guess, but a flat full-resolution patch
                // cannot be tracked at all.
                if level == 0 {
                    return None;
                }
                dx *= 2.0;
                dy *= 2.0;
                continue;
            }
            let inv_det = 1.0 / det;
            // Coarse levels only need to get the next level into its basin.
            let epsilon = if level == 0 {
                STEP_EPSILON
            } else {
                COARSE_STEP_EPSILON
            };
            let (lw, lh) = (tp.width as f32, tp.height as f32);
            for _ in 0..self.max_iterations {
                let (cx, cy) = (lx + dx, ly + dy);
                if cx < -(self.half as f32)
                    || cy < -(self.half as f32)
                    || cx > lw + self.half as f32
                    || cy > lh + self.half as f32
                {
                    return None;
                }
                sample_patch(
                    tp,
                    cx - self.half as f32,
                    cy - self.half as f32,
                    win,
                    &mut self.cur,
                );
                let (bx, by) = mismatch(&self.tmpl, &self.cur, &self.gx, &self.gy);
                let sx = (gyy * bx - gxy * by) * inv_det;
                let sy = (gxx * by - gxy * bx) * inv_det;
                dx += sx;
                dy += sy;
                if sx * sx + sy * sy < epsilon * epsilon {
                    break;
                }
            }
            if !(dx.is_finite() && dy.is_finite()) {
                return None;
            }
            if level > 0 {
                dx *= 2.0;
                dy *= 2.0;
            } else if self.max_iterations > 0 {
                // The finest level's last sample is still in `cur`.
                residual = abs_error(&self.tmpl, &self.cur) * inv_n;
            }
        }
        let (x, y) = (px + dx, py + dy);
        let (w, h) = to.size();
        if x < 0.0 || y < 0.0 || x > (w - 1) as f32 || y > (h - 1) as f32 {
            return None;
        }
        Some(PointFlow { x, y, residual })
    }
}

/// How a box moved between two frames, in gray pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowEstimate {
    /// Median horizontal displacement.
    pub dx: f32,
    /// Median vertical displacement.
    pub dy: f32,
    /// Median ratio of point distances after/before (1 = same size).
    pub scale: f32,
    /// Points the estimate rests on.
    pub inliers: usize,
    /// Median forward–backward error of the usable points, pixels.
    pub fb_error: f32,
}

impl FlowEstimate {
    /// `bbox` moved and scaled about its centre by this estimate.
    pub fn apply(&self, bbox: &BBox) -> BBox {
        let (cx, cy) = bbox.center();
        let (hw, hh) = (
            0.5 * bbox.width() * self.scale,
            0.5 * bbox.height() * self.scale,
        );
        let (cx, cy) = (cx + self.dx, cy + self.dy);
        BBox::new(cx - hw, cy - hh, cx + hw, cy + hh)
    }
}

/// One grid point's round trip.
#[derive(Clone, Copy, Debug)]
struct Trip {
    x0: f32,
    y0: f32,
    x1: f32,
    y1: f32,
    fb: f32,
    residual: f32,
}

/// Median-flow box tracker; one instance serves every object (it keeps only scratch space).
#[derive(Clone, Debug)]
pub struct MedianFlow {
    params: VisualParams,
    lk: LucasKanade,
    trips: Vec<Trip>,
    kept: Vec<Trip>,
    values: Vec<f32>,
}

impl MedianFlow {
    /// A tracker with the given settings.
    pub fn new(params: VisualParams) -> MedianFlow {
        MedianFlow {
            lk: LucasKanade::new(params.patch_size, params.max_iterations),
            params,
            trips: Vec::new(),
            kept: Vec::new(),
            values: Vec::new(),
        }
    }

    /// The settings.
    pub fn params(&self) -> &VisualParams {
        &self.params
    }

    /// Estimates how the object in `bbox` (gray pixels, in `prev`) moved into `cur`, starting
    /// from the expected displacement `guess` and searching up to `radius` gray pixels around
    /// it (capped by the configured pyramid depth; a small radius saves work when the motion
    /// model is confident). `None` when too few points could be followed reliably: the object
    /// is occluded, left, or changed too much.
    pub fn estimate(
        &mut self,
        prev: &Pyramid,
        cur: &Pyramid,
        bbox: &BBox,
        guess: (f32, f32),
        radius: f32,
    ) -> Option<FlowEstimate> {
        let (w, h) = (bbox.width(), bbox.height());
        if !(w >= 1.0 && h >= 1.0) || prev.size() != cur.size() || prev.levels() == 0 {
            return None;
        }
        let g = self.params.grid.max(1);
        self.follow_grid(prev, cur, bbox, guess, radius);
        let min_points = MIN_POINTS.max((MIN_POINT_FRACTION * (g * g) as f32).ceil() as usize);
        if self.trips.len() < min_points {
            return None;
        }
        let fb_median = self.keep_best();
        let dx = median(&mut self.values, self.kept.iter().map(|t| t.x1 - t.x0));
        let dy = median(&mut self.values, self.kept.iter().map(|t| t.y1 - t.y0));
        let scale = self.kept_scale();
        if !(dx.is_finite() && dy.is_finite() && scale.is_finite() && scale > 0.0) {
            return None;
        }
        Some(FlowEstimate {
            dx,
            dy,
            scale,
            inliers: self.kept.len(),
            fb_error: fb_median,
        })
    }

    /// Follows the points of a `grid`×`grid` lattice inside `bbox` forward from `prev` to
    /// `cur` and back, into `trips`: the points whose round trip ends within
    /// `max_fb_error` of where they started.
    fn follow_grid(
        &mut self,
        prev: &Pyramid,
        cur: &Pyramid,
        bbox: &BBox,
        guess: (f32, f32),
        radius: f32,
    ) {
        let (w, h) = (bbox.width(), bbox.height());
        let g = self.params.grid.max(1);
        let (x0, y0) = (bbox.x0 + MARGIN_X * w, bbox.y0 + MARGIN_Y * h);
        let (sx, sy) = (w * (1.0 - 2.0 * MARGIN_X), h * (1.0 - 2.0 * MARGIN_Y));
        let step = |k: usize, span: f32| {
            if g == 1 {
                0.5 * span
            } else {
                span * k as f32 / (g - 1) as f32
            }
        };
        let patch = self.params.patch_size;
        let forward_level = VisualParams::levels_for(patch, radius).min(self.params.levels);
        let backward_level = VisualParams::levels_for(patch, BACKWARD_RADIUS).min(forward_level);
        self.trips.clear();
        for j in 0..g {
            for i in 0..g {
                let (px, py) = (x0 + step(i, sx), y0 + step(j, sy));
                let Some(fwd) = self.lk.track(prev, cur, px, py, guess, forward_level) else {
                    continue;
                };
                let back_guess = (px - fwd.x, py - fwd.y);
                let Some(back) = self
                    .lk
                    .track(cur, prev, fwd.x, fwd.y, back_guess, backward_level)
                else {
                    continue;
                };
                let fb = ((back.x - px).powi(2) + (back.y - py).powi(2)).sqrt();
                if fb <= self.params.max_fb_error {
                    self.trips.push(Trip {
                        x0: px,
                        y0: py,
                        x1: fwd.x,
                        y1: fwd.y,
                        fb,
                        residual: fwd.residual,
                    });
                }
            }
        }
    }

    /// Keeps (in `kept`) the better half of `trips` by round-trip error and by patch
    /// residual, as long as enough points remain (else the better half by round-trip error
    /// alone). Returns the median round-trip error.
    fn keep_best(&mut self) -> f32 {
        let fb_median = median(&mut self.values, self.trips.iter().map(|t| t.fb));
        let res_median = median(&mut self.values, self.trips.iter().map(|t| t.residual));
        self.kept.clear();
        self.kept.extend(
            self.trips
                .iter()
                .filter(|t| t.fb <= fb_median && t.residual <= res_median)
                .copied(),
        );
        if self.kept.len() < MIN_POINTS {
            self.kept.clear();
            self.kept
                .extend(self.trips.iter().filter(|t| t.fb <= fb_median).copied());
        }
        fb_median
    }

    /// The scale change of the kept points: the median ratio of pairwise distances, over
    /// pairs far enough apart to measure (1 when there is none).
    fn kept_scale(&mut self) -> f32 {
        self.values.clear();
        for (a, pa) in self.kept.iter().enumerate() {
            for pb in &self.kept[a + 1..] {
                let d0 = (pa.x0 - pb.x0).hypot(pa.y0 - pb.y0);
                if d0 >= 2.0 {
                    let d1 = (pa.x1 - pb.x1).hypot(pa.y1 - pb.y1);
                    self.values.push(d1 / d0);
                }
            }
        }
        if self.values.is_empty() {
            1.0
        } else {
            let mut v = std::mem::take(&mut self.values);
            let s = median_in_place(&mut v);
            self.values = v;
            s
        }
    }
}

/// Median of the values (upper median for even counts); 0 for none.
fn median(buf: &mut Vec<f32>, values: impl Iterator<Item = f32>) -> f32 {
    buf.clear();
    buf.extend(values);
    median_in_place(buf)
}

fn median_in_place(v: &mut [f32]) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f32::total_cmp);
    *m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random numbers (64-bit LCG).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as u32
        }
    }

    /// A smooth random texture of `size × size`.
    fn texture(size: usize, seed: u64) -> Vec<u8> {
        let mut rng = Lcg(seed);
        let coarse: Vec<f32> = (0..(size / 4 + 2).pow(2))
            .map(|_| (rng.next() % 200) as f32 + 28.0)
            .collect();
        let cw = size / 4 + 2;
        let mut out = vec![0u8; size * size];
        for y in 0..size {
            for x in 0..size {
                let (fx, fy) = (x as f32 / 4.0, y as f32 / 4.0);
                let (ix, iy) = (fx as usize, fy as usize);
                let (ax, ay) = (fx - ix as f32, fy - iy as f32);
                let v = (1.0 - ax) * (1.0 - ay) * coarse[iy * cw + ix]
                    + ax * (1.0 - ay) * coarse[iy * cw + ix + 1]
                    + (1.0 - ax) * ay * coarse[(iy + 1) * cw + ix]
                    + ax * ay * coarse[(iy + 1) * cw + ix + 1];
                out[y * size + x] = v as u8;
            }
        }
        out
    }

    fn scene(
        w: usize,
        h: usize,
        tex: &[u8],
        side: usize,
        ox: usize,
        oy: usize,
        noise_seed: u64,
    ) -> GrayImage {
        let mut rng = Lcg(noise_seed);
        let mut data: Vec<u8> = (0..w * h).map(|_| 100 + (rng.next() % 20) as u8).collect();
        for y in 0..side {
            for x in 0..side {
                if ox + x < w && oy + y < h {
                    data[(oy + y) * w + ox + x] = tex[y * side + x];
                }
            }
        }
        GrayImage {
            width: w as u32,
            height: h as u32,
            scale: 1.0,
            data,
        }
    }

    fn params() -> VisualParams {
        VisualParams {
            patch_size: 9,
            levels: VisualParams::levels_for(9, 16.0),
            grid: 5,
            max_fb_error: 1.5,
            max_iterations: 10,
        }
    }

    #[test]
    fn levels_cover_the_search_radius() {
        assert_eq!(VisualParams::levels_for(9, 2.0), 0);
        assert_eq!(VisualParams::levels_for(9, 4.0), 1);
        assert_eq!(VisualParams::levels_for(9, 12.0), 3);
        assert_eq!(VisualParams::levels_for(9, 16.0), 3);
        assert_eq!(VisualParams::levels_for(3, 1000.0), MAX_LEVELS);
    }

    /// Every level is the plain 2×2 mean of the one below (odd last rows and columns left
    /// out), bit for bit, also when the buffers were filled by a larger and a smaller image
    /// before.
    #[test]
    fn pyramid_levels_are_plain_means_across_sizes() {
        let mut p = Pyramid::new();
        for (w, h) in [(64usize, 48usize), (37, 29), (80, 61)] {
            let gray = GrayImage {
                width: w as u32,
                height: h as u32,
                scale: 1.0,
                data: texture(w.max(h), 3)
                    .chunks_exact(w.max(h))
                    .take(h)
                    .flat_map(|r| r[..w].to_vec())
                    .collect(),
            };
            assert!(p.build(&gray, 3, 4));
            let base: Vec<f32> = gray.data.iter().map(|&v| v as f32).collect();
            assert_eq!(p.planes[0].data, base);
            for l in 1..p.levels() {
                let (lo, up) = (&p.planes[l - 1], &p.planes[l]);
                assert_eq!((up.width, up.height), (lo.width / 2, lo.height / 2));
                let mut want = Vec::new();
                for y in 0..up.height {
                    for x in 0..up.width {
                        let at =
                            |dx: usize, dy: usize| lo.data[(2 * y + dy) * lo.width + 2 * x + dx];
                        want.push(0.25 * (at(0, 0) + at(1, 0) + at(0, 1) + at(1, 1)));
                    }
                }
                assert_eq!(up.data, want, "level {l} of {w}x{h}");
            }
        }
    }

    #[test]
    fn pyramid_rejects_inconsistent_images() {
        let mut p = Pyramid::new();
        let bad = GrayImage {
            width: 10,
            height: 10,
            scale: 1.0,
            data: vec![0; 99],
        };
        assert!(!p.build(&bad, 2, 8));
        assert_eq!(p.levels(), 0);
        let good = GrayImage {
            width: 64,
            height: 48,
            scale: 1.0,
            data: vec![7; 64 * 48],
        };
        assert!(p.build(&good, 3, 9));
        // 64×48 → 32×24 → 16×12 → (8×6 is below 9) stop.
        assert_eq!(p.levels(), 3);
        assert_eq!(p.size(), (64, 48));
    }

    #[test]
    fn follows_a_textured_square() {
        let tex = texture(40, 7);
        let mut prev = Pyramid::new();
        let mut cur = Pyramid::new();
        let mut mf = MedianFlow::new(params());
        prev.build(&scene(160, 120, &tex, 40, 30, 40, 1), 2, 9);
        cur.build(&scene(160, 120, &tex, 40, 35, 38, 2), 2, 9);
        let bbox = BBox::new(30.0, 40.0, 70.0, 80.0);
        let est = mf.estimate(&prev, &cur, &bbox, (0.0, 0.0), 16.0);
        let est = est.unwrap_or_else(|| panic!("flow failed"));
        assert!((est.dx - 5.0).abs() < 0.3, "{est:?}");
        assert!((est.dy + 2.0).abs() < 0.3, "{est:?}");
        assert!((est.scale - 1.0).abs() < 0.03, "{est:?}");
    }

    #[test]
    fn reports_failure_on_a_flat_image() {
        let flat = GrayImage {
            width: 80,
            height: 60,
            scale: 1.0,
            data: vec![128; 80 * 60],
        };
        let mut a = Pyramid::new();
        let mut b = Pyramid::new();
        a.build(&flat, 2, 9);
        b.build(&flat, 2, 9);
        let mut mf = MedianFlow::new(params());
        assert_eq!(
            mf.estimate(&a, &b, &BBox::new(10.0, 10.0, 40.0, 40.0), (0.0, 0.0), 16.0),
            None
        );
    }

    #[test]
    fn mismatch_and_abs_error_match_plain_sums() {
        let n = 81;
        let t: Vec<f32> = (0..n).map(|i| (i * 7 % 13) as f32).collect();
        let c: Vec<f32> = (0..n).map(|i| (i * 5 % 11) as f32).collect();
        let gx: Vec<f32> = (0..n).map(|i| (i % 3) as f32 - 1.0).collect();
        let gy: Vec<f32> = (0..n).map(|i| (i % 4) as f32 * 0.5).collect();
        let (mut bx, mut by, mut err) = (0.0, 0.0, 0.0);
        for k in 0..n {
            let e = t[k] - c[k];
            bx += e * gx[k];
            by += e * gy[k];
            err += e.abs();
        }
        let (x, y) = mismatch(&t, &c, &gx, &gy);
        let e = abs_error(&t, &c);
        assert!((x - bx).abs() < 1e-3 && (y - by).abs() < 1e-3 && (e - err).abs() < 1e-3);
    }

    #[test]
    fn sampling_outside_the_image_clamps() {
        let plane = Plane {
            width: 2,
            height: 2,
            data: vec![1.0, 2.0, 3.0, 4.0],
        };
        let mut out = [0.0; 9];
        sample_patch(&plane, -1.0, -1.0, 3, &mut out);
        assert_eq!(out, [1.0, 1.0, 2.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0]);
        sample_patch(&plane, 0.5, 0.0, 1, &mut out);
        assert_eq!(out[0], 1.5);
    }
}
