//! Starting a drive in the state a long write workload would leave it in, computed directly
//! instead of simulated.
//!
//! - `sequential`: the first `fill` of the logical pages, written in order, fill whole blocks
//!   with valid pages (the last block of each plane stays open).
//! - `random`: uniform random overwrites of those pages until the steady state. Each plane is
//!   an independent GC system (pages are striped statically), so per plane: the blocks in
//!   circulation (all but the free pool `free_pool` names and the host's and GC's open
//!   frontiers) get valid counts
//!   following the mean-field steady state of the GC policy (`mean_field.rs`, rounded to whole
//!   blocks and adjusted to hold exactly the plane's pages); the plane's logical pages are
//!   dealt out in a random order, each block's valid pages sitting at random offsets. Blocks are
//!   sealed emptiest first, the order FIFO and cost-benefit see in steady state.
//!
//! Work is one pass over the map: O(logical pages) time, no flash operations, and a scratch
//! buffer of one plane's pages.

use qoslab_engine::RngStream;

use super::config::{FillPattern, FreePool, SsdConfig};
use super::ftl::Ftl;
use super::mean_field::steady_state;

/// What preconditioning did, for the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PreconditionReport {
    pub mapped_pages: u64,
    /// The mean-field write amplification of the state written (random pattern), else 1.
    pub model_write_amplification: f64,
}

/// Splits `total` blocks into counts per valid level proportional to `x`, largest remainders
/// first, then moves single pages between blocks until they hold exactly `pages` valid pages.
fn block_valid_counts(x: &[f64], total: u32, pages: u64, ppb: u32) -> Vec<u32> {
    let want: Vec<f64> = x.iter().map(|f| f * f64::from(total)).collect();
    let mut n: Vec<u32> = want.iter().map(|w| w.floor() as u32).collect();
    let mut short = total - n.iter().sum::<u32>();
    let mut by_remainder: Vec<usize> = (0..x.len()).collect();
    by_remainder.sort_by(|&a, &b| {
        let (ra, rb) = (want[a] - want[a].floor(), want[b] - want[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &j in by_remainder.iter().cycle() {
        if short == 0 {
            break;
        }
        n[j] += 1;
        short -= 1;
    }
    let mut valid: Vec<u32> = n
        .iter()
        .enumerate()
        .flat_map(|(j, &count)| std::iter::repeat_n(j as u32, count as usize))
        .collect();
    let mut have: u64 = valid.iter().map(|&v| u64::from(v)).sum();
    // Spread the rounding error over the blocks, one page each, fullest blocks last to grow.
    let mut i = 0usize;
    while have != pages {
        let k = i % valid.len();
        if have < pages && valid[k] < ppb {
            valid[k] += 1;
            have += 1;
        } else if have > pages && valid[k] > 0 {
            valid[k] -= 1;
            have -= 1;
        }
        i += 1;
    }
    valid.sort_unstable();
    valid
}

/// Writes the preconditioned state of `cfg` into a fresh `ftl`.
pub fn precondition(ftl: &mut Ftl, cfg: &SsdConfig, seed: u64) -> PreconditionReport {
    let geo = ftl.geo.clone();
    let planes = geo.planes();
    let ppb = geo.pages_per_block;
    // Each NVM set is filled to the same fraction (with one set: the whole drive).
    let mapped =
        (cfg.fill * f64::from(geo.set_logical_pages().min(cfg.logical_pages))).floor() as u32;
    if mapped == 0 {
        return PreconditionReport {
            mapped_pages: 0,
            model_write_amplification: 1.0,
        };
    }
    let rule = ftl.mean_field_rule();
    // The blocks out of circulation: the free pool, and the host's and GC's frontiers. Writing
    // flat out leaves a plane at its floor (GC, which only runs below its threshold, cannot
    // keep up, and the host waits for each erase: one block free); writes GC keeps pace with
    // leave it at the threshold (a victim is collected whenever the pool falls below it).
    let free = match cfg.free_pool {
        FreePool::Floor => 1,
        FreePool::Threshold => cfg.gc_start_free_blocks,
        FreePool::Mqsim => cfg.gc_start_free_blocks / 2,
    };
    let sealed_blocks = geo.blocks_per_plane - free.max(1) - 2;
    let mut lpas: Vec<u32> = Vec::new();
    let mut model_wa = 1.0;
    // Planes differ by at most one page: a handful of distinct page counts, each solved once.
    let mut model_cache: Vec<(u64, Vec<u32>)> = Vec::new();
    for plane in 0..planes {
        lpas.clear();
        lpas.extend(geo.plane_lpas(plane, mapped));
        let count = lpas.len() as u32;
        match cfg.fill_pattern {
            FillPattern::Sequential => ftl.place_sequential(plane, &lpas),
            FillPattern::Random => {
                let mut rng = RngStream::new(seed, &format!("ssd/precondition/plane{plane}"));
                // Fisher-Yates: the order in which the plane's pages sit in its blocks.
                for i in (1..lpas.len()).rev() {
                    let j = rng.below(i as u64 + 1) as usize;
                    lpas.swap(i, j);
                }
                let pages = u64::from(count);
                let valid = match model_cache.iter().find(|(p, _)| *p == pages) {
                    Some((_, v)) => v.clone(),
                    None => {
                        let rho = pages as f64 / (f64::from(sealed_blocks) * f64::from(ppb));
                        let st = steady_state(ppb, rho.min(1.0 - 1e-9), rule);
                        model_wa = st.write_amplification;
                        let v = block_valid_counts(&st.x, sealed_blocks, pages, ppb);
                        model_cache.push((pages, v.clone()));
                        v
                    }
                };
                let mut order: Vec<u32> = (0..ppb).collect();
                ftl.place(plane, &valid, &lpas, |v, slots| {
                    // The first v of a partial shuffle are v distinct random offsets.
                    for i in 0..v as usize {
                        let j = i + rng.below(u64::from(ppb) - i as u64) as usize;
                        order.swap(i, j);
                    }
                    slots.clear();
                    slots.extend_from_slice(&order[..v as usize]);
                });
            }
        }
    }
    ftl.reset_stats();
    PreconditionReport {
        mapped_pages: u64::from(mapped) * u64::from(geo.sets()),
        model_write_amplification: if cfg.fill_pattern == FillPattern::Random {
            model_wa
        } else {
            1.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssd::config::SSD_TUNABLES;
    use qoslab_engine::Settings;
    use qoslab_engine::tunable::RawValue;

    fn ftl_of(cfg: &SsdConfig) -> Ftl {
        Ftl::for_config(cfg, 0)
    }

    fn config(pattern: &str, fill: f64) -> SsdConfig {
        let mut s = Settings::defaults("media", SSD_TUNABLES);
        for (key, val) in [
            ("channels", RawValue::Int(2)),
            ("chips_per_channel", RawValue::Int(1)),
            ("dies_per_chip", RawValue::Int(1)),
            ("planes_per_die", RawValue::Int(2)),
            ("blocks_per_plane", RawValue::Int(256)),
            ("pages_per_block", RawValue::Int(64)),
            ("precondition.pattern", RawValue::Text(pattern.into())),
            ("precondition.fill", RawValue::Real(fill)),
        ] {
            s.set(key, &val).unwrap();
        }
        SsdConfig::from_settings(&s, &[]).unwrap()
    }

    #[test]
    fn block_counts_hold_exactly_the_pages_and_the_blocks() {
        let st = steady_state(64, 0.8, crate::ssd::mean_field::Rule::Greedy);
        let v = block_valid_counts(&st.x, 250, 12_800, 64);
        assert_eq!(v.len(), 250);
        assert_eq!(v.iter().map(|&x| u64::from(x)).sum::<u64>(), 12_800);
        assert!(v.iter().all(|&x| x <= 64));
    }

    #[test]
    fn random_fill_maps_every_page_once_with_the_model_distribution() {
        let cfg = config("random", 1.0);
        let mut ftl = ftl_of(&cfg);
        let rep = precondition(&mut ftl, &cfg, 3);
        assert_eq!(rep.mapped_pages, u64::from(cfg.logical_pages));
        ftl.check();
        for lpa in 0..cfg.logical_pages {
            assert_ne!(ftl.lookup(lpa), super::super::ftl::NONE);
        }
        assert_eq!(ftl.free_blocks(0), 3);
        assert!(rep.model_write_amplification > 1.5);
    }

    #[test]
    fn sequential_fill_leaves_full_blocks_in_order() {
        let cfg = config("sequential", 0.5);
        let mut ftl = ftl_of(&cfg);
        precondition(&mut ftl, &cfg, 3);
        ftl.check();
        // lpa 0 and 4 (two planes of two channels = 4 slots) are neighbours in plane 0.
        assert_eq!(ftl.lookup(4), ftl.lookup(0) + 1);
        assert_eq!(ftl.valid_pages(0), 64);
        let mapped = (0.5 * f64::from(cfg.logical_pages)) as u32;
        assert_eq!(ftl.lookup(mapped), super::super::ftl::NONE);
    }

    #[test]
    fn the_same_seed_gives_the_same_map() {
        let cfg = config("random", 0.9);
        let map = |seed| {
            let mut ftl = ftl_of(&cfg);
            precondition(&mut ftl, &cfg, seed);
            (0..cfg.logical_pages)
                .map(|l| ftl.lookup(l))
                .collect::<Vec<_>>()
        };
        assert_eq!(map(5), map(5));
        assert_ne!(map(5), map(6));
    }
}
