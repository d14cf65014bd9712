//! The run loop: jobs, the NVMe stage and a device wired into one path, driven by one event
//! queue.
//!
//! Hand-offs between stages (a job submits, NVMe dispatches to the media, the media completes,
//! NVMe completes to the job) happen at the current time without going through the event heap:
//! they wait in a FIFO that is drained before the next event, so their order is the order in
//! which stages made them. Only timed events (a server finishing, an interrupt arriving, a
//! job's next arrival) use the heap.
//!
//! The loop is generic over the device type, so every hook call is statically dispatched.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io::Write;
use std::time::{Duration, Instant};

use qoslab_engine::{EventQueue, Ns, ReqId, Requests, Stage, StageCtx};
use qoslab_media::Device;
use qoslab_nvme::{Nvme, NvmeEvent};

use crate::SimError;
use crate::job::{JobResult, JobRun, Pump};

#[derive(Clone, Copy, Debug)]
enum Ev<DE> {
    /// Wake job `j` (pacing, think time, group start).
    Job(u32),
    Nvme(NvmeEvent),
    Dev(DE),
}

#[derive(Clone, Copy, Debug)]
enum Handoff {
    NvmeSubmit(ReqId),
    DevSubmit(ReqId),
    NvmeComplete(ReqId),
    JobComplete(ReqId),
}

struct DevCtx<'a, DE> {
    now: Ns,
    queue: &'a mut EventQueue<Ev<DE>>,
    reqs: &'a mut Requests,
    handoffs: &'a mut VecDeque<Handoff>,
}

impl<DE: Copy + Debug> StageCtx<DE> for DevCtx<'_, DE> {
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
    fn schedule(&mut self, at_ns: Ns, ev: DE) {
        self.queue.schedule(at_ns, Ev::Dev(ev));
    }
    fn dispatch(&mut self, id: ReqId) {
        panic!("the device is the last stage, yet dispatched {id:?}");
    }
    #[inline]
    fn complete(&mut self, id: ReqId) {
        self.handoffs.push_back(Handoff::NvmeComplete(id));
    }
}

struct NvmeCtx<'a, D: Device> {
    now: Ns,
    queue: &'a mut EventQueue<Ev<D::Event>>,
    reqs: &'a mut Requests,
    handoffs: &'a mut VecDeque<Handoff>,
    dev: &'a mut D,
}

impl<D: Device> StageCtx<NvmeEvent> for NvmeCtx<'_, D> {
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
    #[inline(always)]
    fn schedule(&mut self, at_ns: Ns, ev: NvmeEvent) {
        self.queue.schedule(at_ns, Ev::Nvme(ev));
    }
    #[inline]
    fn dispatch(&mut self, id: ReqId) {
        self.handoffs.push_back(Handoff::DevSubmit(id));
    }
    #[inline]
    fn complete(&mut self, id: ReqId) {
        self.handoffs.push_back(Handoff::JobComplete(id));
    }
    fn abort_below(&mut self, id: ReqId) -> bool {
        let mut ctx = DevCtx {
            now: self.now,
            queue: self.queue,
            reqs: self.reqs,
            handoffs: self.handoffs,
        };
        self.dev.abort(id, &mut ctx)
    }
    fn reset_below(&mut self) {
        let mut ctx = DevCtx {
            now: self.now,
            queue: self.queue,
            reqs: self.reqs,
            handoffs: self.handoffs,
        };
        self.dev.reset(&mut ctx);
    }
}

/// Options of the loop itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoopOptions {
    /// Show a progress bar on stderr once the run has taken a second.
    pub progress: bool,
}

/// What a run leaves behind.
pub struct Outcome {
    pub jobs: Vec<JobResult>,
    /// Simulated time of the last event handled.
    pub end_ns: Ns,
    pub events: u64,
    pub nvme_counters: Vec<(String, f64)>,
    pub interrupts_per_vector: Vec<u64>,
    pub device_counters: Vec<(String, f64)>,
    /// Most requests ever outstanding at once.
    pub max_outstanding: usize,
}

struct Sim<'w, D: Device> {
    queue: EventQueue<Ev<D::Event>>,
    reqs: Requests,
    handoffs: VecDeque<Handoff>,
    nvme: Nvme,
    dev: D,
    jobs: Vec<JobRun>,
    group: u32,
    last_group: u32,
    done: bool,
    series_out: Option<&'w mut dyn Write>,
}

impl<D: Device> Sim<'_, D> {
    fn now(&self) -> Ns {
        self.queue.now_ns()
    }

    fn pump(&mut self, j: usize, now: Ns) -> Result<(), SimError> {
        let Sim {
            jobs,
            reqs,
            handoffs,
            queue,
            ..
        } = self;
        let job = &mut jobs[j];
        let next = job.pump(now, |mut req| {
            req.job = j as u32;
            let id = reqs.alloc(req);
            handoffs.push_back(Handoff::NvmeSubmit(id));
        })?;
        if let Pump::WakeAt(t) = next
            && job.wake_at.is_none_or(|w| t < w)
        {
            job.wake_at = Some(t);
            queue.schedule(t, Ev::Job(j as u32));
        }
        if job.finished {
            self.job_finished(now);
        }
        Ok(())
    }

    fn start_group(&mut self, g: u32, now: Ns) -> Result<(), SimError> {
        self.group = g;
        for j in 0..self.jobs.len() {
            if self.jobs[j].group == g {
                self.jobs[j].start(now);
            }
        }
        for j in 0..self.jobs.len() {
            if self.jobs[j].group == g {
                self.pump(j, now)?;
            }
        }
        Ok(())
    }

    /// Called when a job may have finished: starts the next group when this one is done.
    fn job_finished(&mut self, _now: Ns) {
        let g = self.group;
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
                let now = self.now();
                for j in 0..self.jobs.len() {
                    if self.jobs[j].group == g + 1 {
                        self.jobs[j].wake_at = Some(now);
                        self.queue.schedule(now, Ev::Job(j as u32));
                    }
                }
            }
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
            writeln!(
                out,
                "{},{},{},{},{},{},{},{:.3},{:.1},{:.1},{}",
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
                row.lat_p99_ns
            )
            .map_err(|e| SimError::new(format!("cannot write the time series: {e}")))?;
        }
        Ok(())
    }

    #[inline]
    fn drain_handoffs(&mut self) -> Result<(), SimError> {
        while let Some(h) = self.handoffs.pop_front() {
            let now = self.queue.now_ns();
            match h {
                Handoff::NvmeSubmit(id) => {
                    let mut ctx = NvmeCtx {
                        now,
                        queue: &mut self.queue,
                        reqs: &mut self.reqs,
                        handoffs: &mut self.handoffs,
                        dev: &mut self.dev,
                    };
                    self.nvme.submit(id, &mut ctx);
                }
                Handoff::NvmeComplete(id) => {
                    let mut ctx = NvmeCtx {
                        now,
                        queue: &mut self.queue,
                        reqs: &mut self.reqs,
                        handoffs: &mut self.handoffs,
                        dev: &mut self.dev,
                    };
                    self.nvme.complete(id, &mut ctx);
                }
                Handoff::DevSubmit(id) => {
                    let mut ctx = DevCtx {
                        now,
                        queue: &mut self.queue,
                        reqs: &mut self.reqs,
                        handoffs: &mut self.handoffs,
                    };
                    self.dev.submit(id, &mut ctx);
                }
                Handoff::JobComplete(id) => {
                    let j = self.reqs[id].job as usize;
                    self.jobs[j].complete(&self.reqs[id]);
                    self.reqs.free(id);
                    if self.series_out.is_some() {
                        self.write_series(j)?;
                    }
                    self.pump(j, now)?;
                }
            }
        }
        Ok(())
    }
}

/// Runs `jobs` on `nvme` + `dev` until every group is done.
pub fn simulate<D: Device>(
    dev: D,
    nvme: Nvme,
    jobs: Vec<JobRun>,
    opts: LoopOptions,
    series_out: Option<&mut dyn Write>,
) -> Result<Outcome, SimError> {
    let last_group = jobs.iter().map(|j| j.group).max().unwrap_or(0);
    let mut sim = Sim {
        queue: EventQueue::new(),
        reqs: Requests::with_capacity(1024),
        handoffs: VecDeque::with_capacity(64),
        nvme,
        dev,
        jobs,
        group: 0,
        last_group,
        done: false,
        series_out,
    };
    {
        let mut ctx = DevCtx {
            now: 0,
            queue: &mut sim.queue,
            reqs: &mut sim.reqs,
            handoffs: &mut sim.handoffs,
        };
        sim.dev.start(&mut ctx);
    }
    if sim.jobs.is_empty() {
        sim.done = true;
    } else {
        sim.start_group(0, 0)?;
    }
    sim.drain_handoffs()?;

    let wall = Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut events: u64 = 0;
    while !sim.done {
        let Some((_, ev)) = sim.queue.pop() else {
            let stuck: u32 = sim.jobs.iter().map(|j| j.inflight).sum();
            return Err(SimError::new(format!(
                "the simulation stalled at {} ns with {stuck} I/Os outstanding and nothing scheduled (a device or policy that never completes?)",
                sim.now()
            )));
        };
        let now = sim.queue.now_ns();
        events += 1;
        match ev {
            Ev::Dev(e) => {
                let mut ctx = DevCtx {
                    now,
                    queue: &mut sim.queue,
                    reqs: &mut sim.reqs,
                    handoffs: &mut sim.handoffs,
                };
                sim.dev.on_event(e, &mut ctx);
            }
            Ev::Nvme(e) => {
                let mut ctx = NvmeCtx {
                    now,
                    queue: &mut sim.queue,
                    reqs: &mut sim.reqs,
                    handoffs: &mut sim.handoffs,
                    dev: &mut sim.dev,
                };
                sim.nvme.on_event(e, &mut ctx);
            }
            Ev::Job(j) => {
                let job = &mut sim.jobs[j as usize];
                if job.wake_at == Some(now) {
                    job.wake_at = None;
                    if !job.started {
                        job.start(now);
                    }
                    sim.pump(j as usize, now)?;
                }
            }
        }
        sim.drain_handoffs()?;
        if opts.progress && events & 0xffff == 0 {
            update_progress(&mut bar, wall, &sim.jobs, now);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    for j in 0..sim.jobs.len() {
        sim.jobs[j].finish_stats();
        sim.write_series(j)?;
    }
    let end_ns = sim.now();
    Ok(Outcome {
        device_counters: sim.dev.counters(),
        max_outstanding: sim.reqs.high_water(),
        nvme_counters: sim.nvme.counters(),
        interrupts_per_vector: sim.nvme.interrupts_per_vector(),
        jobs: sim.jobs.into_iter().map(JobRun::into_result).collect(),
        end_ns,
        events,
    })
}

fn update_progress(
    bar: &mut Option<indicatif::ProgressBar>,
    wall: Instant,
    jobs: &[JobRun],
    now: Ns,
) {
    let elapsed = wall.elapsed();
    if bar.is_none() && elapsed > Duration::from_secs(1) {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
        *bar = Some(b);
    }
    if let Some(b) = bar {
        let ios: u64 = jobs.iter().map(|j| j.issued).sum();
        b.set_message(format!(
            "simulated {:.3} s, {} I/Os, {:.2} M I/O per second of wall time",
            now as f64 / 1e9,
            ios,
            ios as f64 / elapsed.as_secs_f64() / 1e6
        ));
        b.tick();
    }
}
