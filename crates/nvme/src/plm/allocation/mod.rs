//! How the coordinator splits the deterministic-window counts (DC) left after every host's
//! minimum, and how it grants extra counts within a window.
//!
//! A policy is a plug-in: one file with an [`Allocation`] and its [`AllocationOps`], one line
//! in [`ALLOCATIONS`]. The document's two policies are `sp` (strict priority) and `fr` (fixed
//! ratio); `proportional` and `maxmin` are this project's additions.

pub mod fr;
pub mod maxmin;
pub mod proportional;
pub mod sp;

use qoslab_engine::{ConfigError, STAGE_API_VERSION};

use super::coordinator::QosClass;

/// One host's ask when the residual is split: what it wants beyond its minimum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    pub class: QosClass,
    /// `requested - minimum`.
    pub want: u64,
}

/// The policy hooks. Hosts are passed in priority order: class (high, medium, low), then
/// order of first appearance.
pub trait Allocation {
    /// Splits `residual` counts among `asks`: each host's addition, at most its `want`.
    fn split(&self, asks: &[Ask], residual: u64) -> Vec<u64>;

    /// Grants part of an extra request of `shortfall` counts by a host of `class` within a
    /// window, from a pool that held `pool_at_start` when the window's extras began and holds
    /// `pool_left` now; the host has been granted `granted` extra counts in this window
    /// before. By default in the order asked: `min(shortfall, pool_left)`.
    fn extra(
        &self,
        _class: QosClass,
        shortfall: u64,
        _pool_at_start: u64,
        pool_left: u64,
        _granted: u64,
    ) -> u64 {
        shortfall.min(pool_left)
    }
}

/// What a constructor gets: the per-class ratios of the residual (high, medium, low).
pub struct AllocationSetup {
    pub ratios: [f64; 3],
}

pub type BuildAllocation = fn(&AllocationSetup) -> Box<dyn Allocation>;

qoslab_engine::plugin_ops! {
    /// One policy, as the registry knows it (none has tunables yet: the ratios are the
    /// coordinator's).
    pub struct AllocationOps: "allocation policy", tunables "[host.plm.NAME]", build BuildAllocation {}
}

/// Every allocation policy.
pub static ALLOCATIONS: &[&AllocationOps] = &[&sp::OPS, &fr::OPS, &proportional::OPS, &maxmin::OPS];

pub(crate) const API: u32 = STAGE_API_VERSION;

/// The registered policy called `name` (the value of key `field`), checked against the stage
/// contract.
pub fn lookup(field: &str, name: &str) -> Result<&'static AllocationOps, ConfigError> {
    qoslab_engine::lookup(ALLOCATIONS, field, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(AllocationOps, sp::OPS, ALLOCATIONS, "policy");
}
