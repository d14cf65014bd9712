//! Per-interval time series, like fio's `log_avg_msec` logs: for each interval, the I/Os that
//! completed in it, their bytes, and their mean, 99th and 99.99th-percentile and largest
//! latency; and the 99th and 99.99th-percentile and largest latency from the host driver's
//! dispatch (its doorbell) to completion, which leaves out the time a request spent in the
//! host before it went to the device (the PLM study's metric of device access).
//!
//! Completions arrive in time order, so an interval is closed (and its rows emitted) as soon
//! as a completion lands beyond it; memory holds one interval per op, never the whole run.

use hdrhistogram::Histogram;

use crate::request::Op;
use crate::time::Ns;

/// One row of a time series: one op of one job over one interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalRow {
    pub start_ns: Ns,
    pub interval_ns: Ns,
    pub op: Op,
    pub ios: u64,
    pub bytes: u64,
    pub lat_mean_ns: f64,
    pub lat_p99_ns: u64,
    pub lat_p9999_ns: u64,
    pub lat_max_ns: u64,
    /// The same from the host driver's dispatch to completion.
    pub dispatch_lat_p99_ns: u64,
    pub dispatch_lat_p9999_ns: u64,
    pub dispatch_lat_max_ns: u64,
}

impl IntervalRow {
    pub fn iops(&self) -> f64 {
        self.ios as f64 * 1e9 / self.interval_ns as f64
    }
    pub fn bytes_per_s(&self) -> f64 {
        self.bytes as f64 * 1e9 / self.interval_ns as f64
    }
}

/// One latency's distribution over an interval.
#[derive(Clone, Debug)]
struct Tail {
    min: u64,
    max: u64,
    hist: Histogram<u64>,
}

impl Tail {
    fn new() -> Self {
        // Two significant digits: the interval p99 is an indicator, 1 % is plenty, and the
        // histogram is reset every interval.
        let mut hist = Histogram::new(2).expect("valid precision");
        hist.auto(true);
        Tail {
            min: u64::MAX,
            max: 0,
            hist,
        }
    }

    fn record(&mut self, ns: u64) {
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        self.hist.record(ns).expect("auto-resizing");
    }

    /// The quantile `q` within the interval's own extremes (0 without an I/O).
    fn quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q).clamp(self.min, self.max)
        }
    }

    fn reset(&mut self) {
        self.min = u64::MAX;
        self.max = 0;
        self.hist.reset();
    }
}

#[derive(Clone, Debug)]
struct Acc {
    ios: u64,
    bytes: u64,
    lat_sum: u128,
    lat: Tail,
    dispatch: Tail,
}

impl Acc {
    fn new() -> Self {
        Acc {
            ios: 0,
            bytes: 0,
            lat_sum: 0,
            lat: Tail::new(),
            dispatch: Tail::new(),
        }
    }
}

/// The time series of one job.
#[derive(Clone, Debug)]
pub struct IntervalSeries {
    interval_ns: Ns,
    /// Start of the open interval.
    start_ns: Ns,
    /// Ops this job issues (each gets a row per interval, zero if idle).
    ops: Vec<Op>,
    acc: Vec<Acc>,
    /// Closed rows not yet taken by the caller.
    rows: Vec<IntervalRow>,
}

impl IntervalSeries {
    /// A series of `interval_ns` intervals starting at `start_ns`, with rows for `ops`.
    pub fn new(interval_ns: Ns, start_ns: Ns, ops: &[Op]) -> Self {
        assert!(interval_ns > 0, "an interval must be longer than 0 ns");
        IntervalSeries {
            interval_ns,
            start_ns,
            ops: ops.to_vec(),
            acc: ops.iter().map(|_| Acc::new()).collect(),
            rows: Vec::new(),
        }
    }

    fn close_until(&mut self, t: Ns) {
        while t >= self.start_ns + self.interval_ns {
            for (k, &op) in self.ops.iter().enumerate() {
                let a = &mut self.acc[k];
                self.rows.push(IntervalRow {
                    start_ns: self.start_ns,
                    interval_ns: self.interval_ns,
                    op,
                    ios: a.ios,
                    bytes: a.bytes,
                    lat_mean_ns: if a.ios == 0 {
                        0.0
                    } else {
                        a.lat_sum as f64 / a.ios as f64
                    },
                    lat_p99_ns: a.lat.quantile(0.99),
                    lat_p9999_ns: a.lat.quantile(0.9999),
                    lat_max_ns: a.lat.max,
                    dispatch_lat_p99_ns: a.dispatch.quantile(0.99),
                    dispatch_lat_p9999_ns: a.dispatch.quantile(0.9999),
                    dispatch_lat_max_ns: a.dispatch.max,
                });
                a.ios = 0;
                a.bytes = 0;
                a.lat_sum = 0;
                a.lat.reset();
                a.dispatch.reset();
            }
            self.start_ns += self.interval_ns;
        }
    }

    /// Records an I/O of `op` completed at `at_ns` after `lat_ns`, `dispatch_lat_ns` of it
    /// after the host driver dispatched it.
    pub fn record(&mut self, op: Op, at_ns: Ns, lat_ns: Ns, dispatch_lat_ns: Ns, bytes: u64) {
        if at_ns < self.start_ns {
            return;
        }
        self.close_until(at_ns);
        let Some(k) = self.ops.iter().position(|&o| o == op) else {
            return;
        };
        let a = &mut self.acc[k];
        a.ios += 1;
        a.bytes += bytes;
        a.lat_sum += u128::from(lat_ns);
        a.lat.record(lat_ns);
        a.dispatch.record(dispatch_lat_ns);
    }

    /// Closes every interval up to `end_ns` (the job's last completion), the last one as a
    /// partial interval of its own length if any I/O fell into it.
    pub fn finish(&mut self, end_ns: Ns) {
        self.close_until(end_ns);
        if self.acc.iter().any(|a| a.ios > 0) {
            let full = self.interval_ns;
            self.interval_ns = (end_ns - self.start_ns).max(1);
            self.close_until(self.start_ns + self.interval_ns);
            self.interval_ns = full;
        }
    }

    /// Takes the rows closed so far.
    pub fn drain(&mut self) -> std::vec::Drain<'_, IntervalRow> {
        self.rows.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_fall_into_their_intervals_and_idle_intervals_get_zero_rows() {
        let mut s = IntervalSeries::new(1000, 0, &[Op::Read]);
        s.record(Op::Read, 100, 50, 40, 4096);
        s.record(Op::Read, 900, 150, 20, 4096);
        s.record(Op::Read, 2500, 300, 300, 4096);
        s.finish(2500);
        let rows: Vec<_> = s.drain().collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2].interval_ns, 500);
        assert_eq!((rows[0].start_ns, rows[0].ios, rows[0].bytes), (0, 2, 8192));
        assert_eq!(rows[0].lat_mean_ns, 100.0);
        assert_eq!(rows[0].iops(), 2e6);
        assert_eq!((rows[1].start_ns, rows[1].ios), (1000, 0));
        assert_eq!(
            (rows[2].start_ns, rows[2].ios, rows[2].lat_p99_ns),
            (2000, 1, 300)
        );
        // From dispatch: the first interval's two reads spent 10 and 130 ns before it.
        assert_eq!(
            (rows[0].dispatch_lat_p99_ns, rows[0].dispatch_lat_max_ns),
            (40, 40)
        );
        assert_eq!((rows[0].lat_p99_ns, rows[0].lat_max_ns), (150, 150));
        assert_eq!(
            (rows[1].dispatch_lat_p9999_ns, rows[1].dispatch_lat_max_ns),
            (0, 0)
        );
    }
}
