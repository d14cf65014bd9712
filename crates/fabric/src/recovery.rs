//! Recovery after a power failure (which data to erase so that each stream is left at a prefix
//! of its order) and after the crash of one target server (which commands the initiator sends
//! to it again).

use std::collections::BTreeMap;

use crate::machine::{CrashImage, Data};
use crate::plan::{Attr, Plan};

/// Rio's recovery (document 4.3.2, 4.4.1, 4.8). Each target rebuilds its per-server lists from
/// its PMR log and validates them; the initiator merges them into each stream's global order,
/// finds the first sequence number that is not durable, keeps the prefix before it and erases
/// the data of every later attribute. It reads the PMR only, never the data.
pub fn rio(plan: &Plan, image: &CrashImage) -> Vec<bool> {
    let first_lost = rio_first_lost(plan, image);
    let mut erase = vec![false; plan.cmds.len()];
    for log in &image.logs {
        for &c in log {
            let a = &image.attrs[c];
            if a.seq_end >= first_lost[a.stream as usize] {
                erase[c] = true;
            }
        }
    }
    erase
}

/// Per stream, the first sequence number recovery does not keep.
pub fn rio_first_lost(plan: &Plan, image: &CrashImage) -> Vec<u64> {
    let streams = plan.order.len();
    let mut valid: Vec<Vec<Attr>> = vec![Vec::new(); streams];
    for (t, log) in image.logs.iter().enumerate() {
        for (s, valid) in valid.iter_mut().enumerate() {
            let list: Vec<usize> = log
                .iter()
                .copied()
                .filter(|&c| image.attrs[c].stream as usize == s)
                .collect();
            let ok = validate_server_list(&list, image, image.head_seq[t][s], image.plp);
            valid.extend(
                list.iter()
                    .zip(ok)
                    .filter(|(_, v)| *v)
                    .map(|(&c, _)| image.attrs[c]),
            );
        }
    }
    (0..streams)
        .map(|s| {
            let start = image.head_seq.iter().map(|h| h[s]).max().unwrap_or(0) + 1;
            first_non_durable(&valid[s], start)
        })
        .collect()
}

/// Validity of one target's attributes of one stream, in log order: the `prev` chain must be
/// unbroken; with PLP an attribute is valid iff it and all before it are persistent; without,
/// iff a later (or its own) FLUSH attribute is persistent.
pub fn validate_server_list(list: &[usize], image: &CrashImage, head: u64, plp: bool) -> Vec<bool> {
    let mut intact = list.len();
    let (mut last_start, mut last_end, mut before) = (0u64, head, 0u64);
    for (i, &c) in list.iter().enumerate() {
        let a = &image.attrs[c];
        let linked = if i == 0 {
            a.prev <= head
        } else if a.seq_start > last_end {
            a.prev == last_end
        } else {
            a.seq_start == last_start && a.prev == before
        };
        if !linked {
            intact = i;
            break;
        }
        if a.seq_start > last_end || i == 0 {
            before = if i == 0 { a.prev } else { last_end };
        }
        last_start = a.seq_start;
        last_end = last_end.max(a.seq_end);
    }
    let mut ok = vec![false; list.len()];
    if plp {
        for i in 0..intact {
            if !image.attrs[list[i]].persist {
                break;
            }
            ok[i] = true;
        }
    } else {
        let mut covered = false;
        for i in (0..intact).rev() {
            let a = &image.attrs[list[i]];
            covered |= a.flush && a.persist;
            ok[i] = covered;
        }
    }
    ok
}

/// A group seen in the logs: its size (from the final request's `num`) and, per request
/// (`orig_lba`), the parts found and the parts it was split into.
type Group = (u32, BTreeMap<u64, (u32, u32)>);

/// The first sequence number from `start` whose group is not entirely durable: a merged
/// attribute counts as a whole; otherwise the group's final attribute gives its size (`num`)
/// and every request of it must be there, split ones with all their parts merged back.
pub fn first_non_durable(valid: &[Attr], start: u64) -> u64 {
    let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
    let mut groups: BTreeMap<u64, Group> = BTreeMap::new();
    for a in valid {
        if a.merged {
            merged.insert(a.seq_start, a.seq_end);
        } else if a.pieces > 0 {
            let g = groups.entry(a.seq_start).or_default();
            g.0 = g.0.max(a.num);
            let part = g.1.entry(a.orig_lba).or_insert((0, a.pieces));
            part.0 += 1;
        }
    }
    let mut seq = start;
    loop {
        if let Some(&end) = merged.get(&seq) {
            seq = end + 1;
            continue;
        }
        match groups.get(&seq) {
            Some((num, reqs))
                if *num > 0
                    && reqs.values().filter(|(seen, of)| seen == of).count() == *num as usize =>
            {
                seq += 1;
            }
            _ => return seq,
        }
    }
}

/// HORAE's recovery: the ordering metadata in the PMR gives each stream's order; a request is
/// kept if its data is on the media (HORAE checks the logged blocks), up to the first that is
/// not; every later write is erased.
pub fn horae(plan: &Plan, image: &CrashImage) -> Vec<bool> {
    let mut erase = vec![false; plan.cmds.len()];
    for (s, reqs) in plan.requests.iter().enumerate() {
        let durable = |r: usize| {
            image.meta[s][r]
                && reqs[r]
                    .cmds
                    .iter()
                    .all(|&c| plan.cmds[c].flush_only || image.data[c] == Data::Durable)
        };
        let mut first_lost = u64::MAX;
        for (r, req) in reqs.iter().enumerate() {
            if !durable(r) {
                first_lost = req.seq;
                break;
            }
        }
        for (r, req) in reqs.iter().enumerate() {
            if req.seq >= first_lost && image.meta[s][r] {
                for &c in &req.cmds {
                    erase[c] = true;
                }
            }
        }
    }
    erase
}

/// Rio's target recovery (document 4.4.1, "Target recovery"): the initiator reconnects, rebuilds
/// the ordering lists without dropping the attributes of the live targets, and repairs the
/// broken list by replaying, on the failed target, every request whose attribute in that
/// target's PMR log is not valid (not known persistent), until it completes. Replaying is
/// idempotent (out-of-place updates), so nothing is erased.
pub fn rio_target_replay(plan: &Plan, image: &CrashImage, target: usize) -> Vec<bool> {
    let mut replay = vec![false; plan.cmds.len()];
    let log = &image.logs[target];
    for s in 0..plan.order.len() {
        let list: Vec<usize> = log
            .iter()
            .copied()
            .filter(|&c| image.attrs[c].stream as usize == s)
            .collect();
        let ok = validate_server_list(&list, image, image.head_seq[target][s], image.plp);
        for (&c, valid) in list.iter().zip(ok) {
            replay[c] = !valid;
        }
    }
    replay
}

/// HORAE after the crash of one target: its ordering metadata in that target's PMR names every
/// request not yet known durable; the initiator writes again those of its blocks on the failed
/// target that are not on the media (the document describes no HORAE target recovery; this is
/// the same decision its power-failure recovery makes, from the metadata and the media).
pub fn horae_target_replay(plan: &Plan, image: &CrashImage, target: usize) -> Vec<bool> {
    let mut replay = vec![false; plan.cmds.len()];
    for (s, reqs) in plan.requests.iter().enumerate() {
        for (r, req) in reqs.iter().enumerate() {
            if !image.meta[s][r] {
                continue;
            }
            for &c in &req.cmds {
                let cmd = &plan.cmds[c];
                if cmd.target == target && !cmd.flush_only && image.data[c] != Data::Durable {
                    replay[c] = true;
                }
            }
        }
    }
    replay
}
