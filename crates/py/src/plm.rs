//! `qoslab plm`: the PLM coordinator run window by window over known demands.

use std::path::PathBuf;

use pyo3::prelude::*;
use qoslab_nvme::plm::allocation::{AllocationSetup, lookup};
use qoslab_nvme::plm::{Coordinator, DemandTable, Predictor, coordinate};
use qoslab_sim::SimError;

use crate::sim::to_py;

/// One output row: window, host, predicted, requested, allocated, extra, consumed,
/// deficiency, utilization.
type Row = (String, String, f64, u64, u64, u64, u64, f64, f64);

/// Runs the coordinator over the demands of `demands_path` (`window,host,class,demand`) and
/// returns one row per window and host, windows in order, hosts in order of first appearance.
#[pyfunction]
#[pyo3(signature = (demands_path, capacity, predictor, zeta, policy, ratios, min_share, initial=None))]
#[allow(clippy::too_many_arguments)]
fn plm_coordinate(
    demands_path: PathBuf,
    capacity: u64,
    predictor: &str,
    zeta: f64,
    policy: &str,
    ratios: [f64; 3],
    min_share: f64,
    initial: Option<f64>,
) -> PyResult<Vec<Row>> {
    let table = DemandTable::read(&demands_path).map_err(to_py)?;
    let predictor = match predictor {
        "exact" => Predictor::Exact,
        "ewma" => Predictor::Ewma { zeta },
        other => {
            return Err(to_py(SimError::new(format!(
                "--predictor: expected exact or ewma, got '{other}'"
            ))));
        }
    };
    let ops = lookup("--policy", policy).map_err(to_py)?;
    let build = ops.build.expect("checked by the registry");
    let mut c = Coordinator::new(
        &table.classes,
        capacity,
        predictor,
        min_share,
        initial,
        build(&AllocationSetup { ratios }),
    );
    let windows = coordinate(&mut c, &table.demand);
    let mut rows = Vec::with_capacity(windows.len() * table.hosts.len());
    for (name, hosts) in table.windows.iter().zip(&windows) {
        for (host, w) in table.hosts.iter().zip(hosts) {
            rows.push((
                name.clone(),
                host.clone(),
                w.predicted,
                w.requested,
                w.allocated,
                w.extra,
                w.consumed,
                w.deficiency(),
                w.utilization(),
            ));
        }
    }
    Ok(rows)
}

/// The allocation policies: (name, help).
#[pyfunction]
fn plm_policies() -> Vec<(String, String)> {
    qoslab_nvme::plm::allocation::ALLOCATIONS
        .iter()
        .map(|a| (a.name.to_string(), a.help.to_string()))
        .collect()
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plm_coordinate, m)?)?;
    m.add_function(wrap_pyfunction!(plm_policies, m)?)?;
    Ok(())
}
