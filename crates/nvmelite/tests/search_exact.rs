//! The worst-case search against brute force: every schedule of a small workload is run
//! through the model (the step loop and the metrics of the runs, not the search's own
//! bookkeeping), and the search's optimum must equal the largest value seen, for every metric,
//! bound k and fault mode. Its schedules replay to exactly that value, and its certificate
//! holds when the bound it must beat is moved (the optimum itself: nothing above; one step
//! below: the optimum is found).

use std::path::PathBuf;

use qoslab_nvmelite::metrics::{Metrics, MetricsAcc};
use qoslab_nvmelite::model::{self, Decider, Scratch, Situation, StepError};
use qoslab_nvmelite::params::{Bound, FaultMode, SubmitWindow};
use qoslab_nvmelite::search::{self, Limits, MetricOps, Ratio, Stop};
use qoslab_nvmelite::{Runner, Workload};
use rayon::prelude::*;

/// Enumerates every decision sequence in lexicographic order, as an odometer: each run takes
/// the recorded digits and appends 0s; afterwards the last digit that can grow grows.
#[derive(Default)]
struct Odometer {
    digits: Vec<(usize, usize)>, // (value, arity)
    pos: usize,
}

impl Odometer {
    fn digit(&mut self, arity: usize) -> usize {
        if self.pos == self.digits.len() {
            self.digits.push((0, arity));
        }
        let (value, recorded) = self.digits[self.pos];
        assert_eq!(recorded, arity, "the same prefix must meet the same choice");
        self.pos += 1;
        value
    }

    /// Moves to the next sequence; false when all were enumerated.
    fn advance(&mut self) -> bool {
        self.pos = 0;
        while let Some((value, arity)) = self.digits.pop() {
            if value + 1 < arity {
                self.digits.push((value + 1, arity));
                return true;
            }
        }
        false
    }
}

impl Decider for Odometer {
    fn decide(&mut self, situation: Situation) -> Result<bool, StepError> {
        Ok(match situation {
            Situation::Choice => self.digit(2) == 1,
            Situation::ForcedSubmit => false,
            Situation::ForcedComplete | Situation::Burst => true,
        })
    }
    fn fault(&mut self, _fault: FaultMode) -> Result<(), StepError> {
        Ok(())
    }
    fn pick(&mut self, candidates: usize, _draws: bool) -> Result<u64, StepError> {
        Ok(self.digit(candidates) as u64)
    }
    fn finish(&mut self) -> Result<(), StepError> {
        Ok(())
    }
}

/// The largest value of each registered metric over all schedules, and how many there are.
fn brute_force(
    w: &Workload,
    bound: Bound,
    fault: FaultMode,
    window: SubmitWindow,
) -> (Vec<f64>, u64) {
    let params = search::schedule_params(bound, fault, window, "v1.0", "");
    let mut best = vec![f64::NEG_INFINITY; search::REGISTRY.len()];
    let mut scratch = Scratch::default();
    let mut acc = MetricsAcc::default();
    let mut odometer = Odometer::default();
    let mut schedules = 0u64;
    loop {
        acc.start(w.len());
        model::simulate(w, &params, &mut scratch, &mut odometer, &mut acc).unwrap();
        let m: Metrics = acc.finish();
        for (b, metric) in best.iter_mut().zip(search::REGISTRY) {
            *b = b.max((metric.of_metrics)(&m));
        }
        schedules += 1;
        if !odometer.advance() {
            return (best, schedules);
        }
    }
}

fn workloads_up_to_8_commands() -> Vec<(String, Workload)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found: Vec<(String, Workload)> = Vec::new();
    for dir in ["configs/nvmelite/seeds", "tests/data/nvmelite"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let w = Workload::from_json(&std::fs::read(&path).unwrap()).unwrap();
            // The same workload in two folders is enumerated once.
            if w.len() <= 8 && !found.iter().any(|(_, f)| f.commands == w.commands) {
                found.push((path.display().to_string(), w));
            }
        }
    }
    found
}

fn bounds_for(n: usize) -> Vec<Bound> {
    let mut bounds: Vec<Bound> = (0..n.max(1) as u32).map(Bound::K).collect();
    bounds.push(Bound::Inf);
    bounds
}

fn check_search(
    w: &Workload,
    bound: Bound,
    fault: FaultMode,
    window: SubmitWindow,
    best: &[f64],
    what: &str,
) {
    let params = search::schedule_params(bound, fault, window, "v1.0", "");
    for (metric, &expected) in search::REGISTRY.iter().zip(best) {
        let found = search::worst(w, &params, metric, Limits::default()).unwrap();
        let what = format!("{what} {} k={bound} {fault} sw={window}", metric.name);
        assert_eq!(found.outcome.stop, Stop::Closed, "{what}");
        assert_eq!(found.value, Some(expected), "{what}");
        assert_eq!(found.outcome.upper_bound.to_f64(), expected, "{what}");
        // The schedule file replays to the same log and value.
        let run = found.run.as_ref().unwrap();
        let again = Runner::new()
            .replay(
                w,
                run.schedule.as_deref().unwrap(),
                true,
                qoslab_nvmelite::RunOptions::ALL,
            )
            .unwrap();
        assert_eq!(again.log, run.log, "{what}");
        assert_eq!((metric.of_metrics)(&again.metrics), expected, "{what}");
        check_certificate(
            w,
            bound,
            fault,
            window,
            metric,
            found.outcome.upper_bound,
            &what,
        );
    }
}

/// With the optimum as the value to beat the search closes finding nothing; with a value just
/// below it, it finds the optimum again.
fn check_certificate(
    w: &Workload,
    bound: Bound,
    fault: FaultMode,
    window: SubmitWindow,
    metric: &'static MetricOps,
    optimum: Ratio,
    what: &str,
) {
    let at = Limits {
        floor: Some(optimum),
        ..Limits::default()
    };
    let above = search::search(w, bound, fault, window, metric, at).unwrap();
    assert!(
        above.best.is_none() && above.stop == Stop::Closed,
        "{what}: above the optimum"
    );
    assert_eq!(above.upper_bound, optimum, "{what}");
    if optimum > Ratio::ZERO {
        // Just below: (2 num - 1) / (2 den).
        let below = Ratio {
            num: 2 * optimum.num - 1,
            den: 2 * optimum.den,
        };
        let lim = Limits {
            floor: Some(below),
            ..Limits::default()
        };
        let again = search::search(w, bound, fault, window, metric, lim).unwrap();
        assert_eq!(
            again.best.map(|b| b.0),
            Some(optimum),
            "{what}: just below the optimum"
        );
    }
}

#[test]
fn the_search_equals_brute_force_on_every_test_workload_of_up_to_8_commands() {
    let workloads = workloads_up_to_8_commands();
    // fresh_read_test, seed_001, seed_002, stale_read_test, vis_len4_test.
    assert_eq!(workloads.len(), 5);
    let mut cases = Vec::new();
    for (name, w) in &workloads {
        for fault in FaultMode::ALL {
            for bound in bounds_for(w.len()) {
                cases.push((name, w, bound, fault));
            }
        }
    }
    let total: u64 = cases
        .par_iter()
        .map(|&(name, w, bound, fault)| {
            let window = SubmitWindow::Inf;
            let (best, schedules) = brute_force(w, bound, fault, window);
            check_search(w, bound, fault, window, &best, name);
            schedules
        })
        .sum();
    // (2n-1)!! schedules for 8 commands at k = inf without a fault alone.
    assert!(total > 2 * 2_027_025, "{total}");
}

#[test]
fn the_search_equals_brute_force_under_a_submit_window() {
    let (_, w) = workloads_up_to_8_commands()
        .into_iter()
        .find(|(_, w)| w.seed_id == "seed_001")
        .unwrap();
    for window in [0, 1, 2, 3] {
        for fault in FaultMode::ALL {
            for bound in [Bound::K(0), Bound::K(1), Bound::K(2), Bound::Inf] {
                let window = SubmitWindow::N(window);
                let (best, _) = brute_force(&w, bound, fault, window);
                check_search(&w, bound, fault, window, &best, "seed_001");
            }
        }
    }
}

#[test]
fn brute_force_counts_every_interleaving_and_pick() {
    // Without a bound, n commands have (2n-1)!! schedules: the SUBMIT lines come in order and
    // each COMPLETE line goes anywhere after its SUBMIT.
    let w = Workload::from_json(
        br#"{"seed_id":"four","commands":[{"type":"FENCE"},{"type":"FENCE"},{"type":"FENCE"},{"type":"FENCE"}]}"#,
    )
    .unwrap();
    assert_eq!(
        brute_force(&w, Bound::Inf, FaultMode::None, SubmitWindow::Inf).1,
        105
    );
    // k = 0: completions in order, only the interleaving is free (Catalan(4) = 14).
    assert_eq!(
        brute_force(&w, Bound::K(0), FaultMode::None, SubmitWindow::Inf).1,
        14
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    #[test]
    fn the_search_equals_brute_force_on_random_small_workloads(
        kinds in proptest::collection::vec(0u8..4, 0..=6),
        k in 0u32..6,
        fault in 0usize..3,
        window in proptest::prop_oneof![proptest::strategy::Just(u64::MAX), 1u64..4],
    ) {
        let commands: Vec<String> = kinds
            .iter()
            .map(|k| match k {
                0 => r#"{"type":"WRITE","lba":0,"len":1,"pattern":1}"#.to_string(),
                1 => r#"{"type":"READ","lba":0,"len":1}"#.to_string(),
                2 => r#"{"type":"FENCE"}"#.to_string(),
                _ => r#"{"type":"WRITE_VISIBLE","lba":0,"len":1}"#.to_string(),
            })
            .collect();
        let json = format!(r#"{{"seed_id":"p","commands":[{}]}}"#, commands.join(","));
        let w = Workload::from_json(json.as_bytes()).unwrap();
        let bound = if k == 5 { Bound::Inf } else { Bound::K(k) };
        let window = if window == u64::MAX { SubmitWindow::Inf } else { SubmitWindow::N(window) };
        let fault = FaultMode::ALL[fault];
        let (best, _) = brute_force(&w, bound, fault, window);
        check_search(&w, bound, fault, window, &best, &json);
    }
}
