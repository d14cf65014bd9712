//! The host block layer (Linux's blk-mq) as a stage above the device driver: plugging, bio
//! merging and splitting, I/O priorities, scheduler and driver tags, and the I/O scheduler as
//! a plug-in ([`elevator`]).
//!
//! Requests wait here, where a scheduler can order them, whenever the device below has no
//! room: the driver refuses them (an NVMe host with no command id free), or the block layer
//! keeps the device's queue depth itself (an ATA disk's NCQ depth). See docs/block.md.

pub mod config;
pub mod cpu;
pub mod elevator;
pub mod flush;
pub mod ioprio;
mod layer;
pub mod merge;
pub mod ordering;
pub mod sched;
#[cfg(test)]
mod testbed;

pub use config::{BLOCK_TUNABLES, BlockConfig, CpuCost, DriverLimits, QueueSetup};
pub use elevator::{
    Elevator, MergeKind, SCHEDULERS, SchedCtx, SchedOps, SchedSetup, lookup, scheduler_names,
};
pub use flush::WriteCache;
pub use layer::{BlockEvent, BlockLayer, BlockStats};
pub use ordering::{ORDERINGS, OrderConfig, OrderedStreams, Ordering, OrderingOps};
