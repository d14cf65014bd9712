//! Jobs on files (a mounted file system, `[fs] mount = true`): the page cache and the file
//! system of `[fs]` on top of the path. The device sees what the file system's rules
//! (`crates/fs`) send for each fsync.

use crate::common::{f, options_as_written, run_json, stage};

/// A single thread appending 4 KiB and calling fsync after each write (the Rio paper's
/// fsync-append, one thread, fio's defaults: psync, buffered): `n` writes. fio 3.33 syncs when
/// it fetches the next write, so `n` writes make `n - 1` fsyncs (10 make 9, measured; the
/// option's rule in `Durability`): the last write stays in the page cache.
fn fsync_append(n: u32, extra: &str) -> String {
    format!("[append]\nrw=write\nbs=4k\nsize=1g\nnumber_ios={n}\nfsync=1\n{extra}")
}

/// Options for `job` on `device` with its file system mounted (`fs.mount=true`) and `sets`.
fn options(job: &str, device: &str, sets: &[&str]) -> qoslab_sim::SimOptions {
    let mut all = vec!["fs.mount=true"];
    all.extend_from_slice(sets);
    options_as_written(job, device, &all, 1)
}

fn run(job: &str, preset: &str, sets: &[&str]) -> serde_json::Value {
    let device = qoslab_sim::device::preset_text(preset).unwrap();
    run_json(&options(job, device, sets))
}

/// ext4 (data=ordered): an fsync of a file that grew commits a transaction: the data block,
/// then the journal's descriptor and metadata, then the commit block with PREFLUSH and FUA.
/// The drive (a volatile cache that honours FUA) sees those three writes per fsync and, as
/// Linux's blk-flush sends a PREFLUSH write, one FLUSH before the commit block, which goes with
/// FUA alone (a FUA write of the drive, not a drain of its cache).
#[test]
fn ext4_fsync_append_is_one_commit_and_one_fua_write_per_fsync() {
    let n = 50;
    let syncs = n - 1;
    let r = run(&fsync_append(n, ""), "rio-flash", &[]);
    let fs = stage(&r, "fs");
    assert_eq!(f(&fs["fsyncs"]), f64::from(syncs), "{fs}");
    assert_eq!(f(&fs["commits"]), f64::from(syncs), "{fs}");
    let drive = stage(&r, "cached");
    assert_eq!(f(&drive["writes"]), f64::from(3 * syncs), "{drive}");
    assert_eq!(f(&drive["fua_writes"]), f64::from(syncs), "{drive}");
    assert_eq!(f(&drive["barrier_writes"]), 0.0, "{drive}");
    assert_eq!(f(&drive["flushes"]), f64::from(syncs), "{drive}");
    let block = stage(&r, "block");
    assert_eq!(f(&block["flush_ios"]), f64::from(syncs), "{block}");
    assert_eq!(f(&block["flush_sequences"]), f64::from(syncs), "{block}");
    assert_eq!(f(&r["jobs"][0]["sync"]["total_ios"]), f64::from(syncs));
    assert_eq!(f(&r["jobs"][0]["write"]["total_ios"]), f64::from(n));
}

/// `barrier=0` (nobarrier): the same commits, and neither FLUSH nor FUA reaches the drive.
#[test]
fn ext4_without_barriers_sends_no_flush_and_no_fua() {
    let n = 50;
    let r = run(
        &fsync_append(n, ""),
        "rio-flash",
        &["fs.ext4.barrier=false"],
    );
    assert_eq!(f(&stage(&r, "fs")["commits"]), f64::from(n - 1));
    let drive = stage(&r, "cached");
    assert_eq!(f(&drive["flushes"]), 0.0, "{drive}");
    assert_eq!(f(&drive["barrier_writes"]), 0.0, "{drive}");
    assert_eq!(f(&drive["fua_writes"]), 0.0, "{drive}");
}

/// Buffered writes without fsync stay in the page cache: the run ends with them dirty and the
/// drive saw none of them (the flusher's first periodic wake-up is 5 s away).
#[test]
fn buffered_writes_without_fsync_stay_in_the_page_cache() {
    let r = run(&fsync_append(64, "fsync=0\n"), "rio-flash", &[]);
    let fs = stage(&r, "fs");
    assert_eq!(f(&fs["dirty_pages_at_end"]), 64.0, "{fs}");
    assert_eq!(f(&stage(&r, "cached")["writes"]), 0.0);
}

/// RioFS sends each transaction as ordered groups through Rio's ordering, which needs target
/// servers; on a local drive the run says so.
#[test]
fn riofs_needs_target_servers() {
    let device = qoslab_sim::device::preset_text("nvme-analytic").unwrap();
    let opts = options(&fsync_append(4, ""), device, &["fs.type=riofs"]);
    let e = qoslab_sim::run(&opts).err().expect("an error").to_string();
    assert!(
        e.contains("fs.type = 'riofs'") && e.contains("target servers"),
        "{e}"
    );
}

/// Without `[fs] mount` the jobs work on the device: fio's `directory=` alone changes nothing
/// (no fs stage, the same report as without it), and buffered I/O is refused.
#[test]
fn without_mount_jobs_work_on_the_device() {
    let device = qoslab_sim::device::preset_text("nvme-analytic").unwrap();
    let direct = "[global]\nioengine=libaio\ndirect=1\n";
    let plain = format!("{direct}{}", fsync_append(8, ""));
    let with_dir = format!("{direct}{}directory=/mnt\n", fsync_append(8, ""));
    let a = run_json(&options_as_written(&plain, device, &[], 1));
    let b = run_json(&options_as_written(&with_dir, device, &[], 1));
    let stages = |r: &serde_json::Value| r["qoslab"]["stages"].to_string();
    assert!(!stages(&a).contains("\"fs\""), "{}", stages(&a));
    assert_eq!(a["jobs"][0]["write"], b["jobs"][0]["write"]);
    assert_eq!(a["jobs"][0]["sync"], b["jobs"][0]["sync"]);
    let e = qoslab_sim::run(&options_as_written(&fsync_append(8, ""), device, &[], 1))
        .err()
        .expect("an error")
        .to_string();
    assert!(e.contains("direct=0") && e.contains("fs.mount=true"), "{e}");
}

/// RioFS and HORAEFS on Rio's flash target: every fsync of every thread returns, and the
/// drive's volatile cache is drained for them.
#[test]
fn riofs_and_horaefs_run_on_rio_targets() {
    let n = 50;
    let job = format!("{}numjobs=4\n", fsync_append(n, ""));
    for fs_type in ["horaefs", "riofs"] {
        let r = run(&job, "rio-flash", &[&format!("fs.type={fs_type}")]);
        assert_eq!(
            f(&stage(&r, "fs")["fsyncs"]),
            f64::from(4 * (n - 1)),
            "{fs_type}"
        );
        for j in 0..4 {
            assert_eq!(
                f(&r["jobs"][j]["sync"]["total_ios"]),
                f64::from(n - 1),
                "{fs_type}"
            );
        }
        // HORAE persists a transaction with a FLUSH of its own, Rio with the commit block's
        // PREFLUSH|FUA: either way the drive's cache is drained, at most once per fsync.
        let drive = stage(&r, "cached");
        let drains = f(&drive["flushes"]) + f(&drive["barrier_writes"]);
        assert!(
            (1.0..=f64::from(4 * n)).contains(&drains),
            "{fs_type}: {drive}"
        );
    }
}

/// On a drive with power-loss protection (rio-optane) a completed write is durable, and the
/// target's block layer drops the cache flags of every write and completes every FLUSH (Linux's
/// submit_bio_noacct on a write-through queue; Rio 4.3.2): no file system's fsync drains the
/// drive there. The FLUSHes still cross the network, and their responses come back like every
/// other command's: HORAEFS's ordered FLUSH command (one per fsync), and ext4's commit block's
/// PREFLUSH, which the initiator's queue sends as a FLUSH of its own (nvmet reports a volatile
/// write cache whatever the drive, so the initiator's queue is write back). RioFS's ordered
/// commit block carries no flag for a PLP drive (the ordering plug-in's own rule).
#[test]
fn no_fsync_drains_a_drive_with_power_loss_protection() {
    let job = format!("{}numjobs=4\n", fsync_append(25, ""));
    for fs_type in ["ext4", "horaefs", "riofs"] {
        let r = run(&job, "rio-optane", &[&format!("fs.type={fs_type}")]);
        // 4 threads of 25 appends: 24 fsyncs each.
        assert_eq!(f(&stage(&r, "fs")["fsyncs"]), 96.0, "{fs_type}");
        let drive = stage(&r, "cached");
        assert_eq!(f(&drive["barrier_writes"]), 0.0, "{fs_type}: {drive}");
        assert_eq!(f(&drive["flushes"]), 0.0, "{fs_type}: {drive}");
        let at_target = f(&stage(&r, "target")["flushes_not_sent"]);
        let flushes = match fs_type {
            "horaefs" => 96.0,
            "ext4" => f(&stage(&r, "fs")["commits"]),
            _ => 0.0,
        };
        assert!(flushes > 0.0 || fs_type == "riofs", "{fs_type}");
        assert_eq!(at_target, flushes, "{fs_type}");
        let wire = stage(&r, "rdma");
        assert_eq!(
            f(&wire["completions"]),
            f(&wire["commands"]),
            "{fs_type}: {wire}"
        );
    }
}

/// The application a job's clones run (`app=`): its operations per flowop or put, from the
/// report's `qoslab_app`.
fn app_ops(r: &serde_json::Value) -> &serde_json::Map<String, serde_json::Value> {
    r["jobs"][0]["qoslab_app"]["operations"]
        .as_object()
        .expect("an application job's operations")
}

/// db_bench's fillsync: a thread alone makes each put one log append of RocksDB's record
/// (1,063 bytes for a 16-byte key and a 1 KiB value) and one fdatasync before its next put.
/// Threads share the log through RocksDB's group commit: with four threads in step, the
/// first leads a group of its own put, the three queued behind it form the next group, and
/// the two groups alternate: 80 puts in 40 log appends and 40 fdatasyncs, one at a time, each
/// group's puts one record (1,063 and 7 + 12 + 3 x 1,044 = 3,151 bytes), plus at most a
/// fragment header and a block's padding where a record crosses a 32 KiB block of the log.
#[test]
fn fillsync_threads_share_the_log_through_rocksdbs_group_commit() {
    let alone = run(
        "[db]\napp=fillsync\nnumjobs=1\nnumber_ios=20\n",
        "rio-optane",
        &[],
    );
    assert_eq!(f(&app_ops(&alone)["put"]), 20.0);
    let j = &alone["jobs"][0];
    assert_eq!(f(&j["write"]["total_ios"]), 20.0);
    assert_eq!(f(&j["write"]["io_bytes"]), 20.0 * 1063.0);
    assert_eq!(f(&j["sync"]["total_ios"]), 20.0);

    let job = "[db]\napp=fillsync\nnumjobs=4\nnumber_ios=20\ngroup_reporting=1\n";
    let r = run(job, "rio-optane", &[]);
    let ops = app_ops(&r);
    assert_eq!(f(&ops["put"]), 80.0, "{ops:?}");
    assert_eq!(f(&r["jobs"][0]["qoslab_app"]["ops"]), 80.0);
    assert!(f(&r["jobs"][0]["qoslab_app"]["ops_per_s"]) > 0.0);
    let j = &r["jobs"][0];
    assert_eq!(f(&j["write"]["total_ios"]), 40.0);
    let bytes = f(&j["write"]["io_bytes"]);
    let records = 20.0 * 1063.0 + 20.0 * 3151.0;
    assert!(
        bytes >= records && bytes <= records + 2.0 * (7.0 + 6.0),
        "{bytes}"
    );
    assert_eq!(f(&j["sync"]["total_ios"]), 40.0);
    let fs = stage(&r, "fs");
    assert_eq!(f(&fs["fsyncs"]), 40.0, "{fs}");
}

/// Filebench's Varmail: every thread goes through the thirteen flowops in turn, so two loops
/// of four threads count each flowop eight times; its creates, unlinks and fsyncs reach the
/// file system, and its reads find the preallocated files in the page cache.
#[test]
fn varmail_threads_run_the_thirteen_flowops_in_turn() {
    let job = "[mail]\napp=varmail\nnumjobs=4\nnumber_ios=26\ngroup_reporting=1\n";
    for fs_type in ["ext4", "riofs"] {
        let r = run(job, "rio-optane", &[&format!("fs.type={fs_type}")]);
        let ops = app_ops(&r);
        assert_eq!(ops.len(), 13, "{ops:?}");
        for (name, n) in ops {
            assert_eq!(f(n), 8.0, "{fs_type}: {name}: {ops:?}");
        }
        let fs = stage(&r, "fs");
        assert!(f(&fs["creates"]) > 0.0 && f(&fs["unlinks"]) > 0.0, "{fs}");
        assert_eq!(
            f(&fs["fsyncs"]),
            f(&r["jobs"][0]["sync"]["total_ios"]),
            "{fs}"
        );
        assert!(f(&fs["cache_hit_pages"]) > 0.0, "{fs}");
    }
}

/// An application needs a mounted file system, and Varmail (which loops) a bound.
#[test]
fn an_application_needs_a_mount_and_varmail_a_bound() {
    let device = qoslab_sim::device::preset_text("rio-optane").unwrap();
    let opts = options_as_written("[mail]\napp=varmail\nnumber_ios=5\n", device, &[], 1);
    let e = qoslab_sim::run(&opts).err().expect("an error").to_string();
    assert!(
        e.contains("app=varmail") && e.contains("fs.mount=true"),
        "{e}"
    );
    let opts = options("[mail]\napp=varmail\n", device, &[]);
    let e = qoslab_sim::run(&opts).err().expect("an error").to_string();
    assert!(e.contains("number_ios=") && e.contains("runtime="), "{e}");
}

/// The latency breakdown of an append's fsync (Rio, Figure 14), one thread on Rio's Optane
/// target: when the blocks of each kind, the file's data (D), the journal's descriptor and
/// metadata (JM) and the commit record with its FLUSH (JC), left the file system, left the host
/// driver and completed, in the order each file system's commit allows. ext4 (JBD2,
/// data=ordered) writes and waits for D before the commit thread logs JM, and waits for JM
/// before it sends JC. RioFS sends the file-level transaction's D, JM and JC in one
/// submission, and Rio's ordering lets them all leave the host at once. HORAEFS sends them the
/// same way, but HORAE dispatches an ordered group's data only after its control path has
/// persisted the group's ordering metadata at the target: JM and JC leave the host later.
#[test]
fn an_fsyncs_latency_breakdown_follows_each_file_systems_commit() {
    let n = 20;
    let mut at = std::collections::BTreeMap::new();
    for fs_type in ["ext4", "horaefs", "riofs"] {
        let r = run(
            &fsync_append(n, ""),
            "rio-optane",
            &[&format!("fs.type={fs_type}")],
        );
        let fs = stage(&r, "fs");
        let calls = f(&fs["breakdown_fsyncs"]);
        // Every fsync of an append waited for blocks of all three kinds.
        assert_eq!(calls, f64::from(n - 1), "{fs_type}: {fs}");
        let mean = |key: &str| f(&fs[format!("breakdown_{key}_ns").as_str()]) / calls;
        let end = mean("end");
        for part in ["d", "jm", "jc"] {
            let (sent, out, done) = (
                mean(&format!("{part}_sent")),
                mean(&format!("{part}_dispatched")),
                mean(&format!("{part}_done")),
            );
            assert!(
                sent <= out && out < done && done < end,
                "{fs_type} {part}: {fs}"
            );
            at.insert((fs_type, part), (sent, out, done));
        }
        // fio's fsync latency is the call's.
        let lat = f(&r["jobs"][0]["sync"]["lat_ns"]["mean"]);
        assert!((lat - end).abs() < 1.0, "{fs_type}: {lat} against {end}");
    }
    let ext4 = |p| at[&("ext4", p)];
    assert!(ext4("jm").0 >= ext4("d").2, "ext4: JM after D is durable");
    assert!(ext4("jc").0 >= ext4("jm").2, "ext4: JC after JM is durable");
    let rio = |p| at[&("riofs", p)];
    assert_eq!(rio("d").0, rio("jm").0, "RioFS: one submission");
    assert_eq!(rio("d").0, rio("jc").0, "RioFS: one submission");
    assert!(
        rio("jc").1 < rio("d").2,
        "RioFS: JC leaves the host before D is done"
    );
    let horae = |p| at[&("horaefs", p)];
    assert_eq!(horae("d").0, horae("jc").0, "HORAEFS: one submission");
    for p in ["jm", "jc"] {
        assert!(
            horae(p).1 > horae("d").1,
            "HORAEFS: {p} waits for the control path"
        );
        assert!(
            horae(p).1 > rio(p).1,
            "HORAEFS's {p} leaves the host later than RioFS's"
        );
    }
}
