//! What a job records: per-op statistics (`OpStats`), a clone's totals (`JobStats`), the
//! split of each latency into its parts, fio's depth and batch buckets, the bandwidth and IOPS
//! samplers, and what remains of a clone after the run (`JobResult`).

use super::*;

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
    pub(super) sum_ns: [u128; 4],
}

impl SplitSums {
    #[inline]
    pub(super) fn record(&mut self, parts: [Ns; 4]) {
        self.n += 1;
        for (sum, part) in self.sum_ns.iter_mut().zip(parts) {
            *sum += u128::from(part);
        }
    }

    pub(super) fn merge(&mut self, o: &SplitSums) {
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
pub(super) struct Sampler {
    pub(super) window_ns: Ns,
    pub(super) start_ns: Ns,
    /// Bytes (bandwidth) or I/Os (IOPS) per direction in the current window.
    pub(super) amount: [u64; 4],
    pub(super) active: [bool; 4],
    pub(super) bw: bool,
}

pub const BW_WINDOW_NS: Ns = 500_000_000;

impl Sampler {
    pub(super) fn new(window_ns: Ns, active: [bool; 4], bw: bool) -> Self {
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
    pub(super) fn close_until(
        &mut self,
        t: Ns,
        stats: &mut JobStats,
        log: Option<&mut FioLog>,
        epoch_ns: Ns,
    ) {
        if t >= self.start_ns + self.window_ns {
            self.close_windows(t, stats, log, epoch_ns);
        }
    }

    #[inline(never)]
    pub(super) fn close_windows(
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
