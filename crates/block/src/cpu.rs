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
//! stage ([`CpuStage`]) books each submission and each completion on the model's CPU, first
//! come first served, and passes the request on when its work ends.

use std::collections::VecDeque;

use qoslab_engine::{
    Admission, ConfigError, Ns, ReqId, Request, STAGE_API_VERSION, Settings, Stage, StageCtx,
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
}

/// Builds a CPU model from its `[cpu.NAME]` table.
pub type BuildCpu = fn(&Settings) -> Box<dyn CpuModel>;

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

qoslab_engine::settings! {
    /// `[cpu.one]`: one CPU for every job. Defaults: Debian's 6.1 kernel in the project's
    /// guest (QEMU TCG, one vCPU, `-icount shift=0`), fio 3.33 with libaio, measured with
    /// `qoslab vm fio --trace` and `qoslab vm trace` (docs/vm.md).
    pub struct OneCpuConfig in ONE_TUNABLES {
        submit_ns: Ns = ns(11_000, "CPU time of one I/O's turn of the job's loop: its submission call and the reaping of the completion before it, whatever its size (guest: a fio process's 4 KiB bios follow each other every 12-14 us, less 4 x per_kib_ns)"),
        per_kib_ns: Ns = ns(380, "CPU time of that turn per KiB of the I/O (pinning the pages, a driver that copies the data as scsi_debug does) (guest: 128 KiB bios every 60 us, 4 KiB every 12.5 us: (60 - 12.5) us / 124 KiB)"),
        complete_ns: Ns = ns(5_000, "CPU time of one completion, the interrupt and the block layer's completion before the job can see it (guest: completions due at once follow each other every 5 us)"),
    }
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
}

pub static ONE: CpuOps = CpuOps {
    name: "one",
    help: "one CPU shared by every job's submission calls and every completion, each costing its time, first come first served (a guest with one vCPU)",
    api_version: STAGE_API_VERSION,
    tunables: ONE_TUNABLES,
    build: Some(|s| {
        Box::new(OneCpu {
            cfg: OneCpuConfig::from_settings(s),
        })
    }),
};

/// The CPU stage's events: a request's CPU work is done.
#[derive(Clone, Copy, Debug)]
pub enum CpuEvent {
    /// Its submission reached the block layer.
    Submitted(ReqId),
    /// Its completion reached the job.
    Completed(ReqId),
}

/// The stage: every submission and completion booked on the CPU in the order they come.
pub struct CpuStage {
    model: Box<dyn CpuModel>,
    /// When the CPU is next free.
    free_at: Ns,
    busy_ns: Ns,
    /// Time requests waited for the CPU, in all.
    waited_ns: Ns,
    submits: u64,
    completes: u64,
    /// Requests the stage below refused, in order (offered again on `pull`).
    held: VecDeque<ReqId>,
}

impl CpuStage {
    pub fn new(model: Box<dyn CpuModel>) -> Self {
        CpuStage {
            model,
            free_at: 0,
            busy_ns: 0,
            waited_ns: 0,
            submits: 0,
            completes: 0,
            held: VecDeque::new(),
        }
    }

    /// Runs `ns` of work on the CPU from `now` or when it is next free; when it ends.
    fn book(&mut self, now: Ns, ns: Ns) -> Ns {
        let start = now.max(self.free_at);
        self.waited_ns += start - now;
        self.busy_ns += ns;
        self.free_at = start + ns;
        self.free_at
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
        let ns = self.model.submit_ns(&ctx.reqs()[id]);
        let at = self.book(ctx.now_ns(), ns);
        self.submits += 1;
        ctx.schedule(at, CpuEvent::Submitted(id));
    }

    fn on_event(&mut self, ev: CpuEvent, ctx: &mut impl StageCtx<CpuEvent>) {
        match ev {
            CpuEvent::Submitted(id) => self.offer(id, ctx),
            CpuEvent::Completed(id) => ctx.complete(id),
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<CpuEvent>) {
        let ns = self.model.complete_ns(&ctx.reqs()[id]);
        let at = self.book(ctx.now_ns(), ns);
        self.completes += 1;
        ctx.schedule(at, CpuEvent::Completed(id));
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
        vec![
            ("busy_ns".into(), self.busy_ns as f64),
            ("waited_ns".into(), self.waited_ns as f64),
            ("submissions".into(), self.submits as f64),
            ("completions".into(), self.completes as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use qoslab_engine::{Chain, Harness, Null, Op};

    use super::*;

    const US: Ns = 1_000;

    fn one(submit_ns: Ns, per_kib_ns: Ns, complete_ns: Ns) -> CpuStage {
        let text = format!(
            "[cpu.one]\nsubmit_ns = {submit_ns}\nper_kib_ns = {per_kib_ns}\ncomplete_ns = {complete_ns}\n"
        );
        let mut doc =
            qoslab_engine::ConfigDoc::parse(std::path::Path::new("t.toml"), &text).expect("parses");
        let s = doc.section("cpu.one", ONE_TUNABLES).expect("a table");
        CpuStage::new(ONE.build.expect("registered")(&s))
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

    #[test]
    fn the_registry_names_none_and_its_models() {
        assert_eq!(names(), vec!["none", "one"]);
        assert!(lookup("none").expect("known").is_none());
        let e = lookup("two").err().expect("refused").to_string();
        assert_eq!(e, "field 'cpu.model': expected one of none, one, got 'two'");
    }

    qoslab_engine::registry_contract_test!(CpuOps, ONE, CPUS, "cpu.model", or_none);
}
