//! The NVMe stage in the whole path: fixed costs, the PCIe link, MDTS splitting, arbitration,
//! interrupt coalescing, completion order, timeouts and resets.

use crate::common::*;

/// QD1 with every fixed cost set: the latency is their sum plus the service, and fio's slat
/// is the host's submission cost.
#[test]
fn fixed_costs_add_up_exactly_at_queue_depth_one() {
    let sets = [
        "host.submit_ns=1000",
        "link.doorbell_ns=200",
        "controller.fetch_ns=100",
        "controller.cmd_ns=500",
        "controller.cq_post_ns=100",
        "host.irq_ns=1000",
        "host.complete_ns=1500",
    ];
    let job = "[qd1]\nrw=randread\nbs=4k\nsize=1g\niodepth=1\nnumber_ios=1000\n";
    let r = run_json(&options(
        job,
        &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 10000"),
        &sets,
        1,
    ));
    let read = &r["jobs"][0]["read"];
    for k in ["min", "max"] {
        assert_eq!(read["slat_ns"][k], 1000);
        assert_eq!(
            read["clat_ns"][k],
            200 + 100 + 500 + 10_000 + 100 + 1000 + 1500
        );
        assert_eq!(read["lat_ns"][k], 14_400);
    }
}

/// MQSim's link: 4 KiB in 128-byte TLPs with 28 bytes of overhead each on four 1 GB/s lanes
/// takes 1248 ns, added once to a read (data to the host) and once to a write (to the device).
#[test]
fn the_pcie_link_adds_its_transfer_time() {
    let sets = [
        "link.lane_rate=1.0",
        "link.lanes=4",
        "link.tlp_payload_bytes=128",
        "link.tlp_overhead_bytes=28",
    ];
    for rw in ["randread", "randwrite"] {
        let job = format!("[qd1]\nrw={rw}\nbs=4k\nsize=1g\niodepth=1\nnumber_ios=100\n");
        let r = run_json(&options(
            &job,
            &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 10000"),
            &sets,
            1,
        ));
        let op = if rw == "randread" { "read" } else { "write" };
        assert_eq!(r["jobs"][0][op]["clat_ns"]["max"], 11_248, "{rw}");
        assert_eq!(r["jobs"][0][op]["clat_ns"]["min"], 11_248, "{rw}");
    }
}

/// An I/O larger than MDTS is split into commands that the media serves in parallel; the I/O
/// completes with its last part.
#[test]
fn mdts_splits_large_ios_into_commands() {
    let job = "[big]\nrw=read\nbs=128k\nsize=1g\niodepth=1\nnumber_ios=50\n";
    for (servers, clat) in [(4, 10_000), (1, 40_000)] {
        let r = run_json(&options(
            job,
            &analytic(&format!(
                "servers = {servers}\nservice = \"fixed\"\nservice_mean_ns = 10000"
            )),
            &["controller.mdts_bytes=32k"],
            1,
        ));
        assert_eq!(stage(&r, "nvme-host")["commands"], 200);
        assert_eq!(stage(&r, "nvme-host")["split_ios"], 50);
        assert_eq!(r["jobs"][0]["read"]["clat_ns"]["max"], clat);
        assert_eq!(r["jobs"][0]["read"]["io_bytes"], 50 * 131072);
    }
}

/// Weighted round robin with weights 8:4:1 and every queue saturated: the controller fetches
/// from the high, medium and low classes in the ratio of their weights.
#[test]
fn weighted_round_robin_shares_follow_the_weights() {
    // Best-effort levels 0, 4 and 7 map to the high, medium and low classes.
    // Long enough that the queues' last drain (at most 16 commands each) is below 0.1 %.
    let job = "[global]\nrw=randread\nbs=4k\nsize=1g\niodepth=16\ntime_based=1\nruntime=260ms\n\
               [high]\nprioclass=2\nprio=0\n[medium]\nprioclass=2\nprio=4\n[low]\nprioclass=2\nprio=7\n";
    let sets = [
        "controller.arbitration=wrr",
        "controller.wrr.high_weight=8",
        "controller.wrr.medium_weight=4",
        "controller.wrr.low_weight=1",
        "controller.max_outstanding=1",
    ];
    let r = run_json(&options(
        job,
        &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 1000"),
        &sets,
        1,
    ));
    let n = stage(&r, "nvme-controller");
    let fetched = [
        f(&n["fetched_high"]),
        f(&n["fetched_medium"]),
        f(&n["fetched_low"]),
    ];
    let total: f64 = fetched.iter().sum();
    assert!(total > 250_000.0, "{total}");
    for (got, w) in fetched.iter().zip([8.0, 4.0, 1.0]) {
        let share = got / total;
        assert!((share / (w / 13.0) - 1.0).abs() < 0.01, "{fetched:?}");
    }
    // The I/O counts fio reports follow the same shares.
    let ios = |j: usize| f(&r["jobs"][j]["read"]["total_ios"]);
    assert!((ios(0) / ios(2) / 8.0 - 1.0).abs() < 0.01);
}

/// The urgent class is served strictly first: while an urgent queue has commands, no other
/// class is fetched from.
#[test]
fn urgent_queues_are_served_strictly_first() {
    // Offload: each I/O is reaped as it completes, so its latency is the device's.
    let job = "[global]\nrw=randread\nbs=4k\nsize=1g\niodepth=64\nnumber_ios=5000\n\
               io_submit_mode=offload\n[urgent]\nprioclass=1\n[high]\nprioclass=2\nprio=0\n";
    let sets = [
        "controller.arbitration=wrr",
        "controller.wrr.high_weight=8",
        "controller.max_outstanding=1",
    ];
    let r = run_json(&options(
        job,
        &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 1000"),
        &sets,
        1,
    ));
    // The urgent job keeps 64 outstanding, so each of its I/Os waits for 63 others: 64 us.
    assert_eq!(r["jobs"][0]["read"]["clat_ns"]["max"], 64_000);
    // The 64 high I/Os queued at time 0 are fetched only after all 5000 urgent ones: the first
    // at 5000 us, the last at 5063 us, done 1 us later.
    assert_eq!(r["jobs"][1]["read"]["clat_ns"]["max"], 5_064_000);
    assert_eq!(stage(&r, "nvme-controller")["fetched_urgent"], 5000);
}

/// One job issuing at a fixed rate (one I/O every a = 10 us), a fixed 3 us service, so CQ
/// entries are posted exactly a apart. With aggregation threshold T and time tau, the rule
/// gives the interrupt count and each entry's added wait exactly.
#[test]
fn interrupt_coalescing_follows_the_threshold_and_time_rule() {
    let a = 10_000.0;
    let s = 3_000.0;
    let n = 12_000.0;
    // (threshold, time, interrupts, mean added wait)
    let cases = [
        // 3a < tau: every 4th entry reaches the threshold; waits 3a, 2a, a, 0.
        (4, 50_000.0, n / 4.0, (3.0 + 2.0 + 1.0 + 0.0) * a / 4.0),
        // tau < a: every entry is alone when its timer runs out.
        (4, 5_000.0, n, 5_000.0),
        // a < 2a < tau < 3a: the timer catches three entries: waits tau, tau - a, tau - 2a.
        (4, 25_000.0, n / 3.0, (25_000.0 + 15_000.0 + 5_000.0) / 3.0),
        // Off: one interrupt per entry, no wait.
        (1, 50_000.0, n, 0.0),
    ];
    for (thr, tau, interrupts, added) in cases {
        // Offload: I/Os leave at their times and are reaped as they complete.
        let job = "[paced]\nrw=randread\nbs=4k\nsize=1g\niodepth=16\nrate_iops=100000\n\
                   io_submit_mode=offload\nnumber_ios=12000\n";
        let sets = [
            format!("controller.coalesce_threshold={thr}"),
            format!("controller.coalesce_time_ns={tau}"),
        ];
        let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        let r = run_json(&options(
            job,
            &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 3000"),
            &sets,
            1,
        ));
        assert_eq!(
            f(&stage(&r, "nvme-host")["interrupts"]),
            interrupts,
            "T={thr} tau={tau}"
        );
        let mean = f(&r["jobs"][0]["read"]["clat_ns"]["mean"]);
        assert!(
            (mean - (s + added)).abs() < 1e-6,
            "T={thr} tau={tau}: {mean}"
        );
    }
}

/// Completions held in order: a fast write fetched behind a slow read waits for it (bound
/// k = 0); in device order it does not.
#[test]
fn in_order_completion_holds_fast_commands_behind_slow_ones() {
    let job = "[mix]\nrw=randrw\nrwmixread=50\nbs=4k\nsize=1g\niodepth=2\nnumber_ios=20000\n\
               io_submit_mode=offload\n";
    let media = "servers = 2\nservice = \"fixed\"\nservice_mean_ns = 100000\nwrite_mean_ns = 1000";
    let device_order = run_json(&options(job, &analytic(media), &[], 1));
    let in_order = run_json(&options(
        job,
        &analytic(media),
        &[
            "controller.completion_order=fifo",
            "controller.reorder_bound=0",
        ],
        1,
    ));
    let w = |r: &serde_json::Value| f(&r["jobs"][0]["write"]["clat_ns"]["mean"]);
    assert!(w(&device_order) < 2_000.0, "{}", w(&device_order));
    assert!(w(&in_order) > 20_000.0, "{}", w(&in_order));
    // Reads never wait for writes (a write finishes first), so their latency is unchanged.
    let rd = |r: &serde_json::Value| f(&r["jobs"][0]["read"]["clat_ns"]["max"]);
    assert_eq!(rd(&device_order), rd(&in_order));
}

/// With one SQ the controller books a fetch when the entry is written instead of when its
/// doorbell lands; with several SQs (WRR gives each core four, of which this job uses one) it
/// waits for the Doorbell event. Both must give the same run, to the nanosecond.
#[test]
fn booking_the_fetch_early_changes_nothing() {
    let job = "[global]\nbs=4k\nsize=8g\nnumber_ios=50000\n[rr]\nrw=randrw\niodepth=16\n\
               iodepth_batch_submit=4\n";
    let preset = qoslab_sim::device::preset_text("nvme-analytic").unwrap();
    let folded = run_json(&options(job, preset, &[], 9));
    let events = run_json(&options(job, preset, &["controller.arbitration=wrr"], 9));
    assert_eq!(folded["jobs"], events["jobs"]);
    assert_eq!(
        stage(&folded, "nvme-host")["commands"],
        stage(&events, "nvme-host")["commands"]
    );
    assert!(f(&folded["qoslab"]["events"]) < f(&events["qoslab"]["events"]));
}
