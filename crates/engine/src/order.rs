//! Ordered writes: the vocabulary the block layer's ordering plug-ins, the NVMe-oF target stage
//! and the crash checker share (Rio, EuroSys'23: the ordering attribute of Figure 5 and Table 1;
//! HORAE, OSDI'20: the ordering metadata of its control path).
//!
//! An ordered write belongs to a *stream* (the submitting job): within a stream, writes are
//! grouped (the writes of a group may be reordered among themselves, groups may not), and the
//! storage order is the submission order. A write is ordered when it carries
//! [`ReqFlags::ORDERED`](crate::ReqFlags); [`ReqFlags::GROUP_MORE`](crate::ReqFlags) says the
//! next ordered write of its stream belongs to the same group.

use crate::request::ReqId;
use crate::time::Ns;

/// The ordering attribute carried by a command and logged in the target's PMR (Rio Figure 5
/// and Table 1). Sequence numbers start at 1; 0 means "none".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderAttr {
    pub stream: u32,
    /// The group's sequence number; a merged command spans `seq_start..=seq_end`.
    pub seq_start: u64,
    pub seq_end: u64,
    /// `seq_end` of this stream's previous attribute on the same target (per-server order).
    pub prev: u64,
    /// On the final request of a group: the group's number of requests; on a merged command:
    /// the number of requests compacted into it; 0 otherwise.
    pub num: u32,
    pub merged: bool,
    /// Part of a request divided at the transfer size; `pieces` parts share `orig_lba`.
    pub split: bool,
    pub pieces: u32,
    /// First block of the application's request (identifies the parts of a split request).
    pub orig_lba: u64,
    pub lba: u64,
    pub blocks: u32,
    /// The command carries a FLUSH (or is one).
    pub flush: bool,
    /// Set by the target once the data is durable (Rio 4.3.2).
    pub persist: bool,
}

/// An ordering message from the initiator's block layer to one target server, carried down
/// the path as a [`Command::Ordering`](crate::Command): the stage that keeps the target's
/// ordering state (its PMR) answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderMsg {
    /// The target server it is for (the fan-out stage routes by it).
    pub target: u16,
    pub op: OrderOp,
    /// Filled in by whoever answers: when the answer is back at the initiator (`OrderOp::Meta`).
    pub done_ns: Ns,
}

/// What an ordering message asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderOp {
    /// Rio: command `id`, dispatched next, carries `attr` in the reserved fields of its NVMe-oF
    /// command (Rio Table 1); the target logs it to its PMR before it submits the data.
    Attach { id: ReqId, attr: OrderAttr },
    /// HORAE's control path: persist the ordering metadata of `stream`'s request number
    /// `request` (its sequence number `seq`; `bytes` of metadata) to the target's PMR and
    /// answer; the data follows only after the answer.
    Meta {
        stream: u32,
        request: u64,
        seq: u64,
        bytes: u64,
    },
    /// The application has seen `stream`'s requests up to sequence number `seq` complete, and
    /// they are durable: the target may move its PMR log's head past their attributes (Rio
    /// 4.3.2; the initiator's acknowledgement reaches the target with its next message).
    Recycle { stream: u32, seq: u64 },
}

/// One ordered write request as the application submits it (a block range of its stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderedWrite {
    /// First logical block.
    pub lba: u64,
    pub blocks: u32,
    /// Last request of its group: the next request starts a new sequence number.
    pub group_end: bool,
    /// Carries a FLUSH: once acknowledged, it and everything before it in the stream is
    /// durable (`rio_submit` with a FLUSH then `rio_wait`, Rio 4.6).
    pub persist: bool,
}

/// What a stack does to ordered requests before they reach the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanRules {
    /// Consecutive whole groups in one stripe unit become one command (Rio 4.5).
    pub merge: bool,
    /// A FLUSH after every request (Linux), not only after those that ask for one.
    pub flush_every_request: bool,
    /// FLUSHes are commands of their own, sent after the writes complete (Linux, HORAE),
    /// rather than a flag on the request's last command.
    pub separate_flush: bool,
    /// A FLUSH goes to every target, written since the stream's last FLUSH or not: Linux's,
    /// whose FLUSH reaches the striped volume's devices through dm-stripe, which sends a flush
    /// to each of them (its `num_flush_bios` is the number of stripes). Otherwise only to the
    /// targets the stream wrote since its last FLUSH (Rio, HORAE, orderless).
    pub flush_every_target: bool,
}

/// Where blocks go: `targets` target servers, stripe units of `chunk_blocks` dealt round robin
/// (the transfer size too, Rio 4.5), and the most requests one merged command may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub targets: u32,
    pub chunk_blocks: u64,
    pub merge_batch: u32,
}

impl Layout {
    /// The target holding block `lba`.
    #[inline]
    pub fn target_of(&self, lba: u64) -> usize {
        ((lba / self.chunk_blocks) % u64::from(self.targets)) as usize
    }
}

/// One command the sequencer made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedCmd {
    pub target: usize,
    pub attr: OrderAttr,
    /// Indices (in the planned batch) of the writes whose data it carries.
    pub writes: Vec<usize>,
    /// A FLUSH with no data.
    pub flush_only: bool,
}

/// One request of a planned batch and the commands (indices in the batch's `cmds`) whose
/// completion it waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedReq {
    pub seq: u64,
    pub persist: bool,
    pub cmds: Vec<usize>,
}

/// A batch of one stream's requests as commands, in submission order (the ORDER queue).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planned {
    pub cmds: Vec<PlannedCmd>,
    pub requests: Vec<PlannedReq>,
}

/// Rio's sequencer for one stream, with the block layer's merging and splitting (Rio 4.2, 4.5):
/// submission order is the storage order, a group shares one sequence number, the final
/// request of a group carries the group's size, and each command's `prev` names the stream's
/// previous sequence number on the same target. It plans one batch at a time (what one plug
/// holds); the numbering, the per-target links and which targets a FLUSH must reach carry
/// over from batch to batch.
#[derive(Clone, Debug)]
pub struct Sequencer {
    stream: u32,
    /// The sequence number of the current (open) group, and its requests so far.
    seq: u64,
    group_len: u32,
    /// Targets written since the stream's last FLUSH reached them.
    dirty: Vec<bool>,
    /// Per target, the last sequence number sent there and the one before it.
    last: Vec<u64>,
    before_last: Vec<u64>,
}

impl Sequencer {
    pub fn new(stream: u32, targets: u32) -> Self {
        let n = targets.max(1) as usize;
        Sequencer {
            stream,
            seq: 1,
            group_len: 0,
            dirty: vec![false; n],
            last: vec![0; n],
            before_last: vec![0; n],
        }
    }

    /// The sequence number the next request gets.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Plans a FLUSH of the stream on its own (fio's `fsync`, after its writes): one request of
    /// the last group's sequence number, a FLUSH command to every target written since the
    /// last one (none when nothing is), or to every target with `every_target`
    /// ([`PlanRules::flush_every_target`]).
    pub fn plan_flush(&mut self, every_target: bool) -> Planned {
        let seq = if self.group_len == 0 {
            self.seq - 1
        } else {
            self.seq
        };
        let mut out = Planned {
            cmds: Vec::new(),
            requests: vec![PlannedReq {
                seq,
                persist: true,
                cmds: Vec::new(),
            }],
        };
        let rules = PlanRules {
            merge: false,
            flush_every_request: false,
            separate_flush: true,
            flush_every_target: every_target,
        };
        self.add_flushes(&mut out, 0, seq, &[], rules);
        self.link_prev(&mut out);
        out
    }

    /// Plans `writes`, the next requests of the stream.
    pub fn plan(&mut self, writes: &[OrderedWrite], layout: &Layout, rules: PlanRules) -> Planned {
        let n = writes.len();
        let mut seq = vec![0u64; n];
        let mut num = vec![0u32; n];
        for (i, wr) in writes.iter().enumerate() {
            seq[i] = self.seq;
            self.group_len += 1;
            if wr.group_end {
                num[i] = self.group_len;
                self.seq += 1;
                self.group_len = 0;
            }
        }
        let mut out = Planned {
            cmds: Vec::new(),
            requests: (0..n)
                .map(|i| PlannedReq {
                    seq: seq[i],
                    persist: writes[i].persist,
                    cmds: Vec::new(),
                })
                .collect(),
        };
        let chunk = layout.chunk_blocks;
        let s = self.stream;
        let mut i = 0;
        while i < n {
            // A merged command spans whole groups of consecutive, unsplit writes in one stripe
            // unit: it is never split, and a split request is never merged (Rio 4.5).
            let mut end = i;
            let group_start = i == 0 || writes[i - 1].group_end;
            if rules.merge && layout.merge_batch > 1 && group_start {
                let base = writes[i].lba / chunk;
                let mut j = i;
                let mut next_lba = writes[i].lba;
                while j < n && j - i < layout.merge_batch as usize {
                    let wr = &writes[j];
                    let fits = wr.lba == next_lba
                        && (wr.lba + u64::from(wr.blocks) - 1) / chunk == base
                        && (!rules.flush_every_request || j == i);
                    if !fits {
                        break;
                    }
                    next_lba = wr.lba + u64::from(wr.blocks);
                    j += 1;
                    if wr.group_end {
                        end = j;
                        if wr.persist {
                            break;
                        }
                    }
                }
            }
            if end > i + 1 {
                let blocks: u64 = writes[i..end].iter().map(|w| u64::from(w.blocks)).sum();
                let target = layout.target_of(writes[i].lba);
                let id = out.cmds.len();
                out.cmds.push(PlannedCmd {
                    target,
                    attr: OrderAttr {
                        stream: s,
                        seq_start: seq[i],
                        seq_end: seq[end - 1],
                        prev: 0,
                        num: (end - i) as u32,
                        merged: true,
                        split: false,
                        pieces: 1,
                        orig_lba: writes[i].lba,
                        lba: writes[i].lba,
                        blocks: blocks as u32,
                        flush: false,
                        persist: false,
                    },
                    writes: (i..end).collect(),
                    flush_only: false,
                });
                self.dirty[target] = true;
                for r in &mut out.requests[i..end] {
                    r.cmds.push(id);
                }
                let last = end - 1;
                if writes[last].persist || rules.flush_every_request {
                    self.add_flushes(&mut out, last, seq[last], &[id], rules);
                }
                i = end;
                continue;
            }
            let wr = &writes[i];
            let parts = pieces(wr.lba, wr.blocks, layout);
            let mut own = Vec::new();
            for &(lba, blocks, target) in &parts {
                let id = out.cmds.len();
                out.cmds.push(PlannedCmd {
                    target,
                    attr: OrderAttr {
                        stream: s,
                        seq_start: seq[i],
                        seq_end: seq[i],
                        prev: 0,
                        num: num[i],
                        merged: false,
                        split: parts.len() > 1,
                        pieces: parts.len() as u32,
                        orig_lba: wr.lba,
                        lba,
                        blocks,
                        flush: false,
                        persist: false,
                    },
                    writes: vec![i],
                    flush_only: false,
                });
                self.dirty[target] = true;
                own.push(id);
            }
            out.requests[i].cmds.extend(&own);
            if wr.persist || rules.flush_every_request {
                self.add_flushes(&mut out, i, seq[i], &own, rules);
            }
            i += 1;
        }
        self.link_prev(&mut out);
        out
    }

    /// A FLUSH to every target written since the stream's last one (to every target with
    /// `rules.flush_every_target`), so that an acknowledged FLUSH covers the whole stream
    /// prefix, on every server.
    fn add_flushes(
        &mut self,
        out: &mut Planned,
        request: usize,
        seq: u64,
        own: &[usize],
        rules: PlanRules,
    ) {
        for t in 0..self.dirty.len() {
            if !std::mem::take(&mut self.dirty[t]) && !rules.flush_every_target {
                continue;
            }
            let carrier = own.iter().rev().find(|&&c| out.cmds[c].target == t);
            match carrier {
                Some(&c) if !rules.separate_flush => out.cmds[c].attr.flush = true,
                _ => {
                    let id = out.cmds.len();
                    out.cmds.push(PlannedCmd {
                        target: t,
                        attr: OrderAttr {
                            stream: self.stream,
                            seq_start: seq,
                            seq_end: seq,
                            flush: true,
                            ..OrderAttr::default()
                        },
                        writes: Vec::new(),
                        flush_only: true,
                    });
                    out.requests[request].cmds.push(id);
                }
            }
        }
    }

    /// Fills `prev`: the sequencer keeps each target's most recent sequence number.
    fn link_prev(&mut self, out: &mut Planned) {
        for cmd in &mut out.cmds {
            let t = cmd.target;
            if cmd.attr.seq_start > self.last[t] {
                self.before_last[t] = self.last[t];
                cmd.attr.prev = self.last[t];
                self.last[t] = cmd.attr.seq_end;
            } else {
                cmd.attr.prev = self.before_last[t];
            }
        }
    }
}

/// The pieces of a write cut at stripe units: (lba, blocks, target).
fn pieces(lba: u64, blocks: u32, layout: &Layout) -> Vec<(u64, u32, usize)> {
    let chunk = layout.chunk_blocks;
    let mut out = Vec::new();
    let (mut at, end) = (lba, lba + u64::from(blocks));
    while at < end {
        let stop = (((at / chunk) + 1) * chunk).min(end);
        out.push((at, (stop - at) as u32, layout.target_of(at)));
        at = stop;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(lba: u64, blocks: u32, group_end: bool, persist: bool) -> OrderedWrite {
        OrderedWrite {
            lba,
            blocks,
            group_end,
            persist,
        }
    }

    const LAYOUT: Layout = Layout {
        targets: 2,
        chunk_blocks: 8,
        merge_batch: 8,
    };
    const NO_MERGE: PlanRules = PlanRules {
        merge: false,
        flush_every_request: false,
        separate_flush: false,
        flush_every_target: false,
    };

    #[test]
    fn batches_continue_the_numbering_the_links_and_the_flush_targets_of_the_stream() {
        // Without merging, a stream planned in two plugs gets the attributes it gets in one.
        let writes = [
            w(0, 1, true, false),  // seq 1, target 0
            w(8, 1, false, false), // seq 2, target 1 (a group of two)
            w(9, 1, true, false),  // seq 2, target 1
            w(16, 1, true, false), // seq 3, target 0
            w(24, 2, true, true),  // seq 4, target 1, and a FLUSH to target 0
        ];
        let whole = Sequencer::new(0, 2).plan(&writes, &LAYOUT, NO_MERGE);
        let mut s = Sequencer::new(0, 2);
        let mut a = s.plan(&writes[..2], &LAYOUT, NO_MERGE);
        let b = s.plan(&writes[2..], &LAYOUT, NO_MERGE);
        let attrs = |p: &Planned| {
            p.cmds
                .iter()
                .map(|c| (c.target, c.attr))
                .collect::<Vec<_>>()
        };
        let mut both = attrs(&a);
        both.extend(attrs(&b));
        assert_eq!(both, attrs(&whole));
        assert_eq!(
            whole.cmds[2].attr.num, 2,
            "the group's final request gives its size"
        );
        assert_eq!(
            whole.cmds[3].attr.prev, 1,
            "seq 3 follows seq 1 on target 0"
        );
        a.requests.extend(b.requests);
        assert_eq!(
            a.requests.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [1, 2, 2, 3, 4]
        );
        // The FLUSH rides on the request's own command on target 1 and is a command of its own
        // on target 0.
        let last = &whole.cmds[whole.cmds.len() - 2..];
        assert!(last[0].attr.flush && !last[0].flush_only && last[0].target == 1);
        assert!(last[1].flush_only && last[1].target == 0);
    }

    #[test]
    fn linux_flushes_every_target_after_each_write_and_the_others_only_those_written() {
        // Linux (a FLUSH after every request, every target: dm-stripe's flush to each device)
        // against HORAE's rule (a FLUSH where asked, to the targets written since the last).
        let linux = PlanRules {
            merge: false,
            flush_every_request: true,
            separate_flush: true,
            flush_every_target: true,
        };
        let horae = PlanRules {
            flush_every_request: false,
            flush_every_target: false,
            ..linux
        };
        // Three writes, all on target 0; the last asks for a FLUSH.
        let writes = [
            w(0, 1, true, false),
            w(1, 1, true, false),
            w(2, 1, true, true),
        ];
        let flushes = |p: &Planned, r: usize| {
            p.requests[r]
                .cmds
                .iter()
                .filter(|&&c| p.cmds[c].flush_only)
                .map(|&c| p.cmds[c].target)
                .collect::<Vec<_>>()
        };
        let p = Sequencer::new(0, 2).plan(&writes, &LAYOUT, linux);
        for r in 0..3 {
            assert_eq!(flushes(&p, r), [0, 1], "Linux: request {r}'s FLUSHes");
        }
        let p = Sequencer::new(0, 2).plan(&writes, &LAYOUT, horae);
        assert_eq!(flushes(&p, 0), [] as [usize; 0]);
        assert_eq!(flushes(&p, 2), [0], "HORAE: only the target written");
        // A FLUSH of its own (fio's fsync) after nothing was written.
        assert_eq!(Sequencer::new(0, 2).plan_flush(true).cmds.len(), 2);
        assert_eq!(Sequencer::new(0, 2).plan_flush(false).cmds.len(), 0);
    }
}

/// One ordered stream as its block layer saw it at a power cut: its requests and commands
/// from the first one not yet known durable on (every request before is acknowledged and
/// durable), for the crash checker's recovery and prefix test.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRecord {
    pub stream: u32,
    /// The number of the first of `requests` in the stream (requests before it are durable).
    pub first: u64,
    /// The ordering plug-in's name (`none`, `flush`, `horae`, `rio`).
    pub ordering: &'static str,
    pub requests: Vec<ReqRecord>,
    pub cmds: Vec<CmdRecord>,
}

/// An application request of a [`StreamRecord`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReqRecord {
    pub seq: u64,
    pub persist: bool,
    pub acked: bool,
    /// Its commands (indices in the record's `cmds`).
    pub cmds: Vec<usize>,
}

/// A command of a [`StreamRecord`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdRecord {
    pub target: u16,
    pub attr: OrderAttr,
    /// The requests whose data it carries (indices in the record's `requests`).
    pub writes: Vec<usize>,
    pub flush_only: bool,
    /// It left the initiator.
    pub sent: bool,
    /// The media finished it.
    pub media_done: bool,
    /// Where its data went (bytes), to recognise it among the media's lost writes.
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// A target server's PMR at a power cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PmrRecord {
    pub target: u16,
    /// The live attributes of its circular log, head first (with their `persist` bits).
    pub log: Vec<OrderAttr>,
    /// Per stream, the last sequence number the head moved past.
    pub head_seq: Vec<(u32, u64)>,
    /// HORAE's persisted ordering metadata: (stream, request number in the stream).
    pub meta: Vec<(u32, u64)>,
    /// The PMR's geometry, for recovery time: bytes of one attribute, of one metadata entry.
    pub attr_bytes: u64,
    pub meta_bytes: u64,
}

/// What the stages of a path say of ordered writes at a power cut
/// (`Stage::collect_order_state`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderState {
    /// The time of the cut: what a stage finishes later is not yet done.
    pub at_ns: Ns,
    pub streams: Vec<StreamRecord>,
    pub pmrs: Vec<PmrRecord>,
    /// Every step of every ordered command so far, when the stages were asked to trace them.
    pub trace: Vec<TraceEvent>,
}

/// A step of an ordered command, in the crash checker's machine's terms (its `Action`s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TraceKind {
    /// A target persisted HORAE's metadata of the stream's next request.
    Meta,
    /// The initiator sent the command.
    Send,
    /// The target received it.
    Arrive,
    /// The target logged its attribute to the PMR.
    Log,
    /// The target submitted it to the drive.
    Submit,
    /// The drive completed it and the target responded.
    Respond,
    /// The initiator received the completion.
    Ack,
}

/// One traced step: `id` is the command's request while it is out; the initiator's steps also
/// name its stream and its number in the stream (the target's are matched to them by `id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    pub at_ns: Ns,
    pub kind: TraceKind,
    pub id: ReqId,
    pub stream: u32,
    pub no: u64,
}
