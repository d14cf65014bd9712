//! A job whose clones are the threads of an application (a job's `app=`, on a mounted file
//! system): each clone gives one system call at a time, as a synchronous thread does, and
//! waits for it to return before the next (`qoslab_workload::apps`). The application counts
//! its own operations (Filebench's flowops, db_bench's puts); the report gives them per
//! second. fio's I/O loop (depth, batches, rates, think time) has no say here.

use std::cell::RefCell;
use std::rc::Rc;

use qoslab_engine::{Call, IoStatus, Ns, Request};
use qoslab_fs::FileSpec;
use qoslab_workload::apps::dbbench::{Db, DbBench, DbBenchSpec};
use qoslab_workload::apps::varmail::{FileSet, Varmail, VarmailSpec};
use qoslab_workload::apps::{App, AppCall, Next, PreFile};

use super::{JobRun, Pump, PumpNotes, Source};

/// What the threads of one application job share: Varmail's fileset, db_bench's database.
pub enum AppShared {
    Varmail(Rc<RefCell<FileSet>>),
    FillSync(Rc<RefCell<Db>>),
}

impl AppShared {
    /// The application `name` (one of `qoslab_workload::fio::APPS`) for `threads` threads,
    /// its files named from `first_name`.
    pub fn new(name: &str, threads: u32, seed: u64, first_name: u32) -> Self {
        match name {
            "varmail" => AppShared::Varmail(FileSet::new(
                VarmailSpec {
                    nthreads: threads,
                    first_name,
                    ..VarmailSpec::default()
                },
                seed,
            )),
            "fillsync" => AppShared::FillSync(Db::new(DbBenchSpec {
                threads,
                first_name,
                ..DbBenchSpec::default()
            })),
            other => unreachable!("the job parser knows no app '{other}'"),
        }
    }

    /// Whether a thread of it ends by itself (db_bench's puts), or only at the job's
    /// `number_ios` or `runtime` (Varmail loops over its flowops).
    pub fn ends_by_itself(&self) -> bool {
        matches!(self, AppShared::FillSync(_))
    }

    /// The files that exist when the run starts (Filebench's preallocated fileset, a fresh
    /// database's log and MANIFEST), written and in the page cache.
    pub fn files(&self) -> Vec<FileSpec> {
        let pre: Vec<PreFile> = match self {
            AppShared::Varmail(s) => s.borrow().preallocated(),
            AppShared::FillSync(d) => d.borrow().preallocated(),
        };
        pre.into_iter()
            .map(|f| FileSpec {
                name: f.name,
                size: f.size,
                allocated: true,
                cached: true,
            })
            .collect()
    }

    /// Thread `clone` of the application, its operations bounded by `ops` (`number_ios`).
    pub fn source(&self, name: &'static str, clone: u32, seed: u64, ops: Option<u64>) -> Source {
        let thread: Box<dyn App> = match self {
            AppShared::Varmail(s) => Box::new(Varmail::new(s.clone(), seed, clone)),
            AppShared::FillSync(d) => Box::new(DbBench::new(d.clone(), seed, clone)),
        };
        Source::App(Box::new(AppSource {
            name,
            thread,
            call: None,
            ops_left: ops,
            blocked: false,
        }))
    }
}

/// One application thread as a job's source.
pub struct AppSource {
    name: &'static str,
    thread: Box<dyn App>,
    /// The call in the file system, if any.
    call: Option<AppCall>,
    /// Operations still allowed (`number_ios`), if bounded.
    ops_left: Option<u64>,
    /// The thread waits for another thread of the application (`Next::Wait`).
    blocked: bool,
}

/// An application job's operations, for the report.
#[derive(Clone, Debug, Default)]
pub struct AppOps {
    pub name: &'static str,
    pub operations: &'static [&'static str],
    /// Done after the ramp, per operation.
    pub counts: Vec<u64>,
}

impl AppOps {
    pub fn merge(&mut self, o: &AppOps) {
        if self.counts.is_empty() {
            self.clone_from(o);
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl JobRun {
    /// Whether the job is a thread of an application.
    pub fn is_app(&self) -> bool {
        matches!(self.source, Source::App(_))
    }

    /// Whether the job is an application's thread waiting for another of its threads: the
    /// run asks it again when another thread's call returns.
    pub fn waits_for_app(&self) -> bool {
        matches!(&self.source, Source::App(a) if a.blocked) && !self.finished
    }

    /// An operation of the application is done at `now`.
    fn count_app_op(&mut self, op: u8, now: Ns) {
        let ramp_end = self.ramp_end();
        let Source::App(a) = &mut self.source else {
            unreachable!("an application job")
        };
        if let Some(left) = &mut a.ops_left {
            *left = left.saturating_sub(1);
        }
        if now >= ramp_end {
            let ops = self.stats.app.get_or_insert_with(|| AppOps {
                name: a.name,
                operations: a.thread.operations(),
                counts: vec![0; a.thread.operations().len()],
            });
            ops.counts[op as usize] += 1;
        }
    }

    /// The thread's next call, once the one it made has returned; the job ends with the
    /// application, its `number_ios` operations or its `runtime`.
    pub(super) fn pump_app(
        &mut self,
        now: Ns,
        submit: &mut impl FnMut(Request) -> bool,
    ) -> (Pump, PumpNotes) {
        let notes = PumpNotes::default();
        if self.inflight > 0 || self.finished {
            return (Pump::Wait, notes);
        }
        loop {
            let timed_out = self
                .end_after_ns
                .is_some_and(|end| now >= self.start_ns + end);
            let Source::App(a) = &mut self.source else {
                unreachable!("an application job")
            };
            a.blocked = false;
            let stop = self.terminated || self.error != 0 || timed_out || a.ops_left == Some(0);
            // A thread others wait on (RocksDB's writer, maybe the next leader) ends its
            // operation first.
            let next = if stop && !a.thread.busy() {
                Next::Done
            } else {
                a.thread.next()
            };
            match next {
                Next::Wait => {
                    a.blocked = true;
                    return (Pump::Wait, notes);
                }
                Next::Done => {
                    self.exhausted = true;
                    self.finished = true;
                    return (Pump::Wait, notes);
                }
                Next::Counted(op) => self.count_app_op(op, now),
                Next::Call(c) => {
                    a.call = Some(c);
                    let mut req = Request::new(c.op, c.offset, c.len, 0, now);
                    req.call = c.call;
                    req.file = c.file;
                    req.flags = c.flags;
                    req.host = self.host;
                    req.core = self.core;
                    self.inflight += 1;
                    self.allocated += 1;
                    self.issued += 1;
                    // The thread waits for its call, whether or not it sleeps for a tag.
                    let _ = submit(req);
                    return (Pump::Wait, notes);
                }
            }
        }
    }

    /// The call the thread made returned: the application hears it, and an operation whose
    /// last call it was is counted. Only I/O calls (reads, writes, fsyncs) enter fio's
    /// sections; creat, open, close and unlink count in the application's operations.
    pub(super) fn complete_app(&mut self, req: &Request) {
        self.inflight -= 1;
        self.allocated -= 1;
        self.reaped_ios += 1;
        self.reaped_bytes += req.len_bytes;
        let done = req.t.completed_ns;
        if req.call == Call::Io {
            self.record(req, done);
        } else {
            self.last_complete_ns = self.last_complete_ns.max(done);
        }
        let Source::App(a) = &mut self.source else {
            unreachable!("an application job")
        };
        let call = a.call.take().expect("a call in flight");
        a.thread.done(req.status == IoStatus::Ok);
        if call.last {
            self.count_app_op(call.operation, done);
        }
    }
}
