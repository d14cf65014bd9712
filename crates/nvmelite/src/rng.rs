//! The run's one random generator: splitmix64 seeded with `schedule_seed` (spec §4).
//!
//! NVMe-lite fixes its generator bit for bit (a run's log depends on every output), so this is
//! not the engine's named-stream generator: it is part of the model's definition.

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64 with a draw counter (the counter feeds the draw-accounting checks).
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
    draws: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed,
            draws: 0,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.draws += 1;
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Number of outputs consumed so far.
    pub fn draws(&self) -> u64 {
        self.draws
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| rng.next_u64()).collect()
    }

    #[test]
    fn matches_the_spec_test_vectors() {
        assert_eq!(
            first(0, 4),
            [
                0xe220a8397b1dcdaf,
                0x6e789e6aa1b965f4,
                0x06c45d188009454f,
                0xf88bb8a8724c81ec
            ]
        );
        assert_eq!(first(1, 2), [0x910a2dec89025cc1, 0xbeeb8da1658eec67]);
        assert_eq!(first(42, 2), [0xbdd732262feb6e95, 0x28efe333b266f103]);
        assert_eq!(first(u64::MAX, 2), [0xe4d971771b652c20, 0xe99ff867dbf682c9]);
    }

    #[test]
    fn worked_example_13_1_draws() {
        // Seed 4: the fourth output picks among three candidates (mod 3 = 0).
        let draws = first(4, 10);
        assert_eq!(draws[3], 0x7de4eb0c26f3f89e);
        assert_eq!(draws[3] % 3, 0);
        assert_eq!(draws[0] >> 48, 0x6e73);
        assert_eq!(draws[0] & 0xffff, 0x8aca);
    }
}
