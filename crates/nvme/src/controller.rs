//! The NVMe controller as a stage: it learns of commands from the doorbells the transport
//! delivers, fetches them by arbitration (the arbiter plug-in, with an arbitration burst and a
//! serial fetch engine), moves write data in through the transport, hands each command to the
//! media, moves read data out, and posts a CQ entry in the order the completion-order plug-in
//! allows, raising interrupts as the coalescing rule says. A reset throws its queues away.
//!
//! With a single SQ and a transport of fixed latency in order, nothing between a command's
//! sending and its doorbell's landing can change what the controller does with it, so the fetch
//! is booked when the command is handed down instead of through a Doorbell event (the fetch
//! fold). Without completion reordering or interrupt coalescing, a completion goes up as soon
//! as the media finishes, with its CQ post time stamped (the completion fold).

use std::collections::VecDeque;

use qoslab_engine::{
    Admission, Command, Control, ControlStatus, Dma, IoStatus, Notice, Ns, Payload, ReqFlags,
    ReqId, ReqTable, RngStream, Settings, Stage, StageCtx, Transfer,
};

use crate::arbiter::{Arbiter, ArbiterSetup, SqView};
use crate::config::{ControllerConfig, SqClass};
use crate::layout::QueueLayout;
use crate::order::{OrderBuffer, OrderOps};

/// Bytes of one SQ entry and one CQ entry.
const SQE_BYTES: u64 = 64;
const CQE_BYTES: u64 = 16;

/// Timed events of the controller. `epoch` changes at every reset; events of an older epoch
/// belong to state the reset threw away and are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerEvent {
    /// A tail doorbell write lands.
    Doorbell { sq: u16, epoch: u32 },
    /// The fetch engine is free again and entries are waiting for it.
    FetchDone { epoch: u32 },
    /// A command finished inside the media's hook while entries wait: fetch once that hook
    /// is over (urgent), as the media cannot take a command while its own hook runs.
    Fetch { epoch: u32 },
    /// Controller processing (and write data transfer) is done: the command goes to the media.
    MediaSubmit { id: ReqId, epoch: u32 },
    /// Read data is in host memory: the command enters its SQ's completion order.
    CqReady { id: ReqId, epoch: u32 },
    /// The CQ entry write lands.
    CqPost { id: ReqId, epoch: u32 },
    /// The aggregation time of a vector ran out.
    CoalesceTimer { cq: u16, generation: u32 },
}

/// Where a command is, as the controller sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum CmdState {
    #[default]
    Idle,
    /// Announced by a doorbell (or on its way), not yet fetched.
    InSq,
    /// Fetched; controller processing or write data transfer under way.
    Fetched,
    /// At the media.
    AtMedia,
    /// Media done; waiting for its turn to post (completion order, CQ space).
    Finished,
}

#[derive(Clone, Copy, Debug, Default)]
struct Cmd {
    sq: u16,
    state: CmdState,
    abort_requested: bool,
}

/// The controller's view of one submission queue.
#[derive(Debug)]
struct CtrlSq {
    class: SqClass,
    host: u16,
    cq: u16,
    /// Commands whose doorbell is still on its way: (landing time, command).
    pending: VecDeque<(Ns, ReqId)>,
    /// Commands the controller may fetch, in SQ order.
    fetchable: VecDeque<ReqId>,
    /// Fetched and not yet completed by the media.
    fetched_open: u32,
}

/// The controller's view of one completion queue and its interrupt vector.
#[derive(Debug)]
struct CtrlCq {
    host: u16,
    depth: u32,
    /// Entries posted.
    tail: u64,
    /// Entries the host has consumed, as its last CQ head doorbell said.
    head: u64,
    /// Entries that could not be posted because the queue was full.
    stalled: VecDeque<ReqId>,
    /// Entries posted since the last interrupt (aggregation count).
    pending_irq: u32,
    /// Generation of the aggregation timer; a timer event with another generation is stale.
    timer_gen: u32,
    timer_armed: bool,
}

impl CtrlCq {
    fn is_full(&self) -> bool {
        self.tail - self.head >= self.depth as u64 - 1
    }

    fn reset(&mut self) {
        self.tail = 0;
        self.head = 0;
        self.stalled.clear();
        self.pending_irq = 0;
        self.timer_gen += 1;
        self.timer_armed = false;
    }
}

/// Counters of the controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerStats {
    /// Commands fetched per SQ class (urgent, high, medium, low).
    pub fetched_by_class: [u64; 4],
    /// Commands fetched per host.
    pub fetched_by_host: Vec<u64>,
    pub doorbells: u64,
    pub cq_entries: u64,
    pub interrupts_raised: u64,
    pub aborts_succeeded: u64,
}

/// How a controller is put together besides its tunables.
pub struct ControllerSetup {
    pub layout: QueueLayout,
    /// The host's CQ depth (each CQ).
    pub cq_depth: u32,
    pub arbiter: Box<dyn Arbiter>,
    pub order: &'static OrderOps,
    /// The transport has a fixed latency and delivers in order.
    pub transport_foldable: bool,
    pub seed: u64,
}

/// The NVMe controller shared by every host of the path.
pub struct NvmeController {
    cfg: ControllerConfig,
    sqs: Vec<CtrlSq>,
    cqs: Vec<CtrlCq>,
    layout: QueueLayout,
    orders: Vec<OrderBuffer>,
    order: &'static OrderOps,
    arbiter: Box<dyn Arbiter>,
    views: Vec<SqView>,
    /// The fetch engine is busy until then.
    fetch_free_at: Ns,
    /// A FetchDone event is pending to restart fetching.
    fetch_wake_scheduled: bool,
    /// Landing time of the last doorbell whose fetch was booked at once (to count doorbells
    /// shared by a batch once).
    last_folded_doorbell_ns: Option<Ns>,
    /// Commands fetched and not yet finished by the media.
    outstanding: u32,
    cmds: ReqTable<Cmd>,
    epoch: u32,
    fold_fetch: bool,
    early_completions: bool,
    rng: RngStream,
    pub stats: ControllerStats,
}

impl NvmeController {
    pub fn new(cfg: ControllerConfig, setup: ControllerSetup) -> Self {
        let layout = setup.layout;
        let sqs = layout
            .sqs
            .iter()
            .map(|s| CtrlSq {
                class: s.class,
                host: s.host,
                cq: s.cq,
                pending: VecDeque::new(),
                fetchable: VecDeque::new(),
                fetched_open: 0,
            })
            .collect::<Vec<_>>();
        let cqs = layout
            .cq_host
            .iter()
            .map(|&host| CtrlCq {
                host,
                depth: setup.cq_depth,
                tail: 0,
                head: 0,
                stalled: VecDeque::new(),
                pending_irq: 0,
                timer_gen: 0,
                timer_armed: false,
            })
            .collect();
        let views = layout
            .sqs
            .iter()
            .map(|s| SqView {
                class: s.class,
                host: s.host,
                available: 0,
                head_age_ns: 0,
                head_nvm_set: 0,
            })
            .collect();
        let single_sq = sqs.len() == 1;
        NvmeController {
            orders: (0..sqs.len()).map(|_| OrderBuffer::default()).collect(),
            early_completions: NvmeController::completes_early(
                &cfg,
                setup.order,
                setup.transport_foldable,
            ),
            fold_fetch: setup.transport_foldable && single_sq,
            stats: ControllerStats {
                fetched_by_host: vec![0; layout.hosts.len()],
                ..ControllerStats::default()
            },
            sqs,
            cqs,
            layout,
            order: setup.order,
            arbiter: setup.arbiter,
            views,
            fetch_free_at: 0,
            fetch_wake_scheduled: false,
            last_folded_doorbell_ns: None,
            outstanding: 0,
            cmds: ReqTable::new(),
            epoch: 0,
            rng: RngStream::new(setup.seed, "nvme/completion_order"),
            cfg,
        }
    }

    /// Whether completions go up as soon as the media finishes, with their CQ post time
    /// stamped: no completion reordering, no interrupt coalescing, a transport of fixed
    /// latency in order. The host must be built with the same answer.
    pub fn completes_early(
        cfg: &ControllerConfig,
        order: &OrderOps,
        transport_foldable: bool,
    ) -> bool {
        transport_foldable && !order.buffered && !cfg.coalescing()
    }

    /// Builds the arbiter named in `cfg` from the registry.
    pub fn arbiter_from(
        cfg: &ControllerConfig,
        settings: &Settings,
    ) -> Result<Box<dyn Arbiter>, qoslab_engine::ConfigError> {
        let ops = crate::arbiter::lookup(&cfg.arbitration)?;
        let build = ops.build.expect("checked by lookup");
        Ok(build(&ArbiterSetup {
            burst: cfg.arbitration_burst,
            settings,
        }))
    }

    #[inline(always)]
    fn cmd(&mut self, id: ReqId) -> &mut Cmd {
        self.cmds.entry(id)
    }

    #[inline]
    fn transfer(
        &self,
        sqi: usize,
        dir: Dma,
        payload: Payload,
        start_ns: Ns,
        bytes: u64,
    ) -> Transfer {
        Transfer {
            host: self.sqs[sqi].host,
            dir,
            payload,
            start_ns,
            bytes,
        }
    }

    // ---- doorbells and fetching -------------------------------------------------------------

    /// Whether the fetch of a command just sent to SQ `sqi` can be booked now: a single SQ on a
    /// foldable transport, no doorbell on its way and nothing waiting in it, room in the
    /// controller.
    #[inline]
    fn can_fold_doorbell(&self, sqi: usize) -> bool {
        let sq = &self.sqs[sqi];
        self.fold_fetch
            && sq.pending.is_empty()
            && sq.fetchable.is_empty()
            && (self.cfg.max_outstanding == 0 || self.outstanding < self.cfg.max_outstanding)
            && (self.cfg.fetch_limit_per_sq == 0 || sq.fetched_open < self.cfg.fetch_limit_per_sq)
    }

    fn on_doorbell(&mut self, sqi: usize, ctx: &mut impl StageCtx<ControllerEvent>) {
        let now = ctx.now_ns();
        let sq = &mut self.sqs[sqi];
        let mut last = None;
        while let Some(&(at, id)) = sq.pending.front() {
            if at > now {
                break;
            }
            if last != Some(at) {
                self.stats.doorbells += 1;
                last = Some(at);
            }
            sq.pending.pop_front();
            sq.fetchable.push_back(id);
        }
        self.try_fetch(ctx);
    }

    /// Fetches what arbitration allows. The fetch engine is serial: a batch of n entries
    /// occupies it for n x fetch_ns, but it needs an event only when entries wait for it; a
    /// fetched command goes to the media at its ready time directly.
    fn try_fetch(&mut self, ctx: &mut impl StageCtx<ControllerEvent>) {
        loop {
            let room = match self.cfg.max_outstanding {
                0 => u32::MAX,
                m => m.saturating_sub(self.outstanding),
            };
            if room == 0 {
                return;
            }
            let now = ctx.now_ns();
            let limit = self.cfg.fetch_limit_per_sq;
            let mut any = false;
            for (v, sq) in self.views.iter_mut().zip(&self.sqs) {
                let mut avail = sq.fetchable.len() as u32;
                if limit > 0 {
                    avail = avail.min(limit.saturating_sub(sq.fetched_open));
                }
                v.available = avail;
                if avail > 0 {
                    any = true;
                    let head = &ctx.reqs()[sq.fetchable[0]];
                    v.head_age_ns = now.saturating_sub(head.t.arrived_ns);
                    v.head_nvm_set = head.nvm_set;
                } else {
                    v.head_age_ns = 0;
                }
            }
            if !any {
                return;
            }
            if self.fetch_free_at > now {
                if !self.fetch_wake_scheduled {
                    self.fetch_wake_scheduled = true;
                    ctx.schedule(
                        self.fetch_free_at,
                        ControllerEvent::FetchDone { epoch: self.epoch },
                    );
                }
                return;
            }
            let Some((sqi, n)) = self.arbiter.pick(now, &self.views) else {
                return;
            };
            let n = n.min(room);
            let class = self.sqs[sqi].class as usize;
            self.stats.fetched_by_class[class] += n as u64;
            self.stats.fetched_by_host[self.sqs[sqi].host as usize] += n as u64;
            self.outstanding += n;
            self.sqs[sqi].fetched_open += n;
            let done_at = (now + self.cfg.fetch_ns * n as Ns).max(ctx.dma(self.transfer(
                sqi,
                Dma::ToDevice,
                Payload::QueueEntries,
                now,
                SQE_BYTES * n as u64,
            )));
            self.fetch_free_at = done_at;
            for _ in 0..n {
                let id = self.sqs[sqi]
                    .fetchable
                    .pop_front()
                    .expect("arbitration picked available entries");
                self.fetched(id, done_at, ctx);
            }
        }
    }

    /// Command `id` was fetched (its entry arrives at `at`): it goes to the media after the
    /// controller's processing and, for a write, the data transfer.
    #[inline(always)]
    fn fetched(&mut self, id: ReqId, at: Ns, ctx: &mut impl StageCtx<ControllerEvent>) {
        let now = ctx.now_ns();
        let c = self.cmd(id);
        c.state = CmdState::Fetched;
        let sqi = c.sq as usize;
        if self.order.buffered {
            self.orders[sqi].fetched(id);
        }
        let req = &mut ctx.reqs_mut()[id];
        req.t.fetched_ns = at;
        let (op, len) = (req.op, req.len_bytes);
        let mut ready = at + self.cfg.cmd_ns;
        if op.carries_data_to_device() {
            ready = ctx.dma(self.transfer(sqi, Dma::ToDevice, Payload::Data, ready, len));
        }
        if ready == now {
            self.hand_to_media(id, ctx);
        } else {
            ctx.schedule(
                ready,
                ControllerEvent::MediaSubmit {
                    id,
                    epoch: self.epoch,
                },
            );
        }
    }

    #[inline(always)]
    fn hand_to_media(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        let c = self.cmd(id);
        if c.abort_requested {
            ctx.reqs_mut()[id].status = IoStatus::Aborted;
            self.stats.aborts_succeeded += 1;
            self.controller_done(id, ctx);
            return;
        }
        c.state = CmdState::AtMedia;
        if ctx.dispatch(id) == Admission::Busy {
            unreachable!("the media refused a fetched command");
        }
    }

    // ---- completion ------------------------------------------------------------------------

    /// An abort finished command `id` before the media saw it: as [`Self::finish`], then the
    /// room it leaves is used at once.
    fn controller_done(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        self.finish(id, ctx);
        self.try_fetch(ctx);
    }

    /// Command `id` is finished: release its controller resources, move read data, and post
    /// the CQ entry now or when the completion order allows.
    #[inline(always)]
    fn finish(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        let now = ctx.now_ns();
        let sqi = self.cmd(id).sq as usize;
        self.outstanding -= 1;
        self.sqs[sqi].fetched_open -= 1;
        let req = &ctx.reqs()[id];
        let (op, len, ok) = (req.op, req.len_bytes, req.status == IoStatus::Ok);
        let data_at = if op.carries_data_to_host() && ok {
            ctx.dma(self.transfer(sqi, Dma::ToHost, Payload::Data, now, len))
        } else {
            now
        };
        if self.early_completions {
            let posted = self.post_time(sqi, data_at, ctx);
            ctx.reqs_mut()[id].t.cq_posted_ns = posted;
            *self.cmd(id) = Cmd::default();
            self.stats.cq_entries += 1;
            ctx.complete(id);
        } else {
            self.cmd(id).state = CmdState::Finished;
            let epoch = self.epoch;
            if data_at == now {
                self.cq_ready(id, ctx);
            } else {
                ctx.schedule(data_at, ControllerEvent::CqReady { id, epoch });
            }
        }
    }

    /// When a CQ entry of SQ `sqi` whose write starts at `start` lands.
    #[inline]
    fn post_time(&self, sqi: usize, start: Ns, ctx: &mut impl StageCtx<ControllerEvent>) -> Ns {
        let at = start + self.cfg.cq_post_ns;
        ctx.dma(self.transfer(sqi, Dma::ToHost, Payload::QueueEntries, at, CQE_BYTES))
    }

    fn cq_ready(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        if !self.order.buffered {
            self.schedule_post(id, ctx);
            return;
        }
        let sqi = self.cmd(id).sq as usize;
        self.orders[sqi].finished(id);
        while let Some(next) =
            self.orders[sqi].next(self.order, self.cfg.reorder_bound, &mut self.rng)
        {
            self.schedule_post(next, ctx);
        }
    }

    fn schedule_post(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        let now = ctx.now_ns();
        let sqi = self.cmd(id).sq as usize;
        let at = self.post_time(sqi, now, ctx);
        if at == now {
            self.cq_post(id, ctx);
        } else {
            ctx.schedule(
                at,
                ControllerEvent::CqPost {
                    id,
                    epoch: self.epoch,
                },
            );
        }
    }

    /// The CQ entry of `id` lands in its CQ (or waits for room), and the vector's coalescing
    /// rule decides whether it raises an interrupt.
    fn cq_post(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        let now = ctx.now_ns();
        let sqi = self.cmd(id).sq as usize;
        let cqi = self.sqs[sqi].cq as usize;
        let cq = &mut self.cqs[cqi];
        if cq.is_full() {
            cq.stalled.push_back(id);
            return;
        }
        cq.tail += 1;
        self.stats.cq_entries += 1;
        *self.cmd(id) = Cmd::default();
        ctx.reqs_mut()[id].t.cq_posted_ns = now;
        ctx.complete(id);
        let cfg = &self.cfg;
        let cq = &mut self.cqs[cqi];
        cq.pending_irq += 1;
        if !cfg.coalescing() || cq.pending_irq >= cfg.coalesce_threshold {
            self.raise_interrupt(cqi, ctx);
        } else if !cq.timer_armed {
            cq.timer_armed = true;
            ctx.schedule(
                now + cfg.coalesce_time_ns,
                ControllerEvent::CoalesceTimer {
                    cq: cqi as u16,
                    generation: cq.timer_gen,
                },
            );
        }
    }

    fn raise_interrupt(&mut self, cqi: usize, ctx: &mut impl StageCtx<ControllerEvent>) {
        let cq = &mut self.cqs[cqi];
        cq.pending_irq = 0;
        cq.timer_armed = false;
        cq.timer_gen = cq.timer_gen.wrapping_add(1);
        self.stats.interrupts_raised += 1;
        ctx.notify_above(Notice::Interrupt {
            host: cq.host,
            vector: cqi as u16,
        });
    }

    /// The host consumed entries of CQ `cqi`: entries waiting for room go in now.
    fn cq_head(&mut self, cqi: usize, head: u64, ctx: &mut impl StageCtx<ControllerEvent>) {
        self.cqs[cqi].head = head;
        while !self.cqs[cqi].is_full() {
            let Some(id) = self.cqs[cqi].stalled.pop_front() else {
                break;
            };
            self.cq_post(id, ctx);
        }
    }
}

impl Stage for NvmeController {
    type Event = ControllerEvent;

    /// A command reaches the controller inside the host's hook, as a doorbell write lands:
    /// nothing the controller does on it calls the host at once.
    const SUBMITS_AT_ONCE: bool = true;

    /// The media's completion lands inside the media's hook: the controller posts it there,
    /// and fetches into the room it leaves from an urgent `Fetch` after that hook.
    const COMPLETES_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        "nvme-controller"
    }

    /// A command arrives with its doorbell's landing time stamped by the transport.
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        let now = ctx.now_ns();
        let req = &ctx.reqs()[id];
        let sqi = self.layout.global_sq(req.host, req.hwq) as usize;
        let arrives = req.t.arrived_ns;
        *self.cmd(id) = Cmd {
            sq: sqi as u16,
            state: CmdState::InSq,
            abort_requested: false,
        };
        if arrives <= now {
            self.sqs[sqi].fetchable.push_back(id);
            self.stats.doorbells += 1;
            self.try_fetch(ctx);
        } else if self.can_fold_doorbell(sqi) {
            if self.last_folded_doorbell_ns != Some(arrives) {
                self.stats.doorbells += 1;
                self.last_folded_doorbell_ns = Some(arrives);
            }
            let start = arrives.max(self.fetch_free_at);
            let sq = &mut self.sqs[sqi];
            self.stats.fetched_by_class[sq.class as usize] += 1;
            self.stats.fetched_by_host[sq.host as usize] += 1;
            self.outstanding += 1;
            sq.fetched_open += 1;
            let done_at = (start + self.cfg.fetch_ns).max(ctx.dma(self.transfer(
                sqi,
                Dma::ToDevice,
                Payload::QueueEntries,
                start,
                SQE_BYTES,
            )));
            self.fetch_free_at = done_at;
            self.fetched(id, done_at, ctx);
        } else {
            // Entries written at the same instant share one doorbell write, as a driver
            // committing a batch does.
            let sq = &mut self.sqs[sqi];
            let shared = sq.pending.back().is_some_and(|&(at, _)| at == arrives);
            sq.pending.push_back((arrives, id));
            if !shared {
                ctx.schedule(
                    arrives,
                    ControllerEvent::Doorbell {
                        sq: sqi as u16,
                        epoch: self.epoch,
                    },
                );
            }
        }
    }

    fn on_event(&mut self, ev: ControllerEvent, ctx: &mut impl StageCtx<ControllerEvent>) {
        let current = self.epoch;
        match ev {
            ControllerEvent::CoalesceTimer { cq, generation } => {
                let c = &self.cqs[cq as usize];
                if c.timer_armed && c.timer_gen == generation && c.pending_irq > 0 {
                    self.raise_interrupt(cq as usize, ctx);
                }
            }
            ControllerEvent::Doorbell { epoch, .. }
            | ControllerEvent::FetchDone { epoch }
            | ControllerEvent::Fetch { epoch }
            | ControllerEvent::MediaSubmit { epoch, .. }
            | ControllerEvent::CqReady { epoch, .. }
            | ControllerEvent::CqPost { epoch, .. }
                if epoch != current => {}
            ControllerEvent::Doorbell { sq, .. } => self.on_doorbell(sq as usize, ctx),
            ControllerEvent::FetchDone { .. } => {
                self.fetch_wake_scheduled = false;
                self.try_fetch(ctx);
            }
            ControllerEvent::Fetch { .. } => self.try_fetch(ctx),
            ControllerEvent::MediaSubmit { id, .. } => self.hand_to_media(id, ctx),
            ControllerEvent::CqReady { id, .. } => self.cq_ready(id, ctx),
            ControllerEvent::CqPost { id, .. } => self.cq_post(id, ctx),
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) {
        if ctx.reqs()[id].flags.contains(ReqFlags::ORPHAN) {
            // Cancelled by a reset while the media held it: nobody waits for it any more.
            ctx.reqs_mut().free(id);
            return;
        }
        self.finish(id, ctx);
        if self.sqs.iter().any(|sq| !sq.fetchable.is_empty()) {
            ctx.schedule_now(ControllerEvent::Fetch { epoch: self.epoch });
        }
    }

    /// An Abort command for `id`: a command not yet at the media is completed aborted when it
    /// would go there; one at the media is withdrawn if the media can; one already finished
    /// completes as it is.
    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<ControllerEvent>) -> bool {
        match self.cmd(id).state {
            CmdState::InSq | CmdState::Fetched => {
                self.cmd(id).abort_requested = true;
                true
            }
            CmdState::AtMedia => {
                let withdrawn = ctx.abort_below(id);
                if withdrawn {
                    self.stats.aborts_succeeded += 1;
                }
                withdrawn
            }
            CmdState::Finished | CmdState::Idle => true,
        }
    }

    /// Throws every queue away; commands the media still holds become orphans.
    fn reset(&mut self, ctx: &mut impl StageCtx<ControllerEvent>) {
        self.epoch = self.epoch.wrapping_add(1);
        let now = ctx.now_ns();
        for (id, c) in self.cmds.iter_mut() {
            if c.state == CmdState::AtMedia {
                ctx.reqs_mut()[id].flags |= ReqFlags::ORPHAN;
            }
            *c = Cmd::default();
        }
        for sq in &mut self.sqs {
            sq.pending.clear();
            sq.fetchable.clear();
            sq.fetched_open = 0;
        }
        for o in &mut self.orders {
            o.clear();
        }
        for cq in &mut self.cqs {
            cq.reset();
        }
        self.outstanding = 0;
        self.fetch_free_at = now;
        self.fetch_wake_scheduled = false;
        ctx.reset_below();
    }

    /// An event of the media meant for every host ([`Notice::ALL_HOSTS`], such as an NVM set
    /// leaving its deterministic window) goes to each host; other notices pass up.
    fn notice(&mut self, notice: Notice, ctx: &mut impl StageCtx<ControllerEvent>) {
        match notice {
            Notice::AsyncEvent {
                host: Notice::ALL_HOSTS,
                kind,
                info,
                log_page,
            } => {
                for host in 0..self.layout.hosts.len() as u16 {
                    ctx.notify_above(Notice::AsyncEvent {
                        host,
                        kind,
                        info,
                        log_page,
                    });
                }
            }
            other => ctx.notify_above(other),
        }
    }

    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<ControllerEvent>) {
        if let Command::CqHeadDoorbell { cq, head } = msg.command {
            self.cq_head(cq as usize, head, ctx);
            msg.status = ControlStatus::Success;
            return;
        }
        ctx.control_below(msg);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let mut out = vec![
            ("doorbells".to_string(), s.doorbells as f64),
            ("cq_entries".into(), s.cq_entries as f64),
            ("interrupts_raised".into(), s.interrupts_raised as f64),
            ("aborts_succeeded".into(), s.aborts_succeeded as f64),
        ];
        for class in SqClass::ALL {
            out.push((
                format!("fetched_{}", class.name()),
                s.fetched_by_class[class as usize] as f64,
            ));
        }
        if s.fetched_by_host.len() > 1 {
            for (h, n) in s.fetched_by_host.iter().enumerate() {
                out.push((format!("fetched_host{h}"), *n as f64));
            }
        }
        out
    }
}
