//! The SSD against closed forms: exact QD1 latencies, saturation bounds, write amplification of
//! the mean-field model, write-cache and power-loss semantics.

use super::flash::{FlashOp, OpClass, OpKind};
use super::*;
use crate::Device;
use qoslab_engine::tunable::RawValue;
use qoslab_engine::{Done, EventQueue, Harness, Request, Requests};
use qoslab_engine::{ReqFlags, RngStream};

/// A device from `--set`-style overrides (`nand.erase_ns`, `2ms`) of the default (MQSim)
/// configuration.
pub(crate) fn ssd(overrides: &[(&str, &str)], seed: u64) -> Ssd {
    Ssd::new(ssd_config(overrides), seed)
}

/// The configuration of [`ssd`]: each override goes to the plug-in sub-table its key names
/// (`gc.rga.choices`), else to `[media]`.
pub(crate) fn ssd_config(overrides: &[(&str, &str)]) -> SsdConfig {
    let mut s = Settings::defaults("media", config::SSD_TUNABLES);
    let mut subs: Vec<Settings> = config::sub_tables()
        .iter()
        .map(|t| Settings::defaults(&format!("media.{}", t.key), t.tunables))
        .collect();
    for (key, value) in overrides {
        let raw = RawValue::from_cli(value);
        let sub = subs
            .iter_mut()
            .find(|t| key.starts_with(&format!("{}.", &t.section()["media.".len()..])));
        match sub {
            Some(t) => {
                let name = &key[t.section().len() - "media.".len() + 1..];
                t.set(name, &raw).unwrap()
            }
            None => s.set(key, &raw).unwrap(),
        }
    }
    SsdConfig::from_settings(&s, &subs).unwrap()
}

pub(crate) fn read(offset: u64, len: u64, now: Ns) -> Request {
    Request::new(Op::Read, offset, len, 0, now)
}

pub(crate) fn write(offset: u64, len: u64, now: Ns) -> Request {
    Request::new(Op::Write, offset, len, 0, now)
}

/// Completions per second between the `skip`-th completion and the `skip`-th from the end
/// (leaving out the start, when every die begins at once, and the drain).
pub(crate) fn steady_rate(done: &[Done], skip: usize) -> f64 {
    let (a, b) = (&done[skip], &done[done.len() - 1 - skip]);
    (done.len() - 1 - 2 * skip) as f64 / ((b.done_ns - a.done_ns) as f64 * 1e-9)
}

/// Value at quantile `q` (nearest rank) of `xs`.
pub(crate) fn quantile(xs: &mut [Ns], q: f64) -> Ns {
    xs.sort_unstable();
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    xs[rank - 1]
}

// ---- MQSim's default drive at QD1 -------------------------------------------------------------

/// The read command and address on the channel (ONFI NV-DDR2 tCS + 6 tWC + tWB + tRR = 290 ns),
/// tR (MQSim's Page_Read_Latency 75 us) and 4096 B out over a 333 MT/s x 8-bit channel (MQSim's
/// integer timing: 3 ns per byte, 12,288 ns): 290 + 75,000 + 12,288 = 87,578 ns, worked out by
/// hand (docs/media.md, "QD1 read"), not by the code under test.
const QD1_READ_NS: Ns = 87_578;
/// A mapping miss first reads 512 B of the translation page: 290 + 75,000 + 512 x 3 = 76,826 ns.
const MAPPING_READ_NS: Ns = 76_826;

#[test]
fn qd1_4k_random_read_is_command_plus_tr_plus_transfer_exactly() {
    let mut h = Harness::new(ssd(&[("ftl.mapping", "dram")], 1));
    let cap = h.stage.capacity_bytes();
    let mut rng = RngStream::new(1, "offsets");
    let done = h.run(1, 2000, |now| read(rng.below(cap / 4096) * 4096, 4096, now));
    assert!(
        done.iter().all(|d| d.latency_ns == QD1_READ_NS),
        "{:?}",
        &done[..3]
    );
}

#[test]
fn qd1_read_with_mqsims_2mib_mapping_cache_adds_one_translation_read() {
    let mut h = Harness::new(ssd(&[], 1));
    let cap = h.stage.capacity_bytes();
    let mut rng = RngStream::new(1, "offsets");
    let done = h.run(1, 2000, |now| read(rng.below(cap / 4096) * 4096, 4096, now));
    let misses = done
        .iter()
        .filter(|d| d.latency_ns == QD1_READ_NS + MAPPING_READ_NS)
        .count();
    let hits = done.iter().filter(|d| d.latency_ns == QD1_READ_NS).count();
    assert_eq!(hits + misses, done.len());
    // 233,016 cached entries cover 0.37 % of 62.4 M pages.
    assert!(misses >= 1980, "{misses} misses");
}

/// `precondition.warm_cmt`: the mapping cache starts full of clean entries of the first written
/// pages (2 MiB of 9-byte entries: 233,016 pages), so a page among them is read without its
/// translation read from the first read on; a page past them still misses, and a cold cache
/// misses on each first read.
#[test]
fn a_warm_mapping_cache_serves_the_first_read_of_its_pages_without_a_translation_read() {
    let fill = ("precondition.fill", "0.75");
    let warm = [fill, ("precondition.warm_cmt", "true")];
    // A logical page is a flash page (8 KiB here): 4 KiB reads at the start of pages 1,009
    // apart, each its page's first read.
    let page_bytes = u64::from(ssd_config(&[]).geo.page_bytes);
    let first_reads = |cfg: &[(&str, &str)], from: u64| {
        let mut h = Harness::new(ssd(cfg, 1));
        let mut page = from;
        h.run(1, 200, |now| {
            page += 1009;
            read(page * page_bytes, 4096, now)
        })
    };
    assert!(
        first_reads(&warm, 0)
            .iter()
            .all(|d| d.latency_ns == QD1_READ_NS)
    );
    let missed = |done: Vec<Done>| {
        done.iter()
            .all(|d| d.latency_ns == QD1_READ_NS + MAPPING_READ_NS)
    };
    assert!(missed(first_reads(&warm, 233_016)));
    assert!(missed(first_reads(&[fill], 0)));
    // With two NVM sets each set's share (116,508 entries) holds that set's first pages.
    let cfg = ssd_config(&[fill, ("precondition.warm_cmt", "true"), ("nvm_sets", "2")]);
    let stride = cfg.geo.set_logical_pages();
    let written = u64::from((0.75 * f64::from(stride)).floor() as u32) * 2;
    let cmt = warm_cmt(&cfg, written);
    assert_eq!(cmt.len(), 233_016);
    for set in 0..2u32 {
        let base = set * stride;
        assert!(cmt.contains(base) && cmt.contains(base + 116_507));
        assert!(!cmt.contains(base + 116_508));
    }
}

// ---- saturation -------------------------------------------------------------------------------

/// min(dies / tR, channels x channel rate / 4 KiB) for MQSim's default drive, by hand: the
/// channels bind (8 / (4096 B x 3 ns/B) = 8 / 12.288 us = 651,041.7/s; 64 dies / 75 us =
/// 853,333/s).
const RANDOM_READ_BOUND_IOPS: f64 = 651_041.7;

#[test]
fn saturated_4k_random_reads_reach_the_channel_bound() {
    let mut h = Harness::new(ssd(&[("ftl.mapping", "dram")], 1));
    let cap = h.stage.capacity_bytes();
    let mut rng = RngStream::new(2, "offsets");
    let done = h.run(1024, 400_000, |now| {
        read(rng.below(cap / 4096) * 4096, 4096, now)
    });
    let iops = steady_rate(&done, 2048);
    let bound = RANDOM_READ_BOUND_IOPS;
    assert!(
        iops <= bound && iops > 0.95 * bound,
        "{iops:.0} IOPS vs {bound:.0}"
    );
}

#[test]
fn sequential_128k_reads_reach_the_channel_bandwidth() {
    let mut h = Harness::new(ssd(&[("ftl.mapping", "dram")], 1));
    let mut offset = 0;
    let done = h.run(8, 20_000, |now| {
        offset += 131_072;
        read(offset - 131_072, 131_072, now)
    });
    let bytes_per_ns = done.len() as f64 * 131_072.0 / h.now_ns() as f64;
    let bound = 8.0 / 3.0; // 8 channels x 1 B / 3 ns
    assert!(
        bytes_per_ns <= bound && bytes_per_ns > 0.95 * bound,
        "{bytes_per_ns:.3} GB/s vs {bound:.3}"
    );
}

// ---- write amplification ----------------------------------------------------------------------

/// The greedy fixed point of the mean-field model, written out independently of
/// `mean_field.rs`. Blocks enter at b valid pages at the GC rate r and lose pages at rate
/// j / (rho b), so above the victims' level j*, j x_j = c with c = rho b r (x_j = c / j). The
/// level j* holds the rest, m = 1 - c (H_b - H_j*); the blocks leaving it downwards are
/// collected at once, which cannot outrun what flows in: j* m <= c. The valid pages,
/// c (b - j*) + j* m = rho b, fix c; WA = b r = c / rho.
fn greedy_mean_field_wa(rho: f64, b: usize) -> f64 {
    let h = |n: usize| (1..=n).map(|k| 1.0 / k as f64).sum::<f64>();
    let target = rho * b as f64;
    for j in (0..b).rev() {
        let jf = j as f64;
        let tail = h(b) - h(j);
        let c = (target - jf) / ((b - j) as f64 - jf * tail);
        let m = 1.0 - c * tail;
        if c > 0.0 && (0.0..=1.0).contains(&m) && jf * m <= c {
            return c / rho;
        }
    }
    unreachable!("no level for rho {rho}")
}

#[test]
fn the_independent_greedy_fixed_point_matches_the_model_module() {
    for rho in [0.93, 0.85, 0.72] {
        let ours = mean_field::steady_state(64, rho, mean_field::Rule::Greedy).write_amplification;
        let theirs = greedy_mean_field_wa(rho, 64);
        assert!((ours / theirs - 1.0).abs() < 1e-6, "{ours} vs {theirs}");
    }
}

/// Uniform random page writes on a small drive (2 planes of 512 blocks of 64 pages, so that a
/// test takes about a second) filled sequentially, after three drive writes of warm-up.
fn measured_wa(op: &str, policy: &str, fill: &str) -> (f64, f64) {
    let dev = ssd(
        &[
            ("channels", "1"),
            ("chips_per_channel", "1"),
            ("dies_per_chip", "1"),
            ("planes_per_die", "2"),
            ("blocks_per_plane", "512"),
            ("pages_per_block", "64"),
            ("ftl.overprovisioning", op),
            ("gc.victim", policy),
            ("gc.threshold", "0"),
            ("ftl.mapping", "dram"),
            ("cache.bytes", "0"),
            ("precondition.fill", "1"),
            ("precondition.pattern", fill),
        ],
        1,
    );
    let mut h = Harness::new(dev);
    let pages = u64::from(h.stage.config().logical_pages);
    let mut rng = RngStream::new(1, "offsets");
    let mut next = |now| write(rng.below(pages) * 8192, 8192, now);
    let warmup = if fill == "sequential" { 3 * pages } else { 0 };
    h.run(16, warmup as usize, &mut next);
    h.stage.reset_ftl_stats();
    h.run(16, (3 * pages) as usize, &mut next);
    // The GC keeps 2 free blocks a plane and the host and GC frontiers are half written on
    // average: the pages in circulation are those of 509.5 of the 512 blocks.
    let rho_eff = pages as f64 / 2.0 / (509.5 * 64.0);
    (h.stage.ftl().stats.write_amplification(), rho_eff)
}

#[test]
fn greedy_write_amplification_follows_the_mean_field_model_at_7_15_28_percent_op() {
    for op in ["0.07", "0.15", "0.28"] {
        let (wa, rho_eff) = measured_wa(op, "greedy", "sequential");
        let rho = 1.0 - op.parse::<f64>().unwrap();
        let model = greedy_mean_field_wa(rho, 64);
        assert!(
            (wa / model - 1.0).abs() < 0.10,
            "OP {op}: WA {wa:.3} vs {model:.3}"
        );
        let model_eff = greedy_mean_field_wa(rho_eff, 64);
        assert!(
            (wa / model_eff - 1.0).abs() < 0.03,
            "OP {op}: WA {wa:.3} vs {model_eff:.3}"
        );
    }
}

#[test]
fn rga_write_amplification_follows_the_d_choices_model() {
    let (wa, rho_eff) = measured_wa("0.07", "rga", "sequential");
    // d = log2(512) = 9 random candidates.
    let model = mean_field::steady_state(64, rho_eff, mean_field::Rule::Choices(9));
    assert!(
        (wa / model.write_amplification - 1.0).abs() < 0.05,
        "WA {wa:.3} vs {:.3}",
        model.write_amplification
    );
    let (greedy, _) = measured_wa("0.07", "greedy", "sequential");
    assert!(
        wa > greedy,
        "RGA {wa:.3} should do worse than greedy {greedy:.3}"
    );
}

#[test]
fn random_preconditioning_starts_the_drive_in_its_steady_state() {
    // No warm-up: the first three drive writes already show the steady-state WA.
    let (wa, rho_eff) = measured_wa("0.07", "greedy", "random");
    let model = greedy_mean_field_wa(rho_eff, 64);
    assert!((wa / model - 1.0).abs() < 0.03, "WA {wa:.3} vs {model:.3}");
}

/// The bare drive of the PLM study in miniature: MQSim's blocks of 256 pages, 7 % over-
/// provisioning, GC at 5 % free blocks by RGA, 75 % of the logical pages written, the free
/// pool left as `free_pool` says. Uniform random 8 KiB writes over the written pages, two
/// of them in turn at QD 1 every 100 us (a load GC keeps pace with), for `drive_writes` times
/// the written pages, from the start (no warm-up). Returns the measured write amplification
/// and the preconditioner's mean-field one.
fn study_drive_wa(free_pool: &str, drive_writes: u64) -> (f64, f64) {
    let dev = ssd(
        &[
            ("channels", "1"),
            ("chips_per_channel", "2"),
            ("dies_per_chip", "1"),
            ("planes_per_die", "2"),
            ("blocks_per_plane", "256"),
            ("pages_per_block", "256"),
            ("ftl.mapping", "dram"),
            ("cache.bytes", "0"),
            ("precondition.fill", "0.75"),
            ("precondition.free_pool", free_pool),
        ],
        1,
    );
    let mut h = Harness::new(dev);
    let model = h.stage.precondition_report().model_write_amplification;
    let mapped = h.stage.precondition_report().mapped_pages;
    let mut rng = RngStream::new(1, "offsets");
    let mut at = 0;
    for _ in 0..drive_writes * mapped {
        h.submit_at(at, write(rng.below(mapped) * 8192, 8192, at));
        at += 100_000;
    }
    h.run_all();
    (h.stage.ftl().stats.write_amplification(), model)
}

#[test]
fn a_drive_preconditioned_to_its_gc_threshold_is_in_steady_state_from_the_start() {
    // The state GC keeps when it keeps pace with the writes (the free pool at its threshold):
    // the write amplification of the first two drive writes is the mean-field model's (measured
    // 1.96 against 2.17: the model's many-block limit of RGA's d = 8 choices among 242 blocks).
    let (wa, model) = study_drive_wa("threshold", 2);
    assert!(model > 1.5, "model WA {model:.3}");
    assert!(
        (wa / model - 1.0).abs() < 0.15,
        "WA {wa:.3} vs model {model:.3}"
    );
}

// ---- read tails under GC ----------------------------------------------------------------------

/// A 70/30 random 4 KiB mix at QD32 on a small drive with MQSim's timings, filled and in GC
/// steady state from the start. Returns the reads' latencies and the GC victims collected.
fn mixed_read_latencies(gc_timed: &str, erase_suspend: &str) -> (Vec<Ns>, f64) {
    let dev = ssd(
        &[
            ("channels", "4"),
            ("chips_per_channel", "2"),
            ("dies_per_chip", "1"),
            ("planes_per_die", "2"),
            ("blocks_per_plane", "256"),
            ("pages_per_block", "64"),
            ("ftl.mapping", "dram"),
            ("gc.timed", gc_timed),
            ("nand.erase_suspend", erase_suspend),
            ("precondition.fill", "1"),
        ],
        1,
    );
    let mut h = Harness::new(dev);
    let sectors = h.stage.capacity_bytes() / 4096;
    let mut rng = RngStream::new(1, "offsets");
    let done = h.run(32, 300_000, |now| {
        let offset = rng.below(sectors) * 4096;
        if rng.uniform() < 0.7 {
            read(offset, 4096, now)
        } else {
            write(offset, 4096, now)
        }
    });
    let victims = h
        .stage
        .counters()
        .into_iter()
        .find(|(k, _)| k == "gc_victims")
        .unwrap()
        .1;
    let reads = done
        .iter()
        .filter(|d| d.op == Op::Read)
        .map(|d| d.latency_ns)
        .collect();
    (reads, victims)
}

#[test]
fn gc_puts_erases_into_the_read_tail_and_without_gc_work_the_tail_is_programs_only() {
    let (mut with_gc, victims) = mixed_read_latencies("true", "false");
    let (mut without, victims_free) = mixed_read_latencies("false", "false");
    assert!(
        victims > 100.0 && victims_free > 100.0,
        "GC ran in both: {victims} {victims_free}"
    );
    let tail_gc = quantile(&mut with_gc, 0.9999);
    let tail_free = quantile(&mut without, 0.9999);
    // A read that finds its die erasing waits up to tBERS = 3.8 ms.
    assert!(tail_gc >= 3_800_000, "p99.99 with GC {tail_gc} ns");
    // Without GC on the dies a read waits at most for a program (750 us) and the reads queued
    // ahead of it.
    assert!(
        tail_free < 1_500_000,
        "p99.99 without GC work {tail_free} ns"
    );
    assert!(quantile(&mut with_gc, 0.5) > quantile(&mut without, 0.5));
}

#[test]
fn erase_suspension_takes_erases_out_of_the_read_tail() {
    let (mut suspended, _) = mixed_read_latencies("true", "true");
    // A read waits at most the 700 us suspend time (or the rest of an erase shorter than the
    // 700 us threshold) instead of tBERS.
    assert!(quantile(&mut suspended, 0.9999) < 1_500_000);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let (a, _) = mixed_read_latencies("true", "true");
    let (b, _) = mixed_read_latencies("true", "true");
    assert_eq!(a, b);
}

// ---- write cache, FLUSH, FUA, power loss -------------------------------------------------------

/// One die, one plane, 64 blocks of 64 pages of 8 KiB (20 % spare), a 64-page cache that destages only when
/// it must (writeback_start = 1), MQSim's flash and DRAM timings.
fn tiny(extra: &[(&str, &str)]) -> Harness<Ssd> {
    let mut settings = vec![
        ("channels", "1"),
        ("chips_per_channel", "1"),
        ("dies_per_chip", "1"),
        ("planes_per_die", "1"),
        ("blocks_per_plane", "64"),
        ("pages_per_block", "64"),
        ("ftl.mapping", "dram"),
        ("cache.bytes", "512k"),
        ("cache.writeback_start", "1"),
        ("ftl.overprovisioning", "0.2"),
    ];
    settings.extend_from_slice(extra);
    Harness::new(ssd(&settings, 1))
}

/// 8 KiB through MQSim's DRAM: tRCD + tCL + 4096 x 10 ns.
const DRAM_8K_NS: Ns = 13 + 13 + 4096 * 10;
/// Program command + 8 KiB over the channel + tPROG.
const PROGRAM_NS: Ns = 361 + 8192 * 3 + 750_000;

/// Runs one request alone and returns its latency and status.
fn alone(h: &mut Harness<Ssd>, req: Request) -> Done {
    h.submit(req);
    let mut out = Vec::new();
    assert!(h.step(&mut out));
    assert_eq!(out.len(), 1);
    out[0]
}

fn flush(now: Ns) -> Request {
    Request::new(Op::Flush, 0, 0, 0, now)
}

fn fua(mut req: Request) -> Request {
    req.flags |= ReqFlags::FUA;
    req
}

#[test]
fn writes_complete_at_dram_speed_until_the_cache_is_full() {
    let mut h = tiny(&[]);
    let mut offset = 0;
    let done = h.run(1, 66, |now| {
        offset += 8192;
        write(offset - 8192, 8192, now)
    });
    assert!(
        done[..64].iter().all(|d| d.latency_ns == DRAM_8K_NS),
        "{:?}",
        done[0]
    );
    // The 65th waits for the oldest page to be programmed, then moves into DRAM.
    assert_eq!(done[64].latency_ns, PROGRAM_NS + DRAM_8K_NS);
}

#[test]
fn flush_takes_exactly_the_time_to_program_the_dirty_pages() {
    let mut h = tiny(&[]);
    for i in 0..10 {
        let now = h.now_ns();
        assert_eq!(
            alone(&mut h, write(i * 8192, 8192, now)).latency_ns,
            DRAM_8K_NS
        );
    }
    let now = h.now_ns();
    assert_eq!(alone(&mut h, flush(now)).latency_ns, 10 * PROGRAM_NS);
    // Nothing is dirty any more: the next flush is immediate.
    let now = h.now_ns();
    assert_eq!(alone(&mut h, flush(now)).latency_ns, 0);
}

#[test]
fn with_plp_flush_is_immediate_and_fua_needs_no_program() {
    let mut h = tiny(&[("cache.plp", "true")]);
    for i in 0..10 {
        let now = h.now_ns();
        alone(&mut h, write(i * 8192, 8192, now));
    }
    let now = h.now_ns();
    assert_eq!(alone(&mut h, flush(now)).latency_ns, 0);
    let now = h.now_ns();
    assert_eq!(
        alone(&mut h, fua(write(0, 8192, now))).latency_ns,
        DRAM_8K_NS
    );
}

#[test]
fn fua_without_plp_completes_when_its_page_is_programmed_ahead_of_older_dirty_data() {
    let mut h = tiny(&[]);
    for i in 0..5 {
        let now = h.now_ns();
        alone(&mut h, write(i * 8192, 8192, now));
    }
    let now = h.now_ns();
    let d = alone(&mut h, fua(write(100 * 8192, 8192, now)));
    assert_eq!(d.latency_ns, DRAM_8K_NS + PROGRAM_NS);
}

/// W1, W2, FLUSH, W3, W4 (FUA), W5, all completed, then the power fails.
fn power_fail_after_a_script(plp: &str) -> Vec<LostWrite> {
    let mut h = tiny(&[("cache.plp", plp), ("cache.power_fail_ns", "20ms")]);
    let mut ids = Vec::new();
    for (i, f) in [false, false].into_iter().enumerate() {
        let now = h.now_ns();
        let mut r = write(i as u64 * 8192, 8192, now);
        r.job = i as u32 + 1;
        if f {
            r = fua(r);
        }
        ids.push(alone(&mut h, r));
    }
    let now = h.now_ns();
    alone(&mut h, flush(now));
    for (job, f) in [(3u32, false), (4, true), (5, false)] {
        let now = h.now_ns();
        let mut r = write(u64::from(job) * 8192, 8192, now);
        r.job = job;
        if f {
            r = fua(r);
        }
        assert_eq!(alone(&mut h, r).status, IoStatus::Ok);
    }
    assert!(h.now_ns() < 20_000_000);
    h.settle();
    h.stage.lost_writes().to_vec()
}

#[test]
fn power_fail_without_plp_loses_exactly_the_unflushed_non_fua_writes() {
    let lost = power_fail_after_a_script("false");
    let jobs: Vec<u32> = lost.iter().map(|l| l.job).collect();
    assert_eq!(jobs, vec![3, 5]);
    assert!(lost.iter().all(|l| l.acknowledged && l.len_bytes == 8192));
}

#[test]
fn power_fail_with_plp_loses_no_completed_write() {
    assert!(power_fail_after_a_script("true").is_empty());
}

#[test]
fn a_write_in_flight_at_the_power_failure_fails_and_is_reported_unacknowledged() {
    // The failure hits 10 us into the write's 41 us DRAM transfer.
    let mut h = tiny(&[("cache.power_fail_ns", "10us")]);
    let now = h.now_ns();
    let d = alone(&mut h, write(0, 8192, now));
    assert_eq!(d.status, IoStatus::PowerLoss);
    assert_eq!(d.latency_ns, 10_000);
    h.settle();
    let lost = h.stage.lost_writes();
    assert_eq!(lost.len(), 1);
    assert!(!lost[0].acknowledged);
    // The drive works again after the failure.
    let now = h.now_ns();
    assert_eq!(alone(&mut h, write(0, 8192, now)).latency_ns, DRAM_8K_NS);
}

// ---- the flash array's queue of GC reads ----------------------------------------------------

/// Runs a flash array alone: at the start, host reads and programs on both planes of die 0 and
/// a victim's GC reads on plane 1 (one by one through `submit`, or at once through
/// `submit_gc_reads`); each finished GC read queues a copy program on one plane or the other,
/// and every third completion queues another host read. Returns (time, page, owner) of every completion.
/// The flash array's context in a script: its events go to a queue the script pops itself.
struct ScriptCtx<'a> {
    now: Ns,
    reqs: &'a mut Requests,
    queue: &'a mut EventQueue<SsdEvent>,
}

impl StageCtx<SsdEvent> for ScriptCtx<'_> {
    fn now_ns(&self) -> Ns {
        self.now
    }
    fn reqs(&self) -> &Requests {
        self.reqs
    }
    fn reqs_mut(&mut self) -> &mut Requests {
        self.reqs
    }
    fn schedule(&mut self, at_ns: Ns, ev: SsdEvent) {
        self.queue.schedule(at_ns, ev);
    }
    fn schedule_now(&mut self, ev: SsdEvent) {
        self.queue.schedule(self.now, ev);
    }
    fn dispatch(&mut self, id: ReqId) -> qoslab_engine::Admission {
        unreachable!("the flash array dispatched {id:?}")
    }
    fn complete(&mut self, id: ReqId) {
        unreachable!("the flash array completed {id:?}")
    }
    fn room_above(&mut self) {}
    fn notify_above(&mut self, _: qoslab_engine::Notice) {}
}

fn flash_script(gc_reads_at_once: bool) -> Vec<(Ns, u32, u32)> {
    let cfg = ssd_config(&[
        ("channels", "1"),
        ("chips_per_channel", "2"),
        ("dies_per_chip", "1"),
        ("blocks_per_plane", "16"),
        ("pages_per_block", "16"),
        ("ftl.overprovisioning", "0.5"),
    ]);
    let plane_pages = cfg.geo.pages_per_plane();
    let mut flash: FlashArray<u32> = FlashArray::new(&cfg);
    let (mut reqs, mut queue) = (Requests::new(), EventQueue::new());
    let op = |kind, class, ppa, owner| FlashOp {
        kind,
        class,
        ppa,
        bytes: 8192,
        owner,
    };
    let victim: Vec<(u32, u32)> = [1, 2, 5, 6, 7, 11]
        .iter()
        .map(|&p| (plane_pages + 16 + p, 100 + p))
        .collect();
    let mut ctx = ScriptCtx {
        now: 0,
        reqs: &mut reqs,
        queue: &mut queue,
    };
    flash.submit(op(OpKind::Program, OpClass::HostWrite, 3, 1), &mut ctx);
    flash.submit(
        op(OpKind::Read, OpClass::HostRead, plane_pages + 40, 2),
        &mut ctx,
    );
    if gc_reads_at_once {
        flash.submit_gc_reads(&victim, 8192, &mut ctx);
    } else {
        for &(ppa, owner) in &victim {
            flash.submit(op(OpKind::Read, OpClass::Gc, ppa, owner), &mut ctx);
        }
    }
    flash.submit(op(OpKind::Read, OpClass::HostRead, 50, 3), &mut ctx);
    let mut out = Vec::new();
    let mut next_program = 64;
    while let Some((now, ev)) = queue.pop() {
        let mut ctx = ScriptCtx {
            now,
            reqs: &mut reqs,
            queue: &mut queue,
        };
        match ev {
            SsdEvent::ChannelFree(ch) => flash.on_channel_free(ch, &mut ctx),
            SsdEvent::DieReady { die, generation } => flash.on_die_ready(die, generation, &mut ctx),
            SsdEvent::DataOut { die, generation } => flash.on_data_out(die, generation, &mut ctx),
            other => unreachable!("{other:?}"),
        }
        while let Some(done) = flash.done.pop() {
            out.push((now, done.ppa, done.owner));
            if done.class == OpClass::Gc && done.kind == OpKind::Read {
                // Copies alternate between the planes, so both of the die's GC queues have
                // heads to choose between by age.
                let plane = next_program % 2;
                let program = op(
                    OpKind::Program,
                    OpClass::Gc,
                    plane * plane_pages + next_program,
                    done.owner + 100,
                );
                next_program += 1;
                flash.submit(program, &mut ctx);
            }
            if out.len() % 3 == 0 {
                let page = (out.len() as u32 * 7) % (2 * plane_pages);
                flash.submit(op(OpKind::Read, OpClass::HostRead, page, 1000), &mut ctx);
            }
        }
    }
    out
}

#[test]
fn gc_reads_queued_at_once_run_exactly_as_if_queued_one_by_one() {
    let one_by_one = flash_script(false);
    // Every read and its copy, the host work, and the reads the completions added.
    assert_eq!(
        one_by_one
            .iter()
            .filter(|d| (101..=111).contains(&d.2))
            .count(),
        6
    );
    assert_eq!(
        one_by_one
            .iter()
            .filter(|d| d.2 > 200 && d.2 < 1000)
            .count(),
        6
    );
    assert!(one_by_one.len() > 20);
    assert_eq!(flash_script(true), one_by_one);
}

// ---- the slow-read diagnostic ------------------------------------------------------------------

#[test]
fn the_slow_read_diagnostic_splits_a_qd1_read_into_its_die_time_exactly() {
    let dev = ssd(&[("ftl.mapping", "dram"), ("diag.slow_reads", "10")], 1);
    let mut h = Harness::new(dev);
    let cap = h.stage.capacity_bytes();
    let mut rng = RngStream::new(1, "offsets");
    h.run(1, 100, |now| read(rng.below(cap / 4096) * 4096, 4096, now));
    let c: std::collections::HashMap<String, f64> = h.stage.counters().into_iter().collect();
    let us = QD1_READ_NS as f64 / 1e3;
    assert_eq!(c["slowest_reads_seen"], 100.0);
    assert_eq!(c["slowest_reads"], 10.0);
    assert_eq!(c["slowest_tenth_reads"], 1.0);
    // Every read is alone on its die: its whole time is its own read (command, tR, data out).
    assert!((c["slowest_latency_mean_us"] - us).abs() < 1e-9);
    assert!((c["slowest_die_host_read_read_us"] - us).abs() < 1e-9);
    for k in [
        "before_media_us",
        "mapping_us",
        "dram_wait_us",
        "die_gc_erase_us",
        "die_idle_us",
    ] {
        assert_eq!(c[&format!("slowest_{k}")], 0.0, "{k}");
    }
    // No windows on a drive without the PLM gate.
    assert_eq!(c["slowest_arrival_own_no_window"], 10.0);
    assert_eq!(c["slowest_cache_hits"], 0.0);
}
