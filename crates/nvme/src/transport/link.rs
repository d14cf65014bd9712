//! The PCIe link as MQSim models it (`host/PCIe_Link.h`): each direction moves one transfer at
//! a time at lanes x lane rate, and every TLP of at most `tlp_payload_bytes` carries
//! `tlp_overhead_bytes` more on the wire. A 4 KiB transfer with 128-byte payloads and 28 bytes
//! of overhead is 32 TLPs, 4992 bytes on the wire: 1248 ns on four 1 GB/s lanes.
//!
//! Transfers are booked arithmetically (start = max(requested start, link free)), so the link
//! adds no events; bookings are served in the order the simulator makes them.

use qoslab_engine::Divisor;
use qoslab_engine::time::ns_from_f64;
use qoslab_engine::{Dma, Ns};

#[derive(Clone, Debug)]
pub struct PcieLink {
    /// lanes x lane rate, bytes per ns; 0 = transfers take no time.
    bytes_per_ns: f64,
    ns_per_byte: f64,
    tlp_payload_bytes: Divisor,
    tlp_overhead_bytes: u64,
    free_at_ns: [Ns; 2],
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
            free_at_ns: [0; 2],
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

    /// Books a transfer of `bytes` that may start at `start_ns`; returns when it ends.
    #[inline]
    pub fn transfer(&mut self, dir: Dma, start_ns: Ns, bytes: u64) -> Ns {
        let d = self.memoized_duration_ns(dir, bytes);
        if d == 0 {
            return start_ns;
        }
        let slot = &mut self.free_at_ns[dir as usize];
        let start = start_ns.max(*slot);
        *slot = start + d;
        self.busy_ns[dir as usize] += d;
        *slot
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

    /// Forgets bookings (controller reset).
    pub fn reset(&mut self, now: Ns) {
        for f in &mut self.free_at_ns {
            *f = (*f).min(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for (i, &bytes) in sizes.iter().cycle().take(200).enumerate() {
            let dir = [Dma::ToDevice, Dma::ToHost, Dma::ToHost][i % 3];
            let free = link.free_at_ns[dir as usize].max(at);
            let d = link.duration_ns(bytes);
            let done = link.transfer(dir, at, bytes);
            let expected = if d == 0 { at } else { free + d };
            assert_eq!(done, expected, "{bytes} B, transfer {i}");
            at += 300;
        }
    }

    #[test]
    fn a_disabled_link_is_free() {
        let mut link = PcieLink::new(0.0, 4, 128, 28);
        assert_eq!(link.transfer(Dma::ToHost, 7, 1 << 20), 7);
    }
}
