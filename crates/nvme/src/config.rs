//! The tunables of the host driver (`[host]`), the controller (`[controller]`) and the PCIe
//! link (`[link]`), declared once; the device-file parser, `--set`, the CLI help and the docs
//! all read these tables.

use qoslab_engine::{ConfigError, Ns, Settings, Tunable};

/// `[host]`: the host's NVMe driver and CPUs.
pub static HOST_TUNABLES: &[Tunable] = &[
    Tunable::count(
        "cores",
        0,
        "host CPUs, one I/O queue pair (and interrupt vector) each; job i runs on core i mod cores; 0 = one per job",
    )
    .range(0.0, 4096.0),
    Tunable::count("sq_depth", 1024, "entries per submission queue (Linux io_queue_depth); at most sq_depth - 1 commands outstanding per queue")
        .range(2.0, 65536.0),
    Tunable::count("cq_depth", 1024, "entries per completion queue").range(2.0, 65536.0),
    Tunable::ns("submit_ns", 0, "host CPU time from issuing an I/O to writing its SQ entry (block layer + driver)"),
    Tunable::ns("doorbell_ns", 0, "time for the SQ tail doorbell write to reach the controller"),
    Tunable::ns("irq_ns", 0, "time from the controller signalling an interrupt to the handler running"),
    Tunable::ns("complete_ns", 0, "host CPU time from the interrupt handler to the job seeing the completion"),
    Tunable::ns("timeout_ns", 0, "command timeout (Linux io_timeout); 0 = never time out"),
    Tunable::ns("abort_ns", 10_000, "round trip of an Abort admin command"),
    Tunable::ns("reset_ns", 1_000_000, "time a controller reset takes before queues work again"),
    Tunable::count("max_retries", 5, "requeues of one I/O after aborts and resets before it fails (Linux nvme max_retries)"),
];

/// `[controller]`: the NVMe controller's front end.
pub static CONTROLLER_TUNABLES: &[Tunable] = &[
    Tunable::choice(
        "arbitration",
        &["rr", "wrr"],
        "rr",
        "SQ arbitration: round robin, or weighted round robin with an urgent class (NVMe 2.0, 3.4.4)",
    ),
    Tunable::count(
        "arbitration_burst",
        1,
        "commands fetched from one SQ per arbitration win",
    )
    .range(1.0, 65536.0),
    Tunable::count("wrr_high_weight", 1, "WRR weight of the high class").range(1.0, 256.0),
    Tunable::count("wrr_medium_weight", 1, "WRR weight of the medium class").range(1.0, 256.0),
    Tunable::count("wrr_low_weight", 1, "WRR weight of the low class").range(1.0, 256.0),
    Tunable::ns(
        "fetch_ns",
        0,
        "time to fetch one SQ entry; fetches are serial",
    ),
    Tunable::ns(
        "cmd_ns",
        0,
        "controller processing per command between fetch and media (pipelined)",
    ),
    Tunable::ns("cq_post_ns", 0, "time to write one completion queue entry"),
    Tunable::count(
        "max_outstanding",
        0,
        "commands the controller holds at once (fetched, not completed); 0 = no limit",
    ),
    Tunable::count(
        "fetch_limit_per_sq",
        0,
        "commands one SQ may have fetched and not completed (MQSim Queue_Fetch_Size); 0 = no limit",
    ),
    Tunable::bytes(
        "mdts_bytes",
        0,
        "maximum data transfer size of one command; larger I/Os are split; 0 = no limit",
    ),
    Tunable::count(
        "coalesce_threshold",
        1,
        "interrupt coalescing: CQ entries per interrupt (aggregation threshold); 1 = off",
    )
    .range(1.0, 256.0),
    Tunable::ns(
        "coalesce_time_ns",
        0,
        "interrupt coalescing: longest an entry waits for its interrupt (aggregation time); 0 = off",
    ),
    Tunable::choice(
        "completion_order",
        &["device", "fifo", "random", "adversarial", "batched"],
        "device",
        "order of CQ entries: as the media finishes, or held back by an NVMe-lite policy within reorder_bound",
    ),
    Tunable::count(
        "reorder_bound",
        u32::MAX as u64,
        "k: an entry may be posted only while at most k older commands of its SQ are outstanding (0 = in order)",
    ),
];

/// `[link]`: the PCIe link between host and controller.
pub static LINK_TUNABLES: &[Tunable] = &[
    Tunable::rate(
        "lane_rate",
        0.0,
        "data rate per lane (MQSim PCIe_Lane_Bandwidth); 0 = transfers are free",
    ),
    Tunable::count("lanes", 4, "lanes (MQSim PCIe_Lane_Count)").range(1.0, 32.0),
    Tunable::bytes("tlp_payload_bytes", 128, "maximum payload per TLP").range(1.0, 4096.0),
    Tunable::bytes(
        "tlp_overhead_bytes",
        28,
        "bytes added per TLP (header, DLLP, framing)",
    ),
    Tunable::flag(
        "queue_entries",
        false,
        "also move each 64-byte SQ entry and 16-byte CQ entry over the link",
    ),
];

/// How the host maps an I/O priority to an SQ class under WRR.
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arbitration {
    RoundRobin,
    WeightedRoundRobin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionOrder {
    /// Post each entry as soon as its command is done.
    Device,
    Fifo,
    Random,
    Adversarial,
    Batched,
}

/// Everything the NVMe stage needs, read from the three sections.
#[derive(Clone, Debug)]
pub struct NvmeConfig {
    pub cores: u32,
    pub sq_depth: u32,
    pub cq_depth: u32,
    pub submit_ns: Ns,
    pub doorbell_ns: Ns,
    pub irq_ns: Ns,
    pub complete_ns: Ns,
    pub timeout_ns: Ns,
    pub abort_ns: Ns,
    pub reset_ns: Ns,
    pub max_retries: u32,

    pub arbitration: Arbitration,
    pub burst: u32,
    /// Weights of high, medium, low.
    pub wrr_weights: [u32; 3],
    pub fetch_ns: Ns,
    pub cmd_ns: Ns,
    pub cq_post_ns: Ns,
    pub max_outstanding: u32,
    pub fetch_limit_per_sq: u32,
    pub mdts_bytes: u64,
    pub coalesce_threshold: u32,
    pub coalesce_time_ns: Ns,
    pub completion_order: CompletionOrder,
    pub reorder_bound: u32,

    pub lane_rate: f64,
    pub lanes: u32,
    pub tlp_payload_bytes: u32,
    pub tlp_overhead_bytes: u32,
    pub queue_entries_on_link: bool,
}

impl Default for NvmeConfig {
    fn default() -> Self {
        Self::from_settings(
            &Settings::defaults("host", HOST_TUNABLES),
            &Settings::defaults("controller", CONTROLLER_TUNABLES),
            &Settings::defaults("link", LINK_TUNABLES),
            1,
        )
        .expect("defaults are valid")
    }
}

impl NvmeConfig {
    /// Reads the three sections; `jobs` resolves `host.cores = 0`.
    pub fn from_settings(
        host: &Settings,
        ctrl: &Settings,
        link: &Settings,
        jobs: u32,
    ) -> Result<Self, ConfigError> {
        let cores = match host.u64("cores") as u32 {
            0 => jobs.max(1),
            n => n,
        };
        let completion_order = match ctrl.str("completion_order") {
            "device" => CompletionOrder::Device,
            "fifo" => CompletionOrder::Fifo,
            "random" => CompletionOrder::Random,
            "adversarial" => CompletionOrder::Adversarial,
            _ => CompletionOrder::Batched,
        };
        let mdts_bytes = ctrl.u64("mdts_bytes");
        if mdts_bytes != 0 && !mdts_bytes.is_multiple_of(512) {
            return Err(ConfigError::new(format!(
                "field 'controller.mdts_bytes': expected a multiple of 512 bytes, got {mdts_bytes}"
            )));
        }
        Ok(NvmeConfig {
            cores,
            sq_depth: host.u64("sq_depth") as u32,
            cq_depth: host.u64("cq_depth") as u32,
            submit_ns: host.u64("submit_ns"),
            doorbell_ns: host.u64("doorbell_ns"),
            irq_ns: host.u64("irq_ns"),
            complete_ns: host.u64("complete_ns"),
            timeout_ns: host.u64("timeout_ns"),
            abort_ns: host.u64("abort_ns"),
            reset_ns: host.u64("reset_ns"),
            max_retries: host.u64("max_retries").min(u16::MAX as u64) as u32,
            arbitration: match ctrl.str("arbitration") {
                "wrr" => Arbitration::WeightedRoundRobin,
                _ => Arbitration::RoundRobin,
            },
            burst: ctrl.u64("arbitration_burst") as u32,
            wrr_weights: [
                ctrl.u64("wrr_high_weight") as u32,
                ctrl.u64("wrr_medium_weight") as u32,
                ctrl.u64("wrr_low_weight") as u32,
            ],
            fetch_ns: ctrl.u64("fetch_ns"),
            cmd_ns: ctrl.u64("cmd_ns"),
            cq_post_ns: ctrl.u64("cq_post_ns"),
            max_outstanding: ctrl.u64("max_outstanding").min(u32::MAX as u64) as u32,
            fetch_limit_per_sq: ctrl.u64("fetch_limit_per_sq").min(u32::MAX as u64) as u32,
            mdts_bytes,
            coalesce_threshold: ctrl.u64("coalesce_threshold") as u32,
            coalesce_time_ns: ctrl.u64("coalesce_time_ns"),
            completion_order,
            reorder_bound: ctrl.u64("reorder_bound").min(u32::MAX as u64) as u32,
            lane_rate: link.f64("lane_rate"),
            lanes: link.u64("lanes") as u32,
            tlp_payload_bytes: link.u64("tlp_payload_bytes") as u32,
            tlp_overhead_bytes: link.u64("tlp_overhead_bytes") as u32,
            queue_entries_on_link: link.bool("queue_entries"),
        })
    }

    /// Interrupt coalescing is on when both the threshold and the time allow aggregation (an
    /// aggregation time of 0 means "no delay" in the NVMe specification).
    pub fn coalescing(&self) -> bool {
        self.coalesce_threshold > 1 && self.coalesce_time_ns > 0
    }
}
