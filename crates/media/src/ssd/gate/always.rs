//! Always open: GC runs whenever a plane's free blocks run low (a drive without Predictable
//! Latency Mode).

use super::{GateCaps, GateOps, GcGate};

qoslab_engine::plugin! {
    pub static OPS: GateOps = "always", "GC and destaging may always run", caps: GateCaps::empty();
    build |_| Box::new(Always)
}

pub struct Always;

impl GcGate for Always {}
