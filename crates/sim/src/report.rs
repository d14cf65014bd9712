//! Reports in fio's formats: `json` has exactly the key structure of fio 3.33's
//! `--output-format=json` (checked against a real fio run in the tests), `json+` adds the
//! completion-latency bins in fio's own buckets, `normal` is a short human summary like fio's.
//!
//! Fields fio fills from the host (CPU use, context switches, page faults) are 0: nothing is
//! measured on a host. The timestamps are those of the simulated start, the Unix epoch, so a
//! report depends only on its inputs and seed. One top-level key is qoslab's own, `qoslab`:
//! seed(s), device, counters of the NVMe stage and of the device, and, with `--repeat`, each
//! figure's mean and 95 % confidence interval over the runs.

use serde_json::{Map, Value, json};

use qoslab_engine::Op;
use qoslab_workload::fio::DEFAULT_PERCENTILES;

use crate::job::{DEPTH_BUCKETS, JobResult, JobStats, OpStats};
use crate::run::Outcome;
use crate::{SimError, SimOptions, WorkloadSpec};

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

fn moments_json(m: &qoslab_engine::Moments) -> Value {
    json!({
        "min": m.min,
        "max": m.max,
        "mean": m.mean(),
        "stddev": m.stddev(),
        "N": m.n,
    })
}

fn pct_key(p: f64) -> String {
    format!("{p:.6}")
}

/// A latency's moments, with its percentiles (and json+ bins) when `pcts` is given.
fn latency_json(h: &qoslab_engine::LatencyHist, pcts: Option<&[f64]>, plus: bool) -> Value {
    let mut m = match moments_json(&h.moments) {
        Value::Object(m) => m,
        _ => unreachable!(),
    };
    if let Some(pcts) = pcts
        && h.count() > 0
    {
        let mut p = Map::new();
        for &x in pcts {
            p.insert(pct_key(x), json!(h.fio_percentile(x)));
        }
        m.insert("percentile".into(), Value::Object(p));
        if plus {
            let mut bins = Map::new();
            for (v, c) in h.fio_bins() {
                bins.insert(v.to_string(), json!(c));
            }
            m.insert("bins".into(), Value::Object(bins));
        }
    }
    Value::Object(m)
}

/// `lat_pcts`: fio's `lat_percentiles=1`, percentiles of the total latency besides clat's.
fn op_json(
    op: &OpStats,
    runtime_ns: u64,
    pcts: &[f64],
    lat_pcts: bool,
    plus: bool,
    group_agg: u64,
) -> Value {
    let secs = runtime_ns as f64 / 1e9;
    let (bw_bytes, iops) = if runtime_ns == 0 || op.ios == 0 {
        (0u64, 0.0)
    } else {
        (
            (op.bytes as f64 / secs).round() as u64,
            op.total_ios() as f64 / secs,
        )
    };
    let samples = |m: &qoslab_engine::Moments| (m.n, m.min, m.max, m.mean(), m.stddev());
    let (bw_n, bw_min, bw_max, bw_mean, bw_dev) = samples(&op.bw_samples);
    let (io_n, io_min, io_max, io_mean, io_dev) = samples(&op.iops_samples);
    let bw_agg = if bw_n > 0 {
        agg_percent(bw_mean, group_agg)
    } else {
        0.0
    };
    json!({
        "io_bytes": op.bytes,
        "io_kbytes": op.bytes / 1024,
        "bw_bytes": bw_bytes,
        "bw": bw_bytes / 1024,
        "iops": iops,
        "runtime": runtime_ms(op, runtime_ns),
        "total_ios": op.total_ios(),
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": moments_json(&op.slat),
        "clat_ns": latency_json(&op.clat, Some(pcts), plus),
        "lat_ns": latency_json(&op.lat, lat_pcts.then_some(pcts), plus),
        "bw_min": bw_min,
        "bw_max": bw_max,
        "bw_agg": bw_agg,
        "bw_mean": bw_mean,
        "bw_dev": bw_dev,
        "bw_samples": bw_n,
        "iops_min": io_min,
        "iops_max": io_max,
        "iops_mean": io_mean,
        "iops_stddev": io_dev,
        "iops_samples": io_n,
    })
}

fn share_map(keys: &[&str], counts: &[u64; DEPTH_BUCKETS]) -> Value {
    share_map_of(keys, counts, counts.iter().sum())
}

fn share_map_of(keys: &[&str], counts: &[u64; DEPTH_BUCKETS], total: u64) -> Value {
    let mut m = Map::new();
    for (k, c) in keys.iter().zip(counts) {
        m.insert((*k).into(), json!(depth_share(*c, total)));
    }
    Value::Object(m)
}

/// fio's JSON `steadystate` object: the criterion, whether it was attained, the samples.
fn steadystate_json(ss: &crate::job::SteadyStateReport) -> Value {
    let spec = ss.spec.expect("a report has its spec");
    let pct = if spec.percent { "%" } else { "" };
    let n = ss.data.len().max(1) as u64;
    json!({
        "ss": format!(
            "{}{}:{:.6}{pct}",
            if spec.iops { "iops" } else { "bw" },
            if spec.slope { "_slope" } else { "" },
            spec.limit
        ),
        "duration": ss.dur_s,
        "attained": u8::from(ss.attained),
        "criterion": format!("{:.6}{pct}", ss.criterion),
        "max_deviation": ss.max_deviation,
        "slope": ss.slope,
        "data": {
            "bw_mean": ss.data.iter().map(|d| d.1).sum::<u64>() / n,
            "iops_mean": ss.data.iter().map(|d| d.0).sum::<u64>() / n,
            "iops": ss.data.iter().map(|d| d.0).collect::<Vec<_>>(),
            "bw": ss.data.iter().map(|d| d.1).collect::<Vec<_>>(),
        },
    })
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

fn job_options(opts: &SimOptions, def: usize) -> Value {
    let mut m = Map::new();
    match &opts.workload {
        WorkloadSpec::Jobs(f) => {
            for (k, v) in &f.jobs[def].options {
                m.insert(k.clone(), json!(v));
            }
        }
        WorkloadSpec::Trace { paths, .. } => {
            m.insert("read_iolog".into(), json!(paths[def].display().to_string()));
        }
    }
    Value::Object(m)
}

fn iodepth(opts: &SimOptions, def: usize) -> u32 {
    match &opts.workload {
        WorkloadSpec::Jobs(f) => f.jobs[def].iodepth,
        WorkloadSpec::Trace { qd_cap, .. } => *qd_cap,
    }
}

fn entry_json(opts: &SimOptions, e: &Entry, group_agg: &[u64; 3], end_ns: u64) -> Value {
    let plus = opts.format.json_plus();
    let pcts = percentile_list(opts, e.def);
    let s = &e.stats;
    let (lat_ns, lat_us, lat_ms) = latency_buckets(s);
    let mut m = Map::new();
    m.insert("jobname".into(), json!(e.name));
    m.insert("groupid".into(), json!(e.group));
    let error = match (s.error, s.errors) {
        (0, 0) => 0,
        (0, _) => 5,
        (e, _) => e,
    };
    m.insert("error".into(), json!(error));
    m.insert("eta".into(), json!(0));
    m.insert("elapsed".into(), json!(end_ns.div_ceil(1_000_000_000)));
    m.insert("job options".into(), job_options(opts, e.def));
    for (k, op) in [Op::Read, Op::Write, Op::Trim].into_iter().enumerate() {
        m.insert(
            op.fio_name().into(),
            op_json(
                &s.ops[k],
                s.runtime_ns,
                &pcts,
                lat_percentiles(opts, e.def),
                plus,
                group_agg[k],
            ),
        );
    }
    // fio's fsync/fdatasync latency (its `sync_stat`): from the sync's issue to its
    // completion, with percentiles (and json+ bins) as fio's default clat_percentiles=1 gives.
    let sync = &s.ops[Op::Flush.index()];
    m.insert(
        "sync".into(),
        json!({
            "total_ios": sync.ios - s.fdatasyncs,
            "lat_ns": latency_json(&sync.clat, Some(&pcts), plus)
        }),
    );
    if let Some(app) = &s.app {
        // qoslab's own key: an application job's operations (`app=`), as Filebench's
        // "IO Summary" and db_bench's ops/sec give them.
        let per_s = |n: u64| n as f64 * 1e9 / s.runtime_ns.max(1) as f64;
        let ops: Map<String, Value> = app
            .operations
            .iter()
            .zip(&app.counts)
            .map(|(k, &n)| ((*k).to_string(), json!(n)))
            .collect();
        m.insert(
            "qoslab_app".into(),
            json!({"app": app.name, "ops": app.total(), "ops_per_s": per_s(app.total()), "operations": ops}),
        );
    }
    m.insert(
        "job_runtime".into(),
        json!((s.runtime_ns as f64 / 1e6).round() as u64),
    );
    for k in ["usr_cpu", "sys_cpu"] {
        m.insert(k.into(), json!(0.0));
    }
    for k in ["ctx", "majf", "minf"] {
        m.insert(k.into(), json!(0));
    }
    m.insert(
        "iodepth_level".into(),
        share_map_of(
            &["1", "2", "4", "8", "16", "32", ">=64"],
            &s.iodepth_level,
            level_total(s),
        ),
    );
    let batch_keys = ["0", "4", "8", "16", "32", "64", ">=64"];
    m.insert(
        "iodepth_submit".into(),
        share_map(&batch_keys, &s.submit_batches),
    );
    m.insert(
        "iodepth_complete".into(),
        share_map(&batch_keys, &s.complete_batches),
    );
    m.insert("latency_ns".into(), lat_ns);
    m.insert("latency_us".into(), lat_us);
    m.insert("latency_ms".into(), lat_ms);
    let (target_ns, window_ns, pct) = match &opts.workload {
        WorkloadSpec::Jobs(f) => {
            let j = &f.jobs[e.def];
            (
                j.latency_target_ns.unwrap_or(0),
                j.latency_window_ns,
                j.latency_percentile,
            )
        }
        WorkloadSpec::Trace { .. } => (0, 0, 100.0),
    };
    let depth = if s.latency_depth > 0 {
        s.latency_depth
    } else {
        iodepth(opts, e.def)
    };
    m.insert("latency_depth".into(), json!(depth));
    m.insert("latency_target".into(), json!(target_ns));
    m.insert("latency_percentile".into(), json!(pct));
    m.insert("latency_window".into(), json!(window_ns / 1000));
    if let Some(ss) = &s.steadystate {
        m.insert("steadystate".into(), steadystate_json(ss));
    }
    Value::Object(m)
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

fn jobs_json(opts: &SimOptions, entries: &[Entry], end_ns: u64) -> Vec<Value> {
    entries
        .iter()
        .map(|e| entry_json(opts, e, &group_agg(entries, e), end_ns))
        .collect()
}

/// fio's terse format (fio's HOWTO, "Terse output"): one line of `;`-separated fields per job,
/// latencies in us, bandwidth in KiB/s, in the version of `--terse-version`. Versions 3 to 5
/// start with the version and fio's version string, 2 with its number alone; 2, 4 and 5 carry
/// the trim direction after read and write, 3 does not; 5 adds to each direction the count of
/// bandwidth samples and the IOPS samples' min, max, mean, deviation and count; in 2 a job's
/// description starts a line of its own. The percentiles are the total latency's with
/// `lat_percentiles`, the completion latency's otherwise, as in fio. The disk utilization
/// fields are left out, as fio leaves them out when no disk was used.
fn terse(opts: &SimOptions, entries: &[Entry]) -> String {
    let version = opts.format.terse_version;
    let mut out = String::new();
    for e in entries {
        let s = &e.stats;
        let mut f: Vec<String> = vec![version.to_string()];
        if version != 2 {
            f.push(version_string());
        }
        f.extend([
            e.name.clone(),
            e.group.to_string(),
            (if s.errors > 0 { 5 } else { 0 }).to_string(),
        ]);
        let group_agg = group_agg(entries, e);
        let pcts = percentile_list(opts, e.def);
        let total_lat = lat_percentiles(opts, e.def);
        let directions = if version == 3 { 2 } else { 3 };
        for (k, op) in s.ops[..directions].iter().enumerate() {
            terse_direction(&mut f, op, s.runtime_ns, &pcts, total_lat, group_agg[k]);
            if version == 5 {
                terse_v5_samples(&mut f, op);
            }
        }
        // CPU: user, system, context switches, major and minor faults (nothing runs on a host).
        f.extend(["0.000000%", "0.000000%", "0", "0", "0"].map(String::from));
        let level_total = level_total(s);
        for c in s.iodepth_level {
            f.push(format!("{:.1}%", depth_share(c, level_total)));
        }
        let (_, lat_us, lat_ms) = latency_buckets(s);
        for buckets in [lat_us, lat_ms] {
            if let Value::Object(m) = buckets {
                for v in m.values() {
                    f.push(format!("{:.2}%", v.as_f64().unwrap_or(0.0)));
                }
            }
        }
        out.push_str(&f.join(";"));
        if let Some(description) = description(opts, e.def) {
            if version == 2 {
                out.push('\n');
            }
            out.push(';');
            out.push_str(&description);
        }
        out.push('\n');
    }
    out
}

/// Terse version 5's fields after a direction's bandwidth: the count of bandwidth samples, then
/// the IOPS samples' min, max, mean, deviation and count.
fn terse_v5_samples(f: &mut Vec<String>, op: &OpStats) {
    f.push(op.bw_samples.n.to_string());
    let i = &op.iops_samples;
    if i.n == 0 {
        f.extend(["0", "0", "0.000000", "0.000000", "0"].map(String::from));
    } else {
        f.extend([
            i.min.to_string(),
            i.max.to_string(),
            format!("{:.6}", i.mean()),
            format!("{:.6}", i.stddev()),
            i.n.to_string(),
        ]);
    }
}

fn share(count: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * count as f64 / total as f64
    }
}

/// The fields of one direction in terse output; `total_lat`: the percentiles are the total
/// latency's (fio's `lat_percentiles`).
fn terse_direction(
    f: &mut Vec<String>,
    op: &OpStats,
    runtime_ns: u64,
    pcts: &[f64],
    total_lat: bool,
    group_agg: u64,
) {
    let idle = op.ios == 0 || runtime_ns == 0;
    let bw_bytes = if idle {
        0
    } else {
        (op.bytes as f64 * 1e9 / runtime_ns as f64).round() as u64
    };
    // fio prints whole I/Os per second.
    let iops = if idle {
        0
    } else {
        (op.total_ios() as u128 * 1_000_000_000 / runtime_ns as u128) as u64
    };
    let runtime_ms = if idle {
        0
    } else {
        (runtime_ns as f64 / 1e6).round() as u64
    };
    f.extend([
        (op.bytes >> 10).to_string(),
        (bw_bytes / 1024).to_string(),
        iops.to_string(),
        runtime_ms.to_string(),
    ]);
    let usec = |m: &qoslab_engine::Moments| {
        if m.n == 0 {
            ["0".into(), "0".into(), "0.000000".into(), "0.000000".into()]
        } else {
            [
                (m.min / 1000).to_string(),
                (m.max / 1000).to_string(),
                format!("{:.6}", m.mean() / 1000.0),
                format!("{:.6}", m.stddev() / 1000.0),
            ]
        }
    };
    f.extend(usec(&op.slat));
    f.extend(usec(&op.clat.moments));
    // Always 20 percentile fields: the job's list, then "0%=0" for the unused ones.
    let hist = if total_lat { &op.lat } else { &op.clat };
    for i in 0..20 {
        f.push(match pcts.get(i) {
            Some(&p) => format!("{p:.6}%={}", hist.fio_percentile(p) / 1000),
            None => "0%=0".into(),
        });
    }
    f.extend(usec(&op.lat.moments));
    let b = &op.bw_samples;
    if b.n == 0 {
        f.extend(["0", "0", "0.000000%", "0.000000", "0.000000"].map(String::from));
    } else {
        // Terse divides by the aggregate in whole KiB/s (stat.c, show_ddir_status_terse).
        let agg = match group_agg / 1024 {
            0 => 100.0,
            kib => (b.mean() * 100.0 / kib as f64).min(100.0),
        };
        f.extend([
            b.min.to_string(),
            b.max.to_string(),
            format!("{agg:.6}%"),
            format!("{:.6}", b.mean()),
            format!("{:.6}", b.stddev()),
        ]);
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

/// A number as fio prints it for people (fio's `num2str`): at most `digits` significant
/// digits, scaled by 1000 (`pow2` false: k, M, G) or 1024 (Ki, Mi, Gi), then `unit`. When
/// scaled, the digits left over become decimals, rounded; with no room for decimals the
/// integer is rounded. Written here because the figures must read exactly as fio's do (e.g.
/// `112MiB/s`, `99.0MiB/s`, `28.6k`), which no formatting library reproduces.
pub fn fio_num2str(value: u64, digits: usize, pow2: bool, unit: &str) -> String {
    const SI: [&str; 6] = ["", "k", "M", "G", "T", "P"];
    const IEC: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let prefixes = if pow2 { IEC } else { SI };
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let mut num = value;
    let mut level = 0;
    let mut remainder = None;
    while level < prefixes.len() - 1 && num.to_string().len() > digits {
        remainder = Some(num % thousand);
        num /= thousand;
        level += 1;
    }
    let Some(rem) = remainder else {
        return format!("{num}{}{unit}", prefixes[level]);
    };
    let room = digits.saturating_sub(num.to_string().len());
    if room <= 1 {
        // No room for a decimal: round the integer.
        let up = u64::from(rem >= thousand / 2);
        return format!("{}{}{unit}", num + up, prefixes[level]);
    }
    let decimals = room - 1;
    let fraction = format!("{:.*}", decimals, rem as f64 / thousand as f64);
    // A fraction that rounds up to 1 carries into the integer ("0.96" -> "1.0").
    let (num, fraction) = match fraction.strip_prefix("1.") {
        Some(rest) => (num + 1, rest.to_string()),
        None => (num, fraction["0.".len()..].to_string()),
    };
    format!("{num}.{fraction}{}{unit}", prefixes[level])
}

/// Bytes per second as fio shows it: binary units, then decimal ones in parentheses.
fn bw_pair(bytes_per_s: u64) -> (String, String) {
    (
        fio_num2str(bytes_per_s, 4, true, "B/s"),
        fio_num2str(bytes_per_s, 4, false, "B/s"),
    )
}

/// The "Run status group" lines fio ends its normal output with: per reporting group and
/// direction, the group's bandwidth (its bytes over its longest run), the slowest and fastest
/// job, the bytes moved and the shortest and longest run.
fn group_footer(entries: &[Entry]) -> String {
    let mut out = String::new();
    let mut groups: Vec<u32> = entries.iter().map(|e| e.group).collect();
    groups.dedup();
    for g in groups {
        out.push_str(&format!("\nRun status group {g} (all jobs):\n"));
        for (k, op) in [Op::Read, Op::Write, Op::Trim].into_iter().enumerate() {
            let active: Vec<&Entry> = entries
                .iter()
                .filter(|e| e.group == g && e.stats.ops[k].ios > 0 && e.stats.runtime_ns > 0)
                .collect();
            if active.is_empty() {
                continue;
            }
            let bytes: u64 = active.iter().map(|e| e.stats.ops[k].bytes).sum();
            let runs: Vec<u64> = active.iter().map(|e| e.stats.runtime_ns).collect();
            let max_run = *runs.iter().max().unwrap();
            let min_run = *runs.iter().min().unwrap();
            let bws: Vec<u64> = active
                .iter()
                .map(|e| bw_of(&e.stats.ops[k], e.stats.runtime_ns) as u64)
                .collect();
            let agg = (bytes as f64 * 1e9 / max_run as f64).round() as u64;
            let (agg_b, agg_d) = bw_pair(agg);
            let (lo_b, lo_d) = bw_pair(*bws.iter().min().unwrap());
            let (hi_b, hi_d) = bw_pair(*bws.iter().max().unwrap());
            let ms = |ns: u64| (ns as f64 / 1e6).round() as u64;
            out.push_str(&format!(
                "{:>7}: bw={agg_b} ({agg_d}), {lo_b}-{hi_b} ({lo_d}-{hi_d}), io={} ({}), run={}-{}msec\n",
                op.fio_name().to_uppercase(),
                fio_num2str(bytes, 4, true, "B"),
                fio_num2str(bytes, 4, false, "B"),
                ms(min_run),
                ms(max_run)
            ));
        }
    }
    out
}

/// Each stage of the path with its counters, top to bottom. The path's stages count things
/// (integers, unless a counter is a fraction); the media's counters are real numbers as the model gives them (a ratio such as
/// write amplification stays a float even when whole).
fn stages_json(stages: &[qoslab_engine::StageReport]) -> Value {
    let last = stages.len().saturating_sub(1);
    Value::Array(
        stages
            .iter()
            .enumerate()
            .map(|(i, st)| {
                json!({
                    "stage": st.name,
                    "counters": counters_json(&st.counters, i != last),
                })
            })
            .collect(),
    )
}

/// What a power failure took, per job: writes acknowledged when it struck, those of them still
/// durable, those lost although acknowledged, and writes lost in flight.
fn durability_json(seed: u64, d: &crate::run::DurabilityReport) -> Value {
    let jobs: Vec<Value> = d
        .jobs
        .iter()
        .map(|j| {
            json!({
                "jobname": j.name,
                "writes_acknowledged": j.acknowledged,
                "durable": j.acknowledged.saturating_sub(j.lost_acknowledged),
                "acknowledged_lost": j.lost_acknowledged,
                "lost_in_flight": j.lost_in_flight,
            })
        })
        .collect();
    json!({"seed": seed, "power_fail_at_ns": d.power_fail_at_ns, "jobs": jobs})
}

fn counters_json(list: &[(String, f64)], integers: bool) -> Value {
    let mut m = Map::new();
    for (k, v) in list {
        let value = if integers && v.fract() == 0.0 && *v >= 0.0 {
            json!(*v as u64)
        } else {
            json!(v)
        };
        m.insert(k.clone(), value);
    }
    Value::Object(m)
}

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
fn figures(op: &OpStats, runtime_ns: u64, pcts: &[f64]) -> Vec<(String, f64)> {
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

fn repeat_json(opts: &SimOptions, seeds: &[u64], per_run: &[Vec<Entry>]) -> Value {
    let mut jobs = Vec::new();
    for (i, e) in per_run[0].iter().enumerate() {
        let pcts = percentile_list(opts, e.def);
        let mut job = Map::new();
        job.insert("jobname".into(), json!(e.name));
        for (k, op) in [Op::Read, Op::Write, Op::Trim].into_iter().enumerate() {
            if per_run.iter().all(|r| r[i].stats.ops[k].ios == 0) {
                continue;
            }
            let runs: Vec<Vec<(String, f64)>> = per_run
                .iter()
                .map(|r| figures(&r[i].stats.ops[k], r[i].stats.runtime_ns, &pcts))
                .collect();
            let mut figs = Map::new();
            for (f, (name, _)) in runs[0].iter().enumerate() {
                let values: Vec<f64> = runs.iter().map(|r| r[f].1).collect();
                let (mean, lo, hi) = mean_ci(&values);
                figs.insert(
                    name.clone(),
                    json!({"mean": mean, "ci95_low": lo, "ci95_high": hi}),
                );
            }
            job.insert(op.fio_name().into(), Value::Object(figs));
        }
        jobs.push(Value::Object(job));
    }
    json!({"runs": seeds.len(), "confidence": 0.95, "jobs": jobs})
}

/// Per job and op, the mean of each part of the end-to-end latency (host, transport, queueing,
/// device: [`crate::job::LatencyPart`]), in ns.
fn latency_split_json(entries: &[Entry]) -> Value {
    let jobs = entries
        .iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("jobname".into(), json!(e.name));
            for op in [Op::Read, Op::Write] {
                let parts = &e.stats.split[op.index()];
                if parts.n == 0 {
                    continue;
                }
                let mut p = Map::new();
                for part in crate::job::LatencyPart::ALL {
                    p.insert(format!("{}_ns", part.name()), json!(parts.mean_ns(part)));
                }
                m.insert(op.fio_name().into(), Value::Object(p));
            }
            Value::Object(m)
        })
        .collect();
    Value::Array(jobs)
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
        text.push_str(&terse(opts, &pooled));
    }
    if format.json.is_some() {
        text.push_str(&json_report(
            opts, seeds, &pooled, &per_run, outcomes, end_ns,
        )?);
    }
    if format.normal {
        text.push_str(&normal(opts, seeds, &pooled, &per_run, outcomes));
    }
    Ok(text)
}

/// fio's `disk_util`: the block device's statistics over the run (its /proc/diskstats
/// deltas), from the block layer's counters; `util` is the share of the run it was busy.
fn disk_util_json(o: &Outcome, device: &str) -> Option<Value> {
    let block = o.stages.iter().find(|s| s.name == "block")?;
    let c = |k: &str| {
        block
            .counters
            .iter()
            .find(|(n, _)| n == k)
            .map_or(0.0, |(_, v)| *v)
    };
    let run_ms = o.end_ns as f64 / 1e6;
    let util = if run_ms > 0.0 {
        (100.0 * c("io_ticks_ms") / run_ms).min(100.0)
    } else {
        0.0
    };
    let name = std::path::Path::new(device)
        .file_stem()
        .map_or_else(|| device.to_string(), |s| s.to_string_lossy().into_owned());
    Some(json!([{
        "name": name,
        "read_ios": c("read_ios") as u64,
        "write_ios": c("write_ios") as u64,
        "read_merges": c("read_merges") as u64,
        "write_merges": c("write_merges") as u64,
        "read_ticks": c("read_ticks_ms") as u64,
        "write_ticks": c("write_ticks_ms") as u64,
        "in_queue": c("time_in_queue_ms") as u64,
        "util": util,
    }]))
}

fn json_report(
    opts: &SimOptions,
    seeds: &[u64],
    pooled: &[Entry],
    per_run: &[Vec<Entry>],
    outcomes: &[Outcome],
    end_ns: u64,
) -> Result<String, SimError> {
    let mut top = Map::new();
    top.insert("fio version".into(), json!(version_string()));
    top.insert("timestamp".into(), json!(0));
    top.insert("timestamp_ms".into(), json!(0));
    top.insert("time".into(), json!("Thu Jan  1 00:00:00 1970"));
    if let WorkloadSpec::Jobs(f) = &opts.workload
        && !f.global_options.is_empty()
    {
        let mut g = Map::new();
        for (k, v) in &f.global_options {
            g.insert(k.clone(), json!(v));
        }
        top.insert("global options".into(), Value::Object(g));
    }
    top.insert("jobs".into(), Value::Array(jobs_json(opts, pooled, end_ns)));
    // fio reports no disk for jobs that all reach none (ioengine=null).
    let no_disk = match &opts.workload {
        WorkloadSpec::Jobs(f) => f
            .jobs
            .iter()
            .all(|j| j.engine == qoslab_workload::fio::EngineClass::Null),
        _ => false,
    };
    let o = &outcomes[0];
    if !no_disk && let Some(util) = disk_util_json(o, &opts.device.source) {
        top.insert("disk_util".into(), util);
    }
    let mut q = Map::new();
    if seeds.len() == 1 {
        q.insert("seed".into(), json!(seeds[0]));
    } else {
        q.insert("seeds".into(), json!(seeds));
    }
    q.insert("device".into(), json!(opts.device.source));
    q.insert("media_model".into(), json!(opts.device.model));
    q.insert("simulated_ns".into(), json!(end_ns));
    q.insert(
        "events".into(),
        json!(outcomes.iter().map(|o| o.events).sum::<u64>()),
    );
    q.insert("stages".into(), stages_json(&o.stages));
    q.insert("latency_split".into(), latency_split_json(pooled));
    let durability: Vec<Value> = seeds
        .iter()
        .zip(outcomes)
        .filter_map(|(seed, o)| durability_json(*seed, o.durability.as_ref()?).into())
        .collect();
    match durability.len() {
        0 => {}
        1 => {
            q.insert("durability".into(), durability[0].clone());
        }
        _ => {
            q.insert("durability".into(), Value::Array(durability));
        }
    }
    let recovery: Vec<Value> = seeds
        .iter()
        .zip(outcomes)
        .filter_map(|(seed, o)| {
            let mut v = serde_json::to_value(o.recovery.as_ref()?).ok()?;
            v.as_object_mut()?.insert("seed".into(), json!(seed));
            Some(v)
        })
        .collect();
    match recovery.len() {
        0 => {}
        1 => {
            q.insert("recovery".into(), recovery[0].clone());
        }
        _ => {
            q.insert("recovery".into(), Value::Array(recovery));
        }
    }
    if let Some((at, outstanding)) = outcomes.iter().find_map(|o| o.stalled_after_cut) {
        q.insert(
            "stalled_after_cut".into(),
            json!({"at_ns": at, "outstanding": outstanding}),
        );
    }
    if seeds.len() > 1 {
        q.insert("repeat".into(), repeat_json(opts, seeds, per_run));
    }
    if let WorkloadSpec::Jobs(f) = &opts.workload {
        let ignored: Vec<Value> = f
            .jobs
            .iter()
            .flat_map(|j| {
                j.ignored.iter().map(|(option, loc)| {
                    json!({
                        "job": j.name,
                        "option": option,
                        "location": format!("{}:{}", loc.path.display(), loc.line),
                        "why": qoslab_workload::fio::options::find(option).map_or("", |o| o.help),
                    })
                })
            })
            .collect();
        q.insert("ignored_options".into(), Value::Array(ignored));
    }
    top.insert("qoslab".into(), Value::Object(q));
    let mut text = serde_json::to_string_pretty(&Value::Object(top))
        .map_err(|e| SimError::new(format!("cannot render JSON: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// Picks fio's unit for a latency summary line.
fn unit_for(ns: f64) -> (&'static str, f64) {
    if ns < 10_000.0 {
        ("nsec", 1.0)
    } else if ns < 10_000_000.0 {
        ("usec", 1e3)
    } else {
        ("msec", 1e6)
    }
}

/// A latency's summary line of the normal output (`    clat (usec): min=..., ...`).
fn moments_line(label: &str, m: &qoslab_engine::Moments) -> String {
    let (unit, div) = unit_for(m.mean());
    format!(
        "    {label} ({unit}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}\n",
        m.min as f64 / div,
        m.max as f64 / div,
        m.mean() / div,
        m.stddev() / div
    )
}

/// A latency's percentile lines of the normal output, headed `{label} percentiles (unit):`,
/// as fio 3.33's stat.c (show_clat_percentiles) writes them: usec when the smallest percentile
/// is above 2,000 ns and the largest above 99,999 ns, msec when above 2 ms and 99,999,999 ns;
/// each value rounded up to the unit; the values as wide as the largest one's whole units (at
/// least 5), the labels with the list's `precision`; as many cells a line as fit in 73
/// columns, each followed by a comma but the last.
fn percentile_block(
    label: &str,
    hist: &qoslab_engine::LatencyHist,
    pcts: &[f64],
    precision: usize,
) -> String {
    let values: Vec<u64> = pcts.iter().map(|&p| hist.fio_percentile(p)).collect();
    let lo = values.iter().copied().min().unwrap_or(0);
    let hi = values.iter().copied().max().unwrap_or(0);
    let (unit, div) = if lo > 2_000_000 && hi > 99_999_999 {
        ("msec", 1_000_000)
    } else if lo > 2000 && hi > 99_999 {
        ("usec", 1000)
    } else {
        ("nsec", 1)
    };
    // fio: max(5, log10(maxv / divisor) + 1), the digits of the largest value cut down.
    let width = (hi / div).max(1).ilog10() as usize + 1;
    let width = width.max(5);
    let per_line = 73 / (precision + 10 + width);
    let mut out = format!("    {label} percentiles ({unit}):\n     |");
    for (j, (p, v)) in pcts.iter().zip(&values).enumerate() {
        if j != 0 && j % per_line == 0 {
            out.push_str("     |");
        }
        let last = j == pcts.len() - 1;
        let end = if last { '\n' } else { ',' };
        let p_width = precision + 3;
        out.push_str(&format!(
            " {p:p_width$.precision$}th=[{:width$}]{end}",
            v.div_ceil(div)
        ));
        if !last && j % per_line == per_line - 1 {
            out.push('\n');
        }
    }
    out
}

fn normal(
    opts: &SimOptions,
    seeds: &[u64],
    pooled: &[Entry],
    per_run: &[Vec<Entry>],
    outcomes: &[Outcome],
) -> String {
    let mut out = String::new();
    let seed_text = if seeds.len() == 1 {
        format!("seed {}", seeds[0])
    } else {
        format!(
            "{} runs, seeds {}..={}",
            seeds.len(),
            seeds[0],
            seeds[seeds.len() - 1]
        )
    };
    out.push_str(&format!(
        "qoslab sim: device {} (media model {}), {seed_text}\n",
        opts.device.source, opts.device.model
    ));
    for (i, e) in pooled.iter().enumerate() {
        out.push_str(&format!(
            "{}: (groupid={}, jobs={}): err={:2}: simulated\n",
            e.name,
            e.group,
            e.clones,
            if e.stats.errors > 0 { 5 } else { 0 }
        ));
        let pcts = percentile_list(opts, e.def);
        let precision = percentile_precision(opts, e.def);
        for (k, op) in [Op::Read, Op::Write, Op::Trim].into_iter().enumerate() {
            let s = &e.stats.ops[k];
            if s.ios == 0 {
                continue;
            }
            let secs = e.stats.runtime_ns as f64 / 1e9;
            let iops = if secs > 0.0 {
                s.total_ios() as f64 / secs
            } else {
                0.0
            };
            let bw = if secs > 0.0 {
                s.bytes as f64 / secs
            } else {
                0.0
            };
            let (bw_b, bw_d) = bw_pair(bw as u64);
            out.push_str(&format!(
                "  {}: IOPS={}, BW={bw_b} ({bw_d})({}/{}msec)\n",
                op.fio_name(),
                fio_num2str(iops.round() as u64, 4, false, ""),
                fio_num2str(s.bytes, 4, true, "B"),
                (e.stats.runtime_ns as f64 / 1e6).round()
            ));
            for (label, m) in [
                ("slat", &s.slat),
                ("clat", &s.clat.moments),
                (" lat", &s.lat.moments),
            ] {
                out.push_str(&moments_line(label, m));
            }
            out.push_str(&percentile_block("clat", &s.clat, &pcts, precision));
            if lat_percentiles(opts, e.def) {
                // fio's `lat_percentiles`: the total latency's block after the completion's.
                out.push_str(&percentile_block("lat", &s.lat, &pcts, precision));
            }
            if s.bw_samples.n > 0 {
                let b = &s.bw_samples;
                let per = agg_percent(b.mean(), group_agg(pooled, e)[k]);
                out.push_str(&format!(
                    "   bw (  KiB/s): min={:5}, max={:5}, per={per:3.2}%, avg={:5.2}, stdev={:5.2}, samples={}\n",
                    b.min,
                    b.max,
                    b.mean(),
                    b.stddev(),
                    b.n
                ));
                let i = &s.iops_samples;
                out.push_str(&format!(
                    "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}\n",
                    i.min,
                    i.max,
                    i.mean(),
                    i.stddev(),
                    i.n
                ));
            }
            if seeds.len() > 1 {
                let runs: Vec<Vec<(String, f64)>> = per_run
                    .iter()
                    .map(|r| figures(&r[i].stats.ops[k], r[i].stats.runtime_ns, &pcts))
                    .collect();
                out.push_str("    over the runs: mean [95% CI]\n");
                for (f, (name, _)) in runs[0].iter().enumerate() {
                    if !matches!(name.as_str(), "iops" | "clat_ns.mean")
                        && !name.ends_with("99.000000")
                        && !name.ends_with("50.000000")
                    {
                        continue;
                    }
                    let values: Vec<f64> = runs.iter().map(|r| r[f].1).collect();
                    let (mean, lo, hi) = mean_ci(&values);
                    out.push_str(&format!("      {name:<32} {mean:.1} [{lo:.1}, {hi:.1}]\n"));
                }
            }
        }
        // fio's fsync/fdatasync block, after the directions (stat.c, show_ddir_status).
        let sync = &e.stats.ops[Op::Flush.index()];
        if sync.ios > 0 {
            out.push_str("  fsync/fdatasync/sync_file_range:\n");
            out.push_str(&moments_line("sync", &sync.clat.moments));
            out.push_str(&percentile_block("sync", &sync.clat, &pcts, precision));
        }
    }
    let o = &outcomes[0];
    let get = |name: &str| o.counter("nvme-host", name);
    out.push_str(&group_footer(pooled));
    out.push_str(&format!(
        "\nNVMe: {:.0} commands, {:.0} interrupts, {:.0} timeouts, {:.0} resets; simulated {:.6} s\n",
        get("commands"),
        get("interrupts"),
        get("timeouts"),
        get("resets"),
        o.end_ns as f64 / 1e9
    ));
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

    #[test]
    fn numbers_read_as_fio_3_33_prints_them() {
        // (value, binary, unit, what fio 3.33 printed for it in a real run)
        let cases = [
            (117_028_571, true, "B/s", "112MiB/s"),
            (117_028_571, false, "B/s", "117MB/s"),
            (28_571, false, "", "28.6k"),
            (819_200, true, "B", "800KiB"),
            (103_765_333, true, "B/s", "99.0MiB/s"),
            (103_765_333, false, "B/s", "104MB/s"),
            (13_653_333, true, "B/s", "13.0MiB/s"),
            (13_653_333, false, "B/s", "13.7MB/s"),
            (40_960, true, "B", "40.0KiB"),
            (40_960, false, "B", "41.0kB"),
            (1_261_568, true, "B", "1232KiB"),
            (1_261_568, false, "B", "1262kB"),
            (210_261_333, true, "B/s", "201MiB/s"),
            (210_261_333, false, "B/s", "210MB/s"),
            (4096, true, "B", "4096B"),
        ];
        for (value, pow2, unit, fio) in cases {
            assert_eq!(fio_num2str(value, 4, pow2, unit), fio, "{value}");
        }
    }

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
