//! The framework's own test bench (fio's `null` engine plays this role for fio): any stage runs
//! alone, fed by an open-loop schedule (`submit_at`) or by a closed-loop driver that keeps a
//! queue depth (`run`), so that a model can be checked against a closed form without the rest
//! of the path. A stage that dispatches further down runs over [`Null`], the smallest device:
//! `Harness::new(Chain::new(stage, Null::new(delay_ns)))`.

use crate::chain::Chain;
use crate::control::{Control, Notice};
use crate::queue::EventQueue;
use crate::request::{IoStatus, Op, ReqId, Request, Requests};
use crate::stage::{Admission, Stage, StageCtx};
use crate::time::Ns;

/// The smallest device: completes every request `delay_ns` after it arrives, in arrival order,
/// with any number outstanding.
#[derive(Clone, Debug)]
pub struct Null {
    pub delay_ns: Ns,
    pub served: u64,
}

impl Null {
    pub fn new(delay_ns: Ns) -> Self {
        Null {
            delay_ns,
            served: 0,
        }
    }
}

impl Stage for Null {
    type Event = ReqId;

    fn name(&self) -> &'static str {
        "null"
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        let now = ctx.now_ns();
        let t = &mut ctx.reqs_mut()[id].t;
        t.media_start_ns = now;
        t.media_done_ns = now + self.delay_ns;
        if self.delay_ns == 0 {
            self.on_event(id, ctx);
        } else {
            ctx.schedule(now + self.delay_ns, id);
        }
    }

    fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        self.served += 1;
        ctx.complete(id);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![("ios".into(), self.served as f64)]
    }
}

/// A stage with a null device under it.
pub type OverNull<S> = Chain<S, Null>;

/// One completed request: what it was and when it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub id: ReqId,
    pub op: Op,
    pub done_ns: Ns,
    pub latency_ns: Ns,
    pub status: IoStatus,
}

/// Runs one stage alone.
pub struct Harness<S: Stage> {
    pub stage: S,
    pub reqs: Requests,
    queue: EventQueue<HarnessEvent<S::Event>>,
    /// (request, completion time), in completion order, for `submit_at` runs.
    pub completed: Vec<(ReqId, Ns)>,
    /// Notices the stage sent up, with their times.
    pub notices: Vec<(Notice, Ns)>,
    /// Times the stage said it had room again after a busy answer.
    pub room_calls: u64,
    /// Requests completed and not yet handed to a closed-loop driver.
    fresh: Vec<ReqId>,
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
    queue: &'a mut EventQueue<HarnessEvent<E>>,
    done: &'a mut Vec<(ReqId, Ns)>,
    fresh: &'a mut Vec<ReqId>,
    notices: &'a mut Vec<(Notice, Ns)>,
    room_calls: &'a mut u64,
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
    fn schedule_now(&mut self, ev: E) {
        self.queue.schedule_urgent(HarnessEvent::Stage(ev));
    }
    fn dispatch(&mut self, id: ReqId) -> Admission {
        panic!("a stage run alone has nothing below it, yet dispatched {id:?} (run it over Null)");
    }
    fn complete(&mut self, id: ReqId) {
        self.done.push((id, self.now_ns));
        self.fresh.push(id);
    }
    fn room_above(&mut self) {
        *self.room_calls += 1;
    }
    fn notify_above(&mut self, notice: Notice) {
        self.notices.push((notice, self.now_ns));
    }
}

macro_rules! ctx {
    ($h:expr, $now:expr) => {
        HarnessCtx {
            now_ns: $now,
            reqs: &mut $h.reqs,
            queue: &mut $h.queue,
            done: &mut $h.completed,
            fresh: &mut $h.fresh,
            notices: &mut $h.notices,
            room_calls: &mut $h.room_calls,
        }
    };
}

impl<S: Stage> Harness<S> {
    pub fn new(stage: S) -> Self {
        Harness {
            stage,
            reqs: Requests::new(),
            queue: EventQueue::new(),
            completed: Vec::new(),
            notices: Vec::new(),
            room_calls: 0,
            fresh: Vec::new(),
            started: false,
            now_ns: 0,
        }
    }

    fn ensure_started(&mut self) {
        if !self.started {
            self.started = true;
            let mut ctx = ctx!(self, 0);
            self.stage.start(&mut ctx);
            self.drain_urgent();
        }
    }

    fn drain_urgent(&mut self) {
        while let Some(ev) = self.queue.pop_urgent() {
            let now = self.now_ns;
            let mut ctx = ctx!(self, now);
            match ev {
                HarnessEvent::Submit(id) => self.stage.submit(id, &mut ctx),
                HarnessEvent::Stage(e) => self.stage.on_event(e, &mut ctx),
            }
        }
    }

    /// Handles the next timed event (and the hand-offs it makes); false when none is left.
    fn step_event(&mut self) -> bool {
        let Some((now_ns, ev)) = self.queue.pop() else {
            return false;
        };
        self.now_ns = now_ns;
        let mut ctx = ctx!(self, now_ns);
        match ev {
            HarnessEvent::Submit(id) => {
                if self.stage.admit(id, ctx.reqs) == Admission::Busy {
                    panic!("the stage refused {id:?} (busy) in an open-loop run");
                }
                self.stage.submit(id, &mut ctx)
            }
            HarnessEvent::Stage(e) => self.stage.on_event(e, &mut ctx),
        }
        self.drain_urgent();
        true
    }

    // ---- open loop: requests at chosen times -------------------------------------------------

    /// Schedules `req` to be submitted at `at_ns` and returns its id.
    pub fn submit_at(&mut self, at_ns: Ns, req: Request) -> ReqId {
        let id = self.reqs.alloc(req);
        self.queue.schedule(at_ns, HarnessEvent::Submit(id));
        id
    }

    /// Runs until no event is left, or until the first event after `until_ns`.
    pub fn run_until(&mut self, until_ns: Ns) {
        self.ensure_started();
        while let Some(t) = self.queue.peek_time_ns() {
            if t > until_ns {
                break;
            }
            self.step_event();
        }
        if until_ns != Ns::MAX {
            self.now_ns = self.now_ns.max(until_ns);
        }
    }

    /// Runs until no event is left.
    pub fn run_all(&mut self) {
        self.run_until(Ns::MAX);
    }

    /// Current simulated time: the last event's, or the `until_ns` of the last `run_until`.
    pub fn now_ns(&self) -> Ns {
        self.now_ns
    }

    /// Calls the stage's `reset` hook now.
    pub fn reset(&mut self) {
        self.ensure_started();
        let now = self.now_ns;
        let mut ctx = ctx!(self, now);
        self.stage.reset(&mut ctx);
        self.drain_urgent();
    }

    /// Sends the admin command `msg` to the stage now (its `control` hook) and returns it
    /// answered.
    pub fn control(&mut self, mut msg: Control) -> Control {
        self.ensure_started();
        msg.at_ns = self.now_ns;
        let now = self.now_ns;
        let mut ctx = ctx!(self, now);
        self.stage.control(&mut msg, &mut ctx);
        self.drain_urgent();
        msg
    }

    /// Calls the stage's `abort` hook for `id` now.
    pub fn abort(&mut self, id: ReqId) -> bool {
        self.ensure_started();
        let now = self.now_ns;
        let mut ctx = ctx!(self, now);
        let done = self.stage.abort(id, &mut ctx);
        self.drain_urgent();
        done
    }

    // ---- closed loop: a driver that keeps a queue depth ------------------------------------

    /// Offers `req` to the stage now; `None` when the stage answered busy (the request is
    /// dropped).
    pub fn submit(&mut self, req: Request) -> Option<ReqId> {
        self.ensure_started();
        let id = self.reqs.alloc(req);
        if self.stage.admit(id, &mut self.reqs) == Admission::Busy {
            self.reqs.free(id);
            return None;
        }
        let now = self.now_ns;
        let mut ctx = ctx!(self, now);
        self.stage.submit(id, &mut ctx);
        self.drain_urgent();
        Some(id)
    }

    /// Offers `reqs` now in one go, as one submission call does (what the stage schedules on
    /// the urgent lane runs after the last); returns their ids, `None` where the stage was
    /// busy.
    pub fn submit_batch(&mut self, reqs: impl IntoIterator<Item = Request>) -> Vec<Option<ReqId>> {
        self.ensure_started();
        let mut out = Vec::new();
        for req in reqs {
            let id = self.reqs.alloc(req);
            if self.stage.admit(id, &mut self.reqs) == Admission::Busy {
                self.reqs.free(id);
                out.push(None);
                continue;
            }
            let now = self.now_ns;
            let mut ctx = ctx!(self, now);
            self.stage.submit(id, &mut ctx);
            out.push(Some(id));
        }
        self.drain_urgent();
        out
    }

    /// Runs events until a request completes or nothing is left; appends the completions
    /// (freeing their requests) and returns whether any event was left to run.
    pub fn step(&mut self, out: &mut Vec<Done>) -> bool {
        self.ensure_started();
        while self.fresh.is_empty() {
            if !self.step_event() {
                return false;
            }
        }
        let now = self.now_ns;
        for id in self.fresh.drain(..) {
            let r = self.reqs[id];
            out.push(Done {
                id,
                op: r.op,
                done_ns: now,
                latency_ns: now - r.t.queued_ns,
                status: r.status,
            });
            self.reqs.free(id);
        }
        true
    }

    /// Keeps `depth` requests from `next(now)` outstanding until `total` completed; returns the
    /// completions in order.
    ///
    /// # Panics
    /// When the stage stalls with requests outstanding or refuses one.
    pub fn run(
        &mut self,
        depth: usize,
        total: usize,
        mut next: impl FnMut(Ns) -> Request,
    ) -> Vec<Done> {
        let mut out = Vec::with_capacity(total);
        let first = depth.min(total);
        for _ in 0..first {
            let now = self.now_ns;
            self.submit(next(now)).expect("the stage refused a request");
        }
        let mut issued = first;
        while out.len() < total {
            let before = out.len();
            assert!(
                self.step(&mut out),
                "the stage stalled with requests outstanding"
            );
            for _ in before..out.len() {
                if issued < total {
                    let now = self.now_ns;
                    self.submit(next(now)).expect("the stage refused a request");
                    issued += 1;
                }
            }
        }
        out
    }

    /// Runs every pending event (a device drains its background work); returns what completed.
    pub fn settle(&mut self) -> Vec<Done> {
        let mut out = Vec::new();
        while self.step(&mut out) {}
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest stage: completes every request a fixed delay after it arrives.
    struct FixedDelay {
        delay_ns: Ns,
    }

    impl Stage for FixedDelay {
        type Event = ReqId;
        fn name(&self) -> &'static str {
            "fixed-delay"
        }
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
        h.run_all();
        assert_eq!(h.completed, vec![(b, 105), (a, 110)]);
    }

    #[test]
    fn a_closed_loop_at_depth_d_over_a_fixed_delay_completes_d_per_delay() {
        let mut h = Harness::new(Null::new(1000));
        let done = h.run(4, 400, |now| Request::new(Op::Read, 0, 4096, 0, now));
        assert_eq!(done.len(), 400);
        assert!(done.iter().all(|d| d.latency_ns == 1000));
        // 100 rounds of 4: the last finishes at 100 delays.
        assert_eq!(done.last().unwrap().done_ns, 100_000);
        assert_eq!(h.stage.served, 400);
    }

    /// A stage that holds what it is given until told to let go, to see hand-offs in order.
    struct PassDown;
    impl Stage for PassDown {
        type Event = ();
        fn name(&self) -> &'static str {
            "pass-down"
        }
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
            assert_eq!(ctx.dispatch(id), Admission::Accepted);
        }
        fn on_event(&mut self, _: (), _: &mut impl StageCtx<()>) {}
    }

    #[test]
    fn a_chain_passes_requests_down_and_completions_up_at_the_same_instant() {
        let mut h = Harness::new(Chain::new(PassDown, Null::new(0)));
        let a = h.submit_at(7, Request::new(Op::Read, 0, 4096, 0, 7));
        let b = h.submit_at(7, Request::new(Op::Read, 4096, 4096, 0, 7));
        h.run_all();
        assert_eq!(h.completed, vec![(a, 7), (b, 7)]);
        let mut reports = Vec::new();
        h.stage.reports(&mut reports);
        let names: Vec<_> = reports.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["pass-down", "null"]);
    }

    /// A stage that breaks its word: it says its completions may run at once, then dispatches
    /// from `complete`, which would reach the stage below while that stage's hook runs.
    struct Refill;
    impl Stage for Refill {
        type Event = ();
        const COMPLETES_AT_ONCE: bool = true;
        fn name(&self) -> &'static str {
            "refill"
        }
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
            assert_eq!(ctx.dispatch(id), Admission::Accepted);
        }
        fn on_event(&mut self, _: (), _: &mut impl StageCtx<()>) {}
        fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
            let _ = ctx.dispatch(id);
        }
    }

    #[test]
    #[should_panic(expected = "COMPLETES_AT_ONCE) called dispatch while completing")]
    fn a_stage_completing_at_once_may_not_call_down() {
        let mut h = Harness::new(Chain::new(Refill, Null::new(10)));
        h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        h.run_all();
    }
}
