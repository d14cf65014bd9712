//! The generators against closed forms: patterns, mixes, distributions, pacing, end conditions.

use std::collections::HashMap;
use std::path::Path;

use qoslab_engine::{IoPrio, IoPrioClass, Op};
use qoslab_workload::fio::{Job, parse_job_str};
use qoslab_workload::{GenIo, JobGen};

fn job(text: &str) -> Job {
    let f = parse_job_str(&format!("[j]\n{text}"), Path::new("t.fio"), |_| None)
        .unwrap_or_else(|e| panic!("{e}"));
    f.jobs.into_iter().next().unwrap()
}

fn all_ios(text: &str, seed: u64) -> Vec<GenIo> {
    let mut g = JobGen::new(&job(text), 0, seed).unwrap_or_else(|e| panic!("{e}"));
    std::iter::from_fn(|| g.next_io()).collect()
}

fn take(text: &str, seed: u64, n: usize) -> Vec<GenIo> {
    let mut g = JobGen::new(&job(text), 0, seed).unwrap_or_else(|e| panic!("{e}"));
    (0..n)
        .map(|_| g.next_io().expect("job ended early"))
        .collect()
}

#[test]
fn sequential_write_with_holes_wraps_like_fio() {
    // fio 3.33, rw=write:4k bs=4k size=64k, writes 0, 8k, ..., 56k and again (its iolog).
    let ios = all_ios("rw=write:4k\nbs=4k\nsize=64k\n", 1);
    let offs: Vec<u64> = ios.iter().map(|io| io.offset_bytes / 4096).collect();
    assert_eq!(
        offs,
        vec![0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14]
    );
    assert!(
        ios.iter()
            .all(|io| io.op == Op::Write && io.len_bytes == 4096)
    );
}

#[test]
fn sequential_mixes_keep_one_position_per_direction() {
    // fio 3.33, rw=rw bs=8k, size=64k: reads at 0, 8k, 16k, ...; writes (default 4k) at 0, 4k, ...
    let ios = all_ios("rw=rw\nbs=8k,\nsize=64k\n", 3);
    let reads: Vec<u64> = ios
        .iter()
        .filter(|i| i.op == Op::Read)
        .map(|i| i.offset_bytes)
        .collect();
    let writes: Vec<u64> = ios
        .iter()
        .filter(|i| i.op == Op::Write)
        .map(|i| i.offset_bytes)
        .collect();
    assert!(
        reads
            .iter()
            .enumerate()
            .all(|(k, &o)| o == (k as u64 * 8192) % 65536)
    );
    assert!(
        writes
            .iter()
            .enumerate()
            .all(|(k, &o)| o == (k as u64 * 4096) % 65536)
    );
    let bytes: u64 = ios.iter().map(|i| i.len_bytes).sum();
    assert_eq!(bytes, 65536, "size is the amount of I/O");
    assert!(
        ios.iter()
            .filter(|i| i.op == Op::Write)
            .all(|i| i.len_bytes == 4096)
    );
}

#[test]
fn random_reads_cover_every_block_once_per_pass_and_repeat_the_pass() {
    let ios = all_ios("rw=randread\nbs=4k\nsize=4m\nio_size=8m\n", 7);
    assert_eq!(ios.len(), 2048);
    let first: Vec<u64> = ios[..1024].iter().map(|i| i.offset_bytes).collect();
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1024u64).map(|b| b * 4096).collect::<Vec<_>>());
    let second: Vec<u64> = ios[1024..].iter().map(|i| i.offset_bytes).collect();
    assert_eq!(first, second);
    // Not sequential: the permutation moves.
    assert!(first.windows(2).filter(|w| w[1] == w[0] + 4096).count() < 20);
}

#[test]
fn norandommap_draws_uniformly_with_replacement() {
    // 1024 blocks, 1024 draws: a uniform draw misses each block with probability (1-1/n)^n,
    // so about n/e = 376.7 blocks stay untouched (sd about 11).
    let ios = all_ios("rw=randread\nbs=4k\nsize=4m\nnorandommap\n", 11);
    let mut seen = vec![false; 1024];
    for io in &ios {
        seen[(io.offset_bytes / 4096) as usize] = true;
    }
    let untouched = seen.iter().filter(|s| !**s).count() as f64;
    assert!(
        (untouched - 376.7).abs() < 4.0 * 11.0,
        "untouched {untouched}"
    );
}

#[test]
fn offsets_are_aligned_and_inside_the_region_with_mixed_lengths() {
    let text = "rw=randrw\nbsrange=4k-64k\nblockalign=4k\nsize=10m\noffset=1m\nio_size=200m\n";
    let ios = all_ios(text, 5);
    let mut lens = HashMap::new();
    for io in &ios {
        assert_eq!(io.offset_bytes % 4096, 0);
        assert!(io.offset_bytes >= 1 << 20);
        assert!(io.offset_bytes + io.len_bytes <= (1 << 20) + 10 * (1 << 20));
        *lens.entry(io.len_bytes).or_insert(0u64) += 1;
    }
    // Lengths: the 16 multiples of 4k in [4k, 64k], equally likely.
    assert_eq!(lens.len(), 16);
    let n = ios.len() as f64;
    for (&len, &c) in &lens {
        assert_eq!(len % 4096, 0);
        let p = c as f64 / n;
        assert!(
            (p - 1.0 / 16.0).abs() < 4.0 * (1.0 / 16.0 * 15.0 / 16.0 / n).sqrt(),
            "len {len}: {p}"
        );
    }
}

#[test]
fn bssplit_shares_match_the_percentages() {
    let ios = take(
        "rw=randread\nbssplit=4k/10:64k/50:32k/40\nsize=1g\nio_size=1t\nnorandommap\n",
        2,
        200_000,
    );
    let n = ios.len() as f64;
    for (len, pct) in [(4096u64, 0.10), (65536, 0.50), (32768, 0.40)] {
        let p = ios.iter().filter(|i| i.len_bytes == len).count() as f64 / n;
        let sd = (pct * (1.0 - pct) / n).sqrt();
        assert!((p - pct).abs() < 4.0 * sd, "{len}: {p} vs {pct}");
    }
}

#[test]
fn read_write_mix_follows_rwmixread() {
    let ios = take("rw=randrw\nrwmixread=70\nbs=4k\nsize=1g\n", 9, 100_000);
    let reads = ios.iter().filter(|i| i.op == Op::Read).count() as f64;
    let sd = (0.7 * 0.3 * 100_000.0f64).sqrt();
    assert!((reads - 70_000.0).abs() < 4.0 * sd, "reads {reads}");
}

#[test]
fn linear_rate_iops_spaces_ios_exactly() {
    let ios = take("rw=randread\nrate_iops=3000\nsize=1g\n", 1, 10);
    let t: Vec<u64> = ios.iter().map(|i| i.not_before_ns).collect();
    // k-th I/O at floor(k * 1e9 / 3000) ns, no drift.
    assert_eq!(
        t,
        (0..10u64)
            .map(|k| k * 1_000_000_000 / 3000)
            .collect::<Vec<_>>()
    );
    let ios = take("rw=write\nbs=64k\nrate=1m\nsize=1g\n", 1, 3);
    assert_eq!(ios[2].not_before_ns, 2 * 65536 * 1_000_000_000 / (1 << 20));
}

#[test]
fn poisson_rate_has_exponential_gaps_with_the_right_mean() {
    let n = 200_000;
    let ios = take(
        "rw=randread\nrate_iops=10000\nrate_process=poisson\nsize=1g\n",
        4,
        n,
    );
    let gaps: Vec<f64> = ios
        .windows(2)
        .map(|w| (w[1].not_before_ns - w[0].not_before_ns) as f64)
        .collect();
    let m = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / m;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / m;
    // Exponential: mean 100 us, coefficient of variation 1; P(gap > mean) = 1/e.
    assert!(
        (mean - 100_000.0).abs() < 4.0 * 100_000.0 / m.sqrt(),
        "mean {mean}"
    );
    assert!(
        (var.sqrt() / mean - 1.0).abs() < 0.01,
        "cv {}",
        var.sqrt() / mean
    );
    let above = gaps.iter().filter(|&&g| g > 100_000.0).count() as f64 / m;
    assert!(
        (above - (-1.0f64).exp()).abs() < 0.005,
        "P(gap > mean) = {above}"
    );
}

#[test]
fn end_conditions() {
    assert_eq!(all_ios("rw=read\nsize=1m\n", 1).len(), 256);
    assert_eq!(all_ios("rw=read\nsize=1m\nloops=3\n", 1).len(), 768);
    assert_eq!(all_ios("rw=read\nsize=1m\nio_size=64k\n", 1).len(), 16);
    assert_eq!(all_ios("rw=read\nsize=1m\nnumber_ios=10\n", 1).len(), 10);
    assert_eq!(
        all_ios("rw=read\nsize=1m\nnumber_ios=1000\n", 1).len(),
        256,
        "number_ios never extends"
    );
    // fio counts number_ios in each loop (fio 3.33: loops=3, number_ios=10 does 30 I/Os).
    assert_eq!(
        all_ios("rw=read\nsize=1m\nloops=3\nnumber_ios=10\n", 1).len(),
        30
    );
    // size with filesize is the amount, but no more than the files hold (fio 3.33 cuts it
    // to their total, filesetup.c; measured: filesize=1m size=2m rw=read, 256 reads of 4 KiB).
    assert_eq!(
        all_ios("rw=read\nfilesize=1m\nsize=2m\n", 1).len(),
        256,
        "size with filesize is the amount, within the files"
    );
    assert_eq!(
        all_ios("rw=read\nfilesize=1m\nsize=512k\n", 1).len(),
        128,
        "size with filesize is the amount"
    );
    let j = job("rw=read\nsize=1m\ntime_based\nruntime=2s\nramp_time=1s\n");
    let mut g = JobGen::new(&j, 0, 1).unwrap();
    assert_eq!(
        (g.ramp_ns(), g.end_ns()),
        (1_000_000_000, Some(3_000_000_000))
    );
    assert_eq!(
        (0..10_000).filter_map(|_| g.next_io()).count(),
        10_000,
        "time_based never runs out"
    );
    let j = job("rw=read\nsize=1m\ntime_based\nruntime=2s\nnumber_ios=10\n");
    let mut g = JobGen::new(&j, 0, 1).unwrap();
    assert_eq!(
        (0..1_000).filter_map(|_| g.next_io()).count(),
        1_000,
        "a time_based job ignores number_ios, as fio does"
    );
}

#[test]
fn trimwrite_trims_then_writes_each_block() {
    let ios = all_ios("rw=trimwrite\nbs=4k\nsize=16k\nio_size=32k\n", 1);
    let seq: Vec<(Op, u64)> = ios.iter().map(|i| (i.op, i.offset_bytes / 4096)).collect();
    assert_eq!(
        seq,
        vec![
            (Op::Trim, 0),
            (Op::Write, 0),
            (Op::Trim, 1),
            (Op::Write, 1),
            (Op::Trim, 2),
            (Op::Write, 2),
            (Op::Trim, 3),
            (Op::Write, 3)
        ]
    );
}

#[test]
fn random_runs_with_a_suffix() {
    let ios = take("rw=randread:4\nsize=1m\n", 3, 12);
    for run in ios.chunks(4) {
        for w in run.windows(2) {
            assert_eq!(w[1].offset_bytes, (w[0].offset_bytes + 4096) % (1 << 20));
        }
    }
    let ios = take("rw=randread:4\nrw_sequencer=identical\nsize=1m\n", 3, 8);
    assert!(
        ios[..4]
            .iter()
            .all(|i| i.offset_bytes == ios[0].offset_bytes)
    );
}

#[test]
fn priorities_from_prio_prioclass_and_cmdprio_percentage() {
    let ios = take(
        "rw=randread\nsize=1g\nprioclass=2\nprio=5\ncmdprio_percentage=25\ncmdprio_class=1\ncmdprio=0\n",
        8,
        100_000,
    );
    let rt = ios
        .iter()
        .filter(|i| {
            i.prio
                == IoPrio {
                    class: IoPrioClass::RealTime,
                    level: 0,
                }
        })
        .count() as f64;
    let be = ios
        .iter()
        .filter(|i| {
            i.prio
                == IoPrio {
                    class: IoPrioClass::BestEffort,
                    level: 5,
                }
        })
        .count() as f64;
    assert_eq!(rt + be, 100_000.0);
    assert!(
        (rt - 25_000.0).abs() < 4.0 * (0.25 * 0.75 * 100_000.0f64).sqrt(),
        "{rt}"
    );
}

#[test]
fn same_seed_same_ios_and_clones_differ() {
    let text = "rw=randrw\nbsrange=4k-32k\nsize=100m\nrandom_distribution=zipf:1.1\nnumjobs=2\nrate_iops=1000\nrate_process=poisson\n";
    assert_eq!(take(text, 42, 1000), take(text, 42, 1000));
    assert_ne!(take(text, 42, 1000), take(text, 43, 1000));
    let j = job(text);
    let mut c0 = JobGen::new(&j, 0, 42).unwrap();
    let mut c1 = JobGen::new(&j, 1, 42).unwrap();
    let a: Vec<_> = (0..100).map(|_| c0.next_io().unwrap()).collect();
    let b: Vec<_> = (0..100).map(|_| c1.next_io().unwrap()).collect();
    assert_ne!(a, b);
    assert!(
        JobGen::new(&j, 2, 42).is_err(),
        "numjobs=2 has clones 0 and 1"
    );
    // randseed pins the job's streams whatever the run seed.
    let pinned = format!("{text}randseed=5\n");
    assert_eq!(take(&pinned, 1, 100), take(&pinned, 2, 100));
}

#[test]
fn offset_increment_separates_clones_and_percentages_need_a_device() {
    let j = job("rw=write\nsize=1m\noffset_increment=1m\nnumjobs=4\n");
    let mut g = JobGen::new(&j, 3, 1).unwrap();
    assert_eq!(g.next_io().unwrap().offset_bytes, 3 << 20);
    let j = job("rw=read\nsize=50%\noffset=25%\n");
    assert!(
        JobGen::new(&j, 0, 1)
            .unwrap_err()
            .to_string()
            .contains("needs the device size")
    );
    let g = JobGen::on_device(&j, 0, 1, Some(1 << 30)).unwrap();
    assert_eq!(g.extent().region_start_bytes, 1 << 28);
    assert_eq!(g.extent().region_len_bytes, 1 << 29);
    let j = job("rw=read\nsize=1g\noffset=1g\n");
    assert!(
        JobGen::on_device(&j, 0, 1, Some(1 << 30))
            .unwrap_err()
            .to_string()
            .contains("beyond the device")
    );
    let j = job("rw=read\nbs=1m\nsize=4k\n");
    assert!(
        JobGen::new(&j, 0, 1)
            .unwrap_err()
            .to_string()
            .contains("cannot hold")
    );
}

#[test]
fn batch_submit_follows_fio_rules() {
    let g = |t: &str| JobGen::new(&job(t), 0, 1).unwrap().batch_submit();
    assert_eq!(g("size=1m\niodepth=32\n"), 1);
    assert_eq!(g("size=1m\niodepth=32\niodepth_batch_submit=8\n"), 8);
    assert_eq!(g("size=1m\niodepth_batch_submit=0\niodepth=16\n"), 16);
    assert_eq!(g("size=1m\niodepth=4\niodepth_batch=8\n"), 4);
}

#[test]
fn a_pass_is_done_with_a_file_at_its_end_and_ends_when_every_file_is_done() {
    // fio 3.33, nrfiles=4 size=64k bs=12k loops=2 (libaio, 3 runs): 8 writes, one per file and
    // pass: a second 12 KiB write would cross the 16 KiB file's end, so the pass is done with
    // that file, and the next pass starts at every file's start. (blockalign=4k keeps qoslab's
    // files at fio's 16 KiB: they are whole blocks.)
    let ios = all_ios(
        "rw=write\nbs=12k\nblockalign=4k\nsize=64k\nnrfiles=4\nloops=2\n",
        1,
    );
    let offs: Vec<u64> = ios.iter().map(|io| io.offset_bytes / 1024).collect();
    assert_eq!(offs, vec![0, 16, 32, 48, 0, 16, 32, 48]);
    let firsts: Vec<usize> = (0..ios.len()).filter(|&i| ios[i].new_pass).collect();
    assert_eq!(firsts, vec![4]);
}

#[test]
fn io_size_above_size_adds_passes_only_while_it_is_short_by_a_whole_block() {
    // fio 3.33 (3 runs each): size=64k io_size=96k: 24 writes of 4 KiB, a second pass after
    // the 16th; bs=12k without io_size: 5 writes (the 4 KiB left are no whole block);
    // io_size=96k loops=2: two passes of 64 KiB, 32 writes (loops first, then io_size).
    let ios = all_ios("rw=randwrite\nbs=4k\nsize=64k\nio_size=96k\n", 1);
    assert_eq!(ios.len(), 24);
    let firsts: Vec<usize> = (0..ios.len()).filter(|&i| ios[i].new_pass).collect();
    assert_eq!(firsts, vec![16]);
    assert_eq!(all_ios("rw=write\nbs=12k\nsize=64k\n", 1).len(), 5);
    assert_eq!(
        all_ios("rw=write\nbs=4k\nsize=64k\nio_size=96k\nloops=2\n", 1).len(),
        32
    );
}

#[test]
fn a_time_based_job_passes_over_several_sequential_files_but_wraps_one_in_place() {
    // fio 3.33, time_based size=64k bs=4k: over nrfiles=4 a sequential pass ends when every
    // file is done (every 16 writes, a new pass: 180 depth-1 submissions in 2,880 writes);
    // one file, or random offsets, start over in place (no second pass).
    let firsts = |text: &str| -> Vec<usize> {
        let ios = take(text, 1, 64);
        (0..ios.len()).filter(|&i| ios[i].new_pass).collect()
    };
    let base = "bs=4k\nsize=64k\ntime_based=1\nruntime=1s\n";
    assert_eq!(
        firsts(&format!("{base}rw=write\nnrfiles=4\n")),
        vec![16, 32, 48]
    );
    assert!(firsts(&format!("{base}rw=write\n")).is_empty());
    assert!(firsts(&format!("{base}rw=randwrite\nnrfiles=4\n")).is_empty());
}

#[test]
fn a_pass_ends_at_its_size_only_when_the_engine_queues_its_io() {
    // fio 3.33's write_iolog (3 runs each), rw=write bs=4k nrfiles=2 filesize=32k size=32k
    // loops=2: libaio and vsync run two passes of 32 KiB, each from the files' starts (file 0
    // at 0, 4, 8, 12 KiB, twice); psync counts no pass bytes, so its one pass runs to the
    // files' ends (0 to 28 KiB) and the job's 64 KiB are done with it.
    let base = "rw=write\nbs=4k\nnrfiles=2\nfilesize=32k\nsize=32k\nloops=2\n";
    let file0 = |ios: &[GenIo]| -> Vec<u64> {
        ios.iter()
            .filter(|io| io.offset_bytes < 32 << 10)
            .map(|io| io.offset_bytes >> 10)
            .collect()
    };
    for engine in ["libaio\niodepth=2", "vsync"] {
        let ios = all_ios(&format!("{base}ioengine={engine}\n"), 1);
        assert_eq!(file0(&ios), vec![0, 4, 8, 12, 0, 4, 8, 12], "{engine}");
        let firsts: Vec<usize> = (0..ios.len()).filter(|&i| ios[i].new_pass).collect();
        assert_eq!(firsts, vec![8], "{engine}");
        // The pass ended at its bytes: fio fetched nothing more in it.
        assert!(ios[8].limit_ended_pass, "{engine}");
    }
    let ios = all_ios(&format!("{base}ioengine=psync\n"), 1);
    assert_eq!(file0(&ios), vec![0, 4, 8, 12, 16, 20, 24, 28]);
    assert!(ios.iter().all(|io| !io.new_pass));
    // A pass that ends when a fetch finds every file done is not one that ended at its bytes.
    let ios = all_ios(
        "rw=write\nbs=12k\nblockalign=4k\nsize=64k\nnrfiles=4\nloops=2\nioengine=libaio\n",
        1,
    );
    assert!(ios[4].new_pass && !ios[4].limit_ended_pass);
}
