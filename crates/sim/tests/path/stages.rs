//! The path as a chain of stages: requests wait above the driver when it has no room, and
//! several hosts share one controller.

use crate::common::*;

/// 1,024 I/Os outstanding over a 32-entry SQ (31 command ids): the driver refuses the rest,
/// which wait in the block layer above it (993 at once), not in a queue inside the driver.
#[test]
fn a_stage_above_nvme_holds_what_the_submission_queue_cannot() {
    let job = "[deep]\nrw=randread\nbs=4k\nsize=1g\niodepth=1024\nnumber_ios=20000\n";
    let r = run_json(&options(
        job,
        &analytic("servers = 4\nservice = \"fixed\"\nservice_mean_ns = 10000"),
        &["host.sq_depth=32"],
        1,
    ));
    let block = stage(&r, "block");
    assert_eq!(block["queued_max"], 1024 - 31);
    assert!(f(&block["queued_max"]) >= 990.0);
    let host = stage(&r, "nvme-host");
    assert_eq!(host["max_waiting_for_command_id"], 0);
    assert!(f(&host["refused_no_command_id"]) > 0.0);
    // Every I/O still ran, and the media never had more than 31 at once: 4 servers at 10 us
    // each serve 400k IOPS.
    assert_eq!(r["jobs"][0]["read"]["total_ios"], 20000);
    let iops = f(&r["jobs"][0]["read"]["iops"]);
    assert!((iops / 400_000.0 - 1.0).abs() < 0.01, "{iops}");
}

/// Two hosts, each with a job of its own priority, on one controller under weighted round
/// robin with weights 3 (high) and 1 (medium), every queue saturated and one command fetched at
/// a time: each host's share of the fetched commands is its class's weight over the sum,
/// 3/4 and 1/4.
#[test]
fn two_hosts_share_one_controller_by_the_weights_of_their_queues() {
    let job = "[global]\nrw=randread\nbs=4k\nsize=1g\niodepth=16\ntime_based=1\nruntime=200ms\n\
               [a]\nsim_host=0\nprioclass=2\nprio=0\n[b]\nsim_host=1\nprioclass=2\nprio=4\n";
    let sets = [
        "path.hosts=2",
        "controller.arbitration=wrr",
        "controller.wrr.high_weight=3",
        "controller.wrr.medium_weight=1",
        "controller.max_outstanding=1",
    ];
    let r = run_json(&options(
        job,
        &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 1000"),
        &sets,
        1,
    ));
    let c = stage(&r, "nvme-controller");
    let (a, b) = (f(&c["fetched_host0"]), f(&c["fetched_host1"]));
    assert!(a + b > 190_000.0, "{a} {b}");
    assert!((a / (a + b) / 0.75 - 1.0).abs() < 0.01, "{a} {b}");
    assert!((b / (a + b) / 0.25 - 1.0).abs() < 0.01, "{a} {b}");
}

/// A job on a host the path does not have is an error naming it.
#[test]
fn a_job_on_a_missing_host_is_refused() {
    let job = "[a]\nrw=read\nsize=1m\nsim_host=1\n";
    let opts = options(job, &analytic(""), &[], 1);
    let err = qoslab_sim::run(&opts).err().unwrap().to_string();
    assert!(
        err.contains("sim_host 1") && err.contains("1 host(s)"),
        "{err}"
    );
}

/// The registered null device (fio's null engine): with a 10 us delay under the NVMe path's
/// fixed costs, every read's completion latency is their sum exactly.
#[test]
fn the_null_device_leaves_the_path_alone_to_measure() {
    let job = "[qd1]\nrw=randread\nbs=4k\nsize=1g\niodepth=1\nnumber_ios=500\n";
    let device = "[media]\nmodel = \"null\"\ndelay_ns = \"10us\"\n";
    let sets = [
        "link.doorbell_ns=200",
        "controller.cmd_ns=500",
        "host.irq_ns=1000",
    ];
    let r = run_json(&options(job, device, &sets, 1));
    let clat = &r["jobs"][0]["read"]["clat_ns"];
    assert_eq!(clat["min"], 200 + 500 + 10_000 + 1000);
    assert_eq!(clat["max"], clat["min"]);
    assert_eq!(stage(&r, "null")["ios"], 500.0);
}

/// The PLM host library reads from the copy whose NVM set is in its deterministic window: it
/// needs a drive that has such windows (the SSD with the plm GC gate), and says so for any other.
#[test]
fn plm_replicas_are_refused_without_a_drive_in_predictable_latency_mode() {
    let job = "[r]\nrw=randread\nsize=1m\nnumber_ios=10\n";
    let ssd = qoslab_sim::device::preset_text("enterprise-tlc-plp").unwrap();
    let sets = |gate: &'static str| {
        vec![
            "media.nvm_sets=2",
            "media.precondition.fill=0",
            "host.replicas=plm",
            gate,
        ]
    };
    let refused = |device: &str, sets: &[&str]| {
        let err = qoslab_sim::run(&options(job, device, sets, 1))
            .err()
            .unwrap();
        err.to_string()
            .contains("host.replicas = 'plm' needs a device in Predictable Latency Mode")
    };
    assert!(refused(&analytic(""), &["host.replicas=plm"]));
    assert!(refused(ssd, &sets("media.gc.gate=always")));
    let r = run_json(&options(job, ssd, &sets("media.gc.gate=plm"), 1));
    assert_eq!(r["jobs"][0]["read"]["total_ios"], 10);
}
