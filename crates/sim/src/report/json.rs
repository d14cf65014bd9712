//! fio's JSON report (`json`, and `json+` with the latency bins): the `jobs` array with
//! exactly the keys of fio 3.33, `disk_util` from the block layer's counters, and the top-level
//! key `qoslab` (seeds, device, stages' counters, latency split, durability, recovery, the
//! confidence intervals of `--repeat`, the options accepted but ignored).

use serde_json::{Map, Value, json};

use qoslab_engine::Op;

use super::stats::{figures, mean_ci};
use super::{
    Entry, agg_percent, depth_share, group_agg, lat_percentiles, latency_buckets, level_total,
    pct_key, percentile_list, runtime_ms, version_string,
};
use crate::job::{DEPTH_BUCKETS, OpStats};
use crate::run::Outcome;
use crate::{SimError, SimOptions, WorkloadSpec};

fn moments_json(m: &qoslab_engine::Moments) -> Value {
    json!({
        "min": m.min,
        "max": m.max,
        "mean": m.mean(),
        "stddev": m.stddev(),
        "N": m.n,
    })
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

fn jobs_json(opts: &SimOptions, entries: &[Entry], end_ns: u64) -> Vec<Value> {
    entries
        .iter()
        .map(|e| entry_json(opts, e, &group_agg(entries, e), end_ns))
        .collect()
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

/// A figure the runs may each give (one per seed): left out when none gave it, the one object
/// for a single run, an array in seed order for several.
fn insert_per_seed(q: &mut Map<String, Value>, key: &str, mut values: Vec<Value>) {
    match values.len() {
        0 => {}
        1 => {
            q.insert(key.into(), values.remove(0));
        }
        _ => {
            q.insert(key.into(), Value::Array(values));
        }
    }
}

pub(super) fn json_report(
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
    insert_per_seed(&mut q, "durability", durability);
    let recovery: Vec<Value> = seeds
        .iter()
        .zip(outcomes)
        .filter_map(|(seed, o)| {
            let mut v = serde_json::to_value(o.recovery.as_ref()?).ok()?;
            v.as_object_mut()?.insert("seed".into(), json!(seed));
            Some(v)
        })
        .collect();
    insert_per_seed(&mut q, "recovery", recovery);
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
