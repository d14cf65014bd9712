//! Programs, garbage collection and the flash array's completions: a page program waits for a
//! free page of its plane, GC collects a victim per plane when free blocks run low (when the GC
//! gate allows, or below the floor whatever it says), and each finished flash operation moves
//! its work on (read done, mapping arrived, read-modify-write, commit, GC copy, erase).

use qoslab_engine::StageCtx;

use super::flash::{FlashOp, OpClass, OpKind};
use super::gate::GateCaps;
use super::{Cont, PlaneGc, Ssd, SsdEvent, Work, WorkKind};

impl Ssd {
    pub(super) fn program(&mut self, work: Work, ctx: &mut impl StageCtx<SsdEvent>) {
        let plane = self.cfg.geo.stripe(work.lpa).0;
        if !self.plane_waiters[plane as usize].is_empty() {
            self.plane_waiters[plane as usize].push_back(work);
        } else if let Some(ppa) = self.ftl.alloc_host(plane) {
            self.issue_program(work, ppa, ctx);
        } else {
            self.plane_waiters[plane as usize].push_back(work);
        }
        self.maybe_gc(plane, ctx);
    }

    pub(super) fn issue_program(
        &mut self,
        work: Work,
        ppa: u32,
        ctx: &mut impl StageCtx<SsdEvent>,
    ) {
        let op = FlashOp {
            kind: OpKind::Program,
            class: OpClass::HostWrite,
            ppa,
            bytes: self.cfg.geo.page_bytes,
            owner: Cont::Program(self.works.insert(work)),
        };
        self.flash.submit(op, ctx);
    }

    pub(super) fn program_done(&mut self, work: Work, ppa: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        if work.epoch != self.power_epoch && !(work.kind == WorkKind::Destage && self.cfg.plp) {
            // The power failed after this program started: its data is lost (a destage slot
            // of the old epoch has nobody to tell).
            self.ftl.abort_program(ppa);
            match work.kind {
                WorkKind::Destage => {
                    self.destages.remove(work.owner);
                }
                WorkKind::Direct => self.part_done(work.owner, ctx),
                WorkKind::Read => unreachable!("reads do not program"),
            }
            return;
        }
        self.ftl.commit_host(work.lpa, ppa);
        if self.cfg.mapping_cached
            && let Some(evicted) = self.cmt.update_at(work.lpa, work.cmt_slot)
        {
            self.mapping_write(evicted, ctx);
        }
        match work.kind {
            WorkKind::Destage => self.destage_done(work.owner, ctx),
            WorkKind::Direct => self.part_done(work.owner, ctx),
            WorkKind::Read => unreachable!("reads do not program"),
        }
    }

    // ---- garbage collection ------------------------------------------------------------------

    /// Starts collecting a victim in `plane` if its free blocks ran low, none is running and
    /// the GC gate lets GC work now (below the free-block floor it runs whatever the gate says);
    /// GC the gate keeps from starting starts when it opens.
    pub(super) fn maybe_gc(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        loop {
            let free = self.ftl.free_blocks(plane);
            if self.gc[plane as usize].victim.is_some() || free >= self.cfg.gc_start_free_blocks {
                return;
            }
            if self.gate_caps.contains(GateCaps::CLOSES) {
                let set = self.cfg.geo.set_of_plane(plane);
                if !self.gate.gc_allowed(set, ctx.now_ns()) {
                    if free >= self.cfg.gc_min_free_blocks {
                        self.gc[plane as usize].deferred = true;
                        return;
                    }
                    self.gate_hook(ctx, |g, io| g.forced(set, io));
                    if !self.gate.gc_allowed(set, ctx.now_ns()) {
                        self.stats.gc_forced_victims += 1;
                    }
                    // The gate, opened, may have started this plane's GC already.
                    if self.gc[plane as usize].victim.is_some() {
                        return;
                    }
                }
            }
            self.gc[plane as usize].deferred = false;
            let Some(victim) = self.ftl.select_victim(plane) else {
                return;
            };
            let mut moves = std::mem::take(&mut self.scratch_moves);
            moves.clear();
            moves.extend(
                self.ftl
                    .valid_in(victim)
                    .map(|(src, lpa)| (src, Cont::GcRead { lpa })),
            );
            if !self.cfg.gc_timed {
                for &(src, _) in &moves {
                    let dst = self.ftl.alloc_gc(plane).expect("GC always has a block");
                    self.ftl.commit_gc(src, dst);
                }
                self.scratch_moves = moves;
                self.ftl.erase_done(victim);
                self.retry_plane(plane, ctx);
                continue;
            }
            self.gc[plane as usize] = PlaneGc {
                victim: Some(victim),
                moves_left: moves.len() as u32,
                deferred: false,
            };
            if moves.is_empty() {
                self.issue_erase(victim, ctx);
            }
            self.flash
                .submit_gc_reads(&moves, self.cfg.geo.page_bytes, ctx);
            self.scratch_moves = moves;
            return;
        }
    }

    pub(super) fn issue_erase(&mut self, block: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let op = FlashOp {
            kind: OpKind::Erase,
            class: OpClass::Gc,
            ppa: self.cfg.geo.first_ppa(block),
            bytes: 0,
            owner: Cont::Erase,
        };
        self.flash.submit(op, ctx);
    }

    /// Gives freed pages of `plane` to the programs waiting for them.
    pub(super) fn retry_plane(&mut self, plane: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        while let Some(&work) = self.plane_waiters[plane as usize].front() {
            let Some(ppa) = self.ftl.alloc_host(plane) else {
                break;
            };
            self.plane_waiters[plane as usize].pop_front();
            self.issue_program(work, ppa, ctx);
        }
    }

    // ---- flash completions -------------------------------------------------------------------

    /// Handles what the flash array finished or started since the last call.
    // Speed: inlined, so that the events after which the array has nothing to report skip
    // the call (it runs after every event of the drive).
    #[inline(always)]
    pub(super) fn drain_flash(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        if !self.flash.programs_started.is_empty()
            || !self.flash.done.is_empty()
            || !self.flash.quiet.is_empty()
        {
            self.drain_flash_now(ctx);
        }
    }

    pub(super) fn drain_flash_now(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
        // A program commits when it ends, a program time from now: the map entries the commit
        // rewrites are loaded meanwhile.
        while let Some(owner) = self.flash.programs_started.pop() {
            match owner {
                Cont::GcProgram { lpa, .. } => self.ftl.prefetch_lookup(lpa),
                Cont::Program(work) => {
                    let old = self.ftl.lookup(self.works[work].lpa);
                    self.ftl.prefetch_rewrite(old);
                }
                _ => {}
            }
        }
        while let Some(op) = self.flash.done.pop() {
            match op.owner {
                Cont::Read(work) => {
                    let work = self.works.remove(work);
                    if self.traced(work.owner) {
                        let now = ctx.now_ns();
                        let usage = self.flash.die_usage(op.ppa, now);
                        let t = &mut self.traces[work.owner as usize];
                        t.flash_done_ns = now;
                        for (spent, total) in t.die_ns.iter_mut().zip(usage) {
                            *spent = total - *spent;
                        }
                    }
                    self.part_done(work.owner, ctx);
                }
                Cont::Mapping(tpage) => self.mapping_read_done(tpage, ctx),
                Cont::MappingWrite => {}
                Cont::Rmw(work) => {
                    let work = self.works.remove(work);
                    self.program(work, ctx);
                }
                Cont::Program(work) => {
                    let work = self.works.remove(work);
                    self.program_done(work, op.ppa, ctx);
                }
                Cont::GcRead { lpa } => {
                    let plane = self.cfg.geo.plane_of_ppa(op.ppa);
                    let dst = self.ftl.alloc_gc(plane).expect("GC always has a block");
                    let program = FlashOp {
                        kind: OpKind::Program,
                        class: OpClass::Gc,
                        ppa: dst,
                        bytes: self.cfg.geo.page_bytes,
                        owner: Cont::GcProgram { src: op.ppa, lpa },
                    };
                    self.flash.submit(program, ctx);
                }
                Cont::GcProgram { src, .. } => {
                    self.ftl.commit_gc(src, op.ppa);
                    let plane = self.cfg.geo.plane_of_ppa(op.ppa);
                    let gc = &mut self.gc[plane as usize];
                    gc.moves_left -= 1;
                    if gc.moves_left == 0 {
                        let victim = gc.victim.expect("a victim is being collected");
                        self.issue_erase(victim, ctx);
                    }
                }
                Cont::Erase => {
                    let block = self.cfg.geo.block_of_ppa(op.ppa);
                    let plane = self.cfg.geo.plane_of_ppa(op.ppa);
                    self.ftl.erase_done(block);
                    self.gc[plane as usize].victim = None;
                    self.retry_plane(plane, ctx);
                    self.maybe_gc(plane, ctx);
                }
            }
        }
        // Held dies whose background operation ended: their sets may enter DTWin now.
        while let Some(d) = self.flash.quiet.pop() {
            let set = self.set_of_die(d);
            self.check_settled(set, ctx);
        }
    }
}
