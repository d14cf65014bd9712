//! The exact worst case under a bound k: branch and bound over the decision tree of the step
//! loop (docs/nvmelite.md, "The worst case under a bound k").
//!
//! A schedule is the sequence of the loop's decisions: in each iteration submit or complete,
//! and for a completion which of the `c` candidates the bound allows (spec §5.2, §5.4). Every
//! policy's runs are such sequences (FIFO, ADVERSARIAL and BATCHED restrict them, RANDOM with
//! its draws reaches every one), so the worst over all sequences bounds what any policy can do
//! at that k. A fault adds no decision: where it strikes follows from the decisions (spec §5.5).
//!
//! The search walks the tree depth first, children best bound first. A node is cut when an
//! admissible upper bound on every schedule below it is no better than the best schedule found
//! (the incumbent), or when an equivalent or better node was visited before: two nodes with the
//! same submitted count, pending set and fault state have the same subtree, and one whose
//! pending commands were submitted no later and whose metric so far is no worse reaches at
//! least as high below (a table of such nodes, bounded in size). When every branch is closed
//! the incumbent is optimal; when a node or time limit stops the search first, the answer is
//! "best found, upper bound U", U being the largest bound of any branch left open.
//!
//! The model state that matters to these metrics is small: which commands are pending, when
//! each was submitted (its SUBMIT line index) and the fault state. Storage contents change
//! only statuses and READ outputs, never a latency or the completion order, so the search
//! ignores them; the schedule it returns is replayed through the model ([`worst`]) and the
//! reported metric is the replay's.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;

use crate::metrics::Metrics;
use crate::model::{Decider, Situation, StepError};
use crate::params::{Bound, FaultMode, RunParams, SubmitWindow};
use crate::policy;
use crate::run::{RunOptions, RunOutput, Runner};
use crate::workload::{CmdKind, Workload};

/// The search holds a pending set in one 64-bit word.
pub const MAX_COMMANDS: usize = 64;
/// Latencies kept per node: the p95 of N latencies is the r-th largest, r = N - ⌊0.95 (N-1)⌋,
/// which is at most 5 for N <= 64.
const TOP: usize = 6;

/// A non-negative rational `num / den` (den > 0): metrics compare exactly, as the integers
/// they are made of, and become the model's double only when printed.
#[derive(Clone, Copy, Debug)]
pub struct Ratio {
    pub num: u64,
    pub den: u64,
}

impl Ratio {
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };
    pub fn int(v: u64) -> Self {
        Ratio { num: v, den: 1 }
    }
    /// The value as the model's metrics compute it (one double division).
    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

impl PartialEq for Ratio {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ratio {}
impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ratio {
    fn cmp(&self, other: &Self) -> Ordering {
        (u128::from(self.num) * u128::from(other.den))
            .cmp(&(u128::from(other.num) * u128::from(self.den)))
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{:.6}", self.to_f64())
        }
    }
}

/// What a path has accumulated so far: everything any metric needs (a few words, copied on
/// undo).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acc {
    /// The largest latencies so far, descending (0 where fewer).
    top: [u16; TOP],
    /// Number of non-FENCE completions (latencies) so far.
    count: u16,
    sum: u32,
    /// Completion-order inversions so far (spec §9.3).
    inversions: u32,
}

impl Acc {
    fn add_latency(&mut self, lat: u16) {
        self.count += 1;
        self.sum += u32::from(lat);
        let mut v = lat;
        for slot in &mut self.top {
            if v > *slot {
                std::mem::swap(slot, &mut v);
            }
        }
    }
}

/// The p95 index rank from the top: `Lat[⌊0.95 (N-1)⌋]` is the r-th largest (spec §9.2; the
/// product in double precision, as the model evaluates it).
fn p95_rank(n: usize) -> usize {
    n - (0.95 * (n - 1) as f64).floor() as usize
}

/// The end of a run as the metric sees it.
#[derive(Clone, Copy, Debug)]
pub struct EndCounts {
    /// COMPLETE lines (FENCE and TIMEOUT included).
    pub completions: u32,
}

/// One metric the search can maximise: how to value a finished path, how to bound an open
/// one, and when one accumulation is at least as good as another (the hooks of
/// [`MetricOps`]; adding a metric is one more value and one [`REGISTRY`] line).
pub struct MetricOps {
    /// As `--metric` spells it.
    pub name: &'static str,
    pub help: &'static str,
    /// The value of a finished run.
    pub value: fn(acc: &Acc, end: &EndCounts) -> Ratio,
    /// An upper bound on the value of every run below a node.
    pub bound: fn(acc: &Acc, f: &Future) -> Ratio,
    /// Whether `a` reaches at least the value of `b` under every continuation (same node).
    pub dominates: fn(a: &Acc, b: &Acc) -> bool,
    /// Whether when the pending commands were submitted matters (it does for latencies).
    pub uses_submit_lines: bool,
    /// The same value read from the model's metrics of the replayed run.
    pub of_metrics: fn(m: &Metrics) -> f64,
}

impl PartialEq for MetricOps {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl std::fmt::Debug for MetricOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

fn top_dominates(a: &Acc, b: &Acc) -> bool {
    a.top.iter().zip(&b.top).all(|(x, y)| x >= y)
}

pub static P95: MetricOps = MetricOps {
    name: "p95",
    help: "p95 step latency (the r-th largest latency, spec §9.2)",
    value: |acc, _| match acc.count {
        0 => Ratio::ZERO,
        n => Ratio::int(u64::from(acc.top[p95_rank(n as usize) - 1])),
    },
    bound: bound_p95,
    dominates: top_dominates,
    uses_submit_lines: true,
    of_metrics: |m| m.p95_latency_step,
};

pub static MAX: MetricOps = MetricOps {
    name: "max",
    help: "largest step latency",
    value: |acc, _| Ratio::int(u64::from(acc.top[0])),
    bound: |acc, f| Ratio::int(u64::from(acc.top[0]).max(f.kth_latency_bound(1))),
    dominates: |a, b| a.top[0] >= b.top[0],
    uses_submit_lines: true,
    of_metrics: |m| m.max_latency_step,
};

pub static MEAN: MetricOps = MetricOps {
    name: "mean",
    help: "mean step latency",
    value: |acc, _| match acc.count {
        0 => Ratio::ZERO,
        n => Ratio {
            num: u64::from(acc.sum),
            den: u64::from(n),
        },
    },
    bound: bound_mean,
    dominates: |a, b| a.sum >= b.sum,
    uses_submit_lines: true,
    of_metrics: |m| m.mean_latency_step,
};

pub static RD: MetricOps = MetricOps {
    name: "RD",
    help: "reordering degree: completion-order inversions / pairs (spec §9.3)",
    value: |acc, end| rd_ratio(u64::from(acc.inversions), u64::from(end.completions)),
    bound: bound_rd,
    dominates: |a, b| a.inversions >= b.inversions,
    uses_submit_lines: false,
    of_metrics: |m| m.rd,
};

/// Every metric the search knows, in the order the CLI help lists them.
pub static REGISTRY: &[&MetricOps] = &[&P95, &MAX, &MEAN, &RD];

/// A metric by name (any case).
pub fn lookup(name: &str) -> Option<&'static MetricOps> {
    REGISTRY
        .iter()
        .copied()
        .find(|m| m.name.eq_ignore_ascii_case(name))
}

fn rd_ratio(inversions: u64, completions: u64) -> Ratio {
    if completions < 2 {
        Ratio::ZERO
    } else {
        Ratio {
            num: inversions,
            den: completions * (completions - 1) / 2,
        }
    }
}

/// One decision of the step loop, as the tree branches on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Submit,
    /// A normal completion of the candidate at this index of the canonical pending list.
    Complete(u8),
    /// The fault's completion iteration (TIMEOUT or RESET, spec §5.5): forced, no choice.
    Fault,
}

/// The fixed inputs of one search.
pub struct Problem {
    n: usize,
    fence: u64,
    /// Lines a command's submission writes (2 for a FENCE: SUBMIT and FENCE).
    submit_lines: Vec<u16>,
    k: usize,
    window: usize,
    fault: FaultMode,
    fault_step: u32,
    metric: &'static MetricOps,
}

/// The search state at a node (undone on the way back up).
#[derive(Clone)]
struct State {
    next: usize,
    pending: u64,
    /// The fault has struck (TIMEOUT: submissions stopped; RESET ends the run at once).
    fired: bool,
    /// Index of the next event line.
    line: u32,
    completions: u32,
    /// SUBMIT line index of each submitted command.
    submit_line: [u16; MAX_COMMANDS],
    acc: Acc,
}

/// What the bounds see of a node's future.
pub struct Future<'a> {
    p: &'a Problem,
    s: &'a State,
    /// Lines submissions may still write.
    w_rem: u32,
    /// COMPLETE lines that may still come (TIMEOUT's included).
    c_rem: u32,
    /// Index of the last line a completion may take.
    e_last: u32,
    /// Whether commands not yet submitted may still be.
    can_submit_later: bool,
}

impl Future<'_> {
    fn new<'a>(p: &'a Problem, s: &'a State) -> Future<'a> {
        let pending = s.pending.count_ones();
        let unsubmitted = (p.n - s.next) as u32;
        let can_submit_later = !s.fired && p.window > 0;
        let w_rem: u32 = if can_submit_later {
            p.submit_lines[s.next..].iter().map(|&l| u32::from(l)).sum()
        } else {
            0
        };
        let later = if can_submit_later { unsubmitted } else { 0 };
        let c_rem = match p.fault {
            // RESET ends the run: nothing completes after it.
            FaultMode::Reset if s.fired => 0,
            FaultMode::Reset => p
                .fault_step
                .saturating_sub(s.completions)
                .min(pending + later),
            _ => pending + later,
        };
        Future {
            p,
            s,
            w_rem,
            c_rem,
            e_last: (s.line + w_rem + c_rem).saturating_sub(1),
            can_submit_later,
        }
    }

    /// The commands whose latency is still to come, oldest first, each with its (earliest)
    /// SUBMIT line and an upper bound on its latency; `base` is that bound without skips
    /// (completions of younger commands while it waits).
    fn latency_sources(&self, out: &mut Vec<Source>) {
        out.clear();
        let (p, s) = (self.p, self.s);
        if self.c_rem == 0 {
            return;
        }
        let total_pending = s.pending.count_ones();
        let later = if self.can_submit_later {
            (p.n - s.next) as u32
        } else {
            0
        };
        let skips_allowed = p.k > 0;
        let mut older = 0u32;
        let mut bits = s.pending;
        while bits != 0 {
            let c = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let younger = total_pending - older - 1 + later;
            if p.fence >> c & 1 == 0 {
                let sub = u32::from(s.submit_line[c]);
                let waited = s.line - sub;
                let base = waited + self.w_rem + older.min(self.c_rem - 1);
                let skip = if skips_allowed { younger } else { 0 };
                let ub = (waited + self.w_rem + (older + skip).min(self.c_rem - 1))
                    .min(self.e_last.saturating_sub(sub));
                out.push(Source { sub, base, ub });
            }
            older += 1;
        }
        if self.can_submit_later {
            let mut pre = 0u32;
            for c in s.next..p.n {
                let younger = later - (c - s.next) as u32 - 1;
                if p.fence >> c & 1 == 0 {
                    let sub = s.line + pre;
                    let lines_after = self.w_rem - pre;
                    let base = lines_after + older.min(self.c_rem - 1);
                    let skip = if skips_allowed { younger } else { 0 };
                    let ub = (lines_after + (older + skip).min(self.c_rem - 1))
                        .min(self.e_last.saturating_sub(sub));
                    out.push(Source {
                        sub,
                        base: base.min(ub),
                        ub,
                    });
                }
                pre += u32::from(p.submit_lines[c]);
                older += 1;
            }
        }
    }

    /// Skip budget of `t` latency targets: each completion skips at most k older pending
    /// commands, so with k < t the targets share k per completion; with k >= t only each
    /// target's own cap binds.
    fn skip_budget(&self, t: usize) -> Option<u64> {
        (self.p.k < t).then(|| self.p.k as u64 * u64::from(self.c_rem))
    }

    /// Upper bounds on the t-th largest future latency, t = 1..=TOP (index t-1); 0 where
    /// fewer than t latencies can still come.
    fn latency_bounds(&self) -> [u64; TOP] {
        let mut sources = Vec::with_capacity(self.p.n);
        self.latency_sources(&mut sources);
        let all = self.bounds_of(&sources);
        let (p, s) = (self.p, self.s);
        if p.fault != FaultMode::Timeout || s.fired || sources.is_empty() {
            return all;
        }
        // A TIMEOUT still to strike cuts the oldest pending command short: it strikes at the
        // completion iteration after F more normal ones, no later than line `fault_line`
        // (every remaining SUBMIT first), and takes the oldest command pending then. So of t
        // latency targets either one completes by the fault (its latency is at most
        // fault_line - its SUBMIT line), or all complete after it and are younger than the
        // victim, so none is the oldest command pending or still to submit now.
        let fault_line = s.line + self.w_rem + (p.fault_step - s.completions);
        let by_fault = u64::from(fault_line.saturating_sub(sources[0].sub));
        let oldest = if s.pending != 0 {
            s.pending.trailing_zeros() as usize
        } else {
            s.next
        };
        let younger = if p.fence >> oldest & 1 == 0 {
            self.bounds_of(&sources[1..])
        } else {
            all
        };
        std::array::from_fn(|t| younger[t].max(all[t].min(by_fault)))
    }

    /// [`Future::latency_bounds`] over the given sources only.
    fn bounds_of(&self, sources: &[Source]) -> [u64; TOP] {
        let mut out = [0u64; TOP];
        // Sources come in SUBMIT-line order, so the t smallest lines are the first t.
        let mut bases: Vec<u32> = sources.iter().map(|x| x.base).collect();
        bases.sort_unstable_by(|a, b| b.cmp(a));
        let mut ubs: Vec<u32> = sources.iter().map(|x| x.ub).collect();
        ubs.sort_unstable_by(|a, b| b.cmp(a));
        for t in 1..=TOP.min(sources.len()).min(self.c_rem as usize) {
            // Distinct completion lines: the t latest, matched in order with the t earliest
            // submissions, give the best possible t-th largest (an exchange argument).
            let matching = (1..=t)
                .map(|i| i64::from(self.e_last) - (t - i) as i64 - i64::from(sources[i - 1].sub))
                .min()
                .unwrap_or(0)
                .max(0) as u64;
            let capped = u64::from(ubs[t - 1]);
            let budgeted = match self.skip_budget(t) {
                None => u64::MAX,
                Some(budget) => water_level(&bases[..t], budget),
            };
            out[t - 1] = matching.min(capped).min(budgeted);
        }
        out
    }

    /// An upper bound on the k-th largest future latency (1-based).
    fn kth_latency_bound(&self, k: usize) -> u64 {
        self.latency_bounds()[k - 1]
    }

    /// Number of future latencies (non-FENCE completions): (fewest, most).
    fn latency_count_range(&self) -> (u32, u32) {
        let (p, s) = (self.p, self.s);
        let pending_nf = (s.pending & !p.fence).count_ones();
        let later_nf = if self.can_submit_later {
            let rest = if s.next >= 64 {
                0
            } else {
                !p.fence & (u64::MAX << s.next)
            };
            (rest & mask(p.n)).count_ones()
        } else {
            0
        };
        let most = (pending_nf + later_nf).min(self.c_rem);
        let fewest = match p.fault {
            FaultMode::None => pending_nf + later_nf,
            FaultMode::Timeout => pending_nf,
            FaultMode::Reset => 0,
        };
        (fewest.min(most), most)
    }
}

struct Source {
    /// SUBMIT line (earliest possible for a command not yet submitted).
    sub: u32,
    base: u32,
    ub: u32,
}

fn mask(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// The largest L with Σ max(0, L - base_i) <= budget over the given bases.
fn water_level(bases: &[u32], budget: u64) -> u64 {
    let (mut lo, mut hi) = (
        0u64,
        u64::from(*bases.iter().max().unwrap_or(&0)) + budget + 1,
    );
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        let need: u64 = bases
            .iter()
            .map(|&b| mid.saturating_sub(u64::from(b)))
            .sum();
        if need <= budget {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The r-th largest of (what is accumulated) ∪ (what may come), bounded: the union's r-th
/// largest is max over t of min(acc's (r-t)-th, future's t-th).
fn bound_p95(acc: &Acc, f: &Future) -> Ratio {
    let (fewest, most) = f.latency_count_range();
    let have = u32::from(acc.count);
    let ranks = (have + fewest..=have + most).filter(|&n| n > 0);
    let Some(r) = ranks.map(|n| p95_rank(n as usize)).min() else {
        return Ratio::ZERO;
    };
    let future = f.latency_bounds();
    let mut best = 0u64;
    for t in 0..=r {
        let from_acc = if t == r {
            u64::MAX
        } else if (r - t) <= have as usize {
            u64::from(acc.top[r - t - 1])
        } else {
            continue;
        };
        let from_future = if t == 0 {
            u64::MAX
        } else if t <= most as usize {
            future[t - 1]
        } else {
            continue;
        };
        best = best.max(from_acc.min(from_future));
    }
    Ratio::int(best)
}

fn bound_mean(acc: &Acc, f: &Future) -> Ratio {
    let (fewest, most) = f.latency_count_range();
    let mut sources = Vec::with_capacity(f.p.n);
    f.latency_sources(&mut sources);
    let mut ubs: Vec<u64> = sources.iter().map(|x| u64::from(x.ub)).collect();
    ubs.sort_unstable_by(|a, b| b.cmp(a));
    let mut bases: Vec<u64> = sources.iter().map(|x| u64::from(x.base)).collect();
    bases.sort_unstable_by(|a, b| b.cmp(a));
    let have = u64::from(acc.count);
    let mut best = Ratio::ZERO;
    let (mut sum_ub, mut sum_base, mut sum_sub) = (0u64, 0u64, 0u64);
    for q in 0..=most as usize {
        if q > 0 {
            sum_ub += ubs[q - 1];
            sum_base += bases[q - 1];
            sum_sub += u64::from(sources[q - 1].sub);
        }
        if (q as u32) < fewest || have + q as u64 == 0 {
            continue;
        }
        let qq = q as u64;
        // The q latest completion lines against the q earliest submissions.
        let matching = (qq * u64::from(f.e_last)).saturating_sub(qq * qq.saturating_sub(1) / 2)
            - sum_sub.min(qq * u64::from(f.e_last));
        let budgeted = match f.skip_budget(q) {
            None => u64::MAX,
            Some(budget) => sum_base + budget,
        };
        let future = matching.min(sum_ub).min(budgeted);
        let value = Ratio {
            num: u64::from(acc.sum) + future,
            den: have + qq,
        };
        best = best.max(value);
    }
    best
}

fn bound_rd(acc: &Acc, f: &Future) -> Ratio {
    let (p, s) = (f.p, f.s);
    let completed = completed_set(p, s);
    // Pairs already decided to be inversions once the older, still pending command completes.
    let mut locked = 0u64;
    let mut bits = if f.c_rem == 0 { 0 } else { s.pending };
    while bits != 0 {
        let c = bits.trailing_zeros();
        bits &= bits - 1;
        locked += u64::from((completed >> c >> 1).count_ones());
    }
    let pending = u64::from(s.pending.count_ones());
    let total = pending
        + if f.can_submit_later {
            (p.n - s.next) as u64
        } else {
            0
        };
    let fewest = match p.fault {
        FaultMode::None => total,
        FaultMode::Timeout => pending,
        FaultMode::Reset => u64::from(f.c_rem),
    };
    let mut best = Ratio::ZERO;
    let mut new_pairs = 0u64;
    for c in 0..=u64::from(f.c_rem) {
        if c > 0 {
            // The c-th completion from now meets at most total - c + 1 pending commands.
            let meets = (total - c + 1).min(p.window as u64);
            new_pairs += (p.k as u64).min(meets.saturating_sub(1));
        }
        if c < fewest {
            continue;
        }
        let m = u64::from(s.completions) + c;
        let value = rd_ratio(u64::from(acc.inversions) + locked + new_pairs, m);
        best = best.max(value);
    }
    best
}

/// Commands that have a COMPLETE line so far.
fn completed_set(p: &Problem, s: &State) -> u64 {
    mask(s.next.min(p.n)) & !s.pending
}

/// Why the search stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every branch closed.
    Closed,
    NodeLimit,
    TimeLimit,
}

/// Limits of one search. `floor`: only schedules strictly above it are sought (a certificate
/// check: with the optimum as floor the search must close without finding one).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub node_limit: Option<u64>,
    pub time_limit: Option<Duration>,
    pub floor: Option<Ratio>,
    /// Entries of the table of visited nodes (its memory grows with this, ~64 bytes each).
    pub memo_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            node_limit: None,
            time_limit: None,
            floor: None,
            memo_entries: TUNABLES[0].default as usize,
        }
    }
}

/// A search tunable (name, unit, default, help).
pub struct Tunable {
    pub name: &'static str,
    pub unit: &'static str,
    pub default: u64,
    pub help: &'static str,
}

/// The search's tunables: one table.
pub static TUNABLES: &[Tunable] = &[
    Tunable {
        name: "memo_entries",
        unit: "nodes",
        default: 2_000_000,
        help: "visited nodes remembered for cutting equivalent or dominated ones (~64 B each)",
    },
    Tunable {
        name: "memo_chain",
        unit: "nodes",
        default: 16,
        help: "visited nodes remembered per (submitted, pending set, fault) state",
    },
];

/// The result of a search.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The best schedule found and its value (None: nothing above the floor exists or was
    /// found).
    pub best: Option<(Ratio, Vec<Choice>)>,
    /// No schedule has a value above this (equal to the best value when `stop` is Closed).
    pub upper_bound: Ratio,
    pub stop: Stop,
    pub nodes: u64,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn optimal(&self) -> bool {
        self.stop == Stop::Closed
    }
}

/// The search's own errors (its inputs are otherwise those of a run).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchError(pub String);

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SearchError {}

impl Problem {
    pub fn new(
        workload: &Workload,
        bound: Bound,
        fault: FaultMode,
        window: SubmitWindow,
        metric: &'static MetricOps,
    ) -> Result<Self, SearchError> {
        let n = workload.len();
        if n > MAX_COMMANDS {
            return Err(SearchError(format!(
                "the search handles workloads of up to {MAX_COMMANDS} commands, this one has {n}"
            )));
        }
        let mut fence = 0u64;
        for (i, c) in workload.commands.iter().enumerate() {
            if c.kind == CmdKind::Fence {
                fence |= 1 << i;
            }
        }
        Ok(Problem {
            n,
            fence,
            submit_lines: (0..n).map(|i| 1 + (fence >> i & 1) as u16).collect(),
            k: match bound {
                Bound::Inf => usize::MAX,
                Bound::K(k) => k as usize,
            },
            window: match window {
                SubmitWindow::Inf => usize::MAX,
                SubmitWindow::N(w) => usize::try_from(w).unwrap_or(usize::MAX),
            },
            fault,
            fault_step: (n / 2) as u32,
            metric,
        })
    }

    fn candidates(&self, pending: usize) -> usize {
        self.k.min(pending - 1) + 1
    }

    /// The decisions possible at `s`, in the order a plain depth-first walk would take them
    /// (build backlog first, then the newest candidate), or none at the end of a run.
    fn choices(&self, s: &State, out: &mut Vec<Choice>) {
        out.clear();
        if s.fired && self.fault == FaultMode::Reset {
            return;
        }
        let m = s.pending.count_ones() as usize;
        let can_submit = m < self.window && s.next < self.n && !s.fired;
        if can_submit {
            out.push(Choice::Submit);
        }
        if m > 0 {
            if self.fault != FaultMode::None && !s.fired && s.completions >= self.fault_step {
                out.push(Choice::Fault);
            } else {
                for j in (0..self.candidates(m)).rev() {
                    out.push(Choice::Complete(j as u8));
                }
            }
        }
    }

    fn apply(&self, s: &mut State, choice: Choice) {
        match choice {
            Choice::Submit => {
                let c = s.next;
                s.pending |= 1 << c;
                s.submit_line[c] = s.line as u16;
                s.line += u32::from(self.submit_lines[c]);
                s.next += 1;
            }
            Choice::Complete(j) => {
                let mut bits = s.pending;
                for _ in 0..j {
                    bits &= bits - 1;
                }
                let c = bits.trailing_zeros() as usize;
                self.complete(s, c);
            }
            Choice::Fault => {
                s.fired = true;
                if self.fault == FaultMode::Timeout {
                    let c = s.pending.trailing_zeros() as usize;
                    self.complete(s, c);
                } else {
                    s.line += 1;
                }
            }
        }
    }

    fn complete(&self, s: &mut State, c: usize) {
        let completed = completed_set(self, s);
        s.acc.inversions += (completed >> c >> 1).count_ones();
        if self.fence >> c & 1 == 0 {
            s.acc
                .add_latency((s.line - u32::from(s.submit_line[c])) as u16);
        }
        s.pending &= !(1 << c);
        s.line += 1;
        s.completions += 1;
    }

    fn bound(&self, s: &State) -> Ratio {
        (self.metric.bound)(&s.acc, &Future::new(self, s))
    }
}

/// The table of visited nodes: per (submitted count, pending set, fault state), a short chain
/// of (SUBMIT lines of the pending non-FENCE commands, accumulation).
struct Memo {
    heads: HashMap<u128, u32, FxBuildHasher>,
    entries: Vec<Entry>,
    lines: Vec<u8>,
    capacity: usize,
    chain: usize,
}

struct Entry {
    next: u32,
    acc: Acc,
    lines_at: u32,
}

impl Memo {
    fn new(capacity: usize, chain: usize) -> Self {
        Self {
            heads: HashMap::with_hasher(FxBuildHasher),
            entries: Vec::new(),
            lines: Vec::new(),
            capacity,
            chain,
        }
    }

    fn key(s: &State) -> u128 {
        u128::from(s.pending) | (s.next as u128) << 64 | u128::from(s.fired) << 72
    }

    /// True when an earlier node at least as good as `s` was visited; otherwise remembers `s`.
    fn seen(&mut self, p: &Problem, s: &State, scratch: &mut Vec<u8>) -> bool {
        scratch.clear();
        if p.metric.uses_submit_lines {
            let mut bits = s.pending & !p.fence;
            while bits != 0 {
                let c = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // Lines stay below 3 x 64 + 1: they fit a byte.
                scratch.push(s.submit_line[c] as u8);
            }
        }
        let key = Self::key(s);
        let head = self.heads.get(&key).copied();
        let mut at = head;
        let mut length = 0;
        while let Some(i) = at {
            let e = &self.entries[i as usize];
            let lines = &self.lines[e.lines_at as usize..e.lines_at as usize + scratch.len()];
            if (p.metric.dominates)(&e.acc, &s.acc)
                && lines.iter().zip(scratch.iter()).all(|(a, b)| a <= b)
            {
                return true;
            }
            length += 1;
            at = (e.next != u32::MAX).then_some(e.next);
        }
        if length < self.chain && self.entries.len() < self.capacity {
            let lines_at = self.lines.len() as u32;
            self.lines.extend_from_slice(scratch);
            self.entries.push(Entry {
                next: head.unwrap_or(u32::MAX),
                acc: s.acc,
                lines_at,
            });
            self.heads.insert(key, (self.entries.len() - 1) as u32);
        }
        false
    }
}

struct Search<'p> {
    p: &'p Problem,
    limits: Limits,
    started: Instant,
    nodes: u64,
    incumbent: Ratio,
    best: Option<(Ratio, Vec<Choice>)>,
    path: Vec<Choice>,
    memo: Memo,
    scratch: Vec<u8>,
    stop: Stop,
    /// Largest bound of a branch left open by a stop.
    open_bound: Ratio,
}

impl Search<'_> {
    /// Without a floor the search returns a schedule even when every one is worth 0.
    fn must_find_one(&self) -> bool {
        self.best.is_none() && self.limits.floor.is_none()
    }

    fn out_of_budget(&mut self) -> bool {
        if self.limits.node_limit.is_some_and(|n| self.nodes >= n) {
            self.stop = Stop::NodeLimit;
            return true;
        }
        if self.nodes.is_multiple_of(1024)
            && let Some(t) = self.limits.time_limit
            && self.started.elapsed() >= t
        {
            self.stop = Stop::TimeLimit;
            return true;
        }
        false
    }

    /// Explores the subtree of `s` (whose bound is `bound`); false when a limit stopped it.
    fn visit(&mut self, s: &mut State, bound: Ratio) -> bool {
        if self.out_of_budget() {
            self.open_bound = self.open_bound.max(bound);
            return false;
        }
        self.nodes += 1;
        let mut choices = Vec::with_capacity(8);
        self.p.choices(s, &mut choices);
        if choices.is_empty() {
            let value = (self.p.metric.value)(
                &s.acc,
                &EndCounts {
                    completions: s.completions,
                },
            );
            if value > self.incumbent || self.must_find_one() {
                self.incumbent = value;
                self.best = Some((value, self.path.clone()));
            }
            return true;
        }
        // Children best bound first; ties keep the plain order.
        let mut ranked: Vec<(Ratio, Choice)> = Vec::with_capacity(choices.len());
        for &choice in &choices {
            let saved = s.clone();
            self.p.apply(s, choice);
            ranked.push((self.p.bound(s), choice));
            *s = saved;
        }
        ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
        for (i, &(child_bound, choice)) in ranked.iter().enumerate() {
            if child_bound <= self.incumbent && !self.must_find_one() {
                break;
            }
            let saved = s.clone();
            self.p.apply(s, choice);
            let pruned = self.memo.seen(self.p, s, &mut self.scratch);
            let finished = pruned || {
                self.path.push(choice);
                let done = self.visit(s, child_bound);
                self.path.pop();
                done
            };
            *s = saved;
            if !finished {
                for &(rest, _) in &ranked[i + 1..] {
                    self.open_bound = self.open_bound.max(rest);
                }
                return false;
            }
        }
        true
    }
}

/// Searches the schedule with the largest `metric` over every legal schedule of `workload`
/// under `bound`, `fault` and `window`.
pub fn search(
    workload: &Workload,
    bound: Bound,
    fault: FaultMode,
    window: SubmitWindow,
    metric: &'static MetricOps,
    limits: Limits,
) -> Result<Outcome, SearchError> {
    let p = Problem::new(workload, bound, fault, window, metric)?;
    let mut s = State {
        next: 0,
        pending: 0,
        fired: false,
        line: 0,
        completions: 0,
        submit_line: [0; MAX_COMMANDS],
        acc: Acc::default(),
    };
    let root_bound = p.bound(&s);
    let mut search = Search {
        p: &p,
        limits,
        started: Instant::now(),
        nodes: 0,
        incumbent: limits.floor.unwrap_or(Ratio::ZERO),
        best: None,
        path: Vec::with_capacity(2 * p.n + 1),
        memo: Memo::new(limits.memo_entries, TUNABLES[1].default as usize),
        scratch: Vec::with_capacity(MAX_COMMANDS),
        stop: Stop::Closed,
        open_bound: Ratio::ZERO,
    };
    let closed = search.visit(&mut s, root_bound);
    let found = search.best.as_ref().map_or(Ratio::ZERO, |b| b.0);
    let floor = limits.floor.unwrap_or(Ratio::ZERO);
    let upper_bound = if closed {
        found.max(floor)
    } else {
        search.open_bound.max(found).max(floor)
    };
    Ok(Outcome {
        best: search.best,
        upper_bound,
        stop: search.stop,
        nodes: search.nodes,
        elapsed: search.started.elapsed(),
    })
}

/// Takes the loop's decisions from a list of [`Choice`]s (one per iteration); a pick's draw
/// is its index, which RANDOM maps to that index (`draw mod c`).
pub struct ChoiceDecider<'c> {
    choices: &'c [Choice],
    pos: usize,
}

impl<'c> ChoiceDecider<'c> {
    pub fn new(choices: &'c [Choice]) -> Self {
        Self { choices, pos: 0 }
    }

    fn wrong(&self, expected: &str) -> StepError {
        StepError {
            line: self.pos,
            message: format!("decision {}: {expected}", self.pos),
        }
    }
}

impl Decider for ChoiceDecider<'_> {
    fn decide(&mut self, situation: Situation) -> Result<bool, StepError> {
        let choice = *self
            .choices
            .get(self.pos)
            .ok_or_else(|| self.wrong("the decisions ended before the run"))?;
        self.pos += 1;
        match (situation, choice) {
            (Situation::Choice | Situation::ForcedSubmit, Choice::Submit) => Ok(false),
            (
                Situation::Choice | Situation::ForcedComplete,
                Choice::Complete(_) | Choice::Fault,
            ) => Ok(true),
            _ => Err(self.wrong("a decision the rules do not allow here")),
        }
    }
    fn fault(&mut self, _fault: FaultMode) -> Result<(), StepError> {
        match self.choices[self.pos - 1] {
            Choice::Fault => Ok(()),
            _ => Err(self.wrong("the fault fires here")),
        }
    }
    fn pick(&mut self, candidates: usize, _draws: bool) -> Result<u64, StepError> {
        match self.choices[self.pos - 1] {
            Choice::Complete(j) if (j as usize) < candidates => Ok(u64::from(j)),
            _ => Err(self.wrong("a completion among the candidates")),
        }
    }
    fn finish(&mut self) -> Result<(), StepError> {
        if self.pos == self.choices.len() {
            Ok(())
        } else {
            Err(self.wrong("the run ended before the decisions"))
        }
    }
}

/// The parameters of the run a list of decisions is: RANDOM (its draws select any candidate),
/// schedule seed 0 (a replay draws nothing from it).
pub fn schedule_params(
    bound: Bound,
    fault: FaultMode,
    window: SubmitWindow,
    scheduler_version: &str,
    git_commit: &str,
) -> RunParams {
    RunParams {
        schedule_seed: 0,
        policy: &policy::RANDOM,
        bound,
        fault,
        submit_window: window,
        scheduler_version: scheduler_version.to_string(),
        git_commit: git_commit.to_string(),
    }
}

/// A worst-case search and the replay of what it found.
#[derive(Clone, Debug)]
pub struct Worst {
    pub outcome: Outcome,
    /// The replay of the best schedule (log, schedule file, metrics).
    pub run: Option<RunOutput>,
    /// The metric of the replayed run, as the model prints it.
    pub value: Option<f64>,
}

/// Searches and replays the best schedule through the model with `params`'s header strings.
pub fn worst(
    workload: &Workload,
    params: &RunParams,
    metric: &'static MetricOps,
    limits: Limits,
) -> Result<Worst, SearchError> {
    let outcome = search(
        workload,
        params.bound,
        params.fault,
        params.submit_window,
        metric,
        limits,
    )?;
    let (run, value) = match &outcome.best {
        None => (None, None),
        Some((ratio, choices)) => {
            let run = replay_choices(workload, params, choices)
                .map_err(|e| SearchError(format!("internal: the found schedule fails: {e}")))?;
            let value = (metric.of_metrics)(&run.metrics);
            if value != ratio.to_f64() {
                return Err(SearchError(format!(
                    "internal: the search valued its schedule {} but the replay gives {value}",
                    ratio.to_f64()
                )));
            }
            (Some(run), Some(value))
        }
    };
    Ok(Worst {
        outcome,
        run,
        value,
    })
}

/// Runs the model along `choices` (with RANDOM's parameters, see [`schedule_params`]).
pub fn replay_choices(
    workload: &Workload,
    params: &RunParams,
    choices: &[Choice],
) -> Result<RunOutput, StepError> {
    let params = schedule_params(
        params.bound,
        params.fault,
        params.submit_window,
        &params.scheduler_version,
        &params.git_commit,
    );
    let mut decider = ChoiceDecider::new(choices);
    Runner::new().run_with(
        workload,
        &params,
        &mut decider,
        RunOptions {
            log: true,
            schedule: true,
            reference_schedule: false,
        },
    )
}
