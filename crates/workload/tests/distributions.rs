//! `random_distribution` against closed forms, with fixed seeds.

use std::path::Path;

use qoslab_workload::JobGen;
use qoslab_workload::fio::parse_job_str;

/// Block indices (4 KiB blocks) of `n` random reads over `blocks` blocks.
fn draws(dist: &str, blocks: u64, n: usize, seed: u64) -> Vec<u64> {
    let text = format!(
        "[j]\nrw=randread\nbs=4k\nsize={}k\nio_size=1p\nrandom_distribution={dist}\n",
        blocks * 4
    );
    let f = parse_job_str(&text, Path::new("t.fio"), |_| None).unwrap();
    let mut g = JobGen::new(&f.jobs[0], 0, seed).unwrap();
    (0..n)
        .map(|_| g.next_io().unwrap().offset_bytes / 4096)
        .collect()
}

fn counts(blocks: &[u64], n: u64) -> Vec<u64> {
    let mut c = vec![0u64; n as usize];
    for &b in blocks {
        c[b as usize] += 1;
    }
    c
}

/// |observed - expected| within 4 binomial standard deviations.
fn assert_share(count: u64, n: usize, p: f64, what: &str) {
    let sd = (p * (1.0 - p) / n as f64).sqrt();
    let obs = count as f64 / n as f64;
    assert!(
        (obs - p).abs() < 4.0 * sd + 1e-12,
        "{what}: observed {obs}, expected {p} (sd {sd})"
    );
}

#[test]
fn zipf_block_frequencies_follow_k_to_the_minus_theta() {
    let (blocks, n, theta) = (1000u64, 1_000_000usize, 1.2f64);
    let h: f64 = (1..=blocks).map(|k| (k as f64).powf(-theta)).sum();
    // center 0 lays rank k at block k-1.
    let c = counts(&draws("zipf:1.2:0", blocks, n, 1), blocks);
    for k in 1..=20u64 {
        assert_share(
            c[(k - 1) as usize],
            n,
            (k as f64).powf(-theta) / h,
            &format!("rank {k}"),
        );
    }
    // Scattered (fio's default): the same frequencies, on other blocks.
    let mut c = counts(&draws("zipf:1.2", blocks, n, 2), blocks);
    c.sort_unstable_by(|a, b| b.cmp(a));
    for k in 1..=3u64 {
        assert_share(
            c[(k - 1) as usize],
            n,
            (k as f64).powf(-theta) / h,
            &format!("hottest {k}"),
        );
    }
}

#[test]
fn pareto_h_sends_one_minus_h_of_the_io_to_the_hottest_h_of_the_blocks() {
    // fio's law: rank = floor((n-1) u^p), p = ln h / ln(1-h), so P(rank < m) = (m/(n-1))^(1/p).
    let (blocks, n) = (1001u64, 400_000usize);
    for h in [0.2f64, 0.1, 0.3] {
        let p = h.ln() / (1.0 - h).ln();
        let d = draws(&format!("pareto:{h}:0"), blocks, n, 3);
        for m in [10u64, 100, (h * 1000.0) as u64, 500] {
            let below = d.iter().filter(|&&b| b < m).count() as u64;
            assert_share(
                below,
                n,
                (m as f64 / 1000.0).powf(1.0 / p),
                &format!("h={h}, m={m}"),
            );
        }
        let hot = d.iter().filter(|&&b| b < (h * 1000.0) as u64).count() as u64;
        assert_share(hot, n, 1.0 - h, &format!("h={h}: the 80/20 rule"));
    }
}

#[test]
fn normal_has_the_variance_of_fios_law() {
    // Mean of 12 uniform integers on {0..n}: variance n(n+2)/144; rounding up adds about
    // 1/12; a jitter of width w adds about w^2/12.
    let (blocks, n) = (1200u64, 400_000usize);
    for (dev, w) in [(0.0f64, 0.0f64), (10.0, 120.0)] {
        let d = draws(&format!("normal:{dev}:0.5"), blocks, n, 4);
        let mean = d.iter().sum::<u64>() as f64 / n as f64;
        let var = d.iter().map(|&b| (b as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let nb = blocks as f64;
        let expected = nb * (nb + 2.0) / 144.0 + 1.0 / 12.0 + w * w / 12.0;
        assert!(
            (var / expected - 1.0).abs() < 0.01,
            "dev {dev}: var {var} vs {expected}"
        );
        assert!(
            (mean - (nb / 2.0 + 0.5)).abs() < 1.0,
            "dev {dev}: mean {mean}"
        );
    }
}

#[test]
fn zoned_access_shares_match_within_sampling_error() {
    // fio's HOWTO example: 60% of accesses to the first 10%, 30% to the next 20%, ...
    let (blocks, n) = (1000u64, 500_000usize);
    let d = draws("zoned:60/10:30/20:8/30:2/40", blocks, n, 5);
    for (lo, hi, p) in [
        (0u64, 100u64, 0.60),
        (100, 300, 0.30),
        (300, 600, 0.08),
        (600, 1000, 0.02),
    ] {
        let c = d.iter().filter(|&&b| b >= lo && b < hi).count() as u64;
        assert_share(c, n, p, &format!("zone [{lo}, {hi})"));
    }
    // Uniform inside a zone: the first zone's two halves get 30% each.
    let c = d.iter().filter(|&&b| b < 50).count() as u64;
    assert_share(c, n, 0.30, "first half of zone 1");

    let d = draws("zoned_abs:70/1m:30/3m", 1024, n, 6);
    let c = d.iter().filter(|&&b| b < 256).count() as u64;
    assert_share(c, n, 0.70, "zoned_abs first 1 MiB");
}

#[test]
fn zones_beyond_the_region_are_an_error() {
    let text = "[j]\nrw=randread\nsize=1m\nrandom_distribution=zoned_abs:50/1m:50/1m\n";
    let f = parse_job_str(text, Path::new("t.fio"), |_| None).unwrap();
    let e = JobGen::new(&f.jobs[0], 0, 1).unwrap_err().to_string();
    assert!(e.contains("beyond the 256 blocks"), "{e}");
}
