//! fio's own loop (backend.c `do_io`) around the path: when a job sleeps, thinks, starts,
//! stops and fails, as fio 3.33 does it.

use crate::common::*;

/// One server, a fixed 10 us service, a free path.
fn device() -> String {
    analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 10000")
}

fn run(job: &str) -> serde_json::Value {
    run_json(&options(job, &device(), &[], 1))
}

fn read(r: &serde_json::Value, j: usize) -> &serde_json::Value {
    &r["jobs"][j]["read"]
}

/// A rate-limited job ahead of its schedule first waits for its I/O in flight (fio's
/// io_u_quiesce), then sleeps: at 50,000 IOPS (one every 20 us) and a 10 us service no I/O
/// ever waits for another, at any iodepth. With io_submit_mode=offload the I/Os leave at
/// their times whatever is in flight.
#[test]
fn a_rate_limited_job_quiesces_before_it_sleeps_unless_offloaded() {
    let job = "[r]\nrw=randread\nbs=4k\nsize=1g\niodepth=8\nrate_iops=50000\nnumber_ios=1000\n";
    let r = run(job);
    assert_eq!(f(&r["jobs"][0]["iodepth_level"]["1"]), 100.0);
    assert_eq!(f(&read(&r, 0)["clat_ns"]["max"]), 10_000.0);
    assert!((f(&read(&r, 0)["iops"]) - 50_000.0).abs() / 50_000.0 < 0.01);
    // 200,000 IOPS asked of a 100,000 IOPS device: offloaded, the I/Os pile up to iodepth at
    // once; inline, the job first quiesces each time it is ahead, and falls behind in steps.
    let fast = job.replace("rate_iops=50000", "rate_iops=200000");
    let inline = run(&fast);
    let offload = run(&fast.replace("[r]\n", "[r]\nio_submit_mode=offload\n"));
    let level = |r: &serde_json::Value, d: &str| f(&r["jobs"][0]["iodepth_level"][d]);
    assert!(level(&offload, "8") > 98.0);
    assert!(level(&inline, "1") > level(&offload, "1"));
    // Exponential service at 80 % load: inline, a slow I/O holds back the next (fio waits
    // for it before it sleeps); offloaded, arrivals keep their Poisson times and the queue
    // grows, so the latencies differ.
    let mm1 = "[r]\nrw=randread\nbs=4k\nsize=1g\niodepth=64\nrate_iops=80000\n\
               rate_process=poisson\nnumber_ios=20000\n";
    let exp = analytic("servers = 1\nservice = \"exponential\"\nservice_mean_ns = 10000");
    let inline = run_json(&options(mm1, &exp, &[], 1));
    let offload = run_json(&options(
        &mm1.replace("[r]\n", "[r]\nio_submit_mode=offload\n"),
        &exp,
        &[],
        1,
    ));
    assert_eq!(f(&inline["jobs"][0]["iodepth_level"]["32"]), 0.0);
    assert!(
        f(&offload["jobs"][0]["read"]["clat_ns"]["mean"])
            > 1.5 * f(&inline["jobs"][0]["read"]["clat_ns"]["mean"])
    );
}

/// thinktime: after `thinktime_blocks` I/Os issued (`issue`) the job waits for its I/O in
/// flight and stalls; `complete` counts completions instead.
#[test]
fn think_time_stalls_after_the_blocks_and_waits_for_what_is_in_flight() {
    let job = "[t]\nrw=randread\nbs=4k\nsize=1g\niodepth=8\nthinktime=100\nthinktime_blocks=4\n\
               thinktime_blocks_type=issue\nnumber_ios=400\n";
    let r = run(job);
    // Bursts of 4 at depth 1..4, each 40 us of service and 100 us of thought: 140 us per 4.
    let level = &r["jobs"][0]["iodepth_level"];
    assert_eq!(f(&level["8"]), 0.0, "{level}");
    assert_eq!(r["jobs"][0]["read"]["runtime"], 14);
    let done = job.replace(
        "thinktime_blocks_type=issue",
        "thinktime_blocks_type=complete",
    );
    let r = run(&done);
    // The queue fills to 8 before 4 have completed.
    assert!(f(&r["jobs"][0]["iodepth_level"]["8"]) > 0.0);
}

/// wait_for: a job starts once the named one has finished; startdelay counts from the start
/// of the run.
#[test]
fn wait_for_and_startdelay_start_jobs_when_fio_does() {
    let job = "[a]\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=100\n\
               [b]\nwait_for=a\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=100\n\
               [c]\nstartdelay=5ms\nrw=randread\nbs=4k\nsize=1g\nnumber_ios=100\n";
    let r = run(job);
    // a runs alone for 1 ms (100 x 10 us); b then runs; c starts at 5 ms, alone: each of
    // b's and c's I/Os sees an idle server, so none waits.
    for j in 0..3 {
        assert_eq!(f(&read(&r, j)["clat_ns"]["max"]), 10_000.0, "job {j}");
    }
    let b = job.replace("[b]\nwait_for=a\n", "[b]\n");
    let r = run(&b);
    // Without wait_for, a and b share the server from the start.
    assert!(f(&read(&r, 1)["clat_ns"]["max"]) > 10_000.0);
}

/// exitall: when one job finishes, the jobs of its reporting group stop (exit_what=group).
#[test]
fn exitall_ends_the_group_when_one_job_finishes() {
    let job = "[global]\nrw=randread\nbs=4k\nsize=1g\nexitall\n\
               [short]\nnumber_ios=50\n[long]\nnumber_ios=100000\n";
    let r = run(job);
    let long = read(&r, 1)["total_ios"].as_u64().unwrap();
    // The two share the server, so the long one has done about as many when the short ends.
    assert!((45..=60).contains(&long), "{long}");
    let without = run(&job.replace("exitall\n", ""));
    assert_eq!(read(&without, 1)["total_ios"], 100_000);
}

/// rate_iops_min: after fio's 2 s of settling, a job below its minimum over a rate_cycle
/// fails with EIO (error 5), and exitall_on_error ends its group.
#[test]
fn a_job_below_its_minimum_rate_fails() {
    let job = "[global]\nrw=randread\nbs=4k\nsize=1g\ntime_based\nruntime=5s\n\
               [slow]\nrate_iops_min=200000\nexitall_on_error\n[other]\n";
    let r = run(job);
    assert_eq!(r["jobs"][0]["error"], 5);
    assert_eq!(r["jobs"][1]["error"], 0);
    // Failed and ended after about 3 s (2 s of settling, one cycle), not 5 s.
    let runtime = r["jobs"][1]["job_runtime"].as_u64().unwrap();
    assert!((2900..3200).contains(&runtime), "{runtime}");
}

/// max_latency: a total latency above it fails the job with ETIMEDOUT (110).
#[test]
fn max_latency_fails_the_job() {
    let r = run("[m]\nrw=randread\nbs=4k\nsize=1g\niodepth=4\nmax_latency=25us\nnumber_ios=1000\n");
    // At depth 4 an I/O waits up to 40 us.
    assert_eq!(r["jobs"][0]["error"], 110);
    assert!(read(&r, 0)["total_ios"].as_u64().unwrap() < 1000);
}

/// latency_target: fio searches for the deepest queue whose I/Os meet the target: with a
/// 10 us service, a target of 45 us admits depth 4 (40 us) and not 5.
#[test]
fn latency_target_finds_the_depth_that_meets_it() {
    let r = run(
        "[l]\nrw=randread\nbs=4k\nsize=1g\niodepth=64\nlatency_target=45\nlatency_window=2ms\n\
         time_based\nruntime=1s\n",
    );
    assert_eq!(r["jobs"][0]["latency_depth"], 4);
    assert_eq!(r["jobs"][0]["error"], 0);
    // The search ends the job once the depth settled and a last window ran at it.
    assert!(r["jobs"][0]["job_runtime"].as_u64().unwrap() < 1000);
    // (The last 3 are reaped with the 4th, as fio does at a job's end: p99, not the max.)
    assert!(f(&read(&r, 0)["clat_ns"]["percentile"]["99.000000"]) <= 45_000.0);
}

/// steadystate: the job ends once the last ss_dur seconds of IOPS stay within the limit;
/// fio's JSON reports the samples and that it was attained.
#[test]
fn a_steady_job_ends_at_its_steady_state() {
    let r =
        run("[s]\nrw=randread\nbs=4k\nsize=1g\ntime_based\nruntime=60s\nss=iops:1%\nss_dur=3s\n");
    let ss = &r["jobs"][0]["steadystate"];
    assert_eq!(ss["attained"], 1);
    assert_eq!(ss["data"]["iops"].as_array().unwrap().len(), 3);
    assert!((ss["data"]["iops_mean"].as_u64().unwrap()).abs_diff(100_000) <= 1);
    // Three samples, taken each second of the run: it ends at 3 s.
    let runtime = r["jobs"][0]["job_runtime"].as_u64().unwrap();
    assert!((2900..=3100).contains(&runtime), "{runtime}");
}

/// flow: running jobs of a flow issue I/Os in the ratio of their weights.
#[test]
fn flow_keeps_the_jobs_in_the_ratio_of_their_weights() {
    let r = run(
        "[global]\nrw=randread\nbs=4k\nsize=1g\ntime_based\nruntime=100ms\niodepth=4\n\
         [heavy]\nflow=3\n[light]\nflow=1\n",
    );
    let ratio = f(&read(&r, 0)["total_ios"]) / f(&read(&r, 1)["total_ios"]);
    assert!((ratio - 3.0).abs() < 0.05, "{ratio}");
}

/// A job whose submission call sleeps for a tag (blk_mq_get_tag) neither submits nor reaps
/// until the tag comes; then the call goes on with the rest of its batch, and the loop reaps
/// what completed meanwhile. On 2 driver tags, 2 servers of 4 ms and a job at iodepth 4 in
/// batches of 4, every call sleeps, yet no I/O is lost or held back: the device stays busy
/// (500 IOPS), as it does with tags enough for the whole depth.
#[test]
fn a_call_that_sleeps_for_a_tag_goes_on_with_its_batch_when_it_wakes() {
    let device = |tags: u32| {
        format!(
            "description = \"test\"\n[path]\ndriver = \"simple\"\nhw_queue_depth = {tags}\n\
             [media]\nmodel = \"analytic\"\nservers = 2\nservice = \"fixed\"\n\
             service_mean_ns = 4000000\n"
        )
    };
    let job =
        "[b]\nrw=randread\nbs=4k\nsize=1g\niodepth=4\niodepth_batch_submit=4\nnumber_ios=400\n";
    let asleep = run_json(&options(job, &device(2), &[], 1));
    let awake = run_json(&options(job, &device(4), &[], 1));
    assert!(f(&stage(&asleep, "block")["submit_sleeps"]) > 100.0);
    assert_eq!(f(&stage(&awake, "block")["submit_sleeps"]), 0.0);
    for r in [&asleep, &awake] {
        assert_eq!(read(r, 0)["total_ios"], 400);
        assert!(
            (f(&read(r, 0)["iops"]) - 500.0).abs() < 5.0,
            "{}",
            read(r, 0)["iops"]
        );
    }
}
