//! The PCIe link as MQSim models it (`host/PCIe_Link.h`): each direction moves one transfer at
//! a time at lanes x lane rate, and every TLP of at most `tlp_payload_bytes` carries
//! `tlp_overhead_bytes` more on the wire. A 4 KiB transfer with 128-byte payloads and 28 bytes
//! of overhead is 32 TLPs, 4992 bytes on the wire: 1248 ns on four 1 GB/s lanes. The NVMe-oF
//! transports use the same link as a plain serial wire (one lane, no TLP overhead).
//!
//! The wire serves transfers in time order. MQSim queues a message when it is sent, at the
//! simulator's present, and each direction's queue is first in, first out: a message never
//! waits behind one sent after it. Here transfers are booked arithmetically, so the link adds
//! no events, and a stage may book one ahead of the present (the host books a command's
//! capsule at the end of its submit CPU time, the controller a fetch at the command's
//! arrival). A booking made later for an earlier instant then finds the wire idle before the
//! booking ahead, and it uses that idle time: a transfer takes the first `duration` of the
//! direction's free time at or after its start (a message or TLP stream split around a booking
//! already made, as packets interleave on the wire). So the wire is never idle while a
//! transfer that could go waits, and a transfer never waits behind one that starts after it
//! would have finished. When bookings come in time order this is MQSim's queue exactly.

use qoslab_engine::Divisor;
use qoslab_engine::time::ns_from_f64;
use qoslab_engine::{Dma, Ns};

/// How long a direction remembers its bookings behind the latest start asked for. A stage
/// books at most a few microseconds ahead of the present (a submit's CPU time, a message's
/// flight), so a transfer asked for this far behind the latest start never comes; if one did,
/// it would start after the forgotten bookings (never on top of one), and `late` counts it.
const HORIZON_NS: Ns = 1_000_000;

/// One direction of the link: its bookings as disjoint busy intervals, in time order, with
/// touching ones merged (a busy wire is one interval, so the list stays short), from `head` on.
// Speed: a Vec with a moving head, not a VecDeque: a booking out of order lands a few
// intervals from the back, found by a scan from the back and inserted with a short shift.
#[derive(Clone, Debug, Default)]
struct Wire {
    busy: Vec<(Ns, Ns)>,
    head: usize,
    /// Where the forgotten bookings end: no transfer starts before it.
    floor: Ns,
    /// The latest start asked for.
    latest: Ns,
    /// Transfers asked for before `floor` (never, by the horizon's argument).
    late: u64,
}

impl Wire {
    /// Books the first `d` ns of free time at or after `start`; returns when the last ends.
    #[inline]
    fn book(&mut self, start: Ns, d: Ns) -> Ns {
        if start < self.floor {
            self.late += 1;
        }
        let start = start.max(self.floor);
        self.latest = self.latest.max(start);
        // Speed: most transfers start within the last busy interval or after it; they extend
        // it or add one, without a search (the test `the_wire_books_the_first_free_time`
        // compares this path with the general one below).
        let live = self.busy.len() > self.head;
        match self.busy.last_mut().filter(|_| live) {
            Some(last) if last.0 <= start && start <= last.1 => {
                last.1 += d;
                let end = last.1;
                self.forget();
                return end;
            }
            Some(last) if start < last.0 => {}
            _ => {
                self.busy.push((start, start + d));
                self.forget();
                return start + d;
            }
        }
        // The general case: fill the gaps between the bookings from `start` on.
        let mut i = self.busy.len();
        while i > self.head && self.busy[i - 1].1 > start {
            i -= 1;
        }
        let (mut t, mut left) = (start, d);
        while left > 0 {
            let (a, b) = match self.busy.get(i) {
                Some(&iv) => iv,
                None => (Ns::MAX, Ns::MAX),
            };
            if a > t {
                let used = left.min(a - t);
                left -= used;
                i = self.insert(i, t, t + used);
                t += used;
                if left == 0 {
                    break;
                }
            }
            let (_, b2) = self.busy[i];
            debug_assert!(b2 >= b);
            t = t.max(b2);
            i += 1;
        }
        self.forget();
        t
    }

    /// Adds the busy interval [a, b) before interval `i` (free time ends at its start), merged
    /// with the intervals it touches; returns the index of the interval that now holds it.
    fn insert(&mut self, i: usize, a: Ns, b: Ns) -> usize {
        let joins_prev = i > self.head && self.busy[i - 1].1 == a;
        let joins_next = self.busy.get(i).is_some_and(|&(na, _)| na == b);
        match (joins_prev, joins_next) {
            (true, true) => {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
                i - 1
            }
            (true, false) => {
                self.busy[i - 1].1 = b;
                i - 1
            }
            (false, true) => {
                self.busy[i].0 = a;
                i
            }
            (false, false) => {
                self.busy.insert(i, (a, b));
                i
            }
        }
    }

    /// Drops the bookings that ended more than the horizon before the latest start.
    #[inline]
    fn forget(&mut self) {
        let keep_from = self.latest.saturating_sub(HORIZON_NS);
        while self.busy.len() - self.head > 1 && self.busy[self.head].1 < keep_from {
            self.floor = self.busy[self.head].1;
            self.head += 1;
        }
        if self.head >= 256 && self.head * 2 >= self.busy.len() {
            self.busy.drain(..self.head);
            self.head = 0;
        }
    }

    /// Forgets bookings from `now` on (a reset).
    fn reset(&mut self, now: Ns) {
        while self.busy.len() > self.head && self.busy.last().is_some_and(|&(a, _)| a >= now) {
            self.busy.pop();
        }
        if self.busy.len() > self.head
            && let Some(last) = self.busy.last_mut()
        {
            last.1 = last.1.min(now);
        }
        self.floor = self.floor.min(now);
        self.latest = self.latest.min(now);
    }
}

#[derive(Clone, Debug)]
pub struct PcieLink {
    /// lanes x lane rate, bytes per ns; 0 = transfers take no time.
    bytes_per_ns: f64,
    ns_per_byte: f64,
    tlp_payload_bytes: Divisor,
    tlp_overhead_bytes: u64,
    wires: [Wire; 2],
    pub busy_ns: [Ns; 2],
    /// Per direction, the last (size, duration) of a transfer of at most a queue entry (64
    /// bytes) and of a larger one.
    // Speed: a path moves the same few sizes over and over (64-byte commands, 16-byte
    // completions, the job's block size), and a lookup costs less than `duration_ns`'s
    // division and floating point: about 100 instructions per I/O less on the default path.
    memo: [[(u64, Ns); 2]; 2],
}

impl PcieLink {
    pub fn new(
        lane_rate: f64,
        lanes: u32,
        tlp_payload_bytes: u32,
        tlp_overhead_bytes: u32,
    ) -> Self {
        let bytes_per_ns = lane_rate * lanes as f64;
        PcieLink {
            bytes_per_ns,
            ns_per_byte: if bytes_per_ns > 0.0 {
                1.0 / bytes_per_ns
            } else {
                0.0
            },
            tlp_payload_bytes: Divisor::new(tlp_payload_bytes.max(1)),
            tlp_overhead_bytes: tlp_overhead_bytes as u64,
            wires: Default::default(),
            busy_ns: [0; 2],
            // (0, 0) is right: no payload takes no time.
            memo: [[(0, 0); 2]; 2],
        }
    }

    pub fn enabled(&self) -> bool {
        self.bytes_per_ns > 0.0
    }

    /// Bytes on the wire for a payload of `bytes`.
    pub fn wire_bytes(&self, bytes: u64) -> u64 {
        bytes + self.tlp_payload_bytes.div_ceil(bytes) * self.tlp_overhead_bytes
    }

    /// How long `bytes` of payload occupy one direction.
    pub fn duration_ns(&self, bytes: u64) -> Ns {
        if !self.enabled() || bytes == 0 {
            return 0;
        }
        ns_from_f64(self.wire_bytes(bytes) as f64 * self.ns_per_byte)
    }

    /// Books a transfer of `bytes` that may start at `start_ns` on the direction's first free
    /// time; returns when its last byte is on the wire.
    #[inline]
    pub fn transfer(&mut self, dir: Dma, start_ns: Ns, bytes: u64) -> Ns {
        let d = self.memoized_duration_ns(dir, bytes);
        if d == 0 {
            return start_ns;
        }
        self.busy_ns[dir as usize] += d;
        self.wires[dir as usize].book(start_ns, d)
    }

    /// [`duration_ns`](Self::duration_ns), remembered.
    #[inline]
    fn memoized_duration_ns(&mut self, dir: Dma, bytes: u64) -> Ns {
        let (d, k) = (dir as usize, usize::from(bytes > 64));
        if self.memo[d][k].0 != bytes {
            self.memo[d][k] = (bytes, self.duration_ns(bytes));
        }
        self.memo[d][k].1
    }

    /// Transfers asked to start before bookings the link had forgotten (see `HORIZON_NS`):
    /// zero in every run the tests make.
    pub fn late_transfers(&self) -> u64 {
        self.wires.iter().map(|w| w.late).sum()
    }

    /// Forgets bookings (controller reset).
    pub fn reset(&mut self, now: Ns) {
        for w in &mut self.wires {
            w.reset(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_4k_transfer_on_mqsims_default_link_takes_1248_ns() {
        let link = PcieLink::new(1.0, 4, 128, 28);
        assert_eq!(link.wire_bytes(4096), 4992);
        assert_eq!(link.duration_ns(4096), 1248);
    }

    #[test]
    fn transfers_in_one_direction_queue_and_directions_are_independent() {
        let mut link = PcieLink::new(1.0, 4, 128, 28);
        assert_eq!(link.transfer(Dma::ToHost, 0, 4096), 1248);
        assert_eq!(link.transfer(Dma::ToHost, 100, 4096), 2496);
        assert_eq!(link.transfer(Dma::ToDevice, 100, 4096), 1348);
        assert_eq!(link.transfer(Dma::ToHost, 5000, 4096), 6248);
    }

    /// MQSim's queue: a message sent at 0 goes first, one sent at 100 waits for it. Booked
    /// the other way round (the one for 100 booked first, ahead of the present), the one for
    /// 0 uses the wire while it is idle: it never waits behind a transfer that starts after
    /// it would have finished.
    #[test]
    fn a_transfer_never_waits_behind_one_booked_ahead_that_starts_after_it_would_end() {
        let mut link = PcieLink::new(1.0, 1, u32::MAX, 0);
        assert_eq!(link.transfer(Dma::ToDevice, 2000, 64), 2064);
        assert_eq!(link.transfer(Dma::ToDevice, 1000, 64), 1064);
        // Its whole duration fits before the booking at 2000 from 1936 on, not from 1950.
        assert_eq!(link.transfer(Dma::ToDevice, 1936, 64), 2000);
        // One that does not fit uses the idle 14 ns, then the rest after the booking.
        let mut link = PcieLink::new(1.0, 1, u32::MAX, 0);
        assert_eq!(link.transfer(Dma::ToDevice, 2000, 64), 2064);
        assert_eq!(link.transfer(Dma::ToDevice, 1986, 64), 2064 + 50);
        assert_eq!(link.late_transfers(), 0);
    }

    #[test]
    fn every_started_tlp_carries_its_overhead_whatever_the_payload_size() {
        for payload in [1, 100, 128, 256, 4096] {
            let link = PcieLink::new(1.0, 4, payload, 28);
            for bytes in (0..20_000).chain([u64::MAX / 64]) {
                let tlps = bytes.div_ceil(u64::from(payload));
                assert_eq!(
                    link.wire_bytes(bytes),
                    bytes + tlps * 28,
                    "{bytes} B in {payload} B TLPs"
                );
            }
        }
    }

    /// Fast path equals slow path: whatever the order of sizes, a transfer takes what
    /// `duration_ns` says (and one of no time is not booked).
    #[test]
    fn remembered_durations_equal_computed_ones() {
        let mut link = PcieLink::new(1.0, 4, 128, 28);
        let sizes = [64, 16, 4096, 64, 4096, 16, 8192, 128, 0, 65, 4096, 1, 64];
        let mut at = 0;
        let mut free = [0; 2];
        for (i, &bytes) in sizes.iter().cycle().take(200).enumerate() {
            let dir = [Dma::ToDevice, Dma::ToHost, Dma::ToHost][i % 3];
            let d = link.duration_ns(bytes);
            let done = link.transfer(dir, at, bytes);
            let expected = if d == 0 {
                at
            } else {
                free[dir as usize] = free[dir as usize].max(at) + d;
                free[dir as usize]
            };
            assert_eq!(done, expected, "{bytes} B, transfer {i}");
            at += 300;
        }
    }

    #[test]
    fn a_disabled_link_is_free() {
        let mut link = PcieLink::new(0.0, 4, 128, 28);
        assert_eq!(link.transfer(Dma::ToHost, 7, 1 << 20), 7);
    }

    #[test]
    fn a_reset_forgets_the_bookings_from_its_instant_on() {
        let mut link = PcieLink::new(1.0, 1, u32::MAX, 0);
        link.transfer(Dma::ToHost, 0, 100);
        link.transfer(Dma::ToHost, 500, 100);
        link.reset(50);
        assert_eq!(link.transfer(Dma::ToHost, 50, 10), 60);
        assert_eq!(link.transfer(Dma::ToHost, 500, 10), 510);
    }

    /// Bookings more than the horizon behind the latest start are forgotten; a transfer asked
    /// for before them (no stage books that far behind) starts after them and is counted.
    #[test]
    fn old_bookings_are_forgotten_and_a_transfer_behind_them_is_counted() {
        let mut link = PcieLink::new(1.0, 1, u32::MAX, 0);
        assert_eq!(link.transfer(Dma::ToHost, 0, 100), 100);
        assert_eq!(
            link.transfer(Dma::ToHost, 2 * HORIZON_NS, 100),
            2 * HORIZON_NS + 100
        );
        assert_eq!(
            link.transfer(Dma::ToHost, HORIZON_NS + 5, 10),
            HORIZON_NS + 15
        );
        assert_eq!(link.late_transfers(), 0);
        assert_eq!(link.transfer(Dma::ToHost, 50, 10), 110);
        assert_eq!(link.late_transfers(), 1);
    }

    /// The rule, one nanosecond at a time: a transfer takes the first `duration` free
    /// nanoseconds of its direction at or after its start, whatever order the bookings come
    /// in. (A reference as plain as the rule; the link's intervals must give the same ends.)
    struct Slots(Vec<bool>);

    impl Slots {
        fn book(&mut self, start: usize, d: usize) -> usize {
            let (mut t, mut left) = (start, d);
            while left > 0 {
                if t >= self.0.len() {
                    self.0.resize(t + 1, false);
                }
                if !self.0[t] {
                    self.0[t] = true;
                    left -= 1;
                }
                t += 1;
            }
            t
        }
    }

    proptest! {
        /// Fast path equals slow path, and the whole-run invariants: the link's ends equal the
        /// slot reference's; the wire carries one transfer at a time (the busy time is the sum
        /// of the durations); it is never idle between a transfer's start and its end.
        #[test]
        fn the_wire_books_the_first_free_time_at_or_after_each_start(
            bookings in prop::collection::vec((0usize..3000, 1usize..200), 1..80),
        ) {
            let mut link = PcieLink::new(1.0, 1, u32::MAX, 0);
            let mut slots = Slots(Vec::new());
            let mut ends = Vec::new();
            for &(start, d) in &bookings {
                let end = link.transfer(Dma::ToHost, start as Ns, d as u64);
                prop_assert_eq!(end, slots.book(start, d) as Ns, "{} ns at {}", d, start);
                ends.push(end as usize);
            }
            let busy: usize = slots.0.iter().filter(|&&b| b).count();
            prop_assert_eq!(busy, bookings.iter().map(|b| b.1).sum::<usize>());
            prop_assert_eq!(link.busy_ns[Dma::ToHost as usize], busy as Ns);
            for (&(start, _), &end) in bookings.iter().zip(&ends) {
                prop_assert!(slots.0[start..end].iter().all(|&b| b), "idle in [{}, {})", start, end);
            }
            prop_assert_eq!(link.late_transfers(), 0);
        }
    }
}
