//! fio job files: `[global]` and job sections, `include`, `${ENV}`, comments, and the
//! options of [`options::OPTIONS`].
//!
//! ```
//! use qoslab_workload::fio::{parse_job_str, RwPattern};
//! let text = "[global]\nbs=4k\nsize=${SIZE}\n[reader]\nrw=randread\niodepth=32\n";
//! let env = |name: &str| (name == "SIZE").then(|| "1g".to_string());
//! let file = parse_job_str(text, "example.fio".as_ref(), env).unwrap();
//! assert_eq!(file.jobs[0].rw, RwPattern::RandRead);
//! assert_eq!(file.jobs[0].iodepth, 32);
//! ```

mod job;
pub mod options;
pub mod values;

use std::path::{Path, PathBuf};

pub use job::{
    DEFAULT_PERCENTILES, Distribution, Job, JobFile, Location, PerOp, RateProcess, RwPattern,
    ThinkBlocksType, Zone, ZoneExtent,
};
pub use values::{KbBase, SizeSpec, TimeUnit};

use crate::WorkloadError;

/// How deep `include` may nest before qoslab suspects a cycle it could not see.
const MAX_INCLUDE_DEPTH: usize = 16;

/// One meaningful line of a job file after includes, comments and blanks are handled.
struct Line {
    path: PathBuf,
    number: u64,
    text: String,
}

/// Reads and parses the job file at `path`; `env` looks up `${NAME}` variables
/// (pass `|n| std::env::var(n).ok()` for the process environment).
pub fn parse_job_file(
    path: impl AsRef<Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<JobFile, WorkloadError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .map_err(|e| WorkloadError::in_file(path, format!("cannot read job file: {e}")))?;
    parse_job_str(&text, path, env)
}

/// Parses job-file text; `path` names it in messages and anchors relative `include`s.
pub fn parse_job_str(
    text: &str,
    path: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<JobFile, WorkloadError> {
    let mut lines = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    flatten(text, path, true, &mut stack, &mut lines)?;

    let mut global_options: Vec<(String, String, Location)> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    // The section being filled: None before the first header, Some(None) for [global].
    let mut section: Option<Option<Job>> = None;
    let finish = |job: Job, jobs: &mut Vec<Job>| -> Result<(), WorkloadError> {
        let mut job = job;
        validate(&job)?;
        if let Some(prev) = jobs.last() {
            let new_report = job.stonewall || job.new_group;
            job.group_id = prev.group_id + u32::from(new_report);
            job.run_group = prev.run_group + u32::from(job.stonewall);
        }
        jobs.push(job);
        Ok(())
    };

    for line in &lines {
        let t = line.text.as_str();
        if let Some(name) = t.strip_prefix('[') {
            let name = name.strip_suffix(']').ok_or_else(|| {
                WorkloadError::at(
                    &line.path,
                    line.number,
                    format!("section header '{t}' lacks its closing ']'"),
                )
            })?;
            let name = name.trim();
            if name.is_empty() {
                return Err(WorkloadError::at(
                    &line.path,
                    line.number,
                    "empty section name '[]'",
                ));
            }
            if let Some(Some(job)) = section.take() {
                finish(job, &mut jobs)?;
            }
            if name == "global" {
                section = Some(None);
            } else {
                let location = Location {
                    path: line.path.clone(),
                    line: line.number,
                };
                let mut job = Job::with_defaults(name, jobs.len(), location);
                for (key, value, loc) in &global_options {
                    apply_option(&mut job, key, value, loc)?;
                }
                job.options.clear();
                section = Some(Some(job));
            }
            continue;
        }
        let (key, raw_value) = match t.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t.trim(), ""),
        };
        let loc = Location {
            path: line.path.clone(),
            line: line.number,
        };
        let value = expand_env(raw_value, &env)
            .map_err(|m| WorkloadError::at(&line.path, line.number, m))?;
        match &mut section {
            None => {
                return Err(WorkloadError::at(
                    &line.path,
                    line.number,
                    format!("option '{key}' outside of a [section]"),
                ));
            }
            Some(None) => {
                // Check global options where they are written, even if no job follows.
                let mut scratch = Job::with_defaults("global", 0, loc.clone());
                for (k, v, l) in &global_options {
                    apply_option(&mut scratch, k, v, l)?;
                }
                apply_option(&mut scratch, key, &value, &loc)?;
                global_options.push((key.to_string(), value, loc));
            }
            Some(Some(job)) => apply_option(job, key, &value, &loc)?,
        }
    }
    if let Some(Some(job)) = section.take() {
        finish(job, &mut jobs)?;
    }
    if jobs.is_empty() {
        return Err(WorkloadError::in_file(
            path,
            "no job sections (only [global] or nothing)",
        ));
    }
    Ok(JobFile {
        path: path.to_path_buf(),
        jobs,
        global_options: global_options.into_iter().map(|(k, v, _)| (k, v)).collect(),
    })
}

fn apply_option(
    job: &mut Job,
    key: &str,
    value: &str,
    loc: &Location,
) -> Result<(), WorkloadError> {
    let spec = options::find(key).ok_or_else(|| {
        WorkloadError::at(
            &loc.path,
            loc.line,
            format!("unknown option '{key}' (see docs/workload.md for the options qoslab models)"),
        )
    })?;
    spec.apply(job, value)
        .map_err(|m| WorkloadError::option(&loc.path, loc.line, key, &m))?;
    if spec.is_ignored() {
        job.ignored.push((key.to_string(), loc.clone()));
    }
    job.options.push((key.to_string(), value.to_string()));
    Ok(())
}

/// Checks that need the whole section (one option against another).
fn validate(job: &Job) -> Result<(), WorkloadError> {
    let at = |m: String| {
        WorkloadError::at(
            &job.location.path,
            job.location.line,
            format!("job '{}': {m}", job.name),
        )
    };
    if job.time_based && job.runtime_ns.is_none() {
        return Err(at("time_based needs a runtime".into()));
    }
    if job.prioclass == Some(qoslab_engine::IoPrioClass::None) && job.prio.is_some() {
        return Err(at("prio needs a prioclass other than 0".into()));
    }
    Ok(())
}

/// Expands `${NAME}`. Unlike fio, which substitutes an empty string, an unset variable is an
/// error: an empty `size=` would otherwise surface as a confusing message elsewhere.
fn expand_env(value: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(body) = after.strip_prefix('{') else {
            return Err(format!(
                "'{value}': only ${{NAME}} environment variables are supported, not fio's host keywords or expressions"
            ));
        };
        let end = body
            .find('}')
            .ok_or_else(|| format!("'{value}': '${{' without a closing '}}'"))?;
        let name = &body[..end];
        let v = env(name).ok_or_else(|| format!("environment variable '{name}' is not set"))?;
        out.push_str(&v);
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Removes a comment: `;` or `#` at the start of the line or after white space.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if (b == b';' || b == b'#') && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return &line[..i];
        }
    }
    line
}

/// Resolves `include` lines into one list of lines, each remembering its file and number.
fn flatten(
    text: &str,
    path: &Path,
    top_level: bool,
    stack: &mut Vec<PathBuf>,
    out: &mut Vec<Line>,
) -> Result<(), WorkloadError> {
    for (i, raw) in text.lines().enumerate() {
        let number = i as u64 + 1;
        let t = strip_comment(raw).trim();
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("include")
            && rest.starts_with(char::is_whitespace)
        {
            let name = rest.trim();
            let base = path.parent().unwrap_or(Path::new(""));
            let inc = base.join(name);
            if stack.iter().any(|p| same_file(p, &inc)) || stack.len() > MAX_INCLUDE_DEPTH {
                return Err(WorkloadError::at(
                    path,
                    number,
                    format!("include '{name}' includes itself"),
                ));
            }
            let inc_text = std::fs::read_to_string(&inc).map_err(|e| {
                WorkloadError::at(
                    path,
                    number,
                    format!("cannot read include '{}': {e}", inc.display()),
                )
            })?;
            stack.push(inc.clone());
            flatten(&inc_text, &inc, false, stack, out)?;
            stack.pop();
            continue;
        }
        if !top_level && t.starts_with('[') {
            return Err(WorkloadError::at(
                path,
                number,
                "an included file may not contain [sections]",
            ));
        }
        out.push(Line {
            path: path.to_path_buf(),
            number,
            text: t.to_string(),
        });
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
