//! How often detections arrive and how late, in frames, so a track is not given up before the
//! detector could possibly have seen it again.
//!
//! `max_age_frames` caps how long a track coasts without a matched detection. On a slow board
//! (a Pi Zero 2 W running the model for a second or more at 30 fps) or a loaded machine, one
//! detection can take longer than that cap: a new object's tentative track then expired before
//! the second detection that would confirm it, and no track ever started. The cap used is
//! therefore at least 1.5 × (frames between detections + frames a result arrives late),
//! averaged over recent results.

/// Weight of the newest observation in the running averages.
const ALPHA: f32 = 0.3;
/// Margin over one detection cycle (gap + lateness) before a track may expire.
const CYCLES: f32 = 1.5;
/// The cap never grows past this many frames, whatever the detector does.
pub const MAX_AGE_CEILING: u64 = 100_000;

/// Running averages of the detection gap and lateness, in frames.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cadence {
    gap: Option<f32>,
    lateness: Option<f32>,
    last_det_seq: Option<u64>,
}

fn blend(avg: Option<f32>, x: f32) -> f32 {
    avg.map_or(x, |a| a + ALPHA * (x - a))
}

impl Cadence {
    /// Records a detection of frame `det_seq` applied when frame `now` was the latest.
    pub fn observe(&mut self, det_seq: u64, now: u64) {
        self.lateness = Some(blend(self.lateness, now.saturating_sub(det_seq) as f32));
        match self.last_det_seq {
            Some(prev) if det_seq > prev => {
                self.gap = Some(blend(self.gap, (det_seq - prev) as f32));
                self.last_det_seq = Some(det_seq);
            }
            Some(_) => {}
            None => self.last_det_seq = Some(det_seq),
        }
    }

    /// The frames a track may go without a matched detection: `configured`, or more when one
    /// detection cycle is longer than that.
    pub fn max_age(&self, configured: u32) -> u64 {
        let cycle = self.gap.unwrap_or(0.0) + self.lateness.unwrap_or(0.0);
        let needed = (CYCLES * cycle).ceil();
        let needed = if needed.is_finite() && needed > 0.0 {
            (needed as u64).min(MAX_AGE_CEILING)
        } else {
            0
        };
        u64::from(configured).max(needed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_detector_keeps_the_configured_cap() {
        let mut c = Cadence::default();
        assert_eq!(c.max_age(60), 60);
        for k in 0..100u64 {
            c.observe(5 * k, 5 * k + 2); // every 5 frames, 2 frames late
        }
        assert_eq!(c.max_age(60), 60);
    }

    #[test]
    fn a_slow_detector_raises_the_cap_to_cover_a_cycle() {
        let mut c = Cadence::default();
        for k in 0..20u64 {
            c.observe(200 * k, 200 * k + 190); // back to back, 5 s at 40 fps
        }
        let age = c.max_age(60);
        assert!((560..=600).contains(&age), "{age}");
        // It comes back down when the detector speeds up again.
        for k in 0..40u64 {
            c.observe(4000 + 5 * k, 4000 + 5 * k + 2);
        }
        assert_eq!(c.max_age(60), 60);
    }

    #[test]
    fn late_or_repeated_results_do_not_count_as_gaps() {
        let mut c = Cadence::default();
        c.observe(100, 100);
        c.observe(90, 100); // an older frame's result: lateness only
        c.observe(100, 101);
        assert_eq!(c.gap, None);
        c.observe(110, 111);
        assert_eq!(c.gap, Some(10.0));
        assert_eq!(
            c.max_age(1),
            (CYCLES * (10.0 + c.lateness.unwrap())).ceil() as u64
        );
    }

    #[test]
    fn absurd_sequences_stay_bounded() {
        let mut c = Cadence::default();
        c.observe(0, u64::MAX);
        c.observe(u64::MAX - 1, u64::MAX);
        assert_eq!(c.max_age(60), MAX_AGE_CEILING);
    }
}
