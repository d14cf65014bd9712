//! `bfq`: a documented subset of Linux's Budget Fair Queueing (Documentation/block/
//! bfq-iosched.rst, the documented behaviour of block/bfq-iosched.c and bfq-wf2q.c).
//!
//! Modelled:
//! - one queue per job and I/O priority (the kernel's per-process queue), FIFO inside;
//! - its weight from the priority as the kernel maps it, (8 - level) x 10: best effort 0 is
//!   80, the default best effort 4 is 40, 7 is 10 (`bfq_ioprio_to_weight`);
//! - strict class order RT > BE > IDLE, with the kernel's one exception: an IDLE queue is
//!   served when the IDLE class waited 200 ms (`BFQ_CL_IDLE_TIMEOUT`); a queue of a higher
//!   class that gets a request preempts the queue in service;
//! - within a class, B-WF2Q+: the queue in service keeps the device until it used its budget
//!   (`max_budget` sectors), it was in service `timeout_sync` (then it is charged its whole
//!   budget, as the kernel charges a queue that ran out of time), or it ran dry; a queue's
//!   virtual finish time grows by the sectors charged over its weight, and the next queue is
//!   the eligible one (virtual start not after the class's virtual time) finishing first;
//! - `slice_idle`: a synchronous queue in service that ran dry keeps the device for up to
//!   `slice_idle` after its last request completed, waiting for its next one, when idling
//!   protects throughput or service guarantees (a rotational disk, or queues of different
//!   weights or classes with requests);
//! - `low_latency`: a synchronous queue that is new or was idle at least 2 s
//!   (`bfq_wr_min_idle_time`) is taken for interactive and its weight raised 30 times
//!   (`bfq_wr_coeff`) for 3 s (the shortest weight-raising time the kernel computes).
//!
//! Not modelled: budget feedback (each budget is `max_budget`; the kernel also sizes it from
//! the queue's use and the measured peak rate), sector order inside a queue (`back_seek_max`,
//! `back_seek_penalty`, `fifo_expire_*`), shared async queues and the async charge factor,
//! soft real-time detection, queue merging and bursts, I/O injection, `strict_guarantees`
//! and cgroups.

use std::collections::{BTreeMap, VecDeque};

use qoslab_engine::{Ns, Op, ReqFlags, ReqId, Request};

use crate::elevator::{Elevator, MergeKind, SchedCtx, SchedOps, SchedSetup};
use crate::ioprio;

qoslab_engine::plugin! {
    pub static OPS: SchedOps = "bfq", "Linux's bfq (a documented subset): per-job queues with weights from the I/O priority, sector budgets, strict classes, idling and low-latency weight raising", elevator: true, merges_requests: false;
    /// `[block.bfq]`: /sys/block/DEV/queue/iosched/* (bfq-iosched.rst, section 3).
    tunables struct BfqConfig in BFQ_TUNABLES {
        slice_idle: u64 = ms(8, "slice_idle: how long a synchronous queue in service that ran dry keeps the device waiting for its next request, ms; 0 = no idling (kernel default 8: NSEC_PER_SEC / 125)"),
        low_latency: u32 = count(1, "low_latency: 1 = raise the weight of interactive queues (new, or idle 2 s) 30 times for 3 s (kernel default 1)").range(0.0, 1.0),
        timeout_sync: u64 = ms(125, "timeout_sync: longest time a synchronous queue stays in service, ms (kernel default 125: HZ / 8)"),
        max_budget: u32 = count(0, "max_budget: sectors a queue may be served in one turn; 0 = 16384 (bfq_default_max_budget; the kernel then autotunes it from the peak rate)").range(0.0, 4194304.0),
    }
    build |s, cfg| build(s, cfg)
}

/// The kernel's budget when `max_budget` is left at 0 (`bfq_default_max_budget`).
const DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
/// weight = (levels - level) x this (`BFQ_WEIGHT_CONVERSION_COEFF`).
const WEIGHT_COEFF: u64 = 10;
/// The IDLE class is served once it waited this long (`BFQ_CL_IDLE_TIMEOUT`, HZ / 5).
pub const CLASS_IDLE_TIMEOUT_NS: Ns = 200_000_000;
/// Weight raising of interactive queues (`bfq_wr_coeff`)...
pub const WR_COEFF: u64 = 30;
/// ... for this long (the lower bound of `bfq_wr_duration`)...
pub const WR_DURATION_NS: Ns = 3_000_000_000;
/// ... when new or idle at least this long (`bfq_wr_min_idle_time`).
pub const WR_MIN_IDLE_NS: Ns = 2_000_000_000;
/// Fixed-point scale of virtual times (sectors x this / weight).
const VSCALE: u128 = 1 << 20;
const CLASSES: usize = 3;

fn build(s: &SchedSetup<'_>, cfg: BfqConfig) -> Option<Box<dyn Elevator>> {
    Some(Box::new(Bfq {
        slice_idle_ns: cfg.slice_idle * 1_000_000,
        low_latency: cfg.low_latency == 1,
        timeout_ns: cfg.timeout_sync * 1_000_000,
        budget: match cfg.max_budget {
            0 => DEFAULT_MAX_BUDGET,
            b => u64::from(b),
        },
        rotational: s.queue.rotational,
        ..Bfq::default()
    }))
}

/// The weight of a priority (`bfq_ioprio_to_weight`).
pub fn weight_of(level: u8) -> u64 {
    (u64::from(ioprio::IOPRIO_NR_LEVELS) - u64::from(level.min(7))) * WEIGHT_COEFF
}

/// Why a queue left service (the kernel's `BFQQE_*` reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    BudgetExhausted,
    BudgetTimeout,
    TooIdle,
    NoMoreRequests,
    Preempted,
}

#[derive(Debug)]
struct Queue {
    class: usize,
    weight: u64,
    fifo: VecDeque<ReqId>,
    /// Requests at the device.
    dispatched: u32,
    /// Whether it is backlogged in its class (has a virtual start and finish).
    active: bool,
    start: u128,
    finish: u128,
    /// Weight raised ×30 until then.
    wr_until: Ns,
    /// When it last ran dry (`None`: never had a request).
    idle_since: Option<Ns>,
    sync: bool,
}

#[derive(Default)]
pub struct Bfq {
    slice_idle_ns: Ns,
    low_latency: bool,
    timeout_ns: Ns,
    budget: u64,
    rotational: bool,
    queues: Vec<Queue>,
    by_key: BTreeMap<(u32, u8, u8), usize>,
    /// Virtual time of each class.
    vtime: [u128; CLASSES],
    in_service: Option<usize>,
    service_start_ns: Ns,
    served_sectors: u64,
    /// Idling for the queue in service until then.
    idle_until: Option<Ns>,
    idle_class_last_ns: Ns,
    /// Queue of each request at the device, by request index.
    out: Vec<Option<u32>>,
    dispatched: [u64; CLASSES],
    expiries: [u64; 5],
    idle_waits: u64,
    weight_raised: u64,
}

impl Bfq {
    fn queue_of(&mut self, req: &Request) -> usize {
        let prio = ioprio::effective(req.prio);
        let class = ioprio::class_index(prio);
        let key = (req.job, class as u8, prio.level);
        if let Some(&q) = self.by_key.get(&key) {
            return q;
        }
        let q = self.queues.len();
        self.queues.push(Queue {
            class,
            weight: weight_of(prio.level),
            fifo: VecDeque::new(),
            dispatched: 0,
            active: false,
            start: 0,
            finish: 0,
            wr_until: 0,
            idle_since: None,
            sync: req.op == Op::Read || req.flags.contains(ReqFlags::SYNC),
        });
        self.by_key.insert(key, q);
        q
    }

    fn weight(&self, q: usize, now: Ns) -> u64 {
        let queue = &self.queues[q];
        if now < queue.wr_until {
            queue.weight * WR_COEFF
        } else {
            queue.weight
        }
    }

    /// Virtual time `sectors` of service take at weight `w`.
    fn vlen(sectors: u64, w: u64) -> u128 {
        u128::from(sectors) * VSCALE / u128::from(w.max(1))
    }

    /// `q` got requests again: it joins its class's service tree.
    fn activate(&mut self, q: usize, now: Ns) {
        let queue = &self.queues[q];
        let interactive = queue.idle_since.is_none_or(|t| now >= t + WR_MIN_IDLE_NS);
        if self.low_latency && queue.sync && queue.class != 2 && interactive {
            self.queues[q].wr_until = now + WR_DURATION_NS;
            self.weight_raised += 1;
        }
        let w = self.weight(q, now);
        let c = self.queues[q].class;
        let queue = &mut self.queues[q];
        queue.active = true;
        queue.start = queue.finish.max(self.vtime[c]);
        queue.finish = queue.start + Self::vlen(self.budget, w);
    }

    /// The queue in service leaves it, charged for what it used.
    fn expire(&mut self, why: Expiry, now: Ns) {
        let Some(q) = self.in_service.take() else {
            return;
        };
        self.idle_until = None;
        self.expiries[why as usize] += 1;
        // A queue that used up its time is charged its whole budget, so a slow queue gets
        // its share in time, not in sectors (bfq_bfqq_charge_time).
        let charged = if why == Expiry::BudgetTimeout {
            self.budget.max(self.served_sectors)
        } else {
            self.served_sectors
        };
        let w = self.weight(q, now);
        let c = self.queues[q].class;
        let sum: u64 = (0..self.queues.len())
            .filter(|&i| self.queues[i].active && self.queues[i].class == c)
            .map(|i| self.weight(i, now))
            .sum();
        self.vtime[c] += Self::vlen(charged, sum);
        let queue = &mut self.queues[q];
        queue.finish = queue.start + Self::vlen(charged, w);
        if queue.fifo.is_empty() {
            queue.active = false;
        } else {
            queue.start = queue.finish;
            queue.finish = queue.start + Self::vlen(self.budget, w);
        }
    }

    /// The next queue to serve: the first class with backlogged queues (the IDLE class
    /// first once it waited 200 ms), in it the eligible queue finishing first.
    fn select(&mut self, now: Ns, cx: &mut SchedCtx<'_>) -> Option<usize> {
        let has = |c: usize| self.queues.iter().any(|q| q.active && q.class == c);
        let class = if has(2) && now >= self.idle_class_last_ns + CLASS_IDLE_TIMEOUT_NS {
            2
        } else {
            (0..CLASSES).find(|&c| has(c))?
        };
        let members: Vec<usize> = (0..self.queues.len())
            .filter(|&i| self.queues[i].active && self.queues[i].class == class)
            .collect();
        cx.tree_op(members.len());
        let min_start = members.iter().map(|&i| self.queues[i].start).min()?;
        // No queue eligible: the virtual time jumps to the earliest start (WF2Q+).
        self.vtime[class] = self.vtime[class].max(min_start);
        let v = self.vtime[class];
        let q = members
            .into_iter()
            .filter(|&i| self.queues[i].start <= v)
            .min_by_key(|&i| (self.queues[i].finish, i))?;
        if class == 2 {
            self.idle_class_last_ns = now;
        }
        self.in_service = Some(q);
        self.service_start_ns = now;
        self.served_sectors = 0;
        self.idle_until = None;
        Some(q)
    }

    /// Whether the queue in service is worth idling for when it runs dry
    /// (bfq_better_to_idle, reduced to its two main reasons).
    fn idling_needed(&self, q: usize, now: Ns) -> bool {
        if self.slice_idle_ns == 0 || !self.queues[q].sync {
            return false;
        }
        if self.rotational {
            return true;
        }
        // An asymmetric scenario: another backlogged queue of another weight or class.
        let w = self.weight(q, now);
        let c = self.queues[q].class;
        (0..self.queues.len()).any(|i| {
            i != q
                && (self.queues[i].active || self.queues[i].dispatched > 0)
                && (self.queues[i].class != c || self.weight(i, now) != w)
        })
    }
}

impl Elevator for Bfq {
    fn min_shallow_depth(&self, _bits_per_word: u32) -> u32 {
        // bfq_depth_updated sets 1.
        1
    }

    fn insert(&mut self, rq: ReqId, at_head: bool, cx: &mut SchedCtx<'_>) {
        let now = cx.now_ns();
        // A request the driver gave back is no longer at the device (requeue_request).
        if let Some(q) = self.out.get_mut(rq.index()).and_then(Option::take) {
            self.queues[q as usize].dispatched -= 1;
        }
        let req = *cx.req(rq);
        let q = self.queue_of(&req);
        let was_empty = self.queues[q].fifo.is_empty();
        if at_head {
            self.queues[q].fifo.push_front(rq);
        } else {
            self.queues[q].fifo.push_back(rq);
        }
        cx.list_ops(1);
        if self.in_service == Some(q) {
            // The request idling waited for.
            self.idle_until = None;
            return;
        }
        if was_empty && !self.queues[q].active {
            self.activate(q, now);
            cx.tree_op(self.queues.len());
        }
        // A higher class preempts the queue in service.
        if let Some(s) = self.in_service
            && self.queues[q].class < self.queues[s].class
        {
            self.expire(Expiry::Preempted, now);
        }
    }

    fn dispatch(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        let now = cx.now_ns();
        loop {
            let q = match self.in_service {
                Some(q) => q,
                None => self.select(now, cx)?,
            };
            if self.queues[q].fifo.is_empty() {
                let waiting = self.idle_until.is_some_and(|t| now < t);
                if self.idling_needed(q, now) && (self.queues[q].dispatched > 0 || waiting) {
                    return None;
                }
                let why = if self.idle_until.is_some() {
                    Expiry::TooIdle
                } else {
                    Expiry::NoMoreRequests
                };
                self.expire(why, now);
                continue;
            }
            if self.served_sectors >= self.budget {
                self.expire(Expiry::BudgetExhausted, now);
                continue;
            }
            if self.served_sectors > 0 && now >= self.service_start_ns + self.timeout_ns {
                self.expire(Expiry::BudgetTimeout, now);
                continue;
            }
            let rq = self.queues[q].fifo.pop_front()?;
            cx.list_ops(1);
            if self.served_sectors == 0 {
                // The budget timeout runs from the first dispatch of the turn.
                self.service_start_ns = now;
            }
            self.served_sectors += cx.req(rq).len_bytes.div_ceil(512);
            let queue = &mut self.queues[q];
            queue.dispatched += 1;
            if queue.fifo.is_empty() {
                queue.idle_since = Some(now);
            }
            self.dispatched[queue.class] += 1;
            let i = rq.index();
            if self.out.len() <= i {
                self.out.resize(i + 1, None);
            }
            self.out[i] = Some(q as u32);
            return Some(rq);
        }
    }

    fn has_work(&self) -> bool {
        self.queues.iter().any(|q| !q.fifo.is_empty())
    }

    fn bio_merge(&mut self, bio: ReqId, cx: &mut SchedCtx<'_>) -> Option<(ReqId, MergeKind)> {
        if let Some(rq) = cx.back_merge(bio)
            && self.allow_merge(rq, bio, cx)
        {
            return Some((rq, MergeKind::Back));
        }
        cx.front_merge(bio)
            .filter(|&rq| self.allow_merge(rq, bio, cx))
            .map(|rq| (rq, MergeKind::Front))
    }

    fn allow_merge(&self, rq: ReqId, bio: ReqId, cx: &SchedCtx<'_>) -> bool {
        // Only within one job's queue (bfq_allow_bio_merge).
        cx.req(rq).job == cx.req(bio).job
    }

    fn completed(&mut self, rq: ReqId, cx: &mut SchedCtx<'_>) {
        let Some(q) = self.out.get_mut(rq.index()).and_then(Option::take) else {
            return;
        };
        let q = q as usize;
        let now = cx.now_ns();
        self.queues[q].dispatched -= 1;
        if self.in_service == Some(q)
            && self.queues[q].fifo.is_empty()
            && self.queues[q].dispatched == 0
            && self.idling_needed(q, now)
        {
            let until = now + self.slice_idle_ns;
            self.idle_until = Some(until);
            self.idle_waits += 1;
            cx.wake_at(until);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = ["rt", "be", "idle"]
            .iter()
            .zip(self.dispatched)
            .map(|(n, d)| (format!("{n}_dispatched"), d as f64))
            .collect();
        let reasons = [
            "budget_exhausted",
            "budget_timeout",
            "too_idle",
            "no_more_requests",
            "preempted",
        ];
        for (n, k) in reasons.iter().zip(self.expiries) {
            out.push((format!("expired_{n}"), k as f64));
        }
        out.push(("queues".into(), self.queues.len() as f64));
        out.push(("idle_waits".into(), self.idle_waits as f64));
        out.push(("weight_raised".into(), self.weight_raised as f64));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::*;
    use qoslab_engine::{IoPrio, IoPrioClass};

    fn prio(class: IoPrioClass, level: u8) -> IoPrio {
        IoPrio { class, level }
    }

    /// A read of job `job`.
    fn read(job: u32, offset_bytes: u64, len_bytes: u64, p: IoPrio) -> Request {
        let mut r = io(Op::Read, offset_bytes, len_bytes, p);
        r.job = job;
        r
    }

    /// Runs of consecutive requests of one job at the disk, as (job, count).
    fn runs(h: &Rig, jobs: &[(u64, u32)]) -> Vec<(u32, usize)> {
        let job_at = |off: u64| jobs.iter().rev().find(|&&(base, _)| off >= base).unwrap().1;
        let mut out: Vec<(u32, usize)> = Vec::new();
        for s in served(h) {
            let j = job_at(s.offset_bytes);
            match out.last_mut() {
                Some((k, n)) if *k == j => *n += 1,
                _ => out.push((j, 1)),
            }
        }
        out
    }

    #[test]
    fn weights_follow_the_kernels_ioprio_mapping() {
        let w: Vec<u64> = (0..8).map(weight_of).collect();
        assert_eq!(w, vec![80, 70, 60, 50, 40, 30, 20, 10]);
    }

    #[test]
    fn real_time_goes_before_best_effort_before_idle() {
        let mut h = rig("bfq", &["block.nr_requests=256"], 1, MS);
        let idle = prio(IoPrioClass::Idle, 0);
        // Job 0 (BE) has the disk; then IDLE, BE and RT jobs queue requests at once.
        h.submit_at(0, read(0, 0, 4 * KIB, BE4));
        for k in 0..10 {
            h.submit_at(0, read(1, (100 + k) * MIB, 4 * KIB, idle));
            h.submit_at(0, read(2, (200 + k) * MIB, 4 * KIB, BE4));
            h.submit_at(0, read(3, (300 + k) * MIB, 4 * KIB, RT0));
        }
        h.run_all();
        let order: Vec<u64> = served(&h)
            .iter()
            .map(|s| s.offset_bytes / MIB / 100)
            .collect();
        let mut want = vec![0];
        want.extend([3; 10]);
        want.extend([2; 10]);
        want.extend([1; 10]);
        assert_eq!(order, want);
        assert_eq!(counter(&h, "iosched_expired_preempted"), 1.0);
    }

    #[test]
    fn an_idle_queue_is_served_once_the_idle_class_waited_200_ms() {
        let mut h = rig("bfq", &["block.nr_requests=4096"], 1, MS);
        for k in 0..1000 {
            h.submit_at(0, read(0, k * MIB, 4 * KIB, BE4));
        }
        h.submit_at(
            MS / 2,
            read(1, 5000 * MIB, 4 * KIB, prio(IoPrioClass::Idle, 0)),
        );
        h.run_all();
        // The idle class was last served at 0: its request goes at the first choice of a
        // queue after 200 ms, which a budget timeout (125 ms turns) brings at 250 ms.
        assert_eq!(served_at(&h, 5000 * MIB), 250 * MS);
    }

    /// Two best-effort jobs, levels 0 and 4 (weights 80 and 40), each with 1000 reads of
    /// 128 KiB queued: turns end when a queue used its 16384-sector budget (64 reads).
    #[test]
    fn best_effort_bandwidth_splits_by_weight() {
        let mut h = rig("bfq", &["block.nr_requests=4096"], 1, MS);
        for k in 0..1000 {
            h.submit_at(0, read(0, k * MIB, 128 * KIB, be(0)));
            h.submit_at(0, read(1, (10_000 + k) * MIB, 128 * KIB, be(4)));
        }
        h.run_all();
        // While both are backlogged (the first 1200 of 2000 reads), level 0 gets 2/3.
        let first = &served(&h)[..1200];
        let heavy = first
            .iter()
            .filter(|s| s.offset_bytes < 10_000 * MIB)
            .count();
        let share = heavy as f64 / first.len() as f64;
        assert!((share - 2.0 / 3.0).abs() <= 0.1 * 2.0 / 3.0, "{share}");
        // Turns are whole budgets (a run may hold two turns of one queue) until job 0 is done.
        let turns = runs(&h, &[(0, 0), (10_000 * MIB, 1)]);
        let both = &turns[..turns.len() - 2];
        assert!(both.iter().all(|&(_, n)| n % 64 == 0), "{turns:?}");
        assert!(counter(&h, "iosched_expired_budget_exhausted") >= 20.0);
    }

    /// With 4 KiB reads a budget would last 2048 ms: turns end at timeout_sync instead, and
    /// the queue is charged its whole budget, so time splits by weight.
    #[test]
    fn a_turn_ends_at_timeout_sync() {
        let run = |timeout_ms: u64, level1: u8| {
            let set = format!("block.bfq.timeout_sync={timeout_ms}");
            let mut h = rig("bfq", &[&set, "block.nr_requests=8192"], 1, MS);
            for k in 0..2000 {
                h.submit_at(0, read(0, k * MIB, 4 * KIB, BE4));
                h.submit_at(0, read(1, (10_000 + k) * MIB, 4 * KIB, be(level1)));
            }
            h.run_all();
            runs(&h, &[(0, 0), (10_000 * MIB, 1)])
        };
        let equal = run(125, 4);
        assert_eq!(&equal[..4], &[(0, 125), (1, 125), (0, 125), (1, 125)]);
        let short = run(50, 4);
        assert_eq!(&short[..2], &[(0, 50), (1, 50)]);
        // Job 1 at level 0 (weight 80) against job 0 at 4 (40): two turns for one, while
        // both have requests (the first 2000 of 4000), in whole turns.
        let weighted = run(125, 0);
        let mut seen = 0;
        let mut ones = 0;
        for &(job, n) in &weighted {
            if seen >= 2000 {
                break;
            }
            assert_eq!(n % 125, 0, "{weighted:?}");
            seen += n;
            ones += if job == 1 { n } else { 0 };
        }
        let share = ones as f64 / seen as f64;
        assert!((share - 2.0 / 3.0).abs() <= 0.1 * 2.0 / 3.0, "{weighted:?}");
    }

    #[test]
    fn low_latency_raises_a_new_queue_for_three_seconds() {
        // Job 0 reads from 0 on; job 1 starts at 5 s. Both best effort 4.
        let run = |low_latency: u32| {
            let set = format!("block.bfq.low_latency={low_latency}");
            let mut h = rig("bfq", &[&set, "block.nr_requests=16384"], 1, MS);
            for k in 0..10_000 {
                h.submit_at(0, read(0, k * MIB, 4 * KIB, BE4));
            }
            for k in 0..3000 {
                h.submit_at(5000 * MS, read(1, (20_000 + k) * MIB, 4 * KIB, BE4));
            }
            h.run_all();
            let window = served(&h)
                .iter()
                .filter(|s| (5000 * MS..8000 * MS).contains(&s.at_ns));
            let (n, newcomer) = window.fold((0, 0), |(n, j), s| {
                (n + 1, j + usize::from(s.offset_bytes >= 20_000 * MIB))
            });
            newcomer as f64 / n as f64
        };
        // Raised 30 times: 30 turns for one.
        let raised = run(1);
        assert!(raised > 0.9, "{raised}");
        let plain = run(0);
        assert!((0.45..=0.55).contains(&plain), "{plain}");
    }
}
