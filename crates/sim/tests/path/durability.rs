//! Durability end to end from a job file: fio's flush and FUA options, `--power-fail-at`, and
//! what `qoslab.durability` reports against the device's own account of its cache.

use crate::common::*;

const WRITES: &str = "[w]\nrw=randwrite\nbs=4k\nsize=1g\niodepth=8\ntime_based=1\nruntime=30ms\n";

fn power_fail(job: &str, preset: &str, sets: &[&str]) -> serde_json::Value {
    let device = qoslab_sim::device::preset_text(preset).unwrap();
    let mut opts = options(job, device, sets, 1);
    opts.power_fail_at_ns = Some(20_000_000);
    run_json(&opts)
}

fn durability(r: &serde_json::Value) -> &serde_json::Value {
    &r["qoslab"]["durability"]["jobs"][0]
}

/// A volatile write cache without power-loss protection: the power failure takes exactly the
/// acknowledged writes still in the cache, as many as the drive counts lost, and none of what
/// it had written to flash.
#[test]
fn without_plp_the_failure_takes_the_acknowledged_writes_still_in_the_cache() {
    let r = power_fail(WRITES, "consumer-tlc", &[]);
    let d = durability(&r);
    let lost = f(&d["acknowledged_lost"]);
    assert!(lost > 0.0, "{d}");
    assert_eq!(lost, f(&stage(&r, "ssd")["lost_acknowledged_writes"]));
    assert!(f(&d["lost_in_flight"]) <= 8.0, "{d}");
    assert_eq!(f(&d["durable"]), f(&d["writes_acknowledged"]) - lost, "{d}");
    // Writes the job saw complete are all it had acknowledged; the cache lost some of them.
    assert!(f(&d["writes_acknowledged"]) > lost);
}

/// fsync=1: a FLUSH after the writes the job has reaped, so what the job relied on is on
/// flash; the FLUSHes show as fio's sync. (libaio's fsync=1, as fio 3.33's: the first goes
/// with its write in flight, the next once a write was reaped, so after the queue's first
/// fill about one per write.)
#[test]
fn with_fsync_1_nothing_acknowledged_is_lost() {
    let r = power_fail(&format!("{WRITES}fsync=1\n"), "consumer-tlc", &[]);
    let d = durability(&r);
    assert_eq!(d["acknowledged_lost"], 0, "{d}");
    assert!(f(&d["writes_acknowledged"]) > 0.0);
    let syncs = f(&r["jobs"][0]["sync"]["total_ios"]);
    let writes = f(&r["jobs"][0]["write"]["total_ios"]);
    assert!(
        syncs >= 1.0 && syncs <= writes && writes - syncs <= 8.0,
        "{syncs} {writes}"
    );
}

/// libaio's fsync goes beside the writes in flight (fio 3.33 calls fsync(2) at once), and
/// Linux's fsync does not wait for them: a FLUSH covers the writes the job reaped before it, so
/// a cut never takes one the job relied on, though the cache held writes issued before the
/// last FLUSH.
#[test]
fn a_libaio_fsync_covers_the_writes_reaped_before_it() {
    let r = power_fail(&format!("{WRITES}fsync=4\n"), "consumer-tlc", &[]);
    let d = durability(&r);
    assert_eq!(d["acknowledged_lost"], 0, "{d}");
    assert!(f(&d["writes_acknowledged"]) > 0.0, "{d}");
    assert!(f(&d["lost_in_flight"]) > 0.0, "{d}");
    // Each sync went with writes in flight: fio counts it at the depth it held, never 1; the
    // first write alone went at depth 1.
    let job = &r["jobs"][0];
    let at_one = f(&job["iodepth_level"]["1"]) * f(&job["write"]["total_ios"]) / 100.0;
    assert!((at_one - 1.0).abs() < 1e-6, "{}", job["iodepth_level"]);
}

/// FUA writes are on flash when they complete: on the ssd model and on the cached drive of
/// Rio's flash target (where each is its own program, not a drain of the cache, so the power
/// failure still finds some in flight).
#[test]
fn fua_writes_are_durable_when_acknowledged() {
    for (preset, drive) in [("consumer-tlc", "ssd"), ("rio-flash", "cached")] {
        let r = power_fail(&format!("{WRITES}fua=1\n"), preset, &[]);
        let d = durability(&r);
        assert_eq!(d["acknowledged_lost"], 0, "{preset}: {d}");
        assert!(f(&d["writes_acknowledged"]) > 0.0, "{preset}: {d}");
        if drive == "cached" {
            let s = stage(&r, drive);
            assert_eq!(f(&s["barrier_writes"]), 0.0, "{s}");
            assert!(f(&d["lost_in_flight"]) > 0.0, "{preset}: {d}");
        }
    }
}

/// Power-loss protection: the cache survives, so only writes in flight are lost.
#[test]
fn with_plp_nothing_acknowledged_is_lost() {
    let r = power_fail(WRITES, "enterprise-tlc-plp", &[]);
    let d = durability(&r);
    assert_eq!(d["acknowledged_lost"], 0, "{d}");
    assert!(f(&d["writes_acknowledged"]) > 0.0);
}

/// 400 random writes, a sync after every 4 and one at the end.
const FSYNC_EVERY_4: &str =
    "[w]\nrw=randwrite\nbs=4k\nsize=1g\niodepth=4\nnumber_ios=400\nfsync=4\nend_fsync=1\n";

/// A device without a volatile cache gets no FLUSH: the block layer completes each at once
/// (as Linux does when the queue has no write cache), so the media serves only the writes.
#[test]
fn no_flush_reaches_a_device_without_a_volatile_cache() {
    let device = qoslab_sim::device::preset_text("nvme-analytic").unwrap();
    let r = run_json(&options(FSYNC_EVERY_4, device, &[], 1));
    // fio 3.33: a sync after every 4 writes but the last 4 (the job fetches no write after
    // them): 99, which the JSON counts; then end_fsync's, which it does not.
    let syncs = f(&r["jobs"][0]["sync"]["total_ios"]);
    assert_eq!(syncs, 400.0 / 4.0 - 1.0);
    assert_eq!(f(&stage(&r, "block")["flushes_not_sent"]), syncs + 1.0);
    assert_eq!(f(&stage(&r, "analytic")["commands_served"]), 400.0);
    assert_eq!(r["jobs"][0]["sync"]["lat_ns"]["max"], 0);
}

/// Over NVMe-oF the initiator's queue has a volatile write cache whatever the drive (Linux's
/// nvmet reports one for every namespace, and the host sets the queue's write cache and FUA
/// from it): on rio-optane, whose drive has PLP, every FLUSH still crosses the network, and
/// the target's block layer completes it without the drive.
#[test]
fn over_nvme_of_a_flush_goes_to_the_target_whatever_its_drive() {
    let device = qoslab_sim::device::preset_text("rio-optane").unwrap();
    let r = run_json(&options(FSYNC_EVERY_4, device, &[], 1));
    let syncs = f(&r["jobs"][0]["sync"]["total_ios"]);
    assert_eq!(syncs, 400.0 / 4.0 - 1.0);
    assert_eq!(f(&stage(&r, "block")["flushes_not_sent"]), 0.0);
    assert_eq!(f(&stage(&r, "target")["flushes_not_sent"]), syncs + 1.0);
    let drive = stage(&r, "cached");
    assert_eq!(f(&drive["flushes"]), 0.0, "{drive}");
    assert_eq!(f(&drive["barrier_writes"]), 0.0, "{drive}");
    // Each FLUSH is a round trip: a capsule out and a response back, 830 ns each way at least.
    assert!(
        f(&r["jobs"][0]["sync"]["lat_ns"]["min"]) > 1660.0,
        "{}",
        r["jobs"][0]["sync"]
    );
    // FUA writes keep their flag to the target, whose block layer drops it for the PLP drive;
    // the flash drive, with its cache, gets it (a FUA write, not a drain of the cache).
    let fua = "[w]\nrw=randwrite\nbs=4k\nsize=1g\niodepth=4\nnumber_ios=100\nfua=1\n";
    for (preset, fua_writes) in [("rio-optane", 0.0), ("rio-flash", 100.0)] {
        let device = qoslab_sim::device::preset_text(preset).unwrap();
        let r = run_json(&options(fua, device, &[], 1));
        let drive = stage(&r, "cached");
        assert_eq!(f(&drive["fua_writes"]), fua_writes, "{preset}: {drive}");
        assert_eq!(f(&drive["barrier_writes"]), 0.0, "{preset}: {drive}");
    }
}
