//! Reading sizes, times and rates written by people: `4k`, `1.5us`, `500MB/s`.
//!
//! Sizes have one dialect everywhere (job files, device files, `--set`, the lab's command
//! line): fio's, as fio 3.33 applies it (checked with `fio --parse-only --debug=parse` and by
//! the I/O counts of real runs). With fio's default `kb_base=1024`, `k`/`kb`/`K`/`KB` mean 1024
//! and the IEC spellings `ki`/`kib`/`KiB` mean 1000 (fio inverts them for old scripts); with
//! `kb_base=1000` SI and IEC mean what they say (`4kB` = 4000, `4KiB` = 4096), as datasheets
//! write them. Where fio 3.33 silently reads something else than its manual says (`1.5g`
//! becomes 1 byte) qoslab refuses the value instead of guessing.

use crate::time::{MAX_TIME_NS, Ns};

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

/// How fio interprets unit prefixes (`kb_base`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KbBase {
    /// fio's default: `k` = 1024, `ki` = 1000.
    #[default]
    Binary,
    /// SI/IEC as written: `k` = 1000, `ki` = 1024.
    Decimal,
}

/// Splits `text` into its leading whole number (decimal digits, or `0x` hex) and the rest.
pub fn split_whole_number(text: &str) -> Result<(u64, &str), String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err("negative values are not allowed".into());
    }
    let (digits, radix, rest) = if let Some(hex) = t.strip_prefix("0x").or(t.strip_prefix("0X")) {
        let end = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        (&hex[..end], 16, &hex[end..])
    } else {
        let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        (&t[..end], 10, &t[end..])
    };
    if digits.is_empty() {
        return Err("no number".into());
    }
    if rest.starts_with('.')
        || rest.starts_with(['e', 'E']) && rest[1..].starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(
            "fractional values are not accepted (fio 3.33 would silently truncate them)".into(),
        );
    }
    let n = u64::from_str_radix(digits, radix).map_err(|_| "number too large".to_string())?;
    Ok((n, rest.trim_start()))
}

/// The multiplier of a size suffix such as `k`, `KiB`, `mb`, `g`, `b` or `` (bytes).
fn size_multiplier(suffix: &str, kb_base: KbBase) -> Option<u64> {
    let s = suffix.to_ascii_lowercase();
    let s = s.strip_suffix('b').unwrap_or(&s);
    if s.is_empty() {
        return Some(1);
    }
    let (prefix, iec) = match s.strip_suffix('i') {
        Some(p) => (p, true),
        None => (s, false),
    };
    let power = match prefix {
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return None,
    };
    // fio's default base inverts the IEC meaning, see the module comment.
    let binary = match kb_base {
        KbBase::Binary => !iec,
        KbBase::Decimal => iec,
    };
    let base: u64 = if binary { 1024 } else { 1000 };
    Some(base.pow(power))
}

/// A size in bytes: `4096`, `4k`, `1m`, `0x1000`, `4KiB` (see the module comment for bases).
pub fn parse_size(text: &str, kb_base: KbBase) -> Result<u64, String> {
    let (n, suffix) = split_whole_number(text)?;
    let mult =
        size_multiplier(suffix, kb_base).ok_or_else(|| format!("unknown unit '{suffix}'"))?;
    n.checked_mul(mult).ok_or_else(|| "value too large".into())
}

/// A duration in ns from `"250"` (ns), `"250ns"`, `"1.5us"`, `"1.5µs"`, `"2ms"`, `"3s"`; `None`
/// for anything else, and for a time past [`MAX_TIME_NS`].
pub fn parse_duration_ns(s: &str) -> Option<Ns> {
    let ns = duration_ns_unbounded(s)?;
    (0.0..=MAX_TIME_NS as f64)
        .contains(&ns)
        .then(|| ns.round() as Ns)
}

/// What `s` says in ns as a real number, in or out of any range (for messages that tell a
/// time too large from one that is no time).
pub fn duration_ns_unbounded(s: &str) -> Option<f64> {
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
    Some(value * mult)
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
    fn sizes_follow_fios_default_kb_base() {
        // The table of "Examples with kb_base=1024 (default)" in fio's HOWTO.
        for (text, bytes) in [
            ("4096", 4096),
            ("4096b", 4096),
            ("4096B", 4096),
            ("4k", 4096),
            ("4kb", 4096),
            ("4kB", 4096),
            ("4K", 4096),
            ("4KB", 4096),
            ("1m", 1 << 20),
            ("1024k", 1 << 20),
            ("1mi", 1_000_000),
            ("1000ki", 1_000_000),
            ("1t", 1 << 40),
            ("1024g", 1 << 40),
            ("1048576m", 1 << 40),
            ("1ti", 1_000_000_000_000),
            ("4KiB", 4000),
            ("0x10", 16),
            ("1p", 1 << 50),
        ] {
            assert_eq!(parse_size(text, KbBase::Binary), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn sizes_with_kb_base_1000_use_si_and_iec_as_written() {
        for (text, bytes) in [
            ("4ki", 4096),
            ("4KiB", 4096),
            ("1m", 1_000_000),
            ("1000k", 1_000_000),
            ("1mi", 1 << 20),
        ] {
            assert_eq!(parse_size(text, KbBase::Decimal), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        for text in [
            "x",
            "",
            "4q",
            "1.5g",
            "-1",
            "1e3",
            "99999999999999999999",
            "16777216t",
        ] {
            assert!(parse_size(text, KbBase::Binary).is_err(), "{text}");
        }
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
    fn durations_past_the_clocks_range_are_refused_not_saturated() {
        assert_eq!(parse_duration_ns("4611686018427387904"), Some(MAX_TIME_NS));
        for text in ["4611686018427390000", "1e30", "1e400", "inf", "nan", "-1"] {
            assert_eq!(parse_duration_ns(text), None, "{text}");
        }
        assert_eq!(parse_duration_ns("146000000000s"), None);
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
