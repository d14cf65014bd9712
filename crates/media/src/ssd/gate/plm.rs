//! Predictable Latency Mode (NVM Express Base Specification 1.4, section 8.16; 2.1, section
//! 8.1.18) as a GC gate: each NVM set with the mode enabled alternates between a Deterministic
//! Window (DTWin), when no background work runs on it, and a Non-Deterministic Window (NDWin),
//! when the work deferred during the DTWin runs.
//!
//! - **Enabling**: Set Features, Predictable Latency Mode Config (13h), NVM Set Identifier in
//!   dword 11, bit 0 of dword 12 (Predictable Latency Enable). An enabled set starts in NDWin.
//! - **Windows**: Set Features, Predictable Latency Mode Window (14h), Window Select in bits 2:0
//!   of dword 12: 001b DTWin, 010b NDWin. A set asked into DTWin stops its background work at
//!   once: its dies start no GC operation, destage or mapping write-back from then on (the
//!   queued ones wait, page by page, for the next NDWin). It enters DTWin once the background
//!   operations its dies were running have ended and it has spent `ndwin_time_min_low_ns` in
//!   NDWin; until then it reports NDWin (the specification lets the controller delay entry by
//!   the NDWIN Time Minimum Low it advertises). The drive advertises the larger of that
//!   tunable and the longest such an operation can take (an erase and its channel transfers),
//!   so the advertised value bounds every entry's wait.
//! - **Leaving DTWin on its own** (an autonomous transition), when since entry to the DTWin the
//!   4 KiB reads exceed DTWIN Reads Typical (unless `exit_on_reads` is off: the PLMC paper
//!   says a set "may transition to NDWin if either of these limits is exceeded"), the writes (in flash pages, the drive's optimal
//!   write size) exceed DTWIN Writes Typical, DTWIN Time Maximum has passed (event type bit 14),
//!   or a Deterministic Excursion occurs: the SSD had to run background work anyway (a plane
//!   below the free-block floor, the write cache full with writes waiting; bit 15).
//! - **Reporting**: the Predictable Latency Per NVM Set log page (0Ah, 512 bytes, laid out as
//!   [`log_page`] says), the Predictable Latency Event Aggregate log page (0Bh: the number of
//!   entries, then each NVM Set Identifier with an event pending, in ascending order), and an
//!   asynchronous event (type Notice, information 04h "Predictable Latency Event Aggregate Log
//!   Change", log page 0Bh) when a set newly joins the aggregate. Reading a set's 0Ah page
//!   clears its events and takes it out of the aggregate (the Retain Asynchronous Event bit is
//!   taken as cleared).
//!
//! Times in the log page are in milliseconds.

use qoslab_engine::{Command, Control, ControlStatus, Notice, Ns, Op};

use super::{GateCaps, GateIo, GateOps, GateSetup, GcGate, WindowState};

qoslab_engine::plugin! {
    pub static OPS: GateOps = "plm", "Predictable Latency Mode: per NVM set deterministic and non-deterministic windows (features 13h, 14h; log pages 0Ah, 0Bh)", caps: GateCaps::COMMANDS.union(GateCaps::CLOSES).union(GateCaps::WINDOWS);
    /// `[media.gc.plm]`: what the Predictable Latency Per NVM Set log page reports, and the
    /// drive honours, for every set.
    tunables struct PlmConfig in PLM_TUNABLES {
        dtwin_reads_typical: u64 = count(100_000, "DTWIN Reads Typical: 4 KiB reads a set serves in one DTWin; more end the window (unless exit_on_reads is false)"),
        exit_on_reads: bool = flag(true, "a set leaves DTWin on its own once its reads pass DTWIN Reads Typical; false: it stays (the PLMC paper: the set \"may transition\" when a limit is exceeded), the log page advertising the same value"),
        dtwin_writes_typical: u64 = count(10_000, "DTWIN Writes Typical: writes (in flash pages, the optimal write size) a set takes in one DTWin; more end the window"),
        dtwin_time_max_ns: Ns = ns(100_000_000, "DTWIN Time Maximum: the longest DTWin (reported in whole ms)"),
        ndwin_time_min_low_ns: Ns = ns(0, "NDWIN Time Minimum Low: the shortest NDWin before a DTWin may start"),
        ndwin_time_min_high_ns: Ns = ns(100_000_000, "NDWIN Time Minimum High: the NDWin the host should allow after a DTWin of DTWIN Time Maximum (reported, not enforced)"),
    }
    build |s, cfg| Box::new(Plm::new(s, cfg))
}

/// Feature identifiers and log page identifiers (NVMe 1.4, figures 271 and 191).
pub const FID_PLM_CONFIG: u8 = 0x13;
pub const FID_PLM_WINDOW: u8 = 0x14;
pub const LID_PLM_PER_SET: u8 = 0x0A;
pub const LID_PLM_AGGREGATE: u8 = 0x0B;

/// Window Select / Status values.
pub const WINDOW_DTWIN: u32 = 1;
pub const WINDOW_NDWIN: u32 = 2;

/// Event Type bits of the log page.
pub const EVENT_DTWIN_EXCEEDED: u16 = 1 << 14;
pub const EVENT_EXCURSION: u16 = 1 << 15;

/// Asynchronous Event Type "Notice" and its information "Predictable Latency Event Aggregate
/// Log Change" (NVMe 2.1, figure 151).
pub const AER_NOTICE: u8 = 0b010;
pub const AER_INFO_PLM_AGGREGATE: u8 = 0x04;

/// Bytes of the Predictable Latency Per NVM Set log page, and where its fields are.
pub mod log_page {
    pub const LEN: usize = 512;
    /// Byte 0 bits 2:0: 0 not enabled, 1 DTWin, 2 NDWin.
    pub const STATUS: usize = 0;
    /// Bytes 3:2, little endian.
    pub const EVENT_TYPE: usize = 2;
    /// Each 8 bytes, little endian.
    pub const DTWIN_READS_TYPICAL: usize = 32;
    pub const DTWIN_WRITES_TYPICAL: usize = 40;
    pub const DTWIN_TIME_MAXIMUM: usize = 48;
    pub const NDWIN_TIME_MINIMUM_HIGH: usize = 56;
    pub const NDWIN_TIME_MINIMUM_LOW: usize = 64;
    pub const DTWIN_READS_ESTIMATE: usize = 128;
    pub const DTWIN_WRITES_ESTIMATE: usize = 136;
    pub const DTWIN_TIME_ESTIMATE: usize = 144;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    Disabled,
    Deterministic,
    NonDeterministic,
    /// Asked into DTWin, waiting for the deferred work to end.
    Entering,
}

/// Why a set left its DTWin.
#[derive(Clone, Copy, Debug)]
enum Exit {
    Reads,
    Writes,
    Time,
    Excursion,
    Host,
}

#[derive(Clone, Debug)]
struct SetWindow {
    window: Window,
    since_ns: Ns,
    /// 4 KiB reads and page writes since the DTWin began.
    reads: u64,
    writes: u64,
    /// Event Type bits pending.
    events: u16,
    in_aggregate: bool,
    /// Bumped at every DTWin entry: wake-ups of an older DTWin are stale.
    generation: u64,
    // Counters.
    dtwin_entries: u64,
    dtwin_ns: Ns,
    exits: [u64; 5],
    forced: u64,
    /// When the set was last asked into DTWin, and the time asked sets waited to enter.
    asked_ns: Ns,
    entry_wait_ns: Ns,
    entry_wait_max_ns: Ns,
}

pub struct Plm {
    cfg: PlmConfig,
    page_bytes: u64,
    /// The NDWIN Time Minimum Low advertised: the tunable, or the longest a set asked into
    /// DTWin may wait for its dies' background operations to end, whichever is larger.
    ndwin_min_low_advertised_ns: Ns,
    sets: Vec<SetWindow>,
    /// Every entry's wait, from the ask to the DTWin (all sets).
    entry_waits: Vec<Ns>,
    /// Sets in DTWin now, and the time no enabled set's copy was in DTWin: closed intervals,
    /// and the start of the open one.
    in_dtwin: u32,
    no_dtwin_ns: Ns,
    no_dtwin_since: Option<Ns>,
}

/// Wake-up kinds, in bit 10 of the token (the set in bits 9:0, the DTWin generation, modulo
/// 2^21, in bits 31:11: a stale wake-up 2^21 DTWins old cannot still be pending).
const WAKE_TIME_MAX: u32 = 0;
const WAKE_NDWIN_MIN: u32 = 1;

fn token(set: u16, kind: u32, generation: u64) -> u32 {
    u32::from(set) | kind << 10 | ((generation as u32) << 11)
}

impl Plm {
    pub fn new(s: &GateSetup<'_>, cfg: PlmConfig) -> Self {
        Plm {
            ndwin_min_low_advertised_ns: cfg.ndwin_time_min_low_ns.max(s.entry_bound_ns),
            cfg,
            page_bytes: u64::from(s.page_bytes),
            entry_waits: Vec::new(),
            in_dtwin: 0,
            no_dtwin_ns: 0,
            no_dtwin_since: None,
            sets: (0..s.sets)
                .map(|_| SetWindow {
                    window: Window::Disabled,
                    since_ns: 0,
                    reads: 0,
                    writes: 0,
                    events: 0,
                    in_aggregate: false,
                    generation: 0,
                    dtwin_entries: 0,
                    dtwin_ns: 0,
                    exits: [0; 5],
                    forced: 0,
                    asked_ns: 0,
                    entry_wait_ns: 0,
                    entry_wait_max_ns: 0,
                })
                .collect(),
        }
    }

    /// The set (0-based) of NVM Set Identifier `id`, if the drive has it.
    fn set_of_id(&self, id: u16) -> Option<u16> {
        (id >= 1 && usize::from(id) <= self.sets.len()).then(|| id - 1)
    }

    fn enter_dtwin(&mut self, set: u16, io: &mut GateIo<'_>) {
        if self.in_dtwin == 0
            && let Some(since) = self.no_dtwin_since.take()
        {
            self.no_dtwin_ns += io.now_ns - since;
        }
        self.in_dtwin += 1;
        let w = &mut self.sets[set as usize];
        let waited = io.now_ns - w.asked_ns;
        self.entry_waits.push(waited);
        w.entry_wait_ns += waited;
        w.entry_wait_max_ns = w.entry_wait_max_ns.max(waited);
        w.window = Window::Deterministic;
        w.since_ns = io.now_ns;
        w.reads = 0;
        w.writes = 0;
        w.generation += 1;
        w.dtwin_entries += 1;
        let at = io.now_ns + self.cfg.dtwin_time_max_ns;
        io.wake_at(at, token(set, WAKE_TIME_MAX, w.generation));
    }

    /// DTWin ends (or a pending entry is dropped): the set is in NDWin from now.
    fn leave_dtwin(&mut self, set: u16, why: Exit, io: &mut GateIo<'_>) {
        let now = io.now_ns;
        let w = &mut self.sets[set as usize];
        if w.window == Window::Deterministic {
            w.dtwin_ns += now - w.since_ns;
            self.in_dtwin -= 1;
            if self.in_dtwin == 0 {
                self.no_dtwin_since = Some(now);
            }
        }
        w.window = Window::NonDeterministic;
        w.since_ns = now;
        w.exits[why as usize] += 1;
        let bit = match why {
            Exit::Host => 0,
            Exit::Excursion => EVENT_EXCURSION,
            Exit::Reads | Exit::Writes | Exit::Time => EVENT_DTWIN_EXCEEDED,
        };
        if bit != 0 {
            w.events |= bit;
            if !w.in_aggregate {
                w.in_aggregate = true;
                io.notify(Notice::AsyncEvent {
                    host: Notice::ALL_HOSTS,
                    kind: AER_NOTICE,
                    info: AER_INFO_PLM_AGGREGATE,
                    log_page: LID_PLM_AGGREGATE,
                });
            }
        }
        io.opened(set);
    }

    /// A set asked into DTWin enters it if it may now, else waits.
    fn try_enter(&mut self, set: u16, io: &mut GateIo<'_>) {
        let w = &self.sets[set as usize];
        let ready_at = w.since_ns + self.cfg.ndwin_time_min_low_ns;
        if (io.settled)(set) && io.now_ns >= ready_at {
            self.enter_dtwin(set, io);
        } else if io.now_ns < ready_at {
            io.wake_at(ready_at, token(set, WAKE_NDWIN_MIN, w.generation));
        }
    }

    fn set_window(&mut self, set: u16, select: u32, io: &mut GateIo<'_>) -> ControlStatus {
        let w = &mut self.sets[set as usize];
        match (select, w.window) {
            (_, Window::Disabled) => ControlStatus::Invalid,
            (WINDOW_DTWIN, Window::Deterministic | Window::Entering) => ControlStatus::Success,
            (WINDOW_DTWIN, Window::NonDeterministic) => {
                w.window = Window::Entering;
                w.asked_ns = io.now_ns;
                io.hold(set);
                self.try_enter(set, io);
                ControlStatus::Success
            }
            (WINDOW_NDWIN, Window::Deterministic | Window::Entering) => {
                self.leave_dtwin(set, Exit::Host, io);
                ControlStatus::Success
            }
            (WINDOW_NDWIN, Window::NonDeterministic) => ControlStatus::Success,
            _ => ControlStatus::Invalid,
        }
    }

    fn status(&self, set: u16) -> u8 {
        match self.sets[set as usize].window {
            Window::Disabled => 0,
            Window::Deterministic => WINDOW_DTWIN as u8,
            Window::NonDeterministic | Window::Entering => WINDOW_NDWIN as u8,
        }
    }

    /// The Predictable Latency Per NVM Set log page of `set` at `now_ns`.
    fn per_set_page(&self, set: u16, now_ns: Ns) -> Vec<u8> {
        use log_page::*;
        let c = &self.cfg;
        let w = &self.sets[set as usize];
        let ms = |ns: Ns| ns / 1_000_000;
        let in_dtwin = w.window == Window::Deterministic;
        let (reads_left, writes_left, time_left) = if in_dtwin {
            (
                c.dtwin_reads_typical.saturating_sub(w.reads),
                c.dtwin_writes_typical.saturating_sub(w.writes),
                (w.since_ns + c.dtwin_time_max_ns).saturating_sub(now_ns),
            )
        } else {
            (
                c.dtwin_reads_typical,
                c.dtwin_writes_typical,
                c.dtwin_time_max_ns,
            )
        };
        let mut page = vec![0u8; LEN];
        page[STATUS] = self.status(set);
        page[EVENT_TYPE..EVENT_TYPE + 2].copy_from_slice(&w.events.to_le_bytes());
        for (at, v) in [
            (DTWIN_READS_TYPICAL, c.dtwin_reads_typical),
            (DTWIN_WRITES_TYPICAL, c.dtwin_writes_typical),
            (DTWIN_TIME_MAXIMUM, ms(c.dtwin_time_max_ns)),
            (NDWIN_TIME_MINIMUM_HIGH, ms(c.ndwin_time_min_high_ns)),
            (
                NDWIN_TIME_MINIMUM_LOW,
                self.ndwin_min_low_advertised_ns.div_ceil(1_000_000),
            ),
            (DTWIN_READS_ESTIMATE, reads_left),
            (DTWIN_WRITES_ESTIMATE, writes_left),
            (DTWIN_TIME_ESTIMATE, ms(time_left)),
        ] {
            page[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        page
    }

    /// The Predictable Latency Event Aggregate log page.
    fn aggregate_page(&self) -> Vec<u8> {
        let ids: Vec<u16> = (0..self.sets.len() as u16)
            .filter(|&s| self.sets[s as usize].in_aggregate)
            .map(|s| s + 1)
            .collect();
        let mut page = (ids.len() as u64).to_le_bytes().to_vec();
        for id in ids {
            page.extend_from_slice(&id.to_le_bytes());
        }
        page
    }
}

impl GcGate for Plm {
    fn gc_allowed(&mut self, set: u16, _now_ns: Ns) -> bool {
        matches!(
            self.sets[set as usize].window,
            Window::Disabled | Window::NonDeterministic
        )
    }

    fn destage_allowed(&mut self, set: u16, _now_ns: Ns) -> bool {
        matches!(
            self.sets[set as usize].window,
            Window::Disabled | Window::NonDeterministic
        )
    }

    fn command(&mut self, set: u16, op: Op, len_bytes: u64, io: &mut GateIo<'_>) {
        let w = &mut self.sets[set as usize];
        if w.window != Window::Deterministic {
            return;
        }
        let exceeded = match op {
            Op::Read => {
                w.reads += len_bytes.div_ceil(4096).max(1);
                (self.cfg.exit_on_reads && w.reads > self.cfg.dtwin_reads_typical)
                    .then_some(Exit::Reads)
            }
            Op::Write => {
                w.writes += len_bytes.div_ceil(self.page_bytes).max(1);
                (w.writes > self.cfg.dtwin_writes_typical).then_some(Exit::Writes)
            }
            Op::Trim | Op::Flush => None,
        };
        if let Some(why) = exceeded {
            self.leave_dtwin(set, why, io);
        }
    }

    fn control(&mut self, msg: &mut Control, io: &mut GateIo<'_>) {
        let now = io.now_ns;
        match &mut msg.command {
            Command::SetFeature { fid, set, value } if *fid == FID_PLM_CONFIG => {
                msg.status = match self.set_of_id(*set) {
                    None => ControlStatus::Invalid,
                    Some(s) => {
                        let w = &mut self.sets[s as usize];
                        let enable = *value & 1 == 1;
                        if enable && w.window == Window::Disabled {
                            w.window = Window::NonDeterministic;
                            w.since_ns = now;
                            w.events = 0;
                            if self.in_dtwin == 0 && self.no_dtwin_since.is_none() {
                                self.no_dtwin_since = Some(now);
                            }
                        } else if !enable && w.window != Window::Disabled {
                            if w.window == Window::Deterministic {
                                w.dtwin_ns += now - w.since_ns;
                                self.in_dtwin -= 1;
                                if self.in_dtwin == 0 {
                                    self.no_dtwin_since = Some(now);
                                }
                            }
                            self.sets[s as usize].window = Window::Disabled;
                            io.opened(s);
                        }
                        ControlStatus::Success
                    }
                };
            }
            Command::SetFeature { fid, set, value } if *fid == FID_PLM_WINDOW => {
                msg.status = match self.set_of_id(*set) {
                    None => ControlStatus::Invalid,
                    Some(s) => self.set_window(s, *value & 0b111, io),
                };
            }
            Command::GetFeature { fid, set, value }
                if *fid == FID_PLM_CONFIG || *fid == FID_PLM_WINDOW =>
            {
                msg.status = match self.set_of_id(*set) {
                    None => ControlStatus::Invalid,
                    Some(s) => {
                        let status = u32::from(self.status(s));
                        *value = if *fid == FID_PLM_CONFIG {
                            u32::from(status != 0)
                        } else {
                            status
                        };
                        ControlStatus::Success
                    }
                };
            }
            Command::GetLogPage { lid, set, data } if *lid == LID_PLM_PER_SET => {
                msg.status = match self.set_of_id(*set) {
                    None => ControlStatus::Invalid,
                    Some(s) => {
                        *data = self.per_set_page(s, now);
                        let w = &mut self.sets[s as usize];
                        w.events = 0;
                        w.in_aggregate = false;
                        ControlStatus::Success
                    }
                };
            }
            Command::GetLogPage { lid, data, .. } if *lid == LID_PLM_AGGREGATE => {
                *data = self.aggregate_page();
                msg.status = ControlStatus::Success;
            }
            _ => {}
        }
    }

    fn wake(&mut self, token: u32, io: &mut GateIo<'_>) {
        let set = (token & 0x3ff) as u16;
        let kind = (token >> 10) & 1;
        let w = &self.sets[set as usize];
        if (w.generation as u32) << 11 != token & !0x7ff {
            return;
        }
        match (kind, w.window) {
            (WAKE_TIME_MAX, Window::Deterministic) => self.leave_dtwin(set, Exit::Time, io),
            (WAKE_NDWIN_MIN, Window::Entering) => self.try_enter(set, io),
            _ => {}
        }
    }

    fn forced(&mut self, set: u16, io: &mut GateIo<'_>) {
        self.sets[set as usize].forced += 1;
        if matches!(
            self.sets[set as usize].window,
            Window::Deterministic | Window::Entering
        ) {
            self.leave_dtwin(set, Exit::Excursion, io);
        }
    }

    fn awaits_settle(&self, set: u16) -> bool {
        self.sets[set as usize].window == Window::Entering
    }

    fn settled(&mut self, set: u16, io: &mut GateIo<'_>) {
        if self.sets[set as usize].window == Window::Entering {
            self.try_enter(set, io);
        }
    }

    fn window(&self, set: u16) -> WindowState {
        match self.sets[set as usize].window {
            Window::Disabled => WindowState::Off,
            Window::Deterministic => WindowState::Deterministic,
            Window::NonDeterministic => WindowState::NonDeterministic,
            Window::Entering => WindowState::Entering,
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut waits = self.entry_waits.clone();
        waits.sort_unstable();
        let ms = |ns: Ns| ns as f64 / 1e6;
        let mut out = vec![
            (
                "ndwin_time_min_low_advertised_ms".to_string(),
                self.ndwin_min_low_advertised_ns.div_ceil(1_000_000) as f64,
            ),
            ("dtwin_entries".into(), waits.len() as f64),
            (
                // Nearest rank.
                "dtwin_entry_wait_p50_ms".into(),
                waits
                    .get(waits.len().div_ceil(2).max(1) - 1)
                    .map_or(0.0, |&w| ms(w)),
            ),
            (
                "dtwin_entry_wait_max_ms".into(),
                waits.last().map_or(0.0, |&w| ms(w)),
            ),
            // No set in DTWin: the closed intervals, and when the open one began (-1: a set
            // is in DTWin now), from the first set's enabling on.
            ("no_dtwin_ms".into(), ms(self.no_dtwin_ns)),
            (
                "no_dtwin_open_since_ms".into(),
                self.no_dtwin_since.map_or(-1.0, ms),
            ),
        ];
        for (i, w) in self.sets.iter().enumerate() {
            let id = i + 1;
            out.push((format!("set{id}_dtwin_entries"), w.dtwin_entries as f64));
            out.push((format!("set{id}_dtwin_ms"), w.dtwin_ns as f64 / 1e6));
            for (why, name) in [
                (Exit::Reads, "reads"),
                (Exit::Writes, "writes"),
                (Exit::Time, "time"),
                (Exit::Excursion, "excursion"),
                (Exit::Host, "host"),
            ] {
                out.push((
                    format!("set{id}_dtwin_exits_{name}"),
                    w.exits[why as usize] as f64,
                ));
            }
            out.push((format!("set{id}_forced_background"), w.forced as f64));
            // How long the set, asked into DTWin, took to finish the work a DTWin cannot carry.
            out.push((
                format!("set{id}_dtwin_entry_wait_ms"),
                w.entry_wait_ns as f64 / 1e6,
            ));
            out.push((
                format!("set{id}_dtwin_entry_wait_max_ms"),
                w.entry_wait_max_ns as f64 / 1e6,
            ));
        }
        out
    }
}
