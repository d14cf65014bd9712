//! The host path of the SSD: a request's entry (read, write, FLUSH, trim), its split into
//! logical pages, the checks of its namespace and range, and its completion once every part is
//! done (after the controller overhead). Where a part goes next lives beside: the DRAM and the
//! write cache (`cache_path`), the mapping (`mapping`), flash programs and GC (`flash_work`).

use qoslab_engine::{Divisor, IoStatus, Ns, Op, ReqFlags, ReqId, StageCtx};

use super::ftl::NONE;
use super::gate::{self, GateCaps};
use super::slow_reads::{Copies, ReadTrace};
use super::{DramJob, HostIo, Ssd, SsdEvent, Work, WorkKind};

impl Ssd {
    // ---- request entry points --------------------------------------------------------------

    pub(super) fn new_slot(&mut self, id: ReqId, parts: u32, overhead_ns: Ns) -> u32 {
        self.host.insert(HostIo {
            id,
            dead: false,
            parts,
            overhead_ns,
            reserved: 0,
        })
    }

    /// Whether the read in host slot `slot` is traced (the slow-read diagnostic).
    #[inline]
    pub(super) fn traced(&self, slot: u32) -> bool {
        self.slow_reads.is_some() && self.traces[slot as usize].traced
    }

    /// Where the copies stand for a read of NVM set `set` (the slow-read diagnostic).
    pub(super) fn copies(&self, set: u16) -> Copies {
        Copies {
            own: self.gate.window(set),
            other_deterministic: (0..self.cfg.geo.sets() as u16)
                .any(|s| s != set && self.gate.window(s) == gate::WindowState::Deterministic),
        }
    }

    /// Whether the drive has namespace `nsid` (one per NVM set, numbered from 1).
    pub(super) fn has_namespace(&self, nsid: u32) -> bool {
        nsid >= 1 && nsid <= self.cfg.geo.sets()
    }

    /// Where request `r` (of a namespace the drive has) lies on the drive: (byte offset from
    /// the start of the drive's logical space, length, the end of its namespace's logical
    /// pages). Namespace `n` is NVM set `n - 1`'s share of the logical pages.
    #[inline]
    pub(super) fn extent(&self, r: &qoslab_engine::Request) -> (u64, u64, u64) {
        let per_set = u64::from(self.cfg.geo.set_logical_pages().min(self.cfg.logical_pages));
        let base = u64::from(r.nsid - 1) * per_set;
        let page = u64::from(self.cfg.geo.page_bytes);
        (base * page + r.offset_bytes, r.len_bytes, base + per_set)
    }

    /// Logical pages of a byte range: (lpa, byte offset in page, bytes).
    pub(super) fn pages(
        &self,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = (u64, u32, u32)> + Clone + use<> {
        let page = u64::from(self.cfg.geo.page_bytes);
        let div = self.cfg.geo.page_bytes_div;
        let end = offset + len.max(1);
        let first = div.quot_u64(offset);
        let last = div.quot_u64(end - 1);
        (first..=last).map(move |lpa| {
            let start = offset.max(lpa * page);
            let stop = end.min((lpa + 1) * page);
            (lpa, (start - lpa * page) as u32, (stop - start) as u32)
        })
    }

    pub(super) fn sector_mask(&self, start: u32, bytes: u32) -> u64 {
        let s = Divisor::new(self.cfg.sector_bytes());
        let first = s.quot(start);
        let last = s.quot(start + bytes.max(1) - 1);
        let n = last - first + 1;
        let ones = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        ones << first
    }

    pub(super) fn submit_read(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let (offset, len, end) = self.extent(&ctx.reqs()[id]);
        let parts = self.pages(offset, len).count() as u32;
        let slot = self.new_slot(id, parts, self.cfg.read_overhead_ns);
        if self.slow_reads.is_some() {
            // Reads of one page only: the study's and fio's 4 KiB reads are.
            let r = &ctx.reqs()[id];
            let (queued, set) = (r.t.queued_ns, (r.nsid - 1) as u16);
            let at = self.copies(set);
            let now = ctx.now_ns();
            if self.traces.len() <= slot as usize {
                self.traces.resize(slot as usize + 1, ReadTrace::default());
            }
            self.traces[slot as usize] = ReadTrace {
                queued_ns: queued,
                media_start_ns: now,
                traced: parts == 1,
                at_arrival: at,
                ..ReadTrace::default()
            };
        }
        for (lpa, start, bytes) in self.pages(offset, len) {
            if lpa >= end {
                self.out_of_range(slot, ctx);
                continue;
            }
            let lpa = lpa as u32;
            if self.cfg.cache_pages > 0 {
                let mask = self.sector_mask(start, bytes);
                if self.cache.read_hit(lpa, mask) {
                    self.stats.cache_read_hits += 1;
                    self.dram_request(
                        DramJob {
                            slot,
                            bytes: u64::from(bytes),
                            write: false,
                        },
                        ctx,
                    );
                    continue;
                }
            }
            let work = Work {
                kind: WorkKind::Read,
                lpa,
                bytes,
                owner: slot,
                epoch: self.power_epoch,
                cmt_slot: NONE,
            };
            self.with_mapping(work, ctx);
        }
    }

    pub(super) fn out_of_range(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        self.stats.out_of_range += 1;
        let id = self.host[slot].id;
        if !self.host[slot].dead {
            ctx.reqs_mut()[id].status = IoStatus::MediaError;
        }
        self.part_done(slot, ctx);
    }

    pub(super) fn submit_write(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let flags = ctx.reqs()[id].flags;
        if flags.contains(ReqFlags::PREFLUSH) && self.volatile_cache() {
            let slot = self.new_slot(id, 1, self.cfg.write_overhead_ns);
            let epoch = self.cache.close_epoch();
            if self.cache.drained(epoch) {
                self.start_write(slot, ctx);
            } else {
                self.flush_waiters.push_back((slot, epoch, true));
                self.pump_all(ctx);
            }
            return;
        }
        let slot = self.new_slot(id, 1, self.cfg.write_overhead_ns);
        self.start_write(slot, ctx);
    }

    pub(super) fn volatile_cache(&self) -> bool {
        self.cfg.cache_pages > 0 && !self.cfg.plp
    }

    /// Starts a write whose pre-flush (if any) is done.
    pub(super) fn start_write(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let id = self.host[slot].id;
        let (offset, len, end) = self.extent(&ctx.reqs()[id]);
        if self.cfg.cache_pages == 0 {
            let set = (ctx.reqs()[id].nsid - 1) as u16;
            if self.gate_caps.contains(GateCaps::CLOSES)
                && !self.gate.destage_allowed(set, ctx.now_ns())
            {
                // Without a cache to hold it, a write held back by the gate must be
                // programmed now: background work the gate hears of.
                self.gate_hook(ctx, |g, io| g.forced(set, io));
            }
            self.host[slot].parts = self.pages(offset, len).count() as u32;
            for (lpa, _, bytes) in self.pages(offset, len) {
                if lpa >= end {
                    self.out_of_range(slot, ctx);
                    continue;
                }
                let work = Work {
                    kind: WorkKind::Direct,
                    lpa: lpa as u32,
                    bytes,
                    owner: slot,
                    epoch: self.power_epoch,
                    cmt_slot: NONE,
                };
                self.with_mapping(work, ctx);
            }
            return;
        }
        if self.pages(offset, len).any(|(lpa, _, _)| lpa >= end) {
            self.out_of_range(slot, ctx);
            return;
        }
        if !self.blocked.is_empty() || !self.try_admit(slot, ctx) {
            self.blocked.push_back(slot);
            self.pump_all(ctx);
        }
    }

    /// Reserves cache room for a write and starts moving its data into DRAM.
    pub(super) fn try_admit(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) -> bool {
        let id = self.host[slot].id;
        let (offset, len, _) = self.extent(&ctx.reqs()[id]);
        let new_pages = self
            .pages(offset, len)
            .filter(|&(lpa, _, _)| !self.cache.holds(lpa as u32))
            .count() as u32;
        // A write larger than the whole cache is admitted into an empty one.
        let fits = self.cache.room() >= new_pages || self.cache.room() == self.cache.capacity();
        if !fits {
            return false;
        }
        self.cache.reserve(new_pages);
        self.host[slot].reserved = new_pages;
        self.dram_request(
            DramJob {
                slot,
                bytes: len,
                write: true,
            },
            ctx,
        );
        true
    }

    pub(super) fn unblock_writes(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        while let Some(&slot) = self.blocked.front() {
            if !self.try_admit(slot, ctx) {
                break;
            }
            self.blocked.pop_front();
        }
    }

    pub(super) fn submit_flush(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let slot = self.new_slot(id, 1, self.cfg.flush_overhead_ns);
        if !self.volatile_cache() {
            self.part_done(slot, ctx);
            return;
        }
        let epoch = self.cache.close_epoch();
        if self.cache.drained(epoch) {
            self.part_done(slot, ctx);
        } else {
            self.flush_waiters.push_back((slot, epoch, false));
            self.pump_all(ctx);
        }
    }

    pub(super) fn submit_trim(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
        let (offset, len, end) = self.extent(&ctx.reqs()[id]);
        let page = self.cfg.geo.page_bytes;
        let slot = self.new_slot(id, 1, self.cfg.write_overhead_ns);
        for (lpa, _, bytes) in self.pages(offset, len) {
            // Only whole pages can be deallocated; partial ones keep their data.
            if bytes != page || lpa >= end {
                continue;
            }
            let lpa = lpa as u32;
            let mut durable = std::mem::take(&mut self.scratch_durable);
            self.cache.discard(lpa, &mut durable);
            self.settle(&mut durable, ctx);
            self.scratch_durable = durable;
            self.ftl.trim(lpa);
            if self.cfg.mapping_cached
                && let Some(evicted) = self.cmt.update(lpa)
            {
                self.mapping_write(evicted, ctx);
            }
        }
        self.check_flushes(ctx);
        self.part_done(slot, ctx);
    }

    // ---- completion ---------------------------------------------------------------------------

    pub(super) fn part_done(&mut self, slot: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let io = &mut self.host[slot];
        io.parts -= 1;
        if io.parts > 0 {
            return;
        }
        let io = self.host.remove(slot);
        if io.dead {
            return;
        }
        let now = ctx.now_ns();
        ctx.reqs_mut()[io.id].t.media_done_ns = now;
        if ctx.reqs()[io.id].op == Op::Read && self.traced(slot) {
            let set = (ctx.reqs()[io.id].nsid - 1) as u16;
            let mut t = self.traces[slot as usize];
            t.done_ns = now;
            t.at_done = self.copies(set);
            self.slow_reads.as_mut().expect("checked").record(t);
        }
        if io.overhead_ns == 0 {
            ctx.complete(io.id);
        } else {
            ctx.schedule(now + io.overhead_ns, SsdEvent::Complete(io.id));
        }
    }
}
