//! `qoslab sim`: a fio job file (or a trace) and a device file in, fio's JSON out.
//!
//! [`run`] builds the path for each seed (jobs from `qoslab-workload`, the NVMe stage from
//! `qoslab-nvme`, the device model named in the device file from `qoslab-media`), runs it with
//! [`run::simulate`], and renders the result in fio's `normal`, `json` or `json+` format.
//! With `repeat > 1`, the seeds run in parallel (rayon) and the report gives each figure's mean
//! and 95 % confidence interval; the output does not depend on the number of threads.

pub mod device;
pub mod files;
pub mod iolog;
pub mod job;
pub mod path;
pub mod progress;
pub mod report;
pub mod run;
pub mod series;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use qoslab_engine::Ns;
use qoslab_media::{DeviceModel, ModelVisitor, visit_model};
use qoslab_workload::fio::JobFile;
use qoslab_workload::generator::JobGen;
use qoslab_workload::trace::ReplaySpeed;
use rayon::prelude::*;

pub use device::DeviceConfig;
use job::{JobRun, Source, TraceSource};
use path::{PathPlan, PathVisitor};
use progress::{Progress, RunSlot};

/// Most results of job clones a `--repeat` run holds for its report (clones x seeds): about
/// 0.15 to 0.5 MB each, so at most some 8 GB.
pub const MAX_HELD_CLONE_RUNS: u64 = 16_384;

/// Most job clones (`numjobs` summed over the job file) one run takes: fio's own limit
/// (`REAL_MAX_JOBS`, 4096; fio 3.33 stops with "maximum number of jobs reached", on this
/// project's machine from 4,089 clones on). Each clone keeps its own latency histograms, about
/// 0.5 MB, so this also bounds a run's memory near 2 GB.
pub const MAX_JOB_CLONES: u64 = 4096;

pub use qoslab_workload::trace::TraceFormat;
pub use report::OutputFormat;
use run::{LoopOptions, Outcome};
pub use series::SERIES_HEADER;
use series::{SeriesFile, SeriesWriter};

/// A bad input, or a run that cannot go on: one line, `FILE:LINE: message` when a file and
/// line are known.
pub type SimError = qoslab_engine::InputError;

/// What to run.
#[derive(Clone, Debug)]
pub enum WorkloadSpec {
    Jobs(JobFile),
    /// Block traces, trace i replayed on host i (`sim_host` i) as job i.
    Trace {
        paths: Vec<PathBuf>,
        /// `None`: detect from the file.
        format: Option<TraceFormat>,
        speed: f64,
        /// Most I/Os of the trace outstanding at once (0: no cap).
        qd_cap: u32,
    },
}

impl WorkloadSpec {
    /// Reads a fio job file (`${ENV}` from the process environment).
    pub fn job_file(path: &Path) -> Result<Self, SimError> {
        let file = qoslab_workload::fio::parse_job_file(path, |n| std::env::var(n).ok())?;
        Ok(WorkloadSpec::Jobs(file))
    }

    /// The job clones one run has: `numjobs` summed over the jobs, or one per trace.
    pub fn clones(&self) -> u64 {
        match self {
            WorkloadSpec::Jobs(file) => file.jobs.iter().map(|j| u64::from(j.numjobs)).sum(),
            WorkloadSpec::Trace { paths, .. } => paths.len() as u64,
        }
    }
}

/// Everything `qoslab sim` needs.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub workload: WorkloadSpec,
    pub device: DeviceConfig,
    pub seed: u64,
    pub repeat: u32,
    pub format: OutputFormat,
    /// Where to write the time series, if anywhere.
    pub series: Option<SeriesSpec>,
    /// Where the runs say how far they are (run i is the seed `seed + i`), for a display that
    /// reads it meanwhile.
    pub progress: Option<Arc<Progress>>,
    /// Cut the power at this simulated time and report what it took (`qoslab.durability`).
    pub power_fail_at_ns: Option<Ns>,
    /// At `power_fail_at_ns`, only this target server crashes and restarts (`[fabric]
    /// targets`); the initiator and the other targets stay up.
    pub crash_target: Option<u16>,
    /// Report the run as it stands every this much simulated time (fio's
    /// `--status-interval`), before the final report.
    pub status_interval_ns: Option<Ns>,
}

/// The per-interval time series (`--timeseries`), written as CSV while the run goes.
#[derive(Clone, Debug)]
pub struct SeriesSpec {
    /// Interval of the jobs that do not set their own `log_avg_msec`.
    pub interval_ns: Ns,
    /// The CSV file; it appears only once the whole series is written.
    pub path: PathBuf,
}

/// The result of `run`.
pub struct SimOutput {
    /// The report in the requested format.
    pub text: String,
    /// The report at each `status_interval_ns` of simulated time, before the end.
    pub status: Vec<String>,
    /// Simulated I/Os over all runs and the events handled (for benchmarks).
    pub ios: u64,
    pub events: u64,
    /// Most requests outstanding at once in any run.
    pub max_outstanding: usize,
    /// fio's latency, bandwidth and IOPS logs the jobs ask for (`write_lat_log`, ...), of the
    /// first seed's run: (file name, text), per job clone in order ([`iolog`]).
    pub logs: Vec<(String, String)>,
}

/// Refuses a job the simulator cannot run with fio's meaning: buffered I/O on the device (a
/// page cache is on the path only with a mounted file system, `[fs] mount`), a file that is
/// no block device, and a `null` job that would issue without end in no simulated time.
fn check_runnable(job: &qoslab_workload::fio::Job, device: &DeviceConfig) -> Result<(), SimError> {
    let at = |loc: Option<&qoslab_workload::fio::Location>, m: String| {
        let loc = loc.unwrap_or(&job.location);
        SimError::at(&loc.path, loc.line, format!("job '{}': {m}", job.name))
    };
    let null = job.engine == qoslab_workload::fio::EngineClass::Null;
    if let Some(app) = job.app
        && !files::mounted(device)
    {
        return Err(at(
            None,
            format!(
                "app={app} runs above a file system: mount one ([fs] mount = true in the device file, or --set fs.mount=true, docs/fs.md)"
            ),
        ));
    }
    if !job.direct && !null && !files::mounted(device) {
        return Err(at(
            job.direct_location.as_ref(),
            "direct=0 (fio's default: buffered I/O through the page cache) is simulated only on \
             a mounted file system ([fs] mount = true in the device file, or --set fs.mount=true, \
             docs/fs.md); set direct=1 for I/O straight to the device"
                .into(),
        ));
    }
    if let Some(name) = &job.filename {
        for f in name.split(':') {
            if [
                "/dev/null",
                "/dev/zero",
                "/dev/random",
                "/dev/urandom",
                "/dev/full",
            ]
            .contains(&f.trim())
            {
                return Err(at(
                    None,
                    format!(
                        "filename={f}: a character device with no block device behind it (fio reads and writes it at memory speed), not simulated"
                    ),
                ));
            }
        }
    }
    if job.ioengine == "vsync" {
        vsync_runnable(job).map_err(|m| at(job.ioengine_location.as_ref(), m))?;
    }
    if job.ioengine == "io_uring" && job.submit_mode == qoslab_workload::fio::SubmitMode::Offload {
        // fio 3.33 marks io_uring FIO_NO_OFFLOAD and will not load it so (measured: exit 1).
        return Err(at(
            job.ioengine_location.as_ref(),
            "ioengine=io_uring with io_submit_mode=offload: fio 3.33 refuses it (\"io_uring: \
             can't be used with offloaded submit\"); use io_submit_mode=inline or another engine"
                .into(),
        ));
    }
    let host = device.host_config();
    if null && job.time_based && host.submit_ns + host.complete_ns == 0 {
        return Err(at(
            job.ioengine_location.as_ref(),
            "ioengine=null on a device whose host costs (host.submit_ns, host.complete_ns) are 0: \
             a time_based job would issue without end in no simulated time"
                .into(),
        ));
    }
    Ok(())
}

/// fio 3.33's `vsync` writes a trim with writev; above depth 1 its getevents returns only the
/// last vector call's I/Os (engines/sync.c), so those of a call not reaped before the next are
/// never reaped: fio's wait for every I/O in flight before a sleep (`io_u_quiesce`), or for
/// the queue to drain to `iodepth_low`, then never ends (measured: thinktime and rate_iops
/// at iodepth=4), and with `fsync` it counts depths twice (measured: iodepth 4 = 106 % with
/// fsync=8).
fn vsync_runnable(job: &qoslab_workload::fio::Job) -> Result<(), String> {
    if job.rw.issues(qoslab_engine::Op::Trim) {
        return Err(
            "ioengine=vsync with trims: fio's vector engine issues a trim as a write (it knows \
             only readv and writev); use another engine"
                .into(),
        );
    }
    if job.iodepth <= 1 {
        return Ok(());
    }
    let depth = job.iodepth;
    let rate = job
        .rate_bytes_per_s
        .iter()
        .chain(&job.rate_iops)
        .any(Option::is_some);
    let quiesces = [
        (job.thinktime_ns > 0, "thinktime"),
        (rate, "a rate"),
        (job.flow_sleep_ns > 0, "flow_sleep"),
        (job.latency_target_ns.is_some(), "latency_target"),
        // (measured: iodepth=8, iodepth_batch_submit=4, iodepth_low=2 never ends)
        (
            job.iodepth_low != 0 && job.iodepth_low < depth,
            "iodepth_low below iodepth",
        ),
    ];
    if let Some((_, what)) = quiesces.iter().find(|(on, _)| *on) {
        return Err(format!(
            "ioengine=vsync at iodepth={depth} with {what}: fio waits there for I/Os in flight, \
             and vsync never returns those of a vector call it did not reap before the next, so \
             fio 3.33 never ends this job; use iodepth=1 (vsync is then psync) or another engine"
        ));
    }
    if job.fsync_every > 0 || job.fdatasync_every > 0 {
        return Err(format!(
            "ioengine=vsync at iodepth={depth} with fsync: fio 3.33 counts this job's depths \
             twice (more than 100 %); use iodepth=1 (vsync is then psync) or another engine"
        ));
    }
    if job.submit_mode == qoslab_workload::fio::SubmitMode::Offload {
        return Err(format!(
            "ioengine=vsync at iodepth={depth} with io_submit_mode=offload: not simulated (its \
             vector calls are the job's own); use iodepth=1 or another engine"
        ));
    }
    Ok(())
}

/// Builds the job clones of one run, each on its host and core, and what the path needs to
/// know of them.
fn build_jobs(
    opts: &SimOptions,
    seed: u64,
    capacity: u64,
) -> Result<(Vec<JobRun>, PathPlan), SimError> {
    let series = opts.series.as_ref().map(|s| s.interval_ns);
    let mut jobs_per_host: Vec<u32> = vec![0];
    let mut orderings: Vec<Option<&'static qoslab_block::OrderingOps>> = Vec::new();
    let default_ordering = opts.device.block_config().ordering;
    let mut fs = None;
    let out = match &opts.workload {
        WorkloadSpec::Jobs(file) => {
            let on_files = files::jobs_on_files(file, &opts.device)?;
            for job in &file.jobs {
                check_runnable(job, &opts.device)?;
            }
            let mut out = Vec::new();
            let mut clones: u64 = 0;
            for job in &file.jobs {
                clones += u64::from(job.numjobs);
                if clones > MAX_JOB_CLONES {
                    return Err(SimError::at(
                        &job.location.path,
                        job.location.line,
                        format!(
                            "job '{}': numjobs={} brings the job clones to {clones}, more than fio's limit of {MAX_JOB_CLONES} (each clone keeps its own latency histograms, about 0.5 MB)",
                            job.name, job.numjobs
                        ),
                    ));
                }
                let h = job.sim_host as usize;
                if h >= jobs_per_host.len() {
                    jobs_per_host.resize(h + 1, 0);
                }
                jobs_per_host[h] += job.numjobs;
            }
            let cores = PathPlan {
                jobs_per_host: jobs_per_host.clone(),
                seed,
                orderings: Vec::new(),
                record: false,
                trace: false,
                fs: None,
            }
            .cores(&opts.device);
            let mut on_host = vec![0u32; jobs_per_host.len()];
            // For all jobs or none: group_reporting merges the jobs of a group.
            let lat_percentiles = file.jobs.iter().any(|j| j.lat_percentiles);
            let host = opts.device.host_config();
            let null_costs = (host.submit_ns, host.complete_ns);
            // Each flow id is one set of counts its jobs share.
            let mut flows: std::collections::BTreeMap<
                u32,
                std::rc::Rc<std::cell::Cell<job::FlowCounts>>,
            > = Default::default();
            // The clones of each job, for wait_for.
            let mut first_clone: Vec<usize> = Vec::with_capacity(file.jobs.len());
            let mut start_rng = qoslab_engine::RngStream::new(seed, "startdelay");
            // The files that exist before the run: those fio lays out for a job that reads
            // (below), and the application's, named after the one file of each job clone.
            let mut pre_files: Vec<qoslab_fs::FileSpec> = Vec::new();
            // fio's jobs and numjobs clones that name one file open that one file (one inode,
            // one page cache), so each name gets the number of the first clone that names it.
            let mut named_files: std::collections::BTreeMap<&str, u32> = Default::default();
            let mut app_seen = false;
            for job in &file.jobs {
                first_clone.push(out.len());
                let app = match job.app {
                    Some(name) => {
                        let at = |m: String| SimError::at(&job.location.path, job.location.line, m);
                        if std::mem::replace(&mut app_seen, true) {
                            return Err(at(format!(
                                "job '{}': app={name}: one application job per run (its clones are its threads)",
                                job.name
                            )));
                        }
                        let shared =
                            job::AppShared::new(name, job.numjobs, seed, clones as u32 + 1);
                        if !shared.ends_by_itself()
                            && job.number_ios.is_none()
                            && job.runtime_ns.is_none()
                        {
                            return Err(at(format!(
                                "job '{}': app={name} loops without end: give it number_ios= (operations per thread) or runtime=",
                                job.name
                            )));
                        }
                        pre_files.extend(shared.files());
                        Some((name, shared))
                    }
                    None => None,
                };
                let interval = job
                    .log_avg_msec
                    .filter(|&ms| ms > 0)
                    .map(|ms| ms * 1_000_000)
                    .or(series);
                let h = job.sim_host as usize;
                for clone in 0..job.numjobs {
                    let g = JobGen::on_device(job, clone, seed, Some(capacity))?;
                    let issues = [
                        job.rw.issues(qoslab_engine::Op::Read),
                        job.rw.issues(qoslab_engine::Op::Write),
                        job.rw.issues(qoslab_engine::Op::Trim),
                        false,
                    ];
                    let core = (on_host[h] % cores[h]) as u16;
                    on_host[h] += 1;
                    let host_loop = job::HostLoop::of_job(job, null_costs);
                    let (source, issues) = match &app {
                        Some((name, shared)) => (
                            shared.source(name, clone, seed, job.number_ios),
                            [true, true, false, false],
                        ),
                        None => (Source::Gen(Box::new(g.clone())), issues),
                    };
                    let mut run = JobRun::new(
                        job.name.clone(),
                        job.index,
                        clone,
                        (job.run_group, job.group_id),
                        core,
                        source,
                        host_loop,
                        g.ramp_ns(),
                        g.end_ns(),
                        issues,
                        series.and(interval),
                    );
                    run.host = job.sim_host;
                    run.sync_writes = job.direct;
                    run.lat_percentiles = lat_percentiles;
                    run.group_reporting = job.group_reporting;
                    run.set_sample_windows(job.bw_sample_ns(), job.iops_sample_ns());
                    run.think = job::Think {
                        ns: job.thinktime_ns,
                        blocks: job.thinktime_blocks,
                        on_complete: job.thinktime_blocks_type
                            == qoslab_workload::fio::ThinkBlocksType::Complete,
                        iotime_ns: job.thinktime_iotime_ns,
                        ignore_in_rate: job.rate_ignore_thinktime,
                    };
                    if job.flow > 0 {
                        let counts = flows.entry(job.flow_id).or_default().clone();
                        run.flow = Some((counts, job.flow as u64));
                        run.flow_id = job.flow_id;
                        run.flow_sleep_ns = job.flow_sleep_ns;
                    }
                    run.rate_min =
                        [0, 1, 2].map(|d| (job.rate_min_bytes_per_s[d], job.rate_iops_min[d]));
                    run.rate_cycle_ns = job.rate_cycle_ns;
                    run.max_latency_ns = job.max_latency_ns;
                    run.latency_target = job.latency_target_ns.map(|t| {
                        job::LatencyTarget::new(
                            t,
                            job.latency_window_ns,
                            job.latency_percentile,
                            job.latency_run,
                            host_loop.iodepth,
                        )
                    });
                    run.steadystate = job.steadystate.filter(|_| job.ss_dur_ns > 0).map(|spec| {
                        job::SteadyStateCheck::new(spec, job.ss_dur_ns, job.ss_ramp_ns)
                    });
                    run.exitall = job.exitall;
                    run.exitall_on_error = job.exitall_on_error;
                    run.exit_what = job.exit_what;
                    let (lo, hi) = job.startdelay_ns;
                    run.start_delay_ns = if hi > lo {
                        lo + (start_rng.uniform() * (hi - lo) as f64) as u64
                    } else {
                        lo
                    };
                    if let Some(waitee) = &job.wait_for {
                        let w = file
                            .jobs
                            .iter()
                            .position(|j| &j.name == waitee)
                            .expect("the parser checked that the waitee exists");
                        let clones = file.jobs[w].numjobs as usize;
                        run.wait_for = (first_clone[w]..first_clone[w] + clones).collect();
                    }
                    // The first seed's run writes the logs (the report's run when alone).
                    if seed == opts.seed {
                        run.logs = iolog::JobLogs::of_job(job, out.len() + 1);
                    }
                    let per_io = job.log_avg_msec.is_none();
                    run.sample_per_io(
                        per_io && job.logs.bw.is_some(),
                        per_io && job.logs.iops.is_some(),
                    );
                    run.durability = job::Durability::new(
                        (job.fsync_every, job.fdatasync_every),
                        (job.end_fsync, job.fsync_on_close),
                        job.write_barrier_every,
                        job.fua,
                        // One file per clone on a mounted file system (below).
                        on_files.map_or(u64::from(job.nrfiles), |_| 1),
                    );
                    if let Some(fs_ordering) = on_files {
                        // A file per clone, named from 1, unless the job names a file that an
                        // earlier clone named too (fio 3.33 keeps $jobnum and the like in a
                        // `filename` as written: one name, one file); the file system orders
                        // its own writes (its journal's ordering plug-in), never the job's.
                        let own = out.len() as u32 + 1;
                        run.file = match job.filename.as_deref() {
                            Some(name) if job.app.is_none() => {
                                *named_files.entry(name).or_insert(own)
                            }
                            _ => own,
                        };
                        run.invalidate = job.invalidate;
                        // fio lays out the file of a job that reads or trims it before the
                        // job starts (extend_file: written whole, fsynced with create_fsync,
                        // its pages dropped by posix_fadvise even with invalidate=0, closed),
                        // outside the job's time:
                        // here it exists before the run, allocated and durable, not cached.
                        if job.app.is_none()
                            && (job.rw.issues(qoslab_engine::Op::Read)
                                || job.rw.issues(qoslab_engine::Op::Trim))
                        {
                            // fio lays out a shared file once, as large as the job that
                            // needs the most of it asks (a later job finds it there).
                            let e = g.extent();
                            let size = e.region_start_bytes + e.region_len_bytes;
                            match pre_files.iter_mut().find(|f| f.name == run.file) {
                                Some(f) => f.size = f.size.max(size),
                                None => pre_files.push(qoslab_fs::FileSpec {
                                    name: run.file,
                                    size,
                                    allocated: true,
                                    cached: false,
                                }),
                            }
                        }
                        orderings.push(fs_ordering);
                        out.push(run);
                        continue;
                    }
                    // The job's writes are ordered by its own ordering, or the block layer's.
                    let ordering = match job.ordering {
                        Some(name) => Some(name),
                        None if default_ordering != "none" => Some(default_ordering.as_str()),
                        None => None,
                    };
                    let ops = ordering
                        .map(qoslab_block::ordering::lookup)
                        .transpose()
                        .map_err(|e| {
                            SimError::at(&job.location.path, job.location.line, e.message)
                        })?;
                    if let Some(o) = ops
                        && o.needs_target
                        && opts.device.targets_config().targets == 0
                    {
                        return Err(SimError::at(
                            &job.location.path,
                            job.location.line,
                            format!(
                                "job '{}': ordering={} needs target servers with a PMR: a device with [fabric] targets = 1 or more over an NVMe-oF transport (rio-flash, rio-optane, or --set fabric.targets=N --set path.transport=rdma)",
                                job.name, o.name
                            ),
                        ));
                    }
                    run.ordered = ops.is_some();
                    orderings.push(ops);
                    out.push(run);
                }
            }
            if on_files.is_some() {
                fs = Some(files::setup(capacity, cores[0], out.len(), pre_files));
            }
            out
        }
        WorkloadSpec::Trace {
            paths,
            format,
            speed,
            qd_cap,
        } => {
            let depth = if *qd_cap == 0 { u32::MAX / 2 } else { *qd_cap };
            jobs_per_host = vec![1; paths.len().max(1)];
            let mut out = Vec::with_capacity(paths.len());
            for (i, path) in paths.iter().enumerate() {
                let reader = qoslab_workload::trace::open(path, *format)?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "trace".into());
                let mut run = JobRun::new(
                    name,
                    i,
                    0,
                    (0, 0),
                    0,
                    Source::Trace(Box::new(TraceSource {
                        reader,
                        speed: ReplaySpeed::new(*speed)?,
                        capacity_bytes: capacity,
                    })),
                    job::HostLoop::replay(depth),
                    0,
                    None,
                    [true, true, true, true],
                    series,
                );
                run.host = i as u16;
                out.push(run);
                orderings.push(None);
            }
            out
        }
    };
    Ok((
        out,
        PathPlan {
            jobs_per_host,
            seed,
            orderings,
            record: opts.power_fail_at_ns.is_some(),
            trace: false,
            fs,
        },
    ))
}

/// Runs the jobs on a built path.
struct Simulate<'w> {
    jobs: Vec<JobRun>,
    opts: LoopOptions,
    series: Option<&'w mut SeriesWriter>,
}

impl PathVisitor for Simulate<'_> {
    type Output = Result<Outcome, SimError>;
    fn visit<P: qoslab_engine::Stage>(self, path: P) -> Self::Output {
        run::simulate(path, self.jobs, self.opts, self.series)
    }
}

/// One seed of `opts` on media `devs` (one per target server, or the one drive).
fn run_with_media<D: qoslab_media::Device>(
    opts: &SimOptions,
    seed: u64,
    devs: Vec<D>,
    loop_opts: LoopOptions,
    series: Option<&mut SeriesWriter>,
) -> Result<Outcome, SimError> {
    let (jobs, mut plan) = build_jobs(opts, seed, devs[0].capacity_bytes())?;
    // A crash view reads the ordered streams' records as a cut does.
    plan.record |= !loop_opts.crash_views_at_ns.is_empty();
    path::build(
        &opts.device,
        devs,
        &plan,
        Simulate {
            jobs,
            opts: loop_opts,
            series,
        },
    )?
}

/// What recovery after a cut costs on `device`'s path with target servers, and whether its
/// drives (`dev` is one) have power-loss protection; `None` without target servers.
fn recovery_of<D: qoslab_media::Device>(
    device: &DeviceConfig,
    dev: &D,
) -> Option<(qoslab_fabric::cut::RecoveryCosts, bool)> {
    use qoslab_nvme::transport::{FabricModel, FabricVisitor, visit_fabric};
    struct Costs<'a>(&'a DeviceConfig);
    impl FabricVisitor for Costs<'_> {
        type Output = Option<qoslab_nvme::transport::nvmeof::FabricCosts>;
        fn visit<T: FabricModel>(self) -> Self::Output {
            T::build(&self.0.transport, 1).ok().map(|t| t.costs())
        }
    }
    let t = device.targets_config();
    if t.targets == 0 {
        return None;
    }
    let c = visit_fabric(&device.path_config().transport, Costs(device))??;
    let caps = dev.caps();
    let plp = caps.contains(qoslab_media::DeviceCaps::POWER_LOSS_PROTECTION)
        || !caps.contains(qoslab_media::DeviceCaps::VOLATILE_WRITE_CACHE);
    let costs = qoslab_fabric::cut::RecoveryCosts {
        cfg: qoslab_fabric::cut::RecoveryConfig::from_settings(&device.recovery),
        message_ns: c.message_ns,
        link_gb_per_s: c.link_gb_per_s,
        message_cycles: c.message_cycles,
        submit_cycles: c.submit_cycles,
        complete_cycles: c.complete_cycles,
        cpu_ghz: t.cpu_ghz,
        target_cores: t.cores,
    };
    Some((costs, plp))
}

/// One run with one seed on model `D`.
struct RunOnce<'a, 'w> {
    opts: &'a SimOptions,
    /// The run's number: its seed is `opts.seed + run`.
    run: usize,
    seed: u64,
    series: Option<&'w mut SeriesWriter>,
    /// Crash views to take ([`crash_views`]).
    views: &'a [Ns],
}

impl ModelVisitor for RunOnce<'_, '_> {
    type Output = Result<Outcome, SimError>;
    fn visit<D: DeviceModel>(self) -> Self::Output {
        qoslab_media::registry::check_model::<D>().map_err(SimError::new)?;
        // One drive per target server (each with its own seed), or the one drive.
        let n = self.opts.device.targets_config().targets.max(1) as u64;
        let devs = (0..n)
            .map(|i| {
                let seed = self
                    .seed
                    .wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                self.opts.device.build_media::<D>(seed)
            })
            .collect::<Result<Vec<D>, _>>()?;
        let loop_opts = LoopOptions {
            status_interval_ns: self.opts.status_interval_ns,
            progress: self.opts.progress.as_ref().map(|p| RunSlot {
                progress: p.clone(),
                run: self.run,
            }),
            power_fail_at_ns: self.opts.power_fail_at_ns,
            crash_target: self.opts.crash_target,
            recovery: recovery_of(&self.opts.device, &devs[0]),
            crash_views_at_ns: self.views.to_vec(),
        };
        run_with_media(self.opts, self.seed, devs, loop_opts, self.series)
    }
}

fn run_seed(
    opts: &SimOptions,
    run: usize,
    seed: u64,
    series: Option<&mut SeriesWriter>,
) -> Result<Outcome, SimError> {
    let model = opts.device.model.clone();
    visit_model(
        &model,
        RunOnce {
            opts,
            run,
            seed,
            series,
            views: &[],
        },
    )
    .ok_or_else(|| SimError::new(format!("unknown device model '{model}'")))?
}

/// Runs one seed of `opts` on a device built in code rather than named in the device file
/// (the device file's host, controller and link sections still apply), without a time series:
/// for models under development and for tests.
pub fn run_on_device<D: qoslab_media::Device>(
    opts: &SimOptions,
    dev: D,
) -> Result<SimOutput, SimError> {
    let loop_opts = LoopOptions {
        progress: None,
        status_interval_ns: None,
        power_fail_at_ns: opts.power_fail_at_ns,
        crash_target: opts.crash_target,
        recovery: recovery_of(&opts.device, &dev),
        crash_views_at_ns: Vec::new(),
    };
    let outcome = run_with_media(opts, opts.seed, vec![dev], loop_opts, None)?;
    let text = report::render(opts, &[opts.seed], std::slice::from_ref(&outcome))?;
    Ok(SimOutput {
        text,
        status: Vec::new(),
        ios: outcome.jobs.iter().map(|j| j.issued).sum(),
        events: outcome.events,
        max_outstanding: outcome.max_outstanding,
        logs: outcome.logs,
    })
}

/// Runs one seed of `opts` on media `dev` over transport `T`, with the path's stages put
/// together by `assemble` instead of the builder's chain (to test a stage in the path, or a
/// speed trick against the path without it), without a time series.
pub fn run_parts<T, D, P>(
    opts: &SimOptions,
    dev: D,
    assemble: impl FnOnce(path::PathParts<T, D>) -> P,
) -> Result<SimOutput, SimError>
where
    T: qoslab_nvme::TransportModel,
    D: qoslab_media::Device,
    P: qoslab_engine::Stage,
{
    let (jobs, plan) = build_jobs(opts, opts.seed, dev.capacity_bytes())?;
    let parts = path::parts::<T, D>(&opts.device, dev, &plan)?;
    let loop_opts = LoopOptions {
        progress: None,
        status_interval_ns: None,
        power_fail_at_ns: opts.power_fail_at_ns,
        crash_target: opts.crash_target,
        recovery: None,
        crash_views_at_ns: Vec::new(),
    };
    let outcome = run::simulate(assemble(parts), jobs, loop_opts, None)?;
    let text = report::render(opts, &[opts.seed], std::slice::from_ref(&outcome))?;
    Ok(SimOutput {
        text,
        status: Vec::new(),
        ios: outcome.jobs.iter().map(|j| j.issued).sum(),
        events: outcome.events,
        max_outstanding: outcome.max_outstanding,
        logs: outcome.logs,
    })
}

/// The recoveries of power cuts at each of `at_ns` (simulated times, in order) of one run of
/// `opts`'s first seed, all taken during that one run ([`run::LoopOptions::crash_views_at_ns`]):
/// each is what `--power-fail-at` at that time reports as `qoslab.recovery` (a test holds the
/// two equal), at the cost of one run to the last of them. Also the events the run handled.
pub fn crash_views(
    opts: &SimOptions,
    at_ns: &[Ns],
) -> Result<(Vec<run::CrashView>, u64), SimError> {
    if opts.power_fail_at_ns.is_some() || opts.crash_target.is_some() {
        return Err(SimError::new(
            "crash views: a run with crash views is not cut (leave out --power-fail-at and --crash-target)",
        ));
    }
    if opts.device.targets_config().targets == 0 {
        return Err(SimError::new(
            "crash views: the device has no target servers to recover ([fabric] targets = 0)",
        ));
    }
    if at_ns.is_empty() || at_ns.windows(2).any(|w| w[0] > w[1]) {
        return Err(SimError::new(
            "crash views: expected one or more simulated times in increasing order",
        ));
    }
    let model = opts.device.model.clone();
    let outcome = visit_model(
        &model,
        RunOnce {
            opts,
            run: 0,
            seed: opts.seed,
            series: None,
            views: at_ns,
        },
    )
    .ok_or_else(|| SimError::new(format!("unknown device model '{model}'")))??;
    if outcome.crash_views.len() < at_ns.len() {
        return Err(SimError::new(format!(
            "crash views: the run ended at {} ns, before the crash view at {} ns",
            outcome.end_ns,
            at_ns[outcome.crash_views.len()]
        )));
    }
    Ok((outcome.crash_views, outcome.events))
}

/// Runs the simulation as `opts` says, writes the time series if asked, and renders the
/// report.
pub fn run(opts: &SimOptions) -> Result<SimOutput, SimError> {
    if let Some(t) = opts.crash_target {
        let targets = opts.device.targets_config().targets;
        if opts.power_fail_at_ns.is_none() {
            return Err(SimError::new("--crash-target: only with --power-fail-at"));
        }
        if targets == 0 {
            return Err(SimError::new(
                "--crash-target: the device has no target servers ([fabric] targets = 0)",
            ));
        }
        if u32::from(t) >= targets {
            return Err(SimError::new(format!(
                "--crash-target: expected 0 to {}, got {t}",
                targets - 1
            )));
        }
    }
    let repeat = opts.repeat.max(1);
    if repeat > 1 && opts.status_interval_ns.is_some() {
        return Err(SimError::new(
            "--status-interval: reports one run as it goes; leave out --repeat",
        ));
    }
    // Every seed's outcome is kept until the report is rendered (its means and intervals).
    let held = opts.workload.clones() * u64::from(repeat);
    if repeat > 1 && held > MAX_HELD_CLONE_RUNS {
        return Err(SimError::new(format!(
            "--repeat {repeat} with {} job clones keeps {held} runs' results for the report, more than {MAX_HELD_CLONE_RUNS} (about 0.5 MB each); fewer seeds or clones",
            opts.workload.clones()
        )));
    }
    let seeds: Vec<u64> = (0..repeat as u64)
        .map(|i| opts.seed.wrapping_add(i))
        .collect();
    let mut series = opts
        .series
        .as_ref()
        .map(|s| SeriesFile::create(&s.path, repeat > 1))
        .transpose()?;
    let mut outcomes: Vec<Outcome> = if repeat == 1 {
        vec![run_seed(
            opts,
            0,
            seeds[0],
            series.as_mut().map(SeriesFile::writer),
        )?]
    } else {
        // Each run streams its rows to a scratch file of its own; they are appended in seed
        // order afterwards, so the series does not depend on which run finishes first.
        let runs: Vec<Result<(Outcome, Option<SeriesWriter>), SimError>> = seeds
            .par_iter()
            .enumerate()
            .map(|(run, &seed)| {
                let mut part = series.as_ref().map(|s| s.part(seed)).transpose()?;
                let outcome = run_seed(opts, run, seed, part.as_mut())?;
                Ok((outcome, part))
            })
            .collect();
        let mut outcomes = Vec::with_capacity(runs.len());
        for r in runs {
            let (outcome, part) = r?;
            if let (Some(s), Some(part)) = (series.as_mut(), part) {
                s.append(part)?;
            }
            outcomes.push(outcome);
        }
        outcomes
    };
    let logs = std::mem::take(&mut outcomes[0].logs);
    let text = report::render(opts, &seeds, &outcomes)?;
    let status = outcomes[0]
        .status
        .iter()
        .map(|o| report::render(opts, &seeds[..1], std::slice::from_ref(o)))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(s) = series {
        s.persist()?;
    }
    Ok(SimOutput {
        text,
        status,
        ios: outcomes
            .iter()
            .flat_map(|o| o.jobs.iter())
            .map(|j| j.issued)
            .sum(),
        events: outcomes.iter().map(|o| o.events).sum(),
        max_outstanding: outcomes
            .iter()
            .map(|o| o.max_outstanding)
            .max()
            .unwrap_or(0),
        logs,
    })
}
