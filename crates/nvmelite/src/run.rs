//! One run, or one replay, with exactly the outputs asked for.

use crate::log::{LinePieces, LogWriter, hex};
use crate::metrics::{Metrics, MetricsAcc};
use crate::model::{self, Observer, RngDecider, Scratch, Status, Step, StepError};
use crate::params::RunParams;
use crate::rng::SplitMix64;
use crate::schedule::{ReferenceScheduleWriter, ReplayDecider, Schedule, ScheduleWriter};
use crate::workload::{CmdKind, Workload};

/// Which optional outputs a run produces (metrics and `log_sha256` always).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// The log text.
    pub log: bool,
    /// qoslab's replayable schedule file.
    pub schedule: bool,
    /// The reference's JSON schedule record (spec §8).
    pub reference_schedule: bool,
}

impl RunOptions {
    pub const ALL: RunOptions = RunOptions {
        log: true,
        schedule: true,
        reference_schedule: true,
    };
}

/// What a run makes of its log; the metrics are computed in every case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogUse {
    /// No log: no line is formatted and nothing hashed. The metrics-only path: the run's
    /// events go straight to the metrics, which need none of the text.
    Skip,
    /// The log's SHA-256, its text streamed through a bounded buffer.
    Hash,
    /// The SHA-256 and the whole text.
    Keep,
}

/// Everything one run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutput {
    pub run_id: String,
    pub metrics: Metrics,
    pub log_sha256: [u8; 32],
    pub log: Option<Vec<u8>>,
    pub schedule: Option<String>,
    pub reference_schedule: Option<String>,
    /// splitmix64 outputs consumed (0 for a replay).
    pub rng_draws: u64,
}

impl RunOutput {
    pub fn log_sha256_hex(&self) -> String {
        hex(&self.log_sha256)
    }

    /// The run's `runs.csv` row, without line ending.
    pub fn csv_row(&self) -> String {
        self.metrics.csv_row(&self.run_id, &self.log_sha256_hex())
    }
}

struct Tee<'a> {
    log: &'a mut LogWriter,
    pieces: Option<&'a LinePieces>,
    metrics: &'a mut MetricsAcc,
    schedule: Option<ScheduleWriter>,
    reference: Option<ReferenceScheduleWriter>,
}

impl Observer for Tee<'_> {
    #[inline]
    fn submit(&mut self, cmd: u32, kind: CmdKind) {
        match self.pieces {
            Some(p) => self.log.line(p.submit(cmd)),
            None => self.log.submit(cmd, kind),
        }
        self.metrics.submit(cmd, kind);
    }
    #[inline]
    fn fence(&mut self, fence_id: u32) {
        self.log.fence(fence_id);
        self.metrics.fence(fence_id);
    }
    #[inline]
    fn complete(&mut self, cmd: u32, kind: CmdKind, status: Status, out: u32) {
        match self.pieces {
            Some(p) if status == Status::Ok && out == 0 => self.log.line(p.complete_ok(cmd)),
            _ => self.log.complete(cmd, kind, status, out),
        }
        self.metrics.complete(cmd, kind, status, out);
    }
    fn reset(&mut self, pending_before: usize) {
        self.log.reset(pending_before);
        self.metrics.reset(pending_before);
    }
    fn end(&mut self, pending_left: usize, pending_peak: usize) {
        self.log.end(pending_left, pending_peak);
        self.metrics.end(pending_left, pending_peak);
    }
    #[inline]
    fn step(&mut self, step: &Step) {
        if let Some(s) = &mut self.schedule {
            s.step(step);
        }
        if let Some(r) = &mut self.reference {
            r.step(step);
        }
    }
}

/// Reusable per-thread state: run many runs without allocating per run.
#[derive(Default)]
pub struct Runner {
    scratch: Scratch,
    log: LogWriter,
    metrics: MetricsAcc,
}

impl Runner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `params` on `workload` with decisions from splitmix64(`schedule_seed`).
    pub fn run(&mut self, workload: &Workload, params: &RunParams, opts: RunOptions) -> RunOutput {
        let mut decider = RngDecider(SplitMix64::new(params.schedule_seed));
        let mut out = self
            .run_with(workload, params, &mut decider, opts)
            .expect("the generator never contradicts the rules");
        out.rng_draws = decider.0.draws();
        out
    }

    /// The metrics, and as `log` asks the `log_sha256` and the log text of a run, borrowing
    /// the text from the runner: the matrix's allocation-free path.
    pub fn run_summary(
        &mut self,
        workload: &Workload,
        params: &RunParams,
        run_id: &str,
        log: LogUse,
    ) -> (Metrics, Option<[u8; 32]>, &[u8]) {
        self.run_summary_with(workload, None, params, run_id, log)
    }

    /// [`Runner::run_summary`] with the workload's pre-formatted lines (see [`LinePieces`]).
    pub fn run_summary_with(
        &mut self,
        workload: &Workload,
        pieces: Option<&LinePieces>,
        params: &RunParams,
        run_id: &str,
        log: LogUse,
    ) -> (Metrics, Option<[u8; 32]>, &[u8]) {
        let mut decider = RngDecider(SplitMix64::new(params.schedule_seed));
        if log == LogUse::Skip {
            let metrics = self
                .metrics_with(workload, params, &mut decider)
                .expect("the generator never contradicts the rules");
            return (metrics, None, &[]);
        }
        self.log.start(
            run_id,
            &workload.seed_id,
            workload.len(),
            params,
            log == LogUse::Keep,
        );
        self.metrics.start(workload.len());
        let mut tee = Tee {
            log: &mut self.log,
            pieces,
            metrics: &mut self.metrics,
            schedule: None,
            reference: None,
        };
        model::simulate(workload, params, &mut self.scratch, &mut decider, &mut tee)
            .expect("the generator never contradicts the rules");
        let metrics = self.metrics.finish();
        let digest = self.log.finish();
        (metrics, Some(digest), self.log.text())
    }

    /// Only the metrics of a run with the decisions of `decider` ([`LogUse::Skip`]): equal to
    /// those of [`Runner::run_with`] for the same decisions, at a fraction of the cost.
    pub fn metrics_with<D: model::Decider>(
        &mut self,
        workload: &Workload,
        params: &RunParams,
        decider: &mut D,
    ) -> Result<Metrics, StepError> {
        self.metrics.start(workload.len());
        model::simulate(
            workload,
            params,
            &mut self.scratch,
            decider,
            &mut self.metrics,
        )?;
        Ok(self.metrics.finish())
    }

    /// Replays a schedule file on `workload`. Strict: any step the rules cannot follow (or a
    /// `seed_id` other than the workload's) is an error. Lenient: see [`ReplayDecider`]; the
    /// returned `schedule` is the schedule actually followed, which replays strictly.
    pub fn replay(
        &mut self,
        workload: &Workload,
        schedule_text: &str,
        strict: bool,
        opts: RunOptions,
    ) -> Result<RunOutput, StepError> {
        let schedule = Schedule::parse(schedule_text, strict)?;
        if strict && schedule.seed_id != workload.seed_id {
            return Err(StepError {
                line: 2,
                message: format!(
                    "seed_id '{}' is not the workload's seed_id '{}'",
                    schedule.seed_id, workload.seed_id
                ),
            });
        }
        let mut decider = ReplayDecider::new(&schedule, strict);
        self.run_with(workload, &schedule.params, &mut decider, opts)
    }

    /// Runs `params` on `workload` with the decisions of `decider` (the generator's, a
    /// schedule file's, a search's or a sampler's).
    pub fn run_with<D: model::Decider>(
        &mut self,
        workload: &Workload,
        params: &RunParams,
        decider: &mut D,
        opts: RunOptions,
    ) -> Result<RunOutput, StepError> {
        let seed_id = &workload.seed_id;
        let run_id = params.run_id(seed_id);
        self.log
            .start(&run_id, seed_id, workload.len(), params, opts.log);
        self.metrics.start(workload.len());
        let mut tee = Tee {
            log: &mut self.log,
            pieces: None,
            metrics: &mut self.metrics,
            schedule: opts.schedule.then(|| ScheduleWriter::new(seed_id, params)),
            reference: opts
                .reference_schedule
                .then(|| ReferenceScheduleWriter::new(seed_id, params)),
        };
        model::simulate(workload, params, &mut self.scratch, decider, &mut tee)?;
        let schedule = tee.schedule.take().map(ScheduleWriter::finish);
        let reference_schedule = tee.reference.take().map(ReferenceScheduleWriter::finish);
        let metrics = self.metrics.finish();
        let log_sha256 = self.log.finish();
        Ok(RunOutput {
            run_id,
            metrics,
            log_sha256,
            log: opts.log.then(|| self.log.text().to_vec()),
            schedule,
            reference_schedule,
            rng_draws: 0,
        })
    }
}

/// One run with a fresh [`Runner`].
pub fn run(workload: &Workload, params: &RunParams, opts: RunOptions) -> RunOutput {
    Runner::new().run(workload, params, opts)
}

/// One replay with a fresh [`Runner`].
pub fn replay(
    workload: &Workload,
    schedule_text: &str,
    strict: bool,
    opts: RunOptions,
) -> Result<RunOutput, StepError> {
    Runner::new().replay(workload, schedule_text, strict, opts)
}
