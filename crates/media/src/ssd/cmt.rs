//! The cached mapping table (CMT): the mapping entries the controller keeps in DRAM when the
//! page map lives on flash, as DFTL (Gupta et al., ASPLOS 2009) and MQSim do. Entries are
//! cached one logical page at a time, least recently used out; a miss costs a read of the
//! translation page, evicting a changed (dirty) entry costs a translation-page program.

use rustc_hash::FxHashMap;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot {
    lpa: u32,
    dirty: bool,
    prev: u32,
    next: u32,
}

/// Counters of the mapping cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmtStats {
    pub hits: u64,
    pub misses: u64,
    pub dirty_evictions: u64,
}

pub struct Cmt {
    capacity: u32,
    map: FxHashMap<u32, u32>,
    slots: Vec<Slot>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    pub stats: CmtStats,
}

impl Cmt {
    pub fn new(capacity: u32) -> Self {
        Cmt {
            capacity: capacity.max(1),
            map: FxHashMap::default(),
            slots: Vec::new(),
            head: NIL,
            tail: NIL,
            stats: CmtStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn detach(&mut self, s: u32) {
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, s: u32) {
        self.slots[s as usize].prev = NIL;
        self.slots[s as usize].next = self.head;
        if self.head != NIL {
            self.slots[self.head as usize].prev = s;
        }
        self.head = s;
        if self.tail == NIL {
            self.tail = s;
        }
    }

    /// Whether `lpa`'s mapping is cached (a hit makes it the most recently used).
    pub fn lookup(&mut self, lpa: u32) -> bool {
        match self.map.get(&lpa) {
            Some(&s) => {
                self.stats.hits += 1;
                self.detach(s);
                self.push_front(s);
                true
            }
            None => {
                self.stats.misses += 1;
                false
            }
        }
    }

    pub fn contains(&self, lpa: u32) -> bool {
        self.map.contains_key(&lpa)
    }

    /// Caches `lpa`'s mapping (read from its translation page). Returns the logical page of a
    /// dirty entry evicted to make room, whose translation page must be written back.
    pub fn insert(&mut self, lpa: u32, dirty: bool) -> Option<u32> {
        use std::collections::hash_map::Entry;
        // One probe finds or claims the key; the least recently used slot is reused if full.
        let full = self.map.len() as u32 >= self.capacity;
        let s = match self.map.entry(lpa) {
            Entry::Occupied(e) => {
                let s = *e.get();
                self.slots[s as usize].dirty |= dirty;
                self.detach(s);
                self.push_front(s);
                return None;
            }
            Entry::Vacant(v) => {
                let s = if full {
                    self.tail
                } else {
                    self.slots.push(Slot {
                        lpa,
                        dirty,
                        prev: NIL,
                        next: NIL,
                    });
                    (self.slots.len() - 1) as u32
                };
                v.insert(s);
                s
            }
        };
        let mut written_back = None;
        if full {
            self.detach(s);
            let old = self.slots[s as usize];
            self.map.remove(&old.lpa);
            if old.dirty {
                self.stats.dirty_evictions += 1;
                written_back = Some(old.lpa);
            }
        }
        self.slots[s as usize] = Slot {
            lpa,
            dirty,
            prev: NIL,
            next: NIL,
        };
        self.push_front(s);
        written_back
    }

    /// The mapping of `lpa` changed (a program committed): the cached entry becomes dirty.
    /// Returns a dirty entry evicted if `lpa` had to be brought back in.
    pub fn update(&mut self, lpa: u32) -> Option<u32> {
        self.insert(lpa, true)
    }

    /// Forgets every entry (the DRAM lost power).
    pub fn clear(&mut self) {
        self.map.clear();
        self.slots.clear();
        self.head = NIL;
        self.tail = NIL;
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
}
