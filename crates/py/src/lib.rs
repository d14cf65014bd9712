//! `qoslab._core`: the Rust models exposed to Python. Each study adds a submodule here;
//! conversion between Python and Rust values is all this crate does.

// The job description of `sim::job_json` is one large `json!` literal.
#![recursion_limit = "256"]

use pyo3::prelude::*;

mod fs;
mod nvmelite;
mod panics;
mod plm;
mod rio;
mod sim;
mod units;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    panics::register(m)?;
    fs::register(m)?;
    nvmelite::register(m)?;
    rio::register(m)?;
    sim::register(m)?;
    units::register(m)?;
    plm::register(m)?;
    Ok(())
}
