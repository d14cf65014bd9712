//! The whole path against queueing theory: with an NVMe path that costs nothing, the
//! completion latency of an analytic device is the sojourn time of its queue.

mod common;
use common::*;

/// M/M/1 at utilisation 0.8: Poisson arrivals (rate_iops, rate_process=poisson) and
/// exponential service. Mean sojourn 1/(mu - lambda), p99 ln(100)/(mu - lambda).
#[test]
fn mm1_at_rho_0_8_matches_mean_and_p99() {
    let mu = 100_000.0; // service mean 10 us
    let lambda = 80_000.0;
    let job = "[mm1]\nrw=randread\nbs=4k\nsize=64g\nrate_iops=80000\nrate_process=poisson\n\
               iodepth=4096\nnumber_ios=2000000\nnorandommap=1\n";
    let opts = options(
        job,
        &analytic("servers = 1\nservice = \"exponential\"\nservice_mean_ns = 10000"),
        &[],
        1,
    );
    let r = run_json(&opts);
    let read = &r["jobs"][0]["read"];
    assert_eq!(read["total_ios"], 2_000_000);
    let mean = f(&read["clat_ns"]["mean"]);
    let p99 = f(&read["clat_ns"]["percentile"]["99.000000"]);
    let w = 1e9 / (mu - lambda);
    let w99 = 100f64.ln() * 1e9 / (mu - lambda);
    eprintln!("M/M/1: mean {mean} vs {w}, p99 {p99} vs {w99}");
    assert!((mean / w - 1.0).abs() < 0.02, "mean {mean} vs {w}");
    assert!((p99 / w99 - 1.0).abs() < 0.02, "p99 {p99} vs {w99}");
}
