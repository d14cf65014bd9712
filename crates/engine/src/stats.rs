//! Latency statistics: exact moments plus an HDR histogram per job and op, mergeable across
//! jobs, groups and runs.
//!
//! Minimum, maximum, mean and standard deviation are exact (integer sums); percentiles come
//! from an HDR histogram with 3 significant digits, so a reported percentile is within 0.1 % of
//! the true sample quantile, and it is clamped to [min, max] (a run whose latencies are all
//! equal reports that value at every percentile). For json+ output the histogram is re-binned
//! into fio's own log-linear buckets ([`fio_bucket_index`]), so the bins read like fio's.

use std::cell::OnceCell;

use hdrhistogram::Histogram;

/// Exact count, minimum, maximum, mean and (sample) standard deviation of u64 samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moments {
    pub n: u64,
    pub min: u64,
    pub max: u64,
    sum: u128,
    sum_sq: u128,
}

impl Moments {
    #[inline]
    pub fn record(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += 1;
        self.sum += u128::from(v);
        self.sum_sq += u128::from(v) * u128::from(v);
    }

    /// Records `v` `count` times: the same moments as `count` calls of [`record`](Self::record).
    pub fn record_n(&mut self, v: u64, count: u64) {
        if count == 0 {
            return;
        }
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += count;
        self.sum += u128::from(v) * u128::from(count);
        self.sum_sq += u128::from(v) * u128::from(v) * u128::from(count);
    }

    pub fn merge(&mut self, other: &Moments) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.n += other.n;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
    }

    pub fn sum(&self) -> u128 {
        self.sum
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Sample standard deviation (divisor n - 1, as fio), 0 for fewer than two samples.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        // n * sum_sq - sum^2 is exact in integers when it fits; fall back to floats if not.
        let n = u128::from(self.n);
        let var_num = n
            .checked_mul(self.sum_sq)
            .and_then(|a| self.sum.checked_mul(self.sum).map(|b| a.saturating_sub(b)));
        let var = match var_num {
            Some(num) => num as f64 / (self.n as f64 * (self.n as f64 - 1.0)),
            None => {
                let mean = self.mean();
                (self.sum_sq as f64 - self.n as f64 * mean * mean) / (self.n as f64 - 1.0)
            }
        };
        var.max(0.0).sqrt()
    }
}

/// Latencies of one kind (completion, total) of one op of one job.
// Speed: recording counts the sample in the bucket an HDR histogram of 3 significant digits
// would use, in that histogram's own layout ([`hdr`]), and the `hdrhistogram` histogram is
// built from those counts when first read. Its own `record` also checks the range, grows,
// tracks min and max and a total (all of which `Moments` keeps exactly): about 68 instructions
// against 13, and two or three samples per simulated I/O. The built histogram is the one
// recording each sample would give, so every reading is unchanged (the test
// `built_histogram_equals_recording_each_sample`).
#[derive(Clone, Debug, Default)]
pub struct LatencyHist {
    pub moments: Moments,
    counts: Vec<u64>,
    built: OnceCell<Histogram<u64>>,
}

/// The bucket layout of `Histogram::new(3)`: lowest discernible value 1, 2048 sub-buckets
/// (the power of two covering 2 * 10^3), each bucket after the first using its upper half.
mod hdr {
    const SUB_BUCKET_MASK: u64 = 2047;
    const HALF_COUNT_MAGNITUDE: u32 = 10;
    const HALF_COUNT: u64 = 1 << HALF_COUNT_MAGNITUDE;
    /// 64 - log2(lowest discernible value) - log2(sub-bucket count).
    const LEADING_ZERO_COUNT_BASE: u32 = 53;

    /// The counts index of `value`.
    #[inline(always)]
    pub fn index(value: u64) -> usize {
        let bucket = LEADING_ZERO_COUNT_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
        let sub_bucket = value >> bucket;
        (((u64::from(bucket) + 1) << HALF_COUNT_MAGNITUDE) + sub_bucket - HALF_COUNT) as usize
    }

    /// The lowest value of counts index `index`.
    pub fn lowest_value(index: usize) -> u64 {
        let index = index as u64;
        match (index >> HALF_COUNT_MAGNITUDE).checked_sub(1) {
            None => index,
            Some(bucket) => ((index & (HALF_COUNT - 1)) + HALF_COUNT) << bucket,
        }
    }
}

impl LatencyHist {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.moments.record(ns);
        self.add(ns, 1);
    }

    /// Records `ns` `count` times, as `count` calls of [`record`](Self::record) would.
    pub fn record_n(&mut self, ns: u64, count: u64) {
        self.moments.record_n(ns, count);
        self.add(ns, count);
    }

    #[inline(always)]
    fn add(&mut self, ns: u64, count: u64) {
        let i = hdr::index(ns);
        if i >= self.counts.len() {
            self.grow(i);
        }
        self.counts[i] += count;
        if self.built.get().is_some() {
            self.built = OnceCell::new();
        }
    }

    // Out of line: the table grows only while a run meets larger latencies.
    #[cold]
    fn grow(&mut self, i: usize) {
        self.counts.resize(i + 1, 0);
    }

    pub fn merge(&mut self, other: &LatencyHist) {
        self.moments.merge(&other.moments);
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c += o;
        }
        self.built = OnceCell::new();
    }

    /// The HDR histogram of the samples.
    fn hist(&self) -> &Histogram<u64> {
        self.built.get_or_init(|| {
            let mut hist = Histogram::new(3).expect("3 significant digits is a valid precision");
            hist.auto(true);
            for (i, &c) in self.counts.iter().enumerate() {
                if c > 0 {
                    hist.record_n(hdr::lowest_value(i), c)
                        .expect("an auto-resizing histogram takes any value");
                }
            }
            hist
        })
    }

    pub fn count(&self) -> u64 {
        self.moments.n
    }

    /// The value at percentile `p` (0-100), clamped to [min, max]; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.moments.n == 0 {
            return 0;
        }
        let v = self.hist().value_at_quantile(p / 100.0);
        v.clamp(self.moments.min, self.moments.max)
    }

    /// The percentile `p` (0-100) as fio reports it (stat.c, `calc_clat_percentiles`): the
    /// value of fio's bucket (`fio_bucket_value`) in which the running count of the samples,
    /// bucket by bucket in fio's layout, first reaches p % of them; 0 when empty. So every
    /// percentile of a report is a key of its json+ `bins`, as in fio, and lies within fio's
    /// bucket error (under 1/128) of the sample at that rank. fio compares in long double;
    /// here the product p / 100 × N is an f64.
    pub fn fio_percentile(&self, p: f64) -> u64 {
        let n = self.moments.n;
        if n == 0 {
            return 0;
        }
        let rank = p / 100.0 * n as f64;
        let bins = self.fio_bins();
        let mut seen = 0u64;
        for &(value, count) in &bins {
            seen += count;
            if seen as f64 >= rank {
                return value;
            }
        }
        bins.last().map_or(0, |&(value, _)| value)
    }

    /// Fraction of samples at or below `ns`.
    pub fn fraction_at_or_below(&self, ns: u64) -> f64 {
        if self.moments.n == 0 {
            return 0.0;
        }
        self.hist().count_between(0, ns) as f64 / self.moments.n as f64
    }

    /// Samples in [lo, hi).
    pub fn count_in(&self, lo: u64, hi: u64) -> u64 {
        if hi == 0 || self.moments.n == 0 {
            return 0;
        }
        let below_hi = self.hist().count_between(0, hi - 1);
        let below_lo = if lo == 0 {
            0
        } else {
            self.hist().count_between(0, lo - 1)
        };
        below_hi - below_lo
    }

    /// The samples re-binned into fio's log-linear buckets: (bucket value in ns, count), by
    /// increasing value, non-empty buckets only.
    pub fn fio_bins(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for v in self.hist().iter_recorded() {
            let value = self
                .hist()
                .median_equivalent(v.value_iterated_to())
                .clamp(self.moments.min, self.moments.max);
            let bucket = fio_bucket_value(fio_bucket_index(value));
            let count = v.count_at_value();
            match out.last_mut() {
                Some(last) if last.0 == bucket => last.1 += count,
                _ => out.push((bucket, count)),
            }
        }
        out
    }
}

/// fio's histogram resolution (`FIO_IO_U_PLAT_BITS`, stat.h): 64 buckets per power of two.
pub const FIO_PLAT_BITS: u32 = 6;
/// fio's number of buckets (`FIO_IO_U_PLAT_NR` = 29 groups of 64).
pub const FIO_PLAT_NR: usize = 29 << FIO_PLAT_BITS;

/// The fio bucket holding `ns`: values below 128 have a bucket each; above, each power of two
/// is split into 64 equal buckets.
pub fn fio_bucket_index(ns: u64) -> usize {
    let linear = 1u64 << (FIO_PLAT_BITS + 1);
    if ns < linear {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let error_bits = msb - FIO_PLAT_BITS;
    let base = ((error_bits + 1) << FIO_PLAT_BITS) as usize;
    let offset = ((ns >> error_bits) & ((1 << FIO_PLAT_BITS) - 1)) as usize;
    (base + offset).min(FIO_PLAT_NR - 1)
}

/// The value fio reports for bucket `index`: its midpoint, truncated.
pub fn fio_bucket_value(index: usize) -> u64 {
    let linear = 1usize << (FIO_PLAT_BITS + 1);
    if index < linear {
        return index as u64;
    }
    let error_bits = (index >> FIO_PLAT_BITS) as u32 - 1;
    let base = 1u64 << (error_bits + FIO_PLAT_BITS);
    let k = (index % (1 << FIO_PLAT_BITS)) as u64;
    base + ((2 * k + 1) << error_bits) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_are_exact() {
        let mut m = Moments::default();
        for v in [2u64, 4, 4, 4, 5, 5, 7, 9] {
            m.record(v);
        }
        assert_eq!((m.n, m.min, m.max), (8, 2, 9));
        assert_eq!(m.mean(), 5.0);
        // Sample variance of this set is 32/7.
        assert!((m.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (LatencyHist::new(), LatencyHist::new(), LatencyHist::new());
        for v in 0..10_000u64 {
            let x = v * v % 100_003;
            if v % 3 == 0 { &mut a } else { &mut b }.record(x);
            all.record(x);
        }
        a.merge(&b);
        assert_eq!(a.moments, all.moments);
        for p in [1.0, 50.0, 99.0, 99.99] {
            assert_eq!(a.percentile(p), all.percentile(p));
        }
    }

    #[test]
    fn recording_a_value_n_times_at_once_equals_recording_it_n_times() {
        let (mut once, mut each) = (LatencyHist::new(), LatencyHist::new());
        for (v, n) in [(0u64, 5u64), (1_000, 3), (0, 0), (77_777, 2), (0, 1)] {
            once.record_n(v, n);
            for _ in 0..n {
                each.record(v);
            }
        }
        assert_eq!(once.moments, each.moments);
        assert_eq!(once.fio_bins(), each.fio_bins());
        for p in [1.0, 50.0, 90.0, 99.0, 100.0] {
            assert_eq!(once.percentile(p), each.percentile(p));
        }
    }

    /// `n` samples below 2^`bits`, spread over every bucket size.
    fn samples(n: usize, seed: u64, bits: u64) -> Vec<u64> {
        let mut rng = crate::RngStream::new(seed, "stats-test");
        (0..n)
            .map(|_| rng.next_u64() >> (64 - bits + rng.next_u64() % bits))
            .collect()
    }

    fn direct() -> Histogram<u64> {
        let mut h = Histogram::new(3).unwrap();
        h.auto(true);
        h
    }

    #[test]
    fn buckets_are_those_of_a_3_digit_hdr_histogram() {
        let h = direct();
        for v in samples(20_000, 1, 64).into_iter().chain(0..5_000) {
            assert_eq!(
                hdr::lowest_value(hdr::index(v)),
                h.lowest_equivalent(v),
                "{v}"
            );
        }
        // Bucket 0 takes indices 0 to 2047, each later bucket (its upper half) the next 1024.
        for i in 0..55 * 1024 {
            assert_eq!(hdr::index(hdr::lowest_value(i)), i);
        }
    }

    #[test]
    fn built_histogram_equals_recording_each_sample() {
        let recorded = |h: &Histogram<u64>| {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect::<Vec<_>>()
        };
        for seed in 0..20 {
            // Up to 2^42 ns (an hour), where the moments' sums stay exact.
            let values = samples(3_000, seed, 42);
            let (mut fast, mut slow) = (LatencyHist::new(), direct());
            for (k, &v) in values.iter().enumerate() {
                fast.record(v);
                slow.record(v).unwrap();
                // Reading between records: the histogram read is always the current one.
                if k % 1000 == 999 {
                    assert_eq!(fast.hist().len(), slow.len());
                }
            }
            let built = fast.hist();
            assert_eq!(built.len(), slow.len());
            assert_eq!((built.min(), built.max()), (slow.min(), slow.max()));
            assert_eq!(recorded(built), recorded(&slow));
            for q in [0.0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(
                    built.value_at_quantile(q),
                    slow.value_at_quantile(q),
                    "q {q}"
                );
            }
            for &v in &values[..100] {
                assert_eq!(built.count_between(0, v), slow.count_between(0, v), "{v}");
            }
        }
    }

    #[test]
    fn percentiles_are_within_a_thousandth_and_clamped() {
        let mut h = LatencyHist::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        for p in [50.0, 90.0, 99.0, 99.9] {
            let exact = p / 100.0 * 1_000_000.0;
            let got = h.percentile(p) as f64;
            assert!((got / exact - 1.0).abs() < 1e-3, "p{p}: {got} vs {exact}");
        }
        let mut fixed = LatencyHist::new();
        for _ in 0..10 {
            fixed.record(100_000);
        }
        assert_eq!(fixed.percentile(50.0), 100_000);
        assert_eq!(fixed.percentile(99.99), 100_000);
    }

    #[test]
    fn fio_buckets_follow_fios_layout() {
        // Below 128 every value has its own bucket.
        assert_eq!(fio_bucket_index(127), 127);
        assert_eq!(fio_bucket_value(127), 127);
        // 128..255 is split into 64 buckets of 2: 128 and 129 share bucket 128.
        assert_eq!(fio_bucket_index(128), 128);
        assert_eq!(fio_bucket_index(129), 128);
        assert_eq!(fio_bucket_index(130), 129);
        assert_eq!(fio_bucket_value(128), 129);
        // 4096..8191 in buckets of 64: 4096 -> midpoint 4128.
        assert_eq!(fio_bucket_value(fio_bucket_index(4100)), 4128);
        // Every bucket's value maps back to that bucket.
        for i in 0..FIO_PLAT_NR - 1 {
            assert_eq!(fio_bucket_index(fio_bucket_value(i)), i, "bucket {i}");
        }
    }

    #[test]
    fn fio_bins_count_every_sample() {
        let mut h = LatencyHist::new();
        for v in 0..50_000u64 {
            h.record(1000 + v % 7919);
        }
        let bins = h.fio_bins();
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 50_000);
        assert!(bins.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn fio_percentiles_are_the_bucket_where_the_count_reaches_p() {
        // 10 samples: 100 (own bucket), then 9 in 4096..8191's buckets of 64.
        let mut h = LatencyHist::new();
        h.record(100);
        for v in [4100, 4100, 4100, 4200, 4200, 4200, 4200, 8000, 8100] {
            h.record(v);
        }
        // 10 %: the first sample reaches 1 of 10.
        assert_eq!(h.fio_percentile(10.0), 100);
        // 10.5 % needs 1.05 samples: the second, in bucket 4096..4159 (value 4128).
        assert_eq!(h.fio_percentile(10.5), 4128);
        // 40 % is reached by the fourth sample, 70 % by the seventh (4160..4223: 4192).
        assert_eq!(h.fio_percentile(40.0), 4128);
        assert_eq!(h.fio_percentile(70.0), 4192);
        // A bucket's value is its midpoint, even below the largest sample (8100 in
        // 8064..8127: 8096).
        assert_eq!(h.fio_percentile(100.0), 8096);
        assert_eq!(LatencyHist::new().fio_percentile(50.0), 0);
    }
}
