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

use qoslab_engine::{ConfigError, PluginInfo, STAGE_API_VERSION, Tunable};

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

/// One policy, as the registry knows it.
pub struct AllocationOps {
    pub name: &'static str,
    pub help: &'static str,
    pub api_version: u32,
    pub tunables: &'static [Tunable],
    /// Builds it (required).
    pub build: Option<BuildAllocation>,
}

/// Every allocation policy.
pub static ALLOCATIONS: &[&AllocationOps] = &[&sp::OPS, &fr::OPS, &proportional::OPS, &maxmin::OPS];

pub(crate) const API: u32 = STAGE_API_VERSION;

/// The policy called `name` in `registry`, checked against the stage contract.
pub fn lookup_in(
    registry: &[&'static AllocationOps],
    field: &str,
    name: &str,
) -> Result<&'static AllocationOps, ConfigError> {
    let ops = registry.iter().find(|a| a.name == name).ok_or_else(|| {
        let names: Vec<&str> = registry.iter().map(|a| a.name).collect();
        ConfigError::new(format!(
            "field '{field}': expected one of {}, got '{name}'",
            names.join(", ")
        ))
    })?;
    qoslab_engine::check_plugin(&PluginInfo {
        kind: "allocation policy",
        name: ops.name,
        api_version: ops.api_version,
        missing_hooks: if ops.build.is_none() { &["build"] } else { &[] },
    })
    .map_err(ConfigError::new)?;
    Ok(ops)
}

/// The registered policy called `name`.
pub fn lookup(field: &str, name: &str) -> Result<&'static AllocationOps, ConfigError> {
    lookup_in(ALLOCATIONS, field, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(
        AllocationOps,
        sp::OPS,
        ALLOCATIONS,
        "policy",
        |reg, name| lookup_in(reg, "policy", name)
    );
}
