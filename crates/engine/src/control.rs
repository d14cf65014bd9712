//! What stages tell each other besides requests: notices going up (an interrupt, an
//! asynchronous event), admin commands going down (Set Features, Get Log Page), and the
//! direction of a data transfer. Defined here so that the NVMe stages and the devices can talk
//! without depending on each other (NVM Express Base Specification 2.0: Set Features 09h, Get
//! Log Page 02h, Asynchronous Event Request 0Ch).

/// Which way data moves through a transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dma {
    /// Host memory to the device: SQ entries, write data.
    ToDevice = 0,
    /// Device to host memory: read data, CQ entries.
    ToHost = 1,
}

/// What a transfer carries: transports may move queue entries differently from data (over
/// PCIe both cross the link; a fabric carries commands inside capsules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Payload {
    Data,
    /// Submission or completion queue entries.
    QueueEntries,
    /// Write data an NVMe-oF target server pulls into its own memory before it submits the
    /// command to its drive (the drive then finds the data there).
    TargetPull,
}

/// One data movement through a transport (see `StageCtx::dma`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The host whose memory is on the other side.
    pub host: u16,
    pub dir: Dma,
    pub payload: Payload,
    /// Earliest start.
    pub start_ns: crate::Ns,
    pub bytes: u64,
}

/// A message for the stage above that is not a request. Small and `Copy`: it waits in the
/// event queue's urgent lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// An interrupt vector fired (MSI-X): the host's handler should look at queue `vector`.
    Interrupt { host: u16, vector: u16 },
    /// An asynchronous event (NVMe AER completion): `kind` is the event type (e.g. 7 for an
    /// I/O command set specific event), `info` the event information, `log_page` the log page
    /// the host should read to clear it.
    AsyncEvent {
        host: u16,
        kind: u8,
        info: u8,
        log_page: u8,
    },
    /// Job `job`'s submission call sleeps: a request of its waits for a tag (Linux
    /// `blk_mq_get_tag` puts the submitting task to sleep), so the job submits nothing more and
    /// reaps no completion until [`Notice::SubmitterResumed`]. From the top stage to the jobs.
    SubmitterBlocked { job: u32 },
    /// Job `job`'s submission call returned: it goes on submitting and reaps what completed
    /// meanwhile.
    SubmitterResumed { job: u32 },
    /// Job `job`'s submission call, asleep for a tag, was woken (sbitmap's wake-up): its task
    /// tries again for the tag when it next runs on a CPU. Sent only to a CPU stage above that
    /// runs the jobs' tasks and asked for it; that stage answers with
    /// [`Command::SubmitterRuns`] when the task has its turn.
    SubmitterWoken { host: u16, job: u32 },
    /// The block layer left a run of host `host`'s queues to a worker (Linux: kblockd's
    /// work, after a completion or an insert under a scheduler). Sent only to a CPU stage
    /// above that runs that worker and asked for it; that stage answers with
    /// [`Command::RunQueue`] when the worker's turn on the CPU ends.
    QueueRunPending { host: u16 },
}

impl Notice {
    /// `host` of a notice meant for every host (an event of the device, such as an NVM set
    /// changing window): the controller delivers it to each host.
    pub const ALL_HOSTS: u16 = u16::MAX;
}

/// An admin command (or a register write) going down the path, answered by the stage that owns
/// it. `status` starts
/// as [`ControlStatus::Unhandled`]; a stage that handles the command sets it.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    /// Simulated time the command was issued.
    pub at_ns: crate::Ns,
    /// The host that sent it.
    pub host: u16,
    pub command: Command,
    pub status: ControlStatus,
}

impl Control {
    pub fn new(at_ns: crate::Ns, host: u16, command: Command) -> Self {
        Control {
            at_ns,
            host,
            command,
            status: ControlStatus::Unhandled,
        }
    }
}

/// The admin commands (and register writes outside the request flow) a stage may own.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// The host consumed completion queue `cq` (numbered across hosts) up to entry `head`:
    /// the CQ head doorbell, which gives the controller room to post again.
    CqHeadDoorbell { cq: u16, head: u64 },
    /// Set Features: feature identifier `fid`, for NVM set `set` (0: the controller), value
    /// in command dword 11 layout.
    SetFeature { fid: u8, set: u16, value: u32 },
    /// Get Features: the answer goes into `value`.
    GetFeature { fid: u8, set: u16, value: u32 },
    /// The power fails now (not an NVMe command: the environment's event, sent down the path
    /// so the stage that holds volatile state loses it).
    PowerLoss,
    /// Target server `target` of a fan-out crashes and restarts (not an NVMe command: the
    /// environment's event). The fan-out sends that target alone a [`Command::PowerLoss`]:
    /// its stages lose what is volatile, the initiator and the other targets stay up.
    TargetCrash { target: u16 },
    /// Get Log Page `lid` for NVM set `set` (the log-specific identifier): the stage that owns
    /// it fills `data` with the page's bytes as the specification lays them out.
    GetLogPage { lid: u8, set: u16, data: Vec<u8> },
    /// An ordered write's message to one target server (see [`crate::order`]).
    Ordering(crate::order::OrderMsg),
    /// The task of job `job`, woken by [`Notice::SubmitterWoken`], runs now (not an NVMe
    /// command: a CPU stage's answer to the block layer, which retries the task's tag).
    SubmitterRuns { job: u32 },
    /// The worker asked for by [`Notice::QueueRunPending`] runs host `host`'s queues now (not
    /// an NVMe command: a CPU stage's answer to the block layer); the block layer counts
    /// what that run issued into `issued` (requests) and `issued_kib`.
    RunQueue {
        host: u16,
        issued: u32,
        issued_kib: u64,
    },
}

/// How an admin command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlStatus {
    /// No stage owns the feature or log page.
    Unhandled,
    Success,
    /// Owned but refused (invalid field, feature not changeable now).
    Invalid,
}

/// A write a power failure took away: what a crash-consistency check compares the host's
/// view against (see `Stage::collect_lost_writes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostWrite {
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub job: u32,
    pub queued_ns: crate::Ns,
    /// Whether the device had completed it to the host (false: it was still in flight).
    pub acknowledged: bool,
}
