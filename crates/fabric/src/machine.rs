//! The event machine: each step is one event (a send, a network delivery, a PMR write, an SSD
//! submission, completion or destage, a target's response, the initiator's acknowledgement of
//! what came back), chosen among the enabled ones by a
//! seeded stream. Every step is an event boundary where power may fail. The timed model
//! ([`crate::timed`]) drives the same machine by the clock instead (`enabled`, then `run`).

use std::collections::VecDeque;

use qoslab_engine::RngStream;

use crate::FabricConfig;
use crate::plan::{Attr, Plan};
use crate::stack::StackOps;

/// Where a block of data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data {
    None,
    /// In the SSD's volatile write cache (lost at a power failure).
    Cached,
    Durable,
}

/// What survives a power failure: the media and the PMR.
#[derive(Clone, Debug)]
pub struct CrashImage {
    /// The SSDs have power-loss protection (recovery knows its hardware).
    pub plp: bool,
    /// Per command, the data it carries.
    pub data: Vec<Data>,
    /// Per command, its attribute as logged in the PMR (with the target's `persist` bit).
    pub attrs: Vec<Attr>,
    /// Per target, the live slots of the PMR circular log (command ids, head first).
    pub logs: Vec<VecDeque<usize>>,
    /// Per target and stream, the last sequence number recycled by moving the head.
    pub head_seq: Vec<Vec<u64>>,
    /// Per stream and request, HORAE's ordering metadata persisted by the control path.
    pub meta: Vec<Vec<bool>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Queued,
    Sent,
    Arrived,
    Logged,
    Submitted,
    Done,
    Responded,
    Acked,
}

/// One event of the machine. `Meta` names a stream, `Arrive` a command on the wire, the
/// others a command. `Respond` is the target's (it sets `persist`), `Ack` the initiator's on
/// receiving the response (requests acknowledged, the PMR heads moved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Meta(usize),
    Send(usize),
    Arrive(usize),
    Log(usize),
    Submit(usize),
    Done(usize),
    Destage(usize),
    Respond(usize),
    Ack(usize),
}

pub struct Machine<'p> {
    plan: &'p Plan,
    stack: &'static StackOps,
    cfg: FabricConfig,
    in_order_ack: bool,
    pub image: CrashImage,
    phase: Vec<Phase>,
    next_send: Vec<usize>,
    /// Commands on the wire, in the order sent.
    wire: Vec<usize>,
    /// Per target, commands in SSD submission order.
    ssd: Vec<Vec<usize>>,
    /// Per (stream, target): its commands in order, and how many precede each command with a
    /// lower sequence number (what in-order submission waits for).
    lanes: Vec<Vec<usize>>,
    lane_of: Vec<(usize, usize)>,
    must_follow: Vec<usize>,
    /// Per command, the (stream-local) requests that wait for it.
    cmd_requests: Vec<Vec<usize>>,
    /// Per command: the data commands a separate FLUSH waits for.
    flush_waits: Vec<Vec<usize>>,
    pending: Vec<Vec<u32>>,
    pub acked: Vec<Vec<bool>>,
    first_unacked: Vec<usize>,
    last_persist_acked: Vec<u64>,
    meta_next: Vec<usize>,
    rng: RngStream,
    actions: Vec<Action>,
    pub events: u64,
    /// Most requests of a stream sent and not yet acknowledged (the application's queue
    /// depth); unbounded for the crash checker.
    window: usize,
}

impl<'p> Machine<'p> {
    pub fn new(plan: &'p Plan, stack: &'static StackOps, cfg: &FabricConfig, seed: u64) -> Self {
        let targets = cfg.targets as usize;
        let streams = plan.order.len();
        let n = plan.cmds.len();
        let mut lanes = vec![Vec::new(); streams * targets];
        let mut lane_of = vec![(0, 0); n];
        let mut must_follow = vec![0; n];
        for (s, order) in plan.order.iter().enumerate() {
            for &c in order {
                let lane = s * targets + plan.cmds[c].target;
                let list: &mut Vec<usize> = &mut lanes[lane];
                // A FLUSH covers what the SSD took before it, so it follows everything before
                // it on its target, the other parts of its own request included.
                must_follow[c] = if plan.cmds[c].attr.flush {
                    list.len()
                } else {
                    list.iter()
                        .filter(|&&p| plan.cmds[p].attr.seq_end < plan.cmds[c].attr.seq_start)
                        .count()
                };
                lane_of[c] = (lane, list.len());
                list.push(c);
            }
        }
        let mut cmd_requests = vec![Vec::new(); n];
        let mut pending = Vec::new();
        for reqs in &plan.requests {
            pending.push(reqs.iter().map(|r| r.cmds.len() as u32).collect());
            for (i, r) in reqs.iter().enumerate() {
                for &c in &r.cmds {
                    cmd_requests[c].push(i);
                }
            }
        }
        // A FLUSH of its own waits for the data before it on its target (HORAE); Linux's,
        // a flush of the whole volume, for the stream's data before it on every target (the
        // file system flushes once the write completed).
        let mut flush_waits = vec![Vec::new(); n];
        if stack.plan.separate_flush {
            for order in &plan.order {
                for (pos, &c) in order.iter().enumerate() {
                    if !plan.cmds[c].flush_only {
                        continue;
                    }
                    let before: &[usize] = if stack.plan.flush_every_target {
                        &order[..pos]
                    } else {
                        let (lane, at) = lane_of[c];
                        &lanes[lane][..at]
                    };
                    flush_waits[c] = before
                        .iter()
                        .copied()
                        .filter(|&p| !plan.cmds[p].flush_only)
                        .collect();
                }
            }
        }
        Machine {
            plan,
            stack,
            cfg: cfg.clone(),
            in_order_ack: (stack.in_order_ack)(cfg),
            image: CrashImage {
                plp: cfg.plp,
                data: vec![Data::None; n],
                attrs: plan.cmds.iter().map(|c| c.attr).collect(),
                logs: vec![VecDeque::new(); targets],
                head_seq: vec![vec![0; streams]; targets],
                meta: plan.requests.iter().map(|r| vec![false; r.len()]).collect(),
            },
            phase: vec![Phase::Queued; n],
            next_send: vec![0; streams],
            wire: Vec::new(),
            ssd: vec![Vec::new(); targets],
            lanes,
            lane_of,
            must_follow,
            cmd_requests,
            flush_waits,
            pending,
            acked: plan.requests.iter().map(|r| vec![false; r.len()]).collect(),
            first_unacked: vec![0; streams],
            last_persist_acked: vec![0; streams],
            meta_next: vec![0; streams],
            rng: RngStream::new(seed, "fabric/schedule"),
            actions: Vec::new(),
            events: 0,
            window: usize::MAX,
        }
    }

    /// The same machine with at most `window` requests of a stream outstanding.
    pub fn with_window(mut self, window: usize) -> Self {
        self.window = window.max(1);
        self
    }

    /// The plan it runs.
    pub fn plan(&self) -> &'p Plan {
        self.plan
    }

    /// Requests of stream `s` acknowledged in order so far (its acknowledged prefix).
    pub fn acked_prefix(&self, s: usize) -> usize {
        self.first_unacked[s]
    }

    /// Requests of stream `s` the application may have outstanding now.
    pub fn window_end(&self, s: usize) -> usize {
        self.first_unacked[s].saturating_add(self.window)
    }

    /// The next request of stream `s` whose ordering metadata the control path sends.
    pub fn meta_next(&self, s: usize) -> usize {
        self.meta_next[s]
    }

    /// What a crash of target `t` alone loses for good unless recovery replays it: per
    /// command, whether it completed (the initiator holds no copy to send again) into `t`'s
    /// volatile write cache. Commands still without a completion are re-sent by the initiator
    /// once it reconnects (NVMe-oF error recovery requeues them), and the PMR and the media of
    /// `t` keep what they held.
    pub fn lost_with_target(&self, t: usize) -> Vec<bool> {
        (0..self.plan.cmds.len())
            .map(|c| {
                self.plan.cmds[c].target == t
                    && self.phase[c] >= Phase::Responded
                    && self.image.data[c] == Data::Cached
            })
            .collect()
    }

    /// Whether command `c` has left the initiator (the rest of its stream's order has not).
    pub fn sent(&self, c: usize) -> bool {
        self.phase[c] >= Phase::Sent
    }

    /// Whether every command has been answered.
    pub fn finished(&self) -> bool {
        self.phase.iter().all(|&p| p == Phase::Acked)
    }

    /// The events enabled now, destages excepted when `destage` is false (a timed run leaves
    /// the cache to FLUSHes).
    pub fn enabled(&mut self, destage: bool) -> &[Action] {
        self.collect_actions();
        if !destage {
            self.actions.retain(|a| !matches!(a, Action::Destage(_)));
        }
        &self.actions
    }

    /// Runs `action`, which must be enabled.
    pub fn run(&mut self, action: Action) {
        self.apply(action);
        self.events += 1;
    }

    /// Whether the first `k` commands of a lane have reached `phase`.
    fn lane_reached(&self, lane: usize, k: usize, phase: Phase) -> bool {
        self.lanes[lane][..k]
            .iter()
            .all(|&p| self.phase[p] >= phase)
    }

    fn in_order_ready(&self, c: usize, phase: Phase) -> bool {
        let (lane, _) = self.lane_of[c];
        self.lane_reached(lane, self.must_follow[c], phase)
    }

    fn send_ready(&self, c: usize) -> bool {
        let s = self.plan.cmds[c].stream;
        let reqs = &self.cmd_requests[c];
        if self.stack.control_path && !reqs.iter().all(|&r| self.image.meta[s][r]) {
            return false;
        }
        let first = reqs.iter().copied().min().unwrap_or(0);
        if first >= self.window_end(s) {
            return false;
        }
        if self.stack.one_in_flight && !self.acked[s][..first].iter().all(|&a| a) {
            return false;
        }
        self.flush_waits[c]
            .iter()
            .all(|&p| self.phase[p] >= Phase::Responded)
    }

    fn collect_actions(&mut self) {
        let mut acts = std::mem::take(&mut self.actions);
        acts.clear();
        let plan = self.plan;
        for s in 0..plan.order.len() {
            if self.stack.control_path
                && self.meta_next[s] < plan.requests[s].len().min(self.window_end(s))
            {
                acts.push(Action::Meta(s));
            }
            if let Some(&c) = plan.order[s].get(self.next_send[s])
                && self.send_ready(c)
            {
                acts.push(Action::Send(c));
            }
        }
        // Rio sends a stream on one NIC queue (RC: delivered in order, document 4.5 principle
        // 2); the others spread over queues, which deliver in any order.
        let mut seen_lane = vec![false; self.lanes.len()];
        for &c in &self.wire {
            if self.stack.attributes {
                let (lane, _) = self.lane_of[c];
                if std::mem::replace(&mut seen_lane[lane], true) {
                    continue;
                }
            }
            acts.push(Action::Arrive(c));
        }
        let pmr_slots = self.cfg.pmr_slots();
        for c in 0..plan.cmds.len() {
            let t = plan.cmds[c].target;
            match self.phase[c] {
                Phase::Arrived if self.stack.attributes => {
                    let room = self.image.logs[t].len() < pmr_slots;
                    if room && self.in_order_ready(c, Phase::Logged) {
                        acts.push(Action::Log(c));
                    }
                }
                Phase::Arrived => acts.push(Action::Submit(c)),
                Phase::Logged if self.in_order_ready(c, Phase::Submitted) => {
                    acts.push(Action::Submit(c));
                }
                Phase::Submitted => {
                    // With PLP a FLUSH of its own never reaches the drive (the target
                    // completes it), so it waits for nothing the drive holds.
                    let at_target = self.cfg.plp && plan.cmds[c].flush_only;
                    let flush = plan.cmds[c].attr.flush && !at_target;
                    if !flush || self.ssd_before_done(c) {
                        acts.push(Action::Done(c));
                    }
                }
                Phase::Done => acts.push(Action::Respond(c)),
                Phase::Responded => acts.push(Action::Ack(c)),
                _ => {}
            }
            if self.image.data[c] == Data::Cached {
                acts.push(Action::Destage(c));
            }
        }
        self.actions = acts;
    }

    /// A FLUSH completes after every command the SSD took before it.
    fn ssd_before_done(&self, c: usize) -> bool {
        let t = self.plan.cmds[c].target;
        self.ssd[t]
            .iter()
            .take_while(|&&p| p != c)
            .all(|&p| self.phase[p] >= Phase::Done)
    }

    /// Runs one event; `Ok(false)` once every command has completed.
    pub fn step(&mut self) -> Result<bool, String> {
        self.collect_actions();
        if self.actions.is_empty() {
            if self.finished() {
                return Ok(false);
            }
            return Err(format!(
                "stalled after {} events with commands outstanding (PMR log of {} slots full?)",
                self.events,
                self.cfg.pmr_slots()
            ));
        }
        let pick = self.rng.below(self.actions.len() as u64) as usize;
        self.run(self.actions[pick]);
        Ok(true)
    }

    fn apply(&mut self, action: Action) {
        let plan = self.plan;
        match action {
            Action::Meta(s) => {
                // One synchronous round trip: a SEND, the PMR write at the target, the reply.
                self.image.meta[s][self.meta_next[s]] = true;
                self.meta_next[s] += 1;
            }
            Action::Send(c) => {
                self.phase[c] = Phase::Sent;
                self.next_send[plan.cmds[c].stream] += 1;
                self.wire.push(c);
            }
            Action::Arrive(c) => {
                let i = self.wire.iter().position(|&w| w == c).expect("on the wire");
                self.wire.remove(i);
                self.phase[c] = Phase::Arrived;
            }
            Action::Log(c) => {
                self.phase[c] = Phase::Logged;
                self.image.logs[plan.cmds[c].target].push_back(c);
            }
            Action::Submit(c) => {
                self.phase[c] = Phase::Submitted;
                self.ssd[plan.cmds[c].target].push(c);
            }
            Action::Done(c) => {
                self.phase[c] = Phase::Done;
                let cmd = &plan.cmds[c];
                if !cmd.flush_only {
                    self.image.data[c] = if self.cfg.plp {
                        Data::Durable
                    } else {
                        Data::Cached
                    };
                }
                if cmd.attr.flush {
                    for &p in &self.ssd[cmd.target] {
                        if self.image.data[p] == Data::Cached {
                            self.image.data[p] = Data::Durable;
                        }
                    }
                }
            }
            Action::Destage(c) => self.image.data[c] = Data::Durable,
            Action::Respond(c) => {
                self.phase[c] = Phase::Responded;
                let cmd = &plan.cmds[c];
                if self.stack.attributes && (self.cfg.plp || cmd.attr.flush) {
                    self.image.attrs[c].persist = true;
                }
            }
            Action::Ack(c) => {
                self.phase[c] = Phase::Acked;
                let s = plan.cmds[c].stream;
                for &r in &self.cmd_requests[c] {
                    self.pending[s][r] -= 1;
                }
                self.acknowledge(s, c);
                if self.stack.attributes {
                    self.recycle();
                }
            }
        }
    }

    fn acknowledge(&mut self, s: usize, c: usize) {
        let reqs = &self.plan.requests[s];
        if self.in_order_ack {
            while self.first_unacked[s] < reqs.len() && self.pending[s][self.first_unacked[s]] == 0
            {
                let r = self.first_unacked[s];
                self.ack(s, r);
            }
        } else {
            for i in 0..self.cmd_requests[c].len() {
                let r = self.cmd_requests[c][i];
                if self.pending[s][r] == 0 && !self.acked[s][r] {
                    self.ack(s, r);
                }
            }
            while self.first_unacked[s] < reqs.len() && self.acked[s][self.first_unacked[s]] {
                self.first_unacked[s] += 1;
            }
        }
    }

    fn ack(&mut self, s: usize, r: usize) {
        self.acked[s][r] = true;
        let req = &self.plan.requests[s][r];
        if req.persist {
            self.last_persist_acked[s] = self.last_persist_acked[s].max(req.seq);
        }
        if self.in_order_ack {
            self.first_unacked[s] = r + 1;
        }
    }

    /// The highest sequence number whose whole group is acknowledged and known durable: the
    /// PMR head may move past its attributes. Rio 4.3.2 moves the head "once the completion
    /// response ... is returned to the application (indicating that the storage order is
    /// satisfied)": with PLP a completed write is durable, so acknowledged is enough; without
    /// PLP only an acknowledged FLUSH makes the writes before it durable (the same section sets
    /// `persist` only then), and recycling an acknowledged write still in a volatile cache
    /// forgets the one record that lets recovery discard a later write that reached the media
    /// first (`recycle_at_ack`, the checker's mutant, shows it).
    pub fn recyclable_seq(&self, s: usize) -> u64 {
        if !self.cfg.plp && !self.cfg.recycle_at_ack {
            return self.last_persist_acked[s];
        }
        let reqs = &self.plan.requests[s];
        match reqs.get(self.first_unacked[s]) {
            Some(r) => r.seq - 1,
            None => reqs.last().map_or(0, |r| r.seq),
        }
    }

    /// Moves each PMR log's head over attributes whose requests are acknowledged and durable
    /// (document 4.3.2: the head moves once the completion is returned to the application).
    fn recycle(&mut self) {
        for t in 0..self.image.logs.len() {
            while let Some(&c) = self.image.logs[t].front() {
                let s = self.plan.cmds[c].stream;
                let seq_end = self.plan.cmds[c].attr.seq_end;
                if seq_end > self.recyclable_seq(s) {
                    break;
                }
                self.image.logs[t].pop_front();
                let head = &mut self.image.head_seq[t][s];
                *head = (*head).max(seq_end);
            }
        }
    }
}
