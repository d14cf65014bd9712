//! The SSD's tunables, declared once as tables (name, unit, default, help) that the config
//! parser, `--set`, the CLI help and docs/media.md all read; and the validated configuration
//! built from them.
//!
//! Defaults are MQSim's default `ssdconfig.xml` (configs/devices/mqsim/), so a device file only
//! states where it differs from that drive.

use qoslab_engine::{ConfigError, Ns, Settings, lookup};

use super::gate::{GATES, GateOps};
use super::geometry::{AllocationOrder, Geometry, SetGrouping};
use super::plugin::settings_of;
use super::priority::{PRIORITIES, PrioritySetup, ranks_of};
use super::scheduling::{Rules, SCHEDULINGS, SchedulingSetup};
use super::victim::{VICTIMS, VictimOps};
use crate::SubTable;

qoslab_engine::choice! {
    /// Bits per cell: the page types a block cycles through.
    pub enum CellType { Slc = "slc", Mlc = "mlc", Tlc = "tlc", Qlc = "qlc" }
}

qoslab_engine::choice! {
    /// Where the page map lives.
    pub enum Mapping { Dram = "dram", Cached = "cached" }
}

qoslab_engine::choice! {
    /// Which dies form an NVM set.
    pub enum SetsBy { Channel = "channel", Die = "die" }
}

qoslab_engine::choice! {
    /// How preconditioning wrote the drive.
    pub enum FillPattern { Sequential = "sequential", Random = "random" }
}

qoslab_engine::choice! {
    /// Free blocks a plane is left with by preconditioning (`precondition.pattern = random`).
    pub enum FreePool { Floor = "floor", Threshold = "threshold", Mqsim = "mqsim" }
}

qoslab_engine::settings! {
    /// Every tunable of `[media] model = "ssd"`. Sub-tables of `[media]` group them: the array
    /// and controller at the top, then `[media.nand]`, `[media.ftl]`, `[media.gc]`,
    /// `[media.cache]` and `[media.precondition]`; the plug-ins chosen by `nand.priority`,
    /// `gc.victim` and `gc.gate` bring their own sub-tables (`[media.gc.rga]`).
    pub struct SsdSettings in SSD_TUNABLES {
        channels: u32 = count(8, "flash channels").range(1.0, 1024.0),
        chips_per_channel: u32 = count(4, "chips (ways) sharing one channel").range(1.0, 256.0),
        dies_per_chip: u32 = count(2, "dies per chip; each works independently").range(1.0, 64.0),
        planes_per_die: u32 = count(2, "planes per die; multi-plane commands serve several at once").range(1.0, 16.0),
        blocks_per_plane: u32 = count(2048, "erase blocks per plane").range(2.0, 1e7),
        pages_per_block: u32 = count(256, "pages per erase block").range(1.0, 65535.0),
        page_bytes: u32 = bytes(8192, "flash page size (also the mapping unit)").range(512.0, 32768.0),
        channel_rate: f64 = rate(1.0 / 3.0, "channel data rate = transfer rate x width (MQSim's 333 MT/s x 1 B is 3 ns per byte)"),
        scheduling: String = text("dies", "flash scheduling: a scheduling's name (dies: each die is a server; mqsim: MQSim's transaction scheduler, whole chips as servers); its tunables are [media.scheduling.NAME]"),
        allocation_order: AllocationOrder = choice(AllocationOrder::Cwdp, "static striping of consecutive logical pages: which level (Channel, Way, Die, Plane) moves first"),
        read_overhead_ns: Ns = ns(0, "controller firmware time added to every read command"),
        write_overhead_ns: Ns = ns(0, "controller firmware time added to every write command"),
        flush_overhead_ns: Ns = ns(0, "controller time to process a FLUSH with nothing to drain"),
        nvm_sets: u32 = count(1, "NVM sets: the dies split into this many groups, each with its own blocks, free pool and GC and one namespace (NSID = set number, from 1) of an equal share of the logical pages").range(1.0, 1024.0),
        sets_by: SetsBy = choice(SetsBy::Channel, "which dies form a set: channel (whole channels per set) or die (the dies of every channel dealt out to the sets in turn)"),
        nand_cell as "nand.cell": CellType = choice(CellType::Mlc, "bits per cell: pages cycle through LSB, CSB, MSB, TSB types within a block"),
        read_lsb_ns as "nand.read_lsb_ns": Ns = ns(75_000, "tR of an LSB page (every page of SLC)"),
        read_csb_ns as "nand.read_csb_ns": Ns = ns(75_000, "tR of a CSB page (TLC, QLC)"),
        read_msb_ns as "nand.read_msb_ns": Ns = ns(75_000, "tR of an MSB page (MLC, TLC, QLC)"),
        read_tsb_ns as "nand.read_tsb_ns": Ns = ns(75_000, "tR of a TSB page (QLC)"),
        program_lsb_ns as "nand.program_lsb_ns": Ns = ns(750_000, "tPROG of an LSB page"),
        program_csb_ns as "nand.program_csb_ns": Ns = ns(750_000, "tPROG of a CSB page"),
        program_msb_ns as "nand.program_msb_ns": Ns = ns(750_000, "tPROG of an MSB page"),
        program_tsb_ns as "nand.program_tsb_ns": Ns = ns(750_000, "tPROG of a TSB page"),
        erase_ns as "nand.erase_ns": Ns = ns(3_800_000, "tBERS: block erase"),
        read_cmd_ns as "nand.read_cmd_ns": Ns = ns(290, "channel time of a single-plane read command and address (ONFI NV-DDR2: tCS + 6 tWC + tWB + tRR)"),
        read_cmd_per_plane_ns as "nand.read_cmd_per_plane_ns": Ns = ns(650, "extra channel time per additional plane of a multi-plane read (tDBSY + 6 tWC)"),
        program_cmd_ns as "nand.program_cmd_ns": Ns = ns(361, "channel time of a single-plane program command and address, before the data"),
        program_cmd_per_plane_ns as "nand.program_cmd_per_plane_ns": Ns = ns(816, "extra channel time per additional plane of a multi-plane program"),
        erase_cmd_ns as "nand.erase_cmd_ns": Ns = ns(220, "channel time of a single-plane erase command"),
        erase_cmd_per_plane_ns as "nand.erase_cmd_per_plane_ns": Ns = ns(700, "extra channel time per additional plane of an erase"),
        multiplane as "nand.multiplane": bool = flag(true, "combine operations of the same kind on different planes of one die into one command"),
        chip_exclusive as "nand.chip_exclusive": bool = flag(false, "a chip takes new commands only when all its dies are idle, then starts them all (MQSim's own scheduler is media.scheduling = mqsim); false: dies work independently (ONFI multi-LUN operation). Suspension needs false"),
        erase_suspend as "nand.erase_suspend": bool = flag(true, "a read may suspend a running erase (MQSim: ERASE)"),
        program_suspend as "nand.program_suspend": bool = flag(false, "a read may suspend a running program"),
        suspend_erase_ns as "nand.suspend_erase_ns": Ns = ns(700_000, "time to suspend an erase"),
        suspend_program_ns as "nand.suspend_program_ns": Ns = ns(100_000, "time to suspend a program"),
        suspend_min_remaining_ns as "nand.suspend_min_remaining_ns": Ns = ns(700_000, "suspend only if the running operation still has at least this long to go"),
        priority as "nand.priority": String = text("reads_first", "order in which a die and a channel serve operations by class: a die priority's name (reads_first: mapping reads, host reads, host writes, GC; writes_first: host writes before host reads); its tunables are [media.nand.NAME]"),
        overprovisioning as "ftl.overprovisioning": f64 = ratio(0.07, "fraction of physical pages hidden from the host: logical pages = physical x (1 - this)").range(0.0, 0.9),
        mapping as "ftl.mapping": Mapping = choice(Mapping::Cached, "dram: the whole page map in controller DRAM; cached: a mapping cache (CMT) whose misses read the translation page from flash"),
        cmt_bytes as "ftl.cmt_bytes": u64 = bytes(2 << 20, "mapping cache capacity (mapping = cached)"),
        cmt_entry_bytes as "ftl.cmt_entry_bytes": u64 = bytes(9, "DRAM bytes per cached mapping entry (MQSim: ceil((2 log2(pages) + sectors per page) / 8))").range(1.0, 64.0),
        translation_entry_bytes as "ftl.translation_entry_bytes": u64 = bytes(6, "bytes per entry in an on-flash translation page (entries per page = page_bytes / this)").range(1.0, 64.0),
        translation_read_bytes as "ftl.translation_read_bytes": u32 = bytes(512, "bytes moved over the channel when a mapping miss reads its translation page").range(1.0, 65536.0),
        unmapped_reads_hit_flash as "ftl.unmapped_reads_hit_flash": bool = flag(true, "a read of a never-written page still reads flash (as MQSim does); false: it completes after the controller overhead"),
        gc_victim as "gc.victim": String = text("rga", "victim choice: a victim policy's name (greedy: fewest valid pages; cost_benefit: Rosenblum's (1-u)/2u x age; rga: best of d random; fifo: oldest); its tunables are [media.gc.NAME]"),
        gc_gate as "gc.gate": String = text("always", "when GC may run on an NVM set: a gate's name (always); its tunables are [media.gc.NAME]"),
        gc_threshold as "gc.threshold": f64 = ratio(0.05, "a plane starts GC when its free blocks fall below this fraction of its blocks"),
        gc_min_free_blocks as "gc.min_free_blocks": u32 = count(2, "free blocks below which GC runs whatever gc.threshold says; host writes wait at 1 (kept for GC)").range(2.0, 1e6),
        gc_timed as "gc.timed": bool = flag(true, "false: GC copies and erases take no die or channel time (an ideal drive without GC interference; write amplification is still counted)"),
        cache_bytes as "cache.bytes": u64 = bytes(256 << 20, "write-back cache capacity; 0 = no cache (write-through)"),
        writeback_start as "cache.writeback_start": f64 = ratio(0.0, "dirty fraction of the cache at which destaging to flash starts (0 = destage at once)"),
        destage_per_plane as "cache.destage_per_plane": u32 = count(2, "most destage programs queued on one plane at a time").range(1.0, 1024.0),
        dram_row_bytes as "cache.dram_row_bytes": u64 = bytes(8192, "DRAM row size"),
        dram_rate_mts as "cache.dram_rate_mts": f64 = count(100, "DRAM transfer rate, mega-transfers per second").range(1.0, 1e6),
        dram_burst_bytes as "cache.dram_burst_bytes": u64 = bytes(1, "bytes per DRAM transfer").range(1.0, 4096.0),
        dram_trcd_ns as "cache.dram_trcd_ns": Ns = ns(13, "DRAM row-to-column delay"),
        dram_tcl_ns as "cache.dram_tcl_ns": Ns = ns(13, "DRAM CAS latency"),
        dram_trp_ns as "cache.dram_trp_ns": Ns = ns(13, "DRAM row precharge"),
        keep_destaged as "cache.keep_destaged": bool = flag(true, "a page written to flash stays in the cache as a clean entry that serves read hits until evicted; false: MQSim's WRITE_CACHE rule, its slot is freed when its flash write completes (no read hits on destaged pages; media.scheduling = mqsim always uses it)"),
        plp as "cache.plp": bool = flag(false, "power-loss protection: the cache is durable, so FLUSH completes at once, FUA needs no flash program, and power_fail loses no completed write"),
        power_fail_ns as "cache.power_fail_ns": Ns = ns(0, "simulated time of a power failure (0 = none): without PLP every completed write still in the cache is lost"),
        fill as "precondition.fill": f64 = ratio(0.0, "fraction of the logical pages written before the run (0 = a fresh drive)"),
        fill_pattern as "precondition.pattern": FillPattern = choice(FillPattern::Random, "how they were written: sequential leaves full blocks; random leaves the steady-state mix of valid and invalid pages of the GC policy"),
        free_pool as "precondition.free_pool": FreePool = choice(FreePool::Floor, "free blocks each plane is left with (random pattern): floor (1: a drive written flat out, the host waiting for each erase), threshold (gc.threshold's: a drive whose GC kept pace with its writes), mqsim (half of gc.threshold's, as MQSim's preconditioner leaves them)"),
        warm_cmt as "precondition.warm_cmt": bool = flag(false, "the mapping cache (ftl.mapping = cached) starts full of clean entries, each NVM set's share of it holding the set's first written logical pages, as after reads of them; false: it starts empty, every first read of a page misses"),
        diag_dtwin_audit as "diag.dtwin_audit": bool = flag(false, "a diagnostic: track what each die does and report, per NVM set, the time its dies spent on background work (host writes' and GC's reads, programs and erases) while the set was in a PLM deterministic window, as the counters set<N>_background_in_dtwin_us"),
        diag_slow_reads as "diag.slow_reads": u32 = count(0, "a diagnostic: keep this many slowest host reads, each split by what it waited for (DRAM, each kind of die work) and the window of its NVM set, and report them as the counters slowest_* (and slowest_tenth_*); 0 = off").range(0.0, 1e6),
    }
}

/// The sub-tables of the SSD's plug-ins, each `[media.KEY]`.
pub fn sub_tables() -> Vec<SubTable> {
    let mut out = Vec::new();
    super::plugin::sub_tables("scheduling", SCHEDULINGS, &mut out);
    super::plugin::sub_tables("nand", PRIORITIES, &mut out);
    super::plugin::sub_tables("gc", VICTIMS, &mut out);
    super::plugin::sub_tables("gc", GATES, &mut out);
    out
}

/// The per-page-type latencies of one cell type, in page order within a block.
#[derive(Clone, Debug)]
pub struct CellTimings {
    pub read_ns: Vec<Ns>,
    pub program_ns: Vec<Ns>,
}

impl CellTimings {
    #[inline]
    pub fn read_ns(&self, page_in_block: u32) -> Ns {
        self.read_ns[page_in_block as usize % self.read_ns.len()]
    }
    #[inline]
    pub fn program_ns(&self, page_in_block: u32) -> Ns {
        self.program_ns[page_in_block as usize % self.program_ns.len()]
    }
}

/// A validated SSD configuration.
#[derive(Clone)]
pub struct SsdConfig {
    pub geo: Geometry,
    /// Bytes per ns on a channel.
    pub channel_rate: f64,
    pub read_overhead_ns: Ns,
    pub write_overhead_ns: Ns,
    pub flush_overhead_ns: Ns,

    pub cell: CellTimings,
    pub erase_ns: Ns,
    pub read_cmd_ns: Ns,
    pub read_cmd_per_plane_ns: Ns,
    pub program_cmd_ns: Ns,
    pub program_cmd_per_plane_ns: Ns,
    pub erase_cmd_ns: Ns,
    pub erase_cmd_per_plane_ns: Ns,
    pub multiplane: bool,
    pub chip_exclusive: bool,
    /// The flash scheduling's rules.
    pub scheduling: Rules,
    pub erase_suspend: bool,
    pub program_suspend: bool,
    pub suspend_erase_ns: Ns,
    pub suspend_program_ns: Ns,
    pub suspend_min_remaining_ns: Ns,
    /// The rank of each operation class at the dies and channels (the die priority's).
    pub die_ranks: [u8; super::flash::CLASSES],

    pub logical_pages: u32,
    pub mapping_cached: bool,
    /// Mapping entries the CMT holds (mapping = cached).
    pub cmt_entries: u32,
    pub translation_entries_per_page: u32,
    pub translation_read_bytes: u32,
    /// The GC victim policy and its sub-table.
    pub victim: &'static VictimOps,
    pub victim_settings: Settings,
    /// The GC gate and its sub-table.
    pub gate: &'static GateOps,
    pub gate_settings: Settings,
    /// GC starts when a plane has fewer free blocks than this.
    pub gc_start_free_blocks: u32,
    /// Below this many free blocks GC runs whatever the GC gate says.
    pub gc_min_free_blocks: u32,
    pub gc_timed: bool,
    pub unmapped_reads_hit_flash: bool,

    pub cache_pages: u32,
    pub writeback_start: f64,
    pub destage_per_plane: u32,
    /// Destaged pages stay as clean entries serving read hits.
    pub keep_destaged: bool,
    pub dram_row_bytes: u64,
    pub dram_ns_per_transfer: f64,
    pub dram_burst_bytes: u64,
    pub dram_trcd_ns: Ns,
    pub dram_tcl_ns: Ns,
    pub dram_trp_ns: Ns,
    pub plp: bool,
    pub power_fail_ns: Ns,

    /// Slowest reads the diagnostic keeps (0: off).
    pub slow_reads: u32,
    /// The diagnostic of background work in DTWin.
    pub dtwin_audit: bool,
    pub fill: f64,
    /// The mapping cache starts full of the sets' first written pages (else empty).
    pub warm_cmt: bool,
    pub fill_pattern: FillPattern,
    pub free_pool: FreePool,
}

impl std::fmt::Debug for SsdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsdConfig")
            .field("geo", &self.geo)
            .field("logical_pages", &self.logical_pages)
            .field("victim", &self.victim.name)
            .field("gate", &self.gate.name)
            .finish_non_exhaustive()
    }
}

impl SsdConfig {
    /// Checks the combination of values and derives the model's configuration from the
    /// `[media]` settings and the plug-ins' sub-tables (`sections`, each `[media.KEY]`; those
    /// missing keep their defaults).
    pub fn from_settings(s: &Settings, sections: &[Settings]) -> Result<SsdConfig, ConfigError> {
        let err = |msg: String| Err(ConfigError::new(msg));
        let t = SsdSettings::from_settings(s);
        let (channels, ways, dies, planes) = (
            t.channels,
            t.chips_per_channel,
            t.dies_per_chip,
            t.planes_per_die,
        );
        let (blocks, pages, page_bytes) = (t.blocks_per_plane, t.pages_per_block, t.page_bytes);
        if page_bytes % 512 != 0 {
            return err(format!(
                "field 'media.page_bytes': expected a multiple of 512 bytes, got {page_bytes}"
            ));
        }
        let physical = u64::from(channels)
            * u64::from(ways)
            * u64::from(dies)
            * u64::from(planes)
            * u64::from(blocks)
            * u64::from(pages);
        if physical >= u64::from(u32::MAX) {
            return err(format!(
                "impossible geometry: {physical} physical pages, more than the 2^32 - 1 a page number can hold (use larger pages)"
            ));
        }
        let geo = Geometry::new(channels, ways, dies, planes, blocks, pages, page_bytes)
            .with_order(t.allocation_order.name());
        if t.channel_rate <= 0.0 {
            return err("field 'media.channel_rate': expected a positive rate, got 0".into());
        }

        // Page types in block order: LSB, MSB for MLC; LSB, CSB, MSB for TLC; LSB, CSB, MSB,
        // TSB for QLC (MQSim's convention).
        let (read_ns, program_ns) = match t.nand_cell {
            CellType::Slc => (vec![t.read_lsb_ns], vec![t.program_lsb_ns]),
            CellType::Mlc => (
                vec![t.read_lsb_ns, t.read_msb_ns],
                vec![t.program_lsb_ns, t.program_msb_ns],
            ),
            CellType::Tlc => (
                vec![t.read_lsb_ns, t.read_csb_ns, t.read_msb_ns],
                vec![t.program_lsb_ns, t.program_csb_ns, t.program_msb_ns],
            ),
            CellType::Qlc => (
                vec![t.read_lsb_ns, t.read_csb_ns, t.read_msb_ns, t.read_tsb_ns],
                vec![
                    t.program_lsb_ns,
                    t.program_csb_ns,
                    t.program_msb_ns,
                    t.program_tsb_ns,
                ],
            ),
        };
        let cell = CellTimings {
            read_ns,
            program_ns,
        };

        let priority = lookup(PRIORITIES, "media.nand.priority", &t.priority)?;
        let priority_settings = settings_of("nand", PRIORITIES, priority, sections)?;
        let build = priority.build.expect("checked by lookup");
        let die_ranks = ranks_of(
            build(&PrioritySetup {
                settings: &priority_settings,
            })
            .as_ref(),
        )
        .map_err(|m| ConfigError::new(format!("field 'media.nand.priority': {m}")))?;
        let scheduling = lookup(SCHEDULINGS, "media.scheduling", &t.scheduling)?;
        let scheduling_settings = settings_of("scheduling", SCHEDULINGS, scheduling, sections)?;
        let scheduling = scheduling.build.expect("checked by lookup")(&SchedulingSetup {
            settings: &scheduling_settings,
        })
        .rules();
        let victim = lookup(VICTIMS, "media.gc.victim", &t.gc_victim)?;
        let victim_settings = settings_of("gc", VICTIMS, victim, sections)?;
        let gate = lookup(GATES, "media.gc.gate", &t.gc_gate)?;
        let gate_settings = settings_of("gc", GATES, gate, sections)?;

        // Each set exports an equal share of the logical pages (whole pages: the remainder of
        // an uneven split is left unused).
        let logical_all = (geo.physical_pages() as f64 * (1.0 - t.overprovisioning)).floor() as u64;
        let per_set = (logical_all / u64::from(t.nvm_sets)) as u32;
        let logical = u64::from(per_set) * u64::from(t.nvm_sets);
        let grouping = match t.sets_by {
            SetsBy::Channel => SetGrouping::Channel,
            SetsBy::Die => SetGrouping::Die,
        };
        let geo = geo
            .with_sets(t.nvm_sets, grouping, per_set)
            .map_err(|m| ConfigError::new(format!("field 'media.nvm_sets': {m}")))?;
        let gc_start = ((t.gc_threshold * f64::from(blocks)) as u32).max(t.gc_min_free_blocks);
        // Each plane needs room for its logical pages plus the free blocks GC keeps and the two
        // open blocks (host and GC frontiers).
        let per_plane_logical = u64::from(per_set).div_ceil(u64::from(geo.planes() / t.nvm_sets));
        let per_plane_room = u64::from(blocks.saturating_sub(gc_start + 2)) * u64::from(pages);
        if per_plane_logical > per_plane_room {
            return err(format!(
                "impossible geometry: {per_plane_logical} logical pages per plane do not fit in the {per_plane_room} pages left after {gc_start} free blocks for GC and 2 open blocks (raise media.ftl.overprovisioning or lower media.gc.threshold)"
            ));
        }
        let translation_entries_per_page =
            (u64::from(page_bytes) / t.translation_entry_bytes).max(1) as u32;
        let cmt_entries = (t.cmt_bytes / t.cmt_entry_bytes).min(u64::from(u32::MAX)) as u32;
        let mapping_cached = t.mapping == Mapping::Cached;
        if mapping_cached && cmt_entries == 0 {
            return err(format!(
                "field 'media.ftl.cmt_bytes': a cached mapping needs room for at least one {}-byte entry",
                t.cmt_entry_bytes
            ));
        }

        let cache_pages = (t.cache_bytes / u64::from(page_bytes)).min(u64::from(u32::MAX)) as u32;
        if t.cache_bytes > 0 && cache_pages == 0 {
            return err(format!(
                "field 'media.cache.bytes': expected 0 or at least one page ({page_bytes} bytes), got {}",
                t.cache_bytes
            ));
        }
        // A scheduling that bounds the writes in flight to flash bounds the cache's dirty pages.
        let cache_pages = match scheduling.dirty_pages_per_plane {
            0 => cache_pages,
            per_plane => cache_pages.min(per_plane.saturating_mul(geo.planes())),
        };

        Ok(SsdConfig {
            geo,
            channel_rate: t.channel_rate,
            read_overhead_ns: t.read_overhead_ns,
            write_overhead_ns: t.write_overhead_ns,
            flush_overhead_ns: t.flush_overhead_ns,
            cell,
            erase_ns: t.erase_ns,
            read_cmd_ns: t.read_cmd_ns,
            read_cmd_per_plane_ns: t.read_cmd_per_plane_ns,
            program_cmd_ns: t.program_cmd_ns,
            program_cmd_per_plane_ns: t.program_cmd_per_plane_ns,
            erase_cmd_ns: t.erase_cmd_ns,
            erase_cmd_per_plane_ns: t.erase_cmd_per_plane_ns,
            multiplane: t.multiplane,
            chip_exclusive: t.chip_exclusive,
            scheduling,
            erase_suspend: t.erase_suspend,
            program_suspend: t.program_suspend,
            suspend_erase_ns: t.suspend_erase_ns,
            suspend_program_ns: t.suspend_program_ns,
            suspend_min_remaining_ns: t.suspend_min_remaining_ns,
            die_ranks,
            logical_pages: logical as u32,
            mapping_cached,
            cmt_entries,
            translation_entries_per_page,
            translation_read_bytes: t.translation_read_bytes,
            victim,
            victim_settings,
            gate,
            gate_settings,
            gc_start_free_blocks: gc_start,
            gc_min_free_blocks: t.gc_min_free_blocks,
            gc_timed: t.gc_timed,
            unmapped_reads_hit_flash: t.unmapped_reads_hit_flash,
            cache_pages,
            writeback_start: t.writeback_start,
            destage_per_plane: t.destage_per_plane,
            keep_destaged: t.keep_destaged && scheduling.keep_destaged,
            dram_row_bytes: t.dram_row_bytes.max(1),
            dram_ns_per_transfer: 1000.0 / t.dram_rate_mts,
            dram_burst_bytes: t.dram_burst_bytes,
            dram_trcd_ns: t.dram_trcd_ns,
            dram_tcl_ns: t.dram_tcl_ns,
            dram_trp_ns: t.dram_trp_ns,
            plp: t.plp,
            power_fail_ns: t.power_fail_ns,
            slow_reads: t.diag_slow_reads,
            dtwin_audit: t.diag_dtwin_audit,
            fill: t.fill,
            warm_cmt: t.warm_cmt,
            fill_pattern: t.fill_pattern,
            free_pool: t.free_pool,
        })
    }

    /// Channel time to move `bytes` (rounded to the nearest ns).
    #[inline]
    pub fn transfer_ns(&self, bytes: u32) -> Ns {
        (f64::from(bytes) / self.channel_rate).round() as Ns
    }

    /// The longest a background operation a die has started (a batch of host writes' or GC's
    /// operations) can still take: its array time (the longest of an erase, a program and a
    /// read) and its channel transfers, each behind at most one hold of the channel by each
    /// die of the channel (a die that stops background work sends what it still runs of it
    /// ahead of every other waiter, so only transfers already under way or of such stopping
    /// dies come first). A set asked into a window without background work waits at most
    /// this long (the NDWIN Time Minimum Low it advertises).
    pub fn background_end_bound_ns(&self) -> Ns {
        let geo = &self.geo;
        let planes = if self.multiplane {
            geo.planes_per_die.min(4)
        } else {
            1
        };
        let extra = Ns::from(planes - 1);
        let page = self.transfer_ns(geo.page_bytes);
        // The longest hold of a channel: a multi-plane program's command and data.
        let hold = (self.program_cmd_ns + extra * self.program_cmd_per_plane_ns)
            .max(self.read_cmd_ns + extra * self.read_cmd_per_plane_ns)
            .max(self.erase_cmd_ns + extra * self.erase_cmd_per_plane_ns)
            + Ns::from(planes) * page;
        let array = self.erase_ns.max(
            self.cell
                .program_ns
                .iter()
                .chain(&self.cell.read_ns)
                .copied()
                .max()
                .unwrap_or(0),
        );
        // The command, then (a read) one data-out per plane, each behind the channel's dies.
        let transfers = 1 + Ns::from(planes);
        array + transfers * Ns::from(geo.dies_per_channel()) * hold
    }

    /// Time of one DRAM access of `bytes` (MQSim's estimate: tRCD + tCL per row opened, tRP
    /// between rows, and the DDR transfers: two per clock of `1000 / rate` ns).
    pub fn dram_access_ns(&self, bytes: u64) -> Ns {
        if bytes == 0 {
            return 0;
        }
        let rows = bytes.div_ceil(self.dram_row_bytes);
        let transfers = (bytes / self.dram_burst_bytes / 2) as f64 * self.dram_ns_per_transfer;
        rows * (self.dram_trcd_ns + self.dram_tcl_ns)
            + (rows - 1) * self.dram_trp_ns
            + transfers as Ns
    }

    /// Bytes per logical page sector mask bit (the write cache tracks 64 sectors a page).
    pub fn sector_bytes(&self) -> u32 {
        (self.geo.page_bytes / 64).max(512)
    }

    pub fn sectors_per_page(&self) -> u32 {
        self.geo.page_bytes / self.sector_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::ConfigDoc;
    use std::path::Path;

    fn build(text: &str) -> Result<SsdConfig, ConfigError> {
        let mut doc = ConfigDoc::parse(Path::new("dev.toml"), &format!("[media]\n{text}"))?;
        let subs = sub_tables()
            .iter()
            .map(|t| doc.section(&format!("media.{}", t.key), t.tunables))
            .collect::<Result<Vec<_>, _>>()?;
        let s = doc.section("media", SSD_TUNABLES)?;
        doc.finish()?;
        SsdConfig::from_settings(&s, &subs)
    }

    #[test]
    fn defaults_are_mqsims_default_drive() {
        let c = build("").unwrap();
        // 8 channels x 4 chips x 2 dies x 2 planes x 2048 blocks x 256 pages = 2^26.
        assert_eq!(c.geo.physical_pages(), 1 << 26);
        // 7 % hidden: 67,108,864 x 0.93 = 62,411,243.52, whole pages: 62,411,243.
        assert_eq!(c.logical_pages, 62_411_243);
        // 333 MT/s x 1 byte: 3 ns a byte (MQSim's integer timing), so 4096 B take 12,288 ns.
        assert_eq!(c.transfer_ns(4096), 12_288);
        assert_eq!(c.transfer_ns(8192), 24_576);
        assert_eq!(c.transfer_ns(512), 1_536);
        // GC starts below 5 % of a plane's 2048 blocks: 102.4, whole blocks.
        assert_eq!(c.gc_start_free_blocks, 102);
        assert_eq!(c.victim.name, "rga");
        assert_eq!(c.gate.name, "always");
        assert_eq!(c.die_ranks, [0, 1, 2, 3]);
        // 2 MiB of mapping cache at 9 B an entry: 2,097,152 / 9 = 233,016.9, whole entries.
        assert_eq!(c.cmt_entries, 233_016);
        // An 8 KiB translation page of 6-byte entries: 8192 / 6 = 1365.3.
        assert_eq!(c.translation_entries_per_page, 1365);
        // 256 MiB of write cache in 8 KiB pages: 2^28 / 2^13 = 32,768.
        assert_eq!(c.cache_pages, 32_768);
        // 4 KiB through MQSim's 100 MT/s, 1-byte DRAM: 13 + 13 + 2048 x 10 ns.
        assert_eq!(c.dram_access_ns(4096), 20_506);
        // tBERS, then the command and two data-outs, each behind the 8 dies of a channel
        // holding it for a two-plane program (361 + 816 ns and two 8 KiB pages at 3 ns/B).
        assert_eq!(
            c.background_end_bound_ns(),
            3_800_000 + 3 * 8 * (361 + 816 + 2 * 24_576)
        );
    }

    #[test]
    fn per_page_type_latencies_follow_the_cell_type() {
        let c = build(
            "[media.nand]\ncell = \"tlc\"\nread_lsb_ns = \"50us\"\nread_csb_ns = \"70us\"\nread_msb_ns = \"90us\"\n",
        )
        .unwrap();
        assert_eq!(c.cell.read_ns(0), 50_000);
        assert_eq!(c.cell.read_ns(1), 70_000);
        assert_eq!(c.cell.read_ns(2), 90_000);
        assert_eq!(c.cell.read_ns(3), 50_000);
    }

    #[test]
    fn impossible_geometries_are_refused_with_the_reason() {
        let e = build("[media.ftl]\noverprovisioning = -0.01\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("dev.toml:3: field 'media.ftl.overprovisioning'"),
            "{e}"
        );
        let e = build("[media.ftl]\noverprovisioning = 0.01\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("do not fit"), "{e}");
        let e = build("page_bytes = 1000\n").unwrap_err().to_string();
        assert!(e.contains("multiple of 512"), "{e}");
        let e = build("blocks_per_plane = 1000000\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("2^32"), "{e}");
        let e = build("[media.nand]\nerase_ns = \"4KiB\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("dev.toml:3: field 'media.nand.erase_ns': expected a time"),
            "{e}"
        );
        let e = build("chanels = 4\n").unwrap_err().to_string();
        assert!(
            e.starts_with("dev.toml:2: unknown key 'media.chanels'"),
            "{e}"
        );
    }

    #[test]
    fn plug_ins_are_chosen_by_name_and_read_their_own_sub_tables() {
        let c = build("[media.gc]\nvictim = \"rga\"\n[media.gc.rga]\nchoices = 5\n").unwrap();
        assert_eq!(c.victim.name, "rga");
        assert_eq!(c.victim_settings.u64("choices"), 5);
        let c = build("[media.nand]\npriority = \"writes_first\"\n").unwrap();
        assert_eq!(c.die_ranks, [0, 2, 1, 3]);
        let e = build("[media.gc]\nvictim = \"lru\"\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "field 'media.gc.victim': expected one of greedy, cost_benefit, rga, fifo, got 'lru'"
        );
        // A sub-table of a policy that is not chosen would do nothing: it is an error.
        let e = build("[media.gc]\nvictim = \"greedy\"\n[media.gc.rga]\nchoices = 5\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "field 'media.gc.rga.choices': the GC victim policy is 'greedy', not 'rga' (remove [media.gc.rga] or choose 'rga')"
        );
    }
}
