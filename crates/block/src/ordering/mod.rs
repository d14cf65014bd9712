//! Ordered writes in the block layer: the ordering plug-ins (`[block] ordering`, or a job's
//! `ordering=`): `none`, `flush` (Linux's FLUSH ordering), `horae` and `rio` (Rio, EuroSys'23,
//! and the stacks it is compared with).
//!
//! A write (or FLUSH) flagged [`ReqFlags::ORDERED`] belongs to its job's stream and leaves the
//! ordinary path (plug, scheduler, tags) for the stream's ORDER queue (Rio 4.5, principle 1),
//! where its plug-in decides everything:
//! - the **sequencer** ([`Sequencer`], shared with the crash checker) numbers the requests of a
//!   plug (a submission batch), merges consecutive groups and splits at stripe units into
//!   commands, each with its ordering attribute, and adds the FLUSH commands a request asks
//!   for;
//! - the stream's commands go to the driver in that order, each when the plug-in's hooks allow
//!   ([`Ordering::may_send`]: Linux waits for the previous request, HORAE for its control path,
//!   a FLUSH of its own for the writes it covers) and with the messages the target needs first
//!   ([`Ordering::before_send`]: Rio's attribute);
//! - completions are acknowledged to the job in sequence order or as they come
//!   ([`Ordering::in_order_ack`]), and the targets are told what the application has seen
//!   ([`Ordering::after_ack`]: Rio's PMR head).
//!
//! With a power cut to observe (`record`), the stream keeps what the crash checker needs (its
//! requests and commands from the first not known durable on) and reports it through
//! `collect_order_state`.

pub mod flush;
pub mod horae;
pub mod none;
pub mod rio;

use std::collections::VecDeque;

use qoslab_engine::order::{
    CmdRecord, Layout, OrderAttr, OrderMsg, OrderOp, OrderState, OrderedWrite, PlanRules, Planned,
    ReqRecord, Sequencer, StreamRecord, TraceEvent, TraceKind,
};
use qoslab_engine::{
    Admission, Command, ConfigError, Control, IoStatus, Ns, Op, ReqFlags, ReqId, ReqTable, Request,
    Requests, StageCtx,
};

use crate::BlockEvent;

/// What a plug-in sees of one of its streams.
pub struct StreamView<'a> {
    pub stream: u32,
    /// Requests not yet acknowledged, in order, with their state.
    pub requests: &'a VecDeque<AppReq>,
    /// The first of them is request number `first` of the stream.
    pub first: u64,
}

/// One ordering plug-in: how a stack orders a stream's writes. Every hook has a default, an
/// orderless stack's.
pub trait Ordering {
    /// How the sequencer plans the stream's requests: by default merged in the plug, a FLUSH
    /// only where a request asks for one, riding on its last command, to the targets written.
    fn rules(&self) -> PlanRules {
        PlanRules {
            merge: true,
            flush_every_request: false,
            separate_flush: false,
            flush_every_target: false,
        }
    }

    /// Whether command `cmd`, the next of its stream, may go to the driver now.
    fn may_send(&self, _s: &StreamView<'_>, _cmd: &CmdView<'_>) -> bool {
        true
    }

    /// Messages for the target before `cmd` goes (they travel in its NVMe-oF command).
    fn before_send(&self, _cmd: &CmdView<'_>, _out: &mut Vec<OrderOp>) {}

    /// Before a request's data may go, a synchronous control path persists its ordering
    /// metadata at a target (HORAE): the bytes of that metadata, or `None`.
    fn control_path(&self) -> Option<u64> {
        None
    }

    /// Requests are acknowledged to the job in sequence order.
    fn in_order_ack(&self) -> bool {
        true
    }

    /// The job's thread sleeps on each command until it completes (synchronous transfer):
    /// every completion costs it a wake-up.
    fn sleeps_per_command(&self) -> bool {
        false
    }

    /// Messages for every target after requests were acknowledged: `durable` is the highest
    /// sequence number of the stream whose requests are all acknowledged and durable.
    fn after_ack(&self, _stream: u32, _durable: u64, _out: &mut Vec<OrderOp>) {}

    /// An acknowledged FLUSH makes every earlier request of the stream durable: the stack sends
    /// it after them (in order at the target, or once they completed). Not so without
    /// ordering, where a FLUSH may reach a drive before earlier writes.
    fn flush_covers_prefix(&self) -> bool {
        true
    }

    /// Each command leaves an attribute in its target's PMR log until `after_ack` recycles it
    /// (Rio): the stream asks for a FLUSH before a log fills.
    fn logs_attributes(&self) -> bool {
        false
    }
}

/// What a plug-in is given at construction.
pub struct OrderingSetup<'a> {
    pub settings: &'a qoslab_engine::Settings,
}

/// An ordering plug-in's constructor.
pub type BuildOrdering = fn(&OrderingSetup<'_>) -> Box<dyn Ordering>;

qoslab_engine::plugin_ops! {
    /// One ordering plug-in, as the registry knows it.
    pub struct OrderingOps: "ordering", tunables "[block.NAME]", build BuildOrdering {
        /// Its streams need target servers with a PMR below (the path's `[fabric]`).
        pub needs_target: bool,
    }
}

impl std::fmt::Debug for OrderingOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ordering '{}'", self.name)
    }
}

/// Every ordering a device file or a job can name.
pub static ORDERINGS: &[&OrderingOps] = &[&none::OPS, &flush::OPS, &horae::OPS, &rio::OPS];

/// The ordering called `name`, checked against the stage contract.
pub fn lookup(name: &str) -> Result<&'static OrderingOps, ConfigError> {
    qoslab_engine::lookup(ORDERINGS, "block.ordering", name)
}

/// The ordered streams' common settings (the `[fabric]` table of the path).
#[derive(Clone, Copy, Debug)]
pub struct OrderConfig {
    pub layout: Layout,
    pub block_bytes: u64,
    /// The drives have power-loss protection (a completed write is durable).
    pub plp: bool,
    /// Each target's PMR: before a target's log is three quarters full, a stream that logs
    /// there (Rio's attributes, HORAE's metadata) asks for a FLUSH so that its entries can
    /// be recycled.
    pub pmr_bytes: u64,
    /// One Rio ordering attribute in the PMR log.
    pub attr_bytes: u64,
    /// A thread's sleep and wake-up on an I/O.
    pub context_switch_ns: Ns,
    /// Keep what a power cut's check needs.
    pub record: bool,
    /// Trace every step of every command (the differential test against the crash checker).
    pub trace: bool,
}

/// A request of a stream, waiting for its commands.
#[derive(Clone, Copy, Debug)]
pub struct AppReq {
    pub id: ReqId,
    pub seq: u64,
    pub persist: bool,
    /// Commands not yet completed.
    pub pending: u32,
    pub acked: bool,
    /// HORAE: its metadata is persisted and the answer is back.
    pub meta_ok: bool,
    pub status: IoStatus,
    /// The stream's first command carrying it left (its dispatch stamp).
    pub sent_ns: Option<Ns>,
}

/// What a plug-in sees of a command.
pub struct CmdView<'a> {
    pub no: u64,
    pub target: u16,
    pub attr: &'a OrderAttr,
    pub flush_only: bool,
    /// Stream numbers of the requests waiting for it.
    pub reqs: &'a [u64],
    /// Lane state of a FLUSH-only command: every data command before it on its target has
    /// completed (false for a command that carries data).
    pub lane_done: bool,
    /// Of a FLUSH-only command: every data command before it in the stream, on any target,
    /// has completed (false for a command that carries data).
    pub stream_done: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmdPhase {
    Planned,
    Sent,
    Done,
}

#[derive(Clone, Debug)]
struct StreamCmd {
    no: u64,
    target: u16,
    attr: OrderAttr,
    flush_only: bool,
    /// Request numbers it completes, and those whose data it carries.
    reqs: Vec<u64>,
    writes: Vec<u64>,
    phase: CmdPhase,
    /// Its request in the arena while it is out (or waiting for the driver).
    id: ReqId,
    media_done: bool,
    offset_bytes: u64,
    len_bytes: u64,
}

/// One stream: the ORDER queue of one job.
struct Stream {
    job: u32,
    host: u16,
    core: u16,
    kind: usize,
    seq: Sequencer,
    batch: Vec<(ReqId, OrderedWrite)>,
    /// A FLUSH request waiting in the batch (planned after the writes before it).
    reqs: VecDeque<AppReq>,
    first: u64,
    /// The first request not yet acknowledged (a request number): acknowledging starts
    /// there, so a stream that keeps many acknowledged requests for a cut's check costs no
    /// more per completion.
    unacked: u64,
    cmds: VecDeque<StreamCmd>,
    cmd_first: u64,
    /// The next command to send (a command number).
    next_send: u64,
    /// HORAE: the next request whose metadata goes, and whether one is under way.
    meta_next: u64,
    meta_busy: bool,
    /// Highest sequence number acknowledged with a FLUSH.
    last_persist_acked: u64,
    /// The highest sequence number the targets were told is durable.
    told: u64,
    /// The thread is asleep or busy until then: nothing is sent before.
    busy_until: Ns,
    /// An `Order` event is scheduled for this stream.
    woken: bool,
    /// The driver was busy: try again on `pull`.
    blocked: bool,
    force_flush: bool,
    /// The sequence number of the last FLUSH asked for because a log filled: no other is
    /// asked for until it is acknowledged.
    forced_seq: u64,
    /// Its PMR log entries not yet recycled, in order (`seq_end`, target): Rio's attributes
    /// (one per command sent), HORAE's metadata (one per request through the control path).
    in_logs: VecDeque<(u64, u16)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Owner {
    /// 1 + the stream; 0: not an ordered command.
    stream: u32,
    no: u64,
}

/// Counters of the ordered streams.
#[derive(Clone, Debug, Default)]
struct Stats {
    requests: u64,
    commands: u64,
    merged_commands: u64,
    split_commands: u64,
    flush_commands: u64,
    control_paths: u64,
    forced_flushes: u64,
    busy: u64,
    wakeups: u64,
}

/// The ordered streams of a block layer.
pub struct OrderedStreams {
    cfg: OrderConfig,
    /// The plug-in of each job (index into `kinds`), `None` for an unordered job.
    job_kind: Vec<Option<usize>>,
    kinds: Vec<(&'static OrderingOps, Box<dyn Ordering>)>,
    streams: Vec<Option<Stream>>,
    owners: ReqTable<Owner>,
    /// Bytes of live entries in each target's PMR log (Rio's attributes, HORAE's
    /// metadata), to ask for a FLUSH before a log fills.
    log_bytes: Vec<u64>,
    stats: Stats,
    msgs: Vec<OrderOp>,
    trace: Vec<TraceEvent>,
}

impl OrderedStreams {
    /// Ordered streams for jobs whose orderings are `per_job` (`None`: the job is not
    /// ordered), each plug-in built with its settings.
    pub fn new<'s>(
        cfg: OrderConfig,
        per_job: &[Option<&'static OrderingOps>],
        settings: &dyn Fn(&'static OrderingOps) -> &'s qoslab_engine::Settings,
    ) -> Self {
        let mut kinds: Vec<(&'static OrderingOps, Box<dyn Ordering>)> = Vec::new();
        let job_kind = per_job
            .iter()
            .map(|o| {
                let ops = (*o)?;
                if let Some(i) = kinds.iter().position(|(k, _)| k.name == ops.name) {
                    return Some(i);
                }
                let build = ops.build.expect("checked by the registry");
                kinds.push((
                    ops,
                    build(&OrderingSetup {
                        settings: settings(ops),
                    }),
                ));
                Some(kinds.len() - 1)
            })
            .collect();
        OrderedStreams {
            log_bytes: vec![0; cfg.layout.targets.max(1) as usize],
            cfg,
            job_kind,
            kinds,
            streams: Vec::new(),
            owners: ReqTable::new(),
            stats: Stats::default(),
            msgs: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// Whether request `id` is a command of an ordered stream.
    #[inline]
    pub fn owns(&mut self, id: ReqId) -> bool {
        self.owners.entry(id).stream != 0
    }

    /// Whether `req` goes to an ordered stream.
    #[inline]
    pub fn takes(&self, req: &Request) -> bool {
        req.flags.contains(ReqFlags::ORDERED)
            && self
                .job_kind
                .get(req.job as usize)
                .is_some_and(Option::is_some)
    }

    fn stream_of(&mut self, req: &Request) -> &mut Stream {
        let j = req.job as usize;
        if j >= self.streams.len() {
            self.streams.resize_with(j + 1, || None);
        }
        let kind = self.job_kind[j].expect("an ordered job");
        let targets = self.cfg.layout.targets;
        self.streams[j].get_or_insert_with(|| Stream {
            job: req.job,
            host: req.host,
            core: req.core,
            kind,
            seq: Sequencer::new(req.job, targets),
            batch: Vec::new(),
            reqs: VecDeque::new(),
            first: 0,
            unacked: 0,
            cmds: VecDeque::new(),
            cmd_first: 0,
            next_send: 0,
            meta_next: 0,
            meta_busy: false,
            last_persist_acked: 0,
            told: 0,
            busy_until: 0,
            woken: false,
            blocked: false,
            force_flush: false,
            forced_seq: 0,
            in_logs: VecDeque::new(),
        })
    }

    /// An ordered request from the job: it joins its stream's batch, planned when the batch
    /// (the job's submission call) ends.
    pub fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let req = ctx.reqs()[id];
        self.stats.requests += 1;
        let bb = self.cfg.block_bytes;
        let s = self.stream_of(&req);
        let w = OrderedWrite {
            lba: req.offset_bytes / bb,
            blocks: (req.len_bytes / bb) as u32,
            group_end: !req.flags.contains(ReqFlags::GROUP_MORE),
            persist: req.op == Op::Flush
                || req.flags.intersects(ReqFlags::FUA | ReqFlags::PREFLUSH),
        };
        s.batch.push((id, w));
        if !req.flags.contains(ReqFlags::BATCH_MORE) {
            let j = req.job as usize;
            self.plan_batch(j, ctx);
            self.pump(j, ctx);
        }
    }

    /// The bytes one entry of plug-in `kind` takes in a target's PMR log until a FLUSH that
    /// covers it is acknowledged: Rio's attribute per command, HORAE's metadata per request;
    /// `None` if the stack logs nothing there.
    fn log_entry_bytes(&self, kind: usize) -> Option<u64> {
        let o = &self.kinds[kind].1;
        if o.logs_attributes() {
            Some(self.cfg.attr_bytes)
        } else {
            o.control_path()
        }
    }

    /// Plans the stream's batch: its writes through the sequencer, a FLUSH of its own after
    /// the writes before it.
    fn plan_batch(&mut self, j: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let cfg = self.cfg;
        let mut batch = std::mem::take(&mut self.streams[j].as_mut().expect("stream").batch);
        // The PMR log's space. Without PLP an entry (Rio's attribute, HORAE's metadata) is
        // recycled only once an acknowledged FLUSH covers it (`acknowledge`), so a stream
        // that never flushes would fill the logs: once a target's log (with this batch)
        // reaches three quarters, the stream's last write of the batch carries a FLUSH, one
        // such FLUSH in flight at a time. The document does not say what Rio or HORAE does
        // with a full log (HORAE's 2 MB PMR, Rio 6.1); this is the model's rule, and the
        // crash checker's workloads draw FLUSHes at any group end.
        let entry = self.log_entry_bytes(self.streams[j].as_ref().expect("stream").kind);
        let s = self.streams[j].as_mut().expect("stream");
        let full = match entry {
            Some(bytes) if !cfg.plp => {
                let threshold = (cfg.pmr_bytes / bytes * 3 / 4).max(1);
                let incoming = batch.len() as u64;
                self.log_bytes
                    .iter()
                    .any(|&n| n / bytes + incoming >= threshold)
            }
            _ => false,
        };
        let rules = self.kinds[s.kind].1.rules();
        let mut forced = None;
        if (full && s.forced_seq <= s.last_persist_acked) || s.force_flush {
            s.force_flush = false;
            if let Some(last) = batch
                .iter_mut()
                .rev()
                .find(|(id, _)| ctx.reqs()[*id].op == Op::Write)
                && !last.1.persist
                && last.1.group_end
            {
                last.1.persist = true;
                forced = Some(last.0);
                self.stats.forced_flushes += 1;
            } else if batch.iter().all(|(_, w)| !w.group_end) {
                s.force_flush = true;
            }
        }
        let mut start = 0;
        while start < batch.len() {
            let s = self.streams[j].as_mut().expect("stream");
            let (id0, _) = batch[start];
            let planned = if ctx.reqs()[id0].op == Op::Flush {
                start += 1;
                (s.seq.plan_flush(rules.flush_every_target), vec![id0])
            } else {
                let end = batch[start..]
                    .iter()
                    .position(|(id, _)| ctx.reqs()[*id].op == Op::Flush)
                    .map_or(batch.len(), |k| start + k);
                let writes: Vec<OrderedWrite> = batch[start..end].iter().map(|&(_, w)| w).collect();
                let ids = batch[start..end].iter().map(|&(id, _)| id).collect();
                start = end;
                (s.seq.plan(&writes, &cfg.layout, rules), ids)
            };
            self.enqueue(j, planned.0, &planned.1, ctx);
        }
        let s = self.streams[j].as_mut().expect("stream");
        if let Some(a) = forced.and_then(|id| s.reqs.iter().rev().find(|a| a.id == id)) {
            s.forced_seq = a.seq;
        }
        batch.clear();
        self.streams[j].as_mut().expect("stream").batch = batch;
    }

    /// Appends a planned batch to the stream's queues.
    fn enqueue(
        &mut self,
        j: usize,
        planned: Planned,
        ids: &[ReqId],
        ctx: &mut impl StageCtx<BlockEvent>,
    ) {
        let bb = self.cfg.block_bytes;
        let s = self.streams[j].as_mut().expect("stream");
        let req_base = s.first + s.reqs.len() as u64;
        let cmd_base = s.cmd_first + s.cmds.len() as u64;
        for (r, pr) in planned.requests.iter().enumerate() {
            ctx.reqs_mut()[ids[r]].t.dispatched_ns = Ns::MAX;
            s.reqs.push_back(AppReq {
                id: ids[r],
                seq: pr.seq,
                persist: pr.persist,
                pending: pr.cmds.len() as u32,
                acked: false,
                meta_ok: false,
                status: IoStatus::Ok,
                sent_ns: None,
            });
        }
        let mut reqs_of: Vec<Vec<u64>> = vec![Vec::new(); planned.cmds.len()];
        for (r, pr) in planned.requests.iter().enumerate() {
            for &c in &pr.cmds {
                reqs_of[c].push(req_base + r as u64);
            }
        }
        for (c, pc) in planned.cmds.into_iter().enumerate() {
            self.stats.commands += 1;
            self.stats.merged_commands += u64::from(pc.attr.merged);
            self.stats.split_commands += u64::from(pc.attr.split);
            self.stats.flush_commands += u64::from(pc.flush_only);
            let (offset_bytes, len_bytes) = if pc.flush_only {
                (0, 0)
            } else {
                (pc.attr.lba * bb, u64::from(pc.attr.blocks) * bb)
            };
            s.cmds.push_back(StreamCmd {
                no: cmd_base + c as u64,
                target: pc.target as u16,
                attr: pc.attr,
                flush_only: pc.flush_only,
                reqs: std::mem::take(&mut reqs_of[c]),
                writes: pc.writes.iter().map(|&w| req_base + w as u64).collect(),
                phase: CmdPhase::Planned,
                id: ReqId::NONE,
                media_done: false,
                offset_bytes,
                len_bytes,
            });
        }
        // A request with no command (a FLUSH with nothing to flush) completes in its turn.
        self.acknowledge(j, ctx);
    }

    /// Sends what the stream may send now, then starts its control path.
    fn pump(&mut self, j: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let now = ctx.now_ns();
        let Some(s) = self.streams[j].as_mut() else {
            return;
        };
        if s.busy_until > now {
            if !s.woken {
                s.woken = true;
                ctx.schedule(s.busy_until, BlockEvent::Order { stream: j as u32 });
            }
            return;
        }
        self.send_ready(j, ctx);
        self.control_path(j, ctx);
    }

    /// Sends the stream's commands in order while its plug-in allows.
    fn send_ready(&mut self, j: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        loop {
            let s = self.streams[j].as_mut().expect("stream");
            if s.blocked {
                return;
            }
            let Some(k) = s.next_send.checked_sub(s.cmd_first) else {
                return;
            };
            let Some(cmd) = s.cmds.get(k as usize) else {
                return;
            };
            // Only a FLUSH asks for its lane and its stream (a scan of the commands kept before
            // it, which a cut's record keeps until they are known durable).
            let data_before = || s.cmds.iter().take(k as usize).filter(|c| !c.flush_only);
            let lane_done = cmd.flush_only
                && data_before()
                    .filter(|c| c.target == cmd.target)
                    .all(|c| c.phase == CmdPhase::Done);
            let stream_done = cmd.flush_only && data_before().all(|c| c.phase == CmdPhase::Done);
            let view = CmdView {
                no: cmd.no,
                target: cmd.target,
                attr: &cmd.attr,
                flush_only: cmd.flush_only,
                reqs: &cmd.reqs,
                lane_done,
                stream_done,
            };
            let sv = StreamView {
                stream: s.job,
                requests: &s.reqs,
                first: s.first,
            };
            let ops = &self.kinds[s.kind].1;
            if !ops.may_send(&sv, &view) {
                return;
            }
            self.msgs.clear();
            ops.before_send(&view, &mut self.msgs);
            if !self.send(j, k as usize, ctx) {
                return;
            }
        }
    }

    /// Offers command `k` of stream `j` to the driver; false when the driver is busy.
    fn send(&mut self, j: usize, k: usize, ctx: &mut impl StageCtx<BlockEvent>) -> bool {
        let now = ctx.now_ns();
        let s = self.streams[j].as_mut().expect("stream");
        let cmd = &mut s.cmds[k];
        if cmd.id.is_none() {
            let first_req = cmd.reqs.first().copied().unwrap_or(s.first);
            let app = &s.reqs[(first_req.max(s.first) - s.first) as usize];
            let queued = ctx.reqs()[app.id].t.queued_ns;
            let prio = ctx.reqs()[app.id].prio;
            let op = if cmd.flush_only { Op::Flush } else { Op::Write };
            let offset = if cmd.flush_only {
                // An ordered FLUSH goes to the target of its offset.
                u64::from(cmd.target) * self.cfg.layout.chunk_blocks * self.cfg.block_bytes
            } else {
                cmd.offset_bytes
            };
            let mut r = Request::new(op, offset, cmd.len_bytes, s.job, queued);
            r.flags = ReqFlags::ORDERED;
            if cmd.attr.flush && !cmd.flush_only && !self.cfg.plp {
                // A write carrying the FLUSH: everything before it and itself durable when it
                // completes. Without a volatile write cache (or with PLP) the block layer
                // drops PREFLUSH and FUA, as Linux's does for every bio of a write-through
                // queue (blk_insert_flush; the document, 4.3.2: "the FLUSH command is usually
                // ignored by the block layer"): a completed write is durable already.
                r.flags |= ReqFlags::PREFLUSH | ReqFlags::FUA;
            }
            r.prio = prio;
            r.host = s.host;
            r.core = s.core;
            let id = ctx.reqs_mut().alloc(r);
            cmd.id = id;
            *self.owners.entry(id) = Owner {
                stream: j as u32 + 1,
                no: cmd.no,
            };
        }
        let id = cmd.id;
        let target = cmd.target;
        for op in self.msgs.drain(..) {
            let op = match op {
                OrderOp::Attach { attr, .. } => OrderOp::Attach { id, attr },
                other => other,
            };
            let mut msg = Control::new(
                now,
                s.host,
                Command::Ordering(OrderMsg {
                    target,
                    op,
                    done_ns: now,
                }),
            );
            ctx.control_below(&mut msg);
        }
        ctx.reqs_mut()[id].t.dispatched_ns = now;
        if ctx.dispatch(id) == Admission::Busy {
            self.stats.busy += 1;
            let s = self.streams[j].as_mut().expect("stream");
            s.blocked = true;
            return false;
        }
        let s = self.streams[j].as_mut().expect("stream");
        let cmd = &mut s.cmds[k];
        cmd.phase = CmdPhase::Sent;
        if self.cfg.trace {
            self.trace.push(TraceEvent {
                at_ns: now,
                kind: TraceKind::Send,
                id,
                stream: s.job,
                no: cmd.no,
            });
        }
        s.next_send += 1;
        if self.kinds[s.kind].1.logs_attributes() && !cmd.flush_only {
            s.in_logs.push_back((cmd.attr.seq_end, cmd.target));
            self.log_bytes[cmd.target as usize] += self.cfg.attr_bytes;
        }
        let first = s.first;
        let reqs: Vec<u64> = cmd.reqs.clone();
        for r in reqs {
            let a = &mut s.reqs[(r - first) as usize];
            if a.sent_ns.is_none() {
                a.sent_ns = Some(now);
            }
        }
        true
    }

    /// HORAE's control path: the metadata of the stream's next request goes to the target of
    /// its first command, one round trip at a time; its data waits for the answer.
    fn control_path(&mut self, j: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let s = self.streams[j].as_mut().expect("stream");
        let Some(bytes) = self.kinds[s.kind].1.control_path() else {
            return;
        };
        if s.meta_busy {
            return;
        }
        let Some(r) = s.meta_next.checked_sub(s.first) else {
            return;
        };
        let Some(seq) = s.reqs.get(r as usize).map(|a| a.seq) else {
            return;
        };
        // The request's data waits for its metadata, so its command is not sent yet: look
        // from the first command not sent (a cut's record keeps the ones before).
        let unsent = s.next_send.saturating_sub(s.cmd_first) as usize;
        let target = s
            .cmds
            .iter()
            .skip(unsent)
            .find(|c| c.reqs.contains(&s.meta_next))
            .map_or(0, |c| c.target);
        let now = ctx.now_ns();
        let mut msg = Control::new(
            now,
            s.host,
            Command::Ordering(OrderMsg {
                target,
                op: OrderOp::Meta {
                    stream: s.job,
                    request: s.meta_next,
                    seq,
                    bytes,
                },
                done_ns: now,
            }),
        );
        ctx.control_below(&mut msg);
        let Command::Ordering(answer) = msg.command else {
            unreachable!("the control path's message came back changed");
        };
        self.stats.control_paths += 1;
        let s = self.streams[j].as_mut().expect("stream");
        s.meta_busy = true;
        // The metadata stays in the target's PMR log until the request is known durable.
        s.in_logs.push_back((seq, target));
        self.log_bytes[target as usize] += bytes;
        // The thread sleeps until the answer and wakes.
        let woken = ctx.cpu(
            s.host,
            s.core,
            answer.done_ns.max(now),
            self.cfg.context_switch_ns,
        );
        self.stats.wakeups += 1;
        ctx.schedule(woken, BlockEvent::Order { stream: j as u32 });
        s.busy_until = woken;
        s.woken = true;
    }

    /// A timed wake-up of stream `stream`: its control path answered, or its thread woke.
    pub fn on_event(&mut self, stream: u32, ctx: &mut impl StageCtx<BlockEvent>) {
        let j = stream as usize;
        let now = ctx.now_ns();
        let Some(s) = self.streams[j].as_mut() else {
            return;
        };
        s.woken = false;
        if s.meta_busy && s.busy_until <= now {
            s.meta_busy = false;
            let r = (s.meta_next - s.first) as usize;
            if let Some(a) = s.reqs.get_mut(r) {
                a.meta_ok = true;
            }
            s.meta_next += 1;
        }
        self.pump(j, ctx);
    }

    /// Room again below: streams the driver refused send again.
    pub fn pull(&mut self, ctx: &mut impl StageCtx<BlockEvent>) {
        for j in 0..self.streams.len() {
            if let Some(s) = self.streams[j].as_mut()
                && s.blocked
            {
                s.blocked = false;
                self.pump(j, ctx);
            }
        }
    }

    /// A command completed.
    pub fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<BlockEvent>) {
        let Owner { stream, no } = std::mem::take(self.owners.entry(id));
        let j = (stream - 1) as usize;
        let now = ctx.now_ns();
        let r = ctx.reqs()[id];
        ctx.reqs_mut().free(id);
        let s = self.streams[j].as_mut().expect("stream");
        let k = (no - s.cmd_first) as usize;
        let cmd = &mut s.cmds[k];
        cmd.phase = CmdPhase::Done;
        cmd.id = ReqId::NONE;
        if self.cfg.trace {
            self.trace.push(TraceEvent {
                at_ns: now,
                kind: TraceKind::Ack,
                id,
                stream: s.job,
                no,
            });
        }
        cmd.media_done = r.t.media_done_ns > 0 && r.status == IoStatus::Ok;
        let first = s.first;
        for &q in &cmd.reqs {
            let a = &mut s.reqs[(q - first) as usize];
            a.pending -= 1;
            if r.status != IoStatus::Ok {
                a.status = r.status;
            }
        }
        if self.kinds[s.kind].1.sleeps_per_command() {
            s.busy_until = ctx.cpu(s.host, s.core, now, self.cfg.context_switch_ns);
            self.stats.wakeups += 1;
        }
        self.acknowledge(j, ctx);
        self.pump(j, ctx);
    }

    /// Acknowledges what the plug-in's order allows, tells the targets, and forgets what no
    /// crash can need any more.
    fn acknowledge(&mut self, j: usize, ctx: &mut impl StageCtx<BlockEvent>) {
        let now = ctx.now_ns();
        let entry = self.log_entry_bytes(self.streams[j].as_ref().expect("stream").kind);
        let s = self.streams[j].as_mut().expect("stream");
        let ops = &self.kinds[s.kind].1;
        let in_order = ops.in_order_ack();
        for i in (s.unacked - s.first) as usize..s.reqs.len() {
            let a = s.reqs[i];
            if a.acked {
                continue;
            }
            if a.pending > 0 {
                if in_order {
                    break;
                }
                continue;
            }
            s.reqs[i].acked = true;
            if a.persist {
                s.last_persist_acked = s.last_persist_acked.max(a.seq);
            }
            let req = &mut ctx.reqs_mut()[a.id];
            req.status = a.status;
            req.t.dispatched_ns = a.sent_ns.unwrap_or(now);
            req.t.completed_ns = now;
            ctx.complete(a.id);
        }
        while s
            .reqs
            .get((s.unacked - s.first) as usize)
            .is_some_and(|a| a.acked)
        {
            s.unacked += 1;
        }
        // The highest sequence number acknowledged and durable.
        let acked_to = s
            .reqs
            .get((s.unacked - s.first) as usize)
            .map_or_else(|| s.reqs.back().map_or(s.told, |a| a.seq), |a| a.seq - 1);
        let durable = if self.cfg.plp {
            acked_to
        } else if ops.flush_covers_prefix() {
            s.last_persist_acked.min(acked_to)
        } else {
            0
        }
        .max(s.told);
        if durable > s.told {
            s.told = durable;
            self.msgs.clear();
            ops.after_ack(s.job, durable, &mut self.msgs);
            let host = s.host;
            for op in self.msgs.drain(..) {
                for t in 0..self.cfg.layout.targets.max(1) {
                    let mut msg = Control::new(
                        now,
                        host,
                        Command::Ordering(OrderMsg {
                            target: t as u16,
                            op,
                            done_ns: now,
                        }),
                    );
                    ctx.control_below(&mut msg);
                }
            }
            while let Some(&(seq_end, t)) = s.in_logs.front() {
                if seq_end > durable {
                    break;
                }
                s.in_logs.pop_front();
                self.log_bytes[t as usize] -= entry.unwrap_or(0);
            }
        }
        self.forget(j);
    }

    /// Drops requests and commands from the front of the stream that no crash can need: all
    /// acknowledged, and (when recording) known durable.
    fn forget(&mut self, j: usize) {
        let record = self.cfg.record;
        let s = self.streams[j].as_mut().expect("stream");
        let kept = s.told;
        let horae = self.kinds[s.kind].1.control_path().is_some();
        while let Some(a) = s.reqs.front() {
            let done = a.acked && (!record || a.seq <= kept);
            // HORAE's control path counts requests from the front: keep those it has not done.
            if !done || (horae && s.first >= s.meta_next) {
                break;
            }
            s.reqs.pop_front();
            s.first += 1;
        }
        while let Some(c) = s.cmds.front() {
            let needed =
                c.phase != CmdPhase::Done || c.reqs.iter().chain(&c.writes).any(|&r| r >= s.first);
            if needed {
                break;
            }
            s.cmds.pop_front();
            s.cmd_first += 1;
        }
    }

    /// The record of every ordered stream (for a power cut's check).
    pub fn collect(&self, reqs: &Requests, out: &mut OrderState) {
        for s in self.streams.iter().flatten() {
            let first = s.first;
            let index = |r: u64| (r - first) as usize;
            let mut rec = StreamRecord {
                stream: s.job,
                first,
                ordering: self.kinds[s.kind].0.name,
                requests: s
                    .reqs
                    .iter()
                    .map(|a| ReqRecord {
                        seq: a.seq,
                        persist: a.persist,
                        acked: a.acked,
                        cmds: Vec::new(),
                    })
                    .collect(),
                cmds: Vec::new(),
            };
            for c in &s.cmds {
                if c.reqs.iter().chain(&c.writes).any(|&r| r < first) {
                    continue;
                }
                let i = rec.cmds.len();
                for &r in &c.reqs {
                    rec.requests[index(r)].cmds.push(i);
                }
                let media_done = if c.id.is_none() {
                    c.media_done
                } else {
                    let r = &reqs[c.id];
                    r.t.media_done_ns > 0 && r.status == IoStatus::Ok
                };
                rec.cmds.push(CmdRecord {
                    target: c.target,
                    attr: c.attr,
                    writes: c.writes.iter().map(|&r| index(r)).collect(),
                    flush_only: c.flush_only,
                    sent: c.phase != CmdPhase::Planned,
                    media_done,
                    offset_bytes: c.offset_bytes,
                    len_bytes: c.len_bytes,
                });
            }
            out.streams.push(rec);
        }
        out.trace.extend_from_slice(&self.trace);
    }

    pub fn counters(&self, out: &mut Vec<(String, f64)>) {
        let s = &self.stats;
        for (k, v) in [
            ("ordered_requests", s.requests),
            ("ordered_commands", s.commands),
            ("ordered_merged_commands", s.merged_commands),
            ("ordered_split_commands", s.split_commands),
            ("ordered_flush_commands", s.flush_commands),
            ("ordered_control_paths", s.control_paths),
            ("ordered_forced_flushes", s.forced_flushes),
            ("ordered_driver_busy", s.busy),
            ("ordered_thread_wakeups", s.wakeups),
        ] {
            out.push((k.to_string(), v as f64));
        }
        out.push((
            "ordered_thread_wakeup_ns".into(),
            (s.wakeups * self.cfg.context_switch_ns) as f64,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(OrderingOps, none::OPS, ORDERINGS, "block.ordering");
}
