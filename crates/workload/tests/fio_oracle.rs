//! fio 3.33 as an independent oracle: `fio --parse-only --debug=parse` prints how fio reads
//! each value; qoslab must read it the same way.

use std::path::Path;
use std::process::Command;

use qoslab_workload::fio::{Job, SizeSpec, parse_job_str};

/// The values fio prints for each option line of `[j]` (a `None` where fio left a direction
/// unset), in file order.
fn fio_reads(lines: &[String]) -> Vec<Vec<Option<u64>>> {
    let dir = std::env::temp_dir().join(format!("qoslab-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Tests run in parallel: one file per call.
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let job = dir.join(format!("oracle-{n}.fio"));
    std::fs::write(&job, format!("[j]\nioengine=null\n{}\n", lines.join("\n"))).unwrap();
    let out = Command::new("fio")
        .args(["--parse-only", "--debug=parse"])
        .arg(&job)
        .output()
        .expect("fio is needed for this test (make tools installs it)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut groups: Vec<Vec<Option<u64>>> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split_whitespace().nth(2) else {
            continue;
        };
        if rest.starts_with("handle_option=") {
            groups.push(Vec::new());
        } else if let Some(pos) = line.find("ret=") {
            let ret_ok = line[pos..].starts_with("ret=0");
            let out: u64 = line.rsplit("out=").next().unwrap().trim().parse().unwrap();
            groups.last_mut().unwrap().push(ret_ok.then_some(out));
        }
    }
    // The first group is ioengine=null.
    groups.remove(0);
    groups
}

fn ours(line: &str) -> Job {
    let f = parse_job_str(&format!("[j]\n{line}\n"), Path::new("oracle.fio"), |_| None)
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    f.jobs.into_iter().next().unwrap()
}

/// qoslab's reading of `line`, in fio's internal units (bytes, microseconds), per direction.
fn our_values(line: &str) -> Vec<u64> {
    let j = ours(line);
    let us = |ns: u64| ns / 1000;
    match line.split('=').next().unwrap() {
        "size" => match j.size {
            Some(SizeSpec::Bytes(b)) => vec![b],
            other => panic!("{other:?}"),
        },
        "io_size" => vec![j.io_size.unwrap()],
        "bs" => j.bs.to_vec(),
        "blockalign" => j.blockalign.iter().map(|b| b.unwrap_or(0)).collect(),
        "rate" => j.rate_bytes_per_s.iter().map(|r| r.unwrap_or(0)).collect(),
        "rate_iops" => j.rate_iops.iter().map(|r| r.unwrap_or(0)).collect(),
        "runtime" => vec![us(j.runtime_ns.unwrap())],
        "ramp_time" => vec![us(j.ramp_time_ns)],
        "thinktime" => vec![us(j.thinktime_ns)],
        "iodepth" => vec![u64::from(j.iodepth)],
        "number_ios" => vec![j.number_ios.unwrap()],
        "numjobs" => vec![u64::from(j.numjobs)],
        "rwmixread" => vec![j.rwmixread as u64],
        "randseed" => vec![j.randseed.unwrap()],
        other => panic!("no mapping for {other}"),
    }
}

#[test]
fn sizes_times_and_integers_read_as_fio_reads_them() {
    let lines: Vec<String> = [
        "size=4k",
        "size=4K",
        "size=4KiB",
        "size=4kb",
        "size=4kB",
        "size=1KB",
        "size=1kib",
        "size=1m",
        "size=1M",
        "size=1MiB",
        "size=1mb",
        "size=1g",
        "size=1t",
        "size=10P",
        "size=0x10",
        "size=100",
        "size=5b",
        "io_size=1g",
        "bs=4k,8k,16k",
        "bs=,8k",
        "bs=8k,",
        "bs=64k",
        "blockalign=4k",
        "rate=1m,2m",
        "rate=,500k",
        "rate_iops=1k",
        "runtime=10",
        "runtime=10s",
        "runtime=10m",
        "runtime=10M",
        "runtime=1h",
        "runtime=1d",
        "runtime=100ms",
        "runtime=5msec",
        "runtime=100us",
        "runtime=5 s",
        "ramp_time=2",
        "ramp_time=500ms",
        "thinktime=10",
        "thinktime=10ms",
        "thinktime=1s",
        "thinktime=10m",
        "iodepth=32",
        "iodepth=4k",
        "number_ios=1k",
        "numjobs=4",
        "rwmixread=70",
        "randseed=42",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let fio = fio_reads(&lines);
    assert_eq!(fio.len(), lines.len(), "fio printed {fio:?}");
    for (line, fio_vals) in lines.iter().zip(&fio) {
        let mine = our_values(line);
        for (d, v) in fio_vals.iter().enumerate() {
            if let Some(v) = v {
                assert_eq!(
                    mine[d], *v,
                    "{line}: direction {d}: fio {v}, qoslab {}",
                    mine[d]
                );
            }
        }
    }
}

#[test]
fn values_fio_rejects_are_rejected() {
    for line in ["bs=x", "direct=true", "rw=randfoo", "rate_process=bursty"] {
        let fio = fio_reads(&[line.to_string()]);
        assert!(
            fio.is_empty() || fio[0].iter().all(Option::is_none),
            "fio accepted {line}: {fio:?}"
        );
        let e = parse_job_str(&format!("[j]\n{line}\n"), Path::new("t.fio"), |_| None);
        assert!(e.is_err(), "qoslab accepted {line}");
    }
}

#[test]
fn values_fio_misreads_are_refused_rather_than_guessed() {
    // What fio 3.33 silently makes of them (the claims docs/workload.md makes), and qoslab's
    // refusal.
    let cases = [
        ("size=1.5g", 1u64),
        ("bs=4q", 4),
        ("runtime=5sec", 5),
        ("runtime=5min", 5),
    ];
    let lines: Vec<String> = cases.iter().map(|(l, _)| l.to_string()).collect();
    let fio = fio_reads(&lines);
    for ((line, fio_value), got) in cases.iter().zip(&fio) {
        assert_eq!(got, &vec![Some(*fio_value)], "{line}");
        assert!(
            parse_job_str(&format!("[j]\n{line}\n"), Path::new("t.fio"), |_| None).is_err(),
            "{line}"
        );
    }
}

#[test]
fn kb_base_changes_every_size_of_its_section_as_in_fio() {
    // fio reads kb_base before the other options of the section, wherever it is written.
    let fio = fio_reads(&["size=1m".to_string(), "kb_base=1000".to_string()]);
    let fio_size = fio.iter().flatten().flatten().next().copied();
    assert_eq!(fio_size, Some(1_000_000), "fio printed {fio:?}");
    let j = parse_job_str("[j]\nsize=1m\nkb_base=1000\n", Path::new("t.fio"), |_| None).unwrap();
    assert_eq!(j.jobs[0].size, Some(SizeSpec::Bytes(1_000_000)));
}
