//! Where a job's I/Os come from: its generator, a trace replayed at its timestamps, or an
//! application's thread (`app`).

use super::*;

/// Where a job's I/Os come from.
pub enum Source {
    Gen(Box<JobGen>),
    Trace(Box<TraceSource>),
    /// A thread of an application (`app=`): its calls go through `JobRun::pump_app`.
    App(Box<app::AppSource>),
}

/// Open-loop replay of a trace at its timestamps (scaled by the speed), offsets wrapped into
/// the device.
pub struct TraceSource {
    pub reader: TraceReader<Box<dyn BufRead>>,
    pub speed: ReplaySpeed,
    pub capacity_bytes: u64,
}

impl Source {
    pub(super) fn next(&mut self) -> Result<Option<GenIo>, WorkloadError> {
        match self {
            Source::Gen(g) => Ok(g.next_io()),
            Source::App(_) => Ok(None),
            Source::Trace(t) => {
                let Some(rec) = t.reader.next().transpose()? else {
                    return Ok(None);
                };
                let len = rec.len_bytes.min(t.capacity_bytes);
                let span = t.capacity_bytes - len + 1;
                let not_before_ns = t.speed.scale(rec.timestamp_ns).ok_or_else(|| {
                    WorkloadError::at(
                        t.reader.path(),
                        rec.line,
                        format!(
                            "--speed {:?} replays this record {} s after the first, past the simulated clock's {MAX_TIME_TEXT}",
                            t.speed.get(),
                            rec.timestamp_ns as f64 / 1e9 / t.speed.get()
                        ),
                    )
                })?;
                Ok(Some(GenIo {
                    op: rec.op,
                    offset_bytes: rec.offset_bytes % span,
                    len_bytes: len,
                    prio: Default::default(),
                    not_before_ns,
                    new_pass: false,
                    limit_ended_pass: false,
                }))
            }
        }
    }
}
