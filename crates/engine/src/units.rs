//! Reading sizes, times and rates written by people: `4k`, `1.5us`, `500MB/s`.
//!
//! Sizes follow fio's default `kb_base=1024` for bare and binary suffixes (`4k` = `4KiB` =
//! 4096) and read SI suffixes with a `B` (`4KB`) as powers of 1000, as disk datasheets do.

use crate::time::Ns;

/// Splits `"1.5us"` into (`1.5`, `"us"`), trimming blanks between number and unit.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    // The longest prefix made of number characters that parses as a number; ASCII only, so
    // byte indices are character boundaries.
    let mut end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')))
        .unwrap_or(s.len());
    while end > 0 {
        if let Ok(value) = s[..end].parse::<f64>() {
            return Some((value, s[end..].trim()));
        }
        end -= 1;
    }
    None
}

/// A byte count from `"4096"`, `"4k"`, `"4KiB"`, `"4KB"` (= 4000), `"1.5MiB"`, `"128"`.
pub fn parse_size(s: &str) -> Option<u64> {
    let (value, unit) = split_number(s)?;
    let mult: f64 = match unit {
        "" | "b" | "B" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "Ki" | "ki" => 1024.0,
        "m" | "M" | "MiB" | "Mi" => 1024f64.powi(2),
        "g" | "G" | "GiB" | "Gi" => 1024f64.powi(3),
        "t" | "T" | "TiB" | "Ti" => 1024f64.powi(4),
        "p" | "P" | "PiB" | "Pi" => 1024f64.powi(5),
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "PB" => 1e15,
        _ => return None,
    };
    let bytes = value * mult;
    if !(0.0..1.8e19).contains(&bytes) || bytes.fract() != 0.0 {
        return None;
    }
    Some(bytes as u64)
}

/// A duration in ns from `"250"` (ns), `"250ns"`, `"1.5us"`, `"1.5µs"`, `"2ms"`, `"3s"`.
pub fn parse_duration_ns(s: &str) -> Option<Ns> {
    let (value, unit) = split_number(s)?;
    let mult = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" | "usec" => 1e3,
        "ms" | "msec" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let ns = value * mult;
    if !(0.0..1.8e19).contains(&ns) {
        return None;
    }
    Some(ns.round() as Ns)
}

/// A data rate in bytes per ns (= GB/s) from `"4GB/s"`, `"500MB/s"`, `"1.5GiB/s"`, `"1"` (GB/s).
pub fn parse_rate_bytes_per_ns(s: &str) -> Option<f64> {
    let (value, unit) = split_number(s)?;
    let per_s = |u: &str| -> Option<f64> {
        Some(match u {
            "B" => 1.0,
            "kB" | "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            "KiB" => 1024.0,
            "MiB" => 1024f64.powi(2),
            "GiB" => 1024f64.powi(3),
            _ => return None,
        })
    };
    let rate = match unit {
        "" => value,
        u => value * per_s(u.strip_suffix("/s")?)? / 1e9,
    };
    (rate >= 0.0 && rate.is_finite()).then_some(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_fio_with_si_suffixes_as_powers_of_1000() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("4KiB"), Some(4096));
        assert_eq!(parse_size("4KB"), Some(4000));
        assert_eq!(parse_size("1.5MiB"), Some(1_572_864));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("4 k"), Some(4096));
        assert_eq!(parse_size("4x"), None);
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("-4k"), None);
        assert_eq!(parse_size("0.3"), None);
    }

    #[test]
    fn durations_take_ns_by_default_and_the_usual_suffixes() {
        assert_eq!(parse_duration_ns("250"), Some(250));
        assert_eq!(parse_duration_ns("1.5us"), Some(1500));
        assert_eq!(parse_duration_ns("1.5µs"), Some(1500));
        assert_eq!(parse_duration_ns("2ms"), Some(2_000_000));
        assert_eq!(parse_duration_ns("3s"), Some(3_000_000_000));
        assert_eq!(parse_duration_ns("1e3"), Some(1000));
        assert_eq!(parse_duration_ns("4KiB"), None);
        assert_eq!(parse_duration_ns("fast"), None);
    }

    #[test]
    fn rates_are_bytes_per_ns() {
        assert_eq!(parse_rate_bytes_per_ns("1"), Some(1.0));
        assert_eq!(parse_rate_bytes_per_ns("4GB/s"), Some(4.0));
        assert_eq!(parse_rate_bytes_per_ns("500MB/s"), Some(0.5));
        assert_eq!(parse_rate_bytes_per_ns("4GB"), None);
        assert_eq!(parse_rate_bytes_per_ns("1us"), None);
    }
}
