//! The checks that stop or steer a job while it runs: fio's `latency_target` search
//! (`LatencyTarget`), `max_latency`, `rate_min` and the steady-state check, and the errno
//! values a job fails with.

use super::*;

/// fio's `latency_target` search for the deepest queue that meets the target (io_u.c).
#[derive(Clone, Debug)]
pub struct LatencyTarget {
    pub target_ns: Ns,
    pub window_ns: Ns,
    pub percentile: f64,
    pub run: bool,
    pub(super) qd: u32,
    pub(super) low: u32,
    pub(super) high: u32,
    pub(super) stable: u32,
    pub(super) end_run: bool,
    pub(super) window_start_ns: Ns,
    pub(super) window_ios: u64,
    pub(super) window_failed: u64,
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
    pub(super) samples: std::collections::VecDeque<(u64, u64)>,
    pub(super) prev: (u64, u64),
    pub(super) prev_ns: Ns,
    pub(super) ramp_over: bool,
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

/// fio's errno values a job fails with.
pub const EIO: i32 = 5;
pub const ETIMEDOUT: i32 = 110;

/// fio's `__lat_target_failed`: ramp the depth down; true when it is already 1 (the target
/// cannot be met).
pub(super) fn lat_target_failed(lt: &mut LatencyTarget) -> bool {
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

impl JobRun {
    /// `max_latency` and `latency_target` against one reaped I/O's total latency.
    pub(super) fn check_latency(&mut self, req: &Request, now: Ns) {
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
    pub(super) fn check_latency_window(&mut self, now: Ns) {
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
    /// fio's `check_min_rate`: after a 2 s settling period, each direction must move at
    /// least its `rate_min` (or `rate_iops_min`) over every `rate_cycle`.
    pub(super) fn check_rate_min(&mut self, now: Ns) {
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
}
