//! The SSD's DRAM and write cache at work: DRAM accesses one at a time, a write's data
//! entering the cache, destaging dirty pages per plane (what the GC gate allows), FUA records
//! and FLUSHes waiting for their epoch to drain. The cache's own bookkeeping is `cache.rs`.

use qoslab_engine::{ReqFlags, StageCtx};

use super::ftl::NONE;
use super::gate::GateCaps;
use super::{DramJob, Ssd, SsdEvent, Work, WorkKind};

impl Ssd {
    // ---- DRAM --------------------------------------------------------------------------------

    pub(super) fn dram_request(&mut self, job: DramJob, ctx: &mut impl StageCtx<SsdEvent>) {
        if !job.write && self.traced(job.slot) {
            let t = &mut self.traces[job.slot as usize];
            t.cache_hit = true;
            t.dram_asked_ns = ctx.now_ns();
        }
        if self.dram_busy.is_none() {
            self.dram_start(job, ctx);
        } else {
            self.dram_queue.push_back(job);
        }
    }

    pub(super) fn dram_start(&mut self, job: DramJob, ctx: &mut impl StageCtx<SsdEvent>) {
        if !job.write && self.traced(job.slot) && !self.host[job.slot].dead {
            let id = self.host[job.slot].id;
            let service = self.copies((ctx.reqs()[id].nsid - 1) as u16);
            let t = &mut self.traces[job.slot as usize];
            t.dram_start_ns = ctx.now_ns();
            t.at_service = service;
        }
        self.dram_busy = Some(job);
        let at = ctx.now_ns() + self.cfg.dram_access_ns(job.bytes);
        ctx.schedule(at, SsdEvent::DramDone);
    }

    pub(super) fn on_dram_done(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        let job = self.dram_busy.take().expect("a DRAM access was running");
        if !job.write && self.traced(job.slot) {
            self.traces[job.slot as usize].dram_done_ns = ctx.now_ns();
        }
        if let Some(next) = self.dram_queue.pop_front() {
            self.dram_start(next, ctx);
        }
        if job.write {
            self.write_into_cache(job.slot, ctx);
        } else {
            self.part_done(job.slot, ctx);
        }
    }

    /// A write's data is in DRAM: it becomes a record and its pages dirty.
    pub(super) fn write_into_cache(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let io = self.host[slot];
        self.cache.release(io.reserved);
        self.host[slot].reserved = 0;
        if io.dead {
            // The power failed while the data was on its way: it never entered the cache.
            self.part_done(slot, ctx);
            return;
        }
        let req = ctx.reqs()[io.id];
        let (offset, len, _) = self.extent(&req);
        let pages = self.pages(offset, len);
        let fua = req.flags.contains(ReqFlags::FUA) && !self.cfg.plp;
        let rec = self.cache.new_record(
            req.offset_bytes,
            req.len_bytes,
            req.job,
            req.t.queued_ns,
            pages.clone().count() as u32,
            if fua { slot } else { u32::MAX },
        );
        for (lpa, start, bytes) in pages {
            let lpa = lpa as u32;
            let plane = self.cfg.geo.stripe(lpa).0;
            let mask = self.sector_mask(start, bytes);
            self.cache.write(lpa, plane, mask, rec);
            if fua {
                self.cache.promote(lpa);
            }
            self.pump(plane, ctx);
        }
        if !fua {
            self.part_done(slot, ctx);
        }
    }

    // ---- destaging ---------------------------------------------------------------------------

    pub(super) fn destage_wanted(&self) -> bool {
        self.cfg.writeback_start == 0.0
            || f64::from(self.cache.dirty_entries)
                > self.cfg.writeback_start * f64::from(self.cache.capacity())
            || !self.flush_waiters.is_empty()
            || !self.blocked.is_empty()
    }

    /// Starts destaging `plane`'s dirty pages up to its in-flight limit (only FUA pages when
    /// the cache is not due to destage).
    pub(super) fn pump(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        while self.destage_inflight[plane as usize] < self.cfg.destage_per_plane {
            let urgent = self.cache.urgent(plane);
            if !(self.destage_wanted() || urgent) {
                break;
            }
            if self.gate_caps.contains(GateCaps::CLOSES)
                && !urgent
                && self.flush_waiters.is_empty()
                && !self.destage_gate_open(plane, ctx)
            {
                break;
            }
            let Some(d) = self.cache.next_destage(plane) else {
                break;
            };
            self.destage_inflight[plane as usize] += 1;
            if self.destage_inflight[plane as usize] == self.cfg.destage_per_plane {
                self.destage_room[plane as usize / 64] &= !(1 << (plane % 64));
            }
            let slot = self.destages.insert(d);
            let covered = d.present.count_ones() * self.cfg.sector_bytes();
            let work = Work {
                kind: WorkKind::Destage,
                lpa: d.lpa,
                bytes: covered.min(self.cfg.geo.page_bytes),
                owner: slot,
                epoch: self.power_epoch,
                cmt_slot: NONE,
            };
            self.with_mapping(work, ctx);
        }
    }

    pub(super) fn pump_all(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.cache.dirty_entries == 0 {
            return;
        }
        // Every plane in order, as a scan of all of them would visit them; a pump changes only
        // its own plane's bit.
        for word in 0..self.destage_room.len() {
            let mut bits = self.destage_room[word];
            while bits != 0 {
                let plane = (word * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                if self.cache.queued(plane) > 0 {
                    self.pump(plane, ctx);
                }
            }
        }
    }

    /// Whether the gate lets `plane` destage now. Writes waiting for room in a full cache force
    /// it open (the gate hears of it), or through.
    pub(super) fn destage_gate_open(
        &mut self,
        plane: u32,
        ctx: &mut impl StageCtx<SsdEvent>,
    ) -> bool {
        let set = self.cfg.geo.set_of_plane(plane);
        if self.gate.destage_allowed(set, ctx.now_ns()) {
            return true;
        }
        if self.blocked.is_empty() || self.cache.queued(plane) == 0 {
            return false;
        }
        self.gate_hook(ctx, |g, io| g.forced(set, io));
        if !self.gate.destage_allowed(set, ctx.now_ns()) {
            self.stats.destages_forced += 1;
        }
        true
    }

    pub(super) fn destage_done(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let d = self.destages.remove(slot);
        let plane = self.cfg.geo.stripe(d.lpa).0;
        self.destage_inflight[plane as usize] -= 1;
        self.destage_room[plane as usize / 64] |= 1 << (plane % 64);
        let mut durable = std::mem::take(&mut self.scratch_durable);
        self.cache.destage_done(&d, &mut durable);
        self.settle(&mut durable, ctx);
        self.scratch_durable = durable;
        self.check_flushes(ctx);
        self.unblock_writes(ctx);
        self.pump(plane, ctx);
    }

    /// Records that reached flash: wake their FUA writers and free them.
    pub(super) fn settle(&mut self, durable: &mut Vec<u32>, ctx: &mut impl StageCtx<SsdEvent>) {
        for r in durable.drain(..) {
            let waiter = self.cache.record(r).waiter;
            self.cache.free_record(r);
            if waiter != u32::MAX {
                self.part_done(waiter, ctx);
            }
        }
    }

    pub(super) fn check_flushes(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        while let Some(&(slot, epoch, then_write)) = self.flush_waiters.front() {
            if !self.cache.drained(epoch) {
                break;
            }
            self.flush_waiters.pop_front();
            if then_write {
                self.start_write(slot, ctx);
            } else {
                self.part_done(slot, ctx);
            }
        }
    }
}
