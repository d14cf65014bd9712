//! fio's value syntax: sizes with unit prefixes, times with unit suffixes, percentages,
//! ranges and the per-direction `read,write,trim` lists.
//!
//! The rules follow fio's HOWTO ("Parameter types") as fio 3.33 applies them (checked with
//! `fio --parse-only --debug=parse`): with the default `kb_base=1024`, `k`/`kb`/`K`/`KB`
//! mean 1024 and the IEC spellings `ki`/`kib`/`KiB` mean 1000 (fio inverts them for old
//! scripts); with `kb_base=1000` the standard meanings apply. Where fio 3.33 silently reads
//! something else than its manual says (`1.5g` becomes 1 byte, `5sec` becomes 5 microseconds)
//! qoslab refuses the value instead of guessing.

use qoslab_engine::Ns;
use qoslab_engine::time::{MAX_TIME_NS, MAX_TIME_TEXT};
use qoslab_engine::units::split_whole_number as split_number;
pub use qoslab_engine::units::{KbBase, parse_size};

/// The unit a time option assumes when the value has no suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Us,
    Ms,
    S,
}

impl TimeUnit {
    pub const fn ns(self) -> Ns {
        match self {
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
}

/// An integer that may carry a size suffix as fio allows for every integer (`iodepth=1k`).
pub fn parse_int(text: &str, kb_base: KbBase) -> Result<u64, String> {
    parse_size(text, kb_base)
}

/// A duration: `10` (in `default_unit`), `10us`, `5ms`, `2s`, `3m` (minutes), `1h`, `1d`.
pub fn parse_time(text: &str, default_unit: TimeUnit) -> Result<Ns, String> {
    let (n, suffix) = split_number(text)?;
    let unit_ns: Ns = match suffix.to_ascii_lowercase().as_str() {
        "" => default_unit.ns(),
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "sec" | "min" => {
            return Err(format!(
                "unit '{suffix}' is ambiguous: fio 3.33 reads it as microseconds; write s or m"
            ));
        }
        _ => return Err(format!("unknown time unit '{suffix}'")),
    };
    n.checked_mul(unit_ns)
        .filter(|&ns| ns <= MAX_TIME_NS)
        .ok_or_else(|| format!("value too large (at most {MAX_TIME_TEXT})"))
}

/// `0` or `1`; an empty value (the option given alone, `time_based`) means 1.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim() {
        "" | "1" => Ok(true),
        "0" => Ok(false),
        _ => Err("expected 0 or 1".into()),
    }
}

/// A percentage such as `60` or `12.5` in [0, 100].
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v: f64 = t.parse().map_err(|_| "not a number".to_string())?;
    if !(0.0..=100.0).contains(&v) {
        return Err("must lie between 0 and 100".into());
    }
    Ok(v)
}

/// A value given in bytes or as a percentage of the file or device (`size=20%`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeSpec {
    Bytes(u64),
    /// Percent of the device or file size, in (0, 100].
    Percent(f64),
}

impl SizeSpec {
    /// Resolves against the capacity of the file or device, if known.
    pub fn resolve(self, capacity_bytes: Option<u64>) -> Option<u64> {
        match self {
            SizeSpec::Bytes(b) => Some(b),
            SizeSpec::Percent(p) => capacity_bytes.map(|c| (c as f64 * p / 100.0) as u64),
        }
    }
}

/// `20%` or a size.
pub fn parse_size_or_percent(text: &str, kb_base: KbBase) -> Result<SizeSpec, String> {
    let t = text.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v = parse_percent(p)?;
        if v <= 0.0 {
            return Err("a percentage must be above 0".into());
        }
        return Ok(SizeSpec::Percent(v));
    }
    parse_size(t, kb_base).map(SizeSpec::Bytes)
}

/// `1k-4k` or `1k:4k`; swapped bounds are put in order, as fio does.
pub fn parse_range(text: &str, kb_base: KbBase) -> Result<(u64, u64), String> {
    let t = text.trim();
    let (lo, hi) = t
        .split_once(['-', ':'])
        .ok_or_else(|| "expected a range like 1k-4k".to_string())?;
    let lo = parse_size(lo, kb_base)?;
    let hi = parse_size(hi, kb_base)?;
    Ok((lo.min(hi), lo.max(hi)))
}

/// Values for reads, writes and trims, from fio's `read,write,trim` list syntax.
///
/// `None` means "not given here": the option's default (or an earlier setting) stays.
pub type PerOpValues<T> = [Option<T>; 3];

/// Splits `a,b,c` by fio's rules: a single value applies to all three directions; a value
/// not followed by a comma also applies to the directions after it (`bs=8k,32k` sets writes
/// and trims to 32k); an empty field leaves that direction alone (`bs=,8k`).
pub fn split_per_op<T: Clone>(
    text: &str,
    mut parse: impl FnMut(&str) -> Result<T, String>,
) -> Result<PerOpValues<T>, String> {
    let fields: Vec<&str> = text.split(',').collect();
    if fields.len() > 3 {
        return Err("at most three comma-separated values (read,write,trim)".into());
    }
    let mut out: PerOpValues<T> = [None, None, None];
    for (i, f) in fields.iter().enumerate() {
        if !f.trim().is_empty() {
            out[i] = Some(parse(f)?);
        }
    }
    // The last field, when not empty, fills the remaining directions.
    let last = fields.len() - 1;
    if let Some(v) = out[last].clone() {
        for slot in out.iter_mut().skip(last + 1) {
            *slot = Some(v.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: KbBase = KbBase::Binary;

    #[test]
    fn times_default_to_the_options_unit_and_take_suffixes() {
        let s = TimeUnit::S;
        assert_eq!(parse_time("10", s), Ok(10_000_000_000));
        assert_eq!(parse_time("10", TimeUnit::Us), Ok(10_000));
        assert_eq!(parse_time("10s", TimeUnit::Us), Ok(10_000_000_000));
        assert_eq!(parse_time("100ms", s), Ok(100_000_000));
        assert_eq!(parse_time("100msec", s), Ok(100_000_000));
        assert_eq!(parse_time("100us", s), Ok(100_000));
        assert_eq!(parse_time("10m", s), Ok(600_000_000_000));
        assert_eq!(parse_time("10M", s), Ok(600_000_000_000));
        assert_eq!(parse_time("1h", s), Ok(3_600_000_000_000));
        assert_eq!(parse_time("1d", s), Ok(86_400_000_000_000));
        assert_eq!(parse_time("5 s", s), Ok(5_000_000_000));
        for bad in ["5sec", "5min", "1.5", "x", "-3", "3 parsecs"] {
            assert!(parse_time(bad, s).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_time_past_the_clocks_range_is_refused() {
        assert_eq!(
            parse_time("4611686018", TimeUnit::S),
            Ok(4_611_686_018_000_000_000)
        );
        for bad in ["4611686019", "53376d", "18446744073709551615"] {
            let err = parse_time(bad, TimeUnit::S).unwrap_err();
            assert!(err.starts_with("value too large"), "{bad}: {err}");
        }
    }

    #[test]
    fn per_op_lists_follow_fios_comma_rules() {
        let p = |t: &str| split_per_op(t, |f| parse_size(f, B)).unwrap();
        assert_eq!(p("256k"), [Some(262144), Some(262144), Some(262144)]);
        assert_eq!(p("8k,32k"), [Some(8192), Some(32768), Some(32768)]);
        assert_eq!(p("8k,32k,"), [Some(8192), Some(32768), None]);
        assert_eq!(p(",8k"), [None, Some(8192), Some(8192)]);
        assert_eq!(p(",8k,"), [None, Some(8192), None]);
        assert_eq!(p("8k,"), [Some(8192), None, None]);
        assert!(split_per_op("1,2,3,4", |f| parse_size(f, B)).is_err());
    }

    #[test]
    fn ranges_and_percentages() {
        assert_eq!(parse_range("1k-4k", B), Ok((1024, 4096)));
        assert_eq!(parse_range("4k:1k", B), Ok((1024, 4096)));
        assert!(parse_range("4k", B).is_err());
        assert_eq!(parse_size_or_percent("20%", B), Ok(SizeSpec::Percent(20.0)));
        assert_eq!(parse_size_or_percent("1m", B), Ok(SizeSpec::Bytes(1 << 20)));
        assert!(parse_size_or_percent("120%", B).is_err());
        assert!(parse_size_or_percent("0%", B).is_err());
        assert_eq!(SizeSpec::Percent(25.0).resolve(Some(4096)), Some(1024));
        assert_eq!(SizeSpec::Percent(25.0).resolve(None), None);
    }
}
