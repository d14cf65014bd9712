//! ext4 with JBD2 in `data=ordered` mode (Linux `fs/jbd2/commit.c`,
//! `jbd2_journal_commit_transaction`): one journal and one commit thread; `fsync` asks the
//! thread to commit the running transaction, which holds every change since the last commit,
//! from every file (group commit). A commit writes the ordered data and the journal copies
//! (descriptor and metadata) without waiting between them, waits for both, then writes the
//! commit block with `REQ_PREFLUSH | REQ_FUA`: the FLUSH makes the data and journal copies
//! durable before the commit block, FUA the commit block itself. With `journal_async_commit`
//! the commit block goes with the journal copies (its checksum covers them) and one FLUSH
//! follows; with `barrier = false` (`nobarrier`) no FLUSH or FUA is sent at all. With
//! `dioread_nolock` (the default) an append's block is allocated unwritten at writeback and
//! converted when its write completes: its inode joins the transaction running then.

use qoslab_engine::{Ns, ReqFlags, Settings};

use super::{API, Journal, JournalOps, Step};

qoslab_engine::settings! {
    /// `[fs.ext4]`: ext4's mount options.
    pub struct Ext4Config in EXT4_TUNABLES {
        barrier: bool = flag(true, "barrier: the commit block is written with PREFLUSH and FUA (false: nobarrier, no FLUSH or FUA at all)"),
        journal_async_commit: bool = flag(false, "journal_async_commit: the commit block is written with the journal copies, one FLUSH after them"),
        dioread_nolock: bool = flag(true, "dioread_nolock (Linux 6.1's default for 4 KiB blocks): writeback allocates unwritten extents, converted when the write completes, in the transaction running then (false: dioread_lock, written extents on the transaction's ordered list)"),
        commit_ns: Ns = ns(5_000_000_000, "commit=: the running transaction is committed at most this long after it started (ext4's default 5 s)"),
    }
}

pub static OPS: JournalOps = JournalOps {
    name: "ext4",
    help: "ext4, data=ordered: one JBD2 journal, one commit thread, group commit; commit block with PREFLUSH and FUA",
    api_version: API,
    tunables: EXT4_TUNABLES,
    build: Some(build),
};

fn build(settings: &Settings) -> Box<dyn Journal> {
    Box::new(Ext4::new(Ext4Config::from_settings(settings)))
}

pub struct Ext4 {
    cfg: Ext4Config,
    steps: Vec<Step>,
}

impl Ext4 {
    pub fn new(cfg: Ext4Config) -> Self {
        use Step::*;
        let steps = match (cfg.barrier, cfg.journal_async_commit) {
            (true, false) => vec![
                Data,
                Metadata,
                Wait,
                Commit(ReqFlags::PREFLUSH | ReqFlags::FUA),
                Wait,
            ],
            (true, true) => vec![Data, Metadata, Commit(ReqFlags::empty()), Wait, Flush, Wait],
            (false, false) => vec![Data, Metadata, Wait, Commit(ReqFlags::empty()), Wait],
            (false, true) => vec![Data, Metadata, Commit(ReqFlags::empty()), Wait],
        };
        Ext4 { cfg, steps }
    }
}

impl Journal for Ext4 {
    fn steps(&self) -> &[Step] {
        &self.steps
    }

    fn commit_interval_ns(&self) -> Ns {
        self.cfg.commit_ns
    }

    fn barrier(&self) -> bool {
        self.cfg.barrier
    }

    fn checksums(&self) -> bool {
        self.cfg.journal_async_commit
    }

    fn converts_unwritten(&self) -> bool {
        self.cfg.dioread_nolock
    }
}
