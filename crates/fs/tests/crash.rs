//! The crash checker over the three file systems: after recovery each is consistent and
//! nothing fsynced is lost; ext4 without the commit's FLUSH and FUA (`nobarrier`) is caught.

mod common;

use common::*;
use qoslab_fs::check::{SmallWorkload, check_recording, record_small};

fn sweep(fs: &str, opts: &[(&str, &str)], seeds: u64) -> (u64, u64, u64, Vec<String>) {
    let cfg = fs_config(&[]);
    // Three threads of 16 calls over five names: creates, appends, overwrites, O_SYNC and
    // O_DSYNC writes, fsyncs, fdatasyncs, unlinks and renames, racing each other.
    let w = SmallWorkload {
        threads: 3,
        calls: 16,
        names: 5,
    };
    let (mut points, mut states, mut bad) = (0, 0, 0);
    let mut first = Vec::new();
    for seed in 0..seeds {
        let rec = record_small(&cfg, journal(fs, opts), &w, seed);
        let sum = check_recording(&rec, seed);
        points += sum.crash_points;
        states += sum.states;
        bad += sum.violating_states;
        if first.is_empty()
            && let Some((at, alive, what)) = sum.violations.first()
        {
            first = vec![format!(
                "seed {seed} at {at} ns, surviving writes {alive:?}"
            )];
            first.extend(what.iter().cloned());
        }
    }
    (points, states, bad, first)
}

#[test]
fn ext4_recovers_consistent_with_every_fsync_kept() {
    let (points, states, bad, first) = sweep("ext4", &[], 30);
    assert!(
        points > 300 && states > points,
        "{points} points, {states} states"
    );
    assert_eq!(bad, 0, "{first:#?}");
}

#[test]
fn ext4_with_journal_async_commit_recovers_too() {
    let (_, _, bad, first) = sweep("ext4", &[("journal_async_commit", "true")], 20);
    assert_eq!(bad, 0, "{first:#?}");
}

#[test]
fn ext4_without_the_commits_flush_is_caught() {
    let (_, _, bad, first) = sweep("ext4", &[("barrier", "false")], 20);
    assert!(bad > 0, "nobarrier lost nothing");
    assert!(first.iter().any(|l| l.contains("fsynced")), "{first:#?}");
}

#[test]
fn riofs_and_horaefs_recover_on_the_ordered_devices_contract() {
    for fs in ["riofs", "horaefs"] {
        let (points, _, bad, first) = sweep(fs, &[], 30);
        assert!(points > 300);
        assert_eq!(bad, 0, "{fs}: {first:#?}");
    }
}
