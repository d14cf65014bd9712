//! `qoslab._core.fs`: the page cache and file systems (`crates/fs`) and their crash checker.
//! Conversion only.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;
use serde_json::json;

use qoslab_engine::{RawValue, Settings};
use qoslab_fs::check::{SmallWorkload, check_workload};
use qoslab_fs::{FS_TUNABLES, FsConfig, JOURNALS};

/// Runs the crash checker over `workloads` seeded workloads; returns the report as JSON.
/// `sets` are `KEY=VALUE` of the file system's own table (`barrier`) or of `[fs]`
/// (`fs.KEY`). Bad input raises ValueError naming the option.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn crash_check(
    py: Python<'_>,
    fs: &str,
    sets: Vec<(String, String)>,
    workloads: u64,
    seed: u64,
    threads: u32,
    calls: u32,
    names: u32,
) -> PyResult<String> {
    let ops = qoslab_fs::journal::lookup(fs).map_err(|e| {
        PyValueError::new_err(format!(
            "--fs: {}",
            e.message.replace("field 'fs.type': ", "")
        ))
    })?;
    let mut fs_s = Settings::defaults("fs", FS_TUNABLES);
    let mut own = Settings::defaults(&format!("fs.{fs}"), ops.tunables);
    for (k, v) in &sets {
        let r = match k.strip_prefix("fs.") {
            Some(key) => fs_s.set(key, &RawValue::from_cli(v)),
            None => own.set(k, &RawValue::from_cli(v)),
        };
        r.map_err(|e| PyValueError::new_err(format!("--set: {e}")))?;
    }
    if threads == 0 || calls == 0 || names == 0 {
        return Err(PyValueError::new_err(
            "--threads, --calls and --names: expected at least 1",
        ));
    }
    let cfg = FsConfig::from_settings(&fs_s);
    let w = SmallWorkload {
        threads,
        calls,
        names,
    };
    let results = py.detach(|| {
        (0..workloads)
            .into_par_iter()
            .map(|k| check_workload(&cfg, ops, &own, &w, seed.wrapping_add(k)))
            .collect::<Vec<_>>()
    });
    let (mut points, mut states, mut bad, mut failed) = (0u64, 0u64, 0u64, 0u64);
    let mut reproducers = Vec::new();
    for r in &results {
        points += r.summary.crash_points;
        states += r.summary.states;
        bad += r.summary.violating_states;
        if r.summary.violating_states > 0 {
            failed += 1;
            if reproducers.len() < 3 {
                let (at, alive, what) = r.summary.violations[0].clone();
                reproducers.push(json!({
                    "seed": r.seed,
                    "crash_at_ns": at,
                    "surviving_writes": alive,
                    "problems": what,
                    "calls": r.calls.iter().map(|(s, e, t, c)| json!({"start_ns": s, "end_ns": e, "thread": t, "call": c})).collect::<Vec<_>>(),
                }));
            }
        }
    }
    let config: serde_json::Map<String, serde_json::Value> = fs_s
        .iter()
        .chain(own.iter())
        .map(|(k, v)| (k.to_string(), json!(v.to_string())))
        .collect();
    Ok(json!({
        "fs": fs,
        "config": config,
        "seed": seed,
        "workloads": workloads,
        "threads": threads,
        "calls_per_thread": calls,
        "names": names,
        "crash_points": points,
        "states": states,
        "violating_states": bad,
        "failing_workloads": failed,
        "reproducers": reproducers,
    })
    .to_string())
}

pub fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "fs")?;
    m.add_function(wrap_pyfunction!(crash_check, &m)?)?;
    m.add(
        "FILE_SYSTEMS",
        JOURNALS
            .iter()
            .map(|j| {
                (
                    j.name,
                    j.help,
                    j.tunables
                        .iter()
                        .map(|t| (t.name, t.unit.label(), t.default.to_string(), t.help))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>(),
    )?;
    m.add(
        "TUNABLES",
        FS_TUNABLES
            .iter()
            .map(|t| (t.name, t.unit.label(), t.default.to_string(), t.help))
            .collect::<Vec<_>>(),
    )?;
    parent.add_submodule(&m)?;
    Ok(())
}
