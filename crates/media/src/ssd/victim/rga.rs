//! Random greedy (MQSim's RGA; Van Houdt's d-choices): the fewest valid pages among `d` sealed
//! blocks drawn uniformly, with replacement, from the plane. When no draw has an invalid page
//! the greedy choice goes instead, rather than stall a plane whose writers wait for a block.

use qoslab_engine::RngStream;

use super::{VictimOps, VictimPolicy, victim_rng};
use crate::ssd::ftl::Sealed;
use crate::ssd::mean_field::Rule;

qoslab_engine::plugin! {
    pub static OPS: VictimOps = "rga", "best of d random blocks (RGA, d-choices); draws from the ssd/gc/victim stream of the run's seed", valid_lists: false;
    /// `[media.gc.rga]`: the number of draws.
    tunables struct RgaConfig in RGA_TUNABLES {
        choices: u64 = count(0, "d: blocks drawn per choice; 0 = log2(blocks_per_plane) as MQSim (11 for 2048 blocks)"),
    }
    build |s, c| {
        let choices = match c.choices {
            0 => (f64::from(s.blocks_per_plane).log2().floor() as u32).max(1),
            d => d.min(u64::from(s.blocks_per_plane)) as u32,
        };
        Box::new(Rga { choices, rng: victim_rng(s.seed) })
    }
}

pub struct Rga {
    pub choices: u32,
    rng: RngStream,
}

impl Rga {
    fn draw(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32> {
        let d = self.choices;
        let bpp = u64::from(sealed.blocks_per_plane());
        let mut best: Option<u32> = None;
        let mut drawn = 0;
        // Sealed blocks are nearly all of a plane in steady state; the bound on attempts only
        // matters on an almost empty drive.
        for _ in 0..64 * d {
            let b = sealed.block(plane, self.rng.below(bpp) as u32);
            if !sealed.is_sealed(b) {
                continue;
            }
            if best.is_none_or(|x| sealed.valid(b) < sealed.valid(x)) {
                best = Some(b);
            }
            drawn += 1;
            if drawn == d {
                break;
            }
        }
        best.filter(|&b| sealed.valid(b) < sealed.pages_per_block())
    }
}

impl VictimPolicy for Rga {
    fn select(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32> {
        self.draw(plane, sealed)
            .or_else(|| sealed.fewest_valid(plane))
    }

    fn mean_field(&self) -> Rule {
        Rule::Choices(self.choices)
    }
}
