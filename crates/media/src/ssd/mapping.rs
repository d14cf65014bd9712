//! The SSD's mapping on the I/O path: a page's work waits for its translation page when the
//! mapping cache misses (one flash read per translation page, however many wait), mapping
//! write-backs, and what a known mapping starts (a flash read, a read-modify-write, a program).
//! The mapping cache itself is `cmt.rs`, the page map `ftl.rs`.

use qoslab_engine::StageCtx;

use super::flash::{FlashOp, OpClass, OpKind};
use super::ftl::NONE;
use super::{Cont, Ssd, SsdEvent, WaitNode, Work, WorkKind};

impl Ssd {
    // ---- mapping -----------------------------------------------------------------------------

    /// Runs `work` once its mapping entry is in DRAM.
    pub(super) fn with_mapping(&mut self, mut work: Work, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.cfg.mapping_cached {
            work.cmt_slot = self.cmt.lookup_slot(work.lpa).unwrap_or(NONE);
        }
        if self.cfg.mapping_cached && work.cmt_slot == NONE {
            // The page's map entry is read when the translation page arrives.
            self.ftl.prefetch_lookup(work.lpa);
            let tpage = work.lpa / self.cfg.translation_entries_per_page;
            if work.kind == WorkKind::Read && self.traced(work.owner) {
                let ppa = self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(work.lpa));
                let usage = self.flash.die_usage(ppa, ctx.now_ns());
                self.traces[work.owner as usize].mapping_die_ns = usage;
            }
            let node = self.wait_nodes.insert(WaitNode { work, next: NONE });
            match self.mapping_waits.get_mut(&tpage) {
                Some((_, last)) => {
                    let tail = std::mem::replace(last, node);
                    self.wait_nodes[tail].next = node;
                }
                None => {
                    self.mapping_waits.insert(tpage, (node, node));
                    self.stats.mapping_reads += 1;
                    let op = FlashOp {
                        kind: OpKind::Read,
                        class: OpClass::Mapping,
                        ppa: self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(work.lpa)),
                        bytes: self.cfg.translation_read_bytes,
                        owner: Cont::Mapping(tpage),
                    };
                    self.flash.submit(op, ctx);
                }
            }
            return;
        }
        self.mapped(work, ctx);
    }

    /// Where translation page `tpage` (of a logical page of NVM set `set`) sits: striped like
    /// a logical page over the set's planes. Translation pages live in a region of their own,
    /// outside the blocks GC manages.
    pub(super) fn translation_ppa(&self, tpage: u32, set: u16) -> u32 {
        let (plane, local) = self.cfg.geo.stripe_in_set(set, tpage);
        let geo = &self.cfg.geo;
        plane * geo.pages_per_plane() + geo.per_plane.modulo(local)
    }

    /// Where a never-written logical page would be.
    pub(super) fn home_ppa(&self, lpa: u32) -> u32 {
        let (plane, local) = self.cfg.geo.stripe(lpa);
        let geo = &self.cfg.geo;
        plane * geo.pages_per_plane() + geo.per_plane.modulo(local)
    }

    pub(super) fn mapping_write(&mut self, lpa: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        self.stats.mapping_writes += 1;
        let tpage = lpa / self.cfg.translation_entries_per_page;
        let op = FlashOp {
            kind: OpKind::Program,
            class: OpClass::HostWrite,
            ppa: self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(lpa)),
            bytes: self.cfg.geo.page_bytes,
            owner: Cont::MappingWrite,
        };
        self.flash.submit(op, ctx);
    }

    pub(super) fn mapping_read_done(&mut self, tpage: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let Some((mut node, _)) = self.mapping_waits.remove(&tpage) else {
            return;
        };
        while node != NONE {
            let WaitNode { mut work, next } = self.wait_nodes.remove(node);
            if work.kind == WorkKind::Read && self.traced(work.owner) {
                let ppa = self.translation_ppa(tpage, self.cfg.geo.set_of_lpa(work.lpa));
                let usage = self.flash.die_usage(ppa, ctx.now_ns());
                let t = &mut self.traces[work.owner as usize];
                for (spent, total) in t.mapping_die_ns.iter_mut().zip(usage) {
                    *spent = total - *spent;
                }
            }
            let (evicted, slot) = self.cmt.insert_at(work.lpa, false);
            work.cmt_slot = slot;
            if let Some(evicted) = evicted {
                self.mapping_write(evicted, ctx);
            }
            self.mapped(work, ctx);
            node = next;
        }
    }

    /// The mapping of `work`'s page is known: read it, or prepare its program.
    pub(super) fn mapped(&mut self, work: Work, ctx: &mut impl StageCtx<SsdEvent>) {
        match work.kind {
            WorkKind::Read => {
                let mut ppa = self.ftl.lookup(work.lpa);
                if ppa == NONE {
                    if !self.cfg.unmapped_reads_hit_flash {
                        self.part_done(work.owner, ctx);
                        return;
                    }
                    // Never written: read where the page would be, as MQSim does.
                    ppa = self.home_ppa(work.lpa);
                }
                if self.traced(work.owner) && !self.host[work.owner].dead {
                    let id = self.host[work.owner].id;
                    let service = self.copies((ctx.reqs()[id].nsid - 1) as u16);
                    let now = ctx.now_ns();
                    let t = &mut self.traces[work.owner as usize];
                    t.flash_queued_ns = now;
                    t.die_ns = self.flash.die_usage(ppa, now);
                    t.at_service = service;
                }
                let op = FlashOp {
                    kind: OpKind::Read,
                    class: OpClass::HostRead,
                    ppa,
                    bytes: work.bytes,
                    owner: Cont::Read(self.works.insert(work)),
                };
                self.flash.submit(op, ctx);
            }
            WorkKind::Destage | WorkKind::Direct => {
                let old = self.ftl.lookup(work.lpa);
                if work.kind == WorkKind::Destage {
                    self.cache.prefetch_destage_done(&self.destages[work.owner]);
                }
                let partial = work.bytes < self.cfg.geo.page_bytes;
                if partial && old != NONE {
                    // The rest of the page is on flash: read it, then program the whole page.
                    self.stats.rmw_reads += 1;
                    let op = FlashOp {
                        kind: OpKind::Read,
                        class: OpClass::HostWrite,
                        ppa: old,
                        bytes: self.cfg.geo.page_bytes - work.bytes,
                        owner: Cont::Rmw(self.works.insert(work)),
                    };
                    self.flash.submit(op, ctx);
                } else {
                    self.program(work, ctx);
                }
            }
        }
    }
}
