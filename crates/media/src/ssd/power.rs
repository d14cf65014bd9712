//! A power failure of the SSD: what a volatile cache loses (and what power-loss protection
//! saves), every outstanding request completed with `IoStatus::PowerLoss`, the lost writes
//! recorded for the durability check.

use qoslab_engine::{IoStatus, Op, StageCtx};

use super::{LostWrite, Ssd, SsdEvent, all_planes};

impl Ssd {
    // ---- power failure -----------------------------------------------------------------------

    /// The power fails now. Without PLP every write still in the cache is lost (whether or not
    /// it had completed); with PLP the cache reaches flash on stored energy and only writes
    /// still in flight to the device are lost. Every outstanding request completes with
    /// `IoStatus::PowerLoss`; the drive is back at once with what survived.
    pub fn power_fail(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        // Programs of host data still running are lost (a destage with PLP is not: the
        // cache it came from survives).
        self.power_epoch += 1;
        let lost_before = self.lost.len();
        let mut record_waiters = Vec::new();
        if self.volatile_cache() {
            for rec in self.cache.live_records() {
                self.lost.push(LostWrite {
                    offset_bytes: rec.offset_bytes,
                    len_bytes: rec.len_bytes,
                    job: rec.job,
                    queued_ns: rec.queued_ns,
                    acknowledged: rec.acknowledged,
                });
                if rec.waiter != u32::MAX {
                    record_waiters.push(rec.waiter);
                }
            }
            self.cache.clear();
            self.cmt.clear();
            self.destage_inflight.iter_mut().for_each(|n| *n = 0);
            self.destage_room = all_planes(self.destage_inflight.len());
        }
        let free: std::collections::HashSet<u32> = self.host.free.iter().copied().collect();
        let mut cancelled = Vec::new();
        for slot in 0..self.host.items.len() as u32 {
            if free.contains(&slot) || self.host[slot].dead {
                continue;
            }
            let id = self.host[slot].id;
            let req = ctx.reqs()[id];
            if req.op == Op::Write && !record_waiters.contains(&slot) {
                self.lost.push(LostWrite {
                    offset_bytes: req.offset_bytes,
                    len_bytes: req.len_bytes,
                    job: req.job,
                    queued_ns: req.t.queued_ns,
                    acknowledged: false,
                });
            }
            self.host[slot].dead = true;
            if self.volatile_cache() {
                // The cache these pages were reserved in is gone.
                self.host[slot].reserved = 0;
            }
            cancelled.push(id);
        }
        // Requests waiting on nothing that runs are freed now; the others when their media
        // work ends.
        let idle = self
            .flush_waiters
            .drain(..)
            .map(|(slot, _, _)| slot)
            .chain(self.blocked.drain(..))
            .chain(record_waiters);
        for slot in idle.collect::<Vec<_>>() {
            if self.host[slot].reserved > 0 {
                self.cache.release(self.host[slot].reserved);
            }
            self.host.remove(slot);
        }
        self.lost[lost_before..].sort_by_key(|l| (l.queued_ns, l.job, l.offset_bytes));
        for id in cancelled {
            ctx.reqs_mut()[id].status = IoStatus::PowerLoss;
            ctx.complete(id);
        }
    }
}
