//! The speed tricks of the path against the path without them: each must leave every number of
//! the run as it is (fast path equals slow path).

use qoslab_engine::{
    Admission, Chain, Control, LostWrite, Notice, Ns, ReqId, Requests, Stage, StageCtx,
    StageReport, Transfer,
};
use qoslab_media::AnalyticDevice;
use qoslab_media::service::Service;
use qoslab_nvme::Pcie;
use qoslab_sim::path::PathParts;

use crate::common::*;

/// A stage exactly as `S` but without its speed constants: every hand-off through the urgent
/// lane, every hook called.
struct Plain<S>(S);

impl<S: Stage> Stage for Plain<S> {
    type Event = S::Event;
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn start(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.start(ctx)
    }
    fn admit(&mut self, id: ReqId, reqs: &mut Requests) -> Admission {
        self.0.admit(id, reqs)
    }
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.submit(id, ctx)
    }
    fn on_event(&mut self, ev: Self::Event, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.on_event(ev, ctx)
    }
    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.complete(id, ctx)
    }
    fn pull(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.pull(ctx)
    }
    fn notice(&mut self, n: Notice, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.notice(n, ctx)
    }
    fn dma(&mut self, t: Transfer) -> Option<Ns> {
        self.0.dma(t)
    }
    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) -> bool {
        self.0.abort(id, ctx)
    }
    fn reset(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.reset(ctx)
    }
    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<Self::Event>) {
        self.0.control(msg, ctx)
    }
    fn counters(&self) -> Vec<(String, f64)> {
        self.0.counters()
    }
    fn collect_lost_writes(&self, out: &mut Vec<LostWrite>) {
        self.0.collect_lost_writes(out)
    }
    fn reports(&self, out: &mut Vec<StageReport>) {
        self.0.reports(out)
    }
}

const MIX: &str = "[global]\nsize=8g\nnumber_ios=20000\n[a]\nrw=randrw\nbs=4k\niodepth=16\n\
                   [b]\nrw=read\nbs=256k\niodepth=4\nnumber_ios=2000\n[c]\nrw=randwrite\nbs=4k\n\
                   iodepth=64\nfsync=32\n";

fn both(sets: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let preset = qoslab_sim::device::preset_text("nvme-analytic").unwrap();
    let opts = options(MIX, preset, sets, 3);
    let dev = || {
        let read = Service::lognormal(80_000.0, 0.3).unwrap();
        AnalyticDevice::new(16, read, Service::Fixed(20_000), 3)
    };
    let fast = qoslab_sim::run_parts::<Pcie, _, _>(&opts, dev(), PathParts::chain).unwrap();
    let slow = qoslab_sim::run_parts::<Pcie, _, _>(&opts, dev(), |p| {
        Chain::new(
            Plain(p.block),
            Chain::new(
                p.host,
                Chain::new(Plain(p.transport), Chain::new(Plain(p.controller), p.media)),
            ),
        )
    })
    .unwrap();
    let json = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
    (json(&fast.text), json(&slow.text))
}

/// Skipping the transport on the way down, taking commands into the controller inside the
/// host's hook and passing completions through the block layer and the transport change no
/// number of the run, on the default path and with several SQs, a shallow SQ, coalescing and a
/// completion order.
#[test]
fn the_path_shortcuts_change_nothing() {
    for sets in [
        &[][..],
        &["controller.arbitration=wrr", "host.sq_depth=8"][..],
        &[
            "controller.coalesce_threshold=4",
            "controller.coalesce_time_ns=10us",
        ][..],
        &[
            "controller.completion_order=random",
            "controller.reorder_bound=2",
        ][..],
    ] {
        let (fast, slow) = both(sets);
        assert_eq!(fast["jobs"], slow["jobs"], "{sets:?}");
        assert!(fast["jobs"][2]["sync"]["total_ios"].as_u64().unwrap() > 0);
    }
}

/// Without interrupt coalescing or reordering the controller hands a completion up as soon as
/// the media finishes, its CQ post time stamped, and the host completes it with one event. That
/// is exact when each entry's interrupt reaches the handler at once and entries take no link
/// time: the same run as posting each entry when its time comes (forced here by the fifo
/// completion order with an unbounded window, which reorders nothing).
#[test]
fn the_completion_fold_equals_posting_each_entry_in_its_time() {
    let exact = ["host.irq_ns=0", "link.queue_entries=false"];
    let (folded, _) = both(&exact);
    let mut slow_sets = exact.to_vec();
    slow_sets.push("controller.completion_order=fifo");
    let (posted, _) = both(&slow_sets);
    assert_eq!(folded["jobs"], posted["jobs"]);
    assert!(
        f(&stage(&folded, "nvme-controller")["interrupts_raised"])
            < f(&stage(&posted, "nvme-controller")["interrupts_raised"])
    );
}
