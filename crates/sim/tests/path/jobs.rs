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

/// iodepth_batch_submit: I/Os go out in batches, and fio's iodepth_submit shows the batch
/// size.
#[test]
fn batches_are_submitted_together() {
    let job =
        "[b]\nrw=randread\nbs=4k\nsize=1g\niodepth=16\niodepth_batch_submit=8\nnumber_ios=8000\n";
    let r = run_json(&options(job, &analytic(FIXED_1US), &[], 1));
    let submit = &r["jobs"][0]["iodepth_submit"];
    assert_eq!(f(&submit["8"]), 100.0, "{submit}");
    // A batch of 8 leaves when 8 slots are free: the first at depth 8, the others at 16.
    let level = &r["jobs"][0]["iodepth_level"];
    assert_eq!(f(&level["8"]) + f(&level["16"]), 100.0, "{level}");
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
