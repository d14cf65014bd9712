//! An analytic device: c identical servers in front of one FIFO queue (M/G/c when arrivals
//! are Poisson), with fixed, exponential, lognormal or empirical service times. Its value is
//! that queueing theory predicts it exactly, which checks the whole path around it.

use std::collections::VecDeque;

use qoslab_engine::time::ns_from_f64;
use qoslab_engine::{
    ConfigError, IoStatus, Ns, Op, ReqId, RngStream, Settings, Stage, StageCtx, Tunable,
};

use crate::service::{QuantileTable, Service};
use crate::{BuildCtx, Device, DeviceCaps, DeviceModel};

qoslab_engine::choice! {
    /// The service-time distribution of reads and writes.
    pub enum ServiceKind {
        Fixed = "fixed",
        Exponential = "exponential",
        Lognormal = "lognormal",
        Empirical = "empirical",
    }
}

qoslab_engine::settings! {
    /// `[media]` with `model = "analytic"`.
    pub struct AnalyticConfig in ANALYTIC_TUNABLES {
        servers: u32 = count(1, "commands served in parallel (c)").range(1.0, 65536.0),
        service: ServiceKind = choice(ServiceKind::Exponential, "service-time distribution of reads and writes"),
        service_mean_ns: u64 = ns(10_000, "mean read service time (the fixed time for `fixed`)"),
        write_mean_ns: u64 = ns(0, "mean write service time; 0 = same as service_mean_ns"),
        service_cv: f64 = real(0.5, "coefficient of variation (stddev/mean) for `lognormal`").range(0.0, 100.0),
        service_points_ns: Vec<f64> = reals(&[], "for `empirical`: service times at the percentiles of service_points_pct"),
        service_points_pct: Vec<f64> = reals(&[], "for `empirical`: increasing percentiles (0-100) of service_points_ns; empty = equally spaced from 0 to 100"),
        transfer_rate: f64 = rate(0.0, "media data rate added to each read and write as len / rate; 0 = size-independent"),
        frontend_ns: u64 = ns(0, "CPU time of one command in a front end that takes the commands one at a time before their service (a driver whose queue_rq copies the data, as scsi_debug's does; guest: 5 us); 0 with frontend_per_kib_ns 0 = no front end"),
        frontend_per_kib_ns: u64 = ns(0, "that front end's time per KiB of a read or write (guest, scsi_debug: 0.2 us per KiB)"),
        flush_ns: u64 = ns(0, "service time of a flush (occupies a server)"),
        trim_ns: u64 = ns(0, "service time of a deallocate (occupies a server)"),
        capacity_bytes: u64 = bytes(1 << 40, "addressable capacity").range(512.0, 1.8e19),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerDone(pub u32);

/// c servers, one FIFO queue.
#[derive(Debug)]
pub struct AnalyticDevice {
    /// The command each server is working on.
    busy_with: Vec<Option<ReqId>>,
    /// Idle servers (a stack: which idle server takes a command does not change any time).
    idle: Vec<u32>,
    waiting: VecDeque<ReqId>,
    read: Service,
    write: Service,
    transfer_rate: f64,
    /// The front end: a command's time there, and when it is free again.
    frontend_ns: Ns,
    frontend_per_kib_ns: Ns,
    frontend_free_ns: Ns,
    flush_ns: Ns,
    trim_ns: Ns,
    capacity_bytes: u64,
    rng: RngStream,
    served: u64,
}

impl AnalyticDevice {
    /// A device with `servers` servers and the given read and write service.
    pub fn new(servers: u32, read: Service, write: Service, seed: u64) -> Self {
        AnalyticDevice {
            busy_with: vec![None; servers as usize],
            idle: (0..servers).rev().collect(),
            waiting: VecDeque::new(),
            read,
            write,
            transfer_rate: 0.0,
            frontend_ns: 0,
            frontend_per_kib_ns: 0,
            frontend_free_ns: 0,
            flush_ns: 0,
            trim_ns: 0,
            capacity_bytes: 1 << 40,
            rng: RngStream::new(seed, "media/service"),
            served: 0,
        }
    }

    fn service_ns(&mut self, op: Op, len_bytes: u64) -> Ns {
        let base = match op {
            Op::Read => self.read.sample_ns(&mut self.rng),
            Op::Write => self.write.sample_ns(&mut self.rng),
            Op::Flush => return self.flush_ns,
            Op::Trim => return self.trim_ns,
        };
        if self.transfer_rate > 0.0 {
            base + ns_from_f64(len_bytes as f64 / self.transfer_rate)
        } else {
            base
        }
    }

    fn start(&mut self, id: ReqId, server: u32, ctx: &mut impl StageCtx<ServerDone>) {
        let now = ctx.now_ns();
        let req = &mut ctx.reqs_mut()[id];
        req.t.media_start_ns = now;
        let (op, len) = (req.op, req.len_bytes);
        let service = self.service_ns(op, len);
        self.busy_with[server as usize] = Some(id);
        let served_from = self.front_end(op, len, now);
        ctx.schedule(served_from + service, ServerDone(server));
    }

    /// When a command that takes a server at `now` leaves the front end: at once without
    /// one; else after the commands ahead of it there and its own time (a driver's queue_rq
    /// on one CPU: scsi_debug copies a read's data before its delay starts, so commands
    /// dispatched together start their delays one after another).
    fn front_end(&mut self, op: Op, len_bytes: u64, now: Ns) -> Ns {
        if self.frontend_ns == 0 && self.frontend_per_kib_ns == 0 {
            return now;
        }
        let data = matches!(op, Op::Read | Op::Write);
        let cost = self.frontend_ns
            + if data {
                self.frontend_per_kib_ns * len_bytes / 1024
            } else {
                0
            };
        self.frontend_free_ns = self.frontend_free_ns.max(now) + cost;
        self.frontend_free_ns
    }

    /// Commands served so far.
    pub fn served(&self) -> u64 {
        self.served
    }
}

impl Stage for AnalyticDevice {
    type Event = ServerDone;

    /// A command only starts a server or queues: it may run inside the controller's hook.
    const SUBMITS_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        <Self as crate::DeviceModel>::NAME
    }

    #[inline]
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ServerDone>) {
        match self.idle.pop() {
            Some(server) => self.start(id, server, ctx),
            None => self.waiting.push_back(id),
        }
    }

    #[inline]
    fn on_event(&mut self, ServerDone(server): ServerDone, ctx: &mut impl StageCtx<ServerDone>) {
        let id = self.busy_with[server as usize]
            .take()
            .expect("a server finished without a command");
        let now = ctx.now_ns();
        ctx.reqs_mut()[id].t.media_done_ns = now;
        self.served += 1;
        ctx.complete(id);
        match self.waiting.pop_front() {
            Some(next) => self.start(next, server, ctx),
            None => self.idle.push(server),
        }
    }

    /// A queued command is withdrawn and comes back aborted; one on a server cannot be.
    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<ServerDone>) -> bool {
        match self.waiting.iter().position(|&w| w == id) {
            Some(i) => {
                self.waiting.remove(i);
                ctx.reqs_mut()[id].status = IoStatus::Aborted;
                ctx.complete(id);
                true
            }
            None => false,
        }
    }

    fn reset(&mut self, ctx: &mut impl StageCtx<ServerDone>) {
        // Queued commands are dropped at once; those on a server finish their service.
        for id in std::mem::take(&mut self.waiting) {
            ctx.reqs_mut()[id].status = IoStatus::Aborted;
            ctx.complete(id);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![("commands_served".into(), self.served as f64)]
    }
}

impl Device for AnalyticDevice {
    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }
    /// A flush that takes time (`flush_ns`) means a cache to flush; a power failure loses
    /// nothing here, though (the queue keeps no data). With that cache it honours FUA, as an
    /// NVMe drive with a volatile write cache does to Linux (the driver sets the queue's
    /// write cache and FUA both from VWC) and null_blk with `cache_size` (sysfs `fua` 1).
    fn caps(&self) -> DeviceCaps {
        let mut caps = DeviceCaps::ABORT_QUEUED;
        if self.flush_ns > 0 {
            caps |= DeviceCaps::VOLATILE_WRITE_CACHE | DeviceCaps::FUA;
        }
        caps
    }
}

/// The table of `empirical` service: `points_ns` at `service_points_pct` (equally spaced when
/// that is empty).
fn quantile_table(c: &AnalyticConfig, points_ns: &[f64]) -> Result<QuantileTable, String> {
    if c.service_points_pct.is_empty() {
        QuantileTable::from_sorted_points(points_ns)
    } else {
        QuantileTable::new(&c.service_points_pct, points_ns)
    }
}

fn service_from(c: &AnalyticConfig, mean_ns: f64) -> Result<Service, ConfigError> {
    let field = |name: &str, msg: String| ConfigError::new(format!("field 'media.{name}': {msg}"));
    Ok(match c.service {
        ServiceKind::Fixed => Service::Fixed(mean_ns as Ns),
        ServiceKind::Exponential => Service::Exponential { mean_ns },
        ServiceKind::Lognormal => {
            Service::lognormal(mean_ns, c.service_cv).map_err(|e| field("service_cv", e))?
        }
        ServiceKind::Empirical => Service::Empirical(
            quantile_table(c, &c.service_points_ns).map_err(|e| field("service_points_ns", e))?,
        ),
    })
}

impl DeviceModel for AnalyticDevice {
    const NAME: &'static str = "analytic";
    const HELP: &'static str =
        "c servers and one FIFO queue; fixed, exponential, lognormal or empirical service";
    const TUNABLES: &'static [Tunable] = ANALYTIC_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(s: &Settings, ctx: &BuildCtx<'_>) -> Result<Self, ConfigError> {
        let c = AnalyticConfig::from_settings(s);
        let read_mean = c.service_mean_ns as f64;
        let write_mean = match c.write_mean_ns {
            0 => read_mean,
            w => w as f64,
        };
        let read = service_from(&c, read_mean)?;
        let write = match (&read, c.write_mean_ns) {
            // An empirical table is one distribution; a separate write mean rescales it.
            (Service::Empirical(t), w) if w != 0 => {
                let k = write_mean / t.mean();
                let points: Vec<f64> = c.service_points_ns.iter().map(|v| v * k).collect();
                Service::Empirical(quantile_table(&c, &points).map_err(ConfigError::new)?)
            }
            (Service::Empirical(_), _) => read.clone(),
            _ => service_from(&c, write_mean)?,
        };
        let mut dev = AnalyticDevice::new(c.servers, read, write, ctx.seed);
        dev.transfer_rate = c.transfer_rate;
        dev.frontend_ns = c.frontend_ns;
        dev.frontend_per_kib_ns = c.frontend_per_kib_ns;
        dev.flush_ns = c.flush_ns;
        dev.trim_ns = c.trim_ns;
        dev.capacity_bytes = c.capacity_bytes;
        Ok(dev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::{Harness, Request};

    fn read(at: Ns) -> Request {
        Request::new(Op::Read, 0, 4096, 0, at)
    }

    #[test]
    fn one_fixed_server_serves_in_arrival_order_back_to_back() {
        let dev = AnalyticDevice::new(1, Service::Fixed(100), Service::Fixed(100), 1);
        let mut h = Harness::new(dev);
        let a = h.submit_at(0, read(0));
        let b = h.submit_at(10, read(10));
        let c = h.submit_at(500, read(500));
        h.run_all();
        assert_eq!(h.completed, vec![(a, 100), (b, 200), (c, 600)]);
        assert_eq!(h.reqs[b].t.media_start_ns, 100);
    }

    #[test]
    fn c_servers_work_in_parallel() {
        let dev = AnalyticDevice::new(4, Service::Fixed(100), Service::Fixed(100), 1);
        let mut h = Harness::new(dev);
        for _ in 0..8 {
            h.submit_at(0, read(0));
        }
        h.run_all();
        let times: Vec<Ns> = h.completed.iter().map(|&(_, t)| t).collect();
        assert_eq!(times, vec![100, 100, 100, 100, 200, 200, 200, 200]);
    }

    #[test]
    fn reset_drops_queued_commands_and_lets_started_ones_finish() {
        let dev = AnalyticDevice::new(1, Service::Fixed(100), Service::Fixed(100), 1);
        let mut h = Harness::new(dev);
        let a = h.submit_at(0, read(0));
        let b = h.submit_at(0, read(0));
        h.run_until(50);
        h.reset();
        assert_eq!(h.completed, vec![(b, 50)]);
        assert_eq!(h.reqs[b].status, IoStatus::Aborted);
        h.run_all();
        assert_eq!(h.completed, vec![(b, 50), (a, 100)]);
    }

    #[test]
    fn abort_withdraws_only_queued_commands_which_come_back_aborted() {
        let dev = AnalyticDevice::new(1, Service::Fixed(100), Service::Fixed(100), 1);
        let mut h = Harness::new(dev);
        let a = h.submit_at(0, read(0));
        let b = h.submit_at(0, read(0));
        h.run_until(10);
        assert!(!h.abort(a));
        assert!(h.abort(b));
        assert_eq!(h.reqs[b].status, IoStatus::Aborted);
        h.run_all();
        assert_eq!(h.completed, vec![(b, 10), (a, 100)]);
    }

    #[test]
    fn commands_pass_the_front_end_one_at_a_time_before_their_service() {
        // 4 servers, 1 us + 1 us per KiB in the front end: four 4 KiB reads dispatched at
        // once start their service 5, 10, 15 and 20 us later; a 128 KiB read arriving at 30
        // us, with the front end free, 129 us later; without a front end all start at once.
        let mut dev = AnalyticDevice::new(4, Service::Fixed(100), Service::Fixed(100), 1);
        (dev.frontend_ns, dev.frontend_per_kib_ns) = (1_000, 1_000);
        let mut h = Harness::new(dev);
        for _ in 0..4 {
            h.submit_at(0, read(0));
        }
        h.run_until(30_000);
        let big = h.submit_at(30_000, Request::new(Op::Read, 0, 128 << 10, 0, 30_000));
        h.run_all();
        let times: Vec<Ns> = h.completed.iter().map(|&(_, t)| t).collect();
        assert_eq!(times, vec![5_100, 10_100, 15_100, 20_100, 159_100]);
        assert_eq!(h.completed[4].0, big);
        let plain = AnalyticDevice::new(4, Service::Fixed(100), Service::Fixed(100), 1);
        let mut h = Harness::new(plain);
        for _ in 0..4 {
            h.submit_at(0, read(0));
        }
        h.run_all();
        assert!(h.completed.iter().all(|&(_, t)| t == 100));
    }

    #[test]
    fn transfer_rate_adds_the_size_term() {
        let mut dev = AnalyticDevice::new(1, Service::Fixed(100), Service::Fixed(100), 1);
        dev.transfer_rate = 2.0; // bytes per ns
        let mut h = Harness::new(dev);
        let a = h.submit_at(0, read(0));
        h.run_all();
        assert_eq!(h.completed, vec![(a, 100 + 2048)]);
    }
}
