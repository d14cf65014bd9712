//! Invariants the specification states, over random workloads and parameters.

use proptest::prelude::*;

use crate::model::RngDecider;
use crate::params::{Bound, FaultMode, RunParams, SubmitWindow};
use crate::policy::REGISTRY;
use crate::rng::SplitMix64;
use crate::run::{LogUse, RunOptions, RunOutput, Runner, replay, run};
use crate::workload::{CmdKind, Command, Workload};

fn command() -> impl Strategy<Value = Command> {
    let kind = prop_oneof![
        Just(CmdKind::Write),
        Just(CmdKind::Read),
        Just(CmdKind::Fence),
        Just(CmdKind::WriteVisible)
    ];
    let lba = prop_oneof![0u64..12, 1015u64..1030, Just(u64::MAX), Just(u64::MAX - 3)];
    let len = prop_oneof![0u32..6, Just(u32::MAX)];
    let pattern = prop_oneof![0u32..4, Just(u32::MAX)];
    (kind, lba, len, pattern).prop_map(|(kind, lba, len, pattern)| Command {
        kind,
        lba,
        len,
        pattern,
    })
}

fn case() -> impl Strategy<Value = (Workload, RunParams)> {
    let workload = prop::collection::vec(command(), 0..24).prop_map(|commands| Workload {
        seed_id: "prop".into(),
        commands,
    });
    let bound = prop_oneof![
        (0u32..5).prop_map(Bound::K),
        Just(Bound::Inf),
        Just(Bound::K(u32::MAX))
    ];
    let window = prop_oneof![(0u64..4).prop_map(SubmitWindow::N), Just(SubmitWindow::Inf)];
    let fault = prop_oneof![
        Just(FaultMode::None),
        Just(FaultMode::Timeout),
        Just(FaultMode::Reset)
    ];
    (
        workload,
        any::<u64>(),
        0..REGISTRY.len(),
        bound,
        fault,
        window,
    )
        .prop_map(|(w, seed, policy, bound, fault, submit_window)| {
            let p = RunParams {
                schedule_seed: seed,
                policy: REGISTRY[policy],
                bound,
                fault,
                submit_window,
                scheduler_version: "v1.0".into(),
                git_commit: String::new(),
            };
            (w, p)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn runs_drain_and_replay_byte_for_byte((w, p) in case()) {
        let out = run(&w, &p, RunOptions::ALL);
        let log = String::from_utf8(out.log.clone().unwrap()).unwrap();
        let last = log.lines().last().unwrap();
        prop_assert!(last.starts_with("RUN_END(pending_left=0, "), "{}", last);
        // Every submitted command completes once, unless RESET discarded it.
        let submits = log.matches("SUBMIT(").count();
        let completes = log.matches("COMPLETE(").count();
        let discarded = log
            .lines()
            .find_map(|l| l.strip_prefix("RESET(reason=INJECTED, pending_before="))
            .map_or(0, |n| n.trim_end_matches(')').parse::<usize>().unwrap());
        prop_assert_eq!(submits, completes + discarded);
        prop_assert_eq!(out.metrics.n_ok + out.metrics.n_err + out.metrics.n_timeout, completes as u64);
        prop_assert!(out.metrics.n_timeout <= 1);
        let again = replay(&w, out.schedule.as_ref().unwrap(), true, RunOptions::ALL).unwrap();
        prop_assert_eq!(&again, &RunOutput { rng_draws: 0, ..out.clone() });
    }

    #[test]
    fn lenient_replay_follows_a_schedule_that_replays_strictly(
        (w, p) in case(),
        edits in prop::collection::vec((0usize..40, 0usize..6), 0..6),
    ) {
        let out = run(&w, &p, RunOptions::ALL);
        let text = out.schedule.unwrap();
        let (head, steps) = text.split_once("steps\n").unwrap();
        let mut steps: Vec<&str> = steps.lines().filter(|l| *l != "end").collect();
        let replacements = ["submit", "complete", "complete draw=3", "timeout", "reset"];
        for (at, what) in edits {
            let at = at.min(steps.len());
            match what {
                5 if at < steps.len() => { steps.remove(at); }
                5 => {}
                r => steps.insert(at, replacements[r]),
            }
        }
        let edited = format!("{head}steps\n{}", steps.iter().map(|s| format!("{s}\n")).collect::<String>());
        let repaired = replay(&w, &edited, false, RunOptions::ALL).unwrap();
        let strict = replay(&w, repaired.schedule.as_ref().unwrap(), true, RunOptions::ALL).unwrap();
        prop_assert_eq!(strict.log, repaired.log);
    }

    #[test]
    fn metrics_only_runs_give_the_metrics_of_full_runs((w, p) in case()) {
        let full = run(&w, &p, RunOptions::ALL);
        // One runner for every path, as a matrix worker reuses it: no state may leak.
        let mut runner = Runner::new();
        let id = p.run_id(&w.seed_id);
        for log in [LogUse::Skip, LogUse::Hash, LogUse::Keep, LogUse::Skip] {
            let (metrics, digest, text) = runner.run_summary(&w, &p, &id, log);
            prop_assert_eq!(metrics, full.metrics);
            prop_assert_eq!(digest, (log != LogUse::Skip).then_some(full.log_sha256));
            let kept = if log == LogUse::Keep { full.log.as_deref().unwrap() } else { &[][..] };
            if log != LogUse::Hash {
                prop_assert_eq!(text, kept);
            }
        }
        let mut decider = RngDecider(SplitMix64::new(p.schedule_seed));
        prop_assert_eq!(runner.metrics_with(&w, &p, &mut decider).unwrap(), full.metrics);
        prop_assert_eq!(decider.0.draws(), full.rng_draws);
    }
}
