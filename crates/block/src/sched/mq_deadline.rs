//! `mq-deadline` as current Linux has it (Documentation/block/deadline-iosched.rst,
//! block/mq-deadline.c's documented behaviour): per I/O priority class (RT, BE, IDLE) a read
//! and a write FIFO ordered by deadline and a read and a write tree ordered by sector.
//!
//! Dispatch, in order:
//! 1. while two classes or more have requests, a request of a lower class that has waited
//!    `prio_aging_expire` goes first (so RT cannot starve BE and IDLE for ever);
//! 2. otherwise the highest class with requests is served, and a lower class only when no
//!    request of a higher one is queued or at the device;
//! 3. within a class: a batch goes on in sector order in its direction while it has fewer
//!    than `fifo_batch` requests; a new batch picks reads unless writes waited through
//!    `writes_starved` read batches; it starts at the FIFO head when that head's deadline
//!    (`read_expire`, `write_expire` after insertion) passed, else at the next request in
//!    sector order after the last one dispatched in that direction.

use std::collections::BTreeSet;

use qoslab_engine::{Ns, Op, ReqId, Request};

use crate::elevator::{Elevator, MergeKind, SchedCtx, SchedOps, SchedSetup, class_of};

qoslab_engine::plugin! {
    pub static OPS: SchedOps = "mq-deadline", "Linux's deadline scheduler: per priority class, read and write FIFOs with deadlines and sector-sorted trees served in batches", elevator: true, merges_requests: true;
    /// `[block.mq-deadline]`: /sys/block/DEV/queue/iosched/* (deadline-iosched.rst).
    tunables struct MqDeadlineConfig in MQ_DEADLINE_TUNABLES {
        read_expire: u64 = ms(500, "read_expire: a read's deadline after it enters the scheduler, ms (kernel default 500)"),
        write_expire: u64 = ms(5000, "write_expire: a write's deadline, ms (kernel default 5000)"),
        writes_starved: u32 = count(2, "writes_starved: read batches that may pass waiting writes before a write batch (kernel default 2)").range(0.0, 1024.0),
        fifo_batch: u32 = count(16, "fifo_batch: requests of one direction dispatched in sector order before the deadlines are looked at again (kernel default 16)").range(1.0, 65536.0),
        front_merges: u32 = count(1, "front_merges: 1 = a bio may join a queued request that starts where the bio ends (kernel default 1)").range(0.0, 1.0),
        async_depth: u32 = count(0, "async_depth: scheduler tags a write (synchronous or not: only reads pass, as in dd_limit_depth) may find in use and still get one; 0 = the kernel's 3/4 of nr_requests (dd_depth_updated)").range(0.0, 65536.0),
        prio_aging_expire: u64 = ms(10000, "prio_aging_expire: a request of a lower priority class that waited this long goes before higher classes, ms (kernel default 10000)"),
    }
    build |s, cfg| build(s, cfg)
}

fn build(s: &SchedSetup<'_>, cfg: MqDeadlineConfig) -> Option<Box<dyn Elevator>> {
    let async_depth = match cfg.async_depth {
        0 => (3 * s.queue.nr_requests / 4).max(1),
        d => d,
    };
    Some(Box::new(MqDeadline {
        read_expire_ns: cfg.read_expire * 1_000_000,
        write_expire_ns: cfg.write_expire * 1_000_000,
        writes_starved: cfg.writes_starved,
        fifo_batch: cfg.fifo_batch,
        front_merges: cfg.front_merges == 1,
        async_depth,
        prio_aging_expire_ns: cfg.prio_aging_expire * 1_000_000,
        ..MqDeadline::default()
    }))
}

const CLASSES: usize = 3;

/// What the scheduler keeps of a queued request.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    class: usize,
    dir: usize,
    /// Its FIFO key: deadline, then insertion order.
    fifo: (Ns, u64),
    offset: u64,
    /// Insertion time (for aging).
    inserted_ns: Ns,
}

#[derive(Debug, Default)]
struct PerClass {
    fifo: [BTreeSet<((Ns, u64), ReqId)>; 2],
    sort: [BTreeSet<(u64, ReqId)>; 2],
    /// Requests dispatched and not yet completed.
    at_device: u64,
    dispatched: u64,
}

impl PerClass {
    fn queued(&self) -> usize {
        self.fifo[0].len() + self.fifo[1].len()
    }
    /// Queued here or at the device (the kernel's `dd_queued`).
    fn busy(&self) -> bool {
        self.queued() > 0 || self.at_device > 0
    }
}

#[derive(Debug, Default)]
pub struct MqDeadline {
    read_expire_ns: Ns,
    write_expire_ns: Ns,
    writes_starved: u32,
    fifo_batch: u32,
    front_merges: bool,
    async_depth: u32,
    prio_aging_expire_ns: Ns,
    classes: [PerClass; CLASSES],
    entries: Vec<Entry>,
    /// Class of each dispatched request, by id, until it completes.
    out_class: Vec<u8>,
    seq: u64,
    /// The direction of the batch in progress and how many it dispatched.
    last_dir: usize,
    batching: u32,
    /// Read batches started while writes waited.
    starved: u32,
    /// Where the last dispatch in each direction ended.
    latest_pos: [u64; 2],
    aged: u64,
    expired: u64,
}

fn dir_of(req: &Request) -> usize {
    usize::from(req.op != Op::Read)
}

impl MqDeadline {
    fn entry(&self, id: ReqId) -> Entry {
        self.entries[id.index()]
    }

    fn add(&mut self, id: ReqId, e: Entry, cx: &mut SchedCtx<'_>) {
        if id.index() >= self.entries.len() {
            self.entries.resize(id.index() + 1, Entry::default());
        }
        self.entries[id.index()] = e;
        let c = &mut self.classes[e.class];
        c.fifo[e.dir].insert((e.fifo, id));
        c.sort[e.dir].insert((e.offset, id));
        cx.list_ops(1);
        cx.tree_op(c.sort[e.dir].len());
    }

    fn remove(&mut self, id: ReqId, cx: &mut SchedCtx<'_>) {
        let e = self.entry(id);
        let c = &mut self.classes[e.class];
        c.fifo[e.dir].remove(&(e.fifo, id));
        c.sort[e.dir].remove(&(e.offset, id));
        cx.list_ops(1);
        cx.tree_op(c.sort[e.dir].len() + 1);
    }

    /// The FIFO head of class `c`, direction `dir`.
    fn fifo_head(&self, c: usize, dir: usize) -> Option<(Entry, ReqId)> {
        let &(_, id) = self.classes[c].fifo[dir].first()?;
        Some((self.entry(id), id))
    }

    /// The first request at or after the last dispatch position in direction `dir`.
    fn next_in_sector_order(&self, c: usize, dir: usize) -> Option<ReqId> {
        self.classes[c].sort[dir]
            .range((self.latest_pos[dir], ReqId(0))..)
            .next()
            .map(|&(_, id)| id)
    }

    fn expired(&self, c: usize, dir: usize, now: Ns) -> bool {
        self.fifo_head(c, dir).is_some_and(|(e, _)| e.fifo.0 <= now)
    }

    /// One request of class `c` inserted no later than `latest_insert_ns`.
    fn dispatch_class(
        &mut self,
        c: usize,
        latest_insert_ns: Ns,
        cx: &mut SchedCtx<'_>,
    ) -> Option<ReqId> {
        let now = cx.now_ns();
        // A batch in progress goes on in sector order.
        let mut pick = None;
        if self.batching < self.fifo_batch {
            pick = self.next_in_sector_order(c, self.last_dir);
        }
        if pick.is_none() {
            let reads = !self.classes[c].fifo[0].is_empty();
            let writes = !self.classes[c].fifo[1].is_empty();
            let dir = if reads && !(writes && self.starved >= self.writes_starved) {
                if writes {
                    self.starved += 1;
                }
                0
            } else if writes {
                self.starved = 0;
                1
            } else {
                return None;
            };
            let next = self.next_in_sector_order(c, dir);
            let rq = if self.expired(c, dir, now) || next.is_none() {
                if self.expired(c, dir, now) {
                    self.expired += 1;
                }
                self.fifo_head(c, dir).map(|(_, id)| id)
            } else {
                next
            };
            self.last_dir = dir;
            self.batching = 0;
            pick = rq;
        }
        let id = pick?;
        if self.entry(id).inserted_ns > latest_insert_ns {
            return None;
        }
        self.batching += 1;
        self.remove(id, cx);
        let r = cx.req(id);
        self.latest_pos[dir_of(r)] = r.offset_bytes + r.len_bytes;
        self.classes[c].at_device += 1;
        self.classes[c].dispatched += 1;
        if id.index() >= self.out_class.len() {
            self.out_class.resize(id.index() + 1, 0);
        }
        self.out_class[id.index()] = c as u8;
        Some(id)
    }
}

impl Elevator for MqDeadline {
    fn insert(&mut self, rq: ReqId, _at_head: bool, cx: &mut SchedCtx<'_>) {
        let r = cx.req(rq);
        let dir = dir_of(r);
        let expire = if dir == 0 {
            self.read_expire_ns
        } else {
            self.write_expire_ns
        };
        let (class, offset, now) = (class_of(r), r.offset_bytes, cx.now_ns());
        self.seq += 1;
        let e = Entry {
            class,
            dir,
            fifo: (now + expire, self.seq),
            offset,
            inserted_ns: now,
        };
        self.add(rq, e, cx);
    }

    fn dispatch(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        let now = cx.now_ns();
        let busy = self.classes.iter().filter(|c| c.busy()).count();
        if busy >= 2
            && let Some(latest) = now.checked_sub(self.prio_aging_expire_ns)
        {
            for c in 1..CLASSES {
                let aged = (0..2).any(|d| {
                    self.fifo_head(c, d)
                        .is_some_and(|(e, _)| e.inserted_ns <= latest)
                });
                if aged && let Some(id) = self.dispatch_class(c, latest, cx) {
                    self.aged += 1;
                    return Some(id);
                }
            }
        }
        for c in 0..CLASSES {
            if let Some(id) = self.dispatch_class(c, Ns::MAX, cx) {
                return Some(id);
            }
            if self.classes[c].busy() {
                // A lower class waits while this one has requests here or at the device;
                // aging (above) is its way through. Ask to be woken when a head ages.
                self.wake_for_aging(c, cx);
                return None;
            }
        }
        None
    }

    fn has_work(&self) -> bool {
        self.classes.iter().any(|c| c.queued() > 0)
    }

    fn bio_merge(&mut self, bio: ReqId, cx: &mut SchedCtx<'_>) -> Option<(ReqId, MergeKind)> {
        if let Some(rq) = cx.back_merge(bio) {
            return Some((rq, MergeKind::Back));
        }
        if self.front_merges
            && let Some(rq) = cx.front_merge(bio)
        {
            return Some((rq, MergeKind::Front));
        }
        None
    }

    fn request_merged(&mut self, rq: ReqId, kind: MergeKind, old: u64, cx: &mut SchedCtx<'_>) {
        if kind == MergeKind::Front {
            let e = self.entry(rq);
            let tree = &mut self.classes[e.class].sort[e.dir];
            self.entries[rq.index()].offset = cx.resort(tree, rq, old);
        }
    }

    fn requests_merged(&mut self, rq: ReqId, next: ReqId, cx: &mut SchedCtx<'_>) {
        // The survivor keeps the earlier deadline of the two (and its place in the FIFO).
        let n = self.entry(next);
        self.remove(next, cx);
        let e = self.entry(rq);
        if n.fifo < e.fifo {
            let c = &mut self.classes[e.class];
            c.fifo[e.dir].remove(&(e.fifo, rq));
            c.fifo[e.dir].insert((n.fifo, rq));
            self.entries[rq.index()].fifo = n.fifo;
            self.entries[rq.index()].inserted_ns = n.inserted_ns.min(e.inserted_ns);
        }
    }

    fn completed(&mut self, rq: ReqId, _cx: &mut SchedCtx<'_>) {
        let c = self.out_class[rq.index()] as usize;
        self.classes[c].at_device -= 1;
    }

    fn limit_depth(&self, req: &Request) -> u32 {
        // Only synchronous reads may use every tag; writes, synchronous ones (O_DIRECT,
        // REQ_SYNC) included, are held to async_depth (dd_limit_depth).
        if req.op == Op::Write {
            self.async_depth
        } else {
            u32::MAX
        }
    }

    fn min_shallow_depth(&self, _bits_per_word: u32) -> u32 {
        // dd_depth_updated in the pinned kernel (6.1.176) sets 1.
        1
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for (c, name) in ["rt", "be", "idle"].iter().enumerate() {
            out.push((
                format!("{name}_dispatched"),
                self.classes[c].dispatched as f64,
            ));
        }
        out.push(("aged_dispatches".into(), self.aged as f64));
        out.push(("expired_batches".into(), self.expired as f64));
        out
    }
}

impl MqDeadline {
    /// The kernel re-runs the queue on every completion; a lower class held back only by a
    /// higher one's requests at the device gets a wake-up when its oldest request ages.
    fn wake_for_aging(&self, above: usize, cx: &mut SchedCtx<'_>) {
        let oldest = (above + 1..CLASSES)
            .flat_map(|c| (0..2).filter_map(move |d| self.fifo_head(c, d)))
            .map(|(e, _)| e.inserted_ns)
            .min();
        if let Some(t) = oldest {
            cx.wake_at(t + self.prio_aging_expire_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testbed::*;
    use qoslab_engine::{IoPrio, IoPrioClass, Ns, Op};

    fn read(k: u64) -> qoslab_engine::Request {
        io(Op::Read, k * MIB, 4 * KIB, BE4)
    }

    /// A read far below a stream of reads climbing in sector order, behind a read that holds
    /// the disk: when does it reach the disk?
    fn skipped_read_waits(read_expire_ms: u64) -> Ns {
        let set = format!("block.mq-deadline.read_expire={read_expire_ms}");
        let mut h = rig("mq-deadline", &[&set, "block.nr_requests=4096"], 1, MS);
        h.submit_at(0, read(1000));
        h.submit_at(0, read(0));
        for k in 0..800 {
            h.submit_at(k * MS / 2, read(1001 + k));
        }
        h.run_all();
        served_at(&h, 0)
    }

    #[test]
    fn no_read_waits_longer_than_read_expire_plus_one_batch() {
        // Sector order alone would serve the low read after the whole stream (~800 ms); its
        // deadline brings it in once read_expire has passed, after the batch in progress
        // (fifo_batch 16 requests of 1 ms).
        let t = skipped_read_waits(100);
        assert!((100 * MS..=(100 + 16) * MS).contains(&t), "{t}");
        let t = skipped_read_waits(500);
        assert!((500 * MS..=(500 + 16) * MS).contains(&t), "{t}");
        let t = skipped_read_waits(5000);
        assert!(t > 700 * MS, "{t}");
    }

    #[test]
    fn writes_starved_read_batches_pass_waiting_writes_then_a_write_batch_goes() {
        let mut h = rig("mq-deadline", &["block.nr_requests=4096"], 1, MS);
        for k in 0..96 {
            h.submit_at(0, read(k));
        }
        for k in 0..48 {
            h.submit_at(0, io(Op::Write, (512 + k) * MIB, 4 * KIB, BE4));
        }
        h.run_all();
        let runs = op_runs(&h);
        // The first read found the disk idle and started a batch of 16 before any write was
        // queued; from then on: 2 (writes_starved) read batches of 16 (fifo_batch), then 16
        // writes.
        use Op::{Read as R, Write as W};
        assert_eq!(
            runs,
            vec![(R, 48), (W, 16), (R, 32), (W, 16), (R, 16), (W, 16)]
        );
    }

    #[test]
    fn fifo_batch_requests_go_out_in_sector_order_from_the_expired_fifo_head() {
        // All reads expire 1 ms after insertion; each batch starts at the oldest and goes on
        // in sector order for fifo_batch (4) requests or until none is left above it.
        let order = [9, 3, 14, 1, 7, 12, 5, 16, 2, 10, 6, 13, 4, 11, 8, 15];
        let run = |sets: &[&str]| {
            let mut sets = sets.to_vec();
            sets.push("block.nr_requests=64");
            let mut h = rig("mq-deadline", &sets, 1, MS);
            h.submit_at(0, read(0));
            for k in order {
                h.submit_at(0, read(k));
            }
            h.run_all();
            served(&h)
                .iter()
                .map(|s| s.offset_bytes / MIB)
                .collect::<Vec<_>>()
        };
        let batched = run(&[
            "block.mq-deadline.read_expire=1",
            "block.mq-deadline.fifo_batch=4",
        ]);
        assert_eq!(
            batched,
            vec![0, 1, 2, 3, 9, 10, 11, 12, 14, 15, 16, 7, 8, 13, 5, 6, 4]
        );
        // Nothing expires: one sweep up in sector order.
        assert_eq!(run(&[]), (0..=16).collect::<Vec<_>>());
    }

    /// A best-effort read behind a stream of real-time reads that keeps RT busy for 1 s.
    fn be_read_reaches_the_disk(prio_aging_expire_ms: u64) -> Ns {
        let set = format!("block.mq-deadline.prio_aging_expire={prio_aging_expire_ms}");
        let mut h = rig("mq-deadline", &[&set, "block.nr_requests=4096"], 1, MS);
        for k in 0..2000 {
            h.submit_at(k * MS / 2, io(Op::Read, k * MIB, 4 * KIB, RT0));
        }
        h.submit_at(MS, io(Op::Read, 5000 * MIB, 4 * KIB, BE4));
        h.run_all();
        served_at(&h, 5000 * MIB)
    }

    #[test]
    fn prio_aging_expire_lets_a_starved_lower_class_through() {
        let t = be_read_reaches_the_disk(100);
        assert!(((1 + 100) * MS..=(1 + 100 + 1) * MS).contains(&t), "{t}");
        // Without aging inside the run, best effort waits for the whole real-time stream.
        let t = be_read_reaches_the_disk(10_000);
        assert!(t >= 1999 * MS, "{t}");
    }

    #[test]
    fn the_highest_class_goes_first() {
        let mut h = rig("mq-deadline", &["block.nr_requests=64"], 1, MS);
        let idle = IoPrio {
            class: IoPrioClass::Idle,
            level: 7,
        };
        h.submit_at(0, io(Op::Read, 0, 4 * KIB, BE4));
        h.submit_at(0, io(Op::Read, 10 * MIB, 4 * KIB, idle));
        h.submit_at(0, io(Op::Read, 20 * MIB, 4 * KIB, BE4));
        h.submit_at(0, io(Op::Read, 30 * MIB, 4 * KIB, RT0));
        h.run_all();
        let offs: Vec<u64> = served(&h).iter().map(|s| s.offset_bytes / MIB).collect();
        assert_eq!(offs, vec![0, 30, 20, 10]);
    }
}
