//! The host's submission and completion queues, with the command ids and phase tags of the
//! NVMe specification (base spec 2.0, 3.3.1 and 4.6).
//!
//! Positions are kept as ever-increasing counters; the slot is `position % depth` and the
//! phase of a pass is `(position / depth)` even = 1, odd = 0, so entries carry phase 1 on the
//! first pass, 0 on the second, and the host consumes an entry only when its phase tag is the
//! one it expects, exactly as a real driver does.

use std::collections::VecDeque;

use qoslab_engine::ReqId;

use crate::config::SqClass;

/// One submission queue as the host driver keeps it: its command ids and its tail.
#[derive(Debug)]
pub struct Sq {
    pub class: SqClass,
    /// The completion queue (and interrupt vector) this SQ posts to, numbered across hosts.
    pub cq: u16,
    depth: u32,
    /// Entries the host has written.
    pub tail: u64,
    /// Command ids not in use. At most depth - 1 commands are outstanding, so the ring never
    /// overflows (Linux sizes its tag set the same way).
    free_cids: Vec<u16>,
    /// Which request holds each command id.
    cid_req: Vec<ReqId>,
    /// Command ids promised to requests admitted and not yet submitted.
    pub reserved: u32,
    /// Admitted work waiting for a command id: the further parts of a request split at MDTS,
    /// commands requeued after a timeout. It goes before anything new.
    pub waiting: VecDeque<ReqId>,
}

impl Sq {
    pub fn new(class: SqClass, cq: u16, depth: u32) -> Self {
        Sq {
            class,
            cq,
            depth,
            tail: 0,
            free_cids: Vec::new(),
            cid_req: Vec::new(),
            reserved: 0,
            waiting: VecDeque::new(),
        }
    }

    /// Memory is taken on first use, so unused classes of unused cores cost nothing.
    #[inline(always)]
    fn ensure_allocated(&mut self) {
        if self.cid_req.is_empty() {
            self.allocate();
        }
    }

    #[cold]
    #[inline(never)]
    fn allocate(&mut self) {
        let cids = self.depth - 1;
        self.free_cids = (0..cids as u16).rev().collect();
        self.cid_req = vec![ReqId::NONE; cids as usize];
    }

    /// Whether a new request may be admitted: a command id free beyond those promised, and
    /// nothing admitted earlier waiting.
    #[inline]
    pub fn has_room(&mut self) -> bool {
        self.ensure_allocated();
        self.waiting.is_empty() && self.free_cids.len() > self.reserved as usize
    }

    /// Free command ids not promised.
    #[inline]
    pub fn unpromised(&mut self) -> u32 {
        self.ensure_allocated();
        self.free_cids.len() as u32 - self.reserved
    }

    /// Takes a command id for `id`, or `None` when all are in use.
    #[inline]
    pub fn alloc_cid(&mut self, id: ReqId) -> Option<u16> {
        self.ensure_allocated();
        let cid = self.free_cids.pop()?;
        self.cid_req[cid as usize] = id;
        Some(cid)
    }

    /// Takes a command id not promised to an admitted request, or `None`.
    pub fn alloc_unpromised(&mut self, id: ReqId) -> Option<u16> {
        self.ensure_allocated();
        if self.free_cids.len() > self.reserved as usize {
            self.alloc_cid(id)
        } else {
            None
        }
    }

    #[inline]
    pub fn free_cid(&mut self, cid: u16) {
        self.cid_req[cid as usize] = ReqId::NONE;
        self.free_cids.push(cid);
    }

    /// The host writes an entry at the tail.
    pub fn write_entry(&mut self) {
        self.tail += 1;
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

/// One completion queue in host memory.
#[derive(Debug)]
pub struct Cq {
    depth: u32,
    ring: Vec<Cqe>,
    /// Entries the controller has posted.
    pub tail: u64,
    /// Entries the host has consumed.
    pub head: u64,
    pub interrupts: u64,
    /// Where `tail` and `head` fall in the ring, kept as they advance: a division per entry
    /// (a u64 `div`, tens of cycles) would otherwise cost more than the rest of a post.
    tail_at: RingPos,
    head_at: RingPos,
}

/// A position's slot in a ring of `depth` entries and its pass's phase tag
/// (`phase_of(position, depth)`).
#[derive(Clone, Copy, Debug)]
struct RingPos {
    slot: u32,
    phase: bool,
}

impl RingPos {
    const START: RingPos = RingPos {
        slot: 0,
        phase: true,
    };

    fn advance(&mut self, depth: u32) {
        self.slot += 1;
        if self.slot == depth {
            self.slot = 0;
            self.phase = !self.phase;
        }
    }
}

impl Cq {
    pub fn new(depth: u32) -> Self {
        Cq {
            depth,
            ring: Vec::new(),
            tail: 0,
            head: 0,
            interrupts: 0,
            tail_at: RingPos::START,
            head_at: RingPos::START,
        }
    }

    pub fn is_full(&self) -> bool {
        self.tail - self.head >= self.depth as u64 - 1
    }

    /// An entry lands at the tail with the current pass's phase tag.
    pub fn post(&mut self, mut cqe: Cqe) {
        if self.ring.is_empty() {
            // Phase 0 everywhere: nothing is new to a host expecting phase 1 on the first pass.
            self.ring = vec![Cqe::default(); self.depth as usize];
        }
        debug_assert!(!self.is_full(), "CQ overflow");
        debug_assert_eq!(self.tail_at.phase, phase_of(self.tail, self.depth));
        cqe.phase = self.tail_at.phase;
        self.ring[self.tail_at.slot as usize] = cqe;
        self.tail += 1;
        self.tail_at.advance(self.depth);
    }

    /// The host consumes the entry at the head if its phase tag says it is new.
    pub fn reap(&mut self) -> Option<Cqe> {
        if self.ring.is_empty() {
            return None;
        }
        let e = self.ring[self.head_at.slot as usize];
        if e.phase != self.head_at.phase {
            return None;
        }
        self.head += 1;
        self.head_at.advance(self.depth);
        Some(e)
    }

    /// Controller reset: the queue is empty and every entry stale.
    pub fn reset(&mut self) {
        self.ring.clear();
        self.tail = 0;
        self.head = 0;
        self.tail_at = RingPos::START;
        self.head_at = RingPos::START;
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
        // A reset starts over at slot 0 in the first pass's phase.
        cq.reset();
        assert_eq!(cq.reap(), None);
        cq.post(Cqe {
            id: ReqId(99),
            ..Cqe::default()
        });
        assert_eq!(cq.reap().map(|e| e.id), Some(ReqId(99)));
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
    fn room_counts_promised_ids_and_waiting_work() {
        let mut sq = Sq::new(SqClass::Medium, 0, 3);
        assert!(sq.has_room());
        sq.reserved = 2;
        assert!(!sq.has_room());
        sq.reserved = 1;
        sq.waiting.push_back(ReqId(5));
        assert!(!sq.has_room());
    }
}
