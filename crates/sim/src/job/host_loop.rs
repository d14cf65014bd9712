//! How a job clone issues and reaps its I/O (`HostLoop`, `EngineCalls`, `Think`) and what
//! fio's loop waits for (`Wait`, `AfterQuiesce`).

use super::*;

/// How a job clone issues and reaps its I/O: its engine and fio's options for its queue
/// (fio's `do_io` loop, backend.c).
#[derive(Clone, Copy, Debug)]
pub struct HostLoop {
    pub engine: EngineClass,
    /// I/Os the job may hold at once (fio's io_u pool): 1 for a synchronous engine.
    pub iodepth: u32,
    /// `iodepth_batch_submit`: I/Os queued before they are submitted together.
    pub batch: u32,
    /// `iodepth_batch_complete_min` and `_max`.
    pub complete_min: u32,
    pub complete_max: u32,
    /// `iodepth_low`: once full, the queue drains to this depth before it is refilled.
    pub low: u32,
    /// `io_submit_mode=offload`: I/Os leave at their scheduled times, whatever is in flight.
    pub offload: bool,
    /// For the `null` engine: the host's cost to issue and to complete an I/O.
    pub null_costs: Option<(Ns, Ns)>,
    /// Whether fio records a submission latency: not for a synchronous call (a sync engine,
    /// or `null` at depth 1), whose whole time is its completion latency.
    pub slat: bool,
    /// How the engine's own calls differ from libaio's.
    pub calls: EngineCalls,
    /// libaio's periodic sync (fio 3.33, engines/libaio.c `fio_libaio_queue`): Linux has no
    /// asynchronous fsync, so the engine calls fsync(2) at once, beside every write it has
    /// submitted and not reaped; only while it holds I/Os not yet submitted does it answer
    /// busy, and fio then submits them, reaps as when busy, and queues the sync again. Measured
    /// with strace (tests/test_fio_output_consistency.py): iodepth=4 fsync=4, each fsync with 3
    /// writes in flight. Other engines wait for their I/O first.
    pub sync_beside_io: bool,
    /// `io_uring`'s and `posixaio`'s periodic sync is an I/O of the queue (fio 3.33,
    /// engines/io_uring.c: an IORING_OP_FSYNC in the ring; engines/posixaio.c: aio_fsync):
    /// it takes a slot, is queued, committed and counted in `iodepth_level` as a write is,
    /// goes beside the writes in flight and is reaped as they are. fio's fetch gives a sync
    /// again while the last I/O the job reaped is not a sync (`last_was_sync` changes in
    /// `io_completed`), so one in flight is followed by more until one is reaped after the
    /// writes (measured, posixaio iodepth=4 fsync=4, 16 writes: 12 syncs, 4 at each
    /// multiple; tests/test_fio_output_consistency.py).
    pub sync_queued: bool,
}

/// How an engine's calls behave where they differ from libaio's (whose commit submits the
/// queued batch and whose getevents reaps `iodepth_batch_complete_min..max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineCalls {
    Batch,
    /// `posixaio` (engines/posixaio.c) has no commit: each I/O leaves when it is queued, and
    /// fio marks a submission and a completion of one I/O there (ioengines.c, `td_io_queue`);
    /// the depths are still counted `iodepth_batch_submit` I/Os at a time (`td_io_commit`), and
    /// its getevents returns every completion it finds, whatever the maximum.
    EachAtQueue,
    /// `vsync` above depth 1 (engines/sync.c): I/Os queue into one vector while each follows
    /// the last (same direction, next offset); the commit is one readv/writev the job waits
    /// for; a queued I/O that does not follow makes the engine busy (commit, reap, queue it
    /// again). Getevents returns the I/Os of the last call, whatever the minimum and maximum,
    /// or none if they were reaped: the I/Os of a call not reaped before the next one are never
    /// reaped (they keep their slot of `iodepth` to the end of the job, as in fio 3.33).
    Vector,
}

impl HostLoop {
    /// fio's rules (init.c `fixup_options`, the engines' own): a synchronous engine has one
    /// I/O at a time; batches and the low mark fit inside `iodepth` (0 meaning `iodepth`);
    /// the reaping maximum is at least its minimum; `posixaio` has no commit and so submits
    /// each I/O by itself (see [`EngineCalls`]); `null` at a depth above 1 completes a batch at its commit and
    /// takes no more until it is reaped.
    pub fn of_job(job: &Job, null_costs: (Ns, Ns)) -> Self {
        let depth = job.iodepth.max(1);
        let fit = |v: u32| if v == 0 || v > depth { depth } else { v };
        let batch = fit(job.iodepth_batch_submit);
        let calls = match job.ioengine.as_str() {
            "posixaio" => EngineCalls::EachAtQueue,
            // At depth 1 a vector of one is a psync call.
            "vsync" if depth > 1 => EngineCalls::Vector,
            _ => EngineCalls::Batch,
        };
        let complete_min = job.iodepth_batch_complete_min;
        let complete_max = job.iodepth_batch_complete_max.max(complete_min);
        let (iodepth, batch) = match job.engine {
            EngineClass::Sync if calls == EngineCalls::Vector => (depth, batch),
            EngineClass::Sync => (1, 1),
            EngineClass::Null if depth > 1 => (batch, batch),
            EngineClass::Null => (1, 1),
            EngineClass::Async => (depth, batch),
        };
        HostLoop {
            engine: job.engine,
            iodepth,
            batch,
            complete_min,
            complete_max,
            low: fit(job.iodepth_low).min(iodepth),
            offload: job.submit_mode == SubmitMode::Offload,
            null_costs: (job.engine == EngineClass::Null).then_some(null_costs),
            slat: match job.engine {
                EngineClass::Sync => false,
                EngineClass::Null => depth > 1,
                EngineClass::Async => true,
            },
            calls,
            sync_beside_io: job.ioengine == "libaio" && job.submit_mode != SubmitMode::Offload,
            sync_queued: matches!(job.ioengine.as_str(), "io_uring" | "posixaio")
                && job.submit_mode != SubmitMode::Offload,
        }
    }

    /// An open-loop replay (a trace): every I/O leaves at its time, up to `depth` in flight,
    /// each reaped as it completes.
    pub fn replay(depth: u32) -> Self {
        HostLoop {
            engine: EngineClass::Async,
            iodepth: depth.max(1),
            batch: 1,
            complete_min: 1,
            complete_max: 1,
            low: depth.max(1),
            offload: true,
            null_costs: None,
            slat: true,
            calls: EngineCalls::Batch,
            sync_beside_io: false,
            sync_queued: false,
        }
    }
}

/// `thinktime` and its companions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Think {
    pub ns: Ns,
    /// A stall every `blocks` I/Os issued (`issue`) or completed (`complete`).
    pub blocks: u64,
    pub on_complete: bool,
    /// `thinktime_iotime`: a stall also after this long of I/O.
    pub iotime_ns: Ns,
    /// `rate_ignore_thinktime`.
    pub ignore_in_rate: bool,
}

/// What fio's loop is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wait {
    Nothing,
    /// `wait_for_completions`: at least `min` completions to reap, at most `max` per call;
    /// with `full`, reaping goes on until the queue is down to `iodepth_low`.
    Reap {
        min: u32,
        max: u32,
        full: bool,
    },
    /// `io_u_quiesce`: every I/O in flight, each reaped as it completes; then `then`.
    Quiesce(AfterQuiesce),
    /// Asleep until the time (a rate or a think time).
    Until(Ns),
    /// Its flow is ahead of its share: it waits for the other jobs of its flow.
    Flow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterQuiesce {
    /// Go on with the loop (a rate's sleep or a flush comes next).
    Continue,
    /// Think for this long.
    Think(Ns),
    /// Sleep this long (`flow_sleep`).
    Sleep(Ns),
}
