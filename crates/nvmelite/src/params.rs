//! The run parameters of spec §2: their accepted spellings and canonical printed forms.

use std::fmt;

use crate::policy::{self, PolicyOps};

/// Reordering bound k: candidates are the k+1 oldest pending commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    K(u32),
    Inf,
}

/// How many commands may be pending at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubmitWindow {
    N(u64),
    Inf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultMode {
    None,
    Timeout,
    Reset,
}

/// A parameter value that is not one of the spellings of spec §2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    pub expected: String,
    pub got: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {}, got '{}'", self.expected, self.got)
    }
}

impl std::error::Error for ParamError {}

fn bad(expected: &str, got: &str) -> ParamError {
    ParamError {
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

impl Bound {
    /// `inf` (any case) or a decimal u32; `+2` and `03` are accepted as the reference does.
    pub fn parse(text: &str) -> Result<Self, ParamError> {
        if text.eq_ignore_ascii_case("inf") {
            return Ok(Bound::Inf);
        }
        text.parse::<u32>()
            .map(Bound::K)
            .map_err(|_| bad("a bound k: an integer 0..4294967295 or 'inf'", text))
    }

    /// Number of candidates among `pending` (> 0) pending commands: min(k, pending-1) + 1.
    pub fn candidates(self, pending: usize) -> usize {
        match self {
            Bound::Inf => pending,
            Bound::K(k) => (k as usize).min(pending - 1) + 1,
        }
    }

    /// Sort key with `inf` after every finite k.
    pub fn order_key(self) -> u64 {
        match self {
            Bound::K(k) => u64::from(k),
            Bound::Inf => u64::MAX,
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::K(k) => write!(f, "{k}"),
            Bound::Inf => f.write_str("inf"),
        }
    }
}

impl SubmitWindow {
    pub fn parse(text: &str) -> Result<Self, ParamError> {
        if text.eq_ignore_ascii_case("inf") {
            return Ok(SubmitWindow::Inf);
        }
        text.parse::<u64>()
            .map(SubmitWindow::N)
            .map_err(|_| bad("a submit window: an integer 0..2^64-1 or 'inf'", text))
    }

    pub fn allows(self, pending: usize) -> bool {
        match self {
            SubmitWindow::Inf => true,
            SubmitWindow::N(n) => (pending as u64) < n,
        }
    }
}

impl fmt::Display for SubmitWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitWindow::N(n) => write!(f, "{n}"),
            SubmitWindow::Inf => f.write_str("inf"),
        }
    }
}

impl FaultMode {
    pub const ALL: [FaultMode; 3] = [FaultMode::None, FaultMode::Timeout, FaultMode::Reset];

    pub fn parse(text: &str) -> Result<Self, ParamError> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| bad("a fault mode: NONE, TIMEOUT or RESET", text))
    }

    pub fn name(self) -> &'static str {
        match self {
            FaultMode::None => "NONE",
            FaultMode::Timeout => "TIMEOUT",
            FaultMode::Reset => "RESET",
        }
    }
}

impl fmt::Display for FaultMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy by name (any case).
pub fn parse_policy(text: &str) -> Result<&'static PolicyOps, ParamError> {
    policy::lookup(text).ok_or_else(|| bad(&format!("a policy: {}", policy::names()), text))
}

/// A schedule seed: a decimal u64.
pub fn parse_seed(text: &str) -> Result<u64, ParamError> {
    text.parse::<u64>()
        .map_err(|_| bad("a schedule seed: an integer 0..18446744073709551615", text))
}

/// A schedule-seed range `A-B` (inclusive) or a single `A`: plain decimals, no sign or spaces.
/// An empty range (A > B) is an error: qoslab never silently runs nothing.
pub fn parse_seed_range(text: &str) -> Result<(u64, u64), ParamError> {
    let expected = "a schedule-seed range 'A-B' or 'A' of integers 0..18446744073709551615";
    let plain = |s: &str| -> Result<u64, ParamError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(expected, text));
        }
        s.parse::<u64>().map_err(|_| bad(expected, text))
    };
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (plain(a)?, plain(b)?),
        None => {
            let a = plain(text)?;
            (a, a)
        }
    };
    if a > b {
        return Err(bad(
            "a schedule-seed range 'A-B' with A <= B (A > B would run nothing)",
            text,
        ));
    }
    Ok((a, b))
}

/// Everything that determines one run besides the workload (spec §2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunParams {
    pub schedule_seed: u64,
    pub policy: &'static PolicyOps,
    pub bound: Bound,
    pub fault: FaultMode,
    pub submit_window: SubmitWindow,
    /// Header-only strings: printed in the log, no influence on behaviour.
    pub scheduler_version: String,
    pub git_commit: String,
}

impl RunParams {
    /// `seed_id_POLICY_k_seed_FAULT` (spec §7.1; the submit window is not part of it).
    pub fn run_id(&self, seed_id: &str) -> String {
        format!(
            "{seed_id}_{}_{}_{}_{}",
            self.policy.name, self.bound, self.schedule_seed, self.fault
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_accept_the_reference_spellings() {
        assert_eq!(Bound::parse("inf"), Ok(Bound::Inf));
        assert_eq!(Bound::parse("INF"), Ok(Bound::Inf));
        assert_eq!(Bound::parse("+2"), Ok(Bound::K(2)));
        assert_eq!(Bound::parse("03"), Ok(Bound::K(3)));
        assert_eq!(Bound::parse("4294967295"), Ok(Bound::K(u32::MAX)));
        for bad in ["-1", "4294967296", "", " 1", "1.0", "infinity", "~"] {
            assert!(Bound::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Bound::K(3).to_string(), "3");
    }

    #[test]
    fn candidates_are_the_k_plus_1_oldest() {
        assert_eq!(Bound::K(0).candidates(5), 1);
        assert_eq!(Bound::K(2).candidates(5), 3);
        assert_eq!(Bound::K(u32::MAX).candidates(5), 5);
        assert_eq!(Bound::Inf.candidates(5), 5);
    }

    #[test]
    fn windows_faults_policies_and_seeds() {
        assert_eq!(SubmitWindow::parse("0"), Ok(SubmitWindow::N(0)));
        assert_eq!(SubmitWindow::parse("Inf"), Ok(SubmitWindow::Inf));
        assert!(SubmitWindow::parse("-1").is_err());
        assert_eq!(FaultMode::parse("timeout"), Ok(FaultMode::Timeout));
        assert!(FaultMode::parse("CRASH").is_err());
        assert_eq!(parse_policy("batched").unwrap().name, "BATCHED");
        assert!(parse_policy("LIFO").is_err());
        assert_eq!(parse_seed_range("0-99"), Ok((0, 99)));
        assert_eq!(parse_seed_range("7"), Ok((7, 7)));
        assert_eq!(
            parse_seed_range("0-18446744073709551615"),
            Ok((0, u64::MAX))
        );
        for bad in [
            "5-2",
            "+1-3",
            "1-",
            "-3",
            "1 - 3",
            "a-b",
            "1-2-3",
            "18446744073709551616",
        ] {
            assert!(parse_seed_range(bad).is_err(), "{bad}");
        }
    }
}
