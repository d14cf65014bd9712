//! The journal of a file system, the one thing its three variants do differently, as a
//! plug-in: an [`Journal`] implementation in its own file, its [`JournalOps`] (name, help, the
//! sub-table `[fs.NAME]` of its tunables, a constructor) and one line in [`JOURNALS`]. The file
//! system calls it only through these hooks.
//!
//! A transaction (JBD2's, `fs/jbd2/commit.c`) is committed as a list of [`Step`]s: the ordered
//! data (ext4's `data=ordered`: file blocks the transaction allocated are written before the
//! metadata that points at them is committed), the descriptor and metadata copies in the
//! journal (JM), the commit block (JC), FLUSHes and waits. ext4 waits between them; HORAEFS and
//! RioFS send every step at once as ordered groups and let the block layer's ordering keep
//! D before JM before JC (Rio, EuroSys'23, 4.7 and Figure 14).

pub mod ext4;
pub mod horaefs;
pub mod ijournal;
pub mod riofs;

use qoslab_engine::{ConfigError, Ns, ReqFlags, STAGE_API_VERSION, Settings};

/// One step of a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Write the transaction's ordered data: the dirty pages of the files whose blocks it
    /// allocated (for a file-level transaction, the file's dirty pages), and wait for their
    /// writeback already under way.
    Data,
    /// Write the descriptor block(s) and the copies of the metadata blocks into the journal.
    Metadata,
    /// Write the commit block with these flags.
    Commit(ReqFlags),
    /// Send a FLUSH.
    Flush,
    /// Wait for everything sent so far.
    Wait,
}

/// A journal plug-in. Every hook but `steps` and `commit_interval_ns` has a default: ext4's.
pub trait Journal {
    /// The steps of one commit, in order.
    fn steps(&self) -> &[Step];

    /// The periodic commit (ext4's `commit=` mount option): the running transaction commits
    /// at most this long after it started (0: only when asked).
    fn commit_interval_ns(&self) -> Ns;

    /// The writes of each step form one ordered group (`ReqFlags::ORDERED`, the next group
    /// starting at the next step): the block layer's ordering plug-in keeps the order, so a
    /// commit sends every step at once and waits only at its end.
    fn ordered(&self) -> bool {
        false
    }

    /// `fsync` commits a file-level transaction (the file's own metadata) in the journal of
    /// the caller's core, itself (iJournaling, Rio 4.7), instead of asking the one commit
    /// thread to commit the running transaction (JBD2).
    fn per_core(&self) -> bool {
        false
    }

    /// The block-layer ordering the journal's groups need (`[block] ordering`).
    fn ordering(&self) -> Option<&'static str> {
        None
    }

    /// A block freed by an earlier transaction is written again only after a synchronous
    /// FLUSH (RioFS's rule for block reuse, Rio 4.4.2 and 4.7).
    fn flush_before_reuse(&self) -> bool {
        false
    }

    /// Journal blocks carry checksums (`journal_async_commit`, which needs them): replay stops
    /// at a transaction whose blocks do not all match, instead of trusting the commit block.
    fn checksums(&self) -> bool {
        false
    }

    /// Buffered writeback maps new blocks as unwritten extents, converted to written when the
    /// write completes, by one worker, in the transaction running then; the pages' writeback
    /// ends only after it (ext4's `dioread_nolock`, Linux 6.1's default for 4 KiB blocks:
    /// `ext4_end_bio` defers an unwritten io_end to the `ext4-rsv-conversion` workqueue, whose
    /// handle joins the running transaction). An unwritten extent is not ordered data.
    fn converts_unwritten(&self) -> bool {
        false
    }

    /// Whether FLUSH and FUA are sent at all (ext4's `barrier` mount option): without them
    /// the journal no longer survives a power cut, which the crash checker shows.
    fn barrier(&self) -> bool {
        true
    }
}

/// A journal's constructor, from its sub-table `[fs.NAME]`.
pub type BuildJournal = fn(&Settings) -> Box<dyn Journal>;

qoslab_engine::plugin_ops! {
    /// One journal, as the registry knows it.
    pub struct JournalOps: "file system", tunables "[fs.NAME]", build BuildJournal {}
}

/// Every file system a device file can name (`[fs] type`).
pub static JOURNALS: &[&JournalOps] = &[&ext4::OPS, &horaefs::OPS, &riofs::OPS];

/// The journal called `name`, checked against the stage contract.
pub fn lookup(name: &str) -> Result<&'static JournalOps, ConfigError> {
    qoslab_engine::lookup(JOURNALS, "fs.type", name)
}

/// Names of the registered file systems.
pub fn names() -> Vec<&'static str> {
    qoslab_engine::plugin::names(JOURNALS)
}

pub(crate) const API: u32 = STAGE_API_VERSION;

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(JournalOps, ext4::OPS, JOURNALS, "fs.type");

    #[test]
    fn every_file_system_loads_and_names_are_unique() {
        for (i, j) in JOURNALS.iter().enumerate() {
            assert!(JOURNALS[..i].iter().all(|k| k.name != j.name));
            let ops = lookup(j.name).unwrap();
            let settings = Settings::defaults(ops.name, ops.tunables);
            let journal = ops.build.unwrap()(&settings);
            assert!(journal.steps().contains(&Step::Metadata));
        }
        let e = lookup("xfs").err().unwrap().to_string();
        assert_eq!(
            e,
            "field 'fs.type': expected one of ext4, horaefs, riofs, got 'xfs'"
        );
    }
}
