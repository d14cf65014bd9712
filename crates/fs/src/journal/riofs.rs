//! RioFS (Rio, EuroSys'23, 4.7): ext4 with iJournaling's per-core journals, each `fsync`'s
//! file-level transaction dispatched on the caller's own stream of Rio's ordered block device
//! (`[block] ordering = rio`): D, JM and JC are ordered groups sent at once, the commit block
//! carries the FLUSH, and the call waits only for it (Rio's in-order completion); a freed block
//! is written again only after a synchronous FLUSH (block reuse).

use qoslab_engine::{Ns, Settings};

use super::horaefs::ORDERED_STEPS;
use super::{API, Journal, JournalOps, Step};

qoslab_engine::settings! {
    /// `[fs.riofs]`.
    pub struct RiofsConfig in RIOFS_TUNABLES {
        commit_ns: Ns = ns(5_000_000_000, "the running transaction (what no fsync committed at file level) commits at most this long after it started (ext4's 5 s)"),
    }
}

pub static OPS: JournalOps = JournalOps {
    name: "riofs",
    help: "ext4 with per-core journals (iJournaling), each transaction's D, JM and JC as ordered groups on the core's Rio stream",
    api_version: API,
    tunables: RIOFS_TUNABLES,
    build: Some(build),
};

fn build(settings: &Settings) -> Box<dyn Journal> {
    Box::new(Riofs {
        cfg: RiofsConfig::from_settings(settings),
    })
}

pub struct Riofs {
    cfg: RiofsConfig,
}

impl Journal for Riofs {
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
        Some("rio")
    }
    fn flush_before_reuse(&self) -> bool {
        true
    }
}
