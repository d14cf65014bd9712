//! The block layer stage: what happens to a bio between the job and the driver (Linux
//! `blk_mq_submit_bio` and the hardware-queue dispatch), with the scheduler as a plug-in.
//!
//! A bio from a job:
//! 1. takes the priority the kernel gives it (a job without one: best effort 4);
//! 2. is split into pieces of at most `max_sectors_kb` and `max_segments` segments;
//! 3. inside a plugged batch, tries to join the last request of the job's plug;
//! 4. tries to join a request waiting in the scheduler (the scheduler's `bio_merge`);
//! 5. takes a scheduler tag (`nr_requests` per hardware queue, less for a request the
//!    scheduler's `limit_depth` holds to a shallower depth), or waits for one;
//! 6. goes into the job's plug (a batch), or to the scheduler, or, without one, straight to
//!    the driver.
//!
//! The dispatch loop of a host first offers the requests its hardware queues hold (the driver
//! refused them, or, without a scheduler, they wait for room), then asks the scheduler while
//! the device has room: `queue_depth` per hardware queue when the block layer keeps that limit
//! (an ATA disk), else until the driver says busy (an NVMe host with no command id free).
//! It runs after an insertion, a completion, a wake-up the scheduler asked for, and when the
//! driver has room again.
//!
//! On a queue with a volatile write cache, a request that needs a FLUSH before or after its
//! data (a write with PREFLUSH, or with FUA where the device lacks it; an empty flush) leaves
//! step 6 for its hardware queue's flush queue ([`crate::flush`], Linux's `blk_insert_flush`):
//! the FLUSHes are requests of their own, merged there, sent at the tail of the hardware
//! queue's dispatch list and the data at its head, neither through the scheduler.

use std::collections::{BTreeSet, VecDeque};

use qoslab_engine::{
    Admission, Command, Control, ControlStatus, LatencyHist, Notice, Ns, Op, ReqFlags, ReqId,
    Stage, StageCtx,
};

use crate::WriteCache;
use crate::config::QueueSetup;
use crate::elevator::{Elevator, MergeKind, OpCount, RqMeta, SchedCtx, SchedOps, SchedSetup};
use crate::flush::{FlushAction, FlushQueue};
use crate::ioprio;
use crate::merge::{MergeIndex, mergeable};

/// Linux plugs an `io_submit` of more than this many I/Os (fs/aio.c `AIO_PLUG_THRESHOLD`;
/// io_uring does the same above 2).
const AIO_PLUG_THRESHOLD: usize = 2;
/// A plug is flushed before it holds more requests than this (block/blk.h
/// `BLK_MAX_REQUEST_COUNT`)...
const BLK_MAX_REQUEST_COUNT: usize = 32;
/// ...or once its last request is this large (`BLK_PLUG_FLUSH_SIZE`).
const BLK_PLUG_FLUSH_SIZE: u64 = 128 * 1024;

/// Timed events of the block layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockEvent {
    /// The instant's submissions are over: plugged batches still open are flushed.
    Unplug,
    /// A wake-up host `host`'s scheduler asked for.
    Wake { host: u16 },
    /// Job `job`'s request that waited for a tag has one: the job's sleeping submission call
    /// goes on with the bios it had not reached (the rest of a split bio or of a batch).
    Resume { job: u32 },
    /// Ordered stream `stream` may go on (its thread woke, its control path answered).
    Order { stream: u32 },
}

/// Where a request (or bio) is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Place {
    #[default]
    Nowhere,
    /// In its job's submission batch, not looked at yet.
    Batch,
    /// In its job's plug.
    Plug,
    /// Waiting for a scheduler tag.
    TagWait,
    /// Behind its job's request that waits for a tag: the submission call has not reached it.
    Deferred,
    /// In the scheduler.
    Sched,
    /// In its hardware queue's dispatch list.
    HctxList,
    /// Out at the driver.
    Driver,
    /// Joined another request; completes with it.
    Merged,
    /// Split into pieces; completes with the last one.
    Split,
    /// In its hardware queue's flush queue, waiting for a FLUSH.
    FlushWait,
}

/// A request's part in a flush sequence ([`crate::flush`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum FlushRole {
    #[default]
    None,
    /// A request whose sequence runs in the flush queue (its data, if it has any, goes out as
    /// its DATA step).
    Sequenced,
    /// A FLUSH the flush queue sent (`flush_rq`): this layer's own request.
    Flush,
}

/// The block layer's own record of a request (indexed by request id).
#[derive(Clone, Copy, Debug)]
struct RqState {
    place: Place,
    hctx: u32,
    has_tag: bool,
    /// Entered the scheduler or its dispatch list.
    insert_ns: Ns,
    /// Bios that joined it, in order (a chain through their own records).
    next_bio: ReqId,
    last_bio: ReqId,
    /// Its own extent before bios joined it.
    grown: bool,
    orig_offset: u64,
    orig_len: u64,
    /// The bio this piece was split from.
    split_parent: ReqId,
    /// Pieces of a split bio still outstanding.
    parts_left: u32,
    /// (job, queued_ns, offset) when it went to the driver: how a copy the driver makes of it
    /// is recognised.
    issued: (u32, Ns, u64),
    flush: FlushRole,
    /// A sequenced request's own flags, given back when it completes (its data step goes out
    /// without PREFLUSH, and without FUA where the device lacks it).
    flush_flags: ReqFlags,
}

impl Default for RqState {
    fn default() -> Self {
        RqState {
            place: Place::Nowhere,
            hctx: 0,
            has_tag: false,
            insert_ns: 0,
            next_bio: ReqId::NONE,
            last_bio: ReqId::NONE,
            grown: false,
            orig_offset: 0,
            orig_len: 0,
            split_parent: ReqId::NONE,
            parts_left: 0,
            issued: (0, 0, 0),
            flush: FlushRole::None,
            flush_flags: ReqFlags::empty(),
        }
    }
}

/// One hardware queue (blk-mq's hctx).
#[derive(Debug, Default)]
struct Hctx {
    host: u16,
    /// Requests for the driver ahead of the scheduler (hctx->dispatch).
    dispatch: VecDeque<ReqId>,
    /// Bios waiting for a scheduler tag, in arrival order.
    tag_wait: VecDeque<TagWaiter>,
    sched_tags: u32,
    in_driver: u32,
    /// Tags freed while someone slept since the last wake-up (sbitmap's completion count).
    frees: u32,
    /// The wait queue the next sleeper goes to (hctx->wait_index) and the one the next
    /// wake-up looks at first (the sbitmap's wake_index).
    wait_index: u8,
    wake_index: u8,
    /// Its flush queue (`hctx->fq`).
    flush: FlushQueue,
}

/// A bio asleep for a tag.
#[derive(Clone, Copy, Debug)]
struct TagWaiter {
    id: ReqId,
    /// The tags it may find in use (its scheduler's limit_depth).
    depth: u32,
    /// Its sbitmap wait queue.
    queue: u8,
}

/// sbitmap's wait queues per tag map (SBQ_WAIT_QUEUES) and the most tags one wake-up is for
/// (SBQ_WAKE_BATCH).
const SBQ_WAIT_QUEUES: u32 = 8;
const SBQ_WAKE_BATCH: u32 = 8;

/// How many freed tags wake sleepers, for a tag map of `depth` whose scheduler lets no request
/// use fewer than `min_shallow` tags of a word (sbq_calc_wake_batch): every word's share, at
/// most `min_shallow`, over the 8 wait queues, within 1..=8. The map's words have
/// 2^shift bits, shift the largest at most 6 with 4 x 2^shift <= depth
/// (sbitmap_calculate_shift on a 64-bit machine).
pub fn sbitmap_wake_batch(depth: u32, min_shallow: impl Fn(u32) -> u32) -> u32 {
    let mut shift = 6;
    if depth >= 4 {
        while (4 << shift) > depth {
            shift -= 1;
        }
    }
    let word = 1u32 << shift;
    let shallow = word.min(min_shallow(word));
    let usable = (depth >> shift) * shallow + (depth & (word - 1)).min(shallow);
    (usable / SBQ_WAIT_QUEUES).clamp(1, SBQ_WAKE_BATCH)
}

/// The scheduler side of one host.
struct HostQueue {
    elevator: Option<Box<dyn Elevator>>,
    merges: MergeIndex,
    /// Wake-ups already scheduled.
    wakes: BTreeSet<Ns>,
    ops: OpCount,
    /// Freed tags per wake-up of a sleeper ([`sbitmap_wake_batch`]).
    wake_batch: u32,
}

/// A job's submission in progress.
#[derive(Debug, Default)]
struct JobPlug {
    /// Bios of a submission call still coming in.
    batch: Vec<ReqId>,
    /// Requests held until the call ends (blk_plug).
    plug: Vec<ReqId>,
    /// Requests of the job waiting for a tag: while there is one, the job's submission call
    /// sleeps (blk_mq_get_tag) and its next bios wait in `deferred`, not yet looked at.
    waiting: u32,
    deferred: VecDeque<ReqId>,
}

/// Counters, named as `/sys/block/DEV/stat` names them (Documentation/block/stat.rst), per
/// operation (read, write, discard, flush).
#[derive(Clone, Debug, Default)]
pub struct BlockStats {
    /// Bios from the jobs.
    pub bios: [u64; 4],
    /// Requests completed (after merging and splitting).
    pub ios: [u64; 4],
    /// Bios (and requests) that joined a queued request.
    pub merges: [u64; 4],
    pub sectors: [u64; 4],
    /// Sum over completed requests of their time from creation to completion.
    pub ticks_ns: [u128; 4],
    /// Bios split, and the pieces they became.
    pub bio_splits: u64,
    pub split_pieces: u64,
    /// Merges with the last request of a plug.
    pub plug_merges: u64,
    /// Bios that waited for a scheduler tag.
    pub tag_waits: u64,
    /// Times a job's submission call slept for a tag (it then submitted nothing more until it
    /// had one).
    pub submit_sleeps: u64,
    /// Scheduler tags held at once in one hardware context, at most: where a scheduler's
    /// `limit_depth` binds, this is the depth it allowed.
    pub sched_tags_max: u64,
    /// Requests that waited in the block layer (scheduler, dispatch list, tag wait).
    pub waited: u64,
    /// Requests out at the driver now, and at most.
    pub in_flight: u64,
    pub in_flight_max: u64,
    /// Time with at least one request out at the driver.
    pub io_ticks_ns: u64,
    busy_since: Ns,
    /// Requests held in the block layer at once, at most.
    pub queued_max: u64,
    /// Flushes completed here because the device has no volatile write cache.
    pub flushes_not_sent: u64,
    /// Requests that went through a flush queue (a FLUSH before or after their data), and the
    /// FLUSHes those queues sent for them (also in `ios`, as flushes).
    pub flush_sequences: u64,
    pub flushes_sent: u64,
    /// Time from entering the scheduler (or dispatch list) to the driver, reads and writes:
    /// the waits of no time (a request issued directly, every request without a scheduler)
    /// counted in `sched_zero_waits`, the others in `sched_wait_nonzero` (see [`Self::sched_wait`]).
    // Speed: a zero recorded into the histogram costs as much as any value, once per request.
    sched_wait_nonzero: [LatencyHist; 2],
    sched_zero_waits: [u64; 2],
    /// Time at the device (driver to completion), reads and writes.
    pub device: [LatencyHist; 2],
}

impl BlockStats {
    /// The time requests of op `k` (read 0, write 1) waited from entering the scheduler (or
    /// dispatch list) to the driver.
    pub fn sched_wait(&self, k: usize) -> LatencyHist {
        let mut h = self.sched_wait_nonzero[k].clone();
        h.record_n(0, self.sched_zero_waits[k]);
        h
    }

    #[inline]
    fn record_sched_wait(&mut self, k: usize, waited_ns: Ns) {
        if waited_ns == 0 {
            self.sched_zero_waits[k] += 1;
        } else {
            self.sched_wait_nonzero[k].record(waited_ns);
        }
    }
}

/// The block layer of every host on the path.
pub struct BlockLayer {
    setup: QueueSetup,
    sched: &'static SchedOps,
    hosts: Vec<HostQueue>,
    hctxs: Vec<Hctx>,
    /// (host, queue key) -> hardware queue, in order of first use.
    index: Vec<((u16, u16), usize)>,
    rq: Vec<RqState>,
    meta: Vec<RqMeta>,
    plugs: Vec<JobPlug>,
    unplug_armed: bool,
    held: usize,
    /// Some host has a scheduler.
    scheduled: bool,
    /// No host has a scheduler and the driver keeps the depth: a request that finds nothing
    /// waiting goes straight to the driver ([`Self::submit_direct`]).
    direct: bool,
    wakes_scratch: Vec<Ns>,
    /// Records of requests at the driver whose ids the driver freed and gave out again (see
    /// [`adopt`](Self::adopt)).
    lost: Vec<(ReqId, RqState, RqMeta)>,
    write_cache: WriteCache,
    /// Requests in a flush sequence now (while there is one, a completion may dispatch).
    in_flush_seq: usize,
    flush_actions: Vec<FlushAction>,
    /// The ordered streams (`crate::ordering`), when some job writes in order.
    ordered: Option<Box<crate::ordering::OrderedStreams>>,
    /// Whether a woken tag sleeper retries when a CPU stage above runs its task
    /// ([`Self::with_retry_on_cpu`]); false: at the instant it is woken.
    retry_on_cpu: bool,
    /// Tag sleepers woken and waiting for their task to run (hardware queue, sleeper).
    woken: Vec<(usize, TagWaiter)>,
    /// Whether a queue run the kernel leaves to kblockd's worker waits for a CPU stage above
    /// to run that worker ([`Self::with_queue_runs_on_cpu`]); false: it runs at once.
    runs_on_cpu: bool,
    /// Per host: a run is asked for and not yet done (kblockd's work is pending: asking
    /// again queues nothing more).
    run_pending: Vec<bool>,
    /// Requests, and their KiB, issued to the driver so far (what a worker's run issued).
    issued: (u32, u64),
    pub stats: BlockStats,
}

impl BlockLayer {
    /// A block layer for `hosts` hosts with scheduler `sched` (its settings `sched_settings`).
    pub fn new(
        setup: QueueSetup,
        sched: &'static SchedOps,
        sched_settings: &qoslab_engine::Settings,
        hosts: u16,
    ) -> Self {
        let build = sched.build.expect("checked by the registry");
        let hosts = (0..hosts.max(1))
            .map(|_| {
                let elevator = build(&SchedSetup {
                    settings: sched_settings,
                    queue: &setup,
                });
                let wake_batch = sbitmap_wake_batch(setup.nr_requests, |word| {
                    elevator
                        .as_deref()
                        .map_or(u32::MAX, |e| e.min_shallow_depth(word))
                });
                HostQueue {
                    elevator,
                    merges: MergeIndex::default(),
                    wakes: BTreeSet::new(),
                    ops: OpCount::default(),
                    wake_batch,
                }
            })
            .collect::<Vec<_>>();
        let scheduled = hosts.iter().any(|h| h.elevator.is_some());
        BlockLayer {
            scheduled,
            direct: !scheduled && setup.queue_depth.is_none(),
            setup,
            sched,
            hosts,
            hctxs: Vec::new(),
            index: Vec::new(),
            rq: Vec::new(),
            meta: Vec::new(),
            plugs: Vec::new(),
            unplug_armed: false,
            held: 0,
            wakes_scratch: Vec::new(),
            lost: Vec::new(),
            write_cache: WriteCache::default(),
            in_flush_seq: 0,
            flush_actions: Vec::new(),
            ordered: None,
            retry_on_cpu: false,
            woken: Vec::new(),
            runs_on_cpu: false,
            run_pending: Vec::new(),
            issued: (0, 0),
            stats: BlockStats::default(),
        }
    }

    /// Tells the block layer what the device's write cache is.
    pub fn with_write_cache(mut self, write_cache: WriteCache) -> Self {
        self.write_cache = write_cache;
        self
    }

    /// Ordered writes of some jobs go to their ordering plug-ins (`crate::ordering`).
    pub fn with_ordered(mut self, ordered: crate::ordering::OrderedStreams) -> Self {
        self.ordered = Some(Box::new(ordered));
        self
    }

    /// A woken tag sleeper retries only when its task runs: the block layer tells the CPU
    /// stage above ([`Notice::SubmitterWoken`]), which answers with [`Command::SubmitterRuns`]
    /// when the task has its turn on the CPU (Linux: the task woken in `blk_mq_get_tag` must
    /// be scheduled before it looks for a tag again; a tag freed meanwhile goes to whoever
    /// asks first). A piece of a split bio that completes before the bio's last is reported
    /// too ([`Notice::Interrupt`]: its own interrupt, in which its tag is freed).
    pub fn with_retry_on_cpu(mut self) -> Self {
        self.retry_on_cpu = true;
        self
    }

    /// The queue runs that Linux leaves to kblockd's worker (`blk_mq_run_hw_queues(q, true)`
    /// after a completion, `blk_mq_sched_insert_request(.., async = true)` after a
    /// submission's insert under a scheduler, a scheduler's timer) wait for that worker: the
    /// block layer asks the CPU stage above ([`Notice::QueueRunPending`], once until the run is
    /// done, as queue_work does nothing for pending work), which answers with
    /// [`Command::RunQueue`] when the worker's turn on the CPU ends. A submission without a
    /// scheduler still goes to the driver in its own call (`blk_mq_try_issue_directly`).
    pub fn with_queue_runs_on_cpu(mut self) -> Self {
        self.runs_on_cpu = true;
        self
    }

    /// Host `host`'s queues run now, or, with [`Self::with_queue_runs_on_cpu`], when kblockd's
    /// worker has its turn on the CPU (if anything waits for it then).
    fn run_async(&mut self, host: u16, ctx: &mut impl StageCtx<BlockEvent>) {
        if !self.runs_on_cpu {
            self.run_host(host, ctx);
            return;
        }
        // blk_mq_run_hw_queue queues the work only when the queue has something pending
        // (blk_mq_hctx_has_pending: its dispatch list or the scheduler has work).
        let pending = self
            .hctxs
            .iter()
            .any(|hc| hc.host == host && !hc.dispatch.is_empty())
            || self.hosts[usize::from(host)]
                .elevator
                .as_deref()
                .is_some_and(|e| e.has_work());
        if !pending {
            return;
        }
        let h = usize::from(host);
        if self.run_pending.len() <= h {
            self.run_pending.resize(h + 1, false);
        }
        if !self.run_pending[h] {
            self.run_pending[h] = true;
            ctx.notify_above(Notice::QueueRunPending { host });
        }
    }

    /// The same block layer sending every request the general way, `submit_direct` off: for
    /// the test that holds the two to the same results.
    pub fn without_direct_issue(mut self) -> Self {
        self.direct = false;
        self
    }

    pub fn setup(&self) -> &QueueSetup {
        &self.setup
    }

    /// Requests held now (in plugs, tag waits, schedulers and dispatch lists).
    pub fn held(&self) -> usize {
        self.held
    }

    #[inline(always)]
    fn grow(&mut self, id: ReqId) {
        if id.index() >= self.rq.len() {
            self.grow_to(id.index() + 1);
        }
    }

    // Out of line: it runs only while the request table grows to the run's depth.
    #[cold]
    fn grow_to(&mut self, len: usize) {
        self.rq.resize(len, RqState::default());
        self.meta.resize(len, RqMeta::default());
    }

    #[inline]
    fn hold(&mut self) {
        self.held += 1;
        self.stats.queued_max = self.stats.queued_max.max(self.held as u64);
    }

    #[inline]
    fn hctx_of(&mut self, host: u16, core: u16) -> usize {
        let key = (host, if self.setup.queue_per_core { core } else { 0 });
        if let Some(&(_, i)) = self.index.iter().find(|(k, _)| *k == key) {
            return i;
        }
        self.hctxs.push(Hctx {
            host,
            ..Hctx::default()
        });
        self.index.push((key, self.hctxs.len() - 1));
        self.hctxs.len() - 1
    }

    #[inline]
    fn room(&self, h: usize) -> bool {
        self.setup
            .queue_depth
            .is_none_or(|d| self.hctxs[h].in_driver < d)
    }

    /// Runs `f` with host `host`'s scheduler and a context over this block layer.
    fn with_sched<R>(
        &mut self,
        host: u16,
        now_ns: Ns,
        reqs: &qoslab_engine::Requests,
        f: impl FnOnce(&mut dyn Elevator, &mut SchedCtx<'_>) -> R,
    ) -> Option<R> {
        let hq = &mut self.hosts[host as usize];
        let e = hq.elevator.as_deref_mut()?;
        hq.ops.hooks += 1;
        let mut cx = SchedCtx {
            now_ns,
            reqs,
            meta: &self.meta,
            merges: &hq.merges,
            setup: &self.setup,
            wakes: &mut self.wakes_scratch,
            ops: &mut hq.ops,
        };
        Some(f(e, &mut cx))
    }

    /// Schedules the wake-ups the last hooks asked for.
    fn arm_wakes(&mut self, host: u16, ctx: &mut impl StageCtx<BlockEvent>) {
        for at in self.wakes_scratch.drain(..) {
            if self.hosts[host as usize].wakes.insert(at) {
                ctx.schedule(at, BlockEvent::Wake { host });
            }
        }
    }

    // ---- arrival ---------------------------------------------------------------------------

    /// A job's submission call is complete: a batch of more than two is plugged.
    fn end_batch(&mut self, job: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let mut batch = std::mem::take(&mut self.plugs[job].batch);
        let plugged = batch.len() > AIO_PLUG_THRESHOLD;
        for &id in &batch {
            self.take_bio(id, plugged, ctx);
        }
        if plugged {
            self.flush_plug(job, ctx);
        }
        batch.clear();
        if self.plugs[job].batch.is_empty() {
            self.plugs[job].batch = batch;
        }
    }

    /// A bio of a plugged batch, or one on its own.
    // Speed: the steps every request takes (take_bio, take_request, queue_quietly, issue,
    // finish_bio) are inlined into the hooks, and what few requests need (a split, merged
    // bios, a lost request, a bigger table) sits out of line, so the usual path is one
    // stretch of code without calls (about 250 instructions fewer per I/O).
    #[inline(always)]
    fn take_bio(&mut self, id: ReqId, plugged: bool, ctx: &mut impl StageCtx<BlockEvent>) {
        if self.setup.splits(&ctx.reqs()[id]) {
            self.split_bio(id, plugged, ctx);
        } else {
            self.take_request(id, plugged, ctx);
        }
    }

    /// A bio larger than the queue's limits goes on as pieces (bio_split).
    #[inline(never)]
    fn split_bio(&mut self, id: ReqId, plugged: bool, ctx: &mut impl StageCtx<BlockEvent>) {
        let req = ctx.reqs()[id];
        let piece = self.setup.piece_bytes();
        let n = req.len_bytes.div_ceil(piece);
        self.stats.bio_splits += 1;
        self.stats.split_pieces += n;
        self.rq[id.index()].place = Place::Split;
        self.rq[id.index()].parts_left = n as u32;
        ctx.reqs_mut()[id].t.dispatched_ns = Ns::MAX;
        for k in 0..n {
            let mut part = req;
            part.offset_bytes = req.offset_bytes + k * piece;
            part.len_bytes = piece.min(req.len_bytes - k * piece);
            let pid = ctx.reqs_mut().alloc(part);
            self.grow(pid);
            self.forget(pid);
            self.rq[pid.index()] = RqState {
                split_parent: id,
                ..RqState::default()
            };
            self.meta[pid.index()] = RqMeta {
                start_ns: ctx.now_ns(),
                io_start_ns: 0,
                segments: self.setup.segments(part.len_bytes),
            };
            self.take_request(pid, plugged, ctx);
        }
    }

    /// Merges, a tag, then the plug or the queue (steps 3 to 6 above).
    #[inline(always)]
    fn take_request(&mut self, id: ReqId, plugged: bool, ctx: &mut impl StageCtx<BlockEvent>) {
        let req = &ctx.reqs()[id];
        let (host, core, op, job) = (req.host, req.core, req.op, req.job as usize);
        if self.plugs[job].waiting > 0 {
            // The job's submission call sleeps on an earlier request: it reaches this bio
            // (merges, tag, queue) only once that one has its tag.
            self.rq[id.index()].place = Place::Deferred;
            self.plugs[job].deferred.push_back(id);
            self.hold();
            return;
        }
        let data = matches!(op, Op::Read | Op::Write);
        if plugged && data && self.setup.nomerges < 2 && self.plug_merge(id, ctx) {
            return;
        }
        if data && self.setup.nomerges == 0 {
            let now = ctx.now_ns();
            let pick = self
                .with_sched(host, now, ctx.reqs(), |e, cx| e.bio_merge(id, cx))
                .flatten();
            if let Some((rq, kind)) = pick {
                self.merge_bio(rq, id, kind, true, ctx);
                self.stats.merges[op.index()] += 1;
                self.try_merge_neighbour(rq, kind, ctx);
                return;
            }
        }
        let h = self.hctx_of(host, core);
        self.rq[id.index()].hctx = h as u32;
        // Without a scheduler a request takes a driver tag, of which there are nr_requests
        // (the tag set's depth), where the block layer keeps the device's depth (an ATA or a
        // simple driver); an NVMe host's command ids are its tags.
        if self.hosts[host as usize].elevator.is_some() || self.setup.queue_depth.is_some() {
            let depth = self.hosts[host as usize]
                .elevator
                .as_deref()
                .map_or(u32::MAX, |e| e.limit_depth(&ctx.reqs()[id]))
                .min(self.setup.nr_requests);
            // A free tag goes to whoever asks (sbitmap: a new request does not queue behind
            // sleeping ones); sleepers get tags as `release_tag` wakes them.
            if self.hctxs[h].sched_tags >= depth {
                if plugged {
                    self.flush_plug(job, ctx);
                }
                self.stats.tag_waits += 1;
                self.rq[id.index()].place = Place::TagWait;
                self.sleep(h, id, depth);
                self.hold();
                self.plugs[job].waiting += 1;
                if self.plugs[job].waiting == 1 {
                    self.stats.submit_sleeps += 1;
                    ctx.notify_above(Notice::SubmitterBlocked { job: job as u32 });
                }
                return;
            }
            self.take_tag(h);
            self.rq[id.index()].has_tag = true;
        }
        if plugged && !self.write_cache.sequences(op, ctx.reqs()[id].flags) {
            self.add_to_plug(job, id, ctx);
        } else {
            self.queue(id, ctx);
        }
    }

    fn plug_merge(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) -> bool {
        let job = ctx.reqs()[id].job as usize;
        let Some(&last) = self.plugs.get(job).and_then(|p| p.plug.last()) else {
            return false;
        };
        let (rq, bio) = (ctx.reqs()[last], ctx.reqs()[id]);
        let kind = if rq.offset_bytes + rq.len_bytes == bio.offset_bytes {
            MergeKind::Back
        } else if bio.offset_bytes + bio.len_bytes == rq.offset_bytes {
            MergeKind::Front
        } else {
            return false;
        };
        let segs = (
            self.meta[last.index()].segments,
            self.meta[id.index()].segments,
        );
        if !mergeable(&rq, segs.0, &bio, segs.1, &self.setup) {
            return false;
        }
        let now = ctx.now_ns();
        let host = rq.host;
        let allowed = self
            .with_sched(host, now, ctx.reqs(), |e, cx| e.allow_merge(last, id, cx))
            .unwrap_or(true);
        if !allowed {
            return false;
        }
        self.merge_bio(last, id, kind, true, ctx);
        self.stats.plug_merges += 1;
        self.stats.merges[bio.op.index()] += 1;
        true
    }

    /// Bio (or tagless request) `bio` joins request `rq` at `kind`'s end.
    fn merge_bio(
        &mut self,
        rq: ReqId,
        bio: ReqId,
        kind: MergeKind,
        notify: bool,
        ctx: &mut impl StageCtx<BlockEvent>,
    ) {
        let in_sched = self.rq[rq.index()].place == Place::Sched;
        let host = ctx.reqs()[rq].host;
        if in_sched {
            let r = ctx.reqs()[rq];
            self.hosts[host as usize].merges.remove(&r, rq);
        }
        let b = ctx.reqs()[bio];
        let r = &mut ctx.reqs_mut()[rq];
        let old_offset = r.offset_bytes;
        let st = &mut self.rq[rq.index()];
        if !st.grown {
            st.grown = true;
            st.orig_offset = r.offset_bytes;
            st.orig_len = r.len_bytes;
        }
        if kind == MergeKind::Front {
            r.offset_bytes = b.offset_bytes;
        }
        r.len_bytes += b.len_bytes;
        let r = *r;
        self.meta[rq.index()].segments += self.meta[bio.index()].segments;
        self.meta[rq.index()].start_ns = self.meta[rq.index()]
            .start_ns
            .min(self.meta[bio.index()].start_ns);
        self.chain(rq, bio, ctx);
        if in_sched {
            self.hosts[host as usize].merges.add(&r, rq);
        }
        if in_sched && notify {
            let now = ctx.now_ns();
            self.with_sched(host, now, ctx.reqs(), |e, cx| {
                e.request_merged(rq, kind, old_offset, cx)
            });
        }
    }

    /// Appends `bio` (and whatever joined it) to `rq`'s bios; `bio` gives up its own tag.
    fn chain(&mut self, rq: ReqId, bio: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let b = self.rq[bio.index()];
        if b.grown {
            let r = &mut ctx.reqs_mut()[bio];
            r.offset_bytes = b.orig_offset;
            r.len_bytes = b.orig_len;
            self.rq[bio.index()].grown = false;
        }
        if b.has_tag {
            self.rq[bio.index()].has_tag = false;
            self.release_tag(b.hctx as usize, ctx);
        }
        self.rq[bio.index()].place = Place::Merged;
        let tail = if b.last_bio.is_none() {
            bio
        } else {
            b.last_bio
        };
        let r = &mut self.rq[rq.index()];
        if r.last_bio.is_none() {
            r.next_bio = bio;
        } else {
            let last = r.last_bio;
            self.rq[last.index()].next_bio = bio;
        }
        self.rq[rq.index()].last_bio = tail;
        self.rq[bio.index()].last_bio = ReqId::NONE;
    }

    /// After a bio merge, the grown queued request may touch its neighbour: the two become one
    /// (Linux `attempt_back_merge` / `attempt_front_merge`).
    fn try_merge_neighbour(
        &mut self,
        rq: ReqId,
        kind: MergeKind,
        ctx: &mut impl StageCtx<BlockEvent>,
    ) {
        if !self.sched.merges_requests || self.rq[rq.index()].place != Place::Sched {
            return;
        }
        let host = ctx.reqs()[rq].host;
        let hq = &self.hosts[host as usize];
        let (front, back) = match kind {
            MergeKind::Back => (
                rq,
                hq.merges
                    .front_candidate(ctx.reqs(), &self.meta, rq, &self.setup),
            ),
            MergeKind::Front => (
                match hq
                    .merges
                    .back_candidate(ctx.reqs(), &self.meta, rq, &self.setup)
                {
                    Some(prev) => prev,
                    None => return,
                },
                Some(rq),
            ),
        };
        let Some(next) = back else { return };
        if self.rq[next.index()].place != Place::Sched || front == next {
            return;
        }
        let now = ctx.now_ns();
        let allowed = self
            .with_sched(host, now, ctx.reqs(), |e, cx| {
                e.allow_merge(front, next, cx)
            })
            .unwrap_or(true);
        if !allowed {
            return;
        }
        let n = ctx.reqs()[next];
        self.hosts[host as usize].merges.remove(&n, next);
        self.with_sched(host, now, ctx.reqs(), |e, cx| {
            e.requests_merged(front, next, cx)
        });
        self.held -= 1;
        self.merge_bio(front, next, MergeKind::Back, false, ctx);
        self.stats.merges[n.op.index()] += 1;
    }

    fn add_to_plug(&mut self, job: usize, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let p = &self.plugs[job].plug;
        if let Some(&last) = p.last()
            && (p.len() >= BLK_MAX_REQUEST_COUNT
                || ctx.reqs()[last].len_bytes >= BLK_PLUG_FLUSH_SIZE)
        {
            self.flush_plug(job, ctx);
        }
        self.rq[id.index()].place = Place::Plug;
        self.plugs[job].plug.push(id);
        self.hold();
    }

    fn flush_plug(&mut self, job: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let plug = std::mem::take(&mut self.plugs[job].plug);
        for &id in &plug {
            self.held -= 1;
            self.queue_quietly(id, ctx);
        }
        let hosts: BTreeSet<u16> = plug.iter().map(|&id| ctx.reqs()[id].host).collect();
        for host in hosts {
            self.run_async(host, ctx);
        }
        self.plugs[job].plug = plug;
        self.plugs[job].plug.clear();
    }

    /// A tagged request goes to the scheduler (and the host's dispatch runs), or, without
    /// one, to the driver.
    #[inline(always)]
    fn queue(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let host = ctx.reqs()[id].host;
        if self.queue_quietly(id, ctx) {
            self.run_async(host, ctx);
        }
    }

    /// [`queue`](Self::queue) without running the scheduler's dispatch; says whether it
    /// should run.
    #[inline(always)]
    fn queue_quietly(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) -> bool {
        let (host, op) = (ctx.reqs()[id].host, ctx.reqs()[id].op);
        let now = ctx.now_ns();
        let h = self.rq[id.index()].hctx as usize;
        self.rq[id.index()].insert_ns = now;
        if self.write_cache.sequences(op, ctx.reqs()[id].flags) {
            self.insert_flush(id, h, ctx);
            return false;
        }
        if self.hosts[host as usize].elevator.is_none() || op == Op::Flush {
            // blk_mq_try_issue_directly, behind whatever already waits on the queue.
            if self.hctxs[h].dispatch.is_empty() && self.room(h) && self.issue(id, ctx) {
                return false;
            }
            self.stats.waited += 1;
            self.rq[id.index()].place = Place::HctxList;
            self.hctxs[h].dispatch.push_back(id);
            self.hold();
            return false;
        }
        if self.setup.nomerges == 0
            && self.sched.merges_requests
            && matches!(op, Op::Read | Op::Write)
        {
            // Insert merge (elv_attempt_insert_merge): the new request may continue a queued one.
            let hq = &self.hosts[host as usize];
            if let Some(rq) = hq
                .merges
                .back_candidate(ctx.reqs(), &self.meta, id, &self.setup)
            {
                let allowed = self
                    .with_sched(host, now, ctx.reqs(), |e, cx| e.allow_merge(rq, id, cx))
                    .unwrap_or(true);
                if allowed {
                    self.merge_bio(rq, id, MergeKind::Back, true, ctx);
                    self.stats.merges[op.index()] += 1;
                    return false;
                }
            }
        }
        self.rq[id.index()].place = Place::Sched;
        self.stats.waited += 1;
        self.hold();
        self.hosts[host as usize].merges.add(&ctx.reqs()[id], id);
        self.with_sched(host, now, ctx.reqs(), |e, cx| e.insert(id, false, cx));
        true
    }

    /// Whether `req` goes straight to the driver: no scheduler, no depth kept here, nothing
    /// waiting (no plug, batch or dispatch list), a read or write that is not split.
    #[inline(always)]
    fn issues_directly(&self, req: &qoslab_engine::Request) -> bool {
        self.direct
            && self.held == 0
            && !self.unplug_armed
            && !req
                .flags
                .intersects(ReqFlags::BATCH_MORE | ReqFlags::ORDERED)
            && matches!(req.op, Op::Read | Op::Write)
            && !self.setup.splits(req)
            && !self.write_cache.sequences(req.op, req.flags)
    }

    // ---- the flush queue ---------------------------------------------------------------------

    /// Request `id` (tagged, on hardware queue `h`) needs a FLUSH before or after its data: it
    /// enters the queue's flush machinery (blk_insert_flush), past the plug and the scheduler.
    #[inline(never)]
    fn insert_flush(&mut self, id: ReqId, h: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let r = ctx.reqs()[id];
        let policy = self.write_cache.policy(r.op, r.flags, r.len_bytes);
        ctx.reqs_mut()[id].flags = self.write_cache.data_flags(r.flags);
        let st = &mut self.rq[id.index()];
        st.flush = FlushRole::Sequenced;
        st.flush_flags = r.flags;
        st.place = Place::FlushWait;
        st.hctx = h as u32;
        self.in_flush_seq += 1;
        self.stats.flush_sequences += 1;
        let mut out = std::mem::take(&mut self.flush_actions);
        self.hctxs[h]
            .flush
            .insert(id, policy, ctx.now_ns(), &mut out);
        self.flush_act(h, &mut out, ctx);
        self.flush_actions = out;
    }

    /// Carries out what hardware queue `h`'s flush queue asked for, then offers its dispatch
    /// list to the driver.
    fn flush_act(
        &mut self,
        h: usize,
        out: &mut Vec<FlushAction>,
        ctx: &mut impl StageCtx<BlockEvent>,
    ) {
        let now = ctx.now_ns();
        for a in out.drain(..) {
            match a {
                FlushAction::Data(id) => {
                    // The data goes first, ahead of what waits (the requeue list's head).
                    let st = &mut self.rq[id.index()];
                    st.place = Place::HctxList;
                    st.insert_ns = now;
                    self.hctxs[h].dispatch.push_front(id);
                    self.stats.waited += 1;
                    self.hold();
                }
                FlushAction::Flush { first } => {
                    // flush_rq: on the queue and namespace of the first request it serves.
                    let mut f = ctx.reqs()[first];
                    f.op = Op::Flush;
                    f.offset_bytes = 0;
                    f.len_bytes = 0;
                    f.flags = ReqFlags::empty();
                    f.status = qoslab_engine::IoStatus::Ok;
                    f.call = qoslab_engine::Call::Io;
                    f.t = qoslab_engine::Stamps {
                        queued_ns: now,
                        ..Default::default()
                    };
                    let fid = ctx.reqs_mut().alloc(f);
                    self.grow(fid);
                    self.forget(fid);
                    self.rq[fid.index()] = RqState {
                        place: Place::HctxList,
                        hctx: h as u32,
                        insert_ns: now,
                        flush: FlushRole::Flush,
                        ..RqState::default()
                    };
                    self.meta[fid.index()] = RqMeta {
                        start_ns: now,
                        io_start_ns: 0,
                        segments: 0,
                    };
                    self.stats.flushes_sent += 1;
                    self.hctxs[h].dispatch.push_back(fid);
                    self.hold();
                }
                FlushAction::Done(id) => {
                    self.in_flush_seq -= 1;
                    let st = self.rq[id.index()];
                    let r = &mut ctx.reqs_mut()[id];
                    if r.op == Op::Flush {
                        // An empty flush is never sent itself: it went out with its FLUSH.
                        r.t.dispatched_ns = st.insert_ns;
                    }
                    r.t.completed_ns = now;
                    r.flags = st.flush_flags;
                    if st.has_tag {
                        self.release_tag(h, ctx);
                    }
                    self.finish_bio(id, ctx);
                }
            }
        }
        self.run_hctx_list(h, ctx);
    }

    /// Request `id` of a flush sequence, or a FLUSH of the flush queue, completed at the
    /// driver.
    #[inline(never)]
    fn complete_flush_part(&mut self, id: ReqId, st: RqState, ctx: &mut impl StageCtx<BlockEvent>) {
        let now = ctx.now_ns();
        let h = st.hctx as usize;
        self.hctxs[h].in_driver -= 1;
        self.account_completion(id, now, ctx.reqs());
        let mut out = std::mem::take(&mut self.flush_actions);
        if st.flush == FlushRole::Flush {
            self.rq[id.index()] = RqState::default();
            ctx.reqs_mut().free(id);
            self.hctxs[h].flush.flush_done(now, &mut out);
        } else {
            self.rq[id.index()].place = Place::FlushWait;
            self.hctxs[h].flush.data_done(id, now, &mut out);
        }
        self.flush_act(h, &mut out, ctx);
        self.flush_actions = out;
        let host = self.hctxs[h].host;
        if self.hosts[host as usize].elevator.is_some() {
            self.run_async(host, ctx);
        }
    }

    /// What steps 1 to 6 come to for a request [`Self::issues_directly`] lets through: its
    /// priority, a request of its own on its hardware queue, and the driver (or, when the
    /// driver is busy, the dispatch list).
    // Speed: the general path asks each step in turn (plugs, merges, tags, the scheduler, the
    // dispatch list): with its completion, about 120 instructions per I/O more on `make
    // bench`'s path (counted with valgrind). The test `the_path_shortcuts_change_nothing`
    // (crates/sim/tests/path/folds.rs) holds the two to the same results.
    #[inline(always)]
    fn submit_direct(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let now = ctx.now_ns();
        let req = &mut ctx.reqs_mut()[id];
        req.prio = ioprio::effective(req.prio);
        self.write_cache.prepare(req);
        let (k, len, host, core) = (req.op.index(), req.len_bytes, req.host, req.core);
        self.stats.bios[k] += 1;
        self.forget(id);
        self.meta[id.index()] = RqMeta {
            start_ns: now,
            io_start_ns: 0,
            segments: self.setup.segments(len),
        };
        let h = self.hctx_of(host, core);
        let st = &mut self.rq[id.index()];
        st.hctx = h as u32;
        st.insert_ns = now;
        if !self.issue(id, ctx) {
            self.stats.waited += 1;
            self.rq[id.index()].place = Place::HctxList;
            self.hctxs[h].dispatch.push_back(id);
            self.hold();
        }
    }

    // ---- dispatch --------------------------------------------------------------------------

    /// Offers `id` to the driver; true when it took it.
    #[inline(always)]
    fn issue(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) -> bool {
        let now = ctx.now_ns();
        let t = &mut ctx.reqs_mut()[id].t;
        let before = t.dispatched_ns;
        t.dispatched_ns = now;
        if ctx.dispatch(id) == Admission::Busy {
            ctx.reqs_mut()[id].t.dispatched_ns = before;
            return false;
        }
        let r = &ctx.reqs()[id];
        let st = &mut self.rq[id.index()];
        let waited = now - st.insert_ns;
        st.place = Place::Driver;
        st.issued = (r.job, r.t.queued_ns, r.offset_bytes);
        let h = st.hctx as usize;
        self.hctxs[h].in_driver += 1;
        self.meta[id.index()].io_start_ns = now;
        let op = r.op;
        if op == Op::Read || op == Op::Write {
            self.stats.record_sched_wait(op.index(), waited);
        }
        let s = &mut self.stats;
        if s.in_flight == 0 {
            s.busy_since = now;
        }
        s.in_flight += 1;
        s.in_flight_max = s.in_flight_max.max(s.in_flight);
        self.issued.0 = self.issued.0.wrapping_add(1);
        self.issued.1 = self.issued.1.wrapping_add(r.len_bytes / 1024);
        true
    }

    /// Offers hardware queue `h`'s dispatch list; false when the driver or the depth stopped
    /// it.
    fn run_hctx_list(&mut self, h: usize, ctx: &mut impl StageCtx<BlockEvent>) -> bool {
        while let Some(&id) = self.hctxs[h].dispatch.front() {
            if !self.room(h) || !self.issue(id, ctx) {
                return false;
            }
            self.hctxs[h].dispatch.pop_front();
            self.held -= 1;
        }
        true
    }

    /// The dispatch loop of host `host`.
    fn run_host(&mut self, host: u16, ctx: &mut impl StageCtx<BlockEvent>) {
        for h in 0..self.hctxs.len() {
            if self.hctxs[h].host == host && !self.run_hctx_list(h, ctx) {
                return;
            }
        }
        let now = ctx.now_ns();
        loop {
            let hq = &self.hosts[host as usize];
            let Some(e) = hq.elevator.as_deref() else {
                return;
            };
            if !e.has_work() {
                break;
            }
            // The device's budget (SCSI's queue_depth) is asked before the scheduler.
            if self.setup.queue_depth.is_some()
                && !(0..self.hctxs.len()).any(|h| self.hctxs[h].host == host && self.room(h))
            {
                break;
            }
            let Some(id) = self
                .with_sched(host, now, ctx.reqs(), |e, cx| e.dispatch(cx))
                .flatten()
            else {
                break;
            };
            let r = ctx.reqs()[id];
            self.hosts[host as usize].merges.remove(&r, id);
            self.held -= 1;
            let h = self.rq[id.index()].hctx as usize;
            if !self.room(h) || !self.issue(id, ctx) {
                self.rq[id.index()].place = Place::HctxList;
                self.hctxs[h].dispatch.push_front(id);
                self.hold();
                break;
            }
        }
        self.arm_wakes(host, ctx);
    }

    // ---- completion ------------------------------------------------------------------------

    /// Bio `id` sleeps for a tag on the hardware queue's next wait queue (bt_wait_ptr: the
    /// queues are taken in turn).
    fn sleep(&mut self, h: usize, id: ReqId, depth: u32) {
        let hc = &mut self.hctxs[h];
        let queue = hc.wait_index;
        hc.wait_index = (hc.wait_index + 1) % SBQ_WAIT_QUEUES as u8;
        hc.tag_wait.push_back(TagWaiter { id, depth, queue });
    }

    fn release_tag(&mut self, h: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let hc = &mut self.hctxs[h];
        hc.sched_tags -= 1;
        if hc.tag_wait.is_empty() {
            return;
        }
        // sbitmap_queue_wake_up: while someone sleeps, every wake_batch freed tags wake up to
        // wake_batch sleepers of one wait queue, the first from wake_index that has any. The
        // sleepers of a hardware queue sit in its wait queues in turn, so with up to 8 of
        // them that is one sleeper per wake_batch tags; a tag freed meanwhile goes to
        // whoever asks first.
        let batch = self.hosts[usize::from(hc.host)].wake_batch;
        hc.frees += 1;
        if hc.frees < batch {
            return;
        }
        hc.frees = 0;
        let n = SBQ_WAIT_QUEUES as u8;
        let queue = (0..n)
            .map(|k| (hc.wake_index + k) % n)
            .find(|&q| hc.tag_wait.iter().any(|w| w.queue == q))
            .expect("someone sleeps");
        hc.wake_index = (queue + 1) % n;
        let woken: Vec<TagWaiter> = hc
            .tag_wait
            .iter()
            .filter(|w| w.queue == queue)
            .take(batch as usize)
            .copied()
            .collect();
        hc.tag_wait
            .retain(|w| w.queue != queue || !woken.iter().any(|x| x.id == w.id));
        for w in woken {
            if self.retry_on_cpu {
                let job = ctx.reqs()[w.id].job;
                let host = self.hctxs[h].host;
                self.woken.push((h, w));
                ctx.notify_above(Notice::SubmitterWoken { host, job });
            } else {
                self.retry_tag(h, w, ctx);
            }
        }
    }

    /// The woken task tries again (blk_mq_get_tag's loop): a tag within its depth, or back to
    /// sleep on the next wait queue.
    fn retry_tag(&mut self, h: usize, w: TagWaiter, ctx: &mut impl StageCtx<BlockEvent>) {
        if self.hctxs[h].sched_tags < w.depth {
            self.grant_tag(h, w.id, ctx);
        } else {
            self.sleep(h, w.id, w.depth);
        }
    }

    /// Job `job`'s woken task runs (see [`Self::with_retry_on_cpu`]): its sleeper retries.
    fn run_woken(&mut self, job: u32, ctx: &mut impl StageCtx<BlockEvent>) {
        let Some(i) = self
            .woken
            .iter()
            .position(|&(_, w)| ctx.reqs()[w.id].job == job)
        else {
            return;
        };
        let (h, w) = self.woken.remove(i);
        self.retry_tag(h, w, ctx);
    }

    fn grant_tag(&mut self, h: usize, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        self.held -= 1;
        self.take_tag(h);
        self.rq[id.index()].has_tag = true;
        self.queue_quietly(id, ctx);
        let job = ctx.reqs()[id].job;
        let p = &mut self.plugs[job as usize];
        p.waiting -= 1;
        if p.waiting == 0 {
            // The sleeping task wakes; it goes on after this hook, as a woken task runs later.
            ctx.schedule_now(BlockEvent::Resume { job });
        }
    }

    /// Job `job`'s submission call goes on: the bios it had not reached, in order, until one
    /// waits for a tag again; if none does, the call returns and the job is told.
    fn resume_job(&mut self, job: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        while self.plugs[job].waiting == 0 {
            let Some(id) = self.plugs[job].deferred.pop_front() else {
                ctx.notify_above(Notice::SubmitterResumed { job: job as u32 });
                return;
            };
            self.held -= 1;
            self.take_request(id, false, ctx);
        }
    }

    fn take_tag(&mut self, h: usize) {
        self.hctxs[h].sched_tags += 1;
        let held = u64::from(self.hctxs[h].sched_tags);
        self.stats.sched_tags_max = self.stats.sched_tags_max.max(held);
    }

    /// `copy` completed, which this layer never issued: the driver replaced a request it lost
    /// track of (an orphan of a controller reset) by a copy. The copy takes over the
    /// original's record.
    /// Returns the original's id (which the scheduler knows).
    fn adopt(&mut self, copy: ReqId, ctx: &mut impl StageCtx<BlockEvent>) -> ReqId {
        let r = ctx.reqs()[copy];
        let key = (r.job, r.t.queued_ns, r.offset_bytes);
        // The copy's id may be one the driver freed while this layer still counts it out
        // (another orphan's): that record waits in `lost` for its own copy.
        self.forget(copy);
        let found = (0..self.rq.len()).find(|&i| {
            i != copy.index() && self.rq[i].place == Place::Driver && self.rq[i].issued == key
        });
        if let Some(original) = found {
            self.rq[copy.index()] = self.rq[original];
            self.meta[copy.index()] = self.meta[original];
            self.rq[original] = RqState::default();
            return ReqId(original as u32);
        }
        let k = self
            .lost
            .iter()
            .position(|(_, st, _)| st.issued == key)
            .expect("a completion the block layer issued, or a copy of one");
        let (original, st, meta) = self.lost.swap_remove(k);
        self.rq[copy.index()] = st;
        self.meta[copy.index()] = meta;
        original
    }

    /// Request `id`, out at the driver, completed at `now`: the counters.
    #[inline(always)]
    fn account_completion(&mut self, id: ReqId, now: Ns, reqs: &qoslab_engine::Requests) {
        let req = &reqs[id];
        let meta = &self.meta[id.index()];
        let k = req.op.index();
        let s = &mut self.stats;
        s.ios[k] += 1;
        s.sectors[k] += req.len_bytes / 512;
        s.ticks_ns[k] += u128::from(now - meta.start_ns);
        if k < 2 {
            s.device[k].record(now - meta.io_start_ns);
        }
        s.in_flight -= 1;
        if s.in_flight == 0 {
            s.io_ticks_ns += now - s.busy_since;
        }
    }

    /// `id` starts a new life here; if the driver still held it under this id it freed the id
    /// (keeping a copy), so its record is kept until the copy completes.
    #[inline(always)]
    fn forget(&mut self, id: ReqId) {
        if self.rq[id.index()].place == Place::Driver {
            self.keep_lost(id);
        }
        self.rq[id.index()] = RqState::default();
    }

    // Out of line: only a controller reset's orphans get here.
    #[cold]
    fn keep_lost(&mut self, id: ReqId) {
        self.lost
            .push((id, self.rq[id.index()], self.meta[id.index()]));
    }

    /// Request `id` with bios merged into it (the first `bio`) is done: its bios complete
    /// with its times, each with its own extent.
    #[inline(never)]
    fn finish_merged(
        &mut self,
        id: ReqId,
        mut bio: ReqId,
        now: Ns,
        ctx: &mut impl StageCtx<BlockEvent>,
    ) {
        let (done_t, done_status) = (ctx.reqs()[id].t, ctx.reqs()[id].status);
        ctx.reqs_mut()[id].t.completed_ns = now;
        self.finish_bio(id, ctx);
        while !bio.is_none() {
            let next = self.rq[bio.index()].next_bio;
            let r = &mut ctx.reqs_mut()[bio];
            let queued = r.t.queued_ns;
            r.t = done_t;
            r.t.queued_ns = queued;
            r.t.completed_ns = now;
            r.status = done_status;
            self.finish_bio(bio, ctx);
            bio = next;
        }
    }

    /// A bio is done: a piece counts down its split bio, anything else goes up.
    #[inline(always)]
    fn finish_bio(&mut self, b: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let parent = self.rq[b.index()].split_parent;
        self.rq[b.index()] = RqState::default();
        if parent.is_none() {
            ctx.complete(b);
        } else {
            self.finish_piece(b, parent, ctx);
        }
    }

    /// A piece of split bio `parent` is done.
    #[inline(never)]
    fn finish_piece(&mut self, b: ReqId, parent: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let piece = ctx.reqs()[b];
        let p = &mut ctx.reqs_mut()[parent];
        p.t.dispatched_ns = p.t.dispatched_ns.min(piece.t.dispatched_ns);
        if piece.status != qoslab_engine::IoStatus::Ok {
            p.status = piece.status;
        }
        let ps = &mut self.rq[parent.index()];
        ps.parts_left -= 1;
        let done = ps.parts_left == 0;
        if done {
            let (queued, dispatched) = (p.t.queued_ns, p.t.dispatched_ns);
            p.t = piece.t;
            p.t.queued_ns = queued;
            p.t.dispatched_ns = dispatched;
        }
        ctx.reqs_mut().free(b);
        if done {
            self.rq[parent.index()] = RqState::default();
            ctx.complete(parent);
        } else if self.retry_on_cpu {
            // The piece's own completion interrupt, for the CPU stage that runs the tag
            // sleepers it may wake (`with_retry_on_cpu`).
            ctx.notify_above(Notice::Interrupt { host: 0, vector: 0 });
        }
    }
}

impl Stage for BlockLayer {
    type Event = BlockEvent;

    fn name(&self) -> &'static str {
        "block"
    }

    /// Without a scheduler and with no request held, `complete` dispatches nothing: it may run
    /// inside the driver's hook, saving a hand-off per I/O.
    fn completes_at_once_now(&self) -> bool {
        !self.scheduled && self.held == 0 && self.ordered.is_none() && self.in_flush_seq == 0
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        self.grow(id);
        if self.issues_directly(&ctx.reqs()[id]) {
            self.submit_direct(id, ctx);
            return;
        }
        if let Some(o) = self.ordered.as_deref_mut()
            && o.takes(&ctx.reqs()[id])
        {
            let req = &mut ctx.reqs_mut()[id];
            req.prio = ioprio::effective(req.prio);
            self.stats.bios[req.op.index()] += 1;
            o.submit(id, ctx);
            return;
        }
        let now = ctx.now_ns();
        let req = &mut ctx.reqs_mut()[id];
        req.prio = ioprio::effective(req.prio);
        self.stats.bios[req.op.index()] += 1;
        if !self.write_cache.prepare(&mut ctx.reqs_mut()[id]) {
            self.stats.flushes_not_sent += 1;
            let t = &mut ctx.reqs_mut()[id].t;
            t.dispatched_ns = now;
            t.completed_ns = now;
            ctx.complete(id);
            return;
        }
        let req = &ctx.reqs()[id];
        let (len_bytes, job, flags) = (req.len_bytes, req.job as usize, req.flags);
        self.forget(id);
        self.meta[id.index()] = RqMeta {
            start_ns: now,
            io_start_ns: 0,
            segments: self.setup.segments(len_bytes),
        };
        if job >= self.plugs.len() {
            self.plugs.resize_with(job + 1, JobPlug::default);
        }
        if flags.contains(ReqFlags::BATCH_MORE) {
            self.rq[id.index()].place = Place::Batch;
            self.plugs[job].batch.push(id);
            if !self.unplug_armed {
                self.unplug_armed = true;
                ctx.schedule_now(BlockEvent::Unplug);
            }
            return;
        }
        if self.plugs[job].batch.is_empty() {
            self.take_bio(id, false, ctx);
        } else {
            self.plugs[job].batch.push(id);
            self.end_batch(job, ctx);
        }
    }

    fn on_event(&mut self, ev: BlockEvent, ctx: &mut impl StageCtx<BlockEvent>) {
        match ev {
            BlockEvent::Unplug => {
                self.unplug_armed = false;
                for job in 0..self.plugs.len() {
                    if !self.plugs[job].batch.is_empty() {
                        self.end_batch(job, ctx);
                    }
                }
            }
            BlockEvent::Resume { job } => self.resume_job(job as usize, ctx),
            BlockEvent::Order { stream } => {
                if let Some(o) = self.ordered.as_deref_mut() {
                    o.on_event(stream, ctx);
                }
            }
            BlockEvent::Wake { host } => {
                let now = ctx.now_ns();
                self.hosts[host as usize].wakes.remove(&now);
                self.with_sched(host, now, ctx.reqs(), |e, cx| e.timer(cx));
                self.run_async(host, ctx);
            }
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        if let Some(o) = self.ordered.as_deref_mut()
            && o.owns(id)
        {
            o.complete(id, ctx);
            return;
        }
        let now = ctx.now_ns();
        self.grow(id);
        let r = &ctx.reqs()[id];
        let st = self.rq[id.index()];
        let mine = st.place == Place::Driver && st.issued == (r.job, r.t.queued_ns, r.offset_bytes);
        if self.direct
            && mine
            && !st.grown
            && st.next_bio.is_none()
            && st.split_parent.is_none()
            && st.flush == FlushRole::None
        {
            // A request of its own, no scheduler to tell, no dispatch list to run (the general
            // path below comes to the same; see `submit_direct`).
            self.hctxs[st.hctx as usize].in_driver -= 1;
            self.account_completion(id, now, ctx.reqs());
            // Its id's next life starts with `forget`, which clears the rest.
            self.rq[id.index()].place = Place::Nowhere;
            ctx.reqs_mut()[id].t.completed_ns = now;
            ctx.complete(id);
            return;
        }
        let sched_id = if mine { id } else { self.adopt(id, ctx) };
        let st = self.rq[id.index()];
        if st.flush != FlushRole::None {
            self.complete_flush_part(id, st, ctx);
            return;
        }
        let h = st.hctx as usize;
        let host = self.hctxs[h].host;
        self.hctxs[h].in_driver -= 1;
        self.account_completion(id, now, ctx.reqs());
        self.with_sched(host, now, ctx.reqs(), |e, cx| e.completed(sched_id, cx));
        if st.grown {
            let r = &mut ctx.reqs_mut()[id];
            r.offset_bytes = st.orig_offset;
            r.len_bytes = st.orig_len;
        }
        if st.next_bio.is_none() {
            ctx.reqs_mut()[id].t.completed_ns = now;
            self.finish_bio(id, ctx);
        } else {
            self.finish_merged(id, st.next_bio, now, ctx);
        }
        if st.has_tag {
            self.release_tag(h, ctx);
        }
        if self.hosts[host as usize].elevator.is_some() {
            self.run_async(host, ctx);
        } else if self.setup.queue_depth.is_some() {
            if self.runs_on_cpu {
                self.run_async(host, ctx);
            } else {
                self.run_hctx_list(h, ctx);
            }
        }
    }

    /// A CPU stage above runs a woken task ([`Command::SubmitterRuns`]); every other command
    /// goes down.
    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<BlockEvent>) {
        match &mut msg.command {
            Command::SubmitterRuns { job } => self.run_woken(*job, ctx),
            Command::RunQueue {
                host,
                issued,
                issued_kib,
            } => {
                let host = *host;
                if let Some(p) = self.run_pending.get_mut(usize::from(host)) {
                    *p = false;
                }
                let before = self.issued;
                self.run_host(host, ctx);
                *issued = self.issued.0.wrapping_sub(before.0);
                *issued_kib = self.issued.1.wrapping_sub(before.1);
            }
            _ => {
                ctx.control_below(msg);
                return;
            }
        }
        msg.status = ControlStatus::Success;
    }

    fn pull(&mut self, ctx: &mut impl StageCtx<BlockEvent>) {
        if let Some(o) = self.ordered.as_deref_mut() {
            o.pull(ctx);
        }
        for h in 0..self.hctxs.len() {
            self.run_hctx_list(h, ctx);
        }
        for host in 0..self.hosts.len() as u16 {
            if self.hosts[host as usize].elevator.is_some() {
                self.run_host(host, ctx);
            }
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let mut out: Vec<(String, f64)> = Vec::new();
        let mut put = |k: &str, v: f64| out.push((k.to_string(), v));
        for (k, name) in [(0, "read"), (1, "write"), (2, "discard")] {
            put(&format!("{name}_ios"), s.ios[k] as f64);
            put(&format!("{name}_merges"), s.merges[k] as f64);
            put(&format!("{name}_sectors"), s.sectors[k] as f64);
            put(&format!("{name}_ticks_ms"), s.ticks_ns[k] as f64 / 1e6);
        }
        put("flush_ios", s.ios[3] as f64);
        put("flush_ticks_ms", s.ticks_ns[3] as f64 / 1e6);
        put("in_flight", s.in_flight as f64);
        put("io_ticks_ms", s.io_ticks_ns as f64 / 1e6);
        put(
            "time_in_queue_ms",
            s.ticks_ns.iter().sum::<u128>() as f64 / 1e6,
        );
        put("nr_requests", f64::from(self.setup.nr_requests));
        put(
            "wake_batch",
            self.hosts.first().map_or(0.0, |h| f64::from(h.wake_batch)),
        );
        put("max_sectors_kb", (self.setup.split_bytes / 1024) as f64);
        put("max_segments", f64::from(self.setup.max_segments));
        put("queue_depth", self.setup.queue_depth.map_or(0.0, f64::from));
        put("rotational", f64::from(u8::from(self.setup.rotational)));
        put("bios", s.bios.iter().sum::<u64>() as f64);
        put("bio_splits", s.bio_splits as f64);
        put("split_pieces", s.split_pieces as f64);
        put("plug_merges", s.plug_merges as f64);
        put("tag_waits", s.tag_waits as f64);
        put("submit_sleeps", s.submit_sleeps as f64);
        put("sched_tags_max", s.sched_tags_max as f64);
        put("waited", s.waited as f64);
        put("queued_max", s.queued_max as f64);
        put("flushes_not_sent", s.flushes_not_sent as f64);
        put("flush_sequences", s.flush_sequences as f64);
        put("flushes_sent", s.flushes_sent as f64);
        put("in_flight_max", s.in_flight_max as f64);
        for (k, name) in [(0, "read"), (1, "write")] {
            let w = &s.sched_wait(k);
            let d = &s.device[k];
            put(&format!("{name}_sched_wait_mean_ns"), mean(w));
            put(&format!("{name}_sched_wait_p99_ns"), pct(w, 99.0));
            put(&format!("{name}_sched_wait_max_ns"), pct(w, 100.0));
            put(&format!("{name}_device_mean_ns"), mean(d));
            put(&format!("{name}_device_p99_ns"), pct(d, 99.0));
            put(&format!("{name}_device_max_ns"), pct(d, 100.0));
        }
        let ops = self.hosts.iter().fold(OpCount::default(), |a, h| OpCount {
            hooks: a.hooks + h.ops.hooks,
            list_ops: a.list_ops + h.ops.list_ops,
            tree_levels: a.tree_levels + h.ops.tree_levels,
            hash_ops: a.hash_ops + h.ops.hash_ops,
        });
        let cpu = ops.cpu_ns(&self.setup.cost);
        let requests = s.ios.iter().sum::<u64>().max(1);
        put("sched_hook_calls", ops.hooks as f64);
        put("sched_list_ops", ops.list_ops as f64);
        put("sched_tree_levels", ops.tree_levels as f64);
        put("sched_hash_ops", ops.hash_ops as f64);
        put("sched_cpu_ns", cpu as f64);
        put("sched_cpu_ns_per_request", cpu as f64 / requests as f64);
        if let Some(e) = self.hosts.first().and_then(|h| h.elevator.as_deref()) {
            for (k, v) in e.counters() {
                out.push((format!("iosched_{k}"), v));
            }
        }
        if let Some(o) = &self.ordered {
            o.counters(&mut out);
        }
        out
    }

    fn collect_order_state(
        &self,
        reqs: &qoslab_engine::Requests,
        out: &mut qoslab_engine::order::OrderState,
    ) {
        if let Some(o) = &self.ordered {
            o.collect(reqs, out);
        }
    }
}

fn mean(h: &LatencyHist) -> f64 {
    h.moments.sum() as f64 / h.count().max(1) as f64
}

fn pct(h: &LatencyHist, p: f64) -> f64 {
    if h.count() == 0 {
        0.0
    } else {
        h.percentile(p) as f64
    }
}

#[cfg(test)]
mod tests {
    use crate::testbed::*;
    use qoslab_engine::{Ns, Op, ReqFlags};

    #[test]
    fn sequential_4k_writes_merge_into_max_sectors_kb_requests() {
        // The first write finds the disk idle; the next 32 x 4 wait in the scheduler and merge
        // back to back into 128 KiB requests (max_sectors_kb), no further. (Enough scheduler
        // tags that no bio waits for one: a submitter waiting for a tag is asleep in Linux.)
        let mut h = rig(
            "mq-deadline",
            &["block.max_sectors_kb=128", "block.nr_requests=64"],
            1,
            MS,
        );
        for k in 0..(1 + 32 * 4) {
            h.submit_at(0, io(Op::Write, k * 4 * KIB, 4 * KIB, BE4));
        }
        h.run_all();
        assert_eq!(counter(&h, "write_ios"), 5.0);
        assert_eq!(counter(&h, "write_merges"), 31.0 * 4.0);
        assert_eq!(counter(&h, "write_sectors"), (129 * 8) as f64);
        let lens: Vec<u64> = served(&h).iter().map(|s| s.len_bytes / KIB).collect();
        assert_eq!(lens, vec![4, 128, 128, 128, 128]);
        assert_eq!(h.completed.len(), 129, "every bio completes on its own");
    }

    #[test]
    fn merges_also_stop_at_max_segments() {
        // Each 4 KiB bio is its own segment: 8 segments make a 32 KiB request.
        let mut h = rig(
            "mq-deadline",
            &["block.max_segments=8", "block.nr_requests=64"],
            1,
            MS,
        );
        for k in 0..17 {
            h.submit_at(0, io(Op::Write, k * 4 * KIB, 4 * KIB, BE4));
        }
        h.run_all();
        let lens: Vec<u64> = served(&h).iter().map(|s| s.len_bytes / KIB).collect();
        assert_eq!(lens, vec![4, 32, 32]);
    }

    #[test]
    fn a_1_mib_read_splits_at_max_sectors_kb_and_completes_with_its_last_piece() {
        let mut h = rig("none", &["block.max_sectors_kb=128"], 4, MS);
        let id = h.submit_at(0, io(Op::Read, 0, MIB, BE4));
        h.run_all();
        assert_eq!(counter(&h, "bio_splits"), 1.0);
        assert_eq!(counter(&h, "split_pieces"), 8.0);
        assert_eq!(counter(&h, "read_ios"), 8.0);
        let offs: Vec<u64> = served(&h).iter().map(|s| s.offset_bytes / KIB).collect();
        assert_eq!(offs, (0..8).map(|k| k * 128).collect::<Vec<_>>());
        assert_eq!(h.completed, vec![(id, 8 * MS)]);
    }

    #[test]
    fn a_submission_batch_is_plugged_and_merges_in_the_plug_without_a_scheduler() {
        let mut h = rig("none", &[], 32, MS);
        h.submit_batch((0..32).map(|k| {
            let mut r = io(Op::Write, k * 4 * KIB, 4 * KIB, BE4);
            if k < 31 {
                r.flags |= ReqFlags::BATCH_MORE;
            }
            r
        }));
        h.run_all();
        assert_eq!(counter(&h, "plug_merges"), 31.0);
        assert_eq!(counter(&h, "write_ios"), 1.0);
        assert_eq!(served(&h)[0].len_bytes, 128 * KIB);
    }

    #[test]
    fn without_a_plug_none_merges_nothing() {
        let mut h = rig("none", &[], 1, MS);
        for k in 0..8 {
            h.submit_at(0, io(Op::Write, k * 4 * KIB, 4 * KIB, BE4));
        }
        h.run_all();
        assert_eq!(counter(&h, "write_ios"), 8.0);
        assert_eq!(counter(&h, "write_merges"), 0.0);
        assert_eq!(counter(&h, "queued_max"), 7.0);
    }

    #[test]
    fn bios_beyond_nr_requests_wait_for_a_scheduler_tag() {
        // 4 tags: one request at the disk, three in the scheduler, six bios waiting.
        let mut h = rig("mq-deadline", &["block.nr_requests=4"], 1, MS);
        for k in 0..10 {
            h.submit_at(0, io(Op::Read, k * MIB, 4 * KIB, BE4));
        }
        h.run_all();
        assert_eq!(counter(&h, "tag_waits"), 6.0);
        assert_eq!(counter(&h, "read_ios"), 10.0);
        assert_eq!(counter(&h, "nr_requests"), 4.0);
    }

    /// A read of job `job` (each job's submission call sleeps on its own).
    fn read_of(job: u32, offset_bytes: u64) -> qoslab_engine::Request {
        let mut r = io(Op::Read, offset_bytes, 4 * KIB, BE4);
        r.job = job;
        r
    }

    #[test]
    fn a_sleeper_is_woken_every_wake_batch_freed_tags() {
        // No scheduler, 16 driver tags: sbitmap's wake batch is 16 / 8 = 2. Job 0 holds all
        // 16 tags at a disk serving one request per ms (a tag frees at 1, 2, 3, ... ms); jobs
        // 1 to 4 each sleep for a tag, one per wait queue, and one of them wakes every second
        // freed tag, at 2, 4, 6 and 8 ms, although a tag is free from 1 ms on.
        let mut h = rig("none", &[], 16, MS);
        assert_eq!(counter(&h, "wake_batch"), 2.0);
        for k in 0..16 {
            h.submit_at(0, read_of(0, k * MIB));
        }
        for job in 1..=4 {
            h.submit_at(0, read_of(job, (100 + u64::from(job)) * MIB));
        }
        h.run_all();
        assert_eq!(counter(&h, "tag_waits"), 4.0);
        let woken: Vec<Ns> = (1..=4).map(|j| served_at(&h, (100 + j) * MIB)).collect();
        assert_eq!(woken, vec![2 * MS, 4 * MS, 6 * MS, 8 * MS]);
    }

    #[test]
    fn a_new_request_takes_a_free_tag_ahead_of_a_sleeper() {
        // As above with one sleeper (job 1, from 0 ms): the tag freed at 1 ms stays free until
        // the second frees at 2 ms wakes it, and job 2 asking at 1.5 ms takes it at once.
        let mut h = rig("none", &[], 16, MS);
        for k in 0..16 {
            h.submit_at(0, read_of(0, k * MIB));
        }
        h.submit_at(0, read_of(1, 101 * MIB));
        h.submit_at(3 * MS / 2, read_of(2, 102 * MIB));
        h.run_all();
        assert_eq!(counter(&h, "tag_waits"), 1.0);
        assert_eq!(served_at(&h, 102 * MIB), 3 * MS / 2);
        assert_eq!(served_at(&h, 101 * MIB), 2 * MS);
    }

    #[test]
    fn the_wake_batch_follows_the_tag_map_and_the_schedulers_shallow_depth() {
        // sbq_calc_wake_batch over the pinned kernel's schedulers (depth_updated hooks):
        // mq-deadline and bfq set a minimum shallow depth of 1 (one tag per word: 32 tags in
        // 4 words of 8 give 4 / 8, at least 1), kyber 75 % of a word (6 of 8: 24 / 8 = 3).
        assert_eq!(super::sbitmap_wake_batch(16, |_| u32::MAX), 2);
        assert_eq!(super::sbitmap_wake_batch(4, |_| u32::MAX), 1);
        assert_eq!(super::sbitmap_wake_batch(32, |_| u32::MAX), 4);
        assert_eq!(super::sbitmap_wake_batch(256, |_| u32::MAX), 8);
        let batch =
            |sched: &str| counter(&rig(sched, &["block.nr_requests=32"], 16, MS), "wake_batch");
        assert_eq!(batch("mq-deadline"), 1.0);
        assert_eq!(batch("bfq"), 1.0);
        assert_eq!(batch("kyber"), 3.0);
        assert_eq!(batch("prio"), 4.0);
    }

    #[test]
    fn under_saturating_writes_no_read_waits_longer_than_read_expire_plus_one_batch() {
        // 3000 writes in sector order (gaps between them: no merging) fill the scheduler at
        // once; a read at a far sector
        // arrives every 7 ms. The disk's own queue (one request of 1 ms) comes on top.
        let sets = [
            "block.nr_requests=8192",
            "block.mq-deadline.read_expire=20",
            "block.mq-deadline.fifo_batch=16",
        ];
        let mut h = rig("mq-deadline", &sets, 1, MS);
        for k in 0..3000 {
            h.submit_at(0, io(Op::Write, k * 8 * KIB, 4 * KIB, BE4));
        }
        for k in 0..300 {
            h.submit_at(k * 7 * MS, io(Op::Read, (1 << 30) + k * MIB, 4 * KIB, BE4));
        }
        h.run_all();
        let worst = counter(&h, "read_sched_wait_max_ns");
        assert!(worst <= ((20 + 16) * MS) as f64, "{worst}");
        assert_eq!(counter(&h, "read_ios"), 300.0);
        // Writes are not starved meanwhile: reads took a small share of the disk's 2.1 s.
        let writes_by = served(&h)
            .iter()
            .filter(|s| s.op == Op::Write && s.at_ns < 2100 * MS)
            .count();
        assert!(writes_by > 1500, "{writes_by}");
    }

    #[test]
    fn nr_requests_defaults_as_the_kernel_sets_it() {
        // Twice the hardware queue depth (at most 128) with a scheduler, the depth without.
        let h = rig("mq-deadline", &[], 32, MS);
        assert_eq!(counter(&h, "nr_requests"), 64.0);
        let h = rig("none", &[], 32, MS);
        assert_eq!(counter(&h, "nr_requests"), 32.0);
    }
}
