//! The run loop: jobs over one path of stages, driven by one event queue.
//!
//! The path (a [`Chain`](qoslab_engine::Chain) of stages built from the device file) is one
//! [`Stage`]; the loop is generic over it, so every hook call is statically dispatched. Jobs
//! hand their requests to the top of the path as they issue them; a request the path completes
//! comes back through the queue's urgent lane, so it reaches its job at the same simulated time
//! in the order completions were made. Hand-offs inside the path use the urgent lane too; only
//! timed events (a server finishing, an interrupt arriving, a job's next arrival) are counted
//! as events.

use qoslab_engine::time::{MAX_TIME_NS, MAX_TIME_TEXT};
use qoslab_engine::{
    Admission, Command, Control, EventQueue, LostWrite, Notice, Ns, ReqId, Requests, Stage,
    StageCtx, StageReport,
};

use crate::SimError;
use crate::job::{JobResult, JobRun, Pump};
use crate::progress::{RunSlot, RunState};
use crate::series::SeriesWriter;
use qoslab_workload::fio::ExitWhat;

// Speed: three variants, so the loop's match is two compares, not a jump table (an indirect
// jump per event that the CPU's predictor often misses); the loop's own events, rare, share one.
#[derive(Clone, Copy, Debug)]
enum Ev<PE> {
    Path(PE),
    /// The path completed request `id`: its job sees it.
    Done(ReqId),
    Loop(LoopEv),
}

#[derive(Clone, Copy, Debug)]
enum LoopEv {
    /// Wake job `j` (pacing, think time, group start).
    Job(u32),
    /// Job `j`'s submission call returned (it had slept for a tag): it reaps and goes on.
    Resume(u32),
    /// The power fails (`--power-fail-at`).
    PowerFail,
    /// A crash view: the crash image read and recovered, the run going on.
    CrashView,
    /// fio's helper thread, once a second: the steady-state checks.
    Tick,
    /// `--status-interval`: the report so far.
    Status,
}

/// Jobs whose submission call sleeps in the block layer (a request of theirs waits for a
/// tag): as fio, a job whose io_submit sleeps neither submits nor reaps. What completes for
/// it meanwhile waits in its `done` queue, and fio stamps a completion when it reaps it.
#[derive(Debug, Default)]
struct Submitters {
    blocked: Vec<bool>,
}

impl Submitters {
    #[inline]
    fn blocked(&self, job: usize) -> bool {
        self.blocked.get(job).copied().unwrap_or(false)
    }

    fn set(&mut self, job: usize, blocked: bool) {
        if job >= self.blocked.len() {
            self.blocked.resize(job + 1, false);
        }
        self.blocked[job] = blocked;
    }
}

/// The hosts' cores as serial CPUs (`StageCtx::cpu`): when each is next free, and how long
/// it has worked.
#[derive(Debug, Default)]
pub struct HostCpus {
    /// [host][core] = (free at, busy time so far).
    cores: Vec<Vec<(Ns, Ns)>>,
}

impl HostCpus {
    fn book(&mut self, host: u16, core: u16, start_ns: Ns, ns: Ns) -> Ns {
        let (h, c) = (host as usize, core as usize);
        if self.cores.len() <= h {
            self.cores.resize_with(h + 1, Vec::new);
        }
        if self.cores[h].len() <= c {
            self.cores[h].resize(c + 1, (0, 0));
        }
        let slot = &mut self.cores[h][c];
        slot.0 = start_ns.max(slot.0) + ns;
        slot.1 += ns;
        slot.0
    }

    /// The cores that ever worked and their busy time, for the report.
    fn report(&self) -> Option<StageReport> {
        let busy: Vec<Ns> = self.cores.iter().flatten().map(|&(_, b)| b).collect();
        if busy.iter().all(|&b| b == 0) {
            return None;
        }
        let used = busy.iter().filter(|&&b| b > 0).count();
        Some(StageReport {
            name: "host-cpus".into(),
            counters: vec![
                ("cores_used".into(), used as f64),
                ("busy_ns".into(), busy.iter().sum::<Ns>() as f64),
                (
                    "busiest_core_ns".into(),
                    busy.iter().copied().max().unwrap_or(0) as f64,
                ),
            ],
        })
    }
}

/// fio's steady-state checks run every second of the run.
const TICK_NS: Ns = 1_000_000_000;

/// What the top of the path sees above it: the jobs.
struct RootCtx<'a, PE> {
    now: Ns,
    queue: &'a mut EventQueue<Ev<PE>>,
    reqs: &'a mut Requests,
    notices: &'a mut u64,
    submitters: &'a mut Submitters,
    cpus: &'a mut HostCpus,
}

impl<PE: Copy> StageCtx<PE> for RootCtx<'_, PE> {
    #[inline]
    fn now_ns(&self) -> Ns {
        self.now
    }
    #[inline]
    fn reqs(&self) -> &Requests {
        self.reqs
    }
    #[inline]
    fn reqs_mut(&mut self) -> &mut Requests {
        self.reqs
    }
    // Always inlined: an event passed to an out-of-line call goes through memory, and loading
    // it back whole right after the caller stored it field by field stalls the CPU.
    #[inline(always)]
    fn schedule(&mut self, at_ns: Ns, ev: PE) {
        self.queue.schedule(at_ns, Ev::Path(ev));
    }
    #[inline(always)]
    fn schedule_now(&mut self, ev: PE) {
        self.queue.schedule_urgent(Ev::Path(ev));
    }
    fn dispatch(&mut self, id: ReqId) -> Admission {
        panic!("the media is the last stage, yet dispatched {id:?}");
    }
    #[inline]
    fn complete(&mut self, id: ReqId) {
        self.queue.schedule_urgent(Ev::Done(id));
    }
    /// The block layer at the top never refuses a job's request.
    fn room_above(&mut self) {}
    fn notify_above(&mut self, notice: Notice) {
        match notice {
            Notice::SubmitterBlocked { job } => self.submitters.set(job as usize, true),
            Notice::SubmitterResumed { job } => {
                self.submitters.set(job as usize, false);
                self.queue.schedule_urgent(Ev::Loop(LoopEv::Resume(job)));
            }
            _ => *self.notices += 1,
        }
    }
    fn cpu(&mut self, host: u16, core: u16, start_ns: Ns, ns: Ns) -> Ns {
        self.cpus.book(host, core, start_ns, ns)
    }
}

/// Options of the loop itself.
#[derive(Clone, Debug, Default)]
pub struct LoopOptions {
    /// Where to say how far the run is (every 65,536 events, and at its end); the simulator
    /// draws no bar itself.
    pub progress: Option<RunSlot>,
    /// Record the run as it stands every this much simulated time (`--status-interval`).
    pub status_interval_ns: Option<Ns>,
    /// Cut the power at this simulated time.
    pub power_fail_at_ns: Option<Ns>,
    /// At that time only this target server crashes (and restarts), not the power.
    pub crash_target: Option<u16>,
    /// At the cut, recover the ordered streams (the path has target servers): what recovery
    /// costs, and whether the drives have power-loss protection.
    pub recovery: Option<(qoslab_fabric::cut::RecoveryCosts, bool)>,
    /// Crash views, in time order: at each of these simulated times the run reads the crash
    /// image a power cut there would leave, without disturbing itself, recovers it as after
    /// `power_fail_at_ns` (it needs `recovery`) and goes on; it ends at the last one. Many
    /// cuts of one run then cost one run, not one run each.
    pub crash_views_at_ns: Vec<Ns>,
}

/// What a crash view found: the recovery a cut at its moment would give, and the events the
/// run had handled before it (what a run to that cut costs).
#[derive(Clone, Debug, PartialEq)]
pub struct CrashView {
    pub events: u64,
    pub recovery: qoslab_fabric::cut::Recovery,
}

/// What a power failure did to one job's writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDurability {
    pub name: String,
    /// Writes the job had acknowledged when the power failed (see `job::Durability`).
    pub acknowledged: u64,
    /// Lost writes the device had acknowledged (for a job that flushes: that a completed
    /// flush covered): data the application relied on.
    pub lost_acknowledged: u64,
    /// Lost writes that were still in flight, or not yet covered by a flush.
    pub lost_in_flight: u64,
}

/// What `--power-fail-at` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurabilityReport {
    pub power_fail_at_ns: Ns,
    pub jobs: Vec<JobDurability>,
}

/// What a run leaves behind.
pub struct Outcome {
    pub jobs: Vec<JobResult>,
    /// The run as it stood at each `--status-interval` (fio's status dumps), in time order.
    pub status: Vec<Outcome>,
    /// Simulated time of the last event handled.
    pub end_ns: Ns,
    pub events: u64,
    /// Each stage's counters, top to bottom.
    pub stages: Vec<StageReport>,
    /// Most requests ever outstanding at once.
    pub max_outstanding: usize,
    /// The fio logs of the run's jobs: (file name, text) ([`crate::iolog`]).
    pub logs: Vec<(String, String)>,
    pub durability: Option<DurabilityReport>,
    /// What recovery of the ordered streams found after the cut.
    pub recovery: Option<qoslab_fabric::cut::Recovery>,
    /// The crash views taken (`LoopOptions::crash_views_at_ns`), in time order.
    pub crash_views: Vec<CrashView>,
    /// After the cut, the run stopped with nothing scheduled: (when, I/Os outstanding). What
    /// the cut lost may never complete; the run ends there and the cut is still reported.
    pub stalled_after_cut: Option<(Ns, u32)>,
}

impl Outcome {
    /// Counter `name` of the stage called `stage` (0 when absent).
    pub fn counter(&self, stage: &str, name: &str) -> f64 {
        self.stages
            .iter()
            .filter(|s| s.name == stage)
            .flat_map(|s| s.counters.iter())
            .find(|(k, _)| k == name)
            .map_or(0.0, |(_, v)| *v)
    }
}

/// What the run knew when the power failed: the time, each job's (acknowledged writes, flush
/// watermark), and how many lost writes the path had recorded before.
struct PowerFailMark {
    at_ns: Ns,
    /// Each job's acknowledged writes and what its flushes cover.
    jobs: Vec<(u64, crate::job::Synced)>,
    lost_before: usize,
    /// What the stages said of ordered writes just before the power failed.
    order: Option<qoslab_engine::order::OrderState>,
    /// Only this target server crashed.
    target: Option<u16>,
}

struct Sim<'w, P: Stage> {
    queue: EventQueue<Ev<P::Event>>,
    reqs: Requests,
    path: P,
    jobs: Vec<JobRun>,
    group: u32,
    last_group: u32,
    done: bool,
    notices: u64,
    submitters: Submitters,
    at_power_fail: Option<PowerFailMark>,
    series_out: Option<&'w mut SeriesWriter>,
    cpus: HostCpus,
    recovery: Option<(qoslab_fabric::cut::RecoveryCosts, bool)>,
    /// `--crash-target`: at the cut only this target server crashes.
    crash_target: Option<u16>,
    /// The run stopped after the cut with nothing scheduled: (when, I/Os outstanding).
    stalled_after_cut: Option<(Ns, u32)>,
    /// Crash views still to take, and those taken.
    views_left: usize,
    crash_views: Vec<CrashView>,
    /// Some job set `exitall` (fio makes it global): every job's end ends others.
    exitall: bool,
    /// `group_reporting` per job definition (steady state counts a group together).
    group_reporting: Vec<bool>,
    /// `--status-interval`, and the run as it stood at each.
    status_every: Option<Ns>,
    status: Vec<Outcome>,
}

impl<P: Stage> Sim<'_, P> {
    fn now(&self) -> Ns {
        self.queue.now_ns()
    }

    fn pump(&mut self, j: usize, now: Ns) -> Result<(), SimError> {
        let Sim {
            jobs,
            reqs,
            queue,
            path,
            notices,
            submitters,
            cpus,
            ..
        } = self;
        if submitters.blocked(j) {
            return Ok(());
        }
        let job = &mut jobs[j];
        let null_costs = job.host_loop.null_costs;
        let (next, notes) = job.pump(now, |mut req| {
            req.job = j as u32;
            if let Some((submit_ns, complete_ns)) = null_costs {
                // fio's null engine: no device, only the host's own costs.
                let t = &mut req.t;
                t.dispatched_ns = now + submit_ns;
                t.arrived_ns = t.dispatched_ns;
                t.fetched_ns = t.dispatched_ns;
                t.media_start_ns = t.dispatched_ns;
                t.media_done_ns = t.dispatched_ns;
                t.cq_posted_ns = t.dispatched_ns;
                t.interrupt_ns = t.dispatched_ns;
                t.completed_ns = t.dispatched_ns + complete_ns;
                let at = t.completed_ns;
                let id = reqs.alloc(req);
                queue.schedule(at, Ev::Done(id));
                return true;
            }
            let id = reqs.alloc(req);
            let mut ctx = RootCtx {
                now,
                queue,
                reqs,
                notices,
                submitters,
                cpus,
            };
            path.submit(id, &mut ctx);
            !ctx.submitters.blocked(j)
        })?;
        if let Pump::WakeAt(t) = next
            && job.wake_at.is_none_or(|w| t < w)
        {
            job.wake_at = Some(t);
            queue.schedule(t, Ev::Loop(LoopEv::Job(j as u32)));
        }
        if notes.flow_counted > 0 {
            self.wake_flow(j, now);
        }
        if self.jobs[j].finished && !self.jobs[j].end_noted {
            self.job_finished(j, now);
        }
        Ok(())
    }

    /// Wakes the jobs of `j`'s flow that wait for it to move.
    fn wake_flow(&mut self, j: usize, now: Ns) {
        let id = self.jobs[j].flow_id;
        for k in 0..self.jobs.len() {
            let other = &mut self.jobs[k];
            if k != j && other.flow_id == id && other.waits_for_flow() && other.wake_at.is_none() {
                other.wake_at = Some(now);
                self.queue.schedule_urgent(Ev::Loop(LoopEv::Job(k as u32)));
            }
        }
    }

    /// A call of an application's thread `j` returned: its threads that wait for another
    /// (RocksDB's writers for their group's leader) look again.
    fn wake_app_threads(&mut self, j: usize, now: Ns) {
        for k in 0..self.jobs.len() {
            let other = &mut self.jobs[k];
            if k != j && other.waits_for_app() && other.wake_at.is_none() {
                other.wake_at = Some(now);
                self.queue.schedule_urgent(Ev::Loop(LoopEv::Job(k as u32)));
            }
        }
    }

    /// Whether job `j` may start at `now`: the jobs it waits for have finished and its start
    /// delay has passed; otherwise when (None: once a job it waits for finishes).
    fn start_time(&self, j: usize, now: Ns) -> Option<Ns> {
        let job = &self.jobs[j];
        if job.wait_for.iter().any(|&w| !self.jobs[w].finished) {
            return None;
        }
        Some(job.start_delay_ns.max(now))
    }

    fn start_group(&mut self, g: u32, now: Ns) -> Result<(), SimError> {
        self.group = g;
        let members: Vec<usize> = (0..self.jobs.len())
            .filter(|&j| self.jobs[j].group == g)
            .collect();
        // Every job of the group that may start does so before any issues, as before.
        let mut now_starting = Vec::new();
        for &j in &members {
            match self.start_time(j, now) {
                Some(t) if t <= now => {
                    self.jobs[j].start(now);
                    self.jobs[j].join_flow();
                    now_starting.push(j);
                }
                Some(t) => {
                    self.jobs[j].wake_at = Some(t);
                    self.queue.schedule(t, Ev::Loop(LoopEv::Job(j as u32)));
                }
                None => {}
            }
        }
        for j in now_starting {
            self.pump(j, now)?;
        }
        Ok(())
    }

    /// Job `j` has finished: it leaves its flow, `exitall` ends the jobs its `exit_what`
    /// names, the jobs waiting for it may start, and the next group starts when this one is
    /// done.
    fn job_finished(&mut self, j: usize, now: Ns) {
        self.jobs[j].end_noted = true;
        self.jobs[j].leave_flow();
        self.wake_flow(j, now);
        let failed = self.jobs[j].error != 0;
        if self.exitall || (failed && self.jobs[j].exitall_on_error) {
            let (what, group) = (self.jobs[j].exit_what, self.jobs[j].report_group);
            for k in 0..self.jobs.len() {
                let other = &self.jobs[k];
                let hit = match what {
                    ExitWhat::Group => other.report_group == group,
                    ExitWhat::Stonewall => other.started,
                    ExitWhat::All => true,
                };
                if hit && !other.finished && !other.terminated {
                    let waiting_to_start = !other.started && other.wake_at.is_some();
                    let other = &mut self.jobs[k];
                    other.terminate();
                    other.start_delay_ns = 0;
                    if (other.started && other.wake_at.is_none()) || waiting_to_start {
                        // It ends now (one that was to start later starts and ends now).
                        other.wake_at = Some(now);
                        self.queue.schedule_urgent(Ev::Loop(LoopEv::Job(k as u32)));
                    }
                }
            }
        }
        // Jobs of the running group that waited for this one.
        let g = self.group;
        for k in 0..self.jobs.len() {
            let other = &self.jobs[k];
            if other.group == g
                && !other.started
                && other.wake_at.is_none()
                && other.wait_for.contains(&j)
                && let Some(t) = self.start_time(k, now)
            {
                self.jobs[k].wake_at = Some(t);
                self.queue.schedule(t, Ev::Loop(LoopEv::Job(k as u32)));
            }
        }
        if self
            .jobs
            .iter()
            .filter(|j| j.group == g)
            .all(|j| j.finished)
        {
            if g == self.last_group {
                self.done = true;
            } else {
                // Started from the loop, so the next group sees a consistent state.
                self.group = g + 1;
                for k in 0..self.jobs.len() {
                    if self.jobs[k].group == g + 1
                        && let Some(t) = self.start_time(k, now)
                    {
                        self.jobs[k].wake_at = Some(t);
                        self.queue.schedule(t, Ev::Loop(LoopEv::Job(k as u32)));
                    }
                }
            }
        }
    }

    /// fio's helper thread: each running job's (or reporting group's) steady-state sample;
    /// those that reached their steady state end.
    fn tick(&mut self, now: Ns) {
        let n = self.jobs.len();
        let mut pending = false;
        for j in 0..n {
            let job = &self.jobs[j];
            if job.steadystate.is_none() || job.finished {
                continue;
            }
            pending = true;
            if !job.started {
                continue;
            }
            // With group_reporting the group's first job holds the check of the group.
            let members: Vec<usize> = if self.group_reporting[job.def] {
                let g = job.report_group;
                (0..n)
                    .filter(|&k| {
                        self.jobs[k].report_group == g && self.jobs[k].steadystate.is_some()
                    })
                    .collect()
            } else {
                vec![j]
            };
            if members[0] != j {
                continue;
            }
            let (ios, bytes) = members
                .iter()
                .filter(|&&k| self.jobs[k].started)
                .fold((0, 0), |(i, b), &k| {
                    (i + self.jobs[k].reaped_ios, b + self.jobs[k].reaped_bytes)
                });
            let since = now - self.jobs[j].start_ns;
            let ss = self.jobs[j].steadystate.as_mut().expect("checked");
            if ss.sample(now, since, ios, bytes) {
                for &k in &members {
                    if let Some(s) = self.jobs[k].steadystate.as_mut() {
                        s.report.attained = true;
                    }
                    let job = &mut self.jobs[k];
                    job.terminate();
                    if job.started && job.wake_at.is_none() {
                        job.wake_at = Some(now);
                        self.queue.schedule_urgent(Ev::Loop(LoopEv::Job(k as u32)));
                    }
                }
            }
        }
        if pending {
            self.queue.schedule(now + TICK_NS, Ev::Loop(LoopEv::Tick));
        }
    }

    fn write_series(&mut self, j: usize) -> Result<(), SimError> {
        let Some(out) = self.series_out.as_mut() else {
            return Ok(());
        };
        let job = &mut self.jobs[j];
        let Some(series) = job.series.as_mut() else {
            return Ok(());
        };
        for row in series.drain() {
            out.write_row(format_args!(
                "{},{},{},{},{},{},{},{:.3},{:.1},{:.1},{},{},{},{},{},{}",
                row.start_ns / 1_000_000,
                row.interval_ns as f64 / 1e6,
                job.name,
                j,
                row.op.fio_name(),
                row.ios,
                row.bytes,
                row.iops(),
                row.bytes_per_s(),
                row.lat_mean_ns,
                row.lat_p99_ns,
                row.lat_p9999_ns,
                row.lat_max_ns,
                row.dispatch_lat_p99_ns,
                row.dispatch_lat_p9999_ns,
                row.dispatch_lat_max_ns
            ))?;
        }
        Ok(())
    }

    #[inline(always)]
    fn handle(&mut self, ev: Ev<P::Event>, now: Ns) -> Result<(), SimError> {
        match ev {
            Ev::Path(e) => {
                let mut ctx = RootCtx {
                    now,
                    queue: &mut self.queue,
                    reqs: &mut self.reqs,
                    notices: &mut self.notices,
                    submitters: &mut self.submitters,
                    cpus: &mut self.cpus,
                };
                self.path.on_event(e, &mut ctx);
            }
            Ev::Done(id) => {
                let j = self.reqs[id].job as usize;
                self.jobs[j].complete(&self.reqs[id]);
                self.reqs.free(id);
                if self.series_out.is_some() {
                    self.write_series(j)?;
                }
                self.pump(j, now)?;
                if self.jobs[j].is_app() {
                    self.wake_app_threads(j, now);
                }
            }
            Ev::Loop(LoopEv::PowerFail) => self.power_fail(now, self.crash_target),
            // Taken by the loop itself (`crash_view`).
            Ev::Loop(LoopEv::CrashView) => {}
            Ev::Loop(LoopEv::Resume(j)) => self.resume(j as usize, now)?,
            Ev::Loop(LoopEv::Tick) => self.tick(now),
            // Taken by the loop itself, which counts the events (`status_dump`).
            Ev::Loop(LoopEv::Status) => {}
            Ev::Loop(LoopEv::Job(j)) => {
                let job = &mut self.jobs[j as usize];
                if job.wake_at == Some(now) {
                    job.wake_at = None;
                    if !job.started {
                        if self.start_time(j as usize, now).is_none() {
                            return Ok(());
                        }
                        let job = &mut self.jobs[j as usize];
                        job.start(now);
                        job.join_flow();
                    }
                    self.pump(j as usize, now)?;
                }
            }
        }
        Ok(())
    }

    /// Job `j`'s submission call returned: as fio does, it goes on with the rest of the call,
    /// then with its loop, which reaps what completed while it slept (one completion per
    /// call by default, `iodepth_batch_complete_max`), each stamped when it is reaped.
    fn resume(&mut self, j: usize, now: Ns) -> Result<(), SimError> {
        self.pump(j, now)
    }

    /// Cuts the power: the stage that holds volatile data loses it (a `PowerLoss` command
    /// down the path), after each job's view of what it has acknowledged is noted. With a
    /// crashed target, only that target's stages lose it (`TargetCrash`, which the fan-out
    /// turns into a power loss of that target).
    fn power_fail(&mut self, now: Ns, target: Option<u16>) {
        let marks = self
            .jobs
            .iter()
            .map(|j| (j.durability.acknowledged, j.durability.synced.clone()))
            .collect();
        let mut before = Vec::new();
        self.path.collect_lost_writes(&mut before);
        let order = self.recovery.as_ref().map(|_| {
            let mut st = qoslab_engine::order::OrderState {
                at_ns: now,
                ..Default::default()
            };
            self.path.collect_order_state(&self.reqs, &mut st);
            st
        });
        self.at_power_fail = Some(PowerFailMark {
            at_ns: now,
            jobs: marks,
            lost_before: before.len(),
            order,
            target,
        });
        let mut ctx = RootCtx {
            now,
            queue: &mut self.queue,
            reqs: &mut self.reqs,
            notices: &mut self.notices,
            submitters: &mut self.submitters,
            cpus: &mut self.cpus,
        };
        let command = target.map_or(Command::PowerLoss, |target| Command::TargetCrash { target });
        let mut msg = Control::new(now, 0, command);
        self.path.control(&mut msg, &mut ctx);
    }

    /// The ordered streams recovered from what the stages said at the cut and what the
    /// drives lost.
    fn recovered(&self) -> Option<qoslab_fabric::cut::Recovery> {
        let mark = self.at_power_fail.as_ref()?;
        let (costs, plp) = self.recovery.as_ref()?;
        let state = mark.order.as_ref()?;
        let mut lost: Vec<LostWrite> = Vec::new();
        self.path.collect_lost_writes(&mut lost);
        let lost = &lost[mark.lost_before..];
        Some(match mark.target {
            Some(t) => qoslab_fabric::cut::recover_target(state, lost, *plp, t),
            None => qoslab_fabric::cut::recover(state, lost, *plp, costs),
        })
    }

    /// A crash view at `now`: what `power_fail` notes and what its `PowerLoss` takes, read
    /// from the stages without changing them, recovered as `recovered` does after a cut.
    #[cold]
    fn crash_view(&mut self, now: Ns, events: u64) -> Result<(), SimError> {
        let Some((costs, plp)) = self.recovery.as_ref() else {
            return Err(SimError::new(
                "crash views: the path has no target servers to recover ([fabric] targets = 0)",
            ));
        };
        let mut state = qoslab_engine::order::OrderState {
            at_ns: now,
            ..Default::default()
        };
        self.path.collect_order_state(&self.reqs, &mut state);
        let mut lost = Vec::new();
        if !self.path.collect_writes_at_risk(&self.reqs, &mut lost) {
            return Err(SimError::new(
                "crash views: a stage of the path cannot say what a power cut would take without cutting (only the cached media model can); use --power-fail-at",
            ));
        }
        let recovery = qoslab_fabric::cut::recover(&state, &lost, *plp, costs);
        self.crash_views.push(CrashView { events, recovery });
        self.views_left -= 1;
        Ok(())
    }

    /// Each job's acknowledged writes at the power failure, against what it took.
    fn durability(&self) -> Option<DurabilityReport> {
        let mark = self.at_power_fail.as_ref()?;
        let marks = &mark.jobs;
        let mut lost: Vec<LostWrite> = Vec::new();
        self.path.collect_lost_writes(&mut lost);
        let mut jobs: Vec<JobDurability> = self
            .jobs
            .iter()
            .zip(marks)
            .map(|(j, &(acknowledged, _))| JobDurability {
                name: j.name.clone(),
                acknowledged,
                lost_acknowledged: 0,
                lost_in_flight: 0,
            })
            .collect();
        for l in &lost[mark.lost_before..] {
            let j = l.job as usize;
            let relied_on = if self.jobs[j].durability.flushes() {
                marks[j].1.covers(l.queued_ns, l.offset_bytes)
            } else {
                l.acknowledged
            };
            if relied_on {
                jobs[j].lost_acknowledged += 1;
            } else {
                jobs[j].lost_in_flight += 1;
            }
        }
        Some(DurabilityReport {
            power_fail_at_ns: mark.at_ns,
            jobs,
        })
    }

    /// Handles events until every group is done; returns how many timed events it took.
    // One function for the whole loop, with every hook of the path inlined into it: an event
    // (three timed and one urgent per I/O on the NVMe path) then costs a turn of the loop, not
    // a call of a large function with its prologue and epilogue.
    #[inline(never)]
    fn run(&mut self, progress: Option<&RunSlot>) -> Result<u64, SimError> {
        let mut events: u64 = 0;
        let mut now = self.now();
        loop {
            while let Some(ev) = self.queue.pop_urgent() {
                self.handle(ev, now)?;
            }
            if self.done {
                break;
            }
            if let Some(slot) = progress
                && events & 0xffff == 0
            {
                slot.set(run_state(&self.jobs, now, false));
            }
            let Some((at, ev)) = self.queue.pop() else {
                if self.at_power_fail.is_some() {
                    let stuck = self.jobs.iter().map(|j| j.inflight).sum();
                    self.stalled_after_cut = Some((now, stuck));
                    break;
                }
                return Err(self.stalled());
            };
            if at > MAX_TIME_NS {
                return Err(past_the_clock(at));
            }
            if let Ev::Loop(LoopEv::Status) = ev {
                // Not an event of the run: its report (and `now`, the time a run that stalls
                // after a cut stops at) stays as without the dumps.
                self.status_dump(at, events);
                continue;
            }
            if let Ev::Loop(LoopEv::CrashView) = ev {
                // Not an event of the run either: the run is the same with or without it.
                now = at;
                self.crash_view(at, events)?;
                if self.views_left == 0 {
                    break;
                }
                continue;
            }
            now = at;
            events += 1;
            self.handle(ev, now)?;
        }
        if let Some(slot) = progress {
            slot.set(run_state(&self.jobs, now, true));
        }
        Ok(events)
    }

    /// fio's `--status-interval` dump: the run's report so far, every interval of simulated
    /// time (fio's is wall-clock time), until the run ends.
    #[cold]
    fn status_dump(&mut self, now: Ns, events: u64) {
        let mut stages = Vec::new();
        self.path.reports(&mut stages);
        stages.extend(self.cpus.report());
        self.status.push(Outcome {
            jobs: self.jobs.iter().map(JobRun::snapshot).collect(),
            status: Vec::new(),
            end_ns: now,
            events,
            stages,
            max_outstanding: self.reqs.high_water(),
            durability: None,
            recovery: None,
            crash_views: Vec::new(),
            stalled_after_cut: None,
            logs: Vec::new(),
        });
        // With nothing else scheduled the run has stalled (which the loop then says).
        if let Some(every) = self.status_every
            && !self.queue.is_empty()
        {
            self.queue.schedule(now + every, Ev::Loop(LoopEv::Status));
        }
    }

    #[cold]
    fn stalled(&self) -> SimError {
        let stuck: u32 = self.jobs.iter().map(|j| j.inflight).sum();
        // A target whose PMR log is full waits for a FLUSH to free it; without PLP nothing
        // else does (crates/fabric/src/target.rs), so name that cause.
        let mut stages = Vec::new();
        self.path.reports(&mut stages);
        let log_full = stages.iter().any(|r| {
            r.counters
                .iter()
                .any(|(k, v)| k == "log_full_waits" && *v > 0.0)
        });
        let why = if log_full {
            "a target's PMR log is full and no FLUSH frees it: without power-loss protection an ordering attribute is recycled only once an acknowledged FLUSH covers it; Rio adds one to a stream's write when a log is three quarters full, but a stream that stopped writing without a FLUSH holds the log's head (give the ordered jobs end_fsync=1, or larger [fabric] pmr_bytes)"
        } else {
            "a device or policy that never completes?"
        };
        SimError::new(format!(
            "the simulation stalled at {} ns with {stuck} I/Os outstanding and nothing scheduled ({why})",
            self.now()
        ))
    }
}

/// A run whose clock passes [`MAX_TIME_NS`]: its times add up past what the clock holds (a
/// few of them near the limit each), and going on would wrap it.
#[cold]
fn past_the_clock(at: Ns) -> SimError {
    SimError::new(format!(
        "simulated time reached {at} ns, past the clock's {MAX_TIME_TEXT}: the times of the job or device add up to more than the simulator can hold"
    ))
}

/// Runs `jobs` on `path` until every group is done.
pub fn simulate<P: Stage>(
    path: P,
    jobs: Vec<JobRun>,
    opts: LoopOptions,
    series_out: Option<&mut SeriesWriter>,
) -> Result<Outcome, SimError> {
    let last_group = jobs.iter().map(|j| j.group).max().unwrap_or(0);
    let exitall = jobs.iter().any(|j| j.exitall);
    let defs = jobs.iter().map(|j| j.def + 1).max().unwrap_or(0);
    let mut group_reporting = vec![false; defs];
    for j in &jobs {
        group_reporting[j.def] |= j.group_reporting;
    }
    let steady = jobs.iter().any(|j| j.steadystate.is_some());
    let mut sim = Sim {
        exitall,
        group_reporting,
        queue: EventQueue::new(),
        reqs: Requests::with_capacity(1024),
        path,
        jobs,
        group: 0,
        last_group,
        done: false,
        notices: 0,
        submitters: Submitters::default(),
        at_power_fail: None,
        series_out,
        cpus: HostCpus::default(),
        recovery: opts.recovery.clone(),
        crash_target: opts.crash_target,
        stalled_after_cut: None,
        views_left: opts.crash_views_at_ns.len(),
        crash_views: Vec::new(),
        status_every: opts.status_interval_ns.filter(|&t| t > 0),
        status: Vec::new(),
    };
    if let Some(t) = opts.power_fail_at_ns {
        sim.queue.schedule(t, Ev::Loop(LoopEv::PowerFail));
    }
    // Where a cut's PowerFail would be, before anything else is scheduled: a view at T sees
    // the path as a cut at T does, before any other event at T.
    for &t in &opts.crash_views_at_ns {
        sim.queue.schedule(t, Ev::Loop(LoopEv::CrashView));
    }
    if steady {
        sim.queue.schedule(TICK_NS, Ev::Loop(LoopEv::Tick));
    }
    if let Some(every) = sim.status_every {
        sim.queue.schedule(every, Ev::Loop(LoopEv::Status));
    }
    {
        let mut ctx = RootCtx {
            now: 0,
            queue: &mut sim.queue,
            reqs: &mut sim.reqs,
            notices: &mut sim.notices,
            submitters: &mut sim.submitters,
            cpus: &mut sim.cpus,
        };
        sim.path.start(&mut ctx);
    }
    if sim.jobs.is_empty() {
        sim.done = true;
    } else {
        sim.start_group(0, 0)?;
    }
    let events = sim.run(opts.progress.as_ref())?;
    for j in 0..sim.jobs.len() {
        sim.jobs[j].finish_stats();
        sim.write_series(j)?;
    }
    let end_ns = sim.now();
    let mut stages = Vec::new();
    sim.path.reports(&mut stages);
    stages.extend(sim.cpus.report());
    let durability = sim.durability();
    let recovery = sim.recovered();
    let logs = sim
        .jobs
        .iter_mut()
        .filter_map(|j| j.logs.take())
        .flat_map(|l| l.into_files())
        .collect();
    Ok(Outcome {
        logs,
        status: std::mem::take(&mut sim.status),
        durability,
        recovery,
        crash_views: std::mem::take(&mut sim.crash_views),
        stalled_after_cut: sim.stalled_after_cut,
        stages,
        max_outstanding: sim.reqs.high_water(),
        jobs: sim.jobs.into_iter().map(JobRun::into_result).collect(),
        end_ns,
        events,
    })
}

/// How far the whole run is, from 0 to 1; `None` when some job has no bound known in advance
/// (a trace): a display then shows how long it has run, not how far.
///
/// Stonewall groups run one after the other and a group ends with its slowest clone, so a
/// group's progress is that of its least advanced clone ([`JobRun::progress`]: the furthest
/// it has gone towards any limit that ends it). The run's progress is the groups' progress
/// weighted by their length in simulated time when every clone has a `runtime` (a group then
/// lasts its longest one), and weighted equally otherwise, since an amount of I/O says nothing
/// of how long a group takes before it has run.
fn run_progress(jobs: &[JobRun], now: Ns) -> Option<f64> {
    let groups = jobs.iter().map(|j| j.group).max()? as usize + 1;
    let mut least = vec![1.0f64; groups];
    let mut span_ns: Vec<Option<Ns>> = vec![Some(0); groups];
    for job in jobs {
        let g = job.group as usize;
        least[g] = least[g].min(job.progress(now)?);
        span_ns[g] = span_ns[g].zip(job.time_limit_ns()).map(|(a, b)| a.max(b));
    }
    let weights: Vec<f64> = if span_ns.iter().all(|s| s.is_some_and(|ns| ns > 0)) {
        span_ns.iter().flatten().map(|&ns| ns as f64).collect()
    } else {
        vec![1.0; groups]
    };
    let total: f64 = weights.iter().sum();
    Some(least.iter().zip(&weights).map(|(f, w)| f * w).sum::<f64>() / total)
}

/// Where the run is, for [`RunSlot::set`]: a run that has ended is whole.
fn run_state(jobs: &[JobRun], now: Ns, done: bool) -> RunState {
    RunState {
        fraction: if done {
            Some(1.0)
        } else {
            run_progress(jobs, now)
        },
        now_ns: now,
        ios: jobs.iter().map(|j| j.issued).sum(),
        done,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{DeviceConfig, OutputFormat, SimOptions, WorkloadSpec};

    const MS: Ns = 1_000_000;

    fn jobs_of(spec: WorkloadSpec) -> Vec<JobRun> {
        let opts = SimOptions {
            workload: spec,
            device: DeviceConfig::from_text("", "test.toml", &[]).unwrap(),
            seed: 1,
            repeat: 1,
            format: OutputFormat::Json,
            series: None,
            progress: None,
            power_fail_at_ns: None,
            crash_target: None,
            status_interval_ns: None,
        };
        crate::build_jobs(&opts, 1, 1 << 30)
            .unwrap_or_else(|e| panic!("{e}"))
            .0
    }

    fn job_file(text: &str) -> Vec<JobRun> {
        let file = qoslab_workload::fio::parse_job_str(text, Path::new("t.fio"), |_| None)
            .unwrap_or_else(|e| panic!("{e}"));
        jobs_of(WorkloadSpec::Jobs(file))
    }

    /// Lets `job` issue and complete I/Os at `now` until it has issued `ios` or is done.
    fn run_ios(job: &mut JobRun, now: Ns, ios: u64) {
        while job.issued < ios && !job.finished {
            let mut issued = Vec::new();
            job.pump(now, |r| {
                issued.push(r);
                true
            })
            .unwrap();
            assert!(
                !issued.is_empty() || job.finished,
                "the job issued nothing at {now} ns"
            );
            for mut req in issued {
                // The chain stamps a request's dispatch before it completes; statistics
                // subtract the stamps in that order (slat = dispatched - queued).
                req.t.dispatched_ns = now;
                req.t.completed_ns = now;
                job.complete(&req);
            }
        }
    }

    #[test]
    fn amounts_of_io_count_groups_equally_and_a_group_waits_for_its_slowest_clone() {
        // 1 MiB at 4 KiB: 256 I/Os; `capped` stops at 64 I/Os, before its 1 MiB.
        let mut jobs = job_file(
            "[global]\nioengine=libaio\ndirect=1\nbs=4k\nsize=1m\niodepth=8\n\
             [sized]\nrw=randread\n\
             [capped]\nrw=randwrite\nnumber_ios=64\n\
             [next]\nstonewall\nrw=read\nnumber_ios=128\n",
        );
        assert_eq!(run_progress(&jobs, 0), Some(0.0));
        for j in &mut jobs[..2] {
            j.start(0);
        }
        run_ios(&mut jobs[0], 0, 32);
        run_ios(&mut jobs[1], 0, 32);
        assert_eq!(jobs[0].progress(0), Some(32.0 / 256.0));
        // number_ios is the nearer limit: 32 of 64, not 32 x 4 KiB of 1 MiB.
        assert_eq!(jobs[1].progress(0), Some(0.5));
        // Two groups, no runtime anywhere: each counts half; the first is at its slowest.
        assert_eq!(run_progress(&jobs, 0), Some(0.5 * 32.0 / 256.0));
        run_ios(&mut jobs[1], 0, 1000);
        assert!(jobs[1].finished);
        assert_eq!(jobs[1].issued, 64);
        assert_eq!(run_progress(&jobs, 0), Some(0.5 * 32.0 / 256.0));
        run_ios(&mut jobs[0], 0, 1000);
        assert_eq!(jobs[0].issued, 256);
        assert_eq!(run_progress(&jobs, 0), Some(0.5));
        jobs[2].start(0);
        run_ios(&mut jobs[2], 0, 32);
        assert_eq!(run_progress(&jobs, 0), Some(0.5 + 0.5 * 0.25));
        run_ios(&mut jobs[2], 0, 1000);
        assert_eq!(run_progress(&jobs, 0), Some(1.0));
    }

    #[test]
    fn runtimes_weight_groups_by_their_simulated_length() {
        // Group 0 lasts ramp 100 ms + runtime 200 ms; group 1 its longest runtime, 600 ms.
        // `short` is not time-based: a time-based job ignores number_ios, as fio does.
        let mut jobs = job_file(
            "[global]\nioengine=libaio\ndirect=1\nbs=4k\nsize=1g\ntime_based=1\n\
             [warm]\nrw=randwrite\nramp_time=100ms\nruntime=200ms\n\
             [long]\nstonewall\nrw=randread\nruntime=600ms\n\
             [short]\nrw=read\ntime_based=0\nruntime=400ms\nnumber_ios=10\n",
        );
        assert_eq!(jobs[0].time_limit_ns(), Some(300 * MS));
        jobs[0].start(0);
        assert_eq!(run_progress(&jobs, 150 * MS), Some(300.0 * 0.5 / 900.0));
        run_ios(&mut jobs[0], 300 * MS, 1);
        assert!(jobs[0].finished, "the time limit ends the job");
        assert_eq!(run_progress(&jobs, 300 * MS), Some(300.0 / 900.0));
        for j in &mut jobs[1..] {
            j.start(300 * MS);
        }
        // 150 ms into group 1: `long` is at 1/4, `short` at max(150/400, 0 of 10 I/Os).
        assert_eq!(jobs[2].progress(450 * MS), Some(150.0 / 400.0));
        assert_eq!(
            run_progress(&jobs, 450 * MS),
            Some((300.0 + 600.0 * 0.25) / 900.0)
        );
        // `short` reaches 5 of its 10 I/Os first: half way although only 1/4 of its runtime.
        run_ios(&mut jobs[2], 400 * MS, 5);
        assert_eq!(jobs[2].progress(400 * MS), Some(0.5));
        assert_eq!(jobs[1].progress(400 * MS), Some(100.0 / 600.0));
    }

    #[test]
    fn a_trace_has_no_fraction() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.csv");
        std::fs::write(&trace, "128166372000000000,wdev,0,Read,4096,8192,100\n").unwrap();
        let jobs = jobs_of(WorkloadSpec::Trace {
            paths: vec![trace],
            format: None,
            speed: 1.0,
            qd_cap: 0,
        });
        assert_eq!(run_progress(&jobs, 0), None);
    }
}
