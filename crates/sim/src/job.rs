//! Jobs at the top of the path: each clone of a fio job (or a trace replay) issues I/Os as fio
//! would (queue depth, batches, rate caps, think time, ramp and run time) and records what
//! completes.

use std::io::BufRead;

use qoslab_engine::time::MAX_TIME_TEXT;
use qoslab_engine::{IntervalSeries, IoStatus, LatencyHist, Moments, Ns, Op, ReqFlags, Request};
use qoslab_workload::WorkloadError;
use qoslab_workload::fio::{EngineClass, ExitWhat, Job, SteadyState, SubmitMode};
use qoslab_workload::generator::{GenIo, JobGen};
use qoslab_workload::trace::{ReplaySpeed, TraceReader};

use crate::iolog::{FioLog, JobLogs, SampleIo};

mod app;
pub use app::{AppOps, AppShared};

/// Where a job's I/Os come from.
pub enum Source {
    Gen(Box<JobGen>),
    Trace(Box<TraceSource>),
    /// A thread of an application (`app=`): its calls go through `JobRun::pump_app`.
    App(Box<app::AppSource>),
}

/// Open-loop replay of a trace at its timestamps (scaled by the speed), offsets wrapped into
/// the device.
pub struct TraceSource {
    pub reader: TraceReader<Box<dyn BufRead>>,
    pub speed: ReplaySpeed,
    pub capacity_bytes: u64,
}

impl Source {
    fn next(&mut self) -> Result<Option<GenIo>, WorkloadError> {
        match self {
            Source::Gen(g) => Ok(g.next_io()),
            Source::App(_) => Ok(None),
            Source::Trace(t) => {
                let Some(rec) = t.reader.next().transpose()? else {
                    return Ok(None);
                };
                let len = rec.len_bytes.min(t.capacity_bytes);
                let span = t.capacity_bytes - len + 1;
                let not_before_ns = t.speed.scale(rec.timestamp_ns).ok_or_else(|| {
                    WorkloadError::at(
                        t.reader.path(),
                        rec.line,
                        format!(
                            "--speed {:?} replays this record {} s after the first, past the simulated clock's {MAX_TIME_TEXT}",
                            t.speed.get(),
                            rec.timestamp_ns as f64 / 1e9 / t.speed.get()
                        ),
                    )
                })?;
                Ok(Some(GenIo {
                    op: rec.op,
                    offset_bytes: rec.offset_bytes % span,
                    len_bytes: len,
                    prio: Default::default(),
                    not_before_ns,
                    new_pass: false,
                }))
            }
        }
    }
}

/// What one op of one job did.
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    pub ios: u64,
    pub bytes: u64,
    pub slat: Moments,
    pub clat: LatencyHist,
    /// The total latency. Its histogram stays empty unless the run reports percentiles of it
    /// ([`JobRun::lat_percentiles`]); its moments are always kept.
    pub lat: LatencyHist,
    /// bandwidth and IOPS samples over fio's 500 ms averaging window (`bw_avg_time`).
    pub bw_samples: Moments,
    pub iops_samples: Moments,
    /// I/Os queued after the ramp whose completions the job never reaps (a vsync call not
    /// reaped before the next one: [`EngineCalls::Vector`]). fio counts an I/O in
    /// `total_ios` (and its IOPS) when it queues it, so they count there, not in `ios`.
    pub unreaped: u64,
}

impl OpStats {
    /// fio's `total_io_u`: the I/Os queued, which is `ios` plus those never reaped.
    pub fn total_ios(&self) -> u64 {
        self.ios + self.unreaped
    }

    pub fn merge(&mut self, o: &OpStats) {
        self.ios += o.ios;
        self.unreaped += o.unreaped;
        self.bytes += o.bytes;
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.lat.merge(&o.lat);
        self.bw_samples.merge(&o.bw_samples);
        self.iops_samples.merge(&o.iops_samples);
    }
}

/// fio's depth buckets for `iodepth_level` (1, 2, 4, ..., >=64) and for submit/complete batch
/// sizes (0, 4, 8, ..., >=64).
pub const DEPTH_BUCKETS: usize = 7;

pub fn depth_level_bucket(depth: u32) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

pub fn batch_bucket(n: u32) -> usize {
    match n {
        0 => 0,
        1..=4 => 1,
        5..=8 => 2,
        9..=16 => 3,
        17..=32 => 4,
        33..=64 => 5,
        _ => 6,
    }
}

/// Statistics of one job clone (or a merged group).
#[derive(Clone, Debug, Default)]
pub struct JobStats {
    /// read, write, trim, sync (flush).
    pub ops: [OpStats; 4],
    pub iodepth_level: [u64; DEPTH_BUCKETS],
    /// I/Os queued that fio never counted in `iodepth_level` (see `JobRun::uncommitted`).
    pub iodepth_uncounted: u64,
    /// Periodic syncs counted in `iodepth_level`, which fio leaves out of its divisor (the
    /// reads, writes and trims): the shares of a job that syncs add up to more than 100 %.
    pub iodepth_syncs: u64,
    /// Of the syncs in `ops`, the fdatasyncs: fio 3.33's `sync.total_ios` leaves them out.
    pub fdatasyncs: u64,
    pub submit_batches: [u64; DEPTH_BUCKETS],
    pub complete_batches: [u64; DEPTH_BUCKETS],
    pub errors: u64,
    /// Simulated time the job ran after its ramp (ns).
    pub runtime_ns: Ns,
    /// Per op, the end-to-end latency split into its [`LatencyPart`]s.
    pub split: [SplitSums; 4],
    /// fio's error number when the job failed (5: EIO, a `rate_min` not met; 110:
    /// ETIMEDOUT, a latency above `max_latency` or `latency_target` at depth 1), else 0.
    pub error: i32,
    /// The depth the job ended at: `iodepth`, or where `latency_target`'s search settled.
    pub latency_depth: u32,
    /// The steady-state check, if the job had one.
    pub steadystate: Option<SteadyStateReport>,
    /// An application job's operations (`app=`).
    pub app: Option<AppOps>,
}

/// One op's latencies split into their [`LatencyPart`]s and added up: the report gives each
/// part's mean, so counts and sums are all it keeps (a [`Moments`] per part would cost four
/// minima, maxima and squares per I/O nobody reads).
#[derive(Clone, Copy, Debug, Default)]
pub struct SplitSums {
    pub n: u64,
    sum_ns: [u128; 4],
}

impl SplitSums {
    #[inline]
    fn record(&mut self, parts: [Ns; 4]) {
        self.n += 1;
        for (sum, part) in self.sum_ns.iter_mut().zip(parts) {
            *sum += u128::from(part);
        }
    }

    fn merge(&mut self, o: &SplitSums) {
        self.n += o.n;
        for (sum, part) in self.sum_ns.iter_mut().zip(o.sum_ns) {
            *sum += part;
        }
    }

    /// The mean of `part`, in ns (0 with nothing recorded).
    pub fn mean_ns(&self, part: LatencyPart) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ns[part as usize] as f64 / self.n as f64
        }
    }
}

/// Where the time of a request went, from its stamps (the four parts sum to its latency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyPart {
    /// Host CPU: issuing and submitting (queued to dispatched, including a wait for a command
    /// id), handling the completion (interrupt to completed) and the wait until the job's loop
    /// reaps it.
    Host = 0,
    /// Crossing the transport: dispatched to arrived (the doorbell or capsule), CQ posted to
    /// interrupt.
    Transport = 1,
    /// In the NVMe controller: arrived to media start (SQ wait, fetch, command processing,
    /// write data), media done to CQ posted (read data, completion order, CQ post).
    Queueing = 2,
    /// At the media: media start to media done.
    Device = 3,
}

impl LatencyPart {
    pub const ALL: [LatencyPart; 4] = [
        LatencyPart::Host,
        LatencyPart::Transport,
        LatencyPart::Queueing,
        LatencyPart::Device,
    ];

    pub fn name(self) -> &'static str {
        ["host", "transport", "queueing", "device"][self as usize]
    }

    /// The four parts of a request's latency, in ns.
    pub fn split(t: &qoslab_engine::Stamps) -> [Ns; 4] {
        [
            t.dispatched_ns.saturating_sub(t.queued_ns)
                + t.completed_ns.saturating_sub(t.interrupt_ns),
            t.arrived_ns.saturating_sub(t.dispatched_ns)
                + t.interrupt_ns.saturating_sub(t.cq_posted_ns),
            t.media_start_ns.saturating_sub(t.arrived_ns)
                + t.cq_posted_ns.saturating_sub(t.media_done_ns),
            t.media_done_ns.saturating_sub(t.media_start_ns),
        ]
    }
}

impl JobStats {
    pub fn merge(&mut self, o: &JobStats) {
        for (a, b) in self.split.iter_mut().zip(&o.split) {
            a.merge(b);
        }
        for (a, b) in self.ops.iter_mut().zip(&o.ops) {
            a.merge(b);
        }
        for k in 0..DEPTH_BUCKETS {
            self.iodepth_level[k] += o.iodepth_level[k];
            self.submit_batches[k] += o.submit_batches[k];
            self.complete_batches[k] += o.complete_batches[k];
        }
        self.iodepth_uncounted += o.iodepth_uncounted;
        self.iodepth_syncs += o.iodepth_syncs;
        self.fdatasyncs += o.fdatasyncs;
        self.errors += o.errors;
        self.runtime_ns = self.runtime_ns.max(o.runtime_ns);
        if self.error == 0 {
            self.error = o.error;
        }
        self.latency_depth = self.latency_depth.max(o.latency_depth);
        if self.steadystate.is_none() {
            self.steadystate.clone_from(&o.steadystate);
        }
        if let Some(b) = &o.app {
            self.app.get_or_insert_with(Default::default).merge(b);
        }
    }
}

/// Bandwidth or IOPS sampling over fixed windows, as fio's `bwavgtime` and `iopsavgtime`
/// (500 ms each by default).
#[derive(Clone, Debug)]
struct Sampler {
    window_ns: Ns,
    start_ns: Ns,
    /// Bytes (bandwidth) or I/Os (IOPS) per direction in the current window.
    amount: [u64; 4],
    active: [bool; 4],
    bw: bool,
}

pub const BW_WINDOW_NS: Ns = 500_000_000;

impl Sampler {
    fn new(window_ns: Ns, active: [bool; 4], bw: bool) -> Self {
        Sampler {
            window_ns,
            start_ns: 0,
            amount: [0; 4],
            active,
            bw,
        }
    }

    /// Closes the windows that end by `t` (one every half second: most calls close none).
    /// `log` is the job's averaged bandwidth (or IOPS) log, which gets a line per sample, at
    /// the end of its window in ms since `epoch_ns` (fio writes its periodic samples there).
    #[inline(always)]
    fn close_until(&mut self, t: Ns, stats: &mut JobStats, log: Option<&mut FioLog>, epoch_ns: Ns) {
        if t >= self.start_ns + self.window_ns {
            self.close_windows(t, stats, log, epoch_ns);
        }
    }

    #[inline(never)]
    fn close_windows(
        &mut self,
        t: Ns,
        stats: &mut JobStats,
        mut log: Option<&mut FioLog>,
        epoch_ns: Ns,
    ) {
        // The open window, with what completed in it. fio's helper thread samples a direction
        // only if it moved in the window (stat.c, `__add_samples`: "No entries for interval"):
        // an idle window leaves no sample and no log line (measured: thinktime=250ms, 1 s,
        // log_avg_msec=100: 4 samples).
        let secs = self.window_ns as f64 / 1e9;
        let end_ms = (self.start_ns + self.window_ns - epoch_ns) / 1_000_000;
        for k in 0..4 {
            if self.active[k] && self.amount[k] > 0 {
                let op = &mut stats.ops[k];
                let value = if self.bw {
                    (self.amount[k] as f64 / 1024.0 / secs).round() as u64
                } else {
                    (self.amount[k] as f64 / secs).round() as u64
                };
                if self.bw {
                    op.bw_samples.record(value);
                } else {
                    op.iops_samples.record(value);
                }
                if let Some(log) = log.as_deref_mut() {
                    log.sample(end_ms, value, k);
                }
            }
            self.amount[k] = 0;
        }
        // The idle windows between it and `t` leave nothing: skipped at once, so an idle
        // stretch of simulated time costs nothing.
        self.start_ns += self.window_ns;
        let idle = t.saturating_sub(self.start_ns) / self.window_ns;
        self.start_ns += idle * self.window_ns;
    }
}

/// What remains of a job clone after the run.
#[derive(Clone, Debug)]
pub struct JobResult {
    pub name: String,
    pub def: usize,
    pub clone: u32,
    pub group: u32,
    pub stats: JobStats,
    pub issued: u64,
}

/// How a job clone issues and reaps its I/O: its engine and fio's options for its queue
/// (fio's `do_io` loop, backend.c).
#[derive(Clone, Copy, Debug)]
pub struct HostLoop {
    pub engine: EngineClass,
    /// I/Os the job may hold at once (fio's io_u pool): 1 for a synchronous engine.
    pub iodepth: u32,
    /// `iodepth_batch_submit`: I/Os queued before they are submitted together.
    pub batch: u32,
    /// `iodepth_batch_complete_min` and `_max`.
    pub complete_min: u32,
    pub complete_max: u32,
    /// `iodepth_low`: once full, the queue drains to this depth before it is refilled.
    pub low: u32,
    /// `io_submit_mode=offload`: I/Os leave at their scheduled times, whatever is in flight.
    pub offload: bool,
    /// For the `null` engine: the host's cost to issue and to complete an I/O.
    pub null_costs: Option<(Ns, Ns)>,
    /// Whether fio records a submission latency: not for a synchronous call (a sync engine,
    /// or `null` at depth 1), whose whole time is its completion latency.
    pub slat: bool,
    /// How the engine's own calls differ from libaio's.
    pub calls: EngineCalls,
    /// libaio's periodic sync (fio 3.33, engines/libaio.c `fio_libaio_queue`): Linux has no
    /// asynchronous fsync, so the engine calls fsync(2) at once, beside every write it has
    /// submitted and not reaped; only while it holds I/Os not yet submitted does it answer
    /// busy, and fio then submits them, reaps as when busy, and queues the sync again. Measured
    /// with strace (tests/test_fio_output_consistency.py): iodepth=4 fsync=4, each fsync with 3
    /// writes in flight. Other engines wait for their I/O first.
    pub sync_beside_io: bool,
    /// `io_uring`'s and `posixaio`'s periodic sync is an I/O of the queue (fio 3.33,
    /// engines/io_uring.c: an IORING_OP_FSYNC in the ring; engines/posixaio.c: aio_fsync):
    /// it takes a slot, is queued, committed and counted in `iodepth_level` as a write is,
    /// goes beside the writes in flight and is reaped as they are. fio's fetch gives a sync
    /// again while the last I/O the job reaped is not a sync (`last_was_sync` changes in
    /// `io_completed`), so one in flight is followed by more until one is reaped after the
    /// writes (measured, posixaio iodepth=4 fsync=4, 16 writes: 12 syncs, 4 at each
    /// multiple; tests/test_fio_output_consistency.py).
    pub sync_queued: bool,
}

/// How an engine's calls behave where they differ from libaio's (whose commit submits the
/// queued batch and whose getevents reaps `iodepth_batch_complete_min..max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineCalls {
    Batch,
    /// `posixaio` (engines/posixaio.c) has no commit: each I/O leaves when it is queued, and
    /// fio marks a submission and a completion of one I/O there (ioengines.c, `td_io_queue`);
    /// the depths are still counted `iodepth_batch_submit` I/Os at a time (`td_io_commit`), and
    /// its getevents returns every completion it finds, whatever the maximum.
    EachAtQueue,
    /// `vsync` above depth 1 (engines/sync.c): I/Os queue into one vector while each follows
    /// the last (same direction, next offset); the commit is one readv/writev the job waits
    /// for; a queued I/O that does not follow makes the engine busy (commit, reap, queue it
    /// again). Getevents returns the I/Os of the last call, whatever the minimum and maximum,
    /// or none if they were reaped: the I/Os of a call not reaped before the next one are never
    /// reaped (they keep their slot of `iodepth` to the end of the job, as in fio 3.33).
    Vector,
}

impl HostLoop {
    /// fio's rules (init.c `fixup_options`, the engines' own): a synchronous engine has one
    /// I/O at a time; batches and the low mark fit inside `iodepth` (0 meaning `iodepth`);
    /// the reaping maximum is at least its minimum; `posixaio` has no commit and so submits
    /// each I/O by itself (see [`EngineCalls`]); `null` at a depth above 1 completes a batch at its commit and
    /// takes no more until it is reaped.
    pub fn of_job(job: &Job, null_costs: (Ns, Ns)) -> Self {
        let depth = job.iodepth.max(1);
        let fit = |v: u32| if v == 0 || v > depth { depth } else { v };
        let batch = fit(job.iodepth_batch_submit);
        let calls = match job.ioengine.as_str() {
            "posixaio" => EngineCalls::EachAtQueue,
            // At depth 1 a vector of one is a psync call.
            "vsync" if depth > 1 => EngineCalls::Vector,
            _ => EngineCalls::Batch,
        };
        let complete_min = job.iodepth_batch_complete_min;
        let complete_max = job.iodepth_batch_complete_max.max(complete_min);
        let (iodepth, batch) = match job.engine {
            EngineClass::Sync if calls == EngineCalls::Vector => (depth, batch),
            EngineClass::Sync => (1, 1),
            EngineClass::Null if depth > 1 => (batch, batch),
            EngineClass::Null => (1, 1),
            EngineClass::Async => (depth, batch),
        };
        HostLoop {
            engine: job.engine,
            iodepth,
            batch,
            complete_min,
            complete_max,
            low: fit(job.iodepth_low).min(iodepth),
            offload: job.submit_mode == SubmitMode::Offload,
            null_costs: (job.engine == EngineClass::Null).then_some(null_costs),
            slat: match job.engine {
                EngineClass::Sync => false,
                EngineClass::Null => depth > 1,
                EngineClass::Async => true,
            },
            calls,
            sync_beside_io: job.ioengine == "libaio" && job.submit_mode != SubmitMode::Offload,
            sync_queued: matches!(job.ioengine.as_str(), "io_uring" | "posixaio")
                && job.submit_mode != SubmitMode::Offload,
        }
    }

    /// An open-loop replay (a trace): every I/O leaves at its time, up to `depth` in flight,
    /// each reaped as it completes.
    pub fn replay(depth: u32) -> Self {
        HostLoop {
            engine: EngineClass::Async,
            iodepth: depth.max(1),
            batch: 1,
            complete_min: 1,
            complete_max: 1,
            low: depth.max(1),
            offload: true,
            null_costs: None,
            slat: true,
            calls: EngineCalls::Batch,
            sync_beside_io: false,
            sync_queued: false,
        }
    }
}

/// `thinktime` and its companions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Think {
    pub ns: Ns,
    /// A stall every `blocks` I/Os issued (`issue`) or completed (`complete`).
    pub blocks: u64,
    pub on_complete: bool,
    /// `thinktime_iotime`: a stall also after this long of I/O.
    pub iotime_ns: Ns,
    /// `rate_ignore_thinktime`.
    pub ignore_in_rate: bool,
}

/// What fio's loop is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Nothing,
    /// `wait_for_completions`: at least `min` completions to reap, at most `max` per call;
    /// with `full`, reaping goes on until the queue is down to `iodepth_low`.
    Reap {
        min: u32,
        max: u32,
        full: bool,
    },
    /// `io_u_quiesce`: every I/O in flight, each reaped as it completes; then `then`.
    Quiesce(AfterQuiesce),
    /// Asleep until the time (a rate or a think time).
    Until(Ns),
    /// Its flow is ahead of its share: it waits for the other jobs of its flow.
    Flow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterQuiesce {
    /// Go on with the loop (a rate's sleep or a flush comes next).
    Continue,
    /// Think for this long.
    Think(Ns),
    /// Sleep this long (`flow_sleep`).
    Sleep(Ns),
}

/// fio's `latency_target` search for the deepest queue that meets the target (io_u.c).
#[derive(Clone, Debug)]
pub struct LatencyTarget {
    pub target_ns: Ns,
    pub window_ns: Ns,
    pub percentile: f64,
    pub run: bool,
    qd: u32,
    low: u32,
    high: u32,
    stable: u32,
    end_run: bool,
    window_start_ns: Ns,
    window_ios: u64,
    window_failed: u64,
}

impl LatencyTarget {
    pub fn new(target_ns: Ns, window_ns: Ns, percentile: f64, run: bool, depth: u32) -> Self {
        LatencyTarget {
            target_ns,
            window_ns,
            percentile,
            run,
            qd: 1,
            low: 1,
            high: depth,
            stable: 0,
            end_run: false,
            window_start_ns: 0,
            window_ios: 0,
            window_failed: 0,
        }
    }
}

/// The steady-state check of a job (fio's steadystate.c): a sample of its IOPS and
/// bandwidth each second, the last `dur` of them judged against the limit.
#[derive(Clone, Debug)]
pub struct SteadyStateCheck {
    pub spec: SteadyState,
    pub dur: usize,
    pub ramp_ns: Ns,
    samples: std::collections::VecDeque<(u64, u64)>,
    prev: (u64, u64),
    prev_ns: Ns,
    ramp_over: bool,
    pub report: SteadyStateReport,
}

/// What the steady-state check found, as fio's JSON `steadystate` gives it.
#[derive(Clone, Debug, Default)]
pub struct SteadyStateReport {
    pub spec: Option<SteadyState>,
    pub dur_s: u64,
    pub attained: bool,
    pub criterion: f64,
    pub max_deviation: f64,
    pub slope: f64,
    /// The last samples, oldest first: (IOPS, bandwidth in bytes per second).
    pub data: Vec<(u64, u64)>,
}

impl SteadyStateCheck {
    pub fn new(spec: SteadyState, dur_ns: Ns, ramp_ns: Ns) -> Self {
        let dur = (dur_ns / 1_000_000_000) as usize;
        SteadyStateCheck {
            spec,
            dur,
            ramp_ns,
            samples: std::collections::VecDeque::with_capacity(dur),
            prev: (0, 0),
            prev_ns: 0,
            ramp_over: ramp_ns == 0,
            report: SteadyStateReport {
                spec: Some(spec),
                dur_s: dur as u64,
                ..SteadyStateReport::default()
            },
        }
    }

    /// One sample at `now` of a job (or group) that has completed `ios` I/Os and `bytes`
    /// bytes since it started `since_start_ns` ago; whether the steady state is reached.
    pub fn sample(&mut self, now: Ns, since_start_ns: Ns, ios: u64, bytes: u64) -> bool {
        if self.dur == 0 || self.report.attained {
            return false;
        }
        // fio starts sampling one second after `ss_ramp`.
        if !self.ramp_over && since_start_ns >= self.ramp_ns + 1_000_000_000 {
            self.ramp_over = true;
        }
        let spent_ms = (now - self.prev_ns) / 1_000_000;
        let (dios, dbytes) = (ios - self.prev.0, bytes - self.prev.1);
        self.prev = (ios, bytes);
        self.prev_ns = now;
        if !self.ramp_over || spent_ms == 0 {
            return false;
        }
        let iops = 1000 * dios / spent_ms;
        let bw = 1000 * dbytes / spent_ms;
        if self.samples.len() == self.dur {
            self.samples.pop_front();
        }
        self.samples.push_back((iops, bw));
        self.report.data = self.samples.iter().copied().collect();
        if self.samples.len() < self.dur {
            return false;
        }
        let ys: Vec<f64> = self
            .samples
            .iter()
            .map(|&(i, b)| if self.spec.iops { i as f64 } else { b as f64 })
            .collect();
        let n = ys.len() as f64;
        let mean = ys.iter().sum::<f64>() / n;
        let value = if self.spec.slope {
            // Least squares over x = 0, 1, ..., n - 1 (fio assumes evenly spaced samples).
            let mx = (n - 1.0) / 2.0;
            let sxy: f64 = ys
                .iter()
                .enumerate()
                .map(|(x, y)| (x as f64 - mx) * (y - mean))
                .sum();
            let sxx: f64 = (0..ys.len()).map(|x| (x as f64 - mx).powi(2)).sum();
            self.report.slope = sxy / sxx;
            self.report.slope.abs()
        } else {
            self.report.max_deviation = ys.iter().map(|y| (y - mean).abs()).fold(0.0, f64::max);
            self.report.max_deviation
        };
        self.report.criterion = if self.spec.percent {
            if mean > 0.0 {
                100.0 * value / mean
            } else {
                f64::INFINITY
            }
        } else {
            value
        };
        if self.report.criterion < self.spec.limit {
            self.report.attained = true;
        }
        self.report.attained
    }
}

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
    /// The fio logs the clone writes (`write_lat_log`, ...), if any.
    pub logs: Option<Box<JobLogs>>,
    /// The bandwidth and IOPS samples are one per I/O, as with fio's per-I/O `write_bw_log`
    /// and `write_iops_log`, instead of one per `bwavgtime`/`iopsavgtime` window.
    per_io_bw: bool,
    per_io_iops: bool,
}

/// A job's cache-flush and FUA options (fio's `fsync`/`fdatasync`, `end_fsync`,
/// `fsync_on_close`, `write_barrier`, `fua`) and how far its writes are durable.
///
/// A flush is issued as fio's sync engines do it: the job waits for its writes in flight,
/// issues the FLUSH and waits for it; libaio's job issues it beside its writes in flight
/// ([`HostLoop::sync_beside_io`]) and waits for it alone; io_uring's and posixaio's queue it
/// beside them and reap it as an I/O ([`HostLoop::sync_queued`]). A write is *acknowledged*
/// to the application when the job can rely on it: at its completion in a job that never
/// flushes, or when written with FUA; at the completion of the flush that covers it in a job
/// that flushes: a flush covers the writes the job reaped before it was issued (Linux's fsync
/// does not wait for direct writes in flight), and in an ordered stream every write issued
/// before it (the stream sends it after them).
///
/// When fio 3.33 syncs (measured with strace on a file, tests/test_fio_output_consistency.py):
/// - `fsync=N` (`fdatasync=N` the same; where both are due, the fsync): when the job fetches
///   its next I/O, if the writes it has issued are a non-zero multiple of N and the last thing
///   it issued was not a sync. So none after the last write of a job that runs out of I/Os
///   (400 writes at fsync=4: 99 syncs; 10 at fsync=1: 9) or whose time is up (fio reads the
///   clock before it fetches), and, in a mixed job, one before each read that follows such a
///   sync while no write came in between.
/// - `end_fsync` and `fsync_on_close`: once, when the job ends (fio closes the file then), if
///   its file has not been synced since it was opened for writing or last written; with both,
///   the close finds the file synced. Neither is counted in the JSON's `sync`.
#[derive(Clone, Debug, Default)]
pub struct Durability {
    pub fsync_every: u64,
    pub fdatasync_every: u64,
    pub end_fsync: bool,
    pub fsync_on_close: bool,
    pub barrier_every: u64,
    pub fua: bool,
    writes_issued: u64,
    /// The last thing the job issued was a sync.
    last_was_sync: bool,
    /// fio's `last_was_sync` as its `io_completed` keeps it: the job's last sync is done and
    /// it has reaped no read, write or trim since. A libaio, io_uring or posixaio job's fetch
    /// asks it (the synchronous engines reap everything before their sync, so the last thing
    /// issued tells the same).
    last_done_was_sync: bool,
    /// The job's sync goes beside its writes in flight ([`HostLoop::sync_beside_io`]).
    beside: bool,
    /// The job's periodic sync is an I/O of its queue ([`HostLoop::sync_queued`]).
    queued: bool,
    /// Its queued syncs in flight, in the order issued.
    queued_flushes: std::collections::VecDeque<QueuedFlush>,
    /// The job ran out holding I/Os, and its syncs are queued: fio asks `should_fsync` for
    /// its end sync once it has reaped them all, so the answer waits for that reap.
    end_after_reap: bool,
    /// Writes issued and not yet reaped: how many, and (an unordered job whose sync goes beside
    /// its writes) which, as (issue time, offset, length).
    unreaped_writes: u64,
    unreaped: Option<Vec<(Ns, u64, u64)>>,
    /// Of those, the ones not reaped when the flush in flight was issued: it does not cover
    /// them.
    inflight_except: Vec<(Ns, u64, u64)>,
    /// An ordered stream's writes the flush in flight (or an earlier one) counted as covered
    /// before the job reaped them: their reaps count nothing more.
    precovered: u64,
    /// The job's file is opened for writing (fio's `td_write`: its `rw` writes).
    for_writing: bool,
    sync_due: bool,
    sync_inflight: bool,
    /// The periodic sync due or in flight is an fdatasync: fio 3.33's JSON counts it in
    /// `sync.lat_ns` and not in `sync.total_ios` (its `total_io_u` holds fsyncs only).
    datasync: bool,
    /// The sync due or in flight is the job's end (`end_fsync`, `fsync_on_close`): fio does not
    /// count it in the JSON's `sync`.
    end_sync: bool,
    /// The sync due is the fsync(2) of a file closed between passes (`fsync_on_close`): fio
    /// calls it directly, so it does not count as the last thing issued.
    close_sync: bool,
    /// Between two passes: the file has been closed (its `fsync_on_close` sync issued).
    pass_closed: bool,
    end_sync_done: bool,
    /// Writes completed since the last flush was issued, and those the flush in flight covers.
    completed_uncovered: u64,
    covered_by_inflight: u64,
    /// Writes acknowledged to the application so far.
    pub acknowledged: u64,
    /// What the flushes that completed cover.
    pub synced: Synced,
}

/// A periodic sync of an engine that queues it ([`HostLoop::sync_queued`]), in flight.
#[derive(Clone, Debug)]
struct QueuedFlush {
    queued_ns: Ns,
    /// The writes it covers that the syncs issued before it do not.
    covered: u64,
    /// The writes issued before it and not reaped then: it does not cover them.
    except: Vec<(Ns, u64, u64)>,
    datasync: bool,
}

/// What the flushes a job saw complete cover: the writes it issued before the last one was
/// issued, but those it had not reaped then (a libaio sync beside its writes in flight).
#[derive(Clone, Debug, Default)]
pub struct Synced {
    pub before_ns: Option<Ns>,
    /// (issue time, offset, length) of the writes excepted.
    except: Vec<(Ns, u64, u64)>,
}

impl Synced {
    /// Whether they cover the job's write issued at `queued_ns` that holds `offset_bytes`.
    pub fn covers(&self, queued_ns: Ns, offset_bytes: u64) -> bool {
        self.before_ns.is_some_and(|synced| queued_ns < synced)
            && !self
                .except
                .iter()
                .any(|&(q, off, len)| q == queued_ns && (off..off + len).contains(&offset_bytes))
    }
}

impl Durability {
    /// A job's options: fsync and fdatasync every so many writes (0: never), at its end
    /// (`end_fsync`), when it closes its file (`fsync_on_close`), make every
    /// `barrier_every`-th write a barrier (0: never), write with FUA.
    pub fn new(
        (fsync_every, fdatasync_every): (u64, u64),
        (end_fsync, fsync_on_close): (bool, bool),
        barrier_every: u64,
        fua: bool,
    ) -> Self {
        Durability {
            fsync_every,
            fdatasync_every,
            end_fsync,
            fsync_on_close,
            barrier_every,
            fua,
            ..Durability::default()
        }
    }

    /// Whether the job relies on flushes (rather than on completions) for durability.
    pub fn flushes(&self) -> bool {
        self.fsync_every > 0 || self.fdatasync_every > 0 || self.end_fsync || self.fsync_on_close
    }

    fn busy(&self) -> bool {
        self.sync_due || self.sync_inflight
    }

    /// The job opens its file for writing.
    fn open_for_writing(&mut self) {
        self.for_writing = true;
    }

    /// The job starts: whether its syncs go beside its writes in flight, and whether its
    /// stream is ordered.
    fn configure(&mut self, beside: bool, queued: bool, ordered: bool) {
        self.beside = beside;
        self.queued = queued;
        if (beside || queued) && !ordered && (self.fsync_every > 0 || self.fdatasync_every > 0) {
            self.unreaped = Some(Vec::new());
        }
    }

    /// Whether fio's fetch of the job's next I/O gives a periodic sync first: None, or
    /// whether it is an fdatasync (fio's `get_rw_ddir` asks fsync first).
    fn periodic_due(&self) -> Option<bool> {
        if self.writes_issued == 0 || self.synced() {
            return None;
        }
        let every = |n: u64| n > 0 && self.writes_issued.is_multiple_of(n);
        if every(self.fsync_every) {
            Some(false)
        } else if every(self.fdatasync_every) {
            Some(true)
        } else {
            None
        }
    }

    /// Whether the job's last sync is what fio's `should_fsync` sees last.
    fn synced(&self) -> bool {
        if self.beside || self.queued {
            self.last_done_was_sync
        } else {
            self.last_was_sync
        }
    }

    /// The job issues a read or a trim.
    fn other_issued(&mut self) {
        self.last_was_sync = false;
    }

    /// A write goes: the job holds it until it reaps it.
    fn write_issued(&mut self, req: &Request) {
        self.unreaped_writes += 1;
        if let Some(list) = &mut self.unreaped {
            list.push((req.t.queued_ns, req.offset_bytes, req.len_bytes));
        }
    }

    /// The job reaps a read, write or trim `req`; whether it is a write to count as
    /// completed (not yet covered by a flush).
    fn reaped(&mut self, req: &Request) -> bool {
        self.last_done_was_sync = false;
        if req.op != Op::Write {
            return false;
        }
        self.unreaped_writes -= 1;
        if let Some(list) = &mut self.unreaped {
            let key = (req.t.queued_ns, req.offset_bytes, req.len_bytes);
            if let Some(i) = list.iter().position(|&w| w == key) {
                list.swap_remove(i);
            }
        }
        if self.precovered > 0 {
            self.precovered -= 1;
            return false;
        }
        true
    }

    /// A flush goes: it covers the writes reaped since the last one, and in an ordered
    /// stream those issued and not yet reaped too.
    fn flush_issued(&mut self, ordered: bool) {
        self.covered_by_inflight = std::mem::take(&mut self.completed_uncovered);
        if ordered {
            let held = self.unreaped_writes - self.precovered;
            self.covered_by_inflight += held;
            self.precovered += held;
        }
        if let Some(list) = &self.unreaped {
            self.inflight_except.clone_from(list);
        }
    }

    /// A queued periodic sync goes ([`HostLoop::sync_queued`]): what it covers is set now.
    fn queued_flush_issued(&mut self, ordered: bool, now: Ns, datasync: bool) {
        self.flush_issued(ordered);
        self.last_was_sync = true;
        self.queued_flushes.push_back(QueuedFlush {
            queued_ns: now,
            covered: std::mem::take(&mut self.covered_by_inflight),
            except: std::mem::take(&mut self.inflight_except),
            datasync,
        });
    }

    /// The job reaps its queued sync `req`; whether it was an fdatasync. A sync covers what
    /// every sync issued before it covers, so those are done with it. (Syncs issued in the
    /// same instant are told apart by their order: the first of them is taken, which never
    /// counts a write as durable that is not.)
    fn queued_flush_reaped(&mut self, req: &Request) -> bool {
        self.last_done_was_sync = true;
        let Some(i) = self
            .queued_flushes
            .iter()
            .position(|f| f.queued_ns == req.t.queued_ns)
        else {
            return false;
        };
        if req.status != IoStatus::Ok {
            let f = self.queued_flushes.remove(i).expect("found");
            self.completed_uncovered += f.covered;
            return f.datasync;
        }
        let mut datasync = false;
        for f in self.queued_flushes.drain(..=i) {
            self.acknowledged += f.covered;
            self.synced = Synced {
                before_ns: Some(f.queued_ns),
                except: f.except,
            };
            datasync = f.datasync;
        }
        datasync
    }

    /// The flags of the next write, counting it.
    fn write_flags(&mut self) -> ReqFlags {
        self.writes_issued += 1;
        self.last_was_sync = false;
        let mut flags = ReqFlags::empty();
        if self.fua {
            flags |= ReqFlags::FUA;
        }
        if self.barrier_every > 0 && self.writes_issued.is_multiple_of(self.barrier_every) {
            flags |= ReqFlags::PREFLUSH | ReqFlags::FUA;
        }
        flags
    }

    /// The job has issued its last, and still holds I/Os if `held`: a final sync is due if it
    /// asked for one, writes, and the last thing it issued was not a sync (fio's `should_fsync`:
    /// a read after the last sync makes one due, measured: randrw fsync=2 end_fsync ending `W W
    /// S R`: an fsync after it). fio asks once it has reaped everything: a libaio job's I/Os
    /// held beside its last sync make one due.
    fn at_end(&mut self, held: bool) {
        if self.queued && held {
            self.end_after_reap = true;
            return;
        }
        if (self.end_fsync || self.fsync_on_close)
            && self.for_writing
            && !(self.synced() && !(self.beside && held))
            && !self.end_sync_done
        {
            self.end_sync_done = true;
            self.end_sync_due();
        }
    }

    /// An end sync (`end_fsync`, `fsync_on_close`, or the close between passes) is due: an
    /// fsync, not counted in the JSON's `sync`.
    fn end_sync_due(&mut self) {
        self.sync_due = true;
        self.end_sync = true;
        self.datasync = false;
    }
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

impl JobRun {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        def: usize,
        clone: u32,
        (group, report_group): (u32, u32),
        core: u16,
        source: Source,
        host_loop: HostLoop,
        ramp_ns: Ns,
        end_after_ns: Option<Ns>,
        issues: [bool; 4],
        series_interval_ns: Option<Ns>,
    ) -> Self {
        JobRun {
            name,
            def,
            clone,
            group,
            report_group,
            group_reporting: false,
            host: 0,
            core,
            source,
            host_loop,
            think: Think::default(),
            start_ns: 0,
            ramp_ns,
            end_after_ns,
            inflight: 0,
            allocated: 0,
            staged: Vec::new(),
            in_call: std::collections::VecDeque::new(),
            uncommitted: 0,
            in_vector: Vec::new(),
            done: std::collections::VecDeque::new(),
            wait: Wait::Nothing,
            pending: None,
            thought: false,
            since_think_issued: 0,
            since_think_reaped: 0,
            last_think_ns: 0,
            rate_shift_ns: 0,
            wake_at: None,
            exhausted: false,
            terminated: false,
            started: false,
            finished: false,
            end_noted: false,
            stats: JobStats::default(),
            series: None,
            series_interval_ns,
            issues,
            bw_sampler: Sampler::new(BW_WINDOW_NS, issues, true),
            iops_sampler: Sampler::new(BW_WINDOW_NS, issues, false),
            last_complete_ns: 0,
            issued: 0,
            reaped_ios: 0,
            reaped_bytes: 0,
            durability: Durability::default(),
            lat_percentiles: false,
            sync_writes: false,
            ordered: false,
            flow: None,
            flow_id: 0,
            flow_counter: 0,
            flow_sleep_ns: 0,
            rate_min: [(None, None); 3],
            rate_cycle_ns: 1_000_000_000,
            rate_check: [None; 3],
            max_latency_ns: [None; 3],
            latency_target: None,
            steadystate: None,
            error: 0,
            exitall: false,
            exitall_on_error: false,
            exit_what: ExitWhat::Group,
            start_delay_ns: 0,
            wait_for: Vec::new(),
            file: 0,
            logs: None,
            per_io_bw: false,
            per_io_iops: false,
        }
    }

    /// fio's per-I/O bandwidth and IOPS samples (its `add_bw_sample` and `add_iops_sample`,
    /// used instead of the periodic ones when a job writes a per-I/O `write_bw_log` or
    /// `write_iops_log`).
    pub fn sample_per_io(&mut self, bw: bool, iops: bool) {
        self.per_io_bw = bw;
        self.per_io_iops = iops;
        if bw {
            self.bw_sampler.active = [false; 4];
        }
        if iops {
            self.iops_sampler.active = [false; 4];
        }
    }

    /// The bandwidth and IOPS sample windows (`bwavgtime`, `iopsavgtime`).
    pub fn set_sample_windows(&mut self, bw_ns: Ns, iops_ns: Ns) {
        self.bw_sampler.window_ns = bw_ns.max(1);
        self.iops_sampler.window_ns = iops_ns.max(1);
    }

    pub fn start(&mut self, now: Ns) {
        self.started = true;
        self.start_ns = now;
        if self.issues[Op::Write.index()] {
            // fio opens the file of a job that writes for writing.
            self.durability.open_for_writing();
        }
        let hl = &self.host_loop;
        self.durability
            .configure(hl.sync_beside_io, hl.sync_queued, self.ordered);
        self.bw_sampler.start_ns = now + self.ramp_ns;
        self.iops_sampler.start_ns = now + self.ramp_ns;
        self.last_think_ns = now;
        if let Some(interval) = self.series_interval_ns {
            let ops: Vec<Op> = Op::ALL
                .into_iter()
                .filter(|op| self.issues[op.index()])
                .collect();
            self.series = Some(IntervalSeries::new(interval, now + self.ramp_ns, &ops));
        }
        self.last_complete_ns = now + self.ramp_ns;
        if let Some(lt) = &mut self.latency_target {
            lt.window_start_ns = now;
        }
        if let Some(ss) = &mut self.steadystate {
            ss.prev_ns = now;
        }
    }

    fn ramp_end(&self) -> Ns {
        self.start_ns + self.ramp_ns
    }

    /// The depth the job fills its queue to: `iodepth`, or the depth a latency search is at.
    fn depth(&self) -> u32 {
        match &self.latency_target {
            Some(lt) => lt.qd.min(self.host_loop.iodepth),
            None => self.host_loop.iodepth,
        }
    }

    /// fio's `wait_for_completions`: how many completions to wait for.
    fn reap_wait(&self, full: bool) -> Wait {
        let hl = &self.host_loop;
        let mut min = hl.complete_min.min(self.allocated);
        if (full && min == 0) || hl.complete_min == 0 {
            min = 1;
        }
        Wait::Reap {
            min,
            max: hl.complete_max.max(min),
            full,
        }
    }

    /// Tells the job to stop (`exitall`, its steady state, ...): it issues nothing more and
    /// ends once what it has in flight is reaped.
    pub fn terminate(&mut self) {
        self.terminated = true;
    }

    /// Issues what the job may issue now, through `submit`; says when to wake it next.
    /// `submit` answers false when the submission call sleeps (the block layer made the job
    /// wait for a tag): the job then stops issuing until it is pumped again.
    pub fn pump(
        &mut self,
        now: Ns,
        mut submit: impl FnMut(Request) -> bool,
    ) -> Result<(Pump, PumpNotes), WorkloadError> {
        if matches!(self.source, Source::App(_)) {
            return Ok(self.pump_app(now, &mut submit));
        }
        let mut notes = PumpNotes::default();
        if self.host_loop.offload {
            // Offload workers (and a trace's replay) reap each I/O as it completes.
            while !self.done.is_empty() {
                self.reap(now, 1, &mut notes);
            }
        }
        let result = loop {
            // 0. A submission call that slept for a tag goes on first.
            if !self.continue_call(&mut submit) || !self.in_vector.is_empty() {
                break Pump::Wait;
            }
            // 1. What the loop is waiting for.
            match self.wait {
                Wait::Nothing => {}
                Wait::Reap { .. } if self.host_loop.offload => {
                    // The workers have reaped (above): a free slot is all the job waits for.
                    if self.allocated >= self.depth() && !self.stopping() {
                        break Pump::Wait;
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Reap { full, .. } if self.host_loop.calls == EngineCalls::Vector => {
                    // vsync's getevents: its commit first (the job waits for the call), then
                    // the last call's I/Os, or none.
                    if !self.commit(&mut submit, false) {
                        break Pump::Wait;
                    }
                    let n = self.done.len() as u32;
                    self.reap(now, n, &mut notes);
                    // With nothing reaped fio 3.33 calls again for ever (the slots it never
                    // reaps keep the queue above iodepth_low); the simulation goes on.
                    if n > 0 && full && self.allocated > self.host_loop.low && !self.stopping() {
                        self.wait = self.reap_wait(true);
                        continue;
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Reap { min, max, full } => {
                    if (self.done.len() as u32) < min {
                        self.commit(&mut submit, false);
                        break Pump::Wait;
                    }
                    self.reap(now, max, &mut notes);
                    if full && self.allocated > self.host_loop.low && !self.stopping() {
                        self.wait = self.reap_wait(true);
                        continue;
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Quiesce(then) => {
                    if !self.commit(&mut submit, true) {
                        break Pump::Wait;
                    }
                    while !self.done.is_empty() {
                        let max = self.host_loop.complete_max.max(1);
                        self.reap(now, max, &mut notes);
                    }
                    if self.allocated > 0 {
                        break Pump::Wait;
                    }
                    self.wait = match then {
                        AfterQuiesce::Continue => Wait::Nothing,
                        AfterQuiesce::Think(ns) => {
                            self.served_think(now, ns);
                            Wait::Until(now + ns)
                        }
                        AfterQuiesce::Sleep(ns) => Wait::Until(now + ns),
                    };
                    continue;
                }
                Wait::Until(t) => {
                    if now < t {
                        break Pump::WakeAt(t);
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Flow => {
                    // Re-checked below; fio spins without reaping.
                    self.wait = Wait::Nothing;
                }
            }
            // 2. A flush: after every I/O of the job is reaped, alone; libaio's periodic sync
            // beside the I/Os in flight once none waits to be submitted. (vsync's job drains
            // first: fio's end_fsync comes after its last call, step 3.)
            let vector_end = self.exhausted && self.host_loop.calls == EngineCalls::Vector;
            if self.durability.busy() && !(vector_end && self.allocated > 0) {
                if self.durability.sync_due {
                    let beside = self.host_loop.sync_beside_io && !self.durability.end_sync;
                    if beside && !self.staged.is_empty() {
                        // libaio is busy: fio submits what is queued and reaps as it does when
                        // busy (`do_io`'s `reap:`, wait_for_completions), then queues the sync
                        // again; the sync's own slot may leave no other free.
                        self.wait = self.reap_wait(self.allocated + 1 >= self.depth());
                        if !self.commit(&mut submit, true) {
                            break Pump::Wait;
                        }
                        continue;
                    }
                    if self.allocated > 0 && !beside {
                        self.wait = Wait::Quiesce(AfterQuiesce::Continue);
                        continue;
                    }
                    if beside {
                        // fio counts the sync at the depth it holds with it when it goes.
                        self.stats.iodepth_level[depth_level_bucket(self.allocated + 1)] += 1;
                    }
                    if self.host_loop.sync_queued
                        && self.durability.end_sync
                        && !self.durability.close_sync
                    {
                        // The end sync of an engine that queues its syncs goes through the
                        // engine's queue and commit, which count it at depth 1 (fio 3.33
                        // guards only a completed sync at the end: io_uring and posixaio,
                        // 16 writes fsync=4 end_fsync=1: '1' 12.5 %, 6.25 % without).
                        self.stats.iodepth_level[depth_level_bucket(1)] += 1;
                        self.stats.iodepth_syncs += 1;
                    }
                    let d = &mut self.durability;
                    d.sync_due = false;
                    d.sync_inflight = true;
                    d.last_was_sync |= !std::mem::take(&mut d.close_sync);
                    d.last_done_was_sync = true;
                    d.flush_issued(self.ordered);
                    self.inflight += 1;
                    let mut req = Request::new(Op::Flush, 0, 0, 0, now);
                    req.host = self.host;
                    req.core = self.core;
                    req.file = self.file;
                    if d.datasync && self.file != 0 {
                        req.flags |= ReqFlags::DATA_SYNC;
                    }
                    if self.ordered {
                        req.flags |= ReqFlags::ORDERED;
                    }
                    // The job waits for its flush, whether or not the call sleeps for a tag.
                    let _ = submit(req);
                }
                break Pump::Wait;
            }
            // 3. The end: no more I/O; fio reaps what is left in one call.
            if !self.exhausted && (self.terminated || self.error != 0) {
                self.exhausted = true;
                if self.error == 0 {
                    self.durability.at_end(self.allocated > 0);
                }
                continue;
            }
            if self.exhausted {
                if self.allocated > 0 && self.host_loop.calls == EngineCalls::Vector {
                    // vsync's last getevents returns the last call's I/Os (or none); the job
                    // ends holding the I/Os of earlier calls, never reaped.
                    if !self.commit(&mut submit, false) {
                        break Pump::Wait;
                    }
                    let n = self.done.len() as u32;
                    self.reap(now, n, &mut notes);
                    self.allocated = 0;
                    continue;
                }
                if self.allocated > 0 {
                    // fio's last call waits for every I/O the job holds and reaps them
                    // together (offload workers reap each as it comes, above).
                    if !self.commit(&mut submit, false) || (self.done.len() as u32) < self.allocated
                    {
                        break Pump::Wait;
                    }
                    let all = self.allocated;
                    self.reap(now, all, &mut notes);
                    continue;
                }
                if std::mem::take(&mut self.durability.end_after_reap) {
                    self.durability.at_end(false);
                    continue;
                }
                break Pump::Wait;
            }
            // 3b. Think time: fio thinks after each I/O it queues (do_io's handle_thinktime),
            // waiting for its I/O in flight first, and reads the time only then: the last I/O
            // of a job, whether its time or its I/O ran out, gets its think time too, and the
            // job's run time holds it (fio 3.33 does not cut the stall at the runtime).
            if let Some(ns) = self.think_due(now) {
                self.wait = Wait::Quiesce(AfterQuiesce::Think(ns));
                continue;
            }
            if let Some(end) = self.end_after_ns
                && now >= self.start_ns + end
            {
                // fio reads the time before each fetch (do_io): a job whose time is up fetches
                // nothing more, not even the sync its last write made due.
                self.exhausted = true;
                self.durability.at_end(self.allocated > 0);
                continue;
            }
            // 4. The next I/O.
            if self.syncs_reach_number_ios() {
                self.pending = None;
                self.exhausted = true;
                self.durability.at_end(self.allocated > 0);
                continue;
            }
            if self.pending.is_none() {
                self.pending = self.source.next()?;
                if self.pending.is_none() {
                    self.exhausted = true;
                    self.durability.at_end(self.allocated > 0);
                    continue;
                }
            }
            let io = self.pending.expect("just filled");
            // fio's fetch of the next I/O gives a periodic sync first, when one is due.
            if let Some(datasync) = self.durability.periodic_due() {
                if !self.host_loop.sync_queued {
                    self.periodic_sync(datasync);
                    continue;
                }
                if self.allocated >= self.depth() {
                    self.wait = self.reap_wait(true);
                    continue;
                }
                if !self.queue_sync(now, datasync, &mut submit) {
                    break Pump::Wait;
                }
                continue;
            }
            // 4b. The last pass reached the file's end (`loops`): fio reaps everything, closes
            // the file (fsync_on_close: an fsync(2) if it is unsynced), syncs it as at the job's
            // end (end_fsync or fsync_on_close, if still unsynced), then opens it again for
            // the next pass, where the last sync no longer counts (reset_io_counters).
            if io.new_pass {
                if self.allocated > 0 {
                    self.wait = Wait::Quiesce(AfterQuiesce::Continue);
                    continue;
                }
                let writes = self.issues[Op::Write.index()];
                let d = &mut self.durability;
                if !std::mem::replace(&mut d.pass_closed, true)
                    && d.fsync_on_close
                    && writes
                    && !d.synced()
                {
                    d.end_sync_due();
                    d.close_sync = true;
                    continue;
                }
                if (d.end_fsync || d.fsync_on_close) && writes && !d.synced() {
                    d.end_sync_due();
                    continue;
                }
                d.pass_closed = false;
                d.last_was_sync = false;
                d.last_done_was_sync = false;
                self.pending.as_mut().expect("fetched").new_pass = false;
                continue;
            }
            // 5. Flow: a job ahead of its share waits (fio's flow_threshold_exceeded).
            if let Some(blocked) = self.flow_blocked()
                && blocked
            {
                if self.flow_sleep_ns > 0 {
                    self.wait = Wait::Quiesce(AfterQuiesce::Sleep(self.flow_sleep_ns));
                    continue;
                }
                self.wait = Wait::Flow;
                break Pump::Wait;
            }
            // 7. Rate: ahead of its schedule, the job sleeps (inline: once its I/O in flight
            // is done).
            let mut due = self.start_ns + io.not_before_ns + self.rate_shift_ns;
            if due > now {
                // fio cuts a rate's sleep at the job's runtime (rate_ddir), then finds its time
                // up: the job ends there, its run time the whole runtime.
                if let Some(end) = self.end_after_ns {
                    due = due.min(self.start_ns + end);
                }
                if self.host_loop.offload || self.allocated == 0 {
                    self.wait = Wait::Until(due);
                    break Pump::WakeAt(due);
                }
                self.wait = Wait::Quiesce(AfterQuiesce::Continue);
                continue;
            }
            // 8. A full queue is reaped first.
            if self.allocated >= self.depth() {
                self.wait = self.reap_wait(true);
                continue;
            }
            // 8b. vsync: an I/O that does not follow its vector makes the engine busy: fio
            // commits what is queued, reaps (`do_io`'s `reap:`), then queues the I/O again.
            if self.host_loop.calls == EngineCalls::Vector
                && let Some(last) = self.staged.last()
                && (last.op != io.op || last.offset_bytes + last.len_bytes != io.offset_bytes)
            {
                self.wait = self.reap_wait(self.allocated >= self.depth());
                if !self.commit(&mut submit, true) {
                    break Pump::Wait;
                }
                continue;
            }
            // 9. Queue the I/O; a batch is submitted once complete.
            self.pending = None;
            self.thought = false;
            self.allocated += 1;
            self.issued += 1;
            self.since_think_issued += 1;
            if let Some((flow, _)) = &self.flow {
                let mut f = flow.get();
                f.counter += 1;
                flow.set(f);
                self.flow_counter += 1;
                notes.flow_counted += 1;
            }
            let mut req = Request::new(io.op, io.offset_bytes, io.len_bytes, 0, now);
            req.prio = io.prio;
            if io.op != Op::Write {
                self.durability.other_issued();
            } else {
                req.flags |= self.durability.write_flags();
                if self.sync_writes {
                    req.flags |= ReqFlags::SYNC;
                }
                if self.ordered {
                    req.flags |= ReqFlags::ORDERED;
                }
                self.durability.write_issued(&req);
            }
            if self.file != 0 {
                req.file = self.file;
                if self.sync_writes {
                    // direct=1 on a file: O_DIRECT, past the page cache.
                    req.flags |= ReqFlags::DIRECT;
                }
            }
            req.host = self.host;
            req.core = self.core;
            if self.allocated >= self.depth() {
                // fio reaps right after queueing into a full queue (`do_io`'s `reap:`), the
                // last I/O included: its final call then drains what is left after that reap.
                self.wait = self.reap_wait(true);
            }
            match self.host_loop.calls {
                EngineCalls::Batch => {
                    // fio's td_io_queue commits once `iodepth_batch_submit` I/Os are queued
                    // since its last commit, some of which getevents may have submitted.
                    self.staged.push(req);
                    self.uncommitted += 1;
                    if self.uncommitted >= self.host_loop.batch && !self.commit(&mut submit, true) {
                        break Pump::Wait;
                    }
                }
                EngineCalls::EachAtQueue => {
                    self.stats.submit_batches[batch_bucket(1)] += 1;
                    if now >= self.ramp_end() {
                        self.stats.complete_batches[batch_bucket(1)] += 1;
                    }
                    self.uncommitted += 1;
                    if self.uncommitted >= self.host_loop.batch {
                        self.commit(&mut submit, true);
                    }
                    self.in_call.push_back(req);
                    if !self.continue_call(&mut submit) {
                        break Pump::Wait;
                    }
                }
                EngineCalls::Vector => {
                    self.staged.push(req);
                    self.uncommitted += 1;
                    if self.uncommitted >= self.host_loop.batch && !self.commit(&mut submit, true) {
                        break Pump::Wait;
                    }
                }
            }
        };
        if self.exhausted && self.allocated == 0 {
            // Queued and never counted by a commit: fio's job ends with them.
            self.stats.iodepth_uncounted += u64::from(std::mem::take(&mut self.uncommitted));
            if !self.durability.busy() {
                self.finished = true;
                // The job's run time is its loop's (fio's do_io), to the end of a last think
                // time or rate sleep, not to its last completion.
                self.last_complete_ns = self.last_complete_ns.max(now);
            }
        }
        notes.failed |= self.error != 0;
        Ok((result, notes))
    }

    /// fio's fetch gave a periodic sync (an fdatasync if `datasync`): it is issued once the
    /// job's I/Os are reaped, or libaio's beside them (step 2 of `pump`).
    fn periodic_sync(&mut self, datasync: bool) {
        self.durability.sync_due = true;
        self.durability.datasync = datasync;
        // fio 3.33 counts the sync in iodepth_level at the depth the job holds with it (its
        // `cur_depth` at the sync's queue: the I/Os not yet reaped and the sync), though not
        // in the shares' divisor (measured: psync, 400 writes, fsync=4: '1' 124.75 %).
        // libaio's is counted when it goes (step 2), after the reap a busy engine makes.
        if !self.host_loop.sync_beside_io {
            self.stats.iodepth_level[depth_level_bucket(self.allocated + 1)] += 1;
        }
        self.stats.iodepth_syncs += 1;
    }

    /// fio's fetch gave a periodic sync to an engine that queues it ([`HostLoop::sync_queued`]):
    /// it is queued and committed as a write is (fio's `td_io_queue`: counted in
    /// `iodepth_level` by the commit, at the depth the job holds with it). False if the
    /// submission call sleeps.
    fn queue_sync(
        &mut self,
        now: Ns,
        datasync: bool,
        submit: &mut impl FnMut(Request) -> bool,
    ) -> bool {
        self.stats.iodepth_syncs += 1;
        self.allocated += 1;
        self.durability
            .queued_flush_issued(self.ordered, now, datasync);
        let mut req = Request::new(Op::Flush, 0, 0, 0, now);
        req.host = self.host;
        req.core = self.core;
        req.file = self.file;
        if datasync && self.file != 0 {
            req.flags |= ReqFlags::DATA_SYNC;
        }
        if self.ordered {
            req.flags |= ReqFlags::ORDERED;
        }
        if self.allocated >= self.depth() {
            self.wait = self.reap_wait(true);
        }
        self.uncommitted += 1;
        if self.host_loop.calls == EngineCalls::EachAtQueue {
            // posixaio: aio_fsync leaves at once (see [`EngineCalls::EachAtQueue`]).
            self.stats.submit_batches[batch_bucket(1)] += 1;
            if now >= self.ramp_end() {
                self.stats.complete_batches[batch_bucket(1)] += 1;
            }
            if self.uncommitted >= self.host_loop.batch {
                self.commit(submit, true);
            }
            self.in_call.push_back(req);
            return self.continue_call(submit);
        }
        self.staged.push(req);
        self.uncommitted < self.host_loop.batch || self.commit(submit, true)
    }

    /// fio's `exceeds_number_ios` counts the I/Os completed, queued and in flight, its
    /// queued syncs among them ([`HostLoop::sync_queued`]): a job holding syncs stops short of
    /// `number_ios` writes (measured, posixaio iodepth=8 fsync=4 number_ios=32: 28 writes).
    fn syncs_reach_number_ios(&self) -> bool {
        let syncs = self.durability.queued_flushes.len() as u64;
        if syncs == 0 {
            return false;
        }
        let Source::Gen(g) = &self.source else {
            return false;
        };
        let Some(limit) = g.extent().io_limit_ios else {
            return false;
        };
        let pending = u64::from(self.pending.is_some());
        g.ios_generated() - pending + syncs >= limit
    }

    /// Whether fio stops filling the queue: the job ran out, was told to stop, or failed.
    fn stopping(&self) -> bool {
        self.exhausted || self.terminated || self.error != 0
    }

    /// fio's `td_io_commit` (`counted`) or the engine's own commit that getevents makes
    /// first: the queued I/Os go down in one submission. fio counts depths in `td_io_commit`
    /// only, every I/O queued since the last one (its `io_u_queued`, whether or not getevents
    /// submitted it since) at the depth the job holds then: a job's last I/Os, submitted by
    /// its last getevents, are never counted (measured, libaio iodepth=8
    /// iodepth_batch_submit=3, 32 writes: fio counts 30). False if the call sleeps (see
    /// `continue_call`) or, for a vector engine, while the job waits for its call.
    fn commit(&mut self, submit: &mut impl FnMut(Request) -> bool, counted: bool) -> bool {
        if counted && self.allocated > 0 && self.uncommitted > 0 {
            let level = depth_level_bucket(self.allocated);
            self.stats.iodepth_level[level] += u64::from(self.uncommitted);
            self.uncommitted = 0;
        }
        if self.host_loop.calls != EngineCalls::Batch {
            return self.call_vector(submit);
        }
        let n = self.staged.len() as u32;
        if n == 0 {
            return true;
        }
        self.stats.submit_batches[batch_bucket(n)] += 1;
        let last = self.staged.len() - 1;
        for (i, req) in self.staged.iter_mut().enumerate() {
            if i < last {
                // The rest of this submission follows at once.
                req.flags |= ReqFlags::BATCH_MORE;
            }
        }
        self.in_call.extend(self.staged.drain(..));
        self.continue_call(submit)
    }

    /// A vector engine's commit: the queued I/Os (each following the last) as one request,
    /// a readv/writev the job waits for. The I/Os of the previous call, if not reaped, are
    /// no longer the engine's events: they are never reaped.
    fn call_vector(&mut self, submit: &mut impl FnMut(Request) -> bool) -> bool {
        let Some(&first) = self.staged.first() else {
            return true;
        };
        self.stats.submit_batches[batch_bucket(self.staged.len() as u32)] += 1;
        let ramp_end = self.ramp_end();
        for io in self.done.drain(..) {
            if io.t.queued_ns >= ramp_end {
                self.stats.ops[io.op.index()].unreaped += 1;
            }
        }
        let mut call = first;
        for io in &self.staged[1..] {
            call.len_bytes += io.len_bytes;
            call.flags |= io.flags;
        }
        self.in_vector.append(&mut self.staged);
        self.in_call.push_back(call);
        self.continue_call(submit);
        false
    }

    /// Hands the I/Os of the current submission call to the path, in order. `submit` answers
    /// false when the call sleeps (the block layer made the job wait for a tag,
    /// blk_mq_get_tag): the rest of the call stays here, and the job neither submits nor
    /// reaps until it is pumped again, when the call goes on where it stopped.
    fn continue_call(&mut self, submit: &mut impl FnMut(Request) -> bool) -> bool {
        while let Some(req) = self.in_call.pop_front() {
            self.inflight += 1;
            if !submit(req) {
                return false;
            }
        }
        true
    }

    /// A think time is due before the next I/O: after `thinktime_blocks` I/Os issued or
    /// completed since the last one, or after `thinktime_iotime` of I/O.
    fn think_due(&self, now: Ns) -> Option<Ns> {
        let t = &self.think;
        if t.ns == 0 || self.thought || self.issued == 0 {
            return None;
        }
        let count = if t.on_complete {
            self.since_think_reaped
        } else {
            self.since_think_issued
        };
        let by_time = t.iotime_ns > 0 && now - self.last_think_ns >= t.iotime_ns + t.ns;
        let by_count = count >= t.blocks && (t.iotime_ns == 0 || t.blocks > 0);
        (by_count || by_time).then_some(t.ns)
    }

    fn served_think(&mut self, now: Ns, ns: Ns) {
        self.thought = true;
        self.last_think_ns = now;
        self.since_think_issued = 0;
        self.since_think_reaped = 0;
        if self.think.ignore_in_rate {
            self.rate_shift_ns += ns;
        }
    }

    /// Whether the job is ahead of its share of its flow (fio's `flow_threshold_exceeded`:
    /// its I/Os over the flow's, against its weight over the flow's); None without a flow.
    fn flow_blocked(&self) -> Option<bool> {
        let (flow, weight) = self.flow.as_ref()?;
        let f = flow.get();
        let counter_ratio = self.flow_counter as f64 / f.counter as f64;
        let weight_ratio = *weight as f64 / f.total_weight.max(1) as f64;
        Some(counter_ratio > weight_ratio)
    }

    /// Whether the job waits for its flow's other jobs.
    pub fn waits_for_flow(&self) -> bool {
        self.wait == Wait::Flow
    }

    /// The job joins its flow when it starts (fio's `flow_init_job`) and leaves it when it
    /// ends (`flow_exit_job`), taking its weight and its count with it.
    pub fn join_flow(&mut self) {
        if let Some((flow, weight)) = &self.flow {
            let mut f = flow.get();
            f.total_weight += weight;
            flow.set(f);
        }
    }

    pub fn leave_flow(&mut self) {
        if let Some((flow, weight)) = self.flow.take() {
            let mut f = flow.get();
            f.total_weight -= weight;
            f.counter -= self.flow_counter;
            flow.set(f);
        }
    }

    /// Records a request the path completed: the job reaps it when its loop does.
    pub fn complete(&mut self, req: &Request) {
        if matches!(self.source, Source::App(_)) {
            return self.complete_app(req);
        }
        self.inflight -= 1;
        if req.op == Op::Flush && self.host_loop.sync_queued && !self.durability.end_sync {
            // A queued periodic sync: the job reaps it as it reaps its writes.
            self.done.push_back(*req);
            return;
        }
        if req.op == Op::Flush {
            let d = &mut self.durability;
            d.sync_inflight = false;
            if req.status == IoStatus::Ok {
                d.acknowledged += std::mem::take(&mut d.covered_by_inflight);
                d.synced = Synced {
                    before_ns: Some(req.t.queued_ns),
                    except: std::mem::take(&mut d.inflight_except),
                };
            } else {
                d.completed_uncovered += std::mem::take(&mut d.covered_by_inflight);
            }
            if std::mem::take(&mut d.end_sync) {
                // fio does not count the job's end sync in its JSON; its run time holds it.
                self.last_complete_ns = self.last_complete_ns.max(req.t.completed_ns);
            } else {
                if d.datasync && req.t.completed_ns >= self.start_ns + self.ramp_ns {
                    self.stats.fdatasyncs += 1;
                }
                self.record(req, req.t.completed_ns);
            }
            if self.exhausted && self.allocated == 0 && !self.durability.busy() {
                self.finished = true;
            }
            return;
        }
        if self.host_loop.calls == EngineCalls::Vector {
            // The readv/writev returns: its I/Os are the engine's events.
            for mut io in self.in_vector.drain(..) {
                io.t = req.t;
                io.status = req.status;
                self.done.push_back(io);
            }
            return;
        }
        self.done.push_back(*req);
    }

    /// Reaps up to `max` completions in one call at `now` (fio's getevents).
    fn reap(&mut self, now: Ns, max: u32, notes: &mut PumpNotes) {
        let n = match self.host_loop.calls {
            EngineCalls::Batch => (max.max(1) as usize).min(self.done.len()),
            // posixaio's and vsync's getevents return all they have.
            _ => self.done.len(),
        };
        // vsync's getevents counts a call that returns nothing.
        if n == 0 && self.host_loop.calls != EngineCalls::Vector {
            return;
        }
        for _ in 0..n {
            let req = self.done.pop_front().expect("counted");
            self.allocated -= 1;
            if req.op == Op::Flush {
                if self.durability.queued_flush_reaped(&req) && now >= self.ramp_end() {
                    self.stats.fdatasyncs += 1;
                }
                self.record(&req, now);
                continue;
            }
            self.reaped_ios += 1;
            self.reaped_bytes += req.len_bytes;
            self.since_think_reaped += 1;
            let d = &mut self.durability;
            let count = d.reaped(&req);
            if count && req.status == IoStatus::Ok {
                if d.flushes() && !req.flags.contains(ReqFlags::FUA) {
                    d.completed_uncovered += 1;
                } else {
                    d.acknowledged += 1;
                }
            }
            self.record(&req, now);
            self.check_latency(&req, now);
        }
        if now >= self.ramp_end() {
            self.stats.complete_batches[batch_bucket(n as u32)] += 1;
        }
        self.check_rate_min(now);
        self.check_latency_window(now);
        if self.error != 0 {
            notes.failed = true;
        }
    }

    /// Adds a reaped request to the statistics, as completed at `done`.
    fn record(&mut self, req: &Request, done: Ns) {
        let t = &req.t;
        if done < self.ramp_end() {
            return;
        }
        let k = req.op.index();
        let op = &mut self.stats.ops[k];
        let (clat, slat) = if self.host_loop.slat {
            (done - t.dispatched_ns, Some(t.dispatched_ns - t.queued_ns))
        } else {
            (done - t.queued_ns, None)
        };
        let lat = done - t.queued_ns;
        op.ios += 1;
        op.bytes += req.len_bytes;
        if let Some(slat) = slat {
            op.slat.record(slat);
        }
        op.clat.record(clat);
        // Speed: a histogram record costs about 50 instructions per I/O, and nothing reads
        // this one without lat_percentiles.
        if self.lat_percentiles {
            op.lat.record(lat);
        } else {
            op.lat.moments.record(lat);
        }
        // The job reaps a completion when its loop next looks (fio's clat ends there): the wait
        // is the host's, so that the parts still add up to `lat`.
        let mut parts = LatencyPart::split(t);
        parts[LatencyPart::Host as usize] += done.saturating_sub(t.completed_ns);
        self.stats.split[k].record(parts);
        if req.status != qoslab_engine::IoStatus::Ok {
            self.stats.errors += 1;
        }
        // fio's epoch: the end of the ramp (the job's start without one).
        let epoch = self.start_ns + self.ramp_ns;
        let (bw_log, iops_log) = match self.logs.as_deref_mut() {
            Some(l) => l.averaged_bw_iops(),
            None => (None, None),
        };
        self.bw_sampler
            .close_until(done, &mut self.stats, bw_log, epoch);
        self.iops_sampler
            .close_until(done, &mut self.stats, iops_log, epoch);
        self.bw_sampler.amount[k] += req.len_bytes;
        self.iops_sampler.amount[k] += 1;
        if k < 3 {
            let op = &mut self.stats.ops[k];
            if self.per_io_bw {
                // fio's add_bw_sample: bytes * 1e6 / clat in ns, 0 for an instant I/O.
                op.bw_samples
                    .record((req.len_bytes * 1_000_000).checked_div(clat).unwrap_or(0));
            }
            if self.per_io_iops {
                op.iops_samples.record(1);
            }
        }
        if let Some(s) = &mut self.series {
            s.record(req.op, done, clat, req.len_bytes);
        }
        if let Some(logs) = &mut self.logs
            && let Some(io) = SampleIo::of(req)
        {
            // fio's epoch: the end of the ramp (the job's start without one).
            let epoch = self.start_ns + self.ramp_ns;
            logs.completed((done - epoch) / 1_000_000, lat, clat, io);
            // fio logs a submission latency only once the ramp is over.
            if let Some(slat) = slat
                && t.dispatched_ns >= epoch
            {
                logs.submitted(t.dispatched_ns, slat, io);
            }
        }
        self.last_complete_ns = self.last_complete_ns.max(done);
    }

    /// `max_latency` and `latency_target` against one reaped I/O's total latency.
    fn check_latency(&mut self, req: &Request, now: Ns) {
        if req.op == Op::Flush || req.op.index() > 2 {
            return;
        }
        let lat = now - req.t.queued_ns;
        if let Some(max) = self.max_latency_ns[req.op.index()]
            && lat > max
        {
            self.error = ETIMEDOUT;
        }
        // I/Os issued before the last change of depth are left out: fio quiesces them after
        // a ramp down so that they do not ramp it down again.
        if let Some(lt) = &mut self.latency_target
            && lat > lt.target_ns
            && req.t.queued_ns >= lt.window_start_ns
        {
            if lt.percentile >= 100.0 {
                if !lat_target_failed(lt) {
                    // fio quiesces after ramping down; the narrower depth does that here.
                    lt.window_start_ns = now;
                    lt.window_ios = self.reaped_ios;
                    lt.window_failed = 0;
                } else {
                    self.error = ETIMEDOUT;
                }
            } else {
                lt.window_failed += 1;
            }
        }
    }

    /// fio's `lat_target_check`, once a `latency_window` has gone by.
    fn check_latency_window(&mut self, now: Ns) {
        let Some(lt) = &mut self.latency_target else {
            return;
        };
        if now < self.start_ns + self.ramp_ns || now - lt.window_start_ns < lt.window_ns {
            return;
        }
        let ios = self.reaped_ios - lt.window_ios;
        if ios == 0 {
            return;
        }
        let success = (ios - lt.window_failed.min(ios)) as f64 / ios as f64 * 100.0;
        let depth = self.host_loop.iodepth;
        let mut reset_stats = false;
        if success >= lt.percentile {
            let qd = lt.qd;
            lt.low = lt.qd;
            if lt.qd + 1 == lt.high {
                lt.stable += 1;
                if lt.stable >= 3 {
                    lt.high += 1;
                    lt.stable = 0;
                }
            }
            if lt.high != depth {
                lt.qd = (lt.qd + lt.high) / 2;
            } else {
                lt.qd *= 2;
            }
            lt.qd = lt.qd.min(depth);
            if !lt.run && lt.qd == qd {
                if lt.end_run {
                    self.terminated = true;
                } else {
                    // One more window at this depth, with fresh statistics.
                    lt.end_run = true;
                    reset_stats = true;
                }
            }
        } else if lat_target_failed(lt) {
            self.error = ETIMEDOUT;
        }
        lt.window_start_ns = now;
        lt.window_ios = self.reaped_ios;
        lt.window_failed = 0;
        if reset_stats {
            self.reset_stats(now);
        }
    }

    /// fio's `reset_all_stats`: statistics start again at `now`.
    fn reset_stats(&mut self, now: Ns) {
        self.stats = JobStats::default();
        self.ramp_ns = now - self.start_ns;
        self.bw_sampler.start_ns = now;
        self.bw_sampler.amount = [0; 4];
        self.iops_sampler.start_ns = now;
        self.iops_sampler.amount = [0; 4];
        self.last_complete_ns = now;
    }

    /// fio's `check_min_rate`: after a 2 s settling period, each direction must move at
    /// least its `rate_min` (or `rate_iops_min`) over every `rate_cycle`.
    fn check_rate_min(&mut self, now: Ns) {
        if self.rate_min.iter().all(|m| m.0.is_none() && m.1.is_none())
            || now < self.ramp_end()
            || now - self.start_ns < 2_000_000_000
        {
            return;
        }
        for d in 0..3 {
            let (bytes_min, iops_min) = self.rate_min[d];
            let (ios, bytes) = (self.stats.ops[d].ios, self.stats.ops[d].bytes);
            if (bytes_min.is_none() && iops_min.is_none()) || bytes == 0 {
                continue;
            }
            if let Some((t0, ios0, bytes0)) = self.rate_check[d] {
                let spent_ms = (now - t0) / 1_000_000;
                if spent_ms < self.rate_cycle_ns / 1_000_000 || spent_ms == 0 {
                    continue;
                }
                let low = match (bytes_min, iops_min) {
                    (Some(min), _) => (bytes - bytes0) * 1000 / spent_ms < min,
                    (None, Some(min)) => (ios - ios0) * 1000 / spent_ms < min,
                    (None, None) => false,
                };
                if low {
                    self.error = EIO;
                    return;
                }
            }
            self.rate_check[d] = Some((now, ios, bytes));
        }
    }

    /// The simulated time after its start at which the clone stops issuing (`ramp_time` +
    /// `runtime`), if it has one.
    pub fn time_limit_ns(&self) -> Option<Ns> {
        self.end_after_ns
    }

    /// How far the clone is towards its end at `now`, from 0 to 1; `None` when nothing known
    /// in advance bounds it (a trace, whose length is only known once it is read).
    ///
    /// A clone stops at the first of its limits it reaches (`runtime` in simulated time, the
    /// amount of I/O of `size`/`io_size` x `loops` in bytes, `number_ios`), so its progress is
    /// the furthest it has gone towards any of them.
    pub fn progress(&self, now: Ns) -> Option<f64> {
        if self.finished {
            return Some(1.0);
        }
        let Source::Gen(g) = &self.source else {
            return None;
        };
        let share = |done: u64, limit: u64| {
            if limit == 0 {
                1.0
            } else {
                done as f64 / limit as f64
            }
        };
        // The generator has already counted the I/O waiting for a free slot.
        let (pending_ios, pending_bytes) = self.pending.map_or((0, 0), |io| (1, io.len_bytes));
        let extent = g.extent();
        let elapsed_ns = if self.started {
            now.saturating_sub(self.start_ns)
        } else {
            0
        };
        [
            self.end_after_ns.map(|end| share(elapsed_ns, end)),
            extent
                .io_limit_bytes
                .map(|limit| share(g.bytes_generated() - pending_bytes, limit)),
            extent
                .io_limit_ios
                .map(|limit| share(g.ios_generated() - pending_ios, limit)),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max)
        .map(|f| f.min(1.0))
    }

    pub fn into_result(mut self) -> JobResult {
        self.stats.error = self.error;
        // fio reports the depth a latency search settled at, else `iodepth` as written.
        self.stats.latency_depth = self.latency_target.as_ref().map_or(0, |lt| lt.qd);
        self.stats.steadystate = self.steadystate.map(|s| s.report);
        JobResult {
            name: self.name,
            def: self.def,
            clone: self.clone,
            group: self.report_group,
            stats: self.stats,
            issued: self.issued,
        }
    }

    /// The job's results so far, its books closed as at its last completion (fio's
    /// `--status-interval` dump), the run going on.
    pub fn snapshot(&self) -> JobResult {
        let mut stats = self.stats.clone();
        let end = self.last_complete_ns;
        let epoch = self.ramp_end();
        // A snapshot writes no log lines: the run writes them.
        self.bw_sampler
            .clone()
            .close_until(end, &mut stats, None, epoch);
        self.iops_sampler
            .clone()
            .close_until(end, &mut stats, None, epoch);
        stats.runtime_ns = end.saturating_sub(self.ramp_end());
        stats.error = self.error;
        stats.latency_depth = self.latency_target.as_ref().map_or(0, |lt| lt.qd);
        stats.steadystate = self.steadystate.as_ref().map(|s| s.report.clone());
        JobResult {
            name: self.name.clone(),
            def: self.def,
            clone: self.clone,
            group: self.report_group,
            stats,
            issued: self.issued,
        }
    }

    /// Closes the job's books at the end of the run.
    pub fn finish_stats(&mut self) {
        let end = self.last_complete_ns;
        let epoch = self.ramp_end();
        let (bw_log, iops_log) = match self.logs.as_deref_mut() {
            Some(l) => l.averaged_bw_iops(),
            None => (None, None),
        };
        // fio's helper thread samples a running job only: a window that closes as the job ends
        // is not sampled (measured: rate_iops=10 or 3, time_based, 1 s: one 500 ms sample).
        // Windows up to the last completion were closed by it (`record`).
        let sampled_to = end.saturating_sub(1);
        self.bw_sampler
            .close_until(sampled_to, &mut self.stats, bw_log, epoch);
        self.iops_sampler
            .close_until(sampled_to, &mut self.stats, iops_log, epoch);
        self.stats.runtime_ns = end.saturating_sub(self.ramp_end());
        if let Some(s) = &mut self.series {
            s.finish(end);
        }
        if let Some(logs) = &mut self.logs {
            logs.finish(epoch, end.saturating_sub(epoch) / 1_000_000);
        }
    }
}

/// The totals of one flow (fio's `struct fio_flow`): I/Os counted (from 1) and the weights of
/// its running jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowCounts {
    pub counter: u64,
    pub total_weight: u64,
}

impl Default for FlowCounts {
    fn default() -> Self {
        FlowCounts {
            counter: 1,
            total_weight: 0,
        }
    }
}

/// fio's errno values a job fails with.
pub const EIO: i32 = 5;
pub const ETIMEDOUT: i32 = 110;

/// fio's `__lat_target_failed`: ramp the depth down; true when it is already 1 (the target
/// cannot be met).
fn lat_target_failed(lt: &mut LatencyTarget) -> bool {
    if lt.qd == 1 {
        return true;
    }
    lt.high = lt.qd;
    if lt.qd == lt.low {
        lt.low -= 1;
    }
    lt.qd = (lt.qd + lt.low) / 2;
    lt.stable = 0;
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_and_batch_buckets_match_fios_labels() {
        assert_eq!(depth_level_bucket(1), 0);
        assert_eq!(depth_level_bucket(32), 5);
        assert_eq!(depth_level_bucket(64), 6);
        assert_eq!(batch_bucket(1), 1);
        assert_eq!(batch_bucket(4), 1);
        assert_eq!(batch_bucket(5), 2);
        assert_eq!(batch_bucket(100), 6);
    }

    #[test]
    fn idle_bandwidth_windows_skipped_at_once_leave_no_sample_as_when_walked() {
        // The slow path: fio's one sample per window a direction moved in, none in an idle one.
        // Its log: a line per sample at the window's end, in ms since the epoch (7 ns).
        fn walk(s: &mut Sampler, t: Ns, stats: &mut JobStats, log: &mut String) {
            while t >= s.start_ns + s.window_ns {
                for k in 0..4 {
                    if s.active[k] && s.amount[k] > 0 {
                        let secs = s.window_ns as f64 / 1e9;
                        let op = &mut stats.ops[k];
                        let value = if s.bw {
                            (s.amount[k] as f64 / 1024.0 / secs).round() as u64
                        } else {
                            (s.amount[k] as f64 / secs).round() as u64
                        };
                        if s.bw {
                            op.bw_samples.record(value);
                        } else {
                            op.iops_samples.record(value);
                        }
                        let end_ms = (s.start_ns + s.window_ns - 7) / 1_000_000;
                        log.push_str(&format!("{end_ms}, {value}, {k}, 0, 0\n"));
                    }
                    s.amount[k] = 0;
                }
                s.start_ns += s.window_ns;
            }
        }
        for bw in [true, false] {
            let fresh = || {
                let mut s = Sampler::new(BW_WINDOW_NS, [true, true, false, false], bw);
                s.start_ns = 7;
                s
            };
            let (mut fast, mut slow) = (fresh(), fresh());
            let (mut fast_stats, mut slow_stats) = (JobStats::default(), JobStats::default());
            let mut fast_log = FioLog::new("x".into(), 500, false, false);
            let mut slow_log = String::new();
            let mut t = 7;
            for (i, gap) in [
                3u64,
                499_999_999,
                500_000_000,
                1,
                7_300_000_001,
                12,
                40_000_000_000,
            ]
            .into_iter()
            .enumerate()
            {
                t += gap;
                fast.close_until(t, &mut fast_stats, Some(&mut fast_log), 7);
                walk(&mut slow, t, &mut slow_stats, &mut slow_log);
                for s in [&mut fast, &mut slow] {
                    s.amount[i % 2] += if bw { 4096 * (i as u64 + 1) } else { 1 };
                }
                assert_eq!(fast.start_ns, slow.start_ns);
            }
            for k in 0..4 {
                assert_eq!(fast_stats.ops[k].bw_samples, slow_stats.ops[k].bw_samples);
                assert_eq!(
                    fast_stats.ops[k].iops_samples,
                    slow_stats.ops[k].iops_samples
                );
            }
            let samples = if bw {
                &slow_stats.ops[0].bw_samples
            } else {
                &slow_stats.ops[0].iops_samples
            };
            // Read moved in three of the 96 windows closed, write in three; the idle ones
            // leave nothing.
            assert_eq!(samples.n, 3);
            assert_eq!(fast_log.text, slow_log);
        }
    }
}
