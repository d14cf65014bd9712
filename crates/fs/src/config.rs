//! `[fs]`: the page cache (Linux's `vm.dirty_*` sysctls and the queue's `read_ahead_kb`), the
//! host CPU a system call costs, and which file system a job with `directory=` mounts.

use qoslab_engine::Ns;

qoslab_engine::settings! {
    /// `[fs]`: the page cache and the file system above the block layer.
    pub struct FsConfig in FS_TUNABLES {
        mount: bool = flag(false, "qoslab sim: the run's jobs work on files of this file system (one new file per job clone, direct=0 through the page cache, fsync/fdatasync the file's), not on the device; fio's directory= does not change this"),
        fs_type as "type": String = text("ext4", "the file system mounted when mount is true: a journal's name (ext4, horaefs, riofs); its tunables are [fs.NAME]"),
        mem_bytes: u64 = bytes(8 << 30, "memory the page cache may fill; the dirty limits are shares of it (Linux: the dirtyable memory, free and reclaimable pages): model choice").range(1048576.0, 1.8e19),
        dirty_background_ratio: f64 = ratio(0.10, "vm.dirty_background_ratio: the flusher writes back while more than this share of memory is dirty"),
        dirty_ratio: f64 = ratio(0.20, "vm.dirty_ratio: the dirty limit; a writer is throttled as dirty memory nears it (balance_dirty_pages)"),
        dirty_expire_ns: Ns = ns(30_000_000_000, "vm.dirty_expire_centisecs: data dirty for longer is written back at the flusher's next periodic wake-up"),
        dirty_writeback_ns: Ns = ns(5_000_000_000, "vm.dirty_writeback_centisecs: the flusher's periodic wake-up interval (0: never)"),
        read_ahead_kb: u64 = bytes(131072, "queue/read_ahead_kb: the largest readahead window (0: no readahead)"),
        wbt_depth: u32 = count(16, "blk-wbt's depth (RWB_DEF_DEPTH): buffered writeback keeps at most this many writes in flight for an fsync, fdatasync or O_SYNC write (REQ_SYNC), a quarter of it for the flusher, half of it for the writeback a task starts itself (posix_fadvise DONTNEED), a quarter within 100 ms of a read; all of it for any after a writer was throttled in the last second (0: no throttle)").range(0.0, 65536.0),
        max_bio_bytes: u64 = bytes(1048576, "largest write the page cache builds (BIO_MAX_VECS = 256 pages)").range(4096.0, 1.8e19),
        syscall_ns: Ns = ns(500, "host CPU of one system call: entry, the VFS, exit (model assumption)"),
        copy_gb_per_s: f64 = rate(10.0, "copy between a user buffer and the page cache, GB/s (model assumption)"),
        conversion_ns: Ns = ns(5_000, "host CPU of converting one written-back unwritten extent (ext4 dioread_nolock's end-of-I/O work: a journal handle, the extent's update, the inode marked dirty), one conversion at a time (model assumption)"),
        wakeup_ns: Ns = ns(2_000, "a thread that slept on I/O or a commit and is woken: two context switches (model assumption)"),
        fs_bytes: u64 = bytes(0, "size of the file system (0: the whole device)"),
    }
}

impl FsConfig {
    /// Pages of memory the page cache may fill.
    pub fn mem_pages(&self) -> u64 {
        (self.mem_bytes / crate::PAGE).max(1)
    }

    /// The dirty limit in pages (`vm.dirty_ratio`).
    pub fn dirty_limit(&self) -> u64 {
        (self.mem_pages() as f64 * self.dirty_ratio) as u64
    }

    /// The background threshold in pages (`vm.dirty_background_ratio`, at most the limit).
    pub fn background_thresh(&self) -> u64 {
        ((self.mem_pages() as f64 * self.dirty_background_ratio) as u64).min(self.dirty_limit())
    }

    /// Where balance_dirty_pages holds a fast writer: the setpoint halfway between the
    /// freerun ceiling ((background + limit) / 2, below which nobody is throttled) and the
    /// limit (mm/page-writeback.c, `dirty_freerun_ceiling`, `wb_position_ratio`).
    pub fn throttle_setpoint(&self) -> u64 {
        let (bg, limit) = (self.background_thresh(), self.dirty_limit());
        let freerun = bg.midpoint(limit);
        freerun.midpoint(limit)
    }

    /// Time to copy `bytes` between a user buffer and the page cache.
    pub fn copy_ns(&self, bytes: u64) -> Ns {
        if self.copy_gb_per_s <= 0.0 {
            0
        } else {
            qoslab_engine::time::ns_from_f64(bytes as f64 / self.copy_gb_per_s)
        }
    }
}
