//! Submission-queue arbitration (NVMe 2.0 base specification, 3.4.4): which SQ the controller
//! fetches from next, and how many commands (at most the arbitration burst).
//!
//! An arbiter is a plug-in: one file with an [`Arbiter`] implementation, its [`ArbiterOps`]
//! (name, help, tunable sub-table `[controller.NAME]`, constructor) and one line in
//! [`ARBITERS`]. The controller finds it by the name in `controller.arbitration`.

pub mod rr;
pub mod wrr;

use qoslab_engine::{ConfigError, Ns, Settings};

use crate::config::SqClass;

/// What an arbiter sees of one SQ.
#[derive(Clone, Copy, Debug)]
pub struct SqView {
    pub class: SqClass,
    /// The host the queue belongs to.
    pub host: u16,
    /// Commands the controller could fetch from it now.
    pub available: u32,
    /// How long the command at the head has waited since it reached the controller (0 when
    /// nothing is available).
    pub head_age_ns: Ns,
    /// The NVM set of the command at the head.
    pub head_nvm_set: u16,
}

/// The arbitration hook: pick an SQ with `available > 0` and a command count, or `None`.
pub trait Arbiter {
    fn pick(&mut self, now_ns: Ns, sqs: &[SqView]) -> Option<(usize, u32)>;
}

/// What a constructor gets: the arbitration burst and the arbiter's own sub-table.
pub struct ArbiterSetup<'a> {
    pub burst: u32,
    pub settings: &'a Settings,
}

/// An arbiter's constructor.
pub type BuildArbiter = fn(&ArbiterSetup<'_>) -> Box<dyn Arbiter>;

qoslab_engine::plugin_ops! {
    /// One arbiter, as the registry knows it.
    pub struct ArbiterOps: "arbiter", tunables "[controller.NAME]", build BuildArbiter {
        /// Whether each core gets one SQ per [`SqClass`] (so the host can place I/Os by
        /// priority).
        pub sq_per_class: bool,
    }
}

/// Every arbiter a device file can name.
pub static ARBITERS: &[&ArbiterOps] = &[&rr::OPS, &wrr::OPS];

/// The arbiter called `name` in `registry`, checked against the stage contract.
pub fn lookup_in(
    registry: &[&'static ArbiterOps],
    name: &str,
) -> Result<&'static ArbiterOps, ConfigError> {
    qoslab_engine::lookup(registry, "controller.arbitration", name)
}

/// The registered arbiter called `name`.
pub fn lookup(name: &str) -> Result<&'static ArbiterOps, ConfigError> {
    lookup_in(ARBITERS, name)
}

/// Round robin among the SQs for which `eligible` holds; starts after the last SQ served.
pub fn rr_pick(
    next: &mut usize,
    sqs: &[SqView],
    eligible: impl Fn(&SqView) -> bool,
) -> Option<usize> {
    let n = sqs.len();
    for step in 0..n {
        let i = (*next + step) % n;
        if sqs[i].available > 0 && eligible(&sqs[i]) {
            *next = (i + 1) % n;
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
pub(crate) fn saturated(classes: &[SqClass]) -> Vec<SqView> {
    classes
        .iter()
        .map(|&class| SqView {
            class,
            host: 0,
            available: u32::MAX,
            head_age_ns: 0,
            head_nvm_set: 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(ArbiterOps, rr::OPS, ARBITERS, "controller.arbitration");

    #[test]
    fn names_are_unique() {
        for (i, a) in ARBITERS.iter().enumerate() {
            assert!(ARBITERS[..i].iter().all(|b| b.name != a.name));
            assert!(lookup(a.name).is_ok());
        }
    }
}
