//! The NVMe host driver of every host on the path, as one stage.
//!
//! As Linux's nvme driver does it:
//! - a request is admitted only with a command id free on its submission queue (one per core,
//!   or one per core and priority class); otherwise it is refused and waits in the stage above
//!   until a command id frees;
//! - an admitted I/O larger than the controller's MDTS is split into commands; the driver
//!   writes each SQ entry (after its CPU time, `submit_ns`) and rings the doorbell, handing the
//!   command to the transport;
//! - completions arrive as CQ entries; the interrupt handler (after `irq_ns`) consumes the
//!   entries whose phase tag is new, writes the CQ head doorbell, frees the command ids and
//!   completes the I/Os (after `complete_ns`);
//! - a command that outlives `timeout_ns` is aborted; if the controller cannot withdraw it, the
//!   host resets the controller and requeues everything outstanding.
//!
//! When the transport and the controller allow it (no completion reordering, no interrupt
//! coalescing, a transport of fixed latency in order), the controller hands a completion up
//! as soon as the media finishes, with its CQ post time stamped; the host then knows when its
//! interrupt arrives and completes the I/O with one event instead of three.

use qoslab_engine::{
    Admission, Command, Control, IoStatus, Notice, Ns, Op, ReqFlags, ReqId, ReqTable, Requests,
    Stage, StageCtx,
};

use crate::config::HostConfig;
use crate::layout::QueueLayout;
use crate::replicas::{ReplicaIo, ReplicaPolicy, Route};
use crate::rings::{Cq, Cqe, Sq};

/// Timed events of the host stage. `epoch` changes at every controller reset; events of an
/// older epoch belong to state the reset threw away and are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// An interrupt reaches the host: the handler consumes the new entries of CQ `cq`.
    Interrupt { cq: u16, epoch: u32 },
    /// The host finished handling the completion of a command.
    HostDone { id: ReqId },
    /// Time to look for commands past their timeout.
    TimeoutScan,
    /// The Abort admin command for a timed-out command reaches the controller.
    AbortSend { id: ReqId, epoch: u32 },
    /// The controller is ready again after a reset.
    ResetDone,
    /// A wake-up the replica policy asked for.
    Replica { token: u32 },
}

/// Where a command is, as the host sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum CmdState {
    #[default]
    Idle,
    /// Admitted, waiting for a command id in its SQ's `waiting` list.
    Waiting,
    /// Written to the SQ; the controller has it.
    InFlight,
    /// Completion known ahead (fast path): handling scheduled.
    Done,
    /// CQ entry posted, not yet consumed.
    Posted,
    /// Consumed by the interrupt handler, completion handling under way.
    Reaped,
}

#[derive(Clone, Copy, Debug, Default)]
struct Cmd {
    sq: u16,
    cid: u16,
    state: CmdState,
    timed_out: bool,
    /// Command ids promised at admission (to an I/O, before it is split).
    promised: u32,
}

/// Counters of the host stage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// I/Os submitted from above.
    pub ios: u64,
    /// NVMe commands, after MDTS splitting.
    pub commands: u64,
    /// I/Os that were split.
    pub split_ios: u64,
    /// Requests refused for want of a command id (they waited above).
    pub refused: u64,
    /// The most admitted commands ever waiting here for a command id (parts of split I/Os,
    /// requeued commands).
    pub max_waiting: u64,
    pub cq_entries: u64,
    pub interrupts: u64,
    pub timeouts: u64,
    pub aborts_failed: u64,
    pub resets: u64,
    pub requeues: u64,
    /// I/Os failed after `max_retries` requeues.
    pub failed: u64,
}

/// What the driver keeps of an I/O besides its command, indexed by request id: the shared
/// `Request` carries nothing of NVMe's own.
#[derive(Clone, Copy, Debug, Default)]
struct IoState {
    /// The I/O this command is a part of (an MDTS split, a write to each replica), or
    /// [`ReqId::NONE`].
    parent: ReqId,
    /// Parts of this I/O still outstanding (a split one), else 0.
    pending_parts: u32,
    /// Times this command was requeued after a timeout or reset.
    retries: u16,
}

/// The NVMe host drivers of every host.
pub struct NvmeHost {
    cfg: HostConfig,
    mdts_bytes: u64,
    layout: QueueLayout,
    /// Completions come up ahead of their CQ post (the fast path).
    early_completions: bool,
    sqs: Vec<Sq>,
    cqs: Vec<Cq>,
    cmds: ReqTable<Cmd>,
    ios: ReqTable<IoState>,
    epoch: u32,
    resetting: bool,
    /// A request was refused since room last opened: tell the stage above when it does.
    refused: bool,
    /// Commands to issue when the reset completes, with "cancelled by the reset" (a requeue)
    /// or not (admitted just before it).
    held: Vec<(ReqId, bool)>,
    timeout_scan_armed: bool,
    /// How the hosts use copies of their data on several namespaces (none by default).
    replicas: Option<Box<dyn ReplicaPolicy>>,
    /// Copies each write goes to (1 without a replica policy).
    copies: u32,
    replica_wakes: Vec<(Ns, u32)>,
    /// Reads the replica policy holds ([`Route::Hold`]), oldest first, and its decisions on
    /// them.
    replica_held: std::collections::VecDeque<ReqId>,
    replica_released: Vec<u32>,
    /// Each core is one CPU that runs one thing at a time: `submit_ns` and `complete_ns` are
    /// booked on the request's core (`StageCtx::cpu`) rather than added as delays.
    serial_cpu: bool,
    pub stats: HostStats,
}

impl NvmeHost {
    /// `mdts_bytes` is the controller's (Identify Controller), `early_completions` whether the
    /// controller and transport hand completions up ahead of their post time.
    pub fn new(
        cfg: HostConfig,
        layout: QueueLayout,
        mdts_bytes: u64,
        early_completions: bool,
    ) -> Self {
        let sqs = layout
            .sqs
            .iter()
            .map(|s| Sq::new(s.class, s.cq, cfg.sq_depth))
            .collect();
        let cqs = layout
            .cq_host
            .iter()
            .map(|_| Cq::new(cfg.cq_depth))
            .collect();
        NvmeHost {
            mdts_bytes,
            layout,
            early_completions,
            sqs,
            cqs,
            cmds: ReqTable::new(),
            ios: ReqTable::new(),
            epoch: 0,
            resetting: false,
            refused: false,
            held: Vec::new(),
            timeout_scan_armed: false,
            replicas: None,
            copies: 1,
            replica_wakes: Vec::new(),
            replica_held: std::collections::VecDeque::new(),
            replica_released: Vec::new(),
            serial_cpu: false,
            stats: HostStats::default(),
            cfg,
        }
    }

    /// The same hosts with each core a serial CPU: a request's `submit_ns` and `complete_ns`
    /// wait for what its core already runs (a thread that is busy cannot submit).
    pub fn with_serial_cpu(mut self) -> Self {
        self.serial_cpu = true;
        self
    }

    /// When CPU work of `ns` for request `id` that may start at `at` ends.
    #[inline(always)]
    fn cpu_work(&self, id: ReqId, at: Ns, ns: Ns, ctx: &mut impl StageCtx<HostEvent>) -> Ns {
        if self.serial_cpu {
            let r = &ctx.reqs()[id];
            let (host, core) = (r.host, r.core);
            ctx.cpu(host, core, at, ns)
        } else {
            at + ns
        }
    }

    /// The same hosts using copies of their data as `policy` says.
    pub fn with_replicas(mut self, policy: Box<dyn ReplicaPolicy>) -> Self {
        self.copies = policy.copies().max(1);
        self.replicas = Some(policy);
        self
    }

    /// Runs replica-policy hook `f` with the path at hand, then schedules the wake-ups it
    /// asked for and sends the held reads it released (before anything the hook's caller
    /// sends: they take the window's counts first).
    fn replica_hook<R>(
        &mut self,
        ctx: &mut impl StageCtx<HostEvent>,
        f: impl FnOnce(&mut dyn ReplicaPolicy, &mut ReplicaIo<'_>) -> R,
    ) -> R {
        let mut wakes = std::mem::take(&mut self.replica_wakes);
        let mut released = std::mem::take(&mut self.replica_released);
        let out = {
            let now_ns = ctx.now_ns();
            let policy = self.replicas.as_mut().expect("a replica policy");
            let mut control = |m: &mut Control| ctx.control_below(m);
            let mut io = ReplicaIo {
                now_ns,
                control: &mut control,
                wakes: &mut wakes,
                released: &mut released,
            };
            f(policy.as_mut(), &mut io)
        };
        for (at, token) in wakes.drain(..) {
            ctx.schedule(at, HostEvent::Replica { token });
        }
        self.replica_wakes = wakes;
        if !released.is_empty() {
            self.release_held(&mut released, ctx);
        }
        self.replica_released = released;
        out
    }

    /// The policy decided on the held reads, oldest first, each time on all of them: each goes
    /// to its namespace now (as if just submitted, its command id taken now) or stays held, in
    /// its order.
    #[inline(never)]
    fn release_held(&mut self, released: &mut Vec<u32>, ctx: &mut impl StageCtx<HostEvent>) {
        for nsid in released.drain(..) {
            let id = self
                .replica_held
                .pop_front()
                .expect("a replica policy decides only on the reads it holds");
            if nsid == 0 {
                self.replica_held.push_back(id);
            } else {
                let r = &mut ctx.reqs_mut()[id];
                r.nsid = nsid;
                r.nvm_set = nsid as u16;
                self.send(id, 0, ctx);
            }
        }
    }

    pub fn layout(&self) -> &QueueLayout {
        &self.layout
    }

    /// Interrupts handled per vector (per CQ, across hosts).
    pub fn interrupts_per_vector(&self) -> Vec<u64> {
        self.cqs.iter().map(|c| c.interrupts).collect()
    }

    #[inline(always)]
    fn cmd(&mut self, id: ReqId) -> &mut Cmd {
        self.cmds.entry(id)
    }

    #[inline(always)]
    fn io(&mut self, id: ReqId) -> &mut IoState {
        self.ios.entry(id)
    }

    #[inline]
    fn sq_of(&self, req: &qoslab_engine::Request) -> usize {
        self.layout.sq_of(req.host, req.core, req.prio) as usize
    }

    /// The NVMe commands a request becomes: split at MDTS, and a write once per copy.
    #[inline]
    fn parts(&self, req: &qoslab_engine::Request) -> u64 {
        let copies = if req.op == Op::Write {
            u64::from(self.copies)
        } else {
            1
        };
        copies * self.chunks(req)
    }

    /// The pieces of a request split at MDTS.
    #[inline]
    fn chunks(&self, req: &qoslab_engine::Request) -> u64 {
        let mdts = self.mdts_bytes;
        if mdts == 0 || req.len_bytes <= mdts || !matches!(req.op, Op::Read | Op::Write) {
            1
        } else {
            req.len_bytes.div_ceil(mdts)
        }
    }

    fn refuse(&mut self) -> Admission {
        self.refused = true;
        self.stats.refused += 1;
        Admission::Busy
    }

    /// Room opened (a command id freed, a reset ended): the stage above may offer again.
    #[inline]
    fn room(&mut self, ctx: &mut impl StageCtx<HostEvent>) {
        if self.refused {
            self.refused = false;
            ctx.room_above();
        }
    }

    // ---- submission --------------------------------------------------------------------------

    /// An admitted command (a whole I/O or a part of a split one, `reserved` when a command id
    /// was promised to it) goes to its SQ, or waits for a command id.
    fn issue(&mut self, id: ReqId, reserved: bool, ctx: &mut impl StageCtx<HostEvent>) {
        if self.resetting {
            if reserved {
                let sqi = self.sq_of(&ctx.reqs()[id]);
                self.sqs[sqi].reserved -= 1;
            }
            self.held.push((id, false));
            return;
        }
        let sqi = self.sq_of(&ctx.reqs()[id]);
        let host = ctx.reqs()[id].host;
        ctx.reqs_mut()[id].hwq = self.layout.local_sq(host, sqi as u16);
        let sq = &mut self.sqs[sqi];
        let cid = if reserved {
            sq.reserved -= 1;
            sq.alloc_cid(id)
        } else {
            sq.alloc_unpromised(id)
        };
        match cid {
            Some(cid) => self.place(id, sqi, cid, ctx),
            None => {
                debug_assert!(!reserved, "a promised command id was taken");
                *self.cmd(id) = Cmd {
                    sq: sqi as u16,
                    state: CmdState::Waiting,
                    ..Cmd::default()
                };
                self.sqs[sqi].waiting.push_back(id);
                let waiting = self.sqs[sqi].waiting.len() as u64;
                self.stats.max_waiting = self.stats.max_waiting.max(waiting);
            }
        }
    }

    /// The driver writes the SQ entry (after its CPU time) and rings the doorbell: the command
    /// goes to the transport.
    #[inline(always)]
    fn place(&mut self, id: ReqId, sqi: usize, cid: u16, ctx: &mut impl StageCtx<HostEvent>) {
        let now = ctx.now_ns();
        *self.cmd(id) = Cmd {
            sq: sqi as u16,
            cid,
            state: CmdState::InFlight,
            ..Cmd::default()
        };
        self.stats.commands += 1;
        let written = self.cpu_work(id, now, self.cfg.submit_ns, ctx);
        ctx.reqs_mut()[id].t.dispatched_ns = written;
        let parent = self.io(id).parent;
        if !parent.is_none() {
            let p = &mut ctx.reqs_mut()[parent];
            p.t.dispatched_ns = p.t.dispatched_ns.min(written);
        }
        self.sqs[sqi].write_entry();
        if ctx.dispatch(id) == Admission::Busy {
            unreachable!("the transport refused a command the host had an SQ slot for");
        }
        self.arm_timeout_scan(written, ctx);
    }

    /// A command id of SQ `sqi` is free again: admitted work waiting for one gets it first.
    #[inline]
    fn cid_freed(&mut self, sqi: usize, ctx: &mut impl StageCtx<HostEvent>) {
        if let Some(w) = self.sqs[sqi].waiting.pop_front() {
            let cid = self.sqs[sqi]
                .alloc_cid(w)
                .expect("a command id was just freed");
            self.place(w, sqi, cid, ctx);
        } else {
            self.room(ctx);
        }
    }

    // ---- completion ------------------------------------------------------------------------

    /// The interrupt handler consumes every new entry of CQ `cqi`, then writes the CQ head
    /// doorbell.
    fn interrupt(&mut self, cqi: usize, ctx: &mut impl StageCtx<HostEvent>) {
        let now = ctx.now_ns();
        while let Some(e) = self.cqs[cqi].reap() {
            self.cmd(e.id).state = CmdState::Reaped;
            ctx.reqs_mut()[e.id].t.interrupt_ns = now;
            let at = now + self.cfg.complete_ns;
            if at == now {
                self.host_done(e.id, ctx);
            } else {
                ctx.schedule(at, HostEvent::HostDone { id: e.id });
            }
        }
        let host = self.layout.cq_host[cqi];
        let mut doorbell = Control::new(
            now,
            host,
            Command::CqHeadDoorbell {
                cq: cqi as u16,
                head: self.cqs[cqi].head,
            },
        );
        ctx.control_below(&mut doorbell);
    }

    fn host_done(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
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
        self.cid_freed(sqi, ctx);
        let req = &mut ctx.reqs_mut()[id];
        req.t.completed_ns = now;
        if req.status == IoStatus::Aborted && c.timed_out {
            self.requeue(id, ctx);
        } else {
            self.finish(id, ctx);
        }
    }

    /// Issues `id` again after an abort or reset, or fails it after `max_retries`.
    fn requeue(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
        let now = ctx.now_ns();
        if u32::from(self.io(id).retries) >= self.cfg.max_retries {
            let req = &mut ctx.reqs_mut()[id];
            // It fails now (also when the reset that cancelled it ends).
            req.t.completed_ns = now;
            req.status = IoStatus::Aborted;
            self.stats.failed += 1;
            self.finish(id, ctx);
            return;
        }
        self.io(id).retries += 1;
        let req = &mut ctx.reqs_mut()[id];
        req.flags |= ReqFlags::REQUEUED;
        req.status = IoStatus::Ok;
        self.stats.requeues += 1;
        self.issue(id, false, ctx);
    }

    /// Reports a command complete: the I/O itself, or one part of a split I/O.
    #[inline(always)]
    fn finish(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
        // Speed: the parent alone first; most I/Os are whole, and a copy of the request is
        // two cache lines.
        let parent = self.io(id).parent;
        if parent.is_none() {
            if self.replicas.is_some() {
                self.read_done(id, ctx);
            }
            ctx.complete(id);
            return;
        }
        let left = &mut self.io(parent).pending_parts;
        *left -= 1;
        let done = *left == 0;
        let req = ctx.reqs()[id];
        let p = &mut ctx.reqs_mut()[parent];
        if req.status != IoStatus::Ok {
            p.status = req.status;
        }
        if done {
            // The last part to finish carries the I/O's later stamps.
            let (queued, dispatched) = (p.t.queued_ns, p.t.dispatched_ns);
            p.t = req.t;
            p.t.queued_ns = queued;
            p.t.dispatched_ns = dispatched;
        }
        ctx.reqs_mut().free(id);
        if done {
            if self.replicas.is_some() {
                self.read_done(parent, ctx);
            }
            ctx.complete(parent);
        }
    }

    /// Tells the replica policy that read `id` (the whole I/O), which it routed, is done.
    #[inline(never)]
    fn read_done(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
        let req = &ctx.reqs()[id];
        if req.op == Op::Read {
            let nsid = req.nsid;
            self.replica_hook(ctx, |r, io| r.read_done(nsid, io));
        }
    }

    // ---- timeouts, aborts, resets -----------------------------------------------------------

    fn arm_timeout_scan(&mut self, dispatched: Ns, ctx: &mut impl StageCtx<HostEvent>) {
        if self.cfg.timeout_ns > 0 && !self.timeout_scan_armed {
            self.timeout_scan_armed = true;
            ctx.schedule(dispatched + self.cfg.timeout_ns, HostEvent::TimeoutScan);
        }
    }

    fn timeout_scan(&mut self, ctx: &mut impl StageCtx<HostEvent>) {
        self.timeout_scan_armed = false;
        let now = ctx.now_ns();
        let mut next: Option<Ns> = None;
        let mut expired = Vec::new();
        for sq in &self.sqs {
            for (_, id) in sq.outstanding() {
                let c = self.cmds[id];
                if c.timed_out || !matches!(c.state, CmdState::InFlight | CmdState::Posted) {
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
                HostEvent::AbortSend {
                    id,
                    epoch: self.epoch,
                },
            );
        }
        if let Some(at) = next {
            self.timeout_scan_armed = true;
            ctx.schedule(at, HostEvent::TimeoutScan);
        }
    }

    fn abort_send(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
        let c = *self.cmd(id);
        if !c.timed_out || c.state != CmdState::InFlight {
            return; // completed meanwhile (and the id perhaps reused)
        }
        if !ctx.abort_below(id) {
            // The controller cannot withdraw it: the host escalates to a reset.
            self.stats.aborts_failed += 1;
            self.start_reset(ctx);
        }
    }

    fn start_reset(&mut self, ctx: &mut impl StageCtx<HostEvent>) {
        if self.resetting {
            return;
        }
        self.stats.resets += 1;
        self.resetting = true;
        self.epoch = self.epoch.wrapping_add(1);
        let now = ctx.now_ns();
        // The controller forgets its commands and marks those the media still holds as
        // orphans: their completions will be dropped, and copies are issued instead.
        ctx.reset_below();
        let mut cancelled: Vec<ReqId> = Vec::new();
        for sqi in 0..self.sqs.len() {
            let outstanding: Vec<(u16, ReqId)> = self.sqs[sqi].outstanding().collect();
            for (cid, id) in outstanding {
                match self.cmds[id].state {
                    // Completion already on its way to the host: let it finish.
                    CmdState::Reaped | CmdState::Done => continue,
                    _ if ctx.reqs()[id].flags.contains(ReqFlags::ORPHAN) => {
                        let mut copy = ctx.reqs()[id];
                        copy.flags.remove(ReqFlags::ORPHAN);
                        let new = ctx.reqs_mut().alloc(copy);
                        let io = *self.io(id);
                        *self.io(new) = io;
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
        }
        for cq in &mut self.cqs {
            cq.reset();
        }
        cancelled.sort_by_key(|&id| (ctx.reqs()[id].t.queued_ns, id));
        // Cancelled commands go first, then those admitted just before the reset.
        self.held
            .splice(0..0, cancelled.into_iter().map(|id| (id, true)));
        ctx.schedule(now + self.cfg.reset_ns, HostEvent::ResetDone);
    }

    fn reset_done(&mut self, ctx: &mut impl StageCtx<HostEvent>) {
        self.resetting = false;
        for (id, cancelled) in std::mem::take(&mut self.held) {
            if cancelled {
                self.requeue(id, ctx);
            } else {
                self.issue(id, false, ctx);
            }
        }
        // Command ids the reset freed go to work that was waiting for one.
        for sqi in 0..self.sqs.len() {
            while let Some(&w) = self.sqs[sqi].waiting.front() {
                let Some(cid) = self.sqs[sqi].alloc_unpromised(w) else {
                    break;
                };
                self.sqs[sqi].waiting.pop_front();
                self.place(w, sqi, cid, ctx);
            }
        }
        self.room(ctx);
    }

    /// A read of a replicated namespace goes to the replica the policy picks; false if the
    /// policy holds it (kept here, the command ids promised to it given back, as Linux's
    /// multipath keeps a bio with no usable path before it takes a tag).
    #[inline(never)]
    fn route_read(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) -> bool {
        let (host, len) = (ctx.reqs()[id].host, ctx.reqs()[id].len_bytes);
        match self.replica_hook(ctx, |r, io| r.route_read(host, len, io)) {
            Route::To(nsid) => {
                let r = &mut ctx.reqs_mut()[id];
                r.nsid = nsid;
                r.nvm_set = nsid as u16;
                true
            }
            Route::Hold => {
                let promised = std::mem::take(&mut self.cmd(id).promised);
                let sqi = self.sq_of(&ctx.reqs()[id]);
                self.sqs[sqi].reserved -= promised;
                self.replica_held.push_back(id);
                false
            }
        }
    }

    /// An admitted I/O goes out: as one command (to its SQ, `promised` a command id or not),
    /// or split into several.
    #[inline(always)]
    fn send(&mut self, id: ReqId, promised: u32, ctx: &mut impl StageCtx<HostEvent>) {
        let parts = self.parts(&ctx.reqs()[id]);
        if parts == 1 {
            self.issue(id, promised > 0, ctx);
        } else {
            self.submit_split(id, parts, promised, ctx);
        }
    }

    /// A request beyond MDTS, or a write to every replica, goes out as `parts` commands.
    #[inline(never)]
    fn submit_split(
        &mut self,
        id: ReqId,
        parts: u64,
        promised: u32,
        ctx: &mut impl StageCtx<HostEvent>,
    ) {
        // Copied only when split: each part starts as a copy of the request.
        let req = ctx.reqs()[id];
        let mdts = self.mdts_bytes;
        let chunks = self.chunks(&req);
        let copied = parts > chunks;
        self.stats.split_ios += 1;
        self.io(id).pending_parts = parts as u32;
        ctx.reqs_mut()[id].t.dispatched_ns = Ns::MAX;
        for k in 0..parts {
            let mut part = req;
            if chunks > 1 {
                let c = k % chunks;
                part.offset_bytes = req.offset_bytes + c * mdts;
                part.len_bytes = mdts.min(req.len_bytes - c * mdts);
                part.flags |= ReqFlags::SPLIT;
            }
            if copied {
                // One copy of the write per namespace 1..=copies.
                part.nsid = (k / chunks) as u32 + 1;
                part.nvm_set = part.nsid as u16;
            }
            let pid = ctx.reqs_mut().alloc(part);
            *self.io(pid) = IoState {
                parent: id,
                ..IoState::default()
            };
            self.issue(pid, k < promised as u64, ctx);
        }
    }
}

impl Stage for NvmeHost {
    type Event = HostEvent;

    /// A request reaches the host inside the block layer's dispatch, as `nvme_queue_rq` runs
    /// inside `blk_mq_dispatch_rq_list`: nothing the host does on it calls the block layer.
    const SUBMITS_AT_ONCE: bool = true;

    /// A CQ entry lands inside the controller's hook: the host only stamps it or posts it to
    /// its CQ, and what a completion frees (a command id for a waiting request) is handed out from
    /// `HostDone`, never at once.
    const COMPLETES_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        "nvme-host"
    }

    /// Admits a request when its SQ has a command id beyond those promised (and nothing
    /// admitted earlier waits there), promising it as many as its commands need and are free;
    /// its further commands wait here for ids freed later, ahead of anything new.
    fn admit(&mut self, id: ReqId, reqs: &mut Requests) -> Admission {
        if self.resetting {
            return self.refuse();
        }
        let req = &mut reqs[id];
        let sqi = self.sq_of(req);
        req.hwq = self.layout.local_sq(req.host, sqi as u16);
        let parts = self.parts(req) as u32;
        let sq = &mut self.sqs[sqi];
        if !sq.has_room() {
            return self.refuse();
        }
        let promised = parts.min(sq.unpromised());
        sq.reserved += promised;
        self.cmd(id).promised = promised;
        Admission::Accepted
    }

    // Always inlined into the block layer's dispatch, which calls it for every request; what
    // few requests need (a replica route, a split) stays out of line.
    #[inline(always)]
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
        self.stats.ios += 1;
        *self.io(id) = IoState::default();
        if self.replicas.is_some() && ctx.reqs()[id].op == Op::Read && !self.route_read(id, ctx) {
            return;
        }
        let promised = std::mem::take(&mut self.cmd(id).promised);
        self.send(id, promised, ctx);
    }

    fn start(&mut self, ctx: &mut impl StageCtx<HostEvent>) {
        if self.replicas.is_some() {
            self.replica_hook(ctx, |r, io| r.start(io));
        }
    }

    fn on_event(&mut self, ev: HostEvent, ctx: &mut impl StageCtx<HostEvent>) {
        let current = self.epoch;
        match ev {
            HostEvent::HostDone { id } => self.host_done(id, ctx),
            HostEvent::TimeoutScan => self.timeout_scan(ctx),
            HostEvent::ResetDone => self.reset_done(ctx),
            HostEvent::Replica { token } => self.replica_hook(ctx, |r, io| r.wake(token, io)),
            HostEvent::Interrupt { epoch, .. } | HostEvent::AbortSend { epoch, .. }
                if epoch != current => {}
            HostEvent::Interrupt { cq, .. } => self.interrupt(cq as usize, ctx),
            HostEvent::AbortSend { id, .. } => self.abort_send(id, ctx),
        }
    }

    /// A CQ entry lands: known ahead on the fast path (handling scheduled now), else it waits
    /// in its CQ for the interrupt.
    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<HostEvent>) {
        let c = *self.cmd(id);
        if self.early_completions {
            let posted = ctx.reqs()[id].t.cq_posted_ns;
            let interrupt = posted + self.cfg.irq_ns;
            let done_at = self.cpu_work(id, interrupt, self.cfg.complete_ns, ctx);
            ctx.reqs_mut()[id].t.interrupt_ns = interrupt;
            self.cmd(id).state = CmdState::Done;
            if done_at == ctx.now_ns() {
                // Not `host_done` at once: it may place a waiting command (COMPLETES_AT_ONCE).
                ctx.schedule_now(HostEvent::HostDone { id });
            } else {
                ctx.schedule(done_at, HostEvent::HostDone { id });
            }
            return;
        }
        self.cmd(id).state = CmdState::Posted;
        self.stats.cq_entries += 1;
        let cqi = self.sqs[c.sq as usize].cq as usize;
        self.cqs[cqi].post(Cqe {
            id,
            sq: c.sq,
            cid: c.cid,
            phase: false,
        });
    }

    /// An interrupt arrives after `irq_ns`; an asynchronous event goes to the replica policy
    /// if there is one; other notices go up.
    fn notice(&mut self, notice: Notice, ctx: &mut impl StageCtx<HostEvent>) {
        let Notice::Interrupt { vector, .. } = notice else {
            if let (Some(_), Notice::AsyncEvent { host, .. }) = (&self.replicas, notice) {
                self.replica_hook(ctx, |r, io| r.notice(host, notice, io));
            } else {
                ctx.notify_above(notice);
            }
            return;
        };
        let cqi = vector as usize;
        self.cqs[cqi].interrupts += 1;
        self.stats.interrupts += 1;
        let now = ctx.now_ns();
        let at = now + self.cfg.irq_ns;
        if at == now {
            self.interrupt(cqi, ctx);
        } else {
            ctx.schedule(
                at,
                HostEvent::Interrupt {
                    cq: vector,
                    epoch: self.epoch,
                },
            );
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let mut out = vec![
            ("ios".to_string(), s.ios as f64),
            ("commands".into(), s.commands as f64),
            ("split_ios".into(), s.split_ios as f64),
            ("refused_no_command_id".into(), s.refused as f64),
            ("max_waiting_for_command_id".into(), s.max_waiting as f64),
            ("cq_entries".into(), s.cq_entries as f64),
            ("interrupts".into(), s.interrupts as f64),
            ("timeouts".into(), s.timeouts as f64),
            ("aborts_failed".into(), s.aborts_failed as f64),
            ("resets".into(), s.resets as f64),
            ("requeues".into(), s.requeues as f64),
            ("failed_ios".into(), s.failed as f64),
        ];
        if let Some(r) = &self.replicas {
            out.extend(r.counters());
        }
        out
    }
}
