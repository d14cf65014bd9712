//! RocksDB's `db_bench --benchmarks=fillsync`: every thread puts `num / 1000` random keys
//! (fillsync's own cut of `--num`) of `key_size` bytes with values of `value_size` bytes into
//! one database (db_bench's default `--num_multi_db=0`: a single DB, whatever `--threads`),
//! each put made durable before it returns (`WriteOptions::sync`: the log is `fdatasync`ed,
//! RocksDB's default `use_fsync=false`).
//!
//! The threads' puts reach the write-ahead log through RocksDB's write thread (its default
//! path: `enable_pipelined_write=false`), its group commit as RocksDB's wiki describes it
//! ("WAL Performance"): a writer links itself into the write queue; one with no group under
//! way is the leader, which takes every writer queued then (the group grows up to
//! `max_write_batch_group_size_bytes`, and only to the leader's batch plus an eighth of it when
//! that batch is small), writes their batches as one log record, syncs the log once and
//! completes them all; the writers that queued meanwhile wait, and the first of them leads the
//! next group. RocksDB won't delay a write to grow a group. So at most one log write and one
//! `fdatasync` are under way, and a follower makes no system call of its own.
//!
//! The log is RocksDB's format (doc/log_format.txt): 32 KiB blocks, each record cut into
//! fragments at block boundaries, each fragment behind a 7-byte header. A group's record is a
//! write batch: a 12-byte header, then per put the value type, the key's and the value's
//! lengths as varints, the key, the value (1,063 bytes on the log for one put of a 16-byte key
//! and a 1 KiB value, 2,107 for two).
//!
//! When a memtable fills (`write_buffer_size`), the next leader switches to a new log before
//! writing its group (RocksDB's `SwitchMemtable` in the write path); once its group is
//! completed, that thread writes the old memtable as a level-0 table (1 MiB writes, then
//! `fdatasync`), appends the change to the MANIFEST (`fdatasync`) and deletes the old log;
//! once level 0 holds `level0_file_num_compaction_trigger` tables, it compacts them with level
//! 1 (reads them, writes the merged tables of `target_file_size_base`, syncs, records,
//! deletes). RocksDB runs flushes and compactions on background threads while writes go on;
//! here the thread that switched does it, after its group (with fillsync's cut of `--num`, a
//! run rarely fills a memtable).
//!
//! Time: the model spends none between calls (db_bench's key generation, RocksDB's memtable
//! insert). A group's end hands the queue to the next leader (`ExitAsBatchGroupLeader`), which
//! takes the writers queued at that moment: the writers just completed are still on their way
//! back to db_bench, so their next puts wait for the group after (a model assumption: with no
//! CPU time, threads in step alternate between two groups).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use qoslab_engine::{Call, Op, ReqFlags};

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
    /// `DBOptions::max_write_batch_group_size_bytes` (1 MiB): how far a group may grow.
    pub max_write_batch_group_size_bytes: u64,
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
            max_write_batch_group_size_bytes: 1 << 20,
            first_name: 1,
        }
    }
}

/// A write batch's header: its sequence number (8 bytes) and count (4).
const BATCH_HEADER: u64 = 12;
/// The log's blocks and a fragment's header (checksum 4, length 2, type 1).
const LOG_BLOCK: u64 = 32 << 10;
const LOG_HEADER: u64 = 7;

impl DbBenchSpec {
    /// Bytes one put adds to a write batch: the value type, the key and value lengths as
    /// varints, the key, the value.
    pub fn entry_bytes(&self) -> u64 {
        let varint = |v: u64| (64 - v.max(1).leading_zeros() as u64).div_ceil(7);
        1 + varint(self.key_size) + self.key_size + varint(self.value_size) + self.value_size
    }

    /// One put's write batch (`WriteBatch::GetDataSize`): its header and its entry.
    pub fn batch_bytes(&self) -> u64 {
        BATCH_HEADER + self.entry_bytes()
    }

    /// Bytes one put alone adds to an empty log: its batch as a record behind one header.
    pub fn record_bytes(&self) -> u64 {
        log_append_bytes(0, self.batch_bytes())
    }

    /// Puts per thread.
    pub fn puts(&self) -> u64 {
        (self.num / 1000).max(1)
    }

    /// The most a group led by a batch of `leader` bytes may hold (`EnterAsBatchGroupLeader`):
    /// `max_write_batch_group_size_bytes`, or the leader's batch and an eighth of that when
    /// the batch is no larger than the eighth, so a small write is not held up by a large
    /// group.
    pub fn group_limit(&self, leader: u64) -> u64 {
        let max = self.max_write_batch_group_size_bytes;
        if leader <= max / 8 {
            leader + max / 8
        } else {
            max
        }
    }
}

/// Bytes the log writer appends for a record of `len` bytes to a log whose size is `size`
/// (RocksDB's log format): a fragment of the record behind a 7-byte header in each block it
/// touches; a block with fewer than 7 bytes left is filled with zeros first, and one with
/// exactly 7 left takes an empty first fragment.
pub fn log_append_bytes(size: u64, len: u64) -> u64 {
    let mut at = size % LOG_BLOCK;
    let mut left = len;
    let mut written = 0;
    loop {
        let leftover = LOG_BLOCK - at;
        if leftover < LOG_HEADER {
            written += leftover;
            at = 0;
        }
        let fragment = left.min(LOG_BLOCK - at - LOG_HEADER);
        written += LOG_HEADER + fragment;
        at += LOG_HEADER + fragment;
        left -= fragment;
        if left == 0 {
            return written;
        }
    }
}

pub const OPERATIONS: &[&str] = &["put", "flush", "compaction"];
const PUT: u8 = 0;
const FLUSH: u8 = 1;
const COMPACTION: u8 = 2;

/// A write group: its leader and every writer it took (the leader first).
#[derive(Debug)]
struct Group {
    members: Vec<u32>,
    /// Whether its leader has planned the group's log write.
    written: bool,
}

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
    /// RocksDB's write queue: the writers linked and not yet in a group, oldest first.
    queue: VecDeque<u32>,
    /// The group whose leader is writing the log, if any.
    group: Option<Group>,
    /// Per thread: a leader completed its put, and the thread has not yet returned.
    completed: Vec<bool>,
    /// Groups written, and puts in them (`groups` and `grouped_puts`).
    groups: u64,
    grouped_puts: u64,
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
            queue: VecDeque::new(),
            group: None,
            completed: Vec::new(),
            groups: 0,
            grouped_puts: 0,
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

    /// Log groups written so far, and the puts they carried.
    pub fn group_stats(&self) -> (u64, u64) {
        (self.groups, self.grouped_puts)
    }

    fn new_name(&mut self) -> u32 {
        self.next_name += 1;
        self.next_name - 1
    }

    /// `JoinBatchGroup`: `thread` links its put into the queue, and leads a group at once if
    /// none is under way.
    fn join(&mut self, thread: u32) {
        self.queue.push_back(thread);
        if self.group.is_none() {
            self.form_group();
        }
    }

    /// `EnterAsBatchGroupLeader`: the oldest queued writer leads, taking the writers behind
    /// it while the group stays within its limit.
    fn form_group(&mut self) {
        let Some(leader) = self.queue.pop_front() else {
            return;
        };
        let batch = self.spec.batch_bytes();
        let limit = self.spec.group_limit(batch);
        let mut bytes = batch;
        let mut members = vec![leader];
        while !self.queue.is_empty() && bytes + batch <= limit {
            members.push(self.queue.pop_front().expect("queued"));
            bytes += batch;
        }
        self.group = Some(Group {
            members,
            written: false,
        });
    }

    /// `ExitAsBatchGroupLeader`: the group's puts are in the memtable, its followers are
    /// completed, and the next queued writer leads the next group.
    fn exit_group(&mut self) {
        let group = self.group.take().expect("a group under way");
        let puts = group.members.len() as u64;
        self.memtable += puts * (self.spec.key_size + self.spec.value_size + 8);
        for &m in &group.members[1..] {
            let m = m as usize;
            if self.completed.len() <= m {
                self.completed.resize(m + 1, false);
            }
            self.completed[m] = true;
        }
        self.groups += 1;
        self.grouped_puts += puts;
        self.form_group();
    }

    /// Whether a leader has completed `thread`'s put (and forgets it: the thread returns).
    fn take_completed(&mut self, thread: u32) -> bool {
        self.completed
            .get_mut(thread as usize)
            .is_some_and(std::mem::take)
    }

    /// Whether `thread` leads the group under way and has yet to write it.
    fn leads_unwritten(&self, thread: u32) -> bool {
        self.group
            .as_ref()
            .is_some_and(|g| g.members[0] == thread && !g.written)
    }
}

/// Where a thread is in its put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between puts.
    Idle,
    /// Linked in the write queue or in a group another thread leads.
    Linked,
    /// Leading a group: writing and syncing the log.
    Leading,
}

/// One db_bench thread.
pub struct DbBench {
    db: Rc<RefCell<Db>>,
    thread: u32,
    left: u64,
    state: State,
    /// Calls of a put, a flush or a compaction still to give.
    plan: VecDeque<AppCall>,
    /// The memtable this thread switched out as leader, to flush once its group is done: the
    /// old log and the memtable's bytes.
    to_flush: Option<(u32, u64)>,
}

impl DbBench {
    pub fn new(db: Rc<RefCell<Db>>, _seed: u64, thread: u32) -> Self {
        let left = db.borrow().spec.puts();
        DbBench {
            db,
            thread,
            left,
            state: State::Idle,
            plan: Default::default(),
            to_flush: None,
        }
    }

    /// The leader's part (`WriteImpl`): a new log first if the memtable is full, then the
    /// group's batches as one record at the log's end, and one fdatasync for them all.
    fn lead(&mut self) {
        let mut db = self.db.borrow_mut();
        if db.memtable >= db.spec.write_buffer_size {
            let old = db.wal;
            let bytes = std::mem::take(&mut db.memtable);
            db.wal = db.new_name();
            db.wal_size = 0;
            let mut c = AppCall::new(Call::Create, Op::Write, db.wal, PUT);
            c.last = false;
            self.plan.push_back(c);
            self.to_flush = Some((old, bytes));
        }
        let puts = {
            let group = db.group.as_mut().expect("a group to lead");
            group.written = true;
            group.members.len() as u64
        };
        let record = BATCH_HEADER + puts * db.spec.entry_bytes();
        let mut w = AppCall::new(Call::Io, Op::Write, db.wal, PUT);
        w.offset = db.wal_size;
        w.len = log_append_bytes(db.wal_size, record);
        w.last = false;
        db.wal_size += w.len;
        let mut s = AppCall::new(Call::Io, Op::Flush, db.wal, PUT);
        s.flags = ReqFlags::DATA_SYNC;
        self.plan.extend([w, s]);
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
        s.flags = ReqFlags::DATA_SYNC;
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
        s.flags = ReqFlags::DATA_SYNC;
        s.last = false;
        self.plan.extend([w, s]);
    }

    /// The switched-out memtable as a level-0 table, the old log gone; a compaction when
    /// level 0 is full.
    fn flush(&mut self, old_wal: u32, bytes: u64) {
        let table = self.db.borrow_mut().new_name();
        self.table(table, bytes, FLUSH);
        self.manifest(FLUSH);
        self.plan
            .push_back(AppCall::new(Call::Unlink, Op::Write, old_wal, FLUSH));
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
                let mut r = AppCall::new(Call::Io, Op::Read, name, COMPACTION);
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
            self.table(name, bytes, COMPACTION);
            self.db.borrow_mut().level1.push((name, bytes));
            left -= bytes;
        }
        self.manifest(COMPACTION);
        for &(name, _) in &inputs {
            let mut u = AppCall::new(Call::Unlink, Op::Write, name, COMPACTION);
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
        loop {
            if let Some(c) = self.plan.pop_front() {
                return Next::Call(c);
            }
            match self.state {
                State::Idle => {
                    if self.left == 0 {
                        return Next::Done;
                    }
                    self.left -= 1;
                    self.db.borrow_mut().join(self.thread);
                    self.state = State::Linked;
                }
                State::Linked => {
                    if self.db.borrow_mut().take_completed(self.thread) {
                        // A leader wrote and synced this put: it returns without a call.
                        self.state = State::Idle;
                        return Next::Counted(PUT);
                    }
                    if !self.db.borrow().leads_unwritten(self.thread) {
                        return Next::Wait;
                    }
                    self.state = State::Leading;
                    self.lead();
                }
                State::Leading => unreachable!("a leader's calls are planned"),
            }
        }
    }

    fn done(&mut self, _ok: bool) {
        if self.state == State::Leading && self.plan.is_empty() {
            // The group's fdatasync returned: its puts are durable.
            self.db.borrow_mut().exit_group();
            self.state = State::Idle;
            if let Some((old_wal, bytes)) = self.to_flush.take() {
                self.flush(old_wal, bytes);
            }
        }
    }

    fn busy(&self) -> bool {
        // A linked writer may be made the next leader, or be completed by one: its put ends.
        self.state != State::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `t` alone to its end, giving each call back as done; the calls it made.
    fn run_alone(t: &mut DbBench) -> Vec<AppCall> {
        let mut calls = Vec::new();
        loop {
            match t.next() {
                Next::Call(c) => {
                    calls.push(c);
                    t.done(true);
                }
                Next::Counted(_) => {}
                Next::Wait => panic!("a thread alone never waits"),
                Next::Done => return calls,
            }
        }
    }

    fn call(n: Next) -> AppCall {
        match n {
            Next::Call(c) => c,
            other => panic!("expected a call, got {other:?}"),
        }
    }

    #[test]
    fn a_put_alone_is_a_1063_byte_log_append_then_an_fdatasync() {
        let spec = DbBenchSpec {
            num: 3000,
            ..DbBenchSpec::default()
        };
        assert_eq!(spec.batch_bytes(), 12 + 1 + 1 + 16 + 2 + 1024);
        assert_eq!(spec.record_bytes(), 7 + 1056);
        let db = Db::new(spec);
        let calls = run_alone(&mut DbBench::new(db.clone(), 1, 0));
        assert_eq!(calls.len(), 6, "fillsync puts num / 1000 = 3");
        assert_eq!(
            (calls[0].op, calls[0].offset, calls[0].len),
            (Op::Write, 0, 1063)
        );
        assert_eq!(calls[1].op, Op::Flush);
        assert!(calls[1].flags.contains(ReqFlags::DATA_SYNC));
        assert!(
            calls[1].last && !calls[0].last,
            "the put ends with its sync"
        );
        assert_eq!(calls[2].offset, 1063);
        assert_eq!(db.borrow().group_stats(), (3, 3));
    }

    #[test]
    fn writers_queued_behind_a_leader_are_written_and_synced_by_the_next_leader_as_one_group() {
        let db = Db::new(DbBenchSpec::default());
        let mut t: Vec<DbBench> = (0..3).map(|i| DbBench::new(db.clone(), 1, i)).collect();
        // Thread 0 finds no group under way: it leads one of its own put.
        let w = call(t[0].next());
        assert_eq!((w.file, w.offset, w.len), (1, 0, 1063));
        // Threads 1 and 2 queue behind it and make no call.
        assert_eq!(t[1].next(), Next::Wait);
        assert_eq!(t[2].next(), Next::Wait);
        t[0].done(true);
        assert_eq!(call(t[0].next()).op, Op::Flush);
        // Its fdatasync returns: thread 1 leads the writers queued, itself and thread 2.
        t[0].done(true);
        assert_eq!(
            t[0].next(),
            Next::Wait,
            "thread 0's next put waits for that group"
        );
        assert_eq!(t[2].next(), Next::Wait, "a follower waits for its leader");
        let w = call(t[1].next());
        assert_eq!(
            (w.offset, w.len),
            (1063, 7 + 12 + 2 * 1044),
            "both puts in one record"
        );
        t[1].done(true);
        let s = call(t[1].next());
        assert!(s.op == Op::Flush && s.flags.contains(ReqFlags::DATA_SYNC) && s.last);
        t[1].done(true);
        // Thread 2's put is durable without a call of its own; thread 0 leads next.
        assert_eq!(t[2].next(), Next::Counted(PUT));
        assert_eq!(call(t[0].next()).offset, 1063 + 2107);
        assert_eq!(db.borrow().group_stats(), (2, 3));
    }

    #[test]
    fn a_group_grows_to_its_leaders_batch_and_an_eighth_of_the_group_limit() {
        let spec = DbBenchSpec::default();
        // A 1,056-byte batch is small: the group may hold 1,056 + 1 MiB / 8 bytes.
        assert_eq!(spec.group_limit(1056), 1056 + (128 << 10));
        assert_eq!(spec.group_limit(1 << 20), 1 << 20);
        let db = Db::new(spec);
        let mut t: Vec<DbBench> = (0..200).map(|i| DbBench::new(db.clone(), 1, i)).collect();
        call(t[0].next());
        for th in &mut t[1..] {
            assert_eq!(th.next(), Next::Wait);
        }
        t[0].done(true);
        call(t[0].next());
        t[0].done(true);
        // 125 batches of 1,056 bytes fit in 132,128; the 126th does not.
        let w = call(t[1].next());
        let record = 12 + 125 * 1044;
        assert_eq!(w.len, log_append_bytes(1063, record));
        for th in &mut t[2..126] {
            assert_eq!(th.next(), Next::Wait);
        }
        t[1].done(true);
        call(t[1].next());
        t[1].done(true);
        for th in &mut t[2..126] {
            assert_eq!(th.next(), Next::Counted(PUT));
        }
        assert!(
            matches!(t[126].next(), Next::Call(_)),
            "the first left out leads"
        );
        assert_eq!(t[127].next(), Next::Wait);
    }

    #[test]
    fn the_log_cuts_a_record_into_fragments_at_its_32_kib_blocks() {
        // A record inside a block: one 7-byte header.
        assert_eq!(log_append_bytes(0, 1056), 1063);
        assert_eq!(log_append_bytes(32768 * 3 + 100, 1056), 1063);
        // One that fills the block exactly.
        assert_eq!(log_append_bytes(0, 32768 - 7), 32768);
        // One across a boundary: a fragment in each block, each behind its header.
        assert_eq!(log_append_bytes(32000, 1056), 1056 + 2 * 7);
        // Fewer than 7 bytes left: zeros, then the record in the next block.
        assert_eq!(log_append_bytes(32768 - 5, 100), 5 + 7 + 100);
        // Exactly 7 left: an empty first fragment, then the record.
        assert_eq!(log_append_bytes(32768 - 7, 100), 7 + 7 + 100);
        // Across three blocks.
        assert_eq!(log_append_bytes(0, 70_000), 70_000 + 3 * 7);
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
        for c in run_alone(&mut t) {
            creates += u32::from(c.call == Call::Create);
            unlinks += u32::from(c.call == Call::Unlink);
            if c.last {
                ops[c.operation as usize] += 1;
            }
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
