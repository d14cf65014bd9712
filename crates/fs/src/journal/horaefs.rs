//! HORAEFS as the Rio document builds it for comparison (Rio, EuroSys'23, 6.1): ext4 with
//! iJournaling's per-core journals ([`super::ijournal`]), whose ordered groups go through
//! HORAE's control path (`[block] ordering = horae`): each ordered write's metadata is
//! persisted at the target before its data goes.

use qoslab_engine::{Ns, Settings};

use super::ijournal::IJournaling;
use super::{API, Journal, JournalOps};

qoslab_engine::settings! {
    /// `[fs.horaefs]`.
    pub struct HoraefsConfig in HORAEFS_TUNABLES {
        commit_ns: Ns = ns(5_000_000_000, "the JBD2 journal commits what no fsync committed at file level at most this long after it started (ext4's 5 s)"),
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
    Box::new(IJournaling {
        commit_ns: HoraefsConfig::from_settings(settings).commit_ns,
        ordering: "horae",
    })
}
