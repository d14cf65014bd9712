//! A NAND-flash SSD: channels, dies and planes (`flash`), a page-level FTL with over-
//! provisioning, static striping and garbage collection (`ftl`), a cached mapping table
//! (`cmt`), a DRAM write cache with FLUSH, FUA and power-loss protection (`cache`), and a
//! preconditioner that starts the drive in steady state (`precondition`).
//!
//! A host request is split into logical pages (the flash page is the mapping unit). A read is
//! served from the write cache when it holds every sector asked for, else from flash after its
//! mapping is known (a CMT miss first reads the translation page). A write enters the cache
//! (one DRAM access) and completes; destaging programs whole pages, reading the old page first
//! when only part of it is in the cache (read-modify-write). GC runs per plane when its free
//! blocks fall below the threshold, on the same dies and channels as host I/O. See
//! docs/media.md for the model, its parameters and its validation.
//!
//! This file owns the drive's state (`Ssd` and the work it carries), its construction and its
//! stage hooks (`submit`, `on_event`, `control`, the counters). The `impl Ssd` behind those hooks
//! is split by concern, one file each: the host path (`host_path.rs`: a request's entry, split
//! and completion), the DRAM and write cache at work (`cache_path.rs`: DRAM accesses, destaging,
//! FLUSH), the mapping on the I/O path (`mapping.rs`), programs, GC and flash completions
//! (`flash_work.rs`), the GC gate's windows (`windows.rs`) and a power failure (`power.rs`).

pub mod cache;
pub mod cmt;
pub mod config;
pub mod flash;
pub mod ftl;
pub mod gate;
pub mod geometry;
pub mod mean_field;
pub mod plugin;
pub mod precondition;
pub mod priority;
pub mod scheduling;
pub mod slow_reads;
pub mod victim;

mod cache_path;
mod flash_work;
mod host_path;
mod mapping;
mod power;
mod windows;

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use qoslab_engine::{ConfigError, IoStatus, Ns, Op, ReqId, Settings, Stage, StageCtx, Tunable};

pub use crate::LostWrite;
use crate::{BuildCtx, Device, DeviceCaps, DeviceModel};

use cache::{Destage, WriteCache};
use cmt::Cmt;
use config::SsdConfig;
use flash::FlashArray;
use ftl::Ftl;
use gate::{GateAction, GateCaps, GateSetup, GcGate};
use precondition::{PreconditionReport, precondition};
use slow_reads::{ReadTrace, SlowReads};

/// Asks the CPU to start loading `value`'s cache line. The page maps, the mapping cache and
/// the write cache are far larger than the CPU's caches and touched at random, so the model
/// prefetches an entry when it learns which one it will touch, an operation ahead: the miss
/// then overlaps the simulation of the steps between.
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads no memory architecturally and cannot fault.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// The SSD's own timed events.
#[derive(Clone, Copy, Debug)]
pub enum SsdEvent {
    /// A channel may serve its next waiting die.
    ChannelFree(u32),
    /// A die's array operation ended (or a suspension took effect).
    DieReady { die: u32, generation: u32 },
    /// A read's data finished moving out over the channel.
    DataOut { die: u32, generation: u32 },
    /// The DRAM access in progress finished.
    DramDone,
    /// A request whose media work is done completes after the controller overhead.
    Complete(ReqId),
    /// The power fails now.
    PowerFail,
    /// A wake-up the GC gate asked for.
    GateWake(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WorkKind {
    /// A page of a host read.
    Read,
    /// A page leaving the write cache.
    Destage,
    /// A page of a write that bypasses the cache (no cache configured).
    Direct,
}

/// One logical page of work, carried through mapping lookup, read-modify-write and program.
#[derive(Clone, Copy, Debug)]
struct Work {
    kind: WorkKind,
    lpa: u32,
    /// Read: bytes to move. Writes: bytes of the page the new data covers.
    bytes: u32,
    /// Host slot (Read, Direct) or destage slot (Destage).
    owner: u32,
    /// The power epoch the data belongs to; a program finishing in a later one was lost.
    epoch: u32,
    /// Where the mapping cache put the page's entry when it was last looked up (a hint:
    /// checked before use), or `NONE`.
    cmt_slot: u32,
}

/// What a finished flash operation means (the page it addressed is the operation's own).
/// Host work waits in `Ssd::works` meanwhile (by slot), which keeps this, and so every queued
/// flash operation, small. The default only fills the unused places of a die's batch.
#[derive(Clone, Copy, Debug, Default)]
enum Cont {
    Read(u32),
    Mapping(u32),
    #[default]
    MappingWrite,
    Rmw(u32),
    Program(u32),
    /// A read of the plane's victim's page, valid for `lpa` when the victim was chosen.
    GcRead {
        lpa: u32,
    },
    /// A copy of the victim's page `src`, which held `lpa` when the victim was chosen (a hint
    /// for prefetching: the commit checks the page still holds it).
    GcProgram {
        src: u32,
        lpa: u32,
    },
    Erase,
}

#[derive(Clone, Copy, Debug)]
struct HostIo {
    id: ReqId,
    /// Completed early by a power failure: parts still running are dropped when they end.
    dead: bool,
    parts: u32,
    overhead_ns: Ns,
    /// Cache pages reserved for this write while its data moves into DRAM.
    reserved: u32,
}

/// One piece of work waiting for a translation page (a singly linked list in a slab, so a
/// mapping miss allocates nothing once the slab has grown).
#[derive(Clone, Copy, Debug)]
struct WaitNode {
    work: Work,
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct DramJob {
    slot: u32,
    bytes: u64,
    write: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct PlaneGc {
    victim: Option<u32>,
    moves_left: u32,
    /// GC was due but the gate kept it from starting: it starts when the gate opens.
    deferred: bool,
}

/// Counters of the device besides those of its parts.
#[derive(Clone, Copy, Debug, Default)]
struct DeviceStats {
    cache_read_hits: u64,
    mapping_reads: u64,
    mapping_writes: u64,
    rmw_reads: u64,
    out_of_range: u64,
    invalid_namespace: u64,
    /// Victims chosen below the free-block floor while the gate stayed closed.
    gc_forced_victims: u64,
    /// Destages started for a full cache while the gate stayed closed.
    destages_forced: u64,
}

/// A slab of values addressed by `u32`, reusing freed slots.
#[derive(Debug)]
struct Slab<T> {
    items: Vec<T>,
    free: Vec<u32>,
}

impl<T: Copy> Slab<T> {
    fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
    fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = v;
                i
            }
            None => {
                self.items.push(v);
                (self.items.len() - 1) as u32
            }
        }
    }
    fn remove(&mut self, i: u32) -> T {
        self.free.push(i);
        self.items[i as usize]
    }
}

impl<T> std::ops::Index<u32> for Slab<T> {
    type Output = T;
    fn index(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
}
impl<T> std::ops::IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.items[i as usize]
    }
}

pub struct Ssd {
    cfg: SsdConfig,
    ftl: Ftl,
    flash: FlashArray<Cont>,
    cmt: Cmt,
    cache: WriteCache,
    host: Slab<HostIo>,
    /// Host work whose flash operation is in flight.
    works: Slab<Work>,
    destages: Slab<Destage>,
    destage_inflight: Vec<u32>,
    /// Bit per plane: set while the plane has fewer than `destage_per_plane` destages in flight
    /// (`pump_all` looks only at these; in steady state almost every plane is at its limit).
    destage_room: Vec<u64>,
    /// Translation pages being read: (first, last) of the list of work waiting for them.
    mapping_waits: FxHashMap<u32, (u32, u32)>,
    wait_nodes: Slab<WaitNode>,
    /// Programs waiting for a free page, per plane.
    plane_waiters: Vec<VecDeque<Work>>,
    gc: Vec<PlaneGc>,
    /// The dies of each NVM set.
    set_dies: Vec<Vec<u32>>,
    /// The diagnostic of background work in DTWin (when die usage is tracked).
    dtwin_audit: Option<DtwinAudit>,
    gate: Box<dyn GcGate>,
    gate_caps: GateCaps,
    gate_actions: Vec<GateAction>,
    /// Writes waiting for room in the cache, in arrival order.
    blocked: VecDeque<u32>,
    /// FLUSHes (or pre-flushes of writes) waiting for an epoch to drain: (slot, epoch, then
    /// start the write).
    flush_waiters: VecDeque<(u32, u64, bool)>,
    dram_busy: Option<DramJob>,
    dram_queue: VecDeque<DramJob>,
    power_epoch: u32,
    lost: Vec<LostWrite>,
    stats: DeviceStats,
    precondition: PreconditionReport,
    scratch_moves: Vec<(u32, Cont)>,
    scratch_durable: Vec<u32>,
    /// The slow-read diagnostic (`diag.slow_reads`): each read in flight's trace, by host
    /// slot, and the slowest finished.
    traces: Vec<ReadTrace>,
    slow_reads: Option<SlowReads>,
}

/// Background work that ran on each NVM set's dies while the set was in its deterministic
/// window: a diagnostic, kept when the flash array tracks its dies' usage.
#[derive(Clone, Debug, Default)]
struct DtwinAudit {
    /// Per set: in DTWin at the last look, and the background time of its dies then.
    inside: Vec<bool>,
    at_entry_ns: Vec<Ns>,
    /// Per set: background time of its dies during its DTWins so far.
    background_ns: Vec<Ns>,
}

/// A bit set with a bit for each of `planes` planes, all set.
fn all_planes(planes: usize) -> Vec<u64> {
    let mut bits = vec![u64::MAX; planes.div_ceil(64)];
    if !planes.is_multiple_of(64) {
        bits[planes / 64] = (1 << (planes % 64)) - 1;
    }
    bits
}

/// The mapping cache a run starts with: empty, or (`precondition.warm_cmt`) full of clean
/// entries, each NVM set's equal share of it holding the set's first written logical pages
/// (the pages a read of the set's start touches; the set's written pages are its first
/// `mapped_pages / sets`).
fn warm_cmt(cfg: &SsdConfig, mapped_pages: u64) -> Cmt {
    let mut cmt = Cmt::new(cfg.cmt_entries);
    if cfg.warm_cmt && cfg.mapping_cached {
        let sets = cfg.geo.sets();
        let written = (mapped_pages / u64::from(sets)).min(u64::from(u32::MAX)) as u32;
        let each = (cfg.cmt_entries / sets).min(written);
        let stride = if sets == 1 {
            0
        } else {
            cfg.geo.set_logical_pages()
        };
        for set in 0..sets {
            for lpa in set * stride..set * stride + each {
                let evicted = cmt.insert(lpa, false);
                debug_assert!(
                    evicted.is_none(),
                    "a clean entry evicts nothing to write back"
                );
            }
        }
    }
    cmt
}

impl Ssd {
    /// A drive as `cfg` describes it, preconditioned if asked; `seed` is the run's seed, from
    /// which the GC's random victim draws and the preconditioner's placement are derived.
    pub fn new(cfg: SsdConfig, seed: u64) -> Self {
        let audit = cfg.dtwin_audit;
        let mut ssd = Self::unaudited(cfg, seed);
        if audit {
            ssd.audit_dtwin_background();
        }
        ssd
    }

    fn unaudited(cfg: SsdConfig, seed: u64) -> Self {
        let gate = cfg.gate.build.expect("checked by the registry")(&GateSetup {
            sets: cfg.geo.sets() as u16,
            page_bytes: cfg.geo.page_bytes,
            entry_bound_ns: cfg.background_end_bound_ns(),
            settings: &cfg.gate_settings,
        });
        let mut ftl = Ftl::for_config(&cfg, seed);
        let report = precondition(&mut ftl, &cfg, seed);
        let planes = cfg.geo.planes() as usize;
        let mut flash = FlashArray::new(&cfg);
        if cfg.slow_reads > 0 {
            flash.track_die_usage();
        }
        let sets = cfg.geo.sets() as u16;
        let set_dies = (0..sets)
            .map(|set| {
                let mut dies: Vec<u32> = cfg
                    .geo
                    .set_planes(set)
                    .iter()
                    .map(|&p| cfg.geo.die_of_plane(p))
                    .collect();
                dies.sort_unstable();
                dies.dedup();
                dies
            })
            .collect();
        let cmt = warm_cmt(&cfg, report.mapped_pages);
        Ssd {
            flash,
            cmt,
            cache: WriteCache::new(cfg.cache_pages, cfg.geo.planes(), cfg.keep_destaged),
            host: Slab::new(),
            works: Slab::new(),
            destages: Slab::new(),
            destage_inflight: vec![0; planes],
            destage_room: all_planes(planes),
            mapping_waits: FxHashMap::default(),
            wait_nodes: Slab::new(),
            plane_waiters: vec![VecDeque::new(); planes],
            gc: vec![PlaneGc::default(); planes],
            set_dies,
            dtwin_audit: None,
            gate,
            gate_caps: cfg.gate.caps,
            gate_actions: Vec::new(),
            blocked: VecDeque::new(),
            flush_waiters: VecDeque::new(),
            dram_busy: None,
            dram_queue: VecDeque::new(),
            power_epoch: 0,
            lost: Vec::new(),
            stats: DeviceStats::default(),
            precondition: report,
            scratch_moves: Vec::new(),
            scratch_durable: Vec::new(),
            traces: Vec::new(),
            slow_reads: (cfg.slow_reads > 0).then(|| SlowReads::new(cfg.slow_reads as usize)),
            ftl,
            cfg,
        }
    }

    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }

    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    pub fn precondition_report(&self) -> &PreconditionReport {
        &self.precondition
    }

    /// Clears the FTL's counters (e.g. after a warm-up phase).
    pub fn reset_ftl_stats(&mut self) {
        self.ftl.reset_stats();
    }
}
impl Device for Ssd {
    /// The size of one namespace (of each NVM set's; of the drive with one set).
    fn capacity_bytes(&self) -> u64 {
        u64::from(self.cfg.geo.set_logical_pages().min(self.cfg.logical_pages))
            * u64::from(self.cfg.geo.page_bytes)
    }

    fn caps(&self) -> DeviceCaps {
        let mut caps = DeviceCaps::FUA | DeviceCaps::DEALLOCATE;
        if self.volatile_cache() {
            caps |= DeviceCaps::VOLATILE_WRITE_CACHE;
        }
        if self.cfg.plp {
            caps |= DeviceCaps::POWER_LOSS_PROTECTION;
        }
        if self.gate_caps.contains(GateCaps::WINDOWS) {
            caps |= DeviceCaps::PREDICTABLE_LATENCY;
        }
        caps
    }

    fn lost_writes(&self) -> &[LostWrite] {
        &self.lost
    }
}

impl DeviceModel for Ssd {
    const NAME: &'static str = "ssd";
    const HELP: &'static str = "NAND-flash SSD: channels, dies, planes, page-level FTL with GC, mapping cache, DRAM write cache, FLUSH/FUA, PLP";
    const TUNABLES: &'static [Tunable] = config::SSD_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn sub_tables() -> Vec<crate::SubTable> {
        config::sub_tables()
    }

    fn build(settings: &Settings, ctx: &BuildCtx<'_>) -> Result<Self, ConfigError> {
        Ok(Ssd::new(
            SsdConfig::from_settings(settings, ctx.sections)?,
            ctx.seed,
        ))
    }
}

impl Stage for Ssd {
    type Event = SsdEvent;

    /// A command only reaches the firmware's queues (cache, mapping, flash): it may run inside
    /// the controller's hook.
    const SUBMITS_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        <Self as crate::DeviceModel>::NAME
    }

    fn start(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.cfg.power_fail_ns > 0 {
            ctx.schedule(self.cfg.power_fail_ns, SsdEvent::PowerFail);
        }
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let now = ctx.now_ns();
        let req = &mut ctx.reqs_mut()[id];
        req.t.media_start_ns = now;
        if !self.has_namespace(req.nsid) {
            // NVMe's Invalid Namespace or Format: the command fails at once.
            self.stats.invalid_namespace += 1;
            req.status = IoStatus::MediaError;
            req.t.media_done_ns = now;
            ctx.complete(id);
            return;
        }
        if self.gate_caps.contains(GateCaps::COMMANDS) {
            let r = &ctx.reqs()[id];
            let (set, op, len) = ((r.nsid - 1) as u16, r.op, r.len_bytes);
            self.gate_hook(ctx, |g, io| g.command(set, op, len, io));
        }
        match ctx.reqs()[id].op {
            Op::Read => self.submit_read(id, ctx),
            Op::Write => self.submit_write(id, ctx),
            Op::Flush => self.submit_flush(id, ctx),
            Op::Trim => self.submit_trim(id, ctx),
        }
        self.drain_flash(ctx);
    }

    fn on_event(&mut self, ev: SsdEvent, ctx: &mut impl StageCtx<SsdEvent>) {
        match ev {
            SsdEvent::ChannelFree(ch) => self.flash.on_channel_free(ch, ctx),
            SsdEvent::DieReady { die, generation } => self.flash.on_die_ready(die, generation, ctx),
            SsdEvent::DataOut { die, generation } => self.flash.on_data_out(die, generation, ctx),
            SsdEvent::DramDone => self.on_dram_done(ctx),
            SsdEvent::Complete(id) => ctx.complete(id),
            SsdEvent::PowerFail => self.power_fail(ctx),
            SsdEvent::GateWake(token) => self.gate_hook(ctx, |g, io| g.wake(token, io)),
        }
        self.drain_flash(ctx);
    }

    /// A power failure sent down the path (`--power-fail-at`), and the admin commands of the
    /// GC gate (Predictable Latency Mode's features and log pages).
    fn control(&mut self, msg: &mut qoslab_engine::Control, ctx: &mut impl StageCtx<SsdEvent>) {
        if msg.command == qoslab_engine::Command::PowerLoss {
            self.power_fail(ctx);
            msg.status = qoslab_engine::ControlStatus::Success;
            return;
        }
        self.gate_hook(ctx, |g, io| g.control(msg, io));
        self.drain_flash(ctx);
    }

    fn collect_lost_writes(&self, out: &mut Vec<crate::LostWrite>) {
        out.extend_from_slice(&self.lost);
    }

    /// Not built: `power_fail` works out its loss while it empties the cache, so a crash view
    /// of this drive is refused rather than guessed.
    fn collect_writes_at_risk(
        &self,
        _reqs: &qoslab_engine::Requests,
        _out: &mut Vec<crate::LostWrite>,
    ) -> bool {
        false
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let f = &self.ftl.stats;
        let a = &self.flash.stats;
        let lookups = self.cmt.stats.hits + self.cmt.stats.misses;
        let mut out = vec![
            ("write_amplification".into(), f.write_amplification()),
            ("host_page_programs".into(), f.host_programs as f64),
            ("gc_page_programs".into(), f.gc_programs as f64),
            ("block_erases".into(), f.erases as f64),
            ("gc_victims".into(), f.gc_victims as f64),
            ("flash_reads".into(), a.reads as f64),
            ("flash_programs".into(), a.programs as f64),
            ("multiplane_commands".into(), a.multiplane_commands as f64),
            ("suspensions".into(), a.suspensions as f64),
            ("rmw_reads".into(), self.stats.rmw_reads as f64),
            ("cache_read_hits".into(), self.stats.cache_read_hits as f64),
            ("mapping_reads".into(), self.stats.mapping_reads as f64),
            ("mapping_writes".into(), self.stats.mapping_writes as f64),
            (
                "cmt_hit_ratio".into(),
                if lookups == 0 {
                    0.0
                } else {
                    self.cmt.stats.hits as f64 / lookups as f64
                },
            ),
            (
                "lost_acknowledged_writes".into(),
                self.lost.iter().filter(|l| l.acknowledged).count() as f64,
            ),
            (
                "lost_unacknowledged_writes".into(),
                self.lost.iter().filter(|l| !l.acknowledged).count() as f64,
            ),
            ("out_of_range_pages".into(), self.stats.out_of_range as f64),
        ];
        if self.gate_caps.contains(GateCaps::CLOSES) {
            out.push((
                "gc_forced_victims".into(),
                self.stats.gc_forced_victims as f64,
            ));
            out.push(("destages_forced".into(), self.stats.destages_forced as f64));
            out.extend(self.gate.counters());
        }
        if let Some(audit) = &self.dtwin_audit {
            for (s, ns) in audit.background_ns.iter().enumerate() {
                out.push((
                    format!("set{}_background_in_dtwin_us", s + 1),
                    *ns as f64 / 1e3,
                ));
            }
        }
        if let Some(slow) = &self.slow_reads {
            out.extend(slow.counters());
        }
        if self.stats.invalid_namespace > 0 {
            out.push((
                "invalid_namespace_commands".into(),
                self.stats.invalid_namespace as f64,
            ));
        }
        if self.precondition.mapped_pages > 0 {
            out.push((
                "precondition_model_write_amplification".into(),
                self.precondition.model_write_amplification,
            ));
        }
        out
    }
}

#[cfg(test)]
mod plm_tests;
#[cfg(test)]
pub(crate) mod tests;
