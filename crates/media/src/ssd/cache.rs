//! The controller's DRAM write cache: logical pages with the sectors they hold and the sectors
//! not yet on flash, destaged per plane in the order they became dirty.
//!
//! Every host write that entered the cache is a [`Record`] until all its pages are on flash:
//! FLUSH waits for the records of the epochs before it, FUA waits for its own, and a power
//! failure without PLP loses exactly the records still live.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use qoslab_engine::Ns;

use super::prefetch;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Everything on flash: evictable, kept for read hits.
    Clean,
    /// Has dirty sectors, waiting in its plane's destage queue.
    Queued,
    /// A destage program is running; new writes may re-dirty it.
    Destaging,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    lpa: u32,
    plane: u32,
    present: u64,
    dirty: u64,
    state: State,
    /// Clean-LRU links.
    prev: u32,
    next: u32,
    /// Chain of nodes, one per write record that touched this page and is not on flash yet.
    head: u32,
    tail: u32,
    /// Last node included in the running destage.
    snap: u32,
    /// Holds FUA data: goes to flash even when the cache would otherwise wait.
    urgent: bool,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    record: u32,
    next: u32,
}

/// One host write in the cache, until every page of it is on flash.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub job: u32,
    pub queued_ns: Ns,
    /// The FLUSH epoch it was completed in.
    pub epoch: u64,
    pages_left: u32,
    /// The host request waiting for it to be durable (FUA without PLP), or `u32::MAX`.
    pub waiter: u32,
    /// Completed to the host.
    pub acknowledged: bool,
}

/// What one destage takes to flash.
#[derive(Clone, Copy, Debug)]
pub struct Destage {
    pub entry: u32,
    pub lpa: u32,
    pub dirty: u64,
    pub present: u64,
}

pub struct WriteCache {
    capacity: u32,
    /// Destaged pages stay as clean entries for read hits; false: they leave the cache.
    keep_destaged: bool,
    reserved: u32,
    map: FxHashMap<u32, u32>,
    entries: Vec<Entry>,
    free_entries: Vec<u32>,
    lru_head: u32,
    lru_tail: u32,
    clean: u32,
    queues: Vec<VecDeque<u32>>,
    /// Entries holding dirty data (queued or being destaged).
    pub dirty_entries: u32,
    records: Vec<Record>,
    free_records: Vec<u32>,
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    /// Live records per FLUSH epoch, from `epoch_base` on.
    epochs: VecDeque<u64>,
    epoch_base: u64,
}

impl WriteCache {
    pub fn new(capacity_pages: u32, planes: u32, keep_destaged: bool) -> Self {
        WriteCache {
            capacity: capacity_pages,
            keep_destaged,
            reserved: 0,
            map: FxHashMap::default(),
            entries: Vec::new(),
            free_entries: Vec::new(),
            lru_head: NIL,
            lru_tail: NIL,
            clean: 0,
            queues: vec![VecDeque::new(); planes as usize],
            dirty_entries: 0,
            records: Vec::new(),
            free_records: Vec::new(),
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            epochs: VecDeque::from([0]),
            epoch_base: 0,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    fn len(&self) -> u32 {
        (self.entries.len() - self.free_entries.len()) as u32
    }

    /// Pages a write may still claim: capacity minus dirty entries and reservations.
    pub fn room(&self) -> u32 {
        self.capacity
            .saturating_sub(self.len() - self.clean)
            .saturating_sub(self.reserved)
    }

    /// Whether `lpa` has a cache entry (a write to it needs no new page).
    pub fn holds(&self, lpa: u32) -> bool {
        self.map.contains_key(&lpa)
    }

    pub fn reserve(&mut self, pages: u32) {
        self.reserved += pages;
    }

    pub fn release(&mut self, pages: u32) {
        self.reserved -= pages;
    }

    /// Whether a read of `mask` in `lpa` can be served from DRAM.
    pub fn read_hit(&mut self, lpa: u32, mask: u64) -> bool {
        let Some(&e) = self.map.get(&lpa) else {
            return false;
        };
        let entry = self.entries[e as usize];
        if entry.present & mask != mask {
            return false;
        }
        if entry.state == State::Clean {
            self.lru_detach(e);
            self.lru_push(e);
        }
        true
    }

    fn lru_detach(&mut self, e: u32) {
        let Entry { prev, next, .. } = self.entries[e as usize];
        if prev == NIL {
            self.lru_head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lru_tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        self.clean -= 1;
    }

    fn lru_push(&mut self, e: u32) {
        self.entries[e as usize].prev = NIL;
        self.entries[e as usize].next = self.lru_head;
        if self.lru_head != NIL {
            self.entries[self.lru_head as usize].prev = e;
        }
        self.lru_head = e;
        if self.lru_tail == NIL {
            self.lru_tail = e;
        }
        self.clean += 1;
    }

    fn remove_entry(&mut self, e: u32) {
        let lpa = self.entries[e as usize].lpa;
        self.map.remove(&lpa);
        self.free_entries.push(e);
    }

    /// A new record for a host write of `pages` pages entering the cache now.
    pub fn new_record(
        &mut self,
        offset_bytes: u64,
        len_bytes: u64,
        job: u32,
        queued_ns: Ns,
        pages: u32,
        waiter: u32,
    ) -> u32 {
        let epoch = self.epoch_base + self.epochs.len() as u64 - 1;
        *self.epochs.back_mut().expect("an open epoch") += 1;
        let rec = Record {
            offset_bytes,
            len_bytes,
            job,
            queued_ns,
            epoch,
            pages_left: pages,
            waiter,
            acknowledged: waiter == u32::MAX,
        };
        match self.free_records.pop() {
            Some(r) => {
                self.records[r as usize] = rec;
                r
            }
            None => {
                self.records.push(rec);
                (self.records.len() - 1) as u32
            }
        }
    }

    pub fn record(&self, r: u32) -> &Record {
        &self.records[r as usize]
    }

    /// Writes `mask` of `lpa` (on `plane`) for record `r`. Returns whether the page joined its
    /// plane's destage queue (it was clean or new).
    pub fn write(&mut self, lpa: u32, plane: u32, mask: u64, r: u32) -> bool {
        let node = self.alloc_node(r);
        let mut fresh = false;
        let e = match self.map.get(&lpa) {
            Some(&e) => e,
            None => {
                fresh = true;
                if self.len() >= self.capacity && self.lru_tail != NIL {
                    let victim = self.lru_tail;
                    self.lru_detach(victim);
                    self.remove_entry(victim);
                    self.warm_next_eviction();
                }
                let entry = Entry {
                    lpa,
                    plane,
                    present: 0,
                    dirty: 0,
                    state: State::Clean,
                    prev: NIL,
                    next: NIL,
                    head: NIL,
                    tail: NIL,
                    snap: NIL,
                    urgent: false,
                };
                let e = match self.free_entries.pop() {
                    Some(e) => {
                        self.entries[e as usize] = entry;
                        e
                    }
                    None => {
                        self.entries.push(entry);
                        (self.entries.len() - 1) as u32
                    }
                };
                self.map.insert(lpa, e);
                e
            }
        };
        let entry = &mut self.entries[e as usize];
        entry.present |= mask;
        entry.dirty |= mask;
        if entry.tail == NIL {
            entry.head = node;
        } else {
            self.nodes[entry.tail as usize].next = node;
        }
        let entry = &mut self.entries[e as usize];
        entry.tail = node;
        if entry.state == State::Clean {
            if !fresh {
                self.lru_detach(e);
            }
            self.entries[e as usize].state = State::Queued;
            self.queues[plane as usize].push_back(e);
            self.dirty_entries += 1;
            return true;
        }
        false
    }

    /// Starts loading what the next eviction will touch (the least recently used clean
    /// entry and its place in the map), so the misses overlap the work before it. The
    /// lookup's result is not needed; only its loads are.
    fn warm_next_eviction(&self) {
        if self.lru_tail != NIL {
            let lpa = self.entries[self.lru_tail as usize].lpa;
            std::hint::black_box(self.map.contains_key(&lpa));
        }
    }

    fn alloc_node(&mut self, record: u32) -> u32 {
        let n = Node { record, next: NIL };
        match self.free_nodes.pop() {
            Some(i) => {
                self.nodes[i as usize] = n;
                i
            }
            None => {
                self.nodes.push(n);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Moves `lpa`'s page to the head of its plane's destage queue (a FUA write goes to flash
    /// ahead of older dirty data).
    pub fn promote(&mut self, lpa: u32) {
        let Some(&e) = self.map.get(&lpa) else {
            return;
        };
        let entry = self.entries[e as usize];
        if entry.state != State::Queued {
            return;
        }
        let queue = &mut self.queues[entry.plane as usize];
        if let Some(i) = queue.iter().position(|&x| x == e) {
            queue.remove(i);
            queue.push_front(e);
        }
        self.entries[e as usize].urgent = true;
    }

    /// Whether the next page of `plane`'s destage queue holds FUA data.
    pub fn urgent(&self, plane: u32) -> bool {
        self.queues[plane as usize]
            .front()
            .is_some_and(|&e| self.entries[e as usize].urgent)
    }

    /// Pages waiting in `plane`'s destage queue.
    pub fn queued(&self, plane: u32) -> usize {
        self.queues[plane as usize].len()
    }

    /// Takes the next page of `plane` to destage.
    pub fn next_destage(&mut self, plane: u32) -> Option<Destage> {
        let e = self.queues[plane as usize].pop_front()?;
        // The plane's next destage starts when one of its running ones ends.
        if let Some(&next) = self.queues[plane as usize].front() {
            prefetch(&self.entries[next as usize]);
        }
        let entry = &mut self.entries[e as usize];
        if entry.head != NIL {
            prefetch(&self.nodes[entry.head as usize]);
        }
        debug_assert_eq!(entry.state, State::Queued);
        entry.state = State::Destaging;
        entry.urgent = false;
        entry.snap = entry.tail;
        let d = Destage {
            entry: e,
            lpa: entry.lpa,
            dirty: entry.dirty,
            present: entry.present,
        };
        entry.dirty = 0;
        Some(d)
    }

    /// The destage of `d` will end: start loading the first write record it settles.
    pub fn prefetch_destage_done(&self, d: &Destage) {
        let head = self.entries[d.entry as usize].head;
        if head != NIL {
            prefetch(&self.records[self.nodes[head as usize].record as usize]);
        }
    }

    /// The destage of `d` is on flash. Pushes the records that became durable onto `durable`;
    /// returns whether the page went back into its plane's queue (re-dirtied meanwhile).
    pub fn destage_done(&mut self, d: &Destage, durable: &mut Vec<u32>) -> bool {
        let e = d.entry;
        self.release_nodes(e, self.entries[e as usize].snap, durable);
        let entry = &mut self.entries[e as usize];
        entry.snap = NIL;
        if entry.dirty != 0 {
            entry.state = State::Queued;
            let plane = entry.plane;
            self.queues[plane as usize].push_back(e);
            true
        } else {
            entry.state = State::Clean;
            self.dirty_entries -= 1;
            if self.keep_destaged {
                self.lru_push(e);
            } else {
                self.remove_entry(e);
            }
            false
        }
    }

    /// Releases the nodes of entry `e` up to and including `last`.
    fn release_nodes(&mut self, e: u32, last: u32, durable: &mut Vec<u32>) {
        let mut n = self.entries[e as usize].head;
        let mut done = last == NIL;
        while !done && n != NIL {
            done = n == last;
            let Node { record, next } = self.nodes[n as usize];
            self.free_nodes.push(n);
            let rec = &mut self.records[record as usize];
            rec.pages_left -= 1;
            if rec.pages_left == 0 {
                let i = (rec.epoch - self.epoch_base) as usize;
                self.epochs[i] -= 1;
                durable.push(record);
            }
            n = next;
        }
        let entry = &mut self.entries[e as usize];
        entry.head = n;
        if n == NIL {
            entry.tail = NIL;
        }
        // Drop drained epochs at the front, keeping the open one.
        while self.epochs.len() > 1 && self.epochs[0] == 0 {
            self.epochs.pop_front();
            self.epoch_base += 1;
        }
    }

    /// Frees a durable record (after its waiter, if any, was told).
    pub fn free_record(&mut self, r: u32) {
        self.free_records.push(r);
    }

    /// Closes the current epoch for a FLUSH and returns it: the flush is done when every
    /// record of it and of earlier epochs is durable.
    pub fn close_epoch(&mut self) -> u64 {
        let e = self.epoch_base + self.epochs.len() as u64 - 1;
        self.epochs.push_back(0);
        while self.epochs.len() > 1 && self.epochs[0] == 0 {
            self.epochs.pop_front();
            self.epoch_base += 1;
        }
        e
    }

    /// Whether every record of epochs up to `e` is durable.
    pub fn drained(&self, e: u64) -> bool {
        e < self.epoch_base
    }

    /// Records not yet durable, in slot order (power failure).
    pub fn live_records(&self) -> Vec<Record> {
        self.records
            .iter()
            .filter(|r| r.pages_left > 0)
            .copied()
            .collect()
    }

    /// Drops `lpa`'s page (TRIM): its dirty data no longer needs to reach flash, so its
    /// records count as settled. A page being destaged stays until its program ends.
    pub fn discard(&mut self, lpa: u32, durable: &mut Vec<u32>) {
        let Some(&e) = self.map.get(&lpa) else {
            return;
        };
        match self.entries[e as usize].state {
            State::Destaging => {}
            State::Clean => {
                self.lru_detach(e);
                self.remove_entry(e);
            }
            State::Queued => {
                let tail = self.entries[e as usize].tail;
                self.release_nodes(e, tail, durable);
                let plane = self.entries[e as usize].plane as usize;
                self.queues[plane].retain(|&x| x != e);
                self.dirty_entries -= 1;
                self.remove_entry(e);
            }
        }
    }

    /// Empties the cache (power lost without protection): every record is gone.
    pub fn clear(&mut self) {
        let planes = self.queues.len() as u32;
        *self = WriteCache::new(self.capacity, planes, self.keep_destaged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destage_settles_the_records_it_carried_and_not_later_ones() {
        let mut c = WriteCache::new(4, 1, true);
        let r1 = c.new_record(0, 4096, 0, 0, 1, NIL);
        assert!(c.write(7, 0, 0b01, r1));
        let d = c.next_destage(0).unwrap();
        assert_eq!((d.lpa, d.dirty), (7, 0b01));
        // A second write lands while the first destage runs.
        let r2 = c.new_record(4096, 4096, 0, 0, 1, NIL);
        assert!(!c.write(7, 0, 0b10, r2));
        let mut durable = Vec::new();
        assert!(c.destage_done(&d, &mut durable));
        assert_eq!(durable, vec![r1]);
        let d2 = c.next_destage(0).unwrap();
        assert_eq!((d2.dirty, d2.present), (0b10, 0b11));
        durable.clear();
        assert!(!c.destage_done(&d2, &mut durable));
        assert_eq!(durable, vec![r2]);
        assert_eq!(c.dirty_entries, 0);
        assert!(c.read_hit(7, 0b11));
    }

    #[test]
    fn mqsims_rule_frees_a_page_once_it_is_on_flash_and_serves_no_read_from_it() {
        for keep in [true, false] {
            let mut c = WriteCache::new(4, 1, keep);
            let r = c.new_record(0, 4096, 0, 0, 1, NIL);
            c.write(7, 0, 0b11, r);
            assert!(
                c.read_hit(7, 0b11),
                "a page waiting for flash is read from DRAM"
            );
            let d = c.next_destage(0).unwrap();
            assert!(c.read_hit(7, 0b11), "and while its program runs");
            c.destage_done(&d, &mut Vec::new());
            assert_eq!(c.read_hit(7, 0b11), keep, "once on flash: kept {keep}");
            assert_eq!(c.holds(7), keep);
            assert_eq!(c.room(), 4);
        }
    }

    #[test]
    fn a_flush_epoch_drains_when_its_records_are_durable() {
        let mut c = WriteCache::new(4, 2, true);
        let r1 = c.new_record(0, 8192, 0, 0, 2, NIL);
        c.write(1, 0, 1, r1);
        c.write(2, 1, 1, r1);
        let e = c.close_epoch();
        assert!(!c.drained(e));
        let r2 = c.new_record(0, 4096, 0, 0, 1, NIL);
        c.write(3, 0, 1, r2);
        let mut durable = Vec::new();
        let a = c.next_destage(0).unwrap();
        c.destage_done(&a, &mut durable);
        assert!(!c.drained(e), "half of the write is still in DRAM");
        let b = c.next_destage(1).unwrap();
        c.destage_done(&b, &mut durable);
        assert_eq!(durable, vec![r1]);
        assert!(c.drained(e), "the later write does not hold the flush back");
        assert_eq!(c.live_records().len(), 1);
    }

    #[test]
    fn clean_pages_make_room_and_dirty_ones_do_not() {
        let mut c = WriteCache::new(2, 1, true);
        assert_eq!(c.room(), 2);
        let r = c.new_record(0, 4096, 0, 0, 2, NIL);
        c.write(1, 0, 1, r);
        c.write(2, 0, 1, r);
        assert_eq!(c.room(), 0);
        let d = c.next_destage(0).unwrap();
        let mut durable = Vec::new();
        c.destage_done(&d, &mut durable);
        assert_eq!(c.room(), 1);
        let r2 = c.new_record(0, 4096, 0, 0, 1, NIL);
        c.write(3, 0, 1, r2); // evicts the clean page 1
        assert!(!c.holds(1));
        assert!(c.holds(2) && c.holds(3));
    }
}
