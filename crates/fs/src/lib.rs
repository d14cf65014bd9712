//! The page cache and the file systems above the block layer, as one stage of the chain
//! (`crates/sim` puts it on top of the block layer when a job uses it):
//!
//! ```text
//! jobs ─▶ fs (page cache, file system, journal) ─▶ block layer ─▶ ...
//! ```
//!
//! A job's request at the top is a system call on a file ([`qoslab_engine::Call`],
//! `Request::file`): buffered reads through the page cache with Linux's readahead
//! ([`readahead`]), buffered writes that dirty pages, writeback by the kernel's rules (the
//! flusher's wake-ups, `dirty_background_ratio`, `dirty_ratio` throttling,
//! `dirty_expire_centisecs`, blk-wbt's depth), `fsync` and `fdatasync`, `O_SYNC` and `O_DSYNC`
//! writes, `creat`, `unlink`, `rename`, and direct I/O. File 0 is the block device itself
//! (fio's `direct=0` on a device: the block device's own page cache). A file system
//! ([`layout`]: ext4's geometry and allocators) journals its metadata through a [`journal`]
//! plug-in: ext4 (JBD2), HORAEFS or RioFS. [`recovery`] replays the journals after a crash
//! and checks the result.

pub mod check;
pub mod config;
pub mod image;
pub mod journal;
pub mod layout;
pub mod readahead;
pub mod recovery;
pub mod stage;

pub use config::{FS_TUNABLES, FsConfig};
pub use image::Recording;
pub use journal::{JOURNALS, Journal, JournalOps, Step};
pub use stage::{FileSpec, FsEvent, FsSetup, FsStage};

/// The page and block size.
pub const PAGE: u64 = 4096;
