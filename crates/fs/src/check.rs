//! The crash checker: small seeded workloads run on the file system over a device that
//! completes requests after random delays; then, at every point where a request was sent or
//! completed, the power fails, and every state the device contract allows is recovered and
//! checked ([`crate::recovery`]).
//!
//! The device contract is the block layer's: a write is durable once it completed with FUA,
//! or completed before a FLUSH (or a write with PREFLUSH) was sent that completed; any other
//! write that was sent may or may not have reached the media, each on its own. An ordered
//! device (Rio, HORAE: `ReqFlags::ORDERED`) adds its prefix rule, per stream: if any write of a
//! group survives, every write of the groups before it survives, and an acknowledged write
//! carrying a FLUSH makes everything before it in its stream durable (what
//! `qoslab rio crash-check` proves of those stacks).

use std::collections::BTreeSet;

use qoslab_engine::{
    Call, Chain, Harness, Ns, Op, ReqFlags, ReqId, Request, RngStream, Stage, StageCtx,
};

use crate::config::FsConfig;
use crate::image::Recording;
use crate::recovery::{check, crash_image, replay};
use crate::stage::{FsSetup, FsStage};

/// A device that completes each request after a random delay (seeded), so that runs with
/// different seeds interleave differently.
pub struct ChaosDisk {
    rng: RngStream,
    min_ns: Ns,
    spread_ns: Ns,
}

impl ChaosDisk {
    pub fn new(seed: u64, min_ns: Ns, spread_ns: Ns) -> Self {
        ChaosDisk {
            rng: RngStream::new(seed, "chaos-disk"),
            min_ns,
            spread_ns,
        }
    }
}

impl Stage for ChaosDisk {
    type Event = ReqId;
    fn name(&self) -> &'static str {
        "chaos-disk"
    }
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        let d = self.min_ns + self.rng.below(self.spread_ns.max(1));
        let at = ctx.now_ns() + d;
        ctx.schedule(at, id);
    }
    fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        ctx.complete(id);
    }
}

/// The shape of the small workloads.
#[derive(Clone, Copy, Debug)]
pub struct SmallWorkload {
    pub threads: u32,
    /// Calls per thread.
    pub calls: u32,
    /// Names the threads share.
    pub names: u32,
}

impl Default for SmallWorkload {
    fn default() -> Self {
        SmallWorkload {
            threads: 2,
            calls: 12,
            names: 4,
        }
    }
}

/// One thread's next call: creates, appends and overwrites of 1 to 3 pages (some O_SYNC or
/// O_DSYNC), fsyncs, fdatasyncs, unlinks and renames over a few names.
fn next_call(rng: &mut RngStream, w: &SmallWorkload, thread: u32, now: Ns) -> Request {
    let name = 1 + rng.below(u64::from(w.names)) as u32;
    let pick = rng.below(100);
    let mut r = Request::new(Op::Write, 0, 0, thread, now);
    r.core = thread as u16;
    r.file = name;
    match pick {
        0..=14 => r.call = Call::Create,
        15..=49 => {
            let page = rng.below(4);
            r.offset_bytes = page * 4096;
            r.len_bytes = (1 + rng.below(3)) * 4096;
            match rng.below(6) {
                0 => r.flags |= ReqFlags::FILE_SYNC,
                1 => r.flags |= ReqFlags::DATA_SYNC,
                _ => {}
            }
        }
        50..=79 => r.op = Op::Flush,
        80..=87 => {
            r.op = Op::Flush;
            r.flags |= ReqFlags::DATA_SYNC;
        }
        88..=94 => r.call = Call::Unlink,
        _ => {
            r.call = Call::Rename;
            r.offset_bytes = u64::from(1 + rng.below(u64::from(w.names)) as u32);
        }
    }
    r
}

/// Runs one small workload on file system `jp` and returns what it wrote.
pub fn record_small(
    cfg: &FsConfig,
    jp: Box<dyn crate::Journal>,
    w: &SmallWorkload,
    seed: u64,
) -> Recording {
    let setup = FsSetup {
        capacity_bytes: 1 << 30,
        cores: w.threads,
        kernel_job: w.threads,
        mount: true,
        ..FsSetup::default()
    };
    let mut fs = FsStage::new(cfg.clone(), jp, setup).expect("a 1 GiB file system");
    fs.record();
    let mut h = Harness::new(Chain::new(fs, ChaosDisk::new(seed, 5_000, 60_000)));
    let mut rng = RngStream::new(seed, "small-workload");
    let mut left = vec![w.calls; w.threads as usize];
    let mut pending = std::collections::BTreeMap::new();
    for t in 0..w.threads {
        let r = next_call(&mut rng, w, t, 0);
        pending.insert(h.submit(r).expect("the file system takes every call"), t);
        left[t as usize] -= 1;
    }
    let mut out = Vec::new();
    while !pending.is_empty() {
        assert!(h.step(&mut out), "the file system stalled");
        // Every completion first: the harness reuses the ids of requests it freed.
        let threads: Vec<u32> = out
            .drain(..)
            .map(|d| pending.remove(&d.id).expect("a call of ours"))
            .collect();
        for t in threads {
            if left[t as usize] > 0 {
                left[t as usize] -= 1;
                let now = h.now_ns();
                let r = next_call(&mut rng, w, t, now);
                pending.insert(h.submit(r).expect("taken"), t);
            }
        }
    }
    // Let the kernel's threads finish what they started (not the periodic wake-ups, which
    // never end).
    let now = h.now_ns();
    h.run_until(now + 100_000_000);
    h.stage.upper.recording().expect("recorded").clone()
}

/// What the checker found over a recording.
#[derive(Clone, Debug, Default)]
pub struct CheckSummary {
    pub crash_points: u64,
    pub states: u64,
    /// (crash time, which writes survived, what was wrong), the first few.
    pub violations: Vec<(Ns, Vec<usize>, Vec<String>)>,
    pub violating_states: u64,
}

/// The most states tried at one crash point; beyond, a seeded sample of them.
pub const STATES_PER_POINT: usize = 64;

/// Cuts the power at every point where a write or FLUSH was sent or completed, recovers
/// every state the contract allows there (or a sample of `STATES_PER_POINT`), checks each.
pub fn check_recording(rec: &Recording, seed: u64) -> CheckSummary {
    let mut times: BTreeSet<Ns> = BTreeSet::new();
    times.insert(0);
    for w in &rec.writes {
        times.extend([w.sent].into_iter().chain(w.done).filter(|&t| t != Ns::MAX));
    }
    for f in &rec.flushes {
        times.extend([f.sent].into_iter().chain(f.done).filter(|&t| t != Ns::MAX));
    }
    let mut rng = RngStream::new(seed, "crash-states");
    let mut sum = CheckSummary::default();
    for &at in &times {
        sum.crash_points += 1;
        for survives in states_at(rec, at, &mut rng) {
            sum.states += 1;
            let mut disk = crash_image(rec, &survives);
            replay(rec, &mut disk);
            let bad = check(rec, &disk, at);
            if !bad.is_empty() {
                sum.violating_states += 1;
                if sum.violations.len() < 5 {
                    let alive = (0..survives.len()).filter(|&w| survives[w]).collect();
                    sum.violations.push((at, alive, bad));
                }
            }
        }
    }
    sum
}

/// The states the contract allows when the power fails at `at`: every one when there are
/// few, else a seeded sample with the extremes.
fn states_at(rec: &Recording, at: Ns, rng: &mut RngStream) -> Vec<Vec<bool>> {
    let n = rec.writes.len();
    let sent = |w: usize| rec.writes[w].sent <= at;
    let done = |w: usize| rec.writes[w].done.is_some_and(|d| d <= at);
    // Barriers that completed: a FLUSH, or a write with PREFLUSH, covering what completed
    // before it was sent.
    let mut barriers: Vec<Ns> = rec
        .flushes
        .iter()
        .filter(|f| f.done.is_some_and(|d| d <= at))
        .map(|f| f.sent)
        .collect();
    barriers.extend(
        (0..n)
            .filter(|&w| rec.writes[w].preflush && done(w))
            .map(|w| rec.writes[w].sent),
    );
    let latest_barrier = barriers.iter().copied().max();
    let mut forced: Vec<bool> = (0..n)
        .map(|w| {
            let r = &rec.writes[w];
            done(w) && (r.fua || latest_barrier.is_some_and(|b| r.done.expect("done") <= b))
        })
        .collect();
    // Ordered streams: an acknowledged write carrying a FLUSH makes its stream durable up to
    // it; the rest of the stream survives as a prefix of groups.
    let mut streams: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for w in 0..n {
        if let Some((s, _)) = rec.writes[w].ordered
            && sent(w)
        {
            streams.entry(s).or_default().push(w);
        }
    }
    let mut stream_forced_group = std::collections::BTreeMap::new();
    for (&s, ws) in &streams {
        let g = ws
            .iter()
            .filter(|&&w| {
                let r = &rec.writes[w];
                (r.fua || r.preflush) && done(w)
            })
            .map(|&w| rec.writes[w].ordered.expect("ordered").1)
            .max()
            .unwrap_or(0);
        for &w in ws {
            if rec.writes[w].ordered.expect("ordered").1 <= g {
                forced[w] = true;
            }
        }
        stream_forced_group.insert(s, g);
    }
    let free: Vec<usize> = (0..n)
        .filter(|&w| sent(w) && !forced[w] && rec.writes[w].ordered.is_none())
        .collect();
    // Per stream, the cut: groups after the forced ones, each possibly the partial one.
    let mut stream_choices: Vec<Vec<Vec<usize>>> = Vec::new();
    for (s, ws) in &streams {
        let g0 = stream_forced_group[s];
        let groups: BTreeSet<u64> = ws
            .iter()
            .map(|&w| rec.writes[w].ordered.expect("ordered").1)
            .filter(|&g| g > g0)
            .collect();
        let groups: Vec<u64> = groups.into_iter().collect();
        // Choice k: groups[..k] whole, plus a subset of groups[k] (whole here; subsets below).
        let mut choices = Vec::new();
        for k in 0..=groups.len() {
            let whole: Vec<usize> = ws
                .iter()
                .copied()
                .filter(|&w| {
                    let g = rec.writes[w].ordered.expect("ordered").1;
                    groups[..k].contains(&g)
                })
                .collect();
            choices.push(whole.clone());
            if let Some(&gk) = groups.get(k) {
                let part: Vec<usize> = ws
                    .iter()
                    .copied()
                    .filter(|&w| rec.writes[w].ordered.expect("ordered").1 == gk)
                    .collect();
                if part.len() > 1 {
                    for &x in &part {
                        let mut c = whole.clone();
                        c.push(x);
                        choices.push(c);
                    }
                }
            }
        }
        stream_choices.push(choices);
    }
    let base = forced;
    let mut total: usize = 1usize.checked_shl(free.len() as u32).unwrap_or(usize::MAX);
    for c in &stream_choices {
        total = total.saturating_mul(c.len());
    }
    let build = |mask: &dyn Fn(usize) -> bool, picks: &[usize]| {
        let mut s = base.clone();
        for (k, &w) in free.iter().enumerate() {
            if mask(k) {
                s[w] = true;
            }
        }
        for (c, &p) in stream_choices.iter().zip(picks) {
            for &w in &c[p] {
                s[w] = true;
            }
        }
        s
    };
    let mut out = Vec::new();
    if total <= STATES_PER_POINT {
        let f = free.len();
        let mut picks = vec![0usize; stream_choices.len()];
        loop {
            for m in 0..(1usize << f) {
                out.push(build(&|k| m >> k & 1 == 1, &picks));
            }
            // Next combination of the streams' cuts.
            let mut i = 0;
            loop {
                if i == picks.len() {
                    return out;
                }
                picks[i] += 1;
                if picks[i] < stream_choices[i].len() {
                    break;
                }
                picks[i] = 0;
                i += 1;
            }
        }
    }
    // Too many: none, all, each free write alone and each one missing, then random ones.
    let last: Vec<usize> = stream_choices.iter().map(|c| c.len() - 1).collect();
    let zero = vec![0usize; stream_choices.len()];
    out.push(build(&|_| false, &zero));
    out.push(build(&|_| true, &last));
    for k in 0..free.len().min(STATES_PER_POINT / 4) {
        out.push(build(&|i| i == k, &zero));
        out.push(build(&|i| i != k, &last));
    }
    while out.len() < STATES_PER_POINT {
        let bits: Vec<bool> = (0..free.len()).map(|_| rng.below(2) == 1).collect();
        let picks: Vec<usize> = stream_choices
            .iter()
            .map(|c| rng.below(c.len() as u64) as usize)
            .collect();
        out.push(build(&|k| bits[k], &picks));
    }
    out
}

/// One workload's result, for the report.
#[derive(Clone, Debug, Default)]
pub struct WorkloadCheck {
    pub seed: u64,
    pub summary: CheckSummary,
    /// The workload's calls (start, end, thread, what), kept when it failed.
    pub calls: Vec<(Ns, Ns, u32, String)>,
}

/// Runs and checks the small workload of `seed` on the file system `ops` builds from
/// `settings`.
pub fn check_workload(
    cfg: &FsConfig,
    ops: &crate::JournalOps,
    settings: &qoslab_engine::Settings,
    w: &SmallWorkload,
    seed: u64,
) -> WorkloadCheck {
    let build = ops.build.expect("checked by the registry");
    let rec = record_small(cfg, build(settings), w, seed);
    let summary = check_recording(&rec, seed);
    let calls = if summary.violating_states > 0 {
        rec.calls.clone()
    } else {
        Vec::new()
    };
    WorkloadCheck {
        seed,
        summary,
        calls,
    }
}
