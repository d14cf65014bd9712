//! Submission and completion queues as rings in host memory, with the doorbells and phase tags
//! of the NVMe specification (base spec 2.0, 3.3.1 and 4.6).
//!
//! Positions are kept as ever-increasing counters; the slot is `position % depth` and the
//! phase of a pass is `(position / depth)` even = 1, odd = 0, so the controller writes phase 1
//! on the first pass, 0 on the second, and the host consumes an entry only when its phase tag
//! is the one it expects, exactly as a real driver does.

use std::collections::VecDeque;

use qoslab_engine::{Ns, ReqId};

use crate::config::SqClass;

/// One submission queue and the host-side state that goes with it (its command ids).
#[derive(Debug)]
pub struct Sq {
    pub class: SqClass,
    /// The completion queue (and interrupt vector) this SQ posts to.
    pub cq: u16,
    depth: u32,
    ring: Vec<ReqId>,
    /// Entries the host has written.
    pub tail: u64,
    /// Tail as last written to the doorbell: what the controller may fetch up to.
    pub db_tail: u64,
    /// Entries the controller has fetched.
    pub head: u64,
    /// Doorbell writes on their way to the controller: (arrival time, new tail).
    pub db_writes: VecDeque<(Ns, u64)>,
    /// Command ids not in use. At most depth - 1 commands are outstanding, so the ring never
    /// overflows (Linux sizes its tag set the same way).
    pub free_cids: Vec<u16>,
    /// Which request holds each command id.
    pub cid_req: Vec<ReqId>,
    /// I/Os waiting for a command id (the host's software queue).
    pub waiting: VecDeque<ReqId>,
    /// Fetched and not yet completed by the media.
    pub fetched_open: u32,
    pub fetched_total: u64,
}

impl Sq {
    pub fn new(class: SqClass, cq: u16, depth: u32) -> Self {
        Sq {
            class,
            cq,
            depth,
            ring: Vec::new(),
            tail: 0,
            db_tail: 0,
            head: 0,
            db_writes: VecDeque::new(),
            free_cids: Vec::new(),
            cid_req: Vec::new(),
            waiting: VecDeque::new(),
            fetched_open: 0,
            fetched_total: 0,
        }
    }

    /// Memory is taken on first use, so unused classes of unused cores cost nothing.
    fn ensure_allocated(&mut self) {
        if self.ring.is_empty() {
            self.ring = vec![ReqId::NONE; self.depth as usize];
            let cids = self.depth - 1;
            self.free_cids = (0..cids as u16).rev().collect();
            self.cid_req = vec![ReqId::NONE; cids as usize];
        }
    }

    /// Takes a command id for `id`, or `None` when all are in use.
    pub fn alloc_cid(&mut self, id: ReqId) -> Option<u16> {
        self.ensure_allocated();
        let cid = self.free_cids.pop()?;
        self.cid_req[cid as usize] = id;
        Some(cid)
    }

    pub fn free_cid(&mut self, cid: u16) {
        self.cid_req[cid as usize] = ReqId::NONE;
        self.free_cids.push(cid);
    }

    /// The host writes an entry at the tail; returns the new tail.
    pub fn write_entry(&mut self, id: ReqId) -> u64 {
        debug_assert!(self.tail - self.head < self.depth as u64 - 1, "SQ overflow");
        let slot = (self.tail % self.depth as u64) as usize;
        self.ring[slot] = id;
        self.tail += 1;
        self.tail
    }

    /// Entries the controller may fetch now.
    pub fn fetchable(&self) -> u32 {
        (self.db_tail - self.head) as u32
    }

    /// The controller fetches the entry at the head.
    pub fn fetch_entry(&mut self) -> ReqId {
        debug_assert!(self.head < self.db_tail, "fetch beyond the doorbell");
        let id = self.ring[(self.head % self.depth as u64) as usize];
        self.head += 1;
        self.fetched_total += 1;
        id
    }

    /// Commands holding a command id, in command-id order.
    pub fn outstanding(&self) -> impl Iterator<Item = (u16, ReqId)> + '_ {
        self.cid_req
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.is_none())
            .map(|(c, r)| (c as u16, *r))
    }

    /// Controller reset: the ring is empty again (command ids stay with the host).
    pub fn reset_ring(&mut self) {
        self.tail = 0;
        self.db_tail = 0;
        self.head = 0;
        self.db_writes.clear();
        self.fetched_open = 0;
    }
}

/// One completion queue entry as the model keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub id: ReqId,
    pub sq: u16,
    pub cid: u16,
    /// The phase tag; an entry is new to the host only when it matches the expected phase.
    pub phase: bool,
}

fn phase_of(position: u64, depth: u32) -> bool {
    (position / depth as u64).is_multiple_of(2)
}

/// One completion queue, its interrupt vector and that vector's coalescing state.
#[derive(Debug)]
pub struct Cq {
    depth: u32,
    ring: Vec<Cqe>,
    /// Entries the controller has posted.
    pub tail: u64,
    /// Entries the host has consumed.
    pub head: u64,
    /// Entries the controller could not post because the ring was full.
    pub stalled: VecDeque<Cqe>,
    /// Entries posted since the last interrupt (aggregation count).
    pub pending_irq: u32,
    /// Generation of the aggregation timer; a timer event with another generation is stale.
    pub timer_gen: u32,
    pub timer_armed: bool,
    pub interrupts: u64,
    pub posted: u64,
}

impl Cq {
    pub fn new(depth: u32) -> Self {
        Cq {
            depth,
            ring: Vec::new(),
            tail: 0,
            head: 0,
            stalled: VecDeque::new(),
            pending_irq: 0,
            timer_gen: 0,
            timer_armed: false,
            interrupts: 0,
            posted: 0,
        }
    }

    pub fn is_full(&self) -> bool {
        self.tail - self.head >= self.depth as u64 - 1
    }

    /// The controller writes `cqe` at the tail with the current pass's phase tag.
    pub fn post(&mut self, mut cqe: Cqe) {
        if self.ring.is_empty() {
            // Phase 0 everywhere: nothing is new to a host expecting phase 1 on the first pass.
            self.ring = vec![Cqe::default(); self.depth as usize];
        }
        debug_assert!(!self.is_full(), "CQ overflow");
        cqe.phase = phase_of(self.tail, self.depth);
        self.ring[(self.tail % self.depth as u64) as usize] = cqe;
        self.tail += 1;
        self.posted += 1;
    }

    /// The host consumes the entry at the head if its phase tag says it is new.
    pub fn reap(&mut self) -> Option<Cqe> {
        if self.ring.is_empty() {
            return None;
        }
        let e = self.ring[(self.head % self.depth as u64) as usize];
        if e.phase != phase_of(self.head, self.depth) {
            return None;
        }
        self.head += 1;
        Some(e)
    }

    /// Controller reset: the queue is empty and every entry stale.
    pub fn reset(&mut self) {
        self.ring.clear();
        self.tail = 0;
        self.head = 0;
        self.stalled.clear();
        self.pending_irq = 0;
        self.timer_gen += 1;
        self.timer_armed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_sees_only_entries_of_the_current_phase_across_wraps() {
        let mut cq = Cq::new(4);
        assert_eq!(cq.reap(), None);
        for round in 0..5u32 {
            for k in 0..3u32 {
                cq.post(Cqe {
                    id: ReqId(round * 3 + k),
                    ..Cqe::default()
                });
            }
            assert!(cq.is_full());
            for k in 0..3u32 {
                assert_eq!(cq.reap().map(|e| e.id), Some(ReqId(round * 3 + k)));
            }
            // The slot after the last entry still holds a stale entry of the old phase.
            assert_eq!(cq.reap(), None);
        }
    }

    #[test]
    fn a_submission_queue_hands_out_depth_minus_one_command_ids() {
        let mut sq = Sq::new(SqClass::Medium, 0, 4);
        let cids: Vec<_> = (0..4).map(|i| sq.alloc_cid(ReqId(i))).collect();
        assert_eq!(cids, vec![Some(0), Some(1), Some(2), None]);
        sq.free_cid(1);
        assert_eq!(sq.alloc_cid(ReqId(9)), Some(1));
    }

    #[test]
    fn the_controller_fetches_only_up_to_the_doorbell() {
        let mut sq = Sq::new(SqClass::Medium, 0, 8);
        sq.alloc_cid(ReqId(0));
        let t1 = sq.write_entry(ReqId(10));
        sq.write_entry(ReqId(11));
        assert_eq!(sq.fetchable(), 0);
        sq.db_tail = t1;
        assert_eq!(sq.fetchable(), 1);
        assert_eq!(sq.fetch_entry(), ReqId(10));
        assert_eq!(sq.fetchable(), 0);
    }
}
