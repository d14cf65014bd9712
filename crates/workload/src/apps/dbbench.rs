//! RocksDB's `db_bench --benchmarks=fillsync`: every thread puts `num / 1000` random keys
//! (fillsync's own cut of `--num`) of `key_size` bytes with values of `value_size` bytes, each
//! put written to the write-ahead log and made durable (`WriteOptions::sync`: the log is
//! `fdatasync`ed, RocksDB's default `use_fsync=false`) before the next. The log record of one
//! put is RocksDB's: a 7-byte record header around a write batch (a 12-byte header, the type,
//! two varint lengths, the key and the value).
//!
//! When a memtable fills (`write_buffer_size`), the thread that filled it switches to a new
//! log, writes the memtable as a level-0 table (1 MiB writes, then `fdatasync`), appends the
//! change to the MANIFEST (`fdatasync`) and deletes the old log; once level 0 holds
//! `level0_file_num_compaction_trigger` tables, it compacts them with level 1 (reads them,
//! writes the merged tables of `target_file_size_base`, syncs, records, deletes). RocksDB runs
//! flushes and compactions on background threads while writes go on; here the thread that
//! triggers one does it (with fillsync's cut of `--num`, a run rarely fills a memtable).
//!
//! RocksDB's own group commit (a leader writes and syncs the log for the writers waiting
//! behind it) is not modelled: each thread writes and syncs its own record, and concurrent
//! syncs of the log batch in the file system (an fsync finds what another one is committing
//! and waits for it), which is where the leader's batching also ends up.

use std::cell::RefCell;
use std::rc::Rc;

use qoslab_engine::{Call, Op, RngStream};

use super::{App, AppCall, Next, PreFile};

/// db_bench's flags that fillsync uses, with RocksDB's defaults (the document's 16-byte keys
/// and 1 KiB values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbBenchSpec {
    /// `--num`: fillsync puts `num / 1000` per thread.
    pub num: u64,
    pub threads: u32,
    pub key_size: u64,
    pub value_size: u64,
    pub write_buffer_size: u64,
    pub level0_file_num_compaction_trigger: u32,
    pub target_file_size_base: u64,
    /// The name of the database's first file (`Request::file`); its files are numbered on.
    pub first_name: u32,
}

impl Default for DbBenchSpec {
    fn default() -> Self {
        DbBenchSpec {
            num: 1_000_000,
            threads: 1,
            key_size: 16,
            value_size: 1024,
            write_buffer_size: 64 << 20,
            level0_file_num_compaction_trigger: 4,
            target_file_size_base: 64 << 20,
            first_name: 1,
        }
    }
}

impl DbBenchSpec {
    /// Bytes one put adds to the log: the record header (7), the write batch's header (12),
    /// the value type (1), the key and value lengths as varints, the key, the value.
    pub fn record_bytes(&self) -> u64 {
        let varint = |v: u64| (64 - v.max(1).leading_zeros() as u64).div_ceil(7);
        7 + 12
            + 1
            + varint(self.key_size)
            + self.key_size
            + varint(self.value_size)
            + self.value_size
    }

    /// Puts per thread.
    pub fn puts(&self) -> u64 {
        (self.num / 1000).max(1)
    }
}

pub const OPERATIONS: &[&str] = &["put", "flush", "compaction"];

/// The database the threads share.
#[derive(Debug)]
pub struct Db {
    spec: DbBenchSpec,
    wal: u32,
    wal_size: u64,
    manifest: u32,
    manifest_size: u64,
    next_name: u32,
    memtable: u64,
    level0: Vec<(u32, u64)>,
    level1: Vec<(u32, u64)>,
}

const MANIFEST_EDIT_BYTES: u64 = 128;

impl Db {
    pub fn new(spec: DbBenchSpec) -> Rc<RefCell<Db>> {
        Rc::new(RefCell::new(Db {
            wal: spec.first_name,
            manifest: spec.first_name + 1,
            manifest_size: MANIFEST_EDIT_BYTES,
            next_name: spec.first_name + 2,
            wal_size: 0,
            memtable: 0,
            level0: Vec::new(),
            level1: Vec::new(),
            spec,
        }))
    }

    /// The files a fresh database has when the benchmark starts: its log and MANIFEST.
    pub fn preallocated(&self) -> Vec<PreFile> {
        vec![
            PreFile {
                name: self.wal,
                size: 0,
            },
            PreFile {
                name: self.manifest,
                size: self.manifest_size,
            },
        ]
    }

    fn new_name(&mut self) -> u32 {
        self.next_name += 1;
        self.next_name - 1
    }
}

/// One db_bench thread.
pub struct DbBench {
    db: Rc<RefCell<Db>>,
    left: u64,
    /// Calls of a put, a flush or a compaction still to give.
    plan: std::collections::VecDeque<AppCall>,
    _rng: RngStream,
}

impl DbBench {
    pub fn new(db: Rc<RefCell<Db>>, seed: u64, thread: u32) -> Self {
        let left = db.borrow().spec.puts();
        DbBench {
            db,
            left,
            plan: Default::default(),
            _rng: RngStream::new(seed, &format!("dbbench-thread-{thread}")),
        }
    }

    /// A put: the log record at the log's end, then fdatasync.
    fn put(&mut self) {
        let mut db = self.db.borrow_mut();
        let bytes = db.spec.record_bytes();
        let mut w = AppCall::new(Call::Io, Op::Write, db.wal, 0);
        w.offset = db.wal_size;
        w.len = bytes;
        w.last = false;
        db.wal_size += bytes;
        db.memtable += db.spec.key_size + db.spec.value_size + 8;
        let mut s = AppCall::new(Call::Io, Op::Flush, db.wal, 0);
        s.flags = qoslab_engine::ReqFlags::DATA_SYNC;
        self.plan.extend([w, s]);
        if db.memtable >= db.spec.write_buffer_size {
            drop(db);
            self.flush();
        }
    }

    /// Writes `bytes` as a new table `name` (1 MiB writes, then fdatasync) for `operation`.
    fn table(&mut self, name: u32, bytes: u64, operation: u8) {
        let mut c = AppCall::new(Call::Create, Op::Write, name, operation);
        c.last = false;
        self.plan.push_back(c);
        let mut at = 0;
        while at < bytes {
            let mut w = AppCall::new(Call::Io, Op::Write, name, operation);
            w.offset = at;
            w.len = (1 << 20).min(bytes - at);
            w.last = false;
            self.plan.push_back(w);
            at += w.len;
        }
        let mut s = AppCall::new(Call::Io, Op::Flush, name, operation);
        s.flags = qoslab_engine::ReqFlags::DATA_SYNC;
        s.last = false;
        self.plan.push_back(s);
    }

    /// A MANIFEST edit for `operation`, synced.
    fn manifest(&mut self, operation: u8) {
        let mut db = self.db.borrow_mut();
        let mut w = AppCall::new(Call::Io, Op::Write, db.manifest, operation);
        w.offset = db.manifest_size;
        w.len = MANIFEST_EDIT_BYTES;
        w.last = false;
        db.manifest_size += MANIFEST_EDIT_BYTES;
        let mut s = AppCall::new(Call::Io, Op::Flush, db.manifest, operation);
        s.flags = qoslab_engine::ReqFlags::DATA_SYNC;
        s.last = false;
        self.plan.extend([w, s]);
    }

    /// The memtable is full: a new log, the memtable as a level-0 table, the old log gone.
    fn flush(&mut self) {
        let (old_wal, new_wal, table, bytes) = {
            let mut db = self.db.borrow_mut();
            let old = db.wal;
            let new = db.new_name();
            let table = db.new_name();
            let bytes = db.memtable;
            db.wal = new;
            db.wal_size = 0;
            db.memtable = 0;
            (old, new, table, bytes)
        };
        let mut c = AppCall::new(Call::Create, Op::Write, new_wal, 1);
        c.last = false;
        self.plan.push_back(c);
        self.table(table, bytes, 1);
        self.manifest(1);
        self.plan
            .push_back(AppCall::new(Call::Unlink, Op::Write, old_wal, 1));
        let compact = {
            let mut db = self.db.borrow_mut();
            db.level0.push((table, bytes));
            db.level0.len() >= db.spec.level0_file_num_compaction_trigger as usize
        };
        if compact {
            self.compact();
        }
    }

    /// Level 0 with level 1: every table read, the merge written as new level-1 tables.
    fn compact(&mut self) {
        let (inputs, target) = {
            let mut db = self.db.borrow_mut();
            let mut inputs = std::mem::take(&mut db.level0);
            inputs.append(&mut db.level1);
            (inputs, db.spec.target_file_size_base)
        };
        for &(name, size) in &inputs {
            let mut at = 0;
            while at < size {
                let mut r = AppCall::new(Call::Io, Op::Read, name, 2);
                r.offset = at;
                r.len = (1 << 20).min(size - at);
                r.last = false;
                self.plan.push_back(r);
                at += r.len;
            }
        }
        let mut left: u64 = inputs.iter().map(|&(_, s)| s).sum();
        while left > 0 {
            let bytes = left.min(target);
            let name = self.db.borrow_mut().new_name();
            self.table(name, bytes, 2);
            self.db.borrow_mut().level1.push((name, bytes));
            left -= bytes;
        }
        self.manifest(2);
        for &(name, _) in &inputs {
            let mut u = AppCall::new(Call::Unlink, Op::Write, name, 2);
            u.last = false;
            self.plan.push_back(u);
        }
        if let Some(last) = self.plan.back_mut() {
            last.last = true;
        }
    }
}

impl App for DbBench {
    fn operations(&self) -> &'static [&'static str] {
        OPERATIONS
    }

    fn next(&mut self) -> Next {
        if self.plan.is_empty() {
            if self.left == 0 {
                return Next::Done;
            }
            self.left -= 1;
            self.put();
        }
        Next::Call(self.plan.pop_front().expect("planned"))
    }

    fn done(&mut self, _ok: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_is_a_1063_byte_log_append_then_an_fdatasync() {
        let spec = DbBenchSpec {
            num: 3000,
            ..DbBenchSpec::default()
        };
        assert_eq!(spec.record_bytes(), 7 + 12 + 1 + 1 + 16 + 2 + 1024);
        let db = Db::new(spec);
        let mut t = DbBench::new(db.clone(), 1, 0);
        let mut calls = Vec::new();
        while let Next::Call(c) = t.next() {
            calls.push(c);
            t.done(true);
        }
        assert_eq!(calls.len(), 6, "fillsync puts num / 1000 = 3");
        assert_eq!(
            (calls[0].op, calls[0].offset, calls[0].len),
            (Op::Write, 0, 1063)
        );
        assert_eq!(calls[1].op, Op::Flush);
        assert!(calls[1].flags.contains(qoslab_engine::ReqFlags::DATA_SYNC));
        assert_eq!(calls[2].offset, 1063);
    }

    #[test]
    fn a_full_memtable_becomes_a_level_0_table_and_four_are_compacted() {
        let spec = DbBenchSpec {
            num: 1_000_000,
            write_buffer_size: 100 << 10,
            ..DbBenchSpec::default()
        };
        let db = Db::new(spec);
        let mut t = DbBench::new(db.clone(), 1, 0);
        let mut creates = 0;
        let mut unlinks = 0;
        let mut ops = [0u32; 3];
        while let Next::Call(c) = t.next() {
            creates += u32::from(c.call == Call::Create);
            unlinks += u32::from(c.call == Call::Unlink);
            if c.last {
                ops[c.operation as usize] += 1;
            }
            t.done(true);
        }
        // 1,000 puts of 1,048 memtable bytes: ten flushes of 100 KiB, two compactions.
        assert_eq!(ops, [1000, 10, 2]);
        assert!(
            creates >= 20 && unlinks >= 18,
            "{creates} creates, {unlinks} unlinks"
        );
        assert!(db.borrow().level0.len() < 4);
    }
}
