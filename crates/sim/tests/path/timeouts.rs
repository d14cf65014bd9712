//! Command timeouts, aborts and controller resets, with a device that never finishes one
//! command until it is reset.

use qoslab_engine::{IoStatus, Ns, ReqId, Stage, StageCtx};
use qoslab_media::Device;

use crate::common::*;

/// One server, fixed service; the `stall_at`-th command it receives hangs in service until a
/// reset, or (`park`) is set aside unstarted, starved, until aborted or reset.
struct StallingDevice {
    service_ns: Ns,
    stall_at: u64,
    park: bool,
    received: u64,
    busy: Option<(ReqId, bool)>,
    queue: std::collections::VecDeque<ReqId>,
    parked: Vec<ReqId>,
    generation: u32,
}

impl StallingDevice {
    fn new(service_ns: Ns, stall_at: u64) -> Self {
        StallingDevice {
            service_ns,
            stall_at,
            park: false,
            received: 0,
            busy: None,
            queue: Default::default(),
            parked: Vec::new(),
            generation: 0,
        }
    }

    fn start(&mut self, id: ReqId, ctx: &mut impl StageCtx<u32>) {
        self.received += 1;
        let stalls = self.received == self.stall_at;
        self.busy = Some((id, stalls));
        if !stalls {
            let at = ctx.now_ns() + self.service_ns;
            ctx.schedule(at, self.generation);
        }
    }
}

impl Stage for StallingDevice {
    type Event = u32;
    fn name(&self) -> &'static str {
        "stalling"
    }
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<u32>) {
        if self.park && self.received + 1 == self.stall_at {
            self.received += 1;
            self.parked.push(id);
        } else if self.busy.is_none() {
            self.start(id, ctx);
        } else {
            self.queue.push_back(id);
        }
    }
    fn on_event(&mut self, generation: u32, ctx: &mut impl StageCtx<u32>) {
        if generation != self.generation {
            return;
        }
        let (id, _) = self.busy.take().expect("busy");
        ctx.complete(id);
        if let Some(next) = self.queue.pop_front() {
            self.start(next, ctx);
        }
    }
    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<u32>) -> bool {
        let before = self.queue.len() + self.parked.len();
        self.queue.retain(|&q| q != id);
        self.parked.retain(|&q| q != id);
        let withdrawn = self.queue.len() + self.parked.len() < before;
        if withdrawn {
            ctx.reqs_mut()[id].status = IoStatus::Aborted;
            ctx.complete(id);
        }
        withdrawn
    }
    fn reset(&mut self, ctx: &mut impl StageCtx<u32>) {
        // Everything held comes back now, aborted; the hung command is released too.
        self.generation += 1;
        let parked = std::mem::take(&mut self.parked);
        for id in self
            .queue
            .drain(..)
            .chain(parked)
            .chain(self.busy.take().map(|b| b.0))
        {
            ctx.reqs_mut()[id].status = IoStatus::Aborted;
            ctx.complete(id);
        }
    }
}

impl Device for StallingDevice {
    fn capacity_bytes(&self) -> u64 {
        1 << 30
    }
}

fn run_stalling(sets: &[&str]) -> serde_json::Value {
    let job = "[qd1]\nrw=randread\nbs=4k\nsize=1g\niodepth=1\nnumber_ios=200\n";
    let opts = options(job, &analytic(""), sets, 1);
    let out = qoslab_sim::run_on_device(&opts, StallingDevice::new(10_000, 100)).unwrap();
    serde_json::from_str(&out.text).unwrap()
}

/// The hung command times out; the controller cannot withdraw a command in service, so the
/// host resets it and requeues the command, which then completes: its latency is timeout +
/// abort round trip + reset + service, exactly.
#[test]
fn a_hung_command_is_aborted_then_the_controller_is_reset_and_the_io_requeued() {
    let r = run_stalling(&[
        "host.timeout_ns=1ms",
        "host.abort_ns=10us",
        "host.reset_ns=1ms",
    ]);
    let n = stage(&r, "nvme-host");
    assert_eq!(n["timeouts"], 1);
    assert_eq!(n["aborts_failed"], 1);
    assert_eq!(n["resets"], 1);
    assert_eq!(n["requeues"], 1);
    assert_eq!(n["failed_ios"], 0);
    let read = &r["jobs"][0]["read"];
    assert_eq!(read["total_ios"], 200);
    assert_eq!(r["jobs"][0]["error"], 0);
    assert_eq!(
        read["lat_ns"]["max"],
        1_000_000 + 10_000 + 1_000_000 + 10_000
    );
    assert_eq!(read["lat_ns"]["min"], 10_000);
}

/// With no retries left the I/O fails, and the job reports an I/O error as fio does (EIO).
#[test]
fn an_io_out_of_retries_fails_with_an_error() {
    let r = run_stalling(&["host.timeout_ns=1ms", "host.max_retries=0"]);
    assert_eq!(stage(&r, "nvme-host")["failed_ios"], 1);
    assert_eq!(r["jobs"][0]["error"], 5);
    assert_eq!(r["jobs"][0]["read"]["total_ios"], 200);
}

/// A command starved inside the device (queued, never started) times out; the Abort withdraws
/// it and the host requeues it, without a reset.
#[test]
fn a_starved_queued_command_is_aborted_and_requeued_without_a_reset() {
    let job = "[qd2]\nrw=randread\nbs=4k\nsize=1g\niodepth=2\nnumber_ios=200\n";
    let opts = options(
        job,
        &analytic(""),
        &["host.timeout_ns=1ms", "host.abort_ns=10us"],
        1,
    );
    let mut dev = StallingDevice::new(10_000, 100);
    dev.park = true;
    let out = qoslab_sim::run_on_device(&opts, dev).unwrap();
    let r: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    let n = stage(&r, "nvme-host");
    assert_eq!(n["timeouts"], 1, "{n}");
    assert_eq!(stage(&r, "nvme-controller")["aborts_succeeded"], 1);
    assert_eq!(n["resets"], 0, "{n}");
    assert_eq!(n["requeues"], 1, "{n}");
    let read = &r["jobs"][0]["read"];
    assert_eq!(read["total_ios"], 200);
    // Timed out after 1 ms, withdrawn 10 us later, served again: but it then waits behind
    // the other job slot's command if that one is in service.
    let max = f(&read["lat_ns"]["max"]);
    assert!((1_020_000.0..=1_030_000.0).contains(&max), "{max}");
}

/// I/Os waiting above the host for a command id when the controller resets go on once the
/// reset is done, even when the reset's own I/O fails and nothing else is outstanding.
#[test]
fn ios_waiting_for_a_command_id_go_on_after_a_reset() {
    let job = "[qd4]\nrw=randread\nbs=4k\nsize=1g\niodepth=4\nnumber_ios=200\n";
    let sets = [
        "host.sq_depth=2",
        "host.timeout_ns=1ms",
        "host.max_retries=0",
    ];
    let opts = options(job, &analytic(""), &sets, 1);
    let out = qoslab_sim::run_on_device(&opts, StallingDevice::new(10_000, 100)).unwrap();
    let r: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    let n = stage(&r, "nvme-host");
    assert_eq!(n["resets"], 1, "{n}");
    assert_eq!(n["failed_ios"], 1, "{n}");
    // One command id: the other I/Os wait in the block layer (all four while the reset is on).
    let held = f(&stage(&r, "block")["max_held"]);
    assert!((3.0..=4.0).contains(&held), "{held}");
    // The I/O that failed when the reset ended completed then: its latency is the timeout and
    // reset (about 2 ms), not a wrapped-around difference.
    let max = f(&r["jobs"][0]["read"]["lat_ns"]["max"]);
    assert!(max < 5e6, "{max}");
    assert_eq!(r["jobs"][0]["read"]["total_ios"], 200);
}
