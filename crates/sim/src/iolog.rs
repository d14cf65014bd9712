//! fio's latency, bandwidth and IOPS logs of one job clone (`write_lat_log`, `write_bw_log`,
//! `write_iops_log`), line for line as fio 3.33 writes them (its iolog.c and stat.c).
//!
//! A line is `time, value, ddir, bs, prio`, or `time, value, ddir, bs, offset, prio` with
//! `log_offset=1`: the time in ms since the job's epoch (its start, or the end of its
//! `ramp_time`) when the sample was taken, truncated; the value (latencies in ns, bandwidth in
//! fio's per-I/O unit `bytes * 1e6 / clat_ns`, IOPS 1 per I/O); the data direction (0 read,
//! 1 write, 2 trim); the I/O's block size and offset; and its priority: with `log_prio=1` the
//! ioprio value as `0x%04x` (class << 13 | level), otherwise 1 for the real-time class and 0
//! for any other.
//!
//! Without `log_avg_msec` every I/O gets a line (fio's "per unit" log). With it a latency log
//! gets one line per direction and window: the window of a direction closes at the first
//! sample at least `log_avg_msec` after the window's start, that sample included; its line is
//! the mean rounded (`mean + 0.5` truncated), at the closing sample's time, with block size,
//! offset and priority 0; the next window starts at that time rounded down to a multiple of
//! `log_avg_msec`; at the job's end the open windows are written at the end's time. The
//! averaged bandwidth and IOPS logs hold fio's periodic samples instead, a line per direction
//! every `log_avg_msec` (fio's `bwavgtime`/`iopsavgtime` when the job gives them), at the end
//! of the sample's window: bandwidth in KiB/s, IOPS in I/Os per second, the JSON's samples.

use std::fmt::Write;

use qoslab_engine::{IoPrio, IoPrioClass, Op, Request, time::Ns};

/// fio's running mean of one window (its `add_stat_sample`, Welford's update), so that a
/// window's line is the number fio computes from the same samples.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    samples: u64,
    mean: f64,
}

impl Window {
    fn add(&mut self, value: u64) {
        let delta = value as f64 - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.samples as f64 + 1.0);
        }
        self.samples += 1;
    }
}

/// One of fio's logs: its text so far and, when averaged, the open windows.
#[derive(Clone, Debug)]
pub struct FioLog {
    /// The file name (`PREFIX_KIND.N.log`).
    pub name: String,
    /// `log_avg_msec`; 0: a line per I/O.
    avg_ms: u64,
    offset: bool,
    prio: bool,
    windows: [Window; 3],
    /// Start of each direction's open window, in ms since the epoch (fio's `avg_last`).
    avg_last: [u64; 3],
    pub text: String,
}

/// A sample's I/O: direction (0, 1, 2), block size, offset and priority.
#[derive(Clone, Copy, Debug)]
pub struct SampleIo {
    pub ddir: usize,
    pub bs: u64,
    pub offset: u64,
    pub prio: IoPrio,
}

impl SampleIo {
    /// The I/O of a read, write or trim request; `None` for any other (fio logs no syncs).
    pub fn of(req: &Request) -> Option<Self> {
        matches!(req.op, Op::Read | Op::Write | Op::Trim).then(|| SampleIo {
            ddir: req.op.index(),
            bs: req.len_bytes,
            offset: req.offset_bytes,
            prio: req.prio,
        })
    }
}

impl FioLog {
    pub fn new(name: String, avg_ms: u64, offset: bool, prio: bool) -> Self {
        FioLog {
            name,
            avg_ms,
            offset,
            prio,
            windows: [Window::default(); 3],
            avg_last: [0; 3],
            text: String::new(),
        }
    }

    fn line(&mut self, time_ms: u64, value: u64, ddir: usize, bs: u64, offset: u64, prio: IoPrio) {
        let t = &mut self.text;
        let _ = write!(t, "{time_ms}, {value}, {ddir}, {bs}, ");
        if self.offset {
            let _ = write!(t, "{offset}, ");
        }
        if self.prio {
            let ioprio = (u16::from(prio.class as u8) << 13) | u16::from(prio.level);
            let _ = writeln!(t, "0x{ioprio:04x}");
        } else {
            let _ = writeln!(t, "{}", u8::from(prio.class == IoPrioClass::RealTime));
        }
    }

    /// Whether the log averages over `log_avg_msec` windows.
    pub fn averaged(&self) -> bool {
        self.avg_ms > 0
    }

    /// A periodic bandwidth or IOPS sample of direction `ddir` (fio's helper-thread samples,
    /// one every `bwavgtime`/`iopsavgtime`, `log_avg_msec` with the log): a line as it is.
    pub fn sample(&mut self, time_ms: u64, value: u64, ddir: usize) {
        self.line(time_ms, value, ddir, 0, 0, IoPrio::default());
    }

    /// A sample taken `time_ms` after the epoch (fio's `add_log_sample`).
    pub fn add(&mut self, time_ms: u64, value: u64, io: SampleIo) {
        if self.avg_ms == 0 {
            self.line(time_ms, value, io.ddir, io.bs, io.offset, io.prio);
            return;
        }
        let d = io.ddir;
        self.windows[d].add(value);
        if time_ms < self.avg_last[d] || time_ms - self.avg_last[d] < self.avg_ms {
            return;
        }
        self.close(d, time_ms);
        self.avg_last[d] = time_ms - time_ms % self.avg_ms;
    }

    /// Writes direction `d`'s open window, if it holds samples, at `time_ms`.
    fn close(&mut self, d: usize, time_ms: u64) {
        let w = std::mem::take(&mut self.windows[d]);
        if w.samples > 0 {
            self.line(time_ms, (w.mean + 0.5) as u64, d, 0, 0, IoPrio::default());
        }
    }

    /// The job ended `time_ms` after the epoch: the open windows are written (fio's
    /// `finalize_logs`).
    pub fn finish(&mut self, time_ms: u64) {
        for d in 0..3 {
            self.close(d, time_ms);
        }
    }
}

/// The logs one job clone writes, as fio names them: `PREFIX_lat.N.log`, `PREFIX_clat.N.log`,
/// `PREFIX_slat.N.log` for `write_lat_log`, `PREFIX_bw.N.log` and `PREFIX_iops.N.log` for
/// `write_bw_log` and `write_iops_log` (N: the clone's number in the run, from 1): a line per
/// I/O, or with `log_avg_msec` a line per periodic sample (the job's, which the JSON's bw and
/// iops figures summarise).
#[derive(Clone, Debug, Default)]
pub struct JobLogs {
    pub lat: Option<FioLog>,
    pub clat: Option<FioLog>,
    pub slat: Option<FioLog>,
    pub bw: Option<FioLog>,
    pub iops: Option<FioLog>,
    /// Submission latencies (dispatch time, slat, I/O), logged in order of submission at
    /// the end: the job learns an I/O's submission time only when it reaps it.
    slat_samples: Vec<(Ns, u64, SampleIo)>,
}

impl JobLogs {
    /// The logs `job` asks for, of its clone numbered `number` in the run; `None` when it
    /// asks for none that is written here.
    pub fn of_job(job: &qoslab_workload::fio::Job, number: usize) -> Option<Box<Self>> {
        let avg_ms = job.log_avg_msec.unwrap_or(0);
        let named = |prefix: &Option<String>, kind: &str| {
            prefix.as_ref().map(|p| {
                let p = if p.is_empty() { &job.name } else { p };
                FioLog::new(
                    format!("{p}_{kind}.{number}.log"),
                    avg_ms,
                    job.logs.offset,
                    job.logs.prio,
                )
            })
        };
        let logs = JobLogs {
            lat: named(&job.logs.lat, "lat"),
            clat: named(&job.logs.lat, "clat"),
            slat: named(&job.logs.lat, "slat"),
            bw: named(&job.logs.bw, "bw"),
            iops: named(&job.logs.iops, "iops"),
            slat_samples: Vec::new(),
        };
        let any = logs.lat.is_some() || logs.bw.is_some() || logs.iops.is_some();
        any.then(|| Box::new(logs))
    }

    /// The averaged bandwidth and IOPS logs (their lines are the job's periodic samples).
    pub fn averaged_bw_iops(&mut self) -> (Option<&mut FioLog>, Option<&mut FioLog>) {
        (
            self.bw.as_mut().filter(|l| l.averaged()),
            self.iops.as_mut().filter(|l| l.averaged()),
        )
    }

    /// A reaped I/O at `time_ms` after the epoch with its total and completion latency
    /// (fio's `account_io_completion`: lat, clat, then bandwidth and IOPS).
    pub fn completed(&mut self, time_ms: u64, lat: u64, clat: u64, io: SampleIo) {
        if let Some(l) = &mut self.lat {
            l.add(time_ms, lat, io);
        }
        if let Some(l) = &mut self.clat {
            l.add(time_ms, clat, io);
        }
        // Averaged, the bandwidth and IOPS logs hold the periodic samples (`JobRun`'s).
        if let Some(l) = &mut self.bw
            && !l.averaged()
        {
            // fio's add_bw_sample: bytes * 1e6 / clat in ns, 0 for an instant I/O.
            let rate = (io.bs * 1_000_000).checked_div(clat).unwrap_or(0);
            l.add(time_ms, rate, io);
        }
        if let Some(l) = &mut self.iops
            && !l.averaged()
        {
            l.add(time_ms, 1, io);
        }
    }

    /// An I/O submitted at `dispatched_ns` with submission latency `slat`.
    pub fn submitted(&mut self, dispatched_ns: Ns, slat: u64, io: SampleIo) {
        if self.slat.is_some() {
            self.slat_samples.push((dispatched_ns, slat, io));
        }
    }

    /// The job ended `end_ms` after the epoch, which was at `epoch_ns`: the submission
    /// latencies are logged in submission order and every log's open windows written.
    pub fn finish(&mut self, epoch_ns: Ns, end_ms: u64) {
        if let Some(l) = &mut self.slat {
            self.slat_samples.sort_by_key(|s| s.0);
            for (at, slat, io) in self.slat_samples.drain(..) {
                l.add((at - epoch_ns) / 1_000_000, slat, io);
            }
        }
        for l in [
            &mut self.lat,
            &mut self.clat,
            &mut self.slat,
            &mut self.bw,
            &mut self.iops,
        ]
        .into_iter()
        .flatten()
        {
            l.finish(end_ms);
        }
    }

    /// (file name, text) of every log, in fio's order of setting them up.
    pub fn into_files(self) -> Vec<(String, String)> {
        [self.lat, self.slat, self.clat, self.bw, self.iops]
            .into_iter()
            .flatten()
            .map(|l| (l.name, l.text))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(ddir: usize) -> SampleIo {
        SampleIo {
            ddir,
            bs: 4096,
            offset: 8192,
            prio: IoPrio::default(),
        }
    }

    #[test]
    fn a_per_io_line_has_fios_five_or_six_fields() {
        let mut l = FioLog::new("x".into(), 0, false, false);
        l.add(3, 272_700, io(0));
        assert_eq!(l.text, "3, 272700, 0, 4096, 0\n");
        let mut l = FioLog::new("x".into(), 0, true, false);
        l.add(125, 100_347, io(1));
        assert_eq!(l.text, "125, 100347, 1, 4096, 8192, 0\n");
    }

    #[test]
    fn the_priority_column_is_rt_or_not_unless_log_prio_asks_for_the_value() {
        let rt = IoPrio {
            class: IoPrioClass::RealTime,
            level: 2,
        };
        let be = IoPrio {
            class: IoPrioClass::BestEffort,
            level: 7,
        };
        let mut l = FioLog::new("x".into(), 0, false, false);
        l.add(0, 1, SampleIo { prio: rt, ..io(0) });
        l.add(0, 1, SampleIo { prio: be, ..io(0) });
        assert_eq!(l.text, "0, 1, 0, 4096, 1\n0, 1, 0, 4096, 0\n");
        let mut l = FioLog::new("x".into(), 0, false, true);
        l.add(0, 1, SampleIo { prio: rt, ..io(0) });
        l.add(0, 1, SampleIo { prio: be, ..io(0) });
        assert_eq!(l.text, "0, 1, 0, 4096, 0x2002\n0, 1, 0, 4096, 0x4007\n");
    }

    #[test]
    fn a_window_closes_at_the_sample_that_ends_it_and_the_rest_at_the_end() {
        let mut l = FioLog::new("x".into(), 10, false, false);
        // Window [0, 10): closed by the sample at 11, which it includes.
        for (t, v) in [(1, 100), (5, 200), (11, 301)] {
            l.add(t, v, io(0));
        }
        // The next read window starts at 10. Each direction has its own windows, the first
        // from 0: the first write, at 12, closes one at once.
        l.add(12, 50, io(1));
        l.add(19, 7, io(0));
        l.add(19, 60, io(1));
        l.finish(23);
        assert_eq!(
            l.text, "11, 200, 0, 0, 0\n12, 50, 1, 0, 0\n23, 7, 0, 0, 0\n23, 60, 1, 0, 0\n",
            "mean of 100, 200, 301 is 200.33, written 200"
        );
    }
}
