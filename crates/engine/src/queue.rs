//! The event queue: a binary heap ordered by (time, insertion sequence).
//!
//! Events scheduled for the same instant come out in the order they were scheduled, so a run
//! never depends on heap internals, addresses or hashing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Ns;

struct Entry<E> {
    at_ns: Ns,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ns, self.seq) == (other.at_ns, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at_ns, self.seq).cmp(&(other.at_ns, other.seq))
    }
}

/// Pending events of one simulation, earliest first, FIFO among equal times.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    next_seq: u64,
    now_ns: Ns,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
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
    pub fn schedule(&mut self, at_ns: Ns, event: E) {
        assert!(
            at_ns >= self.now_ns,
            "event scheduled in the past: {at_ns} < {}",
            self.now_ns
        );
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Entry { at_ns, seq, event }));
    }

    /// Schedules `event` `delay_ns` after the current time.
    pub fn schedule_in(&mut self, delay_ns: Ns, event: E) {
        self.schedule(self.now_ns + delay_ns, event);
    }

    /// Removes the earliest event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(Ns, E)> {
        let Reverse(entry) = self.heap.pop()?;
        self.now_ns = entry.at_ns;
        Some((entry.at_ns, entry.event))
    }

    /// Time of the next event without removing it.
    pub fn peek_time_ns(&self) -> Option<Ns> {
        self.heap.peek().map(|Reverse(e)| e.at_ns)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
}
