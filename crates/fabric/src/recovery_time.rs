//! How long recovery takes after a power cut of a timed run, on the timed machine's clock.
//!
//! Recovery runs on what the cut left (document 4.4.1, 6.5): each target reads its PMR log back
//! by MMIO and sends the entries to the initiator; the initiator merges the per-server lists
//! into each stream's global order and finds the first entry that is not durable (rebuilding the
//! order); it sends the cut back and each target discards, on its SSDs, the data of every
//! command after it (data recovery). Every step is booked on a resource (a target's PMR, cores,
//! links and SSD units, the initiator's recovery thread), the targets working in parallel, so
//! the time is an output of how many entries the logs held and how many commands recovery
//! erased at that moment, not of the run's inputs. The servers restart idle; reconnecting
//! (the queue pairs, the RDMA connections) is not counted.

use serde::Serialize;

use qoslab_engine::{Ns, Settings};
use qoslab_nvme::transport::nvmeof::RESPONSE_BYTES;

use crate::stack::PmrLog;
use crate::timed::{Busy, Pool, TimedRun, ssd_of};

qoslab_engine::settings! {
    /// `[fabric.recovery]`: what each step of recovery costs.
    pub struct RecoveryConfig in RECOVERY_TUNABLES {
        pmr_read_gb_per_s: f64 = rate(0.0533, "a target reading its PMR log back by MMIO: 32 B per 0.6 us (model assumption: the document's 0.6 us persistent MMIO write of a 32 B attribute, 6.1, ends with an MMIO read of it; no read figure is published)"),
        horae_entry_bytes: u64 = bytes(16, "HORAE's ordering metadata per request in the PMR (model assumption: the document says only that it is smaller than Rio's 32 B attribute, 6.5)").range(1.0, 4096.0),
        list_message_bytes: u64 = bytes(4096, "PMR entries a target sends the initiator per message (model choice: one page)").range(32.0, 16777216.0),
        merge_ns: Ns = ns(50, "initiator time to merge one entry into its stream's global order: the per-server lists arrive sorted, so a k-way merge step is a compare and an append (model assumption)"),
        discard_block_ns: Ns = ns(20000, "an SSD unit discarding one 4 KiB block of a command after the cut (model assumption: as long as one flash write, flash_write_ns)"),
        cut_entry_bytes: u64 = bytes(8, "per stream, the bytes of the global order's cut sent back to each target (its first sequence number not kept; model choice)").range(1.0, 4096.0),
    }
}

impl RecoveryConfig {
    /// The table with `recovery.KEY=VALUE` overrides; other keys are left to other tables.
    pub fn with_overrides(sets: &[(String, String)]) -> Result<Self, String> {
        let mut s = Settings::defaults("fabric.recovery", RECOVERY_TUNABLES);
        for (key, value) in sets {
            if let Some(name) = key.strip_prefix("recovery.") {
                s.set(name, &qoslab_engine::RawValue::from_cli(value))
                    .map_err(|e| format!("{key}: {e}"))?;
            }
        }
        Ok(Self::from_settings(&s))
    }
}

/// What recovery found at a cut and how long it took.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RecoveryTime {
    /// PMR log entries read back (Rio: live ordering attributes; HORAE: metadata entries of
    /// requests not yet known durable), over every target.
    pub entries_read: u64,
    /// From restart until the initiator knows each stream's cut.
    pub rebuild_ns: Ns,
    /// Commands, and their blocks, whose data recovery discards.
    pub discarded_commands: u64,
    pub discarded_blocks: u64,
    /// From the end of the rebuild until every target has discarded and answered.
    pub data_recovery_ns: Ns,
    pub recovery_ns: Ns,
}

impl TimedRun<'_> {
    /// Runs the stack's recovery on the crash image now, on idle servers, and times it.
    pub fn recovery_time(&self, rc: &RecoveryConfig) -> RecoveryTime {
        let plan = self.m.plan();
        let image = &self.m.image;
        let targets = self.cfg.targets as usize;
        let (entries, entry_bytes): (Vec<u64>, u64) = match self.stack.pmr_log {
            PmrLog::None => return RecoveryTime::default(),
            PmrLog::Attributes => (
                image.logs.iter().map(|l| l.len() as u64).collect(),
                self.cfg.attr_bytes,
            ),
            PmrLog::Metadata => {
                let mut per = vec![0u64; targets];
                for (s, reqs) in plan.requests.iter().enumerate() {
                    let kept = self.m.recyclable_seq(s);
                    for (r, req) in reqs.iter().enumerate() {
                        if image.meta[s][r] && req.seq > kept {
                            per[plan.cmds[req.cmds[0]].target] += 1;
                        }
                    }
                }
                (per, rc.horae_entry_bytes)
            }
        };
        let erase = (self.stack.recover)(plan, image);
        let c = self.c;
        let ghz = self.t.cpu_ghz;
        let ns = |cycles: u64| (cycles as f64 / ghz).round() as Ns;
        let read_ns = |bytes: u64| (bytes as f64 / rc.pmr_read_gb_per_s).round() as Ns;
        let per_message = (rc.list_message_bytes / entry_bytes).max(1);
        let mut cores: Vec<Pool> = (0..targets)
            .map(|_| Pool(vec![0; self.t.target_cores as usize]))
            .collect();

        // Rebuild: each target reads its log serially and sends it a message at a time; the
        // initiator merges each message as it arrives.
        let mut arrivals: Vec<(Ns, u64)> = Vec::new();
        for (t, &n) in entries.iter().enumerate() {
            let (mut pmr, mut link) = (Busy::default(), Busy::default());
            let mut sent = 0;
            // An empty log still answers: the initiator waits for every target's list.
            loop {
                let k = (n - sent).min(per_message);
                let read = pmr.book(0, read_ns(k * entry_bytes));
                let posted = cores[t].book(read, ns(c.message_cycles));
                let at = link.book(posted, c.wire_ns(k * entry_bytes)) + c.message_ns;
                arrivals.push((at, k));
                sent += k;
                if sent >= n {
                    break;
                }
            }
        }
        arrivals.sort_unstable();
        let mut initiator = Busy::default();
        for &(at, k) in &arrivals {
            initiator.book(at, ns(c.message_cycles) + k * rc.merge_ns);
        }
        let rebuild_ns = initiator.0;

        // Data recovery: the cut goes to every target, which discards the data of each erased
        // command on its SSD's units, then answers.
        let units = if self.cfg.plp {
            self.t.optane_units
        } else {
            self.t.flash_units
        } as usize;
        let cut_bytes = rc.cut_entry_bytes * plan.order.len() as u64;
        let mut answers = Vec::with_capacity(targets);
        let mut out = RecoveryTime {
            entries_read: entries.iter().sum(),
            rebuild_ns,
            ..RecoveryTime::default()
        };
        for (t, cores) in cores.iter_mut().enumerate() {
            let posted = initiator.book(rebuild_ns, ns(c.message_cycles));
            let arrived = posted + c.wire_ns(cut_bytes) + c.message_ns;
            let mut done = cores.book(arrived, ns(c.message_cycles));
            let mut ssds: Vec<Pool> = (0..self.t.ssds_per_target)
                .map(|_| Pool(vec![0; units]))
                .collect();
            for (cmd, _) in erase.iter().enumerate().filter(|&(_, &e)| e) {
                let pc = &plan.cmds[cmd];
                if pc.target != t || pc.flush_only {
                    continue;
                }
                let submitted = cores.book(arrived, ns(c.submit_cycles));
                let blocks = u64::from(pc.attr.blocks);
                let ssd = &mut ssds[ssd_of(pc.attr.lba, &self.cfg, &self.t)];
                done = done.max(ssd.book(submitted, blocks * rc.discard_block_ns));
                out.discarded_commands += 1;
                out.discarded_blocks += blocks;
            }
            let answered = cores.book(done, ns(c.complete_cycles + c.message_cycles));
            answers.push(answered + c.wire_ns(RESPONSE_BYTES) + c.message_ns);
        }
        answers.sort_unstable();
        let end = answers
            .into_iter()
            .map(|at| initiator.book(at, ns(c.complete_cycles + c.message_cycles)))
            .max()
            .unwrap_or(rebuild_ns);
        out.data_recovery_ns = end - rebuild_ns;
        out.recovery_ns = end;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{self, StackOps};
    use crate::timed::{Cut, configs, measure, ordered_writes, power_cut, power_cuts};
    use qoslab_nvme::transport::nvmeof::FabricCosts;

    use crate::FabricConfig;
    use crate::timed::TimedConfig;

    fn setup(sets: &[(&str, &str)]) -> (FabricConfig, TimedConfig, FabricCosts, RecoveryConfig) {
        let sets: Vec<(String, String)> = sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (cfg, t, c) = configs(&sets).unwrap();
        (cfg, t, c, RecoveryConfig::with_overrides(&sets).unwrap())
    }

    #[test]
    fn without_a_flush_rio_on_flash_reads_and_discards_every_attribute() {
        // One thread, one target, flash without PLP, no FLUSH: no attribute is ever persistent,
        // so the log is never recycled and, at the end of the run, holds all 20 attributes;
        // the first sequence number is not durable, so recovery discards all 20 commands
        // (unmerged, as two random places may happen to follow each other).
        let (cfg, t, c, rc) = setup(&[("targets", "1"), ("merge_batch", "1")]);
        let w = ordered_writes(1, 20, 1, 1, 0, 5);
        let end = measure(&w, &stack::RIO, &cfg, &t, c).unwrap().elapsed_ns;
        let cut = power_cut(&w, &stack::RIO, &cfg, &t, c, &rc, end).unwrap();
        let r = &cut.recovery;
        assert_eq!(
            (r.entries_read, r.discarded_commands, r.discarded_blocks),
            (20, 20, 20)
        );
        assert_eq!(cut.survived, 0);
        assert!(cut.violations.is_empty());
        // Rebuild, by hand: 640 B read at 32 B per 0.6 us, one message (a page holds 128
        // attributes) posted by the target, on the wire, received and merged at 50 ns each.
        let ns = |cycles: u64| (cycles as f64 / t.cpu_ghz).round() as Ns;
        let read = (640.0 / rc.pmr_read_gb_per_s).round() as Ns;
        assert_eq!(read, 12_008);
        let rebuild = read
            + ns(c.message_cycles)
            + c.wire_ns(640)
            + c.message_ns
            + ns(c.message_cycles)
            + 20 * 50;
        assert_eq!(r.rebuild_ns, rebuild);
        // 20 discards of 20 us on 9 units take at least 3 rounds.
        assert!(r.data_recovery_ns >= 3 * rc.discard_block_ns, "{r:?}");
        assert!(r.data_recovery_ns < 4 * rc.discard_block_ns, "{r:?}");
        assert_eq!(r.recovery_ns, r.rebuild_ns + r.data_recovery_ns);
    }

    #[test]
    fn recovery_time_grows_with_the_requests_in_flight() {
        let (cfg, t, c, rc) = setup(&[("plp", "true"), ("targets", "2")]);
        for s in [&stack::RIO, &stack::HORAE] {
            let mut last = Cut {
                in_flight: 0,
                ..power_cut(&ordered_writes(1, 8, 1, 1, 0, 1), s, &cfg, &t, c, &rc, 0).unwrap()
            };
            for threads in [1, 4, 16] {
                let w = ordered_writes(threads, 96, 1, 1, 0, 2);
                let end = measure(&w, s, &cfg, &t, c).unwrap().elapsed_ns;
                let cut = power_cut(&w, s, &cfg, &t, c, &rc, end / 2).unwrap();
                assert!(
                    cut.violations.is_empty(),
                    "{}: {:?}",
                    s.name,
                    cut.violations
                );
                let r = &cut.recovery;
                assert!(
                    cut.in_flight > last.in_flight
                        && r.entries_read > last.recovery.entries_read
                        && r.rebuild_ns > last.recovery.rebuild_ns,
                    "{} at {threads} threads: {cut:?} after {last:?}",
                    s.name
                );
                last = cut;
            }
        }
    }

    #[test]
    fn rio_reads_bigger_entries_than_horae_and_linux_recovers_nothing() {
        let (cfg, t, c, rc) = setup(&[("plp", "true"), ("targets", "2")]);
        let w = ordered_writes(8, 64, 1, 1, 0, 3);
        let cut = |s: &'static StackOps| {
            let end = measure(&w, s, &cfg, &t, c).unwrap().elapsed_ns;
            power_cuts(&w, s, &cfg, &t, c, &rc, &[end / 3, end / 2, 2 * end / 3]).unwrap()
        };
        for cut in cut(&stack::LINUX).iter().chain(&cut(&stack::ORDERLESS)) {
            assert_eq!(cut.recovery, RecoveryTime::default());
        }
        let per_entry = |cuts: &[Cut]| {
            let (ns, n) = cuts.iter().fold((0, 0), |(ns, n), c| {
                (ns + c.recovery.rebuild_ns, n + c.recovery.entries_read)
            });
            ns as f64 / n as f64
        };
        let (rio, horae) = (cut(&stack::RIO), cut(&stack::HORAE));
        assert!(
            rio.iter()
                .chain(&horae)
                .all(|c| c.recovery.entries_read > 0)
        );
        // A 32 B attribute takes twice as long to read back as a 16 B metadata entry.
        assert!(per_entry(&rio) > per_entry(&horae), "{rio:?} {horae:?}");
        // Rio with PLP keeps the durable prefix: everything acknowledged survives.
        assert!(rio.iter().all(|c| c.survived >= c.acknowledged));
    }
}
