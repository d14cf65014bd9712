//! Helpers shared by the simulator's integration tests.
#![allow(dead_code)]

use std::path::Path;

use qoslab_sim::{DeviceConfig, OutputFormat, SimOptions, WorkloadSpec};
use serde_json::Value;

/// What the path's tests put before their jobs: they drive the device at the depths they
/// ask for, straight to it (fio's defaults, `psync` and buffered I/O, would be one I/O at a
/// time through a page cache; `options_as_written` keeps them).
pub const ASYNC_DIRECT: &str = "[global]\nioengine=libaio\ndirect=1\n";

/// Options for a job file given as text (after [`ASYNC_DIRECT`]), on a device given as TOML
/// text plus overrides.
pub fn options(job: &str, device: &str, overrides: &[&str], seed: u64) -> SimOptions {
    options_as_written(&format!("{ASYNC_DIRECT}{job}"), device, overrides, seed)
}

/// Options for a job file exactly as given.
pub fn options_as_written(job: &str, device: &str, overrides: &[&str], seed: u64) -> SimOptions {
    let file = qoslab_workload::fio::parse_job_str(job, Path::new("test.fio"), |_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let device = DeviceConfig::from_text(device, "test-device.toml", &overrides)
        .unwrap_or_else(|e| panic!("{e}"));
    SimOptions {
        workload: WorkloadSpec::Jobs(file),
        device,
        seed,
        repeat: 1,
        format: OutputFormat::Json,
        series: None,
        progress: None,
        power_fail_at_ns: None,
        crash_target: None,
        status_interval_ns: None,
    }
}

/// Runs and parses the JSON report.
pub fn run_json(opts: &SimOptions) -> Value {
    let out = qoslab_sim::run(opts).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&out.text).unwrap()
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// An analytic device with free NVMe path and the given media keys.
pub fn analytic(media: &str) -> String {
    format!("description = \"test\"\n[media]\nmodel = \"analytic\"\n{media}\n")
}

/// The counters of the path's stage called `name` in a JSON report.
pub fn stage<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["qoslab"]["stages"]
        .as_array()
        .expect("qoslab.stages")
        .iter()
        .find(|s| s["stage"] == name)
        .map(|s| &s["counters"])
        .unwrap_or_else(|| panic!("no stage '{name}'"))
}
