//! fio's normal (human) report: per job and direction the summary lines and percentile blocks
//! in fio 3.33's layout, the intervals of `--repeat`, the run status footer and the NVMe line.

use qoslab_engine::Op;

use super::stats::{figures, mean_ci};
use super::{
    Entry, agg_percent, bw_of, group_agg, lat_percentiles, percentile_list, percentile_precision,
};
use crate::SimOptions;
use crate::run::Outcome;

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

pub(super) fn normal(
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
}
