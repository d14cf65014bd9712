//! The speed tricks of the path against the path without them: each must leave every number of
//! the run as it is (fast path equals slow path).

use std::path::Path;

use qoslab_engine::{
    Admission, Chain, Control, LostWrite, Notice, Ns, ReqId, Requests, Stage, StageCtx,
    StageReport, Transfer,
};
use qoslab_media::empirical::Profile;
use qoslab_media::service::Service;
use qoslab_media::{AnalyticDevice, EmpiricalDevice, Hdd, NullDevice, Ssd};
use qoslab_nvme::Pcie;
use qoslab_sim::SimOptions;
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

/// The run of `MIX` on media `dev()` over the builder's chain and over the same stages with
/// every speed constant off, as fio JSON.
fn fast_and_slow<D: Stage + qoslab_media::Device>(
    preset: &str,
    sets: &[&str],
    dev: impl Fn(&SimOptions) -> D,
) -> (serde_json::Value, serde_json::Value) {
    let preset = qoslab_sim::device::preset_text(preset).unwrap();
    let opts = options(MIX, preset, sets, 3);
    let fast = qoslab_sim::run_parts::<Pcie, _, _>(&opts, dev(&opts), PathParts::chain).unwrap();
    let slow = qoslab_sim::run_parts::<Pcie, _, _>(&opts, dev(&opts), |p| {
        Chain::new(
            Plain(p.block.without_direct_issue()),
            Chain::new(
                Plain(p.host),
                Chain::new(
                    Plain(p.transport),
                    Chain::new(Plain(p.controller), Plain(p.media)),
                ),
            ),
        )
    })
    .unwrap();
    let json = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
    (json(&fast.text), json(&slow.text))
}

fn both(sets: &[&str]) -> (serde_json::Value, serde_json::Value) {
    fast_and_slow("nvme-analytic", sets, |_| {
        let read = Service::lognormal(80_000.0, 0.3).unwrap();
        AnalyticDevice::new(16, read, Service::Fixed(20_000), 3)
    })
}

/// The path's shortcuts change no number of the run, the block layer's counters included: the
/// transport skipped on the way down and passed through on the way up; each stage taking a
/// request or a completion inside its neighbour's hook (the block layer only while it holds
/// nothing); the block layer sending a request straight to the driver when nothing waits. On
/// the default path, with several SQs and a shallow one (the block layer then holds requests
/// the driver refused), coalescing, a completion order, a host that handles completions in no
/// time, and a controller that holds few commands (so completions leave entries to fetch).
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
        &["host.irq_ns=0", "host.complete_ns=0"][..],
        &[
            "controller.max_outstanding=12",
            "controller.fetch_limit_per_sq=3",
        ][..],
    ] {
        let (fast, slow) = both(sets);
        assert_eq!(fast["jobs"], slow["jobs"], "{sets:?}");
        assert_eq!(stage(&fast, "block"), stage(&slow, "block"), "{sets:?}");
        assert!(fast["jobs"][2]["sync"]["total_ios"].as_u64().unwrap() > 0);
    }
}

/// Each media model takes its commands inside the controller's hook, and hands its completions
/// to the controller inside its own, with the same results as through the urgent lane: an SSD
/// with a volatile write cache (the job's flushes reach it), one with power-loss protection, a
/// disk, a measured profile and the null device.
#[test]
fn every_media_model_takes_commands_at_once_with_the_same_results() {
    fn check<D: Stage + qoslab_media::Device>(preset: &str, dev: impl Fn(&SimOptions) -> D) {
        let (fast, slow) = fast_and_slow(preset, &[], dev);
        assert_eq!(fast["jobs"], slow["jobs"], "{preset}");
        assert!(fast["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0);
    }
    fn media<D: qoslab_media::DeviceModel>(o: &SimOptions) -> D {
        o.device.build_media(o.seed).unwrap()
    }
    check("consumer-tlc", media::<Ssd>);
    check("enterprise-tlc-plp", media::<Ssd>);
    check("hdd-7200", media::<Hdd>);
    check("nvme-analytic", |_| NullDevice::new(30_000, 1 << 40));
    let profile = Profile::parse(
        Path::new("profile.toml"),
        "format = \"qoslab-empirical-1\"\nsource = \"test\"\n\
         [[point]]\nop = \"read\"\niodepth = 1\nbs_bytes = 4096\n\
         percentiles = [1.0, 50.0, 99.0]\nclat_ns = [9000, 12000, 30000]\n\
         [[point]]\nop = \"read\"\niodepth = 8\nbs_bytes = 4096\n\
         percentiles = [1.0, 50.0, 99.0]\nclat_ns = [20000, 40000, 120000]\n\
         [[point]]\nop = \"write\"\niodepth = 1\nbs_bytes = 4096\n\
         percentiles = [1.0, 50.0, 99.0]\nclat_ns = [15000, 20000, 60000]\n",
    )
    .unwrap();
    check("nvme-analytic", |o| {
        EmpiricalDevice::new(profile.clone(), 1 << 40, o.seed)
    });
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
