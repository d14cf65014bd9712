//! Reports in fio's formats: `json` has exactly the key structure of fio 3.33's
//! `--output-format=json` (checked against a real fio run in the tests), `json+` adds the
//! completion-latency bins in fio's own buckets, `normal` is a short human summary like fio's.
//!
//! Fields fio fills from the host (CPU use, context switches, page faults) are 0: nothing is
//! measured on a host. The timestamps are those of the simulated start, the Unix epoch, so a
//! report depends only on its inputs and seed. One top-level key is qoslab's own, `qoslab`:
//! seed(s), device, counters of the NVMe stage and of the device, and, with `--repeat`, each
//! figure's mean and 95 % confidence interval over the runs.
//!
//! This file owns what every format shares (the formats chosen, the reported entries, fio's
//! shares and aggregates) and `render`; each format has its own file: `json`, `terse`,
//! `normal`, and `stats` the intervals of `--repeat` that JSON and normal both print.

use serde_json::{Map, Value, json};

use qoslab_workload::fio::DEFAULT_PERCENTILES;

use crate::job::{JobResult, JobStats, OpStats};
use crate::run::Outcome;
use crate::{SimError, SimOptions, WorkloadSpec};

mod json;
mod normal;
mod stats;
mod terse;

/// The report formats of fio's `--output-format`: any set of `normal`, `terse`, `json` and
/// `json+`, written as a comma list. As in fio (a bit mask of formats), each chosen format is
/// rendered once, in fio's order (terse, then JSON, then normal) whatever the order given, and
/// `json+` includes `json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputFormat {
    normal: bool,
    terse: bool,
    /// `Some(false)`: json; `Some(true)`: json+.
    json: Option<bool>,
    /// fio's `--terse-version`: 2 to 5 (3, fio's default, unless changed).
    terse_version: u8,
}

// The single formats keep the names they had as an enum's variants, so callers still write
// `OutputFormat::Json`.
#[allow(non_upper_case_globals)]
impl OutputFormat {
    pub const Normal: OutputFormat = OutputFormat {
        normal: true,
        terse: false,
        json: None,
        terse_version: 3,
    };
    pub const Json: OutputFormat = OutputFormat {
        normal: false,
        terse: false,
        json: Some(false),
        terse_version: 3,
    };
    pub const JsonPlus: OutputFormat = OutputFormat {
        normal: false,
        terse: false,
        json: Some(true),
        terse_version: 3,
    };
    pub const Terse: OutputFormat = OutputFormat {
        normal: false,
        terse: true,
        json: None,
        terse_version: 3,
    };

    /// The formats fio accepts, one word each.
    pub const NAMES: [&'static str; 4] = ["normal", "terse", "json", "json+"];

    /// Reads `normal`, `terse`, `json`, `json+` or a comma list of them.
    pub fn from_name(name: &str) -> Option<Self> {
        let mut f = OutputFormat {
            normal: false,
            terse: false,
            json: None,
            terse_version: 3,
        };
        for word in name.split(',') {
            match word.trim() {
                "normal" => f.normal = true,
                "terse" => f.terse = true,
                "json" => f.json = Some(f.json.unwrap_or(false)),
                "json+" => f.json = Some(true),
                _ => return None,
            }
        }
        Some(f)
    }

    /// The same formats, with terse lines of fio's `--terse-version` `version` (2 to 5).
    pub fn with_terse_version(self, version: u8) -> Option<Self> {
        (2..=5).contains(&version).then_some(OutputFormat {
            terse_version: version,
            ..self
        })
    }

    fn json_plus(self) -> bool {
        self.json == Some(true)
    }
}

/// The version string: the JSON dialect, then the producer.
pub fn version_string() -> String {
    format!("fio-3.33 (qoslab-sim {})", env!("CARGO_PKG_VERSION"))
}

/// One reported entry: a job clone, or a whole group under `group_reporting`.
struct Entry {
    name: String,
    group: u32,
    def: usize,
    clones: u32,
    stats: JobStats,
}

fn entries(opts: &SimOptions, jobs: &[JobResult]) -> Vec<Entry> {
    let group_reporting = |group: u32| match &opts.workload {
        WorkloadSpec::Jobs(f) => f
            .jobs
            .iter()
            .any(|j| j.group_id == group && j.group_reporting),
        WorkloadSpec::Trace { .. } => false,
    };
    let mut out: Vec<Entry> = Vec::new();
    for j in jobs {
        if group_reporting(j.group)
            && let Some(e) = out.iter_mut().find(|e| e.group == j.group)
        {
            e.stats.merge(&j.stats);
            e.clones += 1;
            continue;
        }
        out.push(Entry {
            name: j.name.clone(),
            group: j.group,
            def: j.def,
            clones: 1,
            stats: j.stats.clone(),
        });
    }
    out
}

fn percentile_list(opts: &SimOptions, def: usize) -> Vec<f64> {
    match &opts.workload {
        WorkloadSpec::Jobs(f) => f.jobs[def].percentile_list.clone(),
        WorkloadSpec::Trace { .. } => DEFAULT_PERCENTILES.to_vec(),
    }
}

/// The digits after the point of the normal output's percentile labels.
fn percentile_precision(opts: &SimOptions, def: usize) -> usize {
    match &opts.workload {
        WorkloadSpec::Jobs(f) => f.jobs[def].percentile_precision,
        WorkloadSpec::Trace { .. } => 2,
    }
}

fn lat_percentiles(opts: &SimOptions, def: usize) -> bool {
    match &opts.workload {
        WorkloadSpec::Jobs(f) => f.jobs[def].lat_percentiles,
        WorkloadSpec::Trace { .. } => false,
    }
}

fn pct_key(p: f64) -> String {
    format!("{p:.6}")
}

/// fio's `stat_calc_dist`: a bucket's share in percent, at least 0.1 when it holds anything.
/// fio divides the depths by the I/Os queued: those its engine never counted in a commit
/// (posixaio's and vsync's last, [`crate::job::EngineCalls`]) leave the shares short of 100 %;
/// the periodic syncs it counts in the buckets and not in the divisor take them past it.
fn level_total(s: &JobStats) -> u64 {
    s.iodepth_level.iter().sum::<u64>() + s.iodepth_uncounted - s.iodepth_syncs
}

fn depth_share(count: u64, total: u64) -> f64 {
    let pct = share(count, total);
    if count > 0 && pct < 0.1 { 0.1 } else { pct }
}

/// fio's latency distribution buckets over completion latency: the share of I/Os in
/// [previous bound, bound) for bounds in ns, us and ms.
fn latency_buckets(stats: &JobStats) -> (Value, Value, Value) {
    let mut all = qoslab_engine::LatencyHist::new();
    for op in &stats.ops[..3] {
        all.merge(&op.clat);
    }
    let n = all.count();
    let bounds = [2u64, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
    // fio's `stat_calc_lat`: at least 0.01 % for a bucket that holds anything.
    let share = |lo: u64, hi: u64| {
        let c = all.count_in(lo, hi);
        let pct = share(c, n);
        if c > 0 && pct < 0.01 { 0.01 } else { pct }
    };
    let mut ns = Map::new();
    let mut us = Map::new();
    let mut ms = Map::new();
    let mut lo = 0;
    for b in bounds {
        ns.insert(b.to_string(), json!(share(lo, b)));
        lo = b;
    }
    let mut lo = 1000;
    for b in bounds {
        us.insert(b.to_string(), json!(share(lo, b * 1000)));
        lo = b * 1000;
    }
    let mut lo = 1_000_000;
    for b in [2u64, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000] {
        ms.insert(b.to_string(), json!(share(lo, b * 1_000_000)));
        lo = b * 1_000_000;
    }
    ms.insert(">=2000".into(), json!(share(lo, u64::MAX)));
    (Value::Object(ns), Value::Object(us), Value::Object(ms))
}

fn bw_of(op: &OpStats, runtime_ns: u64) -> f64 {
    if runtime_ns == 0 {
        0.0
    } else {
        (op.bytes as f64 * 1e9 / runtime_ns as f64).round()
    }
}

/// A direction's run time in whole ms as fio reports it (0 when it did no I/O).
fn runtime_ms(op: &OpStats, runtime_ns: u64) -> u64 {
    if op.ios == 0 {
        0
    } else {
        (runtime_ns as f64 / 1e6).round() as u64
    }
}

/// fio's aggregate bandwidth of `e`'s reporting group per direction (its `rs->agg`, bytes/s):
/// the bytes of the group's jobs that ran the direction over the longest of their runs in ms.
fn group_agg(entries: &[Entry], e: &Entry) -> [u64; 3] {
    let mut agg = [0; 3];
    for (k, agg) in agg.iter_mut().enumerate() {
        let (mut bytes, mut max_run) = (0, 0);
        for other in entries.iter().filter(|o| o.group == e.group) {
            let run = runtime_ms(&other.stats.ops[k], other.stats.runtime_ns);
            if run > 0 {
                bytes += other.stats.ops[k].bytes;
                max_run = max_run.max(run);
            }
        }
        *agg = (bytes * 1000).checked_div(max_run).unwrap_or(0);
    }
    agg
}

/// fio's `bw_agg` (JSON) and `per=` (normal output): the mean of a job's bandwidth samples, in
/// whole KiB/s, as a share in % of its group's aggregate `agg` (bytes/s), at most 100; 100 when
/// the aggregate is 1 KiB/s or less (stat.c, convert_agg_kbytes_percent).
fn agg_percent(mean_kib_per_s: f64, agg: u64) -> f64 {
    if agg <= 1024 {
        return 100.0;
    }
    (mean_kib_per_s.trunc() * 100.0 / (agg as f64 / 1024.0)).min(100.0)
}

fn share(count: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * count as f64 / total as f64
    }
}

/// The job's `description`, which terse output ends with.
fn description(opts: &SimOptions, def: usize) -> Option<String> {
    match &opts.workload {
        WorkloadSpec::Jobs(f) => f.jobs[def]
            .options
            .iter()
            .rev()
            .find(|(k, _)| k == "description")
            .map(|(_, v)| v.clone()),
        WorkloadSpec::Trace { .. } => None,
    }
}

/// Renders the report of the runs (one per seed, in seed order).
pub fn render(opts: &SimOptions, seeds: &[u64], outcomes: &[Outcome]) -> Result<String, SimError> {
    let per_run: Vec<Vec<Entry>> = outcomes.iter().map(|o| entries(opts, &o.jobs)).collect();
    // The reported statistics: one run's, or with --repeat all runs pooled (histograms merged,
    // run times added), next to the per-run confidence intervals.
    let mut pooled = entries(opts, &outcomes[0].jobs);
    for run in &per_run[1..] {
        for (p, e) in pooled.iter_mut().zip(run) {
            let rt = p.stats.runtime_ns + e.stats.runtime_ns;
            p.stats.merge(&e.stats);
            p.stats.runtime_ns = rt;
        }
    }
    let end_ns = outcomes.iter().map(|o| o.end_ns).max().unwrap_or(0);
    let format = opts.format;
    let mut text = String::new();
    if format.terse {
        text.push_str(&terse::terse(opts, &pooled));
    }
    if format.json.is_some() {
        text.push_str(&json::json_report(
            opts, seeds, &pooled, &per_run, outcomes, end_ns,
        )?);
    }
    if format.normal {
        text.push_str(&normal::normal(opts, seeds, &pooled, &per_run, outcomes));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_formats_are_a_comma_list_rendered_in_fios_order() {
        let f = OutputFormat::from_name("json,normal").unwrap();
        assert!(f.normal && f.json == Some(false) && !f.terse);
        assert_eq!(
            OutputFormat::from_name("json+,json").unwrap(),
            OutputFormat::JsonPlus
        );
        assert_eq!(
            OutputFormat::from_name("terse").unwrap(),
            OutputFormat::Terse
        );
        assert_eq!(OutputFormat::from_name("json,xml"), None);
    }

    #[test]
    fn percentile_keys_are_written_like_fio() {
        assert_eq!(pct_key(99.0), "99.000000");
        assert_eq!(pct_key(99.99), "99.990000");
    }
}
