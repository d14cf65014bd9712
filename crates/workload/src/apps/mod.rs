//! Applications above a file system, as their threads call it: each thread is an [`App`]
//! that gives its next system call ([`AppCall`], one at a time, as a synchronous thread does)
//! and hears how it ended. The calls go to the file system stage (`crates/fs`) through the
//! job layer of `crates/sim`.
//!
//! - [`varmail`]: Filebench's Varmail personality (its fileset, flowops and defaults).
//! - [`dbbench`]: RocksDB's `db_bench` `fillsync`: the threads' puts go to one write-ahead log
//!   through RocksDB's group commit (a leader appends and `fdatasync`s the puts queued behind
//!   it while they wait); memtable flushes and compactions write sorted tables.

pub mod dbbench;
pub mod varmail;

use qoslab_engine::{Call, Op, ReqFlags};

/// One system call of an application thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppCall {
    pub call: Call,
    pub op: Op,
    /// The file it names (`Request::file`).
    pub file: u32,
    pub offset: u64,
    pub len: u64,
    pub flags: ReqFlags,
    /// The application's operation this call belongs to (an index into
    /// [`App::operations`]), and whether it is that operation's last call (the one that
    /// counts it as done).
    pub operation: u8,
    pub last: bool,
}

impl AppCall {
    fn new(call: Call, op: Op, file: u32, operation: u8) -> Self {
        AppCall {
            call,
            op,
            file,
            offset: 0,
            len: 0,
            flags: ReqFlags::empty(),
            operation,
            last: true,
        }
    }
}

/// What an application thread does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Call(AppCall),
    /// An operation done without a system call (Filebench counts an append of 0 bytes, or a
    /// delete of a file another thread has open, as an operation).
    Counted(u8),
    /// The thread waits for another thread of the application (a RocksDB writer for the
    /// leader of its group): it is asked again whenever another thread's call returns.
    Wait,
    /// Nothing more to do.
    Done,
}

/// One application thread.
pub trait App {
    /// The names of the application's operations (Filebench's flowops, db_bench's puts).
    fn operations(&self) -> &'static [&'static str];
    /// The next thing the thread does.
    fn next(&mut self) -> Next;
    /// The call last given returned (`ok`: without an error).
    fn done(&mut self, ok: bool);
    /// Whether the thread is inside an operation other threads depend on (a RocksDB writer
    /// in the write queue, which may be made the next leader): a job that stops (its runtime,
    /// its bound) lets it finish that operation first.
    fn busy(&self) -> bool {
        false
    }
}

/// A file that exists before the run, as the application's setup left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreFile {
    pub name: u32,
    pub size: u64,
}
