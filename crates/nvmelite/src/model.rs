//! The NVMe-lite step loop (spec §3 and §5): host submits in order, the device completes one
//! of the k+1 oldest pending commands, faults fire at the ⌊n/2⌋-th completion iteration.
//!
//! The loop is written once. Where its decisions come from (the splitmix64 generator, or a
//! recorded schedule) is a [`Decider`]; what is made of its events (the log text and its hash,
//! the metrics, schedule records) is an [`Observer`]. Both are generic parameters, so a run
//! that only needs metrics and the log hash costs no dynamic dispatch and builds no text twice.

use std::collections::VecDeque;

use crate::params::{FaultMode, RunParams};
use crate::rng::SplitMix64;
use crate::workload::{CmdKind, Command, STORAGE_WORDS, Workload};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Err,
    Timeout,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Err => "ERR",
            Status::Timeout => "TIMEOUT",
        }
    }
}

/// What one iteration of the loop did (the unit of a schedule file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Submit {
        cmd: u32,
    },
    /// A normal completion: `index` into the canonical pending list of `candidates`
    /// candidates; `draw` is the pick draw for policies that draw.
    Complete {
        draw: Option<u64>,
        index: usize,
        candidates: usize,
        cmd: u32,
    },
    Timeout {
        at_step: u64,
        cmd: u32,
    },
    Reset {
        at_step: u64,
        pending_before: usize,
    },
}

/// Why an iteration is submit or complete (spec §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Situation {
    /// Both possible: the decision bit (or a schedule) decides.
    Choice,
    /// Nothing is pending: only a submit is possible.
    ForcedSubmit,
    /// The window is full, nothing is left to submit, or submissions stopped after TIMEOUT.
    ForcedComplete,
    /// A burst of the policy is running: completions only, no decision drawn.
    Burst,
}

/// A schedule that the rules of the step loop cannot follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for StepError {}

/// Where the loop's decisions come from.
pub trait Decider {
    /// Start of an iteration: `true` to complete, `false` to submit.
    fn decide(&mut self, situation: Situation) -> Result<bool, StepError>;
    /// The fault fired in this iteration's completion phase.
    fn fault(&mut self, fault: FaultMode) -> Result<(), StepError>;
    /// A normal completion among `candidates`: the pick draw, 0 when `draws` is false.
    fn pick(&mut self, candidates: usize, draws: bool) -> Result<u64, StepError>;
    /// The loop has ended.
    fn finish(&mut self) -> Result<(), StepError>;
}

/// The reference behaviour: one splitmix64 stream for decision bits and pick draws.
pub struct RngDecider(pub SplitMix64);

impl Decider for RngDecider {
    #[inline]
    fn decide(&mut self, situation: Situation) -> Result<bool, StepError> {
        Ok(match situation {
            Situation::Choice => self.0.next_u64() & 1 == 1,
            Situation::ForcedSubmit => false,
            Situation::ForcedComplete | Situation::Burst => true,
        })
    }
    #[inline]
    fn fault(&mut self, _fault: FaultMode) -> Result<(), StepError> {
        Ok(())
    }
    #[inline]
    fn pick(&mut self, _candidates: usize, draws: bool) -> Result<u64, StepError> {
        Ok(if draws { self.0.next_u64() } else { 0 })
    }
    #[inline]
    fn finish(&mut self) -> Result<(), StepError> {
        Ok(())
    }
}

/// What is made of a run's events; every hook defaults to nothing.
#[allow(unused_variables)]
pub trait Observer {
    fn submit(&mut self, cmd: u32, kind: CmdKind) {}
    /// Directly after the submit of a FENCE command.
    fn fence(&mut self, fence_id: u32) {}
    fn complete(&mut self, cmd: u32, kind: CmdKind, status: Status, out: u32) {}
    fn reset(&mut self, pending_before: usize) {}
    fn end(&mut self, pending_left: usize, pending_peak: usize) {}
    /// The decision of the iteration, reported before its events.
    fn step(&mut self, step: &Step) {}
}

/// Host and device storage (spec §3), cleared between runs only where it was written.
pub struct Storage {
    host: Vec<u32>,
    device: Vec<u32>,
    host_dirty_end: usize,
    device_dirty_end: usize,
}

impl Default for Storage {
    fn default() -> Self {
        Self {
            host: vec![0; STORAGE_WORDS],
            device: vec![0; STORAGE_WORDS],
            host_dirty_end: 0,
            device_dirty_end: 0,
        }
    }
}

impl Storage {
    fn clear(&mut self) {
        self.host[..self.host_dirty_end].fill(0);
        self.device[..self.device_dirty_end].fill(0);
        self.host_dirty_end = 0;
        self.device_dirty_end = 0;
    }

    /// Executes a command at its completion (spec §3): status and output. `device_data` is
    /// false when the workload has no WRITE_VISIBLE: then the device stays all zeros, every
    /// READ hashes to 0 and the host's words are never read, so no word needs storing.
    #[inline]
    fn execute(&mut self, cmd: &Command, device_data: bool) -> (Status, u32) {
        if cmd.kind == CmdKind::Fence {
            return (Status::Ok, 0);
        }
        // The reference adds in a wrapping 64-bit word, then range-checks.
        let end = cmd.lba.wrapping_add(u64::from(cmd.len));
        if end > STORAGE_WORDS as u64 {
            return (Status::Err, 0);
        }
        if !device_data {
            return (Status::Ok, 0);
        }
        let end = end as usize;
        let start = (cmd.lba as usize).min(end);
        let range = start..end;
        match cmd.kind {
            CmdKind::Write => {
                self.host[range].fill(cmd.pattern);
                self.host_dirty_end = self.host_dirty_end.max(end);
                (Status::Ok, 0)
            }
            CmdKind::WriteVisible => {
                self.device[range.clone()].copy_from_slice(&self.host[range]);
                self.device_dirty_end = self.device_dirty_end.max(end);
                (Status::Ok, 0)
            }
            CmdKind::Read => {
                let hash = self.device[range]
                    .iter()
                    .fold(0u32, |h, &w| h.wrapping_mul(31).wrapping_add(w));
                (Status::Ok, hash)
            }
            CmdKind::Fence => unreachable!(),
        }
    }
}

/// Per-thread state reused from run to run.
#[derive(Default)]
pub struct Scratch {
    storage: Storage,
    pending: VecDeque<u32>,
}

/// The end of a run as RUN_END reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunEnd {
    pub pending_left: usize,
    pub pending_peak: usize,
}

/// Runs the step loop of spec §5 once.
pub fn simulate<D: Decider, O: Observer>(
    workload: &Workload,
    params: &RunParams,
    scratch: &mut Scratch,
    decider: &mut D,
    observer: &mut O,
) -> Result<RunEnd, StepError> {
    let commands = &workload.commands;
    let n = commands.len();
    let policy = params.policy;
    let fault_step = (n / 2) as u64;
    let device_data = commands.iter().any(|c| c.kind == CmdKind::WriteVisible);
    scratch.storage.clear();
    let pending = &mut scratch.pending;
    pending.clear();

    let mut next_cmd = 0usize;
    let mut step_count = 0u64;
    let mut fault_armed = params.fault != FaultMode::None;
    let mut stop_submits = false;
    let mut burst = 0usize;
    let mut fence_counter = 0u32;
    let mut peak = 0usize;

    loop {
        let m = pending.len();
        let can_submit = params.submit_window.allows(m) && next_cmd < n && !stop_submits;
        let can_complete = m > 0;
        if !can_submit && !can_complete {
            break;
        }
        // A running burst always has a command to complete (spec §5.4, last paragraph).
        debug_assert!(burst == 0 || can_complete);
        let situation = if burst > 0 && can_complete {
            Situation::Burst
        } else if can_submit && can_complete {
            Situation::Choice
        } else if can_complete {
            Situation::ForcedComplete
        } else {
            Situation::ForcedSubmit
        };

        if !decider.decide(situation)? {
            let cmd = next_cmd as u32;
            let kind = commands[next_cmd].kind;
            pending.push_back(cmd);
            observer.step(&Step::Submit { cmd });
            observer.submit(cmd, kind);
            if kind == CmdKind::Fence {
                observer.fence(fence_counter);
                fence_counter += 1;
            }
            next_cmd += 1;
            peak = peak.max(pending.len());
            continue;
        }

        if fault_armed && step_count >= fault_step {
            fault_armed = false;
            decider.fault(params.fault)?;
            if params.fault == FaultMode::Timeout {
                // The oldest pending command, whatever k and the policy say; no burst tick.
                let victim = pending
                    .pop_front()
                    .expect("completion with nothing pending");
                observer.step(&Step::Timeout {
                    at_step: step_count,
                    cmd: victim,
                });
                observer.complete(victim, commands[victim as usize].kind, Status::Timeout, 0);
                stop_submits = true;
                step_count += 1;
                continue;
            }
            observer.step(&Step::Reset {
                at_step: step_count,
                pending_before: m,
            });
            observer.reset(m);
            pending.clear();
            break;
        }

        if burst == 0 {
            burst = (policy.burst)(m);
        }
        let candidates = params.bound.candidates(m);
        let draw = decider.pick(candidates, policy.pick_draws)?;
        let index = (policy.pick)(candidates, draw);
        let cmd = pending.remove(index).expect("pick outside the candidates");
        let command = &commands[cmd as usize];
        let (status, out) = scratch.storage.execute(command, device_data);
        observer.step(&Step::Complete {
            draw: policy.pick_draws.then_some(draw),
            index,
            candidates,
            cmd,
        });
        observer.complete(cmd, command.kind, status, out);
        burst = burst.saturating_sub(1);
        step_count += 1;
    }
    decider.finish()?;
    let end = RunEnd {
        pending_left: pending.len(),
        pending_peak: peak,
    };
    observer.end(end.pending_left, end.pending_peak);
    Ok(end)
}
