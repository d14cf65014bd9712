//! Every fio option qoslab knows, declared once (after fio's `fio_options[]` table).
//!
//! Each entry gives the name (fio's own, the one `fio --showcmd` prints), aliases, value kind, unit, default and help, and whether qoslab
//! models it or only accepts it. The same table drives the job-file parser, the error
//! messages ("expected a size like 4k") and the option list in docs/workload.md
//! ([`options_markdown`]). An option missing here is an error naming the option and line.

use qoslab_engine::{IoPrioClass, Ns};

use super::job::{
    APPS, Distribution, ExitWhat, FileService, Job, ORDERINGS, RateProcess, RwPattern, SteadyState,
    SubmitMode, ThinkBlocksType, Zone, ZoneExtent,
};
use super::values::{
    KbBase, PerOpValues, SizeSpec, TimeUnit, parse_bool, parse_int, parse_percent, parse_range,
    parse_size, parse_size_or_percent, parse_time, split_per_op,
};

/// How an option's value is read, and where it goes in a [`Job`].
pub enum Kind {
    /// A size in bytes with fio's suffixes.
    Size(fn(&mut Job, u64)),
    /// A size, or a percentage of the file or device.
    SizeOrPercent(fn(&mut Job, SizeSpec)),
    /// `read,write,trim` sizes (see fio's `bs`), each at least 1.
    SizePerOp(fn(&mut Job, PerOpValues<u64>)),
    /// `read,write,trim` ranges such as `1k-4k`.
    RangePerOp(fn(&mut Job, PerOpValues<(u64, u64)>)),
    /// A duration; the unit applies when the value has no suffix.
    Time(TimeUnit, fn(&mut Job, Ns)),
    /// An integer in `[min, max]` (fio lets integers carry size suffixes too).
    Int {
        min: u64,
        max: u64,
        set: fn(&mut Job, u64),
    },
    /// `read,write,trim` integers in `[min, max]`.
    IntPerOp {
        min: u64,
        max: u64,
        set: fn(&mut Job, PerOpValues<u64>),
    },
    /// `0` or `1`; the bare option name means 1.
    Bool(fn(&mut Job, bool)),
    /// One of the listed words; the setter gets its index.
    Choice(&'static [&'static str], fn(&mut Job, usize)),
    /// A value with its own grammar; `expected` describes it for error messages.
    Text {
        expected: &'static str,
        set: fn(&mut Job, &str) -> Result<(), String>,
    },
    /// Accepted and ignored: it does not change what a simulated run does.
    Ignored,
    /// Accepted without effect when its value is one of `accept` (fio's default or a value
    /// that changes nothing here); any other value changes the I/O in a way the simulator
    /// does not model, and is refused with `why`.
    Refused {
        accept: &'static [&'static str],
        why: &'static str,
    },
}

/// One fio option: the row of the table.
pub struct OptionSpec {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub kind: Kind,
    /// Unit of the value, e.g. "bytes", "s" (the default unit of a time), "%".
    pub unit: &'static str,
    /// fio's default, as text ("" when there is none).
    pub default: &'static str,
    pub help: &'static str,
    /// Read before the section's other options, wherever it is written (fio's option
    /// priority): `kb_base` changes how the section's sizes are read.
    pub read_first: bool,
}

impl OptionSpec {
    pub fn is_ignored(&self) -> bool {
        matches!(self.kind, Kind::Ignored)
    }

    /// Refused unless its value is one that changes nothing.
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, Kind::Refused { .. })
    }

    /// What a good value looks like, for "expected ..., got 'x'".
    pub fn expected(&self) -> String {
        match &self.kind {
            Kind::Size(_) => "a size like 4k".into(),
            Kind::SizeOrPercent(_) => "a size like 4k or a percentage like 20%".into(),
            Kind::SizePerOp(_) => "a size like 4k, or read,write,trim sizes like 4k,8k".into(),
            Kind::RangePerOp(_) => "a range like 1k-4k, or read,write,trim ranges".into(),
            Kind::Time(unit, _) => {
                format!(
                    "a time like 10{} (us, ms, s, m, h, d; default unit {})",
                    unit.name(),
                    unit.name()
                )
            }
            Kind::Int { min, max, .. } | Kind::IntPerOp { min, max, .. } => {
                let per_op = if matches!(self.kind, Kind::IntPerOp { .. }) {
                    " (or read,write,trim values)"
                } else {
                    ""
                };
                if *max == u64::MAX {
                    format!("an integer >= {min}{per_op}")
                } else {
                    format!("an integer between {min} and {max}{per_op}")
                }
            }
            Kind::Bool(_) => "0 or 1".into(),
            Kind::Choice(words, _) => format!("one of {}", words.join(", ")),
            Kind::Text { expected, .. } => (*expected).into(),
            Kind::Ignored => "anything".into(),
            Kind::Refused { accept, .. } => {
                if accept.is_empty() {
                    "nothing (not simulated)".into()
                } else {
                    format!("{} (nothing else is simulated)", accept.join(" or "))
                }
            }
        }
    }

    /// The value type as the docs show it.
    fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Size(_) => "size",
            Kind::SizeOrPercent(_) => "size or %",
            Kind::SizePerOp(_) => "size[,size][,size]",
            Kind::RangePerOp(_) => "range[,range][,range]",
            Kind::Time(..) => "time",
            Kind::Int { .. } => "int",
            Kind::IntPerOp { .. } => "int[,int][,int]",
            Kind::Bool(_) => "bool",
            Kind::Choice(..) => "choice",
            Kind::Text { .. } => "text",
            Kind::Ignored => "any",
            Kind::Refused { .. } => "refused",
        }
    }

    /// Parses `value` and stores it in `job`; the error text is the part after
    /// "option 'NAME': ".
    pub fn apply(&self, job: &mut Job, value: &str) -> Result<(), String> {
        let kb = job.kb_base;
        let bad = |detail: String| {
            format!(
                "expected {}, got '{}' ({detail})",
                self.expected(),
                value.trim()
            )
        };
        let in_range = |v: u64, min: u64, max: u64| -> Result<u64, String> {
            if v < min || v > max {
                Err(format!(
                    "expected {}, got '{}'",
                    self.expected(),
                    value.trim()
                ))
            } else {
                Ok(v)
            }
        };
        match &self.kind {
            Kind::Size(set) => set(job, parse_size(value, kb).map_err(bad)?),
            Kind::SizeOrPercent(set) => set(job, parse_size_or_percent(value, kb).map_err(bad)?),
            Kind::SizePerOp(set) => {
                let v = split_per_op(value, |f| {
                    let s = parse_size(f, kb)?;
                    if s == 0 {
                        Err("must be at least 1".into())
                    } else {
                        Ok(s)
                    }
                })
                .map_err(bad)?;
                set(job, v)
            }
            Kind::RangePerOp(set) => {
                let v = split_per_op(value, |f| {
                    let r = parse_range(f, kb)?;
                    if r.0 == 0 {
                        Err("must be at least 1".into())
                    } else {
                        Ok(r)
                    }
                })
                .map_err(bad)?;
                set(job, v)
            }
            Kind::Time(unit, set) => set(job, parse_time(value, *unit).map_err(bad)?),
            Kind::Int { min, max, set } => {
                let v = parse_int(value, kb).map_err(bad)?;
                set(job, in_range(v, *min, *max)?)
            }
            Kind::IntPerOp { min, max, set } => {
                let v = split_per_op(value, |f| parse_int(f, kb)).map_err(bad)?;
                for x in v.iter().flatten() {
                    in_range(*x, *min, *max)?;
                }
                set(job, v)
            }
            Kind::Bool(set) => set(
                job,
                parse_bool(value)
                    .map_err(|_| format!("expected 0 or 1, got '{}'", value.trim()))?,
            ),
            Kind::Choice(words, set) => {
                let v = value.trim();
                let i = words
                    .iter()
                    .position(|w| *w == v)
                    .ok_or_else(|| format!("expected {}, got '{v}'", self.expected()))?;
                set(job, i)
            }
            Kind::Text { set, .. } => set(job, value.trim()).map_err(|detail| {
                format!(
                    "expected {}, got '{}' ({detail})",
                    self.expected(),
                    value.trim()
                )
            })?,
            Kind::Ignored => {}
            Kind::Refused { accept, why } => {
                if !accept.contains(&value.trim()) {
                    return Err(format!("'{}' is not simulated ({why})", value.trim()));
                }
            }
        }
        Ok(())
    }
}

fn fill<T: Clone>(dst: &mut [T; 3], src: PerOpValues<T>) {
    for (d, s) in dst.iter_mut().zip(src) {
        if let Some(v) = s {
            *d = v;
        }
    }
}

fn fill_opt<T: Clone>(dst: &mut [Option<T>; 3], src: PerOpValues<T>) {
    for (d, s) in dst.iter_mut().zip(src) {
        if s.is_some() {
            *d = s;
        }
    }
}

fn set_rw(job: &mut Job, v: &str) -> Result<(), String> {
    let (name, modifier) = match v.split_once(':') {
        Some((n, m)) => (n, Some(m)),
        None => (v, None),
    };
    job.rw = RwPattern::NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, p)| p)
        .ok_or_else(|| format!("unknown pattern '{name}'"))?;
    job.rw_backward = false;
    job.rw_modifier = match modifier {
        None => None,
        Some(m) => {
            // fio reads `read:-8k` as a backwards skip (sequential patterns only).
            let (backward, m) = match m.trim().strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, m),
            };
            if backward && job.rw.is_random() {
                return Err("a negative :<nr> is for sequential patterns only".into());
            }
            let n = parse_int(m, job.kb_base)?;
            if n == 0 {
                return Err("the :<nr> suffix must be at least 1".into());
            }
            job.rw_backward = backward;
            Some(n)
        }
    };
    Ok(())
}

/// `bssplit=4k/10:64k/50:32k/40[,...]`: blank percentages share what is left evenly.
fn set_bssplit(job: &mut Job, v: &str) -> Result<(), String> {
    let kb = job.kb_base;
    let lists = split_per_op(v, |field| {
        let mut entries: Vec<(u64, Option<f64>)> = Vec::new();
        for item in field.split(':') {
            let (len, pct) = item.split_once('/').unwrap_or((item, ""));
            let len = parse_size(len, kb)?;
            if len == 0 {
                return Err("a block size must be at least 1".into());
            }
            let pct = if pct.trim().is_empty() {
                None
            } else {
                Some(parse_percent(pct)?)
            };
            entries.push((len, pct));
        }
        let given: f64 = entries.iter().filter_map(|e| e.1).sum();
        let blanks = entries.iter().filter(|e| e.1.is_none()).count();
        if given > 100.0 + 1e-9 {
            return Err(format!("percentages add up to {given}, above 100"));
        }
        let share = if blanks > 0 {
            (100.0 - given) / blanks as f64
        } else {
            0.0
        };
        let out: Vec<(u64, f64)> = entries
            .into_iter()
            .map(|(l, p)| (l, p.unwrap_or(share)))
            .collect();
        let total: f64 = out.iter().map(|e| e.1).sum();
        if (total - 100.0).abs() > 1e-6 {
            return Err(format!("percentages add up to {total}, not 100"));
        }
        Ok(out)
    })?;
    fill_split(&mut job.bssplit, lists);
    Ok(())
}

fn fill_split(dst: &mut [Vec<(u64, f64)>; 3], src: PerOpValues<Vec<(u64, f64)>>) {
    for (d, s) in dst.iter_mut().zip(src) {
        if let Some(v) = s {
            *d = v;
        }
    }
}

fn parse_center(s: Option<&str>) -> Result<Option<f64>, String> {
    match s {
        None => Ok(None),
        Some(c) => {
            let c: f64 = c
                .trim()
                .parse()
                .map_err(|_| "the center must be a number".to_string())?;
            if !(0.0..=1.0).contains(&c) {
                return Err("the center must lie in [0, 1]".into());
            }
            Ok(Some(c))
        }
    }
}

fn parse_distribution(field: &str, kb: KbBase) -> Result<Distribution, String> {
    let field = field.trim();
    // fio's HOWTO writes both `zoned_abs:` and `zoned_abs=`.
    let (kind, rest) = match field.find([':', '=']) {
        Some(i) => (&field[..i], Some(&field[i + 1..])),
        None => (field, None),
    };
    let float = |s: &str, what: &str| -> Result<f64, String> {
        s.trim()
            .parse::<f64>()
            .map_err(|_| format!("{what} must be a number"))
    };
    match kind {
        "random" if rest.is_none() => Ok(Distribution::Random),
        "zipf" | "pareto" | "normal" => {
            let mut parts = rest.unwrap_or("").splitn(2, ':');
            let p = parts.next().filter(|s| !s.trim().is_empty());
            let center = parse_center(parts.next())?;
            match kind {
                "zipf" => {
                    // fio's default theta when none is given.
                    let theta = p
                        .map(|s| float(s, "zipf theta"))
                        .transpose()?
                        .unwrap_or(1.1);
                    if !(theta > 0.0 && theta.is_finite()) {
                        return Err("zipf theta must be above 0".into());
                    }
                    Ok(Distribution::Zipf { theta, center })
                }
                "pareto" => {
                    let h = p.map(|s| float(s, "pareto h")).transpose()?.unwrap_or(0.2);
                    if !(h > 0.0 && h < 1.0) {
                        return Err("pareto h must lie strictly between 0 and 1".into());
                    }
                    Ok(Distribution::Pareto { h, center })
                }
                _ => {
                    let dev_pct = p
                        .map(|s| float(s, "normal deviation"))
                        .transpose()?
                        .unwrap_or(0.0);
                    if !(0.0..=100.0).contains(&dev_pct) {
                        return Err("the normal deviation must lie in [0, 100]".into());
                    }
                    Ok(Distribution::Normal { dev_pct, center })
                }
            }
        }
        "zoned" | "zoned_abs" => {
            let rest = rest.ok_or("zones are missing, e.g. zoned:60/10:40/90")?;
            let mut zones = Vec::new();
            let items: Vec<&str> = rest.split(':').filter(|i| !i.trim().is_empty()).collect();
            for (i, item) in items.iter().enumerate() {
                let (a, e) = item
                    .split_once('/')
                    .ok_or_else(|| format!("zone '{item}' is not access%/extent"))?;
                let access_pct = parse_percent(a)?;
                let extent = if kind == "zoned" && e.trim().is_empty() && i + 1 == items.len() {
                    // fio: a last zone written `20/` takes what the others leave.
                    let taken: f64 = zones
                        .iter()
                        .map(|z: &Zone| match z.extent {
                            ZoneExtent::Percent(p) => p,
                            ZoneExtent::Bytes(_) => 0.0,
                        })
                        .sum();
                    ZoneExtent::Percent(100.0 - taken)
                } else if kind == "zoned" {
                    ZoneExtent::Percent(parse_percent(e)?)
                } else {
                    ZoneExtent::Bytes(parse_size(e, kb)?)
                };
                zones.push(Zone { access_pct, extent });
            }
            if zones.len() > 256 {
                return Err("at most 256 zones".into());
            }
            let access: f64 = zones.iter().map(|z| z.access_pct).sum();
            if (access - 100.0).abs() > 1e-6 {
                return Err(format!(
                    "zone access percentages add up to {access}, not 100"
                ));
            }
            if kind == "zoned" {
                let extent: f64 = zones
                    .iter()
                    .map(|z| match z.extent {
                        ZoneExtent::Percent(p) => p,
                        ZoneExtent::Bytes(_) => 0.0,
                    })
                    .sum();
                if (extent - 100.0).abs() > 1e-6 {
                    return Err(format!("zone sizes add up to {extent}%, not 100%"));
                }
            }
            Ok(Distribution::Zoned(zones))
        }
        _ => Err(format!("unknown distribution '{kind}'")),
    }
}

fn set_distribution(job: &mut Job, v: &str) -> Result<(), String> {
    let kb = job.kb_base;
    let d = split_per_op(v, |f| parse_distribution(f, kb))?;
    for (dst, src) in job.random_distribution.iter_mut().zip(d) {
        if let Some(x) = src {
            *dst = x;
        }
    }
    Ok(())
}

/// `steadystate=iops:10%`, `iops_slope:0.1%`, `bw:50M`, `bw_slope:1%` (fio's default when the
/// option is bare: `iops_slope:0.01%`).
fn set_steadystate(job: &mut Job, v: &str) -> Result<(), String> {
    let v = if v.is_empty() { "iops_slope:0.01%" } else { v };
    let (metric, limit) = v
        .split_once(':')
        .ok_or("expected METRIC:LIMIT, e.g. iops:10%")?;
    let (iops, slope) = match metric.trim() {
        "iops" => (true, false),
        "iops_slope" => (true, true),
        "bw" => (false, false),
        "bw_slope" => (false, true),
        m => {
            return Err(format!(
                "unknown metric '{m}' (iops, iops_slope, bw, bw_slope)"
            ));
        }
    };
    let limit = limit.trim();
    let (limit, percent) = match limit.strip_suffix('%') {
        Some(p) => (parse_percent(p)?, true),
        None if iops => (
            limit
                .parse::<f64>()
                .map_err(|_| "the limit must be a number".to_string())?,
            false,
        ),
        None => (parse_size(limit, job.kb_base)? as f64, false),
    };
    if !(limit.is_finite() && limit >= 0.0) {
        return Err("the limit must be a non-negative number".into());
    }
    job.steadystate = Some(SteadyState {
        iops,
        slope,
        limit,
        percent,
    });
    Ok(())
}

/// `startdelay=10s` or a range `5s-10s` (a time drawn in it).
fn set_startdelay(job: &mut Job, v: &str) -> Result<(), String> {
    let (lo, hi) = match v.split_once('-') {
        Some((a, b)) => (parse_time(a, TimeUnit::S)?, parse_time(b, TimeUnit::S)?),
        None => {
            let t = parse_time(v, TimeUnit::S)?;
            (t, t)
        }
    };
    if hi < lo {
        return Err("the range's end comes before its start".into());
    }
    job.startdelay_ns = (lo, hi);
    Ok(())
}

/// `file_service_type=roundrobin[:n]`, `random`, `sequential[:n]` (fio's zipf, pareto and
/// normal choices of a file are refused).
fn set_file_service(job: &mut Job, v: &str) -> Result<(), String> {
    let (kind, n) = match v.split_once(':') {
        Some((k, n)) => (k.trim(), Some(n)),
        None => (v.trim(), None),
    };
    job.file_service = match kind {
        "roundrobin" => FileService::RoundRobin,
        "random" => FileService::Random,
        "sequential" => FileService::Sequential,
        "zipf" | "pareto" | "normal" | "gauss" => {
            return Err(format!(
                "'{kind}': a skewed choice of file is not simulated (roundrobin, random and sequential are)"
            ));
        }
        k => return Err(format!("unknown type '{k}'")),
    };
    job.file_service_n = match n {
        Some(n) => parse_int(n, job.kb_base)?.max(1),
        None => 1,
    };
    Ok(())
}

fn set_percentile_list(job: &mut Job, v: &str) -> Result<(), String> {
    let mut list = Vec::new();
    let mut precision = 0;
    for p in v.split(':') {
        let x = parse_percent(p)?;
        list.push(x);
        // fio's parser (FIO_OPT_FLOAT_LIST) counts the digits after each entry's point.
        if let Some((_, decimals)) = p.trim().split_once('.') {
            let digits = decimals.bytes().take_while(u8::is_ascii_digit).count();
            precision = precision.max(digits);
        }
    }
    if list.is_empty() {
        return Err("empty list".into());
    }
    list.sort_by(f64::total_cmp);
    job.percentile_list = list;
    job.percentile_precision = precision;
    Ok(())
}

fn set_cmdprio_percentage(job: &mut Job, v: &str) -> Result<(), String> {
    let fields: Vec<&str> = v.split(',').collect();
    if fields.len() > 2 {
        return Err("at most two values (read,write)".into());
    }
    let vals = split_per_op(v, parse_percent)?;
    // fio takes reads and writes only; trims follow writes.
    fill(&mut job.cmdprio_percentage, [vals[0], vals[1], vals[1]]);
    Ok(())
}

fn prio_class(n: u64) -> IoPrioClass {
    match n {
        1 => IoPrioClass::RealTime,
        2 => IoPrioClass::BestEffort,
        3 => IoPrioClass::Idle,
        _ => IoPrioClass::None,
    }
}

fn name_text(job: &mut Job, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err("empty name".into());
    }
    job.name = v.to_string();
    Ok(())
}

macro_rules! opt {
    ($name:expr, [$($alias:expr),*], $kind:expr, $unit:expr, $default:expr, $help:expr) => {
        OptionSpec {
            name: $name,
            aliases: &[$($alias),*],
            kind: $kind,
            unit: $unit,
            default: $default,
            help: $help,
            read_first: false,
        }
    };
}

macro_rules! ignored {
    ($name:expr, [$($alias:expr),*], $why:expr) => {
        opt!($name, [$($alias),*], Kind::Ignored, "", "", $why)
    };
}

macro_rules! refused {
    ($name:expr, [$($accept:expr),*], $why:expr) => {
        opt!(
            $name,
            [],
            Kind::Refused {
                accept: &[$($accept),*],
                why: $why
            },
            "",
            "",
            $why
        )
    };
}

const MAX_U32: u64 = u32::MAX as u64;

/// The option table. Order: as the docs list them (modeled first, then accepted-and-ignored).
pub static OPTIONS: &[OptionSpec] = &[
    opt!(
        "name",
        [],
        Kind::Text {
            expected: "a job name",
            set: name_text
        },
        "",
        "section name",
        "Name of the job; defaults to the section name."
    ),
    opt!(
        "description",
        [],
        Kind::Text {
            expected: "text",
            set: |_, _| Ok(())
        },
        "",
        "",
        "Free-text description of the job (kept only in the echoed options)."
    ),
    opt!(
        "rw",
        ["readwrite"],
        Kind::Text {
            expected: "an I/O pattern like randread or write:4k (read, write, trim, randread, randwrite, randtrim, rw, readwrite, randrw, trimwrite, randtrimwrite)",
            set: set_rw
        },
        "",
        "read",
        "I/O pattern. A `:<nr>` suffix skips `nr` bytes after each sequential I/O, or draws a new random offset every `nr` I/Os."
    ),
    opt!(
        "rw_sequencer",
        [],
        Kind::Choice(&["sequential", "identical"], |j, i| j.rw_identical = i == 1),
        "",
        "sequential",
        "With `rw=rand*:<nr>`, whether the I/Os between random offsets follow sequentially or repeat the same offset."
    ),
    opt!(
        "rwmixread",
        [],
        Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.rwmixread = v as f64
        },
        "%",
        "50",
        "Percentage of a mixed workload's I/Os that are reads."
    ),
    opt!(
        "rwmixwrite",
        [],
        Kind::Int {
            min: 0,
            max: 100,
            set: |j, v| j.rwmixread = 100.0 - v as f64
        },
        "%",
        "50",
        "Percentage of a mixed workload's I/Os that are writes (the later of rwmixread/rwmixwrite wins)."
    ),
    opt!(
        "bs",
        ["blocksize"],
        Kind::SizePerOp(|j, v| fill(&mut j.bs, v)),
        "bytes",
        "4096",
        "Block size; `read,write,trim` values per direction."
    ),
    opt!(
        "bsrange",
        ["blocksize_range"],
        Kind::RangePerOp(|j, v| fill_opt(&mut j.bsrange, v)),
        "bytes",
        "",
        "Range of block sizes; lengths are multiples of the minimum, drawn uniformly."
    ),
    opt!(
        "bssplit",
        [],
        Kind::Text {
            expected: "size/percent pairs like 4k/10:64k/90",
            set: set_bssplit
        },
        "bytes/%",
        "",
        "Weighted block sizes; blank percentages share the remainder evenly."
    ),
    opt!(
        "ba",
        ["blockalign"],
        Kind::SizePerOp(|j, v| fill_opt(&mut j.blockalign, v)),
        "bytes",
        "minimum bs",
        "Alignment of random offsets."
    ),
    opt!(
        "size",
        [],
        Kind::SizeOrPercent(|j, v| j.size = Some(v)),
        "bytes or %",
        "device size",
        "Region of the file or device to do I/O in, and the default amount of I/O."
    ),
    opt!(
        "offset",
        ["fileoffset"],
        Kind::SizeOrPercent(|j, v| j.offset = v),
        "bytes or %",
        "0",
        "Start of the I/O region."
    ),
    opt!(
        "offset_increment",
        [],
        Kind::SizeOrPercent(|j, v| j.offset_increment = v),
        "bytes or %",
        "0",
        "Added to `offset` once per `numjobs` clone (clone i starts at offset + i x increment)."
    ),
    opt!(
        "filesize",
        [],
        Kind::Size(|j, v| j.filesize = Some(v)),
        "bytes",
        "",
        "Size of the file; overrides `size` as the region, `size` then only sets the amount of I/O."
    ),
    opt!(
        "io_size",
        ["io_limit"],
        Kind::Size(|j, v| j.io_size = Some(v)),
        "bytes",
        "size",
        "Amount of I/O to do (x `loops` at the most); above `size`, passes over the files follow until it is short by less than a block, as in fio."
    ),
    opt!(
        "number_ios",
        [],
        Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| j.number_ios = Some(v)
        },
        "I/Os",
        "",
        "Stop after this many I/Os in each of the `loops` (never extends the job; a `time_based` job runs its `runtime` whatever it says, as in fio)."
    ),
    opt!(
        "loops",
        [],
        Kind::Int {
            min: 1,
            max: MAX_U32,
            set: |j, v| j.loops = v
        },
        "",
        "1",
        "Run the job this many passes over its files, each starting with an empty queue (with `io_size`, more follow while it is short by a whole block)."
    ),
    opt!(
        "runtime",
        ["timeout"],
        Kind::Time(TimeUnit::S, |j, v| j.runtime_ns = (v > 0).then_some(v)),
        "s",
        "0 (none)",
        "Stop after this long, counted after `ramp_time`."
    ),
    opt!(
        "time_based",
        [],
        Kind::Bool(|j, v| j.time_based = v),
        "",
        "0",
        "Run for the whole `runtime`, covering the region again as often as needed."
    ),
    opt!(
        "ramp_time",
        [],
        Kind::Time(TimeUnit::S, |j, v| j.ramp_time_ns = v),
        "s",
        "0",
        "Run this long before recording statistics."
    ),
    opt!(
        "iodepth",
        [],
        Kind::Int {
            min: 1,
            max: 65535,
            set: |j, v| j.iodepth = v as u32
        },
        "I/Os",
        "1",
        "Number of I/Os kept in flight."
    ),
    opt!(
        "iodepth_batch",
        ["iodepth_batch_submit"],
        Kind::Int {
            min: 0,
            max: 65535,
            set: |j, v| j.iodepth_batch_submit = v as u32
        },
        "I/Os",
        "1",
        "Number of I/Os submitted at once (0 means `iodepth`)."
    ),
    opt!(
        "iodepth_batch_complete_min",
        ["iodepth_batch_complete"],
        Kind::Int {
            min: 0,
            max: 65535,
            set: |j, v| j.iodepth_batch_complete_min = v as u32
        },
        "I/Os",
        "1",
        "Completions the job waits for before it reaps them (0: it reaps without waiting, and only once its queue is full)."
    ),
    opt!(
        "iodepth_batch_complete_max",
        [],
        Kind::Int {
            min: 0,
            max: 65535,
            set: |j, v| j.iodepth_batch_complete_max = v as u32
        },
        "I/Os",
        "min",
        "Most completions reaped at once."
    ),
    opt!(
        "iodepth_low",
        [],
        Kind::Int {
            min: 0,
            max: 65535,
            set: |j, v| j.iodepth_low = v as u32
        },
        "I/Os",
        "iodepth",
        "Once its queue is full, the job lets it drain to this depth before filling it again."
    ),
    opt!(
        "io_submit_mode",
        [],
        Kind::Choice(&["inline", "offload"], |j, i| j.submit_mode = if i == 0 {
            SubmitMode::Inline
        } else {
            SubmitMode::Offload
        }),
        "",
        "inline",
        "`inline`: before sleeping for `rate` or `thinktime` the job waits for its I/O in flight; `offload`: I/Os leave at their scheduled times whatever is in flight."
    ),
    opt!(
        "numjobs",
        [],
        Kind::Int {
            min: 1,
            max: 65535,
            set: |j, v| j.numjobs = v as u32
        },
        "",
        "1",
        "Number of clones of this job."
    ),
    opt!(
        "thinktime",
        [],
        Kind::Time(TimeUnit::Us, |j, v| j.thinktime_ns = v),
        "us",
        "0",
        "Stall between I/Os (after every `thinktime_blocks` I/Os)."
    ),
    opt!(
        "thinktime_blocks",
        [],
        Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| j.thinktime_blocks = v
        },
        "I/Os",
        "1",
        "Number of I/Os between stalls."
    ),
    opt!(
        "thinktime_blocks_type",
        [],
        Kind::Choice(
            &["complete", "issue"],
            |j, i| j.thinktime_blocks_type = if i == 0 {
                ThinkBlocksType::Complete
            } else {
                ThinkBlocksType::Issue
            }
        ),
        "",
        "complete",
        "Whether the stall waits for the queue to drain (`complete`) or not (`issue`)."
    ),
    opt!(
        "rate",
        [],
        Kind::IntPerOp {
            min: 1,
            max: u64::MAX,
            set: |j, v| fill_opt(&mut j.rate_bytes_per_s, v)
        },
        "bytes/s",
        "",
        "Bandwidth cap per direction."
    ),
    opt!(
        "rate_iops",
        [],
        Kind::IntPerOp {
            min: 1,
            max: u64::MAX,
            set: |j, v| fill_opt(&mut j.rate_iops, v)
        },
        "I/Os/s",
        "",
        "IOPS cap per direction."
    ),
    opt!(
        "rate_process",
        [],
        Kind::Choice(&["linear", "poisson"], |j, i| j.rate_process = if i == 0 {
            RateProcess::Linear
        } else {
            RateProcess::Poisson
        }),
        "",
        "linear",
        "Spacing of capped I/Os: fixed (`linear`) or exponential gaps (`poisson`)."
    ),
    opt!(
        "rate_ignore_thinktime",
        [],
        Kind::Bool(|j, v| j.rate_ignore_thinktime = v),
        "",
        "0",
        "The rate schedule pauses while the job thinks, instead of catching up afterwards."
    ),
    opt!(
        "rate_min",
        ["ratemin"],
        Kind::IntPerOp {
            min: 1,
            max: u64::MAX,
            set: |j, v| fill_opt(&mut j.rate_min_bytes_per_s, v)
        },
        "bytes/s",
        "",
        "The job fails when it moves less than this over a `rate_cycle`."
    ),
    opt!(
        "rate_iops_min",
        [],
        Kind::IntPerOp {
            min: 1,
            max: u64::MAX,
            set: |j, v| fill_opt(&mut j.rate_iops_min, v)
        },
        "I/Os/s",
        "",
        "The job fails when it does fewer I/Os than this over a `rate_cycle`."
    ),
    opt!(
        "rate_cycle",
        ["ratecycle"],
        Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| j.rate_cycle_ns = v * 1_000_000
        },
        "ms",
        "1000",
        "Window over which `rate_min` and `rate_iops_min` are checked."
    ),
    opt!(
        "thinktime_iotime",
        [],
        Kind::Time(TimeUnit::S, |j, v| j.thinktime_iotime_ns = v),
        "s",
        "0",
        "Think also after this long of I/O since the last stall."
    ),
    opt!(
        "max_latency",
        [],
        Kind::Text {
            expected: "a time like 10ms (default unit us), or read,write values",
            set: |j, v| {
                let t = split_per_op(v, |f| parse_time(f, TimeUnit::Us))?;
                fill_opt(&mut j.max_latency_ns, t);
                Ok(())
            }
        },
        "us",
        "",
        "A total latency above this fails the job (fio's ETIMEDOUT)."
    ),
    opt!(
        "latency_target",
        [],
        Kind::Time(TimeUnit::Us, |j, v| j.latency_target_ns =
            (v > 0).then_some(v)),
        "us",
        "",
        "Find the deepest queue (up to `iodepth`) at which `latency_percentile` of the I/Os of each `latency_window` finish within this."
    ),
    opt!(
        "latency_window",
        [],
        Kind::Time(TimeUnit::Us, |j, v| j.latency_window_ns = v),
        "us",
        "0",
        "Window over which `latency_target` is checked."
    ),
    opt!(
        "latency_percentile",
        [],
        Kind::Text {
            expected: "a percentage like 99.9",
            set: |j, v| {
                j.latency_percentile = parse_percent(v)?;
                Ok(())
            }
        },
        "%",
        "100",
        "Share of I/Os that must meet `latency_target`."
    ),
    opt!(
        "latency_run",
        [],
        Kind::Bool(|j, v| j.latency_run = v),
        "",
        "0",
        "Keep adjusting the depth for the whole run instead of stopping once it is found."
    ),
    opt!(
        "steadystate",
        ["ss"],
        Kind::Text {
            expected: "METRIC:LIMIT with METRIC iops, iops_slope, bw or bw_slope, e.g. iops:10%",
            set: set_steadystate
        },
        "",
        "iops_slope:0.01%",
        "End the job once its IOPS or bandwidth (each second's) over the last `steadystate_duration` stays within the limit (`*_slope`: their slope does)."
    ),
    opt!(
        "steadystate_duration",
        ["ss_dur"],
        Kind::Time(TimeUnit::S, |j, v| j.ss_dur_ns = v),
        "s",
        "0",
        "How many seconds of samples the steady-state check looks at (0: no check)."
    ),
    opt!(
        "steadystate_ramp_time",
        ["ss_ramp"],
        Kind::Time(TimeUnit::S, |j, v| j.ss_ramp_ns = v),
        "s",
        "0",
        "Samples start this long (and one second) after the job starts."
    ),
    opt!(
        "startdelay",
        [],
        Kind::Text {
            expected: "a time like 10s, or a range like 5s-10s",
            set: set_startdelay
        },
        "s",
        "0",
        "Start the job this long after the run starts (a range: a time drawn in it)."
    ),
    opt!(
        "wait_for",
        [],
        Kind::Text {
            expected: "the name of an earlier job",
            set: |j, v| {
                j.wait_for = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "",
        "Start the job once the named job (an earlier section) has finished."
    ),
    opt!(
        "exitall",
        [],
        Kind::Bool(|j, v| j.exitall = v),
        "",
        "0",
        "When this job finishes, end the jobs `exit_what` names."
    ),
    opt!(
        "exit_what",
        [],
        Kind::Choice(&["group", "stonewall", "all"], |j, i| j.exit_what =
            [ExitWhat::Group, ExitWhat::Stonewall, ExitWhat::All][i]),
        "",
        "group",
        "Which jobs `exitall` ends: its reporting group, all running jobs (the next stonewall group still runs), or all."
    ),
    opt!(
        "exitall_on_error",
        [],
        Kind::Bool(|j, v| j.exitall_on_error = v),
        "",
        "0",
        "When this job fails, end the jobs `exit_what` names."
    ),
    opt!(
        "flow_id",
        [],
        Kind::Int {
            min: 0,
            max: MAX_U32,
            set: |j, v| j.flow_id = v as u32
        },
        "",
        "0",
        "The flow the job's `flow` weight counts in."
    ),
    opt!(
        "flow",
        [],
        Kind::Int {
            min: 0,
            max: 1000,
            set: |j, v| j.flow = v as i64
        },
        "",
        "0",
        "Weight of the job in its flow: running jobs of a flow issue I/Os in the ratio of their weights."
    ),
    opt!(
        "flow_sleep",
        [],
        Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.flow_sleep_ns = v * 1000
        },
        "us",
        "0",
        "A job ahead of its share waits for its I/O in flight and sleeps this long (0: it waits for the others)."
    ),
    opt!(
        "bwavgtime",
        [],
        Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| j.bw_avg_ns = Some(v * 1_000_000)
        },
        "ms",
        "500",
        "Window of the bandwidth samples (`bw_min` ... in the report). Not given: `log_avg_msec` when the job writes `write_bw_log` with it (as fio 3.33 does), else 500."
    ),
    opt!(
        "iopsavgtime",
        [],
        Kind::Int {
            min: 1,
            max: u64::MAX,
            set: |j, v| j.iops_avg_ns = Some(v * 1_000_000)
        },
        "ms",
        "500",
        "Window of the IOPS samples. Not given: `log_avg_msec` when the job writes `write_iops_log` with it (as fio 3.33 does), else 500."
    ),
    opt!(
        "random_distribution",
        [],
        Kind::Text {
            expected: "random, zipf:THETA, pareto:H, normal:DEV, zoned:A/S:..., or zoned_abs:A/SIZE:...",
            set: set_distribution
        },
        "",
        "random",
        "Distribution of random offsets; an optional `:center` in [0,1] for zipf, pareto and normal."
    ),
    opt!(
        "norandommap",
        [],
        Kind::Bool(|j, v| j.norandommap = v),
        "",
        "0",
        "Draw random offsets with replacement instead of covering every block once per pass."
    ),
    opt!(
        "randrepeat",
        [],
        Kind::Bool(|j, v| j.randrepeat = v),
        "",
        "1",
        "qoslab is always repeatable; kept for fio compatibility."
    ),
    opt!(
        "randseed",
        [],
        Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.randseed = Some(v)
        },
        "",
        "run seed",
        "Seed of this job's random streams instead of the run seed."
    ),
    opt!(
        "prio",
        [],
        Kind::Int {
            min: 0,
            max: 7,
            set: |j, v| j.prio = Some(v as u8)
        },
        "",
        "",
        "I/O priority level, 0 (highest) to 7."
    ),
    opt!(
        "prioclass",
        [],
        Kind::Int {
            min: 0,
            max: 3,
            set: |j, v| j.prioclass = Some(prio_class(v))
        },
        "",
        "",
        "I/O priority class: 0 none, 1 real-time, 2 best-effort, 3 idle."
    ),
    opt!(
        "sim_host",
        [],
        Kind::Int {
            min: 0,
            max: 63,
            set: |j, v| j.sim_host = v as u16
        },
        "",
        "0",
        "qoslab only (fio has no such option): the simulated host the job runs on, when the device file's [path] hosts is above 1."
    ),
    opt!(
        "ordering",
        [],
        Kind::Choice(ORDERINGS, |j, i| j.ordering = Some(ORDERINGS[i])),
        "",
        "",
        "qoslab only (fio has no such option): the ordered-write stack of the job's writes over NVMe-oF: none (orderless), flush (Linux: each write waits for the previous one and a FLUSH), horae or rio. In `qoslab sim` the block layer's ordering plug-in of that name orders them; rio and horae need target servers with a PMR ([fabric] targets of 1 or more over rdma or tcp: the rio-flash and rio-optane presets). `qoslab rio run` builds such a job from its options and runs it here."
    ),
    opt!(
        "app",
        [],
        Kind::Choice(APPS, |j, i| j.app = Some(APPS[i])),
        "",
        "",
        "qoslab only (fio has no such option): each clone of the job is a thread of an application on the mounted file system ([fs] mount = true) instead of fio's I/O loop: varmail (Filebench's Varmail personality: 1,000 files of 16 KiB in one directory, its thirteen flowops) or fillsync (RocksDB's db_bench fillsync: 16-byte keys, 1 KiB values, each put appended to the write-ahead log and fdatasynced, the puts of threads that queue behind a writer in one group commit, one append and one fdatasync for the group, as RocksDB's write thread does). The clones of the job share one fileset or database; number_ios bounds each thread's operations (flowops or puts), runtime its time. The report's `qoslab_app` gives the operations per second."
    ),
    opt!(
        "cmdprio_percentage",
        [],
        Kind::Text {
            expected: "a percentage, or read,write percentages",
            set: set_cmdprio_percentage
        },
        "%",
        "0",
        "Share of I/Os issued with priority `cmdprio_class`/`cmdprio`."
    ),
    opt!(
        "cmdprio_class",
        [],
        Kind::IntPerOp {
            min: 0,
            max: 3,
            set: |j, v| fill(&mut j.cmdprio_class, v.map(|x| x.map(prio_class)))
        },
        "",
        "1",
        "Priority class of the `cmdprio_percentage` I/Os."
    ),
    opt!(
        "cmdprio",
        [],
        Kind::IntPerOp {
            min: 0,
            max: 7,
            set: |j, v| fill(&mut j.cmdprio, v.map(|x| x.map(|y| y as u8)))
        },
        "",
        "0",
        "Priority level of the `cmdprio_percentage` I/Os."
    ),
    opt!(
        "fsync",
        [],
        Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fsync_every = v
        },
        "",
        "0",
        "Flush the device's write cache after every N writes: the job waits for its writes, issues a FLUSH (fio's sync) and waits for it. As in fio 3.33, the sync comes when the job goes on to its next I/O (a job that runs out of I/Os issues none after its last write: 400 writes at fsync=4 give 99; nor does one whose time is up: fio reads the clock before it fetches), and before each read that follows it while no write came in between. On a file (a device whose `[fs] mount` is true in `qoslab sim`): the job's fsync(2) of its file, which its file system turns into writes and FLUSHes. 0: never."
    ),
    opt!(
        "fdatasync",
        [],
        Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.fdatasync_every = v
        },
        "",
        "0",
        "As fsync, with fdatasync(2): on a block device the same (it has no metadata to leave out); on a file (`[fs] mount = true` in `qoslab sim`) the file's data and only the metadata needed to read it (no commit for a timestamp alone). As fio 3.33 does, the JSON's `sync.lat_ns` counts them and `sync.total_ios` does not (it counts fsyncs only). With fsync too, a write count both divide gives the fsync."
    ),
    opt!(
        "end_fsync",
        [],
        Kind::Bool(|j, v| j.end_fsync = v),
        "",
        "0",
        "Flush the device's write cache once a job that writes has issued its last I/O, if the last thing it issued was not a sync (a read after the last sync is enough; as fio 3.33; not counted in the JSON's `sync`). With `loops` above 1 also at the end of each pass; over several files, one fsync per file (fio's `for_each_file`)."
    ),
    opt!(
        "fsync_on_close",
        [],
        Kind::Bool(|j, v| j.fsync_on_close = v),
        "",
        "0",
        "Flush the device's write cache when a job that writes closes its file (at its end), if the last thing it issued was not a sync: after `end_fsync` it was (as fio 3.33; not counted in the JSON's `sync`). With `loops` above 1 the files are also closed between passes, as fio does: a pass that ends at its `size` bytes (an engine that queues its I/O) syncs at its end as `end_fsync` does, then closes its files with an fsync(2) each; a pass that ends when a fetch finds its files done closes them first (synced if the last thing was not a sync), then syncs as `end_fsync`. Over several files, one fsync per file."
    ),
    opt!(
        "invalidate",
        [],
        Kind::Bool(|j, v| j.invalidate = v),
        "",
        "1",
        "On a mounted file system, each time the job opens its file (at its start, and again at each pass of `loops`) it advises `POSIX_FADV_DONTNEED` on the whole file first, as fio 3.33 does: writeback of the file's dirty pages starts (not waited for) and its clean pages leave the page cache, so a job that reads a file another job read or wrote and synced before it reads it from the device (measured with fio 3.33 on ext4: a reader with `loops=2` reads its 64 MiB file from the disk twice, with `invalidate=0` once). On the raw device (`direct=1` only) it changes nothing."
    ),
    opt!(
        "write_barrier",
        [],
        Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.write_barrier_every = v
        },
        "",
        "0",
        "Make every N-th write a barrier: the cache is flushed before it and it is written with FUA (Linux REQ_PREFLUSH | REQ_FUA). 0: never."
    ),
    opt!(
        "fua",
        [],
        Kind::Bool(|j, v| j.fua = v),
        "",
        "0",
        "Write with Force Unit Access: a write completes only once it is on stable media."
    ),
    opt!(
        "stonewall",
        ["wait_for_previous"],
        Kind::Bool(|j, v| j.stonewall = v),
        "",
        "0",
        "Wait for the jobs before this one to finish; starts a new reporting group."
    ),
    opt!(
        "new_group",
        [],
        Kind::Bool(|j, v| j.new_group = v),
        "",
        "0",
        "Start a new reporting group."
    ),
    opt!(
        "group_reporting",
        [],
        Kind::Bool(|j, v| j.group_reporting = v),
        "",
        "0",
        "Report a group's jobs together."
    ),
    opt!(
        "percentile_list",
        [],
        Kind::Text {
            expected: "percentiles like 99:99.9",
            set: set_percentile_list
        },
        "%",
        "1:5:...:99.99",
        "Completion-latency percentiles to report."
    ),
    opt!(
        "lat_percentiles",
        [],
        Kind::Bool(|j, v| j.lat_percentiles = v),
        "",
        "0",
        "Report the percentiles of the total latency (submission + completion) in `lat_ns` too."
    ),
    opt!(
        "direct",
        [],
        Kind::Bool(|j, v| j.direct = v),
        "",
        "0",
        "Non-buffered I/O (O_DIRECT). In `qoslab sim` it marks writes synchronous (REQ_SYNC, as Linux does); `direct=0` (fio's default) is refused until a page cache is in its path (docs/fs.md, issue 35)."
    ),
    opt!(
        "buffered",
        [],
        Kind::Bool(|j, v| j.direct = !v),
        "",
        "1",
        "The opposite of `direct` (refused as 1 until a page cache is in `qoslab sim`'s path)."
    ),
    opt!(
        "ioengine",
        [],
        Kind::Text {
            expected: "an engine name",
            set: |j, v| {
                j.engine = super::engines::class_of(v)?;
                j.ioengine = v.to_string();
                Ok(())
            }
        },
        "",
        "psync",
        "How the job issues I/O: synchronous engines (`psync`, `sync`, `pvsync`, `pvsync2`, `vsync`) keep one I/O in flight whatever `iodepth` says; asynchronous ones (`libaio`, `io_uring`, `posixaio`) keep `iodepth`; `null` reaches no device (see 'Engines')."
    ),
    opt!(
        "filename",
        [],
        Kind::Text {
            expected: "a file or device name",
            set: |j, v| {
                j.filename = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "",
        "File or device the job uses."
    ),
    opt!(
        "nrfiles",
        ["nr_files"],
        Kind::Int {
            min: 1,
            max: MAX_U32,
            set: |j, v| j.nrfiles = v as u32
        },
        "",
        "1",
        "Number of files of the job: its I/O region is cut into this many equal files, one after another (see 'Files')."
    ),
    opt!(
        "file_service_type",
        [],
        Kind::Text {
            expected: "roundrobin[:n], random or sequential[:n]",
            set: set_file_service
        },
        "",
        "roundrobin",
        "Which file the next I/O goes to: in turn (`n` I/Os each), at random, or each to its end."
    ),
    opt!(
        "directory",
        [],
        Kind::Text {
            expected: "a folder",
            set: |j, v| {
                j.directory = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "",
        "Folder of the job's files: kept for the report (the files are regions of the simulated device)."
    ),
    opt!(
        "filename_format",
        [],
        Kind::Text {
            expected: "a file name pattern like $jobname.$jobnum.$filenum",
            set: |j, v| {
                j.filename_format = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "$jobname.$jobnum.$filenum",
        "Names of the job's files: kept for the report (the files are regions of the simulated device)."
    ),
    opt!(
        "offset_align",
        [],
        Kind::Size(|j, v| j.offset_align = (v > 0).then_some(v)),
        "bytes",
        "0",
        "A percentage `offset` is rounded up to a multiple of this."
    ),
    opt!(
        "fill_device",
        ["fill_fs"],
        Kind::Bool(|j, v| j.fill_device = v),
        "",
        "0",
        "The region runs from `offset` to the end of the device (fio writes until the device is full)."
    ),
    opt!(
        "create_only",
        [],
        Kind::Bool(|j, v| j.create_only = v),
        "",
        "0",
        "The job only lays out its files: it does no I/O."
    ),
    opt!(
        "sync",
        [],
        Kind::Choice(&["none", "0", "sync", "1", "dsync"], |j, i| j.fua = i >= 2),
        "",
        "none",
        "Open the file O_SYNC or O_DSYNC: with direct I/O on a block device Linux writes each write with FUA."
    ),
    opt!(
        "atomic",
        [],
        Kind::Bool(|j, v| if v {
            j.direct = true
        }),
        "",
        "0",
        "Atomic direct I/O: Linux has no O_ATOMIC, and fio then does direct I/O."
    ),
    opt!(
        "ioscheduler",
        [],
        Kind::Text {
            expected: "a scheduler name",
            set: |j, v| {
                j.ioscheduler = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "",
        "Switch the device's I/O scheduler to this one (`block.scheduler` of the device file) for the run."
    ),
    opt!(
        "log_avg_msec",
        [],
        Kind::Int {
            min: 0,
            max: u64::MAX,
            set: |j, v| j.log_avg_msec = (v > 0).then_some(v)
        },
        "ms",
        "0",
        "Averaging interval of the per-interval logs."
    ),
    opt!(
        "write_lat_log",
        [],
        Kind::Text {
            expected: "a log file prefix",
            set: |j, v| {
                j.logs.lat = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "job name",
        "Write the latency logs `PREFIX_lat.N.log`, `PREFIX_clat.N.log` and `PREFIX_slat.N.log` (ns) in fio's format: a line per I/O, or per direction and `log_avg_msec` window."
    ),
    opt!(
        "write_bw_log",
        [],
        Kind::Text {
            expected: "a log file prefix",
            set: |j, v| {
                j.logs.bw = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "job name",
        "Write the bandwidth log `PREFIX_bw.N.log` in fio's format: a line per I/O (bytes x 1e6 / clat ns), or per direction and `log_avg_msec` window (KiB/s)."
    ),
    opt!(
        "write_iops_log",
        [],
        Kind::Text {
            expected: "a log file prefix",
            set: |j, v| {
                j.logs.iops = Some(v.to_string());
                Ok(())
            }
        },
        "",
        "job name",
        "Write the IOPS log `PREFIX_iops.N.log` in fio's format: a line per I/O (1), or per direction and `log_avg_msec` window."
    ),
    OptionSpec {
        read_first: true,
        ..opt!(
            "kb_base",
            [],
            Kind::Choice(&["1024", "1000"], |j, i| j.kb_base = if i == 0 {
                KbBase::Binary
            } else {
                KbBase::Decimal
            }),
            "",
            "1024",
            "Meaning of unit prefixes in sizes (see 'Sizes and times'); read before the section's other options, as fio does."
        )
    },
    // Accepted and ignored: they change how fio runs on a host, not the simulated I/O.
    ignored!("thread", [], "Threads instead of processes."),
    ignored!(
        "thinktime_spin",
        [],
        "CPU-spinning part of `thinktime`; the stall lasts `thinktime` either way."
    ),
    ignored!(
        "random_generator",
        [],
        "qoslab draws from its own named streams."
    ),
    ignored!(
        "clat_percentiles",
        [],
        "Reporting choice; qoslab reports all latencies."
    ),
    ignored!(
        "slat_percentiles",
        [],
        "Reporting choice; qoslab reports all latencies."
    ),
    ignored!("disable_lat", [], "Host-side measurement switch."),
    ignored!("disable_clat", [], "Host-side measurement switch."),
    ignored!("disable_slat", [], "Host-side measurement switch."),
    ignored!(
        "disable_bw_measurement",
        ["disable_bw"],
        "Host-side measurement switch."
    ),
    ignored!("gtod_reduce", [], "Host-side clock-call reduction."),
    ignored!("clocksource", [], "Host clock choice."),
    ignored!("write_hist_log", [], "fio log files."),
    ignored!("log_hist_msec", [], "fio log files."),
    ignored!("per_job_logs", [], "fio log files."),
    ignored!("allow_mounted_write", [], "Host safety check."),
    ignored!("refill_buffers", [], "Data buffer contents."),
    ignored!("scramble_buffers", [], "Data buffer contents."),
    ignored!("zero_buffers", [], "Data buffer contents."),
    ignored!("buffer_compress_percentage", [], "Data buffer contents."),
    ignored!("buffer_compress_chunk", [], "Data buffer contents."),
    ignored!("buffer_pattern", [], "Data buffer contents."),
    ignored!("dedupe_percentage", [], "Data buffer contents."),
    ignored!("cpus_allowed", [], "Host CPU affinity."),
    ignored!("cpus_allowed_policy", [], "Host CPU affinity."),
    ignored!("cpumask", [], "Host CPU affinity."),
    ignored!("numa_cpu_nodes", [], "Host NUMA placement."),
    ignored!("numa_mem_policy", [], "Host NUMA placement."),
    ignored!("nice", [], "Host process priority."),
    ignored!("hipri", [], "io_uring polled completions on the host."),
    ignored!("fixedbufs", [], "io_uring registered buffers on the host."),
    ignored!(
        "registerfiles",
        [],
        "io_uring registered files on the host."
    ),
    ignored!(
        "sqthread_poll",
        [],
        "io_uring submission thread on the host."
    ),
    ignored!(
        "sqthread_poll_cpu",
        [],
        "io_uring submission thread on the host."
    ),
    ignored!("nonvectored", [], "io_uring opcode choice on the host."),
    ignored!("force_async", [], "io_uring submission flag on the host."),
    ignored!(
        "userspace_reap",
        [],
        "libaio completion reaping on the host."
    ),
    ignored!("create_on_open", [], "File creation on the host."),
    ignored!("fallocate", [], "File creation on the host."),
    ignored!("unlink", [], "File clean-up on the host."),
    ignored!("lockmem", [], "Host memory locking."),
    ignored!("eta", [], "Console progress display."),
    ignored!("eta_newline", [], "Console progress display."),
    ignored!("stats", [], "Statistics are always collected."),
    ignored!(
        "threads",
        [],
        "The thread count of fio's tiobench profile; no effect outside it."
    ),
    ignored!("openfiles", [], "Open file descriptors on the host."),
    ignored!(
        "unique_filename",
        [],
        "File names of fio's network clients."
    ),
    ignored!("allow_file_create", [], "File creation on the host."),
    ignored!("create_serialize", [], "File creation on the host."),
    ignored!("create_fsync", [], "File creation on the host."),
    ignored!("pre_read", [], "Page cache warming on the host."),
    ignored!(
        "overwrite",
        [],
        "Laying a file out before writing it; the simulated device needs no layout."
    ),
    ignored!("unlink_each_loop", [], "File clean-up on the host."),
    ignored!("fadvise_hint", [], "Page-cache advice on the host."),
    ignored!(
        "sync_file_range",
        [],
        "Page-cache writeback; with direct I/O there is nothing to write back."
    ),
    ignored!(
        "softrandommap",
        [],
        "Memory of fio's random map on the host."
    ),
    ignored!("allrandrepeat", [], "qoslab is always repeatable."),
    ignored!(
        "flow_watermark",
        [],
        "Deprecated in fio 3.33 (it has no effect there either)."
    ),
    ignored!("mem", ["iomem"], "Memory type of the data buffers."),
    ignored!(
        "iomem_align",
        ["mem_align"],
        "Alignment of the data buffers."
    ),
    ignored!("hugepage-size", [], "Huge pages of the data buffers."),
    ignored!("dedupe_global", [], "Data buffer contents."),
    ignored!("dedupe_mode", [], "Data buffer contents."),
    ignored!("dedupe_working_set_percentage", [], "Data buffer contents."),
    ignored!(
        "verify",
        [],
        "Checking data: the same I/O on a job that does not write, or with do_verify=0; on a job that writes fio reads back all it wrote, which is not simulated, and such a job is refused."
    ),
    ignored!(
        "do_verify",
        [],
        "Checking data: 0 lets a job that writes run with verify set (fio then reads nothing back)."
    ),
    ignored!("verifysort", [], "Checking data (verify)."),
    ignored!("verifysort_nr", [], "Checking data (verify)."),
    ignored!("verify_interval", [], "Checking data (verify)."),
    ignored!("verify_offset", [], "Checking data (verify)."),
    ignored!("verify_pattern", [], "Checking data (verify)."),
    ignored!("verify_fatal", [], "Checking data (verify)."),
    ignored!("verify_dump", [], "Checking data (verify)."),
    ignored!("verify_async", [], "Checking data (verify)."),
    ignored!("verify_backlog", [], "Checking data (verify)."),
    ignored!("verify_backlog_batch", [], "Checking data (verify)."),
    ignored!("verify_async_cpus", [], "Checking data (verify)."),
    ignored!("experimental_verify", [], "Checking data (verify)."),
    ignored!("verify_state_load", [], "Checking data (verify)."),
    ignored!("verify_state_save", [], "Checking data (verify)."),
    ignored!("trim_percentage", [], "Trims of verified blocks (verify)."),
    ignored!("trim_verify_zero", [], "Trims of verified blocks (verify)."),
    ignored!("trim_backlog", [], "Trims of verified blocks (verify)."),
    ignored!(
        "trim_backlog_batch",
        [],
        "Trims of verified blocks (verify)."
    ),
    ignored!("write_iolog", [], "fio's log of the I/Os issued."),
    ignored!("exec_prerun", [], "A host command before the job."),
    ignored!("exec_postrun", [], "A host command after the job."),
    ignored!("rwmixcycle", [], "Obsolete in fio."),
    ignored!("write_hint", [], "Write-lifetime hints are not simulated."),
    ignored!("gpu_dev_id", [], "GPU of the data buffers."),
    ignored!("log_entries", [], "Memory of fio's logs."),
    ignored!("log_hist_coarseness", [], "fio log files."),
    opt!(
        "log_prio",
        [],
        Kind::Bool(|j, v| j.logs.prio = v),
        "",
        "0",
        "The last column of the logs is the I/O's priority value (`0x%04x`, class << 13 | level) instead of 1 for the real-time class and 0 for the others."
    ),
    ignored!("log_compression", [], "fio log files."),
    ignored!("log_compression_cpus", [], "fio log files."),
    ignored!("log_store_compressed", [], "fio log files."),
    ignored!("log_unix_epoch", [], "fio log files."),
    ignored!("log_alternate_epoch", [], "fio log files."),
    ignored!("log_alternate_epoch_clock_id", [], "fio log files."),
    ignored!("block_error_percentiles", [], "Trim error statistics."),
    ignored!("significant_figures", [], "Digits of the normal output."),
    ignored!("disk_util", [], "Host disk statistics."),
    ignored!("gtod_cpu", [], "Host clock thread."),
    ignored!(
        "continue_on_error",
        [],
        "Errors on the host; a simulated failed I/O is counted and the job goes on."
    ),
    ignored!("ignore_error", [], "Errors on the host."),
    ignored!("error_dump", [], "Errors on the host."),
    ignored!("cgroup", [], "Host cgroups."),
    ignored!("cgroup_nodelete", [], "Host cgroups."),
    ignored!("cgroup_weight", [], "Host cgroups."),
    ignored!("uid", [], "Host user."),
    ignored!("gid", [], "Host group."),
    ignored!(
        "unit_base",
        [],
        "Units of the normal output; qoslab reports bytes."
    ),
    ignored!("nowait", [], "RWF_NOWAIT on the host."),
    ignored!("uncached", [], "RWF_UNCACHED on the host."),
    ignored!("hipri_percentage", [], "Polled completions on the host."),
    refused!(
        "zonemode",
        ["none"],
        "zoned I/O: strided zones or a zoned block device"
    ),
    ignored!("zonesize", [], "Zones (zonemode), not simulated."),
    ignored!("zonecapacity", [], "Zones (zonemode), not simulated."),
    ignored!("zonerange", [], "Zones (zonemode), not simulated."),
    ignored!("zoneskip", [], "Zones (zonemode), not simulated."),
    ignored!("read_beyond_wp", [], "Zones (zonemode), not simulated."),
    ignored!("max_open_zones", [], "Zones (zonemode), not simulated."),
    ignored!("job_max_open_zones", [], "Zones (zonemode), not simulated."),
    ignored!("ignore_zone_limits", [], "Zones (zonemode), not simulated."),
    ignored!(
        "zone_reset_threshold",
        [],
        "Zones (zonemode), not simulated."
    ),
    ignored!(
        "zone_reset_frequency",
        [],
        "Zones (zonemode), not simulated."
    ),
    refused!(
        "lockfile",
        ["none"],
        "a lock file, which serializes the jobs' I/O to a file"
    ),
    refused!(
        "opendir",
        [],
        "the files of an existing folder, which need a file system (qoslab has none yet)"
    ),
    refused!(
        "serialize_overlap",
        ["0"],
        "waiting for overlapping I/O in flight"
    ),
    refused!(
        "file_append",
        ["0"],
        "appending to a file, which needs a file system (qoslab has none yet)"
    ),
    refused!(
        "bs_unaligned",
        ["0"],
        "block sizes that are not multiples of the smallest"
    ),
    refused!(
        "bs_is_seq_rand",
        ["0"],
        "block sizes per sequential and random I/O"
    ),
    refused!(
        "percentage_random",
        ["100", "0"],
        "a mix of sequential and random I/O in one job"
    ),
    refused!(
        "percentage_sequential",
        ["0", "100"],
        "a mix of sequential and random I/O in one job"
    ),
    refused!("verify_only", ["0"], "reading data back to check it"),
    refused!(
        "read_iolog",
        [],
        "an iolog as a job's I/O; replay it with `qoslab sim --trace FILE` (fio iolog v2 and v3)"
    ),
    ignored!("read_iolog_chunked", [], "With read_iolog only."),
    ignored!("replay_no_stall", [], "With read_iolog only."),
    ignored!("replay_redirect", [], "With read_iolog only."),
    ignored!("replay_scale", [], "With read_iolog only."),
    ignored!("replay_align", [], "With read_iolog only."),
    ignored!("replay_time_scale", [], "With read_iolog only."),
    ignored!("replay_skip", [], "With read_iolog only."),
    ignored!("merge_blktrace_file", [], "With read_iolog only."),
    ignored!("merge_blktrace_scalars", [], "With read_iolog only."),
    ignored!("merge_blktrace_iters", [], "With read_iolog only."),
    refused!(
        "log_max_value",
        ["0"],
        "logs of the largest value per window (qoslab logs averages)"
    ),
    opt!(
        "log_offset",
        [],
        Kind::Bool(|j, v| j.logs.offset = v),
        "",
        "0",
        "The logs carry each I/O's offset, after its block size."
    ),
    refused!(
        "unified_rw_reporting",
        ["none", "0"],
        "a report with reads, writes and trims together (qoslab reports them apart)"
    ),
    refused!(
        "profile",
        ["none"],
        "fio's built-in profiles (tiobench, act)"
    ),
    refused!(
        "cmdprio_bssplit",
        [],
        "priorities per block size (cmdprio_percentage is simulated)"
    ),
];

/// The spec for `name` or one of its aliases.
pub fn find(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS
        .iter()
        .find(|o| o.name == name || o.aliases.contains(&name))
}

/// The known option name (or alias) nearest to a mistyped `name`, if one is near enough to be
/// what was meant (a transposition or one or two letters off).
pub fn closest(name: &str) -> Option<&'static str> {
    OPTIONS
        .iter()
        .flat_map(|o| std::iter::once(o.name).chain(o.aliases.iter().copied()))
        .map(|known| (strsim::normalized_damerau_levenshtein(name, known), known))
        .filter(|&(similarity, _)| similarity >= 0.75)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, known)| known)
}

/// The option list of docs/workload.md, generated from [`OPTIONS`].
pub fn options_markdown() -> String {
    let mut out = String::from(
        "| option | aliases | type | unit | default | what it does |\n|---|---|---|---|---|---|\n",
    );
    for o in OPTIONS
        .iter()
        .filter(|o| !o.is_ignored() && !o.is_refused())
    {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            o.name,
            o.aliases
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
            o.type_name(),
            o.unit,
            o.default,
            o.help
        ));
    }
    out.push_str("\nAccepted and ignored (they change how fio runs on a host, not the simulated I/O); a job that sets one gets one warning line naming them, and the JSON lists them under `qoslab.ignored_options`:\n\n| option | aliases | why it has no effect |\n|---|---|---|\n");
    for o in OPTIONS.iter().filter(|o| o.is_ignored()) {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            o.name,
            o.aliases
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
            o.help
        ));
    }
    out.push_str("\nRefused unless set to a value that changes nothing (they change the I/O in a way the simulator does not model):\n\n| option | accepted values | what is not simulated |\n|---|---|---|\n");
    for o in OPTIONS.iter() {
        if let Kind::Refused { accept, why } = &o.kind {
            let accept: Vec<String> = accept.iter().map(|a| format!("`{a}`")).collect();
            out.push_str(&format!(
                "| `{}` | {} | {why} |\n",
                o.name,
                if accept.is_empty() {
                    "none".to_string()
                } else {
                    accept.join(", ")
                }
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_name_and_alias_is_declared_once() {
        let mut seen = HashSet::new();
        for o in OPTIONS {
            for n in std::iter::once(&o.name).chain(o.aliases) {
                assert!(seen.insert(*n), "option '{n}' declared twice");
            }
        }
    }
}
