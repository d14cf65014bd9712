//! `qoslab._core` bindings of the timed simulator (`crates/sim`): run a job file or a trace on
//! a device, list presets and tunables. Conversion only; the model lives in `crates/sim`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use qoslab_engine::IoPrioClass;
use qoslab_sim::TraceFormat;
use qoslab_sim::device::{all_tables, preset_names, preset_text, tunables_markdown_for};
use qoslab_sim::progress::Progress;
use qoslab_sim::{DeviceConfig, OutputFormat, SeriesSpec, SimError, SimOptions, WorkloadSpec};
use qoslab_workload::fio::options::OPTIONS;
use qoslab_workload::fio::{Distribution, Job, JobFile, KbBase, SizeSpec, ZoneExtent};
use serde_json::{Value, json};

pyo3::create_exception!(
    _core,
    SimInputError,
    PyException,
    "Bad simulator input: args are (message, path or None, line or None)."
);

pub(crate) fn to_py(e: SimError) -> PyErr {
    let path = e.path.map(|p| p.display().to_string());
    SimInputError::new_err((e.message, path, e.line))
}

/// The jobs to run: a job file, or job-file text (read from stdin or made from fio's command
/// line) named `jobname` in messages, or both (fio's options beside a job file); only the
/// `sections` named, if any. A `${NAME}` in the jobs is `env`'s NAME, or else the process
/// environment's.
fn load_jobs(
    jobfile: Option<PathBuf>,
    jobtext: Option<String>,
    jobname: Option<String>,
    sections: &[String],
    env: Option<&HashMap<String, String>>,
) -> Result<JobFile, SimError> {
    let env = |n: &str| {
        env.and_then(|vars| vars.get(n).cloned())
            .or_else(|| std::env::var(n).ok())
    };
    let file = match (jobfile, jobtext) {
        (Some(path), None) => qoslab_workload::fio::parse_job_file(&path, env)?,
        (None, Some(text)) => {
            let name = PathBuf::from(jobname.unwrap_or_else(|| "<stdin>".into()));
            qoslab_workload::fio::parse_job_str(&text, &name, env)?
        }
        // fio's job options on the command line beside a job file (`jobname` names them).
        (Some(path), Some(text)) => {
            let name = PathBuf::from(jobname.unwrap_or_else(|| "<command line>".into()));
            qoslab_workload::fio::parse_job_file_after(&text, &name, &path, env)?
        }
        _ => return Err(SimError::new("give either a job file or job text")),
    };
    if sections.is_empty() {
        Ok(file)
    } else {
        Ok(file.only_sections(sections)?)
    }
}

fn size_json(s: &SizeSpec) -> Value {
    match s {
        SizeSpec::Bytes(b) => json!({ "bytes": b }),
        SizeSpec::Percent(p) => json!({ "percent": p }),
    }
}

fn prio_class_name(c: IoPrioClass) -> &'static str {
    match c {
        IoPrioClass::None => "none",
        IoPrioClass::RealTime => "rt",
        IoPrioClass::BestEffort => "be",
        IoPrioClass::Idle => "idle",
    }
}

fn distribution_json(d: &Distribution) -> Value {
    match d {
        Distribution::Random => json!({ "kind": "random" }),
        Distribution::Zipf { theta, center } => {
            json!({ "kind": "zipf", "theta": theta, "center": center })
        }
        Distribution::Pareto { h, center } => {
            json!({ "kind": "pareto", "h": h, "center": center })
        }
        Distribution::Normal { dev_pct, center } => {
            json!({ "kind": "normal", "dev_pct": dev_pct, "center": center })
        }
        Distribution::Zoned(zones) => {
            let zones: Vec<Value> = zones
                .iter()
                .map(|z| match z.extent {
                    ZoneExtent::Percent(p) => json!({ "access_pct": z.access_pct, "size_pct": p }),
                    ZoneExtent::Bytes(b) => json!({ "access_pct": z.access_pct, "size_bytes": b }),
                })
                .collect();
            json!({ "kind": "zoned", "zones": zones })
        }
    }
}

/// How qoslab read one job: every modelled setting, with its unit in its name (per direction:
/// read, write, trim).
fn job_json(j: &Job) -> Value {
    let rw = qoslab_workload::fio::RwPattern::NAMES
        .iter()
        .find(|(_, p)| *p == j.rw)
        .map_or("?", |(n, _)| n);
    json!({
        "name": j.name,
        "section": j.section,
        "index": j.index,
        "location": format!("{}:{}", j.location.path.display(), j.location.line),
        "rw": rw,
        "rw_modifier": j.rw_modifier,
        "rw_backward": j.rw_backward,
        "rw_sequencer": if j.rw_identical { "identical" } else { "sequential" },
        "rwmixread_pct": j.rwmixread,
        "bs_bytes": j.bs,
        "bsrange_bytes": j.bsrange,
        "bssplit": j.bssplit,
        "blockalign_bytes": j.blockalign,
        "size": j.size.as_ref().map(size_json),
        "offset": size_json(&j.offset),
        "offset_increment": size_json(&j.offset_increment),
        "filesize_bytes": j.filesize,
        "io_size_bytes": j.io_size,
        "number_ios": j.number_ios,
        "loops": j.loops,
        "runtime_ns": j.runtime_ns,
        "time_based": j.time_based,
        "ramp_time_ns": j.ramp_time_ns,
        "iodepth": j.iodepth,
        "iodepth_batch_submit": j.iodepth_batch_submit,
        "numjobs": j.numjobs,
        "thinktime_ns": j.thinktime_ns,
        "thinktime_blocks": j.thinktime_blocks,
        "thinktime_blocks_type": format!("{:?}", j.thinktime_blocks_type).to_lowercase(),
        "rate_bytes_per_s": j.rate_bytes_per_s,
        "rate_iops": j.rate_iops,
        "rate_process": format!("{:?}", j.rate_process).to_lowercase(),
        "random_distribution": j.random_distribution.iter().map(distribution_json).collect::<Vec<_>>(),
        "norandommap": j.norandommap,
        "randrepeat": j.randrepeat,
        "randseed": j.randseed,
        "prio": j.prio,
        "prioclass": j.prioclass.map(prio_class_name),
        "cmdprio_percentage": j.cmdprio_percentage,
        "cmdprio_class": j.cmdprio_class.map(prio_class_name),
        "cmdprio": j.cmdprio,
        "stonewall": j.stonewall,
        "new_group": j.new_group,
        "group_reporting": j.group_reporting,
        "group_id": j.group_id,
        "run_group": j.run_group,
        "percentile_list": j.percentile_list,
        "direct": j.direct,
        "ioengine": j.ioengine,
        "engine_class": format!("{:?}", j.engine).to_lowercase(),
        "io_submit_mode": format!("{:?}", j.submit_mode).to_lowercase(),
        "iodepth_batch_complete_min": j.iodepth_batch_complete_min,
        "iodepth_batch_complete_max": j.iodepth_batch_complete_max,
        "iodepth_low": j.iodepth_low,
        "wait_for": j.wait_for,
        "startdelay_ns": j.startdelay_ns,
        "exitall": j.exitall,
        "nrfiles": j.nrfiles,
        "directory": j.directory,
        "filename_format": j.filename_format,
        "ioscheduler": j.ioscheduler,
        "filename": j.filename,
        "log_avg_msec": j.log_avg_msec,
        "write_lat_log": j.logs.lat,
        "write_bw_log": j.logs.bw,
        "write_iops_log": j.logs.iops,
        "kb_base": if j.kb_base == KbBase::Binary { 1024 } else { 1000 },
        "options": j.options,
        "globals_before": j.globals_before,
        "ignored": j.ignored.iter().map(|(k, l)| json!({
            "option": k,
            "location": format!("{}:{}", l.path.display(), l.line),
            "why": qoslab_workload::fio::options::find(k).map_or("", |o| o.help),
        })).collect::<Vec<_>>(),
    })
}

fn jobs_json(file: &JobFile) -> String {
    json!({
        "path": file.path.display().to_string(),
        "global_options": file.global_options,
        "unset_env": file.unset_env.iter().map(|(name, l)| json!({
            "name": name,
            "location": format!("{}:{}", l.path.display(), l.line),
        })).collect::<Vec<_>>(),
        "jobs": file.jobs.iter().map(job_json).collect::<Vec<_>>(),
    })
    .to_string()
}

/// Parses a job file (or job text) as `sim_run` would, without running it: JSON text with
/// `path`, `global_options`, `unset_env` (the `${NAME}`s no variable gave, read as nothing, with
/// their lines) and `jobs`, each job as qoslab read it.
#[pyfunction]
#[pyo3(signature = (jobfile=None, jobtext=None, jobname=None, sections=Vec::new(), env=None))]
fn fio_parse(
    jobfile: Option<PathBuf>,
    jobtext: Option<String>,
    jobname: Option<String>,
    sections: Vec<String>,
    env: Option<HashMap<String, String>>,
) -> PyResult<String> {
    let file = load_jobs(jobfile, jobtext, jobname, &sections, env.as_ref()).map_err(to_py)?;
    Ok(jobs_json(&file))
}

/// Every fio option qoslab knows: (name, aliases, read first, ignored, help); "read first":
/// fio reads it before the other options of its section (and `--showcmd` prints it first).
#[pyfunction]
fn fio_options() -> Vec<(String, Vec<String>, bool, bool, String)> {
    OPTIONS
        .iter()
        .map(|o| {
            (
                o.name.to_string(),
                o.aliases.iter().map(|a| a.to_string()).collect(),
                o.read_first,
                o.is_ignored(),
                o.help.to_string(),
            )
        })
        .collect()
}

/// Runs `qoslab sim`, writing the time series as CSV to `series_path` (every
/// `series_interval_ms`) if given; `trace` is a list of traces, trace i on host i. The device
/// is a preset or a file named `device`, or the device file `device_text` (named `device` in
/// messages). Returns a dict: text, status (the report at each `status_interval`, a simulated
/// time), ios, events, max_outstanding, fio_logs (the fio logs the jobs ask for that the
/// simulator writes: a list of (file name, text), [`qoslab_sim::iolog`]), and for jobs `jobs`
/// (JSON text of how they were read, as `fio_parse` gives it). `progress`, a `SimProgress`, says meanwhile how far the runs are;
/// `env` gives `${NAME}`s of the jobs (before the process environment); `terse_version` is
/// fio's `--terse-version` of the terse lines.
#[pyfunction]
#[pyo3(signature = (
    device, sets, seed, repeat, output_format,
    jobfile=None, trace=None, trace_format=None, speed=1.0, qd_cap=0,
    series_path=None, series_interval_ms=100.0, progress=None,
    jobtext=None, jobname=None, sections=Vec::new(), device_text=None, power_fail_at=None,
    crash_target=None,
    crash_views_at=None,
    status_interval=None,
    env=None,
    terse_version=3
))]
#[allow(clippy::too_many_arguments)]
fn sim_run<'py>(
    py: Python<'py>,
    device: &str,
    sets: Vec<String>,
    seed: u64,
    repeat: u32,
    output_format: &str,
    jobfile: Option<PathBuf>,
    trace: Option<Vec<PathBuf>>,
    trace_format: Option<&str>,
    speed: f64,
    qd_cap: u32,
    series_path: Option<PathBuf>,
    series_interval_ms: f64,
    progress: Option<PyRef<'py, SimProgress>>,
    jobtext: Option<String>,
    jobname: Option<String>,
    sections: Vec<String>,
    device_text: Option<String>,
    power_fail_at: Option<&str>,
    crash_target: Option<u16>,
    crash_views_at: Option<Vec<u64>>,
    status_interval: Option<&str>,
    env: Option<HashMap<String, String>>,
    terse_version: u8,
) -> PyResult<Bound<'py, PyDict>> {
    // fio's --status-interval: a time, in seconds when it has no unit.
    let status_interval_ns = status_interval
        .map(|t| {
            let with_unit = if t.trim().parse::<f64>().is_ok() {
                format!("{t}s")
            } else {
                t.to_string()
            };
            qoslab_engine::units::parse_duration_ns(&with_unit)
                .filter(|&ns| ns > 0)
                .ok_or_else(|| {
                    to_py(SimError::new(format!(
                        "--status-interval: expected a simulated time like 10ms or 1 (s), got '{t}'"
                    )))
                })
        })
        .transpose()?;
    let power_fail_at_ns = power_fail_at
        .map(|t| {
            qoslab_engine::units::parse_duration_ns(t).ok_or_else(|| {
                to_py(SimError::new(format!(
                    "--power-fail-at: expected a simulated time like 5ms or 1.5s, got '{t}'"
                )))
            })
        })
        .transpose()?;
    let format = OutputFormat::from_name(output_format).ok_or_else(|| {
        to_py(SimError::new(format!(
            "--output-format: expected {} or a comma list of them, got '{output_format}'",
            OutputFormat::NAMES.join(", ")
        )))
    })?;
    let format = format.with_terse_version(terse_version).ok_or_else(|| {
        to_py(SimError::new(format!(
            "--terse-version: expected 2, 3, 4 or 5 (fio's), got '{terse_version}'"
        )))
    })?;
    let trace = trace.filter(|paths| !paths.is_empty());
    let workload = match (jobfile.is_some() || jobtext.is_some(), trace) {
        (true, None) => WorkloadSpec::Jobs(
            load_jobs(jobfile, jobtext, jobname, &sections, env.as_ref()).map_err(to_py)?,
        ),
        (false, Some(paths)) => {
            let format = match trace_format {
                None | Some("auto") => None,
                Some(name) => Some(TraceFormat::from_name(name).ok_or_else(|| {
                    let names: Vec<&str> = TraceFormat::NAMES.iter().map(|(n, _)| *n).collect();
                    to_py(SimError::new(format!(
                        "--trace-format: expected auto or one of {}, got '{name}'",
                        names.join(", ")
                    )))
                })?),
            };
            WorkloadSpec::Trace {
                paths,
                format,
                speed,
                qd_cap,
            }
        }
        _ => {
            return Err(to_py(SimError::new(
                "give either a job file or --trace FILE",
            )));
        }
    };
    // fio's `ioscheduler`: the jobs switch their device's scheduler for the run.
    let mut sets = sets;
    if let WorkloadSpec::Jobs(file) = &workload {
        let mut chosen: Option<&str> = None;
        for job in &file.jobs {
            if let Some(s) = job.ioscheduler.as_deref() {
                if chosen.is_some_and(|c| c != s) {
                    return Err(to_py(SimError::at(
                        &job.location.path,
                        job.location.line,
                        format!(
                            "job '{}': ioscheduler={s}, but an earlier job set {}: one device has one scheduler",
                            job.name,
                            chosen.unwrap_or_default()
                        ),
                    )));
                }
                chosen = Some(s);
            }
        }
        if let Some(s) = chosen {
            sets.push(format!("block.scheduler={s}"));
        }
    }
    // A device file made from another format (MQSim's XML) comes as text, named `device`.
    let device = match device_text {
        Some(text) => DeviceConfig::from_text(&text, device, &sets),
        None => DeviceConfig::load(device, &sets),
    }
    .map_err(to_py)?;
    let ms = series_interval_ms;
    let interval_ns = (ms * 1e6).round();
    // The interval is whole ns, so anything under half a ns would be no interval at all.
    if !(interval_ns >= 1.0 && interval_ns.is_finite()) {
        return Err(to_py(SimError::new(format!(
            "--log-avg-msec: expected a number of ms of at least 0.000001, got {ms}"
        ))));
    }
    let series = series_path.map(|path| SeriesSpec {
        interval_ns: interval_ns as u64,
        path,
    });
    let opts = SimOptions {
        workload,
        device,
        seed,
        repeat: repeat.max(1),
        format,
        series,
        progress: progress.map(|p| p.0.clone()),
        power_fail_at_ns,
        crash_target,
        status_interval_ns,
    };
    if let Some(at) = crash_views_at {
        // Power cuts read during one run (`qoslab_sim::crash_views`): no report, the run
        // stops at its last view; each view as `qoslab.recovery` with the events before it.
        let (views, events) = py
            .detach(|| qoslab_sim::crash_views(&opts, &at))
            .map_err(to_py)?;
        let views: Vec<serde_json::Value> = views
            .iter()
            .map(|v| serde_json::json!({"events": v.events, "recovery": v.recovery}))
            .collect();
        let d = PyDict::new(py);
        d.set_item("crash_views", serde_json::Value::Array(views).to_string())?;
        d.set_item("events", events)?;
        return Ok(d);
    }
    let out = py.detach(|| qoslab_sim::run(&opts)).map_err(to_py)?;
    let d = PyDict::new(py);
    if let WorkloadSpec::Jobs(file) = &opts.workload {
        d.set_item("jobs", jobs_json(file))?;
    }
    d.set_item("text", out.text)?;
    d.set_item("status", out.status)?;
    d.set_item("ios", out.ios)?;
    d.set_item("events", out.events)?;
    d.set_item("max_outstanding", out.max_outstanding)?;
    d.set_item("fio_logs", out.logs)?;
    Ok(d)
}

/// How far the runs of a `sim_run` given it are, read from another thread while it runs (the
/// simulator draws no bar: `qoslab.progress` does).
#[pyclass(frozen, module = "qoslab._core")]
struct SimProgress(Arc<Progress>);

#[pymethods]
impl SimProgress {
    #[new]
    fn new() -> Self {
        SimProgress(Arc::default())
    }

    /// Per run started, in seed order: (fraction from 0 to 1 or None when unknown (a trace),
    /// simulated ns reached, I/Os issued, ended).
    fn runs(&self) -> Vec<(Option<f64>, u64, u64, bool)> {
        self.0
            .runs()
            .iter()
            .map(|r| (r.fraction, r.now_ns, r.ios, r.done))
            .collect()
    }
}

/// (name, description) of every device preset.
#[pyfunction]
fn sim_presets() -> Vec<(String, String)> {
    preset_names()
        .into_iter()
        .map(|n| {
            let d = DeviceConfig::from_text(preset_text(n).unwrap_or(""), n, &[])
                .map(|d| d.description)
                .unwrap_or_default();
            (n.to_string(), d)
        })
        .collect()
}

/// The text of a preset.
#[pyfunction]
fn sim_preset_text(name: &str) -> Option<&'static str> {
    preset_text(name)
}

/// Every device-file tunable: (section, key, unit, default, help).
#[pyfunction]
fn sim_tunables() -> Vec<(String, String, String, String, String)> {
    let mut out = Vec::new();
    for (section, table) in all_tables() {
        for t in table {
            out.push((
                section.clone(),
                t.name.to_string(),
                t.unit.label().to_string(),
                t.default.to_string(),
                t.help.to_string(),
            ));
        }
    }
    out
}

/// The tunables reference as Markdown for the named media models (all when None).
#[pyfunction]
#[pyo3(signature = (models=None))]
fn sim_tunables_markdown(models: Option<Vec<String>>) -> String {
    let names: Option<Vec<&str>> = models
        .as_ref()
        .map(|m| m.iter().map(|s| s.as_str()).collect());
    tunables_markdown_for(names.as_deref())
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add("SimInputError", m.py().get_type::<SimInputError>())?;
    m.add_function(wrap_pyfunction!(sim_run, m)?)?;
    m.add_class::<SimProgress>()?;
    m.add_function(wrap_pyfunction!(fio_parse, m)?)?;
    m.add_function(wrap_pyfunction!(fio_options, m)?)?;
    m.add_function(wrap_pyfunction!(sim_presets, m)?)?;
    m.add_function(wrap_pyfunction!(sim_preset_text, m)?)?;
    m.add_function(wrap_pyfunction!(sim_tunables, m)?)?;
    m.add_function(wrap_pyfunction!(sim_tunables_markdown, m)?)?;
    Ok(())
}
