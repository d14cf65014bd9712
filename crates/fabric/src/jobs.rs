//! fio jobs that ask for an ordered-write stack (`ordering=none|flush|horae|rio`, qoslab's own
//! option) run on the timed machine. Each job runs alone (as if `stonewall` separated the
//! jobs): one machine runs one stack, so jobs with different orderings cannot share it.

use serde::Serialize;

use qoslab_engine::{InputError, Ns};
use qoslab_workload::fio::{Job, JobFile, RwPattern};

use crate::recovery_time::RecoveryConfig;
use crate::stack::{self, StackOps};
use crate::timed::{self, Cut, Measured};
use crate::workload::Workload;

/// The stack an `ordering` value selects.
pub fn stack_of(ordering: &str) -> Option<&'static StackOps> {
    match ordering {
        "none" => Some(&stack::ORDERLESS),
        "flush" => Some(&stack::LINUX),
        "horae" => Some(&stack::HORAE),
        "rio" => Some(&stack::RIO),
        _ => None,
    }
}

/// One job as the timed machine runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderedJob {
    pub name: String,
    pub ordering: &'static str,
    pub stack: &'static StackOps,
    /// `numjobs`: threads, one ordered stream each.
    pub threads: usize,
    /// `number_ios` (or `io_size / bs`): writes per thread.
    pub writes: usize,
    pub blocks: u32,
    /// `rw=write`: each thread's writes follow each other (merging may join them);
    /// `randwrite`: each at a random place.
    pub sequential: bool,
    /// `fsync=N`: every Nth write of a thread carries a FLUSH.
    pub persist_every: usize,
    /// `iodepth`: requests a thread keeps outstanding.
    pub window: u32,
}

impl OrderedJob {
    /// Reads a job; bad or missing values are errors naming the job file, the job's line and
    /// the option.
    pub fn from_job(job: &Job, block_bytes: u64) -> Result<Self, InputError> {
        let at = |m: String| {
            InputError::at(
                &job.location.path,
                job.location.line,
                format!("job '{}': {m}", job.name),
            )
        };
        let ordering = job.ordering.ok_or_else(|| {
            at("ordering: expected none, flush, horae or rio (qoslab rio run runs ordered writes), got no ordering".into())
        })?;
        let stack = stack_of(ordering).expect("the option table holds only known orderings");
        let sequential = match job.rw {
            RwPattern::Write => true,
            RwPattern::RandWrite => false,
            other => {
                return Err(at(format!(
                    "rw: expected write or randwrite (ordered writes), got {other:?}"
                )));
            }
        };
        let bs = job.bs[1];
        if bs == 0 || !bs.is_multiple_of(block_bytes) {
            return Err(at(format!(
                "bs: expected a multiple of the {block_bytes}-byte block, got {bs}"
            )));
        }
        let writes = match (job.number_ios, job.io_size) {
            (Some(n), _) => n,
            (None, Some(bytes)) => bytes / bs,
            (None, None) => {
                return Err(at(
                    "number_ios: expected the writes per thread (or io_size), got neither".into(),
                ));
            }
        };
        if writes == 0 {
            return Err(at("number_ios: expected at least 1 write per thread".into()));
        }
        Ok(OrderedJob {
            name: job.name.clone(),
            ordering,
            stack,
            threads: job.numjobs as usize,
            writes: writes as usize,
            blocks: (bs / block_bytes) as u32,
            sequential,
            persist_every: job.fsync_every as usize,
            window: job.iodepth,
        })
    }

    /// The job's ordered write streams.
    pub fn workload(&self, seed: u64) -> Workload {
        let batch = if self.sequential { self.writes } else { 1 };
        timed::ordered_writes(
            self.threads,
            self.writes,
            self.blocks,
            batch,
            self.persist_every,
            seed,
        )
    }
}

/// What one job did: its run, or with a power cut what recovery kept.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobResult {
    pub job: String,
    pub ordering: String,
    #[serde(flatten)]
    pub run: Outcome,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Measured(Measured),
    Cut(Cut),
}

/// Runs every job of `file` alone on the timed machine (`sets` as for `qoslab rio run`; the
/// job's `iodepth` sets the window), each cut at `power_fail_at_ns` if given.
pub fn run_jobs(
    file: &JobFile,
    sets: &[(String, String)],
    seed: u64,
    power_fail_at_ns: Option<Ns>,
) -> Result<Vec<JobResult>, String> {
    let (cfg, _, _) = timed::configs(sets)?;
    let rc = RecoveryConfig::with_overrides(sets)?;
    let jobs: Vec<OrderedJob> = file
        .jobs
        .iter()
        .map(|j| OrderedJob::from_job(j, cfg.block_bytes))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let mut job_sets = sets.to_vec();
        job_sets.push(("timed.window".into(), job.window.to_string()));
        let (cfg, t, c) = timed::configs(&job_sets)?;
        let w = job.workload(seed);
        let run = match power_fail_at_ns {
            None => Outcome::Measured(timed::measure(&w, job.stack, &cfg, &t, c)?),
            Some(at) => Outcome::Cut(timed::power_cut(&w, job.stack, &cfg, &t, c, &rc, at)?),
        };
        out.push(JobResult {
            job: job.name.clone(),
            ordering: job.ordering.to_string(),
            run,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_workload::fio::parse_job_str;

    fn parse(text: &str) -> Result<JobFile, InputError> {
        parse_job_str(text, "ordered.fio".as_ref(), |_| None)
    }

    const JOBS: &str = "[global]\nbs=4k\nnumber_ios=40\niodepth=8\n\
        [log]\nrw=write\nordering=rio\nnumjobs=2\n\
        [sync]\nrw=randwrite\nordering=flush\nfsync=4\n";

    #[test]
    fn each_job_runs_its_own_stack_as_the_same_run_by_hand() {
        let file = parse(JOBS).unwrap();
        let got = run_jobs(&file, &[], 3, None).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].job.as_str(), got[0].ordering.as_str()),
            ("log", "rio")
        );
        // The same workload and window given directly to the timed machine.
        let sets = [("timed.window".to_string(), "8".to_string())];
        let (cfg, t, c) = timed::configs(&sets).unwrap();
        let by_hand = |stack: &'static StackOps, w: &Workload| {
            Outcome::Measured(timed::measure(w, stack, &cfg, &t, c).unwrap())
        };
        let log = timed::ordered_writes(2, 40, 1, 40, 0, 3);
        assert_eq!(got[0].run, by_hand(&stack::RIO, &log));
        let sync = timed::ordered_writes(1, 40, 1, 1, 4, 3);
        assert_eq!(got[1].run, by_hand(&stack::LINUX, &sync));
        let Outcome::Measured(m) = &got[0].run else {
            unreachable!()
        };
        // Sequential writes merge: 80 requests in fewer commands.
        assert_eq!(m.requests, 80);
        assert!(m.commands < 80, "{m:?}");
    }

    #[test]
    fn an_unknown_ordering_names_the_file_line_and_option() {
        let err = parse("[w]\nrw=write\nbs=4k\nordering=raid\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("ordered.fio:4:"), "{text}");
        assert!(text.contains("ordering") && text.contains("raid"), "{text}");
    }

    #[test]
    fn a_job_the_machine_cannot_run_is_refused_with_its_option() {
        for (body, option) in [
            ("rw=write\nbs=4k\nnumber_ios=4\n", "ordering"),
            ("rw=randread\nbs=4k\nnumber_ios=4\nordering=rio\n", "rw"),
            ("rw=write\nbs=6k\nnumber_ios=4\nordering=rio\n", "bs"),
            ("rw=write\nbs=4k\nordering=rio\n", "number_ios"),
        ] {
            let file = parse(&format!("[w]\n{body}")).unwrap();
            let err = run_jobs(&file, &[], 1, None).unwrap_err();
            assert!(
                err.starts_with("ordered.fio:1: job 'w': ") && err.contains(&format!("{option}:")),
                "{err}"
            );
        }
    }
}
