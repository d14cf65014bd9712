//! The tunables of the NVMe host driver (`[host]`) and controller (`[controller]`), declared
//! once as typed settings; the device-file parser, `--set`, the CLI help and the docs all read
//! these tables. The arbiter and the completion order are plug-ins chosen by name
//! (`arbitration = "wrr"`, `completion_order = "random"`), each with its own sub-table
//! (`[controller.wrr]`). The transport's tunables live with the transport.

use qoslab_engine::{IoPrio, IoPrioClass, Ns};

qoslab_engine::settings! {
    /// `[host]`: the host's NVMe driver and CPUs (each host of a path has the same).
    pub struct HostConfig in HOST_TUNABLES {
        cores: u32 = count(0, "host CPUs, one I/O queue pair (and interrupt vector) each; job i of a host runs on its core i mod cores; 0 = one per job").range(0.0, 4096.0),
        sq_depth: u32 = count(1024, "entries per submission queue (Linux io_queue_depth); at most sq_depth - 1 commands outstanding per queue, the rest wait above").range(2.0, 65536.0),
        cq_depth: u32 = count(1024, "entries per completion queue").range(2.0, 65536.0),
        submit_ns: Ns = ns(0, "host CPU time from issuing an I/O to writing its SQ entry (block layer + driver)"),
        irq_ns: Ns = ns(0, "time from the controller signalling an interrupt to the handler running"),
        complete_ns: Ns = ns(0, "host CPU time from the interrupt handler to the job seeing the completion"),
        timeout_ns: Ns = ns(0, "command timeout (Linux io_timeout); 0 = never time out"),
        abort_ns: Ns = ns(10_000, "round trip of an Abort admin command"),
        reset_ns: Ns = ns(1_000_000, "time a controller reset takes before queues work again"),
        max_retries: u32 = count(5, "requeues of one I/O after aborts and resets before it fails (Linux nvme max_retries)"),
        replicas: String = text("none", "copies of the data on several namespaces: none (each request keeps its namespace) or a replica policy's name (mirror: reads to the copies in turn; plm: reads to a copy in its deterministic window, with the PLM coordinator); its tunables are [host.NAME]"),
    }
}

qoslab_engine::settings! {
    /// `[controller]`: the NVMe controller's front end.
    pub struct ControllerConfig in CONTROLLER_TUNABLES {
        arbitration: String = text("rr", "SQ arbitration: an arbiter's name (rr: round robin; wrr: weighted round robin with an urgent class, NVMe 2.0 3.4.4); its tunables are [controller.NAME]"),
        arbitration_burst: u32 = count(1, "commands fetched from one SQ per arbitration win").range(1.0, 65536.0),
        fetch_ns: Ns = ns(0, "time to fetch one SQ entry; fetches are serial"),
        cmd_ns: Ns = ns(0, "controller processing per command between fetch and media (pipelined)"),
        cq_post_ns: Ns = ns(0, "time to write one completion queue entry"),
        max_outstanding: u32 = count(0, "commands the controller holds at once (fetched, not completed); 0 = no limit"),
        fetch_limit_per_sq: u32 = count(0, "commands one SQ may have fetched and not completed (MQSim Queue_Fetch_Size); 0 = no limit"),
        mdts_bytes: u64 = bytes(0, "maximum data transfer size of one command; the host splits larger I/Os; 0 = no limit"),
        coalesce_threshold: u32 = count(1, "interrupt coalescing: CQ entries per interrupt (aggregation threshold); 1 = off").range(1.0, 256.0),
        coalesce_time_ns: Ns = ns(0, "interrupt coalescing: longest an entry waits for its interrupt (aggregation time); 0 = off"),
        completion_order: String = text("device", "order of CQ entries: a completion order's name (device: as the media finishes; fifo, random, adversarial, batched: the NVMe-lite policies within reorder_bound)"),
        reorder_bound: u32 = count(u32::MAX as u64, "k: an entry may be posted only while at most k older commands of its SQ are outstanding (0 = in order)"),
    }
}

impl ControllerConfig {
    /// Interrupt coalescing is on when both the threshold and the time allow aggregation (an
    /// aggregation time of 0 means "no delay" in the NVMe specification).
    pub fn coalescing(&self) -> bool {
        self.coalesce_threshold > 1 && self.coalesce_time_ns > 0
    }

    /// Checks what the table alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.mdts_bytes != 0 && !self.mdts_bytes.is_multiple_of(512) {
            return Err(format!(
                "field 'controller.mdts_bytes': expected a multiple of 512 bytes, got {}",
                self.mdts_bytes
            ));
        }
        Ok(())
    }
}

/// The priority class of a submission queue under weighted round robin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SqClass {
    Urgent = 0,
    High = 1,
    Medium = 2,
    Low = 3,
}

impl SqClass {
    pub const ALL: [SqClass; 4] = [
        SqClass::Urgent,
        SqClass::High,
        SqClass::Medium,
        SqClass::Low,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SqClass::Urgent => "urgent",
            SqClass::High => "high",
            SqClass::Medium => "medium",
            SqClass::Low => "low",
        }
    }

    /// The class an I/O priority maps to when each core has a queue per class: real-time is
    /// urgent; best-effort levels 0-2 are high, 3-5 medium, 6-7 low; idle is low; no priority is
    /// medium.
    pub fn of(prio: IoPrio) -> SqClass {
        match prio.class {
            IoPrioClass::RealTime => SqClass::Urgent,
            IoPrioClass::BestEffort => match prio.level {
                0..=2 => SqClass::High,
                3..=5 => SqClass::Medium,
                _ => SqClass::Low,
            },
            IoPrioClass::Idle => SqClass::Low,
            IoPrioClass::None => SqClass::Medium,
        }
    }
}
