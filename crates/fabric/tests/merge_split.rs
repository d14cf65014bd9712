//! Merging and splitting never change what recovery keeps (document 4.5 principle 3, 4.8):
//! whatever the requests, their sizes and the stripe, a stream recovered from merged and split
//! attributes is cut at the same point as the same stream without merging, when the requests
//! of each merged command share its fate (a merged request is atomic).

use std::collections::VecDeque;

use proptest::prelude::*;
use qoslab_engine::RngStream;
use qoslab_fabric::FabricConfig;
use qoslab_fabric::machine::{CrashImage, Data};
use qoslab_fabric::plan::{Plan, PlanRules};
use qoslab_fabric::recovery::rio_first_lost;
use qoslab_fabric::stack;
use qoslab_fabric::workload::{Shape, Workload};

/// Every attribute logged, in submission order, with its `persist` bit from `persist`.
fn image(plan: &Plan, cfg: &FabricConfig, persist: impl Fn(usize) -> bool) -> CrashImage {
    let targets = cfg.targets as usize;
    let mut logs = vec![VecDeque::new(); targets];
    for order in &plan.order {
        for &c in order {
            logs[plan.cmds[c].target].push_back(c);
        }
    }
    CrashImage {
        plp: true,
        data: vec![Data::None; plan.cmds.len()],
        attrs: (0..plan.cmds.len())
            .map(|c| {
                let mut a = plan.cmds[c].attr;
                a.persist = persist(c);
                a
            })
            .collect(),
        logs,
        head_seq: vec![vec![0; plan.order.len()]; targets],
        meta: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn merged_and_split_streams_recover_to_the_same_prefix_as_unmerged(
        seed in any::<u64>(),
        streams in 1usize..4,
        writes in 1usize..14,
        max_blocks in 1u32..40,
        targets in 1u32..5,
        mdts_kib in prop::sample::select(vec![16u32, 32, 64, 128]),
        batch in 2u32..10,
        durable_percent in 50u64..100,
    ) {
        let shape = Shape { streams, writes_per_stream: writes, max_blocks, ..Shape::default() };
        let wl = Workload::generate(seed, &shape);
        let cfg = FabricConfig::with_overrides(&[
            ("targets".into(), targets.to_string()),
            ("mdts_bytes".into(), format!("{mdts_kib}KiB")),
            ("merge_batch".into(), batch.to_string()),
            ("plp".into(), "true".into()),
        ]).unwrap();
        let merged = Plan::build(&wl, &cfg, stack::RIO.plan);
        let unmerged = Plan::build(&wl, &cfg, PlanRules { merge: false, ..stack::RIO.plan });
        prop_assert!(merged.cmds.iter().all(|c| !(c.attr.merged && c.attr.split)));

        // Which commands of the merged plan finished: a seeded draw per command.
        let mut rng = RngStream::new(seed, "test/durable");
        // (FLUSHes all finish: the property is about the data commands merging and splitting
        // make.)
        let done: Vec<bool> = merged
            .cmds
            .iter()
            .map(|c| c.flush_only || rng.below(100) < durable_percent)
            .collect();
        // A request is durable iff every command it waits for finished: the parts of a split
        // one, the merged command holding it, its FLUSHes.
        let durable: Vec<Vec<bool>> = merged
            .requests
            .iter()
            .map(|reqs| reqs.iter().map(|r| r.cmds.iter().all(|&c| done[c])).collect())
            .collect();
        // The unmerged plan: the same requests with the same fate, one attribute each part.
        let mut owner = vec![(0, 0); unmerged.cmds.len()];
        for (s, reqs) in unmerged.requests.iter().enumerate() {
            for (r, req) in reqs.iter().enumerate() {
                for &c in &req.cmds {
                    owner[c] = (s, r);
                }
            }
        }
        let unmerged_done = |c: usize| durable[owner[c].0][owner[c].1];
        let got_merged = rio_first_lost(&merged, &image(&merged, &cfg, |c| done[c]));
        let got_unmerged = rio_first_lost(&unmerged, &image(&unmerged, &cfg, unmerged_done));
        // Closed form: the first group with a write that is not durable.
        for s in 0..streams {
            let reqs = &unmerged.requests[s];
            let expected = (0..reqs.len())
                .find(|&w| !durable[s][w])
                .map_or(reqs.last().unwrap().seq + 1, |w| reqs[w].seq);
            prop_assert_eq!(got_unmerged[s], expected, "stream {}", s);
            prop_assert_eq!(got_merged[s], expected, "stream {}", s);
        }
    }
}
