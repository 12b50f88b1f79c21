//! A constant-velocity Kalman filter over a box: state `(cx, cy, w, h)` and their velocities.
//!
//! The motion model moves each of the four box coordinates independently, and both kinds of
//! measurement (visual update, detection) observe the four coordinates independently, so the
//! 8×8 covariance stays block-diagonal: it is exactly four independent 2×2 filters of
//! (value, velocity). Keeping it that way makes the filter a few dozen flops per frame and
//! needs no linear-algebra crate.
//!
//! Noise is relative to the box size (the geometric mean of width and height), so one set of
//! parameters suits a person far away and a car close by. Time is counted in frames: a gap in
//! sequence numbers (dropped frames) is a longer prediction step.

use crate::geom::BBox;

/// Noise parameters of the filter, as fractions of the box size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KalmanParams {
    /// Process noise of the position (and size) per frame, standard deviation.
    pub process_position: f32,
    /// Process noise of the velocity per frame, standard deviation.
    pub process_velocity: f32,
}

/// One coordinate and its velocity, with their 2×2 covariance.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Axis {
    x: f32,
    v: f32,
    /// Covariance `[[pxx, pxv], [pxv, pvv]]` (symmetric).
    pxx: f32,
    pxv: f32,
    pvv: f32,
}

impl Axis {
    fn new(x: f32, pos_std: f32, vel_std: f32) -> Axis {
        Axis {
            x,
            v: 0.0,
            pxx: pos_std * pos_std,
            pxv: 0.0,
            pvv: vel_std * vel_std,
        }
    }

    /// `x ← x + v·dt`, `P ← F P Fᵀ + Q·dt`.
    fn predict(&mut self, dt: f32, q_pos: f32, q_vel: f32) {
        self.x += self.v * dt;
        let pxx = self.pxx + dt * (2.0 * self.pxv + dt * self.pvv);
        let pxv = self.pxv + dt * self.pvv;
        self.pxx = pxx + q_pos * dt;
        self.pxv = pxv;
        self.pvv += q_vel * dt;
    }

    /// Sets `x` to `z` (variance `r`), correcting the velocity as a Kalman update would.
    fn anchor(&mut self, z: f32, r: f32) {
        let s = self.pxx + r;
        if s.is_nan() || s <= 0.0 || !z.is_finite() {
            return;
        }
        let kv = self.pxv / s;
        let innovation = z - self.x;
        self.x = z;
        self.v += kv * innovation;
        // P stays positive semi-definite: pvv − kv·pxv ≥ (r/s · pxv)² / r.
        self.pvv = (self.pvv - kv * self.pxv).max(1e-6);
        self.pxv *= r / s;
        self.pxx = r;
    }

    /// Standard Kalman update with a direct measurement `z` of `x` with variance `r`.
    fn correct(&mut self, z: f32, r: f32) {
        let s = self.pxx + r;
        if s.is_nan() || s <= 0.0 || !z.is_finite() {
            return;
        }
        let kx = self.pxx / s;
        let kv = self.pxv / s;
        let innovation = z - self.x;
        self.x += kx * innovation;
        self.v += kv * innovation;
        // P ← (I − K H) P, written out for the symmetric 2×2 case.
        let pxx = (1.0 - kx) * self.pxx;
        let pxv = (1.0 - kx) * self.pxv;
        let pvv = self.pvv - kv * self.pxv;
        self.pxx = pxx.max(1e-6);
        self.pxv = pxv;
        self.pvv = pvv.max(1e-6);
    }
}

/// A constant-velocity Kalman filter over a box (centre, size, and their velocities), in
/// whatever pixel space its boxes are given in (lookout uses full-frame pixels).
#[derive(Clone, Debug, PartialEq)]
pub struct BoxKalman {
    /// cx, cy, w, h.
    axes: [Axis; 4],
    params: KalmanParams,
}

/// Smallest size used as the reference for relative noise, so tiny boxes still move.
const MIN_REF_SIZE: f32 = 4.0;
/// Smallest width or height the filter ever reports.
const MIN_SIDE: f32 = 1.0;

impl BoxKalman {
    /// A filter at `bbox` with zero velocity. `measurement_noise` (a fraction of the box size)
    /// sets how uncertain the starting position is; the velocity starts very uncertain so the
    /// first measurements determine it.
    pub fn new(bbox: &BBox, params: KalmanParams, measurement_noise: f32) -> BoxKalman {
        let (cx, cy) = bbox.center();
        let (w, h) = (bbox.width().max(MIN_SIDE), bbox.height().max(MIN_SIDE));
        let size = ref_size(w, h);
        let pos_std = 2.0 * measurement_noise * size;
        let vel_std = 0.1 * size;
        BoxKalman {
            axes: [
                Axis::new(cx, pos_std, vel_std),
                Axis::new(cy, pos_std, vel_std),
                Axis::new(w, pos_std, vel_std),
                Axis::new(h, pos_std, vel_std),
            ],
            params,
        }
    }

    /// Advances the state by `dt` frames (0 does nothing).
    pub fn predict(&mut self, dt: f32) {
        if dt.is_nan() || dt <= 0.0 {
            return;
        }
        let size = self.size();
        let q_pos = (self.params.process_position * size).powi(2);
        let q_vel = (self.params.process_velocity * size).powi(2);
        for a in &mut self.axes {
            a.predict(dt, q_pos, q_vel);
        }
        self.keep_positive();
    }

    /// Folds in a measured box whose error has standard deviation `noise` × box size.
    /// Non-finite or empty measurements are ignored.
    pub fn correct(&mut self, measured: &BBox, noise: f32) {
        let (cx, cy) = measured.center();
        let (w, h) = (measured.width(), measured.height());
        if w.is_nan() || h.is_nan() || w <= 0.0 || h <= 0.0 || !cx.is_finite() || !cy.is_finite() {
            return;
        }
        let r = (noise * ref_size(w, h)).powi(2).max(1e-6);
        for (a, z) in self.axes.iter_mut().zip([cx, cy, w, h]) {
            a.correct(z, r);
        }
        self.keep_positive();
    }

    /// Re-anchors the state on an absolute measurement (a detection, whose error does not
    /// accumulate the way visual updates drift): the box becomes `measured`, the velocity takes
    /// the usual Kalman correction from the innovation, and the position uncertainty becomes
    /// the measurement's. Non-finite or empty measurements are ignored.
    pub fn anchor(&mut self, measured: &BBox, noise: f32) {
        let (cx, cy) = measured.center();
        let (w, h) = (measured.width(), measured.height());
        if w.is_nan() || h.is_nan() || w <= 0.0 || h <= 0.0 || !cx.is_finite() || !cy.is_finite() {
            return;
        }
        let r = (noise * ref_size(w, h)).powi(2).max(1e-6);
        for (a, z) in self.axes.iter_mut().zip([cx, cy, w, h]) {
            a.anchor(z, r);
        }
        self.keep_positive();
    }

    /// Moves the state by a constant offset without touching velocity or covariance (used
    /// when a correction is known exactly, e.g. a shift of the whole history).
    pub fn shift(&mut self, dcx: f32, dcy: f32) {
        self.axes[0].x += dcx;
        self.axes[1].x += dcy;
    }

    /// How far the centre of `measured` is from the state, in standard deviations of the
    /// expected difference (prediction uncertainty plus `noise` × box size measurement noise):
    /// the Mahalanobis distance used to reject implausible measurements.
    pub fn gate_distance(&self, measured: &BBox, noise: f32) -> f32 {
        let (mx, my) = measured.center();
        let r = (noise * ref_size(measured.width(), measured.height())).powi(2);
        let (ax, ay) = (&self.axes[0], &self.axes[1]);
        let d2 = (mx - ax.x).powi(2) / (ax.pxx + r).max(1e-6)
            + (my - ay.x).powi(2) / (ay.pxx + r).max(1e-6);
        if d2.is_finite() {
            d2.sqrt()
        } else {
            f32::INFINITY
        }
    }

    /// The current box estimate.
    pub fn bbox(&self) -> BBox {
        let [cx, cy, w, h] = self.axes.map(|a| a.x);
        BBox::new(cx - w * 0.5, cy - h * 0.5, cx + w * 0.5, cy + h * 0.5)
    }

    /// Velocity of the centre, pixels per frame.
    pub fn velocity(&self) -> (f32, f32) {
        (self.axes[0].v, self.axes[1].v)
    }

    /// Forgets the rate at which the box's width and height change. A detection's size
    /// differs from the previous detection's by the detector's jitter (a person's box with or
    /// without an arm, a bag) more than by real growth: kept as a size velocity, that jump
    /// would go on growing or shrinking the box until the next detection.
    pub fn stop_size_change(&mut self) {
        self.axes[2].v = 0.0;
        self.axes[3].v = 0.0;
    }

    /// Standard deviation of the centre position (the larger of x and y), pixels.
    pub fn position_std(&self) -> f32 {
        self.axes[0].pxx.max(self.axes[1].pxx).sqrt()
    }

    /// Standard deviation of the expected difference between a measured centre (with error
    /// `noise` × box size) and the state: how far a search for the object should look.
    pub fn innovation_std(&self, noise: f32) -> f32 {
        let r = (noise * self.size()).powi(2);
        (self.axes[0].pxx.max(self.axes[1].pxx) + r).sqrt()
    }

    fn size(&self) -> f32 {
        ref_size(self.axes[2].x, self.axes[3].x)
    }

    fn keep_positive(&mut self) {
        for a in &mut self.axes[2..] {
            if a.x.is_nan() || a.x < MIN_SIDE {
                a.x = MIN_SIDE;
                a.v = a.v.max(0.0);
            }
        }
    }
}

fn ref_size(w: f32, h: f32) -> f32 {
    (w.max(0.0) * h.max(0.0)).sqrt().max(MIN_REF_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: KalmanParams = KalmanParams {
        process_position: 0.02,
        process_velocity: 0.01,
    };

    fn square(cx: f32, cy: f32, side: f32) -> BBox {
        BBox::new(
            cx - side / 2.0,
            cy - side / 2.0,
            cx + side / 2.0,
            cy + side / 2.0,
        )
    }

    #[test]
    fn converges_on_constant_velocity_target() {
        let mut kf = BoxKalman::new(&square(100.0, 50.0, 40.0), PARAMS, 0.05);
        // Small deterministic measurement noise, ±1 px.
        for t in 1..=40 {
            let noise = if t % 2 == 0 { 1.0 } else { -1.0 };
            kf.predict(1.0);
            kf.correct(
                &square(100.0 + 3.0 * t as f32 + noise, 50.0 - 2.0 * t as f32, 40.0),
                0.05,
            );
        }
        let (vx, vy) = kf.velocity();
        assert!((vx - 3.0).abs() < 0.3, "vx {vx}");
        assert!((vy + 2.0).abs() < 0.3, "vy {vy}");
        let (cx, cy) = kf.bbox().center();
        assert!((cx - 220.0).abs() < 1.5, "cx {cx}");
        assert!((cy + 30.0).abs() < 1.5, "cy {cy}");
        // Prediction alone now extrapolates the motion.
        kf.predict(5.0);
        let (cx, _) = kf.bbox().center();
        assert!((cx - 235.0).abs() < 3.0, "predicted cx {cx}");
        assert!((kf.bbox().width() - 40.0).abs() < 1.0);
    }

    #[test]
    fn prediction_grows_uncertainty_and_correction_shrinks_it() {
        let mut kf = BoxKalman::new(&square(0.0, 0.0, 20.0), PARAMS, 0.05);
        let s0 = kf.position_std();
        kf.predict(3.0);
        let s1 = kf.position_std();
        assert!(s1 > s0);
        kf.correct(&square(1.0, 0.0, 20.0), 0.01);
        assert!(kf.position_std() < s1);
        let near = kf.gate_distance(&square(1.0, 0.0, 20.0), 0.05);
        let far = kf.gate_distance(&square(30.0, 0.0, 20.0), 0.05);
        assert!(near < 1.0 && far > 5.0, "{near} {far}");
    }

    #[test]
    fn anchoring_sets_the_box_and_learns_velocity() {
        let mut kf = BoxKalman::new(&square(0.0, 0.0, 20.0), PARAMS, 0.05);
        for t in 1..=3 {
            kf.predict(1.0);
            kf.correct(&square(2.0 * t as f32, 0.0, 20.0), 0.05);
        }
        let v_before = kf.velocity().0;
        kf.predict(1.0);
        kf.anchor(&square(12.0, 0.0, 24.0), 0.03);
        assert_eq!(kf.bbox(), square(12.0, 0.0, 24.0));
        // Ahead of the prediction: the velocity grows.
        assert!(kf.velocity().0 > v_before);
        let (pxx, pxv, pvv) = (kf.axes[0].pxx, kf.axes[0].pxv, kf.axes[0].pvv);
        assert!(pxx * pvv >= pxv * pxv);
    }

    #[test]
    fn a_detections_size_jump_is_not_extrapolated_once_stopped() {
        let mut kf = BoxKalman::new(&square(0.0, 0.0, 20.0), PARAMS, 0.05);
        kf.predict(5.0);
        // The next detection is bigger (detector jitter) and further right (motion).
        kf.anchor(&square(10.0, 0.0, 30.0), 0.03);
        let mut jumpy = kf.clone();
        kf.stop_size_change();
        jumpy.predict(5.0);
        kf.predict(5.0);
        assert!(jumpy.bbox().width() > 30.5, "{}", jumpy.bbox().width());
        assert!((kf.bbox().width() - 30.0).abs() < 1e-3);
        // The centre's velocity is kept.
        assert_eq!(kf.velocity(), jumpy.velocity());
        assert!(kf.velocity().0 > 0.0);
    }

    #[test]
    fn ignores_degenerate_measurements_and_keeps_size_positive() {
        let mut kf = BoxKalman::new(&square(10.0, 10.0, 10.0), PARAMS, 0.05);
        let before = kf.clone();
        kf.correct(&BBox::new(f32::NAN, 0.0, 1.0, 1.0), 0.05);
        kf.correct(&BBox::new(5.0, 5.0, 5.0, 9.0), 0.05);
        assert_eq!(kf, before);
        kf.predict(f32::NAN);
        assert_eq!(kf, before);
        // Drive the size towards zero; it stays at least one pixel.
        for _ in 0..50 {
            kf.predict(1.0);
            kf.correct(&square(10.0, 10.0, 0.5), 0.01);
        }
        assert!(kf.bbox().width() >= MIN_SIDE);
        assert!(kf.bbox().width().is_finite());
    }
}
