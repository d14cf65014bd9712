//! The host's CPU as a stage above the block layer: the time the jobs' submission calls and
//! the completion path take, on CPUs they share.
//!
//! Without it (`[cpu] model = "none"`, the default) a job's I/O reaches the block layer the
//! instant the job issues it and the job sees a completion the instant the driver reports it.
//! A guest kernel under TCG has one slow virtual CPU: there a fio process spends ~12 us of it
//! per 4 KiB I/O and ~60 us per 128 KiB I/O (`qoslab vm trace`), and each completion's
//! interrupt ~5 us, so the requests of a burst reach the device spread out and one job's
//! submissions wait while another's run (docs/vm.md, finding 7). A CPU model is a plug-in:
//! a [`CpuModel`] and its [`CpuOps`], one line in [`CPUS`], its tunables `[cpu.NAME]`. The
//! stage ([`CpuStage`]) runs each submission and each completion on the model's CPU, first
//! come first served unless the model puts interrupts first, lets a woken job preempt, or runs
//! the job of least CPU time first (CFS), and passes the request on when its work ends.

use std::collections::VecDeque;

use qoslab_engine::{
    Admission, Command, ConfigError, Control, Notice, Ns, ReqId, Request, Settings, Stage, StageCtx,
};

qoslab_engine::settings! {
    /// `[cpu]`: the host CPU the jobs' submissions and the completions run on.
    pub struct CpuConfig in CPU_TUNABLES {
        model: String = text("none", "the CPU the jobs' submission calls and the completion path run on: none (they take no time) or a CPU model's name (one: a single CPU shared by every job, as a guest with one vCPU); its tunables are [cpu.NAME]; paths with driver ata or simple"),
    }
}

/// A CPU model: what a request's submission and completion cost, and on which CPU.
pub trait CpuModel {
    /// CPU time of the submission call that hands `req` to the block layer (the system call,
    /// the block layer and the driver's queueing), from its job's point of view.
    fn submit_ns(&self, req: &Request) -> Ns;
    /// CPU time from the driver's completion of `req` to its job seeing it (the interrupt,
    /// the block layer's completion, the wake-up of the job).
    fn complete_ns(&self, req: &Request) -> Ns;
    /// CPU time of the completion of a piece of a split bio (its own request's interrupt;
    /// the job sees nothing until the last piece), under `retry_after_completion`.
    fn piece_complete_ns(&self) -> Ns {
        0
    }
    /// Whether a completion (interrupt context) runs ahead of every submission (process
    /// context) and preempts one on the CPU, as a hardware interrupt does.
    fn interrupts_first(&self) -> bool {
        false
    }
    /// Whether a job woken by its completion runs ahead of the other jobs' submissions and
    /// preempts one on the CPU, as Linux's scheduler does for a task that slept (its
    /// wake-up preemption).
    fn wakeup_preempts(&self) -> bool {
        false
    }
    /// Whether a job's task woken from its sleep for a tag must run on the CPU before it
    /// tries for the tag again (process context, queued by the model's rules like its
    /// submissions), as Linux's `blk_mq_get_tag` loop does; false: it tries at the instant
    /// it is woken.
    fn woken_retry(&self) -> bool {
        false
    }
    /// With `woken_retry`: whether a task woken by a completion's freed tag becomes runnable
    /// only when that completion's work on the CPU ends (in Linux the tag is freed, and the
    /// sleeper woken, inside the completion's interrupt), a piece of a split bio's completion
    /// being interrupt work too; false: a piece's completion costs no CPU and its sleeper
    /// retries at once.
    fn retry_after_completion(&self) -> bool {
        false
    }
    /// Whether a job whose submission call sleeps for a tag runs none of its submissions
    /// until the call returns (fio's loop waits inside that call: with one I/O per
    /// `io_submit` its next I/O is not even prepared); false: the submissions it made before
    /// the block layer put it to sleep still run.
    fn sleep_stops_loop(&self) -> bool {
        false
    }
    /// `Some(credit)`: process-context work (submissions, woken tag retries) runs in order of
    /// its job's CPU time, least first, as Linux's CFS picks the runnable task of least
    /// vruntime; a job that had no work on the CPU joins no more than `credit` behind the
    /// least CPU time of the jobs that have (CFS's placement of a waking task). `None`: the
    /// model's other rules order it (first come first served).
    fn fair_credit_ns(&self) -> Option<Ns> {
        None
    }
    /// With `fair_credit_ns`: `Some(granularity)`: a job that wakes (its work arrives while
    /// it has none on the CPU: a submission after its completion, or a retry after a tag
    /// wake) preempts another job's process-context work on the CPU when that job's CPU time,
    /// with what it has run so far, exceeds its own by more than `granularity` (CFS's
    /// wake-up preemption); `None`: a waking job waits for the work on the CPU to end.
    fn fair_wakeup_granularity_ns(&self) -> Option<Ns> {
        None
    }
    /// Whether the queue runs the block layer leaves to kblockd's worker (after a
    /// completion; under a scheduler after an insert or a scheduler's timer) are that
    /// worker's work on the CPU: process context of a task of its own at nice -20, queued by
    /// the model's rules with the jobs' work, the queues running when its turn ends; false:
    /// they run at once, costing nothing.
    fn queue_runs_on_cpu(&self) -> bool {
        false
    }
    /// With `queue_runs_on_cpu`: the worker's time on the CPU for a turn that issued `issued`
    /// requests of `kib` KiB in all to the driver (`(0, 0)`: the part before the queues run).
    fn queue_run_ns(&self, _issued: u32, _kib: u64) -> Ns {
        0
    }
    /// With `queue_runs_on_cpu` and `fair_credit_ns`: the wake-up granularity by which
    /// kblockd's worker, waking, preempts the process-context work on the CPU (CFS's
    /// check_preempt_wakeup, which the worker's nice -20 makes 88761/1024 times finer in its
    /// vruntime), whether or not the jobs preempt (`fair_wakeup_granularity_ns`).
    fn worker_wakeup_granularity_ns(&self) -> Option<Ns> {
        None
    }
}

/// What a CPU model's constructor gets.
pub struct CpuSetup<'a> {
    /// Its sub-table `[cpu.NAME]`.
    pub settings: &'a Settings,
}

/// Builds a CPU model.
pub type BuildCpu = fn(&CpuSetup<'_>) -> Box<dyn CpuModel>;

qoslab_engine::plugin_ops! {
    /// One CPU model, as the registry knows it.
    pub struct CpuOps: "CPU model", tunables "[cpu.NAME]", build BuildCpu {}
}

/// Every CPU model a device file can name (besides `none`).
pub static CPUS: &[&CpuOps] = &[&ONE];

/// The word for "no CPU model" (no CPU stage).
pub use qoslab_engine::plugin::NONE;

/// The CPU model called `name` (`None` for `none`), checked against the stage contract.
pub fn lookup(name: &str) -> Result<Option<&'static CpuOps>, ConfigError> {
    qoslab_engine::plugin::lookup_or_none(CPUS, "cpu.model", name)
}

/// The names a device file may give `cpu.model`.
pub fn names() -> Vec<&'static str> {
    qoslab_engine::plugin::names_or_none(CPUS)
}

qoslab_engine::plugin! {
    pub static ONE: CpuOps = "one", "one CPU shared by every job's submission calls and every completion, each costing its time, first come first served (a guest with one vCPU)";
    /// `[cpu.one]`: one CPU for every job. Defaults: Debian's 6.1 kernel in the project's
    /// guest (QEMU TCG, one vCPU, `-icount shift=0`), fio 3.33 with libaio, measured with
    /// `qoslab vm fio --trace` and `qoslab vm trace` (docs/vm.md).
    tunables struct OneCpuConfig in ONE_TUNABLES {
        submit_ns: Ns = ns(11_000, "CPU time of one I/O's turn of the job's loop: its submission call and the reaping of the completion before it, whatever its size (guest: a fio process's 4 KiB bios follow each other every 12-14 us, less 4 x per_kib_ns)"),
        per_kib_ns: Ns = ns(380, "CPU time of that turn per KiB of the I/O (pinning the pages, a driver that copies the data as scsi_debug does) (guest: 128 KiB bios every 60 us, 4 KiB every 12.5 us: (60 - 12.5) us / 124 KiB)"),
        complete_ns: Ns = ns(5_000, "CPU time of one completion, the interrupt and the block layer's completion before the job can see it (guest: completions due at once follow each other every 5 us)"),
        interrupts_first: bool = flag(false, "completions (interrupt context) run ahead of every submission and preempt one on the CPU; false: the CPU serves its work first come first served"),
        wakeup_preempts: bool = flag(false, "a job woken by its completion runs ahead of the other jobs' submissions and preempts one on the CPU (Linux's wake-up preemption); false: it queues behind them"),
        sleep_stops_loop: bool = flag(false, "a job whose submission call sleeps for a tag runs none of its submissions waiting for the CPU until the call returns (fio's loop waits inside it); false: the submissions it made before it slept still run"),
        woken_retry: bool = flag(false, "a job woken from its sleep for a tag tries for the tag again only when its task gets its turn on the CPU (process context, no CPU time of its own: the bio's submission is in submit_ns); false: at the instant the tag is freed"),
        retry_after_completion: bool = flag(false, "with woken_retry: a task woken by a completion's freed tag joins the CPU's work only when that completion's work there ends (Linux frees the tag and wakes the sleeper inside the completion's interrupt, after waking the completion's own job), and a piece of a split bio completes with an interrupt of complete_ns too (each request of the split has its own); false: a piece's completion costs no CPU and the sleeper its tag wakes retries at once"),
        fair: bool = flag(false, "process-context work (submissions, woken tag retries) runs in order of its job's CPU time used, least first, as Linux's CFS runs the task of least vruntime (every fio job has the same nice); completions keep their place; false: first come first served among it"),
        fair_wakeup_preempts: bool = flag(false, "with fair: a job that wakes (its submission after a completion, or its retry after a tag wake, arrives while it has no work on the CPU) preempts another job's process-context work when that job's CPU time, counting what it has run so far, exceeds its own by more than wakeup_granularity_ns (Linux's check_preempt_wakeup); false: it waits for the work on the CPU to end"),
        wakeup_granularity_ns: Ns = ns(1_000_000, "with fair_wakeup_preempts (and for kblockd's worker with queue_runs_on_cpu, scaled by its weight): how far ahead in CPU time the running job must be for a waking job to preempt it (Linux 6.1's sysctl_sched_wakeup_granularity: 1 ms x (1 + ilog2(CPUs)), 1 ms on one CPU)"),
        queue_runs_on_cpu: bool = flag(true, "the queue runs the block layer leaves to kblockd's worker (after a completion; under a scheduler after an insert or a scheduler's timer: Linux 6.1 runs them async) are that worker's work on this CPU, a task of its own at nice -20 (CFS weight 88761 against fio's 1024: its CPU time counts 1024/88761 as much), queued with the jobs' work by the model's rules (with fair: in CFS's order, and waking it preempts as CFS's wake-up rule lets a task of its weight, whatever fair_wakeup_preempts says; when a completion woke it, the CPU then runs the task of least CPU time among those woken and waiting, of equals the first woken, as CFS picks after an interrupt); the block layer dispatches when the turn's first queue_run_ns ends, and the worker stays on the CPU queue_run_per_rq_ns and queue_run_per_kib_ns for what it issued; false: the queues run at once, costing no CPU"),
        queue_run_ns: Ns = ns(5_000, "with queue_runs_on_cpu: the worker's time on the CPU before the queues run, all of it when it issues nothing (guest, prio, kworker/0:1H's turns that issued nothing: median 5.0 us on scsi_debug, 4 to 5 on null_blk, 3 repetitions each; its first issue 2 to 4 us after its switch-in)"),
        queue_run_per_rq_ns: Ns = ns(2_000, "with queue_runs_on_cpu: the worker's time on the CPU per request it issued (guest, null_blk: turns that issued one request 7 us, two 8 us, whatever their size; scsi_debug, whose queue_rq copies the data: one 4 KiB request 10 us, one 128 KiB 33: 4,260 ns with queue_run_per_kib_ns 185)"),
        queue_run_per_kib_ns: Ns = ns(0, "with queue_runs_on_cpu: the worker's time on the CPU per KiB it issued (a driver whose queue_rq copies the data: scsi_debug 185 ns, the line through its one-request turns; null_blk copies nothing)"),
        sleeper_credit_ns: Ns = ns(3_000_000, "with fair: a job that had no work on the CPU (it slept) joins at no less than the least CPU time of the jobs with work there minus this (CFS's place_entity in Linux 6.1: sysctl_sched_latency, 6 ms on one CPU, halved by GENTLE_FAIR_SLEEPERS)"),
    }
    build |_, cfg| Box::new(OneCpu { cfg })
}

/// One CPU shared by every job's submissions and the completion path.
struct OneCpu {
    cfg: OneCpuConfig,
}

impl CpuModel for OneCpu {
    fn submit_ns(&self, req: &Request) -> Ns {
        self.cfg.submit_ns + self.cfg.per_kib_ns * req.len_bytes / 1024
    }

    fn complete_ns(&self, _req: &Request) -> Ns {
        self.cfg.complete_ns
    }

    fn piece_complete_ns(&self) -> Ns {
        self.cfg.complete_ns
    }

    fn interrupts_first(&self) -> bool {
        self.cfg.interrupts_first
    }

    fn wakeup_preempts(&self) -> bool {
        self.cfg.wakeup_preempts
    }

    fn woken_retry(&self) -> bool {
        self.cfg.woken_retry
    }

    fn retry_after_completion(&self) -> bool {
        self.cfg.retry_after_completion
    }

    fn sleep_stops_loop(&self) -> bool {
        self.cfg.sleep_stops_loop
    }

    fn fair_credit_ns(&self) -> Option<Ns> {
        self.cfg.fair.then_some(self.cfg.sleeper_credit_ns)
    }

    fn fair_wakeup_granularity_ns(&self) -> Option<Ns> {
        (self.cfg.fair && self.cfg.fair_wakeup_preempts).then_some(self.cfg.wakeup_granularity_ns)
    }

    fn queue_runs_on_cpu(&self) -> bool {
        self.cfg.queue_runs_on_cpu
    }

    fn worker_wakeup_granularity_ns(&self) -> Option<Ns> {
        (self.cfg.fair && self.cfg.queue_runs_on_cpu).then_some(self.cfg.wakeup_granularity_ns)
    }

    fn queue_run_ns(&self, issued: u32, kib: u64) -> Ns {
        let c = &self.cfg;
        c.queue_run_ns + c.queue_run_per_rq_ns * Ns::from(issued) + c.queue_run_per_kib_ns * kib
    }
}

/// The CPU stage's events.
#[derive(Clone, Copy, Debug)]
pub enum CpuEvent {
    /// The work on the CPU since `epoch` began is done (a work item that was preempted
    /// started a new epoch, so its old end is ignored).
    Done { epoch: u64 },
    /// kblockd's workers woken by a completion join the CPU's work, after the completion's
    /// job has seen it and submitted again (its wake-up came first).
    WorkersWake,
}

/// What a piece of work on the CPU is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A request's submission (process context, its job's).
    Submit(ReqId),
    /// A request's completion (interrupt context).
    Complete(ReqId),
    /// A piece of a split bio completes (interrupt context; its job sees nothing yet).
    Piece,
    /// A job's task woken from its sleep for a tag, retrying (process context).
    Retry { host: u16 },
    /// kblockd's worker runs host `host`'s queues when this ends (process context, its own).
    QueueRun { host: u16 },
    /// The worker's time for the requests its run issued (the driver's queue_rq).
    QueueRunTail,
}

/// The `job` of kblockd's worker's work (no fio job's number).
const WORKER: u32 = u32::MAX - 1;

/// CFS's weights (Linux's sched_prio_to_weight) of nice 0, every fio job's, and of nice -20,
/// kblockd's workers' (its workqueue is WQ_HIGHPRI): a task's vruntime grows by the time it
/// ran times NICE_0_WEIGHT / its weight.
const NICE_0_WEIGHT: Ns = 1024;
const WORKER_WEIGHT: Ns = 88_761;

/// `ns` of CPU time (or of CFS's wake-up granularity) in `job`'s vruntime.
fn weighted(job: u32, ns: Ns) -> Ns {
    if job == WORKER {
        ns * NICE_0_WEIGHT / WORKER_WEIGHT
    } else {
        ns
    }
}

/// One piece of work on the CPU.
#[derive(Clone, Copy, Debug)]
struct Work {
    kind: Kind,
    /// Interrupt context (a completion), which nothing preempts.
    completion: bool,
    job: u32,
    /// CPU time still to run.
    left_ns: Ns,
    /// CPU time in all (for the time it waited).
    cost_ns: Ns,
    arrived_ns: Ns,
    /// A submission of a job just woken by its completion (the model's `wakeup_preempts`).
    woken: bool,
    /// A completion's number, counted from 1 (0: not a completion).
    irq: u64,
}

impl Work {
    fn new(kind: Kind, job: u32, cost_ns: Ns, now: Ns) -> Self {
        Work {
            kind,
            completion: matches!(kind, Kind::Complete(_) | Kind::Piece),
            job,
            left_ns: cost_ns,
            cost_ns,
            arrived_ns: now,
            woken: false,
            irq: 0,
        }
    }
}

/// The stage: every submission and completion run on the one CPU, in the order the model's
/// rules give (first come first served when it has none).
pub struct CpuStage {
    model: Box<dyn CpuModel>,
    /// The work on the CPU and when it (last) started.
    running: Option<(Work, Ns)>,
    /// The work waiting for the CPU, in the order it will run.
    ready: VecDeque<Work>,
    /// Counts the starts of work on the CPU; a [`CpuEvent`] of an older epoch is stale.
    epoch: u64,
    /// kblockd's worker's vruntime (see `vruntime`).
    worker_vruntime: Ns,
    /// Queue runs woken by a completion whose work ended now, joining at
    /// [`CpuEvent::WorkersWake`].
    waking_workers: Vec<Work>,
    /// Under `fair`, a completion's work ended having woken kblockd's worker: the CPU is free
    /// but picks its next work only when the worker has joined, among every task then
    /// runnable (CFS picks after the interrupt's wake-ups, not between them).
    picking: bool,
    queue_runs: u64,
    /// With `queue_runs_on_cpu`: after a completion's work ended, whether the next
    /// process-context work to start was the worker's or a job's (counted then), as
    /// `qoslab vm trace`'s guest counts which task runs first after a completion.
    after_completion_first: (u64, u64),
    completion_ended: bool,
    /// When each job last saw a completion (it was woken then).
    woke_at: Vec<Ns>,
    /// Each job's submissions held while its submission call sleeps (the model's
    /// `sleep_stops_loop`), and whether it sleeps.
    asleep: Vec<(bool, VecDeque<Work>)>,
    busy_ns: Ns,
    /// Time work waited to run, in all: for the CPU, and a submission also while its job's
    /// submission call slept (`sleep_stops_loop`).
    waited_ns: Ns,
    submits: u64,
    completes: u64,
    preemptions: u64,
    retries: u64,
    /// Requests the stage below refused, in order (offered again on `pull`).
    held: VecDeque<ReqId>,
    /// Each job's process-context CPU time as the model's `fair` rule counts it (CFS's
    /// vruntime: the time it ran, moved up when it wakes), and the least of the jobs with
    /// work on the CPU, never decreasing (CFS's min_vruntime).
    vruntime: Vec<Ns>,
    min_vruntime: Ns,
    /// The last completion to arrive (its number), and when (the model's
    /// `retry_after_completion`: a tag sleeper woken at that instant was woken by it).
    last_irq: Option<(Ns, u64)>,
    /// Woken tag retries waiting for the end of the completion work (its number) that woke
    /// them.
    after_completion: Vec<(u64, Work)>,
}

impl CpuStage {
    /// Whether the block layer below must leave a woken tag sleeper's retry to this stage
    /// (`BlockLayer::with_retry_on_cpu`).
    pub fn woken_retry(&self) -> bool {
        self.model.woken_retry()
    }

    pub fn new(model: Box<dyn CpuModel>) -> Self {
        CpuStage {
            model,
            running: None,
            ready: VecDeque::new(),
            epoch: 0,
            worker_vruntime: 0,
            waking_workers: Vec::new(),
            picking: false,
            queue_runs: 0,
            after_completion_first: (0, 0),
            completion_ended: false,
            woke_at: Vec::new(),
            asleep: Vec::new(),
            busy_ns: 0,
            waited_ns: 0,
            submits: 0,
            completes: 0,
            preemptions: 0,
            retries: 0,
            held: VecDeque::new(),
            vruntime: Vec::new(),
            min_vruntime: 0,
            last_irq: None,
            after_completion: Vec::new(),
        }
    }

    /// Whether the block layer below must leave the queue runs kblockd makes to this stage
    /// (`BlockLayer::with_queue_runs_on_cpu`).
    pub fn queue_runs_on_cpu(&self) -> bool {
        self.model.queue_runs_on_cpu()
    }

    fn vr(&self, job: u32) -> Ns {
        if job == WORKER {
            self.worker_vruntime
        } else {
            self.vruntime.get(job as usize).copied().unwrap_or(0)
        }
    }

    fn vruntime_mut(&mut self, job: u32) -> &mut Ns {
        if job == WORKER {
            return &mut self.worker_vruntime;
        }
        let j = job as usize;
        if self.vruntime.len() <= j {
            self.vruntime.resize(j + 1, 0);
        }
        &mut self.vruntime[j]
    }

    /// `run`, started at `started`, leaves the CPU now: its job is charged the time it ran
    /// (the model's `fair` rule; interrupt context is charged to no job).
    fn charge(&mut self, run: &Work, started: Ns, now: Ns) {
        if self.model.fair_credit_ns().is_none() || run.completion {
            return;
        }
        *self.vruntime_mut(run.job) += weighted(run.job, now - started);
        self.update_min_vruntime(Some(run.job));
    }

    /// CFS's min_vruntime: the least CPU time of the jobs with process-context work on the
    /// CPU or waiting for it (and `also`), never decreasing.
    fn update_min_vruntime(&mut self, also: Option<u32>) {
        let running = self.running.iter().map(|(w, _)| w);
        let least = running
            .chain(self.ready.iter())
            .filter(|w| !w.completion)
            .map(|w| w.job)
            .chain(also)
            .map(|j| self.vr(j))
            .min();
        if let Some(least) = least {
            self.min_vruntime = self.min_vruntime.max(least);
        }
    }

    /// Whether job `job`, waking, preempts `run` (started at `started`) under the model's
    /// `fair_wakeup_granularity_ns`: `run` is another job's and that job's CPU time, with
    /// what `run` has run so far, exceeds `job`'s by more than the granularity (both in
    /// vruntime: the granularity in the waking task's, as Linux's wakeup_gran scales it).
    fn fair_preempts(&self, run: &Work, started: Ns, job: u32, now: Ns) -> bool {
        let granularity = if job == WORKER {
            self.model.worker_wakeup_granularity_ns()
        } else {
            self.model.fair_wakeup_granularity_ns()
        };
        let Some(granularity) = granularity else {
            return false;
        };
        let ran = weighted(run.job, now - started);
        run.job != job && self.vr(run.job) + ran > self.vr(job) + weighted(job, granularity)
    }

    /// The next work to run, taken from `ready`: its first one, except that under the
    /// model's `fair` rule the process-context work ahead of the first completion goes in
    /// order of its job's CPU time (least first; the same job's work in arrival order).
    fn pop_next(&mut self) -> Option<Work> {
        let front = self.ready.front()?;
        if self.model.fair_credit_ns().is_none() || front.completion {
            return self.ready.pop_front();
        }
        let pick = self
            .ready
            .iter()
            .take_while(|w| !w.completion)
            .enumerate()
            .min_by_key(|&(i, w)| (self.vr(w.job), i))
            .map(|(i, _)| i)
            .unwrap_or(0);
        self.ready.remove(pick)
    }

    fn start(&mut self, work: Work, ctx: &mut impl StageCtx<CpuEvent>) {
        if self.completion_ended && !work.completion {
            self.completion_ended = false;
            let first = &mut self.after_completion_first;
            if work.job == WORKER {
                first.0 += 1;
            } else {
                first.1 += 1;
            }
        }
        let now = ctx.now_ns();
        self.epoch += 1;
        self.running = Some((work, now));
        ctx.schedule(now + work.left_ns, CpuEvent::Done { epoch: self.epoch });
    }

    /// Whether `job` has a submission on the CPU or waiting for it (then it is running its
    /// loop, not asleep).
    fn busy_job(&self, job: u32) -> bool {
        let mine = |w: &Work| !w.completion && w.job == job;
        self.running.as_ref().is_some_and(|(w, _)| mine(w)) || self.ready.iter().any(mine)
    }

    /// `work` arrives: it runs at once on an idle CPU, takes the CPU from a submission it
    /// preempts, or waits in its place.
    fn arrive(&mut self, mut work: Work, ctx: &mut impl StageCtx<CpuEvent>) {
        if let Kind::Submit(_) = work.kind
            && let Some((true, held)) = self.asleep.get_mut(work.job as usize)
        {
            held.push_back(work);
            return;
        }
        let mut waking = false;
        if let Some(credit) = self.model.fair_credit_ns()
            && !work.completion
            && !self.busy_job(work.job)
        {
            // The job wakes: it keeps its CPU time, but joins no further behind the jobs
            // already there than the credit (CFS's place_entity for a sleeper).
            self.update_min_vruntime(None);
            let floor = self.min_vruntime.saturating_sub(credit);
            let vr = self.vruntime_mut(work.job);
            *vr = (*vr).max(floor);
            waking = true;
        }
        let irq_first = self.model.interrupts_first();
        if !work.completion && self.model.wakeup_preempts() {
            let woke = self.woke_at.get(work.job as usize) == Some(&work.arrived_ns);
            work.woken = woke && !self.busy_job(work.job);
        }
        let Some((run, started)) = self.running else {
            if self.picking && !work.completion {
                self.ready.push_back(work);
                return;
            }
            self.start(work, ctx);
            return;
        };
        // Only process context is preempted: by an interrupt, or by a woken job's
        // submission when another job's loop runs, or under `fair` by a waking job far
        // enough behind the running one in CPU time.
        let preempts = !run.completion
            && ((work.completion && irq_first)
                || (work.woken && !run.woken && run.job != work.job)
                || (waking && self.fair_preempts(&run, started, work.job, ctx.now_ns())));
        if preempts {
            let mut run = run;
            run.left_ns -= ctx.now_ns() - started;
            self.charge(&run, started, ctx.now_ns());
            self.preemptions += 1;
            self.ready.push_front(run);
            self.start(work, ctx);
            return;
        }
        let at = if work.completion && irq_first {
            // Behind the interrupts already waiting, ahead of every submission.
            self.ready.iter().position(|w| !w.completion)
        } else if work.woken {
            // Ahead of the submissions of jobs that were not just woken.
            self.ready.iter().position(|w| !w.completion && !w.woken)
        } else {
            None
        };
        match at {
            Some(i) => self.ready.insert(i, work),
            None => self.ready.push_back(work),
        }
    }

    /// Job `job`'s submission call sleeps: its submissions on the CPU or waiting for it stop
    /// where they are.
    fn stop_job(&mut self, job: u32, ctx: &mut impl StageCtx<CpuEvent>) {
        let j = job as usize;
        if self.asleep.len() <= j {
            self.asleep.resize_with(j + 1, Default::default);
        }
        let mine = |w: &Work| matches!(w.kind, Kind::Submit(_)) && w.job == job;
        let mut held: VecDeque<Work> = self.ready.iter().copied().filter(mine).collect();
        self.ready.retain(|w| !mine(w));
        if let Some((run, started)) = self.running
            && mine(&run)
        {
            let mut run = run;
            run.left_ns -= ctx.now_ns() - started;
            self.running = None;
            self.charge(&run, started, ctx.now_ns());
            held.push_front(run);
            // The running work's end event is now stale.
            self.epoch += 1;
            if let Some(next) = self.pop_next() {
                self.start(next, ctx);
            }
        }
        // A call woken for one bio may sleep again on a later one before it returns (no
        // resume in between): what it held already stays first.
        let slot = &mut self.asleep[j];
        slot.0 = true;
        slot.1.extend(held);
    }

    /// Job `job`'s submission call returned: its held submissions take their places again.
    fn resume_job(&mut self, job: u32, ctx: &mut impl StageCtx<CpuEvent>) {
        let Some(slot) = self.asleep.get_mut(job as usize) else {
            return;
        };
        let held = std::mem::take(&mut slot.1);
        slot.0 = false;
        for w in held {
            self.arrive(w, ctx);
        }
    }

    /// Completion work arrives (numbered, for the tag sleepers it wakes).
    fn interrupt(&mut self, mut work: Work, ctx: &mut impl StageCtx<CpuEvent>) {
        work.irq = self.last_irq.map_or(1, |(_, n)| n + 1);
        self.last_irq = Some((ctx.now_ns(), work.irq));
        self.arrive(work, ctx);
    }

    /// Under the model's `retry_after_completion`, the completion whose work a tag sleeper
    /// woken `now` waits for: the completion that arrived at this instant (the block layer
    /// frees the tag as it completes the request or piece), if its work has not ended.
    fn waking_completion(&self, now: Ns) -> Option<u64> {
        if !self.model.retry_after_completion() {
            return None;
        }
        self.completion_now(now)
    }

    /// The completion that arrived at this instant, if its work has not ended.
    fn completion_now(&self, now: Ns) -> Option<u64> {
        let (at, irq) = self.last_irq?;
        let pending = |w: &Work| w.irq == irq;
        let pending = self.running.as_ref().is_some_and(|(w, _)| pending(w))
            || self.ready.iter().any(pending);
        (at == now && pending).then_some(irq)
    }

    fn offer(&mut self, id: ReqId, ctx: &mut impl StageCtx<CpuEvent>) {
        if !self.held.is_empty() || ctx.dispatch(id) == Admission::Busy {
            self.held.push_back(id);
        }
    }
}

impl Stage for CpuStage {
    type Event = CpuEvent;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<CpuEvent>) {
        let req = &ctx.reqs()[id];
        let cost = self.model.submit_ns(req);
        let work = Work::new(Kind::Submit(id), req.job, cost, ctx.now_ns());
        self.submits += 1;
        self.arrive(work, ctx);
    }

    fn on_event(&mut self, ev: CpuEvent, ctx: &mut impl StageCtx<CpuEvent>) {
        let epoch = match ev {
            CpuEvent::Done { epoch } => epoch,
            CpuEvent::WorkersWake => {
                let now = ctx.now_ns();
                for mut run in std::mem::take(&mut self.waking_workers) {
                    run.arrived_ns = now;
                    self.arrive(run, ctx);
                }
                if std::mem::take(&mut self.picking)
                    && self.running.is_none()
                    && let Some(next) = self.pop_next()
                {
                    self.start(next, ctx);
                }
                return;
            }
        };
        if epoch != self.epoch {
            return;
        }
        let (done, started) = self.running.take().expect("an epoch's work is on the CPU");
        if let Kind::Complete(_) = done.kind {
            self.completion_ended = true;
        }
        let now = ctx.now_ns();
        self.busy_ns += done.cost_ns;
        self.waited_ns += now - done.arrived_ns - done.cost_ns;
        self.charge(&done, started, now);
        if let Kind::QueueRun { host } = done.kind {
            self.queue_runs += 1;
            let run = Command::RunQueue {
                host,
                issued: 0,
                issued_kib: 0,
            };
            let mut msg = Control::new(now, host, run);
            ctx.control_below(&mut msg);
            if let Command::RunQueue {
                issued, issued_kib, ..
            } = msg.command
            {
                let first = self.model.queue_run_ns(0, 0);
                let more = self.model.queue_run_ns(issued, issued_kib) - first;
                if more > 0 {
                    // The worker stays on the CPU for what it issued (the driver's queue_rq).
                    self.start(Work::new(Kind::QueueRunTail, WORKER, more, now), ctx);
                    return;
                }
            }
        }
        // The tag sleepers and the worker this completion woke.
        let woken: Vec<(u64, Work)> = if done.irq == 0 {
            Vec::new()
        } else {
            let (woken, rest) = std::mem::take(&mut self.after_completion)
                .into_iter()
                .partition(|(by, _)| *by == done.irq);
            self.after_completion = rest;
            woken
        };
        let woke_worker = woken
            .iter()
            .any(|(_, w)| matches!(w.kind, Kind::QueueRun { .. }));
        if woke_worker && self.model.fair_credit_ns().is_some() {
            // CFS: the interrupt woke the job and the worker; the CPU then runs the runnable
            // task of least vruntime, of equals the first woken (pick_next_entity's leftmost:
            // an equal key is queued to the right). The job's next submission and the
            // worker join at this instant (`WorkersWake`), and the pick waits for both.
            self.picking = true;
        } else if let Some(next) = self.pop_next() {
            // The next work takes the CPU before this one's effects (a woken job's
            // submission) arrive, so they queue behind it as they would on the CPU.
            self.start(next, ctx);
        }
        match done.kind {
            Kind::Complete(id) => {
                let job = done.job as usize;
                if self.woke_at.len() <= job {
                    self.woke_at.resize(job + 1, Ns::MAX);
                }
                self.woke_at[job] = now;
                ctx.complete(id);
            }
            Kind::Piece | Kind::QueueRun { .. } | Kind::QueueRunTail => {}
            Kind::Submit(id) => self.offer(id, ctx),
            Kind::Retry { host } => {
                let job = done.job;
                ctx.control_below(&mut Control::new(now, host, Command::SubmitterRuns { job }));
            }
        }
        // The completion wakes its own job first, then the tag's sleeper; kblockd's worker
        // joins after all that the completion's hand-up set off at this instant, the job's
        // next submission among it (Linux wakes the job first, and CFS runs the first woken
        // of equals first).
        for (_, mut woken) in woken {
            if let Kind::QueueRun { .. } = woken.kind {
                if self.waking_workers.is_empty() {
                    ctx.schedule(now, CpuEvent::WorkersWake);
                }
                self.waking_workers.push(woken);
                continue;
            }
            woken.arrived_ns = now;
            self.arrive(woken, ctx);
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<CpuEvent>) {
        let req = &ctx.reqs()[id];
        let cost = self.model.complete_ns(req);
        let work = Work::new(Kind::Complete(id), req.job, cost, ctx.now_ns());
        self.completes += 1;
        self.interrupt(work, ctx);
    }

    /// A job's task woken from its sleep for a tag runs on the CPU before it retries (the
    /// model's `woken_retry`); a job whose submission call sleeps stops its submissions until
    /// the call returns (`sleep_stops_loop`); every other notice passes up.
    fn notice(&mut self, notice: Notice, ctx: &mut impl StageCtx<CpuEvent>) {
        match notice {
            Notice::SubmitterWoken { host, job } => {
                self.retries += 1;
                let retry = Work::new(Kind::Retry { host }, job, 0, ctx.now_ns());
                match self.waking_completion(ctx.now_ns()) {
                    Some(by) => self.after_completion.push((by, retry)),
                    None => self.arrive(retry, ctx),
                }
                return;
            }
            // A piece of a split bio completed below (sent only with `woken_retry`).
            Notice::Interrupt { .. } => {
                if self.model.retry_after_completion() {
                    let cost = self.model.piece_complete_ns();
                    self.interrupt(Work::new(Kind::Piece, u32::MAX, cost, ctx.now_ns()), ctx);
                }
                return;
            }
            // The block layer left a queue run to kblockd's worker (sent only with
            // `queue_runs_on_cpu`). After a completion the worker is woken inside its
            // interrupt (scsi_end_request, blk_mq_free_request), after the completion's job:
            // it joins the CPU's work when that completion's work ends.
            Notice::QueueRunPending { host } => {
                let cost = self.model.queue_run_ns(0, 0);
                let run = Work::new(Kind::QueueRun { host }, WORKER, cost, ctx.now_ns());
                match self.completion_now(ctx.now_ns()) {
                    Some(by) => self.after_completion.push((by, run)),
                    None => self.arrive(run, ctx),
                }
                return;
            }
            Notice::SubmitterBlocked { job } if self.model.sleep_stops_loop() => {
                self.stop_job(job, ctx);
            }
            Notice::SubmitterResumed { job } if self.model.sleep_stops_loop() => {
                self.resume_job(job, ctx);
            }
            _ => {}
        }
        ctx.notify_above(notice);
    }

    fn pull(&mut self, ctx: &mut impl StageCtx<CpuEvent>) {
        while let Some(&id) = self.held.front() {
            if ctx.dispatch(id) == Admission::Busy {
                return;
            }
            self.held.pop_front();
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut out = vec![
            ("busy_ns".into(), self.busy_ns as f64),
            ("waited_ns".into(), self.waited_ns as f64),
            ("submissions".into(), self.submits as f64),
            ("completions".into(), self.completes as f64),
            ("preemptions".into(), self.preemptions as f64),
            ("tag_retries".into(), self.retries as f64),
        ];
        if self.model.queue_runs_on_cpu() {
            out.push(("queue_runs".into(), self.queue_runs as f64));
            let (worker, job) = self.after_completion_first;
            out.push(("worker_first_after_completion".into(), worker as f64));
            out.push(("job_first_after_completion".into(), job as f64));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use qoslab_engine::{Chain, Harness, Null, Op};

    use super::*;

    const US: Ns = 1_000;

    fn one(submit_ns: Ns, per_kib_ns: Ns, complete_ns: Ns) -> CpuStage {
        one_with(submit_ns, per_kib_ns, complete_ns, "")
    }

    /// `one` with the extra `[cpu.one]` lines `rules` (its ordering rules).
    fn one_with(submit_ns: Ns, per_kib_ns: Ns, complete_ns: Ns, rules: &str) -> CpuStage {
        let text = format!(
            "[cpu.one]\nsubmit_ns = {submit_ns}\nper_kib_ns = {per_kib_ns}\ncomplete_ns = {complete_ns}\n{rules}"
        );
        let mut doc =
            qoslab_engine::ConfigDoc::parse(std::path::Path::new("t.toml"), &text).expect("parses");
        let s = doc.section("cpu.one", ONE_TUNABLES).expect("a table");
        CpuStage::new(ONE.build.expect("registered")(&CpuSetup { settings: &s }))
    }

    #[test]
    fn submissions_take_their_turns_on_the_one_cpu_and_completions_queue_behind() {
        // Three 4 KiB reads issued at once: each reaches the device 10 us after the one
        // before (the CPU's turns), each takes the device's 100 us, and each completion then
        // costs 5 us on the CPU before its job sees it.
        let mut h = Harness::new(Chain::new(one(10 * US, 0, 5 * US), Null::new(100 * US)));
        for _ in 0..3 {
            h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        }
        let mut at: Vec<Ns> = h.settle().iter().map(|d| d.done_ns).collect();
        at.sort_unstable();
        // Device completions at 110, 120, 130 us, each seen 5 us later (the CPU is free).
        assert_eq!(at, vec![115 * US, 125 * US, 135 * US]);
    }

    #[test]
    fn a_bigger_io_costs_more_cpu_and_a_busy_cpu_delays_a_completion() {
        // A 128 KiB read (10 + 128 x 1 us = 138 us of CPU) then a 4 KiB one (14 us): the
        // second reaches a 1 us device at 152 us; the first's completion, due at 139 us,
        // waits for the second's submission to end (152 us) before its 5 us.
        let mut h = Harness::new(Chain::new(one(10 * US, US, 5 * US), Null::new(US)));
        let big = h.submit_at(0, Request::new(Op::Read, 0, 128 * 1024, 0, 0));
        let small = h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        let done = h.settle();
        let at = |id| done.iter().find(|d| d.id == id).expect("completed").done_ns;
        assert_eq!(at(big), 157 * US);
        assert_eq!(at(small), 162 * US);
    }

    fn read(job: u32) -> Request {
        Request::new(Op::Read, 0, 4096, job, 0)
    }

    /// Job 1's read X at 0 (10 us of CPU, 1 us at the device, 5 us to complete), job 0's
    /// three reads at 1 us; when job 1 sees X it issues Y at once (fio's loop). Returns when
    /// X and Y were seen.
    fn wake_and_resubmit(stage: CpuStage, job0_again_at: Option<Ns>) -> (Ns, Ns) {
        let mut h = Harness::new(Chain::new(stage, Null::new(US)));
        let x = h.submit_at(0, read(1));
        for _ in 0..3 {
            h.submit_at(US, read(0));
        }
        if let Some(at) = job0_again_at {
            for _ in 0..2 {
                h.submit_at(at, read(0));
            }
        }
        let (mut seen_x, mut y) = (None, None);
        let mut done = Vec::new();
        while h.step(&mut done) {
            for d in done.drain(..) {
                // Y may reuse X's freed id: Y is asked for first once it exists.
                if y.is_some() && Some(d.id) == y {
                    return (seen_x.expect("X first"), d.done_ns);
                } else if y.is_none() && d.id == x {
                    seen_x = Some(d.done_ns);
                    y = h.submit(read(1));
                }
            }
        }
        panic!("Y never completed");
    }

    #[test]
    fn an_interrupt_preempts_a_submission_when_interrupts_come_first() {
        // X's completion is due at 11 us while job 0's first read has the CPU (10 to 20 us).
        // First come first served it waits for job 0's three turns (to 40 us): X is seen at
        // 45 us; Y then waits for the completions of job 0's reads (45 to 60 us), runs 60 to
        // 70 us, and is seen at 76 us.
        assert_eq!(
            wake_and_resubmit(one(10 * US, 0, 5 * US), None),
            (45 * US, 76 * US)
        );
        // Interrupts first: X's completion runs at once (11 to 16 us) and job 0's read
        // resumes with 9 us left. Y queues behind job 0's turns, which job 0's completions
        // interrupt (26, 41 and 56 us, the last one Y's own turn): Y is seen at 76 us too.
        let irq = one_with(10 * US, 0, 5 * US, "interrupts_first = true\n");
        assert_eq!(wake_and_resubmit(irq, None), (16 * US, 76 * US));
    }

    #[test]
    fn a_woken_job_preempts_another_jobs_submission() {
        // Both rules: X seen at 16 us; Y, from the woken job 1, takes the CPU from job 0's
        // read (16 to 26 us), reaches the device at 26 us and its completion preempts job 0
        // again at 27 us: seen at 32 us.
        let both = "interrupts_first = true\nwakeup_preempts = true\n";
        let stage = one_with(10 * US, 0, 5 * US, both);
        assert_eq!(wake_and_resubmit(stage, None), (16 * US, 32 * US));
        // Wake-up preemption alone, job 0 issuing two more reads at 42 us: X's completion
        // runs 40 to 45 us, behind job 0's turns; Y cannot preempt the completion of job 0's
        // first read that starts then, but goes ahead of job 0's two new reads: it runs 60 to
        // 70 us after the completions waiting before it, and is seen at 95 us. Without the
        // rule Y runs after job 0's two reads (80 to 90 us) and is seen at 105 us.
        let wake = one_with(10 * US, 0, 5 * US, "wakeup_preempts = true\n");
        assert_eq!(wake_and_resubmit(wake, Some(42 * US)), (45 * US, 95 * US));
        let fcfs = one(10 * US, 0, 5 * US);
        assert_eq!(wake_and_resubmit(fcfs, Some(42 * US)), (45 * US, 105 * US));
    }

    /// When the disk started each job's read, job `j` issuing `reads[j]` = (bytes, at) at
    /// its own MiB, over one CPU (10 us per submission, 5 us per completion), a block layer
    /// with `tags` tags and the settings `sets` (no scheduler: sbitmap wakes a sleeper at
    /// every freed tag while the tags are few) and a disk of 1 ms per request, one at a time.
    fn tagged(
        rules: &str,
        retry_on_cpu: bool,
        tags: u32,
        sets: &[&str],
        reads: &[(u64, Ns)],
    ) -> Vec<Ns> {
        use crate::testbed::{BE4, Disk, MIB, io, layer};
        let mut block = layer("none", sets, tags);
        if retry_on_cpu {
            block = block.with_retry_on_cpu();
        }
        let cpu = one_with(10 * US, 0, 5 * US, rules);
        assert_eq!(cpu.woken_retry(), retry_on_cpu);
        let mut h = Harness::new(Chain::new(cpu, Chain::new(block, Disk::new(1_000 * US))));
        for (job, &(bytes, at)) in (0..).zip(reads) {
            let mut r = io(Op::Read, u64::from(job) * MIB, bytes, BE4);
            r.job = job;
            h.submit_at(at, r);
        }
        h.run_all();
        let log = &h.stage.lower.lower.log;
        (0..reads.len() as u64)
            .map(|job| {
                log.iter()
                    .find(|s| s.offset_bytes == job * MIB)
                    .expect("served")
                    .at_ns
            })
            .collect()
    }

    /// 4 KiB reads A (job 0, at 0), B (job 1, at 1 us) and C (job 2, at 1002 us) over one
    /// tag.
    fn one_tag_three_jobs(rules: &str, retry_on_cpu: bool) -> Vec<Ns> {
        let reads = [(4096, 0), (4096, US), (4096, 1_002 * US)];
        tagged(rules, retry_on_cpu, 1, &[], &reads)
    }

    #[test]
    fn a_woken_tag_sleeper_retries_when_its_task_has_the_cpu() {
        // A reaches the disk at 10 us and holds the one tag to 1010 us; B sleeps for it from
        // 20 us. Taking the tag at the instant A frees it, B reaches the disk at 1010 us and
        // C, whose submission ends at 1012 us, sleeps until B's request ends at 2010 us.
        assert_eq!(
            one_tag_three_jobs("", false),
            vec![10 * US, 1_010 * US, 2_010 * US]
        );
        // Retrying on the CPU, B's task queues behind C's submission (1002 to 1012 us) and
        // A's completion (1012 to 1017 us); C asks first and takes the freed tag at 1012 us;
        // B finds none, sleeps again, and is woken when C's request ends at 2012 us: its
        // retry follows C's completion (2012 to 2017 us).
        let rule = "woken_retry = true\n";
        assert_eq!(
            one_tag_three_jobs(rule, true),
            vec![10 * US, 2_017 * US, 1_012 * US]
        );
    }

    #[test]
    fn a_woken_tag_sleeper_runs_after_the_completion_that_freed_its_tag() {
        // Two tags, 4 KiB requests: A (job 0, 8 KiB) is split in two pieces that take both
        // tags and reach the disk at 10 us (done at 1010 and 2010 us); B (job 1) sleeps for a
        // tag from 20 us. The first piece's end frees a tag: B's task, woken then, finds the
        // CPU idle (a piece's completion costs it nothing) and reaches the disk at 1010 us.
        let split = ["block.max_sectors_kb=4"];
        let reads = [(8192, 0), (4096, US)];
        let rule = "woken_retry = true\n";
        assert_eq!(
            tagged(rule, true, 2, &split, &reads),
            vec![10 * US, 1_010 * US]
        );
        // In the kernel each piece is a request that ends with its own interrupt, inside
        // which the tag is freed and B woken: B's task runs when that work ends (1010 to
        // 1015 us).
        let rules = "woken_retry = true\nretry_after_completion = true\n";
        assert_eq!(
            tagged(rules, true, 2, &split, &reads),
            vec![10 * US, 1_015 * US]
        );
        // A whole request's completion already runs before the retry it wakes (the block
        // layer hands the completion up first), and a tag freed while the CPU is busy goes to
        // whoever asks first: with one tag, C (submitted 1002 to 1012 us) takes A's tag at
        // 1012 us either way and B waits for C's.
        let before = one_tag_three_jobs(rule, true);
        assert_eq!(before, vec![10 * US, 2_017 * US, 1_012 * US]);
        assert_eq!(one_tag_three_jobs(rules, true), before);
    }

    #[test]
    fn a_job_asleep_for_a_tag_runs_none_of_its_submissions_until_it_wakes() {
        // Two tags, a device of 1 ms; job 0's A1 and A2 take both (CPU 0 to 20 us, done at
        // 1010 and 1020 us); job 1's B1 (CPU 20 to 30 us) sleeps for a tag, and B1's tag
        // comes when A1 ends at 1010 us. Returns when job 1 sees B2, and the tag waits.
        let b2_seen = |rules: &str| {
            use crate::testbed::{BE4, MIB, io, layer};
            let cpu = one_with(10 * US, 0, 5 * US, rules);
            let mut h = Harness::new(Chain::new(
                cpu,
                Chain::new(layer("none", &[], 2), Null::new(1_000 * US)),
            ));
            let ids: Vec<ReqId> = [(0, 0, 0), (0, 1, 0), (1, 2, US), (1, 3, US)]
                .into_iter()
                .map(|(job, k, at)| {
                    let mut r = io(Op::Read, k * MIB, 4096, BE4);
                    r.job = job;
                    h.submit_at(at, r)
                })
                .collect();
            let done = h.settle();
            let b2 = done.iter().find(|d| d.id == ids[3]);
            let waits = h.stage.lower.upper.counters();
            let waits = waits
                .iter()
                .find(|(k, _)| k == "tag_waits")
                .expect("counted")
                .1;
            (b2.expect("B2 seen").done_ns, waits)
        };
        // B2's submission ran at 30 to 40 us while job 1 slept: B2 reaches the block layer
        // when B1 gets its tag (1010 us), finds none, sleeps, and takes A2's tag at 1020 us;
        // seen at 2025 us.
        assert_eq!(b2_seen(""), (2_025 * US, 2.0));
        // Its submission waits until job 1 wakes: it runs after A1's completion (1015 to
        // 1025 us), finds the tag A2 freed at 1020 us, and is seen at 2030 us.
        assert_eq!(b2_seen("sleep_stops_loop = true\n"), (2_030 * US, 1.0));
    }

    /// When job 1's three reads are seen: job 0 issues five at 0 and job 1 three at 21 us, on
    /// a CPU of 10 us per submission and 5 us per completion, over a device of 1 ms (every
    /// submission is over before the first completion, so a read is seen 1,005 us after its
    /// submission ends).
    fn job1_seen(rules: &str) -> Vec<Ns> {
        let mut h = Harness::new(Chain::new(
            one_with(10 * US, 0, 5 * US, rules),
            Null::new(1_000 * US),
        ));
        for _ in 0..5 {
            h.submit_at(0, read(0));
        }
        let ids: Vec<ReqId> = (0..3).map(|_| h.submit_at(21 * US, read(1))).collect();
        let done = h.settle();
        ids.iter()
            .map(|id| done.iter().find(|d| d.id == *id).expect("seen").done_ns - 1_005 * US)
            .collect()
    }

    #[test]
    fn fair_runs_the_job_of_least_cpu_time_first_and_a_sleeper_joins_within_its_credit() {
        // First come first served, job 1's submissions wait for job 0's five (0 to 50 us).
        assert_eq!(job1_seen(""), vec![60 * US, 70 * US, 80 * US]);
        // Fair: at 30 us job 0 has used 30 us and job 1 (asleep until 21 us, within the 3 ms
        // credit) none, so job 1's three run 30 to 60 us (0, 10, 20 us < 30 us).
        assert_eq!(job1_seen("fair = true\n"), vec![40 * US, 50 * US, 60 * US]);
        // With a credit of 5 us job 1 joins at 21 us at job 0's 20 us less 5: 15 us. It runs
        // 30 to 50 us (25, then 35 us), job 0 (30 us) 50 to 60, job 1 (35 < 40) 60 to 70.
        assert_eq!(
            job1_seen("fair = true\nsleeper_credit_ns = 5000\n"),
            vec![40 * US, 50 * US, 70 * US]
        );
    }

    #[test]
    fn under_fair_a_waking_job_preempts_one_ahead_of_it_by_more_than_the_granularity() {
        // Job 1 wakes at 21 us with no CPU time; job 0 has run 21 us (20 charged, 1 on its
        // third read). With the default granularity of 1 ms it waits (40, 50, 60 us).
        let preempts = "fair = true\nfair_wakeup_preempts = true\n";
        assert_eq!(job1_seen(preempts), vec![40 * US, 50 * US, 60 * US]);
        // With 5 us its first read takes the CPU at 21 us (to 31 us); then its CPU time (10,
        // then 20 us) stays under job 0's 21 us: its next two run 31 to 51 us.
        let fine = format!("{preempts}wakeup_granularity_ns = 5000\n");
        assert_eq!(job1_seen(&fine), vec![31 * US, 41 * US, 51 * US]);
        // Without `fair` the flag does nothing.
        let fcfs = "fair_wakeup_preempts = true\nwakeup_granularity_ns = 5000\n";
        assert_eq!(job1_seen(fcfs), vec![60 * US, 70 * US, 80 * US]);
    }

    /// fio's loop above the CPU: job 0's next read `next` is submitted the moment its
    /// first read is seen (the run loop hands a completion to its job, which submits again,
    /// before anything else the completion woke joins the CPU).
    struct Resubmit {
        next: Option<Request>,
    }

    impl Stage for Resubmit {
        type Event = ();
        fn name(&self) -> &'static str {
            "fio"
        }
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
            assert_eq!(ctx.dispatch(id), Admission::Accepted);
        }
        fn on_event(&mut self, _ev: (), _ctx: &mut impl StageCtx<()>) {}
        fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
            if ctx.reqs()[id].job == 0
                && let Some(mut next) = self.next.take()
            {
                next.t.queued_ns = ctx.now_ns();
                let next = ctx.reqs_mut().alloc(next);
                assert_eq!(ctx.dispatch(next), Admission::Accepted);
            }
            ctx.complete(id);
        }
    }

    /// Under `prio`, over one command of a 1 ms disk and one CPU (10 us per submission, 5 us
    /// per completion, `fair`) with `rules`: job 0 (best effort 1: HIGH) reads H1 at 0 and,
    /// when it sees H1, H2; job 1 (best effort 7: LOW) reads L1 and L2 at 1 us. When the disk
    /// started H1, L1, L2 and H2, and how many queue runs the CPU ran.
    fn woken_read_against_kblockd(rules: &str) -> (Vec<Ns>, f64) {
        use crate::testbed::{Disk, MIB, be, io, layer};
        let read = |job: u32, k: u64, level: u8| {
            let mut r = io(Op::Read, k * MIB, 4096, be(level));
            r.job = job;
            r
        };
        let cpu = one_with(10 * US, 0, 5 * US, &format!("fair = true\n{rules}"));
        let mut block = layer("prio", &["block.nr_requests=8"], 1);
        if cpu.queue_runs_on_cpu() {
            block = block.with_queue_runs_on_cpu();
        }
        let fio = Resubmit {
            next: Some(read(0, 3, 1)),
        };
        let below = Chain::new(cpu, Chain::new(block, Disk::new(1_000 * US)));
        let mut h = Harness::new(Chain::new(fio, below));
        h.submit_at(0, read(0, 0, 1));
        h.submit_at(US, read(1, 1, 7));
        h.submit_at(US, read(1, 2, 7));
        h.run_all();
        let log = &h.stage.lower.lower.lower.log;
        let at = |k: u64| {
            log.iter()
                .find(|s| s.offset_bytes == k * MIB)
                .expect("served")
                .at_ns
        };
        let runs = h.stage.lower.upper.counters();
        let runs = runs
            .iter()
            .find(|(k, _)| k == "queue_runs")
            .map_or(0.0, |c| c.1);
        ((0..4).map(at).collect(), runs)
    }

    #[test]
    fn after_a_completion_the_woken_task_inserts_its_read_before_kblockd_runs_the_queue() {
        // The block layer dispatching at the completion's instant (the worker off): H1 is
        // served 10 to 1010 us and its freed command goes to L1, the only request waiting
        // then; H2 (submitted 1015 to 1025 us) gets the command L1 frees, ahead of L2.
        let (at, runs) = woken_read_against_kblockd("queue_runs_on_cpu = false\n");
        assert_eq!(at, vec![10 * US, 1_010 * US, 3_010 * US, 2_010 * US]);
        assert_eq!(runs, 0.0);
        // Linux: with a scheduler the queues run in kblockd's worker (nice -20; 3 us here).
        // H1's insert (its submission ends at 10 us) wakes it while L1's submission (10 to
        // 20 us) has the CPU; CFS then runs it ahead of L2 (it slept: placed at the least
        // CPU time): H1 reaches the disk at 23 us. H1's completion (1023 to 1028 us) wakes
        // H1's task, then the worker. A sleeper credit of 0 places both at min_vruntime
        // (20.034 us: the worker, raised to L2's 20 us as it woke at 33 us, then charged 34
        // ns for its 3 us turn at its weight), as the guest's CFS places them after sleeps
        // longer than its 3 ms credit; of equals CFS runs the first woken: H2's submission
        // (1028 to 1038 us) inserts H2 before the worker runs the queue (1038 to 1041 us),
        // and prio's HIGH-first dispatch gives H2 the freed command ahead of L1. Each later completion's command waits for the completion's
        // work and then the worker's (8 us): L1 at 2049 us, L2 at 3057 us.
        let on_cpu = "queue_runs_on_cpu = true\nqueue_run_ns = 3000\nqueue_run_per_rq_ns = 0\n";
        let (at, runs) = woken_read_against_kblockd(&format!("{on_cpu}sleeper_credit_ns = 0\n"));
        assert_eq!(at, vec![23 * US, 2_049 * US, 3_057 * US, 1_041 * US]);
        // The worker ran after the inserts of H1 and L2 and after each completion that left
        // a request waiting (H1's, H2's, L1's); L1's and H2's inserts found a run already
        // queued, and L2's completion nothing to run.
        assert_eq!(runs, 5.0);
    }

    #[test]
    fn after_an_interrupt_cfs_runs_the_woken_task_of_least_vruntime_and_of_equals_the_first_woken()
    {
        // The same reads with CFS's 3 ms credit: at H1's completion H1's task keeps its 10 us
        // of vruntime and the worker its 68 ns (min_vruntime, 20 us, less 3 ms is below
        // both). Waking onto a free CPU preempts nothing, so no wake-up granularity applies:
        // CFS picks the least vruntime, the worker (1028 to 1031 us), which gives the freed
        // command to L1, the one request waiting; H2's submission (1031 to 1041 us) then
        // waits for L1's completion (2031 to 2036 us) and the worker's turn: H2 at 2039 us,
        // L2 after it at 3047 us. The worker ran after H1's and L2's inserts (20, 33 us),
        // after H1's completion, after H2's insert (1041 us: the command busy) and after L1's
        // and H2's completions: 6 runs.
        let on_cpu = "queue_runs_on_cpu = true\nqueue_run_ns = 3000\nqueue_run_per_rq_ns = 0\n";
        let (at, runs) = woken_read_against_kblockd(on_cpu);
        assert_eq!(at, vec![23 * US, 1_031 * US, 3_047 * US, 2_039 * US]);
        assert_eq!(runs, 6.0);
        // Of equal vruntimes (a credit of 0 places both at min_vruntime) the first woken,
        // H1's task, runs first (the test above): H2 at 1041 us.
        let equal = format!("{on_cpu}sleeper_credit_ns = 0\n");
        assert_eq!(woken_read_against_kblockd(&equal).0[3], 1_041 * US);
    }

    #[test]
    fn kblockd_woken_by_an_insert_preempts_a_long_submission_as_a_nice_minus_20_task() {
        // Job 0 reads A (4 KiB: 14 us of CPU) and B (128 KiB: 138 us) at 0, over one command of
        // a 1 ms disk under prio; the worker's turn is 5 us. When the disk started A and B.
        let started = |rules: &str| {
            use crate::testbed::{BE4, Disk, MIB, io, layer};
            let sets = format!(
                "queue_runs_on_cpu = true\nqueue_run_ns = 5000\nqueue_run_per_rq_ns = 0\n{rules}"
            );
            let cpu = one_with(10 * US, US, 5 * US, &sets);
            let block = layer("prio", &["block.nr_requests=8"], 1).with_queue_runs_on_cpu();
            let mut h = Harness::new(Chain::new(cpu, Chain::new(block, Disk::new(1_000 * US))));
            h.submit_at(0, io(Op::Read, 0, 4096, BE4));
            h.submit_at(0, io(Op::Read, MIB, 128 * 1024, BE4));
            h.run_all();
            let log = &h.stage.lower.lower.log;
            [0, MIB].map(|k| {
                log.iter()
                    .find(|s| s.offset_bytes == k)
                    .expect("served")
                    .at_ns
            })
        };
        // First come first served, A's insert (at 14 us) wakes the worker behind B's
        // submission (14 to 152 us): A reaches the disk at 157 us, B after A's 1 ms.
        assert_eq!(started(""), [157 * US, 1_167 * US]);
        // CFS: the worker wakes 14 us of job 0's CPU time behind it, more than the 1 ms wake-up
        // granularity at nice -20's weight (11.5 us), and preempts B's submission: A at 19 us;
        // B's insert at 157 us finds the command busy, and B goes when A's completion (1019 to
        // 1024 us) wakes the worker (1024 to 1029 us).
        assert_eq!(started("fair = true\n"), [19 * US, 1_029 * US]);
    }

    #[test]
    fn the_registry_names_none_and_its_models() {
        assert_eq!(names(), vec!["none", "one"]);
        assert!(lookup("none").expect("known").is_none());
        let e = lookup("two").err().expect("refused").to_string();
        assert_eq!(e, "field 'cpu.model': expected one of none, one, got 'two'");
    }

    qoslab_engine::registry_contract_test!(CpuOps, ONE, CPUS, "cpu.model", or_none);
}
