//! The one error type of this crate: where the bad input is, and what was expected there.

use std::fmt;
use std::path::{Path, PathBuf};

/// A bad job file, trace or generator request.
///
/// Displays as one line, `FILE:LINE: message`, or `FILE: message` when no line applies
/// (e.g. an unreadable file), or just `message` when no file applies (e.g. a job built in
/// code). The CLI prints it after `qoslab: error: ` and exits with code 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadError {
    pub path: Option<PathBuf>,
    /// 1-based line number in `path`.
    pub line: Option<u64>,
    pub message: String,
}

impl WorkloadError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            path: None,
            line: None,
            message: message.into(),
        }
    }

    pub fn at(path: &Path, line: u64, message: impl Into<String>) -> Self {
        Self {
            path: Some(path.to_path_buf()),
            line: Some(line),
            message: message.into(),
        }
    }

    pub fn in_file(path: &Path, message: impl Into<String>) -> Self {
        Self {
            path: Some(path.to_path_buf()),
            line: None,
            message: message.into(),
        }
    }

    /// The error for a bad value of an option: `option 'bs': expected ..., got 'x'`.
    pub(crate) fn option(path: &Path, line: u64, name: &str, problem: &str) -> Self {
        Self::at(path, line, format!("option '{name}': {problem}"))
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, self.line) {
            (Some(p), Some(l)) => write!(f, "{}:{}: {}", p.display(), l, self.message),
            (Some(p), None) => write!(f, "{}: {}", p.display(), self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for WorkloadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_file_line_and_message_on_one_line() {
        let e = WorkloadError::option(
            Path::new("jobs/a.fio"),
            7,
            "bs",
            "expected a size like 4k, got 'x'",
        );
        assert_eq!(
            e.to_string(),
            "jobs/a.fio:7: option 'bs': expected a size like 4k, got 'x'"
        );
        assert_eq!(
            WorkloadError::in_file(Path::new("t.csv"), "is empty").to_string(),
            "t.csv: is empty"
        );
    }
}
