//! The timed model: the event machine of [`crate::machine`] (the same stacks, the same ordering
//! rules) driven by a clock instead of a random schedule. Every enabled event is given the time
//! it takes on the resources it uses (an initiator thread per stream, the target's cores, the
//! link of each direction, the PMR, the SSD's parallel units) and runs when that time comes, so
//! throughput, latency and the CPU cycles of each server are outputs of the same rules the crash
//! checker checks. A run may be cut at a time: the crash image then goes through the stack's
//! recovery and the checker's test.
//!
//! The fabric's costs are the transport's own table (`crates/nvme`, `[rdma]` or `[tcp]`); the
//! servers' CPU, the PMR and the two SSDs of the document are `[fabric.timed]` below.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use serde::Serialize;

use qoslab_engine::{Ns, RngStream, Settings};
use qoslab_nvme::transport::nvmeof::{CAPSULE_BYTES, FabricCosts, RESPONSE_BYTES};
use qoslab_nvme::transport::rdma::{RDMA_TUNABLES, RdmaConfig};
use qoslab_nvme::transport::tcp::{TCP_TUNABLES, TcpConfig};

use crate::FabricConfig;
use crate::check::{Violation, target_violations, violations};
use crate::machine::{Action, Data, Machine};
use crate::plan::Plan;
use crate::recovery_time::{RecoveryConfig, RecoveryTime};
use crate::stack::StackOps;
use crate::workload::{Workload, Write};

qoslab_engine::settings! {
    /// `[fabric.timed]`: the servers' CPUs, the PMR and the SSDs of the timed model.
    pub struct TimedConfig in TIMED_TUNABLES {
        transport: String = text("rdma", "the fabric, rdma or tcp; its costs are that transport's table (qoslab sim's [rdma] / [tcp])"),
        window: u32 = count(32, "ordered requests a thread keeps outstanding (asynchronous submission, as fio's iodepth; model choice)").range(1.0, 65536.0),
        cpu_ghz: f64 = real(3.0, "clock of every core: cycles per ns (model choice)").range(0.1, 10.0),
        target_cores: u32 = count(4, "cores of each target server serving NVMe-oF (model choice)").range(1.0, 256.0),
        ssds_per_target: u32 = count(1, "SSDs of each target server, one logical volume: a target's stripe units go round robin over its SSDs, and a FLUSH to the target flushes every one (document Figure 10(c))").range(1.0, 64.0),
        pmr_write_ns: Ns = ns(600, "persisting one 32 B attribute to the PMR by MMIO (document 6.1: about 0.6 us)"),
        pmr_write_cycles: u64 = count(1800, "target cycles stalled on that MMIO write (0.6 us at 3 GHz)"),
        context_switch_cycles: u64 = count(6000, "cycles to put a thread to sleep on an I/O and wake it (model assumption, 2 us at 3 GHz)"),
        flash_write_ns: Ns = ns(20000, "flash SSD (Samsung PM981, no PLP): one 4 KiB write into its cache (model assumption)"),
        flash_units: u32 = count(9, "flash SSD: writes served at once; 9 / 20 us = 450K IOPS, the PM981's rated 4 KiB random write (Samsung PM981 data sheet: up to 440K)").range(1.0, 1024.0),
        flash_gb_per_s: f64 = rate(2.4, "flash SSD: sequential write rate (PM981 data sheet: 2.4 GB/s)"),
        flash_flush_ns: Ns = ns(1000000, "flash SSD: a FLUSH drains the volatile cache to flash, device-wide (model assumption between an SLC and a TLC page program; the consumer-tlc preset's TLC program is 1.9 ms)"),
        optane_write_ns: Ns = ns(10000, "Optane SSD (Intel 905P / P4800X, PLP): one 4 KiB write (Intel data sheets: about 10 us write latency)"),
        optane_units: u32 = count(6, "Optane SSD: writes served at once; 6 / 10 us = 600K IOPS (data sheets: 550K random 4 KiB writes)").range(1.0, 1024.0),
        optane_gb_per_s: f64 = rate(2.2, "Optane SSD: sequential write rate (905P data sheet: 2.2 GB/s)"),
        optane_flush_ns: Ns = ns(0, "Optane SSD: a FLUSH has nothing volatile to drain (PLP); it still waits for the writes before it"),
    }
}

impl TimedConfig {
    pub fn with_overrides(sets: &[(String, String)]) -> Result<(Self, FabricCosts), String> {
        let mut s = Settings::defaults("fabric.timed", TIMED_TUNABLES);
        let mut rdma = Settings::defaults("rdma", RDMA_TUNABLES);
        let mut tcp = Settings::defaults("tcp", TCP_TUNABLES);
        for (key, value) in sets {
            let raw = qoslab_engine::RawValue::from_cli(value);
            let (table, name) = if let Some(k) = key.strip_prefix("rdma.") {
                (&mut rdma, k)
            } else if let Some(k) = key.strip_prefix("tcp.") {
                (&mut tcp, k)
            } else {
                (&mut s, key.strip_prefix("timed.").unwrap_or(key))
            };
            table.set(name, &raw).map_err(|e| format!("{key}: {e}"))?;
        }
        let cfg = Self::from_settings(&s);
        let costs = match cfg.transport.as_str() {
            "rdma" => RdmaConfig::from_settings(&rdma).costs(),
            "tcp" => TcpConfig::from_settings(&tcp).costs(),
            other => return Err(format!("transport: expected rdma or tcp, got '{other}'")),
        };
        Ok((cfg, costs))
    }
}

/// `key=value` overrides split between the `[fabric]` table, `[fabric.timed]` and the
/// transport's (`rdma.*`, `tcp.*`).
pub fn configs(
    sets: &[(String, String)],
) -> Result<(FabricConfig, TimedConfig, FabricCosts), String> {
    let sets: Vec<_> = sets
        .iter()
        .filter(|(k, _)| !k.starts_with("recovery."))
        .cloned()
        .collect();
    let (fabric, timed): (Vec<_>, Vec<_>) = sets.iter().cloned().partition(|(k, _)| {
        let k = k.strip_prefix("fabric.").unwrap_or(k);
        crate::FABRIC_TUNABLES.iter().any(|t| t.name == k)
    });
    let cfg = FabricConfig::with_overrides(&fabric)?;
    let (t, c) = TimedConfig::with_overrides(&timed)?;
    Ok((cfg, t, c))
}

/// What a timed run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Measured {
    pub stack: String,
    pub requests: u64,
    pub commands: u64,
    pub elapsed_ns: u64,
    pub requests_per_s: f64,
    pub mean_latency_ns: f64,
    pub initiator_cycles: u64,
    pub target_cycles: u64,
    /// Requests per thousand cycles: the document's CPU efficiency, measured.
    pub initiator_requests_per_kcycle: f64,
    pub target_requests_per_kcycle: f64,
    pub events: u64,
}

/// A serial resource: when it is next free.
#[derive(Clone, Copy, Default)]
pub(crate) struct Busy(pub(crate) Ns);

impl Busy {
    pub(crate) fn book(&mut self, at: Ns, d: Ns) -> Ns {
        let start = at.max(self.0);
        self.0 = start + d;
        self.0
    }
}

/// Servers of one kind (a target's cores, an SSD's units): the earliest free one serves.
pub(crate) struct Pool(pub(crate) Vec<Ns>);

impl Pool {
    pub(crate) fn book(&mut self, at: Ns, d: Ns) -> Ns {
        let i = (0..self.0.len())
            .min_by_key(|&i| self.0[i])
            .expect("a pool has servers");
        self.0[i] = at.max(self.0[i]) + d;
        self.0[i]
    }

    /// A device-wide operation: after every server is free, all of them for `d`.
    fn barrier(&mut self, at: Ns, d: Ns) -> Ns {
        let end = self.0.iter().copied().fold(at, Ns::max) + d;
        self.0.iter_mut().for_each(|f| *f = end);
        end
    }
}

struct Target {
    cores: Pool,
    /// Each SSD's units.
    ssds: Vec<Pool>,
    pmr: Busy,
    to_target: Busy,
    to_initiator: Busy,
}

/// The SSD of its target that holds block `lba`: the target's stripe units (`mdts_bytes`) go
/// round robin over its SSDs.
pub(crate) fn ssd_of(lba: u64, cfg: &FabricConfig, t: &TimedConfig) -> usize {
    ((lba / cfg.chunk_blocks() / u64::from(cfg.targets)) % u64::from(t.ssds_per_target)) as usize
}

/// An event waiting for its time, and the cycles it will have spent.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: Ns,
    order: u64,
    action: Action,
    initiator_cycles: u64,
    target_cycles: u64,
}

/// One timed run of `plan` under `stack`.
pub struct TimedRun<'p> {
    pub(crate) m: Machine<'p>,
    pub(crate) stack: &'static StackOps,
    pub(crate) cfg: FabricConfig,
    pub(crate) t: TimedConfig,
    pub(crate) c: FabricCosts,
    now: Ns,
    timers: BinaryHeap<Reverse<Timer>>,
    pending: HashSet<Action>,
    /// The events enabled at the last `arm`.
    enabled: Vec<Action>,
    order: u64,
    threads: Vec<Busy>,
    /// Per stream: messages posted since the thread last rang the doorbell.
    batched: Vec<u32>,
    targets: Vec<Target>,
    issued: Vec<usize>,
    issued_ns: Vec<Vec<Ns>>,
    acked: Vec<usize>,
    latency_sum_ns: u128,
    out: Measured,
}

impl<'p> TimedRun<'p> {
    pub fn new(
        plan: &'p Plan,
        stack: &'static StackOps,
        cfg: &FabricConfig,
        t: &TimedConfig,
        c: FabricCosts,
    ) -> Self {
        let ssd = if cfg.plp {
            t.optane_units
        } else {
            t.flash_units
        };
        let targets = (0..cfg.targets)
            .map(|_| Target {
                cores: Pool(vec![0; t.target_cores as usize]),
                ssds: (0..t.ssds_per_target)
                    .map(|_| Pool(vec![0; ssd as usize]))
                    .collect(),
                pmr: Busy::default(),
                to_target: Busy::default(),
                to_initiator: Busy::default(),
            })
            .collect();
        let streams = plan.order.len();
        let mut run = TimedRun {
            // A synchronous stack's thread has one request outstanding whatever the window.
            m: Machine::new(plan, stack, cfg, 0).with_window(if stack.one_in_flight {
                1
            } else {
                t.window as usize
            }),
            stack,
            cfg: cfg.clone(),
            t: t.clone(),
            c,
            now: 0,
            timers: BinaryHeap::new(),
            pending: HashSet::new(),
            enabled: Vec::new(),
            order: 0,
            threads: vec![Busy::default(); streams],
            batched: vec![0; streams],
            targets,
            issued: vec![0; streams],
            issued_ns: plan.requests.iter().map(|r| vec![0; r.len()]).collect(),
            acked: vec![0; streams],
            latency_sum_ns: 0,
            out: Measured {
                stack: stack.name.to_string(),
                requests: plan.requests.iter().map(|r| r.len() as u64).sum(),
                commands: plan.cmds.len() as u64,
                ..Measured::default()
            },
        };
        run.account();
        run
    }

    /// Requests newly inside a stream's window are issued now; newly acknowledged ones are
    /// measured.
    fn account(&mut self) {
        for s in 0..self.issued.len() {
            let n = self.issued_ns[s].len();
            let end = self.m.window_end(s).min(n);
            for r in self.issued[s]..end {
                self.issued_ns[s][r] = self.now;
            }
            self.issued[s] = self.issued[s].max(end);
            let acked = self.m.acked_prefix(s);
            for r in self.acked[s]..acked {
                self.latency_sum_ns += u128::from(self.now - self.issued_ns[s][r]);
            }
            self.acked[s] = self.acked[s].max(acked);
        }
    }

    /// When `action`, enabled now, finishes, and the cycles it costs each side.
    fn cost(&mut self, action: Action) -> (Ns, u64, u64) {
        let plan = self.m.plan();
        let c = self.c;
        let now = self.now;
        let sync_wait = self.t.context_switch_cycles;
        let ghz = self.t.cpu_ghz;
        let ns = |cycles: u64| (cycles as f64 / ghz).round() as Ns;
        match action {
            Action::Meta(s) => {
                // HORAE's control path: a SEND with the ordering metadata, the target writes it
                // to the PMR, a reply; the thread sleeps until the reply.
                let r = self.m.meta_next(s);
                let cmd = plan.requests[s][r].cmds[0];
                let tgt = plan.cmds[cmd].target;
                let (ini, tgt_cycles) = (c.message_cycles * 2 + sync_wait, c.message_cycles * 2);
                let sent = self.threads[s].book(now, ns(c.message_cycles));
                let arrived = self.targets[tgt]
                    .to_target
                    .book(sent, c.wire_ns(self.cfg.attr_bytes))
                    + c.message_ns;
                let received = self.targets[tgt].cores.book(arrived, ns(c.message_cycles));
                let persisted = self.targets[tgt].pmr.book(received, self.t.pmr_write_ns);
                let replied = self.targets[tgt]
                    .to_initiator
                    .book(persisted, c.wire_ns(RESPONSE_BYTES))
                    + c.message_ns;
                let woken = self.threads[s].book(replied, ns(c.message_cycles + sync_wait));
                (woken, ini, tgt_cycles + self.t.pmr_write_cycles)
            }
            Action::Send(cmd) => {
                let s = plan.cmds[cmd].stream;
                let bytes = self.data_bytes(cmd);
                let inline = if c.pulls(bytes) { 0 } else { bytes };
                let mut cycles = c.submit_cycles + c.message_cycles + c.copy_cycles(inline);
                // A thread busy with earlier messages batches this one under their doorbell.
                let idle = self.threads[s].0 <= now;
                if idle || self.batched[s] >= c.doorbell_batch {
                    self.batched[s] = 0;
                    cycles += c.doorbell_cycles;
                }
                self.batched[s] += 1;
                let end = self.threads[s].book(now, ns(cycles));
                (end, cycles, 0)
            }
            Action::Arrive(cmd) => {
                let tgt = plan.cmds[cmd].target;
                let bytes = self.data_bytes(cmd);
                let pulled = c.pulls(bytes);
                let capsule = CAPSULE_BYTES + if pulled { 0 } else { bytes };
                let tg = &mut self.targets[tgt];
                let mut at = tg.to_target.book(now, c.wire_ns(capsule)) + c.message_ns;
                let mut tgt_cycles = c.message_cycles + c.copy_cycles(bytes);
                let mut ini_cycles = 0;
                if pulled {
                    // RDMA READ (one-sided) or R2T and H2C data: a round trip for the data.
                    at = tg.to_initiator.book(at, 0) + c.message_ns;
                    at = tg.to_target.book(at, c.wire_ns(bytes)) + c.message_ns;
                    tgt_cycles += c.message_cycles;
                    if !c.one_sided_pull {
                        ini_cycles += 2 * c.message_cycles + c.copy_cycles(bytes);
                    }
                }
                let end = self.targets[tgt].cores.book(at, ns(tgt_cycles));
                (end, ini_cycles, tgt_cycles)
            }
            Action::Log(cmd) => {
                let tg = &mut self.targets[plan.cmds[cmd].target];
                let start = tg.pmr.0.max(now);
                let end = tg.pmr.book(now, self.t.pmr_write_ns);
                // The core stalls on the MMIO write.
                tg.cores.book(start, end - start);
                (end, 0, self.t.pmr_write_cycles)
            }
            Action::Submit(cmd) => {
                let end = self.targets[plan.cmds[cmd].target]
                    .cores
                    .book(now, ns(c.submit_cycles));
                (end, 0, c.submit_cycles)
            }
            Action::Done(cmd) => {
                let (write_ns, gb_per_s, flush_ns) = if self.cfg.plp {
                    let t = &self.t;
                    (t.optane_write_ns, t.optane_gb_per_s, t.optane_flush_ns)
                } else {
                    let t = &self.t;
                    (t.flash_write_ns, t.flash_gb_per_s, t.flash_flush_ns)
                };
                let bytes = self.data_bytes(cmd);
                let extra = bytes.saturating_sub(self.cfg.block_bytes);
                let service = write_ns + (extra as f64 / gb_per_s).round() as Ns;
                let pc = &plan.cmds[cmd];
                let ssd = ssd_of(pc.attr.lba, &self.cfg, &self.t);
                let ssds = &mut self.targets[pc.target].ssds;
                let mut end = now;
                if !pc.flush_only {
                    end = ssds[ssd].book(now, service);
                }
                if pc.attr.flush {
                    // The target flushes each of its SSDs; the command completes with the last.
                    end = ssds
                        .iter_mut()
                        .map(|d| d.barrier(end, flush_ns))
                        .fold(end, Ns::max);
                }
                (end, 0, 0)
            }
            Action::Respond(cmd) => {
                let s = plan.cmds[cmd].stream;
                let tg = &mut self.targets[plan.cmds[cmd].target];
                let tgt_cycles = c.complete_cycles + c.message_cycles;
                let done = tg.cores.book(now, ns(tgt_cycles));
                let back = tg.to_initiator.book(done, c.wire_ns(RESPONSE_BYTES)) + c.message_ns;
                // Linux's thread slept on this command (the write, then the FLUSH).
                let wait = if self.stack.one_in_flight {
                    sync_wait
                } else {
                    0
                };
                let ini_cycles = c.complete_cycles + c.message_cycles + wait;
                let end = self.threads[s].book(back, ns(ini_cycles));
                (end, ini_cycles, tgt_cycles)
            }
            // The thread's cost of the response is booked with `Respond`.
            Action::Ack(_) => (now, 0, 0),
            Action::Destage(_) => unreachable!("a timed run leaves destaging to FLUSHes"),
        }
    }

    fn data_bytes(&self, cmd: usize) -> u64 {
        u64::from(self.m.plan().cmds[cmd].attr.blocks) * self.cfg.block_bytes
    }

    /// Gives every newly enabled event its time.
    fn arm(&mut self) {
        self.enabled.clear();
        self.enabled.extend_from_slice(self.m.enabled(false));
        for i in 0..self.enabled.len() {
            let a = self.enabled[i];
            if self.pending.insert(a) {
                let (at, initiator_cycles, target_cycles) = self.cost(a);
                self.order += 1;
                self.timers.push(Reverse(Timer {
                    at,
                    order: self.order,
                    action: a,
                    initiator_cycles,
                    target_cycles,
                }));
            }
        }
    }

    /// Runs events up to and including time `until_ns`; false once every command is answered.
    pub fn run_until(&mut self, until_ns: Ns) -> Result<bool, String> {
        loop {
            if self.m.finished() {
                return Ok(false);
            }
            self.arm();
            let Some(Reverse(next)) = self.timers.peek() else {
                return Err(format!(
                    "stalled at {} ns with commands outstanding (PMR log of {} slots full?)",
                    self.now,
                    self.cfg.pmr_slots()
                ));
            };
            if next.at > until_ns {
                return Ok(true);
            }
            let Reverse(t) = self.timers.pop().expect("peeked");
            self.pending.remove(&t.action);
            // An event may have been disabled since it was timed (a PMR slot taken first):
            // it is timed again once enabled again. Nothing ran since `arm`, so its list of
            // enabled events is current.
            if !self.enabled.contains(&t.action) {
                continue;
            }
            self.now = t.at;
            self.m.run(t.action);
            self.out.initiator_cycles += t.initiator_cycles;
            self.out.target_cycles += t.target_cycles;
            self.account();
        }
    }

    /// Runs to the end and reports.
    pub fn finish(mut self) -> Result<Measured, String> {
        self.run_until(Ns::MAX)?;
        let mut out = self.out;
        out.elapsed_ns = self.now;
        out.events = self.m.events;
        let secs = self.now as f64 / 1e9;
        out.requests_per_s = if secs > 0.0 {
            out.requests as f64 / secs
        } else {
            0.0
        };
        out.mean_latency_ns = self.latency_sum_ns as f64 / out.requests.max(1) as f64;
        let per_k = |cycles: u64| {
            if cycles == 0 {
                0.0
            } else {
                out.requests as f64 * 1000.0 / cycles as f64
            }
        };
        out.initiator_requests_per_kcycle = per_k(out.initiator_cycles);
        out.target_requests_per_kcycle = per_k(out.target_cycles);
        Ok(out)
    }

    /// Power fails now: recovery runs on the crash image; what it left broken.
    pub fn crash(&self) -> Vec<Violation> {
        violations(self.m.plan(), self.stack, &self.m)
    }

    pub fn now_ns(&self) -> Ns {
        self.now
    }
}

/// The document's block-device workload: `streams` threads, each `writes` ordered writes of
/// `blocks` blocks, in batches of `batch` consecutive writes (1: every write at a random place),
/// out of place, each write its own group. Every `persist_every`-th write of a stream asks for
/// a FLUSH (0: none; the study's writes are ordered, not durable, and Linux sends a FLUSH after
/// every write anyway, which is its way of keeping the order).
pub fn ordered_writes(
    streams: usize,
    writes: usize,
    blocks: u32,
    batch: usize,
    persist_every: usize,
    seed: u64,
) -> Workload {
    let batch = batch.max(1);
    let per_stream = writes.div_ceil(batch);
    let slots = streams * per_stream;
    // A seeded permutation of the batch slots scatters the batches over the device.
    let mut rng = RngStream::new(seed, "fabric/timed-layout");
    let mut slot: Vec<u64> = (0..slots as u64).collect();
    for i in (1..slot.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        slot.swap(i, j);
    }
    let span = u64::from(blocks) * batch as u64;
    let streams = (0..streams)
        .map(|s| {
            (0..writes)
                .map(|i| Write {
                    lba: slot[s * per_stream + i / batch] * span
                        + (i % batch) as u64 * u64::from(blocks),
                    blocks,
                    group_end: true,
                    persist: persist_every > 0 && (i + 1) % persist_every == 0,
                })
                .collect()
        })
        .collect();
    Workload { streams }
}

/// What a power cut of a timed run left, after the stack's recovery.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cut {
    pub stack: String,
    pub power_fail_at_ns: Ns,
    pub requests: u64,
    /// Requests the application had submitted and not yet seen acknowledged at the cut.
    pub in_flight: u64,
    /// Requests acknowledged to the application before the cut.
    pub acknowledged: u64,
    /// Requests acknowledged with a FLUSH before the cut.
    pub acknowledged_flushes: u64,
    /// Requests whose data is whole on the media after recovery.
    pub survived: u64,
    pub violations: Vec<Violation>,
    /// What recovery read and erased, and how long it took.
    pub recovery: RecoveryTime,
}

impl TimedRun<'_> {
    /// Power fails now: what the stack's recovery keeps, and what it costs.
    pub fn cut(&self, rc: &RecoveryConfig) -> Cut {
        let plan = self.m.plan();
        let image = &self.m.image;
        let erase = (self.stack.recover)(plan, image);
        let whole = |cmds: &[usize]| {
            cmds.iter()
                .all(|&c| plan.cmds[c].flush_only || (image.data[c] == Data::Durable && !erase[c]))
        };
        let mut out = Cut {
            stack: self.stack.name.to_string(),
            power_fail_at_ns: self.now,
            requests: plan.requests.iter().map(|r| r.len() as u64).sum(),
            in_flight: 0,
            acknowledged: 0,
            acknowledged_flushes: 0,
            survived: 0,
            violations: self.crash(),
            recovery: self.recovery_time(rc),
        };
        for (s, reqs) in plan.requests.iter().enumerate() {
            for (r, req) in reqs.iter().enumerate() {
                let acked = self.m.acked[s][r];
                out.in_flight += u64::from(r < self.issued[s] && !acked);
                out.acknowledged += u64::from(acked);
                out.acknowledged_flushes += u64::from(acked && req.persist);
                out.survived += u64::from(whole(&req.cmds));
            }
        }
        out
    }
}

/// What the crash of one target server at a time of a timed run left, after the stack's target
/// recovery (document 4.4.1, "Target recovery"; the initiator and the other targets stay up).
/// How long reconnecting and replaying take is not modelled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetCrash {
    pub stack: String,
    pub crashed_target: usize,
    pub crash_at_ns: Ns,
    pub requests: u64,
    /// Requests the application had submitted and not yet seen acknowledged at the crash.
    pub in_flight: u64,
    /// Requests acknowledged to the application before the crash.
    pub acknowledged: u64,
    /// Requests acknowledged with a FLUSH before the crash.
    pub acknowledged_flushes: u64,
    /// Commands that had completed into the crashed target's volatile cache (gone with it).
    pub lost_from_cache: u64,
    /// Of those, the commands the stack's recovery writes to the target again.
    pub replayed: u64,
    /// Requests with a write gone for good (lost from the cache and not replayed).
    pub lost_for_good: u64,
    pub violations: Vec<Violation>,
}

impl TimedRun<'_> {
    /// Target `target` crashes now: what the stack's target recovery leaves.
    pub fn target_crash(&self, target: usize) -> TargetCrash {
        let plan = self.m.plan();
        let lost = self.m.lost_with_target(target);
        let replay = (self.stack.replay_on_target)(plan, &self.m.image, target);
        let gone = |c: usize| lost[c] && !replay[c];
        let mut out = TargetCrash {
            stack: self.stack.name.to_string(),
            crashed_target: target,
            crash_at_ns: self.now,
            requests: plan.requests.iter().map(|r| r.len() as u64).sum(),
            in_flight: 0,
            acknowledged: 0,
            acknowledged_flushes: 0,
            lost_from_cache: lost.iter().filter(|&&l| l).count() as u64,
            replayed: (0..lost.len()).filter(|&c| lost[c] && replay[c]).count() as u64,
            lost_for_good: 0,
            violations: target_violations(plan, self.stack, &self.m, target),
        };
        for (s, reqs) in plan.requests.iter().enumerate() {
            for (r, req) in reqs.iter().enumerate() {
                let acked = self.m.acked[s][r];
                out.in_flight += u64::from(r < self.issued[s] && !acked);
                out.acknowledged += u64::from(acked);
                out.acknowledged_flushes += u64::from(acked && req.persist);
                out.lost_for_good += u64::from(req.cmds.iter().any(|&c| gone(c)));
            }
        }
        out
    }
}

/// Plans `w` for `stack`, runs it until `at_ns` and crashes target `target` alone.
#[allow(clippy::too_many_arguments)]
pub fn target_crash(
    w: &Workload,
    stack: &'static StackOps,
    cfg: &FabricConfig,
    t: &TimedConfig,
    c: FabricCosts,
    at_ns: Ns,
    target: usize,
) -> Result<TargetCrash, String> {
    if target >= cfg.targets as usize {
        return Err(format!(
            "--crash-target: expected 0 to {}, got {target}",
            cfg.targets - 1
        ));
    }
    let plan = Plan::build(w, cfg, stack.plan);
    let mut run = TimedRun::new(&plan, stack, cfg, t, c);
    run.run_until(at_ns)?;
    let mut crash = run.target_crash(target);
    crash.crash_at_ns = at_ns;
    Ok(crash)
}

/// Plans `w` for `stack`, runs it until `at_ns`, cuts the power and recovers.
pub fn power_cut(
    w: &Workload,
    stack: &'static StackOps,
    cfg: &FabricConfig,
    t: &TimedConfig,
    c: FabricCosts,
    rc: &RecoveryConfig,
    at_ns: Ns,
) -> Result<Cut, String> {
    Ok(power_cuts(w, stack, cfg, t, c, rc, &[at_ns])?.remove(0))
}

/// One run of `w` under `stack`, cut at each of `at_ns` in turn: recovery only reads the crash
/// image, so the run goes on after each cut as if power had not failed.
pub fn power_cuts(
    w: &Workload,
    stack: &'static StackOps,
    cfg: &FabricConfig,
    t: &TimedConfig,
    c: FabricCosts,
    rc: &RecoveryConfig,
    at_ns: &[Ns],
) -> Result<Vec<Cut>, String> {
    let plan = Plan::build(w, cfg, stack.plan);
    let mut run = TimedRun::new(&plan, stack, cfg, t, c);
    let mut times = at_ns.to_vec();
    times.sort_unstable();
    let mut out = Vec::with_capacity(times.len());
    for at in times {
        run.run_until(at)?;
        let mut cut = run.cut(rc);
        cut.power_fail_at_ns = at;
        out.push(cut);
    }
    Ok(out)
}

/// Plans `w` for `stack` and runs it to the end.
pub fn measure(
    w: &Workload,
    stack: &'static StackOps,
    cfg: &FabricConfig,
    t: &TimedConfig,
    c: FabricCosts,
) -> Result<Measured, String> {
    let plan = Plan::build(w, cfg, stack.plan);
    TimedRun::new(&plan, stack, cfg, t, c).finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack;

    fn setup(sets: &[(&str, &str)]) -> (FabricConfig, TimedConfig, FabricCosts) {
        let sets: Vec<(String, String)> = sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        configs(&sets).unwrap()
    }

    #[test]
    fn linux_ordering_at_qd1_runs_one_write_and_one_flush_at_a_time() {
        // One stream, one target, flash: each ordered write is a write round trip, then a
        // FLUSH round trip; throughput is 1 / (write latency + flush latency).
        let (cfg, t, c) = setup(&[("targets", "1")]);
        let w = ordered_writes(1, 20, 1, 1, 0, 7);
        let m = measure(&w, &stack::LINUX, &cfg, &t, c).unwrap();
        let ns = |cycles: u64| (cycles as f64 / t.cpu_ghz).round() as Ns;
        let round_trip = |bytes: u64, device_ns: Ns| {
            ns(c.submit_cycles + c.message_cycles + c.doorbell_cycles)
                + c.wire_ns(CAPSULE_BYTES + bytes)
                + c.message_ns
                + ns(c.message_cycles)
                + ns(c.submit_cycles)
                + device_ns
                + ns(c.complete_cycles + c.message_cycles)
                + c.wire_ns(RESPONSE_BYTES)
                + c.message_ns
                + ns(c.complete_cycles + c.message_cycles + t.context_switch_cycles)
        };
        let write = round_trip(4096, t.flash_write_ns);
        let flush = round_trip(0, t.flash_flush_ns);
        let rc = RecoveryConfig::with_overrides(&[]).unwrap();
        assert_eq!(m.elapsed_ns, 20 * (write + flush));
        let closed = 1e9 / (write + flush) as f64;
        assert!((m.requests_per_s - closed).abs() < 1e-6 * closed);
        assert_eq!(m.mean_latency_ns, (write + flush) as f64);
        // Two commands, four messages and two sleeps per request at the initiator.
        let per_request = 2
            * (c.submit_cycles
                + 2 * c.message_cycles
                + c.doorbell_cycles
                + c.complete_cycles
                + t.context_switch_cycles);
        assert_eq!(m.initiator_cycles, 20 * per_request);
        // Power fails just after the 7th request's FLUSH is acknowledged: 7 requests were
        // acknowledged and exactly they are on the flash (the 8th is not yet sent).
        let cut = power_cut(&w, &stack::LINUX, &cfg, &t, c, &rc, 7 * (write + flush)).unwrap();
        assert_eq!((cut.acknowledged, cut.survived), (7, 7));
        assert!(cut.violations.is_empty());
        // Half way through the 8th request's FLUSH its write is in the cache only: lost, and
        // rightly so, as it was not acknowledged.
        let cut = power_cut(
            &w,
            &stack::LINUX,
            &cfg,
            &t,
            c,
            &rc,
            7 * (write + flush) + write + 50_000,
        )
        .unwrap();
        assert_eq!((cut.acknowledged, cut.survived), (7, 7));
        // The same instant, the crash of the (only) target: the 8th write completed into the
        // cache that the crash takes; Linux does not send it again, and that is no violation
        // (not acknowledged, the tail of the stream). The 7 before it were flushed.
        let at = 7 * (write + flush) + write + 50_000;
        let crash = target_crash(&w, &stack::LINUX, &cfg, &t, c, at, 0).unwrap();
        assert_eq!(
            (crash.acknowledged, crash.in_flight, crash.lost_from_cache),
            (7, 1, 1)
        );
        assert_eq!((crash.replayed, crash.lost_for_good), (0, 1));
        assert!(crash.violations.is_empty());
        assert!(target_crash(&w, &stack::LINUX, &cfg, &t, c, at, 1).is_err());
    }

    #[test]
    fn rio_comes_within_a_fifth_of_orderless_and_far_above_linux() {
        for plp in ["false", "true"] {
            let (cfg, t, c) = setup(&[("plp", plp), ("targets", "1")]);
            let w = ordered_writes(4, 100, 1, 1, 0, 3);
            let run = |s| measure(&w, s, &cfg, &t, c).unwrap().requests_per_s;
            let (orderless, linux, horae, rio) = (
                run(&stack::ORDERLESS),
                run(&stack::LINUX),
                run(&stack::HORAE),
                run(&stack::RIO),
            );
            assert!(
                rio >= 0.8 * orderless,
                "plp={plp}: rio {rio} orderless {orderless}"
            );
            assert!(
                rio > horae && horae > linux,
                "plp={plp}: {rio} {horae} {linux}"
            );
            let floor = if plp == "false" { 30.0 } else { 3.0 };
            assert!(rio > floor * linux, "plp={plp}: rio {rio} linux {linux}");
        }
    }

    #[test]
    fn a_second_ssd_per_target_doubles_what_the_flash_ssd_bounds() {
        // 16 threads of 4 KiB random writes on one target: one flash SSD serves at most 9
        // writes per 20 us (450K per second); with two SSDs the stripe units alternate between
        // them and Rio and orderless nearly double, while Linux, whose every write waits for a
        // FLUSH of every SSD, gains almost nothing (its writes still spread a little).
        let w = ordered_writes(16, 100, 1, 1, 0, 4);
        let run = |ssds: &str, s: &'static StackOps| {
            let (cfg, t, c) = setup(&[("targets", "1"), ("timed.ssds_per_target", ssds)]);
            measure(&w, s, &cfg, &t, c).unwrap().requests_per_s
        };
        for s in [&stack::ORDERLESS, &stack::RIO] {
            let (one, two) = (run("1", s), run("2", s));
            assert!(one <= 450_000.0, "{}: {one}", s.name);
            assert!(two > 1.6 * one, "{}: {one} then {two}", s.name);
        }
        let (one, two) = (run("1", &stack::LINUX), run("2", &stack::LINUX));
        assert!(two < 1.05 * one, "linux: {one} then {two}");
    }

    /// One stream of 12 writes, 8 blocks apart, of `blocks(i)` blocks each, the last
    /// persisted.
    fn twelve_writes(blocks: impl Fn(u64) -> u32) -> Workload {
        let stream = (0..12u64)
            .map(|i| Write {
                lba: i * 8,
                blocks: blocks(i),
                group_end: true,
                persist: i == 11,
            })
            .collect();
        Workload {
            streams: vec![stream],
        }
    }

    /// Runs `w` under `s` cut every 250 ns from its start to its end, handing each cut run to
    /// `f`.
    fn each_cut(
        w: &Workload,
        s: &'static StackOps,
        cfg: &FabricConfig,
        t: &TimedConfig,
        c: FabricCosts,
        mut f: impl FnMut(&TimedRun),
    ) {
        let plan = Plan::build(w, cfg, s.plan);
        let end = TimedRun::new(&plan, s, cfg, t, c)
            .finish()
            .unwrap()
            .elapsed_ns;
        for cut in (0..=end).step_by(250) {
            let mut run = TimedRun::new(&plan, s, cfg, t, c);
            run.run_until(cut).unwrap();
            f(&run);
        }
    }

    #[test]
    fn a_timed_run_cut_at_any_time_recovers_to_a_prefix_under_rio_not_orderless() {
        // Large and small writes alternate on an SSD with PLP: a small write overtakes the
        // large one before it, so an orderless crash leaves a hole; Rio's recovery does not.
        let (cfg, t, c) = setup(&[("plp", "true"), ("targets", "2"), ("mdts_bytes", "32768")]);
        let w = twelve_writes(|i| if i % 2 == 0 { 8 } else { 1 });
        let broken = |s: &'static StackOps| {
            let mut bad = 0;
            each_cut(&w, s, &cfg, &t, c, |run| {
                bad += usize::from(!run.crash().is_empty());
            });
            bad
        };
        assert_eq!(broken(&stack::RIO), 0);
        assert_eq!(broken(&stack::LINUX), 0);
        assert!(broken(&stack::ORDERLESS) > 0);
    }

    #[test]
    fn a_timed_run_with_one_target_crashed_at_any_time_keeps_a_prefix_under_rio_not_orderless() {
        // Flash without PLP, writes alternating over two targets: a completed write sits in a
        // target's cache while later ones go to the other target. A crash of that target
        // loses it; Rio replays it from its PMR log (document 4.4.1), orderless cannot.
        let (cfg, t, c) = setup(&[("plp", "false"), ("targets", "2"), ("mdts_bytes", "32768")]);
        let w = twelve_writes(|i| 1 + (i % 3) as u32);
        let tally = |s: &'static StackOps| {
            let (mut bad, mut replayed, mut lost) = (0, 0, 0);
            each_cut(&w, s, &cfg, &t, c, |run| {
                for target in 0..2 {
                    let crash = run.target_crash(target);
                    bad += usize::from(!crash.violations.is_empty());
                    replayed += crash.replayed;
                    lost += crash.lost_from_cache;
                }
            });
            (bad, replayed, lost)
        };
        let (bad, replayed, lost) = tally(&stack::RIO);
        assert_eq!(bad, 0);
        assert!(lost > 0 && replayed == lost, "{replayed} of {lost}");
        let (bad, replayed, lost) = tally(&stack::ORDERLESS);
        assert!(bad > 0 && lost > 0 && replayed == 0, "{bad} {lost}");
    }
}
