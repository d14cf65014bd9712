//! The ordered-write stacks as plug-ins: one `StackOps` table each (a `data` kind of
//! `qoslab_engine::plugin_ops!`) and one registry line.

use qoslab_engine::STAGE_API_VERSION;

use crate::FabricConfig;
use crate::machine::CrashImage;
use crate::plan::{Plan, PlanRules};
use crate::recovery;

qoslab_engine::plugin_ops! {
    /// How a stack orders writes, and how it recovers after a crash.
    #[derive(Debug)]
    pub struct StackOps: "ordered-write stack", data {
        pub plan: PlanRules,
        /// A stream's next request waits until the previous one is acknowledged (synchronous
        /// transfer, one in flight per stream).
        pub one_in_flight: bool,
        /// Ordering metadata goes to the target's PMR by a synchronous control path before the
        /// data (HORAE).
        pub control_path: bool,
        /// Ordering attributes are logged to the PMR before the data, and each target submits in
        /// per-server order (Rio).
        pub attributes: bool,
        /// Requests are acknowledged in sequence order (Rio reads `in_order_completion`).
        pub in_order_ack: fn(&FabricConfig) -> bool,
        /// After a crash: which commands' data to erase (indexed like `plan.cmds`).
        pub recover: fn(&Plan, &CrashImage) -> Vec<bool>,
        /// What recovery reads back from the targets' PMRs before it can decide.
        pub pmr_log: PmrLog,
        /// After the crash of one target (the initiator and the other targets up): which completed
        /// commands the initiator writes again to it (those without a completion it re-sends
        /// anyway).
        pub replay_on_target: fn(&Plan, &CrashImage, usize) -> Vec<bool>,
    }
}

/// The ordering state a stack keeps in the targets' PMRs, which recovery reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmrLog {
    /// Nothing: no recovery runs (orderless keeps what reached the media; Linux has at most
    /// one ordered write in flight, document 6.5).
    None,
    /// Rio's ordering attributes (`attr_bytes` each), the live part of each circular log.
    Attributes,
    /// HORAE's ordering metadata, one entry per request not yet known durable.
    Metadata,
}

impl PartialEq for StackOps {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

fn never(_: &FabricConfig) -> bool {
    false
}

fn always(_: &FabricConfig) -> bool {
    true
}

fn rio_in_order(cfg: &FabricConfig) -> bool {
    cfg.in_order_completion
}

/// No replay: a completed write is not sent again (the NVMe-oF host's error recovery requeues
/// only the commands without a completion).
fn replay_nothing(plan: &Plan, _: &CrashImage, _: usize) -> Vec<bool> {
    vec![false; plan.cmds.len()]
}

/// No recovery: whatever reached the media stays.
fn keep_all(plan: &Plan, _: &CrashImage) -> Vec<bool> {
    vec![false; plan.cmds.len()]
}

/// Asynchronous, merged writes with the FLUSH flag where asked: orderless's and Rio's plan.
const MERGED: PlanRules = PlanRules {
    merge: true,
    flush_every_request: false,
    separate_flush: false,
    flush_every_target: false,
};

pub static ORDERLESS: StackOps = StackOps {
    name: "orderless",
    help: "plain NVMe-oF: asynchronous, merged, a FLUSH flag where asked, no ordering (the upper bound)",
    api_version: STAGE_API_VERSION,
    plan: MERGED,
    one_in_flight: false,
    control_path: false,
    attributes: false,
    in_order_ack: never,
    recover: keep_all,
    pmr_log: PmrLog::None,
    replay_on_target: replay_nothing,
};

pub static LINUX: StackOps = StackOps {
    name: "linux",
    help: "Linux NVMe-oF ordering: each ordered write waits for the previous one's completion and a FLUSH to every target",
    api_version: STAGE_API_VERSION,
    plan: PlanRules {
        merge: false,
        flush_every_request: true,
        separate_flush: true,
        flush_every_target: true,
    },
    one_in_flight: true,
    control_path: false,
    attributes: false,
    in_order_ack: always,
    recover: keep_all,
    pmr_log: PmrLog::None,
    replay_on_target: replay_nothing,
};

pub static HORAE: StackOps = StackOps {
    name: "horae",
    help: "HORAE: ordering metadata persisted to the target's PMR by a synchronous control path, data asynchronous",
    api_version: STAGE_API_VERSION,
    plan: PlanRules {
        merge: false,
        flush_every_request: false,
        separate_flush: true,
        flush_every_target: false,
    },
    one_in_flight: false,
    control_path: true,
    attributes: false,
    in_order_ack: always,
    recover: recovery::horae,
    pmr_log: PmrLog::Metadata,
    replay_on_target: recovery::horae_target_replay,
};

pub static RIO: StackOps = StackOps {
    name: "rio",
    help: "Rio: ordering attributes in the PMR log, asynchronous data, in-order submission and completion, merging",
    api_version: STAGE_API_VERSION,
    plan: MERGED,
    one_in_flight: false,
    control_path: false,
    attributes: true,
    in_order_ack: rio_in_order,
    recover: recovery::rio,
    pmr_log: PmrLog::Attributes,
    replay_on_target: recovery::rio_target_replay,
};

/// Every stack, in the order help lists them.
pub static STACKS: &[&StackOps] = &[&ORDERLESS, &LINUX, &HORAE, &RIO];

/// The stack the block layer's ordering plug-in `name` is (`none`, `flush`, `horae`, `rio`):
/// the checker's rules for the streams it ordered.
pub fn for_ordering(name: &str) -> &'static StackOps {
    match name {
        "flush" => &LINUX,
        "horae" => &HORAE,
        "rio" => &RIO,
        _ => &ORDERLESS,
    }
}

/// The stack called `name`, checked against the stage contract (callers name the choices,
/// [`names`], when there is none).
pub fn lookup(name: &str) -> Option<&'static StackOps> {
    qoslab_engine::lookup(STACKS, "stack", name).ok()
}

/// `orderless, linux, horae or rio`.
pub fn names() -> String {
    let n: Vec<&str> = STACKS.iter().map(|s| s.name).collect();
    format!("{} or {}", n[..n.len() - 1].join(", "), n[n.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(data StackOps, ORDERLESS, STACKS, "stack");
}
