//! `qoslab._core.rio`: the ordered-write stacks over NVMe-oF and their crash checker
//! (`crates/fabric`). Conversion only.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use qoslab_fabric::check::{
    CheckSpec, Crash, Reproducer, crash_check as run_check, replay as run_replay,
};
use qoslab_fabric::workload::Shape;
use qoslab_fabric::{FABRIC_TUNABLES, FabricConfig, stack};

/// The stack called `name`, or a ValueError naming `--stack` and the stacks there are.
fn lookup_stack(name: &str) -> PyResult<&'static stack::StackOps> {
    stack::lookup(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "--stack: expected {}, got '{name}'",
            stack::names()
        ))
    })
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
