//! The NVMe host driver and controller as one stage of the simulated path.
//!
//! Above it, jobs submit I/Os; below it, a device serves commands. In between, as on a real
//! system:
//! - the host driver splits I/Os at the controller's MDTS, takes a command id on the SQ of the
//!   submitting core (one SQ per core, or one per core and priority class under WRR), writes
//!   the SQ entry and rings the tail doorbell;
//! - the controller fetches entries by arbitration (round robin, or weighted round robin with
//!   an urgent class, with an arbitration burst), moves write data over the PCIe link, hands
//!   the command to the media, moves read data back, and posts a CQ entry with the current
//!   phase tag, in the order the completion-order policy allows;
//! - the interrupt vector of the CQ fires per entry or as the coalescing rule says, and the
//!   host consumes the entries whose phase tag is new, frees the command ids and completes the
//!   I/Os;
//! - a command that outlives the host's timeout is aborted; if the controller cannot withdraw
//!   it, the host resets the controller and requeues everything outstanding.
//!
//! Fixed costs (host CPU, doorbell, fetch, controller, CQ post, interrupt) are tunables, folded
//! into as few events as the order of events allows: when no completion-order policy and no
//! coalescing are configured, the time from media done to host completion is a sum known at
//! media completion (one event instead of three); with a single SQ, the fetch is booked when
//! the entry is written (nothing that happens before its doorbell lands could change it). A
//! simulated I/O on the default path costs three heap events.

pub mod arbiter;
pub mod config;
pub mod link;
pub mod order;
pub mod rings;

use qoslab_engine::{
    IoPrio, IoPrioClass, IoStatus, Ns, Op, ReqFlags, ReqId, Request, RngStream, Stage, StageCtx,
};

pub use arbiter::{AnyArbiter, Arbiter, SqView};
pub use config::{
    Arbitration, CONTROLLER_TUNABLES, CompletionOrder, HOST_TUNABLES, LINK_TUNABLES, NvmeConfig,
    SqClass,
};
pub use link::{Direction, PcieLink};
use order::OrderBuffer;
use rings::{Cq, Cqe, Sq};

/// Bytes of one SQ entry and one CQ entry.
const SQE_BYTES: u64 = 64;
const CQE_BYTES: u64 = 16;

/// Timed events of the NVMe stage. `epoch` changes at every controller reset; events of an
/// older epoch belong to state the reset threw away and are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvmeEvent {
    /// A tail doorbell write reaches the controller.
    Doorbell { sq: u16, epoch: u32 },
    /// The fetch engine is free again and entries are waiting for it.
    FetchDone { epoch: u32 },
    /// Controller processing (and write data transfer) is done: the command goes to the media.
    MediaSubmit { id: ReqId, epoch: u32 },
    /// Read data is in host memory: the command enters its SQ's completion order.
    CqReady { id: ReqId, epoch: u32 },
    /// The CQ entry write lands.
    CqPost { id: ReqId, epoch: u32 },
    /// An interrupt reaches the host: the handler consumes the new entries of the CQ.
    Interrupt { cq: u16, epoch: u32 },
    /// The aggregation time of a vector ran out.
    CoalesceTimer { cq: u16, generation: u32 },
    /// The host finished handling the completion of a command.
    HostDone { id: ReqId },
    /// Time to look for commands past their timeout.
    TimeoutScan,
    /// An Abort admin command for `id` reaches the controller.
    AbortArrive { id: ReqId, epoch: u32 },
    /// The controller is ready again after a reset.
    ResetDone,
}

/// Where a command is, as this stage sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum CmdState {
    #[default]
    Idle,
    /// In the host's software queue, waiting for a command id.
    Waiting,
    /// Written to the SQ, not yet fetched.
    InSq,
    /// Fetched; controller processing or write data transfer under way.
    Fetched,
    /// At the media.
    AtMedia,
    /// Media done; the host-completion time is already computed (fast path).
    Done,
    /// Media done; waiting for its turn to post (completion order, CQ space).
    Finished,
    /// CQ entry posted, not yet consumed.
    Posted,
    /// Consumed by the host, completion handling under way.
    Reaped,
}

#[derive(Clone, Copy, Debug, Default)]
struct Cmd {
    sq: u16,
    cid: u16,
    state: CmdState,
    abort_requested: bool,
    timed_out: bool,
}

/// Counters of the NVMe stage (read-only observability, apart from the tunables).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvmeStats {
    /// I/Os submitted from above.
    pub ios: u64,
    /// NVMe commands, after MDTS splitting.
    pub commands: u64,
    /// I/Os that were split.
    pub split_ios: u64,
    /// Commands fetched per SQ class (urgent, high, medium, low).
    pub fetched_by_class: [u64; 4],
    pub doorbells: u64,
    pub cq_entries: u64,
    pub interrupts: u64,
    pub timeouts: u64,
    pub aborts_succeeded: u64,
    pub aborts_failed: u64,
    pub resets: u64,
    pub requeues: u64,
    /// I/Os failed after `max_retries` requeues.
    pub failed: u64,
    /// The most I/Os ever waiting for a command id.
    pub max_waiting: u64,
}

/// The NVMe host driver and controller.
pub struct Nvme {
    cfg: NvmeConfig,
    /// SQs per core: 1 under round robin, one per class under WRR.
    sqs_per_core: usize,
    sqs: Vec<Sq>,
    cqs: Vec<Cq>,
    orders: Vec<OrderBuffer>,
    arbiter: AnyArbiter,
    views: Vec<SqView>,
    link: PcieLink,
    /// The fetch engine is busy until then.
    fetch_free_at: Ns,
    /// A FetchDone event is pending to restart fetching.
    fetch_wake_scheduled: bool,
    /// Arrival time of the last doorbell whose fetch was booked at once (to count doorbells
    /// shared by a batch once).
    last_folded_doorbell_ns: Option<Ns>,
    /// Commands fetched and not yet finished by the media.
    outstanding: u32,
    cmds: Vec<Cmd>,
    epoch: u32,
    resetting: bool,
    /// I/Os to issue when the reset completes, with "cancelled by the reset" (a requeue) or
    /// not (arrived during the reset).
    held: Vec<(ReqId, bool)>,
    timeout_scan_armed: bool,
    fast_completion: bool,
    rng: RngStream,
    pub stats: NvmeStats,
}

/// The SQ class of an I/O priority under WRR: real-time is urgent; best-effort levels 0-2 are
/// high, 3-5 medium, 6-7 low; idle is low; no priority is medium.
pub fn class_of(prio: IoPrio) -> SqClass {
    match prio.class {
        IoPrioClass::RealTime => SqClass::Urgent,
        IoPrioClass::BestEffort => match prio.level {
            0..=2 => SqClass::High,
            3..=5 => SqClass::Medium,
            _ => SqClass::Low,
        },
        IoPrioClass::Idle => SqClass::Low,
        IoPrioClass::None => SqClass::Medium,
    }
}

impl Nvme {
    pub fn new(cfg: NvmeConfig, seed: u64) -> Self {
        let sqs_per_core = match cfg.arbitration {
            Arbitration::RoundRobin => 1,
            Arbitration::WeightedRoundRobin => SqClass::ALL.len(),
        };
        let mut sqs = Vec::new();
        for core in 0..cfg.cores {
            for k in 0..sqs_per_core {
                let class = if sqs_per_core == 1 {
                    SqClass::Medium
                } else {
                    SqClass::ALL[k]
                };
                sqs.push(Sq::new(class, core as u16, cfg.sq_depth));
            }
        }
        let cqs = (0..cfg.cores).map(|_| Cq::new(cfg.cq_depth)).collect();
        let orders = (0..sqs.len()).map(|_| OrderBuffer::default()).collect();
        let views = sqs
            .iter()
            .map(|s| SqView {
                class: s.class,
                available: 0,
            })
            .collect();
        Nvme {
            arbiter: AnyArbiter::from_config(&cfg),
            link: PcieLink::new(
                cfg.lane_rate,
                cfg.lanes,
                cfg.tlp_payload_bytes,
                cfg.tlp_overhead_bytes,
            ),
            fast_completion: cfg.completion_order == CompletionOrder::Device && !cfg.coalescing(),
            sqs_per_core,
            sqs,
            cqs,
            orders,
            views,
            fetch_free_at: 0,
            fetch_wake_scheduled: false,
            last_folded_doorbell_ns: None,
            outstanding: 0,
            cmds: Vec::new(),
            epoch: 0,
            resetting: false,
            held: Vec::new(),
            timeout_scan_armed: false,
            rng: RngStream::new(seed, "nvme/completion_order"),
            stats: NvmeStats::default(),
            cfg,
        }
    }

    pub fn config(&self) -> &NvmeConfig {
        &self.cfg
    }

    /// Interrupts raised per vector (per core).
    pub fn interrupts_per_vector(&self) -> Vec<u64> {
        self.cqs.iter().map(|c| c.interrupts).collect()
    }

    /// Bytes' worth of time the link was busy, per direction (to device, to host).
    pub fn link_busy_ns(&self) -> [Ns; 2] {
        self.link.busy_ns
    }

    #[inline]
    fn cmd(&mut self, id: ReqId) -> &mut Cmd {
        let i = id.index();
        if i >= self.cmds.len() {
            self.cmds.resize(i + 1, Cmd::default());
        }
        &mut self.cmds[i]
    }

    fn sq_of(&self, req: &Request) -> usize {
        let core = req.core as usize % self.cfg.cores as usize;
        let slot = if self.sqs_per_core == 1 {
            0
        } else {
            class_of(req.prio) as usize
        };
        core * self.sqs_per_core + slot
    }

    // ---- host driver: submission ------------------------------------------------------------

    /// An NVMe command (a whole I/O, or one part of a split one) goes to its SQ.
    fn host_issue(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        if self.resetting {
            self.held.push((id, false));
            return;
        }
        let sqi = self.sq_of(&ctx.reqs()[id]);
        ctx.reqs_mut()[id].sq = sqi as u16;
        match self.sqs[sqi].alloc_cid(id) {
            Some(cid) => self.place(id, sqi, cid, ctx),
            None => {
                *self.cmd(id) = Cmd {
                    sq: sqi as u16,
                    state: CmdState::Waiting,
                    ..Cmd::default()
                };
                let sq = &mut self.sqs[sqi];
                sq.waiting.push_back(id);
                self.stats.max_waiting = self.stats.max_waiting.max(sq.waiting.len() as u64);
            }
        }
    }

    /// The driver writes the SQ entry (after its CPU time) and rings the doorbell.
    fn place(&mut self, id: ReqId, sqi: usize, cid: u16, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        *self.cmd(id) = Cmd {
            sq: sqi as u16,
            cid,
            state: CmdState::InSq,
            ..Cmd::default()
        };
        self.stats.commands += 1;
        let written = now + self.cfg.submit_ns;
        let req = &mut ctx.reqs_mut()[id];
        req.t.dispatched_ns = written;
        let parent = req.parent;
        if !parent.is_none() {
            let p = &mut ctx.reqs_mut()[parent];
            p.t.dispatched_ns = p.t.dispatched_ns.min(written);
        }
        let tail = self.sqs[sqi].write_entry(id);
        let arrives = written + self.cfg.doorbell_ns;
        if arrives == now {
            self.sqs[sqi].db_tail = tail;
            self.stats.doorbells += 1;
            self.try_fetch(ctx);
        } else if self.can_fold_doorbell(sqi) {
            // With one SQ, nothing between now and the doorbell's arrival can change what the
            // controller will do with it (later entries arrive later, completions only make
            // room), so the fetch is booked now instead of through a Doorbell event.
            let sq = &mut self.sqs[sqi];
            sq.db_tail = tail;
            if self.last_folded_doorbell_ns != Some(arrives) {
                self.stats.doorbells += 1;
                self.last_folded_doorbell_ns = Some(arrives);
            }
            let start = arrives.max(self.fetch_free_at);
            self.stats.fetched_by_class[sq.class as usize] += 1;
            self.outstanding += 1;
            sq.fetched_open += 1;
            let id = sq.fetch_entry();
            let mut done_at = start + self.cfg.fetch_ns;
            if self.cfg.queue_entries_on_link {
                done_at = done_at.max(self.link.transfer(Direction::ToDevice, start, SQE_BYTES));
            }
            self.fetch_free_at = done_at;
            self.fetched(id, done_at, ctx);
        } else {
            // Entries written at the same instant share one doorbell write, as a driver
            // committing a batch does.
            let sq = &mut self.sqs[sqi];
            match sq.db_writes.back_mut() {
                Some(last) if last.0 == arrives => last.1 = tail,
                _ => {
                    sq.db_writes.push_back((arrives, tail));
                    ctx.schedule(
                        arrives,
                        NvmeEvent::Doorbell {
                            sq: sqi as u16,
                            epoch: self.epoch,
                        },
                    );
                }
            }
        }
        self.arm_timeout_scan(written, ctx);
    }

    /// Whether the fetch of an entry just written to SQ `sqi` can be booked now: a single SQ,
    /// no doorbell on its way and nothing waiting in it, room in the controller.
    fn can_fold_doorbell(&self, sqi: usize) -> bool {
        let sq = &self.sqs[sqi];
        self.sqs.len() == 1
            && !self.resetting
            && sq.db_writes.is_empty()
            && sq.fetchable() == 0
            && (self.cfg.max_outstanding == 0 || self.outstanding < self.cfg.max_outstanding)
            && (self.cfg.fetch_limit_per_sq == 0 || sq.fetched_open < self.cfg.fetch_limit_per_sq)
    }

    fn on_doorbell(&mut self, sqi: usize, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        let sq = &mut self.sqs[sqi];
        while let Some(&(at, tail)) = sq.db_writes.front() {
            if at > now {
                break;
            }
            sq.db_tail = sq.db_tail.max(tail);
            sq.db_writes.pop_front();
            self.stats.doorbells += 1;
        }
        self.try_fetch(ctx);
    }

    // ---- controller: fetch and media -------------------------------------------------------

    /// Fetches what arbitration allows. The fetch engine is serial: a batch of n entries
    /// occupies it for n x fetch_ns, but it needs an event only when entries wait for it; a
    /// fetched command goes to the media at its ready time directly.
    fn try_fetch(&mut self, ctx: &mut impl StageCtx<NvmeEvent>) {
        loop {
            if self.resetting {
                return;
            }
            let room = match self.cfg.max_outstanding {
                0 => u32::MAX,
                m => m.saturating_sub(self.outstanding),
            };
            if room == 0 {
                return;
            }
            let limit = self.cfg.fetch_limit_per_sq;
            let mut any = false;
            for (v, sq) in self.views.iter_mut().zip(&self.sqs) {
                let mut avail = sq.fetchable();
                if limit > 0 {
                    avail = avail.min(limit.saturating_sub(sq.fetched_open));
                }
                v.available = avail;
                any |= avail > 0;
            }
            if !any {
                return;
            }
            let now = ctx.now_ns();
            if self.fetch_free_at > now {
                if !self.fetch_wake_scheduled {
                    self.fetch_wake_scheduled = true;
                    ctx.schedule(
                        self.fetch_free_at,
                        NvmeEvent::FetchDone { epoch: self.epoch },
                    );
                }
                return;
            }
            let Some((sqi, n)) = self.arbiter.pick(&self.views) else {
                return;
            };
            let n = n.min(room);
            let class = self.sqs[sqi].class as usize;
            self.stats.fetched_by_class[class] += n as u64;
            self.outstanding += n;
            self.sqs[sqi].fetched_open += n;
            let mut done_at = now + self.cfg.fetch_ns * n as Ns;
            if self.cfg.queue_entries_on_link {
                done_at = done_at.max(self.link.transfer(
                    Direction::ToDevice,
                    now,
                    SQE_BYTES * n as u64,
                ));
            }
            self.fetch_free_at = done_at;
            for _ in 0..n {
                let id = self.sqs[sqi].fetch_entry();
                self.fetched(id, done_at, ctx);
            }
        }
    }

    /// Command `id` was fetched (its entry arrives at `at`): it goes to the media after the
    /// controller's processing and, for a write, the data transfer.
    fn fetched(&mut self, id: ReqId, at: Ns, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        let c = self.cmd(id);
        c.state = CmdState::Fetched;
        let sqi = c.sq as usize;
        if self.cfg.completion_order != CompletionOrder::Device {
            self.orders[sqi].fetched(id);
        }
        let req = &mut ctx.reqs_mut()[id];
        req.t.fetched_ns = at;
        let (op, len) = (req.op, req.len_bytes);
        let mut ready = at + self.cfg.cmd_ns;
        if op.carries_data_to_device() {
            ready = self.link.transfer(Direction::ToDevice, ready, len);
        }
        if ready == now {
            self.hand_to_media(id, ctx);
        } else {
            ctx.schedule(
                ready,
                NvmeEvent::MediaSubmit {
                    id,
                    epoch: self.epoch,
                },
            );
        }
    }

    fn hand_to_media(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let c = self.cmd(id);
        if c.abort_requested {
            ctx.reqs_mut()[id].status = IoStatus::Aborted;
            self.stats.aborts_succeeded += 1;
            self.controller_done(id, ctx);
            return;
        }
        c.state = CmdState::AtMedia;
        ctx.dispatch(id);
    }

    // ---- controller: completion ------------------------------------------------------------

    /// The media (or an abort) finished command `id`: release its controller resources, move
    /// read data, and post the CQ entry now or when the completion order allows.
    fn controller_done(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        let sqi = self.cmd(id).sq as usize;
        self.outstanding -= 1;
        self.sqs[sqi].fetched_open -= 1;
        let req = &ctx.reqs()[id];
        let (op, len, ok) = (req.op, req.len_bytes, req.status == IoStatus::Ok);
        let data_at = if op.carries_data_to_host() && ok {
            self.link.transfer(Direction::ToHost, now, len)
        } else {
            now
        };
        if self.fast_completion {
            let posted = self.post_time(data_at);
            let interrupt = posted + self.cfg.irq_ns;
            let host_done = interrupt + self.cfg.complete_ns;
            let t = &mut ctx.reqs_mut()[id].t;
            t.cq_posted_ns = posted;
            t.interrupt_ns = interrupt;
            self.cmd(id).state = CmdState::Done;
            if host_done == now {
                self.host_done(id, ctx);
            } else {
                ctx.schedule(host_done, NvmeEvent::HostDone { id });
            }
        } else {
            self.cmd(id).state = CmdState::Finished;
            let epoch = self.epoch;
            if data_at == now {
                self.cq_ready(id, ctx);
            } else {
                ctx.schedule(data_at, NvmeEvent::CqReady { id, epoch });
            }
        }
        self.try_fetch(ctx);
    }

    /// When a CQ entry whose write starts at `start` lands.
    fn post_time(&mut self, start: Ns) -> Ns {
        let mut at = start + self.cfg.cq_post_ns;
        if self.cfg.queue_entries_on_link {
            at = self.link.transfer(Direction::ToHost, at, CQE_BYTES);
        }
        at
    }

    fn cq_ready(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        if self.cfg.completion_order == CompletionOrder::Device {
            self.schedule_post(id, ctx);
            return;
        }
        let sqi = self.cmd(id).sq as usize;
        self.orders[sqi].finished(id);
        while let Some(next) = self.orders[sqi].next(
            self.cfg.completion_order,
            self.cfg.reorder_bound,
            &mut self.rng,
        ) {
            self.schedule_post(next, ctx);
        }
    }

    fn schedule_post(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        let at = self.post_time(now);
        if at == now {
            self.cq_post(id, ctx);
        } else {
            ctx.schedule(
                at,
                NvmeEvent::CqPost {
                    id,
                    epoch: self.epoch,
                },
            );
        }
    }

    /// The CQ entry of `id` lands in its CQ (or waits for room), and the vector's coalescing
    /// rule decides whether it raises an interrupt.
    fn cq_post(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        let c = *self.cmd(id);
        let cqi = self.sqs[c.sq as usize].cq as usize;
        let cqe = Cqe {
            id,
            sq: c.sq,
            cid: c.cid,
            phase: false,
        };
        let cq = &mut self.cqs[cqi];
        if cq.is_full() {
            cq.stalled.push_back(cqe);
            return;
        }
        cq.post(cqe);
        self.stats.cq_entries += 1;
        self.cmd(id).state = CmdState::Posted;
        ctx.reqs_mut()[id].t.cq_posted_ns = now;
        let cfg = &self.cfg;
        let cq = &mut self.cqs[cqi];
        cq.pending_irq += 1;
        if !cfg.coalescing() || cq.pending_irq >= cfg.coalesce_threshold {
            self.raise_interrupt(cqi, ctx);
        } else if !cq.timer_armed {
            cq.timer_armed = true;
            ctx.schedule(
                now + cfg.coalesce_time_ns,
                NvmeEvent::CoalesceTimer {
                    cq: cqi as u16,
                    generation: cq.timer_gen,
                },
            );
        }
    }

    fn raise_interrupt(&mut self, cqi: usize, ctx: &mut impl StageCtx<NvmeEvent>) {
        let cq = &mut self.cqs[cqi];
        cq.pending_irq = 0;
        cq.timer_armed = false;
        cq.timer_gen = cq.timer_gen.wrapping_add(1);
        cq.interrupts += 1;
        self.stats.interrupts += 1;
        let now = ctx.now_ns();
        let at = now + self.cfg.irq_ns;
        if at == now {
            self.interrupt(cqi, ctx);
        } else {
            ctx.schedule(
                at,
                NvmeEvent::Interrupt {
                    cq: cqi as u16,
                    epoch: self.epoch,
                },
            );
        }
    }

    // ---- host driver: completion -----------------------------------------------------------

    /// The interrupt handler consumes every new entry of the CQ.
    fn interrupt(&mut self, cqi: usize, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        while let Some(e) = self.cqs[cqi].reap() {
            self.cmd(e.id).state = CmdState::Reaped;
            ctx.reqs_mut()[e.id].t.interrupt_ns = now;
            let at = now + self.cfg.complete_ns;
            if at == now {
                self.host_done(e.id, ctx);
            } else {
                ctx.schedule(at, NvmeEvent::HostDone { id: e.id });
            }
        }
        // The CQ head doorbell made room: entries that were waiting for it go in now.
        while !self.cqs[cqi].is_full() {
            let Some(e) = self.cqs[cqi].stalled.pop_front() else {
                break;
            };
            self.cq_post(e.id, ctx);
        }
    }

    fn host_done(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let now = ctx.now_ns();
        let c = *self.cmd(id);
        let sqi = c.sq as usize;
        if c.state == CmdState::Done {
            // Fast path: the entry is posted and consumed now (times were stamped when the
            // media finished), one interrupt each.
            let cqi = self.sqs[sqi].cq as usize;
            let cq = &mut self.cqs[cqi];
            cq.post(Cqe {
                id,
                sq: c.sq,
                cid: c.cid,
                phase: false,
            });
            let reaped = cq.reap();
            debug_assert_eq!(reaped.map(|e| e.id), Some(id));
            cq.interrupts += 1;
            self.stats.cq_entries += 1;
            self.stats.interrupts += 1;
        }
        self.cmd(id).state = CmdState::Idle;
        self.sqs[sqi].free_cid(c.cid);
        if let Some(w) = self.sqs[sqi].waiting.pop_front() {
            let cid = self.sqs[sqi]
                .alloc_cid(w)
                .expect("a command id was just freed");
            self.place(w, sqi, cid, ctx);
        }
        let req = &mut ctx.reqs_mut()[id];
        req.t.completed_ns = now;
        if req.status == IoStatus::Aborted && c.timed_out {
            self.requeue(id, ctx);
        } else {
            self.finish(id, ctx);
        }
    }

    /// Issues `id` again after an abort or reset, or fails it after `max_retries`.
    fn requeue(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let req = &mut ctx.reqs_mut()[id];
        if u32::from(req.retries) >= self.cfg.max_retries {
            req.status = IoStatus::Aborted;
            self.stats.failed += 1;
            self.finish(id, ctx);
            return;
        }
        req.retries += 1;
        req.flags |= ReqFlags::REQUEUED;
        req.status = IoStatus::Ok;
        self.stats.requeues += 1;
        self.host_issue(id, ctx);
    }

    /// Reports a command complete: the I/O itself, or one part of a split I/O.
    fn finish(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let req = ctx.reqs()[id];
        if req.parent.is_none() {
            ctx.complete(id);
            return;
        }
        let p = &mut ctx.reqs_mut()[req.parent];
        p.pending_parts -= 1;
        if req.status != IoStatus::Ok {
            p.status = req.status;
        }
        p.retries = p.retries.max(req.retries);
        if p.pending_parts == 0 {
            // The last part to finish carries the I/O's later stamps.
            let (queued, dispatched) = (p.t.queued_ns, p.t.dispatched_ns);
            p.t = req.t;
            p.t.queued_ns = queued;
            p.t.dispatched_ns = dispatched;
        }
        let done = p.pending_parts == 0;
        ctx.reqs_mut().free(id);
        if done {
            ctx.complete(req.parent);
        }
    }

    // ---- timeouts, aborts, resets -----------------------------------------------------------

    fn arm_timeout_scan(&mut self, dispatched: Ns, ctx: &mut impl StageCtx<NvmeEvent>) {
        if self.cfg.timeout_ns > 0 && !self.timeout_scan_armed {
            self.timeout_scan_armed = true;
            ctx.schedule(dispatched + self.cfg.timeout_ns, NvmeEvent::TimeoutScan);
        }
    }

    fn timeout_scan(&mut self, ctx: &mut impl StageCtx<NvmeEvent>) {
        self.timeout_scan_armed = false;
        let now = ctx.now_ns();
        let mut next: Option<Ns> = None;
        let mut expired = Vec::new();
        for sq in &self.sqs {
            for (_, id) in sq.outstanding() {
                let c = self.cmds[id.index()];
                if c.timed_out
                    || matches!(
                        c.state,
                        CmdState::Idle | CmdState::Waiting | CmdState::Reaped | CmdState::Done
                    )
                {
                    continue;
                }
                let deadline = ctx.reqs()[id].t.dispatched_ns + self.cfg.timeout_ns;
                if deadline <= now {
                    expired.push(id);
                } else {
                    next = Some(next.map_or(deadline, |n| n.min(deadline)));
                }
            }
        }
        for id in expired {
            self.cmd(id).timed_out = true;
            self.stats.timeouts += 1;
            ctx.schedule(
                now + self.cfg.abort_ns,
                NvmeEvent::AbortArrive {
                    id,
                    epoch: self.epoch,
                },
            );
        }
        if let Some(at) = next {
            self.timeout_scan_armed = true;
            ctx.schedule(at, NvmeEvent::TimeoutScan);
        }
    }

    fn abort_arrive(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        let c = *self.cmd(id);
        if !c.timed_out {
            return; // completed meanwhile and the id was reused
        }
        match c.state {
            CmdState::InSq | CmdState::Fetched => self.cmd(id).abort_requested = true,
            CmdState::AtMedia => {
                if ctx.abort_below(id) {
                    self.stats.aborts_succeeded += 1;
                    ctx.reqs_mut()[id].status = IoStatus::Aborted;
                    self.controller_done(id, ctx);
                } else {
                    // The controller cannot withdraw it: the host escalates to a reset.
                    self.stats.aborts_failed += 1;
                    self.start_reset(ctx);
                }
            }
            _ => {}
        }
    }

    fn start_reset(&mut self, ctx: &mut impl StageCtx<NvmeEvent>) {
        if self.resetting {
            return;
        }
        self.stats.resets += 1;
        self.resetting = true;
        self.epoch = self.epoch.wrapping_add(1);
        let now = ctx.now_ns();
        let mut cancelled: Vec<ReqId> = Vec::new();
        for sqi in 0..self.sqs.len() {
            let outstanding: Vec<(u16, ReqId)> = self.sqs[sqi].outstanding().collect();
            for (cid, id) in outstanding {
                let state = self.cmds[id.index()].state;
                match state {
                    // Completion already on its way to the host: let it finish.
                    CmdState::Reaped | CmdState::Done => continue,
                    CmdState::AtMedia => {
                        // The media still holds it: its completion will be dropped; a copy is
                        // issued again.
                        let mut copy = ctx.reqs()[id];
                        ctx.reqs_mut()[id].flags |= ReqFlags::ORPHAN;
                        copy.flags.remove(ReqFlags::ORPHAN);
                        let new = ctx.reqs_mut().alloc(copy);
                        *self.cmd(id) = Cmd::default();
                        cancelled.push(new);
                    }
                    _ => {
                        *self.cmd(id) = Cmd::default();
                        cancelled.push(id);
                    }
                }
                self.sqs[sqi].free_cid(cid);
            }
            self.sqs[sqi].reset_ring();
            self.orders[sqi].clear();
        }
        for cq in &mut self.cqs {
            cq.reset();
        }
        self.outstanding = 0;
        self.fetch_free_at = now;
        self.fetch_wake_scheduled = false;
        self.link.reset(now);
        ctx.reset_below();
        cancelled.sort_by_key(|&id| (ctx.reqs()[id].t.queued_ns, id));
        // Cancelled commands go first, then I/Os that arrive during the reset.
        self.held
            .splice(0..0, cancelled.into_iter().map(|id| (id, true)));
        ctx.schedule(now + self.cfg.reset_ns, NvmeEvent::ResetDone);
    }

    fn reset_done(&mut self, ctx: &mut impl StageCtx<NvmeEvent>) {
        self.resetting = false;
        for (id, cancelled) in std::mem::take(&mut self.held) {
            if cancelled {
                self.requeue(id, ctx);
            } else {
                self.host_issue(id, ctx);
            }
        }
        // Command ids the reset freed go to I/Os that were waiting for one.
        for sqi in 0..self.sqs.len() {
            while let Some(&w) = self.sqs[sqi].waiting.front() {
                let Some(cid) = self.sqs[sqi].alloc_cid(w) else {
                    break;
                };
                self.sqs[sqi].waiting.pop_front();
                self.place(w, sqi, cid, ctx);
            }
        }
        self.try_fetch(ctx);
    }
}

impl Stage for Nvme {
    type Event = NvmeEvent;

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        self.stats.ios += 1;
        let req = ctx.reqs()[id];
        let mdts = self.cfg.mdts_bytes;
        if mdts == 0 || req.len_bytes <= mdts || !matches!(req.op, Op::Read | Op::Write) {
            self.host_issue(id, ctx);
            return;
        }
        self.stats.split_ios += 1;
        let parts = req.len_bytes.div_ceil(mdts);
        let p = &mut ctx.reqs_mut()[id];
        p.pending_parts = parts as u32;
        p.t.dispatched_ns = Ns::MAX;
        for k in 0..parts {
            let mut part = req;
            part.offset_bytes = req.offset_bytes + k * mdts;
            part.len_bytes = mdts.min(req.len_bytes - k * mdts);
            part.parent = id;
            part.flags |= ReqFlags::SPLIT;
            let pid = ctx.reqs_mut().alloc(part);
            self.host_issue(pid, ctx);
        }
    }

    fn on_event(&mut self, ev: NvmeEvent, ctx: &mut impl StageCtx<NvmeEvent>) {
        let current = self.epoch;
        match ev {
            NvmeEvent::HostDone { id } => self.host_done(id, ctx),
            NvmeEvent::TimeoutScan => self.timeout_scan(ctx),
            NvmeEvent::ResetDone => self.reset_done(ctx),
            NvmeEvent::CoalesceTimer { cq, generation } => {
                let c = &self.cqs[cq as usize];
                if c.timer_armed && c.timer_gen == generation && c.pending_irq > 0 {
                    self.raise_interrupt(cq as usize, ctx);
                }
            }
            NvmeEvent::Doorbell { epoch, .. }
            | NvmeEvent::FetchDone { epoch }
            | NvmeEvent::MediaSubmit { epoch, .. }
            | NvmeEvent::CqReady { epoch, .. }
            | NvmeEvent::CqPost { epoch, .. }
            | NvmeEvent::Interrupt { epoch, .. }
            | NvmeEvent::AbortArrive { epoch, .. }
                if epoch != current => {}
            NvmeEvent::Doorbell { sq, .. } => self.on_doorbell(sq as usize, ctx),
            NvmeEvent::FetchDone { .. } => {
                self.fetch_wake_scheduled = false;
                self.try_fetch(ctx);
            }
            NvmeEvent::MediaSubmit { id, .. } => self.hand_to_media(id, ctx),
            NvmeEvent::CqReady { id, .. } => self.cq_ready(id, ctx),
            NvmeEvent::CqPost { id, .. } => self.cq_post(id, ctx),
            NvmeEvent::Interrupt { cq, .. } => self.interrupt(cq as usize, ctx),
            NvmeEvent::AbortArrive { id, .. } => self.abort_arrive(id, ctx),
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<NvmeEvent>) {
        if ctx.reqs()[id].flags.contains(ReqFlags::ORPHAN) {
            // Cancelled by a reset while the media held it: nobody waits for it any more.
            ctx.reqs_mut().free(id);
            return;
        }
        self.controller_done(id, ctx);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let mut out = vec![
            ("ios".to_string(), s.ios as f64),
            ("commands".into(), s.commands as f64),
            ("split_ios".into(), s.split_ios as f64),
            ("doorbells".into(), s.doorbells as f64),
            ("cq_entries".into(), s.cq_entries as f64),
            ("interrupts".into(), s.interrupts as f64),
            ("timeouts".into(), s.timeouts as f64),
            ("aborts_succeeded".into(), s.aborts_succeeded as f64),
            ("aborts_failed".into(), s.aborts_failed as f64),
            ("resets".into(), s.resets as f64),
            ("requeues".into(), s.requeues as f64),
            ("failed_ios".into(), s.failed as f64),
            ("max_waiting_for_command_id".into(), s.max_waiting as f64),
        ];
        for class in SqClass::ALL {
            out.push((
                format!("fetched_{}", class.name()),
                s.fetched_by_class[class as usize] as f64,
            ));
        }
        out.push(("link_busy_to_device_ns".into(), self.link.busy_ns[0] as f64));
        out.push(("link_busy_to_host_ns".into(), self.link.busy_ns[1] as f64));
        out
    }
}
