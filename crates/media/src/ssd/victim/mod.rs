//! Garbage-collection victim choice: which sealed block of a plane GC collects next.
//!
//! A policy is a plug-in: one file with a [`VictimPolicy`] implementation and its
//! [`VictimOps`] (name, help, tunables read from `[media.gc.NAME]`, capabilities, constructor),
//! declared with [`qoslab_engine::plugin!`], and one line in [`VICTIMS`]. The device file names
//! it in `media.gc.victim`.

pub mod cost_benefit;
pub mod fifo;
pub mod greedy;
pub mod rga;

use qoslab_engine::{RngStream, Settings};

use super::ftl::Sealed;
use super::mean_field::Rule;

/// The victim-choice hooks. The FTL calls `select` when a plane's free blocks run low and
/// marks the block it returns; `sealed` tells the policy of every block that became a
/// candidate.
pub trait VictimPolicy {
    /// A victim among the sealed blocks of `plane`, or `None` when collecting any would free
    /// nothing (every sealed block is full of valid pages).
    fn select(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32>;

    /// `block` of `plane` was sealed (filled, its programs done). Nothing by default.
    fn sealed(&mut self, _plane: u32, _block: u32) {}

    /// The mean-field rule whose steady state the preconditioner writes for this policy:
    /// greedy by default.
    fn mean_field(&self) -> Rule {
        Rule::Greedy
    }
}

/// What a constructor gets.
pub struct VictimSetup<'a> {
    /// The run's seed: a policy that draws derives its stream from it.
    pub seed: u64,
    pub planes: u32,
    pub blocks_per_plane: u32,
    /// The policy's own sub-table.
    pub settings: &'a Settings,
}

pub type BuildVictim = fn(&VictimSetup<'_>) -> Box<dyn VictimPolicy>;

qoslab_engine::plugin_ops! {
    /// One victim policy, as the registry knows it.
    pub struct VictimOps: "GC victim policy", tunables "[media.gc.NAME]", build BuildVictim {
        /// Capability: the FTL keeps each plane's sealed blocks in lists by valid count, which
        /// [`Sealed::fewest_valid`] and [`Sealed::by_valid`] then read instead of scanning the
        /// plane. A policy that looks at few blocks (random draws) leaves it off and saves the
        /// list upkeep on every page invalidated.
        pub valid_lists: bool,
    }
}

/// Every victim policy a device file can name.
pub static VICTIMS: &[&VictimOps] = &[&greedy::OPS, &cost_benefit::OPS, &rga::OPS, &fifo::OPS];

/// A policy's random stream: one per run, whatever the policy (`ssd/gc/victim`).
pub(crate) fn victim_rng(seed: u64) -> RngStream {
    RngStream::new(seed, "ssd/gc/victim")
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::lookup;

    qoslab_engine::registry_contract_test!(VictimOps, greedy::OPS, VICTIMS, "media.gc.victim");

    #[test]
    fn names_are_unique_and_every_policy_passes_its_check() {
        for (i, v) in VICTIMS.iter().enumerate() {
            assert!(VICTIMS[..i].iter().all(|w| w.name != v.name));
            assert!(lookup(VICTIMS, "media.gc.victim", v.name).is_ok());
        }
    }
}
