//! The ordered-write stacks as stages of the chain, held to the crash checker's rules: the
//! chain and the checker's untimed machine run the same workloads, the machine replays the
//! chain's every step (each must be one the machine allows), and at every event boundary the
//! chain's state and what a power cut there takes (what the drives' power loss takes, read
//! without cutting, so one run serves every boundary; cut for real on a sample) give the same
//! crash images and acknowledgements as the machine's; so must what the crash of one target
//! server alone loses, replays and breaks.

use std::collections::HashSet;

use qoslab_engine::order::{OrderAttr, OrderState, TraceKind};
use qoslab_engine::{Command, Control, Harness, LostWrite, Op, ReqFlags, Request, Stage};
use qoslab_fabric::FabricConfig;
use qoslab_fabric::check::target_violations;
use qoslab_fabric::cut::{recover_target, target_loss};
use qoslab_fabric::machine::{Action, Data, Machine};
use qoslab_fabric::plan::Plan;
use qoslab_fabric::stack::{self, StackOps};
use qoslab_fabric::workload::{Shape, Workload};
use qoslab_media::CachedDrive;
use qoslab_nvme::transport::rdma::Rdma;
use qoslab_sim::DeviceConfig;
use qoslab_sim::path::{FabricPath, PathPlan, fabric_path};

const BLOCK: u64 = 4096;

/// Two targets with a small drive each, stripe units of 8 blocks (so writes split).
fn device(plp: bool, in_order: bool) -> DeviceConfig {
    let text = format!(
        "description = \"test\"\n[path]\ntransport = \"rdma\"\n\
         [fabric]\ntargets = 2\nstripe_bytes = 32768\nmerge_batch = 8\ncores = 2\n\
         [block.rio]\nin_order_completion = {in_order}\n\
         [media]\nmodel = \"cached\"\nunits = 2\nwrite_ns = 3000\nbandwidth = 4\n\
         flush_ns = {}\nplp = {plp}\n",
        if plp { 0 } else { 5000 }
    );
    DeviceConfig::from_text(&text, "ordering-test.toml", &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// The checker's configuration of the same setup.
fn checker_cfg(plp: bool, in_order: bool) -> FabricConfig {
    let sets: Vec<(String, String)> = [
        ("targets", "2".to_string()),
        ("plp", plp.to_string()),
        ("mdts_bytes", "32768".to_string()),
        ("merge_batch", "8".to_string()),
        ("in_order_completion", in_order.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    FabricConfig::with_overrides(&sets).unwrap()
}

/// The chain for `w`, every stream's writes submitted at once (one plug each), traced.
fn chain(
    dev: &DeviceConfig,
    ordering: &str,
    w: &Workload,
) -> Harness<FabricPath<Rdma, CachedDrive>> {
    let ops = qoslab_block::ordering::lookup(ordering).unwrap();
    let streams = w.streams.len();
    let plan = PathPlan {
        jobs_per_host: vec![streams as u32],
        seed: 1,
        orderings: vec![Some(ops); streams],
        record: true,
        trace: true,
        fs: None,
    };
    let drives = (0..2)
        .map(|i| dev.build_media::<CachedDrive>(i).unwrap())
        .collect();
    let path =
        fabric_path::<Rdma, CachedDrive>(dev, drives, &plan).unwrap_or_else(|e| panic!("{e}"));
    let mut h = Harness::new(path);
    let mut reqs = Vec::new();
    for (s, stream) in w.streams.iter().enumerate() {
        for (i, wr) in stream.iter().enumerate() {
            let mut r = Request::new(
                Op::Write,
                wr.lba * BLOCK,
                u64::from(wr.blocks) * BLOCK,
                s as u32,
                0,
            );
            r.core = s as u16;
            r.flags = ReqFlags::ORDERED;
            if !wr.group_end {
                r.flags |= ReqFlags::GROUP_MORE;
            }
            if wr.persist {
                r.flags |= ReqFlags::PREFLUSH | ReqFlags::FUA;
            }
            if i + 1 < stream.len() {
                r.flags |= ReqFlags::BATCH_MORE;
            }
            reqs.push(r);
        }
    }
    h.submit_batch(reqs);
    h
}

/// What the stages say at `at`, then the writes the drives lost to `crash` (a power cut, or
/// the crash of one target server).
fn cut(
    h: &mut Harness<FabricPath<Rdma, CachedDrive>>,
    at: u64,
    crash: Command,
) -> (OrderState, Vec<LostWrite>) {
    let mut st = OrderState {
        at_ns: at,
        ..OrderState::default()
    };
    h.stage.collect_order_state(&h.reqs, &mut st);
    h.control(Control::new(at, 0, crash));
    let mut lost = Vec::new();
    h.stage.collect_lost_writes(&mut lost);
    (st, lost)
}

/// What the stages say at `at`, and the writes a power cut there would take, read from the
/// drives (`CachedDrive::writes_at_risk`, what their power loss takes) without cutting: the run
/// goes on. Checked against real power cuts at every event boundary on a sample of the
/// workloads, and at the end of every run.
fn view(h: &Harness<FabricPath<Rdma, CachedDrive>>, at: u64) -> (OrderState, Vec<LostWrite>) {
    let mut st = OrderState {
        at_ns: at,
        ..OrderState::default()
    };
    h.stage.collect_order_state(&h.reqs, &mut st);
    let lost = (h.stage.lower.children().iter())
        .flat_map(|target| target.lower.lower.lower.lower.writes_at_risk(&h.reqs))
        .collect();
    (st, lost)
}

/// Of the writes a power cut took, those target `t`'s drive lost: what the crash of target
/// `t` alone takes, since the fan-out sends `Command::TargetCrash` to that target's stages as
/// the power loss, and to no other (checked against real target crashes on a sample below).
fn lost_on(st: &OrderState, lost: &[LostWrite], t: u16) -> Vec<LostWrite> {
    let on_t: HashSet<(u32, u64, u64)> = st
        .streams
        .iter()
        .flat_map(|r| {
            r.cmds
                .iter()
                .filter(|c| c.target == t)
                .map(move |c| (r.stream, c.offset_bytes, c.len_bytes))
        })
        .collect();
    lost.iter()
        .filter(|l| on_t.contains(&(l.job, l.offset_bytes, l.len_bytes)))
        .copied()
        .collect()
}

/// The machine's actions for the chain's trace, bucketed by time.
fn actions(st: &OrderState, plan: &Plan) -> Vec<(u64, Vec<Action>)> {
    let mut trace = st.trace.clone();
    trace.sort_by_key(|e| (e.at_ns, e.kind));
    let mut out: Vec<(u64, Vec<Action>)> = Vec::new();
    // The command a request id stands for: the last one sent under it.
    let mut live: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for e in &trace {
        let acts: Vec<Action> = match e.kind {
            TraceKind::Meta => vec![Action::Meta(e.stream as usize)],
            TraceKind::Send | TraceKind::Ack => {
                let c = plan.order[e.stream as usize][e.no as usize];
                if e.kind == TraceKind::Send {
                    // A request id freed by an acknowledgement may carry a command sent at the
                    // same instant; the target's steps of it come later.
                    live.insert(e.id.0, c);
                    vec![Action::Send(c)]
                } else {
                    vec![Action::Ack(c)]
                }
            }
            kind => {
                let c = *live.get(&e.id.0).expect("a target step of a command sent");
                match kind {
                    TraceKind::Arrive => vec![Action::Arrive(c)],
                    TraceKind::Log => vec![Action::Log(c)],
                    TraceKind::Submit => vec![Action::Submit(c)],
                    _ => vec![Action::Done(c), Action::Respond(c)],
                }
            }
        };
        match out.last_mut() {
            Some((t, v)) if *t == e.at_ns => v.extend(acts),
            _ => out.push((e.at_ns, acts)),
        }
    }
    out
}

/// Runs `acts` on the machine in an order it allows (they happened at one instant).
fn replay(m: &mut Machine<'_>, mut acts: Vec<Action>, at: u64, what: &str) {
    while !acts.is_empty() {
        let enabled: Vec<Action> = m.enabled(false).to_vec();
        let Some(i) = acts.iter().position(|a| enabled.contains(a)) else {
            panic!(
                "{what}: at {at} ns the chain did {acts:?}, which the checker's machine does not allow (it allows {enabled:?})"
            );
        };
        m.run(acts.remove(i));
    }
}

/// The chain at `at` against the machine after the same steps: acknowledgements, data on the
/// media, PMR logs, heads, HORAE's metadata.
fn compare(
    what: &str,
    st: &OrderState,
    lost: &[LostWrite],
    plp: bool,
    m: &Machine<'_>,
    plan: &Plan,
) {
    let groups = qoslab_fabric::cut::groups(st, lost, plp);
    assert!(groups.len() <= 1, "{what}: one ordering");
    let Some(g) = groups.first() else {
        return;
    };
    for (s, rec) in g.streams.iter().enumerate() {
        let ms = rec.stream as usize;
        let n = plan.requests[ms].len();
        let k = rec.requests.len();
        // The stream forgot the requests before its record: all acknowledged and durable.
        assert!(
            m.acked[ms][..n - k].iter().all(|&a| a),
            "{what}: stream {ms} forgot an unacknowledged request"
        );
        assert_eq!(
            g.acked[s],
            m.acked[ms][n - k..],
            "{what}: acknowledgements of stream {ms}"
        );
        let cmds = &plan.order[ms];
        let kc = rec.cmds.len();
        let first = cmds.len() - kc;
        for (i, &c) in cmds[first..].iter().enumerate() {
            let chain = g.image.data[g.plan.order[s][i]] == Data::Durable;
            let checker = m.image.data[c] == Data::Durable && !plan.cmds[c].flush_only;
            assert_eq!(chain, checker, "{what}: data of command {c} of stream {ms}");
        }
        for &c in &cmds[..first] {
            assert!(
                plan.cmds[c].flush_only || m.image.data[c] == Data::Durable,
                "{what}: stream {ms} forgot command {c}, not durable"
            );
        }
        for (r, req) in rec.requests.iter().enumerate() {
            let meta_chain = g.image.meta[s][r];
            let meta_checker = m.image.meta[ms][n - k + r];
            assert_eq!(
                meta_chain,
                meta_checker,
                "{what}: HORAE metadata of request {} (seq {})",
                n - k + r,
                req.seq
            );
        }
    }
    for p in &st.pmrs {
        let t = p.target as usize;
        let checker: Vec<OrderAttr> = m.image.logs[t].iter().map(|&c| m.image.attrs[c]).collect();
        assert_eq!(p.log, checker, "{what}: PMR log of target {t}");
        for &(s, h) in &p.head_seq {
            assert_eq!(
                h, m.image.head_seq[t][s as usize],
                "{what}: head of target {t}, stream {s}"
            );
        }
    }
}

/// The kinds of violations, each once, sorted (the two sides number a stream's writes
/// differently: the chain's record starts at its first request not known durable).
fn kinds<'a>(v: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut k: Vec<&str> = v.collect();
    k.sort_unstable();
    k.dedup();
    k
}

/// The crash of target `t` alone at `at`, in the chain (its cut's `recover_target` over what
/// `t`'s drive lost) against the machine after the same steps (`lost_with_target`, the
/// stack's `replay_on_target`, `target_violations`): per command, lost for good and surviving;
/// per stream, the violations' kinds; the counts the report gives.
#[allow(clippy::too_many_arguments)]
fn compare_target(
    what: &str,
    st: &OrderState,
    lost_t: &[LostWrite],
    plp: bool,
    m: &Machine<'_>,
    plan: &Plan,
    s: &StackOps,
    t: u16,
) -> [u64; 3] {
    let tu = t as usize;
    let lost = m.lost_with_target(tu);
    let replay = (s.replay_on_target)(plan, &m.image, tu);
    let gone = |c: usize| lost[c] && !replay[c];
    let groups = qoslab_fabric::cut::groups(st, lost_t, plp);
    if let Some(g) = groups.first() {
        let loss = target_loss(g, tu);
        for (si, rec) in g.streams.iter().enumerate() {
            let ms = rec.stream as usize;
            let cmds = &plan.order[ms];
            let first = cmds.len() - rec.cmds.len();
            for (i, &c) in cmds[first..].iter().enumerate() {
                let gc = g.plan.order[si][i];
                assert_eq!(
                    loss.from_cache[gc], lost[c],
                    "{what}: command {c} of stream {ms} lost from target {t}'s cache"
                );
                assert_eq!(
                    loss.gone(gc),
                    gone(c),
                    "{what}: command {c} of stream {ms} gone for good"
                );
                assert_eq!(
                    loss.survives(gc),
                    m.sent(c) && !gone(c),
                    "{what}: command {c} of stream {ms} survives"
                );
            }
            // Commands the stream forgot were durable: no crash takes them.
            assert!(
                cmds[..first].iter().all(|&c| !lost[c]),
                "{what}: stream {ms} forgot a command target {t}'s crash takes"
            );
        }
    }
    let chain = recover_target(st, lost_t, plp, t);
    let checker = target_violations(plan, s, m, tu);
    for out in &chain.streams {
        let ms = out.stream as usize;
        assert_eq!(
            kinds(out.violations.iter().map(|v| v.kind.as_str())),
            kinds(
                checker
                    .iter()
                    .filter(|v| v.stream == ms)
                    .map(|v| v.kind.as_str())
            ),
            "{what}: violations of stream {ms} after target {t}'s crash"
        );
    }
    let counts = chain.target_crash.expect("a target crash");
    let n = plan.cmds.len();
    assert_eq!(
        (
            counts.lost_from_cache,
            counts.replayed,
            counts.lost_for_good
        ),
        (
            (0..n).filter(|&c| lost[c]).count() as u64,
            (0..n).filter(|&c| lost[c] && replay[c]).count() as u64,
            plan.requests
                .iter()
                .flatten()
                .filter(|r| r.cmds.iter().any(|&c| gone(c)))
                .count() as u64
        ),
        "{what}: lost from target {t}'s cache, replayed, requests lost for good"
    );
    [
        counts.lost_from_cache,
        counts.replayed,
        counts.lost_for_good,
    ]
}

/// One workload under one stack: the machine replays the chain, and every event boundary is
/// a cut compared between the two. Returns the number of cuts.
fn differential(
    w: &Workload,
    ordering: &str,
    s: &'static StackOps,
    plp: bool,
    in_order: bool,
    real_cuts: bool,
    label: &str,
) -> (usize, [u64; 3]) {
    let dev = device(plp, in_order);
    let cfg = checker_cfg(plp, in_order);
    let plan = Plan::build(w, &cfg, s.plan);
    let mut h = chain(&dev, ordering, w);
    h.run_all();
    let end = h.now_ns();
    assert_eq!(
        h.completed.len(),
        w.writes(),
        "{label}: every write completes"
    );
    let seen = view(&h, end);
    let (whole, lost) = cut(&mut h, end, Command::PowerLoss);
    assert_eq!(
        seen,
        (whole.clone(), lost),
        "{label}: what a power cut at the end takes, seen before it"
    );
    let steps = actions(&whole, &plan);
    let mut m = Machine::new(&plan, s, &cfg, 0);
    for (at, acts) in &steps {
        replay(&mut m, acts.clone(), *at, label);
    }
    assert!(
        m.finished(),
        "{label}: the machine has commands left after the chain's trace"
    );
    let (mut cuts, mut crashed) = (0, [0u64; 3]);
    // Each boundary: one run of the chain stopped there and seen as a power cut would leave
    // it (a fresh chain run to it and cut, on the sample); the machine replays up to it.
    let mut m = Machine::new(&plan, s, &cfg, 0);
    let mut h = chain(&dev, ordering, w);
    for (at, acts) in &steps {
        replay(&mut m, acts.clone(), *at, label);
        h.run_until(*at);
        let (st, lost) = view(&h, *at);
        let what = format!("{label}, cut at {at} ns");
        if real_cuts {
            let mut h = chain(&dev, ordering, w);
            h.run_until(*at);
            assert_eq!(
                cut(&mut h, *at, Command::PowerLoss),
                (st.clone(), lost.clone()),
                "{what}: a power cut leaves what the run showed"
            );
        }
        compare(&what, &st, &lost, plp, &m, &plan);
        for t in 0..2u16 {
            let lost_t = lost_on(&st, &lost, t);
            if real_cuts {
                // The crash of target t alone, in a chain of its own, loses exactly what the
                // power cut took from t's drive.
                let mut h = chain(&dev, ordering, w);
                h.run_until(*at);
                let (alone, mut crashed) = cut(&mut h, *at, Command::TargetCrash { target: t });
                assert_eq!(
                    alone, st,
                    "{what}: the stages' state before target {t}'s crash"
                );
                let mut expect = lost_t.clone();
                let key = |l: &LostWrite| {
                    (
                        l.job,
                        l.offset_bytes,
                        l.len_bytes,
                        l.queued_ns,
                        l.acknowledged,
                    )
                };
                crashed.sort_by_key(key);
                expect.sort_by_key(key);
                assert_eq!(crashed, expect, "{what}: writes target {t}'s crash took");
            }
            let counts = compare_target(&what, &st, &lost_t, plp, &m, &plan, s, t);
            for (sum, n) in crashed.iter_mut().zip(counts) {
                *sum += n;
            }
        }
        cuts += 1;
    }
    (cuts, crashed)
}

#[test]
fn the_chain_keeps_the_crash_checkers_rules_at_every_event_boundary() {
    // 1,000 seeded workloads of 2 streams of 4 writes (some split at the 8-block stripe
    // unit, some merged, groups of several writes, FLUSHes), each under the four stacks,
    // flash without PLP and Optane with it in turn. Every event boundary is a power cut and,
    // for each of the two targets, the crash of that target alone.
    let shape = Shape {
        streams: 2,
        writes_per_stream: 4,
        max_blocks: 12,
        ..Shape::default()
    };
    let stacks: [(&str, &'static StackOps); 4] = [
        ("none", &stack::ORDERLESS),
        ("flush", &stack::LINUX),
        ("horae", &stack::HORAE),
        ("rio", &stack::RIO),
    ];
    let mut cuts = 0;
    // Per stack: commands lost from a crashed target's cache, replayed, requests lost for good.
    let mut crashed = [[0u64; 3]; 4];
    for seed in 0..1000u64 {
        let w = Workload::generate(seed, &shape);
        let plp = seed % 2 == 1;
        for (k, (ordering, s)) in stacks.into_iter().enumerate() {
            let label = format!("workload {seed}, {ordering}, plp {plp}");
            // On a sample of the workloads, each boundary is also cut for real: a power cut
            // and each target's crash, each in a chain of its own.
            let real = seed % 50 == 0;
            let (n, counts) = differential(&w, ordering, s, plp, true, real, &label);
            cuts += n;
            for (sum, c) in crashed[k].iter_mut().zip(counts) {
                *sum += c;
            }
        }
    }
    assert!(cuts > 50_000, "{cuts} cuts");
    eprintln!("target crashes (lost from cache, replayed, lost for good) per stack: {crashed:?}");
    // The target crashes compared were not all harmless: under every stack some took cached
    // writes; Rio and HORAE replayed some of them, and the stacks that replay nothing lost
    // requests for good.
    let [none, flush, horae, rio] = crashed;
    assert!(crashed.iter().all(|c| c[0] > 0), "{crashed:?}");
    assert!(horae[1] > 0 && rio[1] > 0, "{crashed:?}");
    assert!(none[2] > 0 && flush[2] > 0, "{crashed:?}");
}

#[test]
fn rio_without_in_order_completion_is_followed_too() {
    let shape = Shape {
        streams: 2,
        writes_per_stream: 5,
        max_blocks: 12,
        ..Shape::default()
    };
    for seed in 0..100u64 {
        let w = Workload::generate(seed, &shape);
        let label = format!("workload {seed}, rio without in-order completion");
        differential(
            &w,
            "rio",
            &stack::RIO,
            seed % 2 == 0,
            false,
            seed % 25 == 0,
            &label,
        );
    }
}

#[test]
fn under_linux_ordering_a_flush_reaches_every_target_before_the_next_write_goes() {
    // Linux's FLUSH ordering on two targets (one volume: dm-stripe sends a flush to each of
    // its devices), whole runs of 200 seeded workloads, with and without PLP: after each
    // ordered write, a FLUSH to every target, each sent once the whole write completed (the
    // file system waits for the write, then flushes the volume: also the FLUSH to a target
    // the write did not touch); the stream's next write goes only once every one of those
    // FLUSHes completed. So each write is durable on its drive, whichever target it went to,
    // before its successor is sent.
    let shape = Shape {
        streams: 2,
        writes_per_stream: 5,
        max_blocks: 12,
        ..Shape::default()
    };
    let (mut checked, mut writes) = (0, 0);
    for seed in 0..200u64 {
        let w = Workload::generate(seed, &shape);
        writes += w.writes();
        let plp = seed % 2 == 1;
        let dev = device(plp, true);
        let plan = Plan::build(&w, &checker_cfg(plp, true), stack::LINUX.plan);
        let mut h = chain(&dev, "flush", &w);
        h.run_all();
        assert_eq!(h.completed.len(), w.writes(), "workload {seed}");
        let end = h.now_ns();
        let (st, _) = cut(&mut h, end, Command::PowerLoss);
        let n = plan.cmds.len();
        let (mut sent, mut acked) = (vec![None; n], vec![None; n]);
        for e in &st.trace {
            let c = plan.order[e.stream as usize][e.no as usize];
            match e.kind {
                TraceKind::Send => sent[c] = Some(e.at_ns),
                TraceKind::Ack => acked[c] = Some(e.at_ns),
                _ => {}
            }
        }
        for (s, reqs) in plan.requests.iter().enumerate() {
            for (r, req) in reqs.iter().enumerate() {
                let what = format!("workload {seed}, stream {s}, request {r}");
                let (flushes, data): (Vec<usize>, Vec<usize>) = req
                    .cmds
                    .iter()
                    .copied()
                    .partition(|&c| plan.cmds[c].flush_only);
                let mut targets: Vec<usize> =
                    flushes.iter().map(|&c| plan.cmds[c].target).collect();
                targets.sort_unstable();
                assert_eq!(targets, [0, 1], "{what}: a FLUSH to every target");
                let flushed = flushes
                    .iter()
                    .map(|&c| acked[c].expect("acknowledged"))
                    .max();
                let written = data.iter().map(|&d| acked[d].expect("acknowledged")).max();
                for &f in &flushes {
                    let t = plan.cmds[f].target;
                    assert!(
                        sent[f].expect("sent") >= written.expect("a write"),
                        "{what}: the FLUSH to target {t} went before the write completed"
                    );
                }
                if let Some(next) = reqs.get(r + 1) {
                    for &c in &next.cmds {
                        assert!(
                            sent[c].expect("sent") >= flushed.expect("flushed"),
                            "{what}: the next write went before every FLUSH completed"
                        );
                    }
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, writes);
}
