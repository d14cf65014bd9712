//! The job-file and trace parsers, fuzzed: mutated copies of the job files qoslab ships and of
//! a trace of each format (tests/data/traces) are read to the end; every one gives records or
//! an error, never a panic. `make test` runs PROPTEST_CASES' default (256 per property); `make
//! fuzz` runs many more.

mod mutate;

use std::io::Cursor;
use std::path::Path;

use proptest::prelude::*;
use qoslab_workload::JobGen;
use qoslab_workload::fio::parse_job_str;
use qoslab_workload::trace::TraceReader;

const JOBS: &[&str] = &[
    include_str!("../../../configs/jobs/tour.fio"),
    include_str!("../../../configs/jobs/randread-qd32.fio"),
    include_str!("../../../configs/jobs/mqsim-randwrite-qd32.fio"),
    include_str!("../../../configs/sched/database-backup.fio"),
    include_str!("../../../tests/data/sim-jobs/mix-70-30.fio"),
    include_str!("../../../tests/data/sim-jobs/numjobs4.fio"),
    include_str!("../../../tests/data/sim-jobs/paced.fio"),
    include_str!("../../../tests/data/sim-jobs/prio-classes.fio"),
    include_str!("../../../tests/data/sim-jobs/trim-write.fio"),
];
const TRACES: &[&str] = &[
    include_str!("../../../tests/data/traces/msr.csv"),
    include_str!("../../../tests/data/traces/systor17.csv"),
    include_str!("../../../tests/data/traces/blkparse.txt"),
    include_str!("../../../tests/data/traces/iolog2.log"),
    include_str!("../../../tests/data/traces/iolog3.log"),
];

fn env(name: &str) -> Option<String> {
    match name {
        "NUMBER_IOS" => Some("2000".into()),
        "QD" => Some("8".into()),
        _ => None,
    }
}

proptest! {
    #[test]
    fn a_mutated_job_file_is_read_or_refused(seed in 0..JOBS.len(), edits in mutate::edits()) {
        let data = mutate::apply(JOBS[seed].as_bytes(), &edits);
        let text = String::from_utf8_lossy(&data);
        if let Ok(file) = parse_job_str(&text, Path::new("fuzz.fio"), env) {
            // A job read is a job whose I/O can be generated: the first few of each clone.
            for job in file.jobs.iter().take(4) {
                for clone in 0..job.numjobs.min(2) {
                    if let Ok(mut g) = JobGen::on_device(job, clone, 1, Some(1 << 40)) {
                        for _ in 0..64 {
                            if g.next_io().is_none() {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_mutated_trace_is_read_or_refused(seed in 0..TRACES.len(), edits in mutate::edits()) {
        let data = mutate::apply(TRACES[seed].as_bytes(), &edits);
        if let Ok(reader) = TraceReader::new(Cursor::new(data), Path::new("fuzz.trace"), None) {
            for record in reader.take(10_000) {
                if record.is_err() {
                    break;
                }
            }
        }
    }
}
