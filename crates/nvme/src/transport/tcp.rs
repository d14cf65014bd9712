//! NVMe over TCP: capsules and data are PDUs on a TCP connection; write data beyond the
//! capsule is asked for with an R2T and sent as H2C data; every payload byte is copied between
//! socket and I/O buffers at both ends. Same NIC as the RDMA transport (the document's 200 Gbps
//! testbed); latency and copy costs from public measurements, each cited.

use qoslab_engine::{Ns, Settings, Tunable};

use super::nvmeof::{Fabric, FabricCosts, NvmeOf};

qoslab_engine::settings! {
    /// `[tcp]`: the TCP fabric and the CPU cost of its operations.
    pub struct TcpConfig in TCP_TUNABLES {
        link_rate: f64 = rate(25.0, "link rate, GB/s: 200 Gbps, the document's NIC (Rio 6.1)"),
        message_ns: Ns = ns(5000, "one-way latency of a small PDU through both kernels' TCP stacks: half of a 10 us LAN round trip (5-20 us, nvme-storage.com latency glossary; NVMe/TCP 25-40 us end to end against 10-20 us for RDMA, nvme-tcp.com comparison)"),
        inline_data_bytes: u64 = bytes(16384, "write data carried in the command capsule (Linux nvmet-tcp's default in-capsule data size, four pages)"),
        doorbell_batch: u32 = count(16, "PDUs sent under one socket send call (the model's batching choice)").range(1.0, 1024.0),
        submit_cycles: u64 = count(3000, "CPU cycles to submit one NVMe command through the block layer and driver (model assumption, as rdma)"),
        complete_cycles: u64 = count(2500, "CPU cycles to handle one completion (model assumption, as rdma)"),
        message_cycles: u64 = count(6000, "CPU cycles to send or receive one PDU through the TCP/IP stack at each end (model assumption, about 4x an RDMA work request)"),
        doorbell_cycles: u64 = count(1500, "CPU cycles of one send system call (model assumption)"),
        copy_cycles_per_kib: u64 = count(256, "CPU cycles per KiB copied between socket and I/O buffers: 4 bytes per cycle, about 12 GB/s at 3 GHz (model assumption for one core's memcpy)"),
    }
}

impl TcpConfig {
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
            copy_cycles_per_kib: self.copy_cycles_per_kib,
            one_sided_pull: false,
        }
    }
}

/// The TCP fabric.
pub struct TcpFabric;

impl Fabric for TcpFabric {
    const NAME: &'static str = "tcp";
    const HELP: &'static str = "NVMe over TCP: capsules and data as PDUs, R2T for large writes, every payload byte copied; CPU cycles counted at the initiator and the target";
    const TUNABLES: &'static [Tunable] = TCP_TUNABLES;

    fn costs(settings: &Settings) -> FabricCosts {
        TcpConfig::from_settings(settings).costs()
    }
}

/// The tcp transport stage.
pub type Tcp = NvmeOf<TcpFabric>;
