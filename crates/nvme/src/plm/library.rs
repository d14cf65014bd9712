//! The PLM host library (a replica policy, `host.replicas = "plm"`): copies of the data on
//! NVM sets with Predictable Latency Mode, each read sent to a copy in its deterministic window,
//! the windows of the copies taking turns, and (with `coordinate`) the coordinator sharing each
//! window's deterministic counts among the hosts.
//!
//! At time 0 the library enables the mode on every copy (Set Features 13h) and reads the
//! Predictable Latency Per NVM Set log page (0Ah) of the first: DTWIN Reads Typical is the
//! capacity C of a window, DTWIN Time Maximum its length T. Window n is `[n T, (n + 1) T)`
//! (with `counts_run_out = end_window`, a window lasts T from its start or until its counts
//! are all used, whichever is first); at its start the library asks copy `n mod copies` into
//! DTWin (Set Features 14h) and reads the log page until the device says the copy is in DTWin
//! (every `poll_ns`: the device enters DTWin once its deferred work is done); only then does it
//! ask the previous copy out, so that a deterministic copy is there throughout. With `drain` it
//! asks the previous copy out only once the reads it sent there have completed (none goes
//! there after the turn), so that no read already queued at that copy waits behind the
//! background work NDWin resumes. An asynchronous event (a copy left DTWin on its own) makes
//! it read the aggregate log page (0Bh) and the log page of each set listed.
//!
//! A read takes one count per 4 KiB it reads (the unit of DTWIN Reads Typical). It is
//! *covered* when its host holds its counts (its allocation, or extra counts the coordinator
//! grants when it runs out; without `coordinate` every read is covered). A covered read goes
//! to a copy in DTWin, an uncovered one to a copy that is not; with no copy of the kind
//! wanted, to the other kind. While the window's copy is still entering DTWin, a covered read
//! goes to the previous copy, still in DTWin; with `handover_reads = within_budget` only while
//! that DTWin's reads stay within DTWIN Reads Typical, else to the entering copy. With
//! `end_window`, a read that finds every count of the window used (all the hosts hold spent,
//! the pool empty) ends the window instead, as the PLMC paper's "premature end" does, and is
//! covered by the next one's counts. With `dtwin_copy`, an uncovered read goes where a covered
//! one would (the counts then only account for it). With `hold`, an uncovered read goes
//! nowhere yet: the host keeps it, and at the next window's start the held reads, oldest
//! first and before any read arriving then, take that window's counts and go to a copy in
//! DTWin whose DTWin has room for them within DTWIN Reads Typical (one its host's new counts do
//! not cover either stays held); while no copy has (the window's copy still entering, the
//! previous one's DTWin at its budget) they wait for the window's copy to enter. Writes go to
//! every copy.
//!
//! The host-directed predictor needs each window's demand in advance: `demands` names a CSV
//! file of `window,host,class,demand` rows (the input of `qoslab plm coordinate`), its windows
//! in order and its hosts in order of first appearance being the run's windows and hosts.
//! Messages between the hosts and the coordinator take no simulated time.

use std::path::Path;

use qoslab_engine::{Command, ConfigError, Control, ControlStatus, Notice, Ns};

use super::allocation::{self, AllocationSetup};
use super::coordinator::{Coordinator, DemandTable, Predictor, QosClass, RatioHist};
use crate::replicas::{API, ReplicaIo, ReplicaOps, ReplicaPolicy, ReplicaSetup, Route};

qoslab_engine::choice! {
    /// How the coordinator predicts a host's need.
    pub enum PredictorKind { Exact = "exact", Ewma = "ewma" }
}

qoslab_engine::choice! {
    /// What a read does when its host's counts are spent and the coordinator grants it none.
    pub enum CountsRunOut {
        NdwinCopy = "ndwin_copy",
        EndWindow = "end_window",
        DtwinCopy = "dtwin_copy",
        Hold = "hold",
    }
}

qoslab_engine::choice! {
    /// Where a covered read goes while its window's copy is still entering DTWin.
    pub enum HandoverReads { PreviousCopy = "previous_copy", WithinBudget = "within_budget" }
}

qoslab_engine::settings! {
    /// `[host.plm]`.
    pub struct PlmLibraryConfig in PLM_LIBRARY_TUNABLES {
        copies: u32 = count(2, "copies of the data: namespaces 1 to copies, each an NVM set in Predictable Latency Mode; the sets take turns in DTWin").range(1.0, 64.0),
        coordinate: bool = flag(true, "share each window's deterministic counts among the hosts (the PLM coordinator); false: every read goes to a copy in DTWin"),
        policy: String = text("sp", "how the coordinator splits the counts beyond each host's minimum: an allocation policy's name (sp: strict priority; fr: fixed ratio; proportional; maxmin)"),
        predictor: PredictorKind = choice(PredictorKind::Ewma, "exact: host-directed, each window's demand known in advance (from `demands`); ewma: coordinator-directed, P(n+1) = zeta D(n) + (1 - zeta) P(n)"),
        zeta: f64 = ratio(0.5, "smoothing constant of the ewma predictor"),
        initial: f64 = real(0.0, "P(0) of the ewma predictor; 0 = capacity / hosts"),
        min_share: f64 = ratio(0.5, "each host's minimum when requests exceed the capacity: min(requested, floor(capacity x min_share / hosts))"),
        ratios: Vec<f64> = reals(&[0.5, 0.3, 0.2], "fixed ratio: the share of the high, medium and low classes"),
        classes: String = text("high,medium,low", "the QoS class of host 0, 1, ... (high, medium or low), comma separated"),
        demands: String = text("", "exact predictor: CSV of window,host,class,demand rows, the demand of every window (relative to the device file)"),
        handover_ns: Ns = ns(0, "the copies take turns this long before the DTWin of the copy in it reaches DTWIN Time Maximum (windows of T - handover_ns), so that the copy asked in next has that long to finish its deferred work while the other is still deterministic"),
        poll_ns: Ns = ns(1_000_000, "how often the host reads the log page while a copy it asked into DTWin is not in it yet").range(1.0, 1e12),
        release_delay_ns: Ns = ns(0, "once the next copy is in DTWin, the host sends no more reads to the previous one at once but asks it out of DTWin (into NDWin, where its deferred background work resumes) only this long after, so that the reads already sent to it finish in DTWin; 0: at once"),
        drain: bool = flag(true, "once the next copy is in DTWin, the host sends no more reads to the previous one and asks it out of DTWin only when the reads it sent there have all completed (and release_delay_ns has passed), so that they finish in DTWin; false: at once (or after release_delay_ns)"),
        counts_run_out: CountsRunOut = choice(CountsRunOut::NdwinCopy, "what a read does when its host's counts are spent and the coordinator grants it none: ndwin_copy, it goes (not covered) to a copy not in DTWin; end_window, the same while counts are left in the window (held by another host), but once the window's C counts are all used it ends there, before its time (the PLMC paper's premature end): the next window begins at once with its copy and new counts, the read its first, and the reads sent to the ended window's copy finish there (with drain); dtwin_copy, it goes to the copy in DTWin all the same (still not covered: the deficiency counts it), as a host treating its counts as accounting only; hold, the host keeps it (not covered: the deficiency counts it) until the next window's start, where the held reads, oldest first and ahead of any new read, take that window's counts and go to a copy in DTWin whose DTWin has room for them within DTWIN Reads Typical, the window's copy first (while none has, as when the window's copy is still entering and the previous one's DTWin has had its budget, they wait for the window's copy to enter; one still not covered stays held)"),
        handover_reads: HandoverReads = choice(HandoverReads::PreviousCopy, "where a covered read goes while its window's copy is still entering DTWin (the previous copy still in it): previous_copy, to the previous copy, however many reads its DTWin has had; within_budget, there only while the 4 KiB reads the host has sent that copy since it asked it into DTWin (those then in flight included) stay within DTWIN Reads Typical, as a host keeping the DTWin's reads budget does, and otherwise to the copy being asked in"),
    }
}

pub static OPS: ReplicaOps = ReplicaOps {
    name: "plm",
    help: "Predictable Latency Mode copies: reads to a copy in its deterministic window, windows taking turns, the PLM coordinator",
    api_version: API,
    tunables: PLM_LIBRARY_TUNABLES,
    needs_plm: true,
    build: Some(build),
};

fn build(s: &ReplicaSetup<'_>) -> Result<Box<dyn ReplicaPolicy>, ConfigError> {
    let cfg = PlmLibraryConfig::from_settings(s.settings);
    let field =
        |name: &str, msg: String| ConfigError::new(format!("field 'host.plm.{name}': {msg}"));
    let classes: Vec<QosClass> = cfg
        .classes
        .split(',')
        .map(|w| {
            QosClass::parse(w.trim()).ok_or_else(|| {
                field(
                    "classes",
                    format!("expected high, medium or low, got '{}'", w.trim()),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    if classes.len() < usize::from(s.hosts) {
        return Err(field(
            "classes",
            format!("names {} classes for {} hosts", classes.len(), s.hosts),
        ));
    }
    if cfg.ratios.len() != 3 {
        return Err(field(
            "ratios",
            format!(
                "expected 3 shares (high, medium, low), got {}",
                cfg.ratios.len()
            ),
        ));
    }
    allocation::lookup("host.plm.policy", &cfg.policy)?;
    let oracle = match cfg.predictor {
        PredictorKind::Exact if cfg.coordinate => {
            if cfg.demands.is_empty() {
                return Err(field(
                    "demands",
                    "the exact predictor needs each window's demands (a CSV file)".into(),
                ));
            }
            let path = match s.config_dir {
                Some(dir) if Path::new(&cfg.demands).is_relative() => dir.join(&cfg.demands),
                _ => Path::new(&cfg.demands).to_path_buf(),
            };
            read_demands(&path, usize::from(s.hosts))?
        }
        _ => Vec::new(),
    };
    Ok(Box::new(PlmLibrary::new(
        cfg,
        classes[..usize::from(s.hosts)].to_vec(),
        oracle,
    )))
}

/// The demands of a `window,host,class,demand` CSV: `[window][host]`, windows and hosts in
/// order of first appearance (a host missing from a window demands nothing there).
pub fn read_demands(path: &Path, hosts: usize) -> Result<Vec<Vec<u64>>, ConfigError> {
    let table = DemandTable::read(path)?;
    if table.hosts.len() > hosts {
        return Err(ConfigError::in_file(
            path,
            format!(
                "names {} hosts, but the path has {hosts} host(s)",
                table.hosts.len()
            ),
        ));
    }
    Ok(table
        .demand
        .into_iter()
        .map(|mut d| {
            d.resize(hosts, 0);
            d
        })
        .collect())
}

const WAKE_BOUNDARY: u32 = 0;
const WAKE_POLL: u32 = 1;
/// WAKE_RELEASE + copy: ask `copy` out of DTWin (release_delay_ns after the next one entered).
const WAKE_RELEASE: u32 = 2;

/// Log page and feature identifiers (NVMe 1.4).
const FID_PLM_CONFIG: u8 = 0x13;
const FID_PLM_WINDOW: u8 = 0x14;
const LID_PER_SET: u8 = 0x0A;
const LID_AGGREGATE: u8 = 0x0B;

#[derive(Clone, Debug, Default)]
struct HostStats {
    windows: u64,
    reads: u64,
    covered: u64,
    /// Reads sent to a copy the host did not know to be in DTWin.
    to_ndwin: u64,
    /// Reads held (`hold`), once each however many window starts they waited.
    held: u64,
    utilization: RatioHist,
    deficiency: RatioHist,
}

pub struct PlmLibrary {
    cfg: PlmLibraryConfig,
    classes: Vec<QosClass>,
    oracle: Vec<Vec<u64>>,
    coordinator: Option<Coordinator>,
    capacity: u64,
    window_ns: Ns,
    /// The current window, the row of `demands` it reads (the one of the window of T it
    /// began in: the same as `window` unless windows ended early) and when the next begins.
    window: u64,
    slot: u64,
    next_boundary_ns: Ns,
    /// Windows that ended before their time because a read's counts ran out (`end_window`).
    early_ends: u64,
    /// What the host knows of each copy: in DTWin or not.
    dtwin: Vec<bool>,
    polling: bool,
    /// This window's reads and counts left, per host.
    demand: Vec<u64>,
    counts_left: Vec<u64>,
    rotate: u32,
    stats: Vec<HostStats>,
    reads_to_dtwin: u64,
    reads_to_ndwin: u64,
    late_windows: u64,
    events: u64,
    unavailable: bool,
    /// Reads sent to each copy and not completed yet.
    in_flight: Vec<u64>,
    /// Per copy being drained: the turn, and the earliest time it may be asked out.
    draining: Vec<Option<(Ns, Ns)>>,
    /// 4 KiB units sent to each copy since it was last asked into DTWin (with the reads then
    /// in flight, at least a unit each), and the covered reads of an entry wait sent to the
    /// entering copy because the previous one's reads budget had no room (`within_budget`).
    dtwin_units: Vec<u64>,
    past_budget: u64,
    /// Reads held until a window's counts cover them (`hold`), oldest first: host, 4 KiB
    /// units, when held; whether they wait for the window's copy to enter DTWin; and, over
    /// the released, their count, total and longest wait, and those released at an entry.
    held: std::collections::VecDeque<(usize, u64, Ns)>,
    held_until_entry: bool,
    released: u64,
    held_wait_sum_ns: Ns,
    held_wait_max_ns: Ns,
    released_at_entry: u64,
    /// Instants at which held reads were released, the most released at one, and those
    /// released to a copy other than the window's (the previous one, while the window's is
    /// still entering DTWin).
    release_instants: u64,
    release_max: u64,
    released_to_previous: u64,
    /// How long each drained copy stayed in DTWin after the turn: count, sum and maximum.
    drains: u64,
    drain_sum_ns: Ns,
    drain_max_ns: Ns,
}

impl PlmLibrary {
    fn new(cfg: PlmLibraryConfig, classes: Vec<QosClass>, oracle: Vec<Vec<u64>>) -> Self {
        let k = classes.len();
        let copies = cfg.copies as usize;
        PlmLibrary {
            dtwin: vec![false; copies],
            cfg,
            oracle,
            coordinator: None,
            capacity: 0,
            window_ns: 0,
            window: 0,
            slot: 0,
            next_boundary_ns: Ns::MAX,
            early_ends: 0,
            polling: false,
            demand: vec![0; k],
            counts_left: vec![0; k],
            rotate: 0,
            stats: vec![HostStats::default(); k],
            reads_to_dtwin: 0,
            reads_to_ndwin: 0,
            late_windows: 0,
            events: 0,
            unavailable: false,
            in_flight: vec![0; copies],
            draining: vec![None; copies],
            dtwin_units: vec![0; copies],
            past_budget: 0,
            held: std::collections::VecDeque::new(),
            held_until_entry: false,
            released: 0,
            held_wait_sum_ns: 0,
            held_wait_max_ns: 0,
            released_at_entry: 0,
            release_instants: 0,
            release_max: 0,
            released_to_previous: 0,
            drains: 0,
            drain_sum_ns: 0,
            drain_max_ns: 0,
            classes,
        }
    }

    fn set_feature(io: &mut ReplicaIo<'_>, fid: u8, copy: u32, value: u32) -> ControlStatus {
        let mut msg = Control::new(
            io.now_ns,
            0,
            Command::SetFeature {
                fid,
                set: copy as u16 + 1,
                value,
            },
        );
        io.control(&mut msg);
        msg.status
    }

    fn log_page(io: &mut ReplicaIo<'_>, lid: u8, set: u16) -> Option<Vec<u8>> {
        let mut msg = Control::new(
            io.now_ns,
            0,
            Command::GetLogPage {
                lid,
                set,
                data: Vec::new(),
            },
        );
        io.control(&mut msg);
        match (msg.status, msg.command) {
            (ControlStatus::Success, Command::GetLogPage { data, .. }) => Some(data),
            _ => None,
        }
    }

    /// Reads the window status of `copy` from its log page.
    fn refresh(&mut self, copy: u32, io: &mut ReplicaIo<'_>) {
        if let Some(page) = Self::log_page(io, LID_PER_SET, copy as u16 + 1) {
            self.dtwin[copy as usize] = page[0] & 0b111 == 1;
        }
    }

    fn active(&self) -> u32 {
        (self.window % u64::from(self.cfg.copies)) as u32
    }

    fn oracle_of(&self, window: u64) -> Vec<u64> {
        self.oracle
            .get(window as usize)
            .cloned()
            .unwrap_or_else(|| vec![0; self.classes.len()])
    }

    /// Starts window `self.window` at `start_ns`: its copy asked into DTWin, the previous one
    /// out, counts allocated; it lasts until `start_ns` + T (unless its counts run out first,
    /// with `end_window`).
    fn begin_window(&mut self, start_ns: Ns, io: &mut ReplicaIo<'_>) {
        let active = self.active();
        // Asked in again before its drain ended (more copies than windows it took): it stays,
        // its DTWin and that DTWin's reads going on; otherwise a new DTWin counts from here
        // (the drive counts the reads that arrive once it is in: this is at least that).
        if self.draining[active as usize].take().is_none() {
            self.dtwin_units[active as usize] = self.in_flight[active as usize];
        }
        Self::set_feature(io, FID_PLM_WINDOW, active, 0b001);
        self.refresh(active, io);
        if self.dtwin[active as usize] {
            self.release_previous(io);
        } else {
            // The previous copy stays in DTWin (until its own time maximum) while this one
            // finishes its deferred work, so that reads still find a deterministic copy.
            self.late_windows += 1;
            if !self.polling {
                self.polling = true;
                io.wake_at(io.now_ns + self.cfg.poll_ns, WAKE_POLL);
            }
        }
        self.slot = start_ns / self.window_ns;
        let exact = self.oracle_of(self.slot);
        if let Some(c) = &mut self.coordinator {
            c.begin_window(Some(&exact));
            for h in 0..self.classes.len() {
                self.counts_left[h] = c.host(h).allocated;
            }
        }
        self.next_boundary_ns = start_ns + self.window_ns;
        io.wake_at(self.next_boundary_ns, WAKE_BOUNDARY);
        if !self.held.is_empty() {
            self.release_held(io);
        }
    }

    /// The held reads, oldest first, take this window's counts and go to a copy in DTWin whose
    /// DTWin has room for them within DTWIN Reads Typical, the window's copy first; one its
    /// host's counts do not cover stays held. While no copy in DTWin has room (the window's
    /// copy still entering, the previous one's DTWin at its budget, or no copy in DTWin at
    /// all), the rest wait, in their order, for the window's copy to enter.
    fn release_held(&mut self, io: &mut ReplicaIo<'_>) {
        let at_entry = std::mem::take(&mut self.held_until_entry);
        let before = self.released;
        let mut blocked = false;
        for _ in 0..self.held.len() {
            let (h, units, since) = self.held.pop_front().expect("counted");
            let room = if blocked {
                None
            } else {
                self.dtwin_copy_with_room(units)
            };
            let Some(copy) = room else {
                // This one and those behind it wait: for the window's copy to enter, if it is
                // not in DTWin yet, else for the next window.
                blocked = true;
                self.held_until_entry = !self.dtwin[self.active() as usize];
                if !self.held_until_entry {
                    // Demand of this window that its counts (all its DTWin takes) miss.
                    self.demand[h] += units;
                }
                self.held.push_back((h, units, since));
                io.release(0);
                continue;
            };
            // The read is demand of this window too: the host needs its counts here.
            self.demand[h] += units;
            if !self.cover(h, units) {
                self.held.push_back((h, units, since));
                io.release(0);
                continue;
            }
            self.stats[h].covered += 1;
            self.released_to_previous += u64::from(copy != self.active());
            self.send(h, copy, units);
            let waited = io.now_ns - since;
            self.released += 1;
            self.released_at_entry += u64::from(at_entry);
            self.held_wait_sum_ns += waited;
            self.held_wait_max_ns = self.held_wait_max_ns.max(waited);
            io.release(copy + 1);
        }
        let now = self.released - before;
        if now > 0 {
            self.release_instants += 1;
            self.release_max = self.release_max.max(now);
        }
    }

    /// A copy in DTWin (as the host knows) whose DTWin has room for `units` more within DTWIN
    /// Reads Typical, the window's copy first.
    fn dtwin_copy_with_room(&self, units: u64) -> Option<u32> {
        let fits = |c: u32| {
            self.dtwin[c as usize] && self.dtwin_units[c as usize] + units <= self.capacity
        };
        let active = self.active();
        if fits(active) {
            return Some(active);
        }
        (0..self.cfg.copies).find(|&c| fits(c))
    }

    /// The copy a covered read of `units` goes to: one in DTWin, the window's first; while it
    /// is still entering, the previous one (with `within_budget`, only while that DTWin's
    /// reads stay within DTWIN Reads Typical).
    fn covered_copy(&mut self, units: u64) -> u32 {
        let copy = self.pick(true);
        if self.cfg.handover_reads == HandoverReads::WithinBudget
            && copy != self.active()
            && self.dtwin[copy as usize]
            && self.dtwin_units[copy as usize] + units > self.capacity
        {
            // The PLMC paper's host accesses a set "during DTWin while respecting DTWin
            // attribute values": the previous copy's DTWin has had its DTWIN Reads Typical,
            // so the read goes to the copy being asked in (held: it starts no background work)
            // rather than end that DTWin on its reads.
            self.past_budget += 1;
            return self.pick(false);
        }
        copy
    }

    /// Books a read of host `h` of `units` sent to `copy`.
    fn send(&mut self, h: usize, copy: u32, units: u64) {
        self.dtwin_units[copy as usize] += units;
        self.in_flight[copy as usize] += 1;
        if self.dtwin[copy as usize] {
            self.reads_to_dtwin += 1;
        } else {
            self.reads_to_ndwin += 1;
            self.stats[h].to_ndwin += 1;
        }
    }

    /// Asks the copy before the active one out of DTWin, so that it does its deferred work (at
    /// once, release_delay_ns later, or once its reads are done; no read goes to it from now).
    fn release_previous(&mut self, io: &mut ReplicaIo<'_>) {
        let copies = self.cfg.copies;
        if copies > 1 {
            let prev = (self.active() + copies - 1) % copies;
            if self.cfg.drain && self.dtwin[prev as usize] {
                let not_before = io.now_ns + self.cfg.release_delay_ns;
                self.draining[prev as usize] = Some((io.now_ns, not_before));
                if self.cfg.release_delay_ns > 0 {
                    io.wake_at(not_before, WAKE_RELEASE + prev);
                }
                self.dtwin[prev as usize] = false;
                self.end_drain(prev, io);
                return;
            }
            if self.cfg.release_delay_ns == 0 {
                Self::set_feature(io, FID_PLM_WINDOW, prev, 0b010);
            } else if self.dtwin[prev as usize] {
                io.wake_at(io.now_ns + self.cfg.release_delay_ns, WAKE_RELEASE + prev);
            }
            self.dtwin[prev as usize] = false;
        }
    }

    /// Asks draining `copy` out of DTWin if its reads are all done and its delay has passed.
    fn end_drain(&mut self, copy: u32, io: &mut ReplicaIo<'_>) {
        let c = copy as usize;
        if let Some((turn, not_before)) = self.draining[c]
            && self.in_flight[c] == 0
            && io.now_ns >= not_before
        {
            self.draining[c] = None;
            let waited = io.now_ns - turn;
            self.drains += 1;
            self.drain_sum_ns += waited;
            self.drain_max_ns = self.drain_max_ns.max(waited);
            Self::set_feature(io, FID_PLM_WINDOW, copy, 0b010);
        }
    }

    /// Ends the current window and starts the next at `start_ns`.
    fn boundary(&mut self, start_ns: Ns, io: &mut ReplicaIo<'_>) {
        if let Some(c) = &mut self.coordinator {
            for (h, w) in c.end_window(&self.demand).iter().enumerate() {
                let s = &mut self.stats[h];
                s.windows += 1;
                s.utilization.record(w.utilization());
                s.deficiency.record(w.deficiency());
            }
        }
        self.demand.iter_mut().for_each(|d| *d = 0);
        self.window += 1;
        self.begin_window(start_ns, io);
    }

    /// The window's counts not used yet: what the hosts hold and the coordinator's pool.
    fn counts_left_in_window(&self) -> u64 {
        let pool = self.coordinator.as_ref().map_or(0, Coordinator::pool_left);
        self.counts_left.iter().sum::<u64>() + pool
    }

    /// Whether `host` holds `units` counts for a read now (asking the coordinator for the
    /// shortfall if it is short), taking them if so; without the coordinator every read is.
    fn cover(&mut self, h: usize, units: u64) -> bool {
        let Some(c) = &mut self.coordinator else {
            return true;
        };
        if self.counts_left[h] < units {
            let have = c.host(h).allocated + c.host(h).extra;
            let shortfall = match self.cfg.predictor {
                PredictorKind::Exact => self
                    .oracle
                    .get(self.slot as usize)
                    .map_or(0, |d| d[h])
                    .saturating_sub(have),
                PredictorKind::Ewma => 0,
            }
            .max(units - self.counts_left[h]);
            self.counts_left[h] += c.ask_extra(h, shortfall);
        }
        if self.counts_left[h] >= units {
            self.counts_left[h] -= units;
            true
        } else {
            false
        }
    }

    /// A copy of the kind wanted (in DTWin or not), the active copy first, else any.
    fn pick(&mut self, in_dtwin: bool) -> u32 {
        let copies = self.cfg.copies;
        let active = self.active();
        if in_dtwin && self.dtwin[active as usize] {
            return active;
        }
        for step in 0..copies {
            let c = (self.rotate + step) % copies;
            if self.dtwin[c as usize] == in_dtwin {
                self.rotate = (c + 1) % copies;
                return c;
            }
        }
        self.rotate = (self.rotate + 1) % copies;
        self.rotate
    }
}

impl ReplicaPolicy for PlmLibrary {
    fn copies(&self) -> u32 {
        self.cfg.copies
    }

    fn start(&mut self, io: &mut ReplicaIo<'_>) {
        for copy in 0..self.cfg.copies {
            if Self::set_feature(io, FID_PLM_CONFIG, copy, 1) != ControlStatus::Success {
                self.unavailable = true;
            }
        }
        let Some(page) = Self::log_page(io, LID_PER_SET, 1) else {
            self.unavailable = true;
            return;
        };
        let field = |at: usize| u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"));
        self.capacity = field(32);
        // A copy enters DTWin only once its deferred work is done, a few ms after it is asked;
        // windows shorter than DTWIN Time Maximum keep the previous copy deterministic until
        // then instead of letting its DTWin run out first.
        self.window_ns = (field(48).max(1) * 1_000_000)
            .saturating_sub(self.cfg.handover_ns)
            .max(1);
        if self.cfg.coordinate {
            let build = allocation::lookup("host.plm.policy", &self.cfg.policy)
                .expect("checked at build")
                .build
                .expect("checked by the registry");
            let r = &self.cfg.ratios;
            let predictor = match self.cfg.predictor {
                PredictorKind::Exact => Predictor::Exact,
                PredictorKind::Ewma => Predictor::Ewma {
                    zeta: self.cfg.zeta,
                },
            };
            self.coordinator = Some(Coordinator::new(
                &self.classes,
                self.capacity,
                predictor,
                self.cfg.min_share,
                (self.cfg.initial > 0.0).then_some(self.cfg.initial),
                build(&AllocationSetup {
                    ratios: [r[0], r[1], r[2]],
                }),
            ));
        }
        self.begin_window(0, io);
    }

    fn route_read(&mut self, host: u16, len_bytes: u64, io: &mut ReplicaIo<'_>) -> Route {
        if self.unavailable {
            return Route::To(1);
        }
        while io.now_ns >= self.next_boundary_ns {
            self.boundary(self.next_boundary_ns, io);
        }
        let h = host as usize;
        let units = len_bytes.div_ceil(4096).max(1);
        self.stats[h].reads += 1;
        let mut covered = self.cover(h, units);
        if !covered
            && self.cfg.counts_run_out == CountsRunOut::EndWindow
            && self.counts_left_in_window() < units
        {
            // The PLMC paper (section III-C): "if all of the available DCs are exhausted early
            // ... the window also ends prematurely", the reads that arrived in it being served
            // in it. So when no host holds a count and the pool is empty, the window ends
            // here and the read is the next one's first; the ended window's copy keeps the
            // reads sent to it to their end (the drain). Once a read: one its host's new
            // counts do not cover either goes where `ndwin_copy` sends it.
            self.early_ends += 1;
            self.boundary(io.now_ns, io);
            covered = self.cover(h, units);
        }
        self.demand[h] += units;
        let copy = if covered {
            self.stats[h].covered += 1;
            self.covered_copy(units)
        } else {
            match self.cfg.counts_run_out {
                // The PLMC paper's host "needs to access the device during DTWin while
                // respecting DTWin attribute values" and, short of counts, "can request PLMC
                // for additional DC allocation" (section III-A): the read waits at the host
                // for the next window's counts, a wait of the host's, not of the device.
                CountsRunOut::Hold => {
                    self.stats[h].held += 1;
                    self.held.push_back((h, units, io.now_ns));
                    return Route::Hold;
                }
                // The counts only account (the deficiency is that of the counts): the read
                // goes to a copy in DTWin as a covered one would.
                CountsRunOut::DtwinCopy => self.pick(true),
                CountsRunOut::NdwinCopy | CountsRunOut::EndWindow => self.pick(false),
            }
        };
        self.send(h, copy, units);
        Route::To(copy + 1)
    }

    fn notice(&mut self, _host: u16, notice: Notice, io: &mut ReplicaIo<'_>) {
        let Notice::AsyncEvent { log_page, .. } = notice else {
            return;
        };
        if log_page != LID_AGGREGATE {
            return;
        }
        self.events += 1;
        let Some(page) = Self::log_page(io, LID_AGGREGATE, 0) else {
            return;
        };
        let n = u64::from_le_bytes(page[0..8].try_into().expect("8 bytes")) as usize;
        for i in 0..n {
            let id = u16::from_le_bytes([page[8 + 2 * i], page[9 + 2 * i]]);
            if id >= 1 && u32::from(id) <= self.cfg.copies {
                self.refresh(u32::from(id) - 1, io);
            }
        }
    }

    fn read_done(&mut self, nsid: u32, io: &mut ReplicaIo<'_>) {
        // A namespace route_read gave: 1 to copies.
        let copy = nsid - 1;
        let c = copy as usize;
        // Reads routed while the copies were unavailable were not counted.
        self.in_flight[c] = self.in_flight[c].saturating_sub(1);
        self.end_drain(copy, io);
    }

    fn wake(&mut self, token: u32, io: &mut ReplicaIo<'_>) {
        match token {
            WAKE_BOUNDARY => {
                while io.now_ns >= self.next_boundary_ns {
                    self.boundary(self.next_boundary_ns, io);
                }
            }
            WAKE_POLL => {
                self.polling = false;
                let active = self.active();
                // Asked again: a set whose entry an excursion cut short is back in NDWin.
                Self::set_feature(io, FID_PLM_WINDOW, active, 0b001);
                self.refresh(active, io);
                if self.dtwin[active as usize] {
                    self.release_previous(io);
                    if self.held_until_entry {
                        self.release_held(io);
                    }
                } else {
                    self.polling = true;
                    io.wake_at(io.now_ns + self.cfg.poll_ns, WAKE_POLL);
                }
            }
            t if t >= WAKE_RELEASE && self.cfg.drain => self.end_drain(t - WAKE_RELEASE, io),
            t if t >= WAKE_RELEASE => {
                let copy = t - WAKE_RELEASE;
                if copy != self.active() {
                    Self::set_feature(io, FID_PLM_WINDOW, copy, 0b010);
                }
            }
            _ => {}
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut out = vec![
            ("plm_windows".to_string(), self.window as f64),
            ("plm_capacity".into(), self.capacity as f64),
            ("plm_window_ms".into(), self.window_ns as f64 / 1e6),
            ("plm_reads_to_dtwin".into(), self.reads_to_dtwin as f64),
            ("plm_reads_to_ndwin".into(), self.reads_to_ndwin as f64),
            ("plm_late_windows".into(), self.late_windows as f64),
            ("plm_async_events".into(), self.events as f64),
            (
                "plm_unavailable".into(),
                f64::from(u8::from(self.unavailable)),
            ),
        ];
        if self.cfg.counts_run_out == CountsRunOut::EndWindow {
            out.push(("plm_windows_ended_early".into(), self.early_ends as f64));
        }
        if self.cfg.handover_reads == HandoverReads::WithinBudget {
            out.push((
                "plm_handover_reads_past_budget".into(),
                self.past_budget as f64,
            ));
        }
        if self.cfg.counts_run_out == CountsRunOut::Hold {
            // Reads held, released (each once, however many window starts it waited), those
            // released when the window's copy entered DTWin rather than at the window's
            // start, still held at the end, and the wait of the released at the host.
            let held: u64 = self.stats.iter().map(|s| s.held).sum();
            out.extend([
                ("plm_reads_held".to_string(), held as f64),
                ("plm_held_released".into(), self.released as f64),
                (
                    "plm_held_released_at_entry".into(),
                    self.released_at_entry as f64,
                ),
                ("plm_held_left".into(), self.held.len() as f64),
                (
                    "plm_held_release_instants".into(),
                    self.release_instants as f64,
                ),
                ("plm_held_release_max".into(), self.release_max as f64),
                (
                    "plm_held_released_to_previous".into(),
                    self.released_to_previous as f64,
                ),
                (
                    "plm_held_wait_mean_ms".into(),
                    self.held_wait_sum_ns as f64 / self.released.max(1) as f64 / 1e6,
                ),
                (
                    "plm_held_wait_max_ms".into(),
                    self.held_wait_max_ns as f64 / 1e6,
                ),
            ]);
        }
        if self.cfg.drain {
            // How long a copy stayed in DTWin after the turn, for its reads to complete.
            out.push(("plm_drains".into(), self.drains as f64));
            out.push((
                "plm_drain_mean_ms".into(),
                self.drain_sum_ns as f64 / self.drains.max(1) as f64 / 1e6,
            ));
            out.push(("plm_drain_max_ms".into(), self.drain_max_ns as f64 / 1e6));
        }
        for (h, s) in self.stats.iter().enumerate() {
            out.push((format!("host{h}_reads"), s.reads as f64));
            out.push((format!("host{h}_covered_reads"), s.covered as f64));
            out.push((format!("host{h}_reads_to_ndwin"), s.to_ndwin as f64));
            if self.cfg.counts_run_out == CountsRunOut::Hold {
                out.push((format!("host{h}_reads_held"), s.held as f64));
            }
            if self.coordinator.is_some() {
                out.push((format!("host{h}_windows"), s.windows as f64));
                out.push((
                    format!("host{h}_utilization_p10"),
                    s.utilization.quantile(0.10),
                ));
                out.push((format!("host{h}_utilization_min"), s.utilization.min()));
                out.push((
                    format!("host{h}_deficiency_p50"),
                    s.deficiency.quantile(0.50),
                ));
                out.push((
                    format!("host{h}_deficiency_p90"),
                    s.deficiency.quantile(0.90),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device of `copies` sets in PLM that enter DTWin at once when asked, C = 100 reads
    /// and T = 10 ms a window, answering the library's admin commands as the SSD's gate does.
    fn device(msg: &mut Control) {
        match &mut msg.command {
            Command::SetFeature { .. } => msg.status = ControlStatus::Success,
            Command::GetLogPage { lid, data, .. } if *lid == LID_PER_SET => {
                let mut page = vec![0u8; 512];
                page[0] = 1;
                page[32..40].copy_from_slice(&100u64.to_le_bytes());
                page[48..56].copy_from_slice(&10u64.to_le_bytes());
                *data = page;
                msg.status = ControlStatus::Success;
            }
            _ => {}
        }
    }

    /// A library with `settings` in `[host.plm]` for hosts of `classes`, started at time 0 on
    /// `device`.
    struct Started {
        lib: PlmLibrary,
        wakes: Vec<(Ns, u32)>,
        /// The library's decisions on held reads, in order.
        released: Vec<u32>,
    }

    /// The NSID of a read the library routed, 0 if it holds it.
    fn nsid(route: Route) -> u32 {
        match route {
            Route::To(nsid) => nsid,
            Route::Hold => 0,
        }
    }

    impl Started {
        fn new(settings: &[(&str, qoslab_engine::RawValue)], classes: Vec<QosClass>) -> Self {
            let mut s = qoslab_engine::Settings::defaults("host.plm", PLM_LIBRARY_TUNABLES);
            for (key, value) in settings {
                s.set(key, value).unwrap();
            }
            let cfg = PlmLibraryConfig::from_settings(&s);
            let mut started = Started {
                lib: PlmLibrary::new(cfg, classes, Vec::new()),
                wakes: Vec::new(),
                released: Vec::new(),
            };
            let mut control = device;
            started.lib.start(&mut ReplicaIo {
                now_ns: 0,
                control: &mut control,
                wakes: &mut started.wakes,
                released: &mut started.released,
            });
            started
        }

        /// Host `host` reads 4 KiB at `now_ns`: the NSID the library sends it to (0: held).
        fn read(&mut self, host: u16, now_ns: Ns) -> u32 {
            let mut control = device;
            let io = &mut ReplicaIo {
                now_ns,
                control: &mut control,
                wakes: &mut self.wakes,
                released: &mut self.released,
            };
            nsid(self.lib.route_read(host, 4096, io))
        }
    }

    #[test]
    fn the_timed_coordinator_records_each_window_as_the_window_level_rules_do() {
        let mut started = Started::new(&[], vec![QosClass::High, QosClass::Low]);
        // Window 0: P(0) = C / k = 50 each, 100 fit. High reads 80: 50 allocated + 30 extra
        // (the pool is 0: nothing). Low reads 10.
        for i in 0..80 {
            started.read(0, i);
        }
        for i in 0..10 {
            started.read(1, 100 + i);
        }
        // Window 1 begins at 10 ms.
        started.read(1, 10_000_000);
        let lib = started.lib;
        let c = lib.coordinator.as_ref().unwrap();
        // P(1) = 0.5 x 80 + 0.5 x 50 = 65 and 0.5 x 10 + 0.5 x 50 = 30.
        assert_eq!(c.host(0).requested, 65);
        assert_eq!(c.host(1).requested, 30);
        // Window 0: high consumed 50 of 80 (deficiency 0.375), low 10 of its 50.
        assert_eq!(lib.stats[0].deficiency.quantile(0.5), 0.375);
        assert_eq!(lib.stats[1].utilization.quantile(0.5), 0.2);
        assert_eq!(lib.stats[0].covered, 50);
    }

    /// The PLMC paper, section III-C: "if all of the available DCs are exhausted early, i.e.
    /// W_d(n) <= T_DW, the window also ends prematurely. The premature end of the window would
    /// include the service of all the requests arriving during the window." High and low
    /// share C = 100 counts a window of T = 10 ms; with P(0) = 50 each, 50 + 50 fit and the
    /// pool is empty. High reads 60 by 0.6 ms, low its 50 by 1.5 ms, then high once more at
    /// 3 ms, when every count of window 0 is used. Returns the NSID of each read, in order.
    fn reads_until_the_counts_run_out(rule: &str) -> (Vec<u32>, PlmLibrary) {
        let rule = qoslab_engine::RawValue::Text(rule.into());
        let mut started = Started::new(
            &[("counts_run_out", rule)],
            vec![QosClass::High, QosClass::Low],
        );
        let mut nsids: Vec<u32> = (0..60).map(|i| started.read(0, i * 10_000)).collect();
        nsids.extend((0..50).map(|i| started.read(1, 1_000_000 + i * 10_000)));
        nsids.push(started.read(0, 3_000_000));
        (nsids, started.lib)
    }

    #[test]
    fn with_end_window_a_window_ends_when_its_counts_are_all_used_and_the_next_begins() {
        // Copy 0 (NSID 1) is in DTWin; copy 1 (NSID 2) is not.
        for rule in ["ndwin_copy", "end_window"] {
            let (nsids, lib) = reads_until_the_counts_run_out(rule);
            // High's 50 covered reads go to the copy in DTWin, its 10 more (not covered, while
            // low still holds 50 counts: the window's counts are not all used) to the copy
            // that is not, under either rule; low's 50 to the copy in DTWin.
            assert_eq!(nsids[..50], [1; 50]);
            assert_eq!(nsids[50..60], [2; 10]);
            assert_eq!(nsids[60..110], [1; 50]);
            assert_eq!(lib.stats[1].covered, 50);
        }
        // Today's rule: high's read at 3 ms, not covered, goes to the copy not in DTWin and
        // window 0 runs its 10 ms.
        let (nsids, lib) = reads_until_the_counts_run_out("ndwin_copy");
        assert_eq!(
            (nsids[110], lib.window, lib.next_boundary_ns),
            (2, 0, 10_000_000)
        );
        assert_eq!((lib.reads_to_ndwin, lib.early_ends), (11, 0));
        // The document's: window 0 ends at 3 ms; window 1 begins then on copy 1, asked into
        // DTWin (which this device enters at once), with new counts, and lasts T, to 13 ms.
        // The read is its first, covered and sent to its copy in DTWin; the reads sent to
        // copy 0 (100 in flight) finish there: it is draining, not asked out yet.
        let (nsids, lib) = reads_until_the_counts_run_out("end_window");
        assert_eq!(
            (nsids[110], lib.window, lib.next_boundary_ns),
            (2, 1, 13_000_000)
        );
        assert_eq!((lib.reads_to_ndwin, lib.early_ends), (10, 1));
        assert!(lib.dtwin[1] && lib.draining[0].is_some());
        // Window 0 as the coordinator recorded it: high 50 of 60 covered, low all of its 50.
        // (10 / 60, in the histogram's steps of 1e-4.)
        assert_eq!(lib.stats[0].deficiency.quantile(0.5), 0.1667);
        assert_eq!(lib.stats[1].deficiency.quantile(0.5), 0.0);
        // Window 1: P(1) = 0.5 x 60 + 0.5 x 50 = 55 and 50; 105 > 100, so minimums of 25 and
        // the residual 50 by strict priority: high 30 more (55), low 20 (45); the read took one.
        let c = lib.coordinator.as_ref().unwrap();
        assert_eq!((c.host(0).allocated, c.host(1).allocated), (55, 45));
        assert_eq!(lib.counts_left, vec![54, 45]);
        assert_eq!(lib.stats[0].covered, 51);
    }

    #[test]
    fn with_dtwin_copy_a_read_its_counts_do_not_cover_goes_to_the_copy_in_dtwin_uncovered() {
        // The same reads: high's 10 beyond its 50 counts, and its read at 3 ms, go to copy 0
        // (NSID 1), in DTWin, like every other; the window runs its 10 ms.
        let (nsids, lib) = reads_until_the_counts_run_out("dtwin_copy");
        assert_eq!(nsids, [1; 111]);
        assert_eq!((lib.reads_to_ndwin, lib.reads_to_dtwin), (0, 111));
        assert_eq!((lib.window, lib.next_boundary_ns), (0, 10_000_000));
        // The counts still account: high's 11 reads beyond them are not covered.
        assert_eq!((lib.stats[0].covered, lib.stats[1].covered), (50, 50));
        assert_eq!((lib.stats[0].reads, lib.stats[0].to_ndwin), (61, 0));
    }

    /// The PLMC paper (section III-A): "a host needs to access the device during DTWin while
    /// respecting DTWin attribute values"; "If the host receives fewer than the required
    /// counts during DTWin, it can request PLMC for additional DC allocation." One high host,
    /// C = 100 counts and T = 10 ms a window (copy 0, NSID 1, in DTWin first; this device
    /// enters DTWin at once). It reads 250 times in window 0 (one every 10 us), once more at
    /// 10 ms, and window 2 begins at 20 ms.
    #[test]
    fn with_hold_a_read_its_counts_do_not_cover_waits_for_the_next_windows_counts_oldest_first() {
        let hold = qoslab_engine::RawValue::Text("hold".into());
        let mut started = Started::new(&[("counts_run_out", hold)], vec![QosClass::High]);
        // P(0) = C: 100 counts. The first 100 reads go to copy 0, the other 150 are held.
        let nsids: Vec<u32> = (0..250).map(|i| started.read(0, i * 10_000)).collect();
        assert_eq!(nsids[..100], [1; 100]);
        assert_eq!(nsids[100..], [0; 150]);
        assert!(started.released.is_empty());
        // At 10 ms, before the read arriving then, window 1 (copy 1, NSID 2) allocates
        // P(1) = 0.5 x 250 + 0.5 x 100 = 175, more than C: the minimum 50 and the residual 50,
        // 100. The 100 oldest held reads take them and go to copy 1; the 50 others stay held
        // (0), and so does the read of 10 ms, behind them.
        assert_eq!(started.read(0, 10_000_000), 0);
        assert_eq!(started.released[..100], [2; 100]);
        assert_eq!(started.released[100..], [0; 50]);
        assert_eq!(started.lib.held.len(), 51);
        assert_eq!(started.lib.held.front().unwrap().2, 2_000_000);
        // The reads sent complete (copy 0's 100 and copy 1's 100). At 20 ms window 2 (copy 0)
        // releases the 51, oldest first: 100 counts again.
        started.released.clear();
        let mut control = device;
        for nsid in [1, 2] {
            for _ in 0..100 {
                started.lib.read_done(
                    nsid,
                    &mut ReplicaIo {
                        now_ns: 15_000_000,
                        control: &mut control,
                        wakes: &mut started.wakes,
                        released: &mut started.released,
                    },
                );
            }
        }
        started.lib.wake(
            WAKE_BOUNDARY,
            &mut ReplicaIo {
                now_ns: 20_000_000,
                control: &mut control,
                wakes: &mut started.wakes,
                released: &mut started.released,
            },
        );
        assert_eq!(started.released, [1; 51]);
        let lib = &started.lib;
        assert!(lib.held.is_empty());
        assert_eq!(
            (lib.stats[0].held, lib.released, lib.released_at_entry),
            (151, 151, 0)
        );
        assert_eq!((lib.release_instants, lib.release_max), (2, 100));
        assert_eq!(lib.released_to_previous, 0);
        // Every read reached a copy in DTWin; 251 arrived, 100 + 100 + 51 covered.
        assert_eq!((lib.reads_to_dtwin, lib.reads_to_ndwin), (251, 0));
        assert_eq!((lib.stats[0].reads, lib.stats[0].covered), (251, 251));
        // The longest wait: the read of 2 ms, released at 20 ms.
        assert_eq!(lib.held_wait_max_ns, 18_000_000);
        // The deficiency of each window: window 0, 150 of its 250 reads not covered; window
        // 1, its demand the 150 held reads and the new one, 100 of them covered.
        let d = &lib.stats[0].deficiency;
        assert_eq!((d.min(), d.quantile(1.0)), (51.0 / 151.0, 0.6));
    }

    /// NVMe: a set whose reads since it entered DTWin pass DTWIN Reads Typical leaves DTWin.
    /// Copy 0 (NSID 1) gets 99 covered reads in window 0 (C = 100, one high host); at 10 ms
    /// window 1 begins on copy 1 (NSID 2), which this device puts in DTWin only at 10.5 ms,
    /// and the host reads at 10.1, 10.2 and 10.3 ms, covered by window 1's counts.
    /// `device`, but set 2 reports NDWin until 10.5 ms.
    fn late_device(msg: &mut Control) {
        device(msg);
        if let Command::GetLogPage { lid, set, data } = &mut msg.command
            && *lid == LID_PER_SET
            && *set == 2
            && msg.at_ns < 10_500_000
        {
            data[0] = 2;
        }
    }

    /// The document's host keeps each DTWin within its reads budget: one high host, C = 100;
    /// copy 0 (NSID 1) serves window 0's 100 covered reads and 5 more are held; window 1's copy
    /// (NSID 2) enters DTWin only at 10.5 ms, so at 10 ms no copy in DTWin has room for them,
    /// and they go to copy 1 at the host's poll of 11 ms, which finds it there.
    #[test]
    fn with_hold_the_held_reads_wait_for_a_dtwin_with_room_in_its_reads_budget() {
        let mut s = qoslab_engine::Settings::defaults("host.plm", PLM_LIBRARY_TUNABLES);
        s.set(
            "counts_run_out",
            &qoslab_engine::RawValue::Text("hold".into()),
        )
        .unwrap();
        let cfg = PlmLibraryConfig::from_settings(&s);
        let mut lib = PlmLibrary::new(cfg, vec![QosClass::High], Vec::new());
        let (mut wakes, mut released) = (Vec::new(), Vec::new());
        let mut at =
            |lib: &mut PlmLibrary, now_ns: Ns, f: &dyn Fn(&mut PlmLibrary, &mut ReplicaIo<'_>)| {
                let mut control = late_device;
                f(
                    lib,
                    &mut ReplicaIo {
                        now_ns,
                        control: &mut control,
                        wakes: &mut wakes,
                        released: &mut released,
                    },
                );
            };
        at(&mut lib, 0, &|lib, io| lib.start(io));
        for i in 0..105 {
            at(&mut lib, i * 10_000, &|lib, io| {
                lib.route_read(0, 4096, io);
            });
        }
        assert_eq!((lib.held.len(), lib.dtwin_units[0]), (5, 100));
        at(&mut lib, 10_000_000, &|lib, io| lib.wake(WAKE_BOUNDARY, io));
        at(&mut lib, 11_000_000, &|lib, io| lib.wake(WAKE_POLL, io));
        // At 10 ms: none released; at 11 ms: all five, to copy 1.
        assert_eq!(released, [0, 0, 0, 0, 0, 2, 2, 2, 2, 2]);
        assert_eq!((lib.released, lib.released_at_entry), (5, 5));
        assert_eq!((lib.dtwin_units[0], lib.reads_to_ndwin), (100, 0));
        // Their wait is window 1's demand only once.
        assert_eq!(lib.demand[0], 5);
    }

    #[test]
    fn within_budget_a_dtwin_gets_no_more_reads_than_dtwin_reads_typical_at_a_handover() {
        let route = |rule: &str| {
            let mut s = qoslab_engine::Settings::defaults("host.plm", PLM_LIBRARY_TUNABLES);
            let rule = qoslab_engine::RawValue::Text(rule.into());
            s.set("handover_reads", &rule).unwrap();
            let cfg = PlmLibraryConfig::from_settings(&s);
            let mut lib = PlmLibrary::new(cfg, vec![QosClass::High], Vec::new());
            let (mut wakes, mut released) = (Vec::new(), Vec::new());
            let mut read = |lib: &mut PlmLibrary, now_ns: Ns| {
                let mut control = late_device;
                let io = &mut ReplicaIo {
                    now_ns,
                    control: &mut control,
                    wakes: &mut wakes,
                    released: &mut released,
                };
                if now_ns == 0 {
                    lib.start(io);
                }
                nsid(lib.route_read(0, 4096, io))
            };
            let mut nsids: Vec<u32> = (0..99).map(|i| read(&mut lib, i * 10_000)).collect();
            for t in [10_100_000, 10_200_000, 10_300_000] {
                nsids.push(read(&mut lib, t));
            }
            assert_eq!(nsids[..99], [1; 99]);
            assert_eq!((lib.window, lib.stats[0].covered), (1, 102));
            (nsids[99..].to_vec(), lib.past_budget)
        };
        // Today's rule: the three go to copy 0, still in DTWin, whose DTWin then has 102 reads.
        assert_eq!(route("previous_copy"), (vec![1, 1, 1], 0));
        // Within the budget: copy 0 has room for one more (100); the other two go to copy 1,
        // which is being asked in.
        assert_eq!(route("within_budget"), (vec![1, 2, 2], 2));
    }

    #[test]
    fn with_a_handover_the_copies_take_turns_before_dtwin_time_maximum() {
        let handover = qoslab_engine::RawValue::Text("2ms".into());
        let mut started = Started::new(&[("handover_ns", handover)], vec![QosClass::High]);
        // DTWIN Time Maximum 10 ms less the 2 ms handover: window 1 begins at 8 ms, on copy 1.
        assert_eq!(started.lib.window_ns, 8_000_000);
        started.read(0, 7_999_999);
        assert_eq!(started.lib.window, 0);
        started.read(0, 8_000_000);
        assert_eq!((started.lib.window, started.lib.active()), (1, 1));
    }

    #[test]
    fn with_a_release_delay_the_previous_copy_is_asked_into_ndwin_that_long_after_the_turn() {
        use qoslab_engine::RawValue::{Bool, Text};
        let delay = |d: &str| [("drain", Bool(false)), ("release_delay_ns", Text(d.into()))];
        // At once: copy 1 (NSID 2, never in DTWin) at the start, then each copy at its turn.
        let (asked, _) = ndwin_requests_with(&delay("0"), &[], &[]);
        assert_eq!(asked, vec![(0, 2), (10_000_000, 1), (20_000_000, 2)]);
        // 3 ms later: copy 0 at 13 ms (copy 1, not in DTWin, needs no request), copy 1 at 23.
        let (asked, _) = ndwin_requests_with(&delay("3ms"), &[], &[]);
        assert_eq!(asked, vec![(13_000_000, 1), (23_000_000, 2)]);
    }

    /// The (time, NSID) of each request to enter NDWin when the copies take turns at 10 ms
    /// (DTWIN Time Maximum) and host 0 reads at `reads` and learns at `done` that a read of
    /// namespace NSID completed, with `settings` in `[host.plm]`; every wake-up the library
    /// asks for honoured in time order, up to 25 ms.
    fn ndwin_requests_with(
        settings: &[(&str, qoslab_engine::RawValue)],
        reads: &[Ns],
        done: &[(Ns, u32)],
    ) -> (Vec<(Ns, u16)>, PlmLibrary) {
        let mut s = qoslab_engine::Settings::defaults("host.plm", PLM_LIBRARY_TUNABLES);
        for (key, value) in settings {
            s.set(key, value).unwrap();
        }
        let cfg = PlmLibraryConfig::from_settings(&s);
        let mut lib = PlmLibrary::new(cfg, vec![QosClass::High], Vec::new());
        let mut asked = Vec::new();
        let mut control = |msg: &mut Control| {
            if let Command::SetFeature { fid, set, value } = &msg.command
                && *fid == FID_PLM_WINDOW
                && *value == 0b010
            {
                asked.push((msg.at_ns, *set));
            }
            device(msg)
        };
        let (mut wakes, mut released) = (Vec::new(), Vec::new());
        lib.start(&mut ReplicaIo {
            now_ns: 0,
            control: &mut control,
            wakes: &mut wakes,
            released: &mut released,
        });
        // Wake-ups (kind 0), reads (1) and completions (2), in time order.
        let mut due: Vec<(Ns, u32, u32)> = wakes.drain(..).map(|(at, t)| (at, 0, t)).collect();
        due.extend(reads.iter().map(|&at| (at, 1, 0)));
        due.extend(done.iter().map(|&(at, nsid)| (at, 2, nsid)));
        while let Some(&next) = due.iter().min() {
            if next.0 > 25_000_000 {
                break;
            }
            due.retain(|&e| e != next);
            let io = &mut ReplicaIo {
                now_ns: next.0,
                control: &mut control,
                wakes: &mut wakes,
                released: &mut released,
            };
            match next.1 {
                0 => lib.wake(next.2, io),
                1 => {
                    lib.route_read(0, 4096, io);
                }
                _ => lib.read_done(next.2, io),
            }
            due.extend(wakes.drain(..).map(|(at, t)| (at, 0, t)));
        }
        (asked, lib)
    }

    #[test]
    fn with_drain_the_previous_copy_is_asked_into_ndwin_once_its_last_read_completes() {
        use qoslab_engine::RawValue::{Bool, Text};
        let drain = [("drain", Bool(true))];
        // Two reads of copy 0 (NSID 1) before the turn at 10 ms, the first done before it;
        // one of copy 1 after it. Copy 0 leaves DTWin when its second read completes, at 11 ms,
        // not at the turn; copy 1's read keeps nothing waiting (it is the active copy).
        let reads = [1_000_000, 9_000_000, 10_500_000];
        let done = [(9_500_000, 1), (10_700_000, 2), (11_000_000, 1)];
        let (asked, lib) = ndwin_requests_with(&drain, &reads, &done);
        // Copy 1 (NSID 2) was never in DTWin: asked out at the start, as without drain; its
        // read done, it is asked out at the next turn, 20 ms.
        assert_eq!(asked, vec![(0, 2), (11_000_000, 1), (20_000_000, 2)]);
        assert_eq!((lib.drains, lib.drain_max_ns), (2, 1_000_000));
        assert_eq!(lib.in_flight, vec![0, 0]);
        // Without drain: at the turn, with the read still in flight.
        let (asked, _) = ndwin_requests_with(&[("drain", Bool(false))], &reads, &done);
        assert_eq!(asked, vec![(0, 2), (10_000_000, 1), (20_000_000, 2)]);
        // Nothing in flight at the turn: at once.
        let (asked, _) = ndwin_requests_with(&drain, &reads[..1], &done[..1]);
        assert_eq!(asked, vec![(0, 2), (10_000_000, 1), (20_000_000, 2)]);
        // With release_delay_ns too: whichever comes later, the delay (13 ms, 23 ms) or the
        // last completion (14 ms).
        let delay = [
            ("drain", Bool(true)),
            ("release_delay_ns", Text("3ms".into())),
        ];
        let (asked, _) = ndwin_requests_with(&delay, &reads, &done);
        assert_eq!(asked, vec![(13_000_000, 1), (23_000_000, 2)]);
        let late = [(9_500_000, 1), (14_000_000, 1)];
        let (asked, _) = ndwin_requests_with(&delay, &reads[..2], &late);
        assert_eq!(asked, vec![(14_000_000, 1), (23_000_000, 2)]);
        // Back in DTWin at 20 ms, copy 0 reads again; copy 1 drains as copy 0 did.
        let (asked, _) = ndwin_requests_with(
            &drain,
            &[1_000_000, 19_000_000],
            &[(2_000_000, 1), (21_000_000, 2)],
        );
        assert_eq!(asked, vec![(0, 2), (10_000_000, 1), (21_000_000, 2)]);
    }
}
