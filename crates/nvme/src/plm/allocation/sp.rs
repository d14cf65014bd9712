//! Strict priority (the document's Policy I): the residual goes to the hosts in priority order,
//! each taking `min(requested - minimum, what is left)`; extra counts likewise.

use super::{API, Allocation, AllocationOps, Ask};

pub static OPS: AllocationOps = AllocationOps {
    name: "sp",
    help: "strict priority: the residual in class order, each host up to its request",
    api_version: API,
    tunables: &[],
    build: Some(|_| Box::new(StrictPriority)),
};

pub struct StrictPriority;

impl Allocation for StrictPriority {
    fn split(&self, asks: &[Ask], residual: u64) -> Vec<u64> {
        let mut left = residual;
        asks.iter()
            .map(|a| {
                let take = a.want.min(left);
                left -= take;
                take
            })
            .collect()
    }
}
