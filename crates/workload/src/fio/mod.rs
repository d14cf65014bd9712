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

pub mod engines;
mod job;
pub mod options;
pub mod values;

use std::path::{Path, PathBuf};

pub use job::{
    DEFAULT_PERCENTILES, Distribution, EngineClass, ExitWhat, FileService, FioLogs, Job, JobFile,
    Location, ORDERINGS, PerOp, RateProcess, RwPattern, SteadyState, SubmitMode, ThinkBlocksType,
    Zone, ZoneExtent,
};
pub use values::{KbBase, SizeSpec, TimeUnit};

use crate::WorkloadError;

/// How deep `include` may nest before qoslab suspects a cycle it could not see.
const MAX_INCLUDE_DEPTH: usize = 16;

/// An option as written: name, value (after `${ENV}`), where.
type OptionLine = (String, String, Location);

/// A section being read: its job (`None` for `[global]`) and its option lines.
type Section = (Option<Job>, Vec<OptionLine>);

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
    parse_job_str(&read_job_file(path)?, path, env)
}

/// A job file's text, or the one-line error that names it.
fn read_job_file(path: &Path) -> Result<String, WorkloadError> {
    std::fs::read_to_string(path)
        .map_err(|e| WorkloadError::in_file(path, format!("cannot read job file: {e}")))
}

/// Parses job-file text; `path` names it in messages and anchors relative `include`s.
pub fn parse_job_str(
    text: &str,
    path: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<JobFile, WorkloadError> {
    parse_job_parts(&[(text, path)], path, env)
}

/// Parses fio's job options from its command line (job-file text named `name`) and then the
/// job file at `path`, as `fio --opt=value job.fio` reads them (init.c, `parse_cmd_line`
/// before `parse_jobs_ini`): options before the first `--name` are global ones that the
/// file's own `[global]` and sections override, and a job named on the command line comes
/// before the file's jobs.
pub fn parse_job_file_after(
    text: &str,
    name: &Path,
    path: impl AsRef<Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<JobFile, WorkloadError> {
    let path = path.as_ref();
    let file = read_job_file(path)?;
    parse_job_parts(&[(text, name), (&file, path)], path, env)
}

/// Parses job-file texts read one after the other, each `(text, path)` its own file for
/// messages and `include`s; `path` names the whole.
fn parse_job_parts(
    parts: &[(&str, &Path)],
    path: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<JobFile, WorkloadError> {
    let mut lines = Vec::new();
    for (text, part) in parts {
        let mut stack = vec![part.to_path_buf()];
        flatten(text, part, true, &mut stack, &mut lines)?;
    }

    let mut global_options: Vec<OptionLine> = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    // The section being read: its job (None for [global]) and its option lines, applied when
    // the section ends, so that options fio reads first (`kb_base`) may follow the others.
    let mut section: Option<Section> = None;
    let finish = |section: Section,
                  global_options: &mut Vec<OptionLine>,
                  jobs: &mut Vec<Job>|
     -> Result<(), WorkloadError> {
        let (job, lines) = section;
        let Some(mut job) = job else {
            // Check global options where they are written, even if no job follows.
            global_options.extend(lines);
            let first = global_options.first().map(|(_, _, l)| l.clone());
            if let Some(loc) = first {
                let mut scratch = Job::with_defaults("global", 0, loc);
                apply_section(&mut scratch, global_options)?;
            }
            return Ok(());
        };
        apply_section(&mut job, &lines)?;
        job.options = lines.into_iter().map(|(k, v, _)| (k, v)).collect();
        validate(&job)?;
        if let Some(waitee) = &job.wait_for
            && !jobs.iter().any(|j| &j.name == waitee)
        {
            return Err(WorkloadError::at(
                &job.location.path,
                job.location.line,
                format!(
                    "job '{}': wait_for={waitee} names no earlier job (fio waits only for a job defined before)",
                    job.name
                ),
            ));
        }
        jobs.push(job);
        Ok(())
    };

    // `${NAME}`s that no variable gives, each where it was written.
    let mut unset_env: Vec<(String, Location)> = Vec::new();
    // An error in a line that read an unset variable says so: fio reads it as nothing.
    let unset_note = |mut e: WorkloadError, unset_env: &[(String, Location)]| {
        if let Some((name, _)) = unset_env
            .iter()
            .find(|(_, l)| Some(&l.path) == e.path.as_ref() && Some(l.line) == e.line)
        {
            e.message +=
                &format!(" (environment variable '{name}' is not set: fio reads it as nothing)");
        }
        e
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
            if let Some(done) = section.take() {
                finish(done, &mut global_options, &mut jobs)
                    .map_err(|e| unset_note(e, &unset_env))?;
            }
            if name == "global" {
                section = Some((None, Vec::new()));
            } else {
                let location = Location {
                    path: line.path.clone(),
                    line: line.number,
                };
                let mut job = Job::with_defaults(name, jobs.len(), location);
                apply_section(&mut job, &global_options).map_err(|e| unset_note(e, &unset_env))?;
                // A `name` in [global] names no job: fio 3.33 reports the section's name
                // unless the section itself sets one (measured: `[global] name=g` + `[sec]`
                // is reported as "sec").
                job.name = name.to_string();
                job.globals_before = global_options.len();
                section = Some((Some(job), Vec::new()));
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
        let (value, unset) = expand_env(raw_value, &env)
            .map_err(|m| WorkloadError::at(&line.path, line.number, m))?;
        unset_env.extend(unset.into_iter().map(|name| (name, loc.clone())));
        let Some((_, lines)) = &mut section else {
            return Err(WorkloadError::at(
                &line.path,
                line.number,
                format!("option '{key}' outside of a [section]"),
            ));
        };
        lines.push((key.to_string(), value, loc));
    }
    if let Some(done) = section.take() {
        finish(done, &mut global_options, &mut jobs).map_err(|e| unset_note(e, &unset_env))?;
    }
    if jobs.is_empty() {
        return Err(WorkloadError::in_file(
            path,
            "no job sections (only [global] or nothing)",
        ));
    }
    number_groups(&mut jobs);
    Ok(JobFile {
        path: path.to_path_buf(),
        jobs,
        global_options: global_options.into_iter().map(|(k, v, _)| (k, v)).collect(),
        unset_env,
    })
}

/// Numbers the reporting and run groups: a new reporting group at every `stonewall` or
/// `new_group`, a new run group at every `stonewall` only (fio's semantics).
fn number_groups(jobs: &mut [Job]) {
    let (mut group_id, mut run_group) = (0, 0);
    for (i, job) in jobs.iter_mut().enumerate() {
        if i > 0 {
            group_id += u32::from(job.stonewall || job.new_group);
            run_group += u32::from(job.stonewall);
        }
        job.group_id = group_id;
        job.run_group = run_group;
    }
}

impl JobFile {
    /// Keeps only the job sections named in `sections` (fio's `--section`), numbered again
    /// among themselves as fio numbers them (position, reporting and run groups; a job's
    /// random streams follow its position). A name that is no section of the file is an
    /// error.
    pub fn only_sections(mut self, sections: &[String]) -> Result<JobFile, WorkloadError> {
        for name in sections {
            if !self.jobs.iter().any(|j| &j.section == name) {
                let known: Vec<&str> = self.jobs.iter().map(|j| j.section.as_str()).collect();
                return Err(WorkloadError::in_file(
                    &self.path,
                    format!(
                        "--section: no job section '{name}' (sections: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        self.jobs.retain(|j| sections.contains(&j.section));
        for (i, job) in self.jobs.iter_mut().enumerate() {
            job.index = i;
        }
        number_groups(&mut self.jobs);
        Ok(self)
    }
}

/// Applies a section's option lines to `job`: first those fio reads before any other
/// (`kb_base`, which changes how every size of the section is read), then the rest in order.
fn apply_section(job: &mut Job, lines: &[OptionLine]) -> Result<(), WorkloadError> {
    // The engine is checked before anything else: a job for an engine qoslab does not run
    // is refused for that, not for the engine's own options it does not know.
    if let Some((_, value, loc)) = lines.iter().rev().find(|(k, _, _)| k == "ioengine") {
        engines::class_of(value.trim()).map_err(|m| WorkloadError::at(&loc.path, loc.line, m))?;
    }
    let first = |key: &str| options::find(key).is_some_and(|spec| spec.read_first);
    for (key, value, loc) in lines.iter().filter(|(k, _, _)| first(k)) {
        apply_option(job, key, value, loc)?;
    }
    for (key, value, loc) in lines.iter().filter(|(k, _, _)| !first(k)) {
        apply_option(job, key, value, loc)?;
    }
    Ok(())
}

fn apply_option(
    job: &mut Job,
    key: &str,
    value: &str,
    loc: &Location,
) -> Result<(), WorkloadError> {
    let spec = options::find(key).ok_or_else(|| {
        let hint = options::closest(key)
            .map(|name| format!("did you mean '{name}'? "))
            .unwrap_or_default();
        WorkloadError::at(
            &loc.path,
            loc.line,
            format!(
                "unknown option '{key}' ({hint}see docs/workload.md for the options qoslab models)"
            ),
        )
    })?;
    spec.apply(job, value)
        .map_err(|m| crate::error::bad_option(&loc.path, loc.line, key, &m))?;
    if spec.is_ignored() {
        job.ignored.push((key.to_string(), loc.clone()));
    }
    match spec.name {
        "ioengine" => job.ioengine_location = Some(loc.clone()),
        "direct" | "buffered" | "atomic" => job.direct_location = Some(loc.clone()),
        "verify" => job.verify_location = (value.trim() != "0").then(|| loc.clone()),
        "do_verify" => job.do_verify = value.trim() != "0",
        _ => {}
    }
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
    // fio reads back every block a job wrote when `verify` names a method and `do_verify` is
    // on (backend.c's verify phase after the writes, or as it goes with `verify_backlog`):
    // I/O of its own, with its own depths, that qoslab does not issue. Ignoring `verify` is
    // right only where it adds none: a job that does not write, or `do_verify=0`.
    if let Some(loc) = &job.verify_location
        && job.do_verify
        && job.rw.issues(qoslab_engine::Op::Write)
    {
        return Err(WorkloadError::at(
            &loc.path,
            loc.line,
            format!(
                "job '{}': verify on a job that writes: fio then reads back every block it \
                 wrote (its verify phase), I/O that qoslab does not simulate; set do_verify=0 \
                 to run the writes alone",
                job.name
            ),
        ));
    }
    if job.steadystate.is_some() && job.ss_dur_ns > 0 && job.ss_dur_ns < 1_000_000_000 {
        return Err(at(
            "steadystate_duration is counted in whole seconds (fio samples once a second)".into(),
        ));
    }
    Ok(())
}

/// fio's keywords in file names (`filename`, `filename_format`): fio expands them per job and
/// file in `filename_format`, and 3.33 keeps them as written in `filename` (measured: three
/// clones with `filename=w.$jobnum.$jobname` wrote one file of that name); qoslab keeps them
/// as written.
const FILENAME_KEYWORDS: [&str; 4] = ["jobname", "jobnum", "filenum", "clientuid"];

/// Expands `${NAME}`, and returns the names that no variable gives. As in fio (options.c,
/// `fio_option_dup_subs`), an unset variable reads as nothing; the caller says so.
fn expand_env(
    value: &str,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(value.len());
    let mut unset = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(keyword) = FILENAME_KEYWORDS.iter().find(|k| after.starts_with(**k)) {
            // fio expands these in file names when it lays the files out; kept as written.
            out.push('$');
            out.push_str(keyword);
            rest = &after[keyword.len()..];
            continue;
        }
        let Some(body) = after.strip_prefix('{') else {
            return Err(format!(
                "'{value}': only ${{NAME}} environment variables are supported, not fio's host keywords or expressions"
            ));
        };
        let end = body
            .find('}')
            .ok_or_else(|| format!("'{value}': '${{' without a closing '}}'"))?;
        let name = &body[..end];
        match env(name) {
            Some(v) => out.push_str(&v),
            None => unset.push(name.to_string()),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok((out, unset))
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
