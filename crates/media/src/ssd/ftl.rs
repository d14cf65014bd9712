//! The page-level flash translation layer: the page map, block bookkeeping, page allocation
//! and the choice of garbage-collection victims. No timing here: the device model asks for a
//! page, issues the flash operations, and commits the mapping when the program has finished.
//!
//! Memory: the forward map (logical page -> physical page) and the reverse map (physical page
//! -> logical page, which a real drive keeps in each page's spare area) are plain `u32` arrays,
//! 4 bytes per page each; blocks cost about 32 bytes each. No hash maps.

use std::collections::VecDeque;

use super::geometry::Geometry;
use super::prefetch;
use super::victim::VictimPolicy;

/// "No page": an unmapped logical page, or a physical page holding no valid data.
pub const NONE: u32 = u32::MAX;

/// A map of `len` entries, all unmapped. Entries hold a page number plus one, so "unmapped" is
/// 0 and a fresh map needs no pass over it: the kernel hands out zeroed pages as they are first
/// written (and one shared zero page to reads of a fresh drive). The maps are hundreds of MB
/// read at random, so the allocation also asks for transparent huge pages before first touch:
/// 2 MiB pages spare most of the TLB misses a 4 KiB-paged map costs on every lookup.
fn map_array(len: usize) -> Vec<u32> {
    let mut v: Vec<u32> = vec![0; len];
    #[cfg(target_os = "linux")]
    if len >= 1 << 20 {
        let page = 4096usize;
        let start = v.as_mut_ptr() as usize & !(page - 1);
        let end = v.as_mut_ptr() as usize + len * 4;
        // SAFETY: madvise only advises the kernel about the allocation's pages (rounded to page
        // boundaries); it reads and writes no memory. A failure (THP disabled) changes nothing.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
    v
}

/// An entry of a map from its page number (`NONE` = unmapped).
#[inline]
fn encode(page: u32) -> u32 {
    page.wrapping_add(1)
}

/// The page number an entry holds (`NONE` if unmapped).
#[inline]
fn decode(entry: u32) -> u32 {
    entry.wrapping_sub(1)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    Free,
    /// Being written (a frontier), or full with programs still in flight.
    Open,
    /// Full and settled: a GC candidate.
    Sealed,
    /// Chosen by GC: its valid pages are being moved out, then it is erased.
    Victim,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    valid: u16,
    /// Pages handed out for programming.
    written: u16,
    /// Pages handed out whose program has not finished.
    pending: u16,
    state: BlockState,
    erase_count: u32,
    /// The host-write clock when the block was sealed (FIFO order, cost-benefit age).
    sealed_at: u64,
    /// When the block last joined the sealed blocks with its valid count (a count of such
    /// joins): the latest of them heads the count's list.
    linked_at: u64,
    /// Links in the plane's list of sealed blocks with the same valid count (kept only for
    /// the policies that walk the lists).
    prev: u32,
    next: u32,
}

#[derive(Clone, Debug)]
struct Plane {
    free: VecDeque<u32>,
    host_open: u32,
    gc_open: u32,
    /// Head of the list of sealed blocks with `i` valid pages (global block numbers), when
    /// the policy keeps lists.
    buckets: Vec<u32>,
}

/// Counters for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FtlStats {
    /// Pages programmed with host data.
    pub host_programs: u64,
    /// Pages programmed by GC to move valid data.
    pub gc_programs: u64,
    pub erases: u64,
    pub gc_victims: u64,
    /// Valid pages found in victims when chosen (their sum over victims).
    pub victim_valid_pages: u64,
}

impl FtlStats {
    /// Flash page programs per host page program.
    pub fn write_amplification(&self) -> f64 {
        if self.host_programs == 0 {
            return 0.0;
        }
        (self.host_programs + self.gc_programs) as f64 / self.host_programs as f64
    }
}

pub struct Ftl {
    pub geo: Geometry,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    blocks: Vec<Block>,
    planes: Vec<Plane>,
    policy: Box<dyn VictimPolicy>,
    /// Whether the valid-count lists are kept (the policy's `valid_lists` capability): a
    /// policy that looks at the emptiest blocks at every choice reads them; one that draws a
    /// few blocks at random finds the emptiest by a scan of the plane, on the rare occasion it
    /// needs it, instead of keeping lists on every page invalidated.
    lists: bool,
    /// Joins of blocks to valid-count lists so far (`Block::linked_at`).
    link_clock: u64,
    /// Host page writes so far: the clock of block ages.
    clock: u64,
    pub stats: FtlStats,
}

impl Ftl {
    /// A fresh drive: every block erased, no logical page mapped; victims chosen by `policy`,
    /// with valid-count lists kept when `lists` (its `valid_lists` capability).
    pub fn new(
        geo: Geometry,
        logical_pages: u32,
        policy: Box<dyn VictimPolicy>,
        lists: bool,
    ) -> Self {
        let ppb = geo.pages_per_block as usize;
        let blocks = vec![
            Block {
                valid: 0,
                written: 0,
                pending: 0,
                state: BlockState::Free,
                erase_count: 0,
                sealed_at: 0,
                linked_at: 0,
                prev: NONE,
                next: NONE,
            };
            geo.blocks() as usize
        ];
        let planes = (0..geo.planes())
            .map(|p| Plane {
                free: (0..geo.blocks_per_plane)
                    .map(|b| geo.block_index(p, b))
                    .collect(),
                host_open: NONE,
                gc_open: NONE,
                buckets: vec![NONE; ppb + 1],
            })
            .collect();
        Ftl {
            l2p: map_array(logical_pages as usize),
            p2l: map_array(geo.physical_pages() as usize),
            blocks,
            planes,
            lists,
            policy,
            link_clock: 0,
            clock: 0,
            stats: FtlStats::default(),
            geo,
        }
    }

    /// A fresh FTL for the drive `cfg` describes, its victim policy built from `cfg` and the
    /// run's `seed`.
    pub fn for_config(cfg: &super::config::SsdConfig, seed: u64) -> Self {
        let policy =
            cfg.victim.build.expect("checked by the registry")(&super::victim::VictimSetup {
                seed,
                planes: cfg.geo.planes(),
                blocks_per_plane: cfg.geo.blocks_per_plane,
                settings: &cfg.victim_settings,
            });
        Ftl::new(
            cfg.geo.clone(),
            cfg.logical_pages,
            policy,
            cfg.victim.valid_lists,
        )
    }

    pub fn logical_pages(&self) -> u32 {
        self.l2p.len() as u32
    }

    /// Bytes held by the forward and reverse maps.
    pub fn map_bytes(&self) -> usize {
        (self.l2p.len() + self.p2l.len()) * 4
    }

    #[inline]
    pub fn lookup(&self, lpa: u32) -> u32 {
        decode(self.l2p[lpa as usize])
    }

    #[inline]
    pub fn owner(&self, ppa: u32) -> u32 {
        decode(self.p2l[ppa as usize])
    }

    /// `lookup(lpa)` will follow.
    #[inline]
    pub fn prefetch_lookup(&self, lpa: u32) {
        prefetch(&self.l2p[lpa as usize]);
    }

    /// `commit_host` of a new copy of the page now at `old` will follow.
    #[inline]
    pub fn prefetch_rewrite(&self, old: u32) {
        if old != NONE {
            prefetch(&self.p2l[old as usize]);
            prefetch(&self.blocks[self.geo.block_of_ppa(old) as usize]);
        }
    }

    pub fn free_blocks(&self, plane: u32) -> u32 {
        self.planes[plane as usize].free.len() as u32
    }

    pub fn valid_pages(&self, block: u32) -> u32 {
        u32::from(self.blocks[block as usize].valid)
    }

    pub fn block_state(&self, block: u32) -> BlockState {
        self.blocks[block as usize].state
    }

    pub fn erase_count(&self, block: u32) -> u32 {
        self.blocks[block as usize].erase_count
    }

    /// A page for a host program in `plane`, or `None` when the plane has no free page left
    /// for the host (its last free block is kept for GC, which needs somewhere to copy to).
    pub fn alloc_host(&mut self, plane: u32) -> Option<u32> {
        let ppa = self.alloc(plane, false)?;
        self.stats.host_programs += 1;
        self.clock += 1;
        Some(ppa)
    }

    /// A page for a GC copy in `plane`, or `None` when the plane has no free block at all.
    pub fn alloc_gc(&mut self, plane: u32) -> Option<u32> {
        let ppa = self.alloc(plane, true)?;
        self.stats.gc_programs += 1;
        Some(ppa)
    }

    fn alloc(&mut self, plane: u32, for_gc: bool) -> Option<u32> {
        let ppb = self.geo.pages_per_block as u16;
        let pl = &mut self.planes[plane as usize];
        let open = if for_gc { pl.gc_open } else { pl.host_open };
        let block = if open != NONE && self.blocks[open as usize].written < ppb {
            open
        } else {
            let reserve = if for_gc { 0 } else { 1 };
            if pl.free.len() <= reserve {
                return None;
            }
            let b = pl.free.pop_front().expect("checked");
            if for_gc {
                pl.gc_open = b;
            } else {
                pl.host_open = b;
            }
            self.blocks[b as usize].state = BlockState::Open;
            b
        };
        let blk = &mut self.blocks[block as usize];
        let ppa = self.geo.first_ppa(block) + u32::from(blk.written);
        blk.written += 1;
        blk.pending += 1;
        Some(ppa)
    }

    /// A host program of `lpa` into `ppa` finished: the new copy becomes the valid one.
    pub fn commit_host(&mut self, lpa: u32, ppa: u32) {
        let old = decode(self.l2p[lpa as usize]);
        if old != NONE {
            self.invalidate(old);
        }
        self.l2p[lpa as usize] = encode(ppa);
        self.p2l[ppa as usize] = encode(lpa);
        let b = self.geo.block_of_ppa(ppa);
        self.blocks[b as usize].valid += 1;
        self.program_done(b);
    }

    /// A GC copy of the victim's page `src` to `dst` finished. If the host rewrote or trimmed
    /// the page meanwhile the copy is stale and stays invalid. Returns whether the copy became
    /// the valid one.
    pub fn commit_gc(&mut self, src: u32, dst: u32) -> bool {
        let b = self.geo.block_of_ppa(dst);
        // The source still holds the page's valid copy exactly when its reverse entry names a
        // page (a host rewrite or trim clears it, and nothing reprograms a victim before its
        // erase); checking there touches the victim block, not the map.
        let lpa = decode(self.p2l[src as usize]);
        let moved = lpa != NONE;
        if moved {
            self.invalidate(src);
            self.l2p[lpa as usize] = encode(dst);
            self.p2l[dst as usize] = encode(lpa);
            self.blocks[b as usize].valid += 1;
        }
        self.program_done(b);
        moved
    }

    /// A program into `ppa` was lost (power failure): the page stays invalid.
    pub fn abort_program(&mut self, ppa: u32) {
        self.program_done(self.geo.block_of_ppa(ppa));
    }

    /// Unmaps `lpa` (TRIM / deallocate).
    pub fn trim(&mut self, lpa: u32) {
        let old = decode(self.l2p[lpa as usize]);
        if old != NONE {
            self.invalidate(old);
            self.l2p[lpa as usize] = encode(NONE);
        }
    }

    fn invalidate(&mut self, ppa: u32) {
        self.p2l[ppa as usize] = encode(NONE);
        let b = self.geo.block_of_ppa(ppa);
        let sealed = self.blocks[b as usize].state == BlockState::Sealed;
        if sealed {
            self.unlink(b);
        }
        self.blocks[b as usize].valid -= 1;
        if sealed {
            self.link(b);
        }
    }

    fn program_done(&mut self, b: u32) {
        let ppb = self.geo.pages_per_block as u16;
        let blk = &mut self.blocks[b as usize];
        blk.pending -= 1;
        if blk.pending == 0 && blk.written == ppb && blk.state == BlockState::Open {
            self.seal(b);
        }
    }

    fn seal(&mut self, b: u32) {
        let plane = self.plane_of_block(b);
        let blk = &mut self.blocks[b as usize];
        blk.state = BlockState::Sealed;
        blk.sealed_at = self.clock;
        let pl = &mut self.planes[plane as usize];
        if pl.host_open == b {
            pl.host_open = NONE;
        }
        if pl.gc_open == b {
            pl.gc_open = NONE;
        }
        self.policy.sealed(plane, b);
        self.link(b);
    }

    #[inline]
    fn plane_of_block(&self, b: u32) -> u32 {
        self.geo.plane_of_block(b)
    }

    fn link(&mut self, b: u32) {
        self.link_clock += 1;
        self.blocks[b as usize].linked_at = self.link_clock;
        if !self.lists {
            return;
        }
        let plane = self.plane_of_block(b) as usize;
        let v = self.blocks[b as usize].valid as usize;
        let head = self.planes[plane].buckets[v];
        self.blocks[b as usize].prev = NONE;
        self.blocks[b as usize].next = head;
        if head != NONE {
            self.blocks[head as usize].prev = b;
        }
        self.planes[plane].buckets[v] = b;
    }

    fn unlink(&mut self, b: u32) {
        if !self.lists {
            return;
        }
        let plane = self.plane_of_block(b) as usize;
        let Block {
            prev, next, valid, ..
        } = self.blocks[b as usize];
        if prev == NONE {
            self.planes[plane].buckets[valid as usize] = next;
        } else {
            self.blocks[prev as usize].next = next;
        }
        if next != NONE {
            self.blocks[next as usize].prev = prev;
        }
    }

    /// Chooses a GC victim in `plane` by the policy and marks it, or `None` if no sealed block
    /// has an invalid page (collecting it would free nothing).
    pub fn select_victim(&mut self, plane: u32) -> Option<u32> {
        let sealed = Sealed {
            geo: &self.geo,
            blocks: &self.blocks,
            planes: &self.planes,
            lists: self.lists,
            clock: self.clock,
        };
        let victim = self.policy.select(plane, &sealed)?;
        self.unlink(victim);
        let blk = &mut self.blocks[victim as usize];
        blk.state = BlockState::Victim;
        self.stats.gc_victims += 1;
        self.stats.victim_valid_pages += u64::from(blk.valid);
        Some(victim)
    }

    /// The mean-field rule of the victim policy (for the preconditioner).
    pub fn mean_field_rule(&self) -> super::mean_field::Rule {
        self.policy.mean_field()
    }

    fn sealed_view(&self) -> Sealed<'_> {
        Sealed {
            geo: &self.geo,
            blocks: &self.blocks,
            planes: &self.planes,
            lists: self.lists,
            clock: self.clock,
        }
    }

    /// The valid pages of `block` as (physical page, logical page), in page order.
    pub fn valid_in(&self, block: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let first = self.geo.first_ppa(block);
        (first..first + self.geo.pages_per_block).filter_map(|ppa| {
            Some((ppa, decode(self.p2l[ppa as usize]))).filter(|(_, l)| *l != NONE)
        })
    }

    /// A victim with no valid page left was erased: it joins the free pool.
    ///
    /// # Panics
    /// When the block still holds valid data (erasing it would lose data).
    pub fn erase_done(&mut self, block: u32) {
        let plane = self.plane_of_block(block);
        let blk = &mut self.blocks[block as usize];
        assert_eq!(blk.valid, 0, "erasing block {block} with valid pages");
        blk.state = BlockState::Free;
        blk.written = 0;
        blk.pending = 0;
        blk.erase_count += 1;
        self.stats.erases += 1;
        self.planes[plane as usize].free.push_back(block);
    }

    // ---- preconditioning: state written directly, see precondition.rs --------------------

    /// Puts `lpas` (all striped to `plane`) into the plane's blocks: block i of the plane gets
    /// `valid[i]` of them at the page offsets `offsets` chooses; the blocks are sealed, in the
    /// order given (earliest first). The remaining blocks stay free.
    pub(crate) fn place(
        &mut self,
        plane: u32,
        valid: &[u32],
        lpas: &[u32],
        mut offsets: impl FnMut(u32, &mut Vec<u32>),
    ) {
        let ppb = self.geo.pages_per_block;
        let mut next = 0usize;
        let mut slots = Vec::with_capacity(ppb as usize);
        for (i, &v) in valid.iter().enumerate() {
            let b = self.geo.block_index(plane, i as u32);
            offsets(v, &mut slots);
            let first = self.geo.first_ppa(b);
            for &off in &slots {
                let lpa = lpas[next];
                next += 1;
                let ppa = first + off;
                self.l2p[lpa as usize] = encode(ppa);
                self.p2l[ppa as usize] = encode(lpa);
            }
            let blk = &mut self.blocks[b as usize];
            blk.valid = v as u16;
            blk.written = ppb as u16;
            blk.pending = 0;
            blk.state = BlockState::Open;
            self.seal(b);
            self.clock += u64::from(ppb - v).max(1);
        }
        assert_eq!(next, lpas.len(), "placement left logical pages out");
        let pl = &mut self.planes[plane as usize];
        pl.free = (valid.len() as u32..self.geo.blocks_per_plane)
            .map(|b| self.geo.block_index(plane, b))
            .collect();
    }

    /// Writes `lpas` (all striped to `plane`) in order into fresh blocks, as a sequential fill
    /// does; the last block stays open for the host.
    pub(crate) fn place_sequential(&mut self, plane: u32, lpas: &[u32]) {
        for &lpa in lpas {
            let ppa = self
                .alloc(plane, false)
                .expect("a sequential fill fits in the plane");
            self.commit_host(lpa, ppa);
        }
    }

    /// Clears the counters (after preconditioning).
    pub fn reset_stats(&mut self) {
        self.stats = FtlStats::default();
    }

    /// Checks every invariant between the maps and the block counters (tests).
    pub fn check(&self) {
        let mut valid = vec![0u32; self.blocks.len()];
        for (lpa, &entry) in self.l2p.iter().enumerate() {
            let ppa = decode(entry);
            if ppa != NONE {
                assert_eq!(self.owner(ppa), lpa as u32, "maps disagree at lpa {lpa}");
                valid[self.geo.block_of_ppa(ppa) as usize] += 1;
            }
        }
        for (ppa, &entry) in self.p2l.iter().enumerate() {
            let lpa = decode(entry);
            if lpa != NONE {
                assert_eq!(self.lookup(lpa), ppa as u32, "stale reverse entry at {ppa}");
            }
        }
        for (b, blk) in self.blocks.iter().enumerate() {
            assert_eq!(u32::from(blk.valid), valid[b], "valid count of block {b}");
        }
        for p in 0..self.planes.len() as u32 {
            if self.lists {
                let sealed = self.sealed_view();
                assert_eq!(
                    sealed.fewest_valid(p),
                    sealed.scan_greedy(p),
                    "list heads of plane {p}"
                );
            }
        }
        for (p, pl) in self.planes.iter().enumerate().filter(|_| self.lists) {
            for (v, &head) in pl.buckets.iter().enumerate() {
                let mut b = head;
                while b != NONE {
                    let blk = &self.blocks[b as usize];
                    assert_eq!(
                        blk.valid as usize, v,
                        "block {b} in the wrong list of plane {p}"
                    );
                    assert_eq!(blk.state, BlockState::Sealed);
                    b = blk.next;
                }
            }
        }
    }
}

/// What a victim policy sees of the FTL: the blocks of each plane, read only.
pub struct Sealed<'a> {
    geo: &'a Geometry,
    blocks: &'a [Block],
    planes: &'a [Plane],
    lists: bool,
    clock: u64,
}

impl Sealed<'_> {
    pub fn pages_per_block(&self) -> u32 {
        self.geo.pages_per_block
    }

    pub fn blocks_per_plane(&self) -> u32 {
        self.geo.blocks_per_plane
    }

    /// Global number of block `local` of `plane`.
    pub fn block(&self, plane: u32, local: u32) -> u32 {
        self.geo.block_index(plane, local)
    }

    /// Whether `block` is a candidate: full, its programs done, not being collected.
    pub fn is_sealed(&self, block: u32) -> bool {
        self.blocks[block as usize].state == BlockState::Sealed
    }

    pub fn valid(&self, block: u32) -> u32 {
        u32::from(self.blocks[block as usize].valid)
    }

    /// Host page writes since `block` was sealed, plus one.
    pub fn age(&self, block: u32) -> u64 {
        self.clock - self.blocks[block as usize].sealed_at + 1
    }

    /// A sealed block with the fewest valid pages, if any has an invalid page: the head of
    /// the lowest non-empty list, the block that joined it last (or the same block found by
    /// a scan when no lists are kept).
    pub fn fewest_valid(&self, plane: u32) -> Option<u32> {
        if !self.lists {
            return self.scan_greedy(plane);
        }
        let ppb = self.geo.pages_per_block as usize;
        self.planes[plane as usize].buckets[..ppb]
            .iter()
            .copied()
            .find(|&h| h != NONE)
    }

    /// `fewest_valid` without lists: the same block, found by looking at every block of the
    /// plane.
    fn scan_greedy(&self, plane: u32) -> Option<u32> {
        let ppb = self.geo.pages_per_block as u16;
        let first = self.geo.block_index(plane, 0);
        let mut best: Option<(u16, u64, u32)> = None;
        for b in first..first + self.geo.blocks_per_plane {
            let blk = &self.blocks[b as usize];
            if blk.state != BlockState::Sealed || blk.valid >= ppb {
                continue;
            }
            if best.is_none_or(|(v, at, _)| (blk.valid, u64::MAX - blk.linked_at) < (v, at)) {
                best = Some((blk.valid, u64::MAX - blk.linked_at, b));
            }
        }
        best.map(|(_, _, b)| b)
    }

    /// The sealed blocks of `plane` with an invalid page, fewest valid first (each count's
    /// latest joiner first). Only for policies with the `valid_lists` capability.
    pub fn by_valid(&self, plane: u32) -> impl Iterator<Item = u32> + '_ {
        assert!(self.lists, "by_valid needs the valid_lists capability");
        let ppb = self.geo.pages_per_block as usize;
        self.planes[plane as usize].buckets[..ppb]
            .iter()
            .flat_map(move |&head| {
                std::iter::successors(Some(head).filter(|&b| b != NONE), move |&b| {
                    Some(self.blocks[b as usize].next).filter(|&n| n != NONE)
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssd::victim::{VICTIMS, VictimSetup};
    use qoslab_engine::Settings;
    use qoslab_engine::lookup;

    /// A one-plane drive of 16 blocks of 8 pages, victims chosen by the policy called `name`
    /// (`rga` with `choices` draws).
    fn small_with(name: &str, choices: u64) -> Ftl {
        let geo = Geometry::new(1, 1, 1, 1, 16, 8, 4096);
        let ops = lookup(VICTIMS, "gc.victim", name).unwrap();
        let mut settings = Settings::defaults("gc", ops.tunables);
        if name == "rga" {
            let raw = qoslab_engine::RawValue::Int(choices as i64);
            settings.set("choices", &raw).unwrap();
        }
        let policy = ops.build.unwrap()(&VictimSetup {
            seed: 1,
            planes: 1,
            blocks_per_plane: 16,
            settings: &settings,
        });
        Ftl::new(geo, 96, policy, ops.valid_lists)
    }

    fn small(name: &str) -> Ftl {
        small_with(name, 3)
    }

    /// Writes `lpa` as the device model would: allocate, then commit.
    fn write(ftl: &mut Ftl, lpa: u32) -> bool {
        match ftl.alloc_host(0) {
            Some(ppa) => {
                ftl.commit_host(lpa, ppa);
                true
            }
            None => false,
        }
    }

    /// Collects one victim completely, as the timed GC does in steps.
    fn collect(ftl: &mut Ftl) -> bool {
        let Some(v) = ftl.select_victim(0) else {
            return false;
        };
        let moves: Vec<_> = ftl.valid_in(v).collect();
        for (src, _) in moves {
            let dst = ftl.alloc_gc(0).expect("gc has a block");
            assert!(ftl.commit_gc(src, dst));
        }
        ftl.erase_done(v);
        true
    }

    #[test]
    fn rewriting_a_page_invalidates_the_old_copy() {
        let mut ftl = small("greedy");
        assert!(write(&mut ftl, 5));
        let first = ftl.lookup(5);
        assert!(write(&mut ftl, 5));
        assert_ne!(ftl.lookup(5), first);
        assert_eq!(ftl.owner(first), NONE);
        ftl.check();
    }

    #[test]
    fn the_host_cannot_take_the_last_free_block() {
        let mut ftl = small("greedy");
        let mut n = 0;
        while write(&mut ftl, n % 96) {
            n += 1;
        }
        // 15 blocks of 8 pages for the host, the 16th kept for GC.
        assert_eq!(n, 15 * 8);
        assert_eq!(ftl.free_blocks(0), 1);
        assert!(ftl.alloc_gc(0).is_some());
    }

    #[test]
    fn greedy_takes_the_block_with_fewest_valid_pages_and_gc_keeps_the_maps_consistent() {
        let mut ftl = small("greedy");
        for lpa in 0..96 {
            assert!(write(&mut ftl, lpa));
        }
        // Rewrite three pages of block 0 and one of block 1.
        for lpa in [0, 1, 2, 9] {
            assert!(write(&mut ftl, lpa));
        }
        let v = ftl.select_victim(0).unwrap();
        assert_eq!(v, 0);
        assert_eq!(ftl.valid_pages(v), 5);
        assert_eq!(
            ftl.valid_in(v).map(|(_, l)| l).collect::<Vec<_>>(),
            vec![3, 4, 5, 6, 7]
        );
        let moves: Vec<_> = ftl.valid_in(v).collect();
        for (src, _) in moves {
            let dst = ftl.alloc_gc(0).unwrap();
            assert!(ftl.commit_gc(src, dst));
        }
        ftl.erase_done(v);
        assert_eq!(ftl.erase_count(0), 1);
        ftl.check();
    }

    #[test]
    fn a_gc_copy_overtaken_by_a_host_write_stays_invalid() {
        let mut ftl = small("greedy");
        for lpa in 0..96 {
            assert!(write(&mut ftl, lpa));
        }
        assert!(write(&mut ftl, 0));
        let v = ftl.select_victim(0).unwrap();
        let (src, lpa) = ftl.valid_in(v).next().unwrap();
        let dst = ftl.alloc_gc(0).unwrap();
        assert!(write(&mut ftl, lpa)); // the host rewrites it while the copy is in flight
        assert!(!ftl.commit_gc(src, dst));
        assert_eq!(ftl.owner(dst), NONE);
        ftl.check();
    }

    #[test]
    fn a_gc_copy_of_a_page_trimmed_meanwhile_stays_invalid() {
        let mut ftl = small("greedy");
        for lpa in 0..96 {
            assert!(write(&mut ftl, lpa));
        }
        assert!(write(&mut ftl, 0));
        let v = ftl.select_victim(0).unwrap();
        let (src, lpa) = ftl.valid_in(v).next().unwrap();
        let dst = ftl.alloc_gc(0).unwrap();
        ftl.trim(lpa);
        assert!(!ftl.commit_gc(src, dst));
        assert_eq!(ftl.lookup(lpa), NONE);
        assert_eq!(ftl.owner(dst), NONE);
        ftl.check();
    }

    #[test]
    fn every_policy_sustains_random_overwrites_forever() {
        for policy in ["greedy", "rga", "cost_benefit", "fifo"] {
            let mut ftl = small(policy);
            let mut pick = qoslab_engine::RngStream::new(7, "lpa");
            for i in 0..20_000u32 {
                let lpa = if i < 96 { i } else { pick.below(96) as u32 };
                while ftl.free_blocks(0) < 2 {
                    assert!(collect(&mut ftl), "{policy:?} found no victim");
                }
                assert!(write(&mut ftl, lpa), "{policy:?} ran out of space");
            }
            ftl.check();
            assert!(ftl.stats.write_amplification() > 1.0);
        }
    }
}
