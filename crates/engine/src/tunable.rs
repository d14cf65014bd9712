//! Tunables as data: each model declares its knobs once, in a table of [`Tunable`]s (name,
//! unit, default, range, help). The same table validates TOML files and `--set key=value`
//! overrides, prints the CLI help and generates the docs, so they cannot drift apart.
//!
//! A configuration file is read into a [`ConfigDoc`] (every key flattened to a dotted path with
//! its line number); each owner takes its section with [`ConfigDoc::section`], and whatever is
//! left over at the end is an unknown key and an error.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::time::{MAX_TIME_NS, MAX_TIME_TEXT, Ns};
use crate::units::{
    KbBase, duration_ns_unbounded, parse_duration_ns, parse_rate_bytes_per_ns, parse_size,
};

/// What a tunable measures, which decides how its value is written and checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    /// Time in ns: an integer, or a string with a unit (`"1.5us"`).
    Ns,
    /// Time in whole ms, as Linux's sysfs writes it (`read_expire`): an integer (ms), or a
    /// string with a unit (`"0.5s"`). Stored in ms.
    Ms,
    /// A byte count: an integer, or a string with a size suffix (`"4KiB"`, `"128k"`).
    Bytes,
    /// A plain non-negative integer.
    Count,
    /// A fraction, usually in [0, 1]; `"7%"` is accepted.
    Ratio,
    /// A dimensionless real number.
    Real,
    /// A data rate in bytes per ns (= GB/s): a number, or a string such as `"500MB/s"`.
    BytesPerNs,
    Bool,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// Free text (a name, a file path).
    Text,
    /// A list of real numbers.
    Reals,
}

impl Unit {
    /// The unit as printed in help and docs.
    pub fn label(&self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Ms => "ms",
            Unit::Bytes => "bytes",
            Unit::Count => "count",
            Unit::Ratio => "fraction",
            Unit::Real => "number",
            Unit::BytesPerNs => "GB/s",
            Unit::Bool => "bool",
            Unit::Choice(_) => "choice",
            Unit::Text => "text",
            Unit::Reals => "list",
        }
    }

    fn expected(&self) -> String {
        match self {
            Unit::Ns => "a time like 250ns, 1.5us or 2ms".into(),
            Unit::Ms => "a time in whole ms like 500 or 0.5s".into(),
            Unit::Bytes => "a size like 4096, 4k or 4KiB".into(),
            Unit::Count => "a non-negative integer".into(),
            Unit::Ratio => "a fraction like 0.07 or 7%".into(),
            Unit::Real => "a number".into(),
            Unit::BytesPerNs => "a rate like 1.0 (GB/s) or 500MB/s".into(),
            Unit::Bool => "true or false".into(),
            Unit::Choice(words) => format!("one of {}", words.join(", ")),
            Unit::Text => "a string".into(),
            Unit::Reals => "a list of numbers".into(),
        }
    }
}

/// A tunable's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Real(f64),
    Bool(bool),
    Text(Cow<'static, str>),
    Reals(Cow<'static, [f64]>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Real(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Text(v) => write!(f, "{v}"),
            Value::Reals(v) => {
                let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

/// One knob of a model: declared once, used by the parser, the CLI help and the docs.
#[derive(Clone, Debug)]
pub struct Tunable {
    /// Key in its section, with the unit in the name where there is one (`fetch_ns`). May be
    /// dotted (`flash.read_ns`) for a model with sub-tables.
    pub name: &'static str,
    pub unit: Unit,
    pub default: Value,
    /// Inclusive range for numeric values (ignored for others).
    pub min: f64,
    pub max: f64,
    pub help: &'static str,
}

impl Tunable {
    const fn new(name: &'static str, unit: Unit, default: Value, help: &'static str) -> Self {
        Tunable {
            name,
            unit,
            default,
            min: 0.0,
            max: f64::INFINITY,
            help,
        }
    }
    pub const fn ns(name: &'static str, default_ns: Ns, help: &'static str) -> Self {
        Self::new(name, Unit::Ns, Value::Int(default_ns), help)
    }
    /// A time in whole ms (Linux sysfs units); the value is read in ms.
    pub const fn ms(name: &'static str, default_ms: u64, help: &'static str) -> Self {
        Self::new(name, Unit::Ms, Value::Int(default_ms), help)
    }
    pub const fn bytes(name: &'static str, default: u64, help: &'static str) -> Self {
        Self::new(name, Unit::Bytes, Value::Int(default), help)
    }
    pub const fn count(name: &'static str, default: u64, help: &'static str) -> Self {
        Self::new(name, Unit::Count, Value::Int(default), help)
    }
    pub const fn ratio(name: &'static str, default: f64, help: &'static str) -> Self {
        Self::new(name, Unit::Ratio, Value::Real(default), help).range(0.0, 1.0)
    }
    pub const fn real(name: &'static str, default: f64, help: &'static str) -> Self {
        Self::new(name, Unit::Real, Value::Real(default), help)
    }
    pub const fn rate(name: &'static str, default_gb_per_s: f64, help: &'static str) -> Self {
        Self::new(name, Unit::BytesPerNs, Value::Real(default_gb_per_s), help)
    }
    pub const fn flag(name: &'static str, default: bool, help: &'static str) -> Self {
        Self::new(name, Unit::Bool, Value::Bool(default), help)
    }
    pub const fn choice(
        name: &'static str,
        words: &'static [&'static str],
        default: &'static str,
        help: &'static str,
    ) -> Self {
        Self::new(
            name,
            Unit::Choice(words),
            Value::Text(Cow::Borrowed(default)),
            help,
        )
    }
    pub const fn text(name: &'static str, default: &'static str, help: &'static str) -> Self {
        Self::new(name, Unit::Text, Value::Text(Cow::Borrowed(default)), help)
    }
    pub const fn reals(name: &'static str, default: &'static [f64], help: &'static str) -> Self {
        Self::new(
            name,
            Unit::Reals,
            Value::Reals(Cow::Borrowed(default)),
            help,
        )
    }
    /// Restricts a numeric tunable to [min, max].
    pub const fn range(mut self, min: f64, max: f64) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    /// Reads `raw` as this tunable's value (sizes with `kb_base`), or says what was expected.
    ///
    /// One rule for every number: finite, within the tunable's range and within what its unit
    /// can hold (a time at most [`MAX_TIME_NS`], a size or count at most `i64::MAX`), checked
    /// here; a value past it is refused, never saturated.
    pub fn parse(&self, raw: &RawValue, kb_base: KbBase) -> Result<Value, String> {
        let bad = || {
            format!(
                "expected {}{}, got {raw}",
                self.unit.expected(),
                self.range_text()
            )
        };
        let too_large = |limit: &str| {
            format!(
                "expected {} of at most {limit}, got {raw}",
                self.unit.expected()
            )
        };
        let value = match (&self.unit, raw) {
            (Unit::Ns, RawValue::Int(v)) if *v >= 0 => Value::Int(*v as u64),
            (Unit::Ns, RawValue::Real(v)) if *v >= 0.0 && *v <= MAX_TIME_NS as f64 => {
                Value::Int(v.round() as u64)
            }
            (Unit::Ns, RawValue::Real(v)) if *v > MAX_TIME_NS as f64 => {
                return Err(too_large(MAX_TIME_TEXT));
            }
            (Unit::Ns, RawValue::Text(s)) => match parse_duration_ns(s) {
                Some(ns) => Value::Int(ns),
                None if duration_ns_unbounded(s).is_some_and(|ns| ns > MAX_TIME_NS as f64) => {
                    return Err(too_large(MAX_TIME_TEXT));
                }
                None => return Err(bad()),
            },
            (Unit::Ms, RawValue::Int(v)) if *v >= 0 => Value::Int(*v as u64),
            (Unit::Ms, RawValue::Text(s)) => match parse_duration_ns(s) {
                Some(ns) if ns % 1_000_000 == 0 => Value::Int(ns / 1_000_000),
                _ => return Err(bad()),
            },
            (Unit::Bytes, RawValue::Int(v)) if *v >= 0 => Value::Int(*v as u64),
            (Unit::Bytes, RawValue::Text(s)) => {
                Value::Int(parse_size(s, kb_base).map_err(|e| format!("{}: {e}", bad()))?)
            }
            (Unit::Count, RawValue::Int(v)) if *v >= 0 => Value::Int(*v as u64),
            (Unit::Ratio, RawValue::Text(s)) => match s.trim().strip_suffix('%') {
                Some(p) => Value::Real(p.trim().parse::<f64>().map_err(|_| bad())? / 100.0),
                None => return Err(bad()),
            },
            (Unit::Ratio | Unit::Real, RawValue::Int(v)) => Value::Real(*v as f64),
            (Unit::Ratio | Unit::Real, RawValue::Real(v)) => Value::Real(*v),
            (Unit::BytesPerNs, RawValue::Int(v)) => Value::Real(*v as f64),
            (Unit::BytesPerNs, RawValue::Real(v)) => Value::Real(*v),
            (Unit::BytesPerNs, RawValue::Text(s)) => {
                Value::Real(parse_rate_bytes_per_ns(s).ok_or_else(bad)?)
            }
            (Unit::Bool, RawValue::Bool(b)) => Value::Bool(*b),
            (Unit::Choice(words), RawValue::Text(s)) => {
                let w = words
                    .iter()
                    .find(|w| w.eq_ignore_ascii_case(s))
                    .ok_or_else(bad)?;
                Value::Text(Cow::Borrowed(w))
            }
            (Unit::Text, RawValue::Text(s)) => Value::Text(Cow::Owned(s.clone())),
            (Unit::Reals, RawValue::List(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        RawValue::Int(v) => out.push(*v as f64),
                        RawValue::Real(v) if v.is_finite() => out.push(*v),
                        _ => return Err(bad()),
                    }
                }
                Value::Reals(Cow::Owned(out))
            }
            _ => return Err(bad()),
        };
        // What the unit can hold: times up to the clock's range (sums of a few stay in u64),
        // sizes as an i64 (what a file's integers can say).
        match (&self.unit, &value) {
            (Unit::Ns, Value::Int(ns)) if *ns > MAX_TIME_NS => {
                return Err(too_large(MAX_TIME_TEXT));
            }
            (Unit::Ms, Value::Int(ms)) if *ms > MAX_TIME_NS / 1_000_000 => {
                return Err(too_large(MAX_TIME_TEXT));
            }
            (Unit::Bytes, Value::Int(b)) if *b > i64::MAX as u64 => {
                return Err(too_large("9223372036854775807 bytes (2^63 - 1)"));
            }
            _ => {}
        }
        let number = match &value {
            Value::Int(v) => Some(*v as f64),
            Value::Real(v) => Some(*v),
            _ => None,
        };
        if let Some(x) = number
            && (!x.is_finite() || x < self.min || x > self.max)
        {
            return Err(bad());
        }
        Ok(value)
    }

    fn range_text(&self) -> String {
        let numeric = matches!(
            self.unit,
            Unit::Ns
                | Unit::Ms
                | Unit::Bytes
                | Unit::Count
                | Unit::Ratio
                | Unit::Real
                | Unit::BytesPerNs
        );
        match (numeric, self.min > 0.0, self.max.is_finite()) {
            (false, _, _) | (true, false, false) => String::new(),
            (true, true, false) => format!(" of at least {}", self.min),
            (true, _, true) => format!(" between {} and {}", self.min, self.max),
        }
    }
}

/// A value as written in a file or on the command line, before it is given a unit.
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    Int(i64),
    Real(f64),
    Bool(bool),
    Text(String),
    List(Vec<RawValue>),
}

impl fmt::Display for RawValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawValue::Int(v) => write!(f, "{v}"),
            RawValue::Real(v) => write!(f, "{v}"),
            RawValue::Bool(v) => write!(f, "{v}"),
            RawValue::Text(s) => write!(f, "'{s}'"),
            RawValue::List(items) => {
                let parts: Vec<String> = items.iter().map(|x| x.to_string()).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

impl RawValue {
    /// Reads the value part of `--set key=value`: a TOML value if it is one (`4`, `1.5`,
    /// `true`, `[1, 2]`, `"x"`), else the bare text (`1.5us`, `wrr`).
    pub fn from_cli(text: &str) -> RawValue {
        let doc = format!("v = {text}");
        if let Ok(table) = toml::de::DeTable::parse(&doc)
            && let Some(v) = table.get_ref().get("v")
            && let Ok(raw) = RawValue::from_toml(v.get_ref())
        {
            return raw;
        }
        RawValue::Text(text.trim().to_string())
    }

    fn from_toml(v: &toml::de::DeValue<'_>) -> Result<RawValue, &'static str> {
        use toml::de::DeValue;
        Ok(match v {
            DeValue::String(s) => RawValue::Text(s.to_string()),
            DeValue::Integer(i) => {
                let text = i.as_str().replace('_', "");
                let parsed = match i.radix() {
                    10 => text.parse::<i64>(),
                    r => i64::from_str_radix(&text, r),
                };
                RawValue::Int(parsed.map_err(|_| "an integer out of range")?)
            }
            DeValue::Float(x) => RawValue::Real(
                x.as_str()
                    .replace('_', "")
                    .parse()
                    .map_err(|_| "a bad float")?,
            ),
            DeValue::Boolean(b) => RawValue::Bool(*b),
            DeValue::Datetime(_) => return Err("a date"),
            DeValue::Array(items) => RawValue::List(
                items
                    .iter()
                    .map(|x| RawValue::from_toml(x.get_ref()))
                    .collect::<Result<_, _>>()?,
            ),
            DeValue::Table(_) => return Err("a table"),
        })
    }
}

/// A bad device file or tunable value.
pub type ConfigError = crate::error::InputError;

/// The values of one section's tunables, defaults filled in.
#[derive(Clone, Debug)]
pub struct Settings {
    section: String,
    table: &'static [Tunable],
    values: Vec<Value>,
    given: Vec<bool>,
}

impl Settings {
    /// Every tunable of `table` at its default.
    pub fn defaults(section: &str, table: &'static [Tunable]) -> Self {
        Settings {
            section: section.to_string(),
            table,
            values: table.iter().map(|t| t.default.clone()).collect(),
            given: vec![false; table.len()],
        }
    }

    pub fn section(&self) -> &str {
        &self.section
    }

    pub fn table(&self) -> &'static [Tunable] {
        self.table
    }

    fn position(&self, name: &str) -> usize {
        self.table
            .iter()
            .position(|t| t.name == name)
            .unwrap_or_else(|| panic!("tunable '{name}' is not declared in [{}]", self.section))
    }

    /// Sets `name` from `raw` (sizes as fio reads them by default, `kb_base=1024`); `Err` says
    /// what was expected.
    pub fn set(&mut self, name: &str, raw: &RawValue) -> Result<(), String> {
        self.set_with(name, raw, KbBase::default())
    }

    /// Sets `name` from `raw`, reading sizes with `kb_base` (a file's own).
    pub fn set_with(&mut self, name: &str, raw: &RawValue, kb_base: KbBase) -> Result<(), String> {
        let Some(i) = self.table.iter().position(|t| t.name == name) else {
            let known: Vec<&str> = self.table.iter().map(|t| t.name).collect();
            return Err(format!(
                "unknown key '{}.{name}' (known: {})",
                self.section,
                known.join(", ")
            ));
        };
        let value = self.table[i]
            .parse(raw, kb_base)
            .map_err(|e| format!("field '{}.{name}': {e}", self.section))?;
        self.values[i] = value;
        self.given[i] = true;
        Ok(())
    }

    /// Whether `name` was given explicitly (not left at its default).
    pub fn is_given(&self, name: &str) -> bool {
        self.given[self.position(name)]
    }

    pub fn value(&self, name: &str) -> &Value {
        &self.values[self.position(name)]
    }

    /// An integer tunable (ns, bytes, count).
    pub fn u64(&self, name: &str) -> u64 {
        match self.value(name) {
            Value::Int(v) => *v,
            other => panic!("tunable '{name}' is {other:?}, not an integer"),
        }
    }

    /// A numeric tunable as f64.
    pub fn f64(&self, name: &str) -> f64 {
        match self.value(name) {
            Value::Int(v) => *v as f64,
            Value::Real(v) => *v,
            other => panic!("tunable '{name}' is {other:?}, not a number"),
        }
    }

    pub fn bool(&self, name: &str) -> bool {
        match self.value(name) {
            Value::Bool(v) => *v,
            other => panic!("tunable '{name}' is {other:?}, not a bool"),
        }
    }

    /// A choice or text tunable.
    pub fn str(&self, name: &str) -> &str {
        match self.value(name) {
            Value::Text(v) => v,
            other => panic!("tunable '{name}' is {other:?}, not text"),
        }
    }

    pub fn reals(&self, name: &str) -> &[f64] {
        match self.value(name) {
            Value::Reals(v) => v,
            other => panic!("tunable '{name}' is {other:?}, not a list"),
        }
    }

    /// Every value, in table order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// (name, value) of every tunable, in table order (for reports).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.table.iter().map(|t| t.name).zip(self.values.iter())
    }
}

/// A tunable whose value is one of a fixed set of words, as a Rust enum: declared with
/// [`choice!`](crate::choice), read by [`settings!`](crate::settings).
pub trait Choice: Copy + 'static {
    /// The words, in variant order.
    const NAMES: &'static [&'static str];
    fn from_index(i: usize) -> Self;
}

/// A typed field read from its tunable's value (the table has already checked the unit and
/// the range, so the conversion cannot fail).
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> Self;
}

impl FromValue for u64 {
    fn from_value(v: &Value) -> Self {
        match v {
            Value::Int(x) => *x,
            other => unreachable!("{other:?} is not an integer"),
        }
    }
}

impl FromValue for u32 {
    fn from_value(v: &Value) -> Self {
        u32::try_from(u64::from_value(v)).unwrap_or(u32::MAX)
    }
}

impl FromValue for u16 {
    fn from_value(v: &Value) -> Self {
        u16::try_from(u64::from_value(v)).unwrap_or(u16::MAX)
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> Self {
        match v {
            Value::Int(x) => *x as f64,
            Value::Real(x) => *x,
            other => unreachable!("{other:?} is not a number"),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: &Value) -> Self {
        match v {
            Value::Bool(b) => *b,
            other => unreachable!("{other:?} is not a bool"),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> Self {
        match v {
            Value::Text(t) => t.to_string(),
            other => unreachable!("{other:?} is not text"),
        }
    }
}

impl FromValue for Vec<f64> {
    fn from_value(v: &Value) -> Self {
        match v {
            Value::Reals(r) => r.to_vec(),
            other => unreachable!("{other:?} is not a list"),
        }
    }
}

impl<T: Choice> FromValue for T {
    fn from_value(v: &Value) -> Self {
        let Value::Text(word) = v else {
            unreachable!("{v:?} is not a choice")
        };
        let i = T::NAMES
            .iter()
            .position(|n| *n == word.as_ref())
            .unwrap_or_else(|| unreachable!("'{word}' is not one of {:?}", T::NAMES));
        T::from_index(i)
    }
}

/// Declares an enum whose variants are the words of a choice tunable.
///
/// ```
/// qoslab_engine::choice! {
///     /// How the controller picks the next submission queue.
///     pub enum Arbitration { RoundRobin = "rr", WeightedRoundRobin = "wrr" }
/// }
/// assert_eq!(Arbitration::WeightedRoundRobin.name(), "wrr");
/// ```
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Name:ident { $( $(#[$vmeta:meta])* $V:ident = $word:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $Name { $( $(#[$vmeta])* $V ),+ }

        impl $crate::tunable::Choice for $Name {
            const NAMES: &'static [&'static str] = &[$($word),+];
            fn from_index(i: usize) -> Self {
                const ALL: &[$Name] = &[$($Name::$V),+];
                ALL[i]
            }
        }

        impl $Name {
            /// The word a configuration file uses for this value.
            pub fn name(self) -> &'static str {
                <Self as $crate::tunable::Choice>::NAMES[self as usize]
            }
        }
    };
}

/// Declares a section's tunables once, as data and as a typed struct: the table `$TABLE`
/// (for config parsing, `--set`, CLI help and docs) and `struct $Name` with one field per
/// tunable, read with `$Name::from_settings`. A field's key is its name (or the string after
/// `as`, for dotted keys of a plug-in's sub-table); its tunable is built with the
/// [`Tunable`] constructor named after `=` (`ns`, `count`, `choice`, ...), the key supplied.
/// Reading is by position, so a typed field can never ask for a key the table lacks.
///
/// ```
/// qoslab_engine::settings! {
///     /// `[toy]`: a toy model.
///     pub struct ToySettings in TOY_TUNABLES {
///         /// Service time.
///         service_ns: u64 = ns(1000, "time to serve one request"),
///         servers: u32 = count(1, "parallel servers").range(1.0, 64.0),
///         burst_weight as "wrr.burst_weight": u32 = count(4, "weight of a burst"),
///     }
/// }
/// let s = qoslab_engine::Settings::defaults("toy", TOY_TUNABLES);
/// let t = ToySettings::from_settings(&s);
/// assert_eq!((t.service_ns, t.servers, t.burst_weight), (1000, 1, 4));
/// assert_eq!(TOY_TUNABLES[2].name, "wrr.burst_weight");
/// ```
#[macro_export]
macro_rules! settings {
    (
        $(#[$meta:meta])*
        $vis:vis struct $Name:ident in $TABLE:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident $(as $key:literal)? : $ty:ty
                    = $kind:ident ( $($arg:expr),* $(,)? ) $(.range($lo:expr, $hi:expr))?
            ),* $(,)?
        }
    ) => {
        $vis static $TABLE: &[$crate::Tunable] = &[
            $( $crate::__tunable_entry!($kind, $crate::__tunable_key!($field $(, $key)?), $ty, $($arg),*)
                $(.range($lo, $hi))? ),*
        ];

        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $Name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl $Name {
            /// The typed values of `settings`, which must hold this table.
            pub fn from_settings(settings: &$crate::Settings) -> Self {
                assert!(
                    std::ptr::eq(settings.table(), $TABLE),
                    "settings of [{}] are not those of {}", settings.section(), stringify!($Name)
                );
                let mut values = settings.values().iter();
                $Name {
                    $( $field: <$ty as $crate::tunable::FromValue>::from_value(
                        values.next().expect("one value per tunable")), )*
                }
            }

            /// Every field at its default.
            pub fn defaults() -> Self {
                Self::from_settings(&$crate::Settings::defaults(stringify!($Name), $TABLE))
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tunable_key {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $key:literal) => {
        $key
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tunable_entry {
    (choice, $name:expr, $ty:ty, $default:expr, $help:expr) => {
        $crate::Tunable::choice(
            $name,
            <$ty as $crate::tunable::Choice>::NAMES,
            <$ty as $crate::tunable::Choice>::NAMES[$default as usize],
            $help,
        )
    };
    ($kind:ident, $name:expr, $ty:ty, $($arg:expr),*) => {
        $crate::Tunable::$kind($name, $($arg),*)
    };
}

/// One key of a configuration file, flattened: `media.flash.read_ns = 75000` at line 12.
#[derive(Clone, Debug)]
struct Entry {
    key: String,
    value: RawValue,
    line: u64,
    used: bool,
}

/// A TOML configuration file read for its tunables: every key flattened to a dotted path with
/// its line, so each error names the file and line.
#[derive(Clone, Debug)]
pub struct ConfigDoc {
    path: PathBuf,
    entries: Vec<Entry>,
    kb_base: KbBase,
}

/// The 1-based line of byte `offset` in `text` (a TOML parser reports spans in bytes).
pub fn line_of(text: &str, offset: usize) -> u64 {
    text[..offset.min(text.len())].matches('\n').count() as u64 + 1
}

impl ConfigDoc {
    /// Reads and parses the TOML file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::in_file(path, format!("cannot read: {e}")))?;
        Self::parse(path, &text)
    }

    /// Parses `text` as the contents of `path` (which is used in messages only).
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let table = toml::de::DeTable::parse(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            let msg = e
                .message()
                .lines()
                .next()
                .unwrap_or("invalid TOML")
                .to_string();
            ConfigError::located(path, line, format!("invalid TOML: {msg}"))
        })?;
        let mut entries = Vec::new();
        Self::flatten(path, text, "", table.get_ref(), &mut entries)?;
        // A file says how its sizes read as a fio job does: `kb_base = 1000` or 1024 (default).
        let mut kb_base = KbBase::default();
        if let Some(e) = entries.iter_mut().find(|e| e.key == "kb_base") {
            e.used = true;
            kb_base = match e.value {
                RawValue::Int(1024) => KbBase::Binary,
                RawValue::Int(1000) => KbBase::Decimal,
                ref other => {
                    return Err(ConfigError::at(
                        path,
                        e.line,
                        format!("field 'kb_base': expected 1000 or 1024, got {other}"),
                    ));
                }
            };
        }
        Ok(ConfigDoc {
            path: path.to_path_buf(),
            entries,
            kb_base,
        })
    }

    fn flatten(
        path: &Path,
        text: &str,
        prefix: &str,
        table: &toml::de::DeTable<'_>,
        out: &mut Vec<Entry>,
    ) -> Result<(), ConfigError> {
        for (key, value) in table.iter() {
            let name = if prefix.is_empty() {
                key.get_ref().to_string()
            } else {
                format!("{prefix}.{}", key.get_ref())
            };
            let line = line_of(text, key.span().start);
            if let toml::de::DeValue::Table(sub) = value.get_ref() {
                Self::flatten(path, text, &name, sub, out)?;
                continue;
            }
            let raw = RawValue::from_toml(value.get_ref()).map_err(|what| {
                ConfigError::at(
                    path,
                    line,
                    format!("field '{name}': {what} is not a setting"),
                )
            })?;
            out.push(Entry {
                key: name,
                value: raw,
                line,
                used: false,
            });
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw value of `key` (a dotted path), marking it used.
    pub fn take(&mut self, key: &str) -> Option<(RawValue, u64)> {
        let e = self.entries.iter_mut().find(|e| e.key == key)?;
        e.used = true;
        Some((e.value.clone(), e.line))
    }

    /// A text value of `key`, marking it used; an error if it is not text.
    pub fn take_text(&mut self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.take(key) {
            None => Ok(None),
            Some((RawValue::Text(s), _)) => Ok(Some(s)),
            Some((other, line)) => Err(ConfigError::at(
                &self.path,
                line,
                format!("field '{key}': expected a string, got {other}"),
            )),
        }
    }

    /// Applies every key under `[section]` to a [`Settings`] over `table`; keys under the
    /// section that the table does not declare are errors.
    pub fn section(
        &mut self,
        section: &str,
        table: &'static [Tunable],
    ) -> Result<Settings, ConfigError> {
        let mut settings = Settings::defaults(section, table);
        let prefix = format!("{section}.");
        for e in self.entries.iter_mut().filter(|e| !e.used) {
            let Some(name) = e.key.strip_prefix(&prefix) else {
                continue;
            };
            e.used = true;
            settings
                .set_with(name, &e.value, self.kb_base)
                .map_err(|msg| ConfigError::at(&self.path, e.line, msg))?;
        }
        Ok(settings)
    }

    /// Fails on the first key nobody took: a misspelt or unsupported setting.
    pub fn finish(&self) -> Result<(), ConfigError> {
        match self.entries.iter().find(|e| !e.used) {
            None => Ok(()),
            Some(e) => Err(ConfigError::at(
                &self.path,
                e.line,
                format!("unknown key '{}'", e.key),
            )),
        }
    }
}

/// Applies one `--set section.key=value` override to the settings it names (sizes as fio's
/// command line reads them by default, `kb_base=1024`).
pub fn apply_override(assignment: &str, settings: &mut [&mut Settings]) -> Result<(), ConfigError> {
    let err = |msg: String| ConfigError::new(format!("--set {assignment}: {msg}"));
    let (key, value) = assignment
        .split_once('=')
        .ok_or_else(|| err("expected section.key=value".into()))?;
    let key = key.trim();
    let Some((section, _)) = key.split_once('.') else {
        return Err(err("expected section.key=value".into()));
    };
    let known: Vec<String> = settings.iter().map(|s| s.section().to_string()).collect();
    // A plug-in's sub-table (`controller.wrr`) wins over its section (`controller`).
    let target = settings
        .iter_mut()
        .filter(|s| key.starts_with(&format!("{}.", s.section())))
        .max_by_key(|s| s.section().len())
        .ok_or_else(|| {
            err(format!(
                "unknown section '{section}' (known: {})",
                known.join(", ")
            ))
        })?;
    let name = &key[target.section().len() + 1..];
    target.set(name, &RawValue::from_cli(value)).map_err(err)
}

/// The tunables of one section as a Markdown table (for docs and `--help`).
pub fn markdown_table(section: &str, table: &[Tunable]) -> String {
    let mut out =
        String::from("| key | unit | default | range | meaning |\n|---|---|---|---|---|\n");
    for t in table {
        let range = match t.unit {
            Unit::Choice(words) => words.join(" \\| "),
            Unit::Ns
            | Unit::Ms
            | Unit::Bytes
            | Unit::Count
            | Unit::Ratio
            | Unit::Real
            | Unit::BytesPerNs => {
                let max = if t.max.is_finite() {
                    t.max.to_string()
                } else {
                    "∞".into()
                };
                format!("{} – {max}", t.min)
            }
            _ => String::new(),
        };
        out.push_str(&format!(
            "| `{section}.{}` | {} | `{}` | {range} | {} |\n",
            t.name,
            t.unit.label(),
            t.default,
            t.help
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    static TABLE: &[Tunable] = &[
        Tunable::ns("fetch_ns", 100, "time to fetch one command"),
        Tunable::bytes("mdts_bytes", 131072, "largest transfer of one command"),
        Tunable::count("servers", 1, "parallel servers").range(1.0, 1024.0),
        Tunable::ratio("op_ratio", 0.07, "over-provisioning"),
        Tunable::rate("lane_rate", 1.0, "per-lane rate"),
        Tunable::choice("arbitration", &["rr", "wrr"], "rr", "arbitration"),
        Tunable::flag("plp", false, "power-loss protection"),
        Tunable::reals("weights", &[1.0, 2.0], "weights"),
    ];

    fn doc(text: &str) -> ConfigDoc {
        ConfigDoc::parse(Path::new("dev.toml"), text).unwrap()
    }

    #[test]
    fn a_number_past_its_units_range_is_refused_not_saturated() {
        // A time beyond the clock's range once became u64::MAX and wrapped the clock into a
        // report with total latency below completion latency; infinity is no number either.
        let mut s = Settings::defaults("c", TABLE);
        for value in [
            "inf",
            "-inf",
            "nan",
            "1e30",
            "1e400",
            "4611686018427390000.0",
            "\"1e30s\"",
        ] {
            let raw = RawValue::from_cli(value);
            let err = s.set("fetch_ns", &raw).unwrap_err();
            assert!(
                err.starts_with("field 'c.fetch_ns': expected a time"),
                "{value}: {err}"
            );
        }
        let err = s.set("fetch_ns", &RawValue::from_cli("1e30")).unwrap_err();
        assert!(err.contains("of at most 4611686018427387904 ns"), "{err}");
        s.set("fetch_ns", &RawValue::from_cli("4611686018427387904"))
            .unwrap();
        assert_eq!(s.u64("fetch_ns"), MAX_TIME_NS);
        for (key, value) in [
            ("lane_rate", "inf"),
            ("lane_rate", "1e400"),
            ("op_ratio", "nan"),
            ("weights", "[1.0, inf]"),
            ("mdts_bytes", "\"16e\""),
            ("mdts_bytes", "\"9223372036854775808\""),
        ] {
            assert!(
                s.set(key, &RawValue::from_cli(value)).is_err(),
                "{key}={value}"
            );
        }
        s.set("mdts_bytes", &RawValue::from_cli("\"8191p\""))
            .unwrap();
    }

    #[test]
    fn values_are_read_with_their_units() {
        let mut d = doc(
            "[c]\nfetch_ns = \"1.5us\"\nmdts_bytes = \"128k\"\nservers = 4\nop_ratio = \"28%\"\n\
             lane_rate = \"500MB/s\"\narbitration = \"WRR\"\nplp = true\nweights = [8, 4, 1]\n",
        );
        let s = d.section("c", TABLE).unwrap();
        d.finish().unwrap();
        assert_eq!(s.u64("fetch_ns"), 1500);
        assert_eq!(s.u64("mdts_bytes"), 131072);
        assert_eq!(s.u64("servers"), 4);
        assert_eq!(s.f64("op_ratio"), 0.28);
        assert_eq!(s.f64("lane_rate"), 0.5);
        assert_eq!(s.str("arbitration"), "wrr");
        assert!(s.bool("plp"));
        assert_eq!(s.reals("weights"), &[8.0, 4.0, 1.0]);
    }

    #[test]
    fn sizes_read_as_fio_reads_them_with_the_files_kb_base() {
        // fio's default (kb_base=1024): `k` is 1024, the IEC `KiB` 1000 (fio 3.33's inversion).
        let mut d = doc("[c]\nmdts_bytes = \"4KiB\"\n");
        assert_eq!(d.section("c", TABLE).unwrap().u64("mdts_bytes"), 4000);
        // kb_base=1000: as a datasheet writes them.
        for (text, bytes) in [("4KiB", 4096), ("4kB", 4000), ("960GB", 960_000_000_000)] {
            let mut d = doc(&format!("kb_base = 1000\n[c]\nmdts_bytes = \"{text}\"\n"));
            let s = d.section("c", TABLE).unwrap();
            d.finish().unwrap();
            assert_eq!(s.u64("mdts_bytes"), bytes, "{text}");
        }
        // `--set` reads as fio's command line does by default, whatever the file says.
        let mut d = doc("kb_base = 1000\n[c]\n");
        let mut s = d.section("c", TABLE).unwrap();
        apply_override("c.mdts_bytes=32k", &mut [&mut s]).unwrap();
        assert_eq!(s.u64("mdts_bytes"), 32768);
        let e = ConfigDoc::parse(Path::new("dev.toml"), "\nkb_base = 999\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "dev.toml:2: field 'kb_base': expected 1000 or 1024, got 999"
        );
    }

    #[test]
    fn sysfs_times_are_whole_milliseconds_as_linux_writes_them() {
        static SYSFS: &[Tunable] = &[Tunable::ms("read_expire", 500, "deadline of a read")];
        let mut s = Settings::defaults("iosched", SYSFS);
        assert_eq!(s.u64("read_expire"), 500);
        apply_override("iosched.read_expire=250", &mut [&mut s]).unwrap();
        assert_eq!(s.u64("read_expire"), 250);
        apply_override("iosched.read_expire=2s", &mut [&mut s]).unwrap();
        assert_eq!(s.u64("read_expire"), 2000);
        let err = apply_override("iosched.read_expire=1.5ms", &mut [&mut s]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set iosched.read_expire=1.5ms: field 'iosched.read_expire': expected a time in whole ms like 500 or 0.5s, got '1.5ms'"
        );
    }

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let mut d = doc("[c]\nservers = 2\n");
        let s = d.section("c", TABLE).unwrap();
        assert_eq!(s.u64("fetch_ns"), 100);
        assert!(!s.is_given("fetch_ns"));
        assert!(s.is_given("servers"));
    }

    #[test]
    fn a_wrong_unit_names_file_line_field_and_expectation() {
        let mut d = doc("[c]\nservers = 2\nfetch_ns = \"4KiB\"\n");
        let err = d.section("c", TABLE).unwrap_err().to_string();
        assert_eq!(
            err,
            "dev.toml:3: field 'c.fetch_ns': expected a time like 250ns, 1.5us or 2ms, got '4KiB'"
        );
    }

    #[test]
    fn out_of_range_and_unknown_keys_are_errors() {
        let mut d = doc("[c]\nservers = 0\n");
        let err = d.section("c", TABLE).unwrap_err().to_string();
        assert!(err.starts_with("dev.toml:2: field 'c.servers': expected a non-negative integer between 1 and 1024, got 0"), "{err}");
        let mut d = doc("[c]\nservrs = 2\n");
        let err = d.section("c", TABLE).unwrap_err().to_string();
        assert!(
            err.starts_with("dev.toml:2: unknown key 'c.servrs'"),
            "{err}"
        );
        let mut d = doc("x = 1\n[c]\n");
        d.section("c", TABLE).unwrap();
        assert_eq!(
            d.finish().unwrap_err().to_string(),
            "dev.toml:1: unknown key 'x'"
        );
    }

    #[test]
    fn toml_syntax_errors_carry_the_line() {
        let err = ConfigDoc::parse(Path::new("d.toml"), "[c]\nservers = = 2\n").unwrap_err();
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn cli_overrides_take_bare_words_and_units() {
        let mut s = Settings::defaults("c", TABLE);
        apply_override("c.arbitration=wrr", &mut [&mut s]).unwrap();
        apply_override("c.fetch_ns=2us", &mut [&mut s]).unwrap();
        apply_override("c.weights=[4, 2, 1]", &mut [&mut s]).unwrap();
        assert_eq!(s.str("arbitration"), "wrr");
        assert_eq!(s.u64("fetch_ns"), 2000);
        assert_eq!(s.reals("weights"), &[4.0, 2.0, 1.0]);
        let err = apply_override("c.servers=many", &mut [&mut s]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--set c.servers=many: field 'c.servers'"),
            "{err}"
        );
        let err = apply_override("d.x=1", &mut [&mut s]).unwrap_err();
        assert!(err.to_string().contains("unknown section 'd'"), "{err}");
    }

    #[test]
    fn the_markdown_table_lists_every_tunable() {
        let md = markdown_table("c", TABLE);
        assert_eq!(md.lines().count(), 2 + TABLE.len());
        assert!(md.contains("| `c.fetch_ns` | ns | `100` | 0 – ∞ | time to fetch one command |"));
    }
}
