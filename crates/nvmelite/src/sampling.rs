//! Sampling schedules, and how fast a sampler reaches the exact worst case.
//!
//! The paper finds bad schedules by sampling its policies over schedule seeds. Beside them,
//! GUIDED samples the whole schedule space with a bias towards deep reordering (the paper's
//! RD-guided idea): when it may either submit or complete it mostly submits, building a
//! backlog, and it mostly completes the newest candidate the bound allows. [`race`] runs each
//! strategy over seeds 0, 1, 2, ... and reports its best value and the first seed at which the
//! running best reaches a target (the exact worst case of [`crate::search`]).

use crate::metrics::Metrics;
use crate::model::{Decider, RngDecider, Situation, StepError};
use crate::params::{FaultMode, RunParams};
use crate::policy;
use crate::rng::SplitMix64;
use crate::run::Runner;
use crate::search::{self, MetricOps};
use crate::workload::Workload;

/// GUIDED's tunables (name, unit, default, help): one table.
pub static TUNABLES: &[search::Tunable] = &[
    search::Tunable {
        name: "guided_submit_pct",
        unit: "%",
        default: 75,
        help: "chance of submitting when the loop may submit or complete",
    },
    search::Tunable {
        name: "guided_newest_pct",
        unit: "%",
        default: 50,
        help: "chance of completing the newest remaining candidate, tried from newest to oldest",
    },
];

/// The stream GUIDED draws from for a seed: its own, so that no policy's draws move.
fn guided_stream(seed: u64) -> SplitMix64 {
    // FNV-1a of the stream's name, mixed into the seed.
    let name = b"guided".iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    SplitMix64::new(seed ^ name)
}

/// GUIDED's decisions: RD-biased, from its own seeded stream.
pub struct GuidedDecider {
    rng: SplitMix64,
    submit_pct: u64,
    newest_pct: u64,
}

impl GuidedDecider {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: guided_stream(seed),
            submit_pct: TUNABLES[0].default,
            newest_pct: TUNABLES[1].default,
        }
    }

    fn chance(&mut self, pct: u64) -> bool {
        self.rng.next_u64() % 100 < pct
    }
}

impl Decider for GuidedDecider {
    fn decide(&mut self, situation: Situation) -> Result<bool, StepError> {
        Ok(match situation {
            Situation::Choice => !self.chance(self.submit_pct),
            Situation::ForcedSubmit => false,
            Situation::ForcedComplete | Situation::Burst => true,
        })
    }
    fn fault(&mut self, _fault: FaultMode) -> Result<(), StepError> {
        Ok(())
    }
    /// The draw is the index: the run is RANDOM's (`draw mod c`), see [`search::schedule_params`].
    fn pick(&mut self, candidates: usize, _draws: bool) -> Result<u64, StepError> {
        let mut index = candidates - 1;
        while index > 0 && !self.chance(self.newest_pct) {
            index -= 1;
        }
        Ok(index as u64)
    }
    fn finish(&mut self) -> Result<(), StepError> {
        Ok(())
    }
}

/// A sampling strategy: a policy of the model, or GUIDED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Policy(&'static policy::PolicyOps),
    Guided,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Policy(p) => p.name,
            Strategy::Guided => "GUIDED",
        }
    }

    /// The paper's four policies, then GUIDED.
    pub fn all() -> Vec<Strategy> {
        policy::REGISTRY
            .iter()
            .map(|&p| Strategy::Policy(p))
            .chain([Strategy::Guided])
            .collect()
    }

    /// The metrics of the run of this strategy with `seed` (`params`: bound, fault, window).
    pub fn run(self, runner: &mut Runner, w: &Workload, params: &RunParams, seed: u64) -> Metrics {
        match self {
            Strategy::Policy(p) => {
                let params = RunParams {
                    policy: p,
                    schedule_seed: seed,
                    ..params.clone()
                };
                let mut decider = RngDecider(SplitMix64::new(seed));
                runner
                    .metrics_with(w, &params, &mut decider)
                    .expect("the generator never contradicts the rules")
            }
            Strategy::Guided => {
                let params = search::schedule_params(
                    params.bound,
                    params.fault,
                    params.submit_window,
                    &params.scheduler_version,
                    &params.git_commit,
                );
                let mut decider = GuidedDecider::new(seed);
                runner
                    .metrics_with(w, &params, &mut decider)
                    .expect("GUIDED only takes decisions the rules allow")
            }
        }
    }
}

/// One strategy's result in a race.
#[derive(Clone, Debug, PartialEq)]
pub struct RaceRow {
    pub strategy: &'static str,
    pub samples: u64,
    /// Its best value and the first seed that gave it.
    pub best: f64,
    pub best_seed: u64,
    /// Runs it took (seeds 0..=this) until the running best reached the target, if it did.
    pub reached_after: Option<u64>,
}

/// Runs every strategy over seeds `0..samples` and measures how soon each reaches `target`.
pub fn race(
    w: &Workload,
    params: &RunParams,
    metric: &'static MetricOps,
    samples: u64,
    target: f64,
) -> Vec<RaceRow> {
    let mut runner = Runner::new();
    Strategy::all()
        .into_iter()
        .map(|strategy| {
            let mut row = RaceRow {
                strategy: strategy.name(),
                samples,
                best: f64::NEG_INFINITY,
                best_seed: 0,
                reached_after: None,
            };
            for seed in 0..samples {
                let value = (metric.of_metrics)(&strategy.run(&mut runner, w, params, seed));
                if value > row.best {
                    row.best = value;
                    row.best_seed = seed;
                }
                if row.reached_after.is_none() && row.best >= target {
                    row.reached_after = Some(seed + 1);
                }
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Bound, SubmitWindow};
    use crate::run::RunOptions;

    #[test]
    fn guided_runs_replay_and_reorder_more_than_random() {
        let w = Workload::from_json(
            br#"{"seed_id":"w","commands":[{"type":"WRITE","lba":0,"len":1,"pattern":1},
            {"type":"READ","lba":0,"len":1},{"type":"FENCE"},{"type":"READ","lba":0,"len":1},
            {"type":"WRITE","lba":1,"len":1,"pattern":2},{"type":"READ","lba":1,"len":1}]}"#,
        )
        .unwrap();
        let params =
            search::schedule_params(Bound::Inf, FaultMode::None, SubmitWindow::Inf, "v1.0", "");
        let mut runner = Runner::new();
        let (mut guided_rd, mut random_rd) = (0.0, 0.0);
        for seed in 0..200 {
            let mut decider = GuidedDecider::new(seed);
            let out = runner
                .run_with(&w, &params, &mut decider, RunOptions::ALL)
                .unwrap();
            // Its schedule file replays strictly to the same log.
            let again = Runner::new()
                .replay(&w, out.schedule.as_deref().unwrap(), true, RunOptions::ALL)
                .unwrap();
            assert_eq!(again.log, out.log);
            guided_rd += out.metrics.rd;
            random_rd += Strategy::Policy(&policy::RANDOM)
                .run(&mut runner, &w, &params, seed)
                .rd;
        }
        assert!(guided_rd > 1.5 * random_rd, "{guided_rd} {random_rd}");
    }
}
