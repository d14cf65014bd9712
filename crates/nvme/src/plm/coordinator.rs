//! The PLM coordinator (PLMC): how many of an NVM set's deterministic-window counts (DC, the
//! reads a DTWin serves) each host may use in a window.
//!
//! k hosts with QoS classes share a capacity of C counts per window. Each window:
//! 1. each host's need is predicted, `P`: host-directed (the window's exact demand) or
//!    coordinator-directed (an exponentially weighted moving average, `P(n+1) = zeta D(n) +
//!    (1 - zeta) P(n)`, `P(0)` given, `C / k` by default), and it requests `R = ceil(P)`;
//! 2. if the requests fit (`sum R <= C`) each host gets its request; otherwise each first gets
//!    its minimum `min(R, floor(C x min_share / k))` and the residual is split by the
//!    allocation policy (a plug-in, [`super::allocation`]);
//! 3. a host whose demand exceeds its allocation asks for more within the window, and the
//!    counts nobody was allocated are granted by the policy's `extra` rule, in the order asked;
//!    nothing granted is taken back.
//!
//! Per host and window: consumed `= min(demand, allocated + extra)`, deficiency `= (demand -
//! consumed) / demand` (0 without demand), utilization `= consumed / (allocated + extra)` (1
//! when nothing was allocated). [`coordinate`] runs the rules window by window over known
//! demands; the PLM host library runs the same [`Coordinator`] as reads arrive.

use std::path::Path;

use qoslab_engine::ConfigError;

use super::allocation::{Allocation, Ask};

/// A host's QoS class, in priority order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    High = 0,
    Medium = 1,
    Low = 2,
}

impl QosClass {
    pub const ALL: [QosClass; 3] = [QosClass::High, QosClass::Medium, QosClass::Low];

    pub fn name(self) -> &'static str {
        ["high", "medium", "low"][self as usize]
    }

    pub fn parse(word: &str) -> Option<QosClass> {
        QosClass::ALL.into_iter().find(|c| c.name() == word)
    }
}

/// How the coordinator predicts a host's need for the next window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Predictor {
    /// Host-directed (HoD): the host tells the exact demand of the window.
    Exact,
    /// Coordinator-directed (CoD): exponential smoothing of the demands seen.
    Ewma { zeta: f64 },
}

/// One host's window, as the coordinator saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostWindow {
    pub predicted: f64,
    pub requested: u64,
    pub allocated: u64,
    pub extra: u64,
    pub demand: u64,
    pub consumed: u64,
}

impl HostWindow {
    pub fn deficiency(&self) -> f64 {
        if self.demand == 0 {
            0.0
        } else {
            (self.demand - self.consumed) as f64 / self.demand as f64
        }
    }

    pub fn utilization(&self) -> f64 {
        let given = self.allocated + self.extra;
        if given == 0 {
            1.0
        } else {
            self.consumed as f64 / given as f64
        }
    }
}

/// The coordinator's state between windows.
pub struct Coordinator {
    capacity: u64,
    min_share: f64,
    predictor: Predictor,
    policy: Box<dyn Allocation>,
    classes: Vec<QosClass>,
    /// Host indices in priority order: class, then first appearance.
    order: Vec<usize>,
    /// The prediction for the coming window (EWMA state).
    next: Vec<f64>,
    /// The current window.
    window: Vec<HostWindow>,
    pool_at_start: u64,
    pool_left: u64,
}

impl Coordinator {
    /// A coordinator for hosts of `classes` (in order of first appearance) sharing `capacity`
    /// counts a window; `initial` is `P(0)` of the moving average (`None`: `C / k`).
    pub fn new(
        classes: &[QosClass],
        capacity: u64,
        predictor: Predictor,
        min_share: f64,
        initial: Option<f64>,
        policy: Box<dyn Allocation>,
    ) -> Self {
        let k = classes.len().max(1);
        let p0 = initial.unwrap_or(capacity as f64 / k as f64);
        let mut order: Vec<usize> = (0..classes.len()).collect();
        order.sort_by_key(|&h| (classes[h], h));
        Coordinator {
            capacity,
            min_share,
            predictor,
            policy,
            classes: classes.to_vec(),
            order,
            next: vec![p0; classes.len()],
            window: vec![HostWindow::default(); classes.len()],
            pool_at_start: 0,
            pool_left: 0,
        }
    }

    pub fn hosts(&self) -> usize {
        self.classes.len()
    }

    pub fn class(&self, host: usize) -> QosClass {
        self.classes[host]
    }

    /// Host indices in priority order.
    pub fn priority_order(&self) -> &[usize] {
        &self.order
    }

    /// The current window of `host`.
    pub fn host(&self, host: usize) -> &HostWindow {
        &self.window[host]
    }

    /// Starts a window: predicts (from `exact`, each host's demand of the window, when the
    /// predictor is host-directed), requests and allocates.
    pub fn begin_window(&mut self, exact: Option<&[u64]>) {
        let k = self.classes.len();
        for h in 0..k {
            let predicted = match (self.predictor, exact) {
                (Predictor::Exact, Some(d)) => d[h] as f64,
                (Predictor::Exact, None) => panic!("a host-directed window needs its demands"),
                (Predictor::Ewma { .. }, _) => self.next[h],
            };
            self.window[h] = HostWindow {
                predicted,
                requested: predicted.ceil().max(0.0) as u64,
                ..HostWindow::default()
            };
        }
        let asked: u64 = self.window.iter().map(|w| w.requested).sum();
        if asked <= self.capacity {
            for w in &mut self.window {
                w.allocated = w.requested;
            }
        } else {
            let floor = (self.capacity as f64 * self.min_share / k.max(1) as f64).floor() as u64;
            for w in &mut self.window {
                w.allocated = w.requested.min(floor);
            }
            let residual = self.capacity - self.window.iter().map(|w| w.allocated).sum::<u64>();
            let asks: Vec<Ask> = self
                .order
                .iter()
                .map(|&h| Ask {
                    class: self.classes[h],
                    want: self.window[h].requested - self.window[h].allocated,
                })
                .collect();
            let adds = self.policy.split(&asks, residual);
            for (&h, add) in self.order.iter().zip(adds) {
                self.window[h].allocated += add;
            }
        }
        let allocated: u64 = self.window.iter().map(|w| w.allocated).sum();
        self.pool_at_start = self.capacity.saturating_sub(allocated);
        self.pool_left = self.pool_at_start;
    }

    /// `host` asks for `shortfall` more counts now; returns how many it is granted.
    pub fn ask_extra(&mut self, host: usize, shortfall: u64) -> u64 {
        let w = &mut self.window[host];
        let granted = self.policy.extra(
            self.classes[host],
            shortfall,
            self.pool_at_start,
            self.pool_left,
            w.extra,
        );
        w.extra += granted;
        self.pool_left -= granted;
        granted
    }

    /// Counts nobody holds in the current window.
    pub fn pool_left(&self) -> u64 {
        self.pool_left
    }

    /// Ends the window with each host's demand: returns the window's per-host record and
    /// moves the moving average on.
    pub fn end_window(&mut self, demands: &[u64]) -> Vec<HostWindow> {
        for (h, w) in self.window.iter_mut().enumerate() {
            w.demand = demands[h];
            w.consumed = w.demand.min(w.allocated + w.extra);
            if let Predictor::Ewma { zeta } = self.predictor {
                self.next[h] = zeta * w.demand as f64 + (1.0 - zeta) * self.next[h];
            }
        }
        self.window.clone()
    }
}

/// Runs the coordinator window by window over known demands (`demands[n][h]`, host h of
/// window n): each window's allocation, then each host whose demand exceeds its allocation
/// asks for the shortfall, in priority order. Returns `[n][h]` records.
pub fn coordinate(coordinator: &mut Coordinator, demands: &[Vec<u64>]) -> Vec<Vec<HostWindow>> {
    demands
        .iter()
        .map(|d| {
            coordinator.begin_window(Some(d));
            for i in 0..coordinator.hosts() {
                let h = coordinator.priority_order()[i];
                let have = coordinator.host(h).allocated;
                if d[h] > have {
                    coordinator.ask_extra(h, d[h] - have);
                }
            }
            coordinator.end_window(d)
        })
        .collect()
}

/// The demands of the windows, as `qoslab plm coordinate` reads them: a CSV file of
/// `window,host,class,demand` rows, windows and hosts in order of first appearance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DemandTable {
    pub windows: Vec<String>,
    pub hosts: Vec<String>,
    pub classes: Vec<QosClass>,
    /// `[window][host]`; a host missing from a window demands nothing there.
    pub demand: Vec<Vec<u64>>,
}

impl DemandTable {
    pub const HEADER: &'static str = "window,host,class,demand";

    pub fn read(path: &Path) -> Result<DemandTable, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::in_file(path, format!("cannot read: {e}")))?;
        DemandTable::parse(&text, path)
    }

    /// Parses the CSV `text`, named `path` in messages.
    pub fn parse(text: &str, path: &Path) -> Result<DemandTable, ConfigError> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, h)) if h.trim() == Self::HEADER => {}
            _ => {
                return Err(ConfigError::at(
                    path,
                    1,
                    format!("expected the header {}", Self::HEADER),
                ));
            }
        }
        let mut t = DemandTable::default();
        // Hosts seen in the current window.
        let mut seen: Vec<usize> = Vec::new();
        for (i, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |m: String| ConfigError::at(path, i as u64 + 1, m);
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() != 4 {
                return Err(bad(format!(
                    "expected 4 fields ({}), got {}",
                    Self::HEADER,
                    f.len()
                )));
            }
            let class = QosClass::parse(f[2]).ok_or_else(|| {
                bad(format!(
                    "field 'class': expected high, medium or low, got '{}'",
                    f[2]
                ))
            })?;
            let demand: u64 = f[3].parse().map_err(|_| {
                bad(format!(
                    "field 'demand': expected a whole number of requests, got '{}'",
                    f[3]
                ))
            })?;
            if t.windows.last().map(String::as_str) != Some(f[0]) {
                if t.windows.iter().any(|w| w == f[0]) {
                    return Err(bad(format!(
                        "field 'window': window '{}' appears again after another window",
                        f[0]
                    )));
                }
                t.windows.push(f[0].to_string());
                t.demand.push(vec![0; t.hosts.len()]);
                seen.clear();
            }
            let h = match t.hosts.iter().position(|n| n == f[1]) {
                Some(h) => {
                    if t.classes[h] != class {
                        return Err(bad(format!(
                            "field 'class': host '{}' was {} before, now {}",
                            f[1],
                            t.classes[h].name(),
                            class.name()
                        )));
                    }
                    h
                }
                None => {
                    t.hosts.push(f[1].to_string());
                    t.classes.push(class);
                    for d in &mut t.demand {
                        d.push(0);
                    }
                    t.hosts.len() - 1
                }
            };
            if seen.contains(&h) {
                return Err(bad(format!(
                    "host '{}' appears twice in window '{}'",
                    f[1], f[0]
                )));
            }
            seen.push(h);
            let row = t.demand.last_mut().expect("a window");
            row[h] = demand;
        }
        if t.windows.is_empty() {
            return Err(ConfigError::in_file(
                path,
                "no windows: expected rows after the header",
            ));
        }
        Ok(t)
    }
}

/// A distribution of ratios in [0, 1] in bins of 1e-4, for percentiles over a whole run in
/// fixed memory.
#[derive(Clone, Debug)]
pub struct RatioHist {
    bins: Vec<u64>,
    n: u64,
    min: f64,
}

impl Default for RatioHist {
    fn default() -> Self {
        RatioHist {
            bins: vec![0; 10_001],
            n: 0,
            min: f64::INFINITY,
        }
    }
}

impl RatioHist {
    pub fn record(&mut self, x: f64) {
        let bin = (x.clamp(0.0, 1.0) * 10_000.0).round() as usize;
        self.bins[bin] += 1;
        self.n += 1;
        self.min = self.min.min(x);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    /// The nearest-rank `q` quantile (to the nearest 1e-4), or NaN when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.bins.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return i as f64 / 10_000.0;
            }
        }
        1.0
    }

    /// The smallest value recorded (exact).
    pub fn min(&self) -> f64 {
        self.min
    }
}

#[cfg(test)]
mod tests {
    use super::super::allocation::{AllocationSetup, lookup};
    use super::*;
    use QosClass::*;

    fn plmc(classes: &[QosClass], c: u64, predictor: Predictor, policy: &str) -> Coordinator {
        let build = lookup("policy", policy).unwrap().build.unwrap();
        let p = build(&AllocationSetup {
            ratios: [0.5, 0.3, 0.2],
        });
        Coordinator::new(classes, c, predictor, 0.5, None, p)
    }

    /// (requested, allocated, extra, consumed) of each host of a window.
    fn row(w: &[HostWindow]) -> Vec<(u64, u64, u64, u64)> {
        w.iter()
            .map(|h| (h.requested, h.allocated, h.extra, h.consumed))
            .collect()
    }

    #[test]
    fn requests_that_fit_are_granted_as_asked() {
        // C = 100, demands 30 + 20 + 10 = 60: each host gets its demand, 40 stay unallocated.
        let mut c = plmc(&[High, Medium, Low], 100, Predictor::Exact, "sp");
        let out = coordinate(&mut c, &[vec![30, 20, 10]]);
        assert_eq!(
            row(&out[0]),
            vec![(30, 30, 0, 30), (20, 20, 0, 20), (10, 10, 0, 10)]
        );
        assert!(
            out[0]
                .iter()
                .all(|h| h.deficiency() == 0.0 && h.utilization() == 1.0)
        );
    }

    #[test]
    fn strict_priority_fills_the_residual_in_class_order() {
        // C = 100, k = 3, min_share 0.5: minimum floor(100 x 0.5 / 3) = 16 each, residual
        // 100 - 48 = 52. Hosts listed low, high, medium: high takes min(60 - 16, 52) = 44,
        // medium min(40 - 16, 8) = 8, low nothing more. Demands equal requests: nothing is left
        // for extras.
        let mut c = plmc(&[Low, High, Medium], 100, Predictor::Exact, "sp");
        let out = coordinate(&mut c, &[vec![50, 60, 40]]);
        assert_eq!(
            row(&out[0]),
            vec![(50, 16, 0, 16), (60, 60, 0, 60), (40, 24, 0, 24)]
        );
        assert_eq!(out[0][0].deficiency(), 34.0 / 50.0);
    }

    #[test]
    fn fixed_ratio_gives_each_class_its_share_of_the_residual_and_of_the_pool() {
        // C = 100, minimum 16 each, residual 52: high min(44, floor(52 x .5) = 26) = 26, medium
        // min(24, floor(52 x .3) = 15) = 15, low min(34, floor(52 x .2) = 10) = 10; 99 given,
        // pool 1. Extras in class order: high asks 60 - 42 = 18, gets min(18, floor(1 x .5) =
        // 0, 1) = 0; medium and low likewise get 0.
        let mut c = plmc(&[High, Medium, Low], 100, Predictor::Exact, "fr");
        let out = coordinate(&mut c, &[vec![60, 40, 50]]);
        assert_eq!(
            row(&out[0]),
            vec![(60, 42, 0, 42), (40, 31, 0, 31), (50, 26, 0, 26)]
        );
    }

    #[test]
    fn extra_counts_go_to_hosts_short_of_their_demand_in_priority_order() {
        // C = 100, moving average with zeta 0.5 from P(0) = C / k = 33.33: window 0 requests
        // 34 each (102 > 100): minimum 16 each, residual 52 by strict priority: high 18,
        // medium 18, low 16 -> 34, 34, 32. Demands 50, 10, 20: pool 0, so high is short 16.
        // Window 1: P = 0.5 x 50 + 0.5 x 33.33 = 41.67 -> 42, 22 -> 22, 26.67 -> 27: 91 fit;
        // pool 9. Demands 60, 10, 20: high asks 18, gets 9.
        let mut c = plmc(
            &[High, Medium, Low],
            100,
            Predictor::Ewma { zeta: 0.5 },
            "sp",
        );
        let out = coordinate(&mut c, &[vec![50, 10, 20], vec![60, 10, 20]]);
        assert_eq!(
            row(&out[0]),
            vec![(34, 34, 0, 34), (34, 34, 0, 10), (34, 32, 0, 20)]
        );
        assert_eq!(
            row(&out[1]),
            vec![(42, 42, 9, 51), (22, 22, 0, 10), (27, 27, 0, 20)]
        );
        assert!((out[1][0].predicted - 41.666_666_666_666_664).abs() < 1e-12);
        assert_eq!(out[0][1].utilization(), 10.0 / 34.0);
        assert_eq!(out[1][0].deficiency(), 9.0 / 60.0);
    }

    #[test]
    fn fixed_ratio_caps_a_class_extra_at_its_share_of_the_pool() {
        // C = 100, demands known 10, 10, 10 -> all fit, pool 70. Then in a timed window high
        // asks 50 more in two steps: it may have floor(70 x .5) = 35 over the window.
        let mut c = plmc(&[High, Medium, Low], 100, Predictor::Exact, "fr");
        c.begin_window(Some(&[10, 10, 10]));
        assert_eq!(c.ask_extra(0, 30), 30);
        assert_eq!(c.ask_extra(0, 20), 5);
        assert_eq!(c.ask_extra(2, 50), 14, "low: floor(70 x .2)");
        assert_eq!(c.pool_left(), 70 - 35 - 14);
    }

    #[test]
    fn proportional_and_max_min_split_the_residual_their_ways() {
        // Residual 52 among wants 44 (high), 24 (medium), 34 (low), total 102.
        let asks = [
            Ask {
                class: High,
                want: 44,
            },
            Ask {
                class: Medium,
                want: 24,
            },
            Ask {
                class: Low,
                want: 34,
            },
        ];
        let p = lookup("policy", "proportional").unwrap().build.unwrap()(&AllocationSetup {
            ratios: [0.5, 0.3, 0.2],
        });
        // 52 x 44/102 = 22.43, 52 x 24/102 = 12.24, 52 x 34/102 = 17.33: floors 22, 12, 17,
        // the one count left to the largest remainder (high, .43).
        assert_eq!(p.split(&asks, 52), vec![23, 12, 17]);
        let m = lookup("policy", "maxmin").unwrap().build.unwrap()(&AllocationSetup {
            ratios: [0.5, 0.3, 0.2],
        });
        // 17 each leaves 1, to the first in priority order.
        assert_eq!(m.split(&asks, 52), vec![18, 17, 17]);
        // Medium wants only 10: 10 to it, the other two share 42 evenly.
        let asks2 = [
            asks[0],
            Ask {
                class: Medium,
                want: 10,
            },
            asks[2],
        ];
        assert_eq!(m.split(&asks2, 52), vec![21, 10, 21]);
    }

    #[test]
    fn ratio_quantiles_are_nearest_rank() {
        let mut h = RatioHist::default();
        for x in [0.5, 1.0, 0.25, 0.75] {
            h.record(x);
        }
        assert_eq!(h.quantile(0.10), 0.25);
        assert_eq!(h.quantile(0.50), 0.5);
        assert_eq!(h.quantile(0.90), 1.0);
        assert_eq!(h.min(), 0.25);
    }
}
