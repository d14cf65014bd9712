//! fio's job semantics in the simulator: groups and stonewall, numjobs and group_reporting,
//! ramp and run time, batches, pacing.

use crate::common::*;

const FIXED_1US: &str = "servers = 1\nservice = \"fixed\"\nservice_mean_ns = 1000";

/// A stonewall starts a new group only when the previous one is done: two QD1 jobs of 1000
/// I/Os of 1 us each take 2 ms one after the other, 1 ms side by side on two servers.
#[test]
fn stonewall_runs_groups_one_after_the_other() {
    let one = "[a]\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=1000\n";
    let serial = format!("{one}[b]\nstonewall\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=1000\n");
    let parallel = format!("{one}[b]\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=1000\n");
    let media = "servers = 2\nservice = \"fixed\"\nservice_mean_ns = 1000";
    let r = run_json(&options(&serial, &analytic(media), &[], 1));
    assert_eq!(r["qoslab"]["simulated_ns"], 2_000_000);
    assert_eq!(r["jobs"][1]["groupid"], 1);
    let r = run_json(&options(&parallel, &analytic(media), &[], 1));
    assert_eq!(r["qoslab"]["simulated_ns"], 1_000_000);
    assert_eq!(r["jobs"][1]["groupid"], 0);
}

/// new_group starts a reporting group but, unlike stonewall, does not wait: the two jobs run
/// side by side (1 ms on two servers) and are reported in groups 0 and 1.
#[test]
fn new_group_reports_apart_but_runs_alongside() {
    let one = "[a]\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=1000\n";
    let job = format!("{one}[b]\nnew_group\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=1000\n");
    let media = "servers = 2\nservice = \"fixed\"\nservice_mean_ns = 1000";
    let r = run_json(&options(&job, &analytic(media), &[], 1));
    assert_eq!(r["qoslab"]["simulated_ns"], 1_000_000);
    assert_eq!(r["jobs"][0]["groupid"], 0);
    assert_eq!(r["jobs"][1]["groupid"], 1);
}

/// numjobs clones a job; group_reporting folds a group into one entry.
#[test]
fn numjobs_clones_and_group_reporting_merges() {
    let job = "[c]\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=500\nnumjobs=4\n";
    let r = run_json(&options(job, &analytic(FIXED_1US), &[], 1));
    let jobs = r["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4);
    assert!(
        jobs.iter()
            .all(|j| j["jobname"] == "c" && j["read"]["total_ios"] == 500)
    );
    let merged = format!("{job}group_reporting=1\n");
    let r = run_json(&options(&merged, &analytic(FIXED_1US), &[], 1));
    assert_eq!(r["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(r["jobs"][0]["read"]["total_ios"], 2000);
    // Four clones share one 1 us server: 2000 I/Os in 2 ms.
    assert!((f(&r["jobs"][0]["read"]["iops"]) - 1e6).abs() < 1e-6);
}

/// ramp_time: I/Os that complete during the ramp are not counted, and the run time starts
/// after it; runtime bounds a time_based job.
#[test]
fn ramp_time_is_left_out_of_the_statistics() {
    let job = "[r]\nrw=randread\nbs=4k\nsize=1g\ntime_based=1\nramp_time=2ms\nruntime=10ms\n";
    let r = run_json(&options(job, &analytic(FIXED_1US), &[], 1));
    let read = &r["jobs"][0]["read"];
    // Issues stop at 12 ms; completions at 2.000, 2.001, ..., 12.000 ms are counted.
    assert_eq!(read["total_ios"], 10_001);
    assert_eq!(read["runtime"], 10);
    assert_eq!(r["jobs"][0]["job_runtime"], 10);
}

/// iodepth_batch_submit, as fio 3.33 runs it (checked with fio on a file, libaio): I/Os are
/// queued until a batch is complete, but a job whose queue is full commits what it has
/// queued before it waits, so with `iodepth_low` at its default (the whole depth) only the
/// two batches that fill the queue go out whole and the rest leave one at a time;
/// `iodepth_low=8` lets the queue drain to 8, and every refill is then one batch of 8.
#[test]
fn batches_are_submitted_as_fio_submits_them() {
    let run = |extra: &str| {
        let job = format!(
            "[b]\nrw=randread\nbs=4k\nsize=1g\niodepth=16\niodepth_batch_submit=8\n{extra}number_ios=8000\n"
        );
        let r = run_json(&options(&job, &analytic(FIXED_1US), &[], 1));
        r["jobs"][0].clone()
    };
    let keep_full = run("");
    let submit = &keep_full["iodepth_submit"];
    // Two submissions of 8 among about 7984 of one: fio shows a share under 0.1 % as 0.1.
    assert_eq!(f(&submit["8"]), 0.1, "{submit}");
    assert!(f(&submit["4"]) > 99.9, "{submit}");
    let level = &keep_full["iodepth_level"];
    assert_eq!(f(&level["8"]), 0.1, "{level}");
    assert!(f(&level["16"]) > 99.8, "{level}");
    let refill = run("iodepth_low=8\n");
    assert_eq!(f(&refill["iodepth_submit"]["8"]), 100.0);
    assert_eq!(f(&refill["iodepth_level"]["8"]), 0.1);
}

/// iodepth_batch_complete_min: the job waits for that many completions and reaps them
/// together; what it queued meanwhile goes out when its queue is full again.
#[test]
fn completions_are_reaped_in_batches() {
    let job = "[c]\nrw=randread\nbs=4k\nsize=1g\niodepth=16\niodepth_batch_submit=8\n\
               iodepth_batch_complete_min=4\nnumber_ios=8000\n";
    let r = run_json(&options(job, &analytic(FIXED_1US), &[], 1));
    let j = &r["jobs"][0];
    assert!(
        f(&j["iodepth_complete"]["4"]) > 99.8,
        "{}",
        j["iodepth_complete"]
    );
    assert!(
        f(&j["iodepth_submit"]["4"]) > 99.8,
        "{}",
        j["iodepth_submit"]
    );
    // The first of four reaped together waited for the other three: 3 us more than 16 us.
    assert!(f(&j["read"]["clat_ns"]["max"]) >= 19_000.0);
}

/// A synchronous engine keeps one I/O in flight whatever iodepth says (fio: "queue depth
/// will be capped at 1"), and records no submission latency: its call is its completion
/// latency.
#[test]
fn a_synchronous_engine_keeps_one_io_in_flight() {
    let job =
        "[global]\nioengine=psync\n[p]\nrw=randread\nbs=4k\nsize=1g\niodepth=32\nnumber_ios=1000\n";
    let sets = ["host.submit_ns=2us"];
    let r = run_json(&options(job, &analytic(FIXED_1US), &sets, 1));
    let j = &r["jobs"][0];
    assert_eq!(f(&j["iodepth_level"]["1"]), 100.0);
    assert_eq!(j["read"]["slat_ns"]["N"], 0);
    // 2 us to submit, 1 us of service, one at a time.
    assert_eq!(f(&j["read"]["clat_ns"]["mean"]), 3000.0);
    assert!((f(&j["read"]["iops"]) - 1e9 / 3000.0).abs() < 1.0);
    let aio = run_json(&options(
        &job.replace("psync", "libaio"),
        &analytic(FIXED_1US),
        &sets,
        1,
    ));
    // The first 31 leave below depth 32, as in fio.
    assert_eq!(f(&aio["jobs"][0]["iodepth_level"]["32"]), 96.9);
    assert_eq!(aio["jobs"][0]["read"]["slat_ns"]["N"], 1000);
}

/// fio's null engine reaches no device: each I/O costs the host's submit and complete
/// times only; at a depth above 1 it completes a batch at its commit.
#[test]
fn the_null_engine_reaches_no_device() {
    let job = "[n]\nioengine=null\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=1000\n";
    let sets = ["host.submit_ns=300", "host.complete_ns=200"];
    let r = run_json(&options(
        job,
        &analytic("servers = 1\nservice_mean_ns = 1000000"),
        &sets,
        1,
    ));
    let read = &r["jobs"][0]["read"];
    // 500 ns an I/O, not the device's 1 ms.
    assert_eq!(f(&read["clat_ns"]["max"]), 500.0);
    assert_eq!(stage(&r, "nvme-host")["commands"], 0);
}

/// rate_iops with the linear process spaces submissions exactly.
#[test]
fn a_linear_rate_spaces_submissions_evenly() {
    let job = "[p]\nrw=randread\nbs=4k\nsize=1g\nrate_iops=1000\nnumber_ios=1000\n";
    let r = run_json(&options(job, &analytic(FIXED_1US), &[], 1));
    let read = &r["jobs"][0]["read"];
    assert_eq!(read["clat_ns"]["max"], 1000);
    // The last of 1000 I/Os leaves at 999 ms and completes 1 us later.
    assert_eq!(r["qoslab"]["simulated_ns"], 999_001_000u64);
}

/// lat_percentiles=1 on one job of a reporting group gives percentiles of the total latency
/// over every I/O of the group: the json+ bins count each one, and no sample's total latency
/// is below its completion latency, so neither is any percentile.
#[test]
fn lat_percentiles_cover_every_io_of_a_merged_group() {
    let job = "[global]\ngroup_reporting=1\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=3000\n\
               iodepth=4\n[a]\nlat_percentiles=1\n[b]\n";
    let media = "servers = 2\nservice = \"exponential\"\nservice_mean_ns = 20000";
    let mut opts = options(job, &analytic(media), &[], 1);
    opts.format = qoslab_sim::OutputFormat::JsonPlus;
    let r = run_json(&opts);
    let read = &r["jobs"][0]["read"];
    assert_eq!(read["total_ios"], 6000);
    let lat = &read["lat_ns"];
    assert_eq!(lat["N"], 6000);
    let binned: u64 = lat["bins"]
        .as_object()
        .expect("json+ bins of lat_ns")
        .values()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(binned, 6000);
    for (p, v) in read["clat_ns"]["percentile"].as_object().unwrap() {
        assert!(f(&lat["percentile"][p]) >= f(v), "p{p}");
    }
}
