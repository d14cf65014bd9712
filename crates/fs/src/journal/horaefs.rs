//! HORAEFS as the Rio document builds it for comparison (Rio, EuroSys'23, 6.1): ext4 with
//! iJournaling's per-core journals (each `fsync` commits a file-level transaction in the
//! journal of the caller's core, itself), whose writes go through HORAE's ordered control path
//! (`[block] ordering = horae`): each step is an ordered group, sent without waiting, and the
//! commit block carries the FLUSH that makes the transaction durable. Block reuse waits for a
//! synchronous FLUSH, as RioFS does (an asynchronous ordered write may not overtake the
//! transaction that freed its block; Rio 4.4.2).

use qoslab_engine::{Ns, ReqFlags, Settings};

use super::{API, Journal, JournalOps, Step};

qoslab_engine::settings! {
    /// `[fs.horaefs]`.
    pub struct HoraefsConfig in HORAEFS_TUNABLES {
        commit_ns: Ns = ns(5_000_000_000, "the running transaction (what no fsync committed at file level) commits at most this long after it started (ext4's 5 s)"),
    }
}

pub static OPS: JournalOps = JournalOps {
    name: "horaefs",
    help: "ext4 with per-core journals (iJournaling), each transaction's D, JM and JC as ordered groups through HORAE's control path",
    api_version: API,
    tunables: HORAEFS_TUNABLES,
    build: Some(build),
};

fn build(settings: &Settings) -> Box<dyn Journal> {
    Box::new(Horaefs {
        cfg: HoraefsConfig::from_settings(settings),
    })
}

pub struct Horaefs {
    cfg: HoraefsConfig,
}

pub(crate) const ORDERED_STEPS: &[Step] = &[
    Step::Data,
    Step::Metadata,
    Step::Commit(ReqFlags::PREFLUSH.union(ReqFlags::FUA)),
    Step::Wait,
];

impl Journal for Horaefs {
    fn steps(&self) -> &[Step] {
        ORDERED_STEPS
    }
    fn commit_interval_ns(&self) -> Ns {
        self.cfg.commit_ns
    }
    fn ordered(&self) -> bool {
        true
    }
    fn per_core(&self) -> bool {
        true
    }
    fn ordering(&self) -> Option<&'static str> {
        Some("horae")
    }
    fn flush_before_reuse(&self) -> bool {
        true
    }
}
