//! ext4 with JBD2, data=ordered: what an fsync sends, in what order, and group commit.

mod common;

use common::*;
use qoslab_engine::{Call, Op, ReqFlags};
use qoslab_fs::FsSetup;

fn ext4(opts: &[(&str, &str)], cores: u32) -> Bench {
    let setup = FsSetup {
        capacity_bytes: 256 * GIB,
        cores,
        kernel_job: 100,
        mount: true,
        ..FsSetup::default()
    };
    bench(fs_config(&[]), journal("ext4", opts), setup, 20_000)
}

/// Creates file `name` for `job`, appends 4 KiB and fsyncs it; the fsync's completion time.
fn append_fsync(h: &mut Bench, name: u32, job: u32) -> u64 {
    let now = h.now_ns();
    sync_call(h, call(Op::Write, Call::Create, name, 0, 0, job, now));
    let now = h.now_ns();
    sync_call(h, call(Op::Write, Call::Io, name, 0, 4096, job, now));
    let now = h.now_ns();
    sync_call(h, call(Op::Flush, Call::Io, name, 0, 0, job, now))
}

#[test]
fn an_fsync_writes_the_data_then_the_journal_then_the_commit_block_with_preflush_and_fua() {
    let mut h = ext4(&[], 1);
    append_fsync(&mut h, 1, 0);
    let seen = &h.stage.lower.seen;
    assert_eq!(seen.len(), 3, "{seen:#?}");
    let (d, jm, jc) = (seen[0], seen[1], seen[2]);
    assert_eq!((d.op, d.len, d.flags), (Op::Write, 4096, ReqFlags::empty()));
    // The descriptor and at least the inode, its bitmaps and the directory block.
    assert!(jm.len >= 5 * 4096, "{jm:?}");
    assert!(jm.flags.contains(ReqFlags::SYNC));
    assert_eq!(jc.len, 4096);
    assert!(jc.flags.contains(ReqFlags::PREFLUSH | ReqFlags::FUA));
    assert_eq!(
        jc.offset,
        jm.offset + jm.len,
        "the commit block follows the journal copies"
    );
    // fsync waits for its data before it asks for the commit; the commit block waits for the
    // journal copies.
    assert!(jm.at >= d.done);
    assert!(jc.at >= jm.done);
    // The commit thread's requests are its own, not the caller's.
    assert_eq!(d.job, 0);
    assert_eq!(jm.job, 101);
}

#[test]
fn an_fsync_of_a_file_whose_transaction_is_durable_sends_only_a_flush() {
    let mut h = ext4(&[], 1);
    append_fsync(&mut h, 1, 0);
    let n = h.stage.lower.seen.len();
    let now = h.now_ns();
    sync_call(&mut h, call(Op::Flush, Call::Io, 1, 0, 0, 0, now));
    let seen = &h.stage.lower.seen[n..];
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].op, Op::Flush);
}

#[test]
fn journal_async_commit_sends_the_commit_block_with_the_journal_then_one_flush() {
    let mut h = ext4(&[("journal_async_commit", "true")], 1);
    append_fsync(&mut h, 1, 0);
    let seen = &h.stage.lower.seen;
    let ops: Vec<Op> = seen.iter().map(|s| s.op).collect();
    assert_eq!(ops, [Op::Write, Op::Write, Op::Write, Op::Flush]);
    assert_eq!(
        seen[2].flags & (ReqFlags::PREFLUSH | ReqFlags::FUA),
        ReqFlags::empty()
    );
    assert_eq!(
        seen[1].at, seen[2].at,
        "the commit block goes with the journal copies"
    );
    let mut h = ext4(&[("barrier", "false")], 1);
    append_fsync(&mut h, 1, 0);
    assert!(
        h.stage
            .lower
            .seen
            .iter()
            .all(|s| s.op == Op::Write && !s.flags.intersects(ReqFlags::PREFLUSH | ReqFlags::FUA))
    );
}

/// `threads` threads, created one after another, then all at once `rounds` rounds each of an
/// append of 4 KiB and its fsync; the fsyncs done.
fn append_rounds(h: &mut Bench, threads: u32, rounds: u64) -> u64 {
    for t in 0..threads {
        let now = h.now_ns();
        sync_call(h, call(Op::Write, Call::Create, t + 1, 0, 0, t, now));
    }
    let mut next = vec![0u64; threads as usize];
    let mut pending = std::collections::BTreeMap::new();
    let mut fsyncs = 0;
    let submit = |h: &mut Bench, t: u32, k: u64, fsync: bool| {
        let now = h.now_ns();
        let r = if fsync {
            call(Op::Flush, Call::Io, t + 1, 0, 0, t, now)
        } else {
            call(Op::Write, Call::Io, t + 1, k * 4096, 4096, t, now)
        };
        h.submit(r).unwrap()
    };
    for t in 0..threads {
        pending.insert(submit(h, t, 0, false), (t, false));
    }
    let mut out = Vec::new();
    while !pending.is_empty() {
        assert!(h.step(&mut out));
        // Every completion first: the harness reuses the ids of requests it freed.
        let done: Vec<(u32, bool)> = out
            .drain(..)
            .map(|d| pending.remove(&d.id).unwrap())
            .collect();
        for (t, was_fsync) in done {
            if was_fsync {
                fsyncs += 1;
                next[t as usize] += 1;
                if next[t as usize] < rounds {
                    pending.insert(submit(h, t, next[t as usize], false), (t, false));
                }
            } else {
                pending.insert(submit(h, t, next[t as usize], true), (t, true));
            }
        }
    }
    fsyncs
}

/// The commit blocks the device saw.
fn commit_blocks(h: &Bench) -> Vec<common::Seen> {
    let seen = &h.stage.lower.seen;
    seen.iter()
        .filter(|s| s.flags.contains(ReqFlags::PREFLUSH))
        .copied()
        .collect()
}

#[test]
fn concurrent_fsyncs_share_commits_and_one_commit_runs_at_a_time() {
    let threads = 8;
    let mut h = ext4(&[], threads);
    assert_eq!(append_rounds(&mut h, threads, 20), 160);
    let commits = commit_blocks(&h);
    assert!(
        commits.len() < 160 / 2,
        "{} commits for 160 fsyncs",
        commits.len()
    );
    // One commit thread: a commit block is sent only after the previous one completed.
    for w in commits.windows(2) {
        assert!(w[1].at >= w[0].done);
    }
}

/// Threads in step, each appending to its own file and fsyncing it, on `dioread_lock`: every
/// append's block is allocated (written) as its writeback starts, in the running transaction,
/// so the first fsync's commit carries every thread's append: one commit per round, for ever.
/// On `dioread_nolock` (Linux 6.1's default) the block is allocated unwritten and converted when
/// its write completes, one conversion at a time, in the transaction running then: the first
/// converted thread's fsync starts the commit before the other threads are converted, and they
/// wait for the next one; from then on two groups alternate, as in the guest kernel (a FLUSH
/// per N/2 fsyncs at 4 and 16 threads; docs/fs.md).
#[test]
fn threads_in_step_split_into_two_alternating_commit_groups_with_dioread_nolock() {
    let (threads, rounds) = (8, 20);
    let mut lock = ext4(&[("dioread_nolock", "false")], threads);
    assert_eq!(append_rounds(&mut lock, threads, rounds), 160);
    assert_eq!(
        commit_blocks(&lock).len() as u64,
        rounds,
        "one commit per round"
    );
    let mut nolock = ext4(&[], threads);
    assert_eq!(append_rounds(&mut nolock, threads, rounds), 160);
    let commits = commit_blocks(&nolock).len() as u64;
    assert!(
        (2 * rounds - 1..=2 * rounds + 1).contains(&commits),
        "{commits} commits for {rounds} rounds: two groups"
    );
    // Each written-back append reaches the device once, as on dioread_lock.
    let writes = |h: &Bench| {
        h.stage
            .lower
            .seen
            .iter()
            .filter(|s| s.op == Op::Write && s.len == 4096 && s.flags.is_empty())
            .count()
    };
    assert_eq!(writes(&nolock), writes(&lock));
}

/// blk-wbt gives an fsync's writeback the whole depth: Linux 6.1's `get_limit` takes
/// `max_depth` for any bit of REQ_HIPRIO (REQ_SYNC | REQ_META | REQ_PRIO), and an fsync's
/// writeback is WB_SYNC_ALL, sent with REQ_SYNC. With 20 threads in step, each round's twenty
/// appends go out sixteen at once (`wbt_depth`), not eight (`wb_normal`), and not all twenty.
#[test]
fn an_fsyncs_writeback_gets_the_throttles_whole_depth() {
    let threads = 20;
    let mut h = ext4(&[("dioread_nolock", "false")], threads);
    assert_eq!(append_rounds(&mut h, threads, 4), 80);
    let first_commit_done = commit_blocks(&h)[0].done;
    let seen = &h.stage.lower.seen;
    let data: Vec<_> = seen
        .iter()
        .filter(|s| s.op == Op::Write && s.len == 4096 && s.flags.is_empty())
        .filter(|s| s.at >= first_commit_done)
        .collect();
    assert_eq!(data.len(), 60);
    let in_flight_at = |t: u64| data.iter().filter(|s| s.at <= t && t < s.done).count();
    let most = data.iter().map(|s| in_flight_at(s.at)).max().unwrap();
    assert_eq!(most, 16, "writes in flight at once after a commit");
}

/// `POSIX_FADV_DONTNEED` (fio's `invalidate=1`, at each open) starts writeback of the file's
/// dirty pages with WB_SYNC_NONE and does not wait for it. blk-wbt's `get_limit` (Linux 6.1)
/// gives writeback that is neither REQ_SYNC nor REQ_BACKGROUND `wb_normal`, half the depth
/// ((16 + 1) / 2 = 8), or `wb_background`, a quarter ((16 + 3) / 4 = 4), within 100 ms of a
/// read's issue or completion (`close_io`). Thirty-two dirty pages, one page apart (so one
/// writeback request each): eight at once after a write, four at once after a read.
#[test]
fn fadvise_dontneed_writes_back_at_half_the_throttles_depth_or_a_quarter_after_a_read() {
    for (read_first, most_at_once) in [(false, 8), (true, 4)] {
        let setup = FsSetup {
            capacity_bytes: 256 * GIB,
            cores: 1,
            kernel_job: 100,
            mount: true,
            files: vec![qoslab_fs::FileSpec {
                name: 2,
                size: 1 << 20,
                allocated: true,
                cached: false,
            }],
            ..FsSetup::default()
        };
        let mut h = bench(fs_config(&[]), journal("ext4", &[]), setup, 20_000);
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Write, Call::Create, 1, 0, 0, 0, now));
        for page in 0..32 {
            let now = h.now_ns();
            sync_call(
                &mut h,
                call(Op::Write, Call::Io, 1, page * 8192, 4096, 0, now),
            );
        }
        if read_first {
            let now = h.now_ns();
            sync_call(&mut h, call(Op::Read, Call::Io, 2, 0, 4096, 0, now));
        }
        let now = h.now_ns();
        let mut opened = call(Op::Write, Call::Io, 1, 1 << 20, 4096, 0, now);
        opened.flags |= ReqFlags::FADV_DONTNEED;
        let returned = sync_call(&mut h, opened);
        // The flusher's timer runs for ever: 10 ms of simulated time.
        h.run_until(returned + 10_000_000);
        let seen = &h.stage.lower.seen;
        let wb: Vec<_> = seen
            .iter()
            .filter(|s| s.op == Op::Write && s.len == 4096)
            .collect();
        assert_eq!(wb.len(), 32, "every dirty page written back once");
        assert!(
            returned < wb.iter().map(|s| s.done).min().unwrap(),
            "not waited for"
        );
        let in_flight_at = |t: u64| wb.iter().filter(|s| s.at <= t && t < s.done).count();
        let most = wb.iter().map(|s| in_flight_at(s.at)).max().unwrap();
        assert_eq!(most, most_at_once, "read first: {read_first}");
    }
}
