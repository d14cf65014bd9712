//! The crash checker against the four stacks (what the document claims, and what it must catch).

use qoslab_fabric::FabricConfig;
use qoslab_fabric::check::{CheckSpec, Crash, Summary, crash_check, replay};
use qoslab_fabric::stack::{self, StackOps};
use qoslab_fabric::workload::Shape;

fn check(stack: &'static StackOps, sets: &[(&str, &str)], workloads: usize) -> Summary {
    check_crash(stack, sets, workloads, Crash::Power)
}

fn check_crash(
    stack: &'static StackOps,
    sets: &[(&str, &str)],
    workloads: usize,
    crash: Crash,
) -> Summary {
    let sets: Vec<(String, String)> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let spec = CheckSpec {
        stack,
        cfg: FabricConfig::with_overrides(&sets).unwrap(),
        shape: Shape {
            streams: 2,
            writes_per_stream: 5,
            max_blocks: 48,
            ..Shape::default()
        },
        workloads,
        seed: 1,
        crash,
        target: None,
        exhaustive_limit: 100_000,
        samples: 0,
        reproducers: 2,
    };
    crash_check(&spec).unwrap()
}

/// No crash point broke the order or lost an acknowledged write.
fn assert_intact(s: &Summary) {
    assert_eq!(
        (s.prefix_violations, s.acked_lost),
        (0, 0),
        "{:?}",
        s.reproducers
    );
}

const FLASH: &[(&str, &str)] = &[("plp", "false"), ("mdts_bytes", "65536")];
const OPTANE: &[(&str, &str)] = &[("plp", "true"), ("mdts_bytes", "65536")];

#[test]
fn rio_keeps_a_prefix_at_every_crash_point_with_and_without_plp() {
    for cfg in [FLASH, OPTANE] {
        let s = check(&stack::RIO, cfg, 40);
        assert_eq!(s.exhaustive_workloads, 40);
        assert!(s.crash_points > 2_000, "{}", s.crash_points);
        assert_intact(&s);
    }
}

#[test]
fn linux_flush_ordering_keeps_a_prefix_at_every_crash_point() {
    for cfg in [FLASH, OPTANE] {
        assert_intact(&check(&stack::LINUX, cfg, 40));
    }
}

#[test]
fn horae_keeps_a_prefix_at_every_crash_point() {
    for cfg in [FLASH, OPTANE] {
        assert_intact(&check(&stack::HORAE, cfg, 40));
    }
}

#[test]
fn orderless_breaks_the_order_and_the_reproducer_replays() {
    let s = check(&stack::ORDERLESS, FLASH, 40);
    assert!(s.prefix_violations > 0);
    let r = &s.reproducers[0];
    assert_eq!(replay(r).unwrap(), r.violations);
    // Minimal: the shrinker leaves no more than a handful of writes.
    assert!(r.workload.writes() <= 4, "{r:?}");
}

#[test]
fn rio_without_in_order_completion_loses_acknowledged_writes() {
    for cfg in [FLASH, OPTANE] {
        let mut sets = cfg.to_vec();
        sets.push(("in_order_completion", "false"));
        // 40 workloads no longer catch it on flash since the initiator's acknowledgement is
        // a step of its own (a response may wait); 400 find 196 (flash) and 458 (Optane).
        let s = check(&stack::RIO, &sets, 400);
        assert!(s.acked_lost > 0, "{s:?}");
        let r = &s.reproducers[0];
        assert_eq!(replay(r).unwrap(), r.violations);
        assert!(r.violations.iter().any(|v| v.kind == "acked_lost"));
    }
}

#[test]
fn the_pmr_head_moves_at_acknowledgement_only_with_plp() {
    // Rio 4.3.2 recycles an attribute "once the completion response ... is returned to the
    // application (indicating that the storage order is satisfied)". With PLP an acknowledged
    // write is durable and that rule keeps a prefix; without PLP an acknowledged write may
    // still be in the volatile cache, and once its attribute is gone a later write that
    // reached the media first cannot be discarded: the prefix breaks. So without PLP the head
    // waits for an acknowledged FLUSH (the default).
    let mut flash = FLASH.to_vec();
    flash.push(("recycle_at_ack", "true"));
    let s = check(&stack::RIO, &flash, 40);
    assert!(s.prefix_violations > 0, "{s:?}");
    let r = &s.reproducers[0];
    assert_eq!(replay(r).unwrap(), r.violations);
    assert!(r.violations.iter().any(|v| v.kind == "prefix"), "{r:?}");
    assert!(r.config.contains(&("recycle_at_ack".into(), "true".into())));
    let mut optane = OPTANE.to_vec();
    optane.push(("recycle_at_ack", "true"));
    assert_intact(&check(&stack::RIO, &optane, 40));
}

#[test]
fn the_summary_does_not_depend_on_the_thread_count() {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for crash in [Crash::Power, Crash::Target] {
        let a = one.install(|| check_crash(&stack::ORDERLESS, FLASH, 12, crash));
        let b = check_crash(&stack::ORDERLESS, FLASH, 12, crash);
        assert!(!a.reproducers.is_empty());
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
    }
}

fn no_recovery(
    plan: &qoslab_fabric::plan::Plan,
    _: &qoslab_fabric::machine::CrashImage,
) -> Vec<bool> {
    vec![false; plan.cmds.len()]
}

#[test]
fn rio_needs_its_recovery_the_same_runs_without_it_break_the_order() {
    let unrecovered: &'static StackOps = Box::leak(Box::new(StackOps {
        recover: no_recovery,
        ..stack::RIO
    }));
    let s = check(unrecovered, FLASH, 40);
    assert!(s.prefix_violations > 0, "{s:?}");
}

#[test]
fn larger_workloads_are_sampled_and_the_count_is_stated() {
    let spec = CheckSpec {
        stack: &stack::RIO,
        cfg: FabricConfig::with_overrides(&[("targets".into(), "3".into())]).unwrap(),
        shape: Shape {
            streams: 4,
            writes_per_stream: 30,
            ..Shape::default()
        },
        workloads: 4,
        seed: 9,
        crash: Crash::Power,
        target: None,
        exhaustive_limit: 200,
        samples: 50,
        reproducers: 1,
    };
    let s = crash_check(&spec).unwrap();
    assert_eq!((s.exhaustive_workloads, s.sampled_workloads), (0, 4));
    assert_eq!(s.crash_points, 200);
    assert_intact(&s);
}

// The crash of one target server (document 4.4.1, "Target recovery"): each target in turn, at
// every event boundary.

#[test]
fn rio_linux_and_horae_keep_a_prefix_when_one_target_crashes() {
    for stack in [&stack::RIO, &stack::LINUX, &stack::HORAE] {
        for cfg in [FLASH, OPTANE] {
            let s = check_crash(stack, cfg, 30, Crash::Target);
            assert_eq!((s.crash, s.exhaustive_workloads), (Crash::Target, 30));
            assert_eq!(s.crashed_targets, vec![0, 1]);
            // Two targets tried at every event boundary.
            assert_eq!(s.crash_points, 2 * (s.events + 30), "{}", stack.name);
            // Without PLP the crashes do destroy completed writes in the cache (recovery has
            // work to do); with PLP a completed write is on the media.
            let losses = s.cache_losses.unwrap();
            assert_eq!(
                losses > 500,
                cfg == FLASH,
                "{} {cfg:?}: {losses}",
                stack.name
            );
            assert_eq!(
                (s.prefix_violations, s.acked_lost, s.reproducers.len()),
                (0, 0, 0),
                "{} {cfg:?}: {:?}",
                stack.name,
                s.reproducers
            );
        }
    }
}

#[test]
fn orderless_loses_a_completed_write_in_the_crashed_cache_and_breaks_the_order() {
    let s = check_crash(&stack::ORDERLESS, FLASH, 30, Crash::Target);
    assert!(s.prefix_violations > 0, "{s:?}");
    let r = &s.reproducers[0];
    assert_eq!(r.crash, Crash::Target);
    assert!(r.crashed_target.is_some());
    assert_eq!(replay(r).unwrap(), r.violations);
    // With power-loss protection a completed write is on the media: nothing to lose.
    let plp = check_crash(&stack::ORDERLESS, OPTANE, 30, Crash::Target);
    assert_eq!((plp.prefix_violations, plp.acked_lost), (0, 0));
}

fn no_replay(
    plan: &qoslab_fabric::plan::Plan,
    _: &qoslab_fabric::machine::CrashImage,
    _: usize,
) -> Vec<bool> {
    vec![false; plan.cmds.len()]
}

#[test]
fn rio_needs_its_replay_on_the_failed_target() {
    let unreplayed: &'static StackOps = Box::leak(Box::new(StackOps {
        replay_on_target: no_replay,
        ..stack::RIO
    }));
    let s = check_crash(unreplayed, FLASH, 30, Crash::Target);
    assert!(s.prefix_violations > 0, "{s:?}");
}

/// Runs command `c`'s events, in order, until the target has responded.
fn complete(m: &mut qoslab_fabric::machine::Machine<'_>, c: usize) {
    use qoslab_fabric::machine::Action::*;
    loop {
        let next = m.enabled(false).iter().copied().find(|a| match *a {
            Send(x) | Arrive(x) | Log(x) | Submit(x) | Done(x) | Respond(x) => x == c,
            _ => false,
        });
        let Some(a) = next else { break };
        m.run(a);
        if matches!(a, Respond(_)) {
            break;
        }
    }
}

#[test]
fn rio_replays_the_write_the_crashed_target_held_in_its_cache_as_the_document_example() {
    // Document 4.4.1 "Target recovery": target 1 fails while target 0 is alive; the write it
    // completed into its volatile cache is not persistent in its PMR log, so the initiator
    // re-sends it. Writes 0 and 2 go to target 0, write 1 to target 1 (32-block stripe unit);
    // write 2 carries a FLUSH. Writes 0 and 1 complete into the caches; write 2 is sent.
    use qoslab_fabric::check::target_violations;
    use qoslab_fabric::machine::Machine;
    use qoslab_fabric::plan::Plan;
    use qoslab_fabric::recovery::rio_target_replay;
    use qoslab_fabric::workload::{Workload, Write};
    let w = |lba, persist| Write {
        lba,
        blocks: 1,
        group_end: true,
        persist,
    };
    let wl = Workload {
        streams: vec![vec![w(0, false), w(32, false), w(64, true)]],
    };
    let cfg = FabricConfig::with_overrides(&[]).unwrap();
    for (stack, broken) in [(&stack::RIO, false), (&stack::ORDERLESS, true)] {
        let plan = Plan::build(&wl, &cfg, stack.plan);
        let targets: Vec<usize> = plan.cmds.iter().map(|c| c.target).collect();
        // Write 2's FLUSH reaches target 1 as a FLUSH of its own (command 3).
        assert_eq!(targets, vec![0, 1, 0, 1]);
        let mut m = Machine::new(&plan, stack, &cfg, 1);
        complete(&mut m, 0);
        complete(&mut m, 1);
        m.run(qoslab_fabric::machine::Action::Send(2));
        assert_eq!(m.lost_with_target(1), vec![false, true, false, false]);
        assert_eq!(m.lost_with_target(0), vec![true, false, false, false]);
        if stack == &stack::RIO {
            assert_eq!(
                rio_target_replay(&plan, &m.image, 1),
                vec![false, true, false, false]
            );
        }
        let v = target_violations(&plan, stack, &m, 1);
        assert_eq!(!v.is_empty(), broken, "{}: {v:?}", stack.name);
        if broken {
            assert_eq!(
                v[0].detail,
                "write 2 (seq 3) survived but write 1 (seq 2) did not"
            );
        }
    }
}

#[test]
fn every_known_mutant_is_caught_at_the_checkers_defaults() {
    let flash = FabricConfig::with_overrides(&[]).unwrap();
    let no_in_order =
        FabricConfig::with_overrides(&[("in_order_completion".into(), "false".into())]).unwrap();
    let unreplayed: &'static StackOps = Box::leak(Box::new(StackOps {
        replay_on_target: no_replay,
        ..stack::RIO
    }));
    // Linux's ordering without the FLUSH after each write: nothing orders a write behind the
    // previous one in a volatile cache.
    let unflushed: &'static StackOps = Box::leak(Box::new(StackOps {
        plan: qoslab_fabric::plan::PlanRules {
            flush_every_request: false,
            ..stack::LINUX.plan
        },
        ..stack::LINUX
    }));
    let head_at_ack =
        FabricConfig::with_overrides(&[("recycle_at_ack".into(), "true".into())]).unwrap();
    let mutants: [(&str, &'static StackOps, &FabricConfig, Crash); 5] = [
        ("orderless", &stack::ORDERLESS, &flash, Crash::Power),
        (
            "rio without in-order completion",
            &stack::RIO,
            &no_in_order,
            Crash::Power,
        ),
        ("rio without replay", unreplayed, &flash, Crash::Target),
        ("linux without FLUSH", unflushed, &flash, Crash::Power),
        (
            "rio recycling at acknowledgement without PLP",
            &stack::RIO,
            &head_at_ack,
            Crash::Power,
        ),
    ];
    for (what, stack, cfg, crash) in mutants {
        let s = crash_check(&CheckSpec::defaults(stack, cfg.clone(), crash)).unwrap();
        assert!(s.prefix_violations + s.acked_lost > 0, "{what}: {s:?}");
    }
    // The stacks themselves pass at the same defaults.
    for stack in [&stack::RIO, &stack::LINUX, &stack::HORAE] {
        for crash in [Crash::Power, Crash::Target] {
            let s = crash_check(&CheckSpec::defaults(stack, flash.clone(), crash)).unwrap();
            assert_eq!(
                s.prefix_violations + s.acked_lost,
                0,
                "{}: {s:?}",
                stack.name
            );
        }
    }
}

#[test]
fn a_write_larger_than_the_bound_is_refused_before_any_work() {
    let cfg = FabricConfig::with_overrides(&[]).unwrap();
    let mut spec = CheckSpec::defaults(&stack::RIO, cfg, Crash::Power);
    spec.shape.max_blocks = 100_000_000;
    let err = crash_check(&spec).unwrap_err();
    assert_eq!(
        err,
        "--max-blocks: at most 65536 (a 256 MiB write), got 100000000"
    );
}
