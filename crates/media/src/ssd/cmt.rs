//! The cached mapping table (CMT): the mapping entries the controller keeps in DRAM when the
//! page map lives on flash, as DFTL (Gupta et al., ASPLOS 2009) and MQSim do. Entries are
//! cached one logical page at a time, least recently used out; a miss costs a read of the
//! translation page, evicting a changed (dirty) entry costs a translation-page program.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// A use superseded by a later one of the same entry.
const STALE: u32 = u32::MAX;

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
    map: FxHashMap<u32, u32>,
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
            map: FxHashMap::default(),
            slots: Vec::new(),
            uses: VecDeque::new(),
            uses_base: 0,
            stats: CmtStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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
        if self.uses.len() > 2 * self.map.len() + 64 {
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
        match self.map.get(&lpa) {
            Some(&s) => {
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
        self.map.contains_key(&lpa)
    }

    /// Caches `lpa`'s mapping (read from its translation page). Returns the logical page of a
    /// dirty entry evicted to make room, whose translation page must be written back.
    pub fn insert(&mut self, lpa: u32, dirty: bool) -> Option<u32> {
        self.insert_at(lpa, dirty).0
    }

    /// `insert`, also telling where the entry now is (a hint for `update_at`).
    pub fn insert_at(&mut self, lpa: u32, dirty: bool) -> (Option<u32>, u32) {
        use std::collections::hash_map::Entry;
        // One probe finds or claims the key; the least recently used slot is reused if full.
        let full = self.map.len() as u32 >= self.capacity;
        let (s, evicted) = match self.map.entry(lpa) {
            Entry::Occupied(e) => {
                let s = *e.get();
                self.slots[s as usize].dirty |= dirty;
                self.touch(s);
                return (None, s);
            }
            Entry::Vacant(v) => {
                if full {
                    let s = pop_lru(&mut self.uses, &mut self.uses_base);
                    v.insert(s);
                    (s, Some(self.slots[s as usize]))
                } else {
                    self.slots.push(Slot {
                        lpa,
                        dirty,
                        used_at: 0,
                    });
                    let s = (self.slots.len() - 1) as u32;
                    v.insert(s);
                    (s, None)
                }
            }
        };
        let mut written_back = None;
        if let Some(old) = evicted {
            self.map.remove(&old.lpa);
            if old.dirty {
                self.stats.dirty_evictions += 1;
                written_back = Some(old.lpa);
            }
            self.warm_next_eviction();
        }
        self.slots[s as usize] = Slot {
            lpa,
            dirty,
            used_at: 0,
        };
        self.log_use(s);
        (written_back, s)
    }

    /// Starts loading what the next eviction will touch (the least recently used entry and
    /// its place in the map), so the misses overlap the work before it. The lookup's result
    /// is not needed; only its loads are.
    fn warm_next_eviction(&self) {
        if let Some(&s) = self.uses.front()
            && s != STALE
        {
            std::hint::black_box(self.map.contains_key(&self.slots[s as usize].lpa));
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
        for capacity in [1, 2, 7, 50] {
            let mut c = Cmt::new(capacity);
            let mut r = ReferenceLru {
                capacity: capacity as usize,
                entries: Vec::new(),
            };
            for _ in 0..20_000 {
                // Few distinct pages, so hits (and stale uses) are frequent.
                let lpa = rng.below(u64::from(capacity) * 2 + 3) as u32;
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
