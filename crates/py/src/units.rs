//! The one size dialect (`qoslab_engine::units`), for the parts of qoslab written in Python.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use qoslab_engine::units::{KbBase, parse_size as parse};

/// Bytes from a size as fio reads it (`4k`, `10G`, `0x1000`; `kb_base` 1024 or 1000).
#[pyfunction]
#[pyo3(signature = (text, kb_base = 1024))]
fn parse_size(text: &str, kb_base: u32) -> PyResult<u64> {
    let base = match kb_base {
        1024 => KbBase::Binary,
        1000 => KbBase::Decimal,
        other => {
            return Err(PyValueError::new_err(format!(
                "kb_base: expected 1000 or 1024, got {other}"
            )));
        }
    };
    parse(text, base).map_err(PyValueError::new_err)
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    // The one limit on times (qoslab.limits reads it from here).
    m.add("MAX_TIME_NS", qoslab_engine::time::MAX_TIME_NS)?;
    Ok(())
}
