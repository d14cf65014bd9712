//! Replica policies of the host driver: how a host uses several namespaces that hold copies
//! of the same data (one namespace per NVM set, `1..=copies`), in the way Linux's native NVMe
//! multipath picks a path by its ANA state: every write goes to every copy, and the policy
//! picks the copy each read goes to, from what the host knows of the copies.
//!
//! A policy is a plug-in: one file with a [`ReplicaPolicy`] and its [`ReplicaOps`], one line
//! in [`REPLICAS`]; the device file names it in `host.replicas` (`none`: each request keeps
//! its own namespace) and its tunables are `[host.NAME]`. Its hooks run inside the host
//! driver's, so admin commands it sends (Get Log Page, Set Features) take no simulated time.

pub mod mirror;

use std::path::Path;

use qoslab_engine::{ConfigError, Control, Notice, Ns, STAGE_API_VERSION, Settings};

/// The policy's hooks. Hosts are numbered from 0; namespaces from 1.
pub trait ReplicaPolicy {
    /// Copies of the data: namespaces `1..=copies`, each written by every write.
    fn copies(&self) -> u32;

    /// Where a read of `len_bytes` by `host` goes now: a namespace, or nowhere yet (the host
    /// keeps it until the policy releases it, [`ReplicaIo::release`]).
    fn route_read(&mut self, host: u16, len_bytes: u64, io: &mut ReplicaIo<'_>) -> Route;

    /// At time 0, before any request.
    fn start(&mut self, _io: &mut ReplicaIo<'_>) {}

    /// An asynchronous event reached `host`.
    fn notice(&mut self, _host: u16, _notice: Notice, _io: &mut ReplicaIo<'_>) {}

    /// A read [`route_read`](Self::route_read) sent to namespace `nsid` completed at the host
    /// (all its commands, with or without an error).
    fn read_done(&mut self, _nsid: u32, _io: &mut ReplicaIo<'_>) {}

    /// A wake-up the policy asked for ([`ReplicaIo::wake_at`]) is due.
    fn wake(&mut self, _token: u32, _io: &mut ReplicaIo<'_>) {}

    /// The policy's counters for the report.
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// Where a read goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To namespace NSID (from 1).
    To(u32),
    /// Nowhere yet: the host keeps it, as it keeps requests during a controller reset, until
    /// the policy releases it.
    Hold,
}

/// What a policy's hooks may do.
pub struct ReplicaIo<'a> {
    pub now_ns: Ns,
    pub(crate) control: &'a mut dyn FnMut(&mut Control),
    pub(crate) wakes: &'a mut Vec<(Ns, u32)>,
    /// Decisions on the held reads, oldest first ([`release`](Self::release)).
    pub(crate) released: &'a mut Vec<u32>,
}

impl ReplicaIo<'_> {
    /// Sends admin command `msg` down to the controller (and on to the device) and returns it
    /// answered.
    pub fn control(&mut self, msg: &mut Control) {
        (self.control)(msg)
    }

    /// Calls `wake(token)` at `at_ns`.
    pub fn wake_at(&mut self, at_ns: Ns, token: u32) {
        self.wakes.push((at_ns, token));
    }

    /// Decides the next of the reads held so far ([`Route::Hold`]), oldest first: it goes to
    /// namespace `nsid` now, or stays held with `nsid` 0. A hook that decides one decides them
    /// all, so that the host keeps the rest in their order.
    pub fn release(&mut self, nsid: u32) {
        self.released.push(nsid);
    }
}

/// What a constructor gets.
pub struct ReplicaSetup<'a> {
    /// Hosts on the path.
    pub hosts: u16,
    /// The policy's own sub-table, `[host.NAME]`.
    pub settings: &'a Settings,
    /// The device file's folder, for files the sub-table names.
    pub config_dir: Option<&'a Path>,
}

pub type BuildReplicas = fn(&ReplicaSetup<'_>) -> Result<Box<dyn ReplicaPolicy>, ConfigError>;

qoslab_engine::plugin_ops! {
    /// One replica policy, as the registry knows it.
    pub struct ReplicaOps: "replica policy", tunables "[host.NAME]", build BuildReplicas {
        /// Capability: it steers reads by the drive's Predictable Latency Mode windows, so the
        /// device must keep them.
        pub needs_plm: bool,
    }
}

/// Every replica policy a device file can name (besides `none`).
pub static REPLICAS: &[&ReplicaOps] = &[&mirror::OPS, &crate::plm::library::OPS];

/// The word for "no policy" (no replica layer).
pub use qoslab_engine::plugin::NONE;

pub(crate) const API: u32 = STAGE_API_VERSION;

/// The registered policy called `name` (`None` for `none`).
pub fn lookup(name: &str) -> Result<Option<&'static ReplicaOps>, ConfigError> {
    qoslab_engine::plugin::lookup_or_none(REPLICAS, "host.replicas", name)
}

/// The names a device file may give `host.replicas`.
pub fn names() -> Vec<&'static str> {
    qoslab_engine::plugin::names_or_none(REPLICAS)
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(
        ReplicaOps,
        mirror::OPS,
        REPLICAS,
        "host.replicas",
        or_none
    );

    #[test]
    fn the_registry_knows_none() {
        assert!(lookup("none").unwrap().is_none());
        assert_eq!(lookup("mirror").unwrap().unwrap().name, "mirror");
        let e = lookup("raid5").err().unwrap().to_string();
        assert_eq!(
            e,
            "field 'host.replicas': expected one of none, mirror, plm, got 'raid5'"
        );
        assert_eq!(names(), ["none", "mirror", "plm"]);
        for r in REPLICAS {
            assert!(lookup(r.name).unwrap().is_some());
        }
    }
}
