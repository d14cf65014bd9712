//! Per-run metrics (spec §9), computed from the run's events in the same pass that writes the
//! log, so no log text is parsed back.

use std::fmt::Write as _;

use crate::model::{Observer, Status};
use crate::workload::CmdKind;

/// The columns of `runs.csv` (spec §10.1), plus the integer p95 the tables aggregate exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metrics {
    pub p95_latency_step: f64,
    pub mean_latency_step: f64,
    pub max_latency_step: f64,
    pub rd: f64,
    pub fe: f64,
    pub pending_peak: u64,
    pub pending_area: u64,
    pub n_ok: u64,
    pub n_err: u64,
    pub n_timeout: u64,
    pub completion_rate: f64,
    /// `p95_latency_step` as the integer it always is.
    pub p95_steps: u64,
    pub n_cmds: u64,
}

/// The header of `runs.csv`.
pub const RUNS_CSV_HEADER: &str = "run_id,p95_latency_step,mean_latency_step,max_latency_step,RD,FE,pending_peak,pending_area,n_ok,n_err,n_timeout,completion_rate,log_sha256";

impl Metrics {
    /// One `runs.csv` row without its line ending: reals `%.6f`, integers plain.
    pub fn csv_row(&self, run_id: &str, log_sha256_hex: &str) -> String {
        let mut row = String::with_capacity(run_id.len() + 160);
        self.write_csv_row(&mut row, run_id, log_sha256_hex);
        row
    }

    pub fn write_csv_row(&self, row: &mut String, run_id: &str, log_sha256_hex: &str) {
        push_csv_field(row, run_id);
        self.write_csv_fields(row);
        row.push(',');
        row.push_str(log_sha256_hex);
    }

    /// The row's metric fields, each preceded by a comma (no run_id, no hash).
    pub fn write_csv_fields(&self, row: &mut String) {
        let mut int = itoa::Buffer::new();
        for x in [
            self.p95_latency_step,
            self.mean_latency_step,
            self.max_latency_step,
            self.rd,
            self.fe,
        ] {
            row.push(',');
            push_fixed6(row, x);
        }
        for n in [
            self.pending_peak,
            self.pending_area,
            self.n_ok,
            self.n_err,
            self.n_timeout,
        ] {
            row.push(',');
            row.push_str(int.format(n));
        }
        row.push(',');
        push_fixed6(row, self.completion_rate);
    }
}

/// Appends a CSV field quoted as Python's csv module does (QUOTE_MINIMAL): only a field with
/// a comma, a double quote or a line break is quoted, with inner quotes doubled. Only run ids
/// (from odd seed_ids) ever need it.
pub fn push_csv_field(out: &mut String, field: &str) {
    // A byte scan: the four are ASCII, and a char-pattern search costs 3 % of a matrix run.
    if field
        .bytes()
        .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
    {
        out.push('"');
        out.push_str(&field.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(field);
    }
}

/// The inverse of [`push_csv_field`] for a row's first field: (field text, rest of the row).
pub fn split_first_csv_field(row: &str) -> (std::borrow::Cow<'_, str>, &str) {
    if let Some(quoted) = row.strip_prefix('"') {
        let mut i = 0;
        let bytes = quoted.as_bytes();
        while i < bytes.len() {
            if bytes[i] == b'"' {
                if bytes.get(i + 1) == Some(&b'"') {
                    i += 2;
                    continue;
                }
                let field = quoted[..i].replace("\"\"", "\"");
                return (field.into(), &quoted[i + 1..]);
            }
            i += 1;
        }
    }
    let end = row.find(',').unwrap_or(row.len());
    (row[..end].into(), &row[end..])
}

/// `x` in millionths as C's `%.6f` rounds it (round half to even on the exact binary value),
/// when that is cheap to know exactly.
///
/// `format!("{:.6}")` gives the same digits but costs a few hundred ns, which the matrix pays
/// six times per run. Scaling by 1e6 and rounding is exact unless the scaled value lies near a
/// rounding tie (the product carries an error below 2^-13 for x < 1e6); those rare values,
/// and anything large or negative, are None.
#[inline]
fn fast_micro(x: f64) -> Option<u64> {
    if !(0.0..1e6).contains(&x) {
        return None;
    }
    let scaled = x * 1e6;
    let floor = scaled.floor();
    let frac = scaled - floor;
    ((frac - 0.5).abs() > 1e-3).then(|| floor as u64 + u64::from(frac > 0.5))
}

/// Appends `x` as C's `%.6f` would print it.
pub fn push_fixed6(out: &mut String, x: f64) {
    let Some(micro) = fast_micro(x) else {
        let _ = write!(out, "{x:.6}");
        return;
    };
    let mut int = itoa::Buffer::new();
    out.push_str(int.format(micro / 1_000_000));
    out.push('.');
    let digits = micro % 1_000_000;
    let text = int.format(digits);
    for _ in text.len()..6 {
        out.push('0');
    }
    out.push_str(text);
}

/// The digits of `x`'s `%.6f` text read as one integer (13.7 -> 13700000): what the tables
/// sum, so that their means are those of runs.csv's printed values.
pub fn fixed6_digits(x: f64) -> u64 {
    fast_micro(x).unwrap_or_else(|| {
        format!("{x:.6}")
            .bytes()
            .filter(u8::is_ascii_digit)
            .fold(0u64, |v, b| v * 10 + u64::from(b - b'0'))
    })
}

const NOT_COMPLETED: u32 = u32::MAX;

/// The value of rank `rank` (0-based) of `values` sorted ascending; `max` is their maximum and
/// `counts` a reused histogram.
fn rank_value(counts: &mut Vec<u32>, values: &[u32], max: u32, rank: usize) -> u32 {
    counts.clear();
    counts.resize(max as usize + 1, 0);
    for &v in values {
        counts[v as usize] += 1;
    }
    let mut below = 0usize;
    for (v, &c) in counts.iter().enumerate() {
        below += c as usize;
        if below > rank {
            return v as u32;
        }
    }
    unreachable!("rank {rank} of {} values", values.len())
}

/// Counts in a Fenwick tree over 0..n (for inversion counting and FE pairs).
#[derive(Default)]
struct Fenwick(Vec<u32>);

impl Fenwick {
    fn reset(&mut self, n: usize) {
        self.0.clear();
        self.0.resize(n + 1, 0);
    }
    fn add(&mut self, i: usize) {
        let mut i = i + 1;
        while i < self.0.len() {
            self.0[i] += 1;
            i += i & i.wrapping_neg();
        }
    }
    /// Number of added values < i.
    fn below(&self, i: usize) -> u64 {
        let mut i = i;
        let mut s = 0u64;
        while i > 0 {
            s += u64::from(self.0[i]);
            i &= i - 1;
        }
        s
    }
}

/// Pairs of sums in one Fenwick tree over 0..n: FE needs a count and a weighted count over the
/// same prefixes, and one walk over the tree for both halves its cost (the largest part of a
/// metrics-only run's `finish`).
#[derive(Default)]
struct PairFenwick(Vec<[u64; 2]>);

impl PairFenwick {
    fn reset(&mut self, n: usize) {
        self.0.clear();
        self.0.resize(n + 1, [0, 0]);
    }
    fn add(&mut self, i: usize, v: [u64; 2]) {
        let mut i = i + 1;
        while i < self.0.len() {
            self.0[i][0] += v[0];
            self.0[i][1] += v[1];
            i += i & i.wrapping_neg();
        }
    }
    /// The sums over the added positions < i.
    fn below(&self, i: usize) -> [u64; 2] {
        let mut i = i;
        let mut s = [0u64; 2];
        while i > 0 {
            s[0] += self.0[i][0];
            s[1] += self.0[i][1];
            i &= i - 1;
        }
        s
    }
}

/// Accumulates the metrics of one run from its events (reused from run to run).
#[derive(Default)]
pub struct MetricsAcc {
    event_index: u32,
    submit_index: Vec<u32>,
    completion_pos: Vec<u32>,
    is_fence: Vec<bool>,
    latencies: Vec<u32>,
    completed: Fenwick,
    n_completed: u64,
    inversions: u64,
    fences: Vec<u32>,
    backlog: u64,
    pending_area: u64,
    n_ok: u64,
    n_err: u64,
    n_timeout: u64,
    pending_peak: u64,
    n_cmds: usize,
    /// Per completion position: (completed x seen so far, their fences below).
    pairs: PairFenwick,
    /// Latency histogram for the p95 (latencies are below the run's event count).
    latency_counts: Vec<u32>,
}

impl MetricsAcc {
    pub fn start(&mut self, n_cmds: usize) {
        self.n_cmds = n_cmds;
        self.event_index = 0;
        self.submit_index.clear();
        self.completion_pos.clear();
        self.is_fence.clear();
        self.latencies.clear();
        self.completed.reset(n_cmds);
        self.n_completed = 0;
        self.inversions = 0;
        self.fences.clear();
        self.backlog = 0;
        self.pending_area = 0;
        self.n_ok = 0;
        self.n_err = 0;
        self.n_timeout = 0;
        self.pending_peak = 0;
    }

    /// FE (spec §9.5): over each fence f, pairs (x < f < y) of submitted non-FENCE commands;
    /// a pair is satisfied iff x completed before y (or y never completed).
    ///
    /// Summed per pair instead of per fence: a pair x < y counts once for every fence between
    /// them, F(y) - F(x) times (F(i) = fences among ids < i), so one pass over y with a
    /// Fenwick tree over the completion positions of the x seen so far gives both sums.
    fn fence_effectiveness(&mut self) -> f64 {
        if self.fences.is_empty() {
            return 1.0;
        }
        let n_pos = self.n_completed as usize;
        self.pairs.reset(n_pos);
        let (mut fences_below, mut seen, mut seen_fsum) = (0u64, 0u64, 0u64);
        let (mut total, mut satisfied) = (0u64, 0u64);
        for y in 0..self.submit_index.len() {
            if self.is_fence[y] {
                fences_below += 1;
                continue;
            }
            total += fences_below * seen - seen_fsum;
            // x completed with cp(x) < cp(y); every completed x when y never completed.
            let limit = match self.completion_pos[y] {
                NOT_COMPLETED => n_pos,
                pos => pos as usize,
            };
            let [count, fsum] = self.pairs.below(limit);
            satisfied += fences_below * count - fsum;
            seen += 1;
            seen_fsum += fences_below;
            if let Some(pos) = Some(self.completion_pos[y]).filter(|&p| p != NOT_COMPLETED) {
                self.pairs.add(pos as usize, [1, fences_below]);
            }
        }
        if total == 0 {
            1.0
        } else {
            satisfied as f64 / total as f64
        }
    }

    /// The run's metrics; call after the run's `end` event.
    pub fn finish(&mut self) -> Metrics {
        let mut m = Metrics {
            pending_peak: self.pending_peak,
            pending_area: self.pending_area,
            n_ok: self.n_ok,
            n_err: self.n_err,
            n_timeout: self.n_timeout,
            n_cmds: self.n_cmds as u64,
            ..Metrics::default()
        };
        let lat = &self.latencies;
        if !lat.is_empty() {
            let n = lat.len();
            let sum: u64 = lat.iter().map(|&l| u64::from(l)).sum();
            let max = lat.iter().copied().max().unwrap_or(0);
            // Evaluated in double precision as the reference does (spec §9.2). Only this rank
            // of the sorted latencies is needed, and latencies are small integers (below the
            // event count): a counting pass finds it for less than a selection costs.
            let p95_index = (0.95 * (n - 1) as f64).floor() as usize;
            m.p95_steps = u64::from(rank_value(&mut self.latency_counts, lat, max, p95_index));
            m.p95_latency_step = m.p95_steps as f64;
            m.mean_latency_step = sum as f64 / n as f64;
            m.max_latency_step = f64::from(max);
        }
        let c = self.n_completed;
        if c >= 2 {
            m.rd = self.inversions as f64 / (c * (c - 1) / 2) as f64;
        }
        m.fe = self.fence_effectiveness();
        m.completion_rate = if self.n_cmds == 0 {
            1.0
        } else {
            self.n_ok as f64 / self.n_cmds as f64
        };
        m
    }
}

impl Observer for MetricsAcc {
    #[inline]
    fn submit(&mut self, cmd: u32, kind: CmdKind) {
        debug_assert_eq!(cmd as usize, self.submit_index.len());
        self.submit_index.push(self.event_index);
        self.completion_pos.push(NOT_COMPLETED);
        let fence = kind == CmdKind::Fence;
        self.is_fence.push(fence);
        if !fence {
            self.backlog += 1;
            self.pending_area += self.backlog;
        }
        self.event_index += 1;
    }

    #[inline]
    fn fence(&mut self, _fence_id: u32) {
        self.fences.push(self.submit_index.len() as u32 - 1);
        self.event_index += 1;
    }

    #[inline]
    fn complete(&mut self, cmd: u32, kind: CmdKind, status: Status, _out: u32) {
        let c = cmd as usize;
        if kind != CmdKind::Fence {
            self.latencies.push(self.event_index - self.submit_index[c]);
            self.backlog = self.backlog.saturating_sub(1);
            self.pending_area += self.backlog;
        }
        self.inversions += self.n_completed - self.completed.below(c + 1);
        self.completed.add(c);
        self.completion_pos[c] = self.n_completed as u32;
        self.n_completed += 1;
        match status {
            Status::Ok => self.n_ok += 1,
            Status::Err => self.n_err += 1,
            Status::Timeout => self.n_timeout += 1,
        }
        self.event_index += 1;
    }

    fn reset(&mut self, _pending_before: usize) {
        self.event_index += 1;
    }

    fn end(&mut self, _pending_left: usize, pending_peak: usize) {
        self.pending_peak = pending_peak as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::{fixed6_digits, push_csv_field, push_fixed6, rank_value, split_first_csv_field};

    #[test]
    fn csv_fields_are_quoted_like_pythons_csv_module() {
        for (field, text) in [
            ("plain_FIFO_0_0_NONE", "plain_FIFO_0_0_NONE"),
            ("a, b_FIFO", "\"a, b_FIFO\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("two\nlines", "\"two\nlines\""),
        ] {
            let mut row = String::new();
            push_csv_field(&mut row, field);
            assert_eq!(row, text);
            row.push_str(",1.000000");
            let (back, rest) = split_first_csv_field(&row);
            assert_eq!((back.as_ref(), rest), (field, ",1.000000"));
        }
    }

    fn fixed6(x: f64) -> String {
        let mut s = String::new();
        push_fixed6(&mut s, x);
        s
    }

    #[test]
    fn fixed6_matches_printf_on_known_values() {
        for (x, text) in [
            (8.0 / 3.0, "2.666667"),
            (1.0 / 6.0, "0.166667"),
            (0.0078125, "0.007812"),
            (0.0, "0.000000"),
            (1.0, "1.000000"),
            (13.7, "13.700000"),
            (0.9999995, "1.000000"), // the double is just above the tie
            (2.5e-7, "0.000000"),
            (1e7 / 3.0, "3333333.333333"),
        ] {
            assert_eq!(fixed6(x), text, "{x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn rank_value_is_the_value_at_that_rank_of_the_sorted_values(
            values in proptest::collection::vec(0u32..80, 1..70), at in 0.0f64..1.0,
        ) {
            let rank = ((values.len() - 1) as f64 * at) as usize;
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let max = *sorted.last().unwrap();
            proptest::prop_assert_eq!(rank_value(&mut vec![7; 3], &values, max, rank), sorted[rank]);
        }

        #[test]
        fn fixed6_matches_the_standard_formatter(
            x in proptest::prop_oneof![0.0f64..1.0, 0.0f64..2000.0, 0.0f64..1e7],
            num in 0u64..5000, den in 1u64..5000,
        ) {
            proptest::prop_assert_eq!(fixed6(x), format!("{x:.6}"));
            let q = num as f64 / den as f64;
            proptest::prop_assert_eq!(fixed6(q), format!("{q:.6}"));
            // The tables' sums read the same digits.
            proptest::prop_assert_eq!(fixed6_digits(q), fixed6(q).replace('.', "").parse::<u64>().unwrap());
        }
    }
}
