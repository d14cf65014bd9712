//! Service-time distributions of the analytic and empirical devices.

use qoslab_engine::time::ns_from_f64;
use qoslab_engine::{Ns, RngStream};
use rand_distr::{Distribution, LogNormal};

/// A distribution given by its quantile function at a few points, linear in between: the
/// percentiles fio reports (`1.000000` ... `99.990000`) describe one directly.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantileTable {
    /// Cumulative probabilities in [0, 1], increasing.
    probs: Vec<f64>,
    /// Values at those probabilities (ns), non-decreasing.
    values: Vec<f64>,
}

impl QuantileTable {
    /// From percentiles (0-100, increasing) and the values at them (non-decreasing). Below the
    /// first and above the last point, draws stay at the first and last value: a table cannot
    /// tell what lies beyond its points, so it invents no tail.
    pub fn new(percentiles: &[f64], values_ns: &[f64]) -> Result<Self, String> {
        if percentiles.len() != values_ns.len() {
            return Err(format!(
                "{} percentiles but {} values",
                percentiles.len(),
                values_ns.len()
            ));
        }
        if percentiles.len() < 2 {
            return Err("need at least two points".into());
        }
        for w in percentiles.windows(2) {
            if w[1] <= w[0] {
                return Err(format!(
                    "percentiles must increase, got {} then {}",
                    w[0], w[1]
                ));
            }
        }
        if percentiles[0] < 0.0 || percentiles[percentiles.len() - 1] > 100.0 {
            return Err("percentiles must lie in [0, 100]".into());
        }
        for w in values_ns.windows(2) {
            if w[1] < w[0] {
                return Err(format!(
                    "values must not decrease, got {} then {}",
                    w[0], w[1]
                ));
            }
        }
        if values_ns[0] < 0.0 || !values_ns.iter().all(|v| v.is_finite()) {
            return Err("values must be finite and non-negative".into());
        }
        Ok(QuantileTable {
            probs: percentiles.iter().map(|p| p / 100.0).collect(),
            values: values_ns.to_vec(),
        })
    }

    /// Equally spaced quantiles from 0 % to 100 % (a sorted sample works as one).
    pub fn from_sorted_points(values_ns: &[f64]) -> Result<Self, String> {
        if values_ns.len() < 2 {
            return Err("need at least two points".into());
        }
        let n = values_ns.len() - 1;
        let pcts: Vec<f64> = (0..=n).map(|i| 100.0 * i as f64 / n as f64).collect();
        Self::new(&pcts, values_ns)
    }

    /// The value at cumulative probability `u` in [0, 1].
    pub fn quantile(&self, u: f64) -> f64 {
        let i = self.probs.partition_point(|&p| p < u);
        if i == 0 {
            return self.values[0];
        }
        if i == self.probs.len() {
            return self.values[i - 1];
        }
        let (p0, p1) = (self.probs[i - 1], self.probs[i]);
        let (v0, v1) = (self.values[i - 1], self.values[i]);
        v0 + (v1 - v0) * (u - p0) / (p1 - p0)
    }

    /// The mean of the distribution this table describes (piecewise-uniform between points,
    /// point masses at the ends).
    pub fn mean(&self) -> f64 {
        let n = self.probs.len();
        let mut m = self.probs[0] * self.values[0] + (1.0 - self.probs[n - 1]) * self.values[n - 1];
        for i in 1..n {
            m += (self.probs[i] - self.probs[i - 1]) * (self.values[i] + self.values[i - 1]) / 2.0;
        }
        m
    }

    pub fn sample(&self, rng: &mut RngStream) -> f64 {
        self.quantile(rng.uniform())
    }
}

/// How long one command occupies a server.
#[derive(Clone, Debug)]
pub enum Service {
    Fixed(Ns),
    Exponential { mean_ns: f64 },
    LogNormal { mean_ns: f64, dist: LogNormal<f64> },
    Empirical(QuantileTable),
}

impl Service {
    /// A lognormal with the given mean and coefficient of variation (stddev / mean).
    pub fn lognormal(mean_ns: f64, cv: f64) -> Result<Self, String> {
        // For ln X ~ N(mu, s^2): mean = exp(mu + s^2/2), cv^2 = exp(s^2) - 1.
        let s2 = (1.0 + cv * cv).ln();
        let mu = mean_ns.ln() - s2 / 2.0;
        let dist = LogNormal::new(mu, s2.sqrt()).map_err(|e| e.to_string())?;
        Ok(Service::LogNormal { mean_ns, dist })
    }

    pub fn mean_ns(&self) -> f64 {
        match self {
            Service::Fixed(ns) => *ns as f64,
            Service::Exponential { mean_ns } | Service::LogNormal { mean_ns, .. } => *mean_ns,
            Service::Empirical(t) => t.mean(),
        }
    }

    /// One service time, rounded to whole ns.
    #[inline]
    pub fn sample_ns(&self, rng: &mut RngStream) -> Ns {
        match self {
            Service::Fixed(ns) => *ns,
            Service::Exponential { mean_ns } => ns_from_f64(rng.exponential(*mean_ns)),
            Service::LogNormal { dist, .. } => ns_from_f64(dist.sample(rng)),
            Service::Empirical(t) => ns_from_f64(t.sample(rng)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantile_table_interpolates_between_its_points() {
        let t = QuantileTable::new(&[0.0, 50.0, 100.0], &[100.0, 200.0, 1000.0]).unwrap();
        assert_eq!(t.quantile(0.0), 100.0);
        assert_eq!(t.quantile(0.25), 150.0);
        assert_eq!(t.quantile(0.75), 600.0);
        assert_eq!(t.quantile(1.0), 1000.0);
        assert_eq!(t.mean(), 0.5 * 150.0 + 0.5 * 600.0);
    }

    #[test]
    fn a_quantile_table_stays_at_its_end_points_beyond_them() {
        let t = QuantileTable::new(&[10.0, 90.0], &[100.0, 200.0]).unwrap();
        assert_eq!(t.quantile(0.05), 100.0);
        assert_eq!(t.quantile(0.95), 200.0);
        assert_eq!(t.mean(), 0.1 * 100.0 + 0.8 * 150.0 + 0.1 * 200.0);
    }

    #[test]
    fn bad_tables_are_refused_with_a_reason() {
        assert!(QuantileTable::new(&[50.0, 10.0], &[1.0, 2.0]).is_err());
        assert!(QuantileTable::new(&[10.0, 50.0], &[2.0, 1.0]).is_err());
        assert!(QuantileTable::new(&[10.0], &[2.0]).is_err());
        assert!(QuantileTable::new(&[10.0, 50.0], &[1.0]).is_err());
    }

    #[test]
    fn sampled_means_match_the_distributions() {
        let mut rng = RngStream::new(9, "service");
        let n = 500_000;
        for s in [
            Service::Exponential { mean_ns: 1000.0 },
            Service::lognormal(1000.0, 0.5).unwrap(),
            Service::Empirical(QuantileTable::from_sorted_points(&[500.0, 900.0, 1600.0]).unwrap()),
        ] {
            let mean = (0..n).map(|_| s.sample_ns(&mut rng) as f64).sum::<f64>() / n as f64;
            assert!((mean / s.mean_ns() - 1.0).abs() < 0.005, "{s:?}: {mean}");
        }
    }
}
