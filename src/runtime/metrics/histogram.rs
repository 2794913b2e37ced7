//! A histogram of durations that records with atomics only (prometheus-client's own takes a
//! lock per observation): fixed buckets from 1 ms to 5 min, counts and a sum in microseconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds, in seconds.
const BOUNDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 300.0,
];

#[derive(Debug, Default)]
struct Inner {
    /// One count per bound, and one past the last.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_micros: AtomicU64,
}

/// A histogram of durations; clones share their counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Histogram(Arc<Inner>);

impl Histogram {
    /// A histogram in seconds.
    pub(crate) fn seconds() -> Self {
        Self::default()
    }

    /// Counts one duration.
    pub(crate) fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BOUNDS.len());
        self.0.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.0.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // Per bucket: the encoder writes them cumulative, the last as `+Inf`.
        let mut count = 0;
        let mut buckets = Vec::with_capacity(BOUNDS.len() + 1);
        for (i, bucket) in self.0.buckets.iter().enumerate() {
            let n = bucket.load(Ordering::Relaxed);
            count += n;
            buckets.push((BOUNDS.get(i).copied().unwrap_or(f64::INFINITY), n));
        }
        let sum = self.0.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_in_their_buckets_and_sum_up() {
        let h = Histogram::seconds();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(30));
        h.observe(Duration::from_secs(400));
        let counts: Vec<u64> =
            h.0.buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect();
        assert_eq!(counts[0], 1, "0.5 ms <= 1 ms");
        assert_eq!(counts[5], 1, "30 ms <= 50 ms");
        assert_eq!(counts[BOUNDS.len()], 1, "400 s past the last bound");
        assert_eq!(h.0.sum_micros.load(Ordering::Relaxed), 400_030_500);
    }
}
