//! A drive as its write cache and its parallel units (the SSDs of Rio, EuroSys'23, 6.1: a
//! Samsung PM981 flash drive without power-loss protection, Intel 905P / P4800X Optane drives
//! with it): `units` commands are served at once, each for its op's time, and every byte crosses
//! one device-wide channel at `bandwidth`, so a stream of large writes is bound by the drive's
//! rate, not by the number of units.
//!
//! A completed write sits in a volatile cache until a FLUSH (unless the drive has PLP, `plp`).
//! A FLUSH, and a write with PREFLUSH, is a barrier, device-wide as on a drive that drains its
//! cache: it starts once every command taken before it has completed, later commands wait
//! behind it, and it holds the whole drive for `flush_ns` after its own write; when it
//! completes, every write completed before it (and a barrier write itself) is durable. NVMe
//! allows that much: a Flush "applies to all commands completed prior to the submission of
//! the Flush command" and the controller may flush more. A write with FUA alone is not a
//! barrier: NVMe's FUA puts only that command's blocks on the media before it completes, in no
//! order against other commands, so it takes one unit like any write, for its write and then
//! its own program (`flush_ns`, the preset's page program), is durable when it completes and
//! leaves the cache and the other commands alone.
//! A power loss takes the cache (writes completed since the last barrier, but FUA writes) and
//! every command not yet completed, which completes with `IoStatus::PowerLoss`; the drive is
//! back at once.

use std::collections::VecDeque;

use qoslab_engine::time::ns_from_f64;
use qoslab_engine::{
    Command, ConfigError, ControlStatus, IoStatus, LostWrite, Ns, Op, ReqFlags, ReqId, Requests,
    Settings, Stage, StageCtx, Tunable,
};

use crate::{BuildCtx, Device, DeviceCaps, DeviceModel};

qoslab_engine::settings! {
    /// `[media]` with `model = "cached"`.
    pub struct CachedConfig in CACHED_TUNABLES {
        units: u32 = count(8, "commands served at once (the drive's parallel units)").range(1.0, 65536.0),
        write_ns: Ns = ns(20_000, "time a unit takes for one write into the cache"),
        read_ns: Ns = ns(80_000, "time a unit takes for one read"),
        bandwidth: f64 = rate(2.4, "device-wide data rate, GB/s: every command's bytes cross one channel at this rate (0 = no limit)"),
        flush_ns: Ns = ns(1_000_000, "a FLUSH (or the flush part of a PREFLUSH write) holding the whole drive, after every earlier command completed; also a FUA write's program of its own blocks, on its unit"),
        trim_ns: Ns = ns(0, "time a unit takes for one deallocate"),
        plp: bool = flag(false, "power-loss protection: a completed write is durable, a power loss takes only what is not completed"),
        capacity_bytes: u64 = bytes(1 << 40, "addressable capacity").range(512.0, 1.8e19),
    }
}

/// Timed events of the drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachedEvent {
    /// Unit `u` finished its command.
    Unit(u32),
    /// The barrier command finished (write and flush).
    Barrier,
}

/// A completed write not yet durable.
#[derive(Clone, Copy, Debug)]
struct Dirty {
    offset_bytes: u64,
    len_bytes: u64,
    job: u32,
    queued_ns: Ns,
}

/// The drive.
pub struct CachedDrive {
    cfg: CachedConfig,
    busy_with: Vec<Option<ReqId>>,
    idle: Vec<u32>,
    in_service: u32,
    queue: VecDeque<ReqId>,
    /// When the device-wide channel is next free.
    channel_free: Ns,
    /// The barrier under way, and when it ends.
    barrier: Option<ReqId>,
    dirty: Vec<Dirty>,
    lost: Vec<LostWrite>,
    /// Bumped by a power loss: events of the commands it cancelled are ignored.
    generation: u32,
    unit_generation: Vec<u32>,
    stats: Stats,
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    writes: u64,
    reads: u64,
    flushes: u64,
    barrier_writes: u64,
    fua_writes: u64,
    bytes: u64,
    channel_busy_ns: Ns,
    power_losses: u64,
}

impl CachedDrive {
    pub fn new(cfg: CachedConfig) -> Self {
        let units = cfg.units.max(1);
        CachedDrive {
            busy_with: vec![None; units as usize],
            idle: (0..units).rev().collect(),
            in_service: 0,
            queue: VecDeque::new(),
            channel_free: 0,
            barrier: None,
            dirty: Vec::new(),
            lost: Vec::new(),
            generation: 0,
            unit_generation: vec![0; units as usize],
            stats: Stats::default(),
            cfg,
        }
    }

    /// A FLUSH or a write that asks for one first (PREFLUSH, with or without FUA): the
    /// device-wide drain. A FUA write alone is not one.
    fn is_barrier(req: &qoslab_engine::Request) -> bool {
        req.op == Op::Flush || (req.op == Op::Write && req.flags.contains(ReqFlags::PREFLUSH))
    }

    /// A write that must be on the media when it completes, its own blocks only.
    fn is_fua_only(req: &qoslab_engine::Request) -> bool {
        req.op == Op::Write && req.flags.contains(ReqFlags::FUA) && !Self::is_barrier(req)
    }

    /// When `bytes` starting no earlier than `at` have crossed the channel.
    fn channel(&mut self, at: Ns, bytes: u64) -> Ns {
        if self.cfg.bandwidth <= 0.0 || bytes == 0 {
            return at;
        }
        let d = ns_from_f64(bytes as f64 / self.cfg.bandwidth);
        let start = at.max(self.channel_free);
        self.channel_free = start + d;
        self.stats.channel_busy_ns += d;
        self.channel_free
    }

    fn unit_time(&self, op: Op) -> Ns {
        match op {
            Op::Read => self.cfg.read_ns,
            Op::Write => self.cfg.write_ns,
            Op::Trim => self.cfg.trim_ns,
            Op::Flush => 0,
        }
    }

    /// Starts what may start: commands in arrival order while units are free, a barrier once
    /// the drive is idle.
    fn start_ready(&mut self, ctx: &mut impl StageCtx<CachedEvent>) {
        while self.barrier.is_none() {
            let Some(&id) = self.queue.front() else {
                return;
            };
            let now = ctx.now_ns();
            let req = ctx.reqs()[id];
            if Self::is_barrier(&req) {
                if self.in_service > 0 {
                    return;
                }
                self.queue.pop_front();
                self.barrier = Some(id);
                ctx.reqs_mut()[id].t.media_start_ns = now;
                let mut end = now;
                if req.op == Op::Write {
                    self.stats.barrier_writes += 1;
                    self.stats.bytes += req.len_bytes;
                    end = (now + self.cfg.write_ns).max(self.channel(now, req.len_bytes));
                } else {
                    self.stats.flushes += 1;
                }
                ctx.schedule(end + self.cfg.flush_ns, CachedEvent::Barrier);
                return;
            }
            let Some(u) = self.idle.pop() else {
                return;
            };
            self.queue.pop_front();
            ctx.reqs_mut()[id].t.media_start_ns = now;
            let mut end = now + self.unit_time(req.op);
            if matches!(req.op, Op::Read | Op::Write) {
                self.stats.bytes += req.len_bytes;
                end = end.max(self.channel(now, req.len_bytes));
            }
            if Self::is_fua_only(&req) && !self.cfg.plp {
                // Its blocks are programmed once they are in, still on its unit (with PLP the
                // cache is durable: nothing to program first).
                end += self.cfg.flush_ns;
            }
            self.busy_with[u as usize] = Some(id);
            self.unit_generation[u as usize] = self.generation;
            self.in_service += 1;
            ctx.schedule(end, CachedEvent::Unit(u));
        }
    }

    fn finish(&mut self, id: ReqId, ctx: &mut impl StageCtx<CachedEvent>) {
        let now = ctx.now_ns();
        let req = &mut ctx.reqs_mut()[id];
        req.t.media_done_ns = now;
        let fua = Self::is_fua_only(req);
        if fua {
            self.stats.fua_writes += 1;
        }
        if req.op == Op::Write && !self.cfg.plp && !fua {
            self.dirty.push(Dirty {
                offset_bytes: req.offset_bytes,
                len_bytes: req.len_bytes,
                job: req.job,
                queued_ns: req.t.queued_ns,
            });
        }
        match req.op {
            Op::Write => self.stats.writes += 1,
            Op::Read => self.stats.reads += 1,
            _ => {}
        }
        ctx.complete(id);
    }

    /// What a power loss now would take, as it reports them: the cache (writes completed
    /// since the last barrier, but FUA writes) and every write not yet completed, in queued order. It changes
    /// nothing, so a test can ask at each instant of one run what a cut there takes;
    /// [`power_loss`](Self::power_loss) takes exactly this.
    pub fn writes_at_risk(&self, reqs: &Requests) -> Vec<LostWrite> {
        let mut lost: Vec<LostWrite> = self
            .dirty
            .iter()
            .map(|d| LostWrite {
                offset_bytes: d.offset_bytes,
                len_bytes: d.len_bytes,
                job: d.job,
                queued_ns: d.queued_ns,
                acknowledged: true,
            })
            .collect();
        let pending = self.busy_with.iter().flatten();
        for &id in pending.chain(&self.barrier).chain(&self.queue) {
            let r = &reqs[id];
            if r.op == Op::Write {
                lost.push(LostWrite {
                    offset_bytes: r.offset_bytes,
                    len_bytes: r.len_bytes,
                    job: r.job,
                    queued_ns: r.t.queued_ns,
                    acknowledged: false,
                });
            }
        }
        lost.sort_by_key(|l| (l.queued_ns, l.job, l.offset_bytes));
        lost
    }

    /// The power fails: the cache and every command not completed are lost.
    fn power_loss(&mut self, ctx: &mut impl StageCtx<CachedEvent>) {
        self.stats.power_losses += 1;
        let lost = self.writes_at_risk(ctx.reqs());
        self.lost.extend(lost);
        self.dirty.clear();
        let mut cancelled: Vec<ReqId> = Vec::new();
        for slot in &mut self.busy_with {
            cancelled.extend(slot.take());
        }
        cancelled.extend(self.barrier.take());
        cancelled.extend(self.queue.drain(..));
        self.idle = (0..self.busy_with.len() as u32).rev().collect();
        self.in_service = 0;
        self.channel_free = ctx.now_ns();
        self.generation = self.generation.wrapping_add(1);
        for id in cancelled {
            ctx.reqs_mut()[id].status = IoStatus::PowerLoss;
            ctx.complete(id);
        }
    }
}

impl Stage for CachedDrive {
    type Event = CachedEvent;

    /// A command only queues or starts a unit: it may run inside the controller's hook.
    const SUBMITS_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        <Self as DeviceModel>::NAME
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<CachedEvent>) {
        self.queue.push_back(id);
        self.start_ready(ctx);
    }

    fn on_event(&mut self, ev: CachedEvent, ctx: &mut impl StageCtx<CachedEvent>) {
        match ev {
            CachedEvent::Unit(u) => {
                if self.unit_generation[u as usize] != self.generation {
                    return;
                }
                let Some(id) = self.busy_with[u as usize].take() else {
                    return;
                };
                self.idle.push(u);
                self.in_service -= 1;
                self.finish(id, ctx);
            }
            CachedEvent::Barrier => {
                let Some(id) = self.barrier.take() else {
                    return;
                };
                // Everything completed before it is on the media now, and so is its own write.
                self.dirty.clear();
                let now = ctx.now_ns();
                let req = &mut ctx.reqs_mut()[id];
                req.t.media_done_ns = now;
                if req.op == Op::Write {
                    self.stats.writes += 1;
                }
                ctx.complete(id);
            }
        }
        self.start_ready(ctx);
    }

    fn control(&mut self, msg: &mut qoslab_engine::Control, ctx: &mut impl StageCtx<CachedEvent>) {
        if msg.command == Command::PowerLoss {
            self.power_loss(ctx);
            msg.status = ControlStatus::Success;
        }
    }

    fn collect_lost_writes(&self, out: &mut Vec<LostWrite>) {
        out.extend_from_slice(&self.lost);
    }

    /// What `power_loss` would take now: it takes exactly [`writes_at_risk`](Self::writes_at_risk).
    fn collect_writes_at_risk(&self, reqs: &Requests, out: &mut Vec<LostWrite>) -> bool {
        out.extend(self.writes_at_risk(reqs));
        true
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        vec![
            ("writes".into(), s.writes as f64),
            ("reads".into(), s.reads as f64),
            ("flushes".into(), s.flushes as f64),
            ("barrier_writes".into(), s.barrier_writes as f64),
            ("fua_writes".into(), s.fua_writes as f64),
            ("bytes".into(), s.bytes as f64),
            ("channel_busy_ns".into(), s.channel_busy_ns as f64),
            ("cached_writes".into(), self.dirty.len() as f64),
            ("power_losses".into(), s.power_losses as f64),
        ]
    }
}

impl Device for CachedDrive {
    fn capacity_bytes(&self) -> u64 {
        self.cfg.capacity_bytes
    }

    fn caps(&self) -> DeviceCaps {
        if self.cfg.plp {
            DeviceCaps::FUA | DeviceCaps::POWER_LOSS_PROTECTION
        } else {
            DeviceCaps::FUA | DeviceCaps::VOLATILE_WRITE_CACHE
        }
    }

    fn lost_writes(&self) -> &[LostWrite] {
        &self.lost
    }
}

impl DeviceModel for CachedDrive {
    const NAME: &'static str = "cached";
    const HELP: &'static str = "parallel units behind a device-wide channel and a volatile write cache (or PLP); FLUSH and PREFLUSH writes drain it, device-wide; a FUA write programs its own blocks";
    const TUNABLES: &'static [Tunable] = CACHED_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(s: &Settings, _ctx: &BuildCtx<'_>) -> Result<Self, ConfigError> {
        Ok(CachedDrive::new(CachedConfig::from_settings(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::{Control, Harness, Request};

    fn drive(sets: &[(&str, &str)]) -> CachedDrive {
        let mut s = Settings::defaults("media", CACHED_TUNABLES);
        for (k, v) in sets {
            s.set(k, &qoslab_engine::RawValue::from_cli(v)).unwrap();
        }
        CachedDrive::new(CachedConfig::from_settings(&s))
    }

    /// Two units, 100 ns writes, no channel limit, a 1 us flush (and FUA program): times a
    /// test can add up by hand.
    const TWO_UNITS: [(&str, &str); 4] = [
        ("units", "2"),
        ("write_ns", "100"),
        ("bandwidth", "0"),
        ("flush_ns", "1000"),
    ];

    fn write(offset: u64, len: u64) -> Request {
        Request::new(Op::Write, offset, len, 0, 0)
    }

    #[test]
    fn small_writes_are_bound_by_the_units_and_large_ones_by_the_channel() {
        // 9 units of 20 us: 4 KiB writes at 450K per second; 2.4 GB/s: 64 KiB writes at
        // 65536 / 2.4 = 27,307 ns each, one after the other on the channel.
        let sets = [("units", "9"), ("write_ns", "20000"), ("bandwidth", "2.4")];
        let mut h = Harness::new(drive(&sets));
        let done = h.run(32, 9000, |now| Request::new(Op::Write, 0, 4096, 0, now));
        let rate = 9000.0 / done.last().unwrap().done_ns as f64 * 1e9;
        assert!((rate - 450_000.0).abs() < 1_000.0, "{rate}");
        let mut h = Harness::new(drive(&sets));
        let done = h.run(32, 1000, |now| Request::new(Op::Write, 0, 65536, 0, now));
        let bytes_per_ns = 1000.0 * 65536.0 / done.last().unwrap().done_ns as f64;
        assert!(bytes_per_ns <= 2.4 && bytes_per_ns > 2.39, "{bytes_per_ns}");
    }

    #[test]
    fn a_flush_waits_for_earlier_writes_holds_the_drive_and_makes_them_durable() {
        let mut h = Harness::new(drive(&TWO_UNITS));
        let a = h.submit_at(0, write(0, 4096));
        let f = h.submit_at(10, Request::new(Op::Flush, 0, 0, 0, 10));
        let b = h.submit_at(20, write(8192, 4096));
        h.run_until(50);
        // Power fails while the first write is in service and the second waits behind the
        // flush: both are lost, neither acknowledged.
        h.control(Control::new(50, 0, Command::PowerLoss));
        assert_eq!(h.stage.lost_writes().len(), 2);
        assert!(h.stage.lost_writes().iter().all(|l| !l.acknowledged));
        h.run_all();
        // The write and the flush and the write behind it all ended with the power loss.
        let ids: Vec<ReqId> = h.completed.iter().map(|&(id, _)| id).collect();
        assert_eq!(ids, [a, f, b]);
        let mut h = Harness::new(drive(&TWO_UNITS));
        let a = h.submit_at(0, write(0, 4096));
        let f = h.submit_at(10, Request::new(Op::Flush, 0, 0, 0, 10));
        let b = h.submit_at(20, write(8192, 4096));
        h.run_all();
        // The flush starts when `a` is done (100), holds the drive 1 us; `b` waits behind it.
        assert_eq!(h.completed, vec![(a, 100), (f, 1100), (b, 1200)]);
        // `b` sits in the cache: a power loss takes it, acknowledged.
        h.control(Control::new(1300, 0, Command::PowerLoss));
        let lost = h.stage.lost_writes();
        assert_eq!(lost.len(), 1);
        assert_eq!((lost[0].offset_bytes, lost[0].acknowledged), (8192, true));
    }

    fn fua(offset: u64, len: u64, at: Ns) -> Request {
        let mut r = Request::new(Op::Write, offset, len, 0, at);
        r.flags |= ReqFlags::FUA;
        r
    }

    /// NVMe's FUA bit: the controller writes that command's blocks to non-volatile media
    /// before it completes the command, and orders it against no other command. So a FUA
    /// write runs beside the writes in flight, a write queued behind it does not wait for
    /// it, and a power cut after it completed keeps it but takes the plain writes it found
    /// in the cache.
    #[test]
    fn a_fua_write_runs_beside_other_writes_and_only_its_own_blocks_are_durable() {
        let mut h = Harness::new(drive(&TWO_UNITS));
        let a = h.submit_at(0, write(0, 4096));
        let b = h.submit_at(150, write(4096, 4096));
        let c = h.submit_at(160, fua(8192, 4096, 160));
        let d = h.submit_at(170, write(12288, 4096));
        h.run_all();
        // `a` completes alone (100). `c` starts on the second unit while `b` is in flight
        // and takes its write and its own program (100 + 1000); `d` takes the unit `b`
        // leaves at 250 and completes before `c`.
        assert_eq!(h.completed, vec![(a, 100), (b, 250), (d, 350), (c, 1260)]);
        h.control(Control::new(1300, 0, Command::PowerLoss));
        let mut lost: Vec<(u64, bool)> = h
            .stage
            .lost_writes()
            .iter()
            .map(|l| (l.offset_bytes, l.acknowledged))
            .collect();
        lost.sort_unstable();
        // The FUA write survives; the three plain ones in the cache, acknowledged, do not.
        assert_eq!(lost, [(0, true), (4096, true), (12288, true)]);
    }

    /// A FLUSH still drains the whole cache: after a FUA write, a plain write and a FLUSH,
    /// nothing completed before the FLUSH is lost.
    #[test]
    fn a_flush_after_a_fua_write_still_makes_every_earlier_write_durable() {
        let mut h = Harness::new(drive(&TWO_UNITS));
        let a = h.submit_at(0, write(0, 4096));
        let c = h.submit_at(0, fua(4096, 4096, 0));
        let b = h.submit_at(200, write(8192, 4096));
        let f = h.submit_at(300, Request::new(Op::Flush, 0, 0, 0, 300));
        h.run_all();
        // The FLUSH waits for every command taken before it (`c`, at 1100), then drains.
        assert_eq!(h.completed, vec![(a, 100), (b, 300), (c, 1100), (f, 2100)]);
        h.control(Control::new(2200, 0, Command::PowerLoss));
        assert!(
            h.stage.lost_writes().is_empty(),
            "{:?}",
            h.stage.lost_writes()
        );
    }

    #[test]
    fn with_plp_a_completed_write_survives_a_power_loss() {
        let mut h = Harness::new(drive(&[("plp", "true"), ("flush_ns", "0")]));
        h.submit_at(0, write(0, 4096));
        h.run_all();
        h.control(Control::new(h.now_ns(), 0, Command::PowerLoss));
        assert!(h.stage.lost_writes().is_empty());
    }
}
