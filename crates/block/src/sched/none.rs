//! `none`: no scheduler. Requests go to the driver in the order they come, straight from the
//! submitting job when the device has room; only bios of one plugged batch merge
//! (Documentation/block/blk-mq.rst: "none" bypasses the scheduler's queues).

use crate::elevator::SchedOps;

qoslab_engine::plugin! {
    pub static OPS: SchedOps = "none", "no scheduling: first come, first served, straight to the driver", elevator: false, merges_requests: false;
    build |_| None
}
