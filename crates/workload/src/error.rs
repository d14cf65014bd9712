//! This crate's errors: a bad job file, trace or generator request is an
//! [`InputError`](qoslab_engine::InputError), displayed as `FILE:LINE: message`.

use std::path::Path;

pub type WorkloadError = qoslab_engine::InputError;

/// The error for a bad value of an option: `option 'bs': expected ..., got 'x'`.
pub(crate) fn bad_option(path: &Path, line: u64, name: &str, problem: &str) -> WorkloadError {
    WorkloadError::at(path, line, format!("option '{name}': {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_option_names_the_file_line_and_option() {
        let e = bad_option(
            Path::new("jobs/a.fio"),
            7,
            "bs",
            "expected a size like 4k, got 'x'",
        );
        assert_eq!(
            e.to_string(),
            "jobs/a.fio:7: option 'bs': expected a size like 4k, got 'x'"
        );
    }
}
