//! fio's terse report: one `;`-separated line per job, in versions 2 to 5.

use serde_json::Value;

use super::{
    Entry, depth_share, description, group_agg, lat_percentiles, latency_buckets, level_total,
    percentile_list, version_string,
};
use crate::SimOptions;
use crate::job::OpStats;

/// fio's terse format (fio's HOWTO, "Terse output"): one line of `;`-separated fields per job,
/// latencies in us, bandwidth in KiB/s, in the version of `--terse-version`. Versions 3 to 5
/// start with the version and fio's version string, 2 with its number alone; 2, 4 and 5 carry
/// the trim direction after read and write, 3 does not; 5 adds to each direction the count of
/// bandwidth samples and the IOPS samples' min, max, mean, deviation and count; in 2 a job's
/// description starts a line of its own. The percentiles are the total latency's with
/// `lat_percentiles`, the completion latency's otherwise, as in fio. The disk utilization
/// fields are left out, as fio leaves them out when no disk was used.
pub(super) fn terse(opts: &SimOptions, entries: &[Entry]) -> String {
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
