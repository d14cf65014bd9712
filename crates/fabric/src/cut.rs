//! A power cut of a simulated path (`qoslab sim --power-fail-at`): the crash image built from
//! what the stages say at the cut (the block layer's ordered streams, each target's PMR, the
//! drives' lost writes), the stack's recovery (Rio 4.3.2, 4.4.1, 4.8; HORAE's from its
//! metadata), the crash checker's prefix and FLUSH tests, and how long recovery takes on the
//! simulated clock (Rio 6.5).
//!
//! The image is the one the crash checker's machine keeps ([`CrashImage`]): per command, its
//! data (durable when the drive finished it and the cut did not take it), its attribute with
//! the `persist` bit the target set, each target's live log and recycled head, HORAE's
//! persisted metadata. Each ordering's streams are recovered by that stack's rules.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;

use qoslab_engine::order::{OrderState, StreamRecord};
use qoslab_engine::{LostWrite, Ns, Settings};

use crate::check::{Violation, judge_acked};
use crate::machine::{CrashImage, Data};
use crate::plan::{Cmd, Plan, Request};
use crate::stack::{self, PmrLog, StackOps};

qoslab_engine::settings! {
    /// `[fabric.recovery]`: what each step of recovery costs.
    pub struct RecoveryConfig in RECOVERY_TUNABLES {
        pmr_read_gb_per_s: f64 = rate(0.0533, "a target reading its PMR log back by MMIO: 32 B per 0.6 us (model assumption: the document's 0.6 us persistent MMIO write of a 32 B attribute, 6.1, ends with an MMIO read of it; no read figure is published)"),
        list_message_bytes: u64 = bytes(4096, "PMR entries a target sends the initiator per message (model choice: one page)").range(32.0, 16777216.0),
        merge_ns: Ns = ns(50, "initiator time to merge one entry into its stream's global order: the per-server lists arrive sorted, so a k-way merge step is a compare and an append (model assumption)"),
        discard_block_ns: Ns = ns(20000, "a drive unit discarding one 4 KiB block of a command after the cut (model assumption: as long as one flash write)"),
        discard_units: u32 = count(9, "discards one drive serves at once (model assumption: its write units)").range(1.0, 4096.0),
        cut_entry_bytes: u64 = bytes(8, "per stream, the bytes of the global order's cut sent back to each target (its first sequence number not kept; model choice)").range(1.0, 4096.0),
    }
}

impl RecoveryConfig {
    /// The table with `recovery.KEY=VALUE` overrides; other keys are left to other tables.
    pub fn with_overrides(sets: &[(String, String)]) -> Result<Self, String> {
        let mut s = Settings::defaults("fabric.recovery", RECOVERY_TUNABLES);
        for (key, value) in sets {
            if let Some(name) = key.strip_prefix("recovery.") {
                s.set(name, &qoslab_engine::RawValue::from_cli(value))
                    .map_err(|e| format!("{key}: {e}"))?;
            }
        }
        Ok(Self::from_settings(&s))
    }
}

/// What recovery's messages and the servers cost (the path's transport and targets).
#[derive(Clone, Debug, PartialEq)]
pub struct RecoveryCosts {
    pub cfg: RecoveryConfig,
    pub message_ns: Ns,
    pub link_gb_per_s: f64,
    pub message_cycles: u64,
    pub submit_cycles: u64,
    pub complete_cycles: u64,
    pub cpu_ghz: f64,
    pub target_cores: u32,
}

/// What recovery found after a cut, and how long it took.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Recovery {
    pub power_fail_at_ns: Ns,
    /// Every ordered stream was left at a prefix of its groups.
    pub prefix_ok: bool,
    /// Writes at or before a write acknowledged with a FLUSH that did not survive.
    pub acked_lost: u64,
    /// PMR entries recovery read back (Rio's live attributes, HORAE's metadata), every target.
    pub attributes_scanned: u64,
    pub order_rebuild_ms: f64,
    pub data_recovery_ms: f64,
    pub discarded_commands: u64,
    pub discarded_blocks: u64,
    pub streams: Vec<StreamOutcome>,
    /// After the crash of one target server (`--crash-target`) instead of a power cut: what
    /// it lost and what its recovery wrote again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_crash: Option<TargetCrash>,
}

/// The crash of one target server: its drive's volatile cache and the commands it held are
/// gone; the initiator, the other targets and every PMR stay up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TargetCrash {
    pub target: u16,
    /// Commands that had completed into the crashed target's volatile cache (gone with it).
    pub lost_from_cache: u64,
    /// Of those, the commands the stack's target recovery writes to the target again.
    pub replayed: u64,
    /// Requests with a write gone for good (lost from the cache and not written again).
    pub lost_for_good: u64,
}

/// One ordered stream after recovery.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamOutcome {
    pub stream: u32,
    pub ordering: String,
    /// Requests not known durable before the cut (the others survive, whatever happens).
    pub requests: u64,
    pub acknowledged: u64,
    /// Of those, requests acknowledged with a FLUSH.
    pub acknowledged_flushes: u64,
    /// Of those, requests whose data is whole on the media after recovery.
    pub survived: u64,
    pub violations: Vec<Violation>,
}

/// One ordering's streams at a cut as the crash checker's plan and image (its streams
/// numbered from 0 in the order of `streams`).
pub struct Group<'a> {
    pub stack: &'static StackOps,
    pub streams: Vec<&'a StreamRecord>,
    pub plan: Plan,
    pub image: CrashImage,
    /// Per stream, per request: acknowledged to the application.
    pub acked: Vec<Vec<bool>>,
}

/// The cut `state` whose drives lost `lost`, one group per ordering (by name).
pub fn groups<'a>(state: &'a OrderState, lost: &[LostWrite], plp: bool) -> Vec<Group<'a>> {
    let mut lost_at: HashMap<(u32, u64, u64), u32> = HashMap::new();
    for l in lost {
        *lost_at
            .entry((l.job, l.offset_bytes, l.len_bytes))
            .or_default() += 1;
    }
    let targets = state
        .pmrs
        .iter()
        .map(|p| p.target as usize + 1)
        .max()
        .unwrap_or(1);
    let mut names: Vec<&'static str> = state.streams.iter().map(|s| s.ordering).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let streams: Vec<&StreamRecord> = state
                .streams
                .iter()
                .filter(|s| s.ordering == name)
                .collect();
            group(
                stack::for_ordering(name),
                streams,
                state,
                &lost_at,
                plp,
                targets,
            )
        })
        .collect()
}

/// Recovers the cut `state` whose drives lost `lost` (`plp`: they have power-loss protection).
pub fn recover(
    state: &OrderState,
    lost: &[LostWrite],
    plp: bool,
    costs: &RecoveryCosts,
) -> Recovery {
    let targets = state
        .pmrs
        .iter()
        .map(|p| p.target as usize + 1)
        .max()
        .unwrap_or(1);
    let mut out = Recovery {
        power_fail_at_ns: state.at_ns,
        prefix_ok: true,
        ..Recovery::default()
    };
    // Per target: (entries read, bytes each) per kind, and the blocks each discard erases.
    let mut read: Vec<Vec<(u64, u64)>> = vec![Vec::new(); targets];
    let mut discards: Vec<Vec<u64>> = vec![Vec::new(); targets];
    for g in groups(state, lost, plp) {
        let erase = (g.stack.recover)(&g.plan, &g.image);
        judge_group(
            &g,
            |c| g.image.data[c] == Data::Durable && !erase[c],
            &mut out,
        );
        // What recovery reads back and erases.
        match g.stack.pmr_log {
            PmrLog::None => {}
            PmrLog::Attributes => {
                for p in &state.pmrs {
                    let n = p
                        .log
                        .iter()
                        .filter(|a| g.streams.iter().any(|s| s.stream == a.stream))
                        .count() as u64;
                    read[p.target as usize].push((n, p.attr_bytes));
                }
            }
            PmrLog::Metadata => {
                for p in &state.pmrs {
                    let n = p
                        .meta
                        .iter()
                        .filter(|&&(s, _)| g.streams.iter().any(|r| r.stream == s))
                        .count() as u64;
                    read[p.target as usize].push((n, p.meta_bytes));
                }
            }
        }
        if g.stack.pmr_log != PmrLog::None {
            for (c, cmd) in g.plan.cmds.iter().enumerate() {
                if erase[c] && !cmd.flush_only && cmd.attr.blocks > 0 {
                    out.discarded_commands += 1;
                    out.discarded_blocks += u64::from(cmd.attr.blocks);
                    discards[cmd.target].push(u64::from(cmd.attr.blocks));
                }
            }
        }
    }
    out.attributes_scanned = read.iter().flatten().map(|&(n, _)| n).sum();
    if read.iter().flatten().next().is_some() {
        let (rebuild, data) = timing(&read, &discards, state.streams.len() as u64, costs);
        out.order_rebuild_ms = rebuild as f64 / 1e6;
        out.data_recovery_ms = data as f64 / 1e6;
    }
    out
}

/// Judges one ordering's streams given which commands' data survives: each stream's outcome,
/// its violations, and the writes lost that a FLUSH had acknowledged.
fn judge_group(g: &Group<'_>, survives: impl Fn(usize) -> bool, out: &mut Recovery) {
    let violations = judge_acked(&g.plan, &g.acked, &survives);
    out.prefix_ok &= !violations.iter().any(|v| v.kind == "prefix");
    for (s, rec) in g.streams.iter().enumerate() {
        let reqs = &g.plan.requests[s];
        let whole = |r: &Request| {
            r.cmds
                .iter()
                .all(|&c| g.plan.cmds[c].flush_only || survives(c))
        };
        // Writes the application could rely on: at or before its last FLUSH acknowledged.
        let relied = reqs
            .iter()
            .enumerate()
            .filter(|&(r, q)| q.persist && g.acked[s][r])
            .map(|(_, q)| q.seq)
            .max();
        if let Some(upto) = relied {
            out.acked_lost += reqs
                .iter()
                .filter(|q| q.seq <= upto && !q.cmds.is_empty() && !whole(q))
                .count() as u64;
        }
        out.streams.push(StreamOutcome {
            stream: rec.stream,
            ordering: rec.ordering.to_string(),
            requests: reqs.len() as u64,
            acknowledged: g.acked[s].iter().filter(|&&a| a).count() as u64,
            acknowledged_flushes: reqs
                .iter()
                .zip(&g.acked[s])
                .filter(|&(q, &a)| q.persist && a)
                .count() as u64,
            survived: reqs.iter().filter(|q| whole(q)).count() as u64,
            violations: violations
                .iter()
                .filter(|v| v.stream == s)
                .cloned()
                .map(|mut v| {
                    v.stream = rec.stream as usize;
                    v
                })
                .collect(),
        });
    }
}

/// What the crash of one target server does to each command of a group's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetLoss {
    /// The command left the initiator (the rest of its stream's order is still to be sent).
    pub sent: Vec<bool>,
    /// The target had answered it and its data was in the crashed drive's volatile cache:
    /// gone with it, and the initiator holds no copy it must send again.
    pub from_cache: Vec<bool>,
    /// The stack's target recovery writes it to the restarted target again.
    pub replay: Vec<bool>,
}

impl TargetLoss {
    /// Its data is gone for good.
    pub fn gone(&self, c: usize) -> bool {
        self.from_cache[c] && !self.replay[c]
    }

    /// Its data reaches the media in the end.
    pub fn survives(&self, c: usize) -> bool {
        self.sent[c] && !self.gone(c)
    }
}

/// What the crash of target server `t` does to `g`'s commands, with the rule the crash
/// checker proves (`Machine::lost_with_target`, `check::target_violations`).
///
/// Only a command the target had *answered* can be lost from its cache. The initiator sends a
/// command again until it receives a successful completion response (Rio 4.4.1, "Target
/// recovery": it "re-sends W4 to target 1 until a successful completion response is
/// received"; NVMe-oF's host requeues the commands a lost connection left without one), so a
/// command whose data reached the crashed drive's cache before the target answered it is
/// written again whatever the stack; one the target had answered is written again only if the
/// stack's target recovery replays it (Rio: its attribute in the log is not persistent;
/// HORAE: its metadata names it). On a path with target servers the target answers a command
/// at the instant its drive completes it (`path.rs` builds target paths with the
/// controller's early completions only), so the record's `media_done` is that answer, and a
/// cut at any event boundary never finds a command done by the drive and not yet answered.
/// The differential test (`crates/sim/tests/path/ordering.rs`) holds this rule to the
/// checker's at every event boundary.
pub fn target_loss(g: &Group<'_>, t: usize) -> TargetLoss {
    // The plan's commands are the records' in order, then attributes of durable requests
    // still in a log (sent, durable).
    let n = g.plan.cmds.len();
    let (mut sent, mut from_cache) = (vec![true; n], vec![false; n]);
    for (c, cmd) in g.streams.iter().flat_map(|r| &r.cmds).enumerate() {
        sent[c] = cmd.sent;
        let answered = cmd.media_done;
        from_cache[c] = cmd.target as usize == t
            && answered
            && !cmd.flush_only
            && g.image.data[c] != Data::Durable;
    }
    TargetLoss {
        sent,
        from_cache,
        replay: (g.stack.replay_on_target)(&g.plan, &g.image, t),
    }
}

/// Recovers the cut `state` after target server `target` crashed and restarted (Rio 4.4.1,
/// "Target recovery"), with the rule the crash checker proves ([`target_loss`]): a command the
/// target had answered into its drive's volatile cache (its drive lost it, among `lost`) is
/// gone unless the stack's target recovery writes it again; every other command the
/// initiator sent reaches the media in the end, on a live target or sent again to the
/// restarted one. Recovery time is not modelled for a target crash (0).
pub fn recover_target(state: &OrderState, lost: &[LostWrite], plp: bool, target: u16) -> Recovery {
    let t = target as usize;
    let mut out = Recovery {
        power_fail_at_ns: state.at_ns,
        prefix_ok: true,
        ..Recovery::default()
    };
    let mut crash = TargetCrash {
        target,
        ..TargetCrash::default()
    };
    for g in groups(state, lost, plp) {
        let loss = target_loss(&g, t);
        let n = g.plan.cmds.len();
        crash.lost_from_cache += loss.from_cache.iter().filter(|&&l| l).count() as u64;
        crash.replayed += (0..n)
            .filter(|&c| loss.from_cache[c] && loss.replay[c])
            .count() as u64;
        crash.lost_for_good += g
            .plan
            .requests
            .iter()
            .flatten()
            .filter(|r| r.cmds.iter().any(|&c| loss.gone(c)))
            .count() as u64;
        if g.stack.pmr_log == PmrLog::Attributes {
            out.attributes_scanned += g.image.logs.get(t).map_or(0, |l| l.len() as u64);
        }
        judge_group(&g, |c| loss.survives(c), &mut out);
    }
    out.target_crash = Some(crash);
    out
}

/// Builds one ordering's plan and crash image from the records.
fn group<'a>(
    stack: &'static StackOps,
    streams: Vec<&'a StreamRecord>,
    state: &OrderState,
    lost_at: &HashMap<(u32, u64, u64), u32>,
    plp: bool,
    targets: usize,
) -> Group<'a> {
    let mut plan = Plan {
        cmds: Vec::new(),
        requests: Vec::new(),
        order: Vec::new(),
    };
    let mut data = Vec::new();
    let mut acked = Vec::new();
    let mut meta = Vec::new();
    // HORAE's persisted metadata, (stream, request number), looked up once per request.
    let logged: HashSet<(u32, u64)> = state
        .pmrs
        .iter()
        .flat_map(|p| p.meta.iter().copied())
        .collect();
    // (stream, target, seq_start, seq_end, lba, blocks) -> command, to find logged attributes.
    let mut by_attr: HashMap<(u32, usize, u64, u64, u64, u32), usize> = HashMap::new();
    for (s, rec) in streams.iter().enumerate() {
        let first = plan.cmds.len();
        for c in &rec.cmds {
            let id = plan.cmds.len();
            by_attr.insert(
                (
                    rec.stream,
                    c.target as usize,
                    c.attr.seq_start,
                    c.attr.seq_end,
                    c.attr.lba,
                    c.attr.blocks,
                ),
                id,
            );
            let gone = lost_at.contains_key(&(rec.stream, c.offset_bytes, c.len_bytes));
            data.push(if c.media_done && !gone && !c.flush_only {
                Data::Durable
            } else {
                Data::None
            });
            plan.cmds.push(Cmd {
                stream: s,
                target: c.target as usize,
                attr: c.attr,
                writes: c.writes.clone(),
                flush_only: c.flush_only,
            });
        }
        plan.order.push((first..plan.cmds.len()).collect());
        plan.requests.push(
            rec.requests
                .iter()
                .map(|r| Request {
                    seq: r.seq,
                    persist: r.persist,
                    cmds: r.cmds.iter().map(|&c| c + first).collect(),
                })
                .collect(),
        );
        acked.push(rec.requests.iter().map(|r| r.acked).collect());
        meta.push(
            (0..rec.requests.len() as u64)
                .map(|r| logged.contains(&(rec.stream, rec.first + r)))
                .collect(),
        );
    }
    let mut attrs: Vec<_> = plan.cmds.iter().map(|c| c.attr).collect();
    let mut logs = vec![VecDeque::new(); targets];
    let mut head_seq = vec![vec![0u64; streams.len()]; targets];
    for p in &state.pmrs {
        let t = p.target as usize;
        for &(ps, h) in &p.head_seq {
            if let Some(s) = streams.iter().position(|r| r.stream == ps) {
                head_seq[t][s] = h;
            }
        }
        for a in &p.log {
            let Some(s) = streams.iter().position(|r| r.stream == a.stream) else {
                continue;
            };
            let key = (a.stream, t, a.seq_start, a.seq_end, a.lba, a.blocks);
            let c = match by_attr.get(&key) {
                Some(&c) => c,
                None => {
                    // An attribute of a request the block layer already knows durable: it
                    // stays in the log until the head passes it.
                    let c = plan.cmds.len();
                    plan.cmds.push(Cmd {
                        stream: s,
                        target: t,
                        attr: *a,
                        writes: Vec::new(),
                        flush_only: true,
                    });
                    attrs.push(*a);
                    data.push(Data::Durable);
                    c
                }
            };
            let mut logged = *a;
            logged.stream = s as u32;
            attrs[c] = logged;
            logs[t].push_back(c);
        }
    }
    // The checker's recovery numbers streams from 0, in the order of the plan.
    for (c, a) in attrs.iter_mut().enumerate() {
        a.stream = plan.cmds[c].stream as u32;
    }
    Group {
        stack,
        streams,
        plan,
        image: CrashImage {
            plp,
            data,
            attrs,
            logs,
            head_seq,
            meta,
        },
        acked,
    }
}

/// When a serial resource that is free at `free` finishes `d` started no earlier than `at`.
fn book(free: &mut Ns, at: Ns, d: Ns) -> Ns {
    *free = at.max(*free) + d;
    *free
}

/// The earliest free of `pool` works `d` from `at`.
fn book_pool(pool: &mut [Ns], at: Ns, d: Ns) -> Ns {
    let i = (0..pool.len()).min_by_key(|&i| pool[i]).expect("servers");
    book(&mut pool[i], at, d)
}

/// Recovery on idle servers (Rio 4.4.1, 6.5): each target reads its PMR entries back one after
/// the other and sends them to the initiator a page at a time; the initiator merges each page
/// as it arrives (the rebuild ends when it has every target's list); it then sends each target
/// the cut, and the target discards the data of every command after it on its drive's units and
/// answers (data recovery). Returns (rebuild, data recovery) in ns.
fn timing(
    read: &[Vec<(u64, u64)>],
    discards: &[Vec<u64>],
    streams: u64,
    c: &RecoveryCosts,
) -> (Ns, Ns) {
    let rc = &c.cfg;
    let ns = |cycles: u64| (cycles as f64 / c.cpu_ghz).round() as Ns;
    let wire = |bytes: u64| {
        if c.link_gb_per_s <= 0.0 {
            0
        } else {
            (bytes as f64 / c.link_gb_per_s).round() as Ns
        }
    };
    let read_ns = |bytes: u64| (bytes as f64 / rc.pmr_read_gb_per_s).round() as Ns;
    let mut cores: Vec<Vec<Ns>> = read
        .iter()
        .map(|_| vec![0; c.target_cores.max(1) as usize])
        .collect();
    let mut arrivals: Vec<(Ns, u64)> = Vec::new();
    for (t, kinds) in read.iter().enumerate() {
        let (mut pmr, mut link) = (0, 0);
        for &(n, bytes) in kinds {
            let per_message = (rc.list_message_bytes / bytes.max(1)).max(1);
            let mut sent = 0;
            // An empty log still answers: the initiator waits for every target's list.
            loop {
                let k = (n - sent).min(per_message);
                let done = book(&mut pmr, 0, read_ns(k * bytes));
                let posted = book_pool(&mut cores[t], done, ns(c.message_cycles));
                let at = book(&mut link, posted, wire(k * bytes)) + c.message_ns;
                arrivals.push((at, k));
                sent += k;
                if sent >= n {
                    break;
                }
            }
        }
    }
    arrivals.sort_unstable();
    let mut initiator = 0;
    for &(at, k) in &arrivals {
        book(&mut initiator, at, ns(c.message_cycles) + k * rc.merge_ns);
    }
    let rebuild = initiator;
    let mut answers = Vec::new();
    for (t, blocks) in discards.iter().enumerate() {
        let posted = book(&mut initiator, rebuild, ns(c.message_cycles));
        let arrived = posted + wire(rc.cut_entry_bytes * streams) + c.message_ns;
        let mut done = book_pool(&mut cores[t], arrived, ns(c.message_cycles));
        let mut units = vec![0; rc.discard_units.max(1) as usize];
        for &b in blocks {
            let submitted = book_pool(&mut cores[t], arrived, ns(c.submit_cycles));
            done = done.max(book_pool(&mut units, submitted, b * rc.discard_block_ns));
        }
        let answered = book_pool(
            &mut cores[t],
            done,
            ns(c.complete_cycles + c.message_cycles),
        );
        answers.push(answered + wire(16) + c.message_ns);
    }
    answers.sort_unstable();
    let end = answers
        .into_iter()
        .map(|at| book(&mut initiator, at, ns(c.complete_cycles + c.message_cycles)))
        .max()
        .unwrap_or(rebuild);
    (rebuild, end - rebuild)
}
