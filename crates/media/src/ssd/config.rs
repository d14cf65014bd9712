//! The SSD's tunables, declared once as tables (name, unit, default, help) that the config
//! parser, `--set`, the CLI help and docs/media.md all read; and the validated configuration
//! built from them.
//!
//! Defaults are MQSim's default `ssdconfig.xml` (configs/devices/mqsim/), so a device file only
//! states where it differs from that drive.

use qoslab_engine::Ns;
use qoslab_engine::{ConfigError, Settings, Tunable};

use super::geometry::{ALLOCATION_ORDERS, Geometry};

/// Every tunable of `[media] model = "ssd"`. Sub-tables of `[media]` group them: the array
/// and controller at the top, then `[media.nand]`, `[media.ftl]`, `[media.cache]` and
/// `[media.precondition]`.
pub static SSD_TUNABLES: &[Tunable] = &[
    Tunable::count("channels", 8, "flash channels").range(1.0, 1024.0),
    Tunable::count("chips_per_channel", 4, "chips (ways) sharing one channel").range(1.0, 256.0),
    Tunable::count("dies_per_chip", 2, "dies per chip; each works independently").range(1.0, 64.0),
    Tunable::count("planes_per_die", 2, "planes per die; multi-plane commands serve several at once")
        .range(1.0, 16.0),
    Tunable::count("blocks_per_plane", 2048, "erase blocks per plane").range(2.0, 1e7),
    Tunable::count("pages_per_block", 256, "pages per erase block").range(1.0, 65535.0),
    Tunable::bytes("page_bytes", 8192, "flash page size (also the mapping unit)")
        .range(512.0, 32768.0),
    Tunable::rate(
        "channel_rate",
        1.0 / 3.0,
        "channel data rate = transfer rate x width (MQSim's 333 MT/s x 1 B is 3 ns per byte)",
    ),
    Tunable::choice(
        "allocation_order",
        ALLOCATION_ORDERS,
        "cwdp",
        "static striping of consecutive logical pages: which level (Channel, Way, Die, Plane) moves first",
    ),
    Tunable::ns("read_overhead_ns", 0, "controller firmware time added to every read command"),
    Tunable::ns("write_overhead_ns", 0, "controller firmware time added to every write command"),
    Tunable::ns("flush_overhead_ns", 0, "controller time to process a FLUSH with nothing to drain"),
    Tunable::choice(
        "nand.cell",
        &["slc", "mlc", "tlc", "qlc"],
        "mlc",
        "bits per cell: pages cycle through LSB, CSB, MSB, TSB types within a block",
    ),
    Tunable::ns("nand.read_lsb_ns", 75_000, "tR of an LSB page (every page of SLC)"),
    Tunable::ns("nand.read_csb_ns", 75_000, "tR of a CSB page (TLC, QLC)"),
    Tunable::ns("nand.read_msb_ns", 75_000, "tR of an MSB page (MLC, TLC, QLC)"),
    Tunable::ns("nand.read_tsb_ns", 75_000, "tR of a TSB page (QLC)"),
    Tunable::ns("nand.program_lsb_ns", 750_000, "tPROG of an LSB page"),
    Tunable::ns("nand.program_csb_ns", 750_000, "tPROG of a CSB page"),
    Tunable::ns("nand.program_msb_ns", 750_000, "tPROG of an MSB page"),
    Tunable::ns("nand.program_tsb_ns", 750_000, "tPROG of a TSB page"),
    Tunable::ns("nand.erase_ns", 3_800_000, "tBERS: block erase"),
    Tunable::ns(
        "nand.read_cmd_ns",
        290,
        "channel time of a single-plane read command and address (ONFI NV-DDR2: tCS + 6 tWC + tWB + tRR)",
    ),
    Tunable::ns(
        "nand.read_cmd_per_plane_ns",
        650,
        "extra channel time per additional plane of a multi-plane read (tDBSY + 6 tWC)",
    ),
    Tunable::ns(
        "nand.program_cmd_ns",
        361,
        "channel time of a single-plane program command and address, before the data",
    ),
    Tunable::ns(
        "nand.program_cmd_per_plane_ns",
        816,
        "extra channel time per additional plane of a multi-plane program",
    ),
    Tunable::ns("nand.erase_cmd_ns", 220, "channel time of a single-plane erase command"),
    Tunable::ns("nand.erase_cmd_per_plane_ns", 700, "extra channel time per additional plane of an erase"),
    Tunable::flag(
        "nand.multiplane",
        true,
        "combine operations of the same kind on different planes of one die into one command",
    ),
    Tunable::flag(
        "nand.chip_exclusive",
        false,
        "a chip takes new commands only when all its dies are idle (MQSim's transaction scheduler); false: dies work independently (ONFI multi-LUN operation). Suspension needs false",
    ),
    Tunable::flag("nand.erase_suspend", true, "a read may suspend a running erase (MQSim: ERASE)"),
    Tunable::flag("nand.program_suspend", false, "a read may suspend a running program"),
    Tunable::ns("nand.suspend_erase_ns", 700_000, "time to suspend an erase"),
    Tunable::ns("nand.suspend_program_ns", 100_000, "time to suspend a program"),
    Tunable::ns(
        "nand.suspend_min_remaining_ns",
        700_000,
        "suspend only if the running operation still has at least this long to go",
    ),
    Tunable::ratio(
        "ftl.overprovisioning",
        0.07,
        "fraction of physical pages hidden from the host: logical pages = physical x (1 - this)",
    )
    .range(0.0, 0.9),
    Tunable::choice(
        "ftl.mapping",
        &["dram", "cached"],
        "cached",
        "dram: the whole page map in controller DRAM; cached: a mapping cache (CMT) whose misses read the translation page from flash",
    ),
    Tunable::bytes("ftl.cmt_bytes", 2 << 20, "mapping cache capacity (mapping = cached)"),
    Tunable::bytes(
        "ftl.cmt_entry_bytes",
        9,
        "DRAM bytes per cached mapping entry (MQSim: ceil((2 log2(pages) + sectors per page) / 8))",
    )
    .range(1.0, 64.0),
    Tunable::bytes(
        "ftl.translation_entry_bytes",
        6,
        "bytes per entry in an on-flash translation page (entries per page = page_bytes / this)",
    )
    .range(1.0, 64.0),
    Tunable::bytes(
        "ftl.translation_read_bytes",
        512,
        "bytes moved over the channel when a mapping miss reads its translation page",
    )
    .range(1.0, 65536.0),
    Tunable::choice(
        "ftl.gc_policy",
        &["greedy", "cost_benefit", "rga", "fifo"],
        "rga",
        "victim choice: fewest valid pages; Rosenblum's (1-u)/2u x age; best of d random (RGA, d-choices); oldest",
    ),
    Tunable::count(
        "ftl.rga_choices",
        0,
        "d of the RGA policy; 0 = log2(blocks_per_plane) as MQSim (11 for 2048 blocks)",
    ),
    Tunable::ratio(
        "ftl.gc_threshold",
        0.05,
        "a plane starts GC when its free blocks fall below this fraction of its blocks",
    ),
    Tunable::count(
        "ftl.gc_min_free_blocks",
        2,
        "free blocks below which GC runs whatever gc_threshold says; host writes wait at 1 (kept for GC)",
    )
    .range(2.0, 1e6),
    Tunable::flag(
        "ftl.gc_timed",
        true,
        "false: GC copies and erases take no die or channel time (an ideal drive without GC interference; write amplification is still counted)",
    ),
    Tunable::flag(
        "ftl.unmapped_reads_hit_flash",
        true,
        "a read of a never-written page still reads flash (as MQSim does); false: it completes after the controller overhead",
    ),
    Tunable::bytes("cache.bytes", 256 << 20, "write-back cache capacity; 0 = no cache (write-through)"),
    Tunable::ratio(
        "cache.writeback_start",
        0.0,
        "dirty fraction of the cache at which destaging to flash starts (0 = destage at once)",
    ),
    Tunable::count(
        "cache.destage_per_plane",
        2,
        "most destage programs queued on one plane at a time",
    )
    .range(1.0, 1024.0),
    Tunable::bytes("cache.dram_row_bytes", 8192, "DRAM row size"),
    Tunable::count("cache.dram_rate_mts", 100, "DRAM transfer rate, mega-transfers per second")
        .range(1.0, 1e6),
    Tunable::bytes("cache.dram_burst_bytes", 1, "bytes per DRAM transfer").range(1.0, 4096.0),
    Tunable::ns("cache.dram_trcd_ns", 13, "DRAM row-to-column delay"),
    Tunable::ns("cache.dram_tcl_ns", 13, "DRAM CAS latency"),
    Tunable::ns("cache.dram_trp_ns", 13, "DRAM row precharge"),
    Tunable::flag(
        "cache.plp",
        false,
        "power-loss protection: the cache is durable, so FLUSH completes at once, FUA needs no flash program, and power_fail loses no completed write",
    ),
    Tunable::ns(
        "cache.power_fail_ns",
        0,
        "simulated time of a power failure (0 = none): without PLP every completed write still in the cache is lost",
    ),
    Tunable::ratio(
        "precondition.fill",
        0.0,
        "fraction of the logical pages written before the run (0 = a fresh drive)",
    ),
    Tunable::choice(
        "precondition.pattern",
        &["sequential", "random"],
        "random",
        "how they were written: sequential leaves full blocks; random leaves the steady-state mix of valid and invalid pages of the GC policy",
    ),
];

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPolicy {
    Greedy,
    CostBenefit,
    /// Best of `d` blocks drawn at random (MQSim's RGA; Van Houdt's d-choices).
    Rga(u32),
    Fifo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillPattern {
    Sequential,
    Random,
}

/// A validated SSD configuration.
#[derive(Clone, Debug)]
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
    pub erase_suspend: bool,
    pub program_suspend: bool,
    pub suspend_erase_ns: Ns,
    pub suspend_program_ns: Ns,
    pub suspend_min_remaining_ns: Ns,

    pub logical_pages: u32,
    pub mapping_cached: bool,
    /// Mapping entries the CMT holds (mapping = cached).
    pub cmt_entries: u32,
    pub translation_entries_per_page: u32,
    pub translation_read_bytes: u32,
    pub gc_policy: GcPolicy,
    /// GC starts when a plane has fewer free blocks than this.
    pub gc_start_free_blocks: u32,
    pub gc_timed: bool,
    pub unmapped_reads_hit_flash: bool,

    pub cache_pages: u32,
    pub writeback_start: f64,
    pub destage_per_plane: u32,
    pub dram_row_bytes: u64,
    pub dram_ns_per_transfer: f64,
    pub dram_burst_bytes: u64,
    pub dram_trcd_ns: Ns,
    pub dram_tcl_ns: Ns,
    pub dram_trp_ns: Ns,
    pub plp: bool,
    pub power_fail_ns: Ns,

    pub fill: f64,
    pub fill_pattern: FillPattern,
}

impl SsdConfig {
    /// Checks the combination of values and derives the model's configuration.
    pub fn from_settings(s: &Settings) -> Result<SsdConfig, ConfigError> {
        let err = |msg: String| Err(ConfigError::new(msg));

        let u32_of = |settings: &Settings, name: &str| -> Result<u32, ConfigError> {
            u32::try_from(settings.u64(name)).map_err(|_| {
                ConfigError::new(format!(
                    "field '{}.{name}': expected a value below 2^32, got {}",
                    settings.section(),
                    settings.u64(name)
                ))
            })
        };
        let channels = u32_of(s, "channels")?;
        let ways = u32_of(s, "chips_per_channel")?;
        let dies = u32_of(s, "dies_per_chip")?;
        let planes = u32_of(s, "planes_per_die")?;
        let blocks = u32_of(s, "blocks_per_plane")?;
        let pages = u32_of(s, "pages_per_block")?;
        let page_bytes = u32_of(s, "page_bytes")?;
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
            .with_order(s.str("allocation_order"));
        let channel_rate = s.f64("channel_rate");
        if channel_rate <= 0.0 {
            return err("field 'media.channel_rate': expected a positive rate, got 0".into());
        }

        let bits = match s.str("nand.cell") {
            "slc" => 1,
            "mlc" => 2,
            "tlc" => 3,
            _ => 4,
        };
        // Page types in block order: LSB, MSB for MLC; LSB, CSB, MSB for TLC; LSB, CSB, MSB,
        // TSB for QLC (MQSim's convention).
        let kinds: &[&str] = match bits {
            1 => &["lsb"],
            2 => &["lsb", "msb"],
            3 => &["lsb", "csb", "msb"],
            _ => &["lsb", "csb", "msb", "tsb"],
        };
        let cell = CellTimings {
            read_ns: kinds
                .iter()
                .map(|k| s.u64(&format!("nand.read_{k}_ns")))
                .collect(),
            program_ns: kinds
                .iter()
                .map(|k| s.u64(&format!("nand.program_{k}_ns")))
                .collect(),
        };

        let op = s.f64("ftl.overprovisioning");
        let logical = (geo.physical_pages() as f64 * (1.0 - op)).floor() as u64;
        let gc_min = u32_of(s, "ftl.gc_min_free_blocks")?;
        let gc_start = ((s.f64("ftl.gc_threshold") * f64::from(blocks)) as u32).max(gc_min);
        // Each plane needs room for its logical pages plus the free blocks GC keeps and the two
        // open blocks (host and GC frontiers).
        let per_plane_logical = logical.div_ceil(u64::from(geo.planes()));
        let per_plane_room = u64::from(blocks.saturating_sub(gc_start + 2)) * u64::from(pages);
        if per_plane_logical > per_plane_room {
            return err(format!(
                "impossible geometry: {per_plane_logical} logical pages per plane do not fit in the {per_plane_room} pages left after {gc_start} free blocks for GC and 2 open blocks (raise media.ftl.overprovisioning or lower media.ftl.gc_threshold)"
            ));
        }
        let rga = match s.u64("ftl.rga_choices") {
            0 => (f64::from(blocks).log2().floor() as u32).max(1),
            d => u32_of(s, "ftl.rga_choices")
                .map(|v| v.min(blocks))
                .unwrap_or(d as u32),
        };
        let gc_policy = match s.str("ftl.gc_policy") {
            "greedy" => GcPolicy::Greedy,
            "cost_benefit" => GcPolicy::CostBenefit,
            "fifo" => GcPolicy::Fifo,
            _ => GcPolicy::Rga(rga),
        };
        let translation_entries_per_page =
            (u64::from(page_bytes) / s.u64("ftl.translation_entry_bytes")).max(1) as u32;
        let cmt_entries =
            (s.u64("ftl.cmt_bytes") / s.u64("ftl.cmt_entry_bytes")).min(u64::from(u32::MAX)) as u32;
        let mapping_cached = s.str("ftl.mapping") == "cached";
        if mapping_cached && cmt_entries == 0 {
            return err(format!(
                "field 'media.ftl.cmt_bytes': a cached mapping needs room for at least one {}-byte entry",
                s.u64("ftl.cmt_entry_bytes")
            ));
        }

        let cache_pages =
            (s.u64("cache.bytes") / u64::from(page_bytes)).min(u64::from(u32::MAX)) as u32;
        if s.u64("cache.bytes") > 0 && cache_pages == 0 {
            return err(format!(
                "field 'media.cache.bytes': expected 0 or at least one page ({page_bytes} bytes), got {}",
                s.u64("cache.bytes")
            ));
        }

        Ok(SsdConfig {
            geo,
            channel_rate,
            read_overhead_ns: s.u64("read_overhead_ns"),
            write_overhead_ns: s.u64("write_overhead_ns"),
            flush_overhead_ns: s.u64("flush_overhead_ns"),
            cell,
            erase_ns: s.u64("nand.erase_ns"),
            read_cmd_ns: s.u64("nand.read_cmd_ns"),
            read_cmd_per_plane_ns: s.u64("nand.read_cmd_per_plane_ns"),
            program_cmd_ns: s.u64("nand.program_cmd_ns"),
            program_cmd_per_plane_ns: s.u64("nand.program_cmd_per_plane_ns"),
            erase_cmd_ns: s.u64("nand.erase_cmd_ns"),
            erase_cmd_per_plane_ns: s.u64("nand.erase_cmd_per_plane_ns"),
            multiplane: s.bool("nand.multiplane"),
            chip_exclusive: s.bool("nand.chip_exclusive"),
            erase_suspend: s.bool("nand.erase_suspend"),
            program_suspend: s.bool("nand.program_suspend"),
            suspend_erase_ns: s.u64("nand.suspend_erase_ns"),
            suspend_program_ns: s.u64("nand.suspend_program_ns"),
            suspend_min_remaining_ns: s.u64("nand.suspend_min_remaining_ns"),
            logical_pages: logical as u32,
            mapping_cached,
            cmt_entries,
            translation_entries_per_page,
            translation_read_bytes: s.u64("ftl.translation_read_bytes") as u32,
            gc_policy,
            gc_start_free_blocks: gc_start,
            gc_timed: s.bool("ftl.gc_timed"),
            unmapped_reads_hit_flash: s.bool("ftl.unmapped_reads_hit_flash"),
            cache_pages,
            writeback_start: s.f64("cache.writeback_start"),
            destage_per_plane: s.u64("cache.destage_per_plane") as u32,
            dram_row_bytes: s.u64("cache.dram_row_bytes").max(1),
            dram_ns_per_transfer: 1000.0 / s.f64("cache.dram_rate_mts"),
            dram_burst_bytes: s.u64("cache.dram_burst_bytes"),
            dram_trcd_ns: s.u64("cache.dram_trcd_ns"),
            dram_tcl_ns: s.u64("cache.dram_tcl_ns"),
            dram_trp_ns: s.u64("cache.dram_trp_ns"),
            plp: s.bool("cache.plp"),
            power_fail_ns: s.u64("cache.power_fail_ns"),
            fill: s.f64("precondition.fill"),
            fill_pattern: match s.str("precondition.pattern") {
                "sequential" => FillPattern::Sequential,
                _ => FillPattern::Random,
            },
        })
    }

    /// Channel time to move `bytes` (rounded to the nearest ns).
    #[inline]
    pub fn transfer_ns(&self, bytes: u32) -> Ns {
        (f64::from(bytes) / self.channel_rate).round() as Ns
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
        let s = doc.section("media", SSD_TUNABLES)?;
        doc.finish()?;
        SsdConfig::from_settings(&s)
    }

    #[test]
    fn defaults_are_mqsims_default_drive() {
        let c = build("").unwrap();
        assert_eq!(c.geo.physical_pages(), 1 << 26);
        assert_eq!(c.logical_pages, 62_411_243);
        assert_eq!(c.transfer_ns(4096), 12_288);
        assert_eq!(c.transfer_ns(8192), 24_576);
        assert_eq!(c.transfer_ns(512), 1_536);
        assert_eq!(c.gc_start_free_blocks, 102);
        assert_eq!(c.gc_policy, GcPolicy::Rga(11));
        assert_eq!(c.cmt_entries, 233_016);
        assert_eq!(c.translation_entries_per_page, 1365);
        assert_eq!(c.cache_pages, 32_768);
        // 4 KiB through MQSim's 100 MT/s, 1-byte DRAM: 13 + 13 + 2048 x 10 ns.
        assert_eq!(c.dram_access_ns(4096), 20_506);
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
}
