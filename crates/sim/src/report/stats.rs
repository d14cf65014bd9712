//! The statistics of `--repeat`: each figure of a run, and a mean's 95 % confidence interval
//! over the runs (Student's t).

use super::pct_key;
use crate::job::OpStats;

/// Two-sided 95 % quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The half-width multiplier of a 95 % confidence interval of a mean of `n` values.
pub fn t_975(n: usize) -> f64 {
    match n {
        0 | 1 => f64::NAN,
        n if n - 1 <= 30 => T_975[n - 2],
        n if n - 1 <= 40 => 2.021,
        n if n - 1 <= 60 => 2.000,
        n if n - 1 <= 120 => 1.980,
        _ => 1.960,
    }
}

/// Mean and 95 % confidence interval of `values`.
pub fn mean_ci(values: &[f64]) -> (f64, f64, f64) {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, mean, mean);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
    let half = t_975(n) * (var / n as f64).sqrt();
    (mean, mean - half, mean + half)
}

/// The figures of one op of one entry that `--repeat` gives intervals for.
pub(super) fn figures(op: &OpStats, runtime_ns: u64, pcts: &[f64]) -> Vec<(String, f64)> {
    let secs = runtime_ns as f64 / 1e9;
    let mut out = vec![
        (
            "iops".to_string(),
            if secs > 0.0 {
                op.total_ios() as f64 / secs
            } else {
                0.0
            },
        ),
        (
            "bw_bytes".to_string(),
            if secs > 0.0 {
                op.bytes as f64 / secs
            } else {
                0.0
            },
        ),
        ("slat_ns.mean".to_string(), op.slat.mean()),
        ("clat_ns.mean".to_string(), op.clat.moments.mean()),
        ("lat_ns.mean".to_string(), op.lat.moments.mean()),
        ("lat_ns.max".to_string(), op.lat.moments.max as f64),
    ];
    for &p in pcts {
        out.push((
            format!("clat_ns.percentile.{}", pct_key(p)),
            op.clat.fio_percentile(p) as f64,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_intervals_use_students_t() {
        let (m, lo, hi) = mean_ci(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        // s = 1, n = 3: half-width 4.303 / sqrt(3).
        assert!((hi - m - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert!((m - lo - 4.303 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(t_975(1000), 1.96);
    }
}
