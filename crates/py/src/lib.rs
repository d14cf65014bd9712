//! `qoslab._core`: the Rust models exposed to Python. Each study adds a submodule here;
//! conversion between Python and Rust values is all this crate does.

use pyo3::prelude::*;

mod sim;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    sim::register(m)?;
    Ok(())
}
