//! Named, seeded random streams.
//!
//! Every component draws from its own stream, derived from the run's seed and the stream's
//! name (as fio derives one seed per purpose from `randseed`). Adding a component or a draw in
//! one component therefore never shifts another component's draws.

use std::convert::Infallible;

use rand_core::{Rng, SeedableRng, TryRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// One deterministic random stream (xoshiro256++), identified by (run seed, name).
#[derive(Clone, Debug)]
pub struct RngStream {
    state: Xoshiro256PlusPlus,
}

impl RngStream {
    /// The stream called `name` in a run seeded with `seed`. xxh3 is stable across
    /// platforms and releases, so a name maps to the same stream everywhere.
    pub fn new(seed: u64, name: &str) -> Self {
        let stream_seed = xxh3_64_with_seed(name.as_bytes(), seed);
        Self {
            state: Xoshiro256PlusPlus::seed_from_u64(stream_seed),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state.next_u64()
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with the given mean (inversion of the uniform draw).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - u lies in (0, 1], so the logarithm is finite.
        -(1.0 - self.uniform()).ln() * mean
    }

    /// Uniform integer in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0) has no values");
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            let low = m as u64;
            if low >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }
}

/// So that `rand_distr` distributions can draw from a stream: `dist.sample(&mut stream)`.
impl TryRng for RngStream {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok((self.state.next_u64() >> 32) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.state.next_u64())
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        self.state.fill_bytes(dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_name_give_the_same_draws() {
        let mut a = RngStream::new(7, "job0/offset");
        let mut b = RngStream::new(7, "job0/offset");
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn different_names_or_seeds_give_different_streams() {
        let first = |seed, name| RngStream::new(seed, name).next_u64();
        assert_ne!(first(7, "job0/offset"), first(7, "job0/bs"));
        assert_ne!(first(7, "job0/offset"), first(8, "job0/offset"));
    }

    #[test]
    fn uniform_draws_pass_a_chi_squared_test() {
        // 100 equal bins, 1e6 draws: the 99.9 % quantile of chi-squared with 99 degrees of
        // freedom is 148.2, so a correct generator fails this about once in a thousand seeds;
        // the seed is fixed, so the test is deterministic.
        let mut rng = RngStream::new(12345, "chi2");
        let bins = 100usize;
        let draws = 1_000_000u64;
        let mut counts = vec![0u64; bins];
        for _ in 0..draws {
            counts[(rng.uniform() * bins as f64) as usize] += 1;
        }
        let expected = draws as f64 / bins as f64;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 148.2, "chi2 = {chi2}");
    }

    #[test]
    fn exponential_draws_have_the_requested_mean() {
        let mut rng = RngStream::new(3, "exp");
        let n = 1_000_000;
        let mean = (0..n).map(|_| rng.exponential(250.0)).sum::<f64>() / n as f64;
        // Standard error 250/sqrt(1e6) = 0.25: 1.5 is six of them.
        assert!((mean - 250.0).abs() < 1.5, "mean = {mean}");
    }

    #[test]
    fn rand_distr_distributions_draw_from_a_stream() {
        use rand_distr::{Distribution, LogNormal};
        let mut rng = RngStream::new(4, "lognormal");
        let d = LogNormal::new(0.0, 0.5).unwrap();
        let n = 400_000;
        let mean = (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64;
        let expected = (0.5f64 * 0.5 / 2.0).exp();
        assert!((mean / expected - 1.0).abs() < 0.005, "mean = {mean}");
    }

    #[test]
    fn below_stays_in_range_and_hits_every_value() {
        let mut rng = RngStream::new(1, "below");
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = rng.below(7);
            assert!(v < 7);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
