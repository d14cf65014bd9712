//! A path is a chain of stages: [`Chain<Upper, Lower>`] joins two stages into one, and a longer
//! path nests chains (`Chain<Block, Chain<Host, Chain<Transport, Chain<Controller, Device>>>>`).
//! Every hook call stays statically dispatched.
//!
//! The chain routes what its two stages do (see [`crate::stage`] for the contract):
//! - the upper stage's `dispatch` asks the lower stage's `admit` at once and, when accepted,
//!   puts the lower stage's `submit` on the urgent lane;
//! - the lower stage's `complete`, `room_above` and `notify_above` reach the upper stage's
//!   `complete`, `pull` and `notice` through the urgent lane (`complete` at once when the upper
//!   stage says it may: `COMPLETES_AT_ONCE`);
//! - the upper stage's `abort_below`, `reset_below` and `control_below` call the lower stage's
//!   hooks at once; the lower stage's `dma` asks the upper stage first;
//! - everything else leaves the chain through the chain's own context, so a chain inside a
//!   chain behaves as one stage.

use crate::control::{Control, LostWrite, Notice, Transfer};
use crate::request::{ReqId, Requests};
use crate::stage::{Admission, Stage, StageCtx, StageReport};
use crate::time::Ns;

/// Two stages, `upper` above `lower`, as one stage.
pub struct Chain<U, L> {
    pub upper: U,
    pub lower: L,
}

impl<U, L> Chain<U, L> {
    pub fn new(upper: U, lower: L) -> Self {
        Chain { upper, lower }
    }
}

/// The events of a chain: each stage's own, and the hand-offs between them waiting in the
/// urgent lane.
// Speed: three variants, not six. Every event passes one `Link` per level of the chain, and
// LLVM turns a match of four or more variants into a jump table: an indirect jump per level
// that the CPU's predictor often misses, since the next event's stage varies from I/O to I/O.
// Three variants compile to two compares; the hand-offs' own match runs only for them.
#[derive(Clone, Copy, Debug)]
pub enum Link<UE, LE> {
    Upper(UE),
    Lower(LE),
    Handoff(Handoff),
}

/// A hand-off between the two stages of a chain.
#[derive(Clone, Copy, Debug)]
pub enum Handoff {
    /// The upper stage dispatched `id` and the lower stage accepted it.
    Submit(ReqId),
    /// The lower stage completed `id`.
    Complete(ReqId),
    /// The lower stage has room again.
    Pull,
    /// The lower stage sent a notice up.
    Notice(Notice),
}

/// The hooks of a context nested in a composite stage (a chain's two stages, a fan-out's
/// children) that go straight to the context around it (`self.outer`): time, the requests, a
/// core's time, and the stage's own events, scheduled wrapped as the composite's
/// (`|self, ev| WRAP`).
macro_rules! nested_ctx_hooks {
    ($event:ty, |$this:ident, $ev:ident| $wrap:expr) => {
        #[inline(always)]
        fn now_ns(&self) -> Ns {
            self.outer.now_ns()
        }
        #[inline(always)]
        fn reqs(&self) -> &Requests {
            self.outer.reqs()
        }
        #[inline(always)]
        fn reqs_mut(&mut self) -> &mut Requests {
            self.outer.reqs_mut()
        }
        #[inline(always)]
        fn schedule(&mut $this, at_ns: Ns, $ev: $event) {
            let wrapped = $wrap;
            $this.outer.schedule(at_ns, wrapped);
        }
        #[inline(always)]
        fn schedule_now(&mut $this, $ev: $event) {
            let wrapped = $wrap;
            $this.outer.schedule_now(wrapped);
        }
        #[inline(always)]
        fn cpu(&mut self, host: u16, core: u16, start_ns: Ns, ns: Ns) -> Ns {
            self.outer.cpu(host, core, start_ns, ns)
        }
    };
}
pub(crate) use nested_ctx_hooks;

/// The context of the upper stage `U` inside a chain. `lower` is absent while a hook of the
/// lower stage runs (a completion taken at once, `COMPLETES_AT_ONCE`): nothing reaches it then.
struct UpperCtx<'a, C, U, L> {
    outer: &'a mut C,
    lower: Option<&'a mut L>,
    upper: std::marker::PhantomData<fn(U)>,
}

impl<C, U, L> UpperCtx<'_, C, U, L> {
    /// The lower stage, and its context for a call from the upper stage (`call`, for the
    /// panic when the lower stage is busy).
    #[inline(always)]
    fn below(&mut self, call: &str) -> (&mut L, LowerCtx<'_, C, U, L>) {
        let Some(lower) = self.lower.as_deref_mut() else {
            lower_busy(call)
        };
        let ctx = LowerCtx {
            outer: &mut *self.outer,
            upper: None,
            lower: std::marker::PhantomData,
        };
        (lower, ctx)
    }
}

#[cold]
fn lower_busy(call: &str) -> ! {
    panic!(
        "a stage whose completions run at once (COMPLETES_AT_ONCE) called {call} while completing"
    )
}

impl<U, L, C> StageCtx<U::Event> for UpperCtx<'_, C, U, L>
where
    U: Stage,
    L: Stage,
    C: StageCtx<Link<U::Event, L::Event>>,
{
    nested_ctx_hooks!(U::Event, |self, ev| Link::Upper(ev));
    #[inline(always)]
    fn dispatch(&mut self, id: ReqId) -> Admission {
        let (lower, mut ctx) = self.below("dispatch");
        let a = lower.admit(id, ctx.outer.reqs_mut());
        if a == Admission::Accepted {
            if L::SUBMITS_AT_ONCE {
                lower.submit(id, &mut ctx);
            } else {
                ctx.outer.schedule_now(Link::Handoff(Handoff::Submit(id)));
            }
        }
        a
    }

    #[inline(always)]
    fn complete(&mut self, id: ReqId) {
        self.outer.complete(id);
    }
    #[inline(always)]
    fn room_above(&mut self) {
        self.outer.room_above();
    }
    #[inline(always)]
    fn notify_above(&mut self, notice: Notice) {
        self.outer.notify_above(notice);
    }
    fn abort_below(&mut self, id: ReqId) -> bool {
        let (lower, mut ctx) = self.below("abort_below");
        lower.abort(id, &mut ctx)
    }
    fn reset_below(&mut self) {
        let (lower, mut ctx) = self.below("reset_below");
        lower.reset(&mut ctx);
    }
    fn control_below(&mut self, msg: &mut Control) {
        let (lower, mut ctx) = self.below("control_below");
        lower.control(msg, &mut ctx);
    }
    #[inline(always)]
    fn dma(&mut self, t: Transfer) -> Ns {
        self.outer.dma(t)
    }
}

/// The context of the lower stage inside a chain whose upper stage is `U`. `upper` is absent
/// while the upper stage itself is running (a synchronous call down from it); a `dma` then
/// goes past it.
struct LowerCtx<'a, C, U, L> {
    outer: &'a mut C,
    upper: Option<&'a mut U>,
    lower: std::marker::PhantomData<fn(L)>,
}

impl<U, L, C> StageCtx<L::Event> for LowerCtx<'_, C, U, L>
where
    U: Stage,
    L: Stage,
    C: StageCtx<Link<U::Event, L::Event>>,
{
    nested_ctx_hooks!(L::Event, |self, ev| Link::Lower(ev));
    #[inline(always)]
    fn dispatch(&mut self, id: ReqId) -> Admission {
        self.outer.dispatch(id)
    }
    #[inline(always)]
    fn complete(&mut self, id: ReqId) {
        if U::FORWARDS_UP {
            self.outer.complete(id);
        } else if let Some(up) = self.upper.as_deref_mut()
            && (U::COMPLETES_AT_ONCE || up.completes_at_once_now())
        {
            let mut ctx = UpperCtx::<C, U, L> {
                outer: &mut *self.outer,
                lower: None,
                upper: std::marker::PhantomData,
            };
            up.complete(id, &mut ctx);
        } else {
            self.outer
                .schedule_now(Link::Handoff(Handoff::Complete(id)));
        }
    }
    #[inline(always)]
    fn room_above(&mut self) {
        self.outer.schedule_now(Link::Handoff(Handoff::Pull));
    }
    #[inline(always)]
    fn notify_above(&mut self, notice: Notice) {
        if U::FORWARDS_UP {
            self.outer.notify_above(notice);
        } else {
            self.outer
                .schedule_now(Link::Handoff(Handoff::Notice(notice)));
        }
    }
    fn abort_below(&mut self, id: ReqId) -> bool {
        self.outer.abort_below(id)
    }
    fn reset_below(&mut self) {
        self.outer.reset_below();
    }
    fn control_below(&mut self, msg: &mut Control) {
        self.outer.control_below(msg);
    }
    #[inline(always)]
    fn dma(&mut self, t: Transfer) -> Ns {
        if let Some(up) = self.upper.as_deref_mut()
            && let Some(done) = up.dma(t)
        {
            return done;
        }
        self.outer.dma(t)
    }
}

impl<U: Stage, L: Stage> Chain<U, L> {
    #[inline(always)]
    fn with_upper<C: StageCtx<Link<U::Event, L::Event>>>(
        &mut self,
        outer: &mut C,
        f: impl FnOnce(&mut U, &mut UpperCtx<'_, C, U, L>),
    ) {
        let mut ctx = UpperCtx {
            outer,
            lower: Some(&mut self.lower),
            upper: std::marker::PhantomData,
        };
        f(&mut self.upper, &mut ctx);
    }

    #[inline(always)]
    fn hand_off<C: StageCtx<Link<U::Event, L::Event>>>(&mut self, h: Handoff, ctx: &mut C) {
        match h {
            Handoff::Submit(id) => self.with_lower(ctx, |l, c| l.submit(id, c)),
            Handoff::Complete(id) => self.with_upper(ctx, |u, c| u.complete(id, c)),
            Handoff::Pull => self.with_upper(ctx, |u, c| u.pull(c)),
            Handoff::Notice(n) => self.with_upper(ctx, |u, c| u.notice(n, c)),
        }
    }

    #[inline(always)]
    fn with_lower<C: StageCtx<Link<U::Event, L::Event>>>(
        &mut self,
        outer: &mut C,
        f: impl FnOnce(&mut L, &mut LowerCtx<'_, C, U, L>),
    ) {
        let mut ctx = LowerCtx {
            outer,
            upper: Some(&mut self.upper),
            lower: std::marker::PhantomData,
        };
        f(&mut self.lower, &mut ctx);
    }
}

impl<U: Stage, L: Stage> Stage for Chain<U, L> {
    type Event = Link<U::Event, L::Event>;

    const FORWARDS_UP: bool = U::FORWARDS_UP && L::FORWARDS_UP;
    const SUBMITS_AT_ONCE: bool = if U::PASSES_DOWN {
        L::SUBMITS_AT_ONCE
    } else {
        U::SUBMITS_AT_ONCE
    };
    const PASSES_DOWN: bool = U::PASSES_DOWN && L::PASSES_DOWN;
    /// A completion from below enters through the lower stage.
    const COMPLETES_AT_ONCE: bool = L::COMPLETES_AT_ONCE;

    fn completes_at_once_now(&self) -> bool {
        self.lower.completes_at_once_now()
    }

    fn name(&self) -> &'static str {
        self.upper.name()
    }

    fn start(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        self.with_upper(ctx, |u, c| u.start(c));
        self.with_lower(ctx, |l, c| l.start(c));
    }

    /// A request enters through the upper stage; past one that only passes requests down, the
    /// lower stage admits it too.
    #[inline(always)]
    fn admit(&mut self, id: ReqId, reqs: &mut Requests) -> Admission {
        match self.upper.admit(id, reqs) {
            Admission::Accepted if U::PASSES_DOWN => self.lower.admit(id, reqs),
            a => a,
        }
    }

    #[inline(always)]
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        if U::PASSES_DOWN {
            self.with_lower(ctx, |l, c| l.submit(id, c));
        } else {
            self.with_upper(ctx, |u, c| u.submit(id, c));
        }
    }

    #[inline(always)]
    fn on_event(&mut self, ev: Self::Event, ctx: &mut impl StageCtx<Self::Event>) {
        match ev {
            Link::Lower(e) => self.with_lower(ctx, |l, c| l.on_event(e, c)),
            Link::Upper(e) => self.with_upper(ctx, |u, c| u.on_event(e, c)),
            Link::Handoff(h) => self.hand_off(h, ctx),
        }
    }

    #[inline(always)]
    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        self.with_lower(ctx, |l, c| l.complete(id, c));
    }

    fn pull(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        self.with_lower(ctx, |l, c| l.pull(c));
    }

    fn notice(&mut self, notice: Notice, ctx: &mut impl StageCtx<Self::Event>) {
        self.with_lower(ctx, |l, c| l.notice(notice, c));
    }

    fn dma(&mut self, t: Transfer) -> Option<Ns> {
        self.lower.dma(t).or_else(|| self.upper.dma(t))
    }

    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) -> bool {
        let mut done = false;
        self.with_upper(ctx, |u, c| done = u.abort(id, c));
        done
    }

    fn reset(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        self.with_upper(ctx, |u, c| u.reset(c));
    }

    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<Self::Event>) {
        self.with_upper(ctx, |u, c| u.control(msg, c));
    }

    fn collect_lost_writes(&self, out: &mut Vec<LostWrite>) {
        self.upper.collect_lost_writes(out);
        self.lower.collect_lost_writes(out);
    }

    fn collect_writes_at_risk(&self, reqs: &Requests, out: &mut Vec<LostWrite>) -> bool {
        // Both halves, even when the first cannot say: the answer is all of them or a refusal.
        let upper = self.upper.collect_writes_at_risk(reqs, out);
        self.lower.collect_writes_at_risk(reqs, out) && upper
    }

    fn collect_order_state(&self, reqs: &Requests, out: &mut crate::order::OrderState) {
        self.upper.collect_order_state(reqs, out);
        self.lower.collect_order_state(reqs, out);
    }

    fn reports(&self, out: &mut Vec<StageReport>) {
        self.upper.reports(out);
        self.lower.reports(out);
    }
}
