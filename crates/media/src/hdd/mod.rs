//! A hard disk drive: zoned platters spinning at a fixed rate, one actuator whose seek time
//! follows a curve fitted to the datasheet's track-to-track, average and full-stroke figures,
//! an on-disk cache with read-ahead and an optional write cache, and command queueing served
//! first-come first-served or shortest-positioning-time-first (SPTF).
//!
//! Layout. Logical bytes run from the outer edge inwards, zone after zone; every zone has the
//! same number of cylinders and a track of zone z holds `rate_z x revolution` bytes, with the
//! media rate falling linearly from `outer_rate` to `inner_rate`. Each track starts `skew`
//! later in angle than the one before, so a transfer that crosses tracks does not lose a
//! revolution.
//!
//! Timing of one command: seek to the cylinder (0 for the same one; a head switch costs
//! `head_switch_ns`), wait for the first byte to come under the head (the platter angle is
//! `now / revolution` exactly, so rotational latency is a consequence, not a draw), read or
//! write at the zone's media rate. See docs/media.md.

pub mod seek;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use qoslab_engine::{
    ConfigError, IoStatus, Ns, Op, ReqFlags, ReqId, Settings, Stage, StageCtx, Tunable,
};

use crate::{BuildCtx, Device, DeviceCaps, DeviceModel};
use seek::SeekCurve;

qoslab_engine::choice! {
    /// The order in which the drive serves the commands queued in it.
    pub enum HddScheduler { Fifo = "fifo", Sptf = "sptf" }
}

qoslab_engine::settings! {
    /// `[media]` with `model = "hdd"` (defaults: the 7200 rpm preset's figures).
    pub struct HddConfig in HDD_TUNABLES {
        capacity_bytes: u64 = bytes(320_000_000_000, "addressable capacity").range(1e6, 1e15),
        rpm: u32 = count(7200, "spindle speed, revolutions per minute").range(1000.0, 30000.0),
        heads: u32 = count(4, "recording surfaces (heads)").range(1.0, 64.0),
        zones: u32 = count(16, "recording zones from the outer to the inner edge").range(1.0, 1000.0),
        outer_rate: f64 = rate(0.110, "media transfer rate in the outermost zone"),
        inner_rate: f64 = rate(0.055, "media transfer rate in the innermost zone"),
        track_to_track_ns: u64 = ns(1_000_000, "seek over one cylinder, settling included"),
        average_seek_ns: u64 = ns(12_000_000, "datasheet average seek: the weighted average over all seek lengths (weight max + 1 - n)"),
        full_stroke_ns: u64 = ns(20_000_000, "seek over every cylinder"),
        write_settle_ns: u64 = ns(0, "extra settling before a write (datasheets' write minus read seek)"),
        head_switch_ns: u64 = ns(1_000_000, "switching heads within a cylinder (also the track skew)"),
        command_overhead_ns: u64 = ns(0, "controller time per command"),
        interface_rate: f64 = rate(0.3, "host interface rate (SATA 3 Gb/s = 300 MB/s)"),
        cache_bytes: u64 = bytes(16 << 20, "on-disk buffer for read-ahead and write caching"),
        readahead_bytes: u64 = bytes(512 << 10, "after a read the drive keeps reading this far ahead while idle (0 = no read-ahead)"),
        write_cache: bool = flag(false, "write-back caching: writes complete once in the buffer; FLUSH drains it; a power failure loses what is not on the platter"),
        queue_depth: u32 = count(32, "commands the drive reorders at once (NCQ / TCQ depth)").range(1.0, 256.0),
        scheduler: HddScheduler = choice(HddScheduler::Sptf, "order of service among queued commands: arrival order, or shortest positioning time first"),
        max_command_age_ns: u64 = ns(500_000_000, "sptf: a queued command that has waited this long goes next, whatever its position (0 = no bound). Pure SPTF starves a command far from a stream the head keeps reading (Worthington, Ganger and Patt, SIGMETRICS 1994, the study's reference [5], which bound it by aging); no datasheet at hand states a drive's own bound, so the default is the bound Linux's deadline scheduler puts on a read (read_expire, 500 ms, Documentation/block/deadline-iosched.rst)"),
        power_fail_ns: u64 = ns(0, "simulated time of a power failure (0 = none)"),
    }
}

#[derive(Clone, Copy, Debug)]
struct Zone {
    first_byte: u64,
    first_cylinder: u32,
    track_bytes: u64,
    /// Bytes per ns.
    rate: f64,
}

/// The platter layout: where a byte offset is.
#[derive(Clone, Debug)]
pub struct Layout {
    zones: Vec<Zone>,
    heads: u32,
    cylinders_per_zone: u32,
    /// Angle (fraction of a revolution) each track starts after the previous one.
    skew: f64,
}

/// A position on the platters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Position {
    pub cylinder: u32,
    pub head: u32,
    /// Angle of the first byte, as a fraction of a revolution.
    pub angle: f64,
    /// Bytes per ns at that radius.
    pub rate: f64,
}

impl Layout {
    fn new(
        capacity: u64,
        heads: u32,
        zones: u32,
        outer: f64,
        inner: f64,
        period_ns: f64,
        skew_ns: Ns,
    ) -> Self {
        let rate = |z: u32| {
            if zones == 1 {
                outer
            } else {
                outer - (outer - inner) * f64::from(z) / f64::from(zones - 1)
            }
        };
        let track_bytes: Vec<u64> = (0..zones).map(|z| (rate(z) * period_ns) as u64).collect();
        let per_cylinder_set: u64 = track_bytes.iter().sum::<u64>() * u64::from(heads);
        let cylinders_per_zone = capacity.div_ceil(per_cylinder_set).max(1) as u32;
        let mut first_byte = 0;
        let zones_v = (0..zones)
            .map(|z| {
                let zone = Zone {
                    first_byte,
                    first_cylinder: z * cylinders_per_zone,
                    track_bytes: track_bytes[z as usize],
                    rate: rate(z),
                };
                first_byte +=
                    track_bytes[z as usize] * u64::from(heads) * u64::from(cylinders_per_zone);
                zone
            })
            .collect();
        Layout {
            zones: zones_v,
            heads,
            cylinders_per_zone,
            skew: (skew_ns as f64 / period_ns).fract(),
        }
    }

    pub fn cylinders(&self) -> u32 {
        self.cylinders_per_zone * self.zones.len() as u32
    }

    /// Where byte `offset` sits.
    pub fn locate(&self, offset: u64) -> Position {
        let z = self.zones.partition_point(|z| z.first_byte <= offset) - 1;
        let zone = &self.zones[z];
        let within = offset - zone.first_byte;
        let track = within / zone.track_bytes;
        let frac = (within - track * zone.track_bytes) as f64 / zone.track_bytes as f64;
        let global_track = u64::from(zone.first_cylinder) * u64::from(self.heads) + track;
        Position {
            cylinder: zone.first_cylinder + (track / u64::from(self.heads)) as u32,
            head: (track % u64::from(self.heads)) as u32,
            angle: (frac + global_track as f64 * self.skew).fract(),
            rate: zone.rate,
        }
    }

    /// Bytes of the track holding each cylinder's data, for the LBA-weighted distance mix.
    pub fn cylinder_bytes(&self, cylinder: u32) -> u64 {
        let z = (cylinder / self.cylinders_per_zone) as usize;
        self.zones[z.min(self.zones.len() - 1)].track_bytes * u64::from(self.heads)
    }
}

#[derive(Clone, Copy, Debug)]
pub enum HddEvent {
    /// The command in service finished its media transfer (stale after a power failure: the
    /// generation no longer matches).
    MediaDone(u32),
    /// A host request finished (bus transfer or cache hit) and completes now.
    Complete(ReqId),
    PowerFail,
}

#[derive(Clone, Copy, Debug)]
enum JobKind {
    Host(ReqId),
    /// Writing back a cached write (its record index).
    Destage(u32),
}

#[derive(Clone, Copy, Debug)]
struct Job {
    kind: JobKind,
    write: bool,
    offset: u64,
    len: u64,
    seq: u64,
    /// When the command entered the first `queue_depth` of the queue, the ones the drive
    /// holds and reorders (NCQ); the rest wait above it, as in the host's queue, and age only
    /// from there.
    window_ns: Ns,
}

/// A write the drive acknowledged from its buffer, until it reaches the platter.
#[derive(Clone, Copy, Debug)]
struct CachedWrite {
    offset: u64,
    len: u64,
    job: u32,
    queued_ns: Ns,
    epoch: u64,
}

/// A region being or having been read ahead: bytes [start, start + valid(t)) are in the
/// buffer, growing at `rate` from `since` until `end`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: u64,
    end: u64,
    /// Time the byte at `start` was (or will be) under the head.
    since_ns: Ns,
    rate: f64,
    /// Still being extended (the head stays on it while the drive is idle).
    active: bool,
}

impl Segment {
    /// When byte `offset` is in the buffer.
    fn ready_at(&self, offset: u64) -> Ns {
        self.since_ns + ((offset - self.start) as f64 / self.rate).ceil() as Ns
    }
}

pub struct Hdd {
    layout: Layout,
    seek: SeekCurve,
    period_ns: f64,
    write_settle_ns: Ns,
    head_switch_ns: Ns,
    overhead_ns: Ns,
    interface_rate: f64,
    capacity: u64,
    queue_depth: usize,
    sptf: bool,
    max_command_age_ns: Ns,
    write_cache: bool,
    cache_bytes: u64,
    readahead_bytes: u64,
    power_fail_ns: Ns,
    generation: u32,
    /// Where the head is: cylinder and head.
    cylinder: u32,
    head: u32,
    queue: VecDeque<Job>,
    busy: Option<Job>,
    seq: u64,
    segments: VecDeque<Segment>,
    cached: Vec<Option<CachedWrite>>,
    cached_bytes: u64,
    /// Writes waiting for buffer room.
    blocked: VecDeque<ReqId>,
    epoch: u64,
    epoch_live: VecDeque<u64>,
    epoch_base: u64,
    flushes: VecDeque<(ReqId, u64)>,
    lost: Vec<crate::LostWrite>,
    stats: HddStats,
}

#[derive(Clone, Copy, Debug, Default)]
struct HddStats {
    media_ops: u64,
    seek_ns: u64,
    rotation_ns: u64,
    transfer_ns: u64,
    cache_hits: u64,
    aged_commands: u64,
}

impl Hdd {
    pub fn from_settings(s: &Settings) -> Result<Self, ConfigError> {
        let c = HddConfig::from_settings(s);
        let period_ns = 60e9 / f64::from(c.rpm);
        let (outer, inner) = (c.outer_rate, c.inner_rate);
        if outer <= 0.0 || inner <= 0.0 || inner > outer {
            return Err(ConfigError::new(format!(
                "field 'media.inner_rate': expected a positive rate no higher than outer_rate ({outer} GB/s), got {inner} GB/s"
            )));
        }
        if c.interface_rate <= 0.0 {
            return Err(ConfigError::new(
                "field 'media.interface_rate': expected a positive rate, got 0",
            ));
        }
        let layout = Layout::new(
            c.capacity_bytes,
            c.heads,
            c.zones,
            outer,
            inner,
            period_ns,
            c.head_switch_ns,
        );
        let seek = SeekCurve::fit(
            layout.cylinders() - 1,
            c.track_to_track_ns,
            c.average_seek_ns,
            c.full_stroke_ns,
        )?;
        Ok(Hdd {
            layout,
            seek,
            period_ns,
            write_settle_ns: c.write_settle_ns,
            head_switch_ns: c.head_switch_ns,
            overhead_ns: c.command_overhead_ns,
            interface_rate: c.interface_rate,
            capacity: c.capacity_bytes,
            queue_depth: c.queue_depth as usize,
            sptf: c.scheduler == HddScheduler::Sptf,
            max_command_age_ns: c.max_command_age_ns,
            write_cache: c.write_cache,
            cache_bytes: c.cache_bytes,
            readahead_bytes: c.readahead_bytes,
            power_fail_ns: c.power_fail_ns,
            generation: 0,
            cylinder: 0,
            head: 0,
            queue: VecDeque::new(),
            busy: None,
            seq: 0,
            segments: VecDeque::new(),
            cached: Vec::new(),
            cached_bytes: 0,
            blocked: VecDeque::new(),
            epoch: 0,
            epoch_live: VecDeque::from([0]),
            epoch_base: 0,
            flushes: VecDeque::new(),
            lost: Vec::new(),
            stats: HddStats::default(),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    /// One revolution, ns.
    pub fn period_ns(&self) -> f64 {
        self.period_ns
    }

    fn bus_ns(&self, bytes: u64) -> Ns {
        (bytes as f64 / self.interface_rate).round() as Ns
    }

    /// Time from `now` until the head is over the first byte of `pos` (seek, then rotation).
    fn positioning_ns(&self, now: Ns, pos: &Position, write: bool) -> (Ns, Ns) {
        let distance = self.cylinder.abs_diff(pos.cylinder);
        let mut seek = self.seek.time_ns(distance);
        if distance == 0 && pos.head != self.head {
            seek = self.head_switch_ns;
        }
        if write {
            seek += self.write_settle_ns;
        }
        let arrive = now + seek;
        let angle_now = (arrive as f64 / self.period_ns).fract();
        let wait = (pos.angle - angle_now).rem_euclid(1.0) * self.period_ns;
        (seek, wait.ceil() as Ns)
    }

    fn enqueue(
        &mut self,
        kind: JobKind,
        write: bool,
        offset: u64,
        len: u64,
        ctx: &mut impl StageCtx<HddEvent>,
    ) {
        self.seq += 1;
        self.queue.push_back(Job {
            kind,
            write,
            offset,
            len,
            seq: self.seq,
            // Set again when it enters the window, if it waits above it.
            window_ns: ctx.now_ns(),
        });
        if self.busy.is_none() {
            self.dispatch(ctx);
        }
    }

    /// Starts the next command: the first in line (FIFO) or the one the head reaches first
    /// among the first `queue_depth` (SPTF).
    fn dispatch(&mut self, ctx: &mut impl StageCtx<HddEvent>) {
        let now = ctx.now_ns();
        if self.queue.is_empty() {
            return;
        }
        // The head leaves whatever it was reading ahead: the buffer keeps what it has read.
        for seg in &mut self.segments {
            if seg.active {
                seg.active = false;
                let read = (now.saturating_sub(seg.since_ns) as f64 * seg.rate) as u64;
                seg.end = seg.end.min(seg.start + read).max(seg.start);
            }
        }
        // The queue keeps arrival order, so its first command is the one longest in the window.
        let aged = self.max_command_age_ns > 0
            && now.saturating_sub(self.queue[0].window_ns) >= self.max_command_age_ns;
        let pick = if self.sptf && aged {
            self.stats.aged_commands += 1;
            0
        } else if self.sptf {
            let window = self.queue.len().min(self.queue_depth);
            (0..window)
                .min_by_key(|&i| {
                    let j = &self.queue[i];
                    let pos = self.layout.locate(j.offset);
                    let (s, r) = self.positioning_ns(now + self.overhead_ns, &pos, j.write);
                    (s + r, j.seq)
                })
                .expect("non-empty")
        } else {
            0
        };
        let job = self.queue.remove(pick).expect("in range");
        if let Some(entered) = self.queue.get_mut(self.queue_depth - 1) {
            // The first command waiting above the drive's queue takes the free slot.
            entered.window_ns = now;
        }
        let start = now + self.overhead_ns;
        let pos = self.layout.locate(job.offset);
        let (seek, rotation) = self.positioning_ns(start, &pos, job.write);
        let transfer = (job.len as f64 / pos.rate).ceil() as Ns;
        self.stats.media_ops += 1;
        self.stats.seek_ns += seek;
        self.stats.rotation_ns += rotation;
        self.stats.transfer_ns += transfer;
        let end_pos = self
            .layout
            .locate((job.offset + job.len.max(1) - 1).min(self.capacity - 1));
        self.cylinder = end_pos.cylinder;
        self.head = end_pos.head;
        if let JobKind::Host(id) = job.kind {
            ctx.reqs_mut()[id].t.media_start_ns = start;
        }
        let media_start = start + seek + rotation;
        if !job.write && self.readahead_bytes > 0 {
            // The data read and what follows stream into the buffer from the moment the head
            // reaches it; read-ahead continues until the next command moves the head.
            let end = (job.offset + job.len + self.readahead_bytes).min(self.capacity);
            self.add_segment(Segment {
                start: job.offset,
                end,
                since_ns: media_start,
                rate: pos.rate,
                active: true,
            });
        }
        self.busy = Some(job);
        ctx.schedule(media_start + transfer, HddEvent::MediaDone(self.generation));
    }

    fn add_segment(&mut self, seg: Segment) {
        let max_segments = (self.cache_bytes / self.readahead_bytes.max(1)).clamp(1, 64) as usize;
        self.segments
            .retain(|s| s.end <= seg.start || s.start >= seg.end);
        if self.segments.len() >= max_segments {
            self.segments.pop_front();
        }
        self.segments.push_back(seg);
    }

    /// When the buffer will hold all of [offset, offset + len), if a segment covers it. A hit
    /// on the segment being read ahead pushes its end on, as the host keeps consuming it.
    fn buffered_at(&mut self, offset: u64, len: u64) -> Option<Ns> {
        let last = offset + len.max(1) - 1;
        let (readahead, capacity) = (self.readahead_bytes, self.capacity);
        let seg = self
            .segments
            .iter_mut()
            .rev()
            .find(|s| s.start <= offset && last < s.end)?;
        if seg.active {
            seg.end = seg.end.max((last + 1 + readahead).min(capacity));
        }
        Some(seg.ready_at(last + 1))
    }

    fn on_media_done(&mut self, ctx: &mut impl StageCtx<HddEvent>) {
        let now = ctx.now_ns();
        let job = self.busy.take().expect("a command was in service");
        match job.kind {
            JobKind::Host(id) => {
                ctx.reqs_mut()[id].t.media_done_ns = now;
                let bus = if job.write { 0 } else { self.bus_ns(job.len) };
                // Reads stream to the host while the media delivers them; only the part the
                // interface is slower on shows.
                let media = (job.len as f64 / self.layout.locate(job.offset).rate) as Ns;
                let done = now + bus.saturating_sub(media);
                if done == now {
                    ctx.complete(id);
                } else {
                    ctx.schedule(done, HddEvent::Complete(id));
                }
            }
            JobKind::Destage(i) => {
                let w = self.cached[i as usize].take().expect("a cached write");
                self.cached_bytes -= w.len;
                let e = (w.epoch - self.epoch_base) as usize;
                self.epoch_live[e] -= 1;
                while self.epoch_live.len() > 1 && self.epoch_live[0] == 0 {
                    self.epoch_live.pop_front();
                    self.epoch_base += 1;
                }
                self.check_flushes(ctx);
                self.admit_blocked(ctx);
            }
        }
        self.dispatch(ctx);
    }

    fn check_flushes(&mut self, ctx: &mut impl StageCtx<HddEvent>) {
        while let Some(&(id, e)) = self.flushes.front() {
            if e >= self.epoch_base {
                break;
            }
            self.flushes.pop_front();
            ctx.reqs_mut()[id].t.media_done_ns = ctx.now_ns();
            ctx.complete(id);
        }
    }

    fn admit_blocked(&mut self, ctx: &mut impl StageCtx<HddEvent>) {
        while let Some(&id) = self.blocked.front() {
            let len = ctx.reqs()[id].len_bytes;
            if self.cached_bytes + len > self.cache_bytes && self.cached_bytes > 0 {
                break;
            }
            self.blocked.pop_front();
            self.cache_write(id, ctx);
        }
    }

    /// A write enters the buffer: it completes after its bus transfer and is destaged later.
    fn cache_write(&mut self, id: ReqId, ctx: &mut impl StageCtx<HddEvent>) {
        let now = ctx.now_ns();
        let req = ctx.reqs()[id];
        let record = CachedWrite {
            offset: req.offset_bytes,
            len: req.len_bytes,
            job: req.job,
            queued_ns: req.t.queued_ns,
            epoch: self.epoch,
        };
        *self.epoch_live.back_mut().expect("open epoch") += 1;
        self.cached_bytes += req.len_bytes;
        let slot = match self.cached.iter().position(Option::is_none) {
            Some(i) => {
                self.cached[i] = Some(record);
                i
            }
            None => {
                self.cached.push(Some(record));
                self.cached.len() - 1
            }
        } as u32;
        // Data written into the buffer also serves later reads of it.
        self.segments
            .retain(|s| s.end <= req.offset_bytes || s.start >= req.offset_bytes + req.len_bytes);
        let done = now + self.overhead_ns + self.bus_ns(req.len_bytes);
        ctx.reqs_mut()[id].t.media_start_ns = now;
        ctx.reqs_mut()[id].t.media_done_ns = done;
        ctx.schedule(done, HddEvent::Complete(id));
        self.enqueue(
            JobKind::Destage(slot),
            true,
            req.offset_bytes,
            req.len_bytes,
            ctx,
        );
    }

    fn power_fail(&mut self, ctx: &mut impl StageCtx<HddEvent>) {
        // Cached writes not on the platter are gone; so is every command in the drive.
        let mut lost: Vec<crate::LostWrite> = self
            .cached
            .iter()
            .flatten()
            .map(|w| crate::LostWrite {
                offset_bytes: w.offset,
                len_bytes: w.len,
                job: w.job,
                queued_ns: w.queued_ns,
                acknowledged: true,
            })
            .collect();
        let mut cancelled: Vec<ReqId> = Vec::new();
        let jobs: Vec<Job> = self
            .busy
            .take()
            .into_iter()
            .chain(self.queue.drain(..))
            .collect();
        for job in jobs {
            if let JobKind::Host(id) = job.kind {
                if job.write {
                    let r = ctx.reqs()[id];
                    lost.push(crate::LostWrite {
                        offset_bytes: r.offset_bytes,
                        len_bytes: r.len_bytes,
                        job: r.job,
                        queued_ns: r.t.queued_ns,
                        acknowledged: false,
                    });
                }
                cancelled.push(id);
            }
        }
        for id in self.blocked.drain(..) {
            let r = ctx.reqs()[id];
            lost.push(crate::LostWrite {
                offset_bytes: r.offset_bytes,
                len_bytes: r.len_bytes,
                job: r.job,
                queued_ns: r.t.queued_ns,
                acknowledged: false,
            });
            cancelled.push(id);
        }
        cancelled.extend(self.flushes.drain(..).map(|(id, _)| id));
        lost.sort_by_key(|l| (l.queued_ns, l.job, l.offset_bytes));
        self.lost.extend(lost);
        self.cached.clear();
        self.cached_bytes = 0;
        self.epoch_live = VecDeque::from([0]);
        self.epoch_base = self.epoch;
        self.segments.clear();
        // A MediaDone still pending belongs to the old generation and is ignored.
        self.generation = self.generation.wrapping_add(1);
        for id in cancelled {
            ctx.reqs_mut()[id].status = IoStatus::PowerLoss;
            ctx.complete(id);
        }
    }
}

impl Device for Hdd {
    fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    fn caps(&self) -> DeviceCaps {
        let mut caps = DeviceCaps::FUA | DeviceCaps::ROTATIONAL;
        if self.write_cache {
            caps |= DeviceCaps::VOLATILE_WRITE_CACHE;
        }
        caps
    }

    fn lost_writes(&self) -> &[crate::LostWrite] {
        &self.lost
    }
}

impl DeviceModel for Hdd {
    const NAME: &'static str = "hdd";
    const HELP: &'static str = "hard disk: zoned platters, fitted seek curve, rotation, read-ahead buffer, write cache, FIFO or SPTF queueing";
    const TUNABLES: &'static [Tunable] = HDD_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(settings: &Settings, _ctx: &BuildCtx<'_>) -> Result<Self, ConfigError> {
        Hdd::from_settings(settings)
    }
}

impl Stage for Hdd {
    type Event = HddEvent;

    /// A command only reaches the disk queue: it may run inside the controller's hook.
    const SUBMITS_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        <Self as crate::DeviceModel>::NAME
    }

    fn start(&mut self, ctx: &mut impl StageCtx<HddEvent>) {
        if self.power_fail_ns > 0 {
            ctx.schedule(self.power_fail_ns, HddEvent::PowerFail);
        }
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<HddEvent>) {
        let now = ctx.now_ns();
        let req = ctx.reqs()[id];
        if req.offset_bytes + req.len_bytes > self.capacity {
            ctx.reqs_mut()[id].status = IoStatus::MediaError;
            ctx.complete(id);
            return;
        }
        match req.op {
            Op::Read => {
                if let Some(ready) = self.buffered_at(req.offset_bytes, req.len_bytes)
                    && (self.busy.is_none() || ready <= now)
                {
                    // In the buffer (or arriving there while the head stays on it).
                    self.stats.cache_hits += 1;
                    let done = ready.max(now + self.overhead_ns) + self.bus_ns(req.len_bytes);
                    ctx.reqs_mut()[id].t.media_start_ns = now;
                    ctx.reqs_mut()[id].t.media_done_ns = done;
                    ctx.schedule(done, HddEvent::Complete(id));
                    return;
                }
                self.enqueue(
                    JobKind::Host(id),
                    false,
                    req.offset_bytes,
                    req.len_bytes,
                    ctx,
                );
            }
            Op::Write => {
                let through = !self.write_cache || req.flags.contains(ReqFlags::FUA);
                if through {
                    self.segments.retain(|s| {
                        s.end <= req.offset_bytes || s.start >= req.offset_bytes + req.len_bytes
                    });
                    self.enqueue(
                        JobKind::Host(id),
                        true,
                        req.offset_bytes,
                        req.len_bytes,
                        ctx,
                    );
                } else if self.cached_bytes + req.len_bytes > self.cache_bytes
                    && self.cached_bytes > 0
                {
                    self.blocked.push_back(id);
                } else {
                    self.cache_write(id, ctx);
                }
            }
            Op::Flush => {
                if !self.write_cache || self.cached.iter().all(Option::is_none) {
                    ctx.reqs_mut()[id].t.media_start_ns = now;
                    ctx.reqs_mut()[id].t.media_done_ns = now;
                    ctx.complete(id);
                } else {
                    let e = self.epoch;
                    self.epoch += 1;
                    self.epoch_live.push_back(0);
                    self.flushes.push_back((id, e));
                }
            }
            Op::Trim => {
                ctx.reqs_mut()[id].t.media_start_ns = now;
                ctx.reqs_mut()[id].t.media_done_ns = now;
                ctx.complete(id);
            }
        }
    }

    fn on_event(&mut self, ev: HddEvent, ctx: &mut impl StageCtx<HddEvent>) {
        match ev {
            HddEvent::MediaDone(generation) => {
                if generation == self.generation {
                    self.on_media_done(ctx);
                }
            }
            HddEvent::Complete(id) => ctx.complete(id),
            HddEvent::PowerFail => self.power_fail(ctx),
        }
    }

    /// A power failure sent down the path (`--power-fail-at`).
    fn control(&mut self, msg: &mut qoslab_engine::Control, ctx: &mut impl StageCtx<HddEvent>) {
        if msg.command == qoslab_engine::Command::PowerLoss {
            self.power_fail(ctx);
            msg.status = qoslab_engine::ControlStatus::Success;
        }
    }

    fn collect_lost_writes(&self, out: &mut Vec<crate::LostWrite>) {
        out.extend_from_slice(&self.lost);
    }

    /// Not built: `power_fail` works out its loss while it empties the cache, so a crash view
    /// of this drive is refused rather than guessed.
    fn collect_writes_at_risk(
        &self,
        _reqs: &qoslab_engine::Requests,
        _out: &mut Vec<crate::LostWrite>,
    ) -> bool {
        false
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let n = self.stats.media_ops.max(1) as f64;
        vec![
            ("media_commands".into(), self.stats.media_ops as f64),
            ("mean_seek_ns".into(), self.stats.seek_ns as f64 / n),
            ("mean_rotation_ns".into(), self.stats.rotation_ns as f64 / n),
            ("mean_transfer_ns".into(), self.stats.transfer_ns as f64 / n),
            ("buffer_hits".into(), self.stats.cache_hits as f64),
            ("aged_commands".into(), self.stats.aged_commands as f64),
            (
                "lost_acknowledged_writes".into(),
                self.lost.iter().filter(|l| l.acknowledged).count() as f64,
            ),
        ]
    }
}
