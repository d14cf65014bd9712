//! The sequencer and the block layer's merging and splitting: from the application's ordered
//! writes to NVMe-oF commands, each carrying its ordering attribute (document 4.2, 4.5).

use crate::FabricConfig;
use crate::workload::Workload;

/// The ordering attribute carried by a command and logged in the target's PMR (document
/// Figure 5 and Table 1). Sequence numbers start at 1; 0 means "none".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
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
    /// Set by the target once the data is durable (document 4.3.2).
    pub persist: bool,
}

/// One NVMe-oF command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    pub stream: usize,
    pub target: usize,
    pub attr: Attr,
    /// Indices (in the stream) of the application's writes whose data it carries.
    pub writes: Vec<usize>,
    /// A FLUSH with no data.
    pub flush_only: bool,
}

/// One application request and the commands whose completion it waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub seq: u64,
    pub persist: bool,
    pub cmds: Vec<usize>,
}

/// What the stack does to the requests before they reach the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanRules {
    pub merge: bool,
    /// A FLUSH after every request (Linux), not only after those that ask for one.
    pub flush_every_request: bool,
    /// FLUSHes are commands of their own, sent after the writes complete (Linux, HORAE),
    /// rather than a flag on the request's last command.
    pub separate_flush: bool,
}

/// Every command of a workload, in each stream's submission order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub cmds: Vec<Cmd>,
    /// Per stream, per request (same index as the workload's writes).
    pub requests: Vec<Vec<Request>>,
    /// Per stream, its command ids in submission order (the ORDER queue).
    pub order: Vec<Vec<usize>>,
}

/// A piece of a write: (lba, blocks, target).
type Piece = (u64, u32, usize);

fn pieces(lba: u64, blocks: u32, cfg: &FabricConfig) -> Vec<Piece> {
    let chunk = cfg.chunk_blocks();
    let mut out = Vec::new();
    let (mut at, end) = (lba, lba + u64::from(blocks));
    while at < end {
        let stop = ((at / chunk) + 1) * chunk;
        let stop = stop.min(end);
        out.push((at, (stop - at) as u32, target_of(at, cfg)));
        at = stop;
    }
    out
}

/// Striping: stripe unit `mdts_bytes`, round robin over the targets.
pub fn target_of(lba: u64, cfg: &FabricConfig) -> usize {
    ((lba / cfg.chunk_blocks()) % u64::from(cfg.targets)) as usize
}

impl Plan {
    pub fn build(w: &Workload, cfg: &FabricConfig, rules: PlanRules) -> Plan {
        let mut plan = Plan {
            cmds: Vec::new(),
            requests: Vec::new(),
            order: Vec::new(),
        };
        for (s, stream) in w.streams.iter().enumerate() {
            plan.build_stream(s, stream, cfg, rules);
        }
        plan
    }

    fn build_stream(
        &mut self,
        s: usize,
        stream: &[crate::workload::Write],
        cfg: &FabricConfig,
        rules: PlanRules,
    ) {
        let n = stream.len();
        // The sequencer: submission order is the storage order; a group shares one number.
        let mut seq = vec![0u64; n];
        let mut cur = 1;
        for (i, wr) in stream.iter().enumerate() {
            seq[i] = cur;
            if wr.group_end {
                cur += 1;
            }
        }
        let group_size = |g: u64| seq.iter().filter(|&&x| x == g).count() as u32;
        let mut requests: Vec<Request> = (0..n)
            .map(|i| Request {
                seq: seq[i],
                persist: stream[i].persist,
                cmds: Vec::new(),
            })
            .collect();
        let first = self.cmds.len();
        let mut dirty = vec![false; cfg.targets as usize];
        let chunk = cfg.chunk_blocks();
        let mut i = 0;
        while i < n {
            // A merged command spans whole groups of consecutive, unsplit writes in one stripe
            // unit: it is never split, and a split request is never merged (document 4.5).
            let mut end = i;
            let group_start = i == 0 || stream[i - 1].group_end;
            if rules.merge && cfg.merge_batch > 1 && group_start {
                let base = stream[i].lba / chunk;
                let mut j = i;
                let mut next_lba = stream[i].lba;
                while j < n && j - i < cfg.merge_batch as usize {
                    let wr = &stream[j];
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
                let blocks: u64 = stream[i..end].iter().map(|w| u64::from(w.blocks)).sum();
                let target = target_of(stream[i].lba, cfg);
                let id = self.cmds.len();
                self.cmds.push(Cmd {
                    stream: s,
                    target,
                    attr: Attr {
                        stream: s as u32,
                        seq_start: seq[i],
                        seq_end: seq[end - 1],
                        prev: 0,
                        num: (end - i) as u32,
                        merged: true,
                        split: false,
                        pieces: 1,
                        orig_lba: stream[i].lba,
                        lba: stream[i].lba,
                        blocks: blocks as u32,
                        flush: false,
                        persist: false,
                    },
                    writes: (i..end).collect(),
                    flush_only: false,
                });
                dirty[target] = true;
                for r in &mut requests[i..end] {
                    r.cmds.push(id);
                }
                let last = end - 1;
                if stream[last].persist || rules.flush_every_request {
                    self.add_flushes(s, seq[last], &[id], &mut dirty, &mut requests[last], rules);
                }
                i = end;
                continue;
            }
            let wr = &stream[i];
            let parts = pieces(wr.lba, wr.blocks, cfg);
            let num = if wr.group_end { group_size(seq[i]) } else { 0 };
            let mut own = Vec::new();
            for &(lba, blocks, target) in &parts {
                let id = self.cmds.len();
                self.cmds.push(Cmd {
                    stream: s,
                    target,
                    attr: Attr {
                        stream: s as u32,
                        seq_start: seq[i],
                        seq_end: seq[i],
                        prev: 0,
                        num,
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
                dirty[target] = true;
                own.push(id);
            }
            requests[i].cmds.extend(&own);
            if wr.persist || rules.flush_every_request {
                self.add_flushes(s, seq[i], &own, &mut dirty, &mut requests[i], rules);
            }
            i += 1;
        }
        self.order.push((first..self.cmds.len()).collect());
        self.link_prev(s, cfg);
        self.requests.push(requests);
    }

    /// A FLUSH to every target written since the stream's last one, so that an acknowledged
    /// FLUSH covers the whole stream prefix, on every server.
    fn add_flushes(
        &mut self,
        s: usize,
        seq: u64,
        own: &[usize],
        dirty: &mut [bool],
        request: &mut Request,
        rules: PlanRules,
    ) {
        for (t, d) in dirty.iter_mut().enumerate() {
            if !*d {
                continue;
            }
            *d = false;
            let carrier = own.iter().rev().find(|&&c| self.cmds[c].target == t);
            match carrier {
                Some(&c) if !rules.separate_flush => self.cmds[c].attr.flush = true,
                _ => {
                    let id = self.cmds.len();
                    self.cmds.push(Cmd {
                        stream: s,
                        target: t,
                        attr: Attr {
                            stream: s as u32,
                            seq_start: seq,
                            seq_end: seq,
                            prev: 0,
                            num: 0,
                            merged: false,
                            split: false,
                            pieces: 0,
                            orig_lba: 0,
                            lba: 0,
                            blocks: 0,
                            flush: true,
                            persist: false,
                        },
                        writes: Vec::new(),
                        flush_only: true,
                    });
                    request.cmds.push(id);
                }
            }
        }
    }

    /// Fills `prev`: the sequencer keeps each target's most recent sequence number.
    fn link_prev(&mut self, s: usize, cfg: &FabricConfig) {
        let mut last = vec![0u64; cfg.targets as usize];
        let mut before_last = vec![0u64; cfg.targets as usize];
        for &c in &self.order[s] {
            let cmd = &mut self.cmds[c];
            let t = cmd.target;
            if cmd.attr.seq_start > last[t] {
                before_last[t] = last[t];
                cmd.attr.prev = last[t];
                last[t] = cmd.attr.seq_end;
            } else {
                cmd.attr.prev = before_last[t];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Write;

    fn cfg() -> FabricConfig {
        FabricConfig::with_overrides(&[
            ("targets".into(), "2".into()),
            ("mdts_bytes".into(), "32768".into()),
        ])
        .unwrap()
    }

    fn w(lba: u64, blocks: u32, group_end: bool, persist: bool) -> Write {
        Write {
            lba,
            blocks,
            group_end,
            persist,
        }
    }

    const RIO: PlanRules = PlanRules {
        merge: true,
        flush_every_request: false,
        separate_flush: false,
    };

    #[test]
    fn consecutive_groups_merge_into_one_attribute_with_a_sequence_range() {
        // Document Figure 8(a): three consecutive requests become one with seq 1..3.
        let wl = Workload {
            streams: vec![vec![
                w(0, 1, true, false),
                w(1, 1, true, false),
                w(2, 2, true, true),
            ]],
        };
        let p = Plan::build(&wl, &cfg(), RIO);
        assert_eq!(p.cmds.len(), 1);
        let a = p.cmds[0].attr;
        assert_eq!(
            (a.seq_start, a.seq_end, a.num, a.merged, a.blocks),
            (1, 3, 3, true, 4)
        );
        assert!(
            a.flush,
            "the FLUSH of the last request rides on the merged command"
        );
    }

    #[test]
    fn a_request_across_a_stripe_unit_is_split_and_never_merged() {
        // 8 blocks per unit: blocks 6..10 cross into the second target (Figure 8(b)).
        let wl = Workload {
            streams: vec![vec![
                w(0, 6, true, false),
                w(6, 4, true, false),
                w(10, 1, true, true),
            ]],
        };
        let p = Plan::build(&wl, &cfg(), RIO);
        let split: Vec<_> = p.cmds.iter().filter(|c| c.attr.split).collect();
        assert_eq!(split.len(), 2);
        assert_eq!((split[0].target, split[1].target), (0, 1));
        assert!(
            split
                .iter()
                .all(|c| c.attr.pieces == 2 && c.attr.orig_lba == 6)
        );
        assert!(p.cmds.iter().all(|c| !(c.attr.merged && c.attr.split)));
        // The write before the split one could only merge with it: it stays alone.
        assert!(!p.cmds[0].attr.merged);
    }

    #[test]
    fn prev_links_each_target_to_its_previous_sequence_number() {
        let wl = Workload {
            streams: vec![vec![
                w(0, 1, true, false),   // seq 1, target 0
                w(8, 1, true, false),   // seq 2, target 1
                w(16, 1, false, false), // seq 3, target 0
                w(20, 1, true, false),  // seq 3, target 0 (group of two)
                w(24, 1, true, true),   // seq 4, target 1 (+ a FLUSH to target 0)
            ]],
        };
        let rules = PlanRules {
            merge: false,
            ..RIO
        };
        let p = Plan::build(&wl, &cfg(), rules);
        let got: Vec<_> = p
            .cmds
            .iter()
            .map(|c| {
                (
                    c.target,
                    c.attr.seq_start,
                    c.attr.prev,
                    c.attr.num,
                    c.flush_only,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 0, 1, false),
                (1, 2, 0, 1, false),
                (0, 3, 1, 0, false),
                (0, 3, 1, 2, false),
                (1, 4, 2, 1, false),
                (0, 4, 3, 0, true),
            ]
        );
        assert_eq!(p.requests[0][4].cmds, vec![4, 5]);
    }

    #[test]
    fn merging_starts_at_a_group_boundary() {
        // The group {0, 1} cannot merge (a hole between them); write 1 must not be merged with
        // the next group, or a merged attribute would hold half a group.
        let wl = Workload {
            streams: vec![vec![
                w(0, 1, false, false),
                w(2, 1, true, false),
                w(3, 1, true, false),
                w(4, 1, true, true),
            ]],
        };
        let p = Plan::build(&wl, &cfg(), RIO);
        let spans: Vec<_> = p
            .cmds
            .iter()
            .map(|c| (c.attr.seq_start, c.attr.seq_end, c.attr.merged))
            .collect();
        assert_eq!(spans, vec![(1, 1, false), (1, 1, false), (2, 3, true)]);
    }
}
