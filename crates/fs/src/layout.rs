//! Where things are on the device: an ext4 geometry (block groups of 32,768 4 KiB blocks, 8,192
//! inodes of 256 bytes each, flex groups of 16 whose bitmaps and inode tables sit together at
//! the flex group's start, the group descriptors after the superblock, the journal in the
//! middle of the file system as mke2fs places it), and the block and inode allocators.

use crate::PAGE;

/// Blocks per block group (ext4 with 4 KiB blocks: 8 x 4096 bits of bitmap).
pub const BLOCKS_PER_GROUP: u64 = 32_768;
/// Inodes per group (mke2fs's default inode_ratio of 16 KiB: 128 MiB / 16 KiB).
pub const INODES_PER_GROUP: u32 = 8_192;
/// Inodes per inode-table block (256-byte inodes).
pub const INODES_PER_BLOCK: u32 = (PAGE / 256) as u32;
/// Groups per flex group (mke2fs's default flex_bg size).
pub const FLEX: u64 = 16;
/// Inode-table blocks per group.
const ITABLE_BLOCKS: u64 = INODES_PER_GROUP as u64 / INODES_PER_BLOCK as u64;
/// Group descriptors per block (64-byte descriptors).
const DESCS_PER_BLOCK: u64 = PAGE / 64;
/// The first inode a file may get (ext4's `s_first_ino`: 1 to 10 are reserved).
pub const FIRST_INO: u32 = 11;

/// The journal size mke2fs chooses for a file system of `blocks` 4 KiB blocks
/// (e2fsprogs `ext2fs_default_journal_size`), in blocks.
pub fn default_journal_blocks(blocks: u64) -> u64 {
    match blocks {
        b if b < 32_768 => 1_024,
        b if b < 256 * 1024 => 4_096,
        b if b < 512 * 1024 => 8_192,
        b if b < 4096 * 1024 => 16_384,
        b if b < 8192 * 1024 => 32_768,
        b if b < 16_384 * 1024 => 65_536,
        b if b < 32_768 * 1024 => 131_072,
        _ => 262_144,
    }
}

/// The geometry of one file system.
#[derive(Clone, Debug)]
pub struct Geometry {
    pub blocks: u64,
    pub groups: u64,
    /// Journal areas (first block, blocks), one per journal.
    pub journals: Vec<(u64, u64)>,
}

impl Geometry {
    /// A file system of `bytes` with `journals` journal areas sharing `journal_blocks` blocks
    /// (0: mke2fs's default size).
    pub fn new(bytes: u64, journals: u32, journal_blocks: u64) -> Result<Self, String> {
        let blocks = bytes / PAGE;
        let groups = blocks.div_ceil(BLOCKS_PER_GROUP);
        if blocks < 4 * BLOCKS_PER_GROUP {
            return Err(format!(
                "a file system needs at least {} MiB, the device has {} MiB",
                (4 * BLOCKS_PER_GROUP * PAGE) >> 20,
                bytes >> 20
            ));
        }
        let total = if journal_blocks == 0 {
            default_journal_blocks(blocks)
        } else {
            journal_blocks
        };
        let per = (total / u64::from(journals.max(1))).max(64);
        // mke2fs puts the journal at the start of the middle group's free space.
        let mut start = Self::data_start_of(groups / 2, groups);
        let mut areas = Vec::new();
        for _ in 0..journals.max(1) {
            areas.push((start, per));
            start += per;
        }
        if start > blocks {
            return Err("the journal does not fit in the file system".into());
        }
        Ok(Geometry {
            blocks,
            groups,
            journals: areas,
        })
    }

    fn gdt_blocks(groups: u64) -> u64 {
        groups.div_ceil(DESCS_PER_BLOCK)
    }

    /// First block of flex group `f`'s metadata (after the superblock and descriptors in
    /// group 0).
    fn flex_meta(g: u64, groups: u64) -> u64 {
        let first = g / FLEX * FLEX * BLOCKS_PER_GROUP;
        if first == 0 {
            1 + Self::gdt_blocks(groups)
        } else {
            first
        }
    }

    /// The first block after the metadata of group `g`'s flex group, if `g` heads it; else
    /// the group's first block.
    fn data_start_of(g: u64, groups: u64) -> u64 {
        if g.is_multiple_of(FLEX) {
            Self::flex_meta(g, groups) + FLEX * (2 + ITABLE_BLOCKS)
        } else {
            g * BLOCKS_PER_GROUP
        }
    }

    /// The block holding group `g`'s descriptor.
    pub fn gdt_block(&self, g: u64) -> u64 {
        1 + g / DESCS_PER_BLOCK
    }

    pub fn block_bitmap(&self, g: u64) -> u64 {
        Self::flex_meta(g, self.groups) + g % FLEX
    }

    pub fn inode_bitmap(&self, g: u64) -> u64 {
        Self::flex_meta(g, self.groups) + FLEX + g % FLEX
    }

    /// The inode-table block of inode `ino`.
    pub fn inode_block(&self, ino: u32) -> u64 {
        let (g, i) = Self::inode_place(ino);
        Self::flex_meta(g, self.groups)
            + 2 * FLEX
            + (g % FLEX) * ITABLE_BLOCKS
            + u64::from(i / INODES_PER_BLOCK)
    }

    /// (group, index in the group) of inode `ino`.
    pub fn inode_place(ino: u32) -> (u64, u32) {
        let i = ino - 1;
        (u64::from(i / INODES_PER_GROUP), i % INODES_PER_GROUP)
    }

    pub fn group_of(&self, block: u64) -> u64 {
        block / BLOCKS_PER_GROUP
    }

    /// Blocks of group `g` that hold metadata or a journal from the start (bitmaps, inode
    /// tables, superblock, descriptors), as (first, count) ranges within the device.
    fn reserved_in(&self, g: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if g == 0 {
            out.push((0, 1 + Self::gdt_blocks(self.groups)));
        }
        if g.is_multiple_of(FLEX) {
            out.push((Self::flex_meta(g, self.groups), FLEX * (2 + ITABLE_BLOCKS)));
        }
        let (lo, hi) = (g * BLOCKS_PER_GROUP, (g + 1) * BLOCKS_PER_GROUP);
        for &(s, n) in &self.journals {
            let (a, b) = (s.max(lo), (s + n).min(hi));
            if a < b {
                out.push((a, b - a));
            }
        }
        out
    }
}

/// What a metadata block of the geometry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaBlock {
    BlockBitmap(u64),
    InodeBitmap(u64),
    /// An inode-table block holding inodes `first..first + INODES_PER_BLOCK`.
    InodeTable(u32),
    /// The superblock or a group-descriptor block.
    Descriptors,
}

impl Geometry {
    /// What block `b` is, if mkfs placed metadata there.
    pub fn classify(&self, b: u64) -> Option<MetaBlock> {
        if b <= Self::gdt_blocks(self.groups) {
            return Some(MetaBlock::Descriptors);
        }
        let g0 = b / BLOCKS_PER_GROUP / FLEX * FLEX;
        let s = Self::flex_meta(g0, self.groups);
        let off = b.checked_sub(s)?;
        if off < FLEX {
            Some(MetaBlock::BlockBitmap(g0 + off))
        } else if off < 2 * FLEX {
            Some(MetaBlock::InodeBitmap(g0 + off - FLEX))
        } else if off < 2 * FLEX + FLEX * ITABLE_BLOCKS {
            let k = off - 2 * FLEX;
            let g = g0 + k / ITABLE_BLOCKS;
            let first = g * u64::from(INODES_PER_GROUP)
                + (k % ITABLE_BLOCKS) * u64::from(INODES_PER_BLOCK)
                + 1;
            Some(MetaBlock::InodeTable(first as u32))
        } else {
            None
        }
    }

    /// Every block mkfs reserved, as (first, count) runs.
    pub fn reserved_runs(&self) -> Vec<(u64, u64)> {
        (0..self.groups).flat_map(|g| self.reserved_in(g)).collect()
    }
}

/// A group's bitmap, made when first touched.
#[derive(Clone, Debug)]
struct Bits {
    words: Vec<u64>,
    used: u64,
}

impl Bits {
    fn new(bits: u64) -> Self {
        Bits {
            words: vec![0; bits.div_ceil(64) as usize],
            used: 0,
        }
    }
    fn get(&self, i: u64) -> bool {
        self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }
    fn set(&mut self, i: u64, v: bool) {
        let w = &mut self.words[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        if v && *w & m == 0 {
            *w |= m;
            self.used += 1;
        } else if !v && *w & m != 0 {
            *w &= !m;
            self.used -= 1;
        }
    }
    /// The first clear bit at or after `from`, below `end`.
    fn first_clear(&self, from: u64, end: u64) -> Option<u64> {
        let mut i = from;
        while i < end {
            let w = self.words[(i / 64) as usize] | ((1u64 << (i % 64)) - 1);
            if w != u64::MAX {
                let b = (i / 64) * 64 + u64::from((!w).trailing_zeros());
                return (b < end).then_some(b);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }
}

/// The block and inode bitmaps of a file system, with where each core allocates next.
#[derive(Clone, Debug)]
pub struct Alloc {
    geo: Geometry,
    blocks: Vec<Option<Bits>>,
    inodes: Vec<Option<Bits>>,
    /// Blocks freed at some point since mount: allocating one again is a block reuse.
    freed: Vec<Option<Bits>>,
    /// Blocks freed by a transaction not yet committed: free on the device's bitmap, not yet
    /// for allocation (ext4 releases them to mballoc at commit).
    busy: Vec<Option<Bits>>,
    pub free_blocks: u64,
}

impl Alloc {
    pub fn new(geo: Geometry) -> Self {
        let n = geo.groups as usize;
        let mut a = Alloc {
            blocks: vec![None; n],
            inodes: vec![None; n],
            freed: vec![None; n],
            busy: vec![None; n],
            free_blocks: 0,
            geo,
        };
        let reserved: u64 = (0..a.geo.groups)
            .flat_map(|g| a.geo.reserved_in(g))
            .map(|(_, n)| n)
            .sum();
        a.free_blocks = a.geo.blocks - reserved;
        a
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    fn group_bits(&mut self, g: u64) -> &mut Bits {
        let geo = &self.geo;
        self.blocks[g as usize].get_or_insert_with(|| {
            let mut b = Bits::new(BLOCKS_PER_GROUP);
            let base = g * BLOCKS_PER_GROUP;
            for (s, n) in geo.reserved_in(g) {
                for x in s..s + n {
                    b.set(x - base, true);
                }
            }
            let end = geo.blocks.min(base + BLOCKS_PER_GROUP);
            for x in end..base + BLOCKS_PER_GROUP {
                b.set(x - base, true);
            }
            b
        })
    }

    pub fn is_allocated(&mut self, block: u64) -> bool {
        let g = block / BLOCKS_PER_GROUP;
        self.group_bits(g).get(block % BLOCKS_PER_GROUP)
    }

    /// Allocates up to `want` blocks as one run, at `goal` if it is free, else at the first
    /// free block after it (wrapping around the file system): (first block, count, whether any
    /// was freed before since mount: a block reuse).
    pub fn alloc_run(&mut self, goal: u64, want: u64) -> Option<(u64, u64, bool)> {
        self.alloc_run_avoiding(goal, want, false)
    }

    /// As [`alloc_run`](Self::alloc_run); with `fresh`, blocks never freed since mount come
    /// first, and a freed one is taken only when no other is left (RioFS's rule: a reused
    /// block costs a synchronous FLUSH).
    pub fn alloc_run_avoiding(
        &mut self,
        goal: u64,
        want: u64,
        fresh: bool,
    ) -> Option<(u64, u64, bool)> {
        if fresh && let Some(r) = self.alloc_fresh(goal, want) {
            return Some(r);
        }
        self.alloc_first_fit(goal, want)
    }

    /// The first run of blocks free and never freed since mount, from `goal` on.
    fn alloc_fresh(&mut self, goal: u64, want: u64) -> Option<(u64, u64, bool)> {
        if self.free_blocks == 0 || want == 0 {
            return None;
        }
        let groups = self.geo.groups;
        let goal = goal.min(self.geo.blocks - 1);
        let g0 = goal / BLOCKS_PER_GROUP;
        for k in 0..=groups {
            let g = (g0 + k) % groups;
            let mut from = if k == 0 { goal % BLOCKS_PER_GROUP } else { 0 };
            self.group_bits(g);
            loop {
                let bits = self.blocks[g as usize].as_ref().expect("made");
                let Some(start) = bits.first_clear(from, BLOCKS_PER_GROUP) else {
                    break;
                };
                let freed = self.freed[g as usize].as_ref();
                if freed.is_some_and(|f| f.get(start)) {
                    from = start + 1;
                    continue;
                }
                let mut n = 0;
                while n < want
                    && start + n < BLOCKS_PER_GROUP
                    && !bits.get(start + n)
                    && !freed.is_some_and(|f| f.get(start + n))
                {
                    n += 1;
                }
                let bits = self.blocks[g as usize].as_mut().expect("made");
                for i in start..start + n {
                    bits.set(i, true);
                }
                self.free_blocks -= n;
                return Some((g * BLOCKS_PER_GROUP + start, n, false));
            }
        }
        None
    }

    fn alloc_first_fit(&mut self, goal: u64, want: u64) -> Option<(u64, u64, bool)> {
        if self.free_blocks == 0 || want == 0 {
            return None;
        }
        let groups = self.geo.groups;
        let goal = goal.min(self.geo.blocks - 1);
        let g0 = goal / BLOCKS_PER_GROUP;
        for k in 0..=groups {
            let g = (g0 + k) % groups;
            let from = if k == 0 { goal % BLOCKS_PER_GROUP } else { 0 };
            let bits = self.group_bits(g);
            if bits.used == BLOCKS_PER_GROUP {
                continue;
            }
            let Some(start) = bits.first_clear(from, BLOCKS_PER_GROUP) else {
                continue;
            };
            let mut n = 0;
            while n < want && start + n < BLOCKS_PER_GROUP && !bits.get(start + n) {
                bits.set(start + n, true);
                n += 1;
            }
            self.free_blocks -= n;
            let first = g * BLOCKS_PER_GROUP + start;
            let reused = self.freed[g as usize]
                .as_ref()
                .is_some_and(|f| (start..start + n).any(|i| f.get(i)));
            return Some((first, n, reused));
        }
        None
    }

    /// Frees `n` blocks from `first` (within one group) on the bitmap, but keeps them from
    /// the allocator until [`release_run`](Self::release_run) (their transaction committed).
    pub fn free_run_deferred(&mut self, first: u64, n: u64) {
        let g = first / BLOCKS_PER_GROUP;
        let busy = self.busy[g as usize].get_or_insert_with(|| Bits::new(BLOCKS_PER_GROUP));
        for b in first..first + n {
            assert!(!busy.get(b % BLOCKS_PER_GROUP), "block {b} freed twice");
            busy.set(b % BLOCKS_PER_GROUP, true);
        }
    }

    /// Blocks freed earlier (`free_run_deferred`) may be allocated again.
    pub fn release_run(&mut self, first: u64, n: u64) {
        let g = first / BLOCKS_PER_GROUP;
        let busy = self.busy[g as usize].as_mut().expect("freed before");
        for b in first..first + n {
            busy.set(b % BLOCKS_PER_GROUP, false);
        }
        self.free_run(first, n);
    }

    /// Frees `n` blocks from `first` (within one group).
    pub fn free_run(&mut self, first: u64, n: u64) {
        let g = first / BLOCKS_PER_GROUP;
        let bits = self.group_bits(g);
        for b in first..first + n {
            let i = b % BLOCKS_PER_GROUP;
            assert!(bits.get(i), "block {b} freed twice");
            bits.set(i, false);
        }
        let f = self.freed[g as usize].get_or_insert_with(|| Bits::new(BLOCKS_PER_GROUP));
        for b in first..first + n {
            f.set(b % BLOCKS_PER_GROUP, true);
        }
        self.free_blocks += n;
    }

    /// Allocates an inode in group `g` or the first group after it with one free.
    pub fn alloc_inode(&mut self, g: u64) -> Option<u32> {
        let groups = self.geo.groups;
        for k in 0..groups {
            let grp = (g + k) % groups;
            let bits = self.inodes[grp as usize].get_or_insert_with(|| {
                let mut b = Bits::new(u64::from(INODES_PER_GROUP));
                if grp == 0 {
                    for i in 0..u64::from(FIRST_INO - 1) {
                        b.set(i, true);
                    }
                }
                b
            });
            if let Some(i) = bits.first_clear(0, u64::from(INODES_PER_GROUP)) {
                bits.set(i, true);
                return Some((grp * u64::from(INODES_PER_GROUP) + i) as u32 + 1);
            }
        }
        None
    }

    pub fn free_inode(&mut self, ino: u32) {
        let (g, i) = Geometry::inode_place(ino);
        let bits = self.inodes[g as usize]
            .as_mut()
            .expect("an allocated inode's group has a bitmap");
        assert!(bits.get(u64::from(i)), "inode {ino} freed twice");
        bits.set(u64::from(i), false);
    }

    /// What is in use in group `g`: device blocks (`inodes` false) or inode numbers, as
    /// sorted (first, count) runs.
    pub fn runs(&mut self, g: u64, inodes: bool) -> Vec<(u64, u64)> {
        if !inodes {
            self.group_bits(g);
        }
        let (bits, base, n) = if inodes {
            let Some(b) = self.inodes[g as usize].as_ref() else {
                return Vec::new();
            };
            (
                b,
                g * u64::from(INODES_PER_GROUP) + 1,
                u64::from(INODES_PER_GROUP),
            )
        } else {
            let b = self.blocks[g as usize].as_ref().expect("made above");
            (b, g * BLOCKS_PER_GROUP, BLOCKS_PER_GROUP)
        };
        let busy = if inodes {
            None
        } else {
            self.busy[g as usize].as_ref()
        };
        let mut out: Vec<(u64, u64)> = Vec::new();
        for i in 0..n {
            if bits.get(i) && !busy.is_some_and(|b| b.get(i)) {
                match out.last_mut() {
                    Some((s, c)) if *s + *c == base + i => *c += 1,
                    _ => out.push((base + i, 1)),
                }
            }
        }
        out
    }

    /// The first data block of group `g` (where a goal in that group starts).
    pub fn group_data_start(&self, g: u64) -> u64 {
        Geometry::data_start_of(g, self.geo.groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mke2fs_gives_a_terabyte_a_gigabyte_of_journal_in_the_middle() {
        let geo = Geometry::new(1 << 40, 1, 0).unwrap();
        assert_eq!(geo.groups, 8192);
        assert_eq!(
            geo.journals,
            vec![(4096 * BLOCKS_PER_GROUP + 16 * 514, 262_144)]
        );
        let per_core = Geometry::new(1 << 40, 24, 0).unwrap();
        assert_eq!(per_core.journals.len(), 24);
        assert_eq!(
            per_core.journals[1].0,
            per_core.journals[0].0 + 262_144 / 24
        );
    }

    #[test]
    fn metadata_blocks_sit_at_the_flex_groups_start_and_never_overlap() {
        let geo = Geometry::new(1 << 36, 1, 0).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for g in 0..geo.groups {
            assert!(seen.insert(geo.block_bitmap(g)));
            assert!(seen.insert(geo.inode_bitmap(g)));
        }
        let ino = INODES_PER_GROUP * 3 + 17 + 1;
        assert_eq!(
            geo.inode_block(ino),
            geo.block_bitmap(0) + 2 * FLEX + 3 * ITABLE_BLOCKS + 1
        );
        assert!(seen.iter().all(|&b| b > geo.gdt_block(geo.groups - 1)));
    }

    #[test]
    fn runs_start_at_the_goal_skip_what_is_used_and_report_reuse() {
        let geo = Geometry::new(1 << 36, 1, 0).unwrap();
        let mut a = Alloc::new(geo);
        let start = a.group_data_start(1);
        assert_eq!(a.alloc_run(start, 8), Some((start, 8, false)));
        assert_eq!(a.alloc_run(start, 4), Some((start + 8, 4, false)));
        a.free_run(start + 2, 2);
        assert_eq!(a.alloc_run(start, 8), Some((start + 2, 2, true)));
        // A reserved block is never handed out.
        let bm = a.geometry().block_bitmap(0);
        let (first, _, _) = a.alloc_run(bm, 1).unwrap();
        assert!(first > bm);
        assert_eq!(a.alloc_inode(0), Some(FIRST_INO));
        assert_eq!(a.alloc_inode(0), Some(FIRST_INO + 1));
        a.free_inode(FIRST_INO);
        assert_eq!(a.alloc_inode(0), Some(FIRST_INO));
    }
}
