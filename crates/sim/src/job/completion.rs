//! A job clone's completions: reaping, recording each latency into its statistics and
//! logs, resetting them after the ramp, and the result the run reports.

use super::*;

impl JobRun {
    /// Records a request the path completed: the job reaps it when its loop does.
    pub fn complete(&mut self, req: &Request) {
        if matches!(self.source, Source::App(_)) {
            return self.complete_app(req);
        }
        self.inflight -= 1;
        if req.op == Op::Flush && self.host_loop.sync_queued && !self.durability.end_sync {
            // A queued periodic sync: the job reaps it as it reaps its writes.
            self.done.push_back(*req);
            return;
        }
        if req.op == Op::Flush {
            let d = &mut self.durability;
            d.sync_inflight = false;
            if req.status == IoStatus::Ok {
                d.acknowledged += std::mem::take(&mut d.covered_by_inflight);
                d.synced = Synced {
                    before_ns: Some(req.t.queued_ns),
                    except: std::mem::take(&mut d.inflight_except),
                };
            } else {
                d.completed_uncovered += std::mem::take(&mut d.covered_by_inflight);
            }
            if std::mem::take(&mut d.end_sync) {
                // fio does not count the job's end sync in its JSON; its run time holds it.
                self.last_complete_ns = self.last_complete_ns.max(req.t.completed_ns);
                let close = d.files_close;
                d.next_file_sync(close);
            } else {
                if d.datasync && req.t.completed_ns >= self.start_ns + self.ramp_ns {
                    self.stats.fdatasyncs += 1;
                }
                self.record(req, req.t.completed_ns);
            }
            if self.exhausted && self.allocated == 0 && !self.durability.busy() {
                self.finished = true;
            }
            return;
        }
        if self.host_loop.calls == EngineCalls::Vector {
            // The readv/writev returns: its I/Os are the engine's events.
            for mut io in self.in_vector.drain(..) {
                io.t = req.t;
                io.status = req.status;
                self.done.push_back(io);
            }
            return;
        }
        self.done.push_back(*req);
    }
    /// Reaps up to `max` completions in one call at `now` (fio's getevents).
    pub(super) fn reap(&mut self, now: Ns, max: u32, notes: &mut PumpNotes) {
        let n = match self.host_loop.calls {
            EngineCalls::Batch => (max.max(1) as usize).min(self.done.len()),
            // posixaio's and vsync's getevents return all they have.
            _ => self.done.len(),
        };
        // vsync's getevents counts a call that returns nothing.
        if n == 0 && self.host_loop.calls != EngineCalls::Vector {
            return;
        }
        for _ in 0..n {
            let req = self.done.pop_front().expect("counted");
            self.allocated -= 1;
            if req.op == Op::Flush {
                if self.durability.queued_flush_reaped(&req) && now >= self.ramp_end() {
                    self.stats.fdatasyncs += 1;
                }
                self.record(&req, now);
                continue;
            }
            self.reaped_ios += 1;
            self.reaped_bytes += req.len_bytes;
            self.since_think_reaped += 1;
            let d = &mut self.durability;
            let count = d.reaped(&req);
            if count && req.status == IoStatus::Ok {
                if d.flushes() && !req.flags.contains(ReqFlags::FUA) {
                    d.completed_uncovered += 1;
                } else {
                    d.acknowledged += 1;
                }
            }
            self.record(&req, now);
            self.check_latency(&req, now);
        }
        if now >= self.ramp_end() {
            self.stats.complete_batches[batch_bucket(n as u32)] += 1;
        }
        self.check_rate_min(now);
        self.check_latency_window(now);
        if self.error != 0 {
            notes.failed = true;
        }
    }
    /// Adds a reaped request to the statistics, as completed at `done`.
    pub(super) fn record(&mut self, req: &Request, done: Ns) {
        let t = &req.t;
        if done < self.ramp_end() {
            return;
        }
        let k = req.op.index();
        let op = &mut self.stats.ops[k];
        let (clat, slat) = if self.host_loop.slat {
            (done - t.dispatched_ns, Some(t.dispatched_ns - t.queued_ns))
        } else {
            (done - t.queued_ns, None)
        };
        let lat = done - t.queued_ns;
        op.ios += 1;
        op.bytes += req.len_bytes;
        if let Some(slat) = slat {
            op.slat.record(slat);
        }
        op.clat.record(clat);
        // Speed: a histogram record costs about 50 instructions per I/O, and nothing reads
        // this one without lat_percentiles.
        if self.lat_percentiles {
            op.lat.record(lat);
        } else {
            op.lat.moments.record(lat);
        }
        // The job reaps a completion when its loop next looks (fio's clat ends there): the wait
        // is the host's, so that the parts still add up to `lat`.
        let mut parts = LatencyPart::split(t);
        parts[LatencyPart::Host as usize] += done.saturating_sub(t.completed_ns);
        self.stats.split[k].record(parts);
        if req.status != qoslab_engine::IoStatus::Ok {
            self.stats.errors += 1;
        }
        // fio's epoch: the end of the ramp (the job's start without one).
        let epoch = self.start_ns + self.ramp_ns;
        let (bw_log, iops_log) = match self.logs.as_deref_mut() {
            Some(l) => l.averaged_bw_iops(),
            None => (None, None),
        };
        self.bw_sampler
            .close_until(done, &mut self.stats, bw_log, epoch);
        self.iops_sampler
            .close_until(done, &mut self.stats, iops_log, epoch);
        self.bw_sampler.amount[k] += req.len_bytes;
        self.iops_sampler.amount[k] += 1;
        if k < 3 {
            let op = &mut self.stats.ops[k];
            if self.per_io_bw {
                // fio's add_bw_sample: bytes * 1e6 / clat in ns, 0 for an instant I/O.
                op.bw_samples
                    .record((req.len_bytes * 1_000_000).checked_div(clat).unwrap_or(0));
            }
            if self.per_io_iops {
                op.iops_samples.record(1);
            }
        }
        if let Some(s) = &mut self.series {
            let dispatch_lat = done.saturating_sub(t.dispatched_ns);
            s.record(req.op, done, clat, dispatch_lat, req.len_bytes);
        }
        if let Some(logs) = &mut self.logs
            && let Some(io) = SampleIo::of(req)
        {
            // fio's epoch: the end of the ramp (the job's start without one).
            let epoch = self.start_ns + self.ramp_ns;
            logs.completed((done - epoch) / 1_000_000, lat, clat, io);
            // fio logs a submission latency only once the ramp is over.
            if let Some(slat) = slat
                && t.dispatched_ns >= epoch
            {
                logs.submitted(t.dispatched_ns, slat, io);
            }
        }
        self.last_complete_ns = self.last_complete_ns.max(done);
    }
    /// fio's `reset_all_stats`: statistics start again at `now`.
    pub(super) fn reset_stats(&mut self, now: Ns) {
        self.stats = JobStats::default();
        self.ramp_ns = now - self.start_ns;
        self.bw_sampler.start_ns = now;
        self.bw_sampler.amount = [0; 4];
        self.iops_sampler.start_ns = now;
        self.iops_sampler.amount = [0; 4];
        self.last_complete_ns = now;
    }
    pub fn into_result(mut self) -> JobResult {
        self.stats.error = self.error;
        // fio reports the depth a latency search settled at, else `iodepth` as written.
        self.stats.latency_depth = self.latency_target.as_ref().map_or(0, |lt| lt.qd);
        self.stats.steadystate = self.steadystate.map(|s| s.report);
        JobResult {
            name: self.name,
            def: self.def,
            clone: self.clone,
            group: self.report_group,
            stats: self.stats,
            issued: self.issued,
        }
    }
    /// The job's results so far, its books closed as at its last completion (fio's
    /// `--status-interval` dump), the run going on.
    pub fn snapshot(&self) -> JobResult {
        let mut stats = self.stats.clone();
        let end = self.last_complete_ns;
        let epoch = self.ramp_end();
        // A snapshot writes no log lines: the run writes them.
        self.bw_sampler
            .clone()
            .close_until(end, &mut stats, None, epoch);
        self.iops_sampler
            .clone()
            .close_until(end, &mut stats, None, epoch);
        stats.runtime_ns = end.saturating_sub(self.ramp_end());
        stats.error = self.error;
        stats.latency_depth = self.latency_target.as_ref().map_or(0, |lt| lt.qd);
        stats.steadystate = self.steadystate.as_ref().map(|s| s.report.clone());
        JobResult {
            name: self.name.clone(),
            def: self.def,
            clone: self.clone,
            group: self.report_group,
            stats,
            issued: self.issued,
        }
    }
    /// Closes the job's books at the end of the run.
    pub fn finish_stats(&mut self) {
        let end = self.last_complete_ns;
        let epoch = self.ramp_end();
        let (bw_log, iops_log) = match self.logs.as_deref_mut() {
            Some(l) => l.averaged_bw_iops(),
            None => (None, None),
        };
        // fio's helper thread samples a running job only: a window that closes as the job ends
        // is not sampled (measured: rate_iops=10 or 3, time_based, 1 s: one 500 ms sample).
        // Windows up to the last completion were closed by it (`record`).
        let sampled_to = end.saturating_sub(1);
        self.bw_sampler
            .close_until(sampled_to, &mut self.stats, bw_log, epoch);
        self.iops_sampler
            .close_until(sampled_to, &mut self.stats, iops_log, epoch);
        self.stats.runtime_ns = end.saturating_sub(self.ramp_end());
        if let Some(s) = &mut self.series {
            s.finish(end);
        }
        if let Some(logs) = &mut self.logs {
            logs.finish(epoch, end.saturating_sub(epoch) / 1_000_000);
        }
    }
}
