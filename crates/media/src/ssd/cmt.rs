//! The cached mapping table (CMT): the mapping entries the controller keeps in DRAM when the
//! page map lives on flash, as DFTL (Gupta et al., ASPLOS 2009) and MQSim do. Entries are
//! cached one logical page at a time, least recently used out; a miss costs a read of the
//! translation page, evicting a changed (dirty) entry costs a translation-page program.

use std::collections::VecDeque;

/// A use superseded by a later one of the same entry.
const STALE: u32 = u32::MAX;

/// Where each cached page's entry is, indexed by the logical page: a table of chunks of
/// `CHUNK` pages, each allocated when a page of it is first cached. Written here rather than a
/// hash map because a hit, the commonest thing a read does, is then one indexed load where
/// the map hashed and probed a table of every cached entry (the mapping cache's hit path was
/// over a quarter of a PLM study run's time); the pages a drive caches are dense within the
/// spans its hosts use, so few chunks are allocated.
#[derive(Default)]
struct SlotIndex {
    chunks: Vec<Option<Box<[u32]>>>,
    len: usize,
}

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
/// No entry for the page.
const NO_SLOT: u32 = u32::MAX;

impl SlotIndex {
    fn split(lpa: u32) -> (usize, usize) {
        ((lpa >> CHUNK_BITS) as usize, lpa as usize & (CHUNK - 1))
    }

    fn get(&self, lpa: u32) -> Option<u32> {
        let (c, i) = Self::split(lpa);
        match self.chunks.get(c) {
            Some(Some(chunk)) if chunk[i] != NO_SLOT => Some(chunk[i]),
            _ => None,
        }
    }

    /// Records that `lpa`'s entry is in `slot` (it had none).
    fn insert(&mut self, lpa: u32, slot: u32) {
        let (c, i) = Self::split(lpa);
        if c >= self.chunks.len() {
            self.chunks.resize_with(c + 1, || None);
        }
        let chunk = self.chunks[c].get_or_insert_with(|| vec![NO_SLOT; CHUNK].into());
        debug_assert_eq!(chunk[i], NO_SLOT);
        chunk[i] = slot;
        self.len += 1;
    }

    fn remove(&mut self, lpa: u32) {
        let (c, i) = Self::split(lpa);
        if let Some(Some(chunk)) = self.chunks.get_mut(c)
            && chunk[i] != NO_SLOT
        {
            chunk[i] = NO_SLOT;
            self.len -= 1;
        }
    }

    fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    lpa: u32,
    dirty: bool,
    /// Position of the entry's latest use in the use log.
    used_at: u64,
}

/// Counters of the mapping cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmtStats {
    pub hits: u64,
    pub misses: u64,
    pub dirty_evictions: u64,
}

/// Least-recently-used order is kept as a log of uses (the slot used, oldest first) rather
/// than a linked list: a use appends, marks the entry's previous use stale and touches no
/// neighbour, and eviction takes the first live use from the front. The log is compacted when
/// stale uses make up half of it.
pub struct Cmt {
    capacity: u32,
    map: SlotIndex,
    slots: Vec<Slot>,
    uses: VecDeque<u32>,
    /// Position of `uses[0]`.
    uses_base: u64,
    pub stats: CmtStats,
}

/// Takes the least recently used slot off the front of the use log.
fn pop_lru(uses: &mut VecDeque<u32>, uses_base: &mut u64) -> u32 {
    loop {
        let s = uses.pop_front().expect("a full cache has a live use");
        *uses_base += 1;
        if s != STALE {
            return s;
        }
    }
}

impl Cmt {
    pub fn new(capacity: u32) -> Self {
        Cmt {
            capacity: capacity.max(1),
            map: SlotIndex::default(),
            slots: Vec::new(),
            uses: VecDeque::new(),
            uses_base: 0,
            stats: CmtStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len
    }

    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    /// Logs a use of slot `s`, which becomes the most recently used.
    fn log_use(&mut self, s: u32) {
        self.slots[s as usize].used_at = self.uses_base + self.uses.len() as u64;
        self.uses.push_back(s);
    }

    /// Slot `s` is used again: its earlier use goes stale.
    fn touch(&mut self, s: u32) {
        let at = self.slots[s as usize].used_at - self.uses_base;
        self.uses[at as usize] = STALE;
        self.log_use(s);
        if self.uses.len() > 2 * self.map.len + 64 {
            self.compact();
        }
    }

    /// Drops the stale uses, keeping the live ones in order.
    fn compact(&mut self) {
        let live: Vec<u32> = self.uses.iter().copied().filter(|&s| s != STALE).collect();
        self.uses.clear();
        for s in live {
            self.log_use(s);
        }
    }

    /// Whether `lpa`'s mapping is cached (a hit makes it the most recently used).
    pub fn lookup(&mut self, lpa: u32) -> bool {
        self.lookup_slot(lpa).is_some()
    }

    /// `lookup`, telling where the entry is (a hint for `update_at`).
    pub fn lookup_slot(&mut self, lpa: u32) -> Option<u32> {
        match self.map.get(lpa) {
            Some(s) => {
                self.stats.hits += 1;
                self.touch(s);
                Some(s)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    pub fn contains(&self, lpa: u32) -> bool {
        self.map.get(lpa).is_some()
    }

    /// Caches `lpa`'s mapping (read from its translation page). Returns the logical page of a
    /// dirty entry evicted to make room, whose translation page must be written back.
    pub fn insert(&mut self, lpa: u32, dirty: bool) -> Option<u32> {
        self.insert_at(lpa, dirty).0
    }

    /// `insert`, also telling where the entry now is (a hint for `update_at`).
    pub fn insert_at(&mut self, lpa: u32, dirty: bool) -> (Option<u32>, u32) {
        if let Some(s) = self.map.get(lpa) {
            self.slots[s as usize].dirty |= dirty;
            self.touch(s);
            return (None, s);
        }
        // The least recently used slot is reused if the cache is full.
        let (s, evicted) = if self.map.len as u32 >= self.capacity {
            let s = pop_lru(&mut self.uses, &mut self.uses_base);
            (s, Some(self.slots[s as usize]))
        } else {
            self.slots.push(Slot {
                lpa,
                dirty,
                used_at: 0,
            });
            ((self.slots.len() - 1) as u32, None)
        };
        let mut written_back = None;
        if let Some(old) = evicted {
            self.map.remove(old.lpa);
            if old.dirty {
                self.stats.dirty_evictions += 1;
                written_back = Some(old.lpa);
            }
            self.warm_next_eviction();
        }
        self.map.insert(lpa, s);
        self.slots[s as usize] = Slot {
            lpa,
            dirty,
            used_at: 0,
        };
        self.log_use(s);
        (written_back, s)
    }

    /// Starts loading what the next eviction will touch (the least recently used entry and
    /// its place in the index), so the misses overlap the work before it. The lookup's result
    /// is not needed; only its loads are.
    fn warm_next_eviction(&self) {
        if let Some(&s) = self.uses.front()
            && s != STALE
        {
            std::hint::black_box(self.map.get(self.slots[s as usize].lpa));
        }
    }

    /// The mapping of `lpa` changed (a program committed): the cached entry becomes dirty.
    /// Returns a dirty entry evicted if `lpa` had to be brought back in.
    pub fn update(&mut self, lpa: u32) -> Option<u32> {
        self.insert(lpa, true)
    }

    /// `update` where `hint` is where the entry was (`lookup_slot`, `insert_at`), if still
    /// so: a slot holds one cached page at a time, so a slot naming `lpa` is its entry.
    pub fn update_at(&mut self, lpa: u32, hint: u32) -> Option<u32> {
        match self.slots.get(hint as usize) {
            Some(slot) if slot.lpa == lpa => {
                self.slots[hint as usize].dirty = true;
                self.touch(hint);
                None
            }
            _ => self.insert(lpa, true),
        }
    }

    /// Forgets every entry (the DRAM lost power).
    pub fn clear(&mut self) {
        self.map.clear();
        self.slots.clear();
        self.uses.clear();
        self.uses_base = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_entry_leaves_first_and_dirty_ones_are_written_back() {
        let mut c = Cmt::new(2);
        assert!(!c.lookup(1));
        assert_eq!(c.insert(1, false), None);
        assert_eq!(c.insert(2, true), None);
        assert!(c.lookup(1)); // 2 is now least recently used
        assert_eq!(c.insert(3, false), Some(2));
        assert!(!c.contains(2));
        assert_eq!(c.insert(4, false), None); // 1 was clean
        assert!(!c.contains(1));
        assert_eq!(c.len(), 2);
        assert_eq!(c.stats.hits, 1);
        assert_eq!(c.stats.misses, 1);
        assert_eq!(c.stats.dirty_evictions, 1);
    }

    /// A plain LRU list (most recent first) of (page, dirty), searched linearly.
    struct ReferenceLru {
        capacity: usize,
        entries: Vec<(u32, bool)>,
    }

    impl ReferenceLru {
        fn lookup(&mut self, lpa: u32) -> bool {
            let Some(i) = self.entries.iter().position(|e| e.0 == lpa) else {
                return false;
            };
            let e = self.entries.remove(i);
            self.entries.insert(0, e);
            true
        }

        fn insert(&mut self, lpa: u32, dirty: bool) -> Option<u32> {
            if let Some(i) = self.entries.iter().position(|e| e.0 == lpa) {
                let (_, d) = self.entries.remove(i);
                self.entries.insert(0, (lpa, d || dirty));
                return None;
            }
            let evicted = if self.entries.len() >= self.capacity {
                self.entries.pop().filter(|e| e.1).map(|e| e.0)
            } else {
                None
            };
            self.entries.insert(0, (lpa, dirty));
            evicted
        }
    }

    #[test]
    fn evictions_match_a_plain_lru_list_through_many_hits_and_compactions() {
        let mut rng = qoslab_engine::RngStream::new(3, "cmt");
        // Pages next to each other, then spread over many chunks of the index (and at its
        // top, u32::MAX - 1 being the largest page a drive can have).
        for (capacity, stride) in [(1, 1), (2, 1), (7, 1), (50, 1), (50, 1_000), (7, 1 << 27)] {
            let mut c = Cmt::new(capacity);
            let mut r = ReferenceLru {
                capacity: capacity as usize,
                entries: Vec::new(),
            };
            for _ in 0..20_000 {
                // Few distinct pages, so hits (and stale uses) are frequent.
                let page = rng.below(u64::from(capacity) * 2 + 3) as u32;
                let lpa = (page * stride).min(u32::MAX - 1);
                match rng.below(4) {
                    0 => assert_eq!(c.lookup(lpa), r.lookup(lpa)),
                    1 => assert_eq!(c.insert(lpa, false), r.insert(lpa, false)),
                    2 => assert_eq!(c.update(lpa), r.insert(lpa, true)),
                    _ => {
                        // A hint that may be stale: another page's slot, or out of range.
                        let hint = rng.below(u64::from(capacity) + 2) as u32;
                        assert_eq!(c.update_at(lpa, hint), r.insert(lpa, true));
                    }
                }
                assert_eq!(c.len(), r.entries.len());
            }
            assert!(c.uses.len() <= 2 * c.len() + 64);
        }
    }
}
