//! A diagnostic of the read tail (`media.diag.slow_reads = N`): the N slowest host reads of a
//! run, each split by what it waited for and where, reported as counters of the N slowest and
//! of the N / 10 slowest. Off by default; on, it keeps one record per read in flight and N to
//! 2N finished ones, so its memory does not grow with the run's length.
//!
//! A read's time, from the job's submission to the media's end:
//! - `before_media`: host, transport and the controller's queueing;
//! - `mapping`: a flash read waits for its map entry (a mapping-cache miss reads a translation
//!   page first; `mapping_die_*` split that wait as `die_*` below split the data's);
//! - `dram_wait`, `dram`: a read served by the write cache queues for the drive's one DRAM, then
//!   is served;
//! - `die_*`: a flash read, from the moment it is queued on its die until its data is out, split
//!   by what the die was doing meanwhile (its own read and other host reads, host programs,
//!   GC reads, programs and erases, an erase being suspended counted as the erase, or idle).
//!
//! And where its copy stood: the window of the NVM set that served it, and whether another set
//! was in its deterministic window (a copy the host could have read instead), at its arrival,
//! when it was served (went to its die, or began its DRAM access) and when it ended.

use qoslab_engine::Ns;

use super::flash::{DIE_IDLE, DIE_USES};
use super::gate::WindowState;

/// Where the copies stood at one moment of a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copies {
    /// The window of the read's own NVM set.
    pub own: WindowState,
    /// Another set was in DTWin.
    pub other_deterministic: bool,
}

impl Default for Copies {
    fn default() -> Self {
        Copies {
            own: WindowState::Off,
            other_deterministic: false,
        }
    }
}

/// One read's times (of its last part, for a read of several pages).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadTrace {
    /// A read of one page (only those are traced).
    pub traced: bool,
    pub queued_ns: Ns,
    pub media_start_ns: Ns,
    pub done_ns: Ns,
    pub cache_hit: bool,
    pub dram_asked_ns: Ns,
    pub dram_start_ns: Ns,
    pub dram_done_ns: Ns,
    /// When the flash read was queued on its die (its map entry known), and when its data was
    /// out.
    pub flash_queued_ns: Ns,
    pub flash_done_ns: Ns,
    /// The die's usage when the read was queued, then (once it ended) what the die did
    /// meanwhile.
    pub die_ns: [Ns; DIE_USES],
    /// The same for the die of the translation page a mapping-cache miss waited for.
    pub mapping_die_ns: [Ns; DIE_USES],
    pub at_arrival: Copies,
    pub at_service: Copies,
    pub at_done: Copies,
}

impl ReadTrace {
    pub fn latency_ns(&self) -> Ns {
        self.done_ns - self.queued_ns
    }
}

/// The slowest reads so far.
#[derive(Debug)]
pub struct SlowReads {
    keep: usize,
    /// (latency, arrival order, trace): the `keep` slowest once sorted.
    kept: Vec<(Ns, u64, ReadTrace)>,
    seen: u64,
}

/// The names of the die's uses in the counters.
fn use_name(u: usize) -> String {
    if u == DIE_IDLE {
        return "die_idle".into();
    }
    let class = ["mapping", "host_read", "host_write", "gc"][u / 3];
    let kind = ["read", "program", "erase"][u % 3];
    format!("die_{class}_{kind}")
}

impl SlowReads {
    pub fn new(keep: usize) -> Self {
        SlowReads {
            keep,
            kept: Vec::with_capacity(2 * keep),
            seen: 0,
        }
    }

    pub fn record(&mut self, t: ReadTrace) {
        self.seen += 1;
        self.kept.push((t.latency_ns(), self.seen, t));
        if self.kept.len() >= 2 * self.keep {
            self.trim();
        }
    }

    /// The reads kept (at least the `keep` slowest), in no particular order.
    pub fn reads(&self) -> impl Iterator<Item = ReadTrace> + '_ {
        self.kept.iter().map(|k| k.2)
    }

    fn trim(&mut self) {
        // Slowest first; of equal latency, the earlier read.
        self.kept
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        self.kept.truncate(self.keep);
    }

    /// Counters of the `keep` slowest reads (`slowest_*`) and of the tenth of them that is
    /// slowest (`slowest_tenth_*`): counts of where the copies stood, mean times in us.
    pub fn counters(&self) -> Vec<(String, f64)> {
        let mut kept = self.kept.clone();
        kept.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        kept.truncate(self.keep);
        let mut out = vec![("slowest_reads_seen".to_string(), self.seen as f64)];
        for (group, n) in [
            ("slowest", kept.len()),
            ("slowest_tenth", kept.len().div_ceil(10)),
        ] {
            let reads: Vec<&ReadTrace> = kept[..n].iter().map(|k| &k.2).collect();
            summarise(group, &reads, &mut out);
        }
        out
    }
}

fn summarise(group: &str, reads: &[&ReadTrace], out: &mut Vec<(String, f64)>) {
    let n = reads.len().max(1) as f64;
    let mean_us =
        |f: &dyn Fn(&ReadTrace) -> Ns| reads.iter().map(|t| f(t) as f64).sum::<f64>() / n / 1e3;
    let mut put = |name: &str, v: f64| out.push((format!("{group}_{name}"), v));
    put("reads", reads.len() as f64);
    put(
        "latency_min_us",
        reads.iter().map(|t| t.latency_ns()).min().unwrap_or(0) as f64 / 1e3,
    );
    put("latency_mean_us", mean_us(&|t| t.latency_ns()));
    put(
        "cache_hits",
        reads.iter().filter(|t| t.cache_hit).count() as f64,
    );
    put(
        "before_media_us",
        mean_us(&|t| t.media_start_ns - t.queued_ns),
    );
    put(
        "mapping_us",
        mean_us(&|t| {
            if t.cache_hit {
                0
            } else {
                // A read that never went to flash (a page never written, when such
                // reads complete at once) waited for no map entry.
                t.flash_queued_ns.saturating_sub(t.media_start_ns)
            }
        }),
    );
    put(
        "dram_wait_us",
        mean_us(&|t| {
            if t.cache_hit {
                t.dram_start_ns.saturating_sub(t.dram_asked_ns)
            } else {
                0
            }
        }),
    );
    put(
        "dram_us",
        mean_us(&|t| {
            if t.cache_hit {
                t.dram_done_ns.saturating_sub(t.dram_start_ns)
            } else {
                0
            }
        }),
    );
    for u in 0..DIE_USES {
        let name = use_name(u);
        let v = mean_us(&|t| if t.cache_hit { 0 } else { t.die_ns[u] });
        out.push((format!("{group}_{name}_us"), v));
        let v = mean_us(&|t| if t.cache_hit { 0 } else { t.mapping_die_ns[u] });
        out.push((format!("{group}_mapping_{name}_us"), v));
    }
    for (moment, pick) in [
        (
            "arrival",
            (|t: &ReadTrace| t.at_arrival) as fn(&ReadTrace) -> Copies,
        ),
        ("service", |t| t.at_service),
        ("done", |t| t.at_done),
    ] {
        for (state, name) in [
            (WindowState::Deterministic, "dtwin"),
            (WindowState::Entering, "entering"),
            (WindowState::NonDeterministic, "ndwin"),
            (WindowState::Off, "no_window"),
        ] {
            let c = reads.iter().filter(|t| pick(t).own == state).count();
            out.push((format!("{group}_{moment}_own_{name}"), c as f64));
        }
        let c = reads
            .iter()
            .filter(|t| pick(t).own != WindowState::Deterministic && pick(t).other_deterministic)
            .count();
        out.push((format!("{group}_{moment}_other_dtwin"), c as f64));
    }
}
