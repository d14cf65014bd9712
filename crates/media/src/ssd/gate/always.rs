//! Always open: GC runs whenever a plane's free blocks run low (a drive without Predictable
//! Latency Mode).

use super::{API, GateCaps, GateOps, GcGate};

pub static OPS: GateOps = GateOps {
    name: "always",
    help: "GC and destaging may always run",
    api_version: API,
    tunables: &[],
    caps: GateCaps::empty(),
    build: Some(|_| Box::new(Always)),
};

pub struct Always;

impl GcGate for Always {}
