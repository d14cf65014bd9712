//! A job's cache flushes and FUA (`Durability`): when it syncs, which writes a sync covers
//! (`Synced`), and the periodic syncs the job issues.

use super::*;

/// A job's cache-flush and FUA options (fio's `fsync`/`fdatasync`, `end_fsync`,
/// `fsync_on_close`, `write_barrier`, `fua`) and how far its writes are durable.
///
/// A flush is issued as fio's sync engines do it: the job waits for its writes in flight,
/// issues the FLUSH and waits for it; libaio's job issues it beside its writes in flight
/// ([`HostLoop::sync_beside_io`]) and waits for it alone; io_uring's and posixaio's queue it
/// beside them and reap it as an I/O ([`HostLoop::sync_queued`]). A write is *acknowledged*
/// to the application when the job can rely on it: at its completion in a job that never
/// flushes, or when written with FUA; at the completion of the flush that covers it in a job
/// that flushes: a flush covers the writes the job reaped before it was issued (Linux's fsync
/// does not wait for direct writes in flight), and in an ordered stream every write issued
/// before it (the stream sends it after them).
///
/// When fio 3.33 syncs (measured with strace on a file, tests/test_fio_output_consistency.py):
/// - `fsync=N` (`fdatasync=N` the same; where both are due, the fsync): when the job fetches
///   its next I/O, if the writes it has issued are a non-zero multiple of N and the last thing
///   it issued was not a sync. So none after the last write of a job that runs out of I/Os
///   (400 writes at fsync=4: 99 syncs; 10 at fsync=1: 9) or whose time is up (fio reads the
///   clock before it fetches), and, in a mixed job, one before each read that follows such a
///   sync while no write came in between.
/// - `end_fsync` and `fsync_on_close`: once, when the job ends (fio closes the file then), if
///   its file has not been synced since it was opened for writing or last written; with both,
///   the close finds the file synced. Neither is counted in the JSON's `sync`. A job over
///   several files syncs each of them in turn, one call after another (fio's `do_io` ends
///   with an fsync per file, `for_each_file`; its `close_files` calls fsync(2) per file):
///   measured, nrfiles=4 loops=2 with fsync_on_close, 12 fsync calls, end_fsync 8.
#[derive(Clone, Debug, Default)]
pub struct Durability {
    pub fsync_every: u64,
    pub fdatasync_every: u64,
    pub end_fsync: bool,
    pub fsync_on_close: bool,
    pub barrier_every: u64,
    pub fua: bool,
    pub(super) writes_issued: u64,
    /// The last thing the job issued was a sync.
    pub(super) last_was_sync: bool,
    /// fio's `last_was_sync` as its `io_completed` keeps it: the job's last sync is done and
    /// it has reaped no read, write or trim since. A libaio, io_uring or posixaio job's fetch
    /// asks it (the synchronous engines reap everything before their sync, so the last thing
    /// issued tells the same).
    pub(super) last_done_was_sync: bool,
    /// The job's sync goes beside its writes in flight ([`HostLoop::sync_beside_io`]).
    pub(super) beside: bool,
    /// The job's periodic sync is an I/O of its queue ([`HostLoop::sync_queued`]).
    pub(super) queued: bool,
    /// Its queued syncs in flight, in the order issued.
    pub(super) queued_flushes: std::collections::VecDeque<QueuedFlush>,
    /// The job ran out holding I/Os, and its syncs are queued: fio asks `should_fsync` for
    /// its end sync once it has reaped them all, so the answer waits for that reap.
    pub(super) end_after_reap: bool,
    /// Writes issued and not yet reaped: how many, and (an unordered job whose sync goes beside
    /// its writes) which, as (issue time, offset, length).
    pub(super) unreaped_writes: u64,
    pub(super) unreaped: Option<Vec<(Ns, u64, u64)>>,
    /// Of those, the ones not reaped when the flush in flight was issued: it does not cover
    /// them.
    pub(super) inflight_except: Vec<(Ns, u64, u64)>,
    /// An ordered stream's writes the flush in flight (or an earlier one) counted as covered
    /// before the job reaped them: their reaps count nothing more.
    pub(super) precovered: u64,
    /// The job's file is opened for writing (fio's `td_write`: its `rw` writes).
    pub(super) for_writing: bool,
    pub(super) sync_due: bool,
    pub(super) sync_inflight: bool,
    /// The periodic sync due or in flight is an fdatasync: fio 3.33's JSON counts it in
    /// `sync.lat_ns` and not in `sync.total_ios` (its `total_io_u` holds fsyncs only).
    pub(super) datasync: bool,
    /// The sync due or in flight is the job's end (`end_fsync`, `fsync_on_close`): fio does not
    /// count it in the JSON's `sync`.
    pub(super) end_sync: bool,
    /// The sync due is the fsync(2) of a file closed between passes (`fsync_on_close`): fio
    /// calls it directly, so it neither counts as the last thing issued nor as the last
    /// done.
    pub(super) close_sync: bool,
    /// Between two passes, how far the job is ([`PassEnd`]).
    pub(super) pass_end: PassEnd,
    /// The job's files: an end or close sync is one call per file.
    pub(super) files: u64,
    /// Of the end or close sync in flight, the calls still to come for the other files, and
    /// whether they are close syncs.
    pub(super) files_left: u64,
    pub(super) files_close: bool,
    pub(super) end_sync_done: bool,
    /// Writes completed since the last flush was issued, and those the flush in flight covers.
    pub(super) completed_uncovered: u64,
    pub(super) covered_by_inflight: u64,
    /// Writes acknowledged to the application so far.
    pub acknowledged: u64,
    /// What the flushes that completed cover.
    pub synced: Synced,
}

/// How far a job is between two passes: of its files' close and `do_io`'s end sync, none, the
/// first or both are done (which comes first depends on how the pass ended).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum PassEnd {
    #[default]
    Running,
    First,
    Second,
}

/// A periodic sync of an engine that queues it ([`HostLoop::sync_queued`]), in flight.
#[derive(Clone, Debug)]
pub(super) struct QueuedFlush {
    pub(super) queued_ns: Ns,
    /// The writes it covers that the syncs issued before it do not.
    pub(super) covered: u64,
    /// The writes issued before it and not reaped then: it does not cover them.
    pub(super) except: Vec<(Ns, u64, u64)>,
    pub(super) datasync: bool,
}

/// What the flushes a job saw complete cover: the writes it issued before the last one was
/// issued, but those it had not reaped then (a libaio sync beside its writes in flight).
#[derive(Clone, Debug, Default)]
pub struct Synced {
    pub before_ns: Option<Ns>,
    /// (issue time, offset, length) of the writes excepted.
    pub(super) except: Vec<(Ns, u64, u64)>,
}

impl Synced {
    /// Whether they cover the job's write issued at `queued_ns` that holds `offset_bytes`.
    pub fn covers(&self, queued_ns: Ns, offset_bytes: u64) -> bool {
        self.before_ns.is_some_and(|synced| queued_ns < synced)
            && !self
                .except
                .iter()
                .any(|&(q, off, len)| q == queued_ns && (off..off + len).contains(&offset_bytes))
    }
}

impl Durability {
    /// A job's options: fsync and fdatasync every so many writes (0: never), at its end
    /// (`end_fsync`), when it closes its `files` (`fsync_on_close`), make every
    /// `barrier_every`-th write a barrier (0: never), write with FUA.
    pub fn new(
        (fsync_every, fdatasync_every): (u64, u64),
        (end_fsync, fsync_on_close): (bool, bool),
        barrier_every: u64,
        fua: bool,
        files: u64,
    ) -> Self {
        Durability {
            fsync_every,
            fdatasync_every,
            end_fsync,
            fsync_on_close,
            barrier_every,
            fua,
            files: files.max(1),
            ..Durability::default()
        }
    }

    /// Whether the job relies on flushes (rather than on completions) for durability.
    pub fn flushes(&self) -> bool {
        self.fsync_every > 0 || self.fdatasync_every > 0 || self.end_fsync || self.fsync_on_close
    }

    pub(super) fn busy(&self) -> bool {
        self.sync_due || self.sync_inflight
    }

    /// The job opens its file for writing.
    pub(super) fn open_for_writing(&mut self) {
        self.for_writing = true;
    }

    /// The job starts: whether its syncs go beside its writes in flight, and whether its
    /// stream is ordered.
    pub(super) fn configure(&mut self, beside: bool, queued: bool, ordered: bool) {
        self.beside = beside;
        self.queued = queued;
        if (beside || queued) && !ordered && (self.fsync_every > 0 || self.fdatasync_every > 0) {
            self.unreaped = Some(Vec::new());
        }
    }

    /// Whether fio's fetch of the job's next I/O gives a periodic sync first: None, or
    /// whether it is an fdatasync (fio's `get_rw_ddir` asks fsync first).
    pub(super) fn periodic_due(&self) -> Option<bool> {
        if self.writes_issued == 0 || self.synced() {
            return None;
        }
        let every = |n: u64| n > 0 && self.writes_issued.is_multiple_of(n);
        if every(self.fsync_every) {
            Some(false)
        } else if every(self.fdatasync_every) {
            Some(true)
        } else {
            None
        }
    }

    /// Whether the job's last sync is what fio's `should_fsync` sees last.
    pub(super) fn synced(&self) -> bool {
        if self.beside || self.queued {
            self.last_done_was_sync
        } else {
            self.last_was_sync
        }
    }

    /// The job issues a read or a trim.
    pub(super) fn other_issued(&mut self) {
        self.last_was_sync = false;
    }

    /// A write goes: the job holds it until it reaps it.
    pub(super) fn write_issued(&mut self, req: &Request) {
        self.unreaped_writes += 1;
        if let Some(list) = &mut self.unreaped {
            list.push((req.t.queued_ns, req.offset_bytes, req.len_bytes));
        }
    }

    /// The job reaps a read, write or trim `req`; whether it is a write to count as
    /// completed (not yet covered by a flush).
    pub(super) fn reaped(&mut self, req: &Request) -> bool {
        self.last_done_was_sync = false;
        if req.op != Op::Write {
            return false;
        }
        self.unreaped_writes -= 1;
        if let Some(list) = &mut self.unreaped {
            let key = (req.t.queued_ns, req.offset_bytes, req.len_bytes);
            if let Some(i) = list.iter().position(|&w| w == key) {
                list.swap_remove(i);
            }
        }
        if self.precovered > 0 {
            self.precovered -= 1;
            return false;
        }
        true
    }

    /// A flush goes: it covers the writes reaped since the last one, and in an ordered
    /// stream those issued and not yet reaped too.
    pub(super) fn flush_issued(&mut self, ordered: bool) {
        self.covered_by_inflight = std::mem::take(&mut self.completed_uncovered);
        if ordered {
            let held = self.unreaped_writes - self.precovered;
            self.covered_by_inflight += held;
            self.precovered += held;
        }
        if let Some(list) = &self.unreaped {
            self.inflight_except.clone_from(list);
        }
    }

    /// A queued periodic sync goes ([`HostLoop::sync_queued`]): what it covers is set now.
    pub(super) fn queued_flush_issued(&mut self, ordered: bool, now: Ns, datasync: bool) {
        self.flush_issued(ordered);
        self.last_was_sync = true;
        self.queued_flushes.push_back(QueuedFlush {
            queued_ns: now,
            covered: std::mem::take(&mut self.covered_by_inflight),
            except: std::mem::take(&mut self.inflight_except),
            datasync,
        });
    }

    /// The job reaps its queued sync `req`; whether it was an fdatasync. A sync covers what
    /// every sync issued before it covers, so those are done with it. (Syncs issued in the
    /// same instant are told apart by their order: the first of them is taken, which never
    /// counts a write as durable that is not.)
    pub(super) fn queued_flush_reaped(&mut self, req: &Request) -> bool {
        self.last_done_was_sync = true;
        let Some(i) = self
            .queued_flushes
            .iter()
            .position(|f| f.queued_ns == req.t.queued_ns)
        else {
            return false;
        };
        if req.status != IoStatus::Ok {
            let f = self.queued_flushes.remove(i).expect("found");
            self.completed_uncovered += f.covered;
            return f.datasync;
        }
        let mut datasync = false;
        for f in self.queued_flushes.drain(..=i) {
            self.acknowledged += f.covered;
            self.synced = Synced {
                before_ns: Some(f.queued_ns),
                except: f.except,
            };
            datasync = f.datasync;
        }
        datasync
    }

    /// The flags of the next write, counting it.
    pub(super) fn write_flags(&mut self) -> ReqFlags {
        self.writes_issued += 1;
        self.last_was_sync = false;
        let mut flags = ReqFlags::empty();
        if self.fua {
            flags |= ReqFlags::FUA;
        }
        if self.barrier_every > 0 && self.writes_issued.is_multiple_of(self.barrier_every) {
            flags |= ReqFlags::PREFLUSH | ReqFlags::FUA;
        }
        flags
    }

    /// The job has issued its last, and still holds I/Os if `held`: a final sync is due if it
    /// asked for one, writes, and the last thing it issued was not a sync (fio's `should_fsync`:
    /// a read after the last sync makes one due, measured: randrw fsync=2 end_fsync ending `W W
    /// S R`: an fsync after it). fio asks once it has reaped everything: a libaio job's I/Os
    /// held beside its last sync make one due.
    pub(super) fn at_end(&mut self, held: bool) {
        if self.queued && held {
            self.end_after_reap = true;
            return;
        }
        if (self.end_fsync || self.fsync_on_close)
            && self.for_writing
            && !(self.synced() && !(self.beside && held))
            && !self.end_sync_done
        {
            self.end_sync_done = true;
            self.end_sync_due();
        }
    }

    /// An end sync (`end_fsync`, `fsync_on_close`, or the close between passes) is due: an
    /// fsync, not counted in the JSON's `sync`.
    pub(super) fn end_sync_due(&mut self) {
        self.sync_due = true;
        self.end_sync = true;
        self.datasync = false;
        self.files_left = self.files - 1;
    }

    /// Between two passes, of a job that `writes`: the files' close (`close`: fsync_on_close's
    /// fsync(2) per file) or else `do_io`'s end sync (end_fsync or fsync_on_close, an fsync
    /// per file) falls due, unless the last thing done was a sync.
    pub(super) fn pass_syncs(&mut self, writes: bool, close: bool) {
        if !writes || self.synced() {
            return;
        }
        if close && self.fsync_on_close {
            self.end_sync_due();
            self.close_sync = true;
        } else if !close && (self.end_fsync || self.fsync_on_close) {
            self.end_sync_due();
        }
    }

    /// fio's reset_io_counters: the job's last sync no longer counts.
    pub(super) fn forget_last_sync(&mut self) {
        self.last_was_sync = false;
        self.last_done_was_sync = false;
    }

    /// An end or close sync completed: the next file's call is due, if any is left.
    pub(super) fn next_file_sync(&mut self, close: bool) {
        if self.files_left > 0 {
            self.files_left -= 1;
            self.sync_due = true;
            self.end_sync = true;
            self.datasync = false;
            self.close_sync = close;
        }
    }
}

impl JobRun {
    /// fio's fetch gave a periodic sync (an fdatasync if `datasync`): it is issued once the
    /// job's I/Os are reaped, or libaio's beside them (step 2 of `pump`).
    pub(super) fn periodic_sync(&mut self, datasync: bool) {
        self.durability.sync_due = true;
        self.durability.datasync = datasync;
        // fio 3.33 counts the sync in iodepth_level at the depth the job holds with it (its
        // `cur_depth` at the sync's queue: the I/Os not yet reaped and the sync), though not
        // in the shares' divisor (measured: psync, 400 writes, fsync=4: '1' 124.75 %).
        // libaio's is counted when it goes (step 2), after the reap a busy engine makes.
        if !self.host_loop.sync_beside_io {
            self.stats.iodepth_level[depth_level_bucket(self.allocated + 1)] += 1;
        }
        self.stats.iodepth_syncs += 1;
    }
    /// fio's fetch gave a periodic sync to an engine that queues it ([`HostLoop::sync_queued`]):
    /// it is queued and committed as a write is (fio's `td_io_queue`: counted in
    /// `iodepth_level` by the commit, at the depth the job holds with it). False if the
    /// submission call sleeps.
    pub(super) fn queue_sync(
        &mut self,
        now: Ns,
        datasync: bool,
        submit: &mut impl FnMut(Request) -> bool,
    ) -> bool {
        self.stats.iodepth_syncs += 1;
        self.allocated += 1;
        self.durability
            .queued_flush_issued(self.ordered, now, datasync);
        let mut req = Request::new(Op::Flush, 0, 0, 0, now);
        req.host = self.host;
        req.core = self.core;
        req.file = self.file;
        if datasync && self.file != 0 {
            req.flags |= ReqFlags::DATA_SYNC;
        }
        if self.ordered {
            req.flags |= ReqFlags::ORDERED;
        }
        if self.allocated >= self.depth() {
            self.wait = self.reap_wait(true);
        }
        self.uncommitted += 1;
        if self.host_loop.calls == EngineCalls::EachAtQueue {
            // posixaio: aio_fsync leaves at once (see [`EngineCalls::EachAtQueue`]).
            self.stats.submit_batches[batch_bucket(1)] += 1;
            if now >= self.ramp_end() {
                self.stats.complete_batches[batch_bucket(1)] += 1;
            }
            if self.uncommitted >= self.host_loop.batch {
                self.commit(submit, true);
            }
            self.in_call.push_back(req);
            return self.continue_call(submit);
        }
        self.staged.push(req);
        self.uncommitted < self.host_loop.batch || self.commit(submit, true)
    }
    /// fio's `exceeds_number_ios` counts the I/Os completed, queued and in flight, its
    /// queued syncs among them ([`HostLoop::sync_queued`]): a job holding syncs stops short of
    /// `number_ios` writes (measured, posixaio iodepth=8 fsync=4 number_ios=32: 28 writes).
    pub(super) fn syncs_reach_number_ios(&self) -> bool {
        let syncs = self.durability.queued_flushes.len() as u64;
        if syncs == 0 {
            return false;
        }
        let Source::Gen(g) = &self.source else {
            return false;
        };
        let Some(limit) = g.extent().io_limit_ios else {
            return false;
        };
        let pending = u64::from(self.pending.is_some());
        g.ios_generated() - pending + syncs >= limit
    }
}
