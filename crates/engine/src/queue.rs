//! The event queue: pending events ordered by (time, insertion sequence).
//!
//! Events scheduled for the same instant come out in the order they were scheduled, so a run
//! never depends on queue internals, addresses or hashing.
//!
//! Besides timed events the queue has an urgent lane (SimPy's `URGENT` priority): events for
//! the current instant that come before every timed event, first in, first out. The stages of
//! a path hand requests to each other through it, so a hand-off made while an event runs takes
//! effect at the same simulated time, after that event, in the order the hand-offs were made.
//!
//! Every event has one packed u128 key: time in the high 64 bits, then its sequence number,
//! then (for the far heap) its slot in a side table. The sequence is unique, so keys never tie
//! and the bits below it never affect the order.
//!
//! Most events of a device model fall due within a millisecond (a transfer, a page read or
//! program), so the queue is a calendar: a ring of `NEAR_BUCKETS` buckets of `2^BUCKET_SHIFT`
//! ns, each with room for `BUCKET_EVENTS` events in one flat table, holds events due before the
//! ring wraps past the current bucket, with a bit per non-empty bucket. Events due later (an
//! erase, a distant job wake-up), or finding their bucket full, wait in a 4-ary heap of keys. The earliest event is the
//! smaller of the first non-empty bucket's minimum and the heap's top. Scheduling and popping
//! cost a few dozen instructions, where a heap of a hundred pending events costs a few hundred
//! per event; the simulator handles tens of events per simulated I/O. (Hand-written for that
//! reason; the ordering contract is that of a heap of (time, sequence).)

use std::collections::VecDeque;

use crate::time::Ns;

const ARITY: usize = 4;
/// Low bits of a far key holding the event's slot: at most this many far events at once.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u128 = (1 << SLOT_BITS) - 1;
/// Width of a near bucket: 1,024 ns.
const BUCKET_SHIFT: u32 = 10;
/// Near buckets: the ring spans about a millisecond.
const NEAR_BUCKETS: usize = 1024;
const WORDS: usize = NEAR_BUCKETS / 64;
/// Room per near bucket (a bucket rarely holds more than one event).
const BUCKET_EVENTS: usize = 4;

/// Pending events of one simulation, earliest first, FIFO among equal times.
pub struct EventQueue<E> {
    /// Near events with their keys: bucket `b = (time >> BUCKET_SHIFT) % NEAR_BUCKETS` holds
    /// `near_count[b]` of them, unordered, from `b * BUCKET_EVENTS` on (a key beside its
    /// event: a bucket's usual single event is one cache line).
    near: Vec<(u128, E)>,
    near_count: Vec<u8>,
    /// Bit per non-empty near bucket.
    occupied: [u64; WORDS],
    near_len: usize,
    /// Far events: a 4-ary min-heap of keys; the events by slot, `free` the unused slots.
    far: Vec<u128>,
    far_slots: Vec<E>,
    free: Vec<u32>,
    next_seq: u64,
    now_ns: Ns,
    /// Events for the current instant that come before any timed event.
    urgent: VecDeque<E>,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            near: Vec::new(),
            near_count: vec![0; NEAR_BUCKETS],
            occupied: [0; WORDS],
            near_len: 0,
            far: Vec::new(),
            far_slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
            now_ns: 0,
            urgent: VecDeque::with_capacity(64),
        }
    }

    /// Schedules `event` now, before every timed event, after the urgent events already
    /// waiting.
    #[inline(always)]
    pub fn schedule_urgent(&mut self, event: E) {
        self.urgent.push_back(event);
    }

    /// Removes the oldest urgent event; the clock does not move.
    #[inline(always)]
    pub fn pop_urgent(&mut self) -> Option<E> {
        self.urgent.pop_front()
    }

    /// Time of the event most recently popped (0 before the first).
    pub fn now_ns(&self) -> Ns {
        self.now_ns
    }

    /// Schedules `event` at absolute time `at_ns`.
    ///
    /// # Panics
    /// When `at_ns` lies before the current time: a model that schedules into the past has a
    /// bug that would otherwise silently reorder history. Also past 2^40 events scheduled, or
    /// 2^24 far events pending at once.
    // Inlined into every caller: the near path is a handful of instructions, fewer than a
    // call's register saves; the far path stays out of line.
    #[inline(always)]
    pub fn schedule(&mut self, at_ns: Ns, event: E) {
        assert!(
            at_ns >= self.now_ns,
            "event scheduled in the past: {at_ns} < {}",
            self.now_ns
        );
        assert!(
            self.next_seq < 1 << (64 - SLOT_BITS),
            "more than 2^{} events scheduled",
            64 - SLOT_BITS
        );
        let key = (u128::from(at_ns) << 64) | u128::from(self.next_seq) << SLOT_BITS;
        self.next_seq += 1;
        let bucket = at_ns >> BUCKET_SHIFT;
        let b = bucket as usize % NEAR_BUCKETS;
        let count = usize::from(self.near_count[b]);
        // Near only while the ring cannot wrap onto the current bucket: every near event then
        // sits in a bucket of its own lap.
        if bucket < (self.now_ns >> BUCKET_SHIFT) + NEAR_BUCKETS as u64 && count < BUCKET_EVENTS {
            if self.near.is_empty() {
                // Events have no default: the first one fills the table's unused places.
                self.near = vec![(0, event); NEAR_BUCKETS * BUCKET_EVENTS];
            }
            self.near[b * BUCKET_EVENTS + count] = (key, event);
            self.near_count[b] += 1;
            self.occupied[b / 64] |= 1 << (b % 64);
            self.near_len += 1;
        } else {
            self.push_far(key, event);
        }
    }

    /// Schedules `event` `delay_ns` after the current time.
    pub fn schedule_in(&mut self, delay_ns: Ns, event: E) {
        self.schedule(self.now_ns + delay_ns, event);
    }

    /// Removes the earliest timed event and advances the clock to it. Urgent events are taken
    /// with [`pop_urgent`](Self::pop_urgent), which the caller drains first.
    // Always inlined: a run loop calls it in one place, and the call's register saves and the
    // event returned through memory cost more than the pop itself.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(Ns, E)> {
        let near = self.first_near_bucket();
        let far_key = self.far.first().copied();
        let key = match (near, far_key) {
            (None, None) => return None,
            (Some(b), far) => {
                let first = b * BUCKET_EVENTS;
                let last = first + usize::from(self.near_count[b]) - 1;
                let mut best = first;
                for i in first + 1..=last {
                    if self.near[i].0 < self.near[best].0 {
                        best = i;
                    }
                }
                let key = self.near[best].0;
                if far.is_some_and(|f| f < key) {
                    self.pop_far()
                } else {
                    let event = self.near[best].1;
                    self.near[best] = self.near[last];
                    self.near_count[b] -= 1;
                    if last == first {
                        self.occupied[b / 64] &= !(1 << (b % 64));
                    }
                    self.near_len -= 1;
                    return Some(self.advance(key, event));
                }
            }
            (None, Some(_)) => self.pop_far(),
        };
        let slot = (key & SLOT_MASK) as u32;
        self.free.push(slot);
        Some(self.advance(key, self.far_slots[slot as usize]))
    }

    #[inline]
    fn advance(&mut self, key: u128, event: E) -> (Ns, E) {
        let at_ns = (key >> 64) as Ns;
        self.now_ns = at_ns;
        (at_ns, event)
    }

    /// The non-empty near bucket due first: the first set bit from the current bucket on,
    /// around the ring.
    #[inline]
    fn first_near_bucket(&self) -> Option<usize> {
        if self.near_len == 0 {
            return None;
        }
        let start = (self.now_ns >> BUCKET_SHIFT) as usize % NEAR_BUCKETS;
        let (w0, bit) = (start / 64, start % 64);
        let head = self.occupied[w0] >> bit;
        if head != 0 {
            return Some(start + head.trailing_zeros() as usize);
        }
        for k in 1..=WORDS {
            let w = (w0 + k) % WORDS;
            // The start word again last, for its bits before `start`.
            let word = if k == WORDS {
                self.occupied[w] & ((1 << bit) - 1)
            } else {
                self.occupied[w]
            };
            if word != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
        }
        unreachable!("near events but no occupied bucket")
    }

    #[cold]
    #[inline(never)]
    fn push_far(&mut self, key: u128, event: E) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.far_slots[slot as usize] = event;
                slot
            }
            None => {
                assert!(
                    (self.far_slots.len() as u128) < SLOT_MASK,
                    "more than 2^{SLOT_BITS} far events pending"
                );
                self.far_slots.push(event);
                (self.far_slots.len() - 1) as u32
            }
        };
        let k = key | u128::from(slot);
        // Sift up: move parents down into the hole until the new key's place is found.
        let mut i = self.far.len();
        self.far.push(k);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pk = self.far[parent];
            if pk <= k {
                break;
            }
            self.far[i] = pk;
            i = parent;
        }
        self.far[i] = k;
    }

    /// Removes the far heap's top key.
    #[cold]
    #[inline(never)]
    fn pop_far(&mut self) -> u128 {
        let last = self.far.pop().expect("a far event");
        if self.far.is_empty() {
            return last;
        }
        let top = self.far[0];
        // Fill the hole at the root with `last`, moving smaller children up.
        let keys = &mut self.far[..];
        let n = keys.len();
        let mut i = 0;
        loop {
            let first = i * ARITY + 1;
            if first >= n {
                break;
            }
            let mut best = first;
            for c in first + 1..(first + ARITY).min(n) {
                if keys[c] < keys[best] {
                    best = c;
                }
            }
            if keys[best] >= last {
                break;
            }
            keys[i] = keys[best];
            i = best;
        }
        keys[i] = last;
        top
    }

    /// Time of the next event without removing it.
    pub fn peek_time_ns(&self) -> Option<Ns> {
        let near = self.first_near_bucket().and_then(|b| {
            let first = b * BUCKET_EVENTS;
            self.near[first..first + usize::from(self.near_count[b])]
                .iter()
                .map(|e| e.0)
                .min()
        });
        let far = self.far.first().copied();
        match (near, far) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|k| (k >> 64) as Ns)
    }

    /// Timed events pending (urgent ones not counted).
    pub fn len(&self) -> usize {
        self.near_len + self.far.len()
    }

    /// Urgent events pending.
    pub fn urgent_len(&self) -> usize {
        self.urgent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_by_scheduling_order() {
        let mut q = EventQueue::new();
        q.schedule(20, "c");
        q.schedule(10, "a");
        q.schedule(20, "d");
        q.schedule(10, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(10, "a"), (10, "b"), (20, "c"), (20, "d")]);
        assert_eq!(q.now_ns(), 20);
    }

    #[test]
    fn urgent_events_come_first_in_order_and_do_not_move_the_clock() {
        let mut q = EventQueue::new();
        q.schedule(5, "timed");
        q.pop();
        q.schedule(5, "later at the same time");
        q.schedule_urgent("u1");
        q.schedule_urgent("u2");
        assert_eq!(q.pop_urgent(), Some("u1"));
        q.schedule_urgent("u3");
        assert_eq!(q.pop_urgent(), Some("u2"));
        assert_eq!(q.pop_urgent(), Some("u3"));
        assert_eq!(q.pop_urgent(), None);
        assert_eq!(q.now_ns(), 5);
        assert_eq!(q.pop(), Some((5, "later at the same time")));
    }

    #[test]
    fn relative_scheduling_counts_from_the_last_popped_event() {
        let mut q = EventQueue::new();
        q.schedule(100, 1);
        q.pop();
        q.schedule_in(5, 2);
        assert_eq!(q.pop(), Some((105, 2)));
    }

    #[test]
    #[should_panic(expected = "in the past")]
    fn scheduling_into_the_past_is_a_bug() {
        let mut q = EventQueue::new();
        q.schedule(100, ());
        q.pop();
        q.schedule(99, ());
    }

    #[test]
    fn many_interleaved_events_come_out_sorted_and_stable() {
        // A pseudo-random schedule checked against a stable sort of the same events.
        let mut q = EventQueue::new();
        let mut expected = Vec::new();
        let mut x: u64 = 12345;
        let mut id = 0u32;
        for round in 0..200 {
            for _ in 0..(x % 17) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = q.now_ns() + (x >> 58); // small delays: many ties
                q.schedule(at, id);
                expected.push((at, id));
                id += 1;
            }
            for _ in 0..(round % 5) {
                if let Some(e) = q.pop() {
                    let pos = expected
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, (t, i))| (*t, *i))
                        .map(|(p, _)| p)
                        .unwrap();
                    assert_eq!(e, expected.remove(pos));
                }
            }
        }
        expected.sort();
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, expected);
    }

    #[test]
    fn an_event_one_ring_span_ahead_waits_for_the_events_before_it() {
        let span = (NEAR_BUCKETS as u64) << BUCKET_SHIFT;
        let mut q = EventQueue::new();
        q.schedule(10, 0);
        q.pop();
        // Same bucket index as the current one, one lap on; then one two buckets on.
        q.schedule(span, 1);
        q.schedule(span - 1, 2);
        q.schedule(3000, 3);
        assert_eq!(q.pop(), Some((3000, 3)));
        assert_eq!(q.pop(), Some((span - 1, 2)));
        assert_eq!(q.pop(), Some((span, 1)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn near_and_far_events_across_many_laps_come_out_sorted_and_stable() {
        // Delays from a nanosecond to several ring spans, many ties, checked against a stable
        // sort of the same events; the clock crosses the ring hundreds of times.
        let mut q = EventQueue::new();
        let mut expected = Vec::new();
        let mut out = Vec::new();
        let mut x: u64 = 987654321;
        let mut id = 0u32;
        for round in 0..3000 {
            for _ in 0..(x % 7) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let delay = match x >> 62 {
                    0 => (x >> 40) % 8,
                    1 => (x >> 40) % 5_000,
                    2 => (x >> 40) % 1_100_000,
                    _ => (x >> 40) % 5_000_000,
                };
                // Round to a few distinct instants so that ties are common.
                let at = q.now_ns() + delay / 4 * 4;
                q.schedule(at, id);
                expected.push((at, id));
                id += 1;
            }
            assert_eq!(q.len(), expected.len() - out.len());
            for _ in 0..(round % 4) {
                if let Some(e) = q.pop() {
                    out.push(e);
                }
            }
            if round % 97 == 0 {
                let next = q.peek_time_ns();
                if let Some(e) = q.pop() {
                    assert_eq!(Some(e.0), next);
                    out.push(e);
                }
            }
        }
        out.extend(std::iter::from_fn(|| q.pop()));
        expected.sort();
        assert_eq!(out, expected);
        assert!(q.is_empty());
    }
}
