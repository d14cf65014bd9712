//! The block layer's test bench: a block layer with a chosen scheduler over a disk that serves
//! one request at a time in a fixed time and records what it was given, in order.

use qoslab_engine::tunable::apply_override;
use qoslab_engine::{
    Chain, Harness, IoPrio, IoPrioClass, Ns, Op, ReqFlags, ReqId, Request, Settings, Stage,
    StageCtx,
};

use crate::{BlockConfig, BlockLayer, DriverLimits, QueueSetup};

/// What the disk was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub prio: IoPrio,
    pub at_ns: Ns,
}

/// A disk with one server: each request takes `service_ns` after the one before.
pub struct Disk {
    pub service_ns: Ns,
    busy_until: Ns,
    pub log: Vec<Served>,
}

impl Stage for Disk {
    type Event = ReqId;
    fn name(&self) -> &'static str {
        "disk"
    }
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        let now = ctx.now_ns();
        let r = ctx.reqs()[id];
        self.log.push(Served {
            op: r.op,
            offset_bytes: r.offset_bytes,
            len_bytes: r.len_bytes,
            prio: r.prio,
            at_ns: now,
        });
        self.busy_until = self.busy_until.max(now) + self.service_ns;
        ctx.schedule(self.busy_until, id);
    }
    fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        ctx.complete(id);
    }
}

pub type Rig = Harness<Chain<BlockLayer, Disk>>;

/// A block layer running `sched` with `sets` (`--set` style: `block.nr_requests=8`,
/// `block.mq-deadline.fifo_batch=4`), keeping `queue_depth` requests out at a disk taking
/// `service_ns` each.
pub fn rig(sched: &str, sets: &[&str], queue_depth: u32, service_ns: Ns) -> Rig {
    Harness::new(Chain::new(
        layer(sched, sets, queue_depth),
        Disk::new(service_ns),
    ))
}

/// The block layer of [`rig`], on its own (to put another stage above it).
pub fn layer(sched: &str, sets: &[&str], queue_depth: u32) -> BlockLayer {
    let ops = crate::lookup(sched).expect("registered");
    let mut block = Settings::defaults("block", crate::BLOCK_TUNABLES);
    let mut own = Settings::defaults(&format!("block.{sched}"), ops.tunables);
    let sched_set = format!("block.scheduler={sched}");
    let depth_set = format!("block.queue_depth={queue_depth}");
    for s in [sched_set.as_str(), depth_set.as_str()].iter().chain(sets) {
        apply_override(s, &mut [&mut block, &mut own]).expect("a valid setting");
    }
    let limits = DriverLimits {
        queue_per_core: false,
        hw_queue_depth: queue_depth,
        driver_admits: false,
        max_hw_bytes: 0,
        rotational: false,
    };
    let cfg = BlockConfig::from_settings(&block);
    BlockLayer::new(QueueSetup::new(&cfg, &limits, ops), ops, &own, 1)
}

impl Disk {
    pub fn new(service_ns: Ns) -> Self {
        Disk {
            service_ns,
            busy_until: 0,
            log: Vec::new(),
        }
    }
}

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const MS: Ns = 1_000_000;

/// A request of job 0 with priority `prio` (synchronous, as O_DIRECT I/O is).
pub fn io(op: Op, offset_bytes: u64, len_bytes: u64, prio: IoPrio) -> Request {
    let mut r = Request::new(op, offset_bytes, len_bytes, 0, 0);
    r.prio = prio;
    r.flags |= ReqFlags::SYNC;
    r
}

/// Best effort at `level`.
pub fn be(level: u8) -> IoPrio {
    IoPrio {
        class: IoPrioClass::BestEffort,
        level,
    }
}

pub const BE4: IoPrio = IoPrio {
    class: IoPrioClass::BestEffort,
    level: 4,
};
pub const RT0: IoPrio = IoPrio {
    class: IoPrioClass::RealTime,
    level: 0,
};

/// The disk's log.
pub fn served(h: &Rig) -> &[Served] {
    &h.stage.lower.log
}

/// The disk's log as runs of one direction: (op, requests in a row), in order.
pub fn op_runs(h: &Rig) -> Vec<(Op, usize)> {
    let mut runs: Vec<(Op, usize)> = Vec::new();
    for s in served(h) {
        match runs.last_mut() {
            Some((op, n)) if *op == s.op => *n += 1,
            _ => runs.push((s.op, 1)),
        }
    }
    runs
}

/// When the request at `offset_bytes` reached the disk.
pub fn served_at(h: &Rig, offset_bytes: u64) -> Ns {
    served(h)
        .iter()
        .find(|s| s.offset_bytes == offset_bytes)
        .expect("served")
        .at_ns
}

/// The block layer's counter `name`.
pub fn counter(h: &Rig, name: &str) -> f64 {
    h.stage
        .upper
        .counters()
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// Runs `f` with a scheduler context over `reqs` at `now_ns` (default queue settings): for a
/// scheduler's own tests of hooks the block layer seldom calls, such as an insertion at the
/// head.
pub fn with_sched_ctx<R>(
    reqs: &qoslab_engine::Requests,
    now_ns: Ns,
    f: impl FnOnce(&mut crate::elevator::SchedCtx<'_>) -> R,
) -> R {
    let block = Settings::defaults("block", crate::BLOCK_TUNABLES);
    let limits = DriverLimits {
        queue_per_core: false,
        hw_queue_depth: 32,
        driver_admits: false,
        max_hw_bytes: 0,
        rotational: false,
    };
    let cfg = BlockConfig::from_settings(&block);
    let sched = crate::lookup(&cfg.scheduler).expect("registered");
    let setup = QueueSetup::new(&cfg, &limits, sched);
    let meta = vec![crate::elevator::RqMeta::default(); reqs.high_water() + 1];
    let merges = crate::merge::MergeIndex::default();
    let mut wakes = Vec::new();
    let mut ops = crate::elevator::OpCount::default();
    let mut cx = crate::elevator::SchedCtx {
        now_ns,
        reqs,
        meta: &meta,
        merges: &merges,
        setup: &setup,
        wakes: &mut wakes,
        ops: &mut ops,
    };
    f(&mut cx)
}

/// Scheduler `sched` with `sets` (`block.NAME.key=value`) on its own, for [`with_sched_ctx`].
pub fn build_sched(sched: &str, sets: &[&str]) -> Box<dyn crate::elevator::Elevator> {
    try_build_sched(sched, sets).expect("not none")
}

/// What scheduler `sched`'s constructor builds with `sets` (`None` for no elevator).
pub fn try_build_sched(sched: &str, sets: &[&str]) -> Option<Box<dyn crate::elevator::Elevator>> {
    let ops = crate::lookup(sched).expect("registered");
    let mut block = Settings::defaults("block", crate::BLOCK_TUNABLES);
    let mut own = Settings::defaults(&format!("block.{sched}"), ops.tunables);
    for s in sets {
        apply_override(s, &mut [&mut block, &mut own]).expect("a valid setting");
    }
    let limits = DriverLimits {
        queue_per_core: false,
        hw_queue_depth: 32,
        driver_admits: false,
        max_hw_bytes: 0,
        rotational: false,
    };
    let queue = QueueSetup::new(&BlockConfig::from_settings(&block), &limits, ops);
    let build = ops.build.expect("a scheduler");
    build(&crate::elevator::SchedSetup {
        settings: &own,
        queue: &queue,
    })
}
