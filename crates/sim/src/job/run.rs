//! The running job clone: fio's `do_io` loop, driven by events (`JobRun::pump`): start,
//! ramp and run time, the queue depth, batched submission, think time and progress.

use super::*;

impl JobRun {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        def: usize,
        clone: u32,
        (group, report_group): (u32, u32),
        core: u16,
        source: Source,
        host_loop: HostLoop,
        ramp_ns: Ns,
        end_after_ns: Option<Ns>,
        issues: [bool; 4],
        series_interval_ns: Option<Ns>,
    ) -> Self {
        JobRun {
            name,
            def,
            clone,
            group,
            report_group,
            group_reporting: false,
            host: 0,
            core,
            source,
            host_loop,
            think: Think::default(),
            start_ns: 0,
            ramp_ns,
            end_after_ns,
            inflight: 0,
            allocated: 0,
            staged: Vec::new(),
            in_call: std::collections::VecDeque::new(),
            uncommitted: 0,
            in_vector: Vec::new(),
            done: std::collections::VecDeque::new(),
            wait: Wait::Nothing,
            pending: None,
            thought: false,
            since_think_issued: 0,
            since_think_reaped: 0,
            last_think_ns: 0,
            rate_shift_ns: 0,
            wake_at: None,
            exhausted: false,
            terminated: false,
            started: false,
            finished: false,
            end_noted: false,
            stats: JobStats::default(),
            series: None,
            series_interval_ns,
            issues,
            bw_sampler: Sampler::new(BW_WINDOW_NS, issues, true),
            iops_sampler: Sampler::new(BW_WINDOW_NS, issues, false),
            last_complete_ns: 0,
            issued: 0,
            reaped_ios: 0,
            reaped_bytes: 0,
            durability: Durability::default(),
            lat_percentiles: false,
            sync_writes: false,
            ordered: false,
            flow: None,
            flow_id: 0,
            flow_counter: 0,
            flow_sleep_ns: 0,
            rate_min: [(None, None); 3],
            rate_cycle_ns: 1_000_000_000,
            rate_check: [None; 3],
            max_latency_ns: [None; 3],
            latency_target: None,
            steadystate: None,
            error: 0,
            exitall: false,
            exitall_on_error: false,
            exit_what: ExitWhat::Group,
            start_delay_ns: 0,
            wait_for: Vec::new(),
            file: 0,
            invalidate: false,
            opened: true,
            logs: None,
            per_io_bw: false,
            per_io_iops: false,
        }
    }
    /// fio's per-I/O bandwidth and IOPS samples (its `add_bw_sample` and `add_iops_sample`,
    /// used instead of the periodic ones when a job writes a per-I/O `write_bw_log` or
    /// `write_iops_log`).
    pub fn sample_per_io(&mut self, bw: bool, iops: bool) {
        self.per_io_bw = bw;
        self.per_io_iops = iops;
        if bw {
            self.bw_sampler.active = [false; 4];
        }
        if iops {
            self.iops_sampler.active = [false; 4];
        }
    }
    /// The bandwidth and IOPS sample windows (`bwavgtime`, `iopsavgtime`).
    pub fn set_sample_windows(&mut self, bw_ns: Ns, iops_ns: Ns) {
        self.bw_sampler.window_ns = bw_ns.max(1);
        self.iops_sampler.window_ns = iops_ns.max(1);
    }
    pub fn start(&mut self, now: Ns) {
        self.started = true;
        self.start_ns = now;
        if self.issues[Op::Write.index()] {
            // fio opens the file of a job that writes for writing.
            self.durability.open_for_writing();
        }
        let hl = &self.host_loop;
        self.durability
            .configure(hl.sync_beside_io, hl.sync_queued, self.ordered);
        self.bw_sampler.start_ns = now + self.ramp_ns;
        self.iops_sampler.start_ns = now + self.ramp_ns;
        self.last_think_ns = now;
        if let Some(interval) = self.series_interval_ns {
            let ops: Vec<Op> = Op::ALL
                .into_iter()
                .filter(|op| self.issues[op.index()])
                .collect();
            self.series = Some(IntervalSeries::new(interval, now + self.ramp_ns, &ops));
        }
        self.last_complete_ns = now + self.ramp_ns;
        if let Some(lt) = &mut self.latency_target {
            lt.window_start_ns = now;
        }
        if let Some(ss) = &mut self.steadystate {
            ss.prev_ns = now;
        }
    }
    pub(super) fn ramp_end(&self) -> Ns {
        self.start_ns + self.ramp_ns
    }
    /// The depth the job fills its queue to: `iodepth`, or the depth a latency search is at.
    pub(super) fn depth(&self) -> u32 {
        match &self.latency_target {
            Some(lt) => lt.qd.min(self.host_loop.iodepth),
            None => self.host_loop.iodepth,
        }
    }
    /// fio's `wait_for_completions`: how many completions to wait for.
    pub(super) fn reap_wait(&self, full: bool) -> Wait {
        let hl = &self.host_loop;
        let mut min = hl.complete_min.min(self.allocated);
        if (full && min == 0) || hl.complete_min == 0 {
            min = 1;
        }
        Wait::Reap {
            min,
            max: hl.complete_max.max(min),
            full,
        }
    }
    /// Tells the job to stop (`exitall`, its steady state, ...): it issues nothing more and
    /// ends once what it has in flight is reaped.
    pub fn terminate(&mut self) {
        self.terminated = true;
    }
    /// Issues what the job may issue now, through `submit`; says when to wake it next.
    /// `submit` answers false when the submission call sleeps (the block layer made the job
    /// wait for a tag): the job then stops issuing until it is pumped again.
    pub fn pump(
        &mut self,
        now: Ns,
        mut submit: impl FnMut(Request) -> bool,
    ) -> Result<(Pump, PumpNotes), WorkloadError> {
        if matches!(self.source, Source::App(_)) {
            return Ok(self.pump_app(now, &mut submit));
        }
        let mut notes = PumpNotes::default();
        if self.host_loop.offload {
            // Offload workers (and a trace's replay) reap each I/O as it completes.
            while !self.done.is_empty() {
                self.reap(now, 1, &mut notes);
            }
        }
        let result = loop {
            // 0. A submission call that slept for a tag goes on first.
            if !self.continue_call(&mut submit) || !self.in_vector.is_empty() {
                break Pump::Wait;
            }
            // 1. What the loop is waiting for.
            match self.wait {
                Wait::Nothing => {}
                Wait::Reap { .. } if self.host_loop.offload => {
                    // The workers have reaped (above): a free slot is all the job waits for.
                    if self.allocated >= self.depth() && !self.stopping() {
                        break Pump::Wait;
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Reap { full, .. } if self.host_loop.calls == EngineCalls::Vector => {
                    // vsync's getevents: its commit first (the job waits for the call), then
                    // the last call's I/Os, or none.
                    if !self.commit(&mut submit, false) {
                        break Pump::Wait;
                    }
                    let n = self.done.len() as u32;
                    self.reap(now, n, &mut notes);
                    // With nothing reaped fio 3.33 calls again for ever (the slots it never
                    // reaps keep the queue above iodepth_low); the simulation goes on.
                    if n > 0 && full && self.allocated > self.host_loop.low && !self.stopping() {
                        self.wait = self.reap_wait(true);
                        continue;
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Reap { min, max, full } => {
                    if (self.done.len() as u32) < min {
                        self.commit(&mut submit, false);
                        break Pump::Wait;
                    }
                    self.reap(now, max, &mut notes);
                    if full && self.allocated > self.host_loop.low && !self.stopping() {
                        self.wait = self.reap_wait(true);
                        continue;
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Quiesce(then) => {
                    if !self.commit(&mut submit, true) {
                        break Pump::Wait;
                    }
                    while !self.done.is_empty() {
                        let max = self.host_loop.complete_max.max(1);
                        self.reap(now, max, &mut notes);
                    }
                    if self.allocated > 0 {
                        break Pump::Wait;
                    }
                    self.wait = match then {
                        AfterQuiesce::Continue => Wait::Nothing,
                        AfterQuiesce::Think(ns) => {
                            self.served_think(now, ns);
                            Wait::Until(now + ns)
                        }
                        AfterQuiesce::Sleep(ns) => Wait::Until(now + ns),
                    };
                    continue;
                }
                Wait::Until(t) => {
                    if now < t {
                        break Pump::WakeAt(t);
                    }
                    self.wait = Wait::Nothing;
                }
                Wait::Flow => {
                    // Re-checked below; fio spins without reaping.
                    self.wait = Wait::Nothing;
                }
            }
            // 2. A flush: after every I/O of the job is reaped, alone; libaio's periodic sync
            // beside the I/Os in flight once none waits to be submitted. (vsync's job drains
            // first: fio's end_fsync comes after its last call, step 3.)
            let vector_end = self.exhausted && self.host_loop.calls == EngineCalls::Vector;
            if self.durability.busy() && !(vector_end && self.allocated > 0) {
                if self.durability.sync_due {
                    let beside = self.host_loop.sync_beside_io && !self.durability.end_sync;
                    if beside && !self.staged.is_empty() {
                        // libaio is busy: fio submits what is queued and reaps as it does when
                        // busy (`do_io`'s `reap:`, wait_for_completions), then queues the sync
                        // again; the sync's own slot may leave no other free.
                        self.wait = self.reap_wait(self.allocated + 1 >= self.depth());
                        if !self.commit(&mut submit, true) {
                            break Pump::Wait;
                        }
                        continue;
                    }
                    if self.allocated > 0 && !beside {
                        self.wait = Wait::Quiesce(AfterQuiesce::Continue);
                        continue;
                    }
                    if beside {
                        // fio counts the sync at the depth it holds with it when it goes.
                        self.stats.iodepth_level[depth_level_bucket(self.allocated + 1)] += 1;
                    }
                    if self.host_loop.sync_queued
                        && self.durability.end_sync
                        && !self.durability.close_sync
                    {
                        // The end sync of an engine that queues its syncs goes through the
                        // engine's queue and commit, which count it at depth 1 (fio 3.33
                        // guards only a completed sync at the end: io_uring and posixaio,
                        // 16 writes fsync=4 end_fsync=1: '1' 12.5 %, 6.25 % without).
                        self.stats.iodepth_level[depth_level_bucket(1)] += 1;
                        self.stats.iodepth_syncs += 1;
                    }
                    let d = &mut self.durability;
                    d.sync_due = false;
                    d.sync_inflight = true;
                    d.files_close = d.close_sync;
                    if !std::mem::take(&mut d.close_sync) {
                        d.last_was_sync = true;
                        d.last_done_was_sync = true;
                    }
                    d.flush_issued(self.ordered);
                    self.inflight += 1;
                    let mut req = Request::new(Op::Flush, 0, 0, 0, now);
                    req.host = self.host;
                    req.core = self.core;
                    req.file = self.file;
                    if d.datasync && self.file != 0 {
                        req.flags |= ReqFlags::DATA_SYNC;
                    }
                    if self.ordered {
                        req.flags |= ReqFlags::ORDERED;
                    }
                    // The job waits for its flush, whether or not the call sleeps for a tag.
                    let _ = submit(req);
                }
                break Pump::Wait;
            }
            // 3. The end: no more I/O; fio reaps what is left in one call.
            if !self.exhausted && (self.terminated || self.error != 0) {
                self.exhausted = true;
                if self.error == 0 {
                    self.durability.at_end(self.allocated > 0);
                }
                continue;
            }
            if self.exhausted {
                if self.allocated > 0 && self.host_loop.calls == EngineCalls::Vector {
                    // vsync's last getevents returns the last call's I/Os (or none); the job
                    // ends holding the I/Os of earlier calls, never reaped.
                    if !self.commit(&mut submit, false) {
                        break Pump::Wait;
                    }
                    let n = self.done.len() as u32;
                    self.reap(now, n, &mut notes);
                    self.allocated = 0;
                    continue;
                }
                if self.allocated > 0 {
                    // fio's last call waits for every I/O the job holds and reaps them
                    // together (offload workers reap each as it comes, above).
                    if !self.commit(&mut submit, false) || (self.done.len() as u32) < self.allocated
                    {
                        break Pump::Wait;
                    }
                    let all = self.allocated;
                    self.reap(now, all, &mut notes);
                    continue;
                }
                if std::mem::take(&mut self.durability.end_after_reap) {
                    self.durability.at_end(false);
                    continue;
                }
                break Pump::Wait;
            }
            // 3b. Think time: fio thinks after each I/O it queues (do_io's handle_thinktime),
            // waiting for its I/O in flight first, and reads the time only then: the last I/O
            // of a job, whether its time or its I/O ran out, gets its think time too, and the
            // job's run time holds it (fio 3.33 does not cut the stall at the runtime).
            if let Some(ns) = self.think_due(now) {
                self.wait = Wait::Quiesce(AfterQuiesce::Think(ns));
                continue;
            }
            if let Some(end) = self.end_after_ns
                && now >= self.start_ns + end
            {
                // fio reads the time before each fetch (do_io): a job whose time is up fetches
                // nothing more, not even the sync its last write made due.
                self.exhausted = true;
                self.durability.at_end(self.allocated > 0);
                continue;
            }
            // 4. The next I/O.
            if self.syncs_reach_number_ios() {
                self.pending = None;
                self.exhausted = true;
                self.durability.at_end(self.allocated > 0);
                continue;
            }
            if self.pending.is_none() {
                self.pending = self.source.next()?;
                if self.pending.is_none() {
                    self.exhausted = true;
                    self.durability.at_end(self.allocated > 0);
                    continue;
                }
            }
            let io = self.pending.expect("just filled");
            // fio's fetch of the next I/O gives a periodic sync first, when one is due; a pass
            // that ended at its byte limit fetched nothing more (the new pass comes first).
            if let Some(datasync) = self
                .durability
                .periodic_due()
                .filter(|_| !(io.new_pass && io.limit_ended_pass))
            {
                if !self.host_loop.sync_queued {
                    self.periodic_sync(datasync);
                    continue;
                }
                if self.allocated >= self.depth() {
                    self.wait = self.reap_wait(true);
                    continue;
                }
                if !self.queue_sync(now, datasync, &mut submit) {
                    break Pump::Wait;
                }
                continue;
            }
            // 4b. A pass is over (`loops`, `io_size`): fio reaps everything, syncs and closes
            // the files, then opens them again for the next pass, where the last sync no
            // longer counts (`clear_io_state`'s reset_io_counters). `do_io` ends with an fsync
            // per file (end_fsync or fsync_on_close) unless the last thing done was a sync; a
            // file is closed (fsync_on_close: an fsync(2) per file unless the last thing done
            // was a sync, which the fsync(2) is not) when a fetch finds it done, before that
            // end; the files of a pass that ended at its bytes are still open then, and close
            // after it, once the last sync is forgotten. Measured (fio 3.33, strace): psync
            // fsync=4 over 4 files `.. S | S ..` between two passes, libaio (ended at its
            // bytes) `W | SSSS SSSS | S ..` with fsync_on_close.
            if io.new_pass {
                if self.allocated > 0 {
                    self.wait = Wait::Quiesce(AfterQuiesce::Continue);
                    continue;
                }
                let writes = self.issues[Op::Write.index()];
                let d = &mut self.durability;
                let close_first = !io.limit_ended_pass;
                match d.pass_end {
                    PassEnd::Running => {
                        d.pass_end = PassEnd::First;
                        d.pass_syncs(writes, close_first);
                    }
                    PassEnd::First => {
                        d.pass_end = PassEnd::Second;
                        if !close_first {
                            d.forget_last_sync();
                        }
                        d.pass_syncs(writes, !close_first);
                    }
                    PassEnd::Second => {
                        d.pass_end = PassEnd::Running;
                        d.forget_last_sync();
                        self.pending.as_mut().expect("fetched").new_pass = false;
                        // The files are open again for the next pass.
                        self.opened = true;
                    }
                }
                continue;
            }
            // 5. Flow: a job ahead of its share waits (fio's flow_threshold_exceeded).
            if let Some(blocked) = self.flow_blocked()
                && blocked
            {
                if self.flow_sleep_ns > 0 {
                    self.wait = Wait::Quiesce(AfterQuiesce::Sleep(self.flow_sleep_ns));
                    continue;
                }
                self.wait = Wait::Flow;
                break Pump::Wait;
            }
            // 7. Rate: ahead of its schedule, the job sleeps (inline: once its I/O in flight
            // is done).
            let mut due = self.start_ns + io.not_before_ns + self.rate_shift_ns;
            if due > now {
                // fio cuts a rate's sleep at the job's runtime (rate_ddir), then finds its time
                // up: the job ends there, its run time the whole runtime.
                if let Some(end) = self.end_after_ns {
                    due = due.min(self.start_ns + end);
                }
                if self.host_loop.offload || self.allocated == 0 {
                    self.wait = Wait::Until(due);
                    break Pump::WakeAt(due);
                }
                self.wait = Wait::Quiesce(AfterQuiesce::Continue);
                continue;
            }
            // 8. A full queue is reaped first.
            if self.allocated >= self.depth() {
                self.wait = self.reap_wait(true);
                continue;
            }
            // 8b. vsync: an I/O that does not follow its vector makes the engine busy: fio
            // commits what is queued, reaps (`do_io`'s `reap:`), then queues the I/O again.
            if self.host_loop.calls == EngineCalls::Vector
                && let Some(last) = self.staged.last()
                && (last.op != io.op || last.offset_bytes + last.len_bytes != io.offset_bytes)
            {
                self.wait = self.reap_wait(self.allocated >= self.depth());
                if !self.commit(&mut submit, true) {
                    break Pump::Wait;
                }
                continue;
            }
            // 9. Queue the I/O; a batch is submitted once complete.
            self.pending = None;
            self.thought = false;
            self.allocated += 1;
            self.issued += 1;
            self.since_think_issued += 1;
            if let Some((flow, _)) = &self.flow {
                let mut f = flow.get();
                f.counter += 1;
                flow.set(f);
                self.flow_counter += 1;
                notes.flow_counted += 1;
            }
            let mut req = Request::new(io.op, io.offset_bytes, io.len_bytes, 0, now);
            req.prio = io.prio;
            if io.op != Op::Write {
                self.durability.other_issued();
            } else {
                req.flags |= self.durability.write_flags();
                if self.sync_writes {
                    req.flags |= ReqFlags::SYNC;
                }
                if self.ordered {
                    req.flags |= ReqFlags::ORDERED;
                }
                self.durability.write_issued(&req);
            }
            if self.file != 0 {
                req.file = self.file;
                if self.sync_writes {
                    // direct=1 on a file: O_DIRECT, past the page cache.
                    req.flags |= ReqFlags::DIRECT;
                }
                if std::mem::take(&mut self.opened) && self.invalidate {
                    req.flags |= ReqFlags::FADV_DONTNEED;
                }
            }
            req.host = self.host;
            req.core = self.core;
            if self.allocated >= self.depth() {
                // fio reaps right after queueing into a full queue (`do_io`'s `reap:`), the
                // last I/O included: its final call then drains what is left after that reap.
                self.wait = self.reap_wait(true);
            }
            match self.host_loop.calls {
                EngineCalls::Batch => {
                    // fio's td_io_queue commits once `iodepth_batch_submit` I/Os are queued
                    // since its last commit, some of which getevents may have submitted.
                    self.staged.push(req);
                    self.uncommitted += 1;
                    if self.uncommitted >= self.host_loop.batch && !self.commit(&mut submit, true) {
                        break Pump::Wait;
                    }
                }
                EngineCalls::EachAtQueue => {
                    self.stats.submit_batches[batch_bucket(1)] += 1;
                    if now >= self.ramp_end() {
                        self.stats.complete_batches[batch_bucket(1)] += 1;
                    }
                    self.uncommitted += 1;
                    if self.uncommitted >= self.host_loop.batch {
                        self.commit(&mut submit, true);
                    }
                    self.in_call.push_back(req);
                    if !self.continue_call(&mut submit) {
                        break Pump::Wait;
                    }
                }
                EngineCalls::Vector => {
                    self.staged.push(req);
                    self.uncommitted += 1;
                    if self.uncommitted >= self.host_loop.batch && !self.commit(&mut submit, true) {
                        break Pump::Wait;
                    }
                }
            }
        };
        if self.exhausted && self.allocated == 0 {
            // Queued and never counted by a commit: fio's job ends with them.
            self.stats.iodepth_uncounted += u64::from(std::mem::take(&mut self.uncommitted));
            if !self.durability.busy() {
                self.finished = true;
                // The job's run time is its loop's (fio's do_io), to the end of a last think
                // time or rate sleep, not to its last completion.
                self.last_complete_ns = self.last_complete_ns.max(now);
            }
        }
        notes.failed |= self.error != 0;
        Ok((result, notes))
    }
    /// Whether fio stops filling the queue: the job ran out, was told to stop, or failed.
    pub(super) fn stopping(&self) -> bool {
        self.exhausted || self.terminated || self.error != 0
    }
    /// fio's `td_io_commit` (`counted`) or the engine's own commit that getevents makes
    /// first: the queued I/Os go down in one submission. fio counts depths in `td_io_commit`
    /// only, every I/O queued since the last one (its `io_u_queued`, whether or not getevents
    /// submitted it since) at the depth the job holds then: a job's last I/Os, submitted by
    /// its last getevents, are never counted (measured, libaio iodepth=8
    /// iodepth_batch_submit=3, 32 writes: fio counts 30). False if the call sleeps (see
    /// `continue_call`) or, for a vector engine, while the job waits for its call.
    pub(super) fn commit(
        &mut self,
        submit: &mut impl FnMut(Request) -> bool,
        counted: bool,
    ) -> bool {
        if counted && self.allocated > 0 && self.uncommitted > 0 {
            let level = depth_level_bucket(self.allocated);
            self.stats.iodepth_level[level] += u64::from(self.uncommitted);
            self.uncommitted = 0;
        }
        if self.host_loop.calls != EngineCalls::Batch {
            return self.call_vector(submit);
        }
        let n = self.staged.len() as u32;
        if n == 0 {
            return true;
        }
        self.stats.submit_batches[batch_bucket(n)] += 1;
        let last = self.staged.len() - 1;
        for (i, req) in self.staged.iter_mut().enumerate() {
            if i < last {
                // The rest of this submission follows at once.
                req.flags |= ReqFlags::BATCH_MORE;
            }
        }
        self.in_call.extend(self.staged.drain(..));
        self.continue_call(submit)
    }
    /// A vector engine's commit: the queued I/Os (each following the last) as one request,
    /// a readv/writev the job waits for. The I/Os of the previous call, if not reaped, are
    /// no longer the engine's events: they are never reaped.
    pub(super) fn call_vector(&mut self, submit: &mut impl FnMut(Request) -> bool) -> bool {
        let Some(&first) = self.staged.first() else {
            return true;
        };
        self.stats.submit_batches[batch_bucket(self.staged.len() as u32)] += 1;
        let ramp_end = self.ramp_end();
        for io in self.done.drain(..) {
            if io.t.queued_ns >= ramp_end {
                self.stats.ops[io.op.index()].unreaped += 1;
            }
        }
        let mut call = first;
        for io in &self.staged[1..] {
            call.len_bytes += io.len_bytes;
            call.flags |= io.flags;
        }
        self.in_vector.append(&mut self.staged);
        self.in_call.push_back(call);
        self.continue_call(submit);
        false
    }
    /// Hands the I/Os of the current submission call to the path, in order. `submit` answers
    /// false when the call sleeps (the block layer made the job wait for a tag,
    /// blk_mq_get_tag): the rest of the call stays here, and the job neither submits nor
    /// reaps until it is pumped again, when the call goes on where it stopped.
    pub(super) fn continue_call(&mut self, submit: &mut impl FnMut(Request) -> bool) -> bool {
        while let Some(req) = self.in_call.pop_front() {
            self.inflight += 1;
            if !submit(req) {
                return false;
            }
        }
        true
    }
    /// A think time is due before the next I/O: after `thinktime_blocks` I/Os issued or
    /// completed since the last one, or after `thinktime_iotime` of I/O.
    pub(super) fn think_due(&self, now: Ns) -> Option<Ns> {
        let t = &self.think;
        if t.ns == 0 || self.thought || self.issued == 0 {
            return None;
        }
        let count = if t.on_complete {
            self.since_think_reaped
        } else {
            self.since_think_issued
        };
        let by_time = t.iotime_ns > 0 && now - self.last_think_ns >= t.iotime_ns + t.ns;
        let by_count = count >= t.blocks && (t.iotime_ns == 0 || t.blocks > 0);
        (by_count || by_time).then_some(t.ns)
    }
    pub(super) fn served_think(&mut self, now: Ns, ns: Ns) {
        self.thought = true;
        self.last_think_ns = now;
        self.since_think_issued = 0;
        self.since_think_reaped = 0;
        if self.think.ignore_in_rate {
            self.rate_shift_ns += ns;
        }
    }
    /// The simulated time after its start at which the clone stops issuing (`ramp_time` +
    /// `runtime`), if it has one.
    pub fn time_limit_ns(&self) -> Option<Ns> {
        self.end_after_ns
    }
    /// How far the clone is towards its end at `now`, from 0 to 1; `None` when nothing known
    /// in advance bounds it (a trace, whose length is only known once it is read).
    ///
    /// A clone stops at the first of its limits it reaches (`runtime` in simulated time, the
    /// amount of I/O of `size`/`io_size` x `loops` in bytes, `number_ios`), so its progress is
    /// the furthest it has gone towards any of them.
    pub fn progress(&self, now: Ns) -> Option<f64> {
        if self.finished {
            return Some(1.0);
        }
        let Source::Gen(g) = &self.source else {
            return None;
        };
        let share = |done: u64, limit: u64| {
            if limit == 0 {
                1.0
            } else {
                done as f64 / limit as f64
            }
        };
        // The generator has already counted the I/O waiting for a free slot.
        let (pending_ios, pending_bytes) = self.pending.map_or((0, 0), |io| (1, io.len_bytes));
        let extent = g.extent();
        let elapsed_ns = if self.started {
            now.saturating_sub(self.start_ns)
        } else {
            0
        };
        [
            self.end_after_ns.map(|end| share(elapsed_ns, end)),
            extent
                .io_limit_bytes
                .map(|limit| share(g.bytes_generated() - pending_bytes, limit)),
            extent
                .io_limit_ios
                .map(|limit| share(g.ios_generated() - pending_ios, limit)),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max)
        .map(|f| f.min(1.0))
    }
}
