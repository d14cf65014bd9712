//! PCIe between each host and the controller: the SQ tail doorbell is an MMIO write that lands
//! `doorbell_ns` after the host writes it; SQ entries, data and CQ entries are DMA over the link
//! ([`PcieLink`], one per host, each direction serial); interrupts are MSI-X messages, whose
//! delivery the host's `irq_ns` covers. Fixed latency and in order, so both speed folds apply.

use qoslab_engine::{
    Admission, ConfigError, Dma, Ns, Payload, ReqId, Requests, Settings, Stage, StageCtx, Transfer,
    Tunable,
};

use super::link::PcieLink;
use super::{TransportCaps, TransportModel};

qoslab_engine::settings! {
    /// `[link]`: the PCIe link between a host and the controller.
    pub struct PcieConfig in PCIE_TUNABLES {
        lane_rate: f64 = rate(0.0, "data rate per lane (MQSim PCIe_Lane_Bandwidth); 0 = transfers are free"),
        lanes: u32 = count(4, "lanes (MQSim PCIe_Lane_Count)").range(1.0, 32.0),
        tlp_payload_bytes: u32 = bytes(128, "maximum payload per TLP").range(1.0, 4096.0),
        tlp_overhead_bytes: u32 = bytes(28, "bytes added per TLP (header, DLLP, framing)"),
        queue_entries: bool = flag(false, "also move each 64-byte SQ entry and 16-byte CQ entry over the link"),
        doorbell_ns: Ns = ns(0, "time for the SQ tail doorbell write (MMIO) to reach the controller"),
    }
}

/// The PCIe transport stage: one link per host.
pub struct Pcie {
    cfg: PcieConfig,
    links: Vec<PcieLink>,
    commands: u64,
}

impl Pcie {
    pub fn new(cfg: PcieConfig, hosts: u16) -> Self {
        let links = (0..hosts.max(1))
            .map(|_| {
                PcieLink::new(
                    cfg.lane_rate,
                    cfg.lanes,
                    cfg.tlp_payload_bytes,
                    cfg.tlp_overhead_bytes,
                )
            })
            .collect();
        Pcie {
            cfg,
            links,
            commands: 0,
        }
    }
}

impl TransportModel for Pcie {
    const NAME: &'static str = "pcie";
    const HELP: &'static str =
        "PCIe: MMIO doorbells, DMA of entries and data over a link per host, MSI-X interrupts";
    const SECTION: &'static str = "link";
    const TUNABLES: &'static [Tunable] = PCIE_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(settings: &Settings, hosts: u16) -> Result<Self, ConfigError> {
        Ok(Pcie::new(PcieConfig::from_settings(settings), hosts))
    }

    fn caps(&self) -> TransportCaps {
        TransportCaps::FIXED_LATENCY | TransportCaps::IN_ORDER
    }
}

impl Stage for Pcie {
    type Event = ();

    const FORWARDS_UP: bool = true;
    const PASSES_DOWN: bool = true;

    fn name(&self) -> &'static str {
        "pcie"
    }

    /// The doorbell's landing time is known when the host writes it: stamp it, and the command
    /// goes straight on to the controller.
    #[inline]
    fn admit(&mut self, id: ReqId, reqs: &mut Requests) -> Admission {
        self.commands += 1;
        let t = &mut reqs[id].t;
        t.arrived_ns = t.dispatched_ns + self.cfg.doorbell_ns;
        Admission::Accepted
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
        if ctx.dispatch(id) == Admission::Busy {
            unreachable!("the controller refused a command");
        }
    }

    fn on_event(&mut self, _: (), _: &mut impl StageCtx<()>) {}

    fn abort(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) -> bool {
        ctx.abort_below(id)
    }

    /// A controller reset forgets the link's bookings, then resets what is below.
    fn reset(&mut self, ctx: &mut impl StageCtx<()>) {
        let now = ctx.now_ns();
        for l in &mut self.links {
            l.reset(now);
        }
        ctx.reset_below();
    }

    #[inline]
    fn dma(&mut self, t: Transfer) -> Option<Ns> {
        if t.payload == Payload::QueueEntries && !self.cfg.queue_entries {
            return Some(t.start_ns);
        }
        let n = self.links.len();
        let link = if n == 1 {
            &mut self.links[0]
        } else {
            &mut self.links[t.host as usize % n]
        };
        Some(link.transfer(t.dir, t.start_ns, t.bytes))
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let busy = |d: Dma| self.links.iter().map(|l| l.busy_ns[d as usize]).sum::<Ns>() as f64;
        vec![
            ("commands".into(), self.commands as f64),
            ("link_busy_to_device_ns".into(), busy(Dma::ToDevice)),
            ("link_busy_to_host_ns".into(), busy(Dma::ToHost)),
        ]
    }
}
