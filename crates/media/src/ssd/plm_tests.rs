//! NVM sets and Predictable Latency Mode, driven through the SSD's own hooks: requests,
//! admin commands and time. Log pages are decoded here from the byte offsets of the NVMe
//! specification (1.4, figure 200: Predictable Latency Per NVM Set log page), not from the
//! model's constants.

use super::flash::die_use;
use super::flash::{OpClass, OpKind};
use super::gate::WindowState;
use super::slow_reads::Copies;
use super::tests::{ssd, write};
use super::*;
use crate::Device;
use qoslab_engine::{Command, Control, ControlStatus, Harness, Notice, Request};

const MS: Ns = 1_000_000;

/// Two NVM sets (one per channel) of 2 chips x 2 planes each, 64 blocks of 32 4-KiB pages,
/// the page map in DRAM, a 1 MiB write cache, the `plm` gate: a DTWin takes 10 reads, 8 page
/// writes, 10 ms; an NDWin lasts at least 1 ms.
fn plm_drive(extra: &[(&str, &str)]) -> Harness<Ssd> {
    let mut o = drive_keys();
    o.extend_from_slice(&[
        ("gc.gate", "plm"),
        ("gc.plm.dtwin_reads_typical", "10"),
        ("gc.plm.dtwin_writes_typical", "8"),
        ("gc.plm.dtwin_time_max_ns", "10ms"),
        ("gc.plm.ndwin_time_min_low_ns", "1ms"),
        ("gc.plm.ndwin_time_min_high_ns", "10ms"),
    ]);
    o.extend_from_slice(extra);
    Harness::new(ssd(&o, 1))
}

/// The drive of [`plm_drive`] without its gate.
fn drive_keys() -> Vec<(&'static str, &'static str)> {
    vec![
        ("channels", "2"),
        ("chips_per_channel", "2"),
        ("dies_per_chip", "1"),
        ("planes_per_die", "2"),
        ("blocks_per_plane", "64"),
        ("pages_per_block", "32"),
        ("page_bytes", "4096"),
        ("nvm_sets", "2"),
        ("ftl.mapping", "dram"),
        ("ftl.overprovisioning", "0.2"),
        ("cache.bytes", "1m"),
        ("nand.program_lsb_ns", "200us"),
        ("nand.program_msb_ns", "200us"),
        ("nand.erase_ns", "1ms"),
    ]
}

fn control(h: &mut Harness<Ssd>, command: Command) -> Control {
    h.control(Control::new(0, 0, command))
}

fn set_feature(h: &mut Harness<Ssd>, fid: u8, set: u16, value: u32) -> ControlStatus {
    control(h, Command::SetFeature { fid, set, value }).status
}

fn log_page(h: &mut Harness<Ssd>, lid: u8, set: u16) -> Vec<u8> {
    let msg = control(
        h,
        Command::GetLogPage {
            lid,
            set,
            data: Vec::new(),
        },
    );
    assert_eq!(msg.status, ControlStatus::Success);
    match msg.command {
        Command::GetLogPage { data, .. } => data,
        _ => unreachable!(),
    }
}

fn u64_at(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().unwrap())
}

fn u16_at(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(page[at..at + 2].try_into().unwrap())
}

/// Status (byte 0) of set `set`'s Predictable Latency Per NVM Set log page: 1 DTWin, 2 NDWin.
fn window(h: &mut Harness<Ssd>, set: u16) -> u8 {
    log_page(h, 0x0A, set)[0]
}

fn enable(h: &mut Harness<Ssd>, set: u16) {
    assert_eq!(set_feature(h, 0x13, set, 1), ControlStatus::Success);
}

fn ask_dtwin(h: &mut Harness<Ssd>, set: u16) -> ControlStatus {
    set_feature(h, 0x14, set, 0b001)
}

fn read_ns(nsid: u32, offset: u64, now: Ns) -> Request {
    let mut r = Request::new(Op::Read, offset, 4096, 0, now);
    r.nsid = nsid;
    r
}

fn write_ns(nsid: u32, offset: u64, now: Ns) -> Request {
    let mut r = write(offset, 4096, now);
    r.nsid = nsid;
    r
}

fn counter(h: &Harness<Ssd>, name: &str) -> f64 {
    h.stage
        .counters()
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

#[test]
fn the_per_set_log_page_reads_back_as_the_specification_lays_it_out() {
    let mut h = plm_drive(&[]);
    enable(&mut h, 1);
    let page = log_page(&mut h, 0x0A, 1);
    assert_eq!(page.len(), 512);
    assert_eq!(page[0], 2, "an enabled set starts in NDWin");
    assert_eq!(u16_at(&page, 2), 0, "no event");
    assert!(page[4..32].iter().all(|&b| b == 0), "reserved bytes 31:04");
    assert_eq!(u64_at(&page, 32), 10, "DTWIN Reads Typical");
    assert_eq!(u64_at(&page, 40), 8, "DTWIN Writes Typical");
    assert_eq!(u64_at(&page, 48), 10, "DTWIN Time Maximum, ms");
    assert_eq!(u64_at(&page, 56), 10, "NDWIN Time Minimum High, ms");
    // The 1 ms of the tunable, raised to what a set may wait for its dies' background
    // operations: an erase (1 ms) and its channel transfers, 1.15 ms.
    assert_eq!(u64_at(&page, 64), 2, "NDWIN Time Minimum Low, ms");
    assert!(
        page[72..128].iter().all(|&b| b == 0),
        "reserved bytes 127:72"
    );
    assert_eq!(u64_at(&page, 128), 10, "DTWIN Reads Estimate");
    assert_eq!(u64_at(&page, 136), 8, "DTWIN Writes Estimate");
    assert_eq!(u64_at(&page, 144), 10, "DTWIN Time Estimate, ms");
    assert!(
        page[152..].iter().all(|&b| b == 0),
        "reserved bytes 511:152"
    );

    // Too early: NDWIN Time Minimum Low (1 ms) has not passed; the set enters DTWin once it has.
    assert_eq!(ask_dtwin(&mut h, 1), ControlStatus::Success);
    assert_eq!(window(&mut h, 1), 2);
    h.run_until(MS);
    assert_eq!(window(&mut h, 1), 1);
    for k in 0..3 {
        h.submit_at(h.now_ns(), read_ns(1, k * 4096, h.now_ns()));
    }
    h.run_until(5 * MS);
    let page = log_page(&mut h, 0x0A, 1);
    assert_eq!(page[0], 1);
    assert_eq!(u64_at(&page, 128), 7, "10 typical reads, 3 done");
    assert_eq!(u64_at(&page, 136), 8);
    assert_eq!(u64_at(&page, 144), 6, "4 of 10 ms gone");
    // The other set was never enabled; a set the drive does not have is refused.
    assert_eq!(window(&mut h, 2), 0);
    assert_eq!(ask_dtwin(&mut h, 2), ControlStatus::Invalid);
    assert_eq!(ask_dtwin(&mut h, 3), ControlStatus::Invalid);
    let f = control(
        &mut h,
        Command::GetFeature {
            fid: 0x14,
            set: 1,
            value: 0,
        },
    );
    assert_eq!(
        f.command,
        Command::GetFeature {
            fid: 0x14,
            set: 1,
            value: 1
        }
    );
}

/// Enters DTWin on set 1 (after NDWIN Time Minimum Low) and returns the time it did.
fn in_dtwin(h: &mut Harness<Ssd>) -> Ns {
    enable(h, 1);
    h.run_until(MS);
    assert_eq!(ask_dtwin(h, 1), ControlStatus::Success);
    assert_eq!(window(h, 1), 1);
    h.now_ns()
}

fn aggregate(h: &mut Harness<Ssd>) -> Vec<u16> {
    let page = log_page(h, 0x0B, 0);
    let n = u64_at(&page, 0) as usize;
    assert_eq!(page.len(), 8 + 2 * n);
    (0..n).map(|i| u16_at(&page, 8 + 2 * i)).collect()
}

const PLM_EVENT: Notice = Notice::AsyncEvent {
    host: Notice::ALL_HOSTS,
    kind: 0b010,
    info: 0x04,
    log_page: 0x0B,
};

#[test]
fn a_set_leaves_dtwin_when_its_read_budget_is_exhausted_and_says_so() {
    let mut h = plm_drive(&[]);
    let t = in_dtwin(&mut h);
    for k in 0..10 {
        h.submit_at(t, read_ns(1, k * 4096, t));
    }
    h.run_until(t + MS);
    assert_eq!(window(&mut h, 1), 1, "10 reads are within the budget");
    assert!(h.notices.is_empty());
    h.submit_at(h.now_ns(), read_ns(1, 0, h.now_ns()));
    h.run_until(t + 2 * MS);
    assert_eq!(h.notices, vec![(PLM_EVENT, t + MS)]);
    assert_eq!(aggregate(&mut h), vec![1]);
    let page = log_page(&mut h, 0x0A, 1);
    assert_eq!(page[0], 2, "the 11th read ended the DTWin");
    assert_eq!(
        u16_at(&page, 2),
        1 << 14,
        "autonomous transition: typical exceeded"
    );
    // Reading the set's page cleared its event and its aggregate entry.
    assert_eq!(u16_at(&log_page(&mut h, 0x0A, 1), 2), 0);
    assert!(aggregate(&mut h).is_empty());
    assert_eq!(counter(&h, "set1_dtwin_exits_reads"), 1.0);
}

#[test]
fn with_exit_on_reads_off_a_set_stays_in_dtwin_past_its_read_budget_but_not_its_write_budget() {
    let mut h = plm_drive(&[("gc.plm.exit_on_reads", "false")]);
    let t = in_dtwin(&mut h);
    for k in 0..30 {
        h.submit_at(t, read_ns(1, k * 4096, t));
    }
    h.run_until(t + MS);
    assert_eq!(
        window(&mut h, 1),
        1,
        "30 reads, 3 times DTWIN Reads Typical"
    );
    assert!(h.notices.is_empty());
    assert_eq!(counter(&h, "set1_dtwin_exits_reads"), 0.0);
    let page = log_page(&mut h, 0x0A, 1);
    assert_eq!(
        u64_at(&page, 32),
        10,
        "the log page still advertises 10 reads"
    );
    for k in 0..9 {
        h.submit_at(h.now_ns(), write_ns(1, k * 4096, h.now_ns()));
    }
    h.run_until(t + 2 * MS);
    assert_eq!(
        window(&mut h, 1),
        2,
        "the write budget still ends the DTWin"
    );
    assert_eq!(counter(&h, "set1_dtwin_exits_writes"), 1.0);
}

#[test]
fn a_set_leaves_dtwin_when_its_write_budget_is_exhausted() {
    let mut h = plm_drive(&[]);
    let t = in_dtwin(&mut h);
    for k in 0..9 {
        h.submit_at(t, write_ns(1, k * 4096, t));
    }
    h.run_until(t + MS);
    assert_eq!(window(&mut h, 1), 2);
    assert_eq!(h.notices.len(), 1);
    assert_eq!(counter(&h, "set1_dtwin_exits_writes"), 1.0);
}

#[test]
fn a_set_leaves_dtwin_when_its_time_maximum_passes() {
    let mut h = plm_drive(&[]);
    let t = in_dtwin(&mut h);
    h.run_until(t + 10 * MS - 1);
    assert_eq!(window(&mut h, 1), 1);
    h.run_until(t + 10 * MS);
    assert_eq!(window(&mut h, 1), 2);
    assert_eq!(h.notices, vec![(PLM_EVENT, t + 10 * MS)]);
    assert_eq!(counter(&h, "set1_dtwin_exits_time"), 1.0);
    // A window the host ends raises no event.
    assert_eq!(ask_dtwin(&mut h, 1), ControlStatus::Success);
    h.run_until(t + 12 * MS);
    assert_eq!(window(&mut h, 1), 1);
    assert_eq!(set_feature(&mut h, 0x14, 1, 0b010), ControlStatus::Success);
    assert_eq!(window(&mut h, 1), 2);
    assert_eq!(h.notices.len(), 1);
}

#[test]
fn an_emergency_forces_ndwin() {
    // A write cache of 4 pages: writes deferred in DTWin fill it, and the next one needs a
    // destage now (a Deterministic Excursion).
    let mut h = plm_drive(&[
        ("cache.bytes", "16k"),
        ("gc.plm.dtwin_writes_typical", "1000"),
    ]);
    let t = in_dtwin(&mut h);
    for k in 0..4 {
        h.submit_at(t, write_ns(1, k * 4096, t));
    }
    h.run_until(t + MS);
    assert_eq!(window(&mut h, 1), 1, "4 writes fit the cache");
    h.submit_at(h.now_ns(), write_ns(1, 5 * 4096, h.now_ns()));
    h.run_until(t + 2 * MS);
    let page = log_page(&mut h, 0x0A, 1);
    assert_eq!(page[0], 2);
    assert_eq!(u16_at(&page, 2), 1 << 15, "Deterministic Excursion");
    assert_eq!(counter(&h, "set1_dtwin_exits_excursion"), 1.0);
    assert_eq!(counter(&h, "destages_forced"), 0.0);
}

/// Erases of the blocks of NVM set `set` (0-based) so far.
fn set_erases(h: &Harness<Ssd>, set: u16) -> u64 {
    let geo = &h.stage.config().geo;
    geo.set_planes(set)
        .iter()
        .flat_map(|&p| (0..geo.blocks_per_plane).map(move |b| geo.block_index(p, b)))
        .map(|b| u64::from(h.stage.ftl().erase_count(b)))
        .sum()
}

#[test]
fn namespaces_live_in_their_sets_each_with_its_own_free_pool_and_gc() {
    let mut h = Harness::new(ssd(
        &[
            ("channels", "2"),
            ("chips_per_channel", "2"),
            ("dies_per_chip", "1"),
            ("blocks_per_plane", "32"),
            ("pages_per_block", "16"),
            ("page_bytes", "4096"),
            ("nvm_sets", "2"),
            ("ftl.mapping", "dram"),
            ("ftl.overprovisioning", "0.25"),
            ("cache.bytes", "0"),
            ("precondition.fill", "1"),
        ],
        1,
    ));
    let cap = h.stage.capacity_bytes();
    let per_set = u64::from(h.stage.config().geo.set_logical_pages());
    assert_eq!(cap, per_set * 4096);
    let mut rng = qoslab_engine::RngStream::new(1, "offsets");
    // Overwrite namespace 1 three times over: GC runs on set 0's planes only.
    h.run(8, 3 * per_set as usize, |now| {
        write_ns(1, rng.below(per_set) * 4096, now)
    });
    assert!(set_erases(&h, 0) > 0);
    assert_eq!(set_erases(&h, 1), 0);
    // Every page of namespace 2 is on set 1's planes, and a write there programs set 1.
    let geo = h.stage.config().geo.clone();
    for lpa in per_set as u32..2 * per_set as u32 {
        let ppa = h.stage.ftl().lookup(lpa);
        assert_eq!(geo.set_of_plane(geo.plane_of_ppa(ppa)), 1, "lpa {lpa}");
    }
    let done = h.run(1, 1, |now| write_ns(2, 0, now));
    assert_eq!(done[0].status, IoStatus::Ok);
    let ppa = h.stage.ftl().lookup(per_set as u32);
    assert_eq!(geo.set_of_plane(geo.plane_of_ppa(ppa)), 1);
    // A namespace the drive does not have fails at once.
    let done = h.run(1, 1, |now| write_ns(3, 0, now));
    assert_eq!(done[0].status, IoStatus::MediaError);
    let done = h.run(1, 1, |now| read_ns(2, per_set * 4096, now));
    assert_eq!(
        done[0].status,
        IoStatus::MediaError,
        "past the namespace's end"
    );
}

/// Both sets preconditioned full and written at random while the test alternates their
/// windows every 10 ms; returns the harness, the ms checked in DTWin and the DTWins entered.
fn alternating_run(total_ms: Ns, extra: &[(&str, &str)]) -> (Harness<Ssd>, u64, u64) {
    let mut o = vec![
        ("precondition.fill", "1"),
        ("gc.plm.dtwin_writes_typical", "10000"),
        ("gc.plm.dtwin_reads_typical", "100000"),
        ("gc.plm.dtwin_time_max_ns", "100ms"),
    ];
    o.extend_from_slice(extra);
    let mut h = plm_drive(&o);
    let per_set = u64::from(h.stage.config().geo.set_logical_pages());
    enable(&mut h, 1);
    enable(&mut h, 2);
    let mut rng = qoslab_engine::RngStream::new(3, "offsets");
    let (mut dtwin_erase_checks, mut entries) = (0, 0);
    let mut at = 0;
    for slot in 0..total_ms / 10 {
        let (dt, nd) = if slot % 2 == 0 { (1, 2) } else { (2, 1) };
        assert_eq!(set_feature(&mut h, 0x14, nd, 0b010), ControlStatus::Success);
        assert_eq!(ask_dtwin(&mut h, dt), ControlStatus::Success);
        // A write and a read every ms, each set in turn, until the slot ends; whenever
        // the DTWin set is in DTWin, its blocks see no erase.
        let end = (slot + 1) * 10 * MS;
        while at < end {
            let ns = 1 + (at / 1_000_000 % 2) as u32;
            let off = rng.below(per_set) * 4096;
            h.submit_at(at, write_ns(ns, off, at));
            h.submit_at(at, read_ns(3 - ns, off, at));
            at += 1_000_000;
        }
        let mut last = h.now_ns();
        while last < end {
            let step = (last + MS).min(end);
            let before = (window(&mut h, dt), set_erases(&h, dt - 1));
            h.run_until(step);
            let after = (window(&mut h, dt), set_erases(&h, dt - 1));
            if before.0 == 1 && after.0 == 1 {
                assert_eq!(before.1, after.1, "an erase on set {dt} in its DTWin");
                dtwin_erase_checks += 1;
            }
            last = step;
        }
        entries += u64::from(window(&mut h, dt) == 1);
    }
    (h, dtwin_erase_checks, entries)
}

#[test]
fn no_gc_program_or_erase_runs_on_a_set_in_its_dtwin() {
    let (h, checks, entries) = alternating_run(400, &[]);
    assert_eq!(counter(&h, "gc_forced_victims"), 0.0);
    // The run did what it should test: GC ran, and the sets spent time in DTWin.
    assert!(h.stage.ftl().stats.erases > 30, "{:?}", h.stage.ftl().stats);
    assert!(checks > 100, "{checks} checked ms");
    assert!(entries > 20, "{entries} DTWins");
    assert!(counter(&h, "set1_dtwin_entries") + counter(&h, "set2_dtwin_entries") > 20.0);
}

#[test]
fn a_read_whose_set_stays_in_dtwin_never_waits_behind_gc() {
    // Every read kept by the slow-read diagnostic, which splits each one's die time by what
    // the die did while the read waited.
    let (h, _, _) = alternating_run(400, &[("diag.slow_reads", "100000")]);
    let gc = [OpKind::Read, OpKind::Program, OpKind::Erase].map(|k| die_use(OpClass::Gc, k));
    let behind_gc = |t: &ReadTrace| gc.iter().map(|&u| t.die_ns[u]).sum::<Ns>();
    let traces: Vec<ReadTrace> = h.stage.slow_reads.as_ref().unwrap().reads().collect();
    assert_eq!(traces.len(), 400);
    let in_dtwin = |c: Copies| c.own == WindowState::Deterministic;
    let (mut deterministic, mut waited_outside) = (0, 0);
    for t in traces.iter().filter(|t| !t.cache_hit) {
        if in_dtwin(t.at_service) && in_dtwin(t.at_done) {
            deterministic += 1;
            assert_eq!(behind_gc(t), 0, "{t:?}");
        } else if behind_gc(t) > 0 {
            waited_outside += 1;
        }
    }
    // The run tests something: many reads were served in a DTWin, and outside one reads did
    // wait behind GC.
    assert!(deterministic > 100, "{deterministic} reads in DTWin");
    assert!(waited_outside > 0);
}

/// A run of `duration_ms` of simulated time on two sets that take turns in DTWin as the host
/// library has them do: every `window_ms` the next set is asked in, its log page is read every
/// 100 us until it reports DTWin, then the other is asked out (no windows with `window_ms`
/// 0: the bare drive). Random 4 KiB writes (to both copies) and reads arrive `writes` and
/// `reads` a second. The drive keeps its map in a mapping cache of 64 entries, so that reads
/// evict dirty entries and write them back, and tracks the background time its dies spend in
/// DTWin.
fn turns(
    duration_ms: u64,
    window_ms: u64,
    writes: u64,
    reads: u64,
    extra: &[(&str, &str)],
) -> Harness<Ssd> {
    let mut o = vec![
        ("precondition.fill", "1"),
        ("ftl.mapping", "cached"),
        ("ftl.cmt_bytes", "576"),
        ("ftl.translation_entry_bytes", "64"),
        ("gc.plm.dtwin_writes_typical", "1000000"),
        ("gc.plm.dtwin_reads_typical", "1000000"),
        ("gc.plm.dtwin_time_max_ns", "1s"),
        ("gc.plm.ndwin_time_min_low_ns", "0"),
    ];
    o.extend_from_slice(extra);
    let mut h = if window_ms == 0 {
        o.retain(|(k, _)| !k.starts_with("gc.plm"));
        let mut keys = drive_keys();
        keys.extend_from_slice(&o);
        Harness::new(ssd(&keys, 1))
    } else {
        plm_drive(&o)
    };
    let per_set = u64::from(h.stage.config().geo.set_logical_pages());
    let end = duration_ms * MS;
    let mut rng = qoslab_engine::RngStream::new(7, "turns");
    for (rate, write) in [(writes, true), (reads, false)] {
        if rate == 0 {
            continue;
        }
        let gap = 1_000_000_000 / rate;
        let mut at = gap / 2;
        while at < end {
            let off = rng.below(per_set) * 4096;
            if write {
                h.submit_at(at, write_ns(1, off, at));
                h.submit_at(at, write_ns(2, off, at));
            } else {
                h.submit_at(at, read_ns(1 + rng.below(2) as u32, off, at));
            }
            at += gap;
        }
    }
    if window_ms == 0 {
        h.run_all();
        return h;
    }
    h.stage.audit_dtwin_background();
    enable(&mut h, 1);
    enable(&mut h, 2);
    let mut start = 0;
    let mut turn = 0;
    while start < end {
        h.run_until(start);
        let (dt, nd) = if turn % 2 == 0 { (1, 2) } else { (2, 1) };
        assert_eq!(ask_dtwin(&mut h, dt), ControlStatus::Success);
        let asked = h.now_ns();
        while window(&mut h, dt) != 1 {
            assert!(
                h.now_ns() < asked + window_ms * MS,
                "set {dt} still out of DTWin"
            );
            let step = h.now_ns() + 100_000;
            h.run_until(step);
        }
        assert_eq!(set_feature(&mut h, 0x14, nd, 0b010), ControlStatus::Success);
        start += window_ms * MS;
        turn += 1;
    }
    assert_eq!(set_feature(&mut h, 0x14, 1, 0b010), ControlStatus::Success);
    assert_eq!(set_feature(&mut h, 0x14, 2, 0b010), ControlStatus::Success);
    h.run_all();
    h
}

#[test]
fn no_background_operation_of_any_kind_runs_on_a_set_in_dtwin_over_a_15_minute_run() {
    // GC reads, programs and erases, destages (and their read-modify-write reads) and
    // mapping write-backs: the die time of each, counted while its set is in DTWin.
    let h = turns(15 * 60_000, 100, 100, 200, &[]);
    for set in [1, 2] {
        assert_eq!(
            counter(&h, &format!("set{set}_background_in_dtwin_us")),
            0.0
        );
    }
    assert_eq!(counter(&h, "gc_forced_victims"), 0.0);
    // The run had background work of every kind, and spent most of its time in DTWin.
    let f = &h.stage.ftl().stats;
    assert!(f.gc_victims > 1_000 && f.host_programs > 100_000, "{f:?}");
    assert!(counter(&h, "mapping_writes") > 10_000.0);
    assert!(counter(&h, "dtwin_entries") >= 8_999.0);
    let dtwin_ms = counter(&h, "set1_dtwin_ms") + counter(&h, "set2_dtwin_ms");
    assert!(dtwin_ms > 0.95 * 900_000.0, "{dtwin_ms} ms in DTWin");
}

#[test]
fn the_advertised_ndwin_time_minimum_low_bounds_every_dtwin_entry_wait() {
    // A set asked into DTWin stops starting background work at once and waits only for the
    // operations its dies run: an erase (1 ms here) and its channel transfers at most.
    let mut h = turns(15 * 60_000, 100, 100, 200, &[]);
    let advertised = u64_at(&log_page(&mut h, 0x0A, 1), 64);
    let bound = h.stage.config().background_end_bound_ns();
    assert_eq!(advertised, bound.div_ceil(MS));
    assert_eq!(
        counter(&h, "ndwin_time_min_low_advertised_ms"),
        advertised as f64
    );
    let longest = counter(&h, "dtwin_entry_wait_max_ms");
    assert!(
        longest > 0.0 && longest <= advertised as f64,
        "{longest} ms"
    );
    // The tunable raises it (never lowers it).
    let mut h = plm_drive(&[("gc.plm.ndwin_time_min_low_ns", "7ms")]);
    enable(&mut h, 1);
    assert_eq!(u64_at(&log_page(&mut h, 0x0A, 1), 64), 7);
}

#[test]
fn a_set_asked_into_dtwin_holds_its_queued_gc_moves_until_the_next_ndwin() {
    // A victim with moves still to come when the set is asked in: the moves not started stay
    // queued, page by page, and the victim is collected and erased in the next NDWin.
    let mut h = plm_drive(&[
        ("precondition.fill", "1"),
        ("gc.plm.dtwin_writes_typical", "10000"),
    ]);
    let per_set = u64::from(h.stage.config().geo.set_logical_pages());
    let planes = h.stage.config().geo.set_planes(0).to_vec();
    enable(&mut h, 1);
    let mut rng = qoslab_engine::RngStream::new(5, "offsets");
    for k in 0..100 {
        let at = k * 200_000;
        h.submit_at(at, write_ns(1, rng.below(per_set) * 4096, at));
    }
    let busy = |h: &Harness<Ssd>| {
        planes
            .iter()
            .find(|&&p| h.stage.gc[p as usize].moves_left > 4)
            .copied()
    };
    while busy(&h).is_none() {
        assert!(h.now_ns() < 100 * MS, "GC ran before the ask");
        let step = h.now_ns() + 50_000;
        h.run_until(step);
    }
    let plane = busy(&h).unwrap();
    let victim = h.stage.gc[plane as usize].victim.unwrap();
    let erases = h.stage.ftl().erase_count(victim);
    assert_eq!(ask_dtwin(&mut h, 1), ControlStatus::Success);
    let asked = h.now_ns();
    while window(&mut h, 1) != 1 {
        let step = h.now_ns() + 10_000;
        h.run_until(step);
    }
    let entered = h.now_ns();
    assert!(entered - asked <= h.stage.config().background_end_bound_ns());
    // The DTWin lasts 10 ms: the victim keeps its valid pages and its moves wait.
    let left = h.stage.gc[plane as usize].moves_left;
    assert!(left > 0 && h.stage.ftl().valid_pages(victim) > 0);
    h.run_until(entered + 9 * MS);
    assert_eq!(window(&mut h, 1), 1);
    assert_eq!(h.stage.gc[plane as usize].moves_left, left);
    assert_eq!(h.stage.ftl().erase_count(victim), erases);
    // In the NDWin that follows, the victim is collected to the end and erased.
    assert_eq!(set_feature(&mut h, 0x14, 1, 0b010), ControlStatus::Success);
    h.run_until(entered + 300 * MS);
    assert_eq!(h.stage.ftl().erase_count(victim), erases + 1);
    h.stage.ftl().check();
}

/// GC victims of 10 s of [`turns`] with 100 ms windows (`plm`) or without windows (`bare`),
/// the drive preconditioned to `free_pool`, GC by the greedy policy.
fn victims(drive: &str, free_pool: &str, writes: u64) -> u64 {
    let window_ms = if drive == "plm" { 100 } else { 0 };
    // GC wants 16 free blocks a plane; the floor leaves 1 (3 before the host's and GC's
    // frontiers open).
    let o = [
        ("precondition.free_pool", free_pool),
        ("gc.victim", "greedy"),
        ("gc.threshold", "0.25"),
        ("ftl.overprovisioning", "0.35"),
    ];
    turns(10_000, window_ms, writes, 200, &o)
        .stage
        .ftl()
        .stats
        .gc_victims
}

#[test]
fn a_read_only_workload_collects_nothing_under_plm_as_on_the_bare_drive() {
    // Even a drive left at the free-block floor, far below the GC threshold: GC starts only
    // when a write takes a free block, and PLM's windows start none.
    for pool in ["floor", "threshold"] {
        assert_eq!(victims("bare", pool, 0), 0, "{pool}");
        assert_eq!(victims("plm", pool, 0), 0, "{pool}");
    }
}

#[test]
fn plm_collects_no_more_than_the_bare_drive_for_the_same_writes() {
    let bare = victims("bare", "threshold", 100);
    let plm = victims("plm", "threshold", 100);
    assert!(bare > 100, "{bare} victims");
    assert!(plm <= bare, "PLM {plm} against bare {bare} victims");
}

#[test]
fn a_read_hit_waits_out_the_dram_backlog_of_a_write_burst_beyond_its_bandwidth() {
    // The write cache's DRAM serves one access at a time: 4 KiB takes tRCD + tCL + 2048
    // double-rate transfers at 100 MT/s = 26 + 20,480 ns. Writes arriving every 10 us ask
    // for rho = 2.05 of it; over T = 10 ms the backlog grows to (rho - 1) T, and a read that
    // hits the cache at the end waits it out before its own access.
    let mut h = plm_drive(&[("cache.bytes", "64m")]);
    let access: Ns = 26 + 20_480;
    let n: u64 = 1_000;
    for k in 0..n {
        let at = k * 10_000;
        h.submit_at(at, write_ns(1, k * 4096, at));
    }
    let t = n * 10_000;
    let read = h.submit_at(t, read_ns(1, 0, t));
    h.run_until(t + 20 * MS);
    let done = h
        .completed
        .iter()
        .find(|&&(id, _)| id == read)
        .expect("the read completed")
        .1;
    let backlog = n * access - t;
    let overhead = h.stage.config().read_overhead_ns;
    assert_eq!(counter(&h, "cache_read_hits"), 1.0);
    assert_eq!(done - t, backlog + access + overhead);
}
