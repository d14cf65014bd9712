//! The event queue: a min-heap ordered by (time, insertion sequence).
//!
//! Events scheduled for the same instant come out in the order they were scheduled, so a run
//! never depends on heap internals, addresses or hashing.
//!
//! The heap is 4-ary over one packed u128 key (time in the high 64 bits, sequence in the low):
//! the simulator pushes and pops a few events per simulated I/O, and a flatter heap with one
//! integer comparison per step does that in about half the time of `std`'s binary heap of
//! tuple keys. Keys and events sit in separate arrays, so the four children compared at each
//! step share one cache line, and both sifts move a hole rather than swapping entries.
//! (Hand-written for that reason; the ordering contract is the same.)

use crate::time::Ns;

const ARITY: usize = 4;

/// Pending events of one simulation, earliest first, FIFO among equal times.
pub struct EventQueue<E> {
    keys: Vec<u128>,
    events: Vec<E>,
    next_seq: u64,
    now_ns: Ns,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn key(at_ns: Ns, seq: u64) -> u128 {
    (u128::from(at_ns) << 64) | u128::from(seq)
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            keys: Vec::new(),
            events: Vec::new(),
            next_seq: 0,
            now_ns: 0,
        }
    }

    /// Time of the event most recently popped (0 before the first).
    pub fn now_ns(&self) -> Ns {
        self.now_ns
    }

    /// Schedules `event` at absolute time `at_ns`.
    ///
    /// # Panics
    /// When `at_ns` lies before the current time: a model that schedules into the past has a
    /// bug that would otherwise silently reorder history.
    #[inline]
    pub fn schedule(&mut self, at_ns: Ns, event: E) {
        assert!(
            at_ns >= self.now_ns,
            "event scheduled in the past: {at_ns} < {}",
            self.now_ns
        );
        let k = key(at_ns, self.next_seq);
        self.next_seq += 1;
        // Sift up: move parents down into the hole until the new key's place is found.
        let mut i = self.keys.len();
        self.keys.push(k);
        self.events.push(event);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pk = self.keys[parent];
            if pk <= k {
                break;
            }
            self.keys[i] = pk;
            self.events[i] = self.events[parent];
            i = parent;
        }
        self.keys[i] = k;
        self.events[i] = event;
    }

    /// Schedules `event` `delay_ns` after the current time.
    pub fn schedule_in(&mut self, delay_ns: Ns, event: E) {
        self.schedule(self.now_ns + delay_ns, event);
    }

    /// Removes the earliest event and advances the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Ns, E)> {
        let last_key = self.keys.pop()?;
        let last_event = self.events.pop().expect("keys and events have one length");
        let (k, event) = if self.keys.is_empty() {
            (last_key, last_event)
        } else {
            let top = (self.keys[0], self.events[0]);
            self.sift_down(last_key, last_event);
            top
        };
        let at_ns = (k >> 64) as Ns;
        self.now_ns = at_ns;
        Some((at_ns, event))
    }

    /// Fills the hole at the root with (`k`, `event`), moving smaller children up.
    #[inline]
    fn sift_down(&mut self, k: u128, event: E) {
        let n = self.keys.len();
        let keys = &mut self.keys[..];
        let mut i = 0;
        loop {
            let first = i * ARITY + 1;
            let (best, best_key) = if first + ARITY <= n {
                // All four children: a branch-free tournament (the comparisons are coin
                // flips a branch predictor cannot learn).
                let c = &keys[first..first + ARITY];
                let (a, ka) = if c[1] < c[0] { (1, c[1]) } else { (0, c[0]) };
                let (b, kb) = if c[3] < c[2] { (3, c[3]) } else { (2, c[2]) };
                if kb < ka {
                    (first + b, kb)
                } else {
                    (first + a, ka)
                }
            } else if first < n {
                let mut best = first;
                for c in first + 1..n {
                    if keys[c] < keys[best] {
                        best = c;
                    }
                }
                (best, keys[best])
            } else {
                break;
            };
            if best_key >= k {
                break;
            }
            keys[i] = best_key;
            self.events[i] = self.events[best];
            i = best;
        }
        keys[i] = k;
        self.events[i] = event;
    }

    /// Time of the next event without removing it.
    pub fn peek_time_ns(&self) -> Option<Ns> {
        self.keys.first().map(|k| (k >> 64) as Ns)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
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
}
