//! The one request type that flows through every stage of the simulated I/O path, and the
//! arena it lives in.
//!
//! A request is created when a job issues an I/O and freed when the job sees it complete; in
//! between, stages pass its [`ReqId`] around and read or stamp the fields they own. The arena
//! reuses freed slots, so memory follows the number of outstanding I/Os, not the run length.

use crate::time::Ns;

/// The operation of one I/O, as the block layer and NVMe see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Write,
    /// Discard / deallocate (fio `trim`, NVMe Dataset Management).
    Trim,
    /// Cache flush (Linux REQ_PREFLUSH, NVMe Flush).
    Flush,
}

impl Op {
    /// Every op, in [`Op::index`] order.
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Trim, Op::Flush];

    /// Index into per-op tables, in fio's reporting order (read, write, trim); flush last.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// fio's name for the data direction (`read`, `write`, `trim`; flush is fio's `sync`).
    pub const fn fio_name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Trim => "trim",
            Op::Flush => "sync",
        }
    }

    /// Whether data moves from the host to the device.
    pub const fn carries_data_to_device(self) -> bool {
        matches!(self, Op::Write)
    }

    /// Whether data moves from the device to the host.
    pub const fn carries_data_to_host(self) -> bool {
        matches!(self, Op::Read)
    }
}

/// Linux I/O priority classes (include/uapi/linux/ioprio.h); fio's `prioclass` uses the same
/// numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum IoPrioClass {
    #[default]
    None = 0,
    RealTime = 1,
    BestEffort = 2,
    Idle = 3,
}

/// An I/O priority: class plus level 0 (highest) to 7 (lowest) within the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IoPrio {
    pub class: IoPrioClass,
    pub level: u8,
}

bitflags::bitflags! {
    /// Ordering and durability attributes of a request (Linux REQ_* / NVMe command bits).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct ReqFlags: u16 {
        /// Force Unit Access: the write is durable on media before it completes.
        const FUA = 1 << 0;
        /// Flush the volatile write cache before this request (Linux REQ_PREFLUSH).
        const PREFLUSH = 1 << 1;
        /// Synchronous I/O (the submitter waits for it; Linux REQ_SYNC).
        const SYNC = 1 << 2;
        /// A write (or FLUSH) of an ordered stream, the submitting job's: the block layer's
        /// ordering plug-in keeps its storage order (see `crate::order`).
        const ORDERED = 1 << 3;
        /// Issued again after a timeout, abort or controller reset.
        const REQUEUED = 1 << 4;
        /// One command of a larger request split at the transfer-size limit (MDTS).
        const SPLIT = 1 << 5;
        /// Cancelled by a controller reset while the media still held it: its completion is
        /// dropped when it arrives, and only then is the slot freed.
        const ORPHAN = 1 << 6;
        /// More I/Os of the same submission call follow at this instant (fio's
        /// iodepth_batch_submit: one io_submit for the batch); the block layer plugs a batch of
        /// more than two, as Linux does.
        const BATCH_MORE = 1 << 7;
        /// The next ordered write of the same stream belongs to this one's group (Rio 4.2:
        /// the writes of a group may be reordered among themselves); a group ends at an ordered
        /// write without this flag.
        const GROUP_MORE = 1 << 8;
        /// A call on a file returns only once its data is durable: on a write, `O_DSYNC`; on a
        /// flush, `fdatasync` (a flush of a file without it is `fsync`).
        const DATA_SYNC = 1 << 9;
        /// A write of a file returns only once its data and metadata are durable (`O_SYNC`).
        const FILE_SYNC = 1 << 10;
        /// `O_DIRECT`: a read or write that bypasses the page cache (at the top of a path with
        /// a page cache; without this flag, a read or write goes through it).
        const DIRECT = 1 << 11;
        /// Its caller opened the call's file just before it and advised
        /// `POSIX_FADV_DONTNEED` on the whole of it (fio's `invalidate=1`, at each open): the
        /// page cache starts writeback of the file's dirty pages (`WB_SYNC_NONE`, not waited
        /// for) and drops its clean ones first.
        const FADV_DONTNEED = 1 << 12;
    }
}

/// What a request at the top of a path with a file system asks of it: the application's
/// system call on [`Request::file`]. `Io` is a read, write, trim or flush (`fsync`) of the file
/// (or of the block device itself when `file` is 0); the others change the namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Call {
    #[default]
    Io,
    /// `creat(2)`: the file is created empty (and opened).
    Create,
    /// `open(2)` of an existing file.
    Open,
    /// `close(2)`.
    Close,
    /// `unlink(2)`: the name goes; the file's blocks are freed.
    Unlink,
    /// `rename(2)` of the file onto the name of file `offset_bytes` (which it replaces, if it
    /// exists).
    Rename,
}

/// How a request ended, as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum IoStatus {
    #[default]
    Ok,
    /// The media reported an error (e.g. a read of lost data after a power failure).
    MediaError,
    /// Aborted by an NVMe Abort command or a controller reset.
    Aborted,
    /// The device lost power with the request outstanding.
    PowerLoss,
}

/// The identity of a request in a [`Requests`] arena: an index, cheap to copy and to store in
/// events and queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u32);

impl Default for ReqId {
    fn default() -> Self {
        ReqId::NONE
    }
}

impl ReqId {
    /// "No request" (for parents of top-level requests and empty slots).
    pub const NONE: ReqId = ReqId(u32::MAX);

    pub const fn index(self) -> usize {
        self.0 as usize
    }

    pub const fn is_none(self) -> bool {
        self.0 == u32::MAX
    }
}

/// When the request passed each point of the path. A stage stamps only its own fields; a
/// field that the path does not have (no block layer, no interrupt) keeps the previous stamp's
/// value, so differences between neighbours are always meaningful.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    /// The job issued the I/O (fio's start of submission latency).
    pub queued_ns: Ns,
    /// The host driver wrote the command into a submission queue and rang the doorbell (fio's
    /// end of submission latency, start of completion latency).
    pub dispatched_ns: Ns,
    /// The command reached the controller: its doorbell landed (PCIe) or its capsule arrived
    /// (a fabric). A transport that knows it in advance stamps it before the time comes.
    pub arrived_ns: Ns,
    /// The controller fetched the command from the submission queue.
    pub fetched_ns: Ns,
    /// The media started working on the command.
    pub media_start_ns: Ns,
    /// The media finished it.
    pub media_done_ns: Ns,
    /// The controller posted the completion queue entry.
    pub cq_posted_ns: Ns,
    /// The interrupt that announced the entry reached the host.
    pub interrupt_ns: Ns,
    /// The job saw the I/O complete.
    pub completed_ns: Ns,
}

/// One I/O (or, after an MDTS split, one NVMe command of a larger I/O).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    pub flags: ReqFlags,
    pub prio: IoPrio,
    pub status: IoStatus,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// The submitting job (index into the run's job table).
    pub job: u32,
    /// The host CPU (and so the hardware queue) the job runs on.
    pub core: u16,
    /// The host the job runs on, when several share one controller.
    pub host: u16,
    /// The namespace addressed (NVMe NSID, from 1).
    pub nsid: u32,
    /// The NVM set the namespace belongs to (0: the device has no sets).
    pub nvm_set: u16,
    /// The hardware queue of its host the request went through (blk-mq's hctx; for NVMe the
    /// host's submission queue), set by the host driver.
    pub hwq: u16,
    /// The system call, for a request above a file system (`Io` everywhere below it).
    pub call: Call,
    /// The file addressed, for a request above a file system: its inode number (0: the block
    /// device itself).
    pub file: u32,
    pub t: Stamps,
}

impl Request {
    /// A request for `len_bytes` at `offset_bytes`, issued by `job` at `now`.
    pub fn new(op: Op, offset_bytes: u64, len_bytes: u64, job: u32, now: Ns) -> Self {
        Request {
            op,
            flags: ReqFlags::empty(),
            prio: IoPrio::default(),
            status: IoStatus::Ok,
            offset_bytes,
            len_bytes,
            job,
            core: 0,
            host: 0,
            nsid: 1,
            nvm_set: 0,
            hwq: 0,
            call: Call::Io,
            file: 0,
            t: Stamps {
                queued_ns: now,
                ..Stamps::default()
            },
        }
    }
}

/// The arena holding every outstanding request; slots of completed requests are reused.
///
/// No `Vec` growth happens once the number of outstanding requests has peaked, so the hot path
/// does not allocate.
#[derive(Debug, Default)]
pub struct Requests {
    slots: Vec<Request>,
    live: Vec<bool>,
    free: Vec<u32>,
    outstanding: usize,
}

impl Requests {
    pub fn new() -> Self {
        Self::default()
    }

    /// An arena with room for `n` outstanding requests before it grows.
    pub fn with_capacity(n: usize) -> Self {
        Requests {
            slots: Vec::with_capacity(n),
            live: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            outstanding: 0,
        }
    }

    /// Stores `req` and returns its id.
    pub fn alloc(&mut self, req: Request) -> ReqId {
        self.outstanding += 1;
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = req;
            self.live[i as usize] = true;
            ReqId(i)
        } else {
            let i = u32::try_from(self.slots.len()).expect("more than 2^32 outstanding requests");
            assert!(i != u32::MAX, "request arena full");
            self.slots.push(req);
            self.live.push(true);
            ReqId(i)
        }
    }

    /// Releases the slot of `id`; the id may be handed out again by the next `alloc`.
    ///
    /// # Panics
    /// When `id` is not live: freeing twice is a bug in a stage.
    pub fn free(&mut self, id: ReqId) {
        assert!(self.live[id.index()], "request {id:?} freed twice");
        self.live[id.index()] = false;
        self.free.push(id.0);
        self.outstanding -= 1;
    }

    /// Requests allocated and not yet freed.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The most requests ever outstanding at once (the arena's size).
    pub fn high_water(&self) -> usize {
        self.slots.len()
    }

    pub fn is_live(&self, id: ReqId) -> bool {
        self.live.get(id.index()).copied().unwrap_or(false)
    }

    /// Ids of every live request, in slot order (deterministic).
    pub fn live_ids(&self) -> impl Iterator<Item = ReqId> + '_ {
        self.live
            .iter()
            .enumerate()
            .filter(|(_, l)| **l)
            .map(|(i, _)| ReqId(i as u32))
    }
}

impl std::ops::Index<ReqId> for Requests {
    type Output = Request;
    #[inline]
    fn index(&self, id: ReqId) -> &Request {
        debug_assert!(self.live[id.index()], "request {id:?} used after free");
        &self.slots[id.index()]
    }
}

impl std::ops::IndexMut<ReqId> for Requests {
    #[inline]
    fn index_mut(&mut self, id: ReqId) -> &mut Request {
        debug_assert!(self.live[id.index()], "request {id:?} used after free");
        &mut self.slots[id.index()]
    }
}

/// What a stage keeps of each request for itself, by request id, beside the shared
/// [`Request`]: an entry reads as `T::default()` until the stage writes it, and the table
/// grows to the highest id it is asked for, so like the arena it follows the requests
/// outstanding at once, not the run's length.
#[derive(Clone, Debug, Default)]
pub struct ReqTable<T> {
    rows: Vec<T>,
}

impl<T: Clone + Default> ReqTable<T> {
    pub fn new() -> Self {
        ReqTable { rows: Vec::new() }
    }

    /// The entry of `id`, created (as the default) if the table is not that long yet.
    #[inline(always)]
    pub fn entry(&mut self, id: ReqId) -> &mut T {
        let i = id.index();
        if i >= self.rows.len() {
            self.grow(i);
        }
        &mut self.rows[i]
    }

    // Out of line: a table grows only until the outstanding requests peak.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.rows.resize(i + 1, T::default());
    }

    /// Every entry with its id, in id order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (ReqId, &mut T)> {
        self.rows
            .iter_mut()
            .enumerate()
            .map(|(i, row)| (ReqId(i as u32), row))
    }
}

impl<T: Clone + Default> std::ops::Index<ReqId> for ReqTable<T> {
    type Output = T;
    /// The entry of `id`, for an id the table has grown to (`entry` grows it); beyond, it panics.
    #[inline]
    fn index(&self, id: ReqId) -> &T {
        &self.rows[id.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_table_reads_the_default_until_written_and_grows_to_the_ids_asked_for() {
        let mut t: ReqTable<(u32, bool)> = ReqTable::new();
        assert_eq!(*t.entry(ReqId(3)), (0, false));
        t.entry(ReqId(1)).0 = 7;
        assert_eq!(t[ReqId(1)], (7, false));
        assert_eq!(t[ReqId(3)], (0, false));
        let ids: Vec<u32> = t.iter_mut().map(|(id, _)| id.0).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
    }

    #[test]
    fn freed_slots_are_reused_so_the_arena_tracks_outstanding_requests() {
        let mut reqs = Requests::new();
        for round in 0..1000u64 {
            let a = reqs.alloc(Request::new(Op::Read, round * 4096, 4096, 0, round));
            let b = reqs.alloc(Request::new(Op::Write, 0, 512, 1, round));
            assert_eq!(reqs[a].offset_bytes, round * 4096);
            assert_eq!(reqs[b].op, Op::Write);
            reqs.free(a);
            reqs.free(b);
        }
        assert_eq!(reqs.outstanding(), 0);
        assert_eq!(reqs.high_water(), 2);
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn double_free_is_a_bug() {
        let mut reqs = Requests::new();
        let a = reqs.alloc(Request::new(Op::Read, 0, 4096, 0, 0));
        reqs.free(a);
        reqs.free(a);
    }

    #[test]
    fn live_ids_lists_outstanding_requests_in_slot_order() {
        let mut reqs = Requests::new();
        let ids: Vec<_> = (0..4)
            .map(|i| reqs.alloc(Request::new(Op::Read, i, 1, 0, 0)))
            .collect();
        reqs.free(ids[1]);
        assert_eq!(
            reqs.live_ids().collect::<Vec<_>>(),
            vec![ids[0], ids[2], ids[3]]
        );
    }
}
