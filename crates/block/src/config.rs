//! `[block]`: the block layer's tunables, named and measured as Linux names them under
//! `/sys/block/DEV/queue/` (Documentation/ABI/stable/sysfs-block), and the limits the driver
//! below sets (what Linux's drivers put in `struct queue_limits`).

use qoslab_engine::{Op, Request};

use crate::elevator::SchedOps;

qoslab_engine::settings! {
    /// `[block]`: the host block layer (blk-mq) of every host on the path.
    pub struct BlockConfig in BLOCK_TUNABLES {
        scheduler: String = text("none", "I/O scheduler (queue/scheduler): a scheduler's name; its tunables are [block.NAME] (queue/iosched/*)"),
        ordering: String = text("none", "ordered writes of the jobs that name no ordering= of their own: none (not ordered), or an ordering plug-in's name (flush: Linux FLUSH ordering; horae; rio); its tunables are [block.NAME]"),
        nr_requests: u32 = count(0, "requests per hardware queue (queue/nr_requests); 0 = the kernel's default (blk_mq_init_sched): the tag set's depth without a scheduler, 2 x min(tag set depth, 128) with one; the tag set's depth is the driver's (an NVMe queue's, 32 for an ATA host), whatever block.queue_depth says").range(0.0, 65536.0),
        queue_depth: u32 = count(0, "requests out at the device per hardware queue (device/queue_depth); 0 = the driver's: what an NVMe submission queue admits, 32 on an ATA disk (NCQ)").range(0.0, 65536.0),
        max_sectors_kb: u32 = count(4096, "largest request in KiB (queue/max_sectors_kb): bigger bios are split and merges stop there; kernel default min(max_hw_sectors_kb, 4096) (BLK_DEF_MAX_SECTORS_CAP, Linux 6.16 on)").range(4.0, 1048576.0),
        max_segments: u32 = count(128, "most data segments in one request (queue/max_segments; BLK_MAX_SEGMENTS)").range(1.0, 65536.0),
        max_segment_size: u64 = bytes(65536, "bytes in one segment (queue/max_segment_size; BLK_MAX_SEGMENT_SIZE); the simulator fills every segment, as a physically contiguous buffer does").range(4096.0, 4294967296.0),
        nomerges: u32 = count(0, "queue/nomerges: 0 = every merge, 1 = only with the last request of the submitter's plug (the one-hit cache), 2 = none").range(0.0, 2.0),
        rotational: u32 = count(2, "queue/rotational: 1 for a spinning disk, 0 for flash; 2 = from the media (1 for an hdd model)").range(0.0, 2.0),
        hook_cpu_ns: u64 = ns(40, "CPU cost model: one call of a scheduler hook (the call, the scheduler's spin lock taken and released uncontended)"),
        list_op_cpu_ns: u64 = ns(5, "CPU cost model: one linked-list insertion or removal (a FIFO)"),
        tree_level_cpu_ns: u64 = ns(10, "CPU cost model: one level of a red-black tree walked on an insertion, removal or lookup (a pointer chase, often a cache miss)"),
        hash_op_cpu_ns: u64 = ns(15, "CPU cost model: one merge-hash insertion, removal or lookup"),
    }
}

/// What the driver below tells the block layer (Linux `struct queue_limits`, set at probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverLimits {
    /// One hardware queue per CPU (NVMe) or one per host (ATA, a loop device).
    pub queue_per_core: bool,
    /// Requests one hardware queue holds (the tag set's depth).
    pub hw_queue_depth: u32,
    /// The driver admits or refuses each request itself (an NVMe host with its command ids);
    /// otherwise the block layer keeps `hw_queue_depth` out at once (SCSI's device budget).
    pub driver_admits: bool,
    /// Largest request the hardware takes (max_hw_sectors_kb), bytes; 0 = no limit. The
    /// driver splits requests above it itself (the NVMe host at MDTS), so this bounds merges.
    pub max_hw_bytes: u64,
    /// The media is a spinning disk.
    pub rotational: bool,
}

/// The block layer's settings resolved against the driver's limits.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSetup {
    pub scheduler: String,
    pub queue_per_core: bool,
    /// Requests out at the driver per hardware queue, when the block layer enforces it.
    pub queue_depth: Option<u32>,
    /// Requests (scheduler tags) per hardware queue with a scheduler.
    pub nr_requests: u32,
    /// Bios above this are split.
    pub split_bytes: u64,
    /// Merges stop at this.
    pub merge_bytes: u64,
    pub max_segments: u32,
    pub segment_bytes: u64,
    pub nomerges: u32,
    pub rotational: bool,
    pub cost: CpuCost,
}

/// The CPU cost model's prices (see docs/block.md, "CPU cost").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuCost {
    pub hook_ns: u64,
    pub list_op_ns: u64,
    pub tree_level_ns: u64,
    pub hash_op_ns: u64,
}

/// Linux's cap on scheduler tags per hardware queue when nr_requests is left alone
/// (BLKDEV_DEFAULT_RQ).
const BLKDEV_DEFAULT_RQ: u32 = 128;

impl QueueSetup {
    /// Resolves `cfg` against the driver's `limits`, for scheduler `sched` (`cfg.scheduler`'s).
    pub fn new(cfg: &BlockConfig, limits: &DriverLimits, sched: &SchedOps) -> Self {
        let queue_depth = if cfg.queue_depth > 0 {
            Some(cfg.queue_depth)
        } else if limits.driver_admits {
            None
        } else {
            Some(limits.hw_queue_depth.max(1))
        };
        // Scheduler tags follow the tag set's depth (q->tag_set->queue_depth), not the
        // device's budget: lowering a SATA disk's device/queue_depth leaves nr_requests alone,
        // so requests the disk no longer takes wait in the scheduler.
        let tag_set_depth = limits.hw_queue_depth.max(1);
        let nr_requests = if cfg.nr_requests > 0 {
            cfg.nr_requests
        } else if !sched.elevator {
            tag_set_depth
        } else {
            2 * tag_set_depth.min(BLKDEV_DEFAULT_RQ)
        };
        // Linux keeps max_sectors_kb at most max_hw_sectors_kb. A driver that admits requests
        // itself (the NVMe host) splits above its limit on its own; below any other the block
        // layer splits (null_blk's default 127 KiB cuts a 128 KiB read in two).
        let split_bytes = match limits.max_hw_bytes {
            hw if hw > 0 && !limits.driver_admits => (u64::from(cfg.max_sectors_kb) * 1024).min(hw),
            _ => u64::from(cfg.max_sectors_kb) * 1024,
        };
        let merge_bytes = match limits.max_hw_bytes {
            0 => split_bytes,
            hw => split_bytes.min(hw),
        };
        QueueSetup {
            scheduler: cfg.scheduler.clone(),
            queue_per_core: limits.queue_per_core,
            queue_depth,
            nr_requests,
            split_bytes,
            merge_bytes,
            max_segments: cfg.max_segments,
            segment_bytes: cfg.max_segment_size,
            nomerges: cfg.nomerges,
            rotational: match cfg.rotational {
                0 => false,
                1 => true,
                _ => limits.rotational,
            },
            cost: CpuCost {
                hook_ns: cfg.hook_cpu_ns,
                list_op_ns: cfg.list_op_cpu_ns,
                tree_level_ns: cfg.tree_level_cpu_ns,
                hash_op_ns: cfg.hash_op_cpu_ns,
            },
        }
    }

    /// Data segments of `len` bytes of a bio.
    pub fn segments(&self, len: u64) -> u32 {
        if len <= self.segment_bytes {
            1
        } else {
            len.div_ceil(self.segment_bytes) as u32
        }
    }

    /// The largest piece a bio may be: max_sectors_kb, and max_segments full segments.
    pub fn piece_bytes(&self) -> u64 {
        self.split_bytes
            .min(u64::from(self.max_segments) * self.segment_bytes)
    }

    /// Whether `req` is split into pieces of at most [`piece_bytes`](Self::piece_bytes).
    pub fn splits(&self, req: &Request) -> bool {
        matches!(req.op, Op::Read | Op::Write) && req.len_bytes > self.piece_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::Settings;
    use qoslab_engine::tunable::apply_override;

    fn setup(sets: &[&str], limits: DriverLimits) -> QueueSetup {
        let mut block = Settings::defaults("block", BLOCK_TUNABLES);
        for s in sets {
            apply_override(s, &mut [&mut block]).expect("a valid setting");
        }
        let cfg = BlockConfig::from_settings(&block);
        let sched = crate::lookup(&cfg.scheduler).expect("registered");
        QueueSetup::new(&cfg, &limits, sched)
    }

    const AHCI: DriverLimits = DriverLimits {
        queue_per_core: false,
        hw_queue_depth: 32,
        driver_admits: false,
        max_hw_bytes: 0,
        rotational: true,
    };

    #[test]
    fn a_sata_disk_keeps_ncq_depth_at_the_device_and_twice_it_in_the_scheduler() {
        let q = setup(&["block.scheduler=mq-deadline"], AHCI);
        assert_eq!(q.queue_depth, Some(32));
        assert_eq!(q.nr_requests, 64);
        let q = setup(&["block.scheduler=none"], AHCI);
        assert_eq!(q.nr_requests, 32);
    }

    #[test]
    fn lowering_device_queue_depth_leaves_the_scheduler_tags_of_the_tag_set() {
        // echo 1 > /sys/block/sdX/device/queue_depth: one command at the disk, and still
        // 2 x 32 requests the scheduler can order (blk_mq_init_sched reads the tag set).
        let q = setup(
            &["block.scheduler=mq-deadline", "block.queue_depth=1"],
            AHCI,
        );
        assert_eq!(q.queue_depth, Some(1));
        assert_eq!(q.nr_requests, 64);
    }

    #[test]
    fn requests_are_split_at_a_simple_drivers_limit_but_an_nvme_host_splits_its_own() {
        // null_blk's default max_hw_sectors is 255 sectors (127 KiB): Linux caps max_sectors_kb
        // there, so a 128 KiB read becomes two requests.
        let null_blk = DriverLimits {
            queue_per_core: false,
            hw_queue_depth: 2,
            driver_admits: false,
            max_hw_bytes: 127 * 1024,
            rotational: false,
        };
        let q = setup(&[], null_blk);
        assert_eq!((q.split_bytes, q.merge_bytes), (127 * 1024, 127 * 1024));
        let nvme = DriverLimits {
            driver_admits: true,
            ..null_blk
        };
        let q = setup(&[], nvme);
        assert_eq!((q.split_bytes, q.merge_bytes), (4096 * 1024, 127 * 1024));
    }

    #[test]
    fn an_nvme_queue_is_limited_by_its_driver_and_caps_scheduler_tags_at_256() {
        let nvme = DriverLimits {
            queue_per_core: true,
            hw_queue_depth: 1023,
            driver_admits: true,
            max_hw_bytes: 0,
            rotational: false,
        };
        let q = setup(&["block.scheduler=mq-deadline"], nvme);
        assert_eq!(
            q.queue_depth, None,
            "the host refuses when no command id is free"
        );
        assert_eq!(q.nr_requests, 256);
        assert_eq!(setup(&["block.scheduler=none"], nvme).nr_requests, 1023);
    }
}
