//! `cargo run --release --example simrun -- JOBFILE [DEVICE] [--set k=v ...]`: one run,
//! report on stdout, simulated I/Os per wall-clock second on stderr (for profiling without
//! Python).

use std::path::Path;
use std::time::Instant;

use qoslab_sim::{DeviceConfig, OutputFormat, SimOptions, WorkloadSpec};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let job = args
        .first()
        .expect("usage: simrun JOBFILE [DEVICE] [--set k=v ...]");
    let device = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map_or("nvme-analytic", |s| s);
    let sets: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--set")
        .map(|w| w[1].clone())
        .collect();
    let opts = SimOptions {
        workload: WorkloadSpec::job_file(Path::new(job)).unwrap_or_else(|e| panic!("{e}")),
        device: DeviceConfig::load(device, &sets).unwrap_or_else(|e| panic!("{e}")),
        seed: 1,
        repeat: 1,
        format: OutputFormat::Normal,
        series: None,
        progress: None,
        power_fail_at_ns: None,
        crash_target: None,
        status_interval_ns: None,
    };
    let t = Instant::now();
    let out = qoslab_sim::run(&opts).unwrap_or_else(|e| panic!("{e}"));
    let secs = t.elapsed().as_secs_f64();
    print!("{}", out.text);
    eprintln!(
        "{} I/Os, {} events in {secs:.3} s: {:.3} M I/O/s, {:.2} events per I/O",
        out.ios,
        out.events,
        out.ios as f64 / secs / 1e6,
        out.events as f64 / out.ios as f64
    );
}
