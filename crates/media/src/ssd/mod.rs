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

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use qoslab_engine::{
    ConfigError, Divisor, IoStatus, Ns, Op, ReqFlags, ReqId, Settings, Stage, StageCtx, Tunable,
};

pub use crate::LostWrite;
use crate::{BuildCtx, Device, DeviceCaps, DeviceModel};

use cache::{Destage, WriteCache};
use cmt::Cmt;
use config::SsdConfig;
use flash::{FlashArray, FlashOp, OpClass, OpKind};
use ftl::{Ftl, NONE};
use gate::{GateAction, GateCaps, GateIo, GateSetup, GcGate};
use precondition::{PreconditionReport, precondition};
use slow_reads::{Copies, ReadTrace, SlowReads};

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

    // ---- request entry points --------------------------------------------------------------

    fn new_slot(&mut self, id: ReqId, parts: u32, overhead_ns: Ns) -> u32 {
        self.host.insert(HostIo {
            id,
            dead: false,
            parts,
            overhead_ns,
            reserved: 0,
        })
    }

    /// Whether the read in host slot `slot` is traced (the slow-read diagnostic).
    #[inline]
    fn traced(&self, slot: u32) -> bool {
        self.slow_reads.is_some() && self.traces[slot as usize].traced
    }

    /// Where the copies stand for a read of NVM set `set` (the slow-read diagnostic).
    fn copies(&self, set: u16) -> Copies {
        Copies {
            own: self.gate.window(set),
            other_deterministic: (0..self.cfg.geo.sets() as u16)
                .any(|s| s != set && self.gate.window(s) == gate::WindowState::Deterministic),
        }
    }

    /// Whether the drive has namespace `nsid` (one per NVM set, numbered from 1).
    fn has_namespace(&self, nsid: u32) -> bool {
        nsid >= 1 && nsid <= self.cfg.geo.sets()
    }

    /// Where request `r` (of a namespace the drive has) lies on the drive: (byte offset from
    /// the start of the drive's logical space, length, the end of its namespace's logical
    /// pages). Namespace `n` is NVM set `n - 1`'s share of the logical pages.
    #[inline]
    fn extent(&self, r: &qoslab_engine::Request) -> (u64, u64, u64) {
        let per_set = u64::from(self.cfg.geo.set_logical_pages().min(self.cfg.logical_pages));
        let base = u64::from(r.nsid - 1) * per_set;
        let page = u64::from(self.cfg.geo.page_bytes);
        (base * page + r.offset_bytes, r.len_bytes, base + per_set)
    }

    /// Logical pages of a byte range: (lpa, byte offset in page, bytes).
    fn pages(
        &self,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = (u64, u32, u32)> + Clone + use<> {
        let page = u64::from(self.cfg.geo.page_bytes);
        let div = self.cfg.geo.page_bytes_div;
        let end = offset + len.max(1);
        let first = div.quot_u64(offset);
        let last = div.quot_u64(end - 1);
        (first..=last).map(move |lpa| {
            let start = offset.max(lpa * page);
            let stop = end.min((lpa + 1) * page);
            (lpa, (start - lpa * page) as u32, (stop - start) as u32)
        })
    }

    fn sector_mask(&self, start: u32, bytes: u32) -> u64 {
        let s = Divisor::new(self.cfg.sector_bytes());
        let first = s.quot(start);
        let last = s.quot(start + bytes.max(1) - 1);
        let n = last - first + 1;
        let ones = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        ones << first
    }

    fn submit_read(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let (offset, len, end) = self.extent(&ctx.reqs()[id]);
        let parts = self.pages(offset, len).count() as u32;
        let slot = self.new_slot(id, parts, self.cfg.read_overhead_ns);
        if self.slow_reads.is_some() {
            // Reads of one page only: the study's and fio's 4 KiB reads are.
            let r = &ctx.reqs()[id];
            let (queued, set) = (r.t.queued_ns, (r.nsid - 1) as u16);
            let at = self.copies(set);
            let now = ctx.now_ns();
            if self.traces.len() <= slot as usize {
                self.traces.resize(slot as usize + 1, ReadTrace::default());
            }
            self.traces[slot as usize] = ReadTrace {
                queued_ns: queued,
                media_start_ns: now,
                traced: parts == 1,
                at_arrival: at,
                ..ReadTrace::default()
            };
        }
        for (lpa, start, bytes) in self.pages(offset, len) {
            if lpa >= end {
                self.out_of_range(slot, ctx);
                continue;
            }
            let lpa = lpa as u32;
            if self.cfg.cache_pages > 0 {
                let mask = self.sector_mask(start, bytes);
                if self.cache.read_hit(lpa, mask) {
                    self.stats.cache_read_hits += 1;
                    self.dram_request(
                        DramJob {
                            slot,
                            bytes: u64::from(bytes),
                            write: false,
                        },
                        ctx,
                    );
                    continue;
                }
            }
            let work = Work {
                kind: WorkKind::Read,
                lpa,
                bytes,
                owner: slot,
                epoch: self.power_epoch,
                cmt_slot: NONE,
            };
            self.with_mapping(work, ctx);
        }
    }

    fn out_of_range(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        self.stats.out_of_range += 1;
        let id = self.host[slot].id;
        if !self.host[slot].dead {
            ctx.reqs_mut()[id].status = IoStatus::MediaError;
        }
        self.part_done(slot, ctx);
    }

    fn submit_write(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let flags = ctx.reqs()[id].flags;
        if flags.contains(ReqFlags::PREFLUSH) && self.volatile_cache() {
            let slot = self.new_slot(id, 1, self.cfg.write_overhead_ns);
            let epoch = self.cache.close_epoch();
            if self.cache.drained(epoch) {
                self.start_write(slot, ctx);
            } else {
                self.flush_waiters.push_back((slot, epoch, true));
                self.pump_all(ctx);
            }
            return;
        }
        let slot = self.new_slot(id, 1, self.cfg.write_overhead_ns);
        self.start_write(slot, ctx);
    }

    fn volatile_cache(&self) -> bool {
        self.cfg.cache_pages > 0 && !self.cfg.plp
    }

    /// Starts a write whose pre-flush (if any) is done.
    fn start_write(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let id = self.host[slot].id;
        let (offset, len, end) = self.extent(&ctx.reqs()[id]);
        if self.cfg.cache_pages == 0 {
            let set = (ctx.reqs()[id].nsid - 1) as u16;
            if self.gate_caps.contains(GateCaps::CLOSES)
                && !self.gate.destage_allowed(set, ctx.now_ns())
            {
                // Without a cache to hold it, a write held back by the gate must be
                // programmed now: background work the gate hears of.
                self.gate_hook(ctx, |g, io| g.forced(set, io));
            }
            self.host[slot].parts = self.pages(offset, len).count() as u32;
            for (lpa, _, bytes) in self.pages(offset, len) {
                if lpa >= end {
                    self.out_of_range(slot, ctx);
                    continue;
                }
                let work = Work {
                    kind: WorkKind::Direct,
                    lpa: lpa as u32,
                    bytes,
                    owner: slot,
                    epoch: self.power_epoch,
                    cmt_slot: NONE,
                };
                self.with_mapping(work, ctx);
            }
            return;
        }
        if self.pages(offset, len).any(|(lpa, _, _)| lpa >= end) {
            self.out_of_range(slot, ctx);
            return;
        }
        if !self.blocked.is_empty() || !self.try_admit(slot, ctx) {
            self.blocked.push_back(slot);
            self.pump_all(ctx);
        }
    }

    /// Reserves cache room for a write and starts moving its data into DRAM.
    fn try_admit(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) -> bool {
        let id = self.host[slot].id;
        let (offset, len, _) = self.extent(&ctx.reqs()[id]);
        let new_pages = self
            .pages(offset, len)
            .filter(|&(lpa, _, _)| !self.cache.holds(lpa as u32))
            .count() as u32;
        // A write larger than the whole cache is admitted into an empty one.
        let fits = self.cache.room() >= new_pages || self.cache.room() == self.cache.capacity();
        if !fits {
            return false;
        }
        self.cache.reserve(new_pages);
        self.host[slot].reserved = new_pages;
        self.dram_request(
            DramJob {
                slot,
                bytes: len,
                write: true,
            },
            ctx,
        );
        true
    }

    fn unblock_writes(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        while let Some(&slot) = self.blocked.front() {
            if !self.try_admit(slot, ctx) {
                break;
            }
            self.blocked.pop_front();
        }
    }

    fn submit_flush(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let slot = self.new_slot(id, 1, self.cfg.flush_overhead_ns);
        if !self.volatile_cache() {
            self.part_done(slot, ctx);
            return;
        }
        let epoch = self.cache.close_epoch();
        if self.cache.drained(epoch) {
            self.part_done(slot, ctx);
        } else {
            self.flush_waiters.push_back((slot, epoch, false));
            self.pump_all(ctx);
        }
    }

    fn submit_trim(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let (offset, len, end) = self.extent(&ctx.reqs()[id]);
        let page = self.cfg.geo.page_bytes;
        let slot = self.new_slot(id, 1, self.cfg.write_overhead_ns);
        for (lpa, _, bytes) in self.pages(offset, len) {
            // Only whole pages can be deallocated; partial ones keep their data.
            if bytes != page || lpa >= end {
                continue;
            }
            let lpa = lpa as u32;
            let mut durable = std::mem::take(&mut self.scratch_durable);
            self.cache.discard(lpa, &mut durable);
            self.settle(&mut durable, ctx);
            self.scratch_durable = durable;
            self.ftl.trim(lpa);
            if self.cfg.mapping_cached
                && let Some(evicted) = self.cmt.update(lpa)
            {
                self.mapping_write(evicted, ctx);
            }
        }
        self.check_flushes(ctx);
        self.part_done(slot, ctx);
    }

    // ---- completion ---------------------------------------------------------------------------

    fn part_done(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let io = &mut self.host[slot];
        io.parts -= 1;
        if io.parts > 0 {
            return;
        }
        let io = self.host.remove(slot);
        if io.dead {
            return;
        }
        let now = ctx.now_ns();
        ctx.reqs_mut()[io.id].t.media_done_ns = now;
        if ctx.reqs()[io.id].op == Op::Read && self.traced(slot) {
            let set = (ctx.reqs()[io.id].nsid - 1) as u16;
            let mut t = self.traces[slot as usize];
            t.done_ns = now;
            t.at_done = self.copies(set);
            self.slow_reads.as_mut().expect("checked").record(t);
        }
        if io.overhead_ns == 0 {
            ctx.complete(io.id);
        } else {
            ctx.schedule(now + io.overhead_ns, SsdEvent::Complete(io.id));
        }
    }

    // ---- DRAM --------------------------------------------------------------------------------

    fn dram_request(&mut self, job: DramJob, ctx: &mut impl StageCtx<SsdEvent>) {
        if !job.write && self.traced(job.slot) {
            let t = &mut self.traces[job.slot as usize];
            t.cache_hit = true;
            t.dram_asked_ns = ctx.now_ns();
        }
        if self.dram_busy.is_none() {
            self.dram_start(job, ctx);
        } else {
            self.dram_queue.push_back(job);
        }
    }

    fn dram_start(&mut self, job: DramJob, ctx: &mut impl StageCtx<SsdEvent>) {
        if !job.write && self.traced(job.slot) && !self.host[job.slot].dead {
            let id = self.host[job.slot].id;
            let service = self.copies((ctx.reqs()[id].nsid - 1) as u16);
            let t = &mut self.traces[job.slot as usize];
            t.dram_start_ns = ctx.now_ns();
            t.at_service = service;
        }
        self.dram_busy = Some(job);
        let at = ctx.now_ns() + self.cfg.dram_access_ns(job.bytes);
        ctx.schedule(at, SsdEvent::DramDone);
    }

    fn on_dram_done(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        let job = self.dram_busy.take().expect("a DRAM access was running");
        if !job.write && self.traced(job.slot) {
            self.traces[job.slot as usize].dram_done_ns = ctx.now_ns();
        }
        if let Some(next) = self.dram_queue.pop_front() {
            self.dram_start(next, ctx);
        }
        if job.write {
            self.write_into_cache(job.slot, ctx);
        } else {
            self.part_done(job.slot, ctx);
        }
    }

    /// A write's data is in DRAM: it becomes a record and its pages dirty.
    fn write_into_cache(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let io = self.host[slot];
        self.cache.release(io.reserved);
        self.host[slot].reserved = 0;
        if io.dead {
            // The power failed while the data was on its way: it never entered the cache.
            self.part_done(slot, ctx);
            return;
        }
        let req = ctx.reqs()[io.id];
        let (offset, len, _) = self.extent(&req);
        let pages = self.pages(offset, len);
        let fua = req.flags.contains(ReqFlags::FUA) && !self.cfg.plp;
        let rec = self.cache.new_record(
            req.offset_bytes,
            req.len_bytes,
            req.job,
            req.t.queued_ns,
            pages.clone().count() as u32,
            if fua { slot } else { u32::MAX },
        );
        for (lpa, start, bytes) in pages {
            let lpa = lpa as u32;
            let plane = self.cfg.geo.stripe(lpa).0;
            let mask = self.sector_mask(start, bytes);
            self.cache.write(lpa, plane, mask, rec);
            if fua {
                self.cache.promote(lpa);
            }
            self.pump(plane, ctx);
        }
        if !fua {
            self.part_done(slot, ctx);
        }
    }

    // ---- destaging ---------------------------------------------------------------------------

    fn destage_wanted(&self) -> bool {
        self.cfg.writeback_start == 0.0
            || f64::from(self.cache.dirty_entries)
                > self.cfg.writeback_start * f64::from(self.cache.capacity())
            || !self.flush_waiters.is_empty()
            || !self.blocked.is_empty()
    }

    /// Starts destaging `plane`'s dirty pages up to its in-flight limit (only FUA pages when
    /// the cache is not due to destage).
    fn pump(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        while self.destage_inflight[plane as usize] < self.cfg.destage_per_plane {
            let urgent = self.cache.urgent(plane);
            if !(self.destage_wanted() || urgent) {
                break;
            }
            if self.gate_caps.contains(GateCaps::CLOSES)
                && !urgent
                && self.flush_waiters.is_empty()
                && !self.destage_gate_open(plane, ctx)
            {
                break;
            }
            let Some(d) = self.cache.next_destage(plane) else {
                break;
            };
            self.destage_inflight[plane as usize] += 1;
            if self.destage_inflight[plane as usize] == self.cfg.destage_per_plane {
                self.destage_room[plane as usize / 64] &= !(1 << (plane % 64));
            }
            let slot = self.destages.insert(d);
            let covered = d.present.count_ones() * self.cfg.sector_bytes();
            let work = Work {
                kind: WorkKind::Destage,
                lpa: d.lpa,
                bytes: covered.min(self.cfg.geo.page_bytes),
                owner: slot,
                epoch: self.power_epoch,
                cmt_slot: NONE,
            };
            self.with_mapping(work, ctx);
        }
    }

    fn pump_all(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.cache.dirty_entries == 0 {
            return;
        }
        // Every plane in order, as a scan of all of them would visit them; a pump changes only
        // its own plane's bit.
        for word in 0..self.destage_room.len() {
            let mut bits = self.destage_room[word];
            while bits != 0 {
                let plane = (word * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                if self.cache.queued(plane) > 0 {
                    self.pump(plane, ctx);
                }
            }
        }
    }

    /// Whether the gate lets `plane` destage now. Writes waiting for room in a full cache force
    /// it open (the gate hears of it), or through.
    fn destage_gate_open(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) -> bool {
        let set = self.cfg.geo.set_of_plane(plane);
        if self.gate.destage_allowed(set, ctx.now_ns()) {
            return true;
        }
        if self.blocked.is_empty() || self.cache.queued(plane) == 0 {
            return false;
        }
        self.gate_hook(ctx, |g, io| g.forced(set, io));
        if !self.gate.destage_allowed(set, ctx.now_ns()) {
            self.stats.destages_forced += 1;
        }
        true
    }

    fn destage_done(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let d = self.destages.remove(slot);
        let plane = self.cfg.geo.stripe(d.lpa).0;
        self.destage_inflight[plane as usize] -= 1;
        self.destage_room[plane as usize / 64] |= 1 << (plane % 64);
        let mut durable = std::mem::take(&mut self.scratch_durable);
        self.cache.destage_done(&d, &mut durable);
        self.settle(&mut durable, ctx);
        self.scratch_durable = durable;
        self.check_flushes(ctx);
        self.unblock_writes(ctx);
        self.pump(plane, ctx);
    }

    /// Records that reached flash: wake their FUA writers and free them.
    fn settle(&mut self, durable: &mut Vec<u32>, ctx: &mut impl StageCtx<SsdEvent>) {
        for r in durable.drain(..) {
            let waiter = self.cache.record(r).waiter;
            self.cache.free_record(r);
            if waiter != u32::MAX {
                self.part_done(waiter, ctx);
            }
        }
    }

    fn check_flushes(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        while let Some(&(slot, epoch, then_write)) = self.flush_waiters.front() {
            if !self.cache.drained(epoch) {
                break;
            }
            self.flush_waiters.pop_front();
            if then_write {
                self.start_write(slot, ctx);
            } else {
                self.part_done(slot, ctx);
            }
        }
    }

    // ---- mapping -----------------------------------------------------------------------------

    /// Runs `work` once its mapping entry is in DRAM.
    fn with_mapping(&mut self, mut work: Work, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.cfg.mapping_cached {
            work.cmt_slot = self.cmt.lookup_slot(work.lpa).unwrap_or(NONE);
        }
        if self.cfg.mapping_cached && work.cmt_slot == NONE {
            // The page's map entry is read when the translation page arrives.
            self.ftl.prefetch_lookup(work.lpa);
            let tpage = work.lpa / self.cfg.translation_entries_per_page;
            if work.kind == WorkKind::Read && self.traced(work.owner) {
                let ppa = self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(work.lpa));
                let usage = self.flash.die_usage(ppa, ctx.now_ns());
                self.traces[work.owner as usize].mapping_die_ns = usage;
            }
            let node = self.wait_nodes.insert(WaitNode { work, next: NONE });
            match self.mapping_waits.get_mut(&tpage) {
                Some((_, last)) => {
                    let tail = std::mem::replace(last, node);
                    self.wait_nodes[tail].next = node;
                }
                None => {
                    self.mapping_waits.insert(tpage, (node, node));
                    self.stats.mapping_reads += 1;
                    let op = FlashOp {
                        kind: OpKind::Read,
                        class: OpClass::Mapping,
                        ppa: self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(work.lpa)),
                        bytes: self.cfg.translation_read_bytes,
                        owner: Cont::Mapping(tpage),
                    };
                    self.flash.submit(op, ctx);
                }
            }
            return;
        }
        self.mapped(work, ctx);
    }

    /// Where translation page `tpage` (of a logical page of NVM set `set`) sits: striped like
    /// a logical page over the set's planes. Translation pages live in a region of their own,
    /// outside the blocks GC manages.
    fn translation_ppa(&self, tpage: u32, set: u16) -> u32 {
        let (plane, local) = self.cfg.geo.stripe_in_set(set, tpage);
        let geo = &self.cfg.geo;
        plane * geo.pages_per_plane() + geo.per_plane.modulo(local)
    }

    /// Where a never-written logical page would be.
    fn home_ppa(&self, lpa: u32) -> u32 {
        let (plane, local) = self.cfg.geo.stripe(lpa);
        let geo = &self.cfg.geo;
        plane * geo.pages_per_plane() + geo.per_plane.modulo(local)
    }

    fn mapping_write(&mut self, lpa: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        self.stats.mapping_writes += 1;
        let tpage = lpa / self.cfg.translation_entries_per_page;
        let op = FlashOp {
            kind: OpKind::Program,
            class: OpClass::HostWrite,
            ppa: self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(lpa)),
            bytes: self.cfg.geo.page_bytes,
            owner: Cont::MappingWrite,
        };
        self.flash.submit(op, ctx);
    }

    fn mapping_read_done(&mut self, tpage: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let Some((mut node, _)) = self.mapping_waits.remove(&tpage) else {
            return;
        };
        while node != NONE {
            let WaitNode { mut work, next } = self.wait_nodes.remove(node);
            if work.kind == WorkKind::Read && self.traced(work.owner) {
                let ppa = self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(work.lpa));
                let usage = self.flash.die_usage(ppa, ctx.now_ns());
                let t = &mut self.traces[work.owner as usize];
                for (spent, total) in t.mapping_die_ns.iter_mut().zip(usage) {
                    *spent = total - *spent;
                }
            }
            let (evicted, slot) = self.cmt.insert_at(work.lpa, false);
            work.cmt_slot = slot;
            if let Some(evicted) = evicted {
                self.mapping_write(evicted, ctx);
            }
            self.mapped(work, ctx);
            node = next;
        }
    }

    /// The mapping of `work`'s page is known: read it, or prepare its program.
    fn mapped(&mut self, work: Work, ctx: &mut impl StageCtx<SsdEvent>) {
        match work.kind {
            WorkKind::Read => {
                let mut ppa = self.ftl.lookup(work.lpa);
                if ppa == NONE {
                    if !self.cfg.unmapped_reads_hit_flash {
                        self.part_done(work.owner, ctx);
                        return;
                    }
                    // Never written: read where the page would be, as MQSim does.
                    ppa = self.home_ppa(work.lpa);
                }
                if self.traced(work.owner) && !self.host[work.owner].dead {
                    let id = self.host[work.owner].id;
                    let service = self.copies((ctx.reqs()[id].nsid - 1) as u16);
                    let now = ctx.now_ns();
                    let t = &mut self.traces[work.owner as usize];
                    t.flash_queued_ns = now;
                    t.die_ns = self.flash.die_usage(ppa, now);
                    t.at_service = service;
                }
                let op = FlashOp {
                    kind: OpKind::Read,
                    class: OpClass::HostRead,
                    ppa,
                    bytes: work.bytes,
                    owner: Cont::Read(self.works.insert(work)),
                };
                self.flash.submit(op, ctx);
            }
            WorkKind::Destage | WorkKind::Direct => {
                let old = self.ftl.lookup(work.lpa);
                if work.kind == WorkKind::Destage {
                    self.cache.prefetch_destage_done(&self.destages[work.owner]);
                }
                let partial = work.bytes < self.cfg.geo.page_bytes;
                if partial && old != NONE {
                    // The rest of the page is on flash: read it, then program the whole page.
                    self.stats.rmw_reads += 1;
                    let op = FlashOp {
                        kind: OpKind::Read,
                        class: OpClass::HostWrite,
                        ppa: old,
                        bytes: self.cfg.geo.page_bytes - work.bytes,
                        owner: Cont::Rmw(self.works.insert(work)),
                    };
                    self.flash.submit(op, ctx);
                } else {
                    self.program(work, ctx);
                }
            }
        }
    }

    fn program(&mut self, work: Work, ctx: &mut impl StageCtx<SsdEvent>) {
        let plane = self.cfg.geo.stripe(work.lpa).0;
        if !self.plane_waiters[plane as usize].is_empty() {
            self.plane_waiters[plane as usize].push_back(work);
        } else if let Some(ppa) = self.ftl.alloc_host(plane) {
            self.issue_program(work, ppa, ctx);
        } else {
            self.plane_waiters[plane as usize].push_back(work);
        }
        self.maybe_gc(plane, ctx);
    }

    fn issue_program(&mut self, work: Work, ppa: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let op = FlashOp {
            kind: OpKind::Program,
            class: OpClass::HostWrite,
            ppa,
            bytes: self.cfg.geo.page_bytes,
            owner: Cont::Program(self.works.insert(work)),
        };
        self.flash.submit(op, ctx);
    }

    fn program_done(&mut self, work: Work, ppa: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        if work.epoch != self.power_epoch && !(work.kind == WorkKind::Destage && self.cfg.plp) {
            // The power failed after this program started: its data is lost (a destage slot
            // of the old epoch has nobody to tell).
            self.ftl.abort_program(ppa);
            match work.kind {
                WorkKind::Destage => {
                    self.destages.remove(work.owner);
                }
                WorkKind::Direct => self.part_done(work.owner, ctx),
                WorkKind::Read => unreachable!("reads do not program"),
            }
            return;
        }
        self.ftl.commit_host(work.lpa, ppa);
        if self.cfg.mapping_cached
            && let Some(evicted) = self.cmt.update_at(work.lpa, work.cmt_slot)
        {
            self.mapping_write(evicted, ctx);
        }
        match work.kind {
            WorkKind::Destage => self.destage_done(work.owner, ctx),
            WorkKind::Direct => self.part_done(work.owner, ctx),
            WorkKind::Read => unreachable!("reads do not program"),
        }
    }

    // ---- garbage collection ------------------------------------------------------------------

    /// Starts collecting a victim in `plane` if its free blocks ran low, none is running and
    /// the GC gate lets GC work now (below the free-block floor it runs whatever the gate says);
    /// GC the gate keeps from starting starts when it opens.
    fn maybe_gc(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        loop {
            let free = self.ftl.free_blocks(plane);
            if self.gc[plane as usize].victim.is_some() || free >= self.cfg.gc_start_free_blocks {
                return;
            }
            if self.gate_caps.contains(GateCaps::CLOSES) {
                let set = self.cfg.geo.set_of_plane(plane);
                if !self.gate.gc_allowed(set, ctx.now_ns()) {
                    if free >= self.cfg.gc_min_free_blocks {
                        self.gc[plane as usize].deferred = true;
                        return;
                    }
                    self.gate_hook(ctx, |g, io| g.forced(set, io));
                    if !self.gate.gc_allowed(set, ctx.now_ns()) {
                        self.stats.gc_forced_victims += 1;
                    }
                    // The gate, opened, may have started this plane's GC already.
                    if self.gc[plane as usize].victim.is_some() {
                        return;
                    }
                }
            }
            self.gc[plane as usize].deferred = false;
            let Some(victim) = self.ftl.select_victim(plane) else {
                return;
            };
            let mut moves = std::mem::take(&mut self.scratch_moves);
            moves.clear();
            moves.extend(
                self.ftl
                    .valid_in(victim)
                    .map(|(src, lpa)| (src, Cont::GcRead { lpa })),
            );
            if !self.cfg.gc_timed {
                for &(src, _) in &moves {
                    let dst = self.ftl.alloc_gc(plane).expect("GC always has a block");
                    self.ftl.commit_gc(src, dst);
                }
                self.scratch_moves = moves;
                self.ftl.erase_done(victim);
                self.retry_plane(plane, ctx);
                continue;
            }
            self.gc[plane as usize] = PlaneGc {
                victim: Some(victim),
                moves_left: moves.len() as u32,
                deferred: false,
            };
            if moves.is_empty() {
                self.issue_erase(victim, ctx);
            }
            self.flash
                .submit_gc_reads(&moves, self.cfg.geo.page_bytes, ctx);
            self.scratch_moves = moves;
            return;
        }
    }

    fn issue_erase(&mut self, block: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let op = FlashOp {
            kind: OpKind::Erase,
            class: OpClass::Gc,
            ppa: self.cfg.geo.first_ppa(block),
            bytes: 0,
            owner: Cont::Erase,
        };
        self.flash.submit(op, ctx);
    }

    /// Gives freed pages of `plane` to the programs waiting for them.
    fn retry_plane(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        while let Some(&work) = self.plane_waiters[plane as usize].front() {
            let Some(ppa) = self.ftl.alloc_host(plane) else {
                break;
            };
            self.plane_waiters[plane as usize].pop_front();
            self.issue_program(work, ppa, ctx);
        }
    }

    // ---- flash completions -------------------------------------------------------------------

    /// Handles what the flash array finished or started since the last call.
    // Speed: inlined, so that the events after which the array has nothing to report skip
    // the call (it runs after every event of the drive).
    #[inline(always)]
    fn drain_flash(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        if !self.flash.programs_started.is_empty()
            || !self.flash.done.is_empty()
            || !self.flash.quiet.is_empty()
        {
            self.drain_flash_now(ctx);
        }
    }

    fn drain_flash_now(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        // A program commits when it ends, a program time from now: the map entries the commit
        // rewrites are loaded meanwhile.
        while let Some(owner) = self.flash.programs_started.pop() {
            match owner {
                Cont::GcProgram { lpa, .. } => self.ftl.prefetch_lookup(lpa),
                Cont::Program(work) => {
                    let old = self.ftl.lookup(self.works[work].lpa);
                    self.ftl.prefetch_rewrite(old);
                }
                _ => {}
            }
        }
        while let Some(op) = self.flash.done.pop() {
            match op.owner {
                Cont::Read(work) => {
                    let work = self.works.remove(work);
                    if self.traced(work.owner) {
                        let now = ctx.now_ns();
                        let usage = self.flash.die_usage(op.ppa, now);
                        let t = &mut self.traces[work.owner as usize];
                        t.flash_done_ns = now;
                        for (spent, total) in t.die_ns.iter_mut().zip(usage) {
                            *spent = total - *spent;
                        }
                    }
                    self.part_done(work.owner, ctx);
                }
                Cont::Mapping(tpage) => self.mapping_read_done(tpage, ctx),
                Cont::MappingWrite => {}
                Cont::Rmw(work) => {
                    let work = self.works.remove(work);
                    self.program(work, ctx);
                }
                Cont::Program(work) => {
                    let work = self.works.remove(work);
                    self.program_done(work, op.ppa, ctx);
                }
                Cont::GcRead { lpa } => {
                    let plane = self.cfg.geo.plane_of_ppa(op.ppa);
                    let dst = self.ftl.alloc_gc(plane).expect("GC always has a block");
                    let program = FlashOp {
                        kind: OpKind::Program,
                        class: OpClass::Gc,
                        ppa: dst,
                        bytes: self.cfg.geo.page_bytes,
                        owner: Cont::GcProgram { src: op.ppa, lpa },
                    };
                    self.flash.submit(program, ctx);
                }
                Cont::GcProgram { src, .. } => {
                    self.ftl.commit_gc(src, op.ppa);
                    let plane = self.cfg.geo.plane_of_ppa(op.ppa);
                    let gc = &mut self.gc[plane as usize];
                    gc.moves_left -= 1;
                    if gc.moves_left == 0 {
                        let victim = gc.victim.expect("a victim is being collected");
                        self.issue_erase(victim, ctx);
                    }
                }
                Cont::Erase => {
                    let block = self.cfg.geo.block_of_ppa(op.ppa);
                    let plane = self.cfg.geo.plane_of_ppa(op.ppa);
                    self.ftl.erase_done(block);
                    self.gc[plane as usize].victim = None;
                    self.retry_plane(plane, ctx);
                    self.maybe_gc(plane, ctx);
                }
            }
        }
        // Held dies whose background operation ended: their sets may enter DTWin now.
        while let Some(d) = self.flash.quiet.pop() {
            let set = self.set_of_die(d);
            self.check_settled(set, ctx);
        }
    }

    // ---- the GC gate -------------------------------------------------------------------------

    fn set_of_die(&self, d: u32) -> u16 {
        let planes = self.cfg.geo.planes_per_die;
        self.cfg.geo.set_of_plane(d * planes)
    }

    /// Whether NVM set `set` may start a window without background work: no background
    /// operation (a host write's program or its read, a mapping write-back, GC) runs on its
    /// dies. What is queued stays queued while the set is held.
    fn settled(flash: &FlashArray<Cont>, dies: &[u32]) -> bool {
        dies.iter().all(|&d| !flash.background_running(d))
    }

    /// Runs gate hook `f`, then does what it asked.
    fn gate_hook(
        &mut self,
        ctx: &mut impl StageCtx<SsdEvent>,
        f: impl FnOnce(&mut dyn GcGate, &mut GateIo<'_>),
    ) {
        let mut actions = std::mem::take(&mut self.gate_actions);
        {
            let (flash, set_dies) = (&self.flash, &self.set_dies);
            let settled = |set: u16| Self::settled(flash, &set_dies[set as usize]);
            let mut io = GateIo {
                now_ns: ctx.now_ns(),
                settled: &settled,
                actions: &mut actions,
            };
            f(self.gate.as_mut(), &mut io);
        }
        for a in actions.drain(..) {
            match a {
                GateAction::Wake { at_ns, token } => ctx.schedule(at_ns, SsdEvent::GateWake(token)),
                GateAction::Notify(n) => ctx.notify_above(n),
                GateAction::Hold(set) => {
                    for i in 0..self.set_dies[set as usize].len() {
                        let d = self.set_dies[set as usize][i];
                        self.flash.hold(d, true, ctx);
                    }
                }
                GateAction::Opened(set) => {
                    for i in 0..self.set_dies[set as usize].len() {
                        let d = self.set_dies[set as usize][i];
                        self.flash.hold(d, false, ctx);
                    }
                    for i in 0..self.cfg.geo.set_planes(set).len() {
                        let p = self.cfg.geo.set_planes(set)[i];
                        if self.gc[p as usize].deferred {
                            self.maybe_gc(p, ctx);
                        }
                    }
                    self.pump_all(ctx);
                }
            }
        }
        if self.gate_actions.capacity() < actions.capacity() {
            self.gate_actions = actions;
        }
        if self.dtwin_audit.is_some() {
            self.audit_dtwin(ctx.now_ns());
        }
    }

    /// Tells a gate waiting for `set` to settle that it has.
    fn check_settled(&mut self, set: u16, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.gate_caps.contains(GateCaps::CLOSES)
            && self.gate.awaits_settle(set)
            && Self::settled(&self.flash, &self.set_dies[set as usize])
        {
            self.gate_hook(ctx, |g, io| g.settled(set, io));
        }
    }

    /// Starts the diagnostic of background work in DTWin: the flash array tracks its dies'
    /// usage, and each DTWin of a set adds the background time of the set's dies during it.
    pub fn audit_dtwin_background(&mut self) {
        self.flash.track_die_usage();
        let sets = self.set_dies.len();
        self.dtwin_audit = Some(DtwinAudit {
            inside: vec![false; sets],
            at_entry_ns: vec![0; sets],
            background_ns: vec![0; sets],
        });
    }

    /// Background time (host writes' and GC's reads, programs and erases) of `set`'s dies up to
    /// `now`, from the flash array's usage tracking.
    fn background_ns(&self, set: u16, now: Ns) -> Ns {
        use flash::die_use;
        let mut total = 0;
        for &d in &self.set_dies[set as usize] {
            let usage = self.flash.die_usage_of(d, now);
            for class in [OpClass::HostWrite, OpClass::Gc] {
                for kind in [OpKind::Read, OpKind::Program, OpKind::Erase] {
                    total += usage[die_use(class, kind)];
                }
            }
        }
        total
    }

    /// After a gate hook: a set that entered DTWin notes its dies' background time so far, one
    /// that left adds what ran meanwhile.
    fn audit_dtwin(&mut self, now: Ns) {
        for set in 0..self.set_dies.len() as u16 {
            let inside = self.gate.window(set) == gate::WindowState::Deterministic;
            let audit = self.dtwin_audit.as_ref().expect("checked");
            if inside == audit.inside[set as usize] {
                continue;
            }
            let spent = self.background_ns(set, now);
            let audit = self.dtwin_audit.as_mut().expect("checked");
            let s = set as usize;
            audit.inside[s] = inside;
            if inside {
                audit.at_entry_ns[s] = spent;
            } else {
                audit.background_ns[s] += spent - audit.at_entry_ns[s];
            }
        }
    }

    // ---- power failure -----------------------------------------------------------------------

    /// The power fails now. Without PLP every write still in the cache is lost (whether or not
    /// it had completed); with PLP the cache reaches flash on stored energy and only writes
    /// still in flight to the device are lost. Every outstanding request completes with
    /// `IoStatus::PowerLoss`; the drive is back at once with what survived.
    pub fn power_fail(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        // Programs of host data still running are lost (a destage with PLP is not: the
        // cache it came from survives).
        self.power_epoch += 1;
        let lost_before = self.lost.len();
        let mut record_waiters = Vec::new();
        if self.volatile_cache() {
            for rec in self.cache.live_records() {
                self.lost.push(LostWrite {
                    offset_bytes: rec.offset_bytes,
                    len_bytes: rec.len_bytes,
                    job: rec.job,
                    queued_ns: rec.queued_ns,
                    acknowledged: rec.acknowledged,
                });
                if rec.waiter != u32::MAX {
                    record_waiters.push(rec.waiter);
                }
            }
            self.cache.clear();
            self.cmt.clear();
            self.destage_inflight.iter_mut().for_each(|n| *n = 0);
            self.destage_room = all_planes(self.destage_inflight.len());
        }
        let free: std::collections::HashSet<u32> = self.host.free.iter().copied().collect();
        let mut cancelled = Vec::new();
        for slot in 0..self.host.items.len() as u32 {
            if free.contains(&slot) || self.host[slot].dead {
                continue;
            }
            let id = self.host[slot].id;
            let req = ctx.reqs()[id];
            if req.op == Op::Write && !record_waiters.contains(&slot) {
                self.lost.push(LostWrite {
                    offset_bytes: req.offset_bytes,
                    len_bytes: req.len_bytes,
                    job: req.job,
                    queued_ns: req.t.queued_ns,
                    acknowledged: false,
                });
            }
            self.host[slot].dead = true;
            if self.volatile_cache() {
                // The cache these pages were reserved in is gone.
                self.host[slot].reserved = 0;
            }
            cancelled.push(id);
        }
        // Requests waiting on nothing that runs are freed now; the others when their media
        // work ends.
        let idle = self
            .flush_waiters
            .drain(..)
            .map(|(slot, _, _)| slot)
            .chain(self.blocked.drain(..))
            .chain(record_waiters);
        for slot in idle.collect::<Vec<_>>() {
            if self.host[slot].reserved > 0 {
                self.cache.release(self.host[slot].reserved);
            }
            self.host.remove(slot);
        }
        self.lost[lost_before..].sort_by_key(|l| (l.queued_ns, l.job, l.offset_bytes));
        for id in cancelled {
            ctx.reqs_mut()[id].status = IoStatus::PowerLoss;
            ctx.complete(id);
        }
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
