//! Fixed ratio (the document's Policy II): each host takes `min(requested - minimum,
//! floor(residual x r_class))` of the residual as it was when the split began; an extra
//! request gets `min(shortfall, floor(pool_at_start x r_class), pool left)`, the class's share
//! of the pool counted over the window.

use super::{API, Allocation, AllocationOps, AllocationSetup, Ask};
use crate::plm::coordinator::QosClass;

pub static OPS: AllocationOps = AllocationOps {
    name: "fr",
    help: "fixed ratio: each class a fixed share of the residual and of the extra pool",
    api_version: API,
    tunables: &[],
    build: Some(|s: &AllocationSetup| Box::new(FixedRatio { ratios: s.ratios })),
};

pub struct FixedRatio {
    /// Share of each class (high, medium, low).
    pub ratios: [f64; 3],
}

impl FixedRatio {
    fn share(&self, class: QosClass, of: u64) -> u64 {
        (of as f64 * self.ratios[class as usize]).floor() as u64
    }
}

impl Allocation for FixedRatio {
    fn split(&self, asks: &[Ask], residual: u64) -> Vec<u64> {
        asks.iter()
            .map(|a| a.want.min(self.share(a.class, residual)))
            .collect()
    }

    fn extra(
        &self,
        class: QosClass,
        shortfall: u64,
        pool_at_start: u64,
        pool_left: u64,
        granted: u64,
    ) -> u64 {
        let cap = self.share(class, pool_at_start).saturating_sub(granted);
        shortfall.min(cap).min(pool_left)
    }
}
