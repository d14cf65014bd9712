//! Flash scheduling: which units of the array take commands (dies or whole chips), in which
//! order a channel serves commands and data-outs, which operations one multi-plane command may
//! join, and whether a read may suspend an erase. The flash array reads these rules once, at
//! construction, so its hot path stays a few branches on copied flags.
//!
//! A scheduling is a plug-in: one file with a [`FlashScheduling`] and its [`SchedulingOps`],
//! one line in [`SCHEDULINGS`]; the device file names it in `media.scheduling` and its
//! tunables are `[media.scheduling.NAME]`.

pub mod dies;
pub mod mqsim;

use qoslab_engine::Settings;

/// How the flash array schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// A chip runs one die's command at a time, from its command until its last data-out
    /// leaves the chip; false: each die is its own server.
    pub chip_serial: bool,
    /// A free channel serves waiting data-outs before commands; false: commands first within
    /// a class (a command sets another die working).
    pub data_out_first: bool,
    /// The planes of a multi-plane command must address the same page number in their
    /// blocks; false: any operations of the same kind on different planes may join.
    pub multiplane_same_page: bool,
    /// A read may suspend a running erase or program (when `nand.erase_suspend` or
    /// `nand.program_suspend` allow it).
    pub suspension: bool,
    /// Most pages the write cache holds dirty (written and not yet on flash), as a multiple of
    /// the array's planes; 0: as many as `cache.bytes` holds.
    pub dirty_pages_per_plane: u32,
    /// A page on flash may stay in the write cache and serve read hits (`cache.keep_destaged`);
    /// false: its slot is freed when its flash write completes, whatever the tunable says.
    pub keep_destaged: bool,
}

/// The scheduling hook.
pub trait FlashScheduling {
    fn rules(&self) -> Rules;
}

/// What a constructor gets: the plug-in's own sub-table.
pub struct SchedulingSetup<'a> {
    pub settings: &'a Settings,
}

pub type BuildScheduling = fn(&SchedulingSetup<'_>) -> Box<dyn FlashScheduling>;

qoslab_engine::plugin_ops! {
    /// One flash scheduling, as the registry knows it.
    pub struct SchedulingOps: "flash scheduling", tunables "[media.scheduling.NAME]", build BuildScheduling {
    }
}

/// Every flash scheduling a device file can name.
pub static SCHEDULINGS: &[&SchedulingOps] = &[&dies::OPS, &mqsim::OPS];

#[cfg(test)]
mod tests {
    use qoslab_engine::{Harness, Ns, Settings};

    use super::super::tests::{read, ssd, ssd_config};
    use super::*;
    use qoslab_engine::lookup;

    qoslab_engine::registry_contract_test!(
        SchedulingOps,
        dies::OPS,
        SCHEDULINGS,
        "media.scheduling"
    );

    /// Command (290 ns) + tR (75 us) + 4096 B at 3 ns/B on the channel.
    const READ_NS: Ns = 290 + 75_000 + 4096 * 3;

    /// One channel, one chip of two dies of one plane each, the map in DRAM: logical pages 0
    /// and 1 sit on die 0 and die 1 (channel, way, die, plane striping).
    fn one_chip(scheduling: &str) -> Harness<crate::ssd::Ssd> {
        one_channel(scheduling, "1", "2", "1")
    }

    fn one_channel(
        scheduling: &str,
        chips: &str,
        dies: &str,
        planes: &str,
    ) -> Harness<crate::ssd::Ssd> {
        Harness::new(ssd(
            &[
                ("channels", "1"),
                ("chips_per_channel", chips),
                ("dies_per_chip", dies),
                ("planes_per_die", planes),
                ("blocks_per_plane", "64"),
                ("pages_per_block", "64"),
                ("ftl.mapping", "dram"),
                ("ftl.overprovisioning", "0.2"),
                ("scheduling", scheduling),
            ],
            1,
        ))
    }

    fn two_reads_at_once(scheduling: &str) -> Vec<Ns> {
        let mut h = one_chip(scheduling);
        h.submit_at(0, read(0, 4096, 0));
        h.submit_at(0, read(8192, 4096, 0));
        h.run_all();
        h.completed.iter().map(|&(_, t)| t).collect()
    }

    #[test]
    fn dies_overlap_their_reads_and_mqsims_chip_serves_one_die_at_a_time() {
        // Dies: the second command waits 290 ns for the channel, its data-out for the first's.
        assert_eq!(two_reads_at_once("dies"), vec![READ_NS, READ_NS + 4096 * 3]);
        // MQSim: the chip takes the second die's command only after the first's data is out.
        assert_eq!(two_reads_at_once("mqsim"), vec![READ_NS, 2 * READ_NS]);
    }

    /// Completion times of 4 KiB reads of logical pages (page, submitted at).
    fn reads(mut h: Harness<crate::ssd::Ssd>, pages: &[(u64, Ns)]) -> Vec<Ns> {
        for &(page, at) in pages {
            h.submit_at(at, read(page * 8192, 4096, at));
        }
        h.run_all();
        h.completed.iter().map(|&(_, t)| t).collect()
    }

    #[test]
    fn mqsims_multi_plane_reads_need_the_same_page_number() {
        // One die of two planes, busy reading page 4 when two more reads arrive: pages 1 and
        // 2 sit on planes 1 and 0 at page 0 and page 1 of their blocks, pages 0 and 1 both at
        // page 0. Dies join either pair into one two-plane command (290 + 650 ns), MQSim only
        // the second.
        let two_plane = [
            READ_NS,
            READ_NS + 290 + 650 + 75_000 + 4096 * 3,
            READ_NS + 290 + 650 + 75_000 + 2 * 4096 * 3,
        ];
        let apart = [(4, 0), (1, 1), (2, 1)];
        let same = [(4, 0), (0, 1), (1, 1)];
        assert_eq!(reads(one_channel("dies", "1", "1", "2"), &apart), two_plane);
        assert_eq!(
            reads(one_channel("mqsim", "1", "1", "2"), &apart),
            [READ_NS, 2 * READ_NS, 3 * READ_NS]
        );
        assert_eq!(reads(one_channel("mqsim", "1", "1", "2"), &same), two_plane);
    }

    #[test]
    fn mqsims_channel_moves_waiting_data_out_before_a_new_command() {
        // Three chips on one channel: chips 0 and 1 read at 0; chip 2's command arrives while
        // chip 0's data holds the channel, before chip 1's data waits for it. When chip 0's
        // data is out (READ_NS), dies mode sends chip 2's command first, MQSim chip 1's data.
        let script = [(0, 0), (1, 0), (2, 75_300)];
        let out = 4096 * 3;
        assert_eq!(
            reads(one_channel("dies", "3", "1", "1"), &script),
            vec![READ_NS, READ_NS + 290 + out, READ_NS + READ_NS]
        );
        assert_eq!(
            reads(one_channel("mqsim", "3", "1", "1"), &script),
            vec![READ_NS, READ_NS + out, READ_NS + out + READ_NS]
        );
    }

    #[test]
    fn mqsims_rules_and_its_back_pressure_bound_the_dirty_pages() {
        let rules = SCHEDULINGS
            .iter()
            .map(|p| {
                let s = Settings::defaults("s", p.tunables);
                (
                    p.name,
                    p.build.unwrap()(&SchedulingSetup { settings: &s }).rules(),
                )
            })
            .collect::<Vec<_>>();
        assert_eq!(rules[0].0, "dies");
        assert!(!rules[0].1.chip_serial && rules[0].1.suspension);
        let mqsim = rules[1].1;
        assert!(mqsim.chip_serial && mqsim.data_out_first && mqsim.multiplane_same_page);
        assert!(!mqsim.suspension && !mqsim.keep_destaged);
        assert!(rules[0].1.keep_destaged);
        // 128 planes x 2 pages: MQSim's 2048-sector back-pressure buffer in 4 KiB writes.
        assert_eq!(ssd_config(&[("scheduling", "mqsim")]).cache_pages, 256);
        assert_eq!(ssd_config(&[]).cache_pages, 32_768);
        let e = lookup(SCHEDULINGS, "media.scheduling", "fifo")
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "field 'media.scheduling': expected one of dies, mqsim, got 'fifo'"
        );
    }
}
