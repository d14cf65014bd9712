//! The device's write cache as the block layer sees it, and the flush machinery in front of it
//! (Linux 6.1 `block/blk-flush.c`).
//!
//! The queue's `write_cache` and `fua` (sysfs; `blk_queue_write_cache`: `QUEUE_FLAG_WC` and
//! `QUEUE_FLAG_FUA`, from NVMe's Volatile Write Cache bit and FUA support) decide what a
//! write with `REQ_PREFLUSH` or `REQ_FUA`, or an empty flush, becomes at the device:
//!
//! - **write through** (no volatile cache): nothing can be lost to a power failure, so
//!   `PREFLUSH` and `FUA` are stripped and an empty flush completes at once, unsent;
//! - **write back**: the request's *policy* (`blk_flush_policy`) is a sequence of steps,
//!   PREFLUSH (a FLUSH request to the device before the data), DATA (the write itself, with FUA
//!   where the device honours it), POSTFLUSH (a FLUSH after the data, for FUA on a device
//!   without it). A write whose policy is DATA alone goes the ordinary way; any other runs
//!   through the hardware queue's [`FlushQueue`].
//!
//! The flush queue merges flushes. Its rules (the comment at the top of blk-flush.c):
//! C1, one FLUSH is in flight at a time, so requests wait on two lists, *pending* (for the next
//! FLUSH) and *running* (served by the one in flight); C2, a FLUSH is not issued while a request
//! of a sequence has its DATA at the device (so requests that shared a PREFLUSH also share their
//! POSTFLUSH); C3, unless the oldest pending request has waited [`FLUSH_PENDING_TIMEOUT_NS`]. So
//! when a FLUSH completes, every request that waited for it moves on, and all requests that
//! arrived meanwhile are served by the next single FLUSH.

use qoslab_engine::{Ns, Op, ReqFlags, ReqId, Request};

/// blk-flush.c's FLUSH_PENDING_TIMEOUT (5 * HZ).
pub const FLUSH_PENDING_TIMEOUT_NS: Ns = 5_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteCache {
    /// The device has a volatile write cache (sysfs `write_cache`: "write back").
    pub volatile: bool,
    /// It honours Force Unit Access (sysfs `fua`: 1).
    pub fua: bool,
}

impl Default for WriteCache {
    /// Everything passes to the device as it is.
    fn default() -> Self {
        WriteCache {
            volatile: true,
            fua: true,
        }
    }
}

/// The steps of a flush sequence (`REQ_FSEQ_*`), in the order they run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Steps(u8);

impl Steps {
    pub const PREFLUSH: Steps = Steps(1);
    pub const DATA: Steps = Steps(2);
    pub const POSTFLUSH: Steps = Steps(4);
    pub const DONE: Steps = Steps(8);
    /// The three that do something (`REQ_FSEQ_ACTIONS`).
    pub const ACTIONS: Steps = Steps(7);
    pub const NONE: Steps = Steps(0);

    pub const fn contains(self, s: Steps) -> bool {
        self.0 & s.0 == s.0
    }

    pub const fn union(self, s: Steps) -> Steps {
        Steps(self.0 | s.0)
    }

    /// The first step not done yet (`blk_flush_cur_seq`).
    fn next(self) -> Steps {
        Steps(1 << (!self.0).trailing_zeros().min(3))
    }

    /// Whether the steps need the flush queue: a FLUSH before or after.
    pub const fn sequenced(self) -> bool {
        self.0 & (Self::PREFLUSH.0 | Self::POSTFLUSH.0) != 0
    }
}

impl WriteCache {
    /// Keeps what of `req`'s cache semantics the device needs; false when the request needs
    /// the device not at all (a flush of a device with no volatile cache).
    pub fn prepare(&self, req: &mut Request) -> bool {
        if self.volatile {
            return true;
        }
        req.flags.remove(ReqFlags::PREFLUSH | ReqFlags::FUA);
        req.op != Op::Flush
    }

    /// The steps `req` takes at the device (`blk_flush_policy`); `Steps::NONE` for an empty
    /// flush of a write-through queue. An empty flush (`Op::Flush`) is a PREFLUSH alone.
    pub fn policy(&self, op: Op, flags: ReqFlags, len_bytes: u64) -> Steps {
        let mut p = Steps::NONE;
        if op != Op::Flush && len_bytes > 0 {
            p = p.union(Steps::DATA);
        }
        if self.volatile {
            if op == Op::Flush || flags.contains(ReqFlags::PREFLUSH) {
                p = p.union(Steps::PREFLUSH);
            }
            if !self.fua && flags.contains(ReqFlags::FUA) {
                p = p.union(Steps::POSTFLUSH);
            }
        }
        p
    }

    /// Whether a request with `op` and `flags` goes through the flush queue: cheap enough for
    /// every request's path (a write-through queue never does).
    #[inline(always)]
    pub fn sequences(&self, op: Op, flags: ReqFlags) -> bool {
        self.volatile
            && (op == Op::Flush
                || flags.contains(ReqFlags::PREFLUSH)
                || (!self.fua && flags.contains(ReqFlags::FUA)))
    }

    /// The flags the data step of a sequence carries to the driver: no PREFLUSH (the flush
    /// queue sent it), FUA only where the device honours it.
    pub fn data_flags(&self, flags: ReqFlags) -> ReqFlags {
        let mut f = flags - ReqFlags::PREFLUSH;
        if !self.fua {
            f.remove(ReqFlags::FUA);
        }
        f
    }
}

/// What the block layer does next for the flush queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushAction {
    /// Send the request's data to the driver, ahead of what waits (the requeue list's head).
    Data(ReqId),
    /// Send one FLUSH to the device for every request pending now (`flush_rq`), behind what
    /// waits; the first of them is named (the FLUSH takes its queue and namespace).
    Flush { first: ReqId },
    /// The request's sequence is over: it completes.
    Done(ReqId),
}

/// A hardware queue's flush queue (`struct blk_flush_queue`).
#[derive(Debug, Default)]
pub struct FlushQueue {
    /// The two lists (`flush_queue[2]`): pending for the next FLUSH, running for the one in
    /// flight; which is which by the two indices.
    lists: [Vec<ReqId>; 2],
    pending_idx: usize,
    running_idx: usize,
    /// When the pending list last became non-empty.
    pending_since: Ns,
    /// Requests with their DATA at the device (`flush_data_in_flight`).
    data_in_flight: u32,
    /// Every request in a sequence, with the steps it has done.
    seq: Vec<(ReqId, Steps)>,
    /// FLUSHes issued.
    pub flushes: u64,
}

impl FlushQueue {
    /// No request is in a sequence and no FLUSH is out.
    pub fn idle(&self) -> bool {
        self.seq.is_empty() && self.pending_idx == self.running_idx
    }

    /// A FLUSH is in flight.
    pub fn flush_running(&self) -> bool {
        self.pending_idx != self.running_idx
    }

    /// Request `id` with `policy` (a sequenced one: [`Steps::sequenced`]) enters the queue at
    /// `now` (`blk_insert_flush`): the steps it skips count as done.
    pub fn insert(&mut self, id: ReqId, policy: Steps, now: Ns, out: &mut Vec<FlushAction>) {
        debug_assert!(policy.sequenced());
        self.seq.push((id, Steps::NONE));
        self.complete_seq(id, Steps(Steps::ACTIONS.0 & !policy.0), now, out);
    }

    /// The data of `id` completed at the device.
    pub fn data_done(&mut self, id: ReqId, now: Ns, out: &mut Vec<FlushAction>) {
        self.data_in_flight -= 1;
        self.complete_seq(id, Steps::DATA, now, out);
    }

    /// The FLUSH in flight completed (`flush_end_io`): every request it served moves on.
    pub fn flush_done(&mut self, now: Ns, out: &mut Vec<FlushAction>) {
        assert!(self.flush_running(), "a FLUSH completed that was not sent");
        let running = std::mem::take(&mut self.lists[self.running_idx]);
        self.running_idx ^= 1;
        for &id in &running {
            let step = self.steps(id).next();
            debug_assert!(step == Steps::PREFLUSH || step == Steps::POSTFLUSH);
            self.complete_seq(id, step, now, out);
        }
        let mut list = running;
        list.clear();
        if self.lists[self.running_idx ^ 1].is_empty() && list.capacity() > 0 {
            // Keep the allocation: the list just emptied is the next one to fill.
            self.lists[self.running_idx ^ 1] = list;
        }
    }

    fn steps(&self, id: ReqId) -> Steps {
        self.seq
            .iter()
            .find(|(r, _)| *r == id)
            .map(|&(_, s)| s)
            .expect("a request in a flush sequence")
    }

    /// `blk_flush_complete_seq`: `id` has done `done`; its next step starts.
    fn complete_seq(&mut self, id: ReqId, done: Steps, now: Ns, out: &mut Vec<FlushAction>) {
        let i = self
            .seq
            .iter()
            .position(|(r, _)| *r == id)
            .expect("a request in a flush sequence");
        let s = self.seq[i].1.union(done);
        self.seq[i].1 = s;
        match s.next() {
            Steps::PREFLUSH | Steps::POSTFLUSH => {
                let pending = &mut self.lists[self.pending_idx];
                if pending.is_empty() {
                    self.pending_since = now;
                }
                pending.push(id);
            }
            Steps::DATA => {
                self.data_in_flight += 1;
                out.push(FlushAction::Data(id));
            }
            _ => {
                self.seq.swap_remove(i);
                out.push(FlushAction::Done(id));
            }
        }
        self.kick(now, out);
    }

    /// `blk_kick_flush`: a FLUSH for the pending requests, if C1 to C3 allow.
    fn kick(&mut self, now: Ns, out: &mut Vec<FlushAction>) {
        let pending = &self.lists[self.pending_idx];
        if self.flush_running() || pending.is_empty() {
            return;
        }
        if self.data_in_flight > 0 && now < self.pending_since + FLUSH_PENDING_TIMEOUT_NS {
            return;
        }
        let first = pending[0];
        self.pending_idx ^= 1;
        self.flushes += 1;
        out.push(FlushAction::Flush { first });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE_BACK_FUA: WriteCache = WriteCache {
        volatile: true,
        fua: true,
    };
    const WRITE_BACK: WriteCache = WriteCache {
        volatile: true,
        fua: false,
    };
    const WRITE_THROUGH: WriteCache = WriteCache {
        volatile: false,
        fua: false,
    };

    #[test]
    fn without_a_volatile_cache_flushes_stay_here_and_writes_lose_their_cache_flags() {
        let mut flush = Request::new(Op::Flush, 0, 0, 0, 0);
        assert!(!WRITE_THROUGH.prepare(&mut flush));
        let mut w = Request::new(Op::Write, 0, 4096, 0, 0);
        w.flags = ReqFlags::PREFLUSH | ReqFlags::FUA | ReqFlags::SYNC;
        assert!(WRITE_THROUGH.prepare(&mut w));
        assert_eq!(w.flags, ReqFlags::SYNC);
        assert!(!WRITE_THROUGH.sequences(Op::Write, ReqFlags::PREFLUSH | ReqFlags::FUA));
        assert_eq!(
            WRITE_THROUGH.policy(Op::Flush, ReqFlags::empty(), 0),
            Steps::NONE
        );
        let mut w2 = Request::new(Op::Write, 0, 4096, 0, 0);
        w2.flags = ReqFlags::FUA;
        assert!(WriteCache::default().prepare(&mut w2));
        assert_eq!(w2.flags, ReqFlags::FUA);
    }

    /// blk_flush_policy, case by case, as sysfs `write_cache` / `fua` would say.
    #[test]
    fn the_policy_of_each_request_by_write_cache_and_fua() {
        let pf = ReqFlags::PREFLUSH;
        let fua = ReqFlags::FUA;
        let (d, pre, post) = (Steps::DATA, Steps::PREFLUSH, Steps::POSTFLUSH);
        // "write back", fua 1: PREFLUSH then the data with FUA; no post-flush.
        assert_eq!(
            WRITE_BACK_FUA.policy(Op::Write, pf | fua, 4096),
            pre.union(d)
        );
        assert_eq!(WRITE_BACK_FUA.data_flags(pf | fua), fua);
        assert_eq!(WRITE_BACK_FUA.policy(Op::Write, fua, 4096), d);
        assert!(!WRITE_BACK_FUA.sequences(Op::Write, fua));
        // "write back", fua 0: FUA becomes a FLUSH after the data.
        assert_eq!(
            WRITE_BACK.policy(Op::Write, pf | fua, 4096),
            pre.union(d).union(post)
        );
        assert_eq!(WRITE_BACK.data_flags(pf | fua), ReqFlags::empty());
        assert_eq!(WRITE_BACK.policy(Op::Write, fua, 4096), d.union(post));
        assert!(WRITE_BACK.sequences(Op::Write, fua));
        // An empty flush is a PREFLUSH alone; a plain write is its data alone.
        assert_eq!(WRITE_BACK.policy(Op::Flush, ReqFlags::empty(), 0), pre);
        assert_eq!(WRITE_BACK.policy(Op::Write, ReqFlags::empty(), 4096), d);
        assert!(!WRITE_BACK.sequences(Op::Write, ReqFlags::SYNC));
        // "write through": the data alone, whatever the flags.
        assert_eq!(WRITE_THROUGH.policy(Op::Write, pf | fua, 4096), d);
    }

    fn r(i: u32) -> ReqId {
        ReqId(i)
    }

    fn insert(q: &mut FlushQueue, id: u32, p: Steps, now: Ns) -> Vec<FlushAction> {
        let mut out = Vec::new();
        q.insert(r(id), p, now, &mut out);
        out
    }

    fn flush_done(q: &mut FlushQueue, now: Ns) -> Vec<FlushAction> {
        let mut out = Vec::new();
        q.flush_done(now, &mut out);
        out
    }

    fn data_done(q: &mut FlushQueue, id: u32, now: Ns) -> Vec<FlushAction> {
        let mut out = Vec::new();
        q.data_done(r(id), now, &mut out);
        out
    }

    #[test]
    fn a_preflush_fua_write_on_a_fua_device_is_a_flush_then_its_data() {
        let mut q = FlushQueue::default();
        let p = WRITE_BACK_FUA.policy(Op::Write, ReqFlags::PREFLUSH | ReqFlags::FUA, 4096);
        assert_eq!(
            insert(&mut q, 1, p, 0),
            [FlushAction::Flush { first: r(1) }]
        );
        assert_eq!(flush_done(&mut q, 10), [FlushAction::Data(r(1))]);
        assert_eq!(data_done(&mut q, 1, 20), [FlushAction::Done(r(1))]);
        assert!(q.idle());
        assert_eq!(q.flushes, 1);
    }

    #[test]
    fn without_fua_the_same_write_is_flush_data_flush() {
        let mut q = FlushQueue::default();
        let p = WRITE_BACK.policy(Op::Write, ReqFlags::PREFLUSH | ReqFlags::FUA, 4096);
        assert_eq!(
            insert(&mut q, 1, p, 0),
            [FlushAction::Flush { first: r(1) }]
        );
        assert_eq!(flush_done(&mut q, 10), [FlushAction::Data(r(1))]);
        assert_eq!(
            data_done(&mut q, 1, 20),
            [FlushAction::Flush { first: r(1) }]
        );
        assert_eq!(flush_done(&mut q, 30), [FlushAction::Done(r(1))]);
        assert!(q.idle());
        assert_eq!(q.flushes, 2);
    }

    #[test]
    fn a_fua_write_without_device_fua_is_its_data_then_a_flush() {
        let mut q = FlushQueue::default();
        let p = WRITE_BACK.policy(Op::Write, ReqFlags::FUA, 4096);
        assert_eq!(insert(&mut q, 1, p, 0), [FlushAction::Data(r(1))]);
        assert_eq!(
            data_done(&mut q, 1, 5),
            [FlushAction::Flush { first: r(1) }]
        );
        assert_eq!(flush_done(&mut q, 9), [FlushAction::Done(r(1))]);
    }

    /// C1: one FLUSH in flight; everything that arrives meanwhile waits for the next one,
    /// which serves all of it.
    #[test]
    fn n_empty_flushes_arriving_during_a_flush_share_the_next_one() {
        let mut q = FlushQueue::default();
        let pre = Steps::PREFLUSH;
        assert_eq!(
            insert(&mut q, 0, pre, 0),
            [FlushAction::Flush { first: r(0) }]
        );
        for i in 1..=5 {
            assert!(insert(&mut q, i, pre, i as Ns).is_empty());
        }
        assert_eq!(
            flush_done(&mut q, 10),
            [FlushAction::Done(r(0)), FlushAction::Flush { first: r(1) }]
        );
        let done = flush_done(&mut q, 20);
        assert_eq!(
            done,
            (1..=5).map(|i| FlushAction::Done(r(i))).collect::<Vec<_>>()
        );
        assert_eq!(q.flushes, 2);
        assert!(q.idle());
    }

    /// C2: while a sequence's data is at the device no FLUSH goes out, so writes that shared a
    /// PREFLUSH share their POSTFLUSH too.
    #[test]
    fn writes_that_shared_a_preflush_share_their_postflush() {
        let mut q = FlushQueue::default();
        let p = WRITE_BACK.policy(Op::Write, ReqFlags::PREFLUSH | ReqFlags::FUA, 4096);
        insert(&mut q, 0, Steps::PREFLUSH, 0);
        insert(&mut q, 1, p, 1);
        insert(&mut q, 2, p, 2);
        assert_eq!(
            flush_done(&mut q, 10),
            [FlushAction::Done(r(0)), FlushAction::Flush { first: r(1) }]
        );
        assert_eq!(
            flush_done(&mut q, 20),
            [FlushAction::Data(r(1)), FlushAction::Data(r(2))]
        );
        assert!(data_done(&mut q, 2, 25).is_empty(), "1's data is still out");
        assert_eq!(
            data_done(&mut q, 1, 30),
            [FlushAction::Flush { first: r(2) }]
        );
        assert_eq!(
            flush_done(&mut q, 40),
            [FlushAction::Done(r(2)), FlushAction::Done(r(1))]
        );
        assert_eq!(q.flushes, 3);
    }

    /// C3: a request pending longer than FLUSH_PENDING_TIMEOUT gets its FLUSH even while data
    /// is out.
    #[test]
    fn a_request_pending_for_five_seconds_is_not_held_back_by_data_in_flight() {
        let mut q = FlushQueue::default();
        let fua_only = WRITE_BACK.policy(Op::Write, ReqFlags::FUA, 4096);
        assert_eq!(insert(&mut q, 1, fua_only, 0), [FlushAction::Data(r(1))]);
        assert!(insert(&mut q, 2, Steps::PREFLUSH, 1).is_empty());
        assert!(insert(&mut q, 3, fua_only, 2).len() == 1);
        assert!(data_done(&mut q, 1, 3).is_empty(), "3's data is out");
        let late = 1 + FLUSH_PENDING_TIMEOUT_NS;
        assert_eq!(
            insert(&mut q, 4, fua_only, late),
            [FlushAction::Data(r(4)), FlushAction::Flush { first: r(2) }]
        );
    }
}

/// The flush queue inside the block layer, over whole runs: what the device sees.
#[cfg(test)]
mod runs {
    use super::*;
    use crate::testbed::{KIB, layer};
    use qoslab_engine::{Chain, Harness, Stage, StageCtx};

    const WRITE_NS: Ns = 100_000;
    const FLUSH_NS: Ns = 1_000_000;

    /// What the device was given and when it finished it.
    #[derive(Clone, Copy, Debug)]
    struct Cmd {
        op: Op,
        flags: ReqFlags,
        offset_bytes: u64,
        at_ns: Ns,
        done_ns: Ns,
    }

    /// A device serving every command at once: a write or read in `WRITE_NS`, a FLUSH in
    /// `FLUSH_NS`; it logs each command.
    #[derive(Default)]
    struct Device {
        log: Vec<Cmd>,
        slot: Vec<(ReqId, usize)>,
    }

    impl Stage for Device {
        type Event = ReqId;
        fn name(&self) -> &'static str {
            "device"
        }
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
            let r = ctx.reqs()[id];
            let now = ctx.now_ns();
            let t = if r.op == Op::Flush {
                FLUSH_NS
            } else {
                WRITE_NS
            };
            self.slot.push((id, self.log.len()));
            self.log.push(Cmd {
                op: r.op,
                flags: r.flags,
                offset_bytes: r.offset_bytes,
                at_ns: now,
                done_ns: now + t,
            });
            ctx.schedule(now + t, id);
        }
        fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
            let k = self.slot.iter().position(|(r, _)| *r == id).unwrap();
            self.slot.swap_remove(k);
            ctx.complete(id);
        }
    }

    type Rig = Harness<Chain<BlockLayer, Device>>;
    use crate::BlockLayer;

    fn rig(sched: &str, wc: WriteCache) -> Rig {
        let block = layer(sched, &["block.nr_requests=64"], 32).with_write_cache(wc);
        Harness::new(Chain::new(block, Device::default()))
    }

    fn flushes(h: &Rig) -> Vec<Cmd> {
        h.stage
            .lower
            .log
            .iter()
            .copied()
            .filter(|c| c.op == Op::Flush)
            .collect()
    }

    fn write(offset: u64, flags: ReqFlags) -> Request {
        let mut r = Request::new(Op::Write, offset, 4 * KIB, 0, 0);
        r.flags = flags | ReqFlags::SYNC;
        r
    }

    #[test]
    fn a_journal_commit_reaches_the_device_as_a_flush_then_the_write_with_fua() {
        for (fua, expect) in [
            (true, vec![(Op::Flush, false), (Op::Write, true)]),
            (
                false,
                vec![(Op::Flush, false), (Op::Write, false), (Op::Flush, false)],
            ),
        ] {
            let mut h = rig(
                "none",
                WriteCache {
                    volatile: true,
                    fua,
                },
            );
            let id = h.submit_at(0, write(0, ReqFlags::PREFLUSH | ReqFlags::FUA));
            h.run_all();
            let log = &h.stage.lower.log;
            let seen: Vec<(Op, bool)> = log
                .iter()
                .map(|c| (c.op, c.flags.contains(ReqFlags::FUA)))
                .collect();
            assert_eq!(seen, expect, "fua {fua}");
            assert!(log.iter().all(|c| !c.flags.contains(ReqFlags::PREFLUSH)));
            // Each step starts when the one before ends; the write completes with the last.
            for w in log.windows(2) {
                assert_eq!(w[1].at_ns, w[0].done_ns);
            }
            let done = h.completed.iter().find(|d| d.0 == id).unwrap().1;
            assert_eq!(done, log.last().unwrap().done_ns);
        }
    }

    #[test]
    fn on_a_write_through_queue_nothing_reaches_the_device_but_the_data() {
        let mut h = rig(
            "none",
            WriteCache {
                volatile: false,
                fua: false,
            },
        );
        h.submit_at(0, write(0, ReqFlags::PREFLUSH | ReqFlags::FUA));
        h.submit_at(0, Request::new(Op::Flush, 0, 0, 1, 0));
        h.run_all();
        let log = &h.stage.lower.log;
        assert_eq!(log.len(), 1);
        assert_eq!((log[0].op, log[0].flags), (Op::Write, ReqFlags::SYNC));
        assert_eq!(h.completed.len(), 2);
    }

    /// N fsyncs' flushes at once: the first is sent, the other N-1 wait for the next FLUSH,
    /// which serves them all: 2 FLUSHes for any N > 1.
    #[test]
    fn n_concurrent_flushes_cost_two_device_flushes() {
        for n in [1u32, 2, 4, 16, 24] {
            for sched in ["none", "mq-deadline"] {
                let mut h = rig(sched, WriteCache::default());
                for j in 0..n {
                    h.submit_at(0, Request::new(Op::Flush, 0, 0, j, 0));
                }
                h.run_all();
                assert_eq!(flushes(&h).len(), n.min(2) as usize, "{n} flushes, {sched}");
                assert_eq!(h.completed.len(), n as usize);
                let last = h.completed.iter().map(|d| d.1).max().unwrap();
                assert_eq!(last, if n == 1 { FLUSH_NS } else { 2 * FLUSH_NS });
            }
        }
    }

    /// Random mixes of plain, FUA, PREFLUSH and PREFLUSH|FUA writes, reads and empty flushes
    /// from several jobs: the device's log must keep blk-flush's promises.
    #[test]
    fn whole_runs_keep_the_flush_promises() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        for run in 0..48 {
            let fua = run % 2 == 0;
            let sched = if run % 4 < 2 { "none" } else { "mq-deadline" };
            let mut h = rig(
                sched,
                WriteCache {
                    volatile: true,
                    fua,
                },
            );
            let mut sent = Vec::new();
            for k in 0..60u64 {
                let at = next(20) * 50_000;
                let kind = next(6);
                let r = match kind {
                    0 => Request::new(Op::Flush, 0, 0, (k % 8) as u32, at),
                    1 => Request::new(Op::Read, k * 4 * KIB, 4 * KIB, (k % 8) as u32, at),
                    _ => {
                        let flags = [
                            ReqFlags::empty(),
                            ReqFlags::FUA,
                            ReqFlags::PREFLUSH,
                            ReqFlags::PREFLUSH | ReqFlags::FUA,
                        ][(kind - 2) as usize];
                        let mut w = write(k * 4 * KIB, flags);
                        w.job = (k % 8) as u32;
                        w.t.queued_ns = at;
                        w
                    }
                };
                let id = h.submit_at(at, r);
                sent.push((id, r, at));
            }
            h.run_all();
            let log = &h.stage.lower.log;
            let fl = flushes(&h);
            // Every request completes, and the device never sees PREFLUSH, nor FUA it lacks.
            assert_eq!(h.completed.len(), sent.len(), "run {run}");
            for c in log {
                assert!(!c.flags.contains(ReqFlags::PREFLUSH));
                assert!(fua || !c.flags.contains(ReqFlags::FUA));
            }
            // C1: one FLUSH at the device at a time.
            for w in fl.windows(2) {
                assert!(w[1].at_ns >= w[0].done_ns, "run {run}: FLUSHes overlap");
            }
            let mut sequenced = 0;
            for &(id, r, at) in &sent {
                let done = h.completed.iter().find(|d| d.0 == id).unwrap().1;
                let data = log.iter().find(|c| {
                    c.op != Op::Flush && c.offset_bytes == r.offset_bytes && c.op == r.op
                });
                let pre = r.op == Op::Flush || r.flags.contains(ReqFlags::PREFLUSH);
                let post = !fua && r.flags.contains(ReqFlags::FUA);
                sequenced += u32::from(pre || post);
                if pre {
                    // A FLUSH sent after it arrived completed before its data went out (or,
                    // for an empty flush, before it completed).
                    let until = data.map_or(done, |d| d.at_ns);
                    assert!(
                        fl.iter().any(|f| f.at_ns >= at && f.done_ns <= until),
                        "run {run}: {r:?} without its PREFLUSH"
                    );
                }
                if post {
                    let d = data.unwrap();
                    assert!(
                        fl.iter().any(|f| f.at_ns >= d.done_ns && f.done_ns <= done),
                        "run {run}: {r:?} without its POSTFLUSH"
                    );
                }
                if !pre && !post && r.op != Op::Flush {
                    assert!(data.is_some());
                }
            }
            // Merging: never more FLUSHes than requests that needed one.
            assert!(fl.len() as u32 <= sequenced, "run {run}");
            assert!(h.stage.upper.held() == 0);
        }
    }
}
