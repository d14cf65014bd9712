//! What the file system wrote, block by block, for the crash checker: every write of a run
//! (its blocks' contents, when it was sent and completed, its flags and ordered group), every
//! FLUSH, and every promise a call made (an `fsync` that returned: the file's size and
//! pages are durable).
//!
//! Contents are logical, not bytes: a data block is a page of a file at a version; a metadata
//! block is the records it holds (inodes, directory entries, a group's bitmap); a journal
//! block is a descriptor, a copy of a metadata block or a commit block, each with its
//! transaction's log sequence number.

use qoslab_engine::Ns;

/// One inode as an inode-table block holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeRec {
    pub ino: u32,
    /// `i_disksize`.
    pub size: u64,
    /// (first file block, first device block, blocks).
    pub extents: Vec<(u64, u64, u64)>,
    /// Directory entries naming it; 0: an orphan (unlinked while open), which recovery frees.
    pub links: u32,
}

/// A record of a metadata block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An inode in use (an unused one has no record).
    Inode(InodeRec),
    /// Slot `slot` of directory `dir` (its inode) names file `name` with inode `ino`.
    Entry {
        dir: u32,
        slot: u32,
        name: u32,
        ino: u32,
    },
    /// The blocks (`inodes` false) or inodes in use in group `group`, as sorted runs.
    Bits {
        group: u64,
        inodes: bool,
        runs: Vec<(u64, u64)>,
    },
}

/// A metadata block: its records. A file-level journal copy holds only the file's own
/// records (`partial`), which replay merges into the block instead of replacing it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaImage {
    pub records: Vec<Record>,
    pub partial: bool,
}

/// What a block holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// Page `page` of inode `ino` at version `ver` (versions grow with every write).
    Data { ino: u32, page: u64, ver: u64 },
    /// A metadata block at its home.
    Meta(MetaImage),
    /// A journal descriptor: the transaction with log sequence number `seq` in journal
    /// `journal`, whose copies of `homes` follow it; `gid` orders transactions across
    /// journals (iJournaling's global transaction id).
    Desc {
        journal: u16,
        seq: u64,
        gid: u64,
        homes: Vec<u64>,
    },
    /// A journal copy of a metadata block, of the transaction `seq` of `journal`.
    Copy {
        journal: u16,
        seq: u64,
        image: MetaImage,
    },
    /// A commit block.
    Commit { journal: u16, seq: u64 },
    /// A journal superblock: replay starts at `seq`, at log block `at`.
    Super { journal: u16, seq: u64, at: u64 },
}

/// One write the file system sent.
#[derive(Clone, Debug)]
pub struct WriteRec {
    /// (device block, content) of each block it carries.
    pub blocks: Vec<(u64, u32)>,
    pub sent: Ns,
    pub done: Option<Ns>,
    /// Written through to the media (FUA).
    pub fua: bool,
    /// A FLUSH before it (PREFLUSH).
    pub preflush: bool,
    /// An ordered write: (stream, its group's number in the stream).
    pub ordered: Option<(u32, u64)>,
}

/// A FLUSH command.
#[derive(Clone, Copy, Debug)]
pub struct FlushRec {
    pub sent: Ns,
    pub done: Option<Ns>,
}

/// A call that returned saying a file is durable: `fsync`, `fdatasync`, an O_SYNC or
/// O_DSYNC write.
#[derive(Clone, Debug)]
pub struct Promise {
    /// When the call started (what it covers is the file as it was then) and returned.
    pub from: Ns,
    pub at: Ns,
    pub name: u32,
    pub ino: u32,
    /// `fsync` or O_SYNC (the name too, as ext4 keeps it: the commit that holds the inode
    /// holds its directory entry); false: `fdatasync` or O_DSYNC (the inode's data only).
    pub full: bool,
    pub size: u64,
    /// (page, version) of every page below the size that was ever written.
    pub pages: Vec<(u64, u64)>,
}

/// Everything a run wrote, for the crash checker.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    pub contents: Vec<Content>,
    pub writes: Vec<WriteRec>,
    pub flushes: Vec<FlushRec>,
    pub promises: Vec<Promise>,
    /// Every call: (start, end, thread, what), for reproducers.
    pub calls: Vec<(Ns, Ns, u32, String)>,
    /// (time, name): a name unlinked or renamed away; promises about it made before no longer
    /// bind.
    pub names_gone: Vec<(Ns, u32)>,
    /// The device as mkfs and the layout before the run left it: (block, content).
    pub initial: Vec<(u64, u32)>,
    /// The directories' inodes.
    pub dirs: Vec<u32>,
    /// The file system's geometry (`None`: only the block device's page cache).
    pub geometry: Option<crate::layout::Geometry>,
    /// Blocks reserved by mkfs (bitmaps, inode tables, descriptors, journals), as runs.
    pub reserved: Vec<(u64, u64)>,
    /// The file system keeps per-core journals (iJournaling): recovery merges them by global
    /// transaction id and rebuilds the bitmaps from the inodes.
    pub per_core: bool,
    /// Journal copies carry checksums (`journal_async_commit`): replay stops at a
    /// transaction whose blocks do not all match.
    pub checksums: bool,
}

impl Recording {
    pub fn add(&mut self, c: Content) -> u32 {
        self.contents.push(c);
        (self.contents.len() - 1) as u32
    }
}
