//! One stage over several lower paths: [`Fanout<L>`] routes each request to one of its children
//! (target servers, the drives of a striped volume) by a stripe rule, as Linux's dm-stripe
//! maps a bio to one of its devices. It is modelled on [`Chain`](crate::Chain): the children
//! are whole paths below, every hook stays statically dispatched, and a child's events travel
//! tagged with its index.
//!
//! - **Routing** ([`Stripe`]): the address space is cut in units of `chunk_bytes`, dealt round
//!   robin over the children; a request goes to the child of its first byte and must not cross
//!   a unit (the block layer splits and merges within units: its `chunk_bytes` limit, Linux's
//!   `chunk_sectors`).
//! - **FLUSH**: a flush with no ordering flag is for every child (dm-stripe clones
//!   REQ_PREFLUSH to each device): the fan-out sends one to each and completes the request when
//!   the last is done. An ordered flush (`ReqFlags::ORDERED`) is for the child of its offset:
//!   the ordering plug-ins address each target they wrote.
//! - **Admin commands** (`control`): a power loss goes to every child; an ordering message to
//!   the child it names; anything else to every child in turn until one answers.
//! - **Back-pressure**: a child that says busy keeps its word as in a chain; when it has room
//!   again the stage above is told, and offers what it held.

use crate::chain::nested_ctx_hooks;
use crate::control::{Command, Control, ControlStatus, LostWrite, Notice, Transfer};
use crate::request::{IoStatus, Op, ReqFlags, ReqId, ReqTable, Requests};
use crate::stage::{Admission, Stage, StageCtx, StageReport};
use crate::time::Ns;

/// How addresses map to children: units of `chunk_bytes`, round robin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripe {
    pub chunk_bytes: u64,
    pub children: u16,
}

impl Stripe {
    /// The child holding byte `offset`.
    #[inline]
    pub fn child_of(&self, offset: u64) -> usize {
        if self.children <= 1 {
            return 0;
        }
        ((offset / self.chunk_bytes) % u64::from(self.children)) as usize
    }

    /// A byte of child `child`'s first unit (where an ordered FLUSH for it points).
    pub fn offset_of(&self, child: usize) -> u64 {
        child as u64 * self.chunk_bytes
    }
}

/// A child's event, tagged with the child.
#[derive(Clone, Copy, Debug)]
pub struct FanoutEvent<E> {
    pub child: u16,
    pub ev: E,
}

/// What the fan-out keeps of a request it cloned (a FLUSH for every child).
#[derive(Clone, Copy, Debug, Default)]
struct Clone_ {
    /// On a clone: the request it was cloned from.
    parent: ReqId,
    /// On the parent: clones still outstanding.
    left: u16,
}

/// `children` lower paths as one stage.
pub struct Fanout<L> {
    children: Vec<L>,
    stripe: Stripe,
    clones: ReqTable<Clone_>,
    /// Clones a busy child refused: (child, clone), sent when it has room again.
    // The one list of requests held below a busy answer: a FLUSH was accepted for every child
    // at once, and a child that was full takes its copy later.
    waiting: Vec<(u16, ReqId)>,
    /// Copies of the FLUSH `admit` just accepted: (child, copy, admitted), sent by `submit`.
    fresh: Vec<(u16, ReqId, bool)>,
    cloned_flushes: u64,
}

impl<L> Fanout<L> {
    /// One child per unit of the round robin, `chunk_bytes` each.
    pub fn new(children: Vec<L>, chunk_bytes: u64) -> Self {
        assert!(!children.is_empty(), "a fan-out needs a child");
        assert!(chunk_bytes > 0, "a stripe unit of 0 bytes");
        let n = u16::try_from(children.len()).expect("at most 65535 children");
        Fanout {
            children,
            stripe: Stripe {
                chunk_bytes,
                children: n,
            },
            clones: ReqTable::new(),
            waiting: Vec::new(),
            fresh: Vec::new(),
            cloned_flushes: 0,
        }
    }

    pub fn stripe(&self) -> Stripe {
        self.stripe
    }

    pub fn children(&self) -> &[L] {
        &self.children
    }

    pub fn children_mut(&mut self) -> &mut [L] {
        &mut self.children
    }

    /// Whether `req` goes to every child (a flush that is not one ordered write's).
    #[inline]
    fn broadcast(req: &crate::Request) -> bool {
        req.op == Op::Flush && !req.flags.contains(ReqFlags::ORDERED) && req.len_bytes == 0
    }
}

/// The context of child `child` inside the fan-out.
struct ChildCtx<'a, C> {
    outer: &'a mut C,
    child: u16,
    clones: &'a mut ReqTable<Clone_>,
}

impl<E, C> StageCtx<E> for ChildCtx<'_, C>
where
    E: Copy,
    C: StageCtx<FanoutEvent<E>>,
{
    nested_ctx_hooks!(E, |self, ev| FanoutEvent {
        child: self.child,
        ev
    });
    fn dispatch(&mut self, id: ReqId) -> Admission {
        self.outer.dispatch(id)
    }
    #[inline(always)]
    fn complete(&mut self, id: ReqId) {
        let parent = self.clones.entry(id).parent;
        if parent.is_none() {
            self.outer.complete(id);
            return;
        }
        // One child's copy of a FLUSH for every child.
        *self.clones.entry(id) = Clone_::default();
        let status = self.outer.reqs()[id].status;
        let t = self.outer.reqs()[id].t;
        self.outer.reqs_mut().free(id);
        let p = &mut self.outer.reqs_mut()[parent];
        if status != IoStatus::Ok {
            p.status = status;
        }
        p.t.media_start_ns = p.t.media_start_ns.max(t.media_start_ns);
        p.t.media_done_ns = p.t.media_done_ns.max(t.media_done_ns);
        p.t.cq_posted_ns = p.t.cq_posted_ns.max(t.cq_posted_ns);
        p.t.interrupt_ns = p.t.interrupt_ns.max(t.interrupt_ns);
        let left = &mut self.clones.entry(parent).left;
        *left -= 1;
        if *left == 0 {
            self.outer.complete(parent);
        }
    }
    fn room_above(&mut self) {
        self.outer.room_above();
    }
    fn notify_above(&mut self, notice: Notice) {
        self.outer.notify_above(notice);
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
        self.outer.dma(t)
    }
}

impl<L: Stage> Fanout<L> {
    #[inline(always)]
    fn with_child<C: StageCtx<FanoutEvent<L::Event>>, R>(
        &mut self,
        child: usize,
        outer: &mut C,
        f: impl FnOnce(&mut L, &mut ChildCtx<'_, C>) -> R,
    ) -> R {
        let mut ctx = ChildCtx {
            outer,
            child: child as u16,
            clones: &mut self.clones,
        };
        f(&mut self.children[child], &mut ctx)
    }

    /// Sends the clones that waited for room, in the order they waited.
    fn send_waiting<C: StageCtx<FanoutEvent<L::Event>>>(&mut self, ctx: &mut C) {
        let waiting = std::mem::take(&mut self.waiting);
        for (child, clone) in waiting {
            let c = child as usize;
            if self.children[c].admit(clone, ctx.reqs_mut()) == Admission::Busy {
                self.waiting.push((child, clone));
            } else {
                self.with_child(c, ctx, |l, cx| l.submit(clone, cx));
            }
        }
    }
}

impl<L: Stage> Stage for Fanout<L> {
    type Event = FanoutEvent<L::Event>;

    const SUBMITS_AT_ONCE: bool = L::SUBMITS_AT_ONCE;

    fn name(&self) -> &'static str {
        "fanout"
    }

    fn start(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        for c in 0..self.children.len() {
            self.with_child(c, ctx, |l, cx| l.start(cx));
        }
    }

    /// The child of the request's first byte admits it; a FLUSH for every child is accepted,
    /// each child taking its copy now or once it has room.
    fn admit(&mut self, id: ReqId, reqs: &mut Requests) -> Admission {
        let req = reqs[id];
        if !Self::broadcast(&req) {
            let c = self.stripe.child_of(req.offset_bytes);
            return self.children[c].admit(id, reqs);
        }
        let n = self.children.len() as u16;
        self.clones.entry(id).left = n;
        self.cloned_flushes += 1;
        for c in 0..n {
            let clone = reqs.alloc(req);
            *self.clones.entry(clone) = Clone_ {
                parent: id,
                left: 0,
            };
            let admitted = self.children[c as usize].admit(clone, reqs) == Admission::Accepted;
            self.fresh.push((c, clone, admitted));
        }
        Admission::Accepted
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) {
        if self.clones.entry(id).left == 0 {
            let c = self.stripe.child_of(ctx.reqs()[id].offset_bytes);
            self.with_child(c, ctx, |l, cx| l.submit(id, cx));
            return;
        }
        // The copies `admit` made: those accepted go now, the others wait for room.
        for (c, clone, admitted) in std::mem::take(&mut self.fresh) {
            if admitted {
                self.with_child(c as usize, ctx, |l, cx| l.submit(clone, cx));
            } else {
                self.waiting.push((c, clone));
            }
        }
    }

    #[inline(always)]
    fn on_event(&mut self, ev: Self::Event, ctx: &mut impl StageCtx<Self::Event>) {
        let FanoutEvent { child, ev } = ev;
        self.with_child(child as usize, ctx, |l, cx| l.on_event(ev, cx));
        if !self.waiting.is_empty() {
            self.send_waiting(ctx);
        }
    }

    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<Self::Event>) -> bool {
        let c = self.stripe.child_of(ctx.reqs()[id].offset_bytes);
        self.with_child(c, ctx, |l, cx| l.abort(id, cx))
    }

    fn reset(&mut self, ctx: &mut impl StageCtx<Self::Event>) {
        for c in 0..self.children.len() {
            self.with_child(c, ctx, |l, cx| l.reset(cx));
        }
    }

    /// A power loss reaches every child; a target's crash that child alone, as a power loss;
    /// an ordering message the child it names; any other command each child in turn until
    /// one answers.
    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<Self::Event>) {
        match &msg.command {
            Command::Ordering(m) => {
                let c = m.target as usize;
                assert!(
                    c < self.children.len(),
                    "an ordering message for target {c}"
                );
                self.with_child(c, ctx, |l, cx| l.control(msg, cx));
            }
            Command::PowerLoss => {
                for c in 0..self.children.len() {
                    self.with_child(c, ctx, |l, cx| l.control(msg, cx));
                }
            }
            &Command::TargetCrash { target } => {
                let c = target as usize;
                assert!(c < self.children.len(), "a crash of target {c}");
                msg.command = Command::PowerLoss;
                self.with_child(c, ctx, |l, cx| l.control(msg, cx));
                msg.command = Command::TargetCrash { target };
                msg.status = ControlStatus::Success;
            }
            _ => {
                for c in 0..self.children.len() {
                    self.with_child(c, ctx, |l, cx| l.control(msg, cx));
                    if msg.status != ControlStatus::Unhandled {
                        break;
                    }
                }
            }
        }
    }

    fn dma(&mut self, _t: Transfer) -> Option<Ns> {
        None
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("children".into(), f64::from(self.stripe.children)),
            ("chunk_bytes".into(), self.stripe.chunk_bytes as f64),
            ("cloned_flushes".into(), self.cloned_flushes as f64),
        ]
    }

    fn collect_lost_writes(&self, out: &mut Vec<LostWrite>) {
        for c in &self.children {
            c.collect_lost_writes(out);
        }
    }

    fn collect_writes_at_risk(&self, reqs: &Requests, out: &mut Vec<LostWrite>) -> bool {
        let mut known = true;
        for c in &self.children {
            known &= c.collect_writes_at_risk(reqs, out);
        }
        known
    }

    fn collect_order_state(&self, reqs: &Requests, out: &mut crate::order::OrderState) {
        for c in &self.children {
            c.collect_order_state(reqs, out);
        }
    }

    /// The fan-out's own counters, then each child's stages, named `NAME[i]` when there are
    /// several children.
    fn reports(&self, out: &mut Vec<StageReport>) {
        out.push(StageReport {
            name: self.name().to_string(),
            counters: self.counters(),
        });
        let many = self.children.len() > 1;
        for (i, c) in self.children.iter().enumerate() {
            let from = out.len();
            c.reports(out);
            if many {
                for r in &mut out[from..] {
                    r.name = format!("{}[{i}]", r.name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{Harness, Null};
    use crate::request::Request;

    fn write(offset: u64, len: u64) -> Request {
        Request::new(Op::Write, offset, len, 0, 0)
    }

    #[test]
    fn units_are_dealt_round_robin_and_each_child_serves_its_own() {
        // Three children of 10, 20 and 30 ns; 4 KiB units.
        let f = Fanout::new(vec![Null::new(10), Null::new(20), Null::new(30)], 4096);
        let mut h = Harness::new(f);
        let ids: Vec<_> = (0..6u64)
            .map(|k| h.submit_at(0, write(k * 4096 + 100, 512)))
            .collect();
        h.run_all();
        let done: Vec<(ReqId, Ns)> = ids
            .iter()
            .map(|&id| *h.completed.iter().find(|(d, _)| *d == id).unwrap())
            .collect();
        let times: Vec<Ns> = done.iter().map(|&(_, t)| t).collect();
        assert_eq!(times, [10, 20, 30, 10, 20, 30]);
        let served: Vec<u64> = h.stage.children().iter().map(|c| c.served).collect();
        assert_eq!(served, [2, 2, 2]);
    }

    #[test]
    fn a_flush_goes_to_every_child_and_completes_with_the_slowest() {
        let f = Fanout::new(vec![Null::new(10), Null::new(50)], 4096);
        let mut h = Harness::new(f);
        let flush = h.submit_at(5, Request::new(Op::Flush, 0, 0, 0, 5));
        h.run_all();
        assert_eq!(h.completed, vec![(flush, 55)]);
        let served: Vec<u64> = h.stage.children().iter().map(|c| c.served).collect();
        assert_eq!(served, [1, 1]);
        assert_eq!(
            h.reqs.outstanding(),
            1,
            "the clones are freed, the flush is the caller's"
        );
        // An ordered flush is for the child of its offset alone.
        let mut ordered = Request::new(Op::Flush, 4096, 0, 0, 100);
        ordered.flags |= ReqFlags::ORDERED;
        let one = h.submit_at(100, ordered);
        h.run_all();
        assert_eq!(h.completed.last(), Some(&(one, 150)));
    }

    #[test]
    fn reports_name_each_childs_stages_by_index() {
        let f = Fanout::new(vec![Null::new(1), Null::new(1)], 4096);
        let h = Harness::new(f);
        let mut out = Vec::new();
        h.stage.reports(&mut out);
        let names: Vec<_> = out.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["fanout", "null[0]", "null[1]"]);
        let one = Fanout::new(vec![Null::new(1)], 4096);
        let mut out = Vec::new();
        one.reports(&mut out);
        assert_eq!(out[1].name, "null");
    }
}
