//! The I/O scheduler contract, in the spirit of Linux's `struct elevator_mq_ops`: a scheduler
//! is one [`Elevator`] implementation in its own file under `sched/`, its [`SchedOps`] (name,
//! help, the sub-table `[block.NAME]` of its tunables with the kernel's names and units, a
//! constructor) and one line in [`SCHEDULERS`]. The block layer calls it only through these
//! hooks and tells it everything through a [`SchedCtx`].
//!
//! The hooks and their Linux counterparts:
//!
//! | hook | Linux | when |
//! |---|---|---|
//! | `insert` | `insert_requests` | a request got its tag and enters the scheduler |
//! | `dispatch` | `dispatch_request` | the device has room: which request goes next |
//! | `has_work` | `has_work` | whether `dispatch` could return something |
//! | `bio_merge` | `bio_merge` | a bio arrives: which queued request may take it |
//! | `allow_merge` | `allow_merge` | may this bio join that request |
//! | `request_merged` | `request_merged` | a bio joined a request (front: it moved) |
//! | `requests_merged` | `requests_merged` | two queued requests became one |
//! | `completed` | `completed_request` + `finish_request` | the device finished a request |
//! | `limit_depth` | `limit_depth` | how many scheduler tags a new request may use |
//! | `timer` | a scheduler's own timer | a wake-up it asked for is due |

use std::collections::BTreeSet;

use qoslab_engine::{ConfigError, IoPrio, Ns, ReqId, Request, Requests, Settings};

use crate::config::QueueSetup;
use crate::merge::MergeIndex;
use crate::sched::{bfq, kyber, mq_deadline, none, prio, prio_advanced};

/// Where a bio joins a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeKind {
    /// The bio starts where the request ends.
    Back,
    /// The bio ends where the request starts; the request now starts earlier.
    Front,
}

/// An I/O scheduler. Every hook but the first three has a default that does nothing.
pub trait Elevator {
    /// `rq` holds a scheduler tag now and waits for the device. `at_head`: a request the
    /// driver gave back, to go first.
    fn insert(&mut self, rq: ReqId, at_head: bool, cx: &mut SchedCtx<'_>);

    /// The next request for the device, removed from the scheduler, or `None` (nothing
    /// queued, or the scheduler holds back: it then asks for a wake-up or waits for a
    /// completion).
    fn dispatch(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId>;

    /// Whether requests wait here.
    fn has_work(&self) -> bool;

    /// A queued request that bio `bio` may join, if this scheduler merges bios at all (the
    /// block layer checks sizes and priorities first: the candidates [`SchedCtx::back_merge`]
    /// and [`SchedCtx::front_merge`] offer are already compatible).
    fn bio_merge(&mut self, _bio: ReqId, _cx: &mut SchedCtx<'_>) -> Option<(ReqId, MergeKind)> {
        None
    }

    /// Whether bio `bio` may join queued request `rq` (a plug merge or an insert merge too);
    /// the scheduler's own rule on top of the block layer's.
    fn allow_merge(&self, _rq: ReqId, _bio: ReqId, _cx: &SchedCtx<'_>) -> bool {
        true
    }

    /// A bio joined queued request `rq`; after a front merge `rq` starts earlier than `old`
    /// (bytes: its offset before, see [`SchedCtx::resort`]).
    fn request_merged(&mut self, _rq: ReqId, _kind: MergeKind, _old: u64, _cx: &mut SchedCtx<'_>) {}

    /// Queued request `next` joined queued request `rq` (which now covers both) and is gone:
    /// forget it.
    fn requests_merged(&mut self, _rq: ReqId, _next: ReqId, _cx: &mut SchedCtx<'_>) {}

    /// The device finished `rq`, which this scheduler dispatched. Read only what the
    /// scheduler recorded itself: after a controller reset the request that completes may be
    /// the driver's copy of `rq`, and `rq` itself already gone.
    fn completed(&mut self, _rq: ReqId, _cx: &mut SchedCtx<'_>) {}

    /// Scheduler tags (of `nr_requests`) new request `req` may find in use and still get
    /// one (Linux's shallow depth); `u32::MAX` for no limit.
    fn limit_depth(&self, _req: &Request) -> u32 {
        u32::MAX
    }

    /// The fewest tags per sbitmap word of its `bits_per_word` this scheduler lets any request
    /// use (its `depth_updated` hook's `sbitmap_queue_min_shallow_depth`); `u32::MAX` if it
    /// sets none. It decides how many freed tags wake a sleeping submitter (the wake batch).
    fn min_shallow_depth(&self, _bits_per_word: u32) -> u32 {
        u32::MAX
    }

    /// A wake-up asked for with [`SchedCtx::wake_at`] is due (the block layer runs the
    /// dispatch loop afterwards).
    fn timer(&mut self, _cx: &mut SchedCtx<'_>) {}

    /// Read-only state for the report (Linux's debugfs attributes), as (name with unit,
    /// value).
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// Operations a scheduler's hooks performed, for the CPU cost model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCount {
    pub hooks: u64,
    pub list_ops: u64,
    pub tree_levels: u64,
    pub hash_ops: u64,
}

impl OpCount {
    /// CPU time in ns under `cost`.
    pub fn cpu_ns(&self, cost: &crate::config::CpuCost) -> u64 {
        self.hooks * cost.hook_ns
            + self.list_ops * cost.list_op_ns
            + self.tree_levels * cost.tree_level_ns
            + self.hash_ops * cost.hash_op_ns
    }
}

/// What a scheduler hook sees of the block layer.
pub struct SchedCtx<'a> {
    pub(crate) now_ns: Ns,
    pub(crate) reqs: &'a Requests,
    pub(crate) meta: &'a [RqMeta],
    pub(crate) merges: &'a MergeIndex,
    pub(crate) setup: &'a QueueSetup,
    pub(crate) wakes: &'a mut Vec<Ns>,
    pub(crate) ops: &'a mut OpCount,
}

/// What the block layer knows of a request besides the request itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct RqMeta {
    /// The request was made (its first bio arrived: Linux `start_time_ns`).
    pub start_ns: Ns,
    /// It went to the driver (Linux `io_start_time_ns`).
    pub io_start_ns: Ns,
    /// Its data segments (each bio's own: separate user buffers never share one).
    pub segments: u32,
}

impl SchedCtx<'_> {
    pub fn now_ns(&self) -> Ns {
        self.now_ns
    }

    /// The request `id` (its offset and length include what merged into it).
    pub fn req(&self, id: ReqId) -> &Request {
        &self.reqs[id]
    }

    /// When `id` reached the block layer (its first bio).
    pub fn start_ns(&self, id: ReqId) -> Ns {
        self.meta[id.index()].start_ns
    }

    /// When `id` went to the driver.
    pub fn io_start_ns(&self, id: ReqId) -> Ns {
        self.meta[id.index()].io_start_ns
    }

    /// Whether the device is a spinning disk (queue/rotational).
    pub fn rotational(&self) -> bool {
        self.setup.rotational
    }

    /// Scheduler tags per hardware queue (queue/nr_requests).
    pub fn nr_requests(&self) -> u32 {
        self.setup.nr_requests
    }

    /// Calls the scheduler's `timer` hook at `at_ns` (not before now). There is no cancel: a
    /// wake-up no longer needed finds nothing to do.
    pub fn wake_at(&mut self, at_ns: Ns) {
        self.wakes.push(at_ns.max(self.now_ns));
    }

    /// A queued request that ends where bio `bio` starts and may take it (Linux's merge hash).
    pub fn back_merge(&mut self, bio: ReqId) -> Option<ReqId> {
        self.ops.hash_ops += 1;
        self.merges
            .back_candidate(self.reqs, self.meta, bio, self.setup)
    }

    /// A queued request that starts where bio `bio` ends and may take it.
    pub fn front_merge(&mut self, bio: ReqId) -> Option<ReqId> {
        self.ops.hash_ops += 1;
        self.merges
            .front_candidate(self.reqs, self.meta, bio, self.setup)
    }

    /// Cost model: `n` list insertions or removals.
    pub fn list_ops(&mut self, n: u64) {
        self.ops.list_ops += n;
    }

    /// Cost model: one insertion, removal or lookup in a balanced tree of `len` entries.
    pub fn tree_op(&mut self, len: usize) {
        self.ops.tree_levels += u64::from(usize::BITS - len.leading_zeros()).max(1);
    }

    /// Moves `rq`, which a front merge made start earlier than `old` (bytes), to its new
    /// place in a sector-ordered tree (Linux's `elv_rb_del` and `elv_rb_add` in a
    /// `request_merged` hook), and returns its new offset.
    pub fn resort(&mut self, tree: &mut BTreeSet<(u64, ReqId)>, rq: ReqId, old: u64) -> u64 {
        tree.remove(&(old, rq));
        let offset = self.req(rq).offset_bytes;
        tree.insert((offset, rq));
        self.tree_op(tree.len());
        offset
    }
}

/// What a scheduler's constructor gets.
pub struct SchedSetup<'a> {
    /// Its sub-table `[block.NAME]`.
    pub settings: &'a Settings,
    pub queue: &'a QueueSetup,
}

/// A scheduler's constructor: `None` for `none`, whose requests bypass scheduling.
pub type BuildSched = fn(&SchedSetup<'_>) -> Option<Box<dyn Elevator>>;

qoslab_engine::plugin_ops! {
    /// One scheduler, as the registry knows it (Linux's `struct elevator_type`; its tunables
    /// are Linux's `elevator_attrs`).
    pub struct SchedOps: "scheduler", tunables "[block.NAME]", build BuildSched {
        /// Capability: it is an elevator (Linux's `q->elevator`), whose queues hold requests
        /// back, so the queue gets scheduler tags, by default 2 x min(tag set depth, 128)
        /// (`blk_mq_init_sched`); `none` is not, and requests go to the driver as they come.
        pub elevator: bool,
        /// After a bio merge, the block layer also tries to join the grown request with its
        /// neighbour in sector order (Linux's `next_request` / `former_request`).
        pub merges_requests: bool,
    }
}

/// Every scheduler a device file can name.
pub static SCHEDULERS: &[&SchedOps] = &[
    &none::OPS,
    &mq_deadline::OPS,
    &prio::OPS,
    &prio_advanced::OPS,
    &kyber::OPS,
    &bfq::OPS,
];

/// The registered scheduler called `name`, checked against the stage contract.
pub fn lookup(name: &str) -> Result<&'static SchedOps, ConfigError> {
    qoslab_engine::lookup(SCHEDULERS, "block.scheduler", name)
}

/// Names of the registered schedulers.
pub fn scheduler_names() -> Vec<&'static str> {
    qoslab_engine::plugin::names(SCHEDULERS)
}

/// The priority class of a request (0 RT, 1 BE, 2 IDLE).
pub fn class_of(req: &Request) -> usize {
    crate::ioprio::class_index(req.prio)
}

/// Whether two priorities may share a request: the block layer merges only bios of the same
/// I/O priority (`blk_rq_merge_ok`: `rq->ioprio != bio_prio(bio)` refuses).
pub fn same_prio(a: IoPrio, b: IoPrio) -> bool {
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(SchedOps, none::OPS, SCHEDULERS, "block.scheduler");

    #[test]
    fn names_are_unique_and_every_scheduler_loads() {
        for (i, s) in SCHEDULERS.iter().enumerate() {
            assert!(SCHEDULERS[..i].iter().all(|t| t.name != s.name));
            assert!(lookup(s.name).is_ok());
        }
    }

    #[test]
    fn a_scheduler_is_an_elevator_exactly_when_it_builds_one() {
        for s in SCHEDULERS {
            let built = crate::testbed::try_build_sched(s.name, &[]);
            assert_eq!(built.is_some(), s.elevator, "{}", s.name);
        }
        assert!(!none::OPS.elevator && mq_deadline::OPS.elevator);
    }
}
