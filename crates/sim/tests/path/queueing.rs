//! The whole path against queueing theory: with an NVMe path that costs nothing, the
//! completion latency of an analytic device is the sojourn time of its queue.

use crate::common::*;

/// M/M/1 at utilisation 0.8: Poisson arrivals (rate_iops, rate_process=poisson, and
/// io_submit_mode=offload so that each I/O leaves at its time whatever is in flight, as fio
/// does it) and exponential service. Mean sojourn 1/(mu - lambda), p99 ln(100)/(mu - lambda).
#[test]
fn mm1_at_rho_0_8_matches_mean_and_p99() {
    let mu = 100_000.0; // service mean 10 us
    let lambda = 80_000.0;
    let job = "[mm1]\nrw=randread\nbs=4k\nsize=64g\nrate_iops=80000\nrate_process=poisson\n\
               io_submit_mode=offload\niodepth=4096\nnumber_ios=2000000\nnorandommap=1\n";
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

/// M/D/1: Poisson arrivals, fixed service S. Pollaczek-Khinchine: the mean wait is
/// lambda S^2 / (2 (1 - rho)), so the mean sojourn is S + rho S / (2 (1 - rho)).
#[test]
fn md1_mean_matches_pollaczek_khinchine() {
    let s = 10_000.0;
    let rho = 0.8;
    let job = "[md1]\nrw=randread\nbs=4k\nsize=64g\nrate_iops=80000\nrate_process=poisson\n\
               io_submit_mode=offload\niodepth=4096\nnumber_ios=1000000\nnorandommap=1\n";
    let opts = options(
        job,
        &analytic("servers = 1\nservice = \"fixed\"\nservice_mean_ns = 10000"),
        &[],
        2,
    );
    let r = run_json(&opts);
    let mean = f(&r["jobs"][0]["read"]["clat_ns"]["mean"]);
    let w = s + rho * s / (2.0 * (1.0 - rho));
    eprintln!("M/D/1: mean {mean} vs {w}");
    assert!((mean / w - 1.0).abs() < 0.02, "mean {mean} vs {w}");
}

/// Erlang's C formula: the probability that an arrival to an M/M/c queue with offered load
/// `a` = lambda/mu erlangs has to wait.
fn erlang_c(c: u32, a: f64) -> f64 {
    let mut term = 1.0; // a^k / k!
    let mut sum = 1.0;
    for k in 1..c {
        term *= a / k as f64;
        sum += term;
    }
    let last = term * a / c as f64 * c as f64 / (c as f64 - a);
    last / (sum + last)
}

/// M/M/4 at utilisation 0.8: mean sojourn C(4, a) / (c mu - lambda) + 1/mu.
#[test]
fn mm4_mean_matches_erlang_c() {
    let mu = 1e9 / 40_000.0; // per server
    let lambda = 80_000.0;
    let c = 4;
    let job = "[mm4]\nrw=randread\nbs=4k\nsize=64g\nrate_iops=80000\nrate_process=poisson\n\
               io_submit_mode=offload\niodepth=4096\nnumber_ios=1000000\nnorandommap=1\n";
    let opts = options(
        job,
        &analytic("servers = 4\nservice = \"exponential\"\nservice_mean_ns = 40000"),
        &[],
        3,
    );
    let r = run_json(&opts);
    let mean = f(&r["jobs"][0]["read"]["clat_ns"]["mean"]);
    let a = lambda / mu;
    let w = (erlang_c(c, a) / (c as f64 * mu - lambda) + 1.0 / mu) * 1e9;
    eprintln!("M/M/4: C = {}, mean {mean} vs {w}", erlang_c(c, a));
    assert!((mean / w - 1.0).abs() < 0.02, "mean {mean} vs {w}");
}

#[test]
fn erlang_c_matches_a_published_value() {
    // Two servers at a = 1 erlang: C = 1/3 (a textbook case, e.g. Kleinrock, Queueing
    // Systems I, M/M/2 at rho = 0.5).
    assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    // One server: C = rho.
    assert!((erlang_c(1, 0.8) - 0.8).abs() < 1e-12);
}

/// A closed loop keeps N I/Os outstanding on c servers of fixed service S: throughput is
/// exactly min(N, c) / S.
#[test]
fn closed_loop_throughput_is_min_n_c_over_s() {
    let s = 1000u64;
    for (n, c) in [(1u32, 1u32), (4, 2), (2, 4), (32, 8), (7, 7)] {
        let job =
            format!("[closed]\nrw=randread\nbs=4k\nsize=1g\niodepth={n}\nnumber_ios=100800\n");
        let opts = options(
            &job,
            &analytic(&format!(
                "servers = {c}\nservice = \"fixed\"\nservice_mean_ns = {s}"
            )),
            &[],
            4,
        );
        let r = run_json(&opts);
        let read = &r["jobs"][0]["read"];
        let iops = f(&read["iops"]);
        let expected = n.min(c) as f64 * 1e9 / s as f64;
        assert!(
            (iops / expected - 1.0).abs() < 1e-12,
            "N={n} c={c}: {iops} vs {expected}"
        );
        // Every I/O waits for the ones ahead of it: sojourn = k S, k = ceil(N/c), once the
        // loop runs. At the end fio reaps the last N together when the last completes, so the
        // oldest of them, issued k - 1 waves before it, shows (2k - 1) S.
        let k = n.div_ceil(c) as u64;
        assert_eq!(f(&read["clat_ns"]["max"]) as u64, (2 * k - 1) * s);
        let p50 = f(&read["clat_ns"]["percentile"]["50.000000"]);
        assert!((p50 / (k * s) as f64 - 1.0).abs() < 0.01, "{p50}");
    }
}

/// Little's law, L = lambda W, on every closed-loop run: the N outstanding I/Os equal the
/// throughput times the mean latency, whatever the device and the path costs.
#[test]
fn littles_law_holds_on_every_closed_loop_run() {
    let cases: [(&str, &[&str], u32); 4] = [
        (
            "servers = 3\nservice = \"exponential\"\nservice_mean_ns = 20000",
            &[],
            8,
        ),
        (
            "servers = 1\nservice = \"lognormal\"\nservice_mean_ns = 5000\nservice_cv = 2.0",
            &[],
            4,
        ),
        (
            "servers = 16\nservice = \"exponential\"\nservice_mean_ns = 80000",
            &[
                "host.submit_ns=1200",
                "host.complete_ns=1500",
                "host.irq_ns=800",
                "controller.fetch_ns=100",
                "link.lane_rate=1.0",
            ],
            32,
        ),
        (
            "servers = 2\nservice = \"fixed\"\nservice_mean_ns = 3000",
            &[
                "controller.coalesce_threshold=8",
                "controller.coalesce_time_ns=20us",
            ],
            16,
        ),
    ];
    for (media, sets, n) in cases {
        let job =
            format!("[little]\nrw=randread\nbs=4k\nsize=1g\niodepth={n}\nnumber_ios=200000\n");
        let r = run_json(&options(&job, &analytic(media), sets, 5));
        let read = &r["jobs"][0]["read"];
        let l = f(&read["iops"]) * f(&read["lat_ns"]["mean"]) / 1e9;
        assert!(
            (l / n as f64 - 1.0).abs() < 0.01,
            "{media} {sets:?}: L = {l}, N = {n}"
        );
    }
}
