//! A panic of the Rust core is a bug. pyo3 raises it in Python as `PanicException`, which the
//! CLI reports as one line of "internal error" with the traceback in a file; Rust's default
//! hook would first print the panic's message and a backtrace hint on the user's terminal. This
//! hook keeps the message and its location for that file instead (`take_panic_report`).

use std::panic::{self, PanicHookInfo};
use std::sync::Mutex;

use pyo3::prelude::*;

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn record(info: &PanicHookInfo<'_>) {
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    let place = info
        .location()
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_else(|| "unknown place".into());
    let thread = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string();
    let report = format!("thread '{thread}' panicked at {place}: {message}");
    if let Ok(mut last) = LAST_PANIC.lock() {
        *last = Some(report);
    }
}

/// The most recent panic of the core ("thread 'x' panicked at FILE:LINE:COL: message"), and
/// forgets it; `None` if none happened.
#[pyfunction]
fn take_panic_report() -> Option<String> {
    LAST_PANIC.lock().ok().and_then(|mut last| last.take())
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    panic::set_hook(Box::new(record));
    m.add_function(wrap_pyfunction!(take_panic_report, m)?)?;
    Ok(())
}
