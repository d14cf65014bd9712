//! The crash checker: power fails (or one target server crashes) after every event of seeded
//! ordered workloads (or a seeded sample of the events, for long ones); after the stack's
//! recovery, what survives must be a prefix of each stream's order, and no acknowledged FLUSH
//! may have lost anything before it.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use qoslab_engine::RngStream;

use crate::FabricConfig;
use crate::machine::{Data, Machine};
use crate::plan::Plan;
use crate::stack::{self, StackOps};
use crate::workload::{Shape, Workload};

/// What a crash left broken.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// `prefix` or `acked_lost`.
    pub kind: String,
    pub stream: usize,
    pub detail: String,
}

/// What fails at a crash point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Crash {
    /// The whole system loses power: every volatile cache and every command in flight.
    #[default]
    Power,
    /// One target server crashes and restarts; the initiator and the other targets stay up
    /// (document 4.4.1, "Target recovery").
    Target,
}

impl Crash {
    pub fn parse(word: &str) -> Result<Crash, String> {
        match word {
            "power" => Ok(Crash::Power),
            "target" => Ok(Crash::Target),
            _ => Err(format!("--crash: expected power or target, got '{word}'")),
        }
    }
}

/// Checks the state after recovery from a power failure at the current event boundary.
pub fn violations(plan: &Plan, stack: &StackOps, m: &Machine<'_>) -> Vec<Violation> {
    let erase = (stack.recover)(plan, &m.image);
    judge(plan, m, |c| m.image.data[c] == Data::Durable && !erase[c])
}

/// Checks the state after target `t` crashed at the current event boundary and the stack's
/// target recovery ran: a command's data survives unless it completed into `t`'s volatile
/// cache and the stack does not write it again; every other command the initiator sent reaches
/// the media in the end (on a live target, or re-sent to `t`), and the rest of each stream's
/// order is still to be sent.
pub fn target_violations(
    plan: &Plan,
    stack: &StackOps,
    m: &Machine<'_>,
    t: usize,
) -> Vec<Violation> {
    let lost = m.lost_with_target(t);
    let replay = (stack.replay_on_target)(plan, &m.image, t);
    judge(plan, m, |c| m.sent(c) && (replay[c] || !lost[c]))
}

/// The two properties, given which commands' data survives.
fn judge(plan: &Plan, m: &Machine<'_>, survives: impl Fn(usize) -> bool) -> Vec<Violation> {
    judge_acked(plan, &m.acked, survives)
}

/// The two properties, given which requests were acknowledged (per stream) and which commands'
/// data survives: each stream a prefix of its groups, and nothing lost at or before a write
/// acknowledged with a FLUSH.
pub fn judge_acked(
    plan: &Plan,
    acked: &[Vec<bool>],
    survives: impl Fn(usize) -> bool,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for (s, order) in plan.order.iter().enumerate() {
        let reqs = &plan.requests[s];
        let mut present = vec![false; reqs.len()];
        let mut whole = vec![true; reqs.len()];
        for &c in order {
            let cmd = &plan.cmds[c];
            for &w in &cmd.writes {
                if survives(c) {
                    present[w] = true;
                } else {
                    whole[w] = false;
                }
            }
        }
        // Storage order is kept per group: if any write of group g survived, every write of
        // every earlier group must have survived whole.
        if let Some(last) = (0..reqs.len()).rev().find(|&w| present[w]) {
            let g = reqs[last].seq;
            if let Some(hole) = (0..reqs.len()).find(|&w| reqs[w].seq < g && !whole[w]) {
                out.push(Violation {
                    kind: "prefix".into(),
                    stream: s,
                    detail: format!(
                        "write {last} (seq {g}) survived but write {hole} (seq {}) did not",
                        reqs[hole].seq
                    ),
                });
            }
        }
        for (r, req) in reqs.iter().enumerate() {
            if req.persist
                && acked[s][r]
                && let Some(w) = (0..reqs.len()).find(|&w| reqs[w].seq <= req.seq && !whole[w])
            {
                {
                    out.push(Violation {
                        kind: "acked_lost".into(),
                        stream: s,
                        detail: format!(
                            "write {r} (seq {}) with a FLUSH was acknowledged, write {w} is lost",
                            req.seq
                        ),
                    });
                    break;
                }
            }
        }
    }
    out
}

/// A crash that breaks the order: everything needed to run it again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reproducer {
    pub stack: String,
    pub config: Vec<(String, String)>,
    pub schedule_seed: u64,
    /// Power fails (or the target crashes) after this many events.
    pub crash_after_events: u64,
    #[serde(default)]
    pub crash: Crash,
    /// The target that crashed (`crash: target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crashed_target: Option<usize>,
    pub workload: Workload,
    pub violations: Vec<Violation>,
}

/// What to check.
#[derive(Clone, Debug)]
pub struct CheckSpec {
    pub stack: &'static StackOps,
    pub cfg: FabricConfig,
    pub shape: Shape,
    pub workloads: usize,
    pub seed: u64,
    pub crash: Crash,
    /// With `Crash::Target`: the target that crashes; `None`: each target in turn at every
    /// crash point.
    pub target: Option<usize>,
    /// Workloads with at most this many crash points are tried at every one.
    pub exhaustive_limit: u64,
    /// Crash points drawn (without replacement) from a longer workload.
    pub samples: u64,
    /// Most minimal reproducers to report.
    pub reproducers: usize,
}

impl CheckSpec {
    /// Workloads checked by default (`qoslab rio crash-check`'s `--workloads`): enough that
    /// every known mutant (orderless, Rio without in-order completion, without replay on a
    /// crashed target, Linux without its FLUSHes, Rio moving the PMR head at acknowledgement
    /// without PLP) is caught at the defaults (a test).
    pub const DEFAULT_WORKLOADS: usize = 50;
    pub const DEFAULT_SEED: u64 = 1;
    pub const DEFAULT_EXHAUSTIVE_LIMIT: u64 = 100_000;
    pub const DEFAULT_SAMPLES: u64 = 500;
    pub const DEFAULT_REPRODUCERS: usize = 3;
    /// Largest write a workload may draw, in blocks: 256 MiB of 4 KiB blocks, 4,096 commands
    /// at a 64 KiB MDTS. Memory grows with the commands of a workload (`--max-blocks
    /// 100000000` took 5.7 GB); at this bound a worker holds about 32 MB.
    pub const MAX_BLOCKS: u32 = 1 << 16;

    /// The checker's defaults for `stack` on `cfg`, the workloads of [`Shape::default`].
    pub fn defaults(stack: &'static StackOps, cfg: FabricConfig, crash: Crash) -> Self {
        CheckSpec {
            stack,
            cfg,
            shape: Shape::default(),
            workloads: Self::DEFAULT_WORKLOADS,
            seed: Self::DEFAULT_SEED,
            crash,
            target: None,
            exhaustive_limit: Self::DEFAULT_EXHAUSTIVE_LIMIT,
            samples: Self::DEFAULT_SAMPLES,
            reproducers: Self::DEFAULT_REPRODUCERS,
        }
    }
}

/// One workload's result.
#[derive(Clone, Debug, Default)]
struct Outcome {
    events: u64,
    crash_points: u64,
    exhaustive: bool,
    prefix_violations: u64,
    acked_lost: u64,
    cache_losses: u64,
    first: Option<(u64, Option<usize>, Vec<Violation>)>,
}

/// Totals over every workload.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub stack: String,
    /// `power` or `target`.
    pub crash: Crash,
    /// The targets crashed in turn at each crash point (`crash: target`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub crashed_targets: Vec<usize>,
    pub config: Vec<(String, String)>,
    pub seed: u64,
    pub workloads: usize,
    pub streams: usize,
    pub writes_per_stream: usize,
    pub events: u64,
    /// Event boundaries tried, times the targets crashed at each (`crash: target`).
    pub crash_points: u64,
    pub exhaustive_workloads: usize,
    pub sampled_workloads: usize,
    /// Crash points after which some stream was not left at a prefix.
    pub prefix_violations: u64,
    /// Crash points after which an acknowledged FLUSH had lost a write before it.
    pub acked_lost: u64,
    /// Target crashes that destroyed a completed write in the target's volatile cache (what
    /// recovery had to repair; `crash: target`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_losses: Option<u64>,
    pub reproducers: Vec<Reproducer>,
}

/// The failures tried at each crash point: a power cut, or a crash of each of `targets`.
#[derive(Clone, Debug)]
struct Failures {
    crash: Crash,
    targets: Vec<usize>,
}

impl Failures {
    fn of(spec: &CheckSpec) -> Failures {
        let targets = match (spec.crash, spec.target) {
            (Crash::Power, _) => Vec::new(),
            (Crash::Target, Some(t)) => vec![t],
            (Crash::Target, None) => (0..spec.cfg.targets as usize).collect(),
        };
        Failures {
            crash: spec.crash,
            targets,
        }
    }

    /// Each failure at the current boundary: the target crashed, whether it lost a completed
    /// write from its cache, and what recovery left broken.
    fn judge(
        &self,
        plan: &Plan,
        stack: &StackOps,
        m: &Machine<'_>,
    ) -> Vec<(Option<usize>, bool, Vec<Violation>)> {
        match self.crash {
            Crash::Power => vec![(None, false, violations(plan, stack, m))],
            Crash::Target => self
                .targets
                .iter()
                .map(|&t| {
                    let lossy = m.lost_with_target(t).contains(&true);
                    (Some(t), lossy, target_violations(plan, stack, m, t))
                })
                .collect(),
        }
    }
}

/// Runs the whole schedule, evaluating after the events in `points` (sorted; `None`: all).
fn run(
    plan: &Plan,
    stack: &'static StackOps,
    cfg: &FabricConfig,
    seed: u64,
    failures: &Failures,
    points: Option<&[u64]>,
) -> Result<Outcome, String> {
    let mut m = Machine::new(plan, stack, cfg, seed);
    let mut out = Outcome::default();
    let mut next = 0;
    loop {
        let at = m.events;
        let wanted = match points {
            None => true,
            Some(p) => {
                let hit = p.get(next) == Some(&at);
                if hit {
                    next += 1;
                }
                hit
            }
        };
        if wanted {
            for (target, lossy, v) in failures.judge(plan, stack, &m) {
                out.crash_points += 1;
                out.cache_losses += u64::from(lossy);
                if v.iter().any(|v| v.kind == "prefix") {
                    out.prefix_violations += 1;
                }
                if v.iter().any(|v| v.kind == "acked_lost") {
                    out.acked_lost += 1;
                }
                if !v.is_empty() && out.first.is_none() {
                    out.first = Some((at, target, v));
                }
            }
        }
        if !m.step()? {
            break;
        }
    }
    out.events = m.events;
    Ok(out)
}

fn events_of(
    plan: &Plan,
    stack: &'static StackOps,
    cfg: &FabricConfig,
    seed: u64,
) -> Result<u64, String> {
    let mut m = Machine::new(plan, stack, cfg, seed);
    while m.step()? {}
    Ok(m.events)
}

fn check_workload(spec: &CheckSpec, wl: &Workload, seed: u64) -> Result<Outcome, String> {
    let plan = Plan::build(wl, &spec.cfg, spec.stack.plan);
    let events = events_of(&plan, spec.stack, &spec.cfg, seed)?;
    let failures = Failures::of(spec);
    if events < spec.exhaustive_limit {
        let mut o = run(&plan, spec.stack, &spec.cfg, seed, &failures, None)?;
        o.exhaustive = true;
        return Ok(o);
    }
    // Floyd's sampling of distinct crash points, then in event order.
    let mut rng = RngStream::new(seed, "fabric/crash-points");
    let total = events + 1;
    let k = spec.samples.min(total);
    let mut chosen = std::collections::BTreeSet::new();
    for j in total - k..total {
        let t = rng.below(j + 1);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    let points: Vec<u64> = chosen.into_iter().collect();
    run(&plan, spec.stack, &spec.cfg, seed, &failures, Some(&points))
}

type Found = (u64, Option<usize>, Vec<Violation>);

fn violates(spec: &CheckSpec, wl: &Workload, seed: u64) -> Option<Found> {
    let plan = Plan::build(wl, &spec.cfg, spec.stack.plan);
    let failures = Failures::of(spec);
    run(&plan, spec.stack, &spec.cfg, seed, &failures, None)
        .ok()?
        .first
}

/// Removes streams and writes while the workload still breaks (greedy delta debugging).
fn shrink(spec: &CheckSpec, wl: &Workload, seed: u64) -> Reproducer {
    let mut best = wl.clone();
    let mut found = violates(spec, &best, seed).expect("a violating workload");
    let mut tries = 0;
    let mut changed = true;
    while changed && tries < 400 {
        changed = false;
        let mut candidates = Vec::new();
        for s in 0..best.streams.len() {
            if best.streams.len() > 1 {
                let mut c = best.clone();
                c.streams.remove(s);
                candidates.push(c);
            }
            for i in (0..best.streams[s].len()).rev() {
                if best.streams[s].len() > 1 {
                    let mut c = best.clone();
                    c.streams[s].remove(i);
                    if let Some(last) = c.streams[s].last_mut() {
                        last.group_end = true;
                    }
                    candidates.push(c);
                }
            }
        }
        for c in candidates {
            tries += 1;
            if c.validate().is_err() {
                continue;
            }
            if let Some(f) = violates(spec, &c, seed) {
                best = c;
                found = f;
                changed = true;
                break;
            }
        }
    }
    Reproducer {
        stack: spec.stack.name.into(),
        config: spec.cfg.pairs(),
        schedule_seed: seed,
        crash_after_events: found.0,
        crash: spec.crash,
        crashed_target: found.1,
        workload: best,
        violations: found.2,
    }
}

/// The seed of workload `w`.
fn workload_seed(seed: u64, w: usize) -> u64 {
    RngStream::new(seed, &format!("fabric/workload{w}")).next_u64()
}

/// Runs the checker over `spec.workloads` seeded workloads (in parallel; the result does not
/// depend on the thread count).
pub fn crash_check(spec: &CheckSpec) -> Result<Summary, String> {
    if spec.shape.max_blocks > CheckSpec::MAX_BLOCKS {
        return Err(format!(
            "--max-blocks: at most {} (a 256 MiB write), got {}",
            CheckSpec::MAX_BLOCKS,
            spec.shape.max_blocks
        ));
    }
    if spec.crash == Crash::Target
        && let Some(t) = spec.target
        && t >= spec.cfg.targets as usize
    {
        return Err(format!(
            "--target: expected 0 to {}, got {t}",
            spec.cfg.targets - 1
        ));
    }
    let results: Vec<Result<(Outcome, Workload, u64), String>> = (0..spec.workloads)
        .into_par_iter()
        .map(|w| {
            let seed = workload_seed(spec.seed, w);
            let wl = Workload::generate(seed, &spec.shape);
            check_workload(spec, &wl, seed).map(|o| (o, wl, seed))
        })
        .collect();
    let mut sum = Summary {
        stack: spec.stack.name.into(),
        crash: spec.crash,
        crashed_targets: Failures::of(spec).targets,
        config: spec.cfg.pairs(),
        seed: spec.seed,
        workloads: spec.workloads,
        streams: spec.shape.streams,
        writes_per_stream: spec.shape.writes_per_stream,
        events: 0,
        crash_points: 0,
        exhaustive_workloads: 0,
        sampled_workloads: 0,
        prefix_violations: 0,
        acked_lost: 0,
        cache_losses: (spec.crash == Crash::Target).then_some(0),
        reproducers: Vec::new(),
    };
    let mut failing = Vec::new();
    for r in results {
        let (o, wl, seed) = r?;
        sum.events += o.events;
        sum.crash_points += o.crash_points;
        if o.exhaustive {
            sum.exhaustive_workloads += 1;
        } else {
            sum.sampled_workloads += 1;
        }
        sum.prefix_violations += o.prefix_violations;
        sum.acked_lost += o.acked_lost;
        if let Some(n) = &mut sum.cache_losses {
            *n += o.cache_losses;
        }
        if o.first.is_some() && failing.len() < spec.reproducers {
            failing.push((wl, seed));
        }
    }
    sum.reproducers = failing
        .par_iter()
        .map(|(wl, seed)| shrink(spec, wl, *seed))
        .collect();
    Ok(sum)
}

/// Runs a reproducer to its crash point and returns what recovery left broken.
pub fn replay(r: &Reproducer) -> Result<Vec<Violation>, String> {
    let stack = stack::lookup(&r.stack)
        .ok_or_else(|| format!("stack: expected {}, got '{}'", stack::names(), r.stack))?;
    let cfg = FabricConfig::with_overrides(&r.config)?;
    r.workload.validate()?;
    let plan = Plan::build(&r.workload, &cfg, stack.plan);
    let mut m = Machine::new(&plan, stack, &cfg, r.schedule_seed);
    while m.events < r.crash_after_events {
        if !m.step()? {
            return Err(format!(
                "crash_after_events: the run ends after {} events",
                m.events
            ));
        }
    }
    match (r.crash, r.crashed_target) {
        (Crash::Power, _) => Ok(violations(&plan, stack, &m)),
        (Crash::Target, Some(t)) if t < cfg.targets as usize => {
            Ok(target_violations(&plan, stack, &m, t))
        }
        (Crash::Target, t) => Err(format!(
            "crashed_target: expected a target from 0 to {}, got {t:?}",
            cfg.targets - 1
        )),
    }
}
