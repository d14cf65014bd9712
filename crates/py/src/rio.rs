//! `qoslab._core.rio`: the ordered-write stacks over NVMe-oF and their crash checker
//! (`crates/fabric`). Conversion only.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use qoslab_fabric::check::{
    CheckSpec, Crash, Reproducer, crash_check as run_check, replay as run_replay,
};
use qoslab_fabric::recovery_time::{RECOVERY_TUNABLES, RecoveryConfig};
use qoslab_fabric::workload::Shape;
use qoslab_fabric::{FABRIC_TUNABLES, FabricConfig, stack, timed};

/// The stack called `name`, or a ValueError naming `--stack` and the stacks there are.
fn lookup_stack(name: &str) -> PyResult<&'static stack::StackOps> {
    stack::lookup(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "--stack: expected {}, got '{name}'",
            stack::names()
        ))
    })
}

/// `--power-fail-at`'s simulated time, when given.
fn power_fail_time(text: Option<&str>) -> PyResult<Option<u64>> {
    text.map(|t| {
        qoslab_engine::units::parse_duration_ns(t).ok_or_else(|| {
            PyValueError::new_err(format!(
                "--power-fail-at: expected a simulated time like 150us or 2ms, got '{t}'"
            ))
        })
    })
    .transpose()
}

/// A bad `--set`: the one line says which option.
fn set_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("--set: {e}"))
}

/// Runs the crash checker; returns the summary as JSON. Bad input raises ValueError with
/// a one-line message naming the field.
#[pyfunction]
#[pyo3(signature = (stack_name, sets, workloads, seed, streams, writes_per_stream, max_blocks, exhaustive_limit, samples, reproducers, crash="power", target=None))]
#[allow(clippy::too_many_arguments)]
fn crash_check(
    py: Python<'_>,
    stack_name: &str,
    sets: Vec<(String, String)>,
    workloads: usize,
    seed: u64,
    streams: usize,
    writes_per_stream: usize,
    max_blocks: u32,
    exhaustive_limit: u64,
    samples: u64,
    reproducers: usize,
    crash: &str,
    target: Option<usize>,
) -> PyResult<String> {
    let crash = Crash::parse(crash).map_err(PyValueError::new_err)?;
    let stack = lookup_stack(stack_name)?;
    let cfg = FabricConfig::with_overrides(&sets).map_err(set_error)?;
    let spec = CheckSpec {
        stack,
        cfg,
        shape: Shape {
            streams,
            writes_per_stream,
            max_blocks,
            ..Shape::default()
        },
        workloads,
        seed,
        crash,
        target,
        exhaustive_limit,
        samples,
        reproducers,
    };
    let summary = py
        .detach(|| run_check(&spec))
        .map_err(PyValueError::new_err)?;
    serde_json::to_string_pretty(&summary).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One timed run of the document's ordered-write workload (`streams` threads of `writes`
/// writes of `blocks` blocks, in batches of `batch` consecutive ones, a FLUSH every
/// `persist_every`); returns what it measured as JSON, or, with `power_fail_at`, what a power
/// cut at that time left after recovery (with `crash_target` too: a crash of that target
/// alone).
#[pyfunction]
#[pyo3(signature = (stack_name, sets, streams, writes, blocks, batch, persist_every, seed, power_fail_at=None, crash_target=None))]
#[allow(clippy::too_many_arguments)]
fn timed_run(
    py: Python<'_>,
    stack_name: &str,
    sets: Vec<(String, String)>,
    streams: usize,
    writes: usize,
    blocks: u32,
    batch: usize,
    persist_every: usize,
    seed: u64,
    power_fail_at: Option<&str>,
    crash_target: Option<usize>,
) -> PyResult<String> {
    let power_fail_at_ns = power_fail_time(power_fail_at)?;
    let stack = lookup_stack(stack_name)?;
    let (cfg, t, c) = timed::configs(&sets).map_err(set_error)?;
    let rc = RecoveryConfig::with_overrides(&sets).map_err(set_error)?;
    let w = timed::ordered_writes(streams, writes, blocks, batch, persist_every, seed);
    let text = py.detach(|| match (power_fail_at_ns, crash_target) {
        (None, _) => timed::measure(&w, stack, &cfg, &t, c).map(|m| serde_json::to_string(&m)),
        (Some(at), None) => {
            timed::power_cut(&w, stack, &cfg, &t, c, &rc, at).map(|m| serde_json::to_string(&m))
        }
        (Some(at), Some(target)) => timed::target_crash(&w, stack, &cfg, &t, c, at, target)
            .map(|m| serde_json::to_string(&m)),
    });
    text.map_err(PyValueError::new_err)?
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One timed run of the same workload as `timed_run`, cut by a power failure at each of
/// `cuts_ns` in turn (the run goes on after each); returns the cuts as a JSON list.
#[pyfunction]
#[pyo3(signature = (stack_name, sets, streams, writes, blocks, batch, persist_every, seed, cuts_ns))]
#[allow(clippy::too_many_arguments)]
fn timed_cuts(
    py: Python<'_>,
    stack_name: &str,
    sets: Vec<(String, String)>,
    streams: usize,
    writes: usize,
    blocks: u32,
    batch: usize,
    persist_every: usize,
    seed: u64,
    cuts_ns: Vec<u64>,
) -> PyResult<String> {
    let stack = lookup_stack(stack_name)?;
    let (cfg, t, c) = timed::configs(&sets).map_err(set_error)?;
    let rc = RecoveryConfig::with_overrides(&sets).map_err(set_error)?;
    let w = timed::ordered_writes(streams, writes, blocks, batch, persist_every, seed);
    let cuts = py
        .detach(|| timed::power_cuts(&w, stack, &cfg, &t, c, &rc, &cuts_ns))
        .map_err(PyValueError::new_err)?;
    serde_json::to_string(&cuts).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Runs the jobs of a fio job file, each with its `ordering=`, alone on the timed machine;
/// returns one result per job as JSON (with `power_fail_at`, what a cut left).
#[pyfunction]
#[pyo3(signature = (jobfile, sets, seed, power_fail_at=None))]
fn timed_jobs(
    py: Python<'_>,
    jobfile: std::path::PathBuf,
    sets: Vec<(String, String)>,
    seed: u64,
    power_fail_at: Option<&str>,
) -> PyResult<String> {
    let at = power_fail_time(power_fail_at)?;
    let file = qoslab_workload::fio::parse_job_file(&jobfile, |n| std::env::var(n).ok())
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let results = py
        .detach(|| qoslab_fabric::jobs::run_jobs(&file, &sets, seed, at))
        .map_err(PyValueError::new_err)?;
    serde_json::to_string(&results).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Replays a reproducer (JSON text); returns the violations found after recovery, as JSON.
#[pyfunction]
fn replay(text: &str) -> PyResult<String> {
    let r: Reproducer = serde_json::from_str(text)
        .map_err(|e| PyValueError::new_err(format!("line {}: {e}", e.line())))?;
    let v = run_replay(&r).map_err(PyValueError::new_err)?;
    serde_json::to_string_pretty(&v).map_err(|e| PyValueError::new_err(e.to_string()))
}

pub fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "rio")?;
    m.add_function(wrap_pyfunction!(crash_check, &m)?)?;
    m.add_function(wrap_pyfunction!(replay, &m)?)?;
    m.add_function(wrap_pyfunction!(timed_run, &m)?)?;
    m.add_function(wrap_pyfunction!(timed_cuts, &m)?)?;
    m.add_function(wrap_pyfunction!(timed_jobs, &m)?)?;
    m.add(
        "RECOVERY_TUNABLES",
        RECOVERY_TUNABLES
            .iter()
            .map(|t| (t.name, t.unit.label(), t.default.to_string(), t.help))
            .collect::<Vec<_>>(),
    )?;
    m.add(
        "TIMED_TUNABLES",
        timed::TIMED_TUNABLES
            .iter()
            .map(|t| (t.name, t.unit.label(), t.default.to_string(), t.help))
            .collect::<Vec<_>>(),
    )?;
    // The crash checker's defaults, so the command line shows and uses the checker's own.
    let shape = Shape::default();
    m.add(
        "CHECK_DEFAULTS",
        [
            ("workloads", CheckSpec::DEFAULT_WORKLOADS as u64),
            ("seed", CheckSpec::DEFAULT_SEED),
            ("streams", shape.streams as u64),
            ("writes", shape.writes_per_stream as u64),
            ("max_blocks", u64::from(shape.max_blocks)),
            ("exhaustive_limit", CheckSpec::DEFAULT_EXHAUSTIVE_LIMIT),
            ("samples", CheckSpec::DEFAULT_SAMPLES),
            ("reproducers", CheckSpec::DEFAULT_REPRODUCERS as u64),
        ]
        .into_iter()
        .collect::<std::collections::HashMap<_, _>>(),
    )?;
    m.add("MAX_BLOCKS", CheckSpec::MAX_BLOCKS)?;
    m.add(
        "STACKS",
        stack::STACKS
            .iter()
            .map(|s| (s.name, s.help))
            .collect::<Vec<_>>(),
    )?;
    m.add(
        "TUNABLES",
        FABRIC_TUNABLES
            .iter()
            .map(|t| (t.name, t.unit.label(), t.default.to_string(), t.help))
            .collect::<Vec<_>>(),
    )?;
    parent.add_submodule(&m)
}
