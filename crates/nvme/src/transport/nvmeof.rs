//! NVMe over fabrics between each host (the initiator) and the controller (a target server):
//! what the RDMA and TCP transports share. A command travels as a capsule message (the 64-byte
//! entry and, up to `inline_data_bytes`, the write data in it); larger write data is pulled by
//! the target in a round trip (RDMA READ, or TCP's R2T and H2C data); read data and the response
//! capsule travel back. Every message takes `message_ns` plus its bytes at the link rate, on a
//! link per host and direction, booked arithmetically like the PCIe link; the arrival time is
//! known when the command is sent, so both speed folds apply.
//!
//! The CPU model of each server is counted, not assumed: every command, completion, message,
//! doorbell and copied byte adds its cycles (the transport's table) at the initiator and at the
//! target, so requests per cycle, the CPU efficiency of the document, is a stage counter.

use std::marker::PhantomData;

use qoslab_engine::order::{OrderMsg, OrderOp};
use qoslab_engine::{
    Admission, Command, ConfigError, Control, Dma, Ns, Payload, ReqId, Requests, Settings, Stage,
    StageCtx, Transfer, Tunable,
};

use super::link::PcieLink;
use super::{TransportCaps, TransportModel};

/// One fabric: its name, its tunable table and the costs read from it.
pub trait Fabric {
    const NAME: &'static str;
    const HELP: &'static str;
    const TUNABLES: &'static [Tunable];
    fn costs(settings: &Settings) -> FabricCosts;
}

/// Bytes of a command capsule and of a response capsule (NVMe-oF 1.1: a 64-byte SQE and a
/// 16-byte CQE, no in-capsule data in the response).
pub const CAPSULE_BYTES: u64 = 64;
pub const RESPONSE_BYTES: u64 = 16;

/// The costs of one fabric, read from its transport's tunable table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FabricCosts {
    /// Link rate, bytes per ns (GB/s).
    pub link_gb_per_s: f64,
    /// One-way latency of a small message, initiator to target or back.
    pub message_ns: Ns,
    /// Write data up to this size travels in the command capsule.
    pub inline_data_bytes: u64,
    /// Messages posted before one doorbell (a batched doorbell covers up to this many).
    pub doorbell_batch: u32,
    /// Cycles to submit one NVMe command (the initiator's driver, the target's SSD queue).
    pub submit_cycles: u64,
    /// Cycles to handle one completion.
    pub complete_cycles: u64,
    /// Cycles to post or receive one message (an RDMA work request or a TCP send/receive).
    pub message_cycles: u64,
    /// Cycles of one doorbell write.
    pub doorbell_cycles: u64,
    /// Cycles per KiB copied between the network and I/O buffers (TCP copies, RDMA does not).
    pub copy_cycles_per_kib: u64,
    /// The target pulls write data without the initiator's CPU (an RDMA READ is one-sided; a
    /// TCP R2T is a message the initiator handles).
    pub one_sided_pull: bool,
}

impl FabricCosts {
    /// How long a message of `bytes` takes on the wire after it leaves.
    pub fn wire_ns(&self, bytes: u64) -> Ns {
        if self.link_gb_per_s <= 0.0 {
            return 0;
        }
        qoslab_engine::time::ns_from_f64(bytes as f64 / self.link_gb_per_s)
    }

    /// Cycles to copy `bytes`.
    pub fn copy_cycles(&self, bytes: u64) -> u64 {
        (bytes * self.copy_cycles_per_kib).div_ceil(1024)
    }

    /// Write data beyond the capsule: pulled by the target in a round trip.
    pub fn pulls(&self, write_bytes: u64) -> bool {
        write_bytes > self.inline_data_bytes
    }
}

/// Cycles spent by one server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cycles {
    pub initiator: u64,
    pub target: u64,
}

/// The NVMe-oF transport stage: the RDMA and TCP plug-ins differ only in their costs.
pub struct NvmeOf<F> {
    fabric: PhantomData<F>,
    costs: FabricCosts,
    links: Vec<PcieLink>,
    /// Per host: the time of the last doorbell and how many messages it covered.
    doorbell: Vec<(Ns, u32)>,
    commands: u64,
    completions: u64,
    messages: u64,
    doorbells: u64,
    cycles: Cycles,
    /// A target server stage below pulls write data before its drive sees the command: the
    /// controller's own data transfers then cross nothing.
    pulled_by_target: bool,
}

impl<F: Fabric> TransportModel for NvmeOf<F> {
    const NAME: &'static str = F::NAME;
    const HELP: &'static str = F::HELP;
    const SECTION: &'static str = F::NAME;
    const TUNABLES: &'static [Tunable] = F::TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(settings: &Settings, hosts: u16) -> Result<Self, ConfigError> {
        Ok(NvmeOf::new(F::costs(settings), hosts))
    }

    fn caps(&self) -> TransportCaps {
        TransportCaps::FIXED_LATENCY | TransportCaps::IN_ORDER
    }
}

impl<F: Fabric> super::FabricModel for NvmeOf<F> {
    fn costs(&self) -> FabricCosts {
        self.costs
    }

    fn pulled_by_target(&mut self) {
        self.pulled_by_target = true;
    }
}

impl<F> NvmeOf<F> {
    pub fn new(costs: FabricCosts, hosts: u16) -> Self {
        let n = hosts.max(1) as usize;
        NvmeOf {
            fabric: PhantomData,
            costs,
            // A fabric link is a serial pipe at the link rate with no per-packet overhead in
            // this model: a PCIe link of one lane with one huge TLP and no overhead.
            links: (0..n)
                .map(|_| PcieLink::new(costs.link_gb_per_s, 1, u32::MAX, 0))
                .collect(),
            doorbell: vec![(Ns::MAX, 0); n],
            commands: 0,
            completions: 0,
            messages: 0,
            doorbells: 0,
            cycles: Cycles::default(),
            pulled_by_target: false,
        }
    }

    fn message(&mut self, host: usize, dir: Dma, start: Ns, bytes: u64) -> Ns {
        self.messages += 1;
        self.cycles.initiator += self.costs.message_cycles;
        self.one_sided(host, dir, start, bytes)
    }

    /// A message whose initiator side costs no CPU.
    fn one_sided(&mut self, host: usize, dir: Dma, start: Ns, bytes: u64) -> Ns {
        self.cycles.target += self.costs.message_cycles;
        self.links[host].transfer(dir, start, bytes) + self.costs.message_ns
    }

    /// Messages posted at the same instant share a doorbell, up to `doorbell_batch` of them.
    fn ring(&mut self, host: usize, at: Ns) {
        let (last, n) = &mut self.doorbell[host];
        if *last == at && *n < self.costs.doorbell_batch {
            *n += 1;
            return;
        }
        (*last, *n) = (at, 1);
        self.doorbells += 1;
        self.cycles.initiator += self.costs.doorbell_cycles;
    }

    pub fn cycles(&self) -> Cycles {
        self.cycles
    }
}

impl<F: Fabric> Stage for NvmeOf<F> {
    type Event = ();

    const FORWARDS_UP: bool = true;
    const PASSES_DOWN: bool = true;

    fn name(&self) -> &'static str {
        F::NAME
    }

    /// The capsule's landing time is known when it is sent: stamp it, and the command goes on
    /// to the controller at once.
    fn admit(&mut self, id: ReqId, reqs: &mut Requests) -> Admission {
        self.commands += 1;
        let r = &reqs[id];
        let host = r.host as usize % self.links.len();
        let inline = if r.op.carries_data_to_device() && !self.costs.pulls(r.len_bytes) {
            r.len_bytes
        } else {
            0
        };
        let at = r.t.dispatched_ns;
        self.cycles.initiator += self.costs.submit_cycles + self.costs.copy_cycles(inline);
        self.cycles.target += self.costs.copy_cycles(inline);
        self.ring(host, at);
        let arrived = self.message(host, Dma::ToDevice, at, CAPSULE_BYTES + inline);
        reqs[id].t.arrived_ns = arrived;
        Admission::Accepted
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
        if ctx.dispatch(id) == Admission::Busy {
            unreachable!("the controller refused a command");
        }
    }

    fn on_event(&mut self, _: (), _: &mut impl StageCtx<()>) {}

    /// An ordering message travels to the target server inside the next command (Rio's
    /// attribute, Table 1; the initiator's acknowledgements), except HORAE's control path: a
    /// SEND of its metadata and an answer, each a message of this fabric.
    fn control(&mut self, msg: &mut Control, ctx: &mut impl StageCtx<()>) {
        let Command::Ordering(OrderMsg {
            op: OrderOp::Meta { bytes, .. },
            ..
        }) = msg.command
        else {
            ctx.control_below(msg);
            return;
        };
        let host = msg.host as usize % self.links.len();
        let sent = msg.at_ns;
        self.ring(host, sent);
        msg.at_ns = self.message(host, Dma::ToDevice, sent, bytes);
        ctx.control_below(msg);
        if let Command::Ordering(m) = &mut msg.command {
            m.done_ns = self.message(host, Dma::ToHost, m.done_ns.max(msg.at_ns), RESPONSE_BYTES);
        }
        msg.at_ns = sent;
    }

    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) -> bool {
        ctx.abort_below(id)
    }

    fn reset(&mut self, ctx: &mut impl StageCtx<()>) {
        let now = ctx.now_ns();
        for l in &mut self.links {
            l.reset(now);
        }
        ctx.reset_below();
    }

    /// The controller's transfers: the entry fetch is free (the capsule brought it); write
    /// data beyond the capsule is pulled in a round trip; read data is pushed; the CQ entry is
    /// the response capsule.
    fn dma(&mut self, t: Transfer) -> Option<Ns> {
        let host = t.host as usize % self.links.len();
        let c = self.costs;
        Some(match (t.payload, t.dir) {
            (Payload::QueueEntries, Dma::ToDevice) => t.start_ns,
            (Payload::QueueEntries, Dma::ToHost) => {
                self.completions += 1;
                self.cycles.target += c.complete_cycles;
                self.cycles.initiator += c.complete_cycles;
                self.message(host, Dma::ToHost, t.start_ns, RESPONSE_BYTES)
            }
            (Payload::Data, Dma::ToDevice) if !c.pulls(t.bytes) || self.pulled_by_target => {
                t.start_ns
            }
            (Payload::TargetPull, _) if !c.pulls(t.bytes) => t.start_ns,
            (Payload::Data, Dma::ToDevice) | (Payload::TargetPull, _) => {
                self.cycles.target += c.copy_cycles(t.bytes);
                if c.one_sided_pull {
                    let asked = self.one_sided(host, Dma::ToHost, t.start_ns, 0);
                    self.links[host].transfer(Dma::ToDevice, asked, t.bytes) + c.message_ns
                } else {
                    self.cycles.initiator += c.copy_cycles(t.bytes);
                    let asked = self.message(host, Dma::ToHost, t.start_ns, 0);
                    self.message(host, Dma::ToDevice, asked, t.bytes)
                }
            }
            (Payload::Data, Dma::ToHost) => {
                self.cycles.initiator += c.copy_cycles(t.bytes);
                self.cycles.target += c.copy_cycles(t.bytes);
                // The data is ordered before the response on the same connection: only its
                // time on the wire counts here, the response carries the latency.
                self.links[host].transfer(Dma::ToHost, t.start_ns, t.bytes)
            }
        })
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let busy = |d: Dma| self.links.iter().map(|l| l.busy_ns[d as usize]).sum::<Ns>() as f64;
        let per_cycle = |cycles: u64| {
            if cycles == 0 {
                0.0
            } else {
                self.completions as f64 / cycles as f64
            }
        };
        vec![
            ("commands".into(), self.commands as f64),
            ("completions".into(), self.completions as f64),
            ("messages".into(), self.messages as f64),
            ("doorbells".into(), self.doorbells as f64),
            ("link_busy_to_device_ns".into(), busy(Dma::ToDevice)),
            ("link_busy_to_host_ns".into(), busy(Dma::ToHost)),
            ("initiator_cycles".into(), self.cycles.initiator as f64),
            ("target_cycles".into(), self.cycles.target as f64),
            (
                "initiator_requests_per_cycle".into(),
                per_cycle(self.cycles.initiator),
            ),
            (
                "target_requests_per_cycle".into(),
                per_cycle(self.cycles.target),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::rdma::{RdmaConfig, RdmaFabric};
    use crate::transport::tcp::{TcpConfig, TcpFabric};

    fn transfer(dir: Dma, payload: Payload, start_ns: Ns, bytes: u64) -> Transfer {
        Transfer {
            host: 0,
            dir,
            payload,
            start_ns,
            bytes,
        }
    }

    #[test]
    fn a_response_takes_the_message_latency_and_its_bytes_at_200_gbps() {
        let c = RdmaConfig::defaults().costs();
        let mut t = NvmeOf::<RdmaFabric>::new(c, 1);
        // 16 bytes at 25 GB/s: 0.64 ns, rounded to 1; then 830 ns of latency.
        let at = t.dma(transfer(
            Dma::ToHost,
            Payload::QueueEntries,
            1000,
            RESPONSE_BYTES,
        ));
        assert_eq!(at, Some(1000 + 1 + 830));
        // The entry fetch is free: the capsule brought the entry.
        let at = t.dma(transfer(Dma::ToDevice, Payload::QueueEntries, 5, 64));
        assert_eq!(at, Some(5));
    }

    #[test]
    fn rdma_pulls_a_large_write_in_one_round_trip_without_the_initiators_cpu() {
        let c = RdmaConfig::defaults().costs();
        let mut t = NvmeOf::<RdmaFabric>::new(c, 1);
        assert_eq!(
            t.dma(transfer(Dma::ToDevice, Payload::Data, 0, 4096)),
            Some(0)
        );
        // 64 KiB: the READ request (830 ns), the data (65536 / 25 = 2621 ns), back (830 ns).
        let at = t.dma(transfer(Dma::ToDevice, Payload::Data, 0, 65536));
        assert_eq!(at, Some(830 + 2621 + 830));
        assert_eq!(t.cycles().initiator, 0);
        assert_eq!(t.cycles().target, c.message_cycles);
    }

    #[test]
    fn tcp_copies_every_byte_at_both_ends() {
        let c = TcpConfig::defaults().costs();
        let mut t = NvmeOf::<TcpFabric>::new(c, 1);
        t.dma(transfer(Dma::ToHost, Payload::Data, 0, 1 << 20));
        let copy = 1024 * c.copy_cycles_per_kib;
        assert_eq!(
            t.cycles(),
            Cycles {
                initiator: copy,
                target: copy
            }
        );
    }
}
