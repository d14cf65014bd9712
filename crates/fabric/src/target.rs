//! The NVMe-oF target server as a stage, between the transport and the NVMe controller: its
//! cores, its PMR and, for Rio, its ordering attributes (Rio 4.3, 6.1).
//!
//! A command reaches the target when its capsule lands (the transport stamps `arrived_ns`).
//! A core receives it (the transport's message cycles, and the data pulled for a large write);
//! a command with a Rio attribute then waits its turn in its stream's lane: the target logs the
//! attribute to its PMR (a serial resource, a persistent MMIO write of `pmr_write_ns` during
//! which the core stalls) only after the commands of lower sequence numbers of that stream on
//! this target are logged, and into a circular log of `pmr_bytes / attr_bytes` slots, and
//! submits it to the drive only after they are submitted (per-server in-order submission, Rio
//! 4.3.1). A command without an attribute goes straight to the drive. Each submission costs a
//! core `submit_cycles`; a completion `respond_cycles` (counted, and booked on the cores). A
//! FLUSH for a drive with PLP never reaches it: the target completes it when it would submit
//! it, and its response crosses the network as the drive's completion would.
//!
//! When the drive completes a command with a Rio attribute, the target sets its `persist` bit:
//! with PLP at once, without only on the command that carries a FLUSH (Rio 4.3.2). The head of
//! the log moves past attributes the initiator says are acknowledged and durable
//! (`OrderOp::Recycle`). HORAE's control path (`OrderOp::Meta`) is answered after a core
//! received it and its metadata is written to the PMR.
//!
//! A power loss keeps the PMR (it is persistent) and loses every command the target holds
//! and has not submitted; they complete with `IoStatus::PowerLoss`.

use std::collections::VecDeque;

use qoslab_engine::order::{OrderAttr, OrderOp, OrderState, PmrRecord, TraceEvent, TraceKind};
use qoslab_engine::{
    Admission, Command, Control, ControlStatus, Dma, IoStatus, Ns, Op, Payload, ReqFlags, ReqId,
    ReqTable, Requests, Stage, StageCtx, Transfer,
};

qoslab_engine::settings! {
    /// `[fabric]` of a device file: target servers behind an NVMe-oF transport, the volume
    /// striped over them, and what ordered writes need of them (Rio 4.3, 6.1).
    pub struct TargetsConfig in TARGETS_TUNABLES {
        targets: u32 = count(0, "target servers, each with its own NVMe controller and drive (built from [controller] and [media]), reached over the path's NVMe-oF transport; the volume is striped over them in stripe_bytes units; 0 = no target servers (the drive is the transport's controller)").range(0.0, 64.0),
        stripe_bytes: u64 = bytes(131072, "stripe unit of the volume, round robin over the targets; also the most an ordered command carries (Intel 905P: 128 KiB, Rio 4.5)").range(4096.0, 1073741824.0),
        block_bytes: u64 = bytes(4096, "logical block of ordered writes (their offsets and sizes are whole blocks)").range(512.0, 65536.0),
        merge_batch: u32 = count(8, "most consecutive ordered requests merged into one command (the plug of Rio Figure 12); 1 turns merging off").range(1.0, 4096.0),
        cores: u32 = count(36, "cores of each target server serving NVMe-oF (Rio 6.1: two 18-core Xeon Gold 5220)").range(1.0, 4096.0),
        cpu_ghz: f64 = real(2.2, "clock of the target's cores and, for the initiator, of the cores the transport's cycles run on (Rio 6.1: 2.20 GHz)").range(0.1, 10.0),
        pmr_bytes: u64 = bytes(2097152, "PMR of each target, a circular log of ordering attributes (Rio 6.1: 2 MB, as HORAE)").range(32.0, 1073741824.0),
        attr_bytes: u64 = bytes(32, "one ordering attribute in the PMR (Rio 6.1: 32 B)").range(16.0, 4096.0),
        pmr_write_ns: Ns = ns(600, "persisting one attribute (or HORAE's metadata) to the PMR by a persistent MMIO write, the core stalled on it (Rio 6.1: about 0.6 us per 32 B)"),
        context_switch_ns: Ns = ns(2000, "an initiator thread sleeping on an I/O and waking (Linux's synchronous ordering, HORAE's control path); model assumption"),
    }
}

impl TargetsConfig {
    /// Attribute slots of each target's PMR log.
    pub fn pmr_slots(&self) -> usize {
        (self.pmr_bytes / self.attr_bytes).max(1) as usize
    }
}

/// What a target's work costs, in its cores' cycles (the transport's table, `[rdma]` or
/// `[tcp]`), and its PMR.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TargetSetup {
    /// The target's index among the path's targets.
    pub index: u16,
    pub cores: u32,
    pub cpu_ghz: f64,
    /// Receiving a command capsule, and pulling write data beyond the capsule.
    pub receive_cycles: u64,
    pub pull_cycles: u64,
    /// Write data carried in the capsule at most.
    pub inline_bytes: u64,
    pub submit_cycles: u64,
    pub respond_cycles: u64,
    pub pmr_write_ns: Ns,
    pub pmr_slots: usize,
    pub attr_bytes: u64,
    pub meta_bytes: u64,
    /// The drives have power-loss protection.
    pub plp: bool,
    /// Trace every step of every command (the differential test against the crash checker).
    pub trace: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetEvent {
    /// The capsule of `id` lands.
    Arrive(ReqId),
    /// A core has received `id`.
    Received(ReqId),
    /// `id`'s attribute is in the PMR.
    Logged(ReqId),
    /// A core has submitted `id` to the drive.
    Submitted(ReqId),
    /// The response to a FLUSH the target completed itself lands at the initiator.
    Answered(ReqId),
}

/// An NVMe completion queue entry: the response capsule of a FLUSH the target answers itself.
const CQE_BYTES: u64 = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    #[default]
    Idle,
    OnWire,
    Receiving,
    Received,
    Logging,
    Logged,
    Submitting,
    AtDrive,
    /// A FLUSH the target completed itself (PLP): its response is on the wire.
    Answering,
}

#[derive(Clone, Copy, Debug, Default)]
struct Cmd {
    phase: Phase,
    attr: Option<OrderAttr>,
    /// Its entry's number in the PMR log, once logged.
    log_no: u64,
    /// The cache flags (PREFLUSH, FUA) the target's block layer took off a write for a drive
    /// without a volatile write cache; the initiator's request gets them back at completion.
    stripped: ReqFlags,
}

/// One entry of the PMR log: an attribute, and the command while it is out.
#[derive(Clone, Copy, Debug)]
struct Entry {
    attr: OrderAttr,
    id: ReqId,
}

#[derive(Clone, Debug, Default)]
struct Stats {
    commands: u64,
    logged: u64,
    meta: u64,
    log_full_waits: u64,
    recycled: u64,
    lost: u64,
    core_busy_ns: Ns,
    cycles: u64,
    pmr_busy_ns: Ns,
    max_log: u64,
    flushes_not_sent: u64,
}

/// One target server.
pub struct Target {
    s: TargetSetup,
    cores: Vec<Ns>,
    pmr_free: Ns,
    cmds: ReqTable<Cmd>,
    /// Per stream, the commands with an attribute not yet at the drive, in arrival order.
    lanes: Vec<VecDeque<ReqId>>,
    log: VecDeque<Entry>,
    /// The number of the log's first entry (entries are numbered as they are appended).
    log_base: u64,
    logging: u64,
    head_seq: Vec<u64>,
    /// Per stream, the sequence number up to which the initiator says all is durable.
    recyclable: Vec<u64>,
    /// HORAE's metadata: (stream, request number, sequence number, persisted at).
    meta: VecDeque<(u32, u64, u64, Ns)>,
    trace: Vec<TraceEvent>,
    stats: Stats,
}

impl Target {
    pub fn new(s: TargetSetup) -> Self {
        Target {
            cores: vec![0; s.cores.max(1) as usize],
            s,
            pmr_free: 0,
            cmds: ReqTable::new(),
            lanes: Vec::new(),
            log: VecDeque::new(),
            log_base: 0,
            logging: 0,
            head_seq: Vec::new(),
            recyclable: Vec::new(),
            meta: VecDeque::new(),
            trace: Vec::new(),
            stats: Stats::default(),
        }
    }

    fn note(&mut self, at_ns: Ns, kind: TraceKind, id: ReqId, stream: u32) {
        if self.s.trace {
            self.trace.push(TraceEvent {
                at_ns,
                kind,
                id,
                stream,
                no: 0,
            });
        }
    }

    fn ns(&self, cycles: u64) -> Ns {
        (cycles as f64 / self.s.cpu_ghz).round() as Ns
    }

    /// The earliest free core works `cycles` from `at`; when it is done.
    fn core(&mut self, at: Ns, cycles: u64) -> Ns {
        let d = self.ns(cycles);
        self.stats.cycles += cycles;
        self.stats.core_busy_ns += d;
        let i = (0..self.cores.len())
            .min_by_key(|&i| self.cores[i])
            .expect("a target has cores");
        self.cores[i] = at.max(self.cores[i]) + d;
        self.cores[i]
    }

    fn grow(&mut self, stream: u32) {
        let n = stream as usize + 1;
        if self.lanes.len() < n {
            self.lanes.resize_with(n, VecDeque::new);
            self.head_seq.resize(n, 0);
            self.recyclable.resize(n, 0);
        }
    }

    /// Whether `c` must wait for `p`, earlier in its lane: a command follows every command of
    /// an earlier group; one carrying a FLUSH follows every earlier command (Rio 4.3.1).
    fn follows(c: &OrderAttr, p: &OrderAttr) -> bool {
        c.flush || p.seq_end < c.seq_start
    }

    /// Logs and submits what the lane of `stream` allows now.
    fn run_lane(&mut self, stream: u32, ctx: &mut impl StageCtx<TargetEvent>) {
        let now = ctx.now_ns();
        let lane = std::mem::take(&mut self.lanes[stream as usize]);
        for (i, &id) in lane.iter().enumerate() {
            let c = self.cmds[id];
            let attr = c.attr.expect("a lane holds commands with attributes");
            // The phase every command this one follows has reached, at least.
            let least = lane
                .iter()
                .take(i)
                .map(|&p| self.cmds[p])
                .filter(|p| Self::follows(&attr, &p.attr.expect("attribute")))
                .map(|p| p.phase)
                .min()
                .unwrap_or(Phase::AtDrive);
            match c.phase {
                // The PMR takes attributes in order: a predecessor still being written lands
                // first.
                Phase::Received if least >= Phase::Logging => {
                    let room = (self.log.len() as u64 + self.logging) < self.s.pmr_slots as u64;
                    if !room {
                        self.stats.log_full_waits += 1;
                        continue;
                    }
                    let start = now.max(self.pmr_free);
                    self.pmr_free = start + self.s.pmr_write_ns;
                    self.stats.pmr_busy_ns += self.s.pmr_write_ns;
                    // The core stalls on the persistent MMIO write.
                    let stall = (self.s.pmr_write_ns as f64 * self.s.cpu_ghz).round() as u64;
                    self.core(start, stall);
                    self.logging += 1;
                    self.cmds.entry(id).phase = Phase::Logging;
                    ctx.schedule(self.pmr_free, TargetEvent::Logged(id));
                }
                Phase::Logged if least >= Phase::AtDrive => {
                    let at = self.core(now, self.s.submit_cycles);
                    self.cmds.entry(id).phase = Phase::Submitting;
                    ctx.schedule(at, TargetEvent::Submitted(id));
                }
                _ => {}
            }
        }
        let mut lane = lane;
        lane.retain(|&id| self.cmds[id].phase < Phase::AtDrive);
        self.lanes[stream as usize] = lane;
    }

    /// Moves the log's head past attributes the initiator says are acknowledged and durable.
    fn recycle(&mut self) {
        while let Some(e) = self.log.front() {
            let s = e.attr.stream as usize;
            if e.attr.seq_end > self.recyclable.get(s).copied().unwrap_or(0) || !e.id.is_none() {
                break;
            }
            self.head_seq[s] = self.head_seq[s].max(e.attr.seq_end);
            self.log.pop_front();
            self.log_base += 1;
            self.stats.recycled += 1;
        }
    }

    /// The power fails: commands held here and not yet at the drive are lost.
    fn power_loss(&mut self, ctx: &mut impl StageCtx<TargetEvent>) {
        let now = ctx.now_ns();
        let mut lost: Vec<ReqId> = Vec::new();
        for (id, c) in self.cmds.iter_mut() {
            if matches!(c.phase, Phase::Idle | Phase::AtDrive) {
                continue;
            }
            if c.phase == Phase::Logging {
                // Its attribute write did not finish: not in the log.
                self.logging -= 1;
            }
            *c = Cmd::default();
            lost.push(id);
        }
        for lane in &mut self.lanes {
            lane.clear();
        }
        self.cores.iter_mut().for_each(|c| *c = now);
        self.pmr_free = now;
        for id in lost {
            self.stats.lost += 1;
            let t = &mut ctx.reqs_mut()[id].t;
            t.fetched_ns = now;
            t.media_start_ns = now;
            t.media_done_ns = 0;
            t.cq_posted_ns = now;
            ctx.reqs_mut()[id].status = IoStatus::PowerLoss;
            ctx.complete(id);
        }
    }
}

impl Stage for Target {
    type Event = TargetEvent;

    fn name(&self) -> &'static str {
        "target"
    }

    fn admit(&mut self, _id: ReqId, _reqs: &mut Requests) -> Admission {
        Admission::Accepted
    }

    /// The command is handed down when it is sent; it lands when the transport said.
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<TargetEvent>) {
        self.stats.commands += 1;
        let at = ctx.reqs()[id].t.arrived_ns.max(ctx.now_ns());
        self.cmds.entry(id).phase = Phase::OnWire;
        ctx.schedule(at, TargetEvent::Arrive(id));
    }

    fn on_event(&mut self, ev: TargetEvent, ctx: &mut impl StageCtx<TargetEvent>) {
        let now = ctx.now_ns();
        match ev {
            TargetEvent::Arrive(id) => {
                if self.cmds.entry(id).phase != Phase::OnWire {
                    return;
                }
                let r = ctx.reqs()[id];
                let mut cycles = self.s.receive_cycles;
                let mut landed = now;
                if r.op == Op::Write && r.len_bytes > self.s.inline_bytes {
                    // The target pulls the data before it submits the command (nvmet-rdma
                    // reads it into its own memory): the drive then finds it here.
                    cycles += self.s.pull_cycles;
                    landed = ctx.dma(Transfer {
                        host: r.host,
                        dir: Dma::ToDevice,
                        payload: Payload::TargetPull,
                        start_ns: now,
                        bytes: r.len_bytes,
                    });
                }
                let at = self.core(now, cycles).max(landed);
                let c = self.cmds.entry(id);
                c.phase = Phase::Receiving;
                let attr = c.attr;
                self.note(now, TraceKind::Arrive, id, 0);
                // The network delivers a stream's commands in order (Rio 4.5, principle 2):
                // they take their places in its lane as they land.
                if let Some(a) = attr {
                    self.grow(a.stream);
                    self.lanes[a.stream as usize].push_back(id);
                }
                ctx.schedule(at, TargetEvent::Received(id));
            }
            TargetEvent::Received(id) => {
                let c = self.cmds.entry(id);
                if c.phase != Phase::Receiving {
                    return;
                }
                c.phase = Phase::Received;
                match c.attr {
                    Some(a) => self.run_lane(a.stream, ctx),
                    None => {
                        let at = self.core(now, self.s.submit_cycles);
                        self.cmds.entry(id).phase = Phase::Submitting;
                        ctx.schedule(at, TargetEvent::Submitted(id));
                    }
                }
            }
            TargetEvent::Logged(id) => {
                let c = self.cmds.entry(id);
                if c.phase != Phase::Logging {
                    return;
                }
                c.phase = Phase::Logged;
                let attr = c.attr.expect("a logged command has an attribute");
                self.logging -= 1;
                c.log_no = self.log_base + self.log.len() as u64;
                self.log.push_back(Entry { attr, id });
                self.stats.logged += 1;
                self.stats.max_log = self.stats.max_log.max(self.log.len() as u64);
                self.note(now, TraceKind::Log, id, 0);
                self.run_lane(attr.stream, ctx);
            }
            TargetEvent::Submitted(id) => {
                let c = self.cmds.entry(id);
                if c.phase != Phase::Submitting {
                    return;
                }
                c.phase = Phase::AtDrive;
                let attr = c.attr;
                // The controller sees the command when the target submits it.
                ctx.reqs_mut()[id].t.arrived_ns = now;
                self.note(now, TraceKind::Submit, id, 0);
                // A FLUSH for a drive with PLP: the target's block layer completes it at once
                // and the drive never sees it, as Linux's does with an empty flush on a queue
                // without a volatile write cache (submit_bio_noacct; nvmet's flush of such a
                // namespace). The document, 4.3.2: "the FLUSH command is usually ignored by
                // the block layer"; it still crosses the network both ways and costs both
                // sides their cycles, as the document's Optane CPU figures show.
                let r = ctx.reqs()[id];
                let here = r.op == Op::Flush && self.s.plp;
                // A write's PREFLUSH and FUA for such a drive: the target's block layer drops
                // them (submit_bio_noacct on a write-through queue), so the drive sees a plain
                // write. They reach the target because nvmet reports a volatile write cache
                // whatever the drive (nvmet_execute_identify_ctrl: "XXX: don't report vwc if
                // the underlying device is write through"), so the initiator's queue keeps
                // them (the fabric path's block layer, crates/sim/src/path.rs).
                let cache = ReqFlags::PREFLUSH | ReqFlags::FUA;
                if self.s.plp && r.op == Op::Write && r.flags.intersects(cache) {
                    self.cmds.entry(id).stripped = r.flags & cache;
                    ctx.reqs_mut()[id].flags.remove(cache);
                }
                if here {
                    self.cmds.entry(id).phase = Phase::Answering;
                } else if ctx.dispatch(id) == Admission::Busy {
                    unreachable!("the controller refused a command");
                }
                // Its lane moves on first: completing forgets the command.
                if let Some(a) = attr {
                    self.run_lane(a.stream, ctx);
                }
                if here {
                    self.stats.flushes_not_sent += 1;
                    // The response capsule, as the drive's completion would send it.
                    let landed = ctx.dma(Transfer {
                        host: r.host,
                        dir: Dma::ToHost,
                        payload: Payload::QueueEntries,
                        start_ns: now,
                        bytes: CQE_BYTES,
                    });
                    let t = &mut ctx.reqs_mut()[id].t;
                    t.fetched_ns = now;
                    t.media_start_ns = now;
                    t.cq_posted_ns = landed;
                    ctx.schedule(landed, TargetEvent::Answered(id));
                }
            }
            TargetEvent::Answered(id) => {
                if self.cmds.entry(id).phase == Phase::Answering {
                    self.complete(id, ctx);
                }
            }
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<TargetEvent>) {
        let c = std::mem::take(self.cmds.entry(id));
        let now = ctx.now_ns();
        ctx.reqs_mut()[id].flags |= c.stripped;
        if let Some(a) = c.attr
            && matches!(c.phase, Phase::AtDrive | Phase::Answering)
            && let Some(e) = self.log.get_mut((c.log_no - self.log_base) as usize)
        {
            debug_assert_eq!(e.id, id);
            e.id = ReqId::NONE;
            if ctx.reqs()[id].status == IoStatus::Ok && (self.s.plp || a.flush) {
                e.attr.persist = true;
            }
            self.recycle();
        }
        self.core(now, self.s.respond_cycles);
        self.note(now, TraceKind::Respond, id, 0);
        ctx.complete(id);
    }

    /// Write data is in the target's memory before the drive sees the command.
    fn dma(&mut self, t: Transfer) -> Option<Ns> {
        (t.payload == Payload::Data && t.dir == Dma::ToDevice).then_some(t.start_ns)
    }

    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<TargetEvent>) {
        let Command::Ordering(m) = &mut msg.command else {
            if msg.command == Command::PowerLoss {
                self.power_loss(ctx);
            }
            ctx.control_below(msg);
            return;
        };
        match m.op {
            OrderOp::Attach { id, attr } => {
                self.cmds.entry(id).attr = Some(attr);
            }
            OrderOp::Meta {
                stream,
                request,
                seq,
                ..
            } => {
                // A core takes the SEND, the PMR persists the metadata, a core answers.
                let received = self.core(msg.at_ns, self.s.receive_cycles);
                let start = received.max(self.pmr_free);
                self.pmr_free = start + self.s.pmr_write_ns;
                self.stats.pmr_busy_ns += self.s.pmr_write_ns;
                let persisted = self.pmr_free;
                let answered = self.core(persisted, self.s.respond_cycles);
                self.meta.push_back((stream, request, seq, persisted));
                self.note(persisted, TraceKind::Meta, ReqId::NONE, stream);
                self.stats.meta += 1;
                m.done_ns = answered;
            }
            OrderOp::Recycle { stream, seq } => {
                self.grow(stream);
                let r = &mut self.recyclable[stream as usize];
                *r = (*r).max(seq);
                self.recycle();
                // HORAE's metadata of durable requests is not needed any more.
                self.meta.retain(|&(s, _, q, _)| s != stream || q > seq);
            }
        }
        msg.status = ControlStatus::Success;
    }

    fn collect_order_state(&self, _reqs: &Requests, out: &mut OrderState) {
        out.pmrs.push(PmrRecord {
            target: self.s.index,
            log: self.log.iter().map(|e| e.attr).collect(),
            head_seq: self
                .head_seq
                .iter()
                .enumerate()
                .map(|(s, &h)| (s as u32, h))
                .collect(),
            meta: self
                .meta
                .iter()
                .filter(|&&(_, _, _, at)| at <= out.at_ns)
                .map(|&(s, r, _, _)| (s, r))
                .collect(),
            attr_bytes: self.s.attr_bytes,
            meta_bytes: self.s.meta_bytes,
        });
        out.trace
            .extend(self.trace.iter().filter(|e| e.at_ns <= out.at_ns));
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        vec![
            ("commands".into(), s.commands as f64),
            ("attributes_logged".into(), s.logged as f64),
            ("metadata_persisted".into(), s.meta as f64),
            ("attributes_recycled".into(), s.recycled as f64),
            ("log_live".into(), self.log.len() as f64),
            ("log_max".into(), s.max_log as f64),
            ("log_full_waits".into(), s.log_full_waits as f64),
            ("commands_lost".into(), s.lost as f64),
            ("cores".into(), self.cores.len() as f64),
            ("core_busy_ns".into(), s.core_busy_ns as f64),
            ("target_cycles".into(), s.cycles as f64),
            ("pmr_busy_ns".into(), s.pmr_busy_ns as f64),
            ("flushes_not_sent".into(), s.flushes_not_sent as f64),
        ]
    }
}
