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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Normal,
    Json,
    JsonPlus,
}

impl OutputFormat {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "normal" => Some(OutputFormat::Normal),
            "json" => Some(OutputFormat::Json),
            "json+" => Some(OutputFormat::JsonPlus),
            _ => None,
        }
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

fn op_json(op: &OpStats, runtime_ns: u64, pcts: &[f64], plus: bool, group_bw: f64) -> Value {
    let secs = runtime_ns as f64 / 1e9;
    let (bw_bytes, iops) = if runtime_ns == 0 || op.ios == 0 {
        (0u64, 0.0)
    } else {
        (
            (op.bytes as f64 / secs).round() as u64,
            op.ios as f64 / secs,
        )
    };
    let mut clat = match moments_json(&op.clat.moments) {
        Value::Object(m) => m,
        _ => unreachable!(),
    };
    if op.clat.count() > 0 {
        let mut p = Map::new();
        for &x in pcts {
            p.insert(pct_key(x), json!(op.clat.percentile(x)));
        }
        clat.insert("percentile".into(), Value::Object(p));
        if plus {
            let mut bins = Map::new();
            for (v, c) in op.clat.fio_bins() {
                bins.insert(v.to_string(), json!(c));
            }
            clat.insert("bins".into(), Value::Object(bins));
        }
    }
    let samples = |m: &qoslab_engine::Moments| (m.n, m.min, m.max, m.mean(), m.stddev());
    let (bw_n, bw_min, bw_max, bw_mean, bw_dev) = samples(&op.bw_samples);
    let (io_n, io_min, io_max, io_mean, io_dev) = samples(&op.iops_samples);
    let bw_agg = if bw_n > 0 && group_bw > 0.0 {
        100.0 * bw_bytes as f64 / group_bw
    } else {
        0.0
    };
    json!({
        "io_bytes": op.bytes,
        "io_kbytes": op.bytes / 1024,
        "bw_bytes": bw_bytes,
        "bw": bw_bytes / 1024,
        "iops": iops,
        "runtime": if op.ios == 0 { 0 } else { (runtime_ns as f64 / 1e6).round() as u64 },
        "total_ios": op.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": moments_json(&op.slat),
        "clat_ns": Value::Object(clat),
        "lat_ns": moments_json(&op.lat.moments),
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
    let total: u64 = counts.iter().sum();
    let mut m = Map::new();
    for (k, c) in keys.iter().zip(counts) {
        let pct = if total == 0 {
            0.0
        } else {
            100.0 * *c as f64 / total as f64
        };
        m.insert((*k).into(), json!(pct));
    }
    Value::Object(m)
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
    let share = |lo: u64, hi: u64| {
        if n == 0 {
            0.0
        } else {
            100.0 * all.count_in(lo, hi) as f64 / n as f64
        }
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

fn entry_json(opts: &SimOptions, e: &Entry, group_bw: &[f64; 3], end_ns: u64) -> Value {
    let plus = opts.format == OutputFormat::JsonPlus;
    let pcts = percentile_list(opts, e.def);
    let s = &e.stats;
    let (lat_ns, lat_us, lat_ms) = latency_buckets(s);
    let mut m = Map::new();
    m.insert("jobname".into(), json!(e.name));
    m.insert("groupid".into(), json!(e.group));
    m.insert("error".into(), json!(if s.errors > 0 { 5 } else { 0 }));
    m.insert("eta".into(), json!(0));
    m.insert("elapsed".into(), json!(end_ns.div_ceil(1_000_000_000)));
    m.insert("job options".into(), job_options(opts, e.def));
    for (k, op) in [Op::Read, Op::Write, Op::Trim].into_iter().enumerate() {
        m.insert(
            op.fio_name().into(),
            op_json(&s.ops[k], s.runtime_ns, &pcts, plus, group_bw[k]),
        );
    }
    let sync = &s.ops[Op::Flush.index()];
    m.insert(
        "sync".into(),
        json!({"total_ios": sync.ios, "lat_ns": moments_json(&sync.lat.moments)}),
    );
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
        share_map(&["1", "2", "4", "8", "16", "32", ">=64"], &s.iodepth_level),
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
    m.insert("latency_depth".into(), json!(iodepth(opts, e.def)));
    m.insert("latency_target".into(), json!(0));
    m.insert("latency_percentile".into(), json!(100.0));
    m.insert("latency_window".into(), json!(0));
    Value::Object(m)
}

fn bw_of(op: &OpStats, runtime_ns: u64) -> f64 {
    if runtime_ns == 0 {
        0.0
    } else {
        (op.bytes as f64 * 1e9 / runtime_ns as f64).round()
    }
}

fn jobs_json(opts: &SimOptions, entries: &[Entry], end_ns: u64) -> Vec<Value> {
    entries
        .iter()
        .map(|e| {
            let mut group_bw = [0.0; 3];
            for other in entries.iter().filter(|o| o.group == e.group) {
                for (k, bw) in group_bw.iter_mut().enumerate() {
                    *bw += bw_of(&other.stats.ops[k], other.stats.runtime_ns);
                }
            }
            entry_json(opts, e, &group_bw, end_ns)
        })
        .collect()
}

/// Each stage of the path with its counters, top to bottom. The path's stages count things
/// (integers); the media's counters are real numbers as the model gives them (a ratio such as
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

fn counters_json(list: &[(String, f64)], integers: bool) -> Value {
    let mut m = Map::new();
    for (k, v) in list {
        let value = if integers { json!(*v as u64) } else { json!(v) };
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
                op.ios as f64 / secs
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
            op.clat.percentile(p) as f64,
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
                if parts[0].n == 0 {
                    continue;
                }
                let mut p = Map::new();
                for part in crate::job::LatencyPart::ALL {
                    p.insert(
                        format!("{}_ns", part.name()),
                        json!(parts[part as usize].mean()),
                    );
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
    if opts.format == OutputFormat::Normal {
        return Ok(normal(opts, seeds, &pooled, &per_run, outcomes));
    }
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
    top.insert(
        "jobs".into(),
        Value::Array(jobs_json(opts, &pooled, end_ns)),
    );
    let o = &outcomes[0];
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
    q.insert("latency_split".into(), latency_split_json(&pooled));
    if seeds.len() > 1 {
        q.insert("repeat".into(), repeat_json(opts, seeds, &per_run));
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

fn human_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
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
        for (k, op) in [Op::Read, Op::Write, Op::Trim].into_iter().enumerate() {
            let s = &e.stats.ops[k];
            if s.ios == 0 {
                continue;
            }
            let secs = e.stats.runtime_ns as f64 / 1e9;
            let iops = if secs > 0.0 { s.ios as f64 / secs } else { 0.0 };
            let bw = if secs > 0.0 {
                s.bytes as f64 / secs
            } else {
                0.0
            };
            out.push_str(&format!(
                "  {}: IOPS={}, BW={:.1}MiB/s ({:.1}MB/s)({:.1}MiB/{}msec)\n",
                op.fio_name(),
                human_rate(iops),
                bw / 1048576.0,
                bw / 1e6,
                s.bytes as f64 / 1048576.0,
                (e.stats.runtime_ns as f64 / 1e6).round()
            ));
            for (label, m) in [
                ("slat", &s.slat),
                ("clat", &s.clat.moments),
                (" lat", &s.lat.moments),
            ] {
                let (unit, div) = unit_for(m.mean());
                out.push_str(&format!(
                    "    {label} ({unit}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}\n",
                    m.min as f64 / div,
                    m.max as f64 / div,
                    m.mean() / div,
                    m.stddev() / div
                ));
            }
            let (unit, div) = unit_for(s.clat.moments.mean());
            out.push_str(&format!("    clat percentiles ({unit}):\n"));
            for row in pcts.chunks(4) {
                let cells: Vec<String> = row
                    .iter()
                    .map(|&p| format!("{:5.2}th=[{:7.0}]", p, s.clat.percentile(p) as f64 / div))
                    .collect();
                out.push_str(&format!("     | {}\n", cells.join(", ")));
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
    }
    let o = &outcomes[0];
    let get = |name: &str| o.counter("nvme-host", name);
    out.push_str(&format!(
        "NVMe: {:.0} commands, {:.0} interrupts, {:.0} timeouts, {:.0} resets; simulated {:.6} s\n",
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
    fn percentile_keys_are_written_like_fio() {
        assert_eq!(pct_key(99.0), "99.000000");
        assert_eq!(pct_key(99.99), "99.990000");
    }
}
