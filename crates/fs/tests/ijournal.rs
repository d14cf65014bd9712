//! HORAEFS and RioFS: iJournaling's per-core journals, each fsync's file-level transaction
//! sent at once as ordered groups (D, JM, JC) for the block layer's ordering plug-in.

mod common;

use common::*;
use qoslab_engine::{Call, Op, ReqFlags};
use qoslab_fs::FsSetup;

fn mount(fs: &str, cores: u32) -> Bench {
    let setup = FsSetup {
        capacity_bytes: 256 * GIB,
        cores,
        kernel_job: 100,
        mount: true,
        ..FsSetup::default()
    };
    bench(fs_config(&[]), journal(fs, &[]), setup, 20_000)
}

#[test]
fn an_fsync_sends_data_journal_and_commit_at_once_as_three_ordered_groups() {
    for fs in ["riofs", "horaefs"] {
        let mut h = mount(fs, 2);
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Write, Call::Create, 1, 0, 0, 1, now));
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Write, Call::Io, 1, 0, 8192, 1, now));
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Flush, Call::Io, 1, 0, 0, 1, now));
        let seen = &h.stage.lower.seen;
        assert_eq!(seen.len(), 3, "{fs}: {seen:#?}");
        assert!(
            seen.iter().all(|s| s.at == seen[0].at && s.job == 1),
            "{fs}: one submission by the caller"
        );
        assert!(seen.iter().all(|s| s.flags.contains(ReqFlags::ORDERED)));
        let (d, jm, jc) = (seen[0], seen[1], seen[2]);
        assert_eq!(d.len, 8192);
        // The descriptor, the inode-table block (the file's inode and its directory's, which
        // sit together) and the new entry's directory block.
        assert_eq!(jm.len, 3 * 4096, "{fs}");
        assert!(jc.flags.contains(ReqFlags::PREFLUSH | ReqFlags::FUA));
        // Each step is one group: no request continues into the next.
        assert!(
            !d.flags.contains(ReqFlags::GROUP_MORE) && !jm.flags.contains(ReqFlags::GROUP_MORE),
            "{seen:?}"
        );
        // One submission call: all but the last say more follows.
        assert!(d.flags.contains(ReqFlags::BATCH_MORE) && jm.flags.contains(ReqFlags::BATCH_MORE));
        assert!(!jc.flags.contains(ReqFlags::BATCH_MORE));
        assert_eq!(jc.offset, jm.offset + jm.len);
    }
}

#[test]
fn each_core_commits_into_its_own_journal() {
    let mut h = mount("riofs", 4);
    for t in 0..4u32 {
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Write, Call::Create, t + 1, 0, 0, t, now));
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Write, Call::Io, t + 1, 0, 4096, t, now));
        let now = h.now_ns();
        sync_call(&mut h, call(Op::Flush, Call::Io, t + 1, 0, 0, t, now));
    }
    let commits: Vec<u64> = h
        .stage
        .lower
        .seen
        .iter()
        .filter(|s| s.flags.contains(ReqFlags::PREFLUSH))
        .map(|s| s.offset / 4096)
        .collect();
    assert_eq!(commits.len(), 4);
    // 1 GiB of journal shared by JBD2's and 4 cores' journals: areas of 52,428 blocks, one
    // after the other (JBD2's first).
    for w in commits.windows(2) {
        assert_eq!(w[1] - w[0], 262_144 / 5);
    }
}
