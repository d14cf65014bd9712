//! Jobs at the top of the path: each clone of a fio job (or a trace replay) issues I/Os as fio
//! would (queue depth, batches, rate caps, think time, ramp and run time) and records what
//! completes.

use std::io::BufRead;

use qoslab_engine::time::MAX_TIME_TEXT;
use qoslab_engine::{IntervalSeries, IoStatus, LatencyHist, Moments, Ns, Op, ReqFlags, Request};
use qoslab_workload::WorkloadError;
use qoslab_workload::generator::{GenIo, JobGen};
use qoslab_workload::trace::{ReplaySpeed, TraceReader};

/// Where a job's I/Os come from.
pub enum Source {
    Gen(Box<JobGen>),
    Trace(Box<TraceSource>),
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
                    think_before_ns: 0,
                    drain_before: false,
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
}

impl OpStats {
    pub fn merge(&mut self, o: &OpStats) {
        self.ios += o.ios;
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
    pub submit_batches: [u64; DEPTH_BUCKETS],
    pub complete_batches: [u64; DEPTH_BUCKETS],
    pub errors: u64,
    /// Simulated time the job ran after its ramp (ns).
    pub runtime_ns: Ns,
    /// Per op, the end-to-end latency split into its [`LatencyPart`]s.
    pub split: [SplitSums; 4],
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
    /// id), and handling the completion (interrupt to completed).
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
        self.errors += o.errors;
        self.runtime_ns = self.runtime_ns.max(o.runtime_ns);
    }
}

/// Bandwidth sampling over fixed windows, as fio's `bw_avg_time` (500 ms).
#[derive(Clone, Debug)]
struct Sampler {
    window_ns: Ns,
    start_ns: Ns,
    ios: [u64; 4],
    bytes: [u64; 4],
    active: [bool; 4],
}

pub const BW_WINDOW_NS: Ns = 500_000_000;

impl Sampler {
    /// Closes the windows that end by `t` (one every half second: most calls close none).
    #[inline(always)]
    fn close_until(&mut self, t: Ns, stats: &mut JobStats) {
        if t >= self.start_ns + self.window_ns {
            self.close_windows(t, stats);
        }
    }

    #[inline(never)]
    fn close_windows(&mut self, t: Ns, stats: &mut JobStats) {
        // The open window, with what completed in it.
        let secs = self.window_ns as f64 / 1e9;
        for k in 0..4 {
            if self.active[k] {
                let op = &mut stats.ops[k];
                op.bw_samples
                    .record((self.bytes[k] as f64 / 1024.0 / secs).round() as u64);
                op.iops_samples
                    .record((self.ios[k] as f64 / secs).round() as u64);
            }
            self.ios[k] = 0;
            self.bytes[k] = 0;
        }
        self.start_ns += self.window_ns;
        // The idle windows between it and `t` each sample 0, all at once: an idle stretch of
        // simulated time costs nothing (the moments are exact integers, so this equals a
        // sample per window).
        let idle = t.saturating_sub(self.start_ns) / self.window_ns;
        if idle > 0 {
            for k in 0..4 {
                if self.active[k] {
                    stats.ops[k].bw_samples.record_n(0, idle);
                    stats.ops[k].iops_samples.record_n(0, idle);
                }
            }
            self.start_ns += idle * self.window_ns;
        }
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

/// One running job clone.
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
    /// The host the job runs on, and its CPU there.
    pub host: u16,
    pub core: u16,
    source: Source,
    iodepth: u32,
    batch: u32,
    pub start_ns: Ns,
    ramp_ns: Ns,
    /// End of the run time after the start (None: until the I/O amount is done).
    end_after_ns: Option<Ns>,
    pub inflight: u32,
    pending: Option<GenIo>,
    think_until: Option<Ns>,
    /// Earliest time a wake-up is scheduled for (to avoid duplicates).
    pub wake_at: Option<Ns>,
    exhausted: bool,
    pub started: bool,
    pub finished: bool,
    pub stats: JobStats,
    pub series: Option<IntervalSeries>,
    /// Interval of the time series, if one is kept.
    series_interval_ns: Option<Ns>,
    issues: [bool; 4],
    sampler: Sampler,
    pub last_complete_ns: Ns,
    last_complete_batch: (Ns, u32),
    pub issued: u64,
    pub durability: Durability,
    /// Some job of the run asks for percentiles of the total latency (fio's
    /// `lat_percentiles=1`): only then is its histogram kept.
    pub lat_percentiles: bool,
    /// Whether writes are synchronous (`direct=1`): Linux marks an O_DIRECT write REQ_SYNC
    /// (block/fops.c, `dio_bio_write_op`), which kyber and bfq treat apart from the page
    /// cache's asynchronous writeback. Buffered writes (`direct=0`, fio's default) stay
    /// asynchronous; the simulator has no page cache, so only their flag differs.
    pub sync_writes: bool,
    /// The job's writes and flushes form an ordered stream (its `ordering=`, or the block
    /// layer's): they carry `ReqFlags::ORDERED`.
    pub ordered: bool,
}

/// A job's cache-flush and FUA options (fio's `fsync`/`fdatasync`, `end_fsync`/
/// `fsync_on_close`, `write_barrier`, `fua`) and how far its writes are durable.
///
/// A flush is issued as fio's sync engines do it: the job waits for its writes in flight,
/// issues the FLUSH and waits for it. A write is *acknowledged* to the application when the
/// job can rely on it: at its completion in a job that never flushes, or when written with FUA;
/// at the completion of the flush that covers it in a job that flushes.
#[derive(Clone, Debug, Default)]
pub struct Durability {
    pub fsync_every: u64,
    pub end_fsync: bool,
    pub barrier_every: u64,
    pub fua: bool,
    writes_issued: u64,
    since_sync: u64,
    sync_due: bool,
    sync_inflight: bool,
    end_sync_done: bool,
    /// Writes completed since the last flush was issued, and those the flush in flight covers.
    completed_uncovered: u64,
    covered_by_inflight: u64,
    /// Writes acknowledged to the application so far.
    pub acknowledged: u64,
    /// The issue time of the last flush that completed: the job's writes queued before it are
    /// acknowledged.
    pub synced_before_ns: Option<Ns>,
}

impl Durability {
    /// A job's options: flush every `fsync_every` writes (0: never), at its end, make every
    /// `barrier_every`-th write a barrier (0: never), write with FUA.
    pub fn new(fsync_every: u64, end_fsync: bool, barrier_every: u64, fua: bool) -> Self {
        Durability {
            fsync_every,
            end_fsync,
            barrier_every,
            fua,
            ..Durability::default()
        }
    }

    /// Whether the job relies on flushes (rather than on completions) for durability.
    pub fn flushes(&self) -> bool {
        self.fsync_every > 0 || self.end_fsync
    }

    fn busy(&self) -> bool {
        self.sync_due || self.sync_inflight
    }

    /// The flags of the next write, counting it.
    fn write_flags(&mut self) -> ReqFlags {
        self.writes_issued += 1;
        let mut flags = ReqFlags::empty();
        if self.fua {
            flags |= ReqFlags::FUA;
        }
        if self.barrier_every > 0 && self.writes_issued.is_multiple_of(self.barrier_every) {
            flags |= ReqFlags::PREFLUSH | ReqFlags::FUA;
        }
        if self.fsync_every > 0 {
            self.since_sync += 1;
            if self.since_sync >= self.fsync_every {
                self.since_sync = 0;
                self.sync_due = true;
            }
        }
        flags
    }

    /// The job has issued its last: a final flush is due if it asked for one.
    fn at_end(&mut self) {
        if self.end_fsync && !self.end_sync_done {
            self.end_sync_done = true;
            self.sync_due = true;
        }
    }
}

/// What the job asks of the simulator after it ran.
pub enum Pump {
    /// Wake the job at this time.
    WakeAt(Ns),
    /// Nothing: it waits for completions (or is done).
    Wait,
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
        iodepth: u32,
        batch: u32,
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
            host: 0,
            core,
            source,
            iodepth: iodepth.max(1),
            batch: batch.clamp(1, iodepth.max(1)),
            start_ns: 0,
            ramp_ns,
            end_after_ns,
            inflight: 0,
            pending: None,
            think_until: None,
            wake_at: None,
            exhausted: false,
            started: false,
            finished: false,
            stats: JobStats::default(),
            series: None,
            series_interval_ns,
            issues,
            sampler: Sampler {
                window_ns: BW_WINDOW_NS,
                start_ns: 0,
                ios: [0; 4],
                bytes: [0; 4],
                active: issues,
            },
            last_complete_ns: 0,
            last_complete_batch: (Ns::MAX, 0),
            issued: 0,
            durability: Durability::default(),
            lat_percentiles: false,
            sync_writes: false,
            ordered: false,
        }
    }

    pub fn start(&mut self, now: Ns) {
        self.started = true;
        self.start_ns = now;
        self.sampler.start_ns = now + self.ramp_ns;
        if let Some(interval) = self.series_interval_ns {
            let ops: Vec<Op> = Op::ALL
                .into_iter()
                .filter(|op| self.issues[op.index()])
                .collect();
            self.series = Some(IntervalSeries::new(interval, now + self.ramp_ns, &ops));
        }
        self.last_complete_ns = now + self.ramp_ns;
    }

    fn ramp_end(&self) -> Ns {
        self.start_ns + self.ramp_ns
    }

    /// Whether the `submitted`th I/O of a pump starts an io_submit batch (every one does
    /// without iodepth_batch_submit: no division then, as this runs for every I/O).
    #[inline]
    fn batch_starts(&self, submitted: u32) -> bool {
        self.batch == 1 || submitted.is_multiple_of(self.batch)
    }

    /// Issues what the job may issue now, through `submit`; says when to wake it next.
    /// `submit` answers false when the submission call sleeps (the block layer made the job
    /// wait for a tag): the job then stops issuing until it is pumped again.
    pub fn pump(
        &mut self,
        now: Ns,
        mut submit: impl FnMut(Request) -> bool,
    ) -> Result<Pump, WorkloadError> {
        let mut submitted = 0u32;
        let result = loop {
            if self.durability.busy() {
                // A flush waits for the writes in flight, and the job for the flush.
                if self.durability.sync_due && self.inflight == 0 {
                    let d = &mut self.durability;
                    d.sync_due = false;
                    d.sync_inflight = true;
                    d.covered_by_inflight = std::mem::take(&mut d.completed_uncovered);
                    self.inflight += 1;
                    let mut req = Request::new(Op::Flush, 0, 0, 0, now);
                    req.host = self.host;
                    req.core = self.core;
                    if self.ordered {
                        req.flags |= ReqFlags::ORDERED;
                    }
                    submit(req);
                }
                break Pump::Wait;
            }
            if self.exhausted {
                break Pump::Wait;
            }
            if let Some(end) = self.end_after_ns
                && now >= self.start_ns + end
            {
                self.exhausted = true;
                self.durability.at_end();
                continue;
            }
            if self.pending.is_none() {
                self.pending = self.source.next()?;
                if self.pending.is_none() {
                    self.exhausted = true;
                    self.durability.at_end();
                    continue;
                }
            }
            let io = self.pending.expect("just filled");
            if io.think_before_ns > 0 {
                match self.think_until {
                    None => {
                        if io.drain_before && self.inflight > 0 {
                            break Pump::Wait;
                        }
                        let until = now + io.think_before_ns;
                        self.think_until = Some(until);
                        break Pump::WakeAt(until);
                    }
                    Some(until) if now < until => break Pump::WakeAt(until),
                    Some(_) => {}
                }
            }
            let due = self.start_ns + io.not_before_ns;
            if due > now {
                break Pump::WakeAt(due);
            }
            // iodepth_batch_submit: a batch starts only when it fits whole.
            let free = self.iodepth - self.inflight;
            if free == 0 || (self.batch_starts(submitted) && free < self.batch) {
                break Pump::Wait;
            }
            self.pending = None;
            self.think_until = None;
            self.inflight += 1;
            self.issued += 1;
            submitted += 1;
            if self.batch_starts(submitted) {
                // As fio does, a committed batch counts at the depth it leaves the queue at.
                self.stats.iodepth_level[depth_level_bucket(self.inflight)] += self.batch as u64;
            }
            let mut req = Request::new(io.op, io.offset_bytes, io.len_bytes, 0, now);
            if !self.batch_starts(submitted) {
                // The rest of this io_submit call follows at once.
                req.flags |= qoslab_engine::ReqFlags::BATCH_MORE;
            }
            req.prio = io.prio;
            if io.op == Op::Write {
                req.flags |= self.durability.write_flags();
                if self.sync_writes {
                    req.flags |= ReqFlags::SYNC;
                }
                if self.ordered {
                    req.flags |= ReqFlags::ORDERED;
                }
            }
            req.host = self.host;
            req.core = self.core;
            if !submit(req) {
                break Pump::Wait;
            }
        };
        let partial = if self.batch == 1 {
            0
        } else {
            submitted % self.batch
        };
        if partial > 0 {
            self.stats.iodepth_level[depth_level_bucket(self.inflight)] += partial as u64;
        }
        if submitted > 0 {
            // One submit call per batch, as fio counts them.
            let mut left = submitted;
            while left > 0 {
                let n = left.min(self.batch);
                self.stats.submit_batches[batch_bucket(n)] += 1;
                left -= n;
            }
        }
        if self.exhausted && self.inflight == 0 && !self.durability.busy() {
            self.finished = true;
        }
        Ok(result)
    }

    /// Records a completed request of this job.
    pub fn complete(&mut self, req: &Request) {
        self.inflight -= 1;
        let d = &mut self.durability;
        let ok = req.status == IoStatus::Ok;
        match req.op {
            Op::Flush => {
                d.sync_inflight = false;
                if ok {
                    d.acknowledged += std::mem::take(&mut d.covered_by_inflight);
                    d.synced_before_ns = Some(req.t.queued_ns);
                } else {
                    d.completed_uncovered += std::mem::take(&mut d.covered_by_inflight);
                }
            }
            Op::Write if ok => {
                if d.flushes() && !req.flags.contains(ReqFlags::FUA) {
                    d.completed_uncovered += 1;
                } else {
                    d.acknowledged += 1;
                }
            }
            _ => {}
        }
        let t = &req.t;
        let done = t.completed_ns;
        if done >= self.ramp_end() {
            let k = req.op.index();
            let op = &mut self.stats.ops[k];
            let clat = done - t.dispatched_ns;
            let lat = done - t.queued_ns;
            op.ios += 1;
            op.bytes += req.len_bytes;
            op.slat.record(t.dispatched_ns - t.queued_ns);
            op.clat.record(clat);
            // Speed: a histogram record costs about 50 instructions per I/O, and nothing reads
            // this one without lat_percentiles.
            if self.lat_percentiles {
                op.lat.record(lat);
            } else {
                op.lat.moments.record(lat);
            }
            self.stats.split[k].record(LatencyPart::split(t));
            if req.status != qoslab_engine::IoStatus::Ok {
                self.stats.errors += 1;
            }
            self.sampler.close_until(done, &mut self.stats);
            self.sampler.ios[k] += 1;
            self.sampler.bytes[k] += req.len_bytes;
            if let Some(s) = &mut self.series {
                s.record(req.op, done, clat, req.len_bytes);
            }
            if self.last_complete_batch.0 == done {
                self.last_complete_batch.1 += 1;
            } else {
                if self.last_complete_batch.1 > 0 {
                    self.stats.complete_batches[batch_bucket(self.last_complete_batch.1)] += 1;
                }
                self.last_complete_batch = (done, 1);
            }
            self.last_complete_ns = self.last_complete_ns.max(done);
        }
        if self.exhausted && self.inflight == 0 && !self.durability.busy() {
            self.finished = true;
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

    pub fn into_result(self) -> JobResult {
        JobResult {
            name: self.name,
            def: self.def,
            clone: self.clone,
            group: self.report_group,
            stats: self.stats,
            issued: self.issued,
        }
    }

    /// Closes the job's books at the end of the run.
    pub fn finish_stats(&mut self) {
        if self.last_complete_batch.1 > 0 {
            self.stats.complete_batches[batch_bucket(self.last_complete_batch.1)] += 1;
            self.last_complete_batch.1 = 0;
        }
        let end = self.last_complete_ns;
        self.sampler.close_until(end, &mut self.stats);
        self.stats.runtime_ns = end.saturating_sub(self.ramp_end());
        if let Some(s) = &mut self.series {
            s.finish(end);
        }
    }
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
    fn idle_bandwidth_windows_skipped_at_once_equal_one_sample_each() {
        // The slow path: fio's one sample per window, zero for an idle one.
        fn walk(s: &mut Sampler, t: Ns, stats: &mut JobStats) {
            while t >= s.start_ns + s.window_ns {
                for k in 0..4 {
                    if s.active[k] {
                        let secs = s.window_ns as f64 / 1e9;
                        let op = &mut stats.ops[k];
                        op.bw_samples
                            .record((s.bytes[k] as f64 / 1024.0 / secs).round() as u64);
                        op.iops_samples
                            .record((s.ios[k] as f64 / secs).round() as u64);
                    }
                    s.ios[k] = 0;
                    s.bytes[k] = 0;
                }
                s.start_ns += s.window_ns;
            }
        }
        let fresh = || Sampler {
            window_ns: BW_WINDOW_NS,
            start_ns: 7,
            ios: [0; 4],
            bytes: [0; 4],
            active: [true, true, false, false],
        };
        let (mut fast, mut slow) = (fresh(), fresh());
        let (mut fast_stats, mut slow_stats) = (JobStats::default(), JobStats::default());
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
            fast.close_until(t, &mut fast_stats);
            walk(&mut slow, t, &mut slow_stats);
            for s in [&mut fast, &mut slow] {
                s.ios[i % 2] += 1;
                s.bytes[i % 2] += 4096 * (i as u64 + 1);
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
        assert!(slow_stats.ops[0].bw_samples.n > 90);
    }
}
