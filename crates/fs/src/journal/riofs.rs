//! RioFS (Rio, EuroSys'23, 4.7): ext4 with iJournaling's per-core journals
//! ([`super::ijournal`]), each `fsync`'s file-level transaction dispatched on the caller's own
//! stream of Rio's ordered block device (`[block] ordering = rio`).

use qoslab_engine::{Ns, Settings};

use super::ijournal::IJournaling;
use super::{API, Journal, JournalOps};

qoslab_engine::settings! {
    /// `[fs.riofs]`.
    pub struct RiofsConfig in RIOFS_TUNABLES {
        commit_ns: Ns = ns(5_000_000_000, "the JBD2 journal commits what no fsync committed at file level at most this long after it started (ext4's 5 s)"),
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
    Box::new(IJournaling {
        commit_ns: RiofsConfig::from_settings(settings).commit_ns,
        ordering: "rio",
    })
}
