//! The one error type for bad input anywhere in the simulator: a device file, a tunable, a job
//! file, a trace, an output that cannot be written. Each crate names it after what it reads
//! (`ConfigError`, `WorkloadError`, `SimError` are this type), so errors cross crates with `?`
//! and print alike.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where the bad input is (file and 1-based line when known) and what was expected there.
///
/// Displays as one line, `FILE:LINE: message`, or `FILE: message` when no line applies
/// (e.g. an unreadable file), or just `message` when no file applies (e.g. a job built in
/// code). The CLI prints it after `qoslab: error: ` and exits with code 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub path: Option<PathBuf>,
    /// 1-based line number in `path`.
    pub line: Option<u64>,
    pub message: String,
}

impl InputError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            path: None,
            line: None,
            message: message.into(),
        }
    }

    /// At a known line of a file.
    pub fn at(path: &Path, line: u64, message: impl Into<String>) -> Self {
        Self::located(path, Some(line), message)
    }

    /// About a whole file (no line applies).
    pub fn in_file(path: &Path, message: impl Into<String>) -> Self {
        Self::located(path, None, message)
    }

    pub fn located(path: &Path, line: Option<u64>, message: impl Into<String>) -> Self {
        Self {
            path: Some(path.to_path_buf()),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, self.line) {
            (Some(p), Some(l)) => write!(f, "{}:{l}: {}", p.display(), self.message),
            (Some(p), None) => write!(f, "{}: {}", p.display(), self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for InputError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_file_line_and_message_on_one_line() {
        let at = InputError::at(Path::new("jobs/a.fio"), 7, "option 'bs': expected a size");
        assert_eq!(at.to_string(), "jobs/a.fio:7: option 'bs': expected a size");
        assert_eq!(
            InputError::in_file(Path::new("t.csv"), "is empty").to_string(),
            "t.csv: is empty"
        );
        assert_eq!(InputError::new("no jobs").to_string(), "no jobs");
    }
}
