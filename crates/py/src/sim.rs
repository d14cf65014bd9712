//! `qoslab._core` bindings of the timed simulator (`crates/sim`): run a job file or a trace on
//! a device, list presets and tunables. Conversion only; the model lives in `crates/sim`.

use std::path::PathBuf;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use qoslab_sim::TraceFormat;
use qoslab_sim::device::{all_tables, preset_names, preset_text, tunables_markdown_for};
use qoslab_sim::{DeviceConfig, OutputFormat, SeriesSpec, SimError, SimOptions, WorkloadSpec};

pyo3::create_exception!(
    _core,
    SimInputError,
    PyException,
    "Bad simulator input: args are (message, path or None, line or None)."
);

fn to_py(e: SimError) -> PyErr {
    let path = e.path.map(|p| p.display().to_string());
    SimInputError::new_err((e.message, path, e.line))
}

/// Runs `qoslab sim`, writing the time series as CSV to `series_path` (every
/// `series_interval_ms`) if given; `trace` is a list of traces, trace i on host i. Returns a
/// dict: text, ios, events, max_outstanding.
#[pyfunction]
#[pyo3(signature = (
    device, sets, seed, repeat, output_format,
    jobfile=None, trace=None, trace_format=None, speed=1.0, qd_cap=0,
    series_path=None, series_interval_ms=100.0, progress=false
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
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let format = OutputFormat::from_name(output_format).ok_or_else(|| {
        to_py(SimError::new(format!(
            "--output-format: expected normal, json or json+, got '{output_format}'"
        )))
    })?;
    let workload = match (jobfile, trace) {
        (Some(path), None) => WorkloadSpec::job_file(&path).map_err(to_py)?,
        (None, Some(paths)) if !paths.is_empty() => {
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
    let device = DeviceConfig::load(device, &sets).map_err(|e| to_py(e.into()))?;
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
        progress,
    };
    let out = py.detach(|| qoslab_sim::run(&opts)).map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("text", out.text)?;
    d.set_item("ios", out.ios)?;
    d.set_item("events", out.events)?;
    d.set_item("max_outstanding", out.max_outstanding)?;
    Ok(d)
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
    m.add_function(wrap_pyfunction!(sim_presets, m)?)?;
    m.add_function(wrap_pyfunction!(sim_preset_text, m)?)?;
    m.add_function(wrap_pyfunction!(sim_tunables, m)?)?;
    m.add_function(wrap_pyfunction!(sim_tunables_markdown, m)?)?;
    Ok(())
}
