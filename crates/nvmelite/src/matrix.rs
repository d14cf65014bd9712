//! The run matrix: workloads × policies × bounds × faults × schedule seeds, run in parallel,
//! written as `runs.csv` (plus logs, tables and poison schedules) in a deterministic order.
//!
//! Runs are enumerated directly in `runs.csv` order (run_id byte order), so rows stream to
//! the file block by block and memory stays flat however many seeds there are: within a
//! (workload, policy, bound) group the run ids differ only in `<seed>_<FAULT>`, and decimal
//! seeds in byte order followed by `_` are a post-order walk of the decimal digit trie
//! ("10_" < "1_" because '0' < '_'). Each block runs on the rayon pool and is collected in
//! order, so the output does not depend on the number of threads.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::log::{LinePieces, push_hex};
use crate::metrics::{Metrics, RUNS_CSV_HEADER, fixed6_digits, push_csv_field};
use crate::params::{Bound, FaultMode, RunParams, SubmitWindow};
use crate::policy::PolicyOps;
use crate::run::{LogUse, RunOptions, RunOutput, Runner};
use crate::search;
use crate::workload::Workload;

/// Everything a matrix runs, already validated.
#[derive(Clone, Debug)]
pub struct MatrixSpec {
    pub workloads: Vec<Arc<Workload>>,
    pub policies: Vec<&'static PolicyOps>,
    pub bounds: Vec<Bound>,
    pub faults: Vec<FaultMode>,
    /// Inclusive schedule-seed range (first <= last).
    pub seeds: (u64, u64),
    pub submit_window: SubmitWindow,
    pub scheduler_version: String,
    pub git_commit: String,
}

/// Seeds of an inclusive range in the byte order of `<seed>_` (post-order of the digit trie).
#[derive(Clone, Copy, Debug)]
pub struct SeedOrder {
    lo: u64,
    hi: u64,
}

impl SeedOrder {
    pub fn new(lo: u64, hi: u64) -> Self {
        Self { lo, hi }
    }

    /// Whether some number written with `w`'s digits as a prefix lies in the range.
    fn subtree_meets(&self, w: u64) -> bool {
        if w == 0 {
            return self.lo == 0; // no number has a leading zero
        }
        let (lo, hi) = (u128::from(self.lo), u128::from(self.hi));
        let (mut start, mut width) = (u128::from(w), 1u128);
        loop {
            if start > hi {
                return false;
            }
            if start + width > lo {
                return true;
            }
            start *= 10;
            width *= 10;
        }
    }

    fn first_in(&self, mut w: u64) -> u64 {
        'down: loop {
            if w != 0 {
                for d in 0..10 {
                    if let Some(child) = w.checked_mul(10).and_then(|x| x.checked_add(d))
                        && self.subtree_meets(child)
                    {
                        w = child;
                        continue 'down;
                    }
                }
            }
            return w;
        }
    }

    pub fn first(&self) -> Option<u64> {
        (0..10)
            .find(|&d| self.subtree_meets(d))
            .map(|d| self.first_in(d))
    }

    pub fn next(&self, mut v: u64) -> Option<u64> {
        loop {
            let (parent, last) = if v < 10 {
                (None, v)
            } else {
                (Some(v / 10), v % 10)
            };
            for d in last + 1..10 {
                let sibling = match parent {
                    None => Some(d),
                    Some(p) => p.checked_mul(10).and_then(|x| x.checked_add(d)),
                };
                if let Some(s) = sibling
                    && self.subtree_meets(s)
                {
                    return Some(self.first_in(s));
                }
            }
            let p = parent?;
            if (self.lo..=self.hi).contains(&p) {
                return Some(p);
            }
            v = p;
        }
    }

    pub fn len(&self) -> u128 {
        u128::from(self.hi - self.lo) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// One (workload, policy, bound) group: its runs share the run-id prefix `seed_POLICY_k_`.
#[derive(Clone, Debug)]
struct Group {
    workload: usize,
    policy: &'static PolicyOps,
    bound: Bound,
    prefix: String,
}

/// One run of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSpec {
    group: u32,
    fault_index: u8,
    pub schedule_seed: u64,
}

/// A planned matrix: the groups in output order, ready to enumerate and run.
#[derive(Debug)]
pub struct Matrix {
    pub spec: MatrixSpec,
    /// Per workload: its pre-formatted log lines.
    pieces: Vec<LinePieces>,
    groups: Vec<Group>,
    /// Faults in output order (by name).
    faults: Vec<FaultMode>,
    seeds: SeedOrder,
    /// Some run ids are prefixes of other groups' prefixes (odd seed_ids): rows are sorted
    /// in memory instead of streamed.
    needs_sort: bool,
}

/// Position of an enumeration of the matrix's runs in output order.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunCursor {
    group: usize,
    seed: Option<u64>,
    fault_index: usize,
    done: bool,
}

fn dedup<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

impl Matrix {
    pub fn new(spec: MatrixSpec) -> Self {
        let policies = dedup(&spec.policies);
        let bounds = dedup(&spec.bounds);
        let mut faults = dedup(&spec.faults);
        faults.sort_by_key(|f| f.name());
        // A later workload with the same seed_id overwrites the earlier one's runs, as the
        // reference's per-run files do.
        let mut by_prefix: HashMap<String, Group> = HashMap::new();
        for (workload, w) in spec.workloads.iter().enumerate() {
            for &policy in &policies {
                for &bound in &bounds {
                    let prefix = format!("{}_{}_{}_", w.seed_id, policy.name, bound);
                    by_prefix.insert(
                        prefix.clone(),
                        Group {
                            workload,
                            policy,
                            bound,
                            prefix,
                        },
                    );
                }
            }
        }
        let mut groups: Vec<Group> = by_prefix.into_values().collect();
        groups.sort_by(|a, b| a.prefix.as_bytes().cmp(b.prefix.as_bytes()));
        let needs_sort = groups
            .windows(2)
            .any(|g| g[1].prefix.starts_with(&g[0].prefix));
        let seeds = SeedOrder::new(spec.seeds.0, spec.seeds.1);
        Matrix {
            pieces: spec.workloads.iter().map(|w| LinePieces::new(w)).collect(),
            spec,
            groups,
            faults,
            seeds,
            needs_sort,
        }
    }

    /// Number of runs (and rows of runs.csv).
    pub fn len(&self) -> u128 {
        self.groups.len() as u128 * self.faults.len() as u128 * self.seeds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next run in output order.
    pub fn next_run(&self, cur: &mut RunCursor) -> Option<RunSpec> {
        if cur.done || self.groups.is_empty() || self.faults.is_empty() {
            return None;
        }
        let seed = match cur.seed {
            None => {
                let s = self.seeds.first()?;
                cur.seed = Some(s);
                cur.fault_index = 0;
                s
            }
            Some(s) if cur.fault_index < self.faults.len() => s,
            Some(s) => {
                cur.fault_index = 0;
                match self.seeds.next(s) {
                    Some(n) => {
                        cur.seed = Some(n);
                        n
                    }
                    None => {
                        cur.group += 1;
                        if cur.group >= self.groups.len() {
                            cur.done = true;
                            return None;
                        }
                        let s = self.seeds.first()?;
                        cur.seed = Some(s);
                        s
                    }
                }
            }
        };
        let spec = RunSpec {
            group: cur.group as u32,
            fault_index: cur.fault_index as u8,
            schedule_seed: seed,
        };
        cur.fault_index += 1;
        Some(spec)
    }

    /// The next `max` runs in output order.
    pub fn next_runs(&self, cur: &mut RunCursor, max: usize) -> Vec<RunSpec> {
        let mut out = Vec::with_capacity(max.min(1 << 16));
        while out.len() < max {
            match self.next_run(cur) {
                Some(r) => out.push(r),
                None => break,
            }
        }
        out
    }

    pub fn workload(&self, run: &RunSpec) -> &Arc<Workload> {
        &self.spec.workloads[self.groups[run.group as usize].workload]
    }

    pub fn params(&self, run: &RunSpec) -> RunParams {
        let g = &self.groups[run.group as usize];
        RunParams {
            schedule_seed: run.schedule_seed,
            policy: g.policy,
            bound: g.bound,
            fault: self.faults[run.fault_index as usize],
            submit_window: self.spec.submit_window,
            scheduler_version: self.spec.scheduler_version.clone(),
            git_commit: self.spec.git_commit.clone(),
        }
    }

    pub fn run_id(&self, run: &RunSpec) -> String {
        let mut id = String::with_capacity(self.groups[run.group as usize].prefix.len() + 28);
        self.push_run_id(&mut id, run);
        id
    }

    fn push_run_id(&self, out: &mut String, run: &RunSpec) {
        out.push_str(&self.groups[run.group as usize].prefix);
        out.push_str(itoa::Buffer::new().format(run.schedule_seed));
        out.push('_');
        out.push_str(self.faults[run.fault_index as usize].name());
    }

    /// Sets the per-run fields of `params` (one of this matrix's params) for `run`, so the
    /// hot loop copies no strings.
    fn set_params(&self, params: &mut RunParams, run: &RunSpec) {
        let g = &self.groups[run.group as usize];
        params.schedule_seed = run.schedule_seed;
        params.policy = g.policy;
        params.bound = g.bound;
        params.fault = self.faults[run.fault_index as usize];
    }

    /// Runs `runs` in parallel (on the current rayon pool) with the outputs `opts` asks
    /// for; results come back in the order of `runs`. This is the API a differential test
    /// uses to get, for each run, its id, log bytes, schedule file and metrics row.
    pub fn execute(&self, runs: &[RunSpec], opts: RunOptions) -> Vec<RunOutput> {
        runs.par_iter()
            .map_init(Runner::new, |runner, run| {
                runner.run(self.workload(run), &self.params(run), opts)
            })
            .collect()
    }

    fn cell(&self, run: &RunSpec) -> usize {
        run.group as usize * self.faults.len() + run.fault_index as usize
    }
}

/// Options of [`write_matrix`].
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// Write `logs/<run_id>.log` for every run.
    pub logs: bool,
    /// Fill runs.csv's `log_sha256` column. Without it and without `logs`, runs are
    /// metrics-only ([`LogUse::Skip`]): no log is formatted or hashed, and the column is
    /// left empty.
    pub log_sha256: bool,
    /// Number of poison schedules (top p95 at fault NONE, k = inf) to keep.
    pub top_k: usize,
    /// Runs per parallel block (also the progress granularity).
    pub block_runs: usize,
    /// Worker threads (None: all cores). The calling thread only coordinates, so the
    /// progress callback always runs on it.
    pub threads: Option<usize>,
    /// States the worst-case search may visit per (workload, fault, k) for the table of
    /// sampled against exact worst cases (0: no table). A count, not a time, so the table is
    /// the same on any machine.
    pub exact_nodes: u64,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            logs: true,
            log_sha256: true,
            top_k: 10,
            block_runs: 4096,
            threads: None,
            exact_nodes: 5_000,
        }
    }
}

#[derive(Debug)]
pub enum MatrixError {
    Io { path: PathBuf, error: io::Error },
    Cancelled,
}

impl std::fmt::Display for MatrixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatrixError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            MatrixError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for MatrixError {}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> MatrixError + '_ {
    move |error| MatrixError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// A run id as a file name: `/`, `%` and NUL (possible in a seed_id) are percent-encoded.
pub fn file_stem(run_id: &str) -> String {
    if !run_id.contains(['/', '%', '\0']) {
        return run_id.to_string();
    }
    run_id
        .replace('%', "%25")
        .replace('/', "%2F")
        .replace('\0', "%00")
}

/// Sums over the runs of one (workload, policy, bound, fault) cell. Real metrics are summed
/// as the integers of their `%.6f` text (micro-units), so means are those of runs.csv.
#[derive(Clone, Copy, Debug, Default)]
pub struct CellStats {
    pub runs: u64,
    pub p95_sum: u64,
    pub p95_sq_sum: u128,
    pub p95_max: u64,
    pub rd_micro_sum: u64,
    pub rd_micro_sq_sum: u128,
    pub fe_micro_sum: u64,
    pub completion_micro_sum: u64,
    pub peak_sum: u64,
    pub area_sum: u64,
}

fn mean(sum: f64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// Population standard deviation from exact integer sums.
fn std_dev(sum: u64, sq_sum: u128, n: u64, scale: f64) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let n128 = u128::from(n);
    let num = n128 * sq_sum - u128::from(sum) * u128::from(sum);
    ((num as f64).sqrt() / n as f64) / scale
}

impl CellStats {
    fn add(&mut self, m: &Metrics) {
        let [rd, fe, completion] = [m.rd, m.fe, m.completion_rate].map(fixed6_digits);
        self.runs += 1;
        self.p95_sum += m.p95_steps;
        self.p95_sq_sum += u128::from(m.p95_steps) * u128::from(m.p95_steps);
        self.p95_max = self.p95_max.max(m.p95_steps);
        self.rd_micro_sum += rd;
        self.rd_micro_sq_sum += u128::from(rd) * u128::from(rd);
        self.fe_micro_sum += fe;
        self.completion_micro_sum += completion;
        self.peak_sum += m.pending_peak;
        self.area_sum += m.pending_area;
    }

    fn merge(&mut self, other: &CellStats) {
        self.runs += other.runs;
        self.p95_sum += other.p95_sum;
        self.p95_sq_sum += other.p95_sq_sum;
        self.p95_max = self.p95_max.max(other.p95_max);
        self.rd_micro_sum += other.rd_micro_sum;
        self.rd_micro_sq_sum += other.rd_micro_sq_sum;
        self.fe_micro_sum += other.fe_micro_sum;
        self.completion_micro_sum += other.completion_micro_sum;
        self.peak_sum += other.peak_sum;
        self.area_sum += other.area_sum;
    }

    pub fn p95_mean(&self) -> f64 {
        mean(self.p95_sum as f64, self.runs)
    }
    pub fn p95_std(&self) -> f64 {
        std_dev(self.p95_sum, self.p95_sq_sum, self.runs, 1.0)
    }
    pub fn rd_mean(&self) -> f64 {
        mean(self.rd_micro_sum as f64, self.runs) / 1e6
    }
    pub fn rd_std(&self) -> f64 {
        std_dev(self.rd_micro_sum, self.rd_micro_sq_sum, self.runs, 1e6)
    }
    pub fn fe_mean(&self) -> f64 {
        mean(self.fe_micro_sum as f64, self.runs) / 1e6
    }
    pub fn completion_rate_mean(&self) -> f64 {
        mean(self.completion_micro_sum as f64, self.runs) / 1e6
    }

    /// The study's cliff rule between this cell (smaller k) and `next`: mean p95 rises by
    /// strictly more than 20 %, tested exactly on integer sums (spec §10.4).
    pub fn cliff_to(&self, next: &CellStats) -> bool {
        if self.runs == 0 || next.runs == 0 {
            return false;
        }
        5 * u128::from(next.p95_sum) * u128::from(self.runs)
            > 6 * u128::from(self.p95_sum) * u128::from(next.runs)
    }
}

/// A poison-schedule candidate: fault NONE, k = inf, ranked by (-p95, run_id).
#[derive(Clone, Debug)]
pub struct Poison {
    pub run_id: String,
    pub spec: RunSpec,
    pub p95: u64,
    pub rd: f64,
}

/// What [`write_matrix`] found, for the report.
#[derive(Debug)]
pub struct MatrixSummary {
    pub runs: u64,
    pub cells: Vec<CellStats>,
    pub poison: Vec<Poison>,
    pub cliffs: usize,
}

/// What one parallel chunk of a block produced: its rows in order (CRLF-terminated), its
/// cells' sums and its best poison candidates. Sums and the top-K are order-independent, so
/// only the concatenation of the text needs the chunks' order.
#[derive(Default)]
struct ChunkOut {
    text: String,
    cells: Vec<(usize, CellStats)>,
    poison: Vec<Poison>,
    /// (run_id, row) when rows must be sorted in memory.
    rows: Vec<(String, String)>,
    /// The chunk's log files: (file name, end of its text in `log_text`). The sink writes
    /// them from one thread: two threads creating files in one directory contend for its
    /// lock, and the kernel's spinning on it cost up to ten times the files' own system time.
    logs: Vec<(String, usize)>,
    log_text: Vec<u8>,
}

/// Where a matrix's results accumulate in output order: runs.csv (buffered, written in large
/// pieces), the cells' sums, the poison candidates and (odd seed_ids) the rows to sort.
struct Sink<'a> {
    csv: BufWriter<fs::File>,
    logs_dir: &'a Path,
    csv_path: &'a Path,
    csv_text: String,
    cells: Vec<CellStats>,
    poison: Vec<Poison>,
    sorted_rows: Vec<(String, String)>,
    top_k: usize,
}

impl Sink<'_> {
    /// Appends one block's chunks, in order.
    fn append(&mut self, chunks: Vec<Result<ChunkOut, MatrixError>>) -> Result<(), MatrixError> {
        for chunk in chunks {
            let chunk = chunk?;
            self.csv_text.push_str(&chunk.text);
            for (cell, stats) in &chunk.cells {
                self.cells[*cell].merge(stats);
            }
            for p in chunk.poison {
                let m = Metrics {
                    p95_steps: p.p95,
                    rd: p.rd,
                    ..Metrics::default()
                };
                offer_poison(&mut self.poison, self.top_k, &p.run_id, &p.spec, &m);
            }
            self.sorted_rows.extend(chunk.rows);
            let mut start = 0;
            for (name, end) in &chunk.logs {
                let path = self.logs_dir.join(name);
                fs::write(&path, &chunk.log_text[start..*end]).map_err(io_err(&path))?;
                start = *end;
            }
        }
        if self.csv_text.len() >= 1 << 19 {
            self.write_text()?;
        }
        Ok(())
    }

    fn write_text(&mut self) -> Result<(), MatrixError> {
        self.csv
            .write_all(self.csv_text.as_bytes())
            .map_err(io_err(self.csv_path))?;
        self.csv_text.clear();
        Ok(())
    }

    fn flush(&mut self) -> Result<(), MatrixError> {
        self.write_text()?;
        self.csv.flush().map_err(io_err(self.csv_path))
    }
}

/// Runs per parallel task: large enough to amortize scheduling, small enough to balance.
const CHUNK_RUNS: usize = 128;

/// Runs the whole matrix into `dir` (which must exist and be empty): runs.csv, logs/ (with
/// `opts.logs`), schedules/ (poison schedules) and the tables. `progress(done, total)` is
/// called after each block; returning false cancels the run.
pub fn write_matrix(
    matrix: &Matrix,
    dir: &Path,
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<MatrixSummary, MatrixError> {
    let total = u64::try_from(matrix.len()).unwrap_or(u64::MAX);
    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(n) = opts.threads {
        pool = pool.num_threads(n.max(1));
    }
    let pool = pool.build().map_err(|e| MatrixError::Io {
        path: dir.to_path_buf(),
        error: io::Error::other(e),
    })?;
    let logs_dir = dir.join("logs");
    if opts.logs {
        fs::create_dir_all(&logs_dir).map_err(io_err(&logs_dir))?;
    }
    let csv_path = dir.join("runs.csv");
    let csv_file = fs::File::create(&csv_path).map_err(io_err(&csv_path))?;
    let mut sink = Sink {
        csv: BufWriter::with_capacity(1 << 20, csv_file),
        logs_dir: &logs_dir,
        csv_path: &csv_path,
        csv_text: String::with_capacity(1 << 20),
        cells: vec![CellStats::default(); matrix.groups.len() * matrix.faults.len()],
        poison: Vec::new(),
        sorted_rows: Vec::new(),
        top_k: opts.top_k,
    };
    sink.csv_text.push_str(RUNS_CSV_HEADER);
    sink.csv_text.push_str("\r\n");
    let mut cursor = RunCursor::default();
    let mut done = 0u64;
    let log_use = if opts.logs {
        LogUse::Keep
    } else if opts.log_sha256 {
        LogUse::Hash
    } else {
        LogUse::Skip
    };
    let run_chunk = |runner: &mut Runner,
                     params: &mut RunParams,
                     chunk: &[RunSpec]|
     -> Result<ChunkOut, MatrixError> {
        let mut out = ChunkOut {
            text: String::with_capacity(chunk.len() * 200),
            ..ChunkOut::default()
        };
        let mut id = String::with_capacity(128);
        for run in chunk {
            matrix.set_params(params, run);
            id.clear();
            matrix.push_run_id(&mut id, run);
            let w = matrix.groups[run.group as usize].workload;
            let (metrics, digest, text) = runner.run_summary_with(
                &matrix.spec.workloads[w],
                Some(&matrix.pieces[w]),
                params,
                &id,
                log_use,
            );
            if opts.logs {
                out.log_text.extend_from_slice(text);
                out.logs
                    .push((format!("{}.log", file_stem(&id)), out.log_text.len()));
            }
            let row_start = out.text.len();
            push_csv_field(&mut out.text, &id);
            metrics.write_csv_fields(&mut out.text);
            out.text.push(',');
            if let Some(digest) = &digest {
                push_hex(&mut out.text, digest);
            }
            let cell = matrix.cell(run);
            match out.cells.last_mut() {
                Some((c, stats)) if *c == cell => stats.add(&metrics),
                _ => {
                    let mut stats = CellStats::default();
                    stats.add(&metrics);
                    out.cells.push((cell, stats));
                }
            }
            let fault = matrix.faults[run.fault_index as usize];
            let bound = matrix.groups[run.group as usize].bound;
            if opts.top_k > 0 && fault == FaultMode::None && bound == Bound::Inf {
                offer_poison(&mut out.poison, opts.top_k, &id, run, &metrics);
            }
            if matrix.needs_sort {
                out.rows
                    .push((id.clone(), out.text[row_start..].to_string()));
                out.text.truncate(row_start);
            } else {
                out.text.push_str("\r\n");
            }
        }
        Ok(out)
    };
    // Block n+1 runs while block n's rows are appended and written (a join on the pool),
    // so no core waits for the file; the rows still go out in block order.
    let mut ran: Option<(usize, Vec<Result<ChunkOut, MatrixError>>)> = None;
    loop {
        let block = matrix.next_runs(&mut cursor, opts.block_runs.max(1));
        let (chunks, merged) = pool.install(|| {
            rayon::join(
                || -> Vec<Result<ChunkOut, MatrixError>> {
                    let Some(first) = block.first() else {
                        return Vec::new();
                    };
                    block
                        .par_chunks(CHUNK_RUNS)
                        .map_init(
                            || (Runner::new(), matrix.params(first)),
                            |(runner, params), chunk| run_chunk(runner, params, chunk),
                        )
                        .collect()
                },
                || {
                    ran.take()
                        .map(|(n, chunks)| sink.append(chunks).map(|()| n))
                },
            )
        });
        if let Some(n) = merged.transpose()? {
            done += n as u64;
            if !progress(done, total) {
                return Err(MatrixError::Cancelled);
            }
        }
        if block.is_empty() {
            break;
        }
        ran = Some((block.len(), chunks));
    }
    if matrix.needs_sort {
        sink.sorted_rows
            .sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (_, row) in &sink.sorted_rows {
            sink.csv_text.push_str(row);
            sink.csv_text.push_str("\r\n");
        }
    }
    sink.flush()?;
    let Sink { cells, poison, .. } = sink;

    pool.install(|| write_poison(matrix, dir, &poison))?;
    let cliffs = write_tables(matrix, dir, &cells, &poison)?;
    if opts.exact_nodes > 0 {
        pool.install(|| write_exact(matrix, dir, &cells, opts.exact_nodes))?;
    }
    Ok(MatrixSummary {
        runs: done,
        cells,
        poison,
        cliffs,
    })
}

fn offer_poison(top: &mut Vec<Poison>, k: usize, run_id: &str, run: &RunSpec, m: &Metrics) {
    let better = |p: &Poison| {
        (std::cmp::Reverse(m.p95_steps), run_id) < (std::cmp::Reverse(p.p95), p.run_id.as_str())
    };
    if top.len() == k && !top.last().is_some_and(better) {
        return;
    }
    let at = top.iter().position(better).unwrap_or(top.len());
    top.insert(
        at,
        Poison {
            run_id: run_id.to_string(),
            spec: *run,
            p95: m.p95_steps,
            rd: m.rd,
        },
    );
    top.truncate(k);
}

/// Replay files of the poison runs: qoslab's schedule file and the reference JSON record.
fn write_poison(matrix: &Matrix, dir: &Path, poison: &[Poison]) -> Result<(), MatrixError> {
    let sched_dir = dir.join("schedules");
    fs::create_dir_all(&sched_dir).map_err(io_err(&sched_dir))?;
    let specs: Vec<RunSpec> = poison.iter().map(|p| p.spec).collect();
    let opts = RunOptions {
        log: false,
        schedule: true,
        reference_schedule: true,
    };
    for out in matrix.execute(&specs, opts) {
        let stem = file_stem(&out.run_id);
        for (ext, text) in [("sched", &out.schedule), ("json", &out.reference_schedule)] {
            let path = sched_dir.join(format!("{stem}.{ext}"));
            fs::write(&path, text.as_deref().unwrap_or_default()).map_err(io_err(&path))?;
        }
    }
    Ok(())
}

/// The study's tables as CSV (LF line endings, reals `%.6f`); returns the number of cliffs.
fn write_tables(
    matrix: &Matrix,
    dir: &Path,
    cells: &[CellStats],
    poison: &[Poison],
) -> Result<usize, MatrixError> {
    let spec = &matrix.spec;
    // Row order: workloads, policies and faults as configured; bounds by k with inf last.
    let mut seed_ids: Vec<&str> = Vec::new();
    for w in &spec.workloads {
        if !seed_ids.contains(&w.seed_id.as_str()) {
            seed_ids.push(&w.seed_id);
        }
    }
    let policies = dedup(&spec.policies);
    let mut bounds = dedup(&spec.bounds);
    bounds.sort_by_key(|b| b.order_key());
    let faults = dedup(&spec.faults);
    let group_of: HashMap<&str, usize> = matrix
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.prefix.as_str(), i))
        .collect();
    let fault_pos = |f: FaultMode| matrix.faults.iter().position(|&x| x == f).unwrap();
    let cell = |seed_id: &str, policy: &PolicyOps, bound: Bound, fault: FaultMode| -> &CellStats {
        let prefix = format!("{seed_id}_{}_{bound}_", policy.name);
        &cells[group_of[prefix.as_str()] * matrix.faults.len() + fault_pos(fault)]
    };
    let k_header: String = bounds.iter().map(|b| format!(",k={b}")).collect();

    let mut cells_csv = String::from(
        "seed_id,policy,bound_k,fault_mode,runs,p95_mean,p95_std,p95_max,RD_mean,RD_std,FE_mean,pending_peak_mean,pending_area_mean,completion_rate_mean\n",
    );
    let mut table2 = format!("seed_id,fault_mode,policy{k_header}\n");
    let mut figure1 = format!("seed_id,fault_mode,policy{k_header}\n");
    let mut table3 = String::from("seed_id,fault_mode");
    for p in &policies {
        let _ = write!(table3, ",{}", p.name);
    }
    table3.push('\n');
    let mut cliffs =
        String::from("seed_id,policy,fault_mode,k_from,k_to,p95_mean_from,p95_mean_to,rise_pct\n");
    let mut n_cliffs = 0;
    for &seed_id in &seed_ids {
        for &fault in &faults {
            for &policy in &policies {
                let _ = write!(table2, "{seed_id},{fault},{}", policy.name);
                let _ = write!(figure1, "{seed_id},{fault},{}", policy.name);
                for &bound in &bounds {
                    let c = cell(seed_id, policy, bound, fault);
                    let _ = write!(table2, ",{:.6}", c.p95_mean());
                    let _ = write!(figure1, ",{:.6}", c.rd_mean());
                    let _ = writeln!(
                        cells_csv,
                        "{seed_id},{},{bound},{fault},{},{:.6},{:.6},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6}",
                        policy.name,
                        c.runs,
                        c.p95_mean(),
                        c.p95_std(),
                        c.p95_max,
                        c.rd_mean(),
                        c.rd_std(),
                        c.fe_mean(),
                        mean(c.peak_sum as f64, c.runs),
                        mean(c.area_sum as f64, c.runs),
                        c.completion_rate_mean(),
                    );
                }
                table2.push('\n');
                figure1.push('\n');
                for pair in bounds.windows(2) {
                    let (a, b) = (
                        cell(seed_id, policy, pair[0], fault),
                        cell(seed_id, policy, pair[1], fault),
                    );
                    if a.cliff_to(b) {
                        n_cliffs += 1;
                        let rise = if a.p95_sum == 0 {
                            f64::INFINITY
                        } else {
                            (b.p95_mean() / a.p95_mean() - 1.0) * 100.0
                        };
                        let _ = writeln!(
                            cliffs,
                            "{seed_id},{},{fault},{},{},{:.6},{:.6},{rise:.6}",
                            policy.name,
                            pair[0],
                            pair[1],
                            a.p95_mean(),
                            b.p95_mean()
                        );
                    }
                }
            }
            if bounds.contains(&Bound::Inf) {
                let _ = write!(table3, "{seed_id},{fault}");
                for &policy in &policies {
                    let _ = write!(
                        table3,
                        ",{:.6}",
                        cell(seed_id, policy, Bound::Inf, fault).p95_mean()
                    );
                }
                table3.push('\n');
            }
        }
    }
    let mut poison_csv = String::from(
        "rank,run_id,seed_id,policy,bound_k,fault_mode,schedule_seed,p95_latency_step,RD,schedule_file,reference_schedule_file\n",
    );
    for (rank, p) in poison.iter().enumerate() {
        let params = matrix.params(&p.spec);
        let stem = file_stem(&p.run_id);
        let _ = writeln!(
            poison_csv,
            "{},{},{},{},{},{},{},{:.6},{:.6},schedules/{stem}.sched,schedules/{stem}.json",
            rank + 1,
            p.run_id,
            matrix.workload(&p.spec).seed_id,
            params.policy.name,
            params.bound,
            params.fault,
            params.schedule_seed,
            p.p95 as f64,
            p.rd,
        );
    }
    for (name, text) in [
        ("cells.csv", cells_csv),
        ("table2_mean_p95.csv", table2),
        ("table3_mean_p95_kinf.csv", table3),
        ("figure1_mean_rd.csv", figure1),
        ("risk_cliffs.csv", cliffs),
        ("poison_top.csv", poison_csv),
    ] {
        let path = dir.join(name);
        fs::write(&path, text).map_err(io_err(&path))?;
    }
    Ok(n_cliffs)
}

/// `exact_worst.csv`: per workload, fault, policy and k, the largest p95 the policy's sampled
/// runs reached beside the exact worst case over every schedule at that k (the search's
/// optimum, or its best and upper bound when the state budget ran out).
fn write_exact(
    matrix: &Matrix,
    dir: &Path,
    cells: &[CellStats],
    nodes: u64,
) -> Result<(), MatrixError> {
    let mut bounds = dedup(&matrix.spec.bounds);
    bounds.sort_by_key(|b| b.order_key());
    let mut workloads: Vec<&Arc<Workload>> = Vec::new();
    for w in &matrix.spec.workloads {
        if !workloads.iter().any(|x| x.seed_id == w.seed_id) {
            workloads.push(w);
        }
    }
    let faults = dedup(&matrix.spec.faults);
    let mut tasks: Vec<(&Arc<Workload>, FaultMode, Bound)> = Vec::new();
    for &w in &workloads {
        for &f in &faults {
            tasks.extend(bounds.iter().map(|&b| (w, f, b)));
        }
    }
    let limits = search::Limits {
        node_limit: Some(nodes),
        ..search::Limits::default()
    };
    let window = matrix.spec.submit_window;
    let found: Vec<Option<search::Outcome>> = tasks
        .par_iter()
        .map(|&(w, fault, bound)| {
            search::search(w, bound, fault, window, &search::P95, limits).ok()
        })
        .collect();
    let mut csv = String::from(
        "seed_id,fault_mode,policy,bound_k,sampled_max_p95,exact_p95,certificate,upper_bound,states\n",
    );
    for ((w, fault, bound), outcome) in tasks.iter().zip(&found) {
        for &policy in &dedup(&matrix.spec.policies) {
            let prefix = format!("{}_{}_{bound}_", w.seed_id, policy.name);
            let Some(g) = matrix.groups.iter().position(|g| g.prefix == prefix) else {
                continue;
            };
            let f = matrix.faults.iter().position(|x| x == fault).unwrap();
            let sampled = cells[g * matrix.faults.len() + f].p95_max;
            let _ = write!(
                csv,
                "{},{fault},{},{bound},{sampled},",
                w.seed_id, policy.name
            );
            match outcome {
                Some(o) => {
                    let best = o.best.as_ref().map_or(search::Ratio::ZERO, |b| b.0);
                    let certificate = if o.optimal() { "optimal" } else { "best found" };
                    let _ = writeln!(csv, "{best},{certificate},{},{}", o.upper_bound, o.nodes);
                }
                None => {
                    let _ = writeln!(csv, ",too many commands to search,,");
                }
            }
        }
    }
    let path = dir.join("exact_worst.csv");
    fs::write(&path, csv).map_err(io_err(&path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec_examples::data_dir;
    use std::io::Read;

    fn sorted_seeds(lo: u64, hi: u64) -> Vec<u64> {
        let mut v: Vec<u64> = (lo..=hi).collect();
        v.sort_by_key(|s| format!("{s}_"));
        v
    }

    fn walked(lo: u64, hi: u64) -> Vec<u64> {
        let order = SeedOrder::new(lo, hi);
        let mut out = Vec::new();
        let mut cur = order.first();
        while let Some(s) = cur {
            out.push(s);
            cur = order.next(s);
        }
        out
    }

    #[test]
    fn seeds_come_in_run_id_byte_order() {
        for (lo, hi) in [
            (0, 0),
            (0, 29),
            (0, 99),
            (5, 5),
            (7, 1234),
            (95, 105),
            (1, 10),
            (999, 1001),
        ] {
            assert_eq!(walked(lo, hi), sorted_seeds(lo, hi), "{lo}-{hi}");
        }
        let top = walked(u64::MAX - 12, u64::MAX);
        let mut expected: Vec<u64> = (u64::MAX - 12..=u64::MAX).collect();
        expected.sort_by_key(|s| format!("{s}_"));
        assert_eq!(top, expected);
    }

    proptest::proptest! {
        #[test]
        fn seed_order_matches_sorting_strings(lo in 0u64..3000, span in 0u64..400) {
            proptest::prop_assert_eq!(walked(lo, lo + span), sorted_seeds(lo, lo + span));
        }
    }

    fn expected_matrix() -> Matrix {
        let w = Workload::from_json(&fs::read(data_dir().join("seed_001.json")).unwrap()).unwrap();
        Matrix::new(MatrixSpec {
            workloads: vec![Arc::new(w)],
            policies: ["FIFO", "RANDOM", "ADVERSARIAL", "BATCHED"]
                .map(|p| crate::params::parse_policy(p).unwrap())
                .to_vec(),
            bounds: ["0", "1", "2", "3", "5", "10", "inf"]
                .map(|b| Bound::parse(b).unwrap())
                .to_vec(),
            faults: FaultMode::ALL.to_vec(),
            seeds: (0, 29),
            submit_window: SubmitWindow::Inf,
            scheduler_version: "v1.0".into(),
            git_commit: String::new(),
        })
    }

    fn expected_runs_csv() -> String {
        let gz = fs::File::open(data_dir().join("expected/runs.csv.gz")).unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    #[test]
    fn runs_csv_of_the_published_matrix_is_byte_identical() {
        let dir = std::env::temp_dir().join(format!("nvmelite-matrix-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let matrix = expected_matrix();
        assert_eq!(matrix.len(), 2520);
        let summary = write_matrix(
            &matrix,
            &dir,
            &WriteOptions {
                block_runs: 100,
                ..WriteOptions::default()
            },
            &mut |_, _| true,
        )
        .unwrap();
        assert_eq!(summary.runs, 2520);
        let got = fs::read_to_string(dir.join("runs.csv")).unwrap();
        assert_eq!(got, expected_runs_csv());
        for name in ["seed_001_FIFO_inf_0_NONE", "seed_001_RANDOM_3_4_TIMEOUT"] {
            assert_eq!(
                fs::read(dir.join(format!("logs/{name}.log"))).unwrap(),
                fs::read(data_dir().join(format!("expected/logs/{name}.log"))).unwrap()
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn metrics_only_runs_csv_is_the_published_one_without_hashes() {
        let dir = std::env::temp_dir().join(format!("nvmelite-metrics-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let opts = WriteOptions {
            logs: false,
            log_sha256: false,
            block_runs: 100,
            ..WriteOptions::default()
        };
        write_matrix(&expected_matrix(), &dir, &opts, &mut |_, _| true).unwrap();
        let got = fs::read_to_string(dir.join("runs.csv")).unwrap();
        let expected = expected_runs_csv();
        let mut rows = expected.split("\r\n");
        let mut want = format!("{}\r\n", rows.next().unwrap());
        for row in rows.filter(|r| !r.is_empty()) {
            let (fields, hash) = row.rsplit_once(',').unwrap();
            assert_eq!(hash.len(), 64);
            want.push_str(fields);
            want.push_str(",\r\n");
        }
        assert_eq!(got, want);
        assert!(!dir.join("logs").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn odd_seed_ids_still_give_rows_in_run_id_byte_order() {
        let w = |id: &str| {
            let text = format!(
                r#"{{"seed_id": {}, "commands": [{{"type": "FENCE"}}, {{"type": "READ", "lba": 0, "len": 1}}]}}"#,
                serde_json::to_string(id).unwrap()
            );
            Arc::new(Workload::from_json(text.as_bytes()).unwrap())
        };
        // "x_FIFO_0_" is a prefix of "x_FIFO_0_1_FIFO_0_": rows must interleave.
        let workloads = vec![w("x"), w("x_FIFO_0_1"), w("c,\"d\""), w("x")];
        let matrix = Matrix::new(MatrixSpec {
            workloads,
            policies: vec![crate::policy::lookup("FIFO").unwrap()],
            bounds: vec![Bound::K(0)],
            faults: vec![FaultMode::None, FaultMode::Reset],
            seeds: (0, 12),
            submit_window: SubmitWindow::Inf,
            scheduler_version: "v1.0".into(),
            git_commit: String::new(),
        });
        assert!(matrix.needs_sort);
        assert_eq!(matrix.len(), 3 * 2 * 13);
        let dir = std::env::temp_dir().join(format!("nvmelite-odd-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        write_matrix(&matrix, &dir, &WriteOptions::default(), &mut |_, _| true).unwrap();
        let text = fs::read_to_string(dir.join("runs.csv")).unwrap();
        let ids: Vec<String> = text
            .split("\r\n")
            .skip(1)
            .filter(|r| !r.is_empty())
            .map(|r| crate::metrics::split_first_csv_field(r).0.into_owned())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert_eq!(ids.len(), 78);
        assert!(text.contains("\r\n\"c,\"\"d\"\"_FIFO_0_0_NONE\","));
        assert!(dir.join("logs/c,\"d\"_FIFO_0_0_NONE.log").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn execute_returns_runs_in_output_order_for_any_thread_count() {
        let matrix = expected_matrix();
        let mut cur = RunCursor::default();
        let runs = matrix.next_runs(&mut cur, 300);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let a = one.install(|| matrix.execute(&runs, RunOptions::ALL));
        let b = three.install(|| matrix.execute(&runs, RunOptions::ALL));
        assert_eq!(a, b);
        let ids: Vec<&str> = a.iter().map(|r| r.run_id.as_str()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert_eq!(ids[0], "seed_001_ADVERSARIAL_0_0_NONE");
        assert_eq!(ids[3], "seed_001_ADVERSARIAL_0_10_NONE");
    }
}
