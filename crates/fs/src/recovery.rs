//! After a crash: the device as it survived, the journals replayed as the kernel replays
//! them (`fs/jbd2/recovery.c`: from the journal superblock's tail, transactions in sequence
//! while each has its descriptor, copies and commit block; with checksums, only while every
//! copy is the transaction's own), then a check of the result as `e2fsck -n` would make it,
//! and of every promise an `fsync` made before the crash.
//!
//! A file system with per-core journals (iJournaling) replays the complete transactions of
//! every journal in global transaction order, merging a file-level copy (one inode, one
//! directory entry) into its block, and rebuilds the bitmaps from the inodes (so the bitmaps
//! are not checked against them).

use std::collections::{BTreeMap, BTreeSet};

use qoslab_engine::Ns;

use crate::image::{Content, MetaImage, Record, Recording};
use crate::layout::{FIRST_INO, Geometry};

/// The device after a crash: each block's content.
pub type Disk = BTreeMap<u64, Content>;

/// What survived a crash: every write whose `survives` entry is true, over the device as it
/// was laid out, in the order they were sent.
pub fn crash_image(rec: &Recording, survives: &[bool]) -> Disk {
    let mut disk: Disk = rec
        .initial
        .iter()
        .map(|&(b, c)| (b, rec.contents[c as usize].clone()))
        .collect();
    let mut order: Vec<usize> = (0..rec.writes.len()).filter(|&w| survives[w]).collect();
    order.sort_by_key(|&w| (rec.writes[w].sent, w));
    for w in order {
        for &(b, c) in &rec.writes[w].blocks {
            disk.insert(b, rec.contents[c as usize].clone());
        }
    }
    disk
}

/// One complete transaction found in a journal.
struct Found {
    gid: u64,
    /// (home, the content of the log block holding its copy).
    copies: Vec<(u64, Content)>,
}

/// The complete transactions of journal `j` (area `start`, `len` blocks), from its tail.
fn scan(disk: &Disk, j: u16, start: u64, len: u64, checksums: bool) -> Vec<Found> {
    let (mut seq, mut at) = match disk.get(&start) {
        Some(Content::Super { seq, at, .. }) => (*seq, *at),
        _ => (1, 1),
    };
    let next = |p: u64| if p + 1 >= len { 1 } else { p + 1 };
    let mut out = Vec::new();
    let mut steps = 0;
    'tx: loop {
        let mut copies = Vec::new();
        let mut gid = None;
        let mut p = at;
        loop {
            steps += 1;
            if steps > len {
                break 'tx;
            }
            match disk.get(&(start + p)) {
                Some(Content::Desc {
                    journal,
                    seq: s,
                    gid: g,
                    homes,
                }) if *journal == j && *s == seq => {
                    gid = Some(*g);
                    for &home in homes {
                        p = next(p);
                        let c = disk
                            .get(&(start + p))
                            .cloned()
                            .unwrap_or(Content::Meta(MetaImage::default()));
                        if checksums
                            && !matches!(&c, Content::Copy { journal, seq: s, .. } if *journal == j && *s == seq)
                        {
                            // A copy that is not the transaction's own fails its checksum.
                            break 'tx;
                        }
                        copies.push((home, c));
                    }
                    p = next(p);
                }
                Some(Content::Commit { journal, seq: s })
                    if *journal == j && *s == seq && gid.is_some() =>
                {
                    out.push(Found {
                        gid: gid.expect("checked"),
                        copies,
                    });
                    seq += 1;
                    at = next(p);
                    continue 'tx;
                }
                _ => break 'tx,
            }
        }
    }
    out
}

/// The key a record replaces an older one by.
fn key(r: &Record) -> (u8, u64, u64) {
    match r {
        Record::Inode(i) => (0, u64::from(i.ino), 0),
        Record::Entry { dir, slot, .. } => (1, u64::from(*dir), u64::from(*slot)),
        Record::Bits { group, inodes, .. } => (2, *group, u64::from(*inodes)),
    }
}

/// Replays the journals of `rec` over `disk`.
pub fn replay(rec: &Recording, disk: &mut Disk) {
    let Some(geo) = rec.geometry.as_ref() else {
        return;
    };
    let mut found = Vec::new();
    for (j, &(start, len)) in geo.journals.iter().enumerate() {
        found.extend(scan(disk, j as u16, start, len, rec.checksums));
    }
    if rec.per_core {
        found.sort_by_key(|f| f.gid);
    }
    for f in found {
        for (home, copy) in f.copies {
            match copy {
                Content::Copy { image, .. } if image.partial => {
                    let mut merged = match disk.get(&home) {
                        Some(Content::Meta(m)) => m.clone(),
                        _ => MetaImage::default(),
                    };
                    for r in image.records {
                        // A file-level copy says what its inode or entry is now, or that it
                        // is gone (an entry's slot reused is replaced by key).
                        merged.records.retain(|old| key(old) != key(&r));
                        merged.records.push(r);
                    }
                    disk.insert(home, Content::Meta(merged));
                }
                Content::Copy { image, .. } => {
                    disk.insert(home, Content::Meta(image));
                }
                // Without checksums, whatever the log block holds is copied home.
                other => {
                    disk.insert(home, other);
                }
            }
        }
    }
}

/// What `e2fsck -n` and the promises find wrong after a crash at `at`.
pub fn check(rec: &Recording, disk: &Disk, at: Ns) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(geo) = rec.geometry.as_ref() else {
        return bad;
    };
    let records = |b: u64| -> Vec<Record> {
        match disk.get(&b) {
            Some(Content::Meta(m)) => m.records.clone(),
            Some(other) => vec![Record::Bits {
                group: u64::MAX,
                inodes: false,
                runs: vec![(u64::MAX, other_tag(other))],
            }],
            None => Vec::new(),
        }
    };
    let inode = |ino: u32| {
        let b = geo.inode_block(ino);
        records(b).into_iter().find_map(|r| match r {
            Record::Inode(i) if i.ino == ino => Some(i),
            _ => None,
        })
    };
    let reserved = |b: u64| rec.reserved.iter().any(|&(s, n)| (s..s + n).contains(&b));
    // Directories and their entries.
    let mut names: BTreeMap<u32, u32> = BTreeMap::new();
    let mut dir_blocks = BTreeSet::new();
    let mut owner: BTreeMap<u64, u32> = BTreeMap::new();
    for &d in &rec.dirs {
        let Some(dino) = inode(d) else {
            bad.push(format!("directory inode {d} is gone"));
            continue;
        };
        for &(_, b, n) in &dino.extents {
            for k in b..b + n {
                dir_blocks.insert(k);
                if let Some(o) = owner.insert(k, d) {
                    bad.push(format!("block {k} belongs to inode {o} and directory {d}"));
                }
                for r in records(k) {
                    match r {
                        Record::Entry { dir, name, ino, .. } if dir == d => {
                            if let Some(other) = names.insert(name, ino) {
                                bad.push(format!(
                                    "name {name} is in a directory twice (inodes {other} and {ino})"
                                ));
                            }
                        }
                        Record::Entry { .. } => {}
                        _ => bad.push(format!("directory {d}'s block {k} holds something else")),
                    }
                }
            }
        }
    }
    // Every inode in use: named ones, and orphans (no name, no link: recovery frees them).
    let mut live_inodes = BTreeSet::new();
    let mut files: BTreeMap<u32, crate::image::InodeRec> = BTreeMap::new();
    let dirs: BTreeSet<u32> = rec.dirs.iter().copied().collect();
    for (&b, c) in disk {
        let Content::Meta(m) = c else { continue };
        for r in &m.records {
            if let Record::Inode(i) = r
                && geo.inode_block(i.ino) == b
                && i.links == 0
                && !dirs.contains(&i.ino)
            {
                files.insert(i.ino, i.clone());
            }
        }
    }
    for (&name, &ino) in &names {
        let Some(i) = inode(ino) else {
            bad.push(format!("name {name} points at inode {ino}, which is free"));
            continue;
        };
        if i.links == 0 {
            bad.push(format!(
                "name {name} points at inode {ino}, which has no link"
            ));
        }
        files.insert(ino, i);
    }
    for (&ino, i) in &files {
        live_inodes.insert(ino);
        for &(_, b, n) in &i.extents {
            for k in b..b + n {
                if reserved(k) {
                    bad.push(format!(
                        "inode {ino} has block {k}, which holds metadata or a journal"
                    ));
                }
                if let Some(o) = owner.insert(k, ino) {
                    bad.push(format!("block {k} belongs to inodes {o} and {ino}"));
                }
            }
        }
    }
    if !rec.per_core {
        // The bitmaps against the inodes, group by group where the device has a bitmap.
        let mut blocks_in_use: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        let mut inodes_in_use: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for (&b, c) in disk {
            let Content::Meta(m) = c else { continue };
            for r in &m.records {
                if let Record::Bits {
                    group,
                    inodes,
                    runs,
                } = r
                {
                    let set: BTreeSet<u64> = runs.iter().flat_map(|&(s, n)| s..s + n).collect();
                    let _ = b;
                    if *inodes {
                        inodes_in_use.insert(*group, set);
                    } else {
                        blocks_in_use.insert(*group, set);
                    }
                }
            }
        }
        for (&k, &o) in &owner {
            if let Some(set) = blocks_in_use.get(&geo.group_of(k))
                && !set.contains(&k)
            {
                bad.push(format!("block {k} of inode {o} is free in its bitmap"));
            }
        }
        for (g, set) in &blocks_in_use {
            for &k in set {
                if !reserved(k) && !owner.contains_key(&k) {
                    bad.push(format!(
                        "block {k} is in use in group {g}'s bitmap, but no inode has it"
                    ));
                }
            }
        }
        for &ino in live_inodes.iter().chain(dirs.iter()) {
            let (g, _) = Geometry::inode_place(ino);
            if let Some(set) = inodes_in_use.get(&g)
                && !set.contains(&u64::from(ino))
            {
                bad.push(format!("inode {ino} is free in its bitmap"));
            }
        }
        for set in inodes_in_use.values() {
            for &i in set {
                let i = i as u32;
                if i >= FIRST_INO && !live_inodes.contains(&i) && !dirs.contains(&i) {
                    bad.push(format!(
                        "inode {i} is in use in its bitmap, but no name has it"
                    ));
                }
            }
        }
    }
    // What fsync promised before the crash.
    for p in rec.promises.iter().filter(|p| p.at <= at) {
        let voided = rec
            .names_gone
            .iter()
            .any(|&(t, n)| n == p.name && t >= p.from && t <= at);
        if voided {
            continue;
        }
        let ino = p.ino;
        if p.full && names.get(&p.name) != Some(&ino) {
            bad.push(format!(
                "file {} was fsynced at {} ns as inode {ino} and names {:?}",
                p.name,
                p.at,
                names.get(&p.name)
            ));
            continue;
        }
        let Some(i) = inode(ino) else {
            bad.push(format!(
                "inode {ino} (file {}) was fsynced at {} ns and is gone",
                p.name, p.at
            ));
            continue;
        };
        if i.size < p.size {
            bad.push(format!(
                "file {} was fsynced at {} bytes ({} ns) and is {} bytes",
                p.name, p.size, p.at, i.size
            ));
        }
        let map = |page: u64| {
            i.extents
                .iter()
                .find(|&&(l, _, n)| (l..l + n).contains(&page))
                .map(|&(l, b, _)| b + page - l)
        };
        for &(page, ver) in &p.pages {
            let ok = map(page).and_then(|b| disk.get(&b)).is_some_and(|c| {
                matches!(c, Content::Data { ino: i2, page: p2, ver: v2 } if *i2 == ino && *p2 == page && *v2 >= ver)
            });
            if !ok {
                bad.push(format!(
                    "page {page} of file {} (version {ver}) was fsynced at {} ns and is lost",
                    p.name, p.at
                ));
                break;
            }
        }
    }
    bad
}

fn other_tag(c: &Content) -> u64 {
    match c {
        Content::Data { .. } => 1,
        Content::Meta(_) => 2,
        Content::Desc { .. } => 3,
        Content::Copy { .. } => 4,
        Content::Commit { .. } => 5,
        Content::Super { .. } => 6,
    }
}
