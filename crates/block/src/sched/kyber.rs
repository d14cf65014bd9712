//! `kyber`: Linux's token-based latency scheduler (Documentation/block/kyber-iosched.rst, the
//! documented behaviour of block/kyber-iosched.c).
//!
//! Requests are sorted into four domains, read, write, discard and other, each a FIFO with a
//! number of tokens: a request goes to the device only with a token of its domain, held until
//! it completes. Dispatch serves the domains round robin, up to a batch per domain (16 reads,
//! 8 writes, 1 discard, 1 other) while the domain has requests and tokens.
//!
//! Every completed read, write and discard puts two samples in its domain's histograms: its
//! total latency (since the request was made) and its I/O latency (since it went to the
//! device), in 8 buckets a quarter of the domain's target wide (the last holds everything
//! above 1.75 x target). 100 ms after a completion (if no adjustment is already due) the
//! token depths are adjusted, from a domain's histograms once they hold 500 samples or one
//! second passed since the domain was first looked at:
//! - the device is congested when some domain's p90 I/O latency is above its target;
//! - then every domain with a p99 total latency is scaled by its p99 over the target: depth
//!   x (p99 bucket + 1) / 4, so a domain within its target is throttled (1/4 to 1 of its
//!   depth) and one above it eased (up to 2 x); without congestion only domains whose p99 is
//!   above target are eased. A domain's p99 seen in a calm period is kept for the next
//!   congested one (and used once).
//!
//! Depths stay between 1 and the kernel's caps (read 256, write 128, discard 64, other 16).
//! Asynchronous writes may take only 3/4 of `nr_requests` scheduler tags (`limit_depth`).

use std::collections::VecDeque;

use qoslab_engine::{Ns, Op, ReqFlags, ReqId, Request};

use crate::elevator::{Elevator, MergeKind, SchedCtx, SchedOps, SchedSetup};

qoslab_engine::plugin! {
    pub static OPS: SchedOps = "kyber", "Linux's kyber: read, write, discard and other domains with token depths adjusted to meet read and write latency targets", elevator: true, merges_requests: false;
    /// `[block.kyber]`: /sys/block/DEV/queue/iosched/* (kyber-iosched.rst).
    tunables struct KyberConfig in KYBER_TUNABLES {
        read_lat_nsec: u64 = ns(2_000_000, "read_lat_nsec: target latency of reads, ns (kernel default 2000000)"),
        write_lat_nsec: u64 = ns(10_000_000, "write_lat_nsec: target latency of synchronous and asynchronous writes, ns (kernel default 10000000)"),
    }
    build |s, cfg| build(s, cfg)
}

/// Read, write, discard, other (the kernel's `KYBER_READ` .. `KYBER_OTHER`).
pub const DOMAINS: usize = 4;
pub const DOMAIN_NAMES: [&str; DOMAINS] = ["read", "write", "discard", "other"];
/// Domains with a latency target and histograms (all but other).
const TIMED: usize = 3;
/// Token depth caps, which are also the starting depths (`kyber_depth`).
pub const MAX_DEPTH: [u32; DOMAINS] = [256, 128, 64, 16];
/// Requests dispatched in a row from one domain (`kyber_batch_size`).
const BATCH: [u32; DOMAINS] = [16, 8, 1, 1];
/// Target of discards: not a sysfs attribute (`kyber_latency_targets`).
const DISCARD_LAT_NS: Ns = 5_000_000_000;
/// A bucket is 1/4 of the target wide (`KYBER_LATENCY_SHIFT` 2); 4 buckets within the
/// target, 4 above it.
const SHIFT: u32 = 2;
const GOOD_BUCKETS: usize = 1 << SHIFT;
const BUCKETS: usize = 2 << SHIFT;
/// Depths are adjusted this long after a completion (`HZ / 10`).
pub const TIMER_NS: Ns = 100_000_000;
/// Percentiles are taken once a domain has this many samples...
const MIN_SAMPLES: u32 = 500;
/// ... or this long after it was first looked at with fewer.
const SAMPLE_WINDOW_NS: Ns = 1_000_000_000;
/// Total latency (since the request was made) and I/O latency (since it went to the device).
const TOTAL: usize = 0;
const IO: usize = 1;

fn build(s: &SchedSetup<'_>, cfg: KyberConfig) -> Option<Box<dyn Elevator>> {
    Some(Box::new(Kyber::new(
        cfg.read_lat_nsec,
        cfg.write_lat_nsec,
        s.queue.nr_requests,
    )))
}

/// The domain of a request (`kyber_sched_domain`).
pub fn domain_of(req: &Request) -> usize {
    match req.op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Trim => 2,
        Op::Flush => 3,
    }
}

/// The bucket of `latency_ns` against `target_ns` (`add_latency_sample`).
fn bucket_of(latency_ns: Ns, target_ns: Ns) -> usize {
    if latency_ns == 0 {
        return 0;
    }
    let width = (target_ns >> SHIFT).max(1);
    (((latency_ns - 1) / width) as usize).min(BUCKETS - 1)
}

/// What kyber keeps of a dispatched request until it completes.
#[derive(Clone, Copy, Debug)]
struct Out {
    domain: u8,
    start_ns: Ns,
    dispatched_ns: Ns,
}

pub struct Kyber {
    target_ns: [Ns; TIMED],
    async_depth: u32,
    depth: [u32; DOMAINS],
    depth_min: [u32; DOMAINS],
    in_flight: [u32; DOMAINS],
    fifo: [VecDeque<ReqId>; DOMAINS],
    cur_domain: usize,
    batching: u32,
    /// By request index, while at the device.
    out: Vec<Option<Out>>,
    buckets: [[[u32; BUCKETS]; 2]; TIMED],
    /// When a domain with too few samples is looked at anyway.
    window_end: [Option<Ns>; TIMED],
    /// A p99 bucket seen while the device was not congested, kept for the next congestion.
    domain_p99: [Option<usize>; TIMED],
    timer_at: Option<Ns>,
    dispatched: [u64; DOMAINS],
    throttled: u64,
    adjustments: u64,
    congested: u64,
}

impl Kyber {
    pub fn new(read_lat_ns: Ns, write_lat_ns: Ns, nr_requests: u32) -> Self {
        Kyber {
            target_ns: [read_lat_ns, write_lat_ns, DISCARD_LAT_NS],
            // kyber_depth_updated: KYBER_ASYNC_PERCENT (75) of nr_requests.
            async_depth: (nr_requests * 3 / 4).max(1),
            depth: MAX_DEPTH,
            depth_min: MAX_DEPTH,
            in_flight: [0; DOMAINS],
            fifo: Default::default(),
            cur_domain: 0,
            batching: 0,
            out: Vec::new(),
            buckets: [[[0; BUCKETS]; 2]; TIMED],
            window_end: [None; TIMED],
            domain_p99: [None; TIMED],
            timer_at: None,
            dispatched: [0; DOMAINS],
            throttled: 0,
            adjustments: 0,
            congested: 0,
        }
    }

    /// The current token depth of each domain (read, write, discard, other).
    pub fn depths(&self) -> [u32; DOMAINS] {
        self.depth
    }

    /// The next request of the current domain, if it has one and a token is free.
    fn take(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        let d = self.cur_domain;
        self.fifo[d].front()?;
        if self.in_flight[d] >= self.depth[d] {
            self.throttled += 1;
            return None;
        }
        let rq = self.fifo[d].pop_front()?;
        cx.list_ops(1);
        self.batching += 1;
        self.in_flight[d] += 1;
        self.dispatched[d] += 1;
        let i = rq.index();
        if self.out.len() <= i {
            self.out.resize(i + 1, None);
        }
        self.out[i] = Some(Out {
            domain: d as u8,
            start_ns: cx.start_ns(rq),
            dispatched_ns: cx.now_ns(),
        });
        Some(rq)
    }

    /// The bucket holding percentile `p` of domain `d`'s histogram `kind`, or `None` while
    /// it has too few samples (`calculate_percentile`); the histogram starts over once read.
    fn percentile(&mut self, d: usize, kind: usize, p: u32, now: Ns) -> Option<usize> {
        let buckets = &mut self.buckets[d][kind];
        let samples: u32 = buckets.iter().sum();
        if samples == 0 {
            return None;
        }
        let end = *self.window_end[d].get_or_insert(now + SAMPLE_WINDOW_NS);
        if samples < MIN_SAMPLES && now < end {
            return None;
        }
        self.window_end[d] = None;
        let mut rank = (samples * p).div_ceil(100);
        let mut b = 0;
        while b < BUCKETS - 1 && buckets[b] < rank {
            rank -= buckets[b];
            b += 1;
        }
        *buckets = [0; BUCKETS];
        Some(b)
    }

    /// The periodic adjustment (`kyber_timer_fn`).
    fn adjust(&mut self, now: Ns) {
        let mut congested = false;
        for d in 0..TIMED {
            if self
                .percentile(d, IO, 90, now)
                .is_some_and(|b| b >= GOOD_BUCKETS)
            {
                congested = true;
            }
        }
        self.congested += u64::from(congested);
        for (d, &cap) in MAX_DEPTH.iter().enumerate().take(TIMED) {
            let mut p99 = self.percentile(d, TOTAL, 99, now);
            if congested {
                p99 = p99.or(self.domain_p99[d]);
                self.domain_p99[d] = None;
            } else if p99.is_some() {
                self.domain_p99[d] = p99;
            }
            let Some(b) = p99 else { continue };
            if congested || b >= GOOD_BUCKETS {
                let depth = ((self.depth[d] * (b as u32 + 1)) >> SHIFT).clamp(1, cap);
                if depth != self.depth[d] {
                    self.adjustments += 1;
                    self.depth[d] = depth;
                    self.depth_min[d] = self.depth_min[d].min(depth);
                }
            }
        }
    }
}

impl Elevator for Kyber {
    fn insert(&mut self, rq: ReqId, at_head: bool, cx: &mut SchedCtx<'_>) {
        // A request the driver gave back returns its token (requeue_request).
        if let Some(out) = self.out.get_mut(rq.index()).and_then(Option::take) {
            self.in_flight[out.domain as usize] -= 1;
        }
        let d = domain_of(cx.req(rq));
        if at_head {
            self.fifo[d].push_front(rq);
        } else {
            self.fifo[d].push_back(rq);
        }
        cx.list_ops(1);
    }

    fn dispatch(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        if self.batching < BATCH[self.cur_domain]
            && let Some(rq) = self.take(cx)
        {
            return Some(rq);
        }
        // A new batch, in the next domain that has a request and a token (back to this one
        // if no other has).
        self.batching = 0;
        for _ in 0..DOMAINS {
            self.cur_domain = (self.cur_domain + 1) % DOMAINS;
            if let Some(rq) = self.take(cx) {
                return Some(rq);
            }
        }
        None
    }

    fn has_work(&self) -> bool {
        self.fifo.iter().any(|f| !f.is_empty())
    }

    fn bio_merge(&mut self, bio: ReqId, cx: &mut SchedCtx<'_>) -> Option<(ReqId, MergeKind)> {
        // Kyber merges a bio with a request of its domain still queued; a merge never moves
        // a request between domains, so the FIFOs stay as they are.
        if let Some(rq) = cx.back_merge(bio) {
            return Some((rq, MergeKind::Back));
        }
        cx.front_merge(bio).map(|rq| (rq, MergeKind::Front))
    }

    fn completed(&mut self, rq: ReqId, cx: &mut SchedCtx<'_>) {
        let Some(out) = self.out.get_mut(rq.index()).and_then(Option::take) else {
            return;
        };
        let d = out.domain as usize;
        self.in_flight[d] -= 1;
        if d >= TIMED {
            return;
        }
        let now = cx.now_ns();
        let target = self.target_ns[d];
        self.buckets[d][TOTAL][bucket_of(now - out.start_ns, target)] += 1;
        self.buckets[d][IO][bucket_of(now - out.dispatched_ns, target)] += 1;
        // timer_reduce: due 100 ms after this completion unless already due sooner.
        let due = now + TIMER_NS;
        if self.timer_at.is_none_or(|t| t > due) {
            self.timer_at = Some(due);
            cx.wake_at(due);
        }
    }

    fn limit_depth(&self, req: &Request) -> u32 {
        // Reads and synchronous writes may use every tag (op_is_sync).
        if req.op == Op::Write && !req.flags.contains(ReqFlags::SYNC) {
            self.async_depth
        } else {
            u32::MAX
        }
    }

    fn min_shallow_depth(&self, bits_per_word: u32) -> u32 {
        // kyber_depth_updated: KYBER_ASYNC_PERCENT (75) of a word.
        bits_per_word * 75 / 100
    }

    fn timer(&mut self, cx: &mut SchedCtx<'_>) {
        let now = cx.now_ns();
        if self.timer_at != Some(now) {
            return;
        }
        self.timer_at = None;
        self.adjust(now);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for (d, n) in DOMAIN_NAMES.iter().enumerate() {
            out.push((format!("{n}_tokens"), f64::from(self.depth[d])));
            out.push((format!("{n}_tokens_min"), f64::from(self.depth_min[d])));
            out.push((format!("{n}_dispatched"), self.dispatched[d] as f64));
        }
        out.push(("async_depth".into(), f64::from(self.async_depth)));
        out.push(("throttled".into(), self.throttled as f64));
        out.push(("congested_periods".into(), self.congested as f64));
        out.push(("depth_adjustments".into(), self.adjustments as f64));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::*;

    const MS_NS: Ns = 1_000_000;

    #[test]
    fn buckets_are_a_quarter_of_the_target_wide_and_the_last_holds_the_rest() {
        let t = 2 * MS_NS;
        assert_eq!(bucket_of(0, t), 0);
        assert_eq!(bucket_of(t / 4, t), 0);
        assert_eq!(bucket_of(t / 4 + 1, t), 1);
        assert_eq!(bucket_of(t, t), 3);
        assert_eq!(bucket_of(t + 1, t), 4);
        assert_eq!(bucket_of(7 * t / 4 + 1, t), 7);
        assert_eq!(bucket_of(100 * t, t), 7);
    }

    /// Fills domain `d`'s histograms with `n` samples at `lat_ns`.
    fn samples(k: &mut Kyber, d: usize, n: u32, total_ns: Ns, io_ns: Ns) {
        let t = k.target_ns[d];
        k.buckets[d][TOTAL][bucket_of(total_ns, t)] += n;
        k.buckets[d][IO][bucket_of(io_ns, t)] += n;
    }

    #[test]
    fn a_congested_device_throttles_the_domain_within_its_target_by_its_p99() {
        let mut k = Kyber::new(2 * MS_NS, 10 * MS_NS, 256);
        // Reads at 3 ms at the device (p90 bucket 5: congested); writes at 4 ms in all
        // (p99 bucket 1 of 10 ms: depth x 2/4).
        samples(&mut k, 0, 500, 3 * MS_NS, 3 * MS_NS);
        samples(&mut k, 1, 500, 4 * MS_NS, 3 * MS_NS);
        k.adjust(0);
        assert_eq!(k.depths(), [256, 64, 64, 16]);
        // Again: 64 x 2/4; the reads (p99 bucket 5, over target) would be eased x 6/4 but
        // stay at their cap.
        samples(&mut k, 0, 500, 3 * MS_NS, 3 * MS_NS);
        samples(&mut k, 1, 500, 4 * MS_NS, 3 * MS_NS);
        k.adjust(TIMER_NS);
        assert_eq!(k.depths(), [256, 32, 64, 16]);
        // Calm: writes within their target keep their depth; writes over it are eased by
        // their p99 (bucket 4 of 10 ms, 10-12.5 ms: x 5/4).
        samples(&mut k, 0, 500, MS_NS, MS_NS);
        samples(&mut k, 1, 500, 4 * MS_NS, MS_NS);
        k.adjust(2 * TIMER_NS);
        assert_eq!(k.depths()[1], 32);
        samples(&mut k, 0, 500, MS_NS, MS_NS);
        samples(&mut k, 1, 500, 11 * MS_NS, MS_NS);
        k.adjust(3 * TIMER_NS);
        assert_eq!(k.depths()[1], 40);
    }

    #[test]
    fn too_few_samples_wait_for_a_second_and_a_calm_p99_serves_the_next_congestion() {
        let mut k = Kyber::new(2 * MS_NS, 10 * MS_NS, 256);
        samples(&mut k, 1, 100, 4 * MS_NS, MS_NS);
        k.adjust(0);
        assert_eq!(k.depths()[1], 128, "100 samples and no second yet");
        // The second passed: the p90 at the device (1 ms, calm) is read and the window
        // closes; the p99 in all, looked at in the same round, opens a new one (the two
        // histograms of a domain share one window, as the kernel's latency_timeout does).
        k.adjust(SAMPLE_WINDOW_NS);
        assert_eq!(k.domain_p99[1], None);
        k.adjust(2 * SAMPLE_WINDOW_NS);
        // p99 bucket 1 seen while calm: kept, the depth left alone.
        assert_eq!(k.depths()[1], 128);
        assert_eq!(k.domain_p99[1], Some(1));
        // Congestion without new write samples throttles the writes by the kept p99, once.
        let t = 2 * SAMPLE_WINDOW_NS;
        samples(&mut k, 0, 500, 3 * MS_NS, 3 * MS_NS);
        k.adjust(t + TIMER_NS);
        assert_eq!(k.depths()[1], 64);
        samples(&mut k, 0, 500, 3 * MS_NS, 3 * MS_NS);
        k.adjust(t + 2 * TIMER_NS);
        assert_eq!(k.depths()[1], 64);
    }

    #[test]
    fn domains_take_turns_in_batches_of_16_reads_and_8_writes() {
        let mut h = rig("kyber", &["block.nr_requests=256"], 1, MS);
        for k in 0..40 {
            h.submit_at(0, io(Op::Read, k * MIB, 4 * KIB, BE4));
            h.submit_at(0, io(Op::Write, (100 + k) * MIB, 4 * KIB, BE4));
        }
        h.run_all();
        let runs = op_runs(&h);
        let (r, w) = (Op::Read, Op::Write);
        let want = vec![(r, 16), (w, 8), (r, 16), (w, 8), (r, 8), (w, 24)];
        assert_eq!(runs, want);
    }

    #[test]
    fn asynchronous_writes_get_three_quarters_of_the_tags() {
        let k = Kyber::new(2 * MS_NS, 10 * MS_NS, 256);
        let mut w = io(Op::Write, 0, 4 * KIB, BE4);
        assert_eq!(
            k.limit_depth(&w),
            u32::MAX,
            "O_DIRECT writes are synchronous"
        );
        w.flags.remove(ReqFlags::SYNC);
        assert_eq!(k.limit_depth(&w), 192);
        let r = io(Op::Read, 0, 4 * KIB, BE4);
        assert_eq!(k.limit_depth(&r), u32::MAX);
    }
}
