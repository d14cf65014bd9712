//! Schedules: qoslab's replayable schedule file (docs/nvmelite-schedule.md) and the
//! reference's JSON schedule record (spec §8).
//!
//! The schedule file lists every decision of the step loop, with the raw pick draw of
//! RANDOM/BATCHED; [`ReplayDecider`] feeds those decisions back into the loop, strictly
//! (any step the rules cannot follow is an error) or leniently (the rules repair it).

use std::fmt::Write as _;

use serde::Serialize;

use crate::model::{Decider, Observer, Situation, Step, StepError};
use crate::params::{self, Bound, FaultMode, RunParams, SubmitWindow};

pub const MAGIC: &str = "qoslab-nvmelite-schedule v1";
/// The header keys, in the order a schedule file lists them (the one list of them: tools in
/// other languages get it through the bindings).
pub const HEADER_KEYS: [&str; 8] = [
    "seed_id",
    "schedule_seed",
    "policy",
    "bound_k",
    "fault_mode",
    "submit_window",
    "scheduler_version",
    "git_commit",
];

/// Header values may hold any text; `\` and control characters are escaped so that a value
/// stays on its line (`\\`, `\xHH`).
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

pub fn unescape_value(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let code = (hex.len() == 2)
                    .then(|| u8::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .filter(|&c| c < 0x20 || c == 0x7f)
                    .ok_or_else(|| {
                        format!("bad escape '\\x{hex}': expected a control character 00-1f or 7f")
                    })?;
                out.push(char::from(code));
            }
            other => {
                return Err(format!(
                    "bad escape '\\{}': only '\\\\' and '\\xHH' are defined",
                    other.map(String::from).unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

/// Writes the schedule file of a run as it happens (an [`Observer`] of steps).
pub struct ScheduleWriter {
    text: String,
}

/// The magic line, the header (values in [`HEADER_KEYS`] order, escaped here) and `steps`.
fn write_head(text: &mut String, values: &[&str; 8]) {
    text.push_str(MAGIC);
    text.push('\n');
    for (key, value) in HEADER_KEYS.iter().zip(values) {
        let _ = writeln!(text, "{key}={}", escape_value(value));
    }
    text.push_str("steps\n");
}

/// A whole schedule file from its header values (unescaped, in [`HEADER_KEYS`] order) and step
/// lines, as a schedule minimiser rebuilds one after editing its parts.
pub fn compose(values: &[&str; 8], steps: &[&str]) -> String {
    let mut text = String::with_capacity(256 + steps.iter().map(|s| s.len() + 1).sum::<usize>());
    write_head(&mut text, values);
    for step in steps {
        text.push_str(step);
        text.push('\n');
    }
    text.push_str("end\n");
    text
}

/// A schedule file's parts without interpreting them: the header values (unescaped, in
/// [`HEADER_KEYS`] order) and the step lines between `steps` and the last `end`, verbatim.
pub fn split(text: &str) -> Result<([String; 8], Vec<&str>), StepError> {
    let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
    let values = parse_head(&mut lines)?;
    let rest: Vec<&str> = lines.map(|(_, l)| l).collect();
    let end = rest
        .iter()
        .rposition(|&l| l == "end")
        .ok_or_else(|| err(text.split('\n').count(), "expected 'end' as the last line"))?;
    Ok((values.map(|(_, v)| v), rest[..end].to_vec()))
}

/// The magic line, the header lines and `steps`: each header value with its line number.
fn parse_head<'a>(
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
) -> Result<[(usize, String); 8], StepError> {
    match lines.next() {
        Some((_, MAGIC)) => {}
        _ => return Err(err(1, format!("expected the first line '{MAGIC}'"))),
    }
    let mut values: [(usize, String); 8] = Default::default();
    for (i, key) in HEADER_KEYS.iter().enumerate() {
        let (n, line) = lines
            .next()
            .ok_or_else(|| err(i + 2, format!("expected '{key}=...'")))?;
        let value = line
            .strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .ok_or_else(|| err(n, format!("expected '{key}=...', got '{line}'")))?;
        let value = unescape_value(value).map_err(|m| err(n, format!("{key}: {m}")))?;
        values[i] = (n, value);
    }
    match lines.next() {
        Some((_, "steps")) => Ok(values),
        Some((n, line)) => Err(err(n, format!("expected 'steps', got '{line}'"))),
        None => Err(err(HEADER_KEYS.len() + 2, "expected 'steps'")),
    }
}

impl ScheduleWriter {
    pub fn new(seed_id: &str, p: &RunParams) -> Self {
        let mut text = String::with_capacity(1024);
        let (seed, bound, fault, window) = (
            p.schedule_seed.to_string(),
            p.bound.to_string(),
            p.fault.to_string(),
            p.submit_window.to_string(),
        );
        let values = [
            seed_id,
            &seed,
            p.policy.name,
            &bound,
            &fault,
            &window,
            &p.scheduler_version,
            &p.git_commit,
        ];
        write_head(&mut text, &values);
        Self { text }
    }

    pub fn finish(mut self) -> String {
        self.text.push_str("end\n");
        self.text
    }
}

impl Observer for ScheduleWriter {
    fn step(&mut self, step: &Step) {
        let t = &mut self.text;
        let _ = match *step {
            Step::Submit { .. } => writeln!(t, "submit"),
            Step::Complete {
                draw: Some(draw),
                index,
                candidates,
                cmd,
            } => writeln!(
                t,
                "complete draw={draw} # pick {index} of {candidates}: cmd {cmd}"
            ),
            Step::Complete {
                draw: None,
                index,
                candidates,
                cmd,
            } => writeln!(t, "complete # pick {index} of {candidates}: cmd {cmd}"),
            Step::Timeout { cmd, .. } => writeln!(t, "timeout # cmd {cmd}"),
            Step::Reset { pending_before, .. } => {
                writeln!(t, "reset # {pending_before} pending discarded")
            }
        };
    }
}

/// The reference's JSON schedule record (spec §8), collected during a run.
pub struct ReferenceScheduleWriter {
    record: ReferenceRecord,
}

#[derive(Serialize)]
struct ReferenceRecord {
    seed_id: String,
    schedule_seed: u64,
    policy: &'static str,
    bound_k: String,
    fault_mode: &'static str,
    steps: Vec<ReferenceStep>,
}

#[derive(Serialize)]
#[serde(tag = "type")]
enum ReferenceStep {
    CompletePick {
        pick_index: usize,
    },
    #[serde(rename = "FAULT")]
    Fault {
        fault_type: &'static str,
        at_step: u64,
    },
}

impl ReferenceScheduleWriter {
    pub fn new(seed_id: &str, p: &RunParams) -> Self {
        Self {
            record: ReferenceRecord {
                seed_id: seed_id.to_string(),
                schedule_seed: p.schedule_seed,
                policy: p.policy.name,
                bound_k: p.bound.to_string(),
                fault_mode: p.fault.name(),
                steps: Vec::new(),
            },
        }
    }

    /// Pretty-printed JSON, 2-space indent, no trailing newline.
    pub fn finish(self) -> String {
        serde_json::to_string_pretty(&self.record).expect("a record always serializes")
    }
}

impl Observer for ReferenceScheduleWriter {
    fn step(&mut self, step: &Step) {
        let steps = &mut self.record.steps;
        match *step {
            Step::Submit { .. } => {}
            Step::Complete { index, .. } => {
                steps.push(ReferenceStep::CompletePick { pick_index: index })
            }
            Step::Timeout { at_step, .. } => steps.push(ReferenceStep::Fault {
                fault_type: "TIMEOUT",
                at_step,
            }),
            Step::Reset { at_step, .. } => steps.push(ReferenceStep::Fault {
                fault_type: "RESET",
                at_step,
            }),
        }
    }
}

/// One step line of a schedule file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepLine {
    Submit,
    Complete(Option<u64>),
    Timeout,
    Reset,
}

impl StepLine {
    fn text(self) -> &'static str {
        match self {
            StepLine::Submit => "submit",
            StepLine::Complete(Some(_)) => "complete draw=...",
            StepLine::Complete(None) => "complete",
            StepLine::Timeout => "timeout",
            StepLine::Reset => "reset",
        }
    }
}

/// A parsed schedule file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub seed_id: String,
    pub params: RunParams,
    /// (1-based line number, step).
    pub steps: Vec<(usize, StepLine)>,
    /// Line number of `end` (or one past the last line when lenient parsing found none).
    pub end_line: usize,
}

fn err(line: usize, message: impl Into<String>) -> StepError {
    StepError {
        line,
        message: message.into(),
    }
}

impl Schedule {
    /// Parses a schedule file. Syntax errors are errors in both modes; `strict` also requires
    /// the final `end` line and nothing after it.
    pub fn parse(text: &str, strict: bool) -> Result<Self, StepError> {
        let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
        let [seed_id, values @ ..] = parse_head(&mut lines)?;
        // `values` are the header after seed_id: keys 1.. of HEADER_KEYS.
        let field = |i: usize| &values[i - 1].1;
        let bad = |i: usize, e: params::ParamError| {
            err(values[i - 1].0, format!("{}: {e}", HEADER_KEYS[i]))
        };
        let params = RunParams {
            schedule_seed: params::parse_seed(field(1)).map_err(|e| bad(1, e))?,
            policy: params::parse_policy(field(2)).map_err(|e| bad(2, e))?,
            bound: Bound::parse(field(3)).map_err(|e| bad(3, e))?,
            fault: FaultMode::parse(field(4)).map_err(|e| bad(4, e))?,
            submit_window: SubmitWindow::parse(field(5)).map_err(|e| bad(5, e))?,
            scheduler_version: field(6).clone(),
            git_commit: field(7).clone(),
        };
        let mut steps = Vec::new();
        let mut end_line = None;
        let mut last_line = 11;
        let mut lines = lines.peekable();
        while let Some((n, line)) = lines.next() {
            if line.is_empty() && lines.peek().is_none() {
                break; // the text after the final line break
            }
            last_line = n;
            let body = line
                .split_once('#')
                .map_or(line, |(b, _)| b)
                .trim_matches(' ');
            let step = match body {
                "end" => {
                    end_line = Some(n);
                    break;
                }
                "submit" => StepLine::Submit,
                "complete" => StepLine::Complete(None),
                "timeout" => StepLine::Timeout,
                "reset" => StepLine::Reset,
                "" if !strict => continue,
                _ => match body.strip_prefix("complete draw=") {
                    Some(d) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
                        StepLine::Complete(Some(d.parse::<u64>().map_err(|_| {
                            err(n, format!("draw '{d}' is not an integer 0..2^64-1"))
                        })?))
                    }
                    _ => {
                        return Err(err(
                            n,
                            format!(
                                "expected a step (submit, complete, complete draw=N, timeout, reset) or 'end', got '{line}'"
                            ),
                        ));
                    }
                },
            };
            steps.push((n, step));
        }
        let end_line = match end_line {
            Some(n) => {
                let rest: Vec<(usize, &str)> = lines.collect();
                if strict && !(rest.is_empty() || rest == [(n + 1, "")]) {
                    return Err(err(n + 1, "nothing may follow 'end'"));
                }
                n
            }
            None if strict => return Err(err(last_line, "expected 'end' as the last line")),
            None => last_line + 1,
        };
        Ok(Schedule {
            seed_id: seed_id.1,
            params,
            steps,
            end_line,
        })
    }
}

/// Takes the loop's decisions from a schedule file.
///
/// Strict: every step must be what the rules allow there. Lenient (a minimiser's repair mode):
/// a step the rules forbid is replaced by the rule-forced choice, a missing draw counts as 0,
/// missing steps count as `complete` with draw 0, surplus steps are dropped.
pub struct ReplayDecider<'s> {
    steps: &'s [(usize, StepLine)],
    pos: usize,
    end_line: usize,
    strict: bool,
    /// The step taken by the current iteration and its line.
    current: Option<(usize, StepLine)>,
}

impl<'s> ReplayDecider<'s> {
    pub fn new(schedule: &'s Schedule, strict: bool) -> Self {
        Self {
            steps: &schedule.steps,
            pos: 0,
            end_line: schedule.end_line,
            strict,
            current: None,
        }
    }

    fn line(&self) -> usize {
        self.current.map_or(self.end_line, |(n, _)| n)
    }

    fn infeasible(&self, expected: &str) -> Result<(), StepError> {
        if self.strict {
            let got = self
                .current
                .map_or("the end of the steps", |(_, s)| s.text());
            Err(err(self.line(), format!("{expected}, got '{got}'")))
        } else {
            Ok(())
        }
    }
}

impl Decider for ReplayDecider<'_> {
    fn decide(&mut self, situation: Situation) -> Result<bool, StepError> {
        self.current = self.steps.get(self.pos).copied();
        self.pos += 1;
        let step = self.current.map(|(_, s)| s);
        Ok(match (situation, step) {
            (Situation::Choice, Some(StepLine::Submit)) => false,
            (Situation::Choice, Some(_)) => true,
            (Situation::ForcedSubmit, Some(StepLine::Submit)) => false,
            (Situation::ForcedComplete | Situation::Burst, Some(s)) if s != StepLine::Submit => {
                true
            }
            (situation, _) => {
                let (expected, complete) = match situation {
                    Situation::Choice => ("expected a step (the run goes on)", true),
                    Situation::ForcedSubmit => ("nothing is pending: expected 'submit'", false),
                    Situation::ForcedComplete => (
                        "no submit is possible here (window full, nothing left or submissions stopped): expected a completion",
                        true,
                    ),
                    Situation::Burst => ("a burst is running: expected a completion", true),
                };
                self.infeasible(expected)?;
                complete
            }
        })
    }

    fn fault(&mut self, fault: FaultMode) -> Result<(), StepError> {
        let expected = match fault {
            FaultMode::Timeout => StepLine::Timeout,
            FaultMode::Reset => StepLine::Reset,
            FaultMode::None => unreachable!("no fault in mode NONE"),
        };
        if self.current.map(|(_, s)| s) != Some(expected) {
            self.infeasible(&format!(
                "the {fault} fault fires here (first completion with step_count >= n/2): expected '{}'",
                expected.text()
            ))?;
        }
        Ok(())
    }

    fn pick(&mut self, _candidates: usize, draws: bool) -> Result<u64, StepError> {
        match (self.current.map(|(_, s)| s), draws) {
            (Some(StepLine::Complete(Some(d))), true) => Ok(d),
            (Some(StepLine::Complete(None)), false) => Ok(0),
            (Some(StepLine::Complete(Some(_))), false) => {
                self.infeasible("this policy draws no pick: expected 'complete' without draw")?;
                Ok(0)
            }
            (Some(StepLine::Complete(None)), true) => {
                self.infeasible("this policy draws its pick: expected 'complete draw=N'")?;
                Ok(0)
            }
            (Some(_), _) => {
                self.infeasible("no fault fires here: expected a normal completion")?;
                Ok(0)
            }
            (None, _) => {
                self.infeasible("expected a completion step")?;
                Ok(0)
            }
        }
    }

    fn finish(&mut self) -> Result<(), StepError> {
        if self.strict
            && let Some(&(n, s)) = self.steps.get(self.pos)
        {
            return Err(err(
                n,
                format!("the run has ended: expected 'end', got '{}'", s.text()),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_escape_only_backslash_and_control_characters() {
        let value = "a=b, #c\\d\ne\t\u{7f}é";
        let escaped = escape_value(value);
        assert_eq!(escaped, "a=b, #c\\\\d\\x0ae\\x09\\x7fé");
        assert_eq!(unescape_value(&escaped).unwrap(), value);
        for bad in ["\\n", "\\x4", "\\x41", "\\xc3", "tail\\"] {
            assert!(unescape_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn step_lines_ignore_comments_and_the_spaces_before_them() {
        let text = "qoslab-nvmelite-schedule v1\nseed_id=s\nschedule_seed=1\npolicy=RANDOM\n\
                    bound_k=inf\nfault_mode=NONE\nsubmit_window=inf\nscheduler_version=v\n\
                    git_commit=\nsteps\nsubmit   # cmd 0\ncomplete draw=7 # pick\nend\n";
        let s = Schedule::parse(text, true).unwrap();
        assert_eq!(
            s.steps,
            [(11, StepLine::Submit), (12, StepLine::Complete(Some(7)))]
        );
        assert_eq!(s.end_line, 13);
    }
}
