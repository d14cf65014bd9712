//! `prio-advanced`: the study's advanced scheduler. `prio`'s three levels, dispatch list and
//! aging, plus:
//! - a sequential/random detector (Listing 5): a request starting within `seq_gap_sectors` of
//!   where the previous one ended raises the sequential score, any other the random score
//!   (each lowers the other by one); the mode is sequential while the sequential score is not
//!   below the random one, and a random mode ends the batch in progress. As in the study there
//!   is one detector for the device (`per_task_detector` 0, the study's stated limitation:
//!   two jobs interleaved look random to it); with `per_task_detector` 1 each job has its own
//!   (the kernel module keys it by the submitting task);
//! - on a rotational disk, a level is served in sector order from the last dispatch position
//!   (wrapping to the lowest sector), unless its oldest request waited `hdd_fifo_expire`; on
//!   flash, from its FIFO head;
//! - batching: after a request dispatched in sequential mode (its job's, per task), up to
//!   `seq_batch` requests in all go on from the same level before the levels are looked at
//!   again (aging still comes first);
//! - merging only for bios in sequential mode, and only between requests of the same level.
//!
//! The kernel module of the same name is `kernel/prio-advanced-iosched.c`.

use std::collections::BTreeSet;

use qoslab_engine::{Ns, ReqId};

use crate::elevator::{Elevator, MergeKind, SchedCtx, SchedOps};
use crate::sched::prio::{LEVELS, level_counters, level_of};

qoslab_engine::plugin! {
    pub static OPS: SchedOps = "prio-advanced", "prio plus a sequential/random detector (for the device, or per job), sector order with an expiry guard on a rotational disk, batching in sequential mode, same-level merging", elevator: true, merges_requests: true;
    /// `[block.prio-advanced]`.
    tunables struct PrioAdvancedConfig in PRIO_ADVANCED_TUNABLES {
        aging_expire: u64 = ms(500, "aging_expire: a NORMAL or LOW request that waited this long goes before higher levels, ms (as prio)"),
        seq_gap_sectors: u64 = count(256, "seq_gap_sectors: a request starting at most this many 512-byte sectors from the end of its job's previous one counts as sequential (the study gives no value: 256 = 128 KiB, one backup-sized request)"),
        hdd_fifo_expire: u64 = ms(200, "hdd_fifo_expire: on a rotational disk, a level's oldest request that waited this long goes before sector order, ms (the study gives no value: 200, below aging_expire so that a level's own order is fixed before aging steps in)"),
        seq_batch: u32 = count(8, "seq_batch: requests in a row from one level after a request dispatched in sequential mode (the study gives no value: 8 x 128 KiB = 1 MiB, a few ms of a disk's sequential transfer)").range(1.0, 1024.0),
        per_task_detector: u32 = count(0, "per_task_detector: 0 = one sequential/random detector for the device, as the study's Listing 5; 1 = one per job (the kernel module: per submitting task), the study's stated limitation lifted").range(0.0, 1.0),
    }
    build |_, cfg| build(cfg)
}

fn build(cfg: PrioAdvancedConfig) -> Option<Box<dyn Elevator>> {
    Some(Box::new(PrioAdvanced {
        aging_expire_ns: cfg.aging_expire * 1_000_000,
        seq_gap_bytes: cfg.seq_gap_sectors * 512,
        hdd_fifo_expire_ns: cfg.hdd_fifo_expire * 1_000_000,
        seq_batch: cfg.seq_batch,
        per_task: cfg.per_task_detector == 1,
        ..PrioAdvanced::default()
    }))
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    level: usize,
    fifo: (Ns, u64),
    offset: u64,
}

/// A detector (the device's, or a job's).
#[derive(Clone, Copy, Debug, Default)]
struct Detector {
    last_end: Option<u64>,
    seq_score: u32,
    rand_score: u32,
}

impl Detector {
    fn sequential(&self) -> bool {
        self.seq_score >= self.rand_score
    }
}

#[derive(Default)]
pub struct PrioAdvanced {
    aging_expire_ns: Ns,
    seq_gap_bytes: u64,
    hdd_fifo_expire_ns: Ns,
    seq_batch: u32,
    per_task: bool,
    /// The device's detector (`per_task` off).
    device: Detector,
    /// Requests inserted at the head, served first.
    head: std::collections::VecDeque<ReqId>,
    fifo: [BTreeSet<((Ns, u64), ReqId)>; LEVELS],
    sort: [BTreeSet<(u64, ReqId)>; LEVELS],
    entries: Vec<Entry>,
    jobs: Vec<Detector>,
    seq: u64,
    last_pos: u64,
    /// The level of the batch in progress and how many it dispatched (0: none).
    batch_level: usize,
    batching: u32,
    dispatched: [u64; LEVELS],
    aged: u64,
    expired: u64,
    batched: u64,
    head_dispatched: u64,
    bio_merges: u64,
}

impl PrioAdvanced {
    fn detector(&mut self, job: u32) -> &mut Detector {
        let j = job as usize;
        if j >= self.jobs.len() {
            self.jobs.resize(j + 1, Detector::default());
        }
        &mut self.jobs[j]
    }

    fn observe(&mut self, job: u32, offset: u64, end: u64) {
        let gap_limit = self.seq_gap_bytes;
        let d = if self.per_task {
            self.detector(job)
        } else {
            &mut self.device
        };
        if let Some(last) = d.last_end {
            if offset.abs_diff(last) <= gap_limit {
                d.seq_score += 1;
                d.rand_score = d.rand_score.saturating_sub(1);
            } else {
                d.rand_score += 1;
                d.seq_score = d.seq_score.saturating_sub(1);
            }
        }
        d.last_end = Some(end);
        if !self.per_task && !self.device.sequential() {
            self.batching = 0;
        }
    }

    /// Whether requests of `job` are treated as sequential now.
    fn sequential(&self, job: u32) -> bool {
        if !self.per_task {
            return self.device.sequential();
        }
        self.jobs
            .get(job as usize)
            .is_some_and(Detector::sequential)
    }

    fn remove(&mut self, id: ReqId, cx: &mut SchedCtx<'_>) {
        let e = self.entries[id.index()];
        self.fifo[e.level].remove(&(e.fifo, id));
        self.sort[e.level].remove(&(e.offset, id));
        cx.list_ops(1);
        cx.tree_op(self.sort[e.level].len() + 1);
    }

    /// The request level `l` offers next.
    fn pick(&mut self, l: usize, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        let &(head_key, head) = self.fifo[l].first()?;
        if !cx.rotational() {
            return Some(head);
        }
        if head_key.0 + self.hdd_fifo_expire_ns <= cx.now_ns() {
            self.expired += 1;
            return Some(head);
        }
        let sort = &self.sort[l];
        let next = sort
            .range((self.last_pos, ReqId(0))..)
            .next()
            .or_else(|| sort.first());
        Some(next.map_or(head, |&(_, id)| id))
    }
}

impl Elevator for PrioAdvanced {
    fn insert(&mut self, rq: ReqId, at_head: bool, cx: &mut SchedCtx<'_>) {
        if at_head {
            cx.list_ops(1);
            self.head.push_front(rq);
            return;
        }
        let r = *cx.req(rq);
        let level = level_of(r.prio);
        self.seq += 1;
        let fifo = (cx.now_ns(), self.seq);
        if rq.index() >= self.entries.len() {
            self.entries.resize(rq.index() + 1, Entry::default());
        }
        self.entries[rq.index()] = Entry {
            level,
            fifo,
            offset: r.offset_bytes,
        };
        self.fifo[level].insert((fifo, rq));
        self.sort[level].insert((r.offset_bytes, rq));
        cx.list_ops(1);
        cx.tree_op(self.sort[level].len());
        self.observe(r.job, r.offset_bytes, r.offset_bytes + r.len_bytes);
    }

    fn dispatch(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        if let Some(id) = self.head.pop_front() {
            cx.list_ops(1);
            self.head_dispatched += 1;
            let r = cx.req(id);
            self.last_pos = r.offset_bytes + r.len_bytes;
            return Some(id);
        }
        let now = cx.now_ns();
        let aged = (1..LEVELS)
            .filter_map(|l| self.fifo[l].first().map(|&((t, _), _)| (t, l)))
            .filter(|&(t, _)| t + self.aging_expire_ns <= now)
            .min()
            .map(|(_, l)| l);
        let level = if let Some(l) = aged {
            self.aged += 1;
            self.batching = 0;
            l
        } else if self.batching > 0
            && self.batching < self.seq_batch
            && !self.fifo[self.batch_level].is_empty()
        {
            self.batched += 1;
            self.batch_level
        } else {
            self.batching = 0;
            (0..LEVELS).find(|&l| !self.fifo[l].is_empty())?
        };
        let id = self.pick(level, cx)?;
        self.remove(id, cx);
        let r = *cx.req(id);
        self.last_pos = r.offset_bytes + r.len_bytes;
        self.dispatched[level] += 1;
        if self.sequential(r.job) {
            if self.batching == 0 || self.batch_level != level {
                self.batch_level = level;
                self.batching = 0;
            }
            self.batching += 1;
        } else {
            self.batching = 0;
        }
        Some(id)
    }

    fn has_work(&self) -> bool {
        !self.head.is_empty() || self.fifo.iter().any(|f| !f.is_empty())
    }

    fn bio_merge(&mut self, bio: ReqId, cx: &mut SchedCtx<'_>) -> Option<(ReqId, MergeKind)> {
        if !self.sequential(cx.req(bio).job) {
            return None;
        }
        let found = match cx.back_merge(bio) {
            Some(rq) => Some((rq, MergeKind::Back)),
            None => cx.front_merge(bio).map(|rq| (rq, MergeKind::Front)),
        };
        self.bio_merges += u64::from(found.is_some());
        found
    }

    fn allow_merge(&self, rq: ReqId, bio: ReqId, cx: &SchedCtx<'_>) -> bool {
        level_of(cx.req(rq).prio) == level_of(cx.req(bio).prio)
    }

    fn request_merged(&mut self, rq: ReqId, kind: MergeKind, old: u64, cx: &mut SchedCtx<'_>) {
        if kind == MergeKind::Front {
            let l = self.entries[rq.index()].level;
            self.entries[rq.index()].offset = cx.resort(&mut self.sort[l], rq, old);
        }
    }

    fn requests_merged(&mut self, _rq: ReqId, next: ReqId, cx: &mut SchedCtx<'_>) {
        self.remove(next, cx);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        level_counters(
            self.dispatched,
            &[
                ("aged_dispatches", self.aged),
                ("expired_dispatches", self.expired),
                ("batched_dispatches", self.batched),
                ("head_dispatches", self.head_dispatched),
                ("bio_merges", self.bio_merges),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::*;
    use qoslab_engine::{Op, Request};

    fn job_io(job: u32, offset: u64, len: u64, level: u8) -> Request {
        let mut r = io(Op::Read, offset, len, be(level));
        r.job = job;
        r
    }

    #[test]
    fn the_per_task_detector_follows_each_job_on_its_own() {
        let mut s = PrioAdvanced {
            seq_gap_bytes: 256 * 512,
            per_task: true,
            ..PrioAdvanced::default()
        };
        for k in 0..10 {
            s.observe(0, k * 128 * KIB, (k + 1) * 128 * KIB);
            s.observe(
                1,
                (k * 7919 % 1000) * MIB,
                (k * 7919 % 1000) * MIB + 4 * KIB,
            );
        }
        assert!(s.sequential(0));
        assert!(!s.sequential(1));
        // A gap of 128 KiB still counts as sequential, a larger one not.
        let mut s = PrioAdvanced {
            seq_gap_bytes: 256 * 512,
            per_task: true,
            ..PrioAdvanced::default()
        };
        s.observe(0, 0, 4 * KIB);
        s.observe(0, 132 * KIB, 136 * KIB);
        assert_eq!((s.jobs[0].seq_score, s.jobs[0].rand_score), (1, 0));
        s.observe(0, 300 * KIB, 304 * KIB);
        assert_eq!((s.jobs[0].seq_score, s.jobs[0].rand_score), (0, 1));
    }

    #[test]
    fn a_request_inserted_at_the_head_goes_first() {
        let mut reqs = qoslab_engine::Requests::with_capacity(4);
        let high = reqs.alloc(job_io(0, MIB, 4 * KIB, 0));
        let again = reqs.alloc(job_io(0, 5 * MIB, 4 * KIB, 7));
        let mut s = build_sched("prio-advanced", &[]);
        with_sched_ctx(&reqs, 0, |cx| {
            s.insert(high, false, cx);
            s.insert(again, true, cx);
        });
        let order: Vec<ReqId> = with_sched_ctx(&reqs, MS, |cx| {
            std::iter::from_fn(|| s.dispatch(cx)).collect()
        });
        assert_eq!(order, vec![again, high]);
    }

    #[test]
    fn on_a_rotational_disk_a_level_goes_in_sector_order_from_the_last_position() {
        // A rotational disk: sector order from the last position (50); flash: the FIFO head.
        for (rotational, order) in [
            ("block.rotational=1", [50, 60, 70, 90, 10, 30]),
            ("block.rotational=0", [50, 90, 10, 70, 30, 60]),
        ] {
            let mut h = rig(
                "prio-advanced",
                &["block.nr_requests=64", rotational],
                1,
                MS,
            );
            h.submit_at(0, job_io(0, 50 * MIB, 4 * KIB, 4));
            for k in [90, 10, 70, 30, 60] {
                h.submit_at(0, job_io(1, k * MIB, 4 * KIB, 4));
            }
            h.run_all();
            let offs: Vec<u64> = served(&h).iter().map(|s| s.offset_bytes / MIB).collect();
            assert_eq!(offs, order, "{rotational}");
        }
    }

    #[test]
    fn the_expiry_guard_takes_the_oldest_request_out_of_sector_order() {
        // Reads climbing from 100 MiB keep arriving; the one at 1 MiB waits for the guard.
        let mut h = rig(
            "prio-advanced",
            &[
                "block.nr_requests=4096",
                "block.rotational=1",
                "block.prio-advanced.hdd_fifo_expire=50",
            ],
            1,
            MS,
        );
        h.submit_at(0, job_io(1, 100 * MIB, 4 * KIB, 4));
        h.submit_at(0, job_io(2, MIB, 4 * KIB, 4));
        for k in 0..400 {
            h.submit_at(k * MS / 2, job_io(1, (101 + k) * MIB, 4 * KIB, 4));
        }
        h.run_all();
        let t = served_at(&h, MIB);
        assert!((50 * MS..=51 * MS).contains(&t), "{t}");
    }

    /// A sequential LOW job (128 KiB reads 256 KiB apart: gaps of 128 KiB) and a random HIGH
    /// one, all queued at once; the order the disk saw, by priority level.
    fn levels_served(detector: &str) -> Vec<u8> {
        let mut h = rig(
            "prio-advanced",
            &[
                "block.nr_requests=4096",
                "block.rotational=0",
                "block.prio-advanced.seq_batch=4",
                detector,
            ],
            1,
            MS,
        );
        for k in 0..8 {
            h.submit_at(0, job_io(0, k * 256 * KIB, 128 * KIB, 7));
        }
        for k in 0..4 {
            h.submit_at(0, job_io(1, (1000 + 7 * k) * MIB, 4 * KIB, 1));
        }
        h.run_all();
        served(&h).iter().map(|s| s.prio.level).collect()
    }

    #[test]
    fn a_sequential_job_gets_a_batch_with_its_own_detector() {
        // Once the sequential LOW job's first request is out, seq_batch go in a row although
        // HIGH requests wait.
        assert_eq!(
            levels_served("block.prio-advanced.per_task_detector=1"),
            vec![7, 7, 7, 7, 1, 1, 1, 1, 7, 7, 7, 7]
        );
    }

    #[test]
    fn the_devices_detector_sees_two_interleaved_jobs_as_random() {
        // Listing 5's one detector: the HIGH job's random reads, inserted last, leave the
        // device in random mode, which ends the batch: strict priority after the first.
        assert_eq!(
            levels_served("block.prio-advanced.per_task_detector=0"),
            vec![7, 1, 1, 1, 1, 7, 7, 7, 7, 7, 7, 7]
        );
    }

    #[test]
    fn a_random_job_merges_nothing() {
        // Random 4 KiB reads of a job that jumps about do not merge even where they touch.
        let mut h = rig("prio-advanced", &["block.nr_requests=64"], 1, MS);
        for k in [0, 500, 100, 900, 300, 301, 302] {
            h.submit_at(0, job_io(0, k * 4 * KIB + (k % 2) * MIB, 4 * KIB, 4));
        }
        h.run_all();
        assert_eq!(counter(&h, "read_merges"), 0.0);
    }
}
