//! A Prometheus histogram with fixed buckets that takes a whole stats window's samples at
//! once (each distinct value with its count, as [`crate::stats::Latency`] holds them), so a
//! window costs one pass over its distinct values, however many frames it had.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// Cumulative since the start: a count per bucket (not cumulative across buckets; the
/// encoder sums them), the sum of the samples and their number.
#[derive(Debug, Default)]
struct State {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// A histogram over `bounds` (upper bounds in seconds, ascending; `+Inf` is implied). Clones
/// share their state (one is registered for rendering, one is fed).
#[derive(Clone, Debug)]
pub struct Buckets {
    bounds: &'static [f64],
    state: Arc<Mutex<State>>,
}

impl Buckets {
    /// An empty histogram over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Buckets {
        Buckets {
            bounds,
            state: Arc::new(Mutex::new(State {
                counts: vec![0; bounds.len() + 1],
                ..State::default()
            })),
        }
    }

    /// Adds `count` samples of `value` (seconds).
    pub fn add(&self, value: f64, count: u64) {
        if count == 0 || !value.is_finite() {
            return;
        }
        let i = self.bounds.partition_point(|b| *b < value);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = s.counts.get_mut(i) {
            *c += count;
        }
        s.sum += value * count as f64;
        s.count += count;
    }

    /// The number of samples so far.
    pub fn count(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).count
    }
}

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(s.counts.iter().copied())
            .collect();
        encoder.encode_histogram::<NoLabelSet>(s.sum, s.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_in_the_first_bucket_whose_bound_they_do_not_exceed() {
        let h = Buckets::new(&[0.1, 0.2]);
        h.add(0.1, 2); // le="0.1" is inclusive
        h.add(0.15, 1);
        h.add(5.0, 3);
        h.add(f64::NAN, 7);
        h.add(0.05, 0);
        let s = h.state.lock().unwrap();
        assert_eq!(s.counts, [2, 1, 3]);
        assert_eq!(s.count, 6);
        assert!((s.sum - (0.2 + 0.15 + 15.0)).abs() < 1e-9);
    }
}
