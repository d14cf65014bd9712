//! iJournaling's per-core journals (Park and Shin, ATC'17) as the Rio document builds both of
//! its ordered file systems on them (Rio, EuroSys'23, 4.7 and 6.1): each `fsync` commits a
//! file-level transaction (the file's data, its inode, a new directory entry) in the journal
//! of the caller's core, itself; its steps D, JM and JC go at once as ordered groups, the
//! commit block carrying the FLUSH, and the call waits for the commit block only. Changes of
//! names and links, and what no fsync committed, go through the JBD2 journal (journal 0)
//! every `commit_ns`. A block freed by an earlier transaction is written again only after a
//! synchronous FLUSH (an ordered write may not overtake the transaction that freed its block;
//! Rio 4.4.2), and the allocator takes never-freed blocks first.

use qoslab_engine::{Ns, ReqFlags};

use super::{Journal, Step};

const STEPS: &[Step] = &[
    Step::Data,
    Step::Metadata,
    Step::Commit(ReqFlags::PREFLUSH.union(ReqFlags::FUA)),
    Step::Wait,
];

/// The journal of HORAEFS and RioFS; they differ in the block layer's ordering under it.
pub struct IJournaling {
    pub commit_ns: Ns,
    pub ordering: &'static str,
}

impl Journal for IJournaling {
    fn steps(&self) -> &[Step] {
        STEPS
    }
    fn commit_interval_ns(&self) -> Ns {
        self.commit_ns
    }
    fn ordered(&self) -> bool {
        true
    }
    fn per_core(&self) -> bool {
        true
    }
    fn ordering(&self) -> Option<&'static str> {
        Some(self.ordering)
    }
    fn flush_before_reuse(&self) -> bool {
        true
    }
}
