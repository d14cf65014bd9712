//! Ordered writes over NVMe over fabrics (Rio, EuroSys'23, and the stacks it is compared with).
//!
//! One initiator sends ordered write streams to several target servers, one SSD each. Four
//! stacks keep (or do not keep) the storage order: `orderless`, `linux` (synchronous transfer
//! and a FLUSH after every ordered write), `horae` (a synchronous control path persisting the
//! order to the target's PMR, then asynchronous data) and `rio` (ordering attributes logged to
//! the PMR, asynchronous data, in-order submission per target, in-order completion, recovery
//! from the attributes). The model is an event machine whose every step is an event boundary,
//! so the crash checker can cut power (or crash one target) after any step and check what
//! recovery leaves.
//!
//! - [`workload`]: seeded ordered write streams (out-of-place, as the document assumes).
//! - [`plan`]: the sequencer (ordering attributes), merging and splitting at MDTS.
//! - [`stack`]: the four stacks as a plug-in table.
//! - [`machine`]: the event machine (network, targets, PMR, SSD caches, acknowledgements).
//! - [`recovery`]: Rio's and HORAE's recovery, after a power cut or the crash of one target.
//! - [`check`]: the crash checker and its reproducers.
//! - [`target`]: the target server as a stage of the simulator's path (its cores, its PMR).
//! - [`cut`]: a cut of a simulated path (a power failure or one target's crash) recovered and
//!   judged by the checker's rules, and recovery time on the simulated clock.

pub mod check;
pub mod cut;
pub mod machine;
pub mod plan;
pub mod recovery;
pub mod stack;
pub mod target;
pub mod workload;

qoslab_engine::settings! {
    /// `[fabric]`: the servers, the SSDs and Rio's knobs.
    pub struct FabricConfig in FABRIC_TUNABLES {
        targets: u32 = count(2, "target servers, one SSD each; data is striped over them in mdts_bytes units").range(1.0, 16.0),
        plp: bool = flag(false, "the SSDs have power-loss protection: a completed write is durable (Optane-like); without it a write sits in a volatile cache until a FLUSH or a destage (flash)"),
        mdts_bytes: u64 = bytes(131072, "maximum data transfer size of one command, also the stripe unit (Intel 905P: 128 KiB, document 4.5)").range(4096.0, 16777216.0),
        block_bytes: u64 = bytes(4096, "logical block size").range(512.0, 65536.0),
        merge_batch: u32 = count(8, "most consecutive ordered requests merged into one command (the plug of document Figure 12); 1 turns merging off").range(1.0, 4096.0),
        in_order_completion: bool = flag(true, "Rio acknowledges requests to the application in sequence order (document 4.1, step 9)"),
        pmr_bytes: u64 = bytes(2097152, "PMR per target, used as a circular log of ordering attributes (document: 2 MB)").range(32.0, 1073741824.0),
        attr_bytes: u64 = bytes(32, "one ordering attribute in the PMR (document 6.1: 32 B)").range(16.0, 4096.0),
        recycle_at_ack: bool = flag(false, "move a PMR log's head past an attribute once its request is acknowledged, durable or not (Rio 4.3.2 read literally); without PLP the checker shows it breaks the prefix, so by default the head waits for an acknowledged FLUSH"),
    }
}

impl FabricConfig {
    /// Blocks per stripe unit (and per command at most).
    pub fn chunk_blocks(&self) -> u64 {
        (self.mdts_bytes / self.block_bytes).max(1)
    }

    /// The striping and merging the sequencer plans with.
    pub fn layout(&self) -> qoslab_engine::order::Layout {
        qoslab_engine::order::Layout {
            targets: self.targets,
            chunk_blocks: self.chunk_blocks(),
            merge_batch: self.merge_batch,
        }
    }

    /// Attribute slots in one target's PMR log.
    pub fn pmr_slots(&self) -> usize {
        (self.pmr_bytes / self.attr_bytes).max(1) as usize
    }

    /// The configuration with `key=value` overrides applied (the `[fabric]` table's keys).
    pub fn with_overrides(sets: &[(String, String)]) -> Result<Self, String> {
        let mut s = qoslab_engine::Settings::defaults("fabric", FABRIC_TUNABLES);
        for (key, value) in sets {
            let key = key.strip_prefix("fabric.").unwrap_or(key);
            s.set(key, &qoslab_engine::RawValue::from_cli(value))?;
        }
        Ok(Self::from_settings(&s))
    }

    /// `(key, value)` of every tunable, for summaries and reproducers.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let v = [
            self.targets.to_string(),
            self.plp.to_string(),
            self.mdts_bytes.to_string(),
            self.block_bytes.to_string(),
            self.merge_batch.to_string(),
            self.in_order_completion.to_string(),
            self.pmr_bytes.to_string(),
            self.attr_bytes.to_string(),
            self.recycle_at_ack.to_string(),
        ];
        FABRIC_TUNABLES
            .iter()
            .zip(v)
            .map(|(t, v)| (t.name.to_string(), v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_configuration_reads_back_to_itself() {
        let sets = [("plp".to_string(), "true".to_string())];
        let cfg = FabricConfig::with_overrides(&sets).unwrap();
        assert!(cfg.plp);
        let pairs = cfg.pairs();
        assert_eq!(pairs.len(), FABRIC_TUNABLES.len());
        assert_eq!(FabricConfig::with_overrides(&pairs).unwrap(), cfg);
        assert_eq!(cfg.pmr_slots(), 65536);
        assert_eq!(cfg.chunk_blocks(), 32);
    }
}
