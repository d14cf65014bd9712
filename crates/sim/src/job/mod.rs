//! Jobs at the top of the path: each clone of a fio job (or a trace replay) issues I/Os as fio
//! would (queue depth, batches, rate caps, think time, ramp and run time) and records what
//! completes.
//!
//! This file owns a running clone's state (`JobRun`) and what one pump of it reports (`Pump`,
//! `PumpNotes`); the rest is split by concern: `source` (where I/Os come from), `stats` (what
//! a job records), `host_loop` (how its engine issues and reaps), `run` (fio's `do_io` loop),
//! `completion` (reaping and recording), `checks` (latency target, max latency, rate_min,
//! steady state), `durability` (flushes, FUA and syncs), `flow` (fio's `flow`) and `app` (an
//! application's thread as the job's source).

use std::io::BufRead;

use qoslab_engine::time::MAX_TIME_TEXT;
use qoslab_engine::{IntervalSeries, IoStatus, LatencyHist, Moments, Ns, Op, ReqFlags, Request};
use qoslab_workload::WorkloadError;
use qoslab_workload::fio::{EngineClass, ExitWhat, Job, SteadyState, SubmitMode};
use qoslab_workload::generator::{GenIo, JobGen};
use qoslab_workload::trace::{ReplaySpeed, TraceReader};

use crate::iolog::{FioLog, JobLogs, SampleIo};

mod app;
mod checks;
mod completion;
mod durability;
mod flow;
mod host_loop;
mod run;
mod source;
mod stats;
#[cfg(test)]
mod tests;

pub use app::{AppOps, AppShared};
pub use checks::*;
pub use durability::*;
pub use flow::*;
pub use host_loop::*;
pub use source::*;
pub use stats::*;

/// One running job clone: fio's `do_io` loop for it, driven by events.
pub struct JobRun {
    /// Name shown in the report.
    pub name: String,
    /// Index of the job section (for options echo and grouping).
    pub def: usize,
    pub clone: u32,
    /// Run group: started when the previous one has finished (`stonewall`).
    pub group: u32,
    /// Reporting group (`stonewall` or `new_group`), for `group_reporting`.
    pub report_group: u32,
    /// The job reports with its group (`group_reporting`).
    pub group_reporting: bool,
    /// The host the job runs on, and its CPU there.
    pub host: u16,
    pub core: u16,
    source: Source,
    pub host_loop: HostLoop,
    pub think: Think,
    pub start_ns: Ns,
    ramp_ns: Ns,
    /// End of the run time after the start (None: until the I/O amount is done).
    end_after_ns: Option<Ns>,
    /// I/Os handed to the path and not yet completed by it.
    pub inflight: u32,
    /// I/Os the job holds: queued, in flight, or completed and not yet reaped (fio's
    /// `cur_depth`).
    allocated: u32,
    /// Queued, not yet submitted (waiting for their batch).
    staged: Vec<Request>,
    /// Committed in a submission call that slept before handing them all to the path.
    in_call: std::collections::VecDeque<Request>,
    /// Queued since fio's last `td_io_commit` (its `io_u_queued`), whether still in `staged`
    /// or already submitted by a getevents' commit or by the engine itself ([`EngineCalls`]).
    uncommitted: u32,
    /// A vector engine's I/Os in the call the job waits for ([`EngineCalls::Vector`]).
    in_vector: Vec<Request>,
    /// Completed by the path, not yet reaped by the job.
    done: std::collections::VecDeque<Request>,
    wait: Wait,
    pending: Option<GenIo>,
    /// Think time: whether the pending stall has been served; counts since the last one.
    thought: bool,
    since_think_issued: u64,
    since_think_reaped: u64,
    last_think_ns: Ns,
    /// How far the rate schedule is pushed back by think times (`rate_ignore_thinktime`).
    rate_shift_ns: Ns,
    /// Earliest time a wake-up is scheduled for (to avoid duplicates).
    pub wake_at: Option<Ns>,
    exhausted: bool,
    /// Told to stop (`exitall`, a steady state, the end of a latency search).
    pub terminated: bool,
    pub started: bool,
    pub finished: bool,
    /// The run has acted on the job's end (its group, `exitall`, its flow).
    pub end_noted: bool,
    pub stats: JobStats,
    pub series: Option<IntervalSeries>,
    /// Interval of the time series, if one is kept.
    series_interval_ns: Option<Ns>,
    issues: [bool; 4],
    bw_sampler: Sampler,
    iops_sampler: Sampler,
    pub last_complete_ns: Ns,
    pub issued: u64,
    /// Completed I/Os (and bytes) reaped since the start, ramp included (fio's `io_blocks`).
    pub reaped_ios: u64,
    pub reaped_bytes: u64,
    pub durability: Durability,
    /// Some job of the run asks for percentiles of the total latency (fio's
    /// `lat_percentiles=1`): only then is its histogram kept.
    pub lat_percentiles: bool,
    /// Whether writes are synchronous (`direct=1`): Linux marks an O_DIRECT write REQ_SYNC
    /// (block/fops.c, `dio_bio_write_op`), which kyber and bfq treat apart from the page
    /// cache's asynchronous writeback.
    pub sync_writes: bool,
    /// The job's writes and flushes form an ordered stream (its `ordering=`, or the block
    /// layer's): they carry `ReqFlags::ORDERED`.
    pub ordered: bool,
    /// The job's flow (shared with the other jobs of its `flow_id`) and its weight, and the
    /// I/Os it has counted in it.
    pub flow: Option<(std::rc::Rc<std::cell::Cell<FlowCounts>>, u64)>,
    pub flow_id: u32,
    pub flow_counter: u64,
    pub flow_sleep_ns: Ns,
    /// `rate_min`/`rate_iops_min` per direction, the cycle, and the last check.
    pub rate_min: [(Option<u64>, Option<u64>); 3],
    pub rate_cycle_ns: Ns,
    rate_check: [Option<(Ns, u64, u64)>; 3],
    /// `max_latency` per direction.
    pub max_latency_ns: [Option<Ns>; 3],
    pub latency_target: Option<LatencyTarget>,
    pub steadystate: Option<SteadyStateCheck>,
    /// fio's errno once the job failed.
    pub error: i32,
    /// `exitall` / `exitall_on_error` and `exit_what` of the job.
    pub exitall: bool,
    pub exitall_on_error: bool,
    pub exit_what: ExitWhat,
    /// When the job may start, after the run's start (`startdelay`), and the job it waits
    /// for (`wait_for`, an index into the run's jobs).
    pub start_delay_ns: Ns,
    pub wait_for: Vec<usize>,
    /// The file the job works on (a mounted file system, `[fs] mount`; `Request::file`), 0:
    /// the device. Its `direct=1` I/O is O_DIRECT, its syncs the file's fsync or fdatasync
    /// ([`Durability`]).
    pub file: u32,
    /// fio's `invalidate=1` on a file: each open of it (the job's start, each pass of
    /// `loops`) drops its pages first, which the first I/O after the open carries to the page
    /// cache (`ReqFlags::FADV_DONTNEED`).
    pub invalidate: bool,
    /// The file was opened and no I/O has gone since.
    opened: bool,
    /// The fio logs the clone writes (`write_lat_log`, ...), if any.
    pub logs: Option<Box<JobLogs>>,
    /// The bandwidth and IOPS samples are one per I/O, as with fio's per-I/O `write_bw_log`
    /// and `write_iops_log`, instead of one per `bwavgtime`/`iopsavgtime` window.
    per_io_bw: bool,
    per_io_iops: bool,
}

/// What the job asks of the simulator after it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pump {
    /// Wake the job at this time.
    WakeAt(Ns),
    /// Nothing: it waits for completions, for its flow, or is done.
    Wait,
}

/// What a pump did that the run must act on.
#[derive(Clone, Copy, Debug, Default)]
pub struct PumpNotes {
    /// I/Os counted in the job's flow (the flow's other jobs may go on).
    pub flow_counted: u64,
    /// The job failed in this pump (its `error` is set).
    pub failed: bool,
}
