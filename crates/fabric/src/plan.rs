//! The sequencer and the block layer's merging and splitting: from the application's ordered
//! writes to NVMe-oF commands, each carrying its ordering attribute (document 4.2, 4.5).

use crate::FabricConfig;
use crate::workload::Workload;

pub use qoslab_engine::order::{Layout, OrderAttr as Attr, PlanRules};
use qoslab_engine::order::{OrderedWrite, Sequencer};

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

/// Every command of a workload, in each stream's submission order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub cmds: Vec<Cmd>,
    /// Per stream, per request (same index as the workload's writes).
    pub requests: Vec<Vec<Request>>,
    /// Per stream, its command ids in submission order (the ORDER queue).
    pub order: Vec<Vec<usize>>,
}

/// Striping: stripe unit `mdts_bytes`, round robin over the targets.
pub fn target_of(lba: u64, cfg: &FabricConfig) -> usize {
    cfg.layout().target_of(lba)
}

impl Plan {
    /// Each stream planned whole by the sequencer the block layer's ordering plug-ins use
    /// (`qoslab_engine::order::Sequencer`), as if the stream were submitted in one plug.
    pub fn build(w: &Workload, cfg: &FabricConfig, rules: PlanRules) -> Plan {
        let mut plan = Plan {
            cmds: Vec::new(),
            requests: Vec::new(),
            order: Vec::new(),
        };
        let layout = cfg.layout();
        for (s, stream) in w.streams.iter().enumerate() {
            let writes: Vec<OrderedWrite> = stream
                .iter()
                .map(|w| OrderedWrite {
                    lba: w.lba,
                    blocks: w.blocks,
                    group_end: w.group_end,
                    persist: w.persist,
                })
                .collect();
            let planned = Sequencer::new(s as u32, cfg.targets).plan(&writes, &layout, rules);
            let first = plan.cmds.len();
            plan.cmds.extend(planned.cmds.into_iter().map(|c| Cmd {
                stream: s,
                target: c.target,
                attr: c.attr,
                writes: c.writes,
                flush_only: c.flush_only,
            }));
            plan.order.push((first..plan.cmds.len()).collect());
            plan.requests.push(
                planned
                    .requests
                    .into_iter()
                    .map(|r| Request {
                        seq: r.seq,
                        persist: r.persist,
                        cmds: r.cmds.into_iter().map(|c| c + first).collect(),
                    })
                    .collect(),
            );
        }
        plan
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
        flush_every_target: false,
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
