//! Stages of the I/O path and the hooks the simulator calls on them.
//!
//! A stage (a scheduler, the NVMe driver and controller, a device) is one implementation of
//! [`Stage`], in the spirit of Linux's `elevator_mq_ops` and fio's `ioengine_ops`: a few hooks
//! over the shared [`Request`](crate::Request) type, most with defaults. A stage never calls
//! another stage; it talks to the path through its [`StageCtx`]: schedule its own events, hand
//! a request to the next stage down, report a request complete to the stage above. The
//! simulator (`crates/sim`) wires stages into a path and routes those calls.
//!
//! Methods take `&mut impl StageCtx<_>` so that the simulator's context is a concrete type and
//! every hook call is statically dispatched on the hot path.

use std::fmt::Debug;

use crate::request::{ReqId, Requests};
use crate::time::Ns;

/// Version of the stage contract. Bumped when a hook's meaning changes; a registry can refuse a
/// stage built against another version.
pub const STAGE_API_VERSION: u32 = 1;

/// What a stage may do while one of its hooks runs.
///
/// `dispatch` and `complete` take effect at the current time, after the running hook returns,
/// in the order they were called.
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
    /// Hands `id` to the next stage down the path.
    fn dispatch(&mut self, id: ReqId);
    /// Reports `id` complete to the stage above (the one that submitted it).
    fn complete(&mut self, id: ReqId);
    /// Asks the stage below to withdraw `id` (its `abort` hook, called at once); whether it did.
    fn abort_below(&mut self, _id: ReqId) -> bool {
        false
    }
    /// Resets the stage below (its `reset` hook, called at once).
    fn reset_below(&mut self) {}
}

/// One stage of the simulated I/O path.
pub trait Stage {
    /// The stage's own timed events (a server finishing, a timer firing). Kept small and `Copy`:
    /// they sit in the event heap.
    type Event: Copy + Debug;

    /// Called once at time 0 before any request (e.g. to schedule a power failure).
    fn start(&mut self, _ctx: &mut impl StageCtx<Self::Event>) {}

    /// The stage above hands over request `id`.
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>);

    /// An event this stage scheduled is due.
    fn on_event(&mut self, ev: Self::Event, ctx: &mut impl StageCtx<Self::Event>);

    /// The stage below finished request `id` that this stage dispatched. By default the
    /// completion passes straight up.
    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        ctx.complete(id);
    }

    /// Withdraws `id` if the stage still holds it and has not started it. Returns whether it
    /// did; a withdrawn request is not completed by this stage. By default nothing can be
    /// withdrawn (like most real controllers once a command is fetched).
    fn abort(&mut self, _id: ReqId, _ctx: &mut impl StageCtx<Self::Event>) -> bool {
        false
    }

    /// The controller is being reset: the caller cancels every request the stage holds and
    /// drops their completions. Each of them must still come back through `ctx.complete`, at
    /// once (status [`IoStatus::Aborted`](crate::IoStatus)) for work not started, or when work
    /// already started ends, so that the caller can free it. The default keeps everything
    /// running, which satisfies that.
    fn reset(&mut self, _ctx: &mut impl StageCtx<Self::Event>) {}

    /// Read-only counters for the report (write amplification, GC runs, ...), as
    /// (name with unit, value). Kept apart from tunables on purpose.
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// Runs one stage alone: requests are submitted at chosen times and completions recorded.
///
/// This is the framework's own test bench (fio's `null` engine plays this role for fio): a
/// device model can be checked against a closed form without the NVMe path around it.
pub struct Harness<S: Stage> {
    pub stage: S,
    pub reqs: Requests,
    queue: crate::EventQueue<HarnessEvent<S::Event>>,
    /// (request, completion time), in completion order.
    pub completed: Vec<(ReqId, Ns)>,
    started: bool,
    now_ns: Ns,
}

#[derive(Clone, Copy, Debug)]
enum HarnessEvent<E> {
    Submit(ReqId),
    Stage(E),
}

struct HarnessCtx<'a, E> {
    now_ns: Ns,
    reqs: &'a mut Requests,
    queue: &'a mut crate::EventQueue<HarnessEvent<E>>,
    done: &'a mut Vec<(ReqId, Ns)>,
}

impl<E: Copy> StageCtx<E> for HarnessCtx<'_, E> {
    fn now_ns(&self) -> Ns {
        self.now_ns
    }
    fn reqs(&self) -> &Requests {
        self.reqs
    }
    fn reqs_mut(&mut self) -> &mut Requests {
        self.reqs
    }
    fn schedule(&mut self, at_ns: Ns, ev: E) {
        self.queue.schedule(at_ns, HarnessEvent::Stage(ev));
    }
    fn dispatch(&mut self, id: ReqId) {
        panic!("a stage run alone has nothing below it, yet dispatched {id:?}");
    }
    fn complete(&mut self, id: ReqId) {
        self.done.push((id, self.now_ns));
    }
}

impl<S: Stage> Harness<S> {
    pub fn new(stage: S) -> Self {
        Harness {
            stage,
            reqs: Requests::new(),
            queue: crate::EventQueue::new(),
            completed: Vec::new(),
            started: false,
            now_ns: 0,
        }
    }

    /// Schedules `req` to be submitted at `at_ns` and returns its id.
    pub fn submit_at(&mut self, at_ns: Ns, req: crate::Request) -> ReqId {
        let id = self.reqs.alloc(req);
        self.queue.schedule(at_ns, HarnessEvent::Submit(id));
        id
    }

    fn ensure_started(&mut self) {
        if !self.started {
            self.started = true;
            let mut ctx = HarnessCtx {
                now_ns: 0,
                reqs: &mut self.reqs,
                queue: &mut self.queue,
                done: &mut self.completed,
            };
            self.stage.start(&mut ctx);
        }
    }

    /// Runs until no event is left, or until the first event after `until_ns`.
    pub fn run_until(&mut self, until_ns: Ns) {
        self.ensure_started();
        while let Some(t) = self.queue.peek_time_ns() {
            if t > until_ns {
                break;
            }
            let (now_ns, ev) = self.queue.pop().expect("peeked");
            self.now_ns = now_ns;
            let mut ctx = HarnessCtx {
                now_ns,
                reqs: &mut self.reqs,
                queue: &mut self.queue,
                done: &mut self.completed,
            };
            match ev {
                HarnessEvent::Submit(id) => self.stage.submit(id, &mut ctx),
                HarnessEvent::Stage(e) => self.stage.on_event(e, &mut ctx),
            }
        }
        if until_ns != Ns::MAX {
            self.now_ns = self.now_ns.max(until_ns);
        }
    }

    /// Runs until no event is left.
    pub fn run(&mut self) {
        self.run_until(Ns::MAX);
    }

    /// Current simulated time: the last event's, or the `until_ns` of the last `run_until`.
    pub fn now_ns(&self) -> Ns {
        self.now_ns
    }

    /// Calls the stage's `reset` hook now.
    pub fn reset(&mut self) {
        self.ensure_started();
        let mut ctx = HarnessCtx {
            now_ns: self.now_ns,
            reqs: &mut self.reqs,
            queue: &mut self.queue,
            done: &mut self.completed,
        };
        self.stage.reset(&mut ctx);
    }

    /// Calls the stage's `abort` hook for `id` now.
    pub fn abort(&mut self, id: ReqId) -> bool {
        self.ensure_started();
        let mut ctx = HarnessCtx {
            now_ns: self.now_ns,
            reqs: &mut self.reqs,
            queue: &mut self.queue,
            done: &mut self.completed,
        };
        self.stage.abort(id, &mut ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Op, Request};

    /// The smallest stage: completes every request a fixed delay after it arrives.
    struct FixedDelay {
        delay_ns: Ns,
    }

    impl Stage for FixedDelay {
        type Event = ReqId;
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
            let at = ctx.now_ns() + self.delay_ns;
            ctx.schedule(at, id);
        }
        fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
            ctx.complete(id);
        }
    }

    #[test]
    fn a_fixed_delay_stage_completes_each_request_after_its_delay() {
        let mut h = Harness::new(FixedDelay { delay_ns: 100 });
        let a = h.submit_at(10, Request::new(Op::Read, 0, 4096, 0, 10));
        let b = h.submit_at(5, Request::new(Op::Write, 0, 4096, 0, 5));
        h.run();
        assert_eq!(h.completed, vec![(b, 105), (a, 110)]);
    }
}
