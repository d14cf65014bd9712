//! The stage: system calls from the jobs in, block requests out.
//!
//! Every call is a small state machine ([`CallSt`]) that spends host CPU on its core
//! (`ctx.cpu`), sends requests of its own to the block layer and sleeps until they, a commit or
//! the dirty throttle let it go. The kernel's own threads are modelled the same way: the
//! flusher (writeback), the commit thread of a JBD2 journal (`kjournald2`).
//!
//! What Linux does where (6.1): buffered reads `mm/filemap.c` `filemap_read` with
//! `mm/readahead.c`; buffered writes `generic_perform_write` and `balance_dirty_pages`
//! (`mm/page-writeback.c`); writeback `fs/fs-writeback.c` (`wb_writeback`, the periodic
//! `wb_check_old_data_flush` and `wb_check_background_flush`) through `ext4_writepages` with
//! delayed allocation, throttled by `block/blk-wbt.c`; `fsync` `ext4_sync_file`; commits
//! `fs/jbd2/commit.c`; checkpoints `fs/jbd2/checkpoint.c`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use qoslab_engine::{
    Admission, Call, IoStatus, Ns, Op, ReqFlags, ReqId, ReqTable, Request, Stage, StageCtx,
};

use crate::PAGE;
use crate::config::FsConfig;
use crate::image::{Content, FlushRec, InodeRec, MetaImage, Promise, Record, Recording, WriteRec};
use crate::journal::{Journal, Step};
use crate::layout::{Alloc, BLOCKS_PER_GROUP, Geometry, INODES_PER_BLOCK, MetaBlock};
use crate::readahead::RaState;

const UPTODATE: u8 = 1;
const DIRTY: u8 = 2;
const WRITEBACK: u8 = 4;
const READING: u8 = 8;
/// `PG_readahead`: reading this page starts the next readahead window.
const MARKER: u8 = 16;

/// Directory entries per directory block (32-byte entries: ext4's 8-byte header and a short
/// name, as fio's and Filebench's are).
const DIR_ENTRIES_PER_BLOCK: u32 = (PAGE / 32) as u32;
/// Block numbers a journal descriptor block describes (16-byte tags with csum v3 after a
/// 12-byte header; `jbd2_journal_get_descriptor_buffer`).
const TAGS_PER_DESCRIPTOR: u64 = (PAGE - 12) / 16;
/// Pages a flusher writes of one inode before it turns to the next (MIN_WRITEBACK_PAGES, 4 MiB).
const WRITEBACK_CHUNK: u64 = 1024;
/// blk-wbt: a throttled writer within this long lifts the flusher's limit (`wb_recent_wait`,
/// one second).
const WBT_RECENT_WAIT_NS: Ns = 1_000_000_000;
/// blk-wbt: a read issued or completed within this long limits writeback that is neither
/// background nor sync to the background depth (`close_io`, HZ / 10).
const WBT_CLOSE_IO_NS: Ns = 100_000_000;

/// A file that exists when the run starts (laid out before it, as fio and Filebench do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    /// The name the workload uses (`Request::file`, from 1).
    pub name: u32,
    pub size: u64,
    /// Its blocks are allocated (written or preallocated); false: a sparse file of `size`.
    pub allocated: bool,
    /// Its pages are in the page cache, clean (just written: Filebench's preallocation);
    /// false: not cached (fio's `invalidate=1`).
    pub cached: bool,
}

/// What the stage is built for besides its tunables.
#[derive(Clone, Debug, Default)]
pub struct FsSetup {
    /// Bytes of the device below.
    pub capacity_bytes: u64,
    /// Cores of the host (iJournaling keeps a journal for each).
    pub cores: u32,
    /// The first job number free for the kernel's own threads: the flusher has it, a journal's
    /// commit thread the next ones.
    pub kernel_job: u32,
    /// Mount a file system (a job names files); false: only the block device's page cache.
    pub mount: bool,
    /// Files that exist before the run.
    pub files: Vec<FileSpec>,
    /// Directories by name ranges: names `lo..=hi` live in directory `dir`; any other name in
    /// directory 0.
    pub dirs: Vec<(u32, u32, u32)>,
}

/// The stage's own timed events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsEvent {
    /// A call's CPU work, or its wake-up after a sleep, is over.
    Resume(ReqId),
    /// The flusher's periodic wake-up.
    FlusherTimer,
    /// The flusher runs (woken for background writeback, or room in the writeback throttle).
    Flusher,
    /// The periodic commit of journal `j` is due.
    CommitTimer(u16),
    /// The commit thread of journal `j` is awake and starts a commit.
    CommitStart(u16),
    /// The conversion worker converted the unwritten extent of writeback request `id`.
    Converted(ReqId),
}

#[derive(Clone, Copy, Debug, Default)]
struct Page {
    flags: u8,
    /// The request reading it, while `READING`.
    io: ReqId,
    /// Its content's version (the crash checker's: versions grow with every write).
    ver: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    lblk: u64,
    pblk: u64,
    len: u64,
}

#[derive(Clone, Debug, Default)]
struct Inode {
    name: u32,
    dir: u32,
    size: u64,
    /// `i_disksize`: the size the inode on the device says (set as blocks are allocated).
    disk_size: u64,
    /// The version of every page ever written (crash checker only).
    vers: BTreeMap<u64, u64>,
    extents: Vec<Extent>,
    pages: BTreeMap<u64, Page>,
    dirty: u64,
    dirtied_when: Option<Ns>,
    /// Its writeback requests not yet complete (sent or held by the throttle).
    wb_ios: Vec<ReqId>,
    /// The last transaction of the JBD2 journal that changed its metadata, and the last that
    /// changed what `fdatasync` must keep (size, blocks): ext4's `i_sync_tid`,
    /// `i_datasync_tid`.
    sync_tid: u64,
    datasync_tid: u64,
    /// Its metadata changed since it was last committed at file level (iJournaling).
    file_dirty: bool,
    /// Its directory entry is in no committed transaction yet.
    new_entry: bool,
    /// It was renamed or unlinked since the last commit: iJournaling leaves a change of names
    /// and links to the JBD2 commit.
    renamed: bool,
    /// Names it has (0: unlinked; freed once no call holds it, an orphan until then), and
    /// calls working on it (open file descriptors).
    nlink: u32,
    refs: u32,
    /// The file-level commit under way that holds its latest change (iJournaling): another
    /// fsync of it waits for that one.
    committing: Option<u32>,
    /// Data of it was written since a FLUSH last covered it.
    unflushed: bool,
    ra: RaState,
    /// The block device itself: page n is block n, nothing is allocated.
    identity: bool,
    /// Its directory slot.
    slot: u32,
}

impl Inode {
    /// The block of page `p`, if allocated.
    fn map(&self, p: u64) -> Option<u64> {
        if self.identity {
            return Some(p);
        }
        let i = self.extents.partition_point(|e| e.lblk + e.len <= p);
        self.extents
            .get(i)
            .filter(|e| e.lblk <= p)
            .map(|e| e.pblk + (p - e.lblk))
    }

    fn add_extent(&mut self, lblk: u64, pblk: u64, len: u64) {
        let i = self.extents.partition_point(|e| e.lblk < lblk);
        if i > 0 {
            let prev = &mut self.extents[i - 1];
            if prev.lblk + prev.len == lblk && prev.pblk + prev.len == pblk {
                prev.len += len;
                return;
            }
        }
        self.extents.insert(i, Extent { lblk, pblk, len });
    }
}

#[derive(Clone, Debug, Default)]
struct Dir {
    ino: u32,
    group: u64,
    blocks: Vec<u64>,
    /// Each slot's (name, inode), or `None` when free.
    entries: Vec<Option<(u32, u32)>>,
    /// The last transaction that removed an entry (an unlink or a rename).
    removed_tid: u64,
}

/// A JBD2 transaction (or a file-level one, iJournaling).
#[derive(Clone, Debug, Default)]
struct Tx {
    tid: u64,
    /// Metadata blocks it logs.
    meta: BTreeSet<u64>,
    /// Inodes whose blocks it allocated: their data is written before it commits.
    ordered: BTreeSet<u32>,
    /// Blocks it freed: free for allocation once it is durable.
    freed: Vec<(u64, u64)>,
    /// A file-level transaction's inode.
    file: Option<u32>,
}

impl Tx {
    fn is_empty(&self) -> bool {
        self.meta.is_empty() && self.ordered.is_empty() && self.freed.is_empty()
    }
}

/// Who waits for something to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiter {
    Call(ReqId),
    Commit(u32),
    Checkpoint(u16),
}

/// A journal: its area, its transactions, its commit thread.
#[derive(Clone, Debug, Default)]
struct JState {
    start: u64,
    len: u64,
    /// Next log block (1..len; block 0 is the journal superblock).
    head: u64,
    /// Log blocks of transactions not yet checkpointed.
    used: u64,
    running: Tx,
    running_since: Option<Ns>,
    /// The commit thread's commit under way (JBD2).
    committing: Option<u32>,
    /// The thread has been woken and is about to start one.
    waking: bool,
    requested: u64,
    committed: u64,
    next_tid: u64,
    waiters: Vec<(u64, Waiter)>,
    /// The next log sequence number, and the first not yet checkpointed with its log block.
    next_seq: u64,
    tail_seq: u64,
    tail_at: u64,
    /// Committed transactions not yet checkpointed, by log sequence number.
    done: BTreeMap<u64, DoneTx>,
    checkpoint: Option<Checkpoint>,
    /// Commits waiting for log space.
    space_waiters: VecDeque<u32>,
    timer_at: Option<Ns>,
}

/// A committed transaction whose log space a checkpoint has yet to free.
#[derive(Clone, Debug, Default)]
struct DoneTx {
    /// Log blocks, and the log block after its own.
    blocks: u64,
    end_at: u64,
    meta: Vec<u64>,
    /// Its copies (crash checker only).
    images: BTreeMap<u64, MetaImage>,
}

#[derive(Clone, Debug, Default)]
struct Checkpoint {
    phase: u8,
    outstanding: u32,
    /// Log blocks it frees, and the tail it moves to (sequence number, log block).
    freeing: u64,
    seq: u64,
    at: u64,
}

/// A commit under way.
#[derive(Clone, Debug)]
struct CommitRun {
    journal: usize,
    tx: Tx,
    step: usize,
    outstanding: u32,
    /// The Data step's wait for writeback already under way is done.
    data_waited: bool,
    job: u32,
    core: u16,
    host: u16,
    /// The `fsync` that runs it itself (a file-level transaction).
    caller: Option<ReqId>,
    /// Other calls waiting for it to be durable.
    waiters: Vec<Waiter>,
    blocks: u64,
    /// Requests of the current ordered group not yet sent (sent at its end, the last without
    /// GROUP_MORE).
    group: Vec<ReqId>,
    /// Its global transaction id (iJournaling's order across journals): given when its
    /// metadata is taken (JBD2: as the commit starts; a file-level transaction: at its
    /// Metadata step), so that replay applies newer states over older ones.
    gid: u64,
    /// Its place in the log: sequence number, its commit block, the log block after it.
    seq: u64,
    commit_at: u64,
    end_at: u64,
    /// The copies of its metadata blocks as they were when it was taken (crash checker
    /// only: JBD2 freezes them then).
    images: BTreeMap<u64, MetaImage>,
    /// Its blocks' spans by kind (D, JM, JC), passed to the fsyncs it makes durable.
    parts: [Span; 3],
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum IoKind {
    #[default]
    Read,
    Writeback,
    Journal,
    Flush,
    /// A direct read or write carrying a call's data.
    Direct,
    /// A checkpoint's write of a metadata block to its home, or the journal superblock.
    Home,
}

/// The three kinds of block an fsync makes durable, as Rio's Figure 14 splits an append's
/// latency: the file's data (D), the journal's descriptor and metadata copies (JM), the commit
/// record with the FLUSH that makes it durable, or an fsync's own FLUSH (JC).
const PARTS: [&str; 3] = ["d", "jm", "jc"];

/// When the blocks of one kind an fsync waited for left the file system (`sent`, the first),
/// left the host (`dispatched`, the last: the host driver's stamp, or for an ordered request
/// the ordering layer's sending of the command carrying it; HORAE's control path and a
/// queue's wait fall before it) and completed (`done`, the last, a conversion included).
#[derive(Clone, Copy, Debug)]
struct Span {
    sent: Ns,
    dispatched: Ns,
    done: Ns,
}

impl Default for Span {
    fn default() -> Self {
        Span {
            sent: Ns::MAX,
            dispatched: 0,
            done: 0,
        }
    }
}

impl Span {
    fn seen(&self) -> bool {
        self.sent != Ns::MAX
    }

    fn merge(&mut self, o: &Span) {
        if o.seen() {
            self.sent = self.sent.min(o.sent);
            self.dispatched = self.dispatched.max(o.dispatched);
            self.done = self.done.max(o.done);
        }
    }
}

#[derive(Clone, Debug, Default)]
struct IoSt {
    kind: IoKind,
    /// A journal's commit block (JC of the breakdown), not a descriptor or copy (JM).
    commit_record: bool,
    /// When it left the file system for the block layer.
    sent_at: Ns,
    ino: u32,
    first: u64,
    pages: u64,
    waiters: Vec<Waiter>,
    /// Counted by the writeback throttle.
    wbt: bool,
    /// The flusher sent it.
    flusher: bool,
    /// Writeback a task started itself with `WB_SYNC_NONE` (`POSIX_FADV_DONTNEED`): neither
    /// the flusher's REQ_BACKGROUND nor a sync writeback's REQ_SYNC.
    normal: bool,
    /// Held until this FLUSH completes (block reuse).
    after: ReqId,
    /// Its record in the crash checker's recording (writes or flushes), if any.
    rec: Option<u32>,
    /// Writeback into unwritten extents it allocated: converted once it completes
    /// (`Journal::converts_unwritten`).
    convert: bool,
}

/// A system call under way.
#[derive(Clone, Debug, Default)]
struct CallSt {
    phase: u8,
    pending: u32,
    slept: bool,
    /// `ino` is the call's inode (looked up when it started).
    resolved: bool,
    ino: u32,
    tid: u64,
    /// The write returns only once durable: fsync (false) or fdatasync (true) of it after.
    sync: Option<bool>,
    /// Writeback passes an fsync made.
    passes: u8,
    /// A FLUSH is due once the transaction is durable (ext4's `needs_barrier`).
    needs_barrier: bool,
    /// What an fsync covers, as the file was when it was called (crash checker only): its
    /// size and the version of each page below it.
    covers: Option<(u64, Vec<(u64, u64)>)>,
    /// The spans of the blocks it waited for, by kind (D, JM, JC): the latency breakdown.
    parts: [Span; 3],
}

#[derive(Clone, Debug, Default)]
enum Slot {
    #[default]
    Free,
    Call(CallSt),
    Io(IoSt),
    /// A direct request of the block device passed down as it is.
    Pass,
}

#[derive(Clone, Copy, Debug, Default)]
struct Flusher {
    /// A writeback work is under way: (inode, next page, pages left in its chunk).
    cur: Option<(u32, u64, u64)>,
    /// Background writeback (over the background threshold) rather than the periodic one.
    background: bool,
    /// Blocked in the throttle or running: a wake-up is already on its way.
    scheduled: bool,
    blocked: bool,
    /// The periodic pass writes inodes dirtied before this time.
    expire_before: Option<Ns>,
}

#[derive(Clone, Debug, Default)]
struct Wbt {
    inflight: u32,
    queue: VecDeque<ReqId>,
    last_throttle_ns: Option<Ns>,
    /// The last read sent down or completed (blk-wbt's `last_issue` and `last_comp`, which
    /// only reads set).
    last_read_ns: Option<Ns>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    calls: [u64; 6],
    pages_read: u64,
    read_requests: u64,
    readahead_pages: u64,
    cache_hits: u64,
    pages_dirtied: u64,
    pages_written: u64,
    writeback_requests: u64,
    throttled: u64,
    fsyncs: u64,
    commits: u64,
    file_commits: u64,
    journal_blocks: u64,
    flushes: u64,
    checkpoints: u64,
    reuse_flushes: u64,
    evicted: u64,
    conversions: u64,
    fadvise_dontneed: u64,
    invalidated: u64,
    /// The latency breakdown (Rio's Figure 14) of the fsyncs and fdatasyncs that waited for
    /// blocks of all three kinds: how many, and the sums over them of each kind's times
    /// `[sent, dispatched, done]` after the call started, and of the call's own latency.
    breakdown_calls: u64,
    breakdown_ns: [[u64; 3]; 3],
    breakdown_end_ns: u64,
}

/// The page cache and the file system, as one stage.
pub struct FsStage {
    cfg: FsConfig,
    jp: Box<dyn Journal>,
    steps: Vec<Step>,
    setup: FsSetup,
    alloc: Option<Alloc>,
    inodes: BTreeMap<u32, Inode>,
    names: BTreeMap<u32, u32>,
    dirs: BTreeMap<u32, Dir>,
    journals: Vec<JState>,
    commits: Vec<Option<CommitRun>>,
    table: ReqTable<Slot>,
    dirty: u64,
    writeback: u64,
    cached: u64,
    /// Dirty inodes by the time they were first dirtied.
    dirty_index: BTreeSet<(Ns, u32)>,
    /// When the conversion worker (one, as ext4's `ext4-rsv-conversion` workqueue, whose
    /// max_active is 1) is free again.
    conversion_free_at: Ns,
    /// Clean pages in the order they became clean (eviction, oldest first).
    lru: VecDeque<(u32, u64)>,
    throttled: VecDeque<ReqId>,
    wbt: Wbt,
    flusher: Flusher,
    /// Own requests the stage below refused, to offer again.
    busy: VecDeque<ReqId>,
    /// Where each core allocates next (ext4's per-CPU locality groups).
    cursor: Vec<u64>,
    stats: Stats,
    /// What the run writes, for the crash checker (`record`).
    rec: Option<Box<Recording>>,
    ver_clock: u64,
    next_gid: u64,
    /// Ordered groups sent per stream.
    groups_sent: BTreeMap<u32, u64>,
    /// Device blocks of directories: block -> directory.
    dir_blocks: BTreeMap<u64, u32>,
}

impl FsStage {
    /// The stage over a device of `setup.capacity_bytes`, with file system `jp` (its journal
    /// plug-in) when `setup.mount`.
    pub fn new(cfg: FsConfig, jp: Box<dyn Journal>, setup: FsSetup) -> Result<Self, String> {
        let steps = jp.steps().to_vec();
        let mut st = FsStage {
            cfg,
            jp,
            steps,
            alloc: None,
            inodes: BTreeMap::new(),
            names: BTreeMap::new(),
            dirs: BTreeMap::new(),
            journals: Vec::new(),
            commits: Vec::new(),
            table: ReqTable::new(),
            dirty: 0,
            writeback: 0,
            cached: 0,
            dirty_index: BTreeSet::new(),
            conversion_free_at: 0,
            lru: VecDeque::new(),
            throttled: VecDeque::new(),
            wbt: Wbt::default(),
            flusher: Flusher::default(),
            busy: VecDeque::new(),
            cursor: Vec::new(),
            stats: Stats::default(),
            rec: None,
            ver_clock: 0,
            next_gid: 1,
            groups_sent: BTreeMap::new(),
            dir_blocks: BTreeMap::new(),
            setup,
        };
        st.inodes.insert(
            0,
            Inode {
                identity: true,
                size: st.setup.capacity_bytes,
                ..Inode::default()
            },
        );
        st.names.insert(0, 0);
        if st.setup.mount {
            st.mkfs()?;
        }
        Ok(st)
    }

    /// Makes the file system and lays out the files that exist before the run, all durable.
    fn mkfs(&mut self) -> Result<(), String> {
        let bytes = if self.cfg.fs_bytes == 0 {
            self.setup.capacity_bytes
        } else {
            self.cfg.fs_bytes.min(self.setup.capacity_bytes)
        };
        let cores = self.setup.cores.max(1);
        // Journal 0 is JBD2's; iJournaling adds one per core after it.
        let journals = if self.jp.per_core() { 1 + cores } else { 1 };
        let geo = Geometry::new(bytes, journals, 0)?;
        for &(start, len) in &geo.journals {
            self.journals.push(JState {
                start,
                len,
                head: 1,
                next_tid: 1,
                next_seq: 1,
                tail_seq: 1,
                tail_at: 1,
                ..JState::default()
            });
        }
        for j in &mut self.journals {
            j.running.tid = j.next_tid;
            j.next_tid += 1;
        }
        let mut alloc = Alloc::new(geo);
        let groups = alloc.geometry().groups;
        self.cursor = (0..cores)
            .map(|c| alloc.group_data_start((u64::from(c) * 4 + 1) % groups))
            .collect();
        // Directories: one per name range, spread over the groups as Orlov spreads top-level
        // directories.
        let mut dir_ids: Vec<u32> = self.setup.dirs.iter().map(|d| d.2).collect();
        dir_ids.push(0);
        dir_ids.sort_unstable();
        dir_ids.dedup();
        for (k, &d) in dir_ids.iter().enumerate() {
            let group = (k as u64 * 17 + 1) % groups;
            let ino = alloc
                .alloc_inode(group)
                .ok_or("no free inode for a directory")?;
            self.dirs.insert(
                d,
                Dir {
                    ino,
                    group,
                    ..Dir::default()
                },
            );
        }
        self.alloc = Some(alloc);
        let files = std::mem::take(&mut self.setup.files);
        for f in &files {
            let ino = self.make_inode(f.name, true)?;
            let pages = f.size.div_ceil(PAGE);
            let inode = self.inodes.get_mut(&ino).expect("just made");
            inode.size = f.size;
            inode.new_entry = false;
            if f.allocated && pages > 0 {
                self.allocate(ino, 0, pages, 0, true, false);
            }
            if f.cached {
                let inode = self.inodes.get_mut(&ino).expect("just made");
                for p in 0..pages {
                    inode.pages.insert(
                        p,
                        Page {
                            flags: UPTODATE,
                            io: ReqId::NONE,
                            ver: 0,
                        },
                    );
                    self.lru.push_back((ino, p));
                }
                self.cached += pages;
            }
        }
        self.setup.files = files;
        // Laid out before the run: nothing of it is in a transaction.
        for j in &mut self.journals {
            j.running = Tx {
                tid: j.running.tid,
                ..Tx::default()
            };
        }
        for inode in self.inodes.values_mut() {
            inode.sync_tid = 0;
            inode.datasync_tid = 0;
            inode.file_dirty = false;
        }
        Ok(())
    }

    fn dir_of(&self, name: u32) -> u32 {
        self.setup
            .dirs
            .iter()
            .find(|&&(lo, hi, _)| (lo..=hi).contains(&name))
            .map_or(0, |d| d.2)
    }

    /// A new inode named `name` in its directory (`creat`): the inode, its directory entry
    /// and the bitmaps change. `laid_out`: made before the run, outside any transaction.
    fn make_inode(&mut self, name: u32, laid_out: bool) -> Result<u32, String> {
        let d = self.dir_of(name);
        let alloc = self.alloc.as_mut().ok_or("no file system is mounted")?;
        let dir = self
            .dirs
            .get_mut(&d)
            .expect("every directory is made by mkfs");
        let ino = alloc
            .alloc_inode(dir.group)
            .ok_or("the file system has no free inode")?;
        let slot = match dir.entries.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                dir.entries.push(None);
                dir.entries.len() - 1
            }
        };
        dir.entries[slot] = Some((name, ino));
        let mut changed = Vec::new();
        if slot as u32 / DIR_ENTRIES_PER_BLOCK >= dir.blocks.len() as u32 {
            let goal = alloc.group_data_start(dir.group);
            let (b, _, _) = alloc.alloc_run(goal, 1).ok_or("the file system is full")?;
            dir.blocks.push(b);
            self.dir_blocks.insert(b, d);
            let geo = alloc.geometry();
            changed.extend([
                geo.block_bitmap(geo.group_of(b)),
                geo.gdt_block(geo.group_of(b)),
            ]);
        }
        let geo = alloc.geometry();
        let (group, _) = Geometry::inode_place(ino);
        changed.extend([
            geo.inode_block(ino),
            geo.inode_bitmap(group),
            geo.gdt_block(group),
            dir.blocks[slot / DIR_ENTRIES_PER_BLOCK as usize],
            geo.inode_block(dir.ino),
        ]);
        self.inodes.insert(
            ino,
            Inode {
                name,
                dir: d,
                slot: slot as u32,
                nlink: 1,
                new_entry: true,
                file_dirty: true,
                ..Inode::default()
            },
        );
        self.names.insert(name, ino);
        if !laid_out {
            self.dirty_meta(&changed, Some(ino), true);
        }
        Ok(ino)
    }

    /// Metadata blocks `blocks` change in the running transaction; `ino`'s own metadata with
    /// them (`datasync`: a change `fdatasync` must keep).
    fn dirty_meta(&mut self, blocks: &[u64], ino: Option<u32>, datasync: bool) {
        let Some(j) = self.journals.first_mut() else {
            return;
        };
        j.running.meta.extend(blocks.iter().copied());
        let tid = j.running.tid;
        if let Some(i) = ino.and_then(|i| self.inodes.get_mut(&i)) {
            i.sync_tid = tid;
            if datasync {
                i.datasync_tid = tid;
            }
            i.file_dirty = true;
        }
    }

    /// Allocates blocks for pages `first..first + n` of `ino` (delayed allocation at
    /// writeback), from the inode's last block or the core's locality group: the bitmaps,
    /// the descriptors and the inode change in the running transaction, and the inode's data
    /// joins its ordered list, unless the blocks are `unwritten` (converted when their write
    /// completes: `Journal::converts_unwritten`). Returns whether a freed block is reused.
    fn allocate(
        &mut self,
        ino: u32,
        first: u64,
        n: u64,
        core: u16,
        laid_out: bool,
        unwritten: bool,
    ) -> bool {
        let mut reused = false;
        let mut changed = Vec::new();
        let mut p = first;
        while p < first + n {
            let inode = &self.inodes[&ino];
            let goal = match inode.map(p.wrapping_sub(1)).filter(|_| p > 0) {
                Some(b) => b + 1,
                None => inode
                    .extents
                    .last()
                    .map(|e| e.pblk + e.len)
                    .unwrap_or(self.cursor[core as usize % self.cursor.len()]),
            };
            let fresh = self.jp.flush_before_reuse();
            let alloc = self.alloc.as_mut().expect("mounted");
            let Some((b, got, r)) = alloc.alloc_run_avoiding(goal, first + n - p, fresh) else {
                // Full: what could not be allocated stays unmapped (ENOSPC is not modelled).
                break;
            };
            reused |= r;
            let geo = alloc.geometry();
            let g = geo.group_of(b);
            changed.extend([geo.block_bitmap(g), geo.gdt_block(g)]);
            let c = core as usize % self.cursor.len();
            if self.cursor[c] >= b && self.cursor[c] < b + got {
                self.cursor[c] = b + got;
            }
            if self.cursor[c].is_multiple_of(BLOCKS_PER_GROUP) {
                let next = self.cursor[c] / BLOCKS_PER_GROUP;
                self.cursor[c] = self.alloc.as_ref().expect("mounted").group_data_start(next);
            }
            self.inodes
                .get_mut(&ino)
                .expect("allocating for a live inode")
                .add_extent(p, b, got);
            p += got;
        }
        if !laid_out {
            let geo = self.alloc.as_ref().expect("mounted").geometry();
            changed.push(geo.inode_block(ino));
            changed.sort_unstable();
            changed.dedup();
            self.dirty_meta(&changed, Some(ino), true);
            if let Some(j) = self.journals.first_mut().filter(|_| !unwritten) {
                j.running.ordered.insert(ino);
            }
        }
        reused
    }

    // ---- the crash checker's recording ----------------------------------------------------

    /// Records everything the run writes from now on, for the crash checker, with the
    /// device as it is now (mkfs and the files laid out before the run, all durable).
    pub fn record(&mut self) {
        let mut rec = Recording {
            per_core: self.jp.per_core(),
            checksums: self.jp.checksums(),
            ..Recording::default()
        };
        if let Some(alloc) = self.alloc.as_ref() {
            let geo = alloc.geometry();
            rec.geometry = Some(geo.clone());
            rec.reserved = geo.reserved_runs();
        }
        rec.dirs = self.dirs.values().map(|d| d.ino).collect();
        self.rec = Some(Box::new(rec));
        if self.alloc.is_none() {
            return;
        }
        let geo = self.alloc.as_ref().expect("mounted").geometry().clone();
        let mut blocks = BTreeSet::new();
        let mut data = Vec::new();
        for d in self.dirs.values() {
            blocks.insert(geo.inode_block(d.ino));
            blocks.extend(d.blocks.iter().copied());
            blocks.insert(geo.inode_bitmap(Geometry::inode_place(d.ino).0));
        }
        for (&ino, inode) in &self.inodes {
            if inode.identity {
                continue;
            }
            blocks.insert(geo.inode_block(ino));
            blocks.insert(geo.inode_bitmap(Geometry::inode_place(ino).0));
            for e in &inode.extents {
                blocks.insert(geo.block_bitmap(geo.group_of(e.pblk)));
                for k in 0..e.len {
                    data.push((e.pblk + k, ino, e.lblk + k));
                }
            }
        }
        for d in self.dirs.values() {
            for &b in &d.blocks {
                blocks.insert(geo.block_bitmap(geo.group_of(b)));
            }
        }
        let mut initial = Vec::new();
        for b in blocks {
            let image = self.image(b, None);
            let rec = self.rec.as_mut().expect("just set");
            initial.push((b, rec.add(Content::Meta(image))));
        }
        let rec = self.rec.as_mut().expect("just set");
        for (b, ino, page) in data {
            initial.push((b, rec.add(Content::Data { ino, page, ver: 0 })));
        }
        rec.initial = initial;
    }

    /// What the run wrote (after [`record`](Self::record)).
    pub fn recording(&self) -> Option<&Recording> {
        self.rec.as_deref()
    }

    /// Metadata block `b` as it is now: every record it holds, or (`focus`: a file-level
    /// copy) only those of that inode, its directory entry and its directory's inode.
    fn image(&mut self, b: u64, focus: Option<u32>) -> MetaImage {
        let Some(alloc) = self.alloc.as_mut() else {
            return MetaImage::default();
        };
        let geo = alloc.geometry().clone();
        let mut records = Vec::new();
        match geo.classify(b) {
            Some(MetaBlock::BlockBitmap(g)) => records.push(Record::Bits {
                group: g,
                inodes: false,
                runs: alloc.runs(g, false),
            }),
            Some(MetaBlock::InodeBitmap(g)) => records.push(Record::Bits {
                group: g,
                inodes: true,
                runs: alloc.runs(g, true),
            }),
            Some(MetaBlock::InodeTable(first)) => {
                for ino in first..first + INODES_PER_BLOCK {
                    if let Some(i) = self.inodes.get(&ino) {
                        records.push(Record::Inode(InodeRec {
                            ino,
                            size: i.disk_size,
                            extents: i.extents.iter().map(|e| (e.lblk, e.pblk, e.len)).collect(),
                            links: i.nlink,
                        }));
                    } else if let Some(d) = self.dirs.values().find(|d| d.ino == ino) {
                        records.push(Record::Inode(InodeRec {
                            ino,
                            size: d.blocks.len() as u64 * PAGE,
                            extents: d
                                .blocks
                                .iter()
                                .enumerate()
                                .map(|(k, &pb)| (k as u64, pb, 1))
                                .collect(),
                            links: 1,
                        }));
                    }
                }
            }
            Some(MetaBlock::Descriptors) => {}
            None => {
                if let Some(&d) = self.dir_blocks.get(&b) {
                    let dir = &self.dirs[&d];
                    let k = dir.blocks.iter().position(|&x| x == b).expect("its block") as u32;
                    let lo = k * DIR_ENTRIES_PER_BLOCK;
                    for slot in lo..(lo + DIR_ENTRIES_PER_BLOCK).min(dir.entries.len() as u32) {
                        if let Some((name, ino)) = dir.entries[slot as usize] {
                            records.push(Record::Entry {
                                dir: dir.ino,
                                slot,
                                name,
                                ino,
                            });
                        }
                    }
                }
            }
        }
        if let Some(ino) = focus {
            let dir_ino = self.inodes.get(&ino).map(|i| self.dirs[&i.dir].ino);
            records.retain(|r| match r {
                Record::Inode(i) => i.ino == ino || Some(i.ino) == dir_ino,
                Record::Entry { ino: e, .. } => *e == ino,
                Record::Bits { .. } => false,
            });
            // A link count changed by an unlink not yet committed is the JBD2 commit's to log
            // (with the directory entry): the file-level copy keeps the one before it.
            if self.inodes.get(&ino).is_some_and(|i| i.renamed) {
                for r in &mut records {
                    if let Record::Inode(i) = r
                        && i.ino == ino
                    {
                        i.links = 1;
                    }
                }
            }
        }
        MetaImage {
            records,
            partial: focus.is_some(),
        }
    }

    /// Allocates blocks for the pages of `first..end` of `ino` that have none, run by run:
    /// (whether a freed block is reused, whether any was allocated). `unwritten`: as unwritten
    /// extents (`allocate`).
    fn allocate_missing(
        &mut self,
        ino: u32,
        first: u64,
        end: u64,
        core: u16,
        unwritten: bool,
    ) -> (bool, bool) {
        let (mut reused, mut any) = (false, false);
        let mut p = first;
        while p < end {
            if self.inodes[&ino].map(p).is_some() {
                p += 1;
                continue;
            }
            let mut q = p + 1;
            while q < end && self.inodes[&ino].map(q).is_none() {
                q += 1;
            }
            reused |= self.allocate(ino, p, q - p, core, false, unwritten);
            any = true;
            p = q;
        }
        (reused, any)
    }

    // ---- own requests ---------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn new_io(
        &mut self,
        ctx: &mut impl StageCtx<FsEvent>,
        op: Op,
        block: u64,
        blocks: u64,
        flags: ReqFlags,
        (job, core, host): (u32, u16, u16),
        st: IoSt,
    ) -> ReqId {
        let mut r = Request::new(op, block * PAGE, blocks * PAGE, job, ctx.now_ns());
        r.flags = flags;
        r.core = core;
        r.host = host;
        if !self.jp.barrier() {
            r.flags.remove(ReqFlags::PREFLUSH | ReqFlags::FUA);
        }
        let id = ctx.reqs_mut().alloc(r);
        let mut st = st;
        if op == Op::Flush
            && let Some(rec) = self.rec.as_mut()
        {
            rec.flushes.push(FlushRec {
                sent: Ns::MAX,
                done: None,
            });
            st.rec = Some((rec.flushes.len() - 1) as u32);
        }
        *self.table.entry(id) = Slot::Io(st);
        id
    }

    /// Whether the run is recorded for the crash checker.
    fn recording_on(&self) -> bool {
        self.rec.is_some()
    }

    /// Records write `id`'s block contents (one per block), when recording.
    fn note_write(
        &mut self,
        id: ReqId,
        ctx: &impl StageCtx<FsEvent>,
        contents: Option<Vec<Content>>,
    ) {
        let Some(contents) = contents else {
            return;
        };
        let r = ctx.reqs()[id];
        let rec = self.rec.as_mut().expect("recording");
        let first = r.offset_bytes / PAGE;
        debug_assert_eq!(contents.len() as u64, r.len_bytes / PAGE);
        let blocks = contents
            .into_iter()
            .enumerate()
            .map(|(k, c)| (first + k as u64, rec.add(c)))
            .collect();
        rec.writes.push(WriteRec {
            blocks,
            sent: Ns::MAX,
            done: None,
            fua: r.flags.contains(ReqFlags::FUA),
            preflush: r.flags.contains(ReqFlags::PREFLUSH),
            ordered: None,
        });
        let k = (rec.writes.len() - 1) as u32;
        self.io(id).rec = Some(k);
    }

    /// Offers own request `id` to the block layer (or keeps it for its `pull`).
    fn send(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        if !self.busy.is_empty() || ctx.dispatch(id) == Admission::Busy {
            self.busy.push_back(id);
        } else {
            self.sent(id, ctx);
        }
    }

    /// Own request `id` reached the stage below (the crash checker's time it may be durable
    /// from).
    fn sent(&mut self, id: ReqId, ctx: &impl StageCtx<FsEvent>) {
        if ctx.reqs()[id].op == Op::Read {
            self.wbt.last_read_ns = Some(ctx.now_ns());
        }
        let Slot::Io(st) = self.table.entry(id) else {
            return;
        };
        st.sent_at = ctx.now_ns();
        if self.rec.is_none() {
            return;
        }
        let (Some(k), flush) = (st.rec, st.kind == IoKind::Flush) else {
            return;
        };
        let r = ctx.reqs()[id];
        let now = ctx.now_ns();
        let rec = self.rec.as_mut().expect("recording");
        if flush {
            rec.flushes[k as usize].sent = now;
        } else {
            let w = &mut rec.writes[k as usize];
            w.sent = now;
            // The flags as sent (an ordered group's are set when the group goes).
            w.fua = r.flags.contains(ReqFlags::FUA);
            w.preflush = r.flags.contains(ReqFlags::PREFLUSH);
        }
    }

    fn io(&mut self, id: ReqId) -> &mut IoSt {
        match self.table.entry(id) {
            Slot::Io(st) => st,
            other => panic!("request {id:?} is not the file system's own: {other:?}"),
        }
    }

    fn call(&mut self, id: ReqId) -> &mut CallSt {
        match self.table.entry(id) {
            Slot::Call(st) => st,
            other => panic!("request {id:?} is not a call: {other:?}"),
        }
    }

    /// The writeback throttle's limit for a write of the flusher (`background`) or of a
    /// writer waiting on it (blk-wbt `get_limit`). Linux 6.1 gives the whole depth to a write
    /// with any bit of REQ_HIPRIO, which it defines as REQ_SYNC | REQ_META | REQ_PRIO, so to
    /// every WB_SYNC_ALL write (ext4_io_submit adds REQ_SYNC): the writeback of an fsync, an
    /// fdatasync, an O_SYNC write or a commit's ordered data (jbd2 writes it WB_SYNC_ALL), the
    /// writeback here but the flusher's and `POSIX_FADV_DONTNEED`'s. The flusher's
    /// (REQ_BACKGROUND) gets a quarter, all of it when a writer was throttled in the last
    /// second. Writeback that is neither (`normal`: fadvise's WB_SYNC_NONE) gets half, or a
    /// quarter within 100 ms of a read's issue or completion (`close_io`), all of it after a
    /// throttled writer too.
    fn wbt_limit(&self, background: bool, normal: bool, now: Ns) -> u32 {
        let depth = self.cfg.wbt_depth;
        if depth == 0 {
            return u32::MAX;
        }
        let recent = |t: Option<Ns>, within: Ns| t.is_some_and(|t| now < t + within);
        if recent(self.wbt.last_throttle_ns, WBT_RECENT_WAIT_NS) || !(background || normal) {
            depth
        } else if background || recent(self.wbt.last_read_ns, WBT_CLOSE_IO_NS) {
            depth.div_ceil(4)
        } else {
            depth.div_ceil(2)
        }
    }

    /// Sends buffered writeback `id` through the throttle: at once if there is room and no one
    /// waits before it, else it waits its turn. Whether it went.
    fn wbt_send(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) -> bool {
        let now = ctx.now_ns();
        let (background, normal) = (self.io(id).flusher, self.io(id).normal);
        if self.wbt.queue.is_empty() && self.wbt.inflight < self.wbt_limit(background, normal, now)
        {
            self.wbt.inflight += 1;
            self.io(id).wbt = true;
            self.send(id, ctx);
            true
        } else {
            self.wbt.queue.push_back(id);
            false
        }
    }

    /// Room in the throttle: the waiting writes go, first come first served.
    fn wbt_drain(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        let now = ctx.now_ns();
        while let Some(&id) = self.wbt.queue.front() {
            let (background, normal) = (self.io(id).flusher, self.io(id).normal);
            if self.wbt.inflight >= self.wbt_limit(background, normal, now) {
                break;
            }
            self.wbt.queue.pop_front();
            self.wbt.inflight += 1;
            self.io(id).wbt = true;
            if background && self.flusher.blocked {
                self.flusher.blocked = false;
                self.wake_flusher(ctx);
            }
            self.send(id, ctx);
        }
    }

    // ---- the page cache -------------------------------------------------------------------

    fn set_dirty(&mut self, ino: u32, p: u64, now: Ns) {
        let inode = self.inodes.get_mut(&ino).expect("live inode");
        let page = inode.pages.entry(p).or_default();
        if page.flags & UPTODATE == 0 {
            self.cached += 1;
        }
        page.flags |= UPTODATE;
        self.ver_clock += 1;
        page.ver = self.ver_clock;
        if self.rec.is_some() {
            inode.vers.insert(p, self.ver_clock);
        }
        if page.flags & DIRTY == 0 {
            page.flags |= DIRTY;
            inode.dirty += 1;
            self.dirty += 1;
            self.stats.pages_dirtied += 1;
            if inode.dirtied_when.is_none() {
                inode.dirtied_when = Some(now);
                self.dirty_index.insert((now, ino));
            }
        }
    }

    fn clean_inode_index(&mut self, ino: u32) {
        let inode = self.inodes.get_mut(&ino).expect("live inode");
        if inode.dirty == 0
            && let Some(t) = inode.dirtied_when.take()
        {
            self.dirty_index.remove(&(t, ino));
        }
    }

    /// Builds the next writeback request of `ino` from page `from` on: a run of dirty pages
    /// contiguous in the file and on the device (allocated now if delayed), at most
    /// `max_pages` and `max_bio_bytes`; its pages go under writeback. `mapped_only`: only pages
    /// already allocated (a commit's ordered data). Returns the request and the page after it,
    /// or `None` when no dirty page is left from `from` on.
    #[allow(clippy::too_many_arguments)]
    fn build_writeback(
        &mut self,
        ino: u32,
        from: u64,
        max_pages: u64,
        mapped_only: bool,
        who: (u32, u16, u16),
        flusher: bool,
        ctx: &mut impl StageCtx<FsEvent>,
    ) -> Option<(ReqId, u64)> {
        let max_bio = self.cfg.max_bio_bytes / PAGE;
        let inode = &self.inodes[&ino];
        let mut run_start = None;
        let mut n = 0;
        for (&p, page) in inode.pages.range(from..) {
            if page.flags & DIRTY == 0 || page.flags & WRITEBACK != 0 {
                if run_start.is_some() {
                    break;
                }
                continue;
            }
            if mapped_only && inode.map(p).is_none() {
                if run_start.is_some() {
                    break;
                }
                continue;
            }
            match run_start {
                None => {
                    run_start = Some(p);
                    n = 1;
                }
                Some(s) if s + n == p && n < max_pages.min(max_bio) => n += 1,
                Some(_) => break,
            }
        }
        let start = run_start?;
        let unwritten = self.jp.converts_unwritten();
        let (reused, allocated) = self.allocate_missing(ino, start, start + n, who.1, unwritten);
        // Keep only the part contiguous on the device.
        let inode = &self.inodes[&ino];
        let Some(b0) = inode.map(start) else {
            // The device is full: the pages stay dirty.
            return None;
        };
        let mut len = 1;
        while len < n && inode.map(start + len) == Some(b0 + len) {
            len += 1;
        }
        let inode = self.inodes.get_mut(&ino).expect("live inode");
        let mut contents = self.rec.as_ref().map(|_| Vec::with_capacity(len as usize));
        for p in start..start + len {
            let page = inode.pages.get_mut(&p).expect("a dirty page is cached");
            page.flags = (page.flags & !DIRTY) | WRITEBACK;
            if let Some(c) = contents.as_mut() {
                c.push(Content::Data {
                    ino,
                    page: p,
                    ver: page.ver,
                });
            }
        }
        // ext4 sets i_disksize as the pages' blocks are mapped (mpage_map_and_submit_extent).
        let disk_size = inode.size.min((start + len) * PAGE).max(inode.disk_size);
        let grew = disk_size > inode.disk_size && !inode.identity;
        inode.disk_size = disk_size;
        inode.dirty -= len;
        self.dirty -= len;
        self.writeback += len;
        self.stats.pages_written += len;
        self.stats.writeback_requests += 1;
        self.clean_inode_index(ino);
        let id = self.new_io(
            ctx,
            Op::Write,
            b0,
            len,
            ReqFlags::empty(),
            who,
            IoSt {
                kind: IoKind::Writeback,
                ino,
                first: start,
                pages: len,
                flusher,
                convert: unwritten && allocated,
                ..IoSt::default()
            },
        );
        self.note_write(id, ctx, contents);
        self.inodes
            .get_mut(&ino)
            .expect("live inode")
            .wb_ios
            .push(id);
        if grew && !allocated {
            let block = self
                .alloc
                .as_ref()
                .expect("mounted")
                .geometry()
                .inode_block(ino);
            self.dirty_meta(&[block], Some(ino), true);
        }
        if reused && self.jp.flush_before_reuse() {
            // RioFS: a reused block is written only after a synchronous FLUSH.
            self.stats.reuse_flushes += 1;
            let f = self.new_flush(ctx, who, 0);
            self.io(id).after = f;
            self.send(f, ctx);
        }
        Some((id, start + len))
    }

    /// Sends writeback request `id` (through the throttle unless it waits for a FLUSH).
    fn start_writeback(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) -> bool {
        if !self.io(id).after.is_none() {
            return true;
        }
        self.wbt_send(id, ctx)
    }

    /// Evicts clean pages, oldest first, while the cache holds more than memory.
    fn evict(&mut self) {
        let limit = self.cfg.mem_pages();
        while self.cached > limit {
            let Some((ino, p)) = self.lru.pop_front() else {
                break;
            };
            let Some(inode) = self.inodes.get_mut(&ino) else {
                continue;
            };
            if let Some(page) = inode.pages.get(&p)
                && page.flags & (DIRTY | WRITEBACK | READING) == 0
            {
                inode.pages.remove(&p);
                self.cached -= 1;
                self.stats.evicted += 1;
            }
        }
    }

    // ---- waits ----------------------------------------------------------------------------

    fn add_waiter(&mut self, io: ReqId, w: Waiter) {
        self.io(io).waiters.push(w);
        match w {
            Waiter::Call(c) => self.call(c).pending += 1,
            Waiter::Commit(s) => self.commit_mut(s).outstanding += 1,
            Waiter::Checkpoint(j) => {
                self.journals[j as usize]
                    .checkpoint
                    .as_mut()
                    .expect("a checkpoint under way")
                    .outstanding += 1
            }
        }
    }

    fn wake(&mut self, w: Waiter, ctx: &mut impl StageCtx<FsEvent>) {
        match w {
            Waiter::Call(c) => {
                let st = self.call(c);
                st.pending -= 1;
                if st.pending == 0 {
                    st.slept = true;
                    let at = ctx.now_ns() + self.cfg.wakeup_ns;
                    ctx.schedule(at, FsEvent::Resume(c));
                }
            }
            Waiter::Commit(s) => {
                let run = self.commit_mut(s);
                run.outstanding -= 1;
                if run.outstanding == 0 {
                    self.run_commit(s, ctx);
                }
            }
            Waiter::Checkpoint(j) => {
                let cp = self.journals[j as usize]
                    .checkpoint
                    .as_mut()
                    .expect("a checkpoint under way");
                cp.outstanding -= 1;
                if cp.outstanding == 0 {
                    self.run_checkpoint(j as usize, ctx);
                }
            }
        }
    }

    /// Waits `w` on every writeback of `ino` still under way; how many.
    fn wait_writeback(&mut self, ino: u32, w: Waiter) -> u32 {
        let ios = self.inodes[&ino].wb_ios.clone();
        for &io in &ios {
            self.add_waiter(io, w);
        }
        ios.len() as u32
    }

    /// Runs `ns` of CPU for call `id` on its core, then resumes it.
    fn cpu_then_resume(&mut self, id: ReqId, ns: Ns, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let now = ctx.now_ns();
        let end = ctx.cpu(r.host, r.core, now, ns);
        ctx.schedule(end, FsEvent::Resume(id));
    }

    fn finish_call(&mut self, id: ReqId, status: IoStatus, ctx: &mut impl StageCtx<FsEvent>) {
        let now = ctx.now_ns();
        let mut released = None;
        if let Slot::Call(st) = std::mem::take(self.table.entry(id)) {
            if st.resolved {
                released = Some(st.ino);
            }
            let r = ctx.reqs()[id];
            if let Some(rec) = self.rec.as_mut() {
                let what = format!(
                    "{:?} {:?} file {} at {} len {} flags {:?} -> {:?} (inode {})",
                    r.call, r.op, r.file, r.offset_bytes, r.len_bytes, r.flags, status, st.ino
                );
                rec.calls.push((r.t.queued_ns, now, r.job, what));
            }
            let synced = r.call == Call::Io
                && (r.op == Op::Flush || st.sync.is_some())
                && status == IoStatus::Ok;
            if synced && st.parts.iter().all(Span::seen) {
                let start = r.t.queued_ns;
                self.stats.breakdown_calls += 1;
                self.stats.breakdown_end_ns += now - start;
                // A block already on its way when the call started (a commit it joined, the
                // flusher's writeback) counts from the call's start.
                for (sum, p) in self.stats.breakdown_ns.iter_mut().zip(&st.parts) {
                    sum[0] += p.sent.saturating_sub(start);
                    sum[1] += p.dispatched.saturating_sub(start);
                    sum[2] += p.done.saturating_sub(start);
                }
            }
            let keeps_name = st.resolved && self.ino_of(r.file) == Some(st.ino);
            if synced
                && let Some(rec) = self.rec.as_mut()
                && keeps_name
                && st.ino != 0
            {
                let ino = st.ino;
                let (size, pages) = st.covers.clone().unwrap_or_default();
                let full = match st.sync {
                    Some(datasync) => !datasync,
                    None => !r.flags.contains(ReqFlags::DATA_SYNC),
                };
                let promise = Promise {
                    from: r.t.queued_ns,
                    at: now,
                    name: r.file,
                    ino,
                    full,
                    size,
                    pages,
                };
                rec.promises.push(promise);
            }
        }
        if let Some(ino) = released
            && let Some(inode) = self.inodes.get_mut(&ino)
        {
            inode.refs -= 1;
            self.evict_if_unused(ino, now);
        }
        let r = &mut ctx.reqs_mut()[id];
        r.status = status;
        let t = &mut r.t;
        t.dispatched_ns = t.queued_ns;
        t.arrived_ns = t.queued_ns;
        t.fetched_ns = t.queued_ns;
        t.media_start_ns = t.queued_ns;
        t.media_done_ns = t.queued_ns;
        t.cq_posted_ns = t.queued_ns;
        t.interrupt_ns = t.queued_ns;
        t.completed_ns = now;
        ctx.complete(id);
    }

    // ---- calls ----------------------------------------------------------------------------

    /// Moves call `id` on after its CPU work or a wait.
    fn advance(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        self.call(id).slept = false;
        match (r.call, r.op) {
            (Call::Io, Op::Read | Op::Write) if r.flags.contains(ReqFlags::DIRECT) => {
                self.direct(id, ctx)
            }
            (Call::Io, Op::Read) => self.read(id, ctx),
            (Call::Io, Op::Write) => self.write(id, ctx),
            (Call::Io, Op::Flush) => self.fsync(id, ctx),
            (Call::Io, Op::Trim) => self.finish_call(id, IoStatus::MediaError, ctx),
            (Call::Create, _) => self.create(id, ctx),
            (Call::Open | Call::Close, _) => self.finish_call(id, IoStatus::Ok, ctx),
            (Call::Unlink, _) => self.unlink(id, ctx),
            (Call::Rename, _) => self.rename(id, ctx),
        }
    }

    fn ino_of(&self, name: u32) -> Option<u32> {
        self.names.get(&name).copied()
    }

    /// The inode call `id` works on: looked up by name when the call starts (made, for a
    /// write, if the name has none), the same inode after (an open file descriptor's: a
    /// rename or unlink meanwhile does not change it). `Err(true)`: no such name; `Err(false)`:
    /// the inode is gone since (the call ends without effect).
    fn call_ino(&mut self, id: ReqId, name: u32, create: bool) -> Result<u32, bool> {
        let st = self.call(id);
        if st.resolved {
            let ino = st.ino;
            return if self.inodes.contains_key(&ino) {
                Ok(ino)
            } else {
                Err(false)
            };
        }
        let found = if create {
            self.ino_or_create(name)
        } else {
            self.ino_of(name)
        };
        let ino = found.ok_or(true)?;
        let st = self.call(id);
        st.resolved = true;
        st.ino = ino;
        self.inodes.get_mut(&ino).expect("just found").refs += 1;
        Ok(ino)
    }

    /// Ends call `id` whose inode was not found (`missing`: no such name) or is gone.
    fn no_inode(&mut self, id: ReqId, missing: bool, ctx: &mut impl StageCtx<FsEvent>) {
        let status = if missing {
            IoStatus::MediaError
        } else {
            IoStatus::Ok
        };
        self.finish_call(id, status, ctx)
    }

    /// The inode named `name`, made if there is none: a write opens its file with O_CREAT
    /// (fio's files, and a workload's first write of a name).
    fn ino_or_create(&mut self, name: u32) -> Option<u32> {
        match self.ino_of(name) {
            Some(ino) => Some(ino),
            None if self.alloc.is_some() => self.make_inode(name, false).ok(),
            None => None,
        }
    }

    /// A buffered read: phase 0 finds or reads the pages (with readahead) and waits for
    /// them, phase 1 copies, phase 2 returns.
    fn read(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let ino = match self.call_ino(id, r.file, false) {
            Ok(ino) => ino,
            Err(missing) => return self.no_inode(id, missing, ctx),
        };
        match self.call(id).phase {
            0 => {
                self.call(id).phase = 1;
                let size = self.inodes[&ino].size;
                let end = (r.offset_bytes + r.len_bytes).min(size);
                if end > r.offset_bytes {
                    self.read_pages(id, ino, r.offset_bytes / PAGE, (end - 1) / PAGE, ctx);
                }
                if self.call(id).pending == 0 {
                    self.read(id, ctx);
                }
            }
            1 => {
                self.call(id).phase = 2;
                let ns = self.cfg.syscall_ns + self.cfg.copy_ns(r.len_bytes);
                self.cpu_then_resume(id, ns, ctx)
            }
            _ => {
                self.evict();
                self.finish_call(id, IoStatus::Ok, ctx)
            }
        }
    }

    /// Pages `first..=last` of `ino` for read call `id`: the readahead the miss or a marker
    /// starts, what is still missing, and a wait for every page not yet read.
    fn read_pages(
        &mut self,
        id: ReqId,
        ino: u32,
        first: u64,
        last: u64,
        ctx: &mut impl StageCtx<FsEvent>,
    ) {
        let r = ctx.reqs()[id];
        let pages = last - first + 1;
        let size = self.inodes[&ino].size;
        let max = self.cfg.read_ahead_kb / PAGE;
        let eof_page = size.div_ceil(PAGE);
        let who = (r.job, r.core, r.host);
        if !self.inodes[&ino].pages.contains_key(&first) {
            let mut ra = self.inodes[&ino].ra;
            let w = ra.on_demand(first, pages, max, false);
            self.inodes.get_mut(&ino).expect("live").ra = ra;
            if let Some(w) = w {
                self.read_window(ino, w.start, w.pages, w.marker, eof_page, who, ctx);
            }
        }
        for p in first..=last {
            let inode = self.inodes.get_mut(&ino).expect("live");
            let Some(page) = inode.pages.get_mut(&p).filter(|pg| pg.flags & MARKER != 0) else {
                continue;
            };
            page.flags &= !MARKER;
            let mut ra = inode.ra;
            let w = ra.on_demand(p, last - p + 1, max, true);
            inode.ra = ra;
            if let Some(w) = w {
                self.read_window(ino, w.start, w.pages, w.marker, eof_page, who, ctx);
            }
        }
        // Whatever is still missing (readahead off, or a window that stopped short).
        self.read_window(ino, first, pages, None, eof_page, who, ctx);
        let mut hits = 0;
        for p in first..=last {
            let page = self.inodes[&ino].pages[&p];
            if page.flags & UPTODATE == 0 {
                if !self.call_waits_on(id, page.io) {
                    self.add_waiter(page.io, Waiter::Call(id));
                }
            } else {
                hits += 1;
            }
        }
        self.stats.cache_hits += hits;
        let inode = self.inodes.get_mut(&ino).expect("live");
        inode.ra.read_done(first, pages);
    }

    /// Reads the pages of `ino` in `start..start + pages` (below `eof_page`) that are not
    /// cached, one request per run contiguous on the device; a hole reads as zeros without
    /// I/O. `marker`: the page to mark for the next window.
    #[allow(clippy::too_many_arguments)]
    fn read_window(
        &mut self,
        ino: u32,
        start: u64,
        pages: u64,
        marker: Option<u64>,
        eof_page: u64,
        who: (u32, u16, u16),
        ctx: &mut impl StageCtx<FsEvent>,
    ) {
        let end = (start + pages).min(eof_page);
        let max_bio = self.cfg.max_bio_bytes / PAGE;
        let mut p = start;
        let mut any = false;
        while p < end {
            let inode = &self.inodes[&ino];
            if inode.pages.contains_key(&p) {
                p += 1;
                continue;
            }
            let Some(b) = inode.map(p) else {
                // A hole: zeros, no I/O.
                let inode = self.inodes.get_mut(&ino).expect("live");
                inode.pages.insert(
                    p,
                    Page {
                        flags: UPTODATE,
                        io: ReqId::NONE,
                        ver: 0,
                    },
                );
                self.cached += 1;
                self.lru.push_back((ino, p));
                p += 1;
                continue;
            };
            let mut n = 1;
            while p + n < end
                && n < max_bio
                && !inode.pages.contains_key(&(p + n))
                && inode.map(p + n) == Some(b + n)
            {
                n += 1;
            }
            let id = self.new_io(
                ctx,
                Op::Read,
                b,
                n,
                ReqFlags::empty(),
                who,
                IoSt {
                    kind: IoKind::Read,
                    ino,
                    first: p,
                    pages: n,
                    ..IoSt::default()
                },
            );
            let inode = self.inodes.get_mut(&ino).expect("live");
            for q in p..p + n {
                inode.pages.insert(
                    q,
                    Page {
                        flags: READING,
                        io: id,
                        ver: inode.vers.get(&q).copied().unwrap_or(0),
                    },
                );
            }
            self.cached += n;
            self.stats.pages_read += n;
            self.stats.read_requests += 1;
            if marker.is_some() {
                self.stats.readahead_pages += n;
            }
            self.send(id, ctx);
            any = true;
            p += n;
        }
        if let Some(m) = marker
            && any
            && let Some(page) = self.inodes.get_mut(&ino).expect("live").pages.get_mut(&m)
        {
            page.flags |= MARKER;
        }
    }

    fn call_waits_on(&mut self, id: ReqId, io: ReqId) -> bool {
        self.io(io).waiters.contains(&Waiter::Call(id))
    }

    /// A buffered write: phase 0 reads a partial page it does not cover (write_begin),
    /// phase 1 charges the copy, phase 2 dirties the pages and meets the dirty throttle,
    /// phase 3 returns; an O_SYNC or O_DSYNC write goes on as an fsync of the file (10 on).
    fn write(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let ino = match self.call_ino(id, r.file, true) {
            Ok(ino) => ino,
            Err(missing) => return self.no_inode(id, missing, ctx),
        };
        let now = ctx.now_ns();
        match self.call(id).phase {
            0 => {
                self.call(id).phase = 1;
                let size = self.inodes[&ino].size;
                let (a, b) = (r.offset_bytes, r.offset_bytes + r.len_bytes);
                let who = (r.job, r.core, r.host);
                for p in [a / PAGE, (b - 1) / PAGE] {
                    let partial = (p * PAGE < a || (p + 1) * PAGE > b) && p * PAGE < size;
                    if partial && !self.inodes[&ino].pages.contains_key(&p) {
                        self.read_window(ino, p, 1, None, size.div_ceil(PAGE), who, ctx);
                    }
                    let reading = self.inodes[&ino]
                        .pages
                        .get(&p)
                        .filter(|pg| pg.flags & READING != 0)
                        .map(|pg| pg.io);
                    if let Some(io) = reading
                        && !self.call_waits_on(id, io)
                    {
                        self.add_waiter(io, Waiter::Call(id));
                    }
                }
                if self.call(id).pending == 0 {
                    self.write(id, ctx);
                }
            }
            1 => {
                self.call(id).phase = 2;
                let ns = self.cfg.syscall_ns + self.cfg.copy_ns(r.len_bytes);
                self.cpu_then_resume(id, ns, ctx)
            }
            2 => {
                self.call(id).phase = 3;
                let (a, b) = (r.offset_bytes, r.offset_bytes + r.len_bytes);
                for p in a / PAGE..b.div_ceil(PAGE) {
                    self.set_dirty(ino, p, now);
                }
                let inode = self.inodes.get_mut(&ino).expect("live");
                inode.size = inode.size.max(b);
                // mtime and ctime change with every write (file_update_time): the inode is
                // dirtied in the running transaction, a change fdatasync need not wait for
                // (the size reaches the disk when the blocks are allocated, at writeback).
                if !inode.identity {
                    let block = self
                        .alloc
                        .as_ref()
                        .expect("mounted")
                        .geometry()
                        .inode_block(ino);
                    self.dirty_meta(&[block], Some(ino), false);
                }
                self.kick_background(ctx);
                // balance_dirty_pages: above the setpoint the writer waits for writeback.
                if self.dirty + self.writeback >= self.cfg.throttle_setpoint() {
                    self.stats.throttled += 1;
                    self.wbt.last_throttle_ns = Some(now);
                    self.throttled.push_back(id);
                    return;
                }
                self.write(id, ctx)
            }
            3 => {
                if r.flags
                    .intersects(ReqFlags::FILE_SYNC | ReqFlags::DATA_SYNC)
                {
                    let st = self.call(id);
                    st.sync = Some(!r.flags.contains(ReqFlags::FILE_SYNC));
                    st.phase = 10;
                    return self.fsync(id, ctx);
                }
                self.finish_call(id, IoStatus::Ok, ctx)
            }
            _ => self.fsync(id, ctx),
        }
    }

    /// Lets throttled writers go once dirty memory is below the setpoint.
    fn release_throttled(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        let setpoint = self.cfg.throttle_setpoint();
        while self.dirty + self.writeback < setpoint
            && let Some(id) = self.throttled.pop_front()
        {
            let at = ctx.now_ns() + self.cfg.wakeup_ns;
            ctx.schedule(at, FsEvent::Resume(id));
        }
    }

    /// `fsync` and `fdatasync`, and the sync an O_SYNC or O_DSYNC write ends with (the same
    /// phases from 10 on, without the system call's own cost).
    ///
    /// ext4 (`ext4_sync_file`): write back the file's dirty pages and wait for all its
    /// writeback; then the transaction that last changed its metadata must be durable: ask
    /// the commit thread and wait or, when it already is, send a FLUSH (ext4 sends one then
    /// whether or not this call wrote data: nothing else covers data written since). The block
    /// device: its dirty pages, then a FLUSH. iJournaling: the call commits a file-level
    /// transaction itself.
    fn fsync(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let ino = match self.call_ino(id, r.file, false) {
            Ok(ino) => ino,
            Err(missing) => return self.no_inode(id, missing, ctx),
        };
        let base = if self.call(id).phase >= 10 { 10 } else { 0 };
        let datasync = self
            .call(id)
            .sync
            .unwrap_or(r.flags.contains(ReqFlags::DATA_SYNC));
        let who = (r.job, r.core, r.host);
        match self.call(id).phase - base {
            0 => {
                self.stats.fsyncs += 1;
                self.call(id).ino = ino;
                self.call(id).phase = base + 1;
                if self.rec.is_some() {
                    let inode = &self.inodes[&ino];
                    let below = inode.size.div_ceil(PAGE);
                    let pages = inode.vers.range(..below).map(|(&p, &v)| (p, v)).collect();
                    self.call(id).covers = Some((inode.size, pages));
                }
                if base == 0 {
                    return self.cpu_then_resume(id, self.cfg.syscall_ns, ctx);
                }
                self.fsync(id, ctx)
            }
            1 => {
                let inode = &self.inodes[&ino];
                // iJournaling logs a file's own records; a new entry in a directory with an
                // uncommitted unlink or rename (whose name it may take) goes through the JBD2
                // commit, which holds both.
                let dir_changed = !inode.identity
                    && inode.new_entry
                    && self.dirs[&inode.dir].removed_tid > self.journals[0].committed;
                if self.jp.per_core() && !inode.identity && !inode.renamed && !dir_changed {
                    return self.file_commit(id, ino, datasync, base, ctx);
                }
                // Write back every dirty page (sync writeback), then wait for all of it. A page
                // under writeback when it was dirtied again is written on a second pass, once
                // that writeback is over (write_cache_pages waits for it in WB_SYNC_ALL).
                let st = self.call(id);
                st.passes += 1;
                let again = st.passes < 2 && !self.inodes[&ino].wb_ios.is_empty();
                if !again {
                    self.call(id).phase = base + 2;
                }
                let mut from = 0;
                while let Some((io, next)) =
                    self.build_writeback(ino, from, u64::MAX, false, who, false, ctx)
                {
                    self.start_writeback(io, ctx);
                    from = next;
                }
                if self.wait_writeback(ino, Waiter::Call(id)) == 0 {
                    self.fsync(id, ctx);
                }
            }
            2 => {
                self.call(id).phase = base + 3;
                let inode = &self.inodes[&ino];
                let tid = if datasync {
                    inode.datasync_tid
                } else {
                    inode.sync_tid
                };
                if inode.identity || self.journals.is_empty() {
                    self.call(id).phase = base + 4;
                    return self.flush_for(id, ino, who, ctx);
                }
                // ext4_fsync_journal: a FLUSH after the commit unless the commit will send
                // one that covers the data just written (jbd2_trans_will_send_data_barrier).
                self.call(id).needs_barrier = self.jp.barrier() && !self.will_send_barrier(tid);
                if tid > self.journals[0].committed {
                    self.call(id).tid = tid;
                    self.call(id).pending += 1;
                    self.journals[0].waiters.push((tid, Waiter::Call(id)));
                    return self.request_commit(0, tid, ctx);
                }
                self.fsync(id, ctx)
            }
            3 => {
                self.call(id).phase = base + 4;
                if std::mem::take(&mut self.call(id).needs_barrier) {
                    return self.flush_for(id, ino, who, ctx);
                }
                self.fsync(id, ctx)
            }
            _ => self.finish_call(id, IoStatus::Ok, ctx),
        }
    }

    /// `posix_fadvise(POSIX_FADV_DONTNEED)` on the whole of `ino` by task `who` (fio's
    /// `invalidate=1` at each open), as Linux 6.1's generic_fadvise: writeback of its dirty
    /// pages starts (WB_SYNC_NONE: pages already under writeback are left, and nothing is
    /// waited for), then every page neither dirty, under writeback nor being read leaves the
    /// cache (mapping_try_invalidate). The call's own CPU time is not charged.
    fn fadvise_dontneed(
        &mut self,
        ino: u32,
        who: (u32, u16, u16),
        ctx: &mut impl StageCtx<FsEvent>,
    ) {
        self.stats.fadvise_dontneed += 1;
        let mut from = 0;
        while let Some((io, next)) =
            self.build_writeback(ino, from, u64::MAX, false, who, false, ctx)
        {
            self.io(io).normal = true;
            self.start_writeback(io, ctx);
            from = next;
        }
        let inode = self.inodes.get_mut(&ino).expect("live inode");
        let before = inode.pages.len();
        inode
            .pages
            .retain(|_, pg| pg.flags & (DIRTY | WRITEBACK | READING) != 0);
        let dropped = (before - inode.pages.len()) as u64;
        self.cached -= dropped;
        self.stats.invalidated += dropped;
    }

    /// Whether the commit of JBD2 transaction `tid` has yet to send the FLUSH that makes the
    /// data written before it durable: it is not committed, and not past that FLUSH.
    fn will_send_barrier(&self, tid: u64) -> bool {
        let j = &self.journals[0];
        if tid <= j.committed {
            return false;
        }
        let Some(c) = j.committing else {
            return true;
        };
        let run = self.commits[c as usize].as_ref().expect("a live commit");
        if run.tx.tid != tid {
            // Still running (the next to commit).
            return tid > run.tx.tid;
        }
        let flush_at = self
            .steps
            .iter()
            .position(|st| match st {
                Step::Commit(f) => f.contains(ReqFlags::PREFLUSH),
                Step::Flush => true,
                _ => false,
            })
            .unwrap_or(usize::MAX);
        run.step <= flush_at
    }

    /// A FLUSH of the file system's own, for `ino` (0: none), counted.
    fn new_flush(
        &mut self,
        ctx: &mut impl StageCtx<FsEvent>,
        who: (u32, u16, u16),
        ino: u32,
    ) -> ReqId {
        self.stats.flushes += 1;
        self.new_io(
            ctx,
            Op::Flush,
            0,
            0,
            ReqFlags::SYNC,
            who,
            IoSt {
                kind: IoKind::Flush,
                ino,
                ..IoSt::default()
            },
        )
    }

    /// Sends a FLUSH for call `id` (which resumes when it completes).
    fn flush_for(
        &mut self,
        id: ReqId,
        ino: u32,
        who: (u32, u16, u16),
        ctx: &mut impl StageCtx<FsEvent>,
    ) {
        let f = self.new_flush(ctx, who, ino);
        self.add_waiter(f, Waiter::Call(id));
        self.send(f, ctx);
    }

    /// iJournaling's fsync: the file's dirty pages, its inode block (and its directory entry,
    /// if new) as a file-level transaction in the journal of the caller's core, committed by
    /// the caller (phase `base + 1`, then `base + 3` when it is durable). With nothing to
    /// commit: a wait for the writeback under way, and a FLUSH for data written since the
    /// last one.
    fn file_commit(
        &mut self,
        id: ReqId,
        ino: u32,
        datasync: bool,
        base: u8,
        ctx: &mut impl StageCtx<FsEvent>,
    ) {
        let r = ctx.reqs()[id];
        let who = (r.job, r.core, r.host);
        let inode = &self.inodes[&ino];
        let meta_needed =
            inode.new_entry || (inode.file_dirty && (!datasync || inode.datasync_tid > 0));
        if let Some(c) = inode.committing {
            // Another call's file-level commit of this file is under way: its writes are on
            // that call's stream, so this one waits for it, then decides again (the two
            // commits of one file do not overlap).
            self.call(id).pending += 1;
            self.commit_mut(c).waiters.push(Waiter::Call(id));
            return;
        }
        if inode.dirty == 0 && !meta_needed {
            if self.wait_writeback(ino, Waiter::Call(id)) > 0 {
                // Back here once the writeback under way is done.
                return;
            }
            self.call(id).phase = base + 3;
            if self.inodes[&ino].unflushed && self.jp.barrier() {
                return self.flush_for(id, ino, who, ctx);
            }
            return self.fsync(id, ctx);
        }
        let geo = self.alloc.as_ref().expect("mounted").geometry().clone();
        let mut meta = BTreeSet::new();
        meta.insert(geo.inode_block(ino));
        if inode.new_entry {
            let dir = &self.dirs[&inode.dir];
            meta.insert(dir.blocks[(inode.slot / DIR_ENTRIES_PER_BLOCK) as usize]);
            meta.insert(geo.inode_block(dir.ino));
        }
        let inode = self.inodes.get_mut(&ino).expect("live");
        inode.file_dirty = false;
        inode.new_entry = false;
        let j = 1 + r.core as usize % (self.journals.len() - 1);
        let tid = self.journals[j].next_tid;
        self.journals[j].next_tid += 1;
        let tx = Tx {
            tid,
            meta,
            ordered: BTreeSet::from([ino]),
            freed: Vec::new(),
            file: Some(ino),
        };
        self.stats.file_commits += 1;
        let slot = self.start_commit(j, tx, who, Some(id));
        self.inodes.get_mut(&ino).expect("live").committing = Some(slot);
        self.call(id).pending += 1;
        self.call(id).phase = base + 3;
        self.run_commit(slot, ctx);
    }

    /// `creat`: a new inode and directory entry in the running transaction.
    fn create(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        if self.call(id).phase == 0 {
            self.call(id).phase = 1;
            return self.cpu_then_resume(id, self.cfg.syscall_ns * 4, ctx);
        }
        let status = match self.ino_of(r.file) {
            Some(_) => IoStatus::Ok,
            None => match self.make_inode(r.file, false) {
                Ok(_) => IoStatus::Ok,
                Err(_) => IoStatus::MediaError,
            },
        };
        self.finish_call(id, status, ctx);
    }

    /// `unlink`: the entry goes, and with the last link the inode: its cached pages are
    /// dropped (after the writeback under way), its blocks freed when the transaction commits.
    fn unlink(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        if self.call(id).phase == 0 {
            self.call(id).phase = 1;
            return self.cpu_then_resume(id, self.cfg.syscall_ns * 4, ctx);
        }
        // A name is looked up when the call does its work (no file descriptor holds it).
        let Some(ino) = self.ino_of(r.file) else {
            return self.finish_call(id, IoStatus::MediaError, ctx);
        };
        self.unlink_name(ino, ctx.now_ns());
        self.evict_if_unused(ino, ctx.now_ns());
        self.finish_call(id, IoStatus::Ok, ctx)
    }

    /// The name of `ino` goes: its directory entry, the directory's inode and its own link
    /// count change in the running transaction; the inode is an orphan until freed.
    fn unlink_name(&mut self, ino: u32, now: Ns) {
        let inode = self.inodes.get_mut(&ino).expect("live");
        inode.nlink = 0;
        inode.renamed = true;
        let (name, d, slot) = (inode.name, inode.dir, inode.slot);
        if let Some(rec) = self.rec.as_mut() {
            rec.names_gone.push((now, name));
        }
        self.names.remove(&name);
        let geo = self.alloc.as_ref().expect("mounted").geometry().clone();
        let running = self.journals.first().map_or(0, |j| j.running.tid);
        let dir = self.dirs.get_mut(&d).expect("its directory");
        dir.entries[slot as usize] = None;
        dir.removed_tid = running;
        let changed = [
            dir.blocks[(slot / DIR_ENTRIES_PER_BLOCK) as usize],
            geo.inode_block(dir.ino),
            geo.inode_block(ino),
        ];
        self.dirty_meta(&changed, Some(ino), false);
    }

    /// Frees `ino` if it has no name and no call holds it (evict: its pages go, after the
    /// writeback under way; its blocks are free for allocation once the transaction commits).
    fn evict_if_unused(&mut self, ino: u32, _now: Ns) {
        let inode = &self.inodes[&ino];
        if inode.nlink > 0 || inode.refs > 0 || !inode.wb_ios.is_empty() || inode.identity {
            return;
        }
        let inode = self.inodes.remove(&ino).expect("live");
        let dropped = inode.pages.len() as u64;
        self.cached -= dropped;
        self.dirty -= inode.dirty;
        if let Some(t) = inode.dirtied_when {
            self.dirty_index.remove(&(t, ino));
        }
        let alloc = self.alloc.as_mut().expect("mounted");
        let geo = alloc.geometry().clone();
        alloc.free_inode(ino);
        let (g, _) = Geometry::inode_place(ino);
        let mut changed = vec![geo.inode_block(ino), geo.inode_bitmap(g), geo.gdt_block(g)];
        let mut freed = Vec::new();
        for e in &inode.extents {
            // Extents never cross a group: the allocator hands out runs within one.
            alloc.free_run_deferred(e.pblk, e.len);
            changed.extend([
                geo.block_bitmap(geo.group_of(e.pblk)),
                geo.gdt_block(geo.group_of(e.pblk)),
            ]);
            freed.push((e.pblk, e.len));
        }
        changed.sort_unstable();
        changed.dedup();
        self.dirty_meta(&changed, None, false);
        if let Some(j) = self.journals.first_mut() {
            j.running.freed.extend(freed);
            j.running.ordered.remove(&ino);
        }
    }

    /// `rename`: the file takes the name of file `offset_bytes`, which is unlinked if it
    /// exists; both directory entries and the inode change in the running transaction.
    fn rename(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let to = r.offset_bytes as u32;
        if self.call(id).phase == 0 {
            self.call(id).phase = 1;
            return self.cpu_then_resume(id, self.cfg.syscall_ns * 6, ctx);
        }
        let Some(ino) = self.ino_of(r.file) else {
            return self.finish_call(id, IoStatus::MediaError, ctx);
        };
        if let Some(old) = self.ino_of(to)
            && old != ino
        {
            self.unlink_name(old, ctx.now_ns());
            self.evict_if_unused(old, ctx.now_ns());
        }
        let geo = self.alloc.as_ref().expect("mounted").geometry().clone();
        let inode = self.inodes.get_mut(&ino).expect("live");
        self.names.remove(&inode.name);
        if let Some(rec) = self.rec.as_mut() {
            rec.names_gone.push((ctx.now_ns(), inode.name));
            rec.names_gone.push((ctx.now_ns(), to));
        }
        let dir = self.dirs.get_mut(&inode.dir).expect("its directory");
        dir.entries[inode.slot as usize] = Some((to, ino));
        dir.removed_tid = self.journals.first().map_or(0, |j| j.running.tid);
        inode.name = to;
        self.names.insert(to, ino);
        let dir = &self.dirs[&inode.dir];
        let changed = [
            dir.blocks[(inode.slot / DIR_ENTRIES_PER_BLOCK) as usize],
            geo.inode_block(dir.ino),
            geo.inode_block(ino),
        ];
        self.dirty_meta(&changed, Some(ino), false);
        self.inodes.get_mut(&ino).expect("live").renamed = true;
        self.finish_call(id, IoStatus::Ok, ctx);
    }

    /// A direct read or write of a file: its blocks (allocated for a write that needs
    /// them), one request per run contiguous on the device, a hole read as zeros; an O_SYNC
    /// or O_DSYNC write goes on as an fsync of the file (phases 10 on).
    fn direct(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let ino = match self.call_ino(id, r.file, r.op == Op::Write) {
            Ok(ino) => ino,
            Err(missing) => return self.no_inode(id, missing, ctx),
        };
        match self.call(id).phase {
            0 => {
                self.call(id).phase = 1;
                self.cpu_then_resume(id, self.cfg.syscall_ns, ctx)
            }
            1 => {
                self.call(id).phase = 2;
                self.direct_io(id, ino, ctx);
                if self.call(id).pending == 0 {
                    self.direct(id, ctx);
                }
            }
            2 => {
                if r.op == Op::Write
                    && r.flags
                        .intersects(ReqFlags::FILE_SYNC | ReqFlags::DATA_SYNC)
                {
                    let st = self.call(id);
                    st.sync = Some(!r.flags.contains(ReqFlags::FILE_SYNC));
                    st.phase = 10;
                    return self.fsync(id, ctx);
                }
                self.finish_call(id, IoStatus::Ok, ctx)
            }
            _ => self.fsync(id, ctx),
        }
    }

    fn direct_io(&mut self, id: ReqId, ino: u32, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        let (first, end) = (
            r.offset_bytes / PAGE,
            (r.offset_bytes + r.len_bytes).div_ceil(PAGE),
        );
        if r.op == Op::Write {
            self.allocate_missing(ino, first, end, r.core, false);
            let inode = self.inodes.get_mut(&ino).expect("live");
            let end_bytes = r.offset_bytes + r.len_bytes;
            if end_bytes > inode.disk_size && !inode.identity {
                inode.size = inode.size.max(end_bytes);
                inode.disk_size = end_bytes;
                let block = self
                    .alloc
                    .as_ref()
                    .expect("mounted")
                    .geometry()
                    .inode_block(ino);
                self.dirty_meta(&[block], Some(ino), true);
            }
            let inode = self.inodes.get_mut(&ino).expect("live");
            inode.unflushed = true;
            if self.rec.is_some() {
                for p in first..end {
                    self.ver_clock += 1;
                    inode.vers.insert(p, self.ver_clock);
                }
            }
            // The cached copy is stale: clean pages are dropped (the kernel writes dirty ones
            // back first, which this model leaves out).
            for p in first..end {
                if inode
                    .pages
                    .get(&p)
                    .is_some_and(|pg| pg.flags & (DIRTY | WRITEBACK | READING) == 0)
                {
                    inode.pages.remove(&p);
                    self.cached -= 1;
                }
            }
        }
        let mut p = first;
        while p < end {
            let inode = &self.inodes[&ino];
            let Some(b) = inode.map(p) else {
                p += 1;
                continue;
            };
            let mut n = 1;
            while p + n < end && inode.map(p + n) == Some(b + n) {
                n += 1;
            }
            let flags = r.flags & (ReqFlags::FUA | ReqFlags::SYNC | ReqFlags::PREFLUSH);
            let contents = (self.rec.is_some() && r.op == Op::Write).then(|| {
                (p..p + n)
                    .map(|q| Content::Data {
                        ino,
                        page: q,
                        ver: inode.vers.get(&q).copied().unwrap_or(0),
                    })
                    .collect()
            });
            let io = self.new_io(
                ctx,
                r.op,
                b,
                n,
                flags,
                (r.job, r.core, r.host),
                IoSt {
                    kind: IoKind::Direct,
                    ino,
                    first: p,
                    pages: n,
                    ..IoSt::default()
                },
            );
            self.note_write(io, ctx, contents);
            self.add_waiter(io, Waiter::Call(id));
            self.send(io, ctx);
            p += n;
        }
    }

    // ---- commits --------------------------------------------------------------------------

    fn commit_mut(&mut self, s: u32) -> &mut CommitRun {
        self.commits[s as usize].as_mut().expect("a live commit")
    }

    fn start_commit(
        &mut self,
        j: usize,
        tx: Tx,
        who: (u32, u16, u16),
        caller: Option<ReqId>,
    ) -> u32 {
        let run = CommitRun {
            gid: 0,
            seq: 0,
            commit_at: 0,
            end_at: 0,
            images: BTreeMap::new(),
            journal: j,
            tx,
            step: 0,
            outstanding: 0,
            data_waited: false,
            job: who.0,
            core: who.1,
            host: who.2,
            caller,
            waiters: Vec::new(),
            blocks: 0,
            group: Vec::new(),
            parts: [Span::default(); 3],
        };
        match self.commits.iter().position(Option::is_none) {
            Some(s) => {
                self.commits[s] = Some(run);
                s as u32
            }
            None => {
                self.commits.push(Some(run));
                (self.commits.len() - 1) as u32
            }
        }
    }

    /// Asks the commit thread of journal `j` to commit transaction `tid` (and what runs
    /// before it).
    fn request_commit(&mut self, j: usize, tid: u64, ctx: &mut impl StageCtx<FsEvent>) {
        let js = &mut self.journals[j];
        js.requested = js.requested.max(tid);
        if js.committing.is_none() && !js.waking {
            js.waking = true;
            let at = ctx.now_ns() + self.cfg.wakeup_ns;
            ctx.schedule(at, FsEvent::CommitStart(j as u16));
        }
    }

    /// The commit thread of journal `j` takes the running transaction, if asked to.
    fn commit_thread(&mut self, j: usize, ctx: &mut impl StageCtx<FsEvent>) {
        let js = &mut self.journals[j];
        js.waking = false;
        if js.committing.is_some() || js.requested < js.running.tid {
            return;
        }
        let next = Tx {
            tid: js.next_tid,
            ..Tx::default()
        };
        js.next_tid += 1;
        let tx = std::mem::replace(&mut js.running, next);
        js.running_since = None;
        self.stats.commits += 1;
        let who = (self.setup.kernel_job + 1 + j as u32, 0, 0);
        // JBD2 freezes the transaction's buffers as it takes it: later changes go to the
        // next one.
        let images = if self.recording_on() {
            let homes: Vec<u64> = tx.meta.iter().copied().collect();
            homes
                .into_iter()
                .map(|b| (b, self.image(b, None)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let slot = self.start_commit(j, tx, who, None);
        self.commit_mut(slot).images = images;
        self.commit_mut(slot).gid = self.next_gid;
        self.next_gid += 1;
        self.journals[j].committing = Some(slot);
        self.run_commit(slot, ctx);
    }

    /// Runs the steps of commit `s` until one waits.
    fn run_commit(&mut self, s: u32, ctx: &mut impl StageCtx<FsEvent>) {
        loop {
            let at = self.commit_mut(s).step;
            let Some(&step) = self.steps.get(at) else {
                return self.end_commit(s, ctx);
            };
            match step {
                Step::Data => {
                    if !self.commit_data(s, ctx) {
                        return;
                    }
                }
                Step::Metadata => {
                    if !self.commit_metadata(s, ctx) {
                        return;
                    }
                }
                Step::Commit(flags) => {
                    let run = self.commit_mut(s);
                    let j = run.journal;
                    let who = (run.job, run.core, run.host);
                    let (block, seq) = (run.commit_at, run.seq);
                    let id = self.new_io(
                        ctx,
                        Op::Write,
                        block,
                        1,
                        flags | ReqFlags::SYNC,
                        who,
                        IoSt {
                            kind: IoKind::Journal,
                            ..IoSt::default()
                        },
                    );
                    let contents = self.recording_on().then(|| {
                        vec![Content::Commit {
                            journal: j as u16,
                            seq,
                        }]
                    });
                    self.note_write(id, ctx, contents);
                    self.io(id).commit_record = true;
                    self.stats.journal_blocks += 1;
                    self.issue_for_commit(s, id, true, ctx);
                }
                Step::Flush => {
                    let run = self.commit_mut(s);
                    let who = (run.job, run.core, run.host);
                    let id = self.new_flush(ctx, who, 0);
                    self.issue_for_commit(s, id, true, ctx);
                }
                Step::Wait => {
                    self.flush_group(s, ctx);
                    if self.commit_mut(s).outstanding > 0 {
                        self.commit_mut(s).step += 1;
                        return;
                    }
                }
            }
            self.commit_mut(s).step += 1;
        }
    }

    /// A request of commit `s`: waited for, and sent at once (ext4) or at the end of its
    /// ordered group (`last`: the group's final request).
    fn issue_for_commit(
        &mut self,
        s: u32,
        id: ReqId,
        last: bool,
        ctx: &mut impl StageCtx<FsEvent>,
    ) {
        self.add_waiter(id, Waiter::Commit(s));
        if self.jp.ordered() {
            ctx.reqs_mut()[id].flags |= ReqFlags::ORDERED;
            self.commit_mut(s).group.push(id);
            if last {
                self.flush_group(s, ctx);
            }
        } else {
            self.send(id, ctx);
        }
    }

    /// Sends commit `s`'s ordered group: one submission (BATCH_MORE on all but the last), the
    /// group continuing (GROUP_MORE) on all but its last request.
    fn flush_group(&mut self, s: u32, ctx: &mut impl StageCtx<FsEvent>) {
        let group = std::mem::take(&mut self.commit_mut(s).group);
        let n = group.len();
        for (k, &id) in group.iter().enumerate() {
            if k + 1 < n {
                ctx.reqs_mut()[id].flags |= ReqFlags::GROUP_MORE;
            }
        }
        // The whole transaction goes in one submission call when the commit has no waits
        // left (the plug), so the ordering plug-in may merge its groups.
        let at = self.commit_mut(s).step;
        let batch_more = self.steps[(at + 1).min(self.steps.len())..]
            .iter()
            .any(|st| !matches!(st, Step::Wait));
        let job = self.commit_mut(s).job;
        let g = self.groups_sent.entry(job).or_default();
        *g += 1;
        let g = *g;
        for (k, &id) in group.iter().enumerate() {
            if batch_more || k + 1 < n {
                ctx.reqs_mut()[id].flags |= ReqFlags::BATCH_MORE;
            }
            if let (Some(rec), Slot::Io(IoSt { rec: Some(w), .. })) =
                (self.rec.as_mut(), self.table.entry(id))
            {
                rec.writes[*w as usize].ordered = Some((job, g));
            }
            self.send(id, ctx);
        }
    }

    /// The Data step: the ordered data (pages already allocated, and a file-level
    /// transaction's whole file), after the writeback already under way. Whether the commit
    /// goes on now.
    fn commit_data(&mut self, s: u32, ctx: &mut impl StageCtx<FsEvent>) -> bool {
        let run = self.commit_mut(s);
        let inodes: Vec<u32> = run.tx.ordered.iter().copied().collect();
        let file_level = run.tx.file.is_some();
        let who = (run.job, run.core, run.host);
        if !run.data_waited {
            run.data_waited = true;
            let mut n = 0;
            for &ino in &inodes {
                if self.inodes.contains_key(&ino) {
                    n += self.wait_writeback(ino, Waiter::Commit(s));
                }
            }
            if n > 0 {
                return false;
            }
        }
        let mut ids = Vec::new();
        for &ino in &inodes {
            if !self.inodes.contains_key(&ino) {
                continue;
            }
            let mut from = 0;
            while let Some((io, next)) =
                self.build_writeback(ino, from, u64::MAX, !file_level, who, false, ctx)
            {
                ids.push(io);
                from = next;
            }
            if file_level {
                // Data written with the transaction is durable with it (its FLUSH).
                self.inodes.get_mut(&ino).expect("live").unflushed = false;
            }
        }
        if file_level {
            // Allocation at this writeback changed the inode and bitmaps: the inode block is
            // already in the transaction; the bitmaps go with the running one (iJournaling
            // rebuilds them at recovery from the inodes).
            let geo = self
                .alloc
                .as_ref()
                .expect("mounted")
                .geometry()
                .inode_block(inodes[0]);
            self.commit_mut(s).tx.meta.insert(geo);
        }
        if !self.jp.ordered() {
            for io in ids {
                self.add_waiter(io, Waiter::Commit(s));
                self.start_writeback(io, ctx);
            }
            return true;
        }
        // Ordered data is the journal's own group (it bypasses the writeback throttle). A
        // reused block waits for its FLUSH: the whole group waits with it.
        let mut flushes = Vec::new();
        for io in ids {
            let after = std::mem::replace(&mut self.io(io).after, ReqId::NONE);
            if !after.is_none() && !flushes.contains(&after) {
                flushes.push(after);
            }
            self.issue_for_commit(s, io, false, ctx);
        }
        for &f in &flushes {
            self.add_waiter(f, Waiter::Commit(s));
        }
        if !flushes.is_empty() {
            // Back to this step once the FLUSHes completed: nothing new is written then,
            // and the group goes.
            return false;
        }
        self.flush_group(s, ctx);
        true
    }

    /// The Metadata step: descriptor blocks and metadata copies at the journal's head (after
    /// a checkpoint if the log is short of space). Whether the commit goes on now.
    fn commit_metadata(&mut self, s: u32, ctx: &mut impl StageCtx<FsEvent>) -> bool {
        let run = self.commit_mut(s);
        let j = run.journal;
        let metas = run.tx.meta.len() as u64;
        let who = (run.job, run.core, run.host);
        let need = metas.div_ceil(TAGS_PER_DESCRIPTOR).max(1) + metas + 1;
        let js = &self.journals[j];
        let capacity = js.len - 1;
        if js.used + need > capacity * 3 / 4 && !js.done.is_empty() {
            self.start_checkpoint(j, ctx);
        }
        let js = &self.journals[j];
        if js.used + need > capacity {
            // Wait for the checkpoint to free space.
            self.journals[j].space_waiters.push_back(s);
            self.commit_mut(s).outstanding += 1;
            return false;
        }
        // The transaction's place in the log: its sequence number, its descriptors and copies,
        // then its commit block, contiguous around the log's wrap.
        let blocks = need - 1;
        let js = &mut self.journals[j];
        let seq = js.next_seq;
        js.next_seq += 1;
        let mut left = blocks;
        let mut ids = Vec::new();
        while left > 0 {
            let js = &self.journals[j];
            let run_len = left.min(js.len - js.head);
            let block = self.log_blocks(j, run_len);
            ids.push((block, run_len));
            left -= run_len;
        }
        let commit_at = self.log_blocks(j, 1);
        let end_at = self.journals[j].head;
        run_blocks(&mut self.commits, s, need);
        if self.commit_mut(s).gid == 0 {
            self.commit_mut(s).gid = self.next_gid;
            self.next_gid += 1;
        }
        let gid = self.commit_mut(s).gid;
        let run = self.commit_mut(s);
        run.seq = seq;
        run.end_at = end_at;
        run.commit_at = commit_at;
        let mut contents: Option<VecDeque<Content>> = None;
        if self.recording_on() {
            let run = self.commit_mut(s);
            let homes: Vec<u64> = run.tx.meta.iter().copied().collect();
            let file = run.tx.file;
            if let Some(ino) = file {
                // A file-level transaction logs the file's own records as they are now.
                let images: BTreeMap<u64, MetaImage> = homes
                    .iter()
                    .map(|&b| (b, self.image(b, Some(ino))))
                    .collect();
                self.commit_mut(s).images = images;
            }
            let run = self.commit_mut(s);
            let mut out = VecDeque::new();
            for chunk in homes.chunks(TAGS_PER_DESCRIPTOR as usize) {
                out.push_back(Content::Desc {
                    journal: j as u16,
                    seq,
                    gid,
                    homes: chunk.to_vec(),
                });
                for b in chunk {
                    out.push_back(Content::Copy {
                        journal: j as u16,
                        seq,
                        image: run.images.get(b).cloned().unwrap_or_default(),
                    });
                }
            }
            if homes.is_empty() {
                out.push_back(Content::Desc {
                    journal: j as u16,
                    seq,
                    gid,
                    homes: Vec::new(),
                });
            }
            contents = Some(out);
        }
        let n = ids.len();
        for (k, (block, len)) in ids.into_iter().enumerate() {
            let these = contents
                .as_mut()
                .map(|c| c.drain(..len as usize).collect::<Vec<_>>());
            let id = self.new_io(
                ctx,
                Op::Write,
                block,
                len,
                ReqFlags::SYNC,
                who,
                IoSt {
                    kind: IoKind::Journal,
                    ..IoSt::default()
                },
            );
            self.note_write(id, ctx, these);
            self.stats.journal_blocks += len;
            self.issue_for_commit(s, id, k + 1 == n, ctx);
        }
        true
    }

    /// Takes `n` blocks at journal `j`'s head (contiguous: the caller splits at the wrap);
    /// returns the first device block.
    fn log_blocks(&mut self, j: usize, n: u64) -> u64 {
        let js = &mut self.journals[j];
        if js.head + n > js.len {
            js.head = 1;
        }
        let block = js.start + js.head;
        js.head += n;
        if js.head >= js.len {
            js.head = 1;
        }
        js.used += n;
        block
    }

    /// Call `c` waited for a commit whose blocks had these spans.
    fn merge_parts(&mut self, c: ReqId, parts: &[Span; 3]) {
        let st = self.call(c);
        for (mine, theirs) in st.parts.iter_mut().zip(parts) {
            mine.merge(theirs);
        }
    }

    /// Commit `s` is durable: its waiters go, its freed blocks return to the allocator, its
    /// log space waits for a checkpoint.
    fn end_commit(&mut self, s: u32, ctx: &mut impl StageCtx<FsEvent>) {
        let run = self.commits[s as usize].take().expect("a live commit");
        let j = run.journal;
        let tid = run.tx.tid;
        let alloc = self.alloc.as_mut().expect("mounted");
        for &(b, n) in &run.tx.freed {
            alloc.release_run(b, n);
        }
        for &ino in &run.tx.ordered {
            if let Some(i) = self.inodes.get_mut(&ino) {
                i.unflushed = false;
            }
        }
        let js = &mut self.journals[j];
        js.done.insert(
            run.seq,
            DoneTx {
                blocks: run.blocks,
                end_at: run.end_at,
                meta: run.tx.meta.iter().copied().collect(),
                images: run.images,
            },
        );
        if let Some(ino) = run.tx.file
            && let Some(i) = self.inodes.get_mut(&ino)
            && i.committing == Some(s)
        {
            i.committing = None;
        }
        // Every call it makes durable waited for its D, JM and JC.
        for w in run
            .waiters
            .iter()
            .copied()
            .chain(run.caller.map(Waiter::Call))
        {
            if let Waiter::Call(c) = w {
                self.merge_parts(c, &run.parts);
            }
        }
        for w in run.waiters {
            self.wake(w, ctx);
        }
        if let Some(c) = run.caller {
            self.wake(Waiter::Call(c), ctx);
            return;
        }
        let js = &mut self.journals[j];
        js.committed = js.committed.max(tid);
        js.committing = None;
        // What this commit made durable no longer needs a file-level commit of its own.
        for i in self.inodes.values_mut() {
            if i.sync_tid <= tid {
                i.renamed = false;
                i.new_entry = false;
            }
        }
        let js = &mut self.journals[j];
        let committed = js.committed;
        let mut woken = Vec::new();
        js.waiters.retain(|&(t, w)| {
            if t <= committed {
                woken.push(w);
                false
            } else {
                true
            }
        });
        for w in woken {
            if let Waiter::Call(c) = w {
                self.merge_parts(c, &run.parts);
            }
            self.wake(w, ctx);
        }
        let js = &self.journals[j];
        if js.requested >= js.running.tid {
            self.request_commit(j, js.requested, ctx);
        }
    }

    /// The periodic commit: the running transaction commits `commit=` after it started.
    fn arm_commit_timer(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        let interval = self.jp.commit_interval_ns();
        if interval == 0 || self.journals.is_empty() {
            return;
        }
        let now = ctx.now_ns();
        let js = &mut self.journals[0];
        if js.running.is_empty() || js.timer_at.is_some() {
            return;
        }
        let since = *js.running_since.get_or_insert(now);
        // jbd2 arms a transaction's commit timer once (t_expires, when it starts): once it has
        // fired, the commit stays requested until the commit thread takes the transaction
        // (after the commit running then), and nothing arms it again.
        if since + interval <= now {
            return;
        }
        js.timer_at = Some(since + interval);
        ctx.schedule(since + interval, FsEvent::CommitTimer(0));
    }

    // ---- checkpoints ----------------------------------------------------------------------

    /// Journal `j` is short of space: the metadata of its oldest committed transactions is
    /// written to its home, a FLUSH makes it durable, the journal superblock moves the tail
    /// (FUA), and their log space is free (jbd2 `jbd2_log_do_checkpoint`,
    /// `jbd2_cleanup_journal_tail`).
    fn start_checkpoint(&mut self, j: usize, ctx: &mut impl StageCtx<FsEvent>) {
        if self.journals[j].checkpoint.is_some() {
            return;
        }
        // The log's tail moves over committed transactions in log order only.
        let mut homes: BTreeMap<u64, MetaImage> = BTreeMap::new();
        let mut freeing = 0;
        let js = &mut self.journals[j];
        let mut seq = js.tail_seq;
        let mut at = js.tail_at;
        while let Some(t) = js.done.remove(&seq) {
            freeing += t.blocks;
            at = t.end_at;
            for b in t.meta {
                let image = t.images.get(&b).cloned().unwrap_or_default();
                homes.insert(b, image);
            }
            seq += 1;
        }
        if freeing == 0 {
            return;
        }
        js.checkpoint = Some(Checkpoint {
            phase: 0,
            outstanding: 0,
            freeing,
            seq,
            at,
        });
        self.stats.checkpoints += 1;
        let who = (self.setup.kernel_job + 1 + j as u32, 0, 0);
        let blocks: Vec<(u64, MetaImage)> = homes.into_iter().collect();
        let mut k = 0;
        while k < blocks.len() {
            let mut n = 1;
            while k + n < blocks.len() && blocks[k + n].0 == blocks[k].0 + n as u64 {
                n += 1;
            }
            let contents = self.recording_on().then(|| {
                blocks[k..k + n]
                    .iter()
                    .map(|(_, image)| Content::Meta(image.clone()))
                    .collect()
            });
            let id = self.new_io(
                ctx,
                Op::Write,
                blocks[k].0,
                n as u64,
                ReqFlags::SYNC,
                who,
                IoSt {
                    kind: IoKind::Home,
                    ..IoSt::default()
                },
            );
            self.note_write(id, ctx, contents);
            self.add_waiter(id, Waiter::Checkpoint(j as u16));
            self.send(id, ctx);
            k += n;
        }
    }

    fn run_checkpoint(&mut self, j: usize, ctx: &mut impl StageCtx<FsEvent>) {
        let who = (self.setup.kernel_job + 1 + j as u32, 0, 0);
        let phase = self.journals[j]
            .checkpoint
            .as_ref()
            .expect("under way")
            .phase;
        match phase {
            0 => {
                self.journals[j]
                    .checkpoint
                    .as_mut()
                    .expect("under way")
                    .phase = 1;
                let id = self.new_flush(ctx, who, 0);
                self.add_waiter(id, Waiter::Checkpoint(j as u16));
                self.send(id, ctx);
            }
            1 => {
                self.journals[j]
                    .checkpoint
                    .as_mut()
                    .expect("under way")
                    .phase = 2;
                let js = &self.journals[j];
                let start = js.start;
                let cp = js.checkpoint.as_ref().expect("under way");
                let content = Content::Super {
                    journal: j as u16,
                    seq: cp.seq,
                    at: cp.at,
                };
                let id = self.new_io(
                    ctx,
                    Op::Write,
                    start,
                    1,
                    ReqFlags::SYNC | ReqFlags::FUA,
                    who,
                    IoSt {
                        kind: IoKind::Home,
                        ..IoSt::default()
                    },
                );
                let contents = self.recording_on().then(|| vec![content]);
                self.note_write(id, ctx, contents);
                self.add_waiter(id, Waiter::Checkpoint(j as u16));
                self.send(id, ctx);
            }
            _ => {
                let cp = self.journals[j].checkpoint.take().expect("under way");
                let js = &mut self.journals[j];
                js.used -= cp.freeing;
                js.tail_seq = cp.seq;
                js.tail_at = cp.at;
                let waiting: Vec<u32> = js.space_waiters.drain(..).collect();
                for s in waiting {
                    self.wake(Waiter::Commit(s), ctx);
                }
            }
        }
    }

    // ---- the flusher ----------------------------------------------------------------------

    fn wake_flusher(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        if !self.flusher.scheduled {
            self.flusher.scheduled = true;
            ctx.schedule_now(FsEvent::Flusher);
        }
    }

    /// A writer crossed the background threshold: the flusher starts writing back.
    fn kick_background(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        if self.dirty > self.cfg.background_thresh() && !self.flusher.background {
            self.flusher.background = true;
            self.wake_flusher(ctx);
        }
    }

    /// The flusher writes one request after another until it has nothing to write or the
    /// throttle blocks it: the oldest dirty inode first, a chunk of it at a time, while over
    /// the background threshold; then inodes dirty for longer than the expiry.
    fn run_flusher(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        self.flusher.scheduled = false;
        let who = (self.setup.kernel_job, 0, 0);
        loop {
            if self.flusher.blocked {
                return;
            }
            if self.flusher.cur.is_none() {
                let bg = self.dirty > self.cfg.background_thresh();
                self.flusher.background = bg;
                let pick = self
                    .dirty_index
                    .first()
                    .copied()
                    .filter(|&(t, _)| bg || self.flusher.expire_before.is_some_and(|e| t <= e));
                let Some((_, ino)) = pick else {
                    self.flusher.expire_before = None;
                    return;
                };
                self.flusher.cur = Some((ino, 0, WRITEBACK_CHUNK));
            }
            let (ino, from, left) = self.flusher.cur.expect("just set");
            let built = if self.inodes.contains_key(&ino) {
                self.build_writeback(ino, from, left, false, who, true, ctx)
            } else {
                None
            };
            match built {
                Some((io, next)) => {
                    let n = self.io(io).pages;
                    self.flusher.cur = (left > n).then_some((ino, next, left - n));
                    if !self.start_writeback(io, ctx) {
                        self.flusher.blocked = true;
                        return;
                    }
                }
                None => {
                    // The inode is clean (or its chunk done): requeue it behind the others if
                    // still dirty, as writeback_sb_inodes does.
                    self.flusher.cur = None;
                    if let Some(i) = self.inodes.get_mut(&ino)
                        && i.dirty > 0
                        && let Some(t) = i.dirtied_when
                    {
                        let now = ctx.now_ns();
                        self.dirty_index.remove(&(t, ino));
                        i.dirtied_when = Some(now.max(t));
                        self.dirty_index.insert((now.max(t), ino));
                    }
                }
            }
        }
    }

    fn arm_flusher_timer(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        let every = self.cfg.dirty_writeback_ns;
        if every > 0 {
            let at = ctx.now_ns() + every;
            ctx.schedule(at, FsEvent::FlusherTimer);
        }
    }

    // ---- completions ----------------------------------------------------------------------

    fn own_complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let now = ctx.now_ns();
        if let Slot::Io(st) = self.table.entry(id)
            && std::mem::take(&mut st.convert)
        {
            // ext4_end_bio: the io_end goes to the conversion worker, which converts one
            // extent at a time; the pages stay under writeback until it has. The write itself
            // is done: on the device (the crash checker's record) and for blk-wbt.
            let (wbt, rec) = (std::mem::take(&mut st.wbt), st.rec.take());
            if let (Some(k), Some(r)) = (rec, self.rec.as_mut()) {
                r.writes[k as usize].done = Some(now);
            }
            let host = ctx.reqs()[id].host;
            let start = now.max(self.conversion_free_at);
            let end = ctx.cpu(host, 0, start, self.cfg.conversion_ns);
            self.conversion_free_at = end;
            ctx.schedule(end, FsEvent::Converted(id));
            if wbt {
                self.wbt.inflight -= 1;
                self.wbt_drain(ctx);
            }
            return;
        }
        let Slot::Io(st) = std::mem::take(self.table.entry(id)) else {
            unreachable!("checked by the caller");
        };
        if st.wbt {
            self.wbt.inflight -= 1;
        }
        let part = match st.kind {
            IoKind::Writeback => Some(0),
            IoKind::Journal if st.commit_record => Some(2),
            IoKind::Journal => Some(1),
            IoKind::Flush => Some(2),
            _ => None,
        };
        if let Some(k) = part {
            // A request that never reached the host driver (a FLUSH the block layer
            // completed itself) counts as dispatched when it was sent.
            let span = Span {
                sent: st.sent_at,
                dispatched: ctx.reqs()[id].t.dispatched_ns.max(st.sent_at),
                done: now,
            };
            for &w in &st.waiters {
                match w {
                    Waiter::Call(c) => self.call(c).parts[k].merge(&span),
                    Waiter::Commit(c) => self.commit_mut(c).parts[k].merge(&span),
                    Waiter::Checkpoint(_) => {}
                }
            }
        }
        if let (Some(k), Some(rec)) = (st.rec, self.rec.as_mut()) {
            if st.kind == IoKind::Flush {
                rec.flushes[k as usize].done = Some(now);
            } else {
                rec.writes[k as usize].done = Some(now);
            }
        }
        let mut evict = None;
        match st.kind {
            IoKind::Read => {
                if let Some(inode) = self.inodes.get_mut(&st.ino) {
                    for p in st.first..st.first + st.pages {
                        if let Some(page) = inode.pages.get_mut(&p)
                            && page.io == id
                        {
                            page.flags = (page.flags & !READING) | UPTODATE;
                            page.io = ReqId::NONE;
                            self.lru.push_back((st.ino, p));
                        }
                    }
                }
            }
            IoKind::Writeback => {
                self.writeback -= st.pages;
                if let Some(inode) = self.inodes.get_mut(&st.ino) {
                    inode.wb_ios.retain(|&x| x != id);
                    if inode.wb_ios.is_empty() && inode.nlink == 0 {
                        evict = Some(st.ino);
                    }
                    inode.unflushed = true;
                    for p in st.first..st.first + st.pages {
                        if let Some(page) = inode.pages.get_mut(&p) {
                            page.flags &= !WRITEBACK;
                            if page.flags & DIRTY == 0 {
                                self.lru.push_back((st.ino, p));
                            }
                        }
                    }
                }
            }
            IoKind::Flush => {
                if let Some(inode) = self.inodes.get_mut(&st.ino) {
                    inode.unflushed = false;
                }
                // Writes held for this FLUSH (block reuse) go now.
                let held: Vec<ReqId> = self
                    .table
                    .iter_mut()
                    .filter_map(|(rid, slot)| match slot {
                        Slot::Io(s) if s.after == id => {
                            s.after = ReqId::NONE;
                            Some(rid)
                        }
                        _ => None,
                    })
                    .collect();
                for h in held {
                    if self.jp.ordered() {
                        self.send(h, ctx);
                    } else {
                        self.wbt_send(h, ctx);
                    }
                }
            }
            IoKind::Journal | IoKind::Direct | IoKind::Home => {}
        }
        ctx.reqs_mut().free(id);
        for w in st.waiters {
            self.wake(w, ctx);
        }
        if let Some(ino) = evict {
            self.evict_if_unused(ino, now);
        }
        if st.kind == IoKind::Writeback {
            self.wbt_drain(ctx);
            self.release_throttled(ctx);
            if self.flusher.background && !self.flusher.blocked {
                self.wake_flusher(ctx);
            }
        }
        let _ = now;
        self.evict();
        self.arm_commit_timer(ctx);
    }
}

fn run_blocks(commits: &mut [Option<CommitRun>], s: u32, n: u64) {
    commits[s as usize].as_mut().expect("a live commit").blocks += n;
}

impl Stage for FsStage {
    type Event = FsEvent;

    fn name(&self) -> &'static str {
        "fs"
    }

    fn start(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        self.arm_flusher_timer(ctx);
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        let r = ctx.reqs()[id];
        if r.file == 0
            && r.call == Call::Io
            && (r.flags.contains(ReqFlags::DIRECT) || r.op == Op::Trim)
        {
            // Direct I/O of the block device: passed down as it is (a trim drops the cached
            // pages it covers first).
            if r.op == Op::Trim {
                let inode = self.inodes.get_mut(&0).expect("the block device");
                let (a, b) = (
                    r.offset_bytes / PAGE,
                    (r.offset_bytes + r.len_bytes).div_ceil(PAGE),
                );
                let gone: Vec<u64> = inode
                    .pages
                    .range(a..b)
                    .filter(|(_, pg)| pg.flags & (DIRTY | WRITEBACK | READING) == 0)
                    .map(|(&p, _)| p)
                    .collect();
                for p in gone {
                    inode.pages.remove(&p);
                    self.cached -= 1;
                }
            }
            *self.table.entry(id) = Slot::Pass;
            self.send(id, ctx);
            return;
        }
        let k = match r.call {
            Call::Io => 0,
            Call::Create => 1,
            Call::Open => 2,
            Call::Close => 3,
            Call::Unlink => 4,
            Call::Rename => 5,
        };
        self.stats.calls[k] += 1;
        if r.flags.contains(ReqFlags::FADV_DONTNEED)
            && let Some(ino) = self.ino_of(r.file)
        {
            self.fadvise_dontneed(ino, (r.job, r.core, r.host), ctx);
        }
        *self.table.entry(id) = Slot::Call(CallSt::default());
        if matches!(r.call, Call::Open | Call::Close) {
            return self.cpu_then_resume(id, self.cfg.syscall_ns, ctx);
        }
        self.advance(id, ctx);
    }

    fn on_event(&mut self, ev: FsEvent, ctx: &mut impl StageCtx<FsEvent>) {
        match ev {
            FsEvent::Resume(id) => self.advance(id, ctx),
            FsEvent::FlusherTimer => {
                let now = ctx.now_ns();
                self.flusher.expire_before = Some(now.saturating_sub(self.cfg.dirty_expire_ns));
                self.wake_flusher(ctx);
                self.arm_flusher_timer(ctx);
            }
            FsEvent::Flusher => self.run_flusher(ctx),
            FsEvent::CommitTimer(j) => {
                let j = j as usize;
                self.journals[j].timer_at = None;
                let tid = self.journals[j].running.tid;
                if !self.journals[j].running.is_empty() {
                    self.request_commit(j, tid, ctx);
                }
            }
            FsEvent::CommitStart(j) => self.commit_thread(j as usize, ctx),
            FsEvent::Converted(id) => {
                // The extent is written now: the inode (its extent tree) changes in the
                // transaction running at this moment, which fsync must wait for.
                let Slot::Io(st) = self.table.entry(id) else {
                    unreachable!("a conversion of a live writeback");
                };
                let ino = st.ino;
                if self.inodes.contains_key(&ino) {
                    let alloc = self.alloc.as_ref().expect("mounted");
                    let block = alloc.geometry().inode_block(ino);
                    self.dirty_meta(&[block], Some(ino), true);
                }
                self.stats.conversions += 1;
                self.own_complete(id, ctx);
            }
        }
    }

    fn complete(&mut self, id: ReqId, ctx: &mut impl StageCtx<FsEvent>) {
        if ctx.reqs()[id].op == Op::Read {
            self.wbt.last_read_ns = Some(ctx.now_ns());
        }
        match self.table.entry(id) {
            Slot::Pass => {
                *self.table.entry(id) = Slot::Free;
                ctx.complete(id);
            }
            Slot::Io(_) => self.own_complete(id, ctx),
            other => panic!("the stage below completed {id:?}, which is {other:?}"),
        }
    }

    fn pull(&mut self, ctx: &mut impl StageCtx<FsEvent>) {
        while let Some(&id) = self.busy.front() {
            if ctx.dispatch(id) == Admission::Busy {
                return;
            }
            self.busy.pop_front();
            self.sent(id, ctx);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let s = &self.stats;
        let mut out: Vec<(String, f64)> = [
            ("reads+writes+flushes", s.calls[0]),
            ("creates", s.calls[1]),
            ("opens", s.calls[2]),
            ("closes", s.calls[3]),
            ("unlinks", s.calls[4]),
            ("renames", s.calls[5]),
            ("pages_read", s.pages_read),
            ("read_requests", s.read_requests),
            ("readahead_pages", s.readahead_pages),
            ("cache_hit_pages", s.cache_hits),
            ("pages_dirtied", s.pages_dirtied),
            ("pages_written", s.pages_written),
            ("writeback_requests", s.writeback_requests),
            ("throttled_writes", s.throttled),
            ("fsyncs", s.fsyncs),
            ("commits", s.commits),
            ("file_commits", s.file_commits),
            ("journal_blocks", s.journal_blocks),
            ("flushes", s.flushes),
            ("checkpoints", s.checkpoints),
            ("reuse_flushes", s.reuse_flushes),
            ("conversions", s.conversions),
            ("evicted_pages", s.evicted),
            ("fadvise_dontneed_calls", s.fadvise_dontneed),
            ("invalidated_pages", s.invalidated),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v as f64))
        .collect();
        out.push(("dirty_pages_at_end".into(), self.dirty as f64));
        // The latency breakdown: sums over `breakdown_fsyncs` (divide for the means).
        out.push(("breakdown_fsyncs".into(), s.breakdown_calls as f64));
        for (part, sums) in PARTS.iter().zip(&s.breakdown_ns) {
            for (what, v) in ["sent", "dispatched", "done"].iter().zip(sums) {
                out.push((format!("breakdown_{part}_{what}_ns"), *v as f64));
            }
        }
        out.push(("breakdown_end_ns".into(), s.breakdown_end_ns as f64));
        out
    }
}
