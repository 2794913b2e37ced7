//! A small log-linear latency histogram in the spirit of HdrHistogram: exact below 128 ns,
//! then 64 equal sub-buckets per power of two, so any recorded value is reported within
//! 1/64 (1.6 %) of itself, whatever its magnitude, in a few KiB. Recording is an index
//! computation and an increment, cheap enough to sit on every worker's hot loop; each worker
//! keeps its own and they are merged at the end, so there is no shared counter to contend on.

use std::time::Duration;

/// Sub-buckets per power of two, as a power of two: 2^6 = 64, the 1.6 % resolution.
const SUB_BITS: u32 = 6;
/// Values below this are their own bucket.
const LINEAR: u64 = 2 << SUB_BITS;

/// Counts of values (nanoseconds) in log-linear buckets.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Grown on demand to the highest bucket used, so a histogram of sub-millisecond
    /// latencies stays around 8 KiB.
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    min: u64,
    max: u64,
}

/// The usual summary of a histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Values recorded.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest value.
    pub max: f64,
}

fn index(value: u64) -> usize {
    if value < LINEAR {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let shift = msb - SUB_BITS;
    // The top SUB_BITS + 1 bits, in [64, 128): the sub-bucket within this power of two.
    let mantissa = value >> shift;
    ((u64::from(shift) << SUB_BITS) + mantissa) as usize
}

/// The largest value that lands in bucket `i` (HdrHistogram's "highest equivalent value"),
/// so a reported percentile is never below the true one.
fn upper(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let shift = (i >> SUB_BITS) - 1;
    let mantissa = (i & ((1 << SUB_BITS) - 1)) | (1 << SUB_BITS);
    // In u128 because the last bucket ends exactly at u64::MAX.
    let end = (u128::from(mantissa + 1) << shift) - 1;
    u64::try_from(end).unwrap_or(u64::MAX)
}

impl Histogram {
    /// Records one duration, saturating at about 584 years.
    pub fn record(&mut self, value: Duration) {
        self.record_nanos(u64::try_from(value.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one value in nanoseconds.
    pub fn record_nanos(&mut self, value: u64) {
        let i = index(value);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.min = if self.total == 0 {
            value
        } else {
            self.min.min(value)
        };
        self.max = self.max.max(value);
        self.total += 1;
        self.sum += u128::from(value);
    }

    /// Values recorded.
    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.total == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.min = if self.total == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.total += other.total;
        self.sum += other.sum;
    }

    /// The value at quantile `q` (0.0..=1.0) in nanoseconds: the upper bound of the bucket
    /// holding the ceil(q * count)-th smallest value, clamped to the recorded range; 0 when
    /// empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        // ceil(q * n) without floating error on the whole-number cases (q = 0.5, n = 10).
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64) - 1e-9)
            .ceil()
            .max(1.0) as u64;
        // The extremes are known exactly; only the inside needs the buckets.
        if rank <= 1 {
            return self.min;
        }
        if rank >= self.total {
            return self.max;
        }
        let mut seen = 0;
        for (i, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return upper(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// p50, p90, p99, p999, mean and max, in microseconds.
    pub fn summary(&self) -> Summary {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        Summary {
            count: self.total,
            mean: if self.total == 0 {
                0.0
            } else {
                self.sum as f64 / self.total as f64 / 1000.0
            },
            p50: us(self.quantile(0.5)),
            p90: us(self.quantile(0.9)),
            p99: us(self.quantile(0.99)),
            p999: us(self.quantile(0.999)),
            max: us(self.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bounded_by_their_upper_value() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = index(v);
            assert!(i == last || i == last + 1 || v > 100_000, "gap at {v}");
            assert!(v <= upper(i), "{v} above the upper bound of bucket {i}");
            if i > 0 {
                assert!(v > upper(i - 1), "{v} belongs below bucket {i}");
            }
            last = i;
        }
    }

    #[test]
    fn small_values_are_exact_and_large_ones_within_one_sixty_fourth() {
        for v in 0..LINEAR {
            assert_eq!(upper(index(v)), v);
        }
        for v in [
            128u64,
            1_000,
            123_456,
            9_999_999,
            1 << 40,
            (1 << 50) + 12_345,
        ] {
            let reported = upper(index(v));
            assert!(reported >= v);
            assert!(
                (reported - v) as f64 <= v as f64 / 64.0,
                "{v} reported as {reported}"
            );
        }
    }

    #[test]
    fn quantiles_of_a_uniform_run() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record_nanos(v * 1000);
        }
        let within = |got: u64, want: u64| {
            let err = got.abs_diff(want) as f64 / want as f64;
            assert!(err <= 1.0 / 64.0, "got {got}, want {want}");
        };
        within(h.quantile(0.5), 5_000_000);
        within(h.quantile(0.9), 9_000_000);
        within(h.quantile(0.99), 9_900_000);
        within(h.quantile(0.999), 9_990_000);
        assert_eq!(h.quantile(1.0), 10_000_000);
        assert_eq!(h.quantile(0.0), 1000);
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert!((s.mean - 5000.5).abs() < 1e-6, "{}", s.mean);
        assert!((s.max - 10_000.0).abs() < 1e-9);
    }

    #[test]
    fn a_single_value_is_every_quantile() {
        let mut h = Histogram::default();
        h.record(Duration::from_micros(1234));
        for q in [0.0, 0.5, 0.99, 0.999, 1.0] {
            assert_eq!(h.quantile(q), 1_234_000);
        }
    }

    #[test]
    fn empty_reports_zero() {
        let h = Histogram::default();
        assert_eq!(h.quantile(0.99), 0);
        assert_eq!(h.summary(), Summary::default());
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (
            Histogram::default(),
            Histogram::default(),
            Histogram::default(),
        );
        for v in 0..5_000u64 {
            let value = v * v;
            let part = if v.is_multiple_of(3) { &mut a } else { &mut b };
            part.record_nanos(value);
            all.record_nanos(value);
        }
        let mut merged = Histogram::default();
        merged.merge(&a);
        merged.merge(&b);
        merged.merge(&Histogram::default());
        assert_eq!(merged.count(), all.count());
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(merged.quantile(q), all.quantile(q));
        }
        assert_eq!(merged.summary(), all.summary());
    }
}
