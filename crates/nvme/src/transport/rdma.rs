//! NVMe over RDMA (RoCE or InfiniBand, reliable connected queue pairs): capsules are two-sided
//! SENDs, write data beyond the capsule is pulled by the target with a one-sided RDMA READ, and
//! read data pushed with an RDMA WRITE. No copies. Defaults: the document's testbed (Rio,
//! EuroSys'23, 6.1: one 200 Gbps ConnectX-6 NIC per server) and public measurements, each cited.

use qoslab_engine::{Ns, Settings, Tunable};

use super::nvmeof::{Fabric, FabricCosts, NvmeOf};

qoslab_engine::settings! {
    /// `[rdma]`: the RDMA fabric and the CPU cost of its operations.
    pub struct RdmaConfig in RDMA_TUNABLES {
        link_rate: f64 = rate(25.0, "link rate, GB/s: 200 Gbps, the document's ConnectX-6 (Rio 6.1)"),
        message_ns: Ns = ns(830, "one-way latency of a small SEND: 0.83 us for 32 B on an RC queue pair (ib_send_lat median, D. Potter, M.Sc. thesis, 2018, table of MTU performance)"),
        inline_data_bytes: u64 = bytes(4096, "write data carried in the command capsule (Linux nvmet-rdma's default inline_data_size, one page)"),
        doorbell_batch: u32 = count(16, "work requests posted under one doorbell (doorbell batching, Kalia et al., ATC'16, guideline 3.1; the batch size is this model's choice)").range(1.0, 1024.0),
        submit_cycles: u64 = count(3000, "CPU cycles to submit one NVMe command through the block layer and driver (model assumption, ~1 us at 3 GHz; no public per-operation figure used)"),
        complete_cycles: u64 = count(2500, "CPU cycles to handle one completion, interrupt included (model assumption)"),
        message_cycles: u64 = count(1500, "CPU cycles to post or reap one RDMA work request at each end (model assumption; the document, 3.2 lesson 3: SENDs dominate the driver's cycles)"),
        doorbell_cycles: u64 = count(300, "CPU cycles of one doorbell MMIO write, ~100 ns at 3 GHz (model assumption)"),
    }
}

impl RdmaConfig {
    pub fn costs(&self) -> FabricCosts {
        FabricCosts {
            link_gb_per_s: self.link_rate,
            message_ns: self.message_ns,
            inline_data_bytes: self.inline_data_bytes,
            doorbell_batch: self.doorbell_batch,
            submit_cycles: self.submit_cycles,
            complete_cycles: self.complete_cycles,
            message_cycles: self.message_cycles,
            doorbell_cycles: self.doorbell_cycles,
            copy_cycles_per_kib: 0,
            one_sided_pull: true,
        }
    }
}

/// The RDMA fabric.
pub struct RdmaFabric;

impl Fabric for RdmaFabric {
    const NAME: &'static str = "rdma";
    const HELP: &'static str = "NVMe over RDMA: capsules by SEND, write data pulled by RDMA READ, no copies, batched doorbells; CPU cycles counted at the initiator and the target";
    const TUNABLES: &'static [Tunable] = RDMA_TUNABLES;

    fn costs(settings: &Settings) -> FabricCosts {
        RdmaConfig::from_settings(settings).costs()
    }
}

/// The rdma transport stage.
pub type Rdma = NvmeOf<RdmaFabric>;
