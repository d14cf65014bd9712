//! Workload files (spec §1): a `seed_id` and a list of WRITE / READ / FENCE / WRITE_VISIBLE
//! commands, read as strictly as the reference's typed JSON reader.
//!
//! serde_json does the JSON itself (syntax, trailing commas, BOM, string escapes, number
//! classes). The members of a command are collected raw first because which members matter
//! depends on `type`, which may come last: members the type does not use are ignored whatever
//! their value, while a used member must appear once and be an integer in range.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Host and device storage size in u32 words (spec §3).
pub const STORAGE_WORDS: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmdKind {
    Write,
    Read,
    Fence,
    WriteVisible,
}

impl CmdKind {
    pub fn name(self) -> &'static str {
        match self {
            CmdKind::Write => "WRITE",
            CmdKind::Read => "READ",
            CmdKind::Fence => "FENCE",
            CmdKind::WriteVisible => "WRITE_VISIBLE",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            CmdKind::Write,
            CmdKind::Read,
            CmdKind::Fence,
            CmdKind::WriteVisible,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// One workload command. Unused fields are 0 (FENCE has none, only WRITE has a pattern).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Command {
    pub kind: CmdKind,
    pub lba: u64,
    pub len: u32,
    pub pattern: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub seed_id: String,
    pub commands: Vec<Command>,
}

/// Why a workload file was rejected: the member path (`commands[3].lba`) when known, the
/// 1-based line, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadError {
    pub field: Option<String>,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for WorkloadError {}

impl Workload {
    /// Parses a workload file's bytes (UTF-8 JSON, no BOM).
    pub fn from_json(bytes: &[u8]) -> Result<Self, WorkloadError> {
        let text = std::str::from_utf8(bytes).map_err(|e| WorkloadError {
            field: None,
            line: Some(line_of(bytes, e.valid_up_to())),
            message: "not UTF-8 text".to_string(),
        })?;
        if text.starts_with('\u{feff}') {
            return Err(WorkloadError {
                field: None,
                line: Some(1),
                message: "invalid JSON: starts with a UTF-8 byte-order mark".to_string(),
            });
        }
        let raw: RawWorkload = serde_json::from_str(text).map_err(|e| json_error(&e))?;
        let seed_id = raw.seed_id.ok_or_else(|| missing(None, "seed_id"))?;
        let raw_commands = raw.commands.ok_or_else(|| missing(None, "commands"))?;
        let mut commands = Vec::with_capacity(raw_commands.len());
        for (i, members) in raw_commands.iter().enumerate() {
            commands.push(command(text, i, members)?);
        }
        Ok(Workload { seed_id, commands })
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

fn line_of(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

fn json_error(e: &serde_json::Error) -> WorkloadError {
    // serde_json's message ends with " at line L column C"; the line goes into its own field.
    let text = e.to_string();
    let message = match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    };
    let message = match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("invalid JSON: {message}")
        }
        _ => message,
    };
    WorkloadError {
        field: None,
        line: (e.line() > 0).then_some(e.line()),
        message,
    }
}

fn missing(field: Option<String>, name: &str) -> WorkloadError {
    WorkloadError {
        field,
        line: None,
        message: format!("missing required member '{name}'"),
    }
}

/// The top level: `seed_id` and `commands` once each, anything else ignored.
struct RawWorkload<'a> {
    seed_id: Option<String>,
    commands: Option<Vec<Members<'a>>>,
}

/// A command object's members in file order, values unparsed.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawWorkload<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawWorkload<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object with members 'seed_id' and 'commands'")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = RawWorkload {
                    seed_id: None,
                    commands: None,
                };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "seed_id" => {
                            if out.seed_id.is_some() {
                                return Err(de::Error::custom("seed_id: duplicated member"));
                            }
                            let raw: &'de RawValue = map.next_value()?;
                            let v = serde_json::from_str::<String>(raw.get()).map_err(|_| {
                                de::Error::custom(format!(
                                    "seed_id: expected a string, got {}",
                                    raw.get()
                                ))
                            })?;
                            out.seed_id = Some(v);
                        }
                        "commands" => {
                            if out.commands.is_some() {
                                return Err(de::Error::custom("commands: duplicated member"));
                            }
                            let v: Option<Vec<Members<'a>>> = map.next_value()?;
                            out.commands = Some(v.ok_or_else(|| {
                                de::Error::custom("commands: expected an array, got null")
                            })?);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a command object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'a RawValue = map.next_value()?;
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

fn command(text: &str, index: usize, members: &Members) -> Result<Command, WorkloadError> {
    let path = |name: &str| format!("commands[{index}].{name}");
    let at = |raw: &RawValue| {
        let offset = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        Some(line_of(text.as_bytes(), offset))
    };
    // The one value of member `name`: duplicates and null are errors, absence is None.
    let member = |name: &str| -> Result<Option<&RawValue>, WorkloadError> {
        let mut found = members.0.iter().filter(|(k, _)| k == name).map(|(_, v)| *v);
        let first = found.next();
        if let Some(second) = found.next() {
            return Err(WorkloadError {
                field: Some(path(name)),
                line: at(second),
                message: "duplicated member".to_string(),
            });
        }
        Ok(first)
    };
    let required = |name: &str| -> Result<&RawValue, WorkloadError> {
        member(name)?.ok_or_else(|| WorkloadError {
            line: None,
            ..missing(Some(format!("commands[{index}]")), name)
        })
    };

    let type_raw = required("type")?;
    let kind = serde_json::from_str::<String>(type_raw.get())
        .ok()
        .and_then(|name| CmdKind::from_name(&name))
        .ok_or_else(|| WorkloadError {
            field: Some(path("type")),
            line: at(type_raw),
            message: format!(
                "expected \"WRITE\", \"READ\", \"FENCE\" or \"WRITE_VISIBLE\" (case-sensitive), got {}",
                type_raw.get()
            ),
        })?;

    let integer = |name: &str, max: u64| -> Result<u64, WorkloadError> {
        let raw = required(name)?;
        let text = raw.get();
        // serde_json classifies the number: only a plain non-negative integer token is a u64.
        match serde_json::from_str::<u64>(text) {
            Ok(v) if v <= max => Ok(v),
            _ => Err(WorkloadError {
                field: Some(path(name)),
                line: at(raw),
                message: format!("expected an integer 0..{max}, got {text}"),
            }),
        }
    };
    let (lba, len, pattern) = match kind {
        CmdKind::Fence => (0, 0, 0),
        CmdKind::Write => (
            integer("lba", u64::MAX)?,
            integer("len", u32::MAX.into())? as u32,
            integer("pattern", u32::MAX.into())? as u32,
        ),
        CmdKind::Read | CmdKind::WriteVisible => (
            integer("lba", u64::MAX)?,
            integer("len", u32::MAX.into())? as u32,
            0,
        ),
    };
    Ok(Command {
        kind,
        lba,
        len,
        pattern,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Workload, WorkloadError> {
        Workload::from_json(text.as_bytes())
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn accepts_the_four_types_in_any_member_order() {
        let w = parse(
            r#"{"x": [1, {"y": null}], "commands": [
                {"lba": 0, "len": 2, "pattern": 4294967295, "type": "WRITE"},
                {"type": "WRITE_VISIBLE", "lba": 18446744073709551615, "len": 0},
                {"type": "READ", "lba": 1, "len": 1, "pattern": "ignored"},
                {"type": "FENCE", "lba": -1, "lba": 2.5}
            ], "seed_id": "a, b (c)"}"#,
        )
        .unwrap();
        assert_eq!(w.seed_id, "a, b (c)");
        assert_eq!(w.commands.len(), 4);
        assert_eq!(
            w.commands[0],
            Command {
                kind: CmdKind::Write,
                lba: 0,
                len: 2,
                pattern: u32::MAX
            }
        );
        assert_eq!(w.commands[1].lba, u64::MAX);
        assert_eq!(w.commands[3].kind, CmdKind::Fence);
        assert!(
            parse(r#"{"seed_id": "", "commands": []}"#)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn rejects_what_section_1_2_rejects() {
        let cases = [
            (r#"{"seed_id": "a", "commands": [],}"#, "invalid JSON"),
            (
                r#"{"seed_id": "a", "commands": [{"type": "FENCE"},]}"#,
                "invalid JSON",
            ),
            (
                "\u{feff}{\"seed_id\": \"a\", \"commands\": []}",
                "invalid JSON",
            ),
            (r#"{"seed_id": "a", "commands": []} x"#, "invalid JSON"),
            (r#"{"commands": []}"#, "missing required member 'seed_id'"),
            (r#"{"seed_id": "a"}"#, "missing required member 'commands'"),
            (r#"{"seed_id": 1, "commands": []}"#, "expected a string"),
            (r#"{"seed_id": null, "commands": []}"#, "seed_id"),
            (
                r#"{"seed_id": "a", "seed_id": "b", "commands": []}"#,
                "seed_id: duplicated",
            ),
            (
                r#"{"seed_id": "a", "commands": [], "commands": []}"#,
                "commands: duplicated",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "write", "lba": 0, "len": 1, "pattern": 1}]}"#,
                "commands[0].type",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "TRIM"}]}"#,
                "commands[0].type",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 0}]}"#,
                "commands[0]: missing required member 'len'",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 0, "len": null}]}"#,
                "commands[0].len",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 0, "len": 1, "len": 1}]}"#,
                "commands[0].len: duplicated",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "FENCE", "type": "FENCE"}]}"#,
                "commands[0].type: duplicated",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": "0", "len": 1}]}"#,
                "commands[0].lba",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 1.0, "len": 1}]}"#,
                "commands[0].lba",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 1e2, "len": 1}]}"#,
                "commands[0].lba",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": -1, "len": 1}]}"#,
                "commands[0].lba",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": -0, "len": 1}]}"#,
                "commands[0].lba",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 18446744073709551616, "len": 1}]}"#,
                "commands[0].lba",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "READ", "lba": 0, "len": 4294967296}]}"#,
                "commands[0].len",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "WRITE", "lba": 0, "len": 1, "pattern": 4294967296}]}"#,
                "commands[0].pattern",
            ),
            (
                r#"{"seed_id": "a", "commands": [{"type": "WRITE", "lba": 0, "len": 1}]}"#,
                "missing required member 'pattern'",
            ),
            (
                r#"{"seed_id": "a", "commands": ["FENCE"]}"#,
                "command object",
            ),
            (r#"["a", []]"#, "JSON object"),
        ];
        for (text, expected) in cases {
            let message = err(text);
            assert!(message.contains(expected), "{text}: {message}");
        }
        assert!(Workload::from_json(b"{\"seed_id\": \"\xff\", \"commands\": []}").is_err());
    }

    #[test]
    fn errors_carry_the_line_of_the_bad_value() {
        let e = parse("{\"seed_id\": \"a\",\n \"commands\": [\n {\"type\": \"READ\",\n \"lba\": -3, \"len\": 1}]}")
            .unwrap_err();
        assert_eq!(e.line, Some(4));
        assert_eq!(e.field.as_deref(), Some("commands[0].lba"));
    }
}
