//! Rosenblum and Ousterhout's cost-benefit choice (LFS): the most (1 - u) / (2u) x age, where u
//! is the fraction of the block still valid and age the host page writes since it was sealed.

use super::{VictimOps, VictimPolicy};
use crate::ssd::ftl::Sealed;

qoslab_engine::plugin! {
    pub static OPS: VictimOps = "cost_benefit", "Rosenblum's (1-u)/2u x age", valid_lists: true;
    build |_| Box::new(CostBenefit)
}

pub struct CostBenefit;

impl VictimPolicy for CostBenefit {
    fn select(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32> {
        let ppb = f64::from(sealed.pages_per_block());
        let mut best: Option<(f64, u32)> = None;
        for b in sealed.by_valid(plane) {
            let u = f64::from(sealed.valid(b)) / ppb;
            let age = sealed.age(b) as f64;
            let score = if u == 0.0 {
                f64::INFINITY
            } else {
                (1.0 - u) / (2.0 * u) * age
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, b));
            }
        }
        best.map(|(_, b)| b)
    }
}
