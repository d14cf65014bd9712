//! Per-job I/O generators: what the next I/O is, when it may be submitted, and when the
//! job is done.
//!
//! A [`JobGen`] is built from a parsed [`Job`], the clone index (`0..numjobs`) and the run
//! seed, and then called on the simulator's hot path: [`JobGen::next_io`] allocates nothing.
//!
//! # Random streams
//! Each draw comes from a named [`RngStream`] seeded with the job's `randseed` if it has one,
//! else the run seed. Stream names are `job<I>.<C>/<purpose>` with `I` the job's section
//! index, `C` the clone index, and purpose `offset`, `bs`, `mix`, `arrival` or `prio`. So
//! adding a job, a clone or a kind of draw never shifts the draws of another.
//!
//! # What qoslab does where fio leaves a choice
//! - Random offsets: as fio by default (`norandommap=0`), every block of the region is
//!   visited once per pass, in an order that is the same on every pass (fio 3.33 repeats its
//!   order too, with `randrepeat=1`). qoslab uses a keyed permutation instead of fio's bitmap
//!   so memory does not grow with the device. With `norandommap=1`, offsets are uniform with
//!   replacement. A non-uniform `random_distribution` always draws with replacement (as fio).
//! - Blocks are `blockalign` bytes (default: the smallest block size of the directions the
//!   job issues); an offset is `region_start + block * blockalign`, and only blocks where the
//!   largest I/O fits are drawn, so every I/O lies inside the region.
//! - Mixed workloads draw each I/O's direction independently with probability
//!   `rwmixread`% (fio draws runs of one direction, with the same long-run shares).
//! - Sequential patterns keep one position per direction (as fio's `rw=rw` does). Where the
//!   length drawn would cross the file's end, lengths are drawn again until one fits, as
//!   fio's get_next_buflen does after taking the offset; where not even the shortest fits,
//!   the pass is done with the file (time-based jobs and holes wrap in place instead).
//! - Zipf ranks are exact (rejection-inversion); fio 3.33 uses Gray et al.'s approximation,
//!   exact for the two hottest ranks only. Pareto and normal follow fio's own laws (see
//!   `dist.rs`). Ranks are scattered over the region by a bijection, or laid out from
//!   `center` when the option gives one.
//! - Pacing: `rate`/`rate_iops` give each direction a schedule (linear: evenly spaced;
//!   poisson: exponential gaps with the same mean); [`GenIo::not_before_ns`] is the later of
//!   that schedule and the previous I/O's, so I/Os leave in generation order.
//! - `thinktime` is the job's, not the generator's: when a job stalls depends on what it
//!   has issued or completed (`crates/sim`).
//! - Files (`nrfiles`): the region is cut into that many equal files, one after another;
//!   each keeps its own sequential positions and its own pass over its blocks, and
//!   `file_service_type` chooses the file of each I/O (in turn `n` I/Os each, at random, or
//!   each file's share of the I/O before the next).
//! - Passes, as fio 3.33's `do_io` calls (`backend.c`): a pass ends when every file is done
//!   (a sequential file when its next I/O would cross its end, a permuted one when its last
//!   block was drawn; `file_service_type` skips the files done, as fio's does) or, with an
//!   engine that queues its I/O, when it has issued `size` bytes (fio's `total_bytes`;
//!   fio counts no pass bytes for an engine whose I/O completes in the call, so a psync
//!   pass runs on to its files' ends: [`Job::counts_pass_bytes`]). Another pass starts while `loops` lasts, then
//!   while `io_size` is short by at least the largest block (`keep_running`); its first I/O
//!   says so ([`GenIo::new_pass`]: fio reaps everything and closes the files in between).
//!   A `time_based` job's passes go on until its time is up and end only when every file
//!   is done; its random files, and a sequential file that is its only one, start over in
//!   place instead (fio 3.33's get_next_rand_block, get_next_seq_offset).
//! - End: [`JobGen::next_io`] returns `None` once no pass is left, or `io_size` (default
//!   `size`) x `loops` bytes or `number_ios` x `loops` I/Os have been generated;
//!   `time_based` jobs never run out (fio ignores their `number_ios`) and stop at
//!   [`JobGen::end_ns`] (`ramp_time + runtime`), which also bounds other jobs.

mod dist;

use qoslab_engine::{IoPrio, IoPrioClass, Ns, Op, RngStream};
use rand_distr::Distribution as _;

use crate::WorkloadError;
use crate::fio::SizeSpec;
use crate::fio::{Distribution, FileService, Job, RateProcess, RwPattern};
pub use dist::Permutation;
use dist::{BlockSampler, Draw, LenSampler};

const NS_PER_S: u128 = 1_000_000_000;

/// One generated I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenIo {
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub prio: IoPrio,
    /// Earliest submission time from `rate`/`rate_iops`, in ns since the job started
    /// (0 without a cap). Non-decreasing from one I/O to the next.
    pub not_before_ns: Ns,
    /// The I/O starts a new pass over the job's files (see the module's "Passes": fio reaps
    /// everything, closes the files and opens them again before it). Never in a `time_based`
    /// job over one file, nor in a random time-based one (fio wraps those in place).
    pub new_pass: bool,
    /// With `new_pass`: the pass before it ended at its byte limit, which fio's `do_io` checks
    /// before it fetches again, so nothing more was fetched in it (no periodic sync falls
    /// due at its end); otherwise it ended at a fetch that found every file done, and that
    /// fetch gives a sync first if one is due.
    pub limit_ended_pass: bool,
}

/// The region and amount of I/O of one job clone, resolved against the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub region_start_bytes: u64,
    pub region_len_bytes: u64,
    /// `None` for time-based jobs.
    pub io_limit_bytes: Option<u64>,
    pub io_limit_ios: Option<u64>,
    /// The bytes a pass issues at the most (fio's `total_bytes`: `size`; `io_size` if more
    /// for a random writer without a random map; twice `size` for a trim-then-write
    /// pattern); `None` for time-based jobs and for engines whose I/O completes in the call
    /// (fio counts no pass bytes for them: [`Job::counts_pass_bytes`]).
    pub pass_limit_bytes: Option<u64>,
}

/// Per-direction pacing state.
#[derive(Clone, Copy, Debug, Default)]
struct RateClock {
    /// Interval per I/O (`rate_iops`), in ns as a ratio `NS_PER_S / iops`.
    iops: Option<u64>,
    bytes_per_s: Option<u64>,
    /// I/Os and bytes scheduled so far (linear schedule is computed exactly from these).
    ios: u64,
    bytes: u64,
    /// Poisson schedule position, in ns.
    poisson_ns: f64,
}

impl RateClock {
    fn capped(&self) -> bool {
        self.iops.is_some() || self.bytes_per_s.is_some()
    }

    /// Mean gap before an I/O of `len` bytes, in ns: the stricter of the two caps.
    fn mean_gap_ns(&self, len: u64) -> f64 {
        let a = self.iops.map_or(0.0, |r| 1e9 / r as f64);
        let b = self
            .bytes_per_s
            .map_or(0.0, |r| len as f64 * 1e9 / r as f64);
        a.max(b)
    }

    /// Scheduled time of the next I/O of `len` bytes, then advances the schedule.
    fn next(&mut self, len: u64, process: RateProcess, rng: &mut RngStream) -> Ns {
        let at = match process {
            RateProcess::Linear => {
                let a = self.iops.map_or(0, |r| {
                    (u128::from(self.ios) * NS_PER_S / u128::from(r)) as u64
                });
                let b = self.bytes_per_s.map_or(0, |r| {
                    (u128::from(self.bytes) * NS_PER_S / u128::from(r)) as u64
                });
                a.max(b)
            }
            RateProcess::Poisson => {
                let gap: f64 = rand_distr::Exp1.sample(&mut Draw(rng));
                self.poisson_ns += gap * self.mean_gap_ns(len);
                self.poisson_ns as Ns
            }
        };
        self.ios += 1;
        self.bytes += len;
        at
    }
}

/// The generator of one clone of one job.
#[derive(Clone, Debug)]
pub struct JobGen {
    pattern: RwPattern,
    rw_modifier: Option<u64>,
    rw_backward: bool,
    rw_identical: bool,
    read_share: f64,
    extent: Extent,
    align_bytes: u64,
    /// Blocks where the longest I/O still fits.
    nblocks: u64,
    len: [LenSampler; 3],
    blocks: [BlockSampler; 3],
    permutation: Option<Permutation>,
    /// Per file: where it is in its pass over the permutation, and its sequential positions.
    perm_pos: Vec<u64>,
    seq_pos: Vec<[u64; 3]>,
    /// The files: their length, how the next is chosen, the current one and the I/Os (or,
    /// for `sequential`, bytes) it has left before the next.
    file_len: u64,
    file_service: FileService,
    file_n: u64,
    file_cur: usize,
    file_left: u64,
    rng_file: RngStream,
    create_only: bool,
    /// For `rand*:<nr>`: I/Os left before the next random offset, per direction.
    run_left: [u64; 3],
    pending_write: Option<(u64, u64)>,
    /// Whether the job has passes (not `time_based`, or over several files: fio 3.33 wraps a
    /// time-based sequential file in place only when it is the only one); whether it runs
    /// them until its time is up; the current one is over; passes begun (the first at the
    /// start); bytes issued in this one; which files it is done with.
    passes: bool,
    time_based: bool,
    pass_over: bool,
    /// The pass ended at its byte limit ([`GenIo::limit_ended_pass`]).
    pass_at_limit: bool,
    passes_started: u64,
    pass_bytes: u64,
    file_done: Vec<bool>,
    files_left: usize,
    /// No pass is left: the job has ended.
    ended: bool,
    /// What `keep_running` weighs at the end of a pass: `loops`, `io_size` (no further pass
    /// without it) and the largest I/O.
    loops: u64,
    io_size: Option<u64>,
    max_len: u64,
    rng_offset: RngStream,
    rng_bs: RngStream,
    rng_mix: RngStream,
    rng_arrival: RngStream,
    rng_prio: RngStream,
    rate: [RateClock; 3],
    rate_process: RateProcess,
    last_not_before_ns: Ns,
    prio: IoPrio,
    cmdprio_pct: [f64; 3],
    cmdprio: [IoPrio; 3],
    bytes_done: u64,
    ios_done: u64,
    ramp_ns: Ns,
    end_ns: Option<Ns>,
    iodepth: u32,
    batch_submit: u32,
    name: String,
}

fn ops_of(p: RwPattern) -> impl Iterator<Item = Op> {
    [Op::Read, Op::Write, Op::Trim]
        .into_iter()
        .filter(move |&op| p.issues(op))
}

impl JobGen {
    /// A generator for a job whose region is known without a device (`size` or `filesize`
    /// in bytes).
    pub fn new(job: &Job, clone: u32, run_seed: u64) -> Result<Self, WorkloadError> {
        Self::on_device(job, clone, run_seed, None)
    }

    /// A generator for a job on a device of `device_bytes` (needed when `size` is missing
    /// or a percentage, or `offset` is a percentage).
    pub fn on_device(
        job: &Job,
        clone: u32,
        run_seed: u64,
        device_bytes: Option<u64>,
    ) -> Result<Self, WorkloadError> {
        let err = |m: String| {
            WorkloadError::at(
                &job.location.path,
                job.location.line,
                format!("job '{}': {m}", job.name),
            )
        };
        if clone >= job.numjobs {
            return Err(err(format!(
                "clone {clone} of a job with numjobs={}",
                job.numjobs
            )));
        }
        let extent = resolve_extent(job, clone, device_bytes).map_err(err)?;
        let seed = job.randseed.unwrap_or(run_seed);
        let stream = |purpose: &str| {
            RngStream::new(seed, &format!("job{}.{}/{}", job.index, clone, purpose))
        };
        let mut rng_offset = stream("offset");

        let issued: Vec<Op> = ops_of(job.rw).collect();
        let mut min_len = u64::MAX;
        let mut max_len = 0;
        let mut align_bytes = u64::MAX;
        for &op in &issued {
            let (lo, hi) = job.len_bounds(op);
            min_len = min_len.min(lo);
            max_len = max_len.max(hi);
            align_bytes = align_bytes.min(job.blockalign[op.index()].unwrap_or(lo));
        }
        let files = u64::from(job.nrfiles.max(1));
        // Files are whole blocks, so that every file starts aligned.
        let file_len = extent.region_len_bytes / files / align_bytes.max(1) * align_bytes.max(1);
        let file_len = if files == 1 {
            extent.region_len_bytes
        } else {
            file_len
        };
        if max_len > file_len {
            return Err(err(if files == 1 {
                format!(
                    "the region of {} bytes cannot hold a {max_len}-byte I/O",
                    extent.region_len_bytes
                )
            } else {
                format!(
                    "files of {file_len} bytes ({} bytes in {files} files) cannot hold a {max_len}-byte I/O",
                    extent.region_len_bytes
                )
            }));
        }
        let nblocks = (file_len - max_len) / align_bytes + 1;

        let uses_permutation = job.rw.is_random()
            && !job.norandommap
            && issued
                .iter()
                .any(|op| job.random_distribution[op.index()] == Distribution::Random);
        let permutation = uses_permutation.then(|| Permutation::new(nblocks, &mut rng_offset));
        let mut blocks = Vec::with_capacity(3);
        for d in 0..3 {
            blocks.push(
                BlockSampler::new(
                    &job.random_distribution[d],
                    nblocks,
                    align_bytes,
                    !job.norandommap,
                    &mut rng_offset,
                )
                .map_err(err)?,
            );
        }
        let blocks: [BlockSampler; 3] = blocks.try_into().expect("three directions");
        let len = [0, 1, 2].map(|d| LenSampler::new(job.bs[d], job.bsrange[d], &job.bssplit[d]));

        let rate = [0, 1, 2].map(|d| RateClock {
            iops: job.rate_iops[d],
            bytes_per_s: job.rate_bytes_per_s[d],
            ..RateClock::default()
        });
        let prio = match (job.prioclass, job.prio) {
            (Some(class), level) => IoPrio {
                class,
                level: level.unwrap_or(0),
            },
            (None, Some(level)) => IoPrio {
                class: IoPrioClass::BestEffort,
                level,
            },
            (None, None) => IoPrio::default(),
        };
        let cmdprio = [0, 1, 2].map(|d| IoPrio {
            class: job.cmdprio_class[d],
            level: job.cmdprio[d],
        });

        Ok(Self {
            pattern: job.rw,
            rw_modifier: job.rw_modifier,
            rw_backward: job.rw_backward,
            rw_identical: job.rw_identical,
            read_share: job.rwmixread / 100.0,
            extent,
            align_bytes,
            nblocks,
            len,
            blocks,
            permutation,
            perm_pos: vec![0; files as usize],
            seq_pos: (0..files)
                .map(|f| [extent.region_start_bytes + f * file_len; 3])
                .collect(),
            file_len,
            file_service: job.file_service,
            file_n: job.file_service_n.max(1),
            file_cur: 0,
            file_left: 0,
            rng_file: stream("file"),
            create_only: job.create_only,
            run_left: [0; 3],
            pending_write: None,
            passes: !job.time_based || files > 1,
            time_based: job.time_based,
            pass_over: false,
            pass_at_limit: false,
            passes_started: 1,
            pass_bytes: 0,
            file_done: vec![false; files as usize],
            files_left: files as usize,
            ended: false,
            loops: job.loops.max(1),
            io_size: job.io_size,
            max_len,
            rng_offset,
            rng_bs: stream("bs"),
            rng_mix: stream("mix"),
            rng_arrival: stream("arrival"),
            rng_prio: stream("prio"),
            rate,
            rate_process: job.rate_process,
            last_not_before_ns: 0,
            prio,
            cmdprio_pct: job.cmdprio_percentage,
            cmdprio,
            bytes_done: 0,
            ios_done: 0,
            ramp_ns: job.ramp_time_ns,
            end_ns: job.runtime_ns.map(|r| job.ramp_time_ns + r),
            iodepth: job.iodepth,
            batch_submit: match job.iodepth_batch_submit {
                0 => job.iodepth,
                b => b.min(job.iodepth),
            },
            name: job.name.clone(),
        })
    }

    /// The next I/O, or `None` once the job's amount of I/O is done. Allocates nothing.
    pub fn next_io(&mut self) -> Option<GenIo> {
        if self.create_only
            || self.ended
            || self
                .extent
                .io_limit_bytes
                .is_some_and(|l| self.bytes_done >= l)
            || self.extent.io_limit_ios.is_some_and(|l| self.ios_done >= l)
        {
            return None;
        }
        let mut new_pass = false;
        let mut limit_ended_pass = false;
        let (op, offset_bytes, len_bytes) = if let Some((off, len)) = self.pending_write.take() {
            (Op::Write, off, len)
        } else {
            if self.pass_over {
                // The last I/O ended the pass (its files' last block, its bytes).
                limit_ended_pass = self.pass_at_limit;
                if !self.another_pass() {
                    return None;
                }
                new_pass = true;
            }
            let op = self.next_op();
            let mut len = self.len[op.index()].draw(&mut self.rng_bs);
            let off = match self.next_offset(op, &mut len) {
                Some(off) => off,
                // Every file of the pass was done before this I/O: fio's `get_io_u` finds
                // no file, so `do_io` returns; the I/O drawn opens the next pass, if any.
                None => {
                    if !self.another_pass() {
                        return None;
                    }
                    new_pass = true;
                    self.next_offset(op, &mut len)
                        .expect("a fresh pass holds the largest I/O")
                }
            };
            if matches!(
                self.pattern,
                RwPattern::TrimWrite | RwPattern::RandTrimWrite
            ) {
                self.pending_write = Some((off, len));
            }
            (op, off, len)
        };
        let d = op.index();
        let prio =
            if self.cmdprio_pct[d] > 0.0 && self.rng_prio.uniform() * 100.0 < self.cmdprio_pct[d] {
                self.cmdprio[d]
            } else {
                self.prio
            };
        if self.rate[d].capped() {
            let at = self.rate[d].next(len_bytes, self.rate_process, &mut self.rng_arrival);
            self.last_not_before_ns = self.last_not_before_ns.max(at);
        }
        self.bytes_done += len_bytes;
        self.ios_done += 1;
        self.pass_bytes += len_bytes;
        if self.passes {
            // fio checks the pass's bytes before the fetch that would find the files done.
            self.pass_at_limit = self
                .extent
                .pass_limit_bytes
                .is_some_and(|l| self.pass_bytes >= l);
            self.pass_over = self.pass_at_limit || self.files_left == 0;
        }
        Some(GenIo {
            op,
            offset_bytes,
            len_bytes,
            prio,
            not_before_ns: self.last_not_before_ns,
            new_pass: new_pass && self.passes,
            limit_ended_pass: limit_ended_pass && new_pass && self.passes,
        })
    }

    /// fio's `keep_running` at the end of a pass: another until a time-based job's time is up,
    /// else while `loops` lasts, then while `io_size` is short by at least the largest block
    /// (without `io_size`, the files are done: no more). A new pass starts every file again
    /// from its start.
    fn another_pass(&mut self) -> bool {
        let more = self.time_based
            || self.passes_started < self.loops
            || self
                .io_size
                .is_some_and(|s| self.bytes_done < s && s - self.bytes_done >= self.max_len);
        if !more {
            self.ended = true;
            return false;
        }
        self.passes_started += 1;
        self.pass_over = false;
        self.pass_bytes = 0;
        self.file_done.fill(false);
        self.files_left = self.file_done.len();
        let start = self.extent.region_start_bytes;
        for (f, pos) in self.seq_pos.iter_mut().enumerate() {
            *pos = [start + f as u64 * self.file_len; 3];
        }
        self.perm_pos.fill(0);
        self.run_left = [0; 3];
        true
    }

    /// Marks file `f` done for this pass; whether any is left.
    fn file_ended(&mut self, f: usize) -> bool {
        if !std::mem::replace(&mut self.file_done[f], true) {
            self.files_left -= 1;
        }
        self.files_left > 0
    }

    /// The file of the next I/O (always 0 with one file, without a draw).
    fn next_file(&mut self, len: u64) -> usize {
        let files = self.seq_pos.len();
        if files == 1 {
            return 0;
        }
        // A file this pass is done with is passed over (fio's get_next_file_rr and
        // get_next_file_rand skip it; the caller leaves at least one).
        let cur_done = self.file_done[self.file_cur];
        match self.file_service {
            FileService::RoundRobin => {
                if self.file_left == 0 || cur_done {
                    if self.ios_done > 0 || cur_done {
                        self.file_cur = self.next_file_left(self.file_cur);
                    }
                    self.file_left = self.file_n;
                }
                self.file_left -= 1;
            }
            FileService::Random => {
                if self.file_left == 0 || cur_done {
                    loop {
                        self.file_cur = (self.rng_file.uniform() * files as f64) as usize % files;
                        if !self.file_done[self.file_cur] {
                            break;
                        }
                    }
                    self.file_left = self.file_n;
                }
                self.file_left -= 1;
            }
            FileService::Sequential => {
                // Each file gets an equal share of the job's I/O before the next.
                let share = self
                    .extent
                    .io_limit_bytes
                    .map_or(self.file_len, |l| (l / files as u64).max(1));
                if self.file_left < len || cur_done {
                    if self.ios_done > 0 || cur_done {
                        self.file_cur = self.next_file_left(self.file_cur);
                    }
                    self.file_left = share;
                }
                self.file_left = self.file_left.saturating_sub(len);
            }
        }
        self.file_cur
    }

    /// The first file after `f`, in turn, that this pass is not done with.
    fn next_file_left(&self, f: usize) -> usize {
        let files = self.file_done.len();
        (1..=files)
            .map(|i| (f + i) % files)
            .find(|&g| !self.file_done[g])
            .expect("a pass with a file left")
    }

    fn next_op(&mut self) -> Op {
        use RwPattern::*;
        match self.pattern {
            Read | RandRead => Op::Read,
            Write | RandWrite => Op::Write,
            Trim | RandTrim | TrimWrite | RandTrimWrite => Op::Trim,
            ReadWrite | RandRw => {
                if self.rng_mix.uniform() < self.read_share {
                    Op::Read
                } else {
                    Op::Write
                }
            }
        }
    }

    /// The offset of the next I/O, in a file this pass is not done with (and its length,
    /// drawn again if it does not fit there); `None` when the pass is done with every file
    /// before it.
    fn next_offset(&mut self, op: Op, len: &mut u64) -> Option<u64> {
        loop {
            let f = self.next_file(*len);
            if let Some(off) = self.offset_in(f, op, len) {
                return Some(off);
            }
            if !self.file_ended(f) {
                return None;
            }
        }
    }

    /// The offset of the next I/O in file `f`; `None` when not even the shortest length
    /// fits before the file's end (fio: the file is done for this pass).
    fn offset_in(&mut self, f: usize, op: Op, len: &mut u64) -> Option<u64> {
        let d = op.index();
        let start = self.extent.region_start_bytes + f as u64 * self.file_len;
        let end = start + self.file_len;
        if !self.pattern.is_random() {
            let mut off = self.seq_pos[f][d];
            if self.passes && self.rw_modifier.is_none() && off + *len > end {
                // fio takes the offset first, then draws lengths until one fits there
                // (get_next_buflen); the pass is done with the file when not even the
                // shortest does (get_next_seq_offset or get_next_buflen has none).
                let lens = &self.len[d];
                if off + lens.min() > end {
                    return None;
                }
                while off + *len > end {
                    *len = lens.draw(&mut self.rng_bs);
                }
            }
            let len = *len;
            if off < start || off + len > end {
                // A time-based job's only file, or one written with holes (`rw=write:4k`,
                // backwards too), wraps in place inside its pass, as fio's does.
                // Forwards the file starts again at its start, backwards at its last block.
                off = if self.rw_backward {
                    start + (self.file_len - len) / self.align_bytes * self.align_bytes
                } else {
                    start
                };
            }
            let skip = self.rw_modifier.unwrap_or(0);
            self.seq_pos[f][d] = if self.rw_backward {
                (off + len).wrapping_sub(skip)
            } else {
                off + len + skip
            };
            return Some(off);
        }
        let len = *len;
        if self.rw_modifier.is_some() && self.run_left[d] > 0 {
            // Inside a run of `rw=rand*:<nr>`: continue from the last offset.
            self.run_left[d] -= 1;
            let mut off = self.seq_pos[f][d];
            if off + len > end {
                off = start;
            }
            self.seq_pos[f][d] = if self.rw_identical { off } else { off + len };
            return Some(off);
        }
        let perm = &self.permutation;
        let pos = &mut self.perm_pos[f];
        let nblocks = self.nblocks;
        let mut last_block = false;
        let block = self.blocks[d].draw(&mut self.rng_offset, || {
            let p = perm.as_ref().expect("permuted sampling has a permutation");
            let b = p.at(*pos);
            // pos < nblocks: a wrap, not a division, as this runs for every I/O.
            *pos = if *pos + 1 == nblocks { 0 } else { *pos + 1 };
            last_block = *pos == 0;
            b
        });
        // The file's last block was drawn: the pass is done with it after this I/O (fio's
        // random map is full); a time-based job's starts over in place (get_next_rand_block).
        if last_block && !self.time_based {
            self.file_ended(f);
        }
        let off = start + block * self.align_bytes;
        if let Some(nr) = self.rw_modifier {
            self.run_left[d] = nr - 1;
            self.seq_pos[f][d] = if self.rw_identical { off } else { off + len };
        }
        Some(off)
    }

    /// Where the job's I/O goes and how much of it there is.
    pub fn extent(&self) -> Extent {
        self.extent
    }

    /// Statistics start this long after the job starts (`ramp_time`).
    pub fn ramp_ns(&self) -> Ns {
        self.ramp_ns
    }

    /// The job issues nothing at or after this time (`ramp_time + runtime`), if bounded.
    pub fn end_ns(&self) -> Option<Ns> {
        self.end_ns
    }

    pub fn iodepth(&self) -> u32 {
        self.iodepth
    }

    /// I/Os submitted together (`iodepth_batch_submit`; 0 there means `iodepth`), at most
    /// `iodepth`.
    pub fn batch_submit(&self) -> u32 {
        self.batch_submit
    }

    /// I/Os generated so far.
    pub fn ios_generated(&self) -> u64 {
        self.ios_done
    }

    /// Bytes generated so far.
    pub fn bytes_generated(&self) -> u64 {
        self.bytes_done
    }

    pub fn job_name(&self) -> &str {
        &self.name
    }
}

/// Region and amount of I/O for clone `clone`, per fio's rules for `size`, `filesize`,
/// `offset`, `offset_increment`, `io_size`, `loops`, `number_ios` and `time_based`.
fn resolve_extent(job: &Job, clone: u32, device_bytes: Option<u64>) -> Result<Extent, String> {
    let need_device = |what: &str| {
        format!("{what} needs the device size; give size= in bytes or run on a device")
    };
    let mut offset = job
        .offset
        .resolve(device_bytes)
        .ok_or_else(|| need_device("a percentage offset"))?;
    if let (SizeSpec::Percent(_), Some(align)) = (job.offset, job.offset_align) {
        offset = offset.div_ceil(align) * align;
    }
    let increment = job
        .offset_increment
        .resolve(device_bytes)
        .ok_or_else(|| need_device("a percentage offset_increment"))?;
    let start = offset
        .checked_add(
            increment
                .checked_mul(u64::from(clone))
                .ok_or("offset overflows")?,
        )
        .ok_or("offset overflows")?;
    let size = match job.size {
        Some(s) => Some(
            s.resolve(device_bytes)
                .ok_or_else(|| need_device("a percentage size"))?,
        ),
        None => None,
    };
    let files = u64::from(job.nrfiles.max(1));
    let region_len = match (job.filesize, size, device_bytes) {
        (_, _, Some(dev)) if job.fill_device => dev
            .checked_sub(start)
            .ok_or("offset lies beyond the device")?,
        (_, _, None) if job.fill_device => {
            return Err(need_device("fill_device"));
        }
        (Some(f), _, _) => f.checked_mul(files).ok_or("filesize x nrfiles overflows")?,
        (None, Some(s), _) => s,
        (None, None, Some(dev)) => dev
            .checked_sub(start)
            .ok_or("offset lies beyond the device")?,
        (None, None, None) => {
            return Err("size is not set and there is no device to take it from".into());
        }
    };
    if region_len == 0 {
        return Err("the I/O region is empty".into());
    }
    if let Some(dev) = device_bytes
        && start + region_len > dev
    {
        return Err(format!(
            "the region [{start}, {}) lies beyond the device's {dev} bytes",
            start + region_len
        ));
    }
    // `size` with `filesize` only sets the amount of I/O (fio's HOWTO, filesize), and no more
    // than the files hold: fio 3.33 cuts a `size` above their total to it (filesetup.c,
    // setup_files; measured: nrfiles=4 filesize=8k size=64k rw=write, 8 writes of 4 KiB).
    let size = if job.filesize.is_some() {
        size.map_or(region_len, |s| s.min(region_len))
    } else {
        region_len
    };
    let per_loop = job.io_size.unwrap_or(size);
    // A pass issues `size` bytes at the most (do_io's `total_bytes`): up to `io_size` for a
    // random writer without a random map, twice `size` when each block is trimmed, then
    // written.
    let mut pass_limit = size;
    if job.rw.is_random() && job.norandommap && job.rw.issues(Op::Write) {
        pass_limit = pass_limit.max(job.io_size.unwrap_or(0));
    }
    if matches!(job.rw, RwPattern::TrimWrite | RwPattern::RandTrimWrite) {
        pass_limit = pass_limit.saturating_mul(2);
    }
    let io_limit_bytes = (!job.time_based).then(|| per_loop.saturating_mul(job.loops));
    // fio counts `number_ios` per loop and a time-based job goes on to its runtime whatever
    // it says (backend.c: `exceeds_number_ios` compares with number_ios x loops, and
    // `do_io`/`keep_running` test `time_based` first); measured with fio 3.33: loops=3 with
    // number_ios=10 does 30 I/Os (the offsets run on), time_based with number_ios=300 runs
    // its 100 ms (2,636 I/Os).
    let io_limit_ios = job
        .number_ios
        .filter(|_| !job.time_based)
        .map(|n| n.saturating_mul(job.loops));
    Ok(Extent {
        region_start_bytes: start,
        region_len_bytes: region_len,
        io_limit_bytes,
        io_limit_ios,
        pass_limit_bytes: (!job.time_based && job.counts_pass_bytes()).then_some(pass_limit),
    })
}
