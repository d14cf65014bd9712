//! Stages of the I/O path and the hooks the simulator calls on them.
//!
//! A stage (the block layer, the NVMe host driver, a transport, the NVMe controller, a device)
//! is one implementation of [`Stage`], in the spirit of Linux's `elevator_mq_ops` and fio's
//! `ioengine_ops`: a few hooks over the shared [`Request`](crate::Request) type, most with
//! defaults. A stage never calls another stage; it talks to the path through its [`StageCtx`]:
//! schedule its own events, offer a request to the stage below, report a request complete to
//! the stage above. A path is a chain of stages ([`Chain`](crate::Chain)), itself a stage.
//!
//! The contract, in the order a request meets it:
//! - **Admission.** A stage offers a request down with [`StageCtx::dispatch`]. The stage below
//!   answers at once through its [`Stage::admit`] hook: [`Admission::Accepted`] (its `submit`
//!   runs after the current hook, at the same simulated time) or [`Admission::Busy`] (fio's
//!   `FIO_Q_BUSY`, blk-mq's `BLK_STS_RESOURCE`): the caller keeps the request. A stage that
//!   said busy calls [`StageCtx::room_above`] once room opens, and the stage above gets its
//!   [`Stage::pull`] hook (blk-mq's restart of the hardware queue), where it offers what it
//!   holds again. So requests that do not fit wait where a scheduler can see them, never in a
//!   hidden queue below.
//! - **Hand-offs** (`submit` below, `complete` above, `pull`, notices) take effect at the
//!   current time, after the running hook returns, in the order they were made (the event
//!   queue's urgent lane).
//! - **Synchronous calls** reach the stage below at once: `abort_below`, `reset_below`,
//!   `control_below` (admin commands: Set Features, Get Log Page), and `dma` reaches the nearest
//!   stage above that moves data (a transport).
//!
//! Methods take `&mut impl StageCtx<_>` so that every context is a concrete type and each hook
//! call is statically dispatched on the hot path.

use std::fmt::Debug;

use crate::control::{Control, LostWrite, Notice, Transfer};
use crate::request::{ReqId, Requests};
use crate::time::Ns;

/// Version of the stage contract. Bumped when a hook's meaning changes; a registry refuses a
/// plug-in built against another version ([`check_plugin`](crate::check_plugin)).
///
/// 2: admission and `pull` (back-pressure), notices, control messages, `dma`.
pub const STAGE_API_VERSION: u32 = 2;

/// A stage's answer to a request offered from above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Admission {
    /// Taken: the stage's `submit` hook will run.
    Accepted,
    /// No room now: the caller keeps the request until its `pull` hook is called.
    Busy,
}

/// What a stage may do while one of its hooks runs.
pub trait StageCtx<E> {
    /// The current simulated time.
    fn now_ns(&self) -> Ns;
    /// The run's requests, to read.
    fn reqs(&self) -> &Requests;
    /// The run's requests, to stamp times or update fields this stage owns.
    fn reqs_mut(&mut self) -> &mut Requests;
    /// Calls this stage's `on_event(ev)` at `at_ns` (not before now). Events at equal times
    /// arrive in the order they were scheduled. There is no cancel: a stage that may change its
    /// mind carries a generation number in the event and ignores stale ones.
    fn schedule(&mut self, at_ns: Ns, ev: E);
    /// Calls this stage's `on_event(ev)` at the current time, after the running hook and the
    /// hand-offs already made (the urgent lane).
    fn schedule_now(&mut self, ev: E);
    /// Offers `id` to the stage below (see the module's contract).
    fn dispatch(&mut self, id: ReqId) -> Admission;
    /// Reports `id` complete to the stage above (the one that submitted it).
    fn complete(&mut self, id: ReqId);
    /// Room opened in this stage after it answered busy: the stage above gets its `pull` hook.
    fn room_above(&mut self);
    /// Tells the stage above something that is not a request (an interrupt, an asynchronous
    /// event); its `notice` hook runs after the current hook.
    fn notify_above(&mut self, notice: Notice);
    /// Asks the stage below to withdraw `id` (its `abort` hook, called at once); whether it
    /// will come back aborted.
    fn abort_below(&mut self, _id: ReqId) -> bool {
        false
    }
    /// Resets the stage below (its `reset` hook, called at once).
    fn reset_below(&mut self) {}
    /// Sends an admin command to the stages below (their `control` hooks, at once, each passing
    /// it on by default). The stage that owns the feature or log page fills in the answer.
    fn control_below(&mut self, _msg: &mut Control) {}
    /// Moves data (`t`) through the nearest stage above that moves data (a transport's `dma`
    /// hook); returns when the last byte lands. Free when no stage above moves data.
    fn dma(&mut self, t: Transfer) -> Ns {
        t.start_ns
    }
    /// Runs `ns` of CPU work on core `core` of host `host`, starting at `start_ns` or when the
    /// core is next free; returns when it ends. Free of contention when the run does not hold
    /// the host's cores as a resource (the default: `start_ns + ns`).
    fn cpu(&mut self, _host: u16, _core: u16, start_ns: Ns, ns: Ns) -> Ns {
        start_ns + ns
    }
}

/// One stage's counters for the report (`qoslab.stages[]` in the JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct StageReport {
    /// The stage's name in the path (`block`, `nvme-host`, `pcie`, ...).
    pub name: String,
    /// (name with unit, value), in the stage's own order.
    pub counters: Vec<(String, f64)>,
}

/// One stage of the simulated I/O path.
pub trait Stage {
    /// The stage's own timed events (a server finishing, a timer firing). Kept small and `Copy`:
    /// they sit in the event queue.
    type Event: Copy + Debug;

    /// Speed: `complete` and `notice` are the default hooks (they only pass up), so a chain
    /// hands completions and notices from below straight on to the stage above this one,
    /// without an urgent event for this stage. Each use is checked by a test running the same
    /// path with and without it.
    const FORWARDS_UP: bool = false;

    /// Speed: `submit` may run at once inside the hook of the stage that dispatched to it (it
    /// never calls up at once, which no hook does, and needs nothing of the dispatching stage),
    /// saving an urgent event per request.
    const SUBMITS_AT_ONCE: bool = false;

    /// Speed: `complete` may run at once inside the hook of the stage below that completed the
    /// request (it never calls down at once: no `dispatch`, `abort_below`, `reset_below` or
    /// `control_below`), saving an urgent event per request.
    const COMPLETES_AT_ONCE: bool = false;

    /// Speed: `submit` only dispatches the request on, unchanged (whatever the stage does to a
    /// request going down, it does in `admit`), so a chain hands it straight to the stage
    /// below and this stage's hook is never called.
    const PASSES_DOWN: bool = false;

    /// Speed: [`COMPLETES_AT_ONCE`](Self::COMPLETES_AT_ONCE) decided per completion, for a
    /// stage whose `complete` calls down only in some states: true when `complete` would not
    /// call down now, and running it ahead of the hand-offs already waiting in the urgent lane
    /// changes nothing (the block layer holding no request: a `pull` waiting there would find
    /// nothing to dispatch). Checked by the same tests as the constants.
    fn completes_at_once_now(&self) -> bool {
        false
    }

    /// The stage's name in reports.
    fn name(&self) -> &'static str;

    /// Called once at time 0 before any request (e.g. to schedule a power failure).
    fn start(&mut self, _ctx: &mut impl StageCtx<Self::Event>) {}

    /// The stage above offers `id`: reserve what the request needs (a tag, a command id) and
    /// accept it, or say busy. Called at once from the offering stage's hook, so it must not
    /// touch the path; `submit` follows for an accepted request. By default every request is
    /// accepted.
    fn admit(&mut self, _id: ReqId, _reqs: &mut Requests) -> Admission {
        Admission::Accepted
    }

    /// The stage above hands over request `id` (which `admit` accepted).
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>);

    /// An event this stage scheduled is due.
    fn on_event(&mut self, ev: Self::Event, ctx: &mut impl StageCtx<Self::Event>);

    /// The stage below finished request `id` that this stage dispatched. By default the
    /// completion passes straight up.
    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        ctx.complete(id);
    }

    /// Room opened below after a busy answer: offer what this stage holds (blk-mq's
    /// `has_work` / `dispatch_request`). Nothing to do by default.
    fn pull(&mut self, _ctx: &mut impl StageCtx<Self::Event>) {}

    /// The stage below sent a notice. By default it passes up.
    fn notice(&mut self, notice: Notice, ctx: &mut impl StageCtx<Self::Event>) {
        ctx.notify_above(notice);
    }

    /// A stage below moves data through this one (see [`StageCtx::dma`]); `None` when this
    /// stage does not move data (the default), so the request goes further up.
    fn dma(&mut self, _t: Transfer) -> Option<Ns> {
        None
    }

    /// Withdraws `id` if the stage (or a stage below it) still holds it and has not finished
    /// it. Returns true when the request will come back through `complete` with status
    /// [`IoStatus::Aborted`](crate::IoStatus); false when it cannot be withdrawn (like most
    /// real devices once a command is under way). Nothing can be withdrawn by default.
    fn abort(&mut self, _id: ReqId, _ctx: &mut impl StageCtx<Self::Event>) -> bool {
        false
    }

    /// The controller above is being reset: forget every request this stage holds, and mark
    /// [`ReqFlags::ORPHAN`](crate::ReqFlags) those the stage below still works on (their
    /// completions will still come back; whoever receives an orphan frees it). The default
    /// keeps everything running.
    fn reset(&mut self, _ctx: &mut impl StageCtx<Self::Event>) {}

    /// An admin command from above: answer it if it is this stage's, else pass it down (the
    /// default).
    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<Self::Event>) {
        ctx.control_below(msg);
    }

    /// Read-only counters for the report (write amplification, GC runs, ...), as
    /// (name with unit, value). Kept apart from tunables on purpose.
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// Appends the writes power failures took from this stage so far, each failure's in issue
    /// order. Stages that lose nothing keep the default.
    fn collect_lost_writes(&self, _out: &mut Vec<LostWrite>) {}

    /// Appends the writes a power failure now would take from this stage, changing nothing: a
    /// crash image read in the middle of a run that goes on (`qoslab sim`'s crash views). A
    /// stage whose `PowerLoss` records lost writes must report here exactly what that would
    /// record, or return false: it cannot say without the cut, and a view is refused. Stages
    /// that lose nothing keep the default (nothing at risk).
    fn collect_writes_at_risk(&self, _reqs: &Requests, _out: &mut Vec<LostWrite>) -> bool {
        true
    }

    /// Appends what this stage knows of ordered writes at a power cut (the block layer's
    /// ordered streams, a target server's PMR). Stages without ordering state keep the default.
    fn collect_order_state(&self, _reqs: &Requests, _out: &mut crate::order::OrderState) {}

    /// Each stage's counters, top to bottom: this stage's alone unless it is a chain.
    fn reports(&self, out: &mut Vec<StageReport>) {
        out.push(StageReport {
            name: self.name().to_string(),
            counters: self.counters(),
        });
    }
}
