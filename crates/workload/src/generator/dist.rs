//! Block-index samplers behind `random_distribution`, block-size samplers behind
//! `bs`/`bsrange`/`bssplit`, and the permutation that gives "random without replacement".
//!
//! All tables are built once per generator; a draw allocates nothing.

use qoslab_engine::RngStream;
use rand_distr::Distribution as _;

use crate::fio::{Distribution, Zone, ZoneExtent};

/// Adapts a named engine stream to the `rand` traits so `rand_distr` samplers can draw from it.
pub(crate) struct Draw<'a>(pub &'a mut RngStream);

impl rand_core::TryRng for Draw<'_> {
    type Error = core::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.0.next_u64() >> 32) as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let v = self.0.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        Ok(())
    }
}

/// splitmix64's finaliser: a fast 64-bit mixing function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A keyed pseudo-random permutation of `[0, n)` in O(1) memory: a 4-round Feistel network
/// over the smallest even power of two >= n, with cycle walking back into range.
///
/// fio gets "every block once per pass" from a bitmap of the file (its random map); a bitmap
/// would make memory grow with the device size, which the simulator must not do.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: u64, rng: &mut RngStream) -> Self {
        assert!(n > 0, "a permutation of nothing");
        let bits = 64 - (n - 1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let keys = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        Self { n, half_bits, keys }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in self.keys {
            let f = mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The `i`-th element of the permutation, `i < n`.
    pub fn at(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        // The domain is below 4n, so this loop runs fewer than 4 times on average.
        let mut x = self.encrypt(i);
        while x >= self.n {
            x = self.encrypt(x);
        }
        x
    }

    /// Number of elements permuted.
    pub fn size(&self) -> u64 {
        self.n
    }
}

/// Maps a popularity rank to a block so the hottest blocks are spread over the region
/// (fio hashes ranks for the same reason): `(rank * stride + start) mod n` with `stride`
/// coprime to `n`, a bijection, so no two ranks share a block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scatter {
    n: u64,
    stride: u64,
    start: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Scatter {
    fn random(n: u64, rng: &mut RngStream) -> Self {
        // A stride near n times the golden ratio's fraction keeps neighbours far apart.
        let mut stride =
            ((n as f64 * 0.618_033_988_749_895) as u64).max(1) + rng.below(n.max(2) / 16 + 1);
        while gcd(stride, n) != 1 {
            stride += 1;
        }
        Self {
            n,
            stride: stride % n.max(1),
            start: rng.below(n),
        }
    }

    /// Ranks laid out from `center * n` upwards, wrapping: the hot spot sits where asked.
    fn centered(n: u64, center: f64) -> Self {
        let start = ((center * n as f64) as u64).min(n - 1);
        Self {
            n,
            stride: 1,
            start,
        }
    }

    fn block(&self, rank: u64) -> u64 {
        if self.n == 1 {
            return 0;
        }
        ((u128::from(rank) * u128::from(self.stride) + u128::from(self.start)) % u128::from(self.n))
            as u64
    }
}

/// Draws a block index in `[0, n)` for one direction.
#[derive(Clone, Debug)]
pub(crate) enum BlockSampler {
    /// Uniform with replacement (`norandommap`).
    Uniform { n: u64 },
    /// Uniform without replacement: walks the generator's shared permutation.
    Permuted,
    Zipf {
        dist: rand_distr::Zipf<f64>,
        scatter: Scatter,
    },
    /// fio's Pareto: rank = floor((n-1) * u^pow), pow = ln h / ln(1-h).
    Pareto { n: u64, pow: f64, scatter: Scatter },
    /// fio's "normal", see [`normal_rank`].
    Normal {
        n: u64,
        jitter_width: u64,
        scatter: Scatter,
    },
    /// Zones: cumulative access weights and each zone's first block and block count.
    Zoned {
        cum_weight: Vec<u64>,
        zones: Vec<(u64, u64)>,
    },
}

/// Weights are integers so a draw is exact: percentages are kept to 1e-6 %.
const WEIGHT_SCALE: f64 = 1e8;

impl BlockSampler {
    /// Builds the sampler for `dist` over `n` blocks of `align_bytes` each.
    pub fn new(
        dist: &Distribution,
        n: u64,
        align_bytes: u64,
        without_replacement: bool,
        rng: &mut RngStream,
    ) -> Result<Self, String> {
        Ok(match dist {
            Distribution::Random if without_replacement => BlockSampler::Permuted,
            Distribution::Random => BlockSampler::Uniform { n },
            Distribution::Zipf { theta, center } => BlockSampler::Zipf {
                dist: rand_distr::Zipf::new(n as f64, *theta).map_err(|e| format!("zipf: {e}"))?,
                scatter: scatter(n, *center, rng),
            },
            Distribution::Pareto { h, center } => BlockSampler::Pareto {
                n,
                pow: h.ln() / (1.0 - h).ln(),
                scatter: scatter(n, *center, rng),
            },
            Distribution::Normal { dev_pct, center } => {
                let width = ((n as f64 * dev_pct) / 100.0).ceil() as u64;
                BlockSampler::Normal {
                    n,
                    jitter_width: width.min(n / 2),
                    scatter: match center {
                        // The law is centred on n/2; a given centre moves it there instead.
                        Some(c) => Scatter::centered(n, (c - 0.5).rem_euclid(1.0)),
                        None => Scatter::random(n, rng),
                    },
                }
            }
            Distribution::Zoned(zones) => zoned(zones, n, align_bytes)?,
        })
    }

    /// A block index in `[0, n)`; `perm_next` supplies the next permuted index.
    #[inline]
    pub fn draw(&self, rng: &mut RngStream, perm_next: impl FnOnce() -> u64) -> u64 {
        match self {
            BlockSampler::Uniform { n } => rng.below(*n),
            BlockSampler::Permuted => perm_next(),
            BlockSampler::Zipf { dist, scatter } => {
                let k: f64 = dist.sample(&mut Draw(rng));
                scatter.block(k as u64 - 1)
            }
            BlockSampler::Pareto { n, pow, scatter } => {
                let rank = ((n - 1) as f64 * rng.uniform().powf(*pow)) as u64;
                scatter.block(rank)
            }
            BlockSampler::Normal {
                n,
                jitter_width,
                scatter,
            } => scatter.block(normal_rank(*n, *jitter_width, rng)),
            BlockSampler::Zoned { cum_weight, zones } => {
                let total = *cum_weight.last().unwrap();
                let x = rng.below(total);
                let i = cum_weight.partition_point(|&c| c <= x);
                let (first, count) = zones[i];
                first + rng.below(count)
            }
        }
    }
}

fn scatter(n: u64, center: Option<f64>, rng: &mut RngStream) -> Scatter {
    match center {
        Some(c) => Scatter::centered(n, c),
        None => Scatter::random(n, rng),
    }
}

/// fio 3.33's "normal" law (lib/gauss.c): the mean of 12 uniform integers in `[0, n]`,
/// rounded up, plus a uniform jitter of width `w = ceil(n * dev / 100)` (at most n/2) centred
/// on 0 and halved until the sum falls inside `[0, n)`. Without jitter its standard deviation
/// is sqrt(n (n+2) / 144), about n/12; the jitter adds w^2/12 to the variance.
fn normal_rank(n: u64, w: u64, rng: &mut RngStream) -> u64 {
    const TERMS: u64 = 12;
    let mut sum = 0u64;
    for _ in 0..TERMS {
        sum += rng.below(n + 1);
    }
    let v = sum.div_ceil(TERMS) as i64;
    let mut dev = 0i64;
    if w > 0 {
        dev = rng.below(w) as i64 - (w / 2) as i64;
        while v + dev < 0 || v + dev >= n as i64 {
            dev /= 2;
            if dev == 0 {
                break;
            }
        }
    }
    ((v + dev) as u64).min(n - 1)
}

fn zoned(zones: &[Zone], n: u64, align_bytes: u64) -> Result<BlockSampler, String> {
    let mut cum_weight = Vec::with_capacity(zones.len());
    let mut out = Vec::with_capacity(zones.len());
    let mut acc_w = 0u64;
    let mut first_block = 0u64;
    let mut cum_pct = 0.0f64;
    for (i, z) in zones.iter().enumerate() {
        let end_block = match z.extent {
            ZoneExtent::Percent(p) => {
                cum_pct += p;
                if i + 1 == zones.len() {
                    n
                } else {
                    ((cum_pct / 100.0) * n as f64).round() as u64
                }
            }
            ZoneExtent::Bytes(b) => first_block + b / align_bytes,
        };
        if end_block > n {
            return Err(format!(
                "zone {} ends at block {end_block}, beyond the {n} blocks of the region",
                i + 1
            ));
        }
        let count = end_block.saturating_sub(first_block);
        let w = (z.access_pct * WEIGHT_SCALE).round() as u64;
        if count == 0 && w > 0 {
            return Err(format!(
                "zone {} holds no block but gets {}% of the I/O",
                i + 1,
                z.access_pct
            ));
        }
        if w > 0 {
            acc_w += w;
            cum_weight.push(acc_w);
            out.push((first_block, count));
        }
        first_block = end_block;
    }
    Ok(BlockSampler::Zoned {
        cum_weight,
        zones: out,
    })
}

/// Draws I/O lengths for one direction.
#[derive(Clone, Debug)]
pub(crate) enum LenSampler {
    Fixed(u64),
    /// `bsrange`: `min * (1 + below(count))`.
    Range {
        min: u64,
        count: u64,
    },
    /// `bssplit`: cumulative integer weights and the lengths.
    Split {
        cum_weight: Vec<u64>,
        lens: Vec<u64>,
    },
}

impl LenSampler {
    pub fn new(bs: u64, range: Option<(u64, u64)>, split: &[(u64, f64)]) -> Self {
        if !split.is_empty() {
            let mut acc = 0;
            let mut cum_weight = Vec::new();
            let mut lens = Vec::new();
            for &(len, pct) in split {
                let w = (pct * WEIGHT_SCALE).round() as u64;
                if w > 0 {
                    acc += w;
                    cum_weight.push(acc);
                    lens.push(len);
                }
            }
            LenSampler::Split { cum_weight, lens }
        } else if let Some((lo, hi)) = range {
            LenSampler::Range {
                min: lo,
                count: hi / lo,
            }
        } else {
            LenSampler::Fixed(bs)
        }
    }

    /// The shortest length it draws.
    pub fn min(&self) -> u64 {
        match self {
            LenSampler::Fixed(l) => *l,
            LenSampler::Range { min, .. } => *min,
            LenSampler::Split { lens, .. } => lens.iter().copied().min().unwrap_or(0),
        }
    }

    #[inline]
    pub fn draw(&self, rng: &mut RngStream) -> u64 {
        match self {
            LenSampler::Fixed(l) => *l,
            LenSampler::Range { min, count } => min * (1 + rng.below(*count)),
            LenSampler::Split { cum_weight, lens } => {
                let x = rng.below(*cum_weight.last().unwrap());
                lens[cum_weight.partition_point(|&c| c <= x)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permutation_visits_every_index_exactly_once() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let p = Permutation::new(n, &mut RngStream::new(5, "perm"));
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.at(i);
                assert!(!seen[x as usize], "n={n}: {x} twice");
                seen[x as usize] = true;
            }
        }
    }

    #[test]
    fn scatter_is_a_bijection() {
        for n in [1u64, 2, 10, 4096, 1_000_003] {
            let s = Scatter::random(n, &mut RngStream::new(9, "s"));
            if n <= 4096 {
                let mut seen = vec![false; n as usize];
                for r in 0..n {
                    let b = s.block(r);
                    assert!(!seen[b as usize]);
                    seen[b as usize] = true;
                }
            } else {
                assert_eq!(gcd(s.stride, n), 1);
            }
        }
    }
}
