//! `none`: no scheduler. Requests go to the driver in the order they come, straight from the
//! submitting job when the device has room; only bios of one plugged batch merge
//! (Documentation/block/blk-mq.rst: "none" bypasses the scheduler's queues).

use crate::elevator::{API, SchedOps, SchedSetup};

pub static OPS: SchedOps = SchedOps {
    name: "none",
    help: "no scheduling: first come, first served, straight to the driver",
    api_version: API,
    tunables: &[],
    elevator: false,
    merges_requests: false,
    build: Some(build),
};

fn build(_: &SchedSetup<'_>) -> Option<Box<dyn crate::elevator::Elevator>> {
    None
}
