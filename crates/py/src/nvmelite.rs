//! `qoslab._core.nvmelite`: the NVMe-lite model, runs, replays and the run matrix.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyKeyError, PyKeyboardInterrupt, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use qoslab_nvmelite::log::{LinePieces, push_hex};
use qoslab_nvmelite::matrix::{self, MatrixError, MatrixSpec, RunCursor, WriteOptions};
use qoslab_nvmelite::params::{self, Bound as BoundK, FaultMode, ParamError, SubmitWindow};
use qoslab_nvmelite::{LogUse, RunOptions, RunOutput, RunParams, Runner};
use qoslab_nvmelite::{sampling, schedule, search};

create_exception!(
    nvmelite,
    WorkloadError,
    PyValueError,
    "args: (message, field, line)"
);
create_exception!(
    nvmelite,
    ParamsError,
    PyValueError,
    "args: (message, field, index)"
);
create_exception!(
    nvmelite,
    ScheduleError,
    PyValueError,
    "args: (message, line)"
);

fn param_err(field: &str, index: Option<usize>, e: ParamError) -> PyErr {
    ParamsError::new_err((e.to_string(), field.to_string(), index))
}

/// A parsed, validated workload.
#[pyclass(frozen, module = "qoslab._core.nvmelite")]
struct Workload(Arc<qoslab_nvmelite::Workload>);

#[pymethods]
impl Workload {
    /// Parses workload JSON bytes strictly (spec §1.2); raises WorkloadError.
    #[staticmethod]
    fn from_json(data: &[u8]) -> PyResult<Self> {
        qoslab_nvmelite::Workload::from_json(data)
            .map(|w| Workload(Arc::new(w)))
            .map_err(|e| WorkloadError::new_err((e.message, e.field, e.line)))
    }

    #[getter]
    fn seed_id(&self) -> &str {
        &self.0.seed_id
    }

    #[getter]
    fn n_cmds(&self) -> usize {
        self.0.len()
    }
}

/// One run's outputs.
#[pyclass(frozen, module = "qoslab._core.nvmelite")]
struct RunResult(RunOutput);

#[pymethods]
impl RunResult {
    #[getter]
    fn run_id(&self) -> &str {
        &self.0.run_id
    }
    /// The log bytes, or None when not asked for.
    #[getter]
    fn log<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.0.log.as_deref().map(|b| PyBytes::new(py, b))
    }
    #[getter]
    fn log_sha256(&self) -> String {
        self.0.log_sha256_hex()
    }
    /// qoslab's schedule file text (the schedule actually followed, for a replay).
    #[getter]
    fn schedule(&self) -> Option<&str> {
        self.0.schedule.as_deref()
    }
    /// The reference's JSON schedule record (spec §8).
    #[getter]
    fn reference_schedule(&self) -> Option<&str> {
        self.0.reference_schedule.as_deref()
    }
    /// The runs.csv row (no line ending).
    #[getter]
    fn row(&self) -> String {
        self.0.csv_row()
    }
    #[getter]
    fn rng_draws(&self) -> u64 {
        self.0.rng_draws
    }
    /// The metrics as a dict keyed by runs.csv column names.
    #[getter]
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = &self.0.metrics;
        let d = PyDict::new(py);
        d.set_item("p95_latency_step", m.p95_latency_step)?;
        d.set_item("mean_latency_step", m.mean_latency_step)?;
        d.set_item("max_latency_step", m.max_latency_step)?;
        d.set_item("RD", m.rd)?;
        d.set_item("FE", m.fe)?;
        d.set_item("pending_peak", m.pending_peak)?;
        d.set_item("pending_area", m.pending_area)?;
        d.set_item("n_ok", m.n_ok)?;
        d.set_item("n_err", m.n_err)?;
        d.set_item("n_timeout", m.n_timeout)?;
        d.set_item("completion_rate", m.completion_rate)?;
        Ok(d)
    }
}

fn options(log: bool, schedule: bool, reference_schedule: bool) -> RunOptions {
    RunOptions {
        log,
        schedule,
        reference_schedule,
    }
}

/// Runs one NVMe-lite run; parameters use the spellings of spec §2 (raises ParamsError).
#[pyfunction]
#[pyo3(signature = (workload, policy, bound_k, fault_mode, schedule_seed, submit_window="inf",
    scheduler_version="v1.0", git_commit="", log=true, schedule=false, reference_schedule=false))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    workload: &Workload,
    policy: &str,
    bound_k: &str,
    fault_mode: &str,
    schedule_seed: &str,
    submit_window: &str,
    scheduler_version: &str,
    git_commit: &str,
    log: bool,
    schedule: bool,
    reference_schedule: bool,
) -> PyResult<RunResult> {
    let params = RunParams {
        schedule_seed: params::parse_seed(schedule_seed).map_err(|e| param_err("seed", None, e))?,
        policy: params::parse_policy(policy).map_err(|e| param_err("policy", None, e))?,
        bound: BoundK::parse(bound_k).map_err(|e| param_err("bound", None, e))?,
        fault: FaultMode::parse(fault_mode).map_err(|e| param_err("fault", None, e))?,
        submit_window: SubmitWindow::parse(submit_window)
            .map_err(|e| param_err("submit-window", None, e))?,
        scheduler_version: scheduler_version.to_string(),
        git_commit: git_commit.to_string(),
    };
    let w = workload.0.clone();
    let opts = options(log, schedule, reference_schedule);
    Ok(RunResult(
        py.detach(|| Runner::new().run(&w, &params, opts)),
    ))
}

/// Replays a schedule file. strict=False is the lenient repair mode: the result's `schedule`
/// is the schedule actually followed. Raises ScheduleError(message, line).
#[pyfunction]
#[pyo3(signature = (workload, schedule_text, strict=true, log=true, reference_schedule=false))]
fn replay(
    py: Python<'_>,
    workload: &Workload,
    schedule_text: &str,
    strict: bool,
    log: bool,
    reference_schedule: bool,
) -> PyResult<RunResult> {
    let w = workload.0.clone();
    let opts = options(log, true, reference_schedule);
    py.detach(|| Runner::new().replay(&w, schedule_text, strict, opts))
        .map(RunResult)
        .map_err(|e| ScheduleError::new_err((e.message, e.line)))
}

/// A schedule file's header values (a dict in header order, unescaped) and its step lines
/// (verbatim); raises ScheduleError(message, line) when the file has no such structure.
#[pyfunction]
fn schedule_split<'py>(py: Python<'py>, text: &str) -> PyResult<(Bound<'py, PyDict>, Vec<String>)> {
    let (values, steps) =
        schedule::split(text).map_err(|e| ScheduleError::new_err((e.message, e.line)))?;
    let header = PyDict::new(py);
    for (key, value) in schedule::HEADER_KEYS.iter().zip(values) {
        header.set_item(key, value)?;
    }
    Ok((header, steps.into_iter().map(str::to_string).collect()))
}

/// A schedule file from header values keyed as `SCHEDULE_HEADER_KEYS` (all of them, unescaped)
/// and step lines; raises KeyError for a missing key and ValueError for an unknown one.
#[pyfunction]
fn schedule_compose(header: &Bound<'_, PyDict>, steps: Vec<String>) -> PyResult<String> {
    let mut values: [String; 8] = Default::default();
    for (i, key) in schedule::HEADER_KEYS.iter().enumerate() {
        values[i] = header
            .get_item(key)?
            .ok_or_else(|| PyKeyError::new_err(*key))?
            .extract()?;
    }
    if header.len() != values.len() {
        return Err(PyValueError::new_err(format!(
            "schedule header keys are {}",
            schedule::HEADER_KEYS.join(", ")
        )));
    }
    let values: [&str; 8] = std::array::from_fn(|i| values[i].as_str());
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    Ok(schedule::compose(&values, &steps))
}

fn search_params(
    bound_k: &str,
    fault_mode: &str,
    submit_window: &str,
    scheduler_version: &str,
    git_commit: &str,
) -> PyResult<RunParams> {
    Ok(search::schedule_params(
        BoundK::parse(bound_k).map_err(|e| param_err("bound", None, e))?,
        FaultMode::parse(fault_mode).map_err(|e| param_err("fault", None, e))?,
        SubmitWindow::parse(submit_window).map_err(|e| param_err("submit-window", None, e))?,
        scheduler_version,
        git_commit,
    ))
}

fn metric(name: &str) -> PyResult<&'static search::MetricOps> {
    search::lookup(name).ok_or_else(|| {
        let names: Vec<&str> = search::REGISTRY.iter().map(|m| m.name).collect();
        ParamsError::new_err((
            format!("expected {}, got '{name}'", names.join(", ")),
            "metric".to_string(),
            None::<usize>,
        ))
    })
}

/// The result of a worst-case search.
#[pyclass(frozen, module = "qoslab._core.nvmelite")]
struct WorstResult(search::Worst);

#[pymethods]
impl WorstResult {
    /// "optimal" when every branch closed, else "best found".
    #[getter]
    fn certificate(&self) -> &'static str {
        if self.0.outcome.optimal() {
            "optimal"
        } else {
            "best found"
        }
    }
    /// The metric of the best schedule's replay (None when nothing was found above the floor).
    #[getter]
    fn value(&self) -> Option<f64> {
        self.0.value
    }
    /// No schedule has a larger metric.
    #[getter]
    fn upper_bound(&self) -> f64 {
        self.0.outcome.upper_bound.to_f64()
    }
    /// Why the search ended: "closed", "node limit" or "time limit".
    #[getter]
    fn stop(&self) -> &'static str {
        match self.0.outcome.stop {
            search::Stop::Closed => "closed",
            search::Stop::NodeLimit => "node limit",
            search::Stop::TimeLimit => "time limit",
        }
    }
    #[getter]
    fn nodes(&self) -> u64 {
        self.0.outcome.nodes
    }
    #[getter]
    fn elapsed_s(&self) -> f64 {
        self.0.outcome.elapsed.as_secs_f64()
    }
    /// The replay of the best schedule (its log, schedule file and metrics), or None.
    #[getter]
    fn run(&self) -> Option<RunResult> {
        self.0.run.clone().map(RunResult)
    }
}

/// The schedule maximising `metric` under the bound, fault and window, by branch and bound.
/// `floor`: only schedules with a metric above it are sought. Raises ParamsError, ValueError.
#[pyfunction]
#[pyo3(signature = (workload, metric_name, bound_k, fault_mode="NONE", submit_window="inf",
    time_limit_s=None, node_limit=None, floor=None, scheduler_version="v1.0", git_commit=""))]
#[allow(clippy::too_many_arguments)]
fn worst(
    py: Python<'_>,
    workload: &Workload,
    metric_name: &str,
    bound_k: &str,
    fault_mode: &str,
    submit_window: &str,
    time_limit_s: Option<f64>,
    node_limit: Option<u64>,
    floor: Option<(u64, u64)>,
    scheduler_version: &str,
    git_commit: &str,
) -> PyResult<WorstResult> {
    let params = search_params(
        bound_k,
        fault_mode,
        submit_window,
        scheduler_version,
        git_commit,
    )?;
    let metric = metric(metric_name)?;
    let limits = search::Limits {
        node_limit,
        time_limit: time_limit_s.map(std::time::Duration::from_secs_f64),
        floor: floor.map(|(num, den)| search::Ratio {
            num,
            den: den.max(1),
        }),
        ..search::Limits::default()
    };
    let w = workload.0.clone();
    py.detach(|| search::worst(&w, &params, metric, limits))
        .map(WorstResult)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Each sampling strategy (the policies, then GUIDED) over seeds 0..samples: a list of dicts
/// with strategy, best, best_seed and reached_after (runs until the best reached `target`).
#[pyfunction]
#[pyo3(signature = (workload, metric_name, bound_k, fault_mode, submit_window, samples, target))]
#[allow(clippy::too_many_arguments)]
fn race<'py>(
    py: Python<'py>,
    workload: &Workload,
    metric_name: &str,
    bound_k: &str,
    fault_mode: &str,
    submit_window: &str,
    samples: u64,
    target: f64,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let params = search_params(bound_k, fault_mode, submit_window, "v1.0", "")?;
    let metric = metric(metric_name)?;
    let w = workload.0.clone();
    let rows = py.detach(|| sampling::race(&w, &params, metric, samples, target));
    rows.into_iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("strategy", r.strategy)?;
            d.set_item("samples", r.samples)?;
            d.set_item("best", r.best)?;
            d.set_item("best_seed", r.best_seed)?;
            d.set_item("reached_after", r.reached_after)?;
            Ok(d)
        })
        .collect()
}

/// The columns `run_batch` returns, in order: (name, kind), kind "f64" or "u64".
const BATCH_METRICS: [(&str, &str); 11] = [
    ("p95_latency_step", "f64"),
    ("mean_latency_step", "f64"),
    ("max_latency_step", "f64"),
    ("RD", "f64"),
    ("FE", "f64"),
    ("pending_peak", "u64"),
    ("pending_area", "u64"),
    ("n_ok", "u64"),
    ("n_err", "u64"),
    ("n_timeout", "u64"),
    ("completion_rate", "f64"),
];

/// Runs many runs on the calling thread (a sweep's worker brings its own parallelism) and
/// returns them as columns, so that a million runs cost no Python object each.
///
/// `configs` holds (workload index, policy, bound, fault, submit_window, scheduler_version,
/// git_commit) in the spellings of spec §2; run i is `configs[config_index[i]]` with schedule
/// seed `seeds[i]`. A bad config raises ParamsError(message, field, config index). Returns a
/// dict of bytes: each metric of `BATCH_METRICS` as little-endian f64 or u64 values,
/// `log_sha256` as 64 hex digits per run, `run_id` as the UTF-8 ids end to end and
/// `run_id_offsets` as n + 1 little-endian i64 offsets into it.
#[pyfunction]
fn run_batch<'py>(
    py: Python<'py>,
    workloads: Vec<PyRef<'_, Workload>>,
    configs: Vec<(usize, String, String, String, String, String, String)>,
    config_index: Vec<u32>,
    seeds: Vec<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    if config_index.len() != seeds.len() {
        return Err(PyValueError::new_err(
            "config_index and seeds differ in length",
        ));
    }
    let mut parsed = Vec::with_capacity(configs.len());
    for (i, (w, policy, bound, fault, window, version, commit)) in configs.iter().enumerate() {
        let workload = workloads
            .get(*w)
            .map(|w| w.0.clone())
            .ok_or_else(|| PyValueError::new_err(format!("configs[{i}]: no workload {w}")))?;
        let params = RunParams {
            schedule_seed: 0,
            policy: params::parse_policy(policy).map_err(|e| param_err("policy", Some(i), e))?,
            bound: BoundK::parse(bound).map_err(|e| param_err("bound", Some(i), e))?,
            fault: FaultMode::parse(fault).map_err(|e| param_err("fault", Some(i), e))?,
            submit_window: SubmitWindow::parse(window)
                .map_err(|e| param_err("submit_window", Some(i), e))?,
            scheduler_version: version.clone(),
            git_commit: commit.clone(),
        };
        parsed.push((workload, params, *w));
    }
    if let Some(&bad) = config_index.iter().find(|&&c| c as usize >= parsed.len()) {
        return Err(PyValueError::new_err(format!(
            "config_index {bad} out of range"
        )));
    }
    let n = seeds.len();
    let mut columns = vec![Vec::<u8>::with_capacity(n * 8); BATCH_METRICS.len()];
    let mut hashes = String::with_capacity(n * 64);
    let mut ids = String::with_capacity(n * 48);
    let mut offsets = Vec::<u8>::with_capacity((n + 1) * 8);
    // The lines every run of a workload shares, formatted once (as the matrix does).
    let pieces: Vec<LinePieces> = workloads.iter().map(|w| LinePieces::new(&w.0)).collect();
    py.detach(|| {
        let mut runner = Runner::new();
        offsets.extend_from_slice(&0i64.to_le_bytes());
        for (&c, &seed) in config_index.iter().zip(&seeds) {
            let (workload, params, w) = &mut parsed[c as usize];
            params.schedule_seed = seed;
            let run_id = params.run_id(&workload.seed_id);
            let piece = &pieces[*w];
            let (m, digest, _) =
                runner.run_summary_with(workload, Some(piece), params, &run_id, LogUse::Hash);
            let values = [
                m.p95_latency_step.to_le_bytes(),
                m.mean_latency_step.to_le_bytes(),
                m.max_latency_step.to_le_bytes(),
                m.rd.to_le_bytes(),
                m.fe.to_le_bytes(),
                m.pending_peak.to_le_bytes(),
                m.pending_area.to_le_bytes(),
                m.n_ok.to_le_bytes(),
                m.n_err.to_le_bytes(),
                m.n_timeout.to_le_bytes(),
                m.completion_rate.to_le_bytes(),
            ];
            for (column, v) in columns.iter_mut().zip(values) {
                column.extend_from_slice(&v);
            }
            push_hex(&mut hashes, &digest.expect("LogUse::Hash gives the digest"));
            ids.push_str(&run_id);
            offsets.extend_from_slice(&(ids.len() as i64).to_le_bytes());
        }
    });
    let d = PyDict::new(py);
    for ((name, _), column) in BATCH_METRICS.iter().zip(&columns) {
        d.set_item(*name, PyBytes::new(py, column))?;
    }
    d.set_item("log_sha256", PyBytes::new(py, hashes.as_bytes()))?;
    d.set_item("run_id", PyBytes::new(py, ids.as_bytes()))?;
    d.set_item("run_id_offsets", PyBytes::new(py, &offsets))?;
    Ok(d)
}

fn pool(jobs: Option<usize>) -> PyResult<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = jobs {
        b = b.num_threads(n.max(1));
    }
    b.build().map_err(|e| PyOSError::new_err(e.to_string()))
}

/// A planned run matrix (spec §11 after config parsing).
#[pyclass(frozen, module = "qoslab._core.nvmelite")]
struct Matrix(Arc<matrix::Matrix>);

#[pymethods]
impl Matrix {
    /// Values are the config's literal texts; a bad one raises ParamsError(message, field, index).
    #[new]
    #[pyo3(signature = (workloads, policies, bounds, faults, schedule_seeds, submit_window="inf",
        scheduler_version="v1.0", git_commit=""))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        workloads: Vec<PyRef<'_, Workload>>,
        policies: Vec<String>,
        bounds: Vec<String>,
        faults: Vec<String>,
        schedule_seeds: &str,
        submit_window: &str,
        scheduler_version: &str,
        git_commit: &str,
    ) -> PyResult<Self> {
        fn each<T>(
            field: &str,
            items: &[String],
            parse: impl Fn(&str) -> Result<T, ParamError>,
        ) -> PyResult<Vec<T>> {
            items
                .iter()
                .enumerate()
                .map(|(i, s)| parse(s).map_err(|e| param_err(field, Some(i), e)))
                .collect()
        }
        let spec = MatrixSpec {
            workloads: workloads.iter().map(|w| w.0.clone()).collect(),
            policies: each("policies", &policies, params::parse_policy)?,
            bounds: each("bounds", &bounds, BoundK::parse)?,
            faults: each("faults", &faults, FaultMode::parse)?,
            seeds: params::parse_seed_range(schedule_seeds)
                .map_err(|e| param_err("schedule_seeds", None, e))?,
            submit_window: SubmitWindow::parse(submit_window)
                .map_err(|e| param_err("submit-window", None, e))?,
            scheduler_version: scheduler_version.to_string(),
            git_commit: git_commit.to_string(),
        };
        Ok(Matrix(Arc::new(matrix::Matrix::new(spec))))
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.0.len()).unwrap_or(usize::MAX)
    }

    /// Number of runs, exactly (a range of schedule seeds may hold up to 2^64 of them, which
    /// `len()` cannot say).
    #[getter]
    fn runs(&self) -> u128 {
        self.0.len()
    }

    /// Iterates over every run in runs.csv order, computed `chunk` runs at a time in parallel.
    #[pyo3(signature = (log=true, schedule=true, reference_schedule=false, chunk=4096, jobs=None))]
    fn iter_runs(
        &self,
        log: bool,
        schedule: bool,
        reference_schedule: bool,
        chunk: usize,
        jobs: Option<usize>,
    ) -> PyResult<MatrixRuns> {
        Ok(MatrixRuns {
            matrix: self.0.clone(),
            opts: options(log, schedule, reference_schedule),
            chunk: chunk.max(1),
            pool: pool(jobs)?,
            state: std::sync::Mutex::new((RunCursor::default(), std::collections::VecDeque::new())),
        })
    }

    /// Runs the matrix into the existing empty directory `out_dir` (runs.csv, logs/,
    /// schedules/, tables). `progress(done, total)` is called between blocks. Returns a dict
    /// with `runs` and `cliffs`. `log_sha256=False` (with `logs=False`): metrics-only runs,
    /// runs.csv's `log_sha256` column left empty.
    #[pyo3(signature = (out_dir, logs=true, top_k=10, jobs=None, progress=None, block_runs=4096,
        exact_nodes=WriteOptions::default().exact_nodes, log_sha256=true))]
    #[allow(clippy::too_many_arguments)]
    fn write<'py>(
        &self,
        py: Python<'py>,
        out_dir: PathBuf,
        logs: bool,
        top_k: usize,
        jobs: Option<usize>,
        progress: Option<Py<PyAny>>,
        block_runs: usize,
        exact_nodes: u64,
        log_sha256: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opts = WriteOptions {
            logs,
            log_sha256,
            top_k,
            block_runs,
            threads: jobs,
            exact_nodes,
        };
        let m = self.0.clone();
        let mut py_err: Option<PyErr> = None;
        let result = py.detach(|| {
            let mut report = |done: u64, total: u64| -> bool {
                Python::attach(|py| {
                    let outcome = py.check_signals().and_then(|()| match &progress {
                        Some(cb) => cb.call1(py, (done, total)).map(|_| ()),
                        None => Ok(()),
                    });
                    match outcome {
                        Ok(()) => true,
                        Err(e) => {
                            py_err = Some(e);
                            false
                        }
                    }
                })
            };
            matrix::write_matrix(&m, &out_dir, &opts, &mut report)
        });
        match result {
            Ok(summary) => {
                let d = PyDict::new(py);
                d.set_item("runs", summary.runs)?;
                d.set_item("cliffs", summary.cliffs)?;
                d.set_item("poison", summary.poison.len())?;
                Ok(d)
            }
            Err(MatrixError::Cancelled) => {
                Err(py_err.unwrap_or_else(|| PyKeyboardInterrupt::new_err("cancelled")))
            }
            // The one-line error the command prints (a notebook gets the same line).
            Err(e @ MatrixError::Io { .. }) => Err(input_error(py, format!("cannot write: {e}"))),
        }
    }
}

/// qoslab's `InputError` (qoslab/errors.py), the error every library call raises for bad input,
/// with its one line; an `OSError` if that module cannot be loaded.
fn input_error(py: Python<'_>, message: String) -> PyErr {
    match py
        .import("qoslab.errors")
        .and_then(|m| m.getattr("InputError"))
        .and_then(|cls| cls.call1((message.as_str(),)))
    {
        Ok(err) => PyErr::from_value(err),
        Err(_) => PyOSError::new_err(message),
    }
}

/// Iterator over a matrix's runs (RunResult objects).
#[pyclass(module = "qoslab._core.nvmelite")]
struct MatrixRuns {
    matrix: Arc<matrix::Matrix>,
    opts: RunOptions,
    chunk: usize,
    pool: rayon::ThreadPool,
    state: std::sync::Mutex<(RunCursor, std::collections::VecDeque<RunOutput>)>,
}

#[pymethods]
impl MatrixRuns {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> Option<RunResult> {
        let mut state = self.state.lock().unwrap();
        if state.1.is_empty() {
            let (cursor, queue) = &mut *state;
            let m = &self.matrix;
            let specs = m.next_runs(cursor, self.chunk);
            let outs = py.detach(|| self.pool.install(|| m.execute(&specs, self.opts)));
            queue.extend(outs);
        }
        state.1.pop_front().map(RunResult)
    }
}

pub fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = parent.py();
    let m = PyModule::new(py, "nvmelite")?;
    m.add_class::<Workload>()?;
    m.add_class::<RunResult>()?;
    m.add_class::<Matrix>()?;
    m.add_class::<MatrixRuns>()?;
    m.add_function(wrap_pyfunction!(run, &m)?)?;
    m.add_function(wrap_pyfunction!(replay, &m)?)?;
    m.add_function(wrap_pyfunction!(schedule_split, &m)?)?;
    m.add_function(wrap_pyfunction!(worst, &m)?)?;
    m.add_function(wrap_pyfunction!(race, &m)?)?;
    m.add_class::<WorstResult>()?;
    m.add(
        "METRICS",
        search::REGISTRY
            .iter()
            .map(|m| (m.name, m.help))
            .collect::<Vec<_>>(),
    )?;
    m.add_function(wrap_pyfunction!(schedule_compose, &m)?)?;
    m.add("SCHEDULE_HEADER_KEYS", schedule::HEADER_KEYS.to_vec())?;
    m.add_function(wrap_pyfunction!(run_batch, &m)?)?;
    m.add("BATCH_METRICS", BATCH_METRICS.to_vec())?;
    m.add("WorkloadError", py.get_type::<WorkloadError>())?;
    m.add("ParamsError", py.get_type::<ParamsError>())?;
    m.add("ScheduleError", py.get_type::<ScheduleError>())?;
    m.add("RUNS_CSV_HEADER", qoslab_nvmelite::RUNS_CSV_HEADER)?;
    m.add(
        "POLICIES",
        qoslab_nvmelite::policy::REGISTRY
            .iter()
            .map(|p| (p.name, p.help))
            .collect::<Vec<_>>(),
    )?;
    parent.add_submodule(&m)
}
