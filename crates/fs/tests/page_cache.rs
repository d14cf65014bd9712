//! The page cache against the kernel's rules: readahead windows, buffered writes, writeback
//! and fsync of the block device itself (fio's direct=0 on a device).

mod common;

use common::*;
use qoslab_engine::{Call, Op, ReqFlags};
use qoslab_fs::FsSetup;

fn raw_device(cfg: &[(&str, &str)]) -> Bench {
    raw_device_at(cfg, 20_000)
}

fn raw_device_at(cfg: &[(&str, &str)], delay_ns: u64) -> Bench {
    let setup = FsSetup {
        capacity_bytes: 64 * GIB,
        cores: 4,
        kernel_job: 100,
        mount: false,
        ..FsSetup::default()
    };
    bench(fs_config(cfg), journal("ext4", &[]), setup, delay_ns)
}

#[test]
fn a_4k_sequential_buffered_reader_sends_16k_32k_64k_then_128k_requests() {
    let mut h = raw_device(&[]);
    for k in 0..128u64 {
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Read, Call::Io, 0, k * 4096, 4096, 0, now));
    }
    let sizes: Vec<u64> = h.stage.lower.seen.iter().map(|s| s.len / 1024).collect();
    assert_eq!(&sizes[..5], &[16, 32, 64, 128, 128]);
    assert!(sizes[4..].iter().all(|&s| s == 128), "{sizes:?}");
    // 512 KiB read ahead of a reader at 512 KiB: every request but the first is asynchronous.
    let read: u64 = h.stage.lower.seen.iter().map(|s| s.len).sum();
    assert!(
        (128 * 4096..=128 * 4096 + 256 * 1024).contains(&read),
        "{read}"
    );
}

#[test]
fn random_reads_read_only_what_they_ask_and_readahead_off_reads_page_by_page() {
    let mut h = raw_device(&[]);
    for k in [1000u64, 7, 50_000, 3] {
        let now = h.now_ns();
        sync_call(
            &mut h,
            call(Op::Read, Call::Io, 0, k * 4096 * 17, 8192, 0, now),
        );
    }
    assert!(
        h.stage.lower.seen.iter().all(|s| s.len == 8192),
        "{:?}",
        h.stage.lower.seen
    );
    let mut h = raw_device(&[("read_ahead_kb", "0")]);
    for k in 0..8u64 {
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Read, Call::Io, 0, k * 4096, 4096, 0, now));
    }
    assert_eq!(h.stage.lower.seen.len(), 8);
}

#[test]
fn buffered_writes_return_at_memory_speed_and_fsync_writes_them_back_then_flushes() {
    let mut h = raw_device(&[]);
    let t0 = h.now_ns();
    for k in 0..512u64 {
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Write, Call::Io, 0, k * 4096, 4096, 0, now));
    }
    // 512 writes of 4 KiB, each a system call and a copy: no I/O yet.
    assert!(h.stage.lower.seen.is_empty());
    assert!(h.now_ns() - t0 < 512 * 2_000);
    let now = h.now_ns();
    sync_call(&mut h, call(Op::Flush, Call::Io, 0, 0, 0, 0, now));
    let seen = &h.stage.lower.seen;
    // 2 MiB in 1 MiB writes, then one FLUSH after both completed.
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen[..2]
            .iter()
            .all(|s| s.op == Op::Write && s.len == 1 << 20)
    );
    assert_eq!(seen[2].op, Op::Flush);
    assert!(seen[2].at >= seen[0].done.max(seen[1].done));
}

#[test]
fn the_flusher_writes_back_past_the_background_threshold_and_throttles_past_the_limit() {
    // 64 MiB of memory: background at 6.4 MiB, limit 12.8 MiB; a device of 5 ms per request,
    // 1 MiB each: slower than the writer.
    let mut h = raw_device_at(&[("mem_bytes", "67108864")], 5_000_000);
    let mut throttled_at = None;
    for k in 0..8192u64 {
        let now = h.now_ns();
        let done = sync_call(&mut h, call(Op::Write, Call::Io, 0, k * 4096, 4096, 0, now));
        if throttled_at.is_none() && done - now > 50_000 {
            throttled_at = Some(k);
        }
    }
    let written: u64 = h.stage.lower.seen.iter().map(|s| s.len).sum();
    assert!(written > 0, "the flusher never ran");
    // Nothing is written before the background threshold (6.4 MiB: page 1638).
    let first = h.stage.lower.seen[0].at;
    assert!(first > 0);
    let k = throttled_at.expect("a writer of 32 MiB into 12.8 MiB of dirty limit waits");
    assert!((1638..4000).contains(&k), "throttled from write {k}");
    // The flusher's writes are background writeback: at most 4 in flight (blk-wbt).
    let mut events: Vec<(u64, i32)> = Vec::new();
    for s in &h.stage.lower.seen {
        events.push((s.at, 1));
        events.push((s.done, -1));
    }
    events.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    assert!(most <= 16, "{most} in flight");
    let _ = ReqFlags::empty();
}
