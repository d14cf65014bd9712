//! The typed result of parsing: one [`Job`] per job section, with every option qoslab models.

use std::path::PathBuf;

use qoslab_engine::{IoPrioClass, Ns, Op};

use super::values::{KbBase, SizeSpec};

/// Per-direction values indexed by [`Op::index`]: reads, writes, trims (fio's order).
pub type PerOp<T> = [T; 3];

/// fio's `rw` patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwPattern {
    Read,
    Write,
    Trim,
    RandRead,
    RandWrite,
    RandTrim,
    /// `rw` / `readwrite`: sequential mixed reads and writes.
    ReadWrite,
    RandRw,
    /// Sequential trims, each followed by a write of the same block.
    TrimWrite,
    RandTrimWrite,
}

impl RwPattern {
    /// The names fio accepts, in its own order (`fio --cmdhelp=rw`).
    pub const NAMES: [(&'static str, RwPattern); 11] = [
        ("read", RwPattern::Read),
        ("write", RwPattern::Write),
        ("trim", RwPattern::Trim),
        ("randread", RwPattern::RandRead),
        ("randwrite", RwPattern::RandWrite),
        ("randtrim", RwPattern::RandTrim),
        ("rw", RwPattern::ReadWrite),
        ("readwrite", RwPattern::ReadWrite),
        ("randrw", RwPattern::RandRw),
        ("trimwrite", RwPattern::TrimWrite),
        ("randtrimwrite", RwPattern::RandTrimWrite),
    ];

    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwPattern::RandRead
                | RwPattern::RandWrite
                | RwPattern::RandTrim
                | RwPattern::RandRw
                | RwPattern::RandTrimWrite
        )
    }

    /// Whether the job issues I/Os of direction `op`.
    pub fn issues(self, op: Op) -> bool {
        use RwPattern::*;
        match op {
            Op::Read => matches!(self, Read | RandRead | ReadWrite | RandRw),
            Op::Write => matches!(
                self,
                Write | RandWrite | ReadWrite | RandRw | TrimWrite | RandTrimWrite
            ),
            Op::Trim => matches!(self, Trim | RandTrim | TrimWrite | RandTrimWrite),
            Op::Flush => false,
        }
    }
}

/// `rate_process`: how a rate cap spaces submissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RateProcess {
    /// Fixed spacing (one I/O every `1/rate_iops`, or every `len/rate` for byte rates).
    #[default]
    Linear,
    /// Exponential gaps with the same mean: a Poisson arrival process.
    Poisson,
}

/// `thinktime_blocks_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThinkBlocksType {
    /// The stall starts once `thinktime_blocks` I/Os have completed (fio's default): the job
    /// drains its queue, then thinks.
    #[default]
    Complete,
    /// The stall starts once `thinktime_blocks` I/Os have been issued, without draining.
    Issue,
}

/// How fio issues a job's I/O: the class of its `ioengine` (see [`super::engines`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EngineClass {
    /// One I/O at a time, each a system call that returns when it is done (`psync`, `sync`,
    /// `pvsync`, `pvsync2`, `vsync`): `iodepth` is capped at 1, and fio records no
    /// submission latency (its completion latency is the whole call).
    #[default]
    Sync,
    /// Queued I/O reaped later (`libaio`, `io_uring`, `posixaio`): `iodepth` I/Os in flight,
    /// submitted in batches of `iodepth_batch_submit`, reaped in batches of
    /// `iodepth_batch_complete_min..max`, refilled at `iodepth_low`.
    Async,
    /// fio's `null` engine: I/Os that reach no device (only the host's own costs).
    Null,
}

/// `io_submit_mode`: who submits a rate-limited job's I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SubmitMode {
    /// The job's own thread (fio's default): before it sleeps for `rate` or `thinktime` it
    /// waits for all its I/O in flight to complete (fio's `io_u_quiesce`).
    #[default]
    Inline,
    /// A pool of workers: I/Os leave at their scheduled times whatever is in flight.
    Offload,
}

/// `exit_what`: which jobs `exitall` and `exitall_on_error` end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExitWhat {
    /// The jobs of the same reporting group.
    #[default]
    Group,
    /// The jobs running now; the next stonewall group still starts.
    Stonewall,
    /// Every job, started or not.
    All,
}

/// `steadystate=METRIC:LIMIT`: when a job has reached a steady state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadyState {
    /// IOPS (`iops`, `iops_slope`) or bandwidth (`bw`, `bw_slope`).
    pub iops: bool,
    /// The least-squares slope of the samples (`*_slope`) rather than their largest distance
    /// from their mean.
    pub slope: bool,
    /// The limit, in percent of the mean when `percent`, else in I/Os or bytes per second.
    pub limit: f64,
    pub percent: bool,
}

/// `file_service_type`: which of a job's files the next I/O goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FileService {
    /// Files in turn, `n` I/Os each (fio's default, n = 1).
    #[default]
    RoundRobin,
    /// A file chosen at random for each I/O.
    Random,
    /// Each file to its end before the next.
    Sequential,
}

/// One zone of `random_distribution=zoned:` (percentages) or `zoned_abs:` (bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Zone {
    /// Share of the accesses, in percent.
    pub access_pct: f64,
    /// Extent of the zone: percent of the region (`zoned`) or bytes (`zoned_abs`).
    pub extent: ZoneExtent,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ZoneExtent {
    Percent(f64),
    Bytes(u64),
}

/// `random_distribution`: how random offsets are spread over the region.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Distribution {
    /// Uniform; without replacement within a pass unless `norandommap` (fio's default).
    #[default]
    Random,
    /// Block popularity follows Zipf's law with exponent `theta`.
    Zipf {
        theta: f64,
        center: Option<f64>,
    },
    /// Pareto with fio's parameter `h`: a fraction `h` of the blocks gets `1-h` of the I/O.
    Pareto {
        h: f64,
        center: Option<f64>,
    },
    /// fio's "normal": see [`crate::generator`] for the exact law.
    Normal {
        dev_pct: f64,
        center: Option<f64>,
    },
    Zoned(Vec<Zone>),
}

/// The log files of fio a job asks for: each the prefix of its file names (empty: the job's
/// name, as fio does when the option has no value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FioLogs {
    pub lat: Option<String>,
    pub bw: Option<String>,
    pub iops: Option<String>,
    /// `log_offset`: each line carries the I/O's offset.
    pub offset: bool,
    /// `log_prio`: each line carries the I/O's priority value, not only whether it is
    /// real-time.
    pub prio: bool,
}

/// Where an option came from, for messages about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    pub line: u64,
}

/// The values of `ordering`: no order (orderless), Linux's FLUSH ordering, HORAE and Rio.
pub const ORDERINGS: &[&str] = &["none", "flush", "horae", "rio"];

/// The values of `app`: the applications of [`crate::apps`] a job's threads can run.
pub const APPS: &[&str] = &["varmail", "fillsync"];

/// One job of a job file, after `[global]` options and its own section have been applied.
///
/// A job with `numjobs=N` is one `Job`; the generator is built once per clone.
/// Sizes are bytes, times nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Position of the job section in the file (0-based), the key of its random streams.
    pub index: usize,
    /// `name=`, or the section name.
    pub name: String,
    /// The name in the job's section header.
    pub section: String,
    /// Where the job's section starts.
    pub location: Location,
    pub rw: RwPattern,
    /// The `:<nr>` suffix of `rw`: for sequential patterns, bytes skipped after each I/O
    /// (`rw=write:4k`); for random ones, a new random offset every `nr` I/Os
    /// (`rw=randread:8`), the others following sequentially.
    pub rw_modifier: Option<u64>,
    /// `rw=read:-8k`: the skip goes backwards (fio's negative `:<nr>`).
    pub rw_backward: bool,
    /// `rw_sequencer=identical`: with a `:<nr>` random pattern, repeat the same offset
    /// instead of continuing sequentially.
    pub rw_identical: bool,
    /// Percent of mixed I/Os that are reads (`rwmixread`, or 100 - `rwmixwrite`).
    pub rwmixread: f64,
    pub bs: PerOp<u64>,
    /// `bsrange`: lengths drawn uniformly among the multiples of the minimum in the range.
    pub bsrange: PerOp<Option<(u64, u64)>>,
    /// `bssplit`: (length, percent) pairs; percents sum to 100.
    pub bssplit: PerOp<Vec<(u64, f64)>>,
    /// `blockalign`; `None` means aligned to the direction's minimum block size.
    pub blockalign: PerOp<Option<u64>>,
    pub size: Option<SizeSpec>,
    pub offset: SizeSpec,
    pub offset_increment: SizeSpec,
    pub filesize: Option<u64>,
    pub io_size: Option<u64>,
    pub number_ios: Option<u64>,
    /// `loops`: how many times the region is covered (io_size defaults to size x loops).
    pub loops: u64,
    pub runtime_ns: Option<Ns>,
    pub time_based: bool,
    pub ramp_time_ns: Ns,
    pub iodepth: u32,
    /// I/Os submitted at once; 0 means `iodepth` (fio's rule).
    pub iodepth_batch_submit: u32,
    /// `iodepth_batch_complete_min`: completions the job waits for before it reaps (0: it
    /// polls without waiting unless its queue is full).
    pub iodepth_batch_complete_min: u32,
    /// `iodepth_batch_complete_max`: most completions reaped at once (0: the min).
    pub iodepth_batch_complete_max: u32,
    /// `iodepth_low`: once full, the queue drains to this depth before it is filled again
    /// (0: `iodepth`, always kept full).
    pub iodepth_low: u32,
    /// `io_submit_mode`.
    pub submit_mode: SubmitMode,
    /// The class of `ioengine`.
    pub engine: EngineClass,
    pub numjobs: u32,
    pub thinktime_ns: Ns,
    pub thinktime_blocks: u64,
    pub thinktime_blocks_type: ThinkBlocksType,
    /// `thinktime_iotime`: think after this long of I/O as well (0: never).
    pub thinktime_iotime_ns: Ns,
    /// `rate` in bytes per second per direction.
    pub rate_bytes_per_s: PerOp<Option<u64>>,
    pub rate_iops: PerOp<Option<u64>>,
    pub rate_process: RateProcess,
    /// `rate_ignore_thinktime`: the rate schedule pauses while the job thinks, instead of
    /// catching up afterwards.
    pub rate_ignore_thinktime: bool,
    /// `rate_min` (bytes/s) and `rate_iops_min` per direction: the job fails when it does
    /// less over a `rate_cycle`.
    pub rate_min_bytes_per_s: PerOp<Option<u64>>,
    pub rate_iops_min: PerOp<Option<u64>>,
    pub rate_cycle_ns: Ns,
    /// `max_latency` per direction: a total latency above it fails the job (fio's
    /// ETIMEDOUT).
    pub max_latency_ns: PerOp<Option<Ns>>,
    /// `latency_target`: the job searches for the deepest queue whose `latency_percentile`
    /// of I/Os over each `latency_window` finish within it.
    pub latency_target_ns: Option<Ns>,
    pub latency_window_ns: Ns,
    pub latency_percentile: f64,
    /// `latency_run`: keep adjusting the depth for the whole run instead of stopping once
    /// it is found.
    pub latency_run: bool,
    /// `steadystate`, `steadystate_duration`, `steadystate_ramp_time`.
    pub steadystate: Option<SteadyState>,
    pub ss_dur_ns: Ns,
    pub ss_ramp_ns: Ns,
    /// `startdelay`: the job starts this long after the run does (a range draws a time in
    /// it).
    pub startdelay_ns: (Ns, Ns),
    /// `wait_for`: the job starts once the named job has finished.
    pub wait_for: Option<String>,
    /// `exitall`: when this job finishes, the jobs `exit_what` names end too.
    pub exitall: bool,
    pub exit_what: ExitWhat,
    /// `exitall_on_error`: the same when this job fails.
    pub exitall_on_error: bool,
    /// `flow_id`, `flow`, `flow_watermark`, `flow_sleep`: jobs sharing a flow id keep their
    /// I/Os in the ratio of their `flow` weights (fio's token-based flow control).
    pub flow_id: u32,
    pub flow: i64,
    pub flow_watermark: u64,
    pub flow_sleep_ns: Ns,
    /// `bwavgtime`/`iopsavgtime` as given: the averaging window of the bandwidth and IOPS
    /// samples (None: not given; see `bw_sample_ns`).
    pub bw_avg_ns: Option<Ns>,
    pub iops_avg_ns: Option<Ns>,
    /// `ioscheduler`: the I/O scheduler the job sets on its device.
    pub ioscheduler: Option<String>,
    /// `nrfiles`, `file_service_type` (with its `:n`), `directory`, `filename_format`: the
    /// job's files, laid out as equal regions of its I/O region, one after another.
    pub nrfiles: u32,
    pub file_service: FileService,
    pub file_service_n: u64,
    pub directory: Option<String>,
    pub filename_format: Option<String>,
    /// `offset_align`: a percentage `offset` is rounded up to a multiple of this.
    pub offset_align: Option<u64>,
    /// `create_only`: the job lays out its files and does no I/O.
    pub create_only: bool,
    /// `fill_device`: the region runs to the end of the device.
    pub fill_device: bool,
    pub random_distribution: PerOp<Distribution>,
    pub norandommap: bool,
    pub randrepeat: bool,
    pub randseed: Option<u64>,
    /// `prio` (0 highest .. 7).
    pub prio: Option<u8>,
    pub prioclass: Option<IoPrioClass>,
    /// `cmdprio_percentage` for reads and writes (trims use the write value).
    pub cmdprio_percentage: PerOp<f64>,
    pub cmdprio_class: PerOp<IoPrioClass>,
    pub cmdprio: PerOp<u8>,
    /// The simulated host the job runs on (`sim_host`, qoslab's own option), for paths where
    /// several hosts share one controller.
    pub sim_host: u16,
    /// The ordered-write stack of the job's writes (`ordering`, qoslab's own option): one of
    /// [`ORDERINGS`]; such a job runs on the fabric's timed model (`qoslab rio run --jobs`).
    pub ordering: Option<&'static str>,
    /// The application the job's threads run above a mounted file system (`app`, qoslab's
    /// own option): one of [`APPS`]; None: fio's own I/O loop.
    pub app: Option<&'static str>,
    /// `fsync`: a cache flush (the file's fsync) after every N writes issued (0: never).
    pub fsync_every: u64,
    /// `fdatasync`: the same with fdatasync (0: never); where both are due, fio's fsync.
    pub fdatasync_every: u64,
    /// `end_fsync`: a sync when the job has issued its last I/O, if its file is unsynced.
    pub end_fsync: bool,
    /// `fsync_on_close`: a sync when the job closes its file (at its end), if it is unsynced.
    pub fsync_on_close: bool,
    /// `invalidate`: at each open of its file, the job drops the file's pages from the page
    /// cache first (`POSIX_FADV_DONTNEED`).
    pub invalidate: bool,
    /// `write_barrier`: every N-th write flushes the cache before it and is FUA (0: never).
    pub write_barrier_every: u64,
    /// `fua`: every write is Force Unit Access.
    pub fua: bool,
    pub stonewall: bool,
    pub new_group: bool,
    pub group_reporting: bool,
    /// Reporting group: starts at 0, a new one at every `stonewall` or `new_group`.
    pub group_id: u32,
    /// Jobs of one run group run side by side; the group starts when the previous one has
    /// finished. A new one starts at every `stonewall` only: `new_group` changes how results
    /// are reported, never when a job runs (fio's semantics).
    pub run_group: u32,
    pub percentile_list: Vec<f64>,
    /// The most digits after the point of any entry of `percentile_list` as written (fio's
    /// `percentile_precision`: 2 for its default list), for the normal output's labels.
    pub percentile_precision: usize,
    /// fio's `lat_percentiles`: report the total latency's percentiles too.
    pub lat_percentiles: bool,
    pub direct: bool,
    pub ioengine: String,
    pub filename: Option<String>,
    pub log_avg_msec: Option<u64>,
    /// The fio logs asked for (`write_lat_log`, `write_bw_log`, `write_iops_log`).
    pub logs: FioLogs,
    pub kb_base: KbBase,
    /// How many of the file's `[global]` options (in file order) were written before this
    /// job's section: with `options`, the file as written, section by section.
    pub globals_before: usize,
    /// The options as written in the job's own section, in order, values after `${ENV}`
    /// expansion (what fio's JSON echoes as "job options").
    pub options: Vec<(String, String)>,
    /// Accepted-and-ignored options that were set, with where, for a warning.
    pub ignored: Vec<(String, Location)>,
    /// Where `ioengine` and `direct` (or `buffered`) were last set, for messages about them
    /// (`None`: fio's default applies).
    pub ioengine_location: Option<Location>,
    pub direct_location: Option<Location>,
    /// Where `verify` was set to a method (anything but fio's `0`), and fio's `do_verify`:
    /// together on a job that writes they make fio read back what it wrote.
    pub verify_location: Option<Location>,
    pub do_verify: bool,
}

/// fio's default `percentile_list`.
pub const DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

impl Job {
    /// A job with fio's defaults, as if its section held only `name`.
    pub fn with_defaults(name: &str, index: usize, location: Location) -> Self {
        Self {
            index,
            name: name.to_string(),
            section: name.to_string(),
            location,
            rw: RwPattern::Read,
            rw_modifier: None,
            rw_backward: false,
            rw_identical: false,
            rwmixread: 50.0,
            bs: [4096; 3],
            bsrange: [None; 3],
            bssplit: Default::default(),
            blockalign: [None; 3],
            size: None,
            offset: SizeSpec::Bytes(0),
            offset_increment: SizeSpec::Bytes(0),
            filesize: None,
            io_size: None,
            number_ios: None,
            loops: 1,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            iodepth: 1,
            iodepth_batch_submit: 1,
            iodepth_batch_complete_min: 1,
            iodepth_batch_complete_max: 0,
            iodepth_low: 0,
            submit_mode: SubmitMode::Inline,
            engine: EngineClass::Sync,
            numjobs: 1,
            thinktime_ns: 0,
            thinktime_blocks: 1,
            thinktime_blocks_type: ThinkBlocksType::Complete,
            thinktime_iotime_ns: 0,
            rate_bytes_per_s: [None; 3],
            rate_iops: [None; 3],
            rate_process: RateProcess::Linear,
            rate_ignore_thinktime: false,
            rate_min_bytes_per_s: [None; 3],
            rate_iops_min: [None; 3],
            rate_cycle_ns: 1_000_000_000,
            max_latency_ns: [None; 3],
            latency_target_ns: None,
            latency_window_ns: 0,
            latency_percentile: 100.0,
            latency_run: false,
            steadystate: None,
            ss_dur_ns: 0,
            ss_ramp_ns: 0,
            startdelay_ns: (0, 0),
            wait_for: None,
            exitall: false,
            exit_what: ExitWhat::Group,
            exitall_on_error: false,
            flow_id: 0,
            flow: 0,
            flow_watermark: 1024,
            flow_sleep_ns: 0,
            bw_avg_ns: None,
            iops_avg_ns: None,
            ioscheduler: None,
            nrfiles: 1,
            file_service: FileService::RoundRobin,
            file_service_n: 1,
            directory: None,
            filename_format: None,
            offset_align: None,
            create_only: false,
            fill_device: false,
            random_distribution: Default::default(),
            norandommap: false,
            randrepeat: true,
            randseed: None,
            prio: None,
            prioclass: None,
            cmdprio_percentage: [0.0; 3],
            cmdprio_class: [IoPrioClass::RealTime; 3],
            cmdprio: [0; 3],
            sim_host: 0,
            ordering: None,
            app: None,
            fsync_every: 0,
            fdatasync_every: 0,
            end_fsync: false,
            fsync_on_close: false,
            invalidate: true,
            write_barrier_every: 0,
            fua: false,
            stonewall: false,
            new_group: false,
            group_reporting: false,
            group_id: 0,
            run_group: 0,
            percentile_list: DEFAULT_PERCENTILES.to_vec(),
            percentile_precision: 2,
            lat_percentiles: false,
            direct: false,
            ioengine: "psync".to_string(),
            filename: None,
            log_avg_msec: None,
            logs: FioLogs::default(),
            kb_base: KbBase::Binary,
            globals_before: 0,
            options: Vec::new(),
            ignored: Vec::new(),
            ioengine_location: None,
            direct_location: None,
            verify_location: None,
            do_verify: true,
        }
    }

    /// Whether fio's `do_io` counts the bytes a pass issues, and so ends the pass at `size`
    /// bytes without fetching again: only when the engine's queue hook answers FIO_Q_QUEUED
    /// for reads and writes (`io_queue_event` adds to `bytes_issued` there; a completed I/O
    /// adds only a short one's bytes). libaio, io_uring, posixaio and vsync queue; psync,
    /// sync, pvsync, pvsync2 and null at iodepth=1 complete each I/O in the call, so their
    /// pass runs on until a fetch finds every file done or the job's whole amount is issued
    /// (measured with fio 3.33's write_iolog, rw=write bs=4k nrfiles=2 filesize=32k
    /// size=32k loops=2: psync, pvsync2 and null one pass of 16 writes, libaio and vsync two
    /// of 8). With `io_submit_mode=offload` fio queues every I/O to its workers (code read;
    /// fio 3.33 crashes on such a job with loops, so not measured). fio's null engine at a
    /// deeper queue issues more than its files hold (15 writes for 8 at iodepth=2) and is
    /// left as at iodepth=1.
    pub fn counts_pass_bytes(&self) -> bool {
        self.engine == EngineClass::Async
            || self.ioengine == "vsync"
            || self.submit_mode == SubmitMode::Offload
    }

    /// Smallest and largest I/O length the job can issue for `op`.
    pub fn len_bounds(&self, op: Op) -> (u64, u64) {
        let d = op.index().min(2);
        if !self.bssplit[d].is_empty() {
            let lens = self.bssplit[d].iter().map(|&(l, _)| l);
            (lens.clone().min().unwrap(), lens.max().unwrap())
        } else if let Some(r) = self.bsrange[d] {
            r
        } else {
            (self.bs[d], self.bs[d])
        }
    }

    /// The window of the job's bandwidth samples: `bwavgtime` if given, else `log_avg_msec`
    /// when the job writes an averaged bandwidth log, else fio's 500 ms. fio 3.33 measured
    /// (write_bw_log, 3 s): log_avg_msec=1000 alone, samples every 1,000 ms; with
    /// bwavgtime=1000 and log_avg_msec=100, every 1,000 ms too (its manual says the smaller
    /// of the two).
    pub fn bw_sample_ns(&self) -> Ns {
        self.sample_ns(self.bw_avg_ns, self.logs.bw.is_some())
    }

    /// As `bw_sample_ns`, for the IOPS samples (`iopsavgtime`, `write_iops_log`).
    pub fn iops_sample_ns(&self) -> Ns {
        self.sample_ns(self.iops_avg_ns, self.logs.iops.is_some())
    }

    fn sample_ns(&self, given: Option<Ns>, logged: bool) -> Ns {
        match (given, self.log_avg_msec) {
            (Some(ns), _) => ns,
            (None, Some(ms)) if logged => ms * 1_000_000,
            _ => 500_000_000,
        }
    }
}

/// A parsed job file: its jobs in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFile {
    pub path: PathBuf,
    pub jobs: Vec<Job>,
    /// Options of all `[global]` sections, in order (fio's JSON "global options").
    pub global_options: Vec<(String, String)>,
    /// `${NAME}`s that no environment variable gave, read as nothing (as fio does), each with
    /// the line that reads it.
    pub unset_env: Vec<(String, Location)>,
}
