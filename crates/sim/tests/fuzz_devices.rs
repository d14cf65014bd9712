//! The device-file reader and the path it builds, fuzzed: mutated copies of the presets
//! qoslab ships are read, and each one read runs a short mixed job; every one ends in a report
//! or an error, never a panic. `make fuzz` runs many more cases (PROPTEST_CASES).

#[path = "../../workload/tests/mutate/mod.rs"]
mod mutate;

use std::path::Path;

use proptest::prelude::*;
use qoslab_sim::{DeviceConfig, OutputFormat, SimOptions, WorkloadSpec};

const PRESETS: &[&str] = &[
    include_str!("../../../configs/devices/nvme-analytic.toml"),
    include_str!("../../../configs/devices/ideal.toml"),
    include_str!("../../../configs/devices/hdd-7200.toml"),
    include_str!("../../../configs/devices/hdd-15k.toml"),
    include_str!("../../../configs/devices/consumer-tlc.toml"),
    include_str!("../../../configs/devices/enterprise-tlc-plp.toml"),
    include_str!("../../../configs/devices/mqsim-default.toml"),
];
const JOB: &str = "[j]\nrw=randrw\nbs=4k\niodepth=8\nnumber_ios=200\n";

proptest! {
    // A case runs the device (a preset SSD fills its drive first): fewer than the default 256,
    // unless PROPTEST_CASES asks for more (`make fuzz`).
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(12)
    ))]

    #[test]
    fn a_mutated_device_file_runs_or_is_refused(seed in 0..PRESETS.len(), edits in mutate::edits()) {
        let data = mutate::apply(PRESETS[seed].as_bytes(), &edits);
        let text = String::from_utf8_lossy(&data);
        if let Ok(device) = DeviceConfig::from_text(&text, "fuzz.toml", &[]) {
            let jobs = qoslab_workload::fio::parse_job_str(JOB, Path::new("j.fio"), |_| None).unwrap();
            let opts = SimOptions {
                workload: WorkloadSpec::Jobs(jobs),
                device,
                seed: 1,
                repeat: 1,
                format: OutputFormat::Terse,
                series: None,
                progress: None,
                power_fail_at_ns: None,
                crash_target: None,
                status_interval_ns: None,
            };
            let _ = qoslab_sim::run(&opts);
        }
    }
}
