//! Timing of the flash array: dies that execute one command at a time, and the channels their
//! commands and data share.
//!
//! A read holds the channel for its command (`read_cmd_ns`), then its die for tR, then the
//! channel again to move the data out; the die stays busy until the data has left its page
//! register. A program holds the channel for command and data in, then the die for tPROG; an
//! erase holds the channel for its command, then the die for tBERS. Each die serves its queue
//! by the rank the die priority plug-in gives each class (mapping reads, host reads, host
//! writes, GC), FIFO within a rank, and may join operations of the same kind on its other planes
//! into one multi-plane command. Channels serve waiting dies by rank, commands before data outs.
//! A read may suspend an erase (or program) that still has `suspend_min_remaining_ns` to run;
//! the die resumes it when no read waits.
//!
//! The channel is held as a reservation (`busy_until`): an event is scheduled only when a die
//! waits for it, so an uncontended read costs two events (array done, data out done).
//!
//! Bookkeeping is laid out for GC steady state, where most operations are GC copies and
//! thousands wait at once: operations are stored in their queue (a ring per die, class and
//! plane, read front to back) and then in their die's batch, never in a shared table; an
//! operation carries its owner's continuation (`T`), so completions need no second table; a
//! die keeps a bit per non-empty queue and each queue the age and kind of its head, so choosing
//! the next batch reads no operation; and the reads of a GC victim's valid pages, queued all at
//! once, are held as the list of their pages and become operations only when the die takes
//! them.

use std::collections::VecDeque;

use qoslab_engine::{Ns, StageCtx};

use super::SsdEvent;
use super::config::SsdConfig;
use super::prefetch;
use super::scheduling::Rules;
use qoslab_engine::Divisor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Program,
    Erase,
}

/// Who wants the operation. The die priority plug-in ranks the classes: the lower a class's
/// rank, the sooner a die and a channel serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum OpClass {
    /// A translation-page read on a mapping-cache miss: every host request behind it waits.
    Mapping = 0,
    HostRead = 1,
    HostWrite = 2,
    Gc = 3,
}

/// Operation classes (and ranks).
pub const CLASSES: usize = 4;
/// What a die can be doing, for [`FlashArray::die_usage`]: each (class, kind), then idle.
pub const DIE_USES: usize = CLASSES * 3 + 1;
/// The index of an idle die in [`FlashArray::die_usage`].
pub const DIE_IDLE: usize = DIE_USES - 1;

/// The index in [`FlashArray::die_usage`] of a die busy with `kind` for `class`.
pub fn die_use(class: OpClass, kind: OpKind) -> usize {
    class as usize * 3 + kind as usize
}
/// Most planes one multi-plane command addresses (ONFI's limit, as MQSim's command tables).
const MAX_MULTIPLANE: usize = 4;
/// Most planes per die: a die's (class, plane) queues fit one `u64` of non-empty bits.
pub const MAX_PLANES_PER_DIE: u32 = 64 / CLASSES as u32;

/// One flash operation and the continuation its owner wants called when it is done.
#[derive(Clone, Copy, Debug)]
pub struct FlashOp<T> {
    pub kind: OpKind,
    pub class: OpClass,
    /// Target page (an erase: any page of the block).
    pub ppa: u32,
    /// Bytes moved over the channel (read: out; program: in).
    pub bytes: u32,
    /// Owner's continuation.
    pub owner: T,
}

/// One (rank, plane) queue of a die: the waiting operations with their arrival order (FIFO
/// across the planes of a die), and how many GC reads not yet made operations stand before
/// them (the plane's `GcReads`), with the arrival order of the first.
#[derive(Clone, Debug)]
struct Queue<T> {
    ops: VecDeque<(u64, FlashOp<T>)>,
    reads_left: u32,
    reads_seq: u64,
}

impl<T> Queue<T> {
    fn is_empty(&self) -> bool {
        self.reads_left == 0 && self.ops.is_empty()
    }
}

/// The GC reads of one plane queued at once: page and owner of each, in order, the next to be
/// taken, and the bytes each moves.
#[derive(Clone, Debug)]
struct GcReads<T> {
    reads: Vec<(u32, T)>,
    next: usize,
    bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DieState {
    Idle,
    /// Waiting for the channel to send the batch's command (and program data).
    WaitCommand,
    /// The array is working on the batch.
    Array,
    /// Moving read data out: waiting for or holding the channel.
    DataOut,
    /// Suspending the running erase or program; free again at the next `DieReady`.
    Suspending,
}

#[derive(Clone, Copy, Debug)]
struct Batch<T> {
    ops: [FlashOp<T>; MAX_MULTIPLANE],
    len: u8,
    /// Data-outs done so far (reads).
    out: u8,
}

impl<T> Batch<T> {
    fn ops(&self) -> &[FlashOp<T>] {
        &self.ops[..self.len as usize]
    }
}

#[derive(Clone, Debug)]
struct Die<T> {
    /// Bit `rank * planes_per_die + plane` is set when that queue holds an operation.
    nonempty: u64,
    state: DieState,
    batch: Batch<T>,
    /// Bumped when a scheduled `DieReady` must be ignored (a suspension moved its time).
    generation: u32,
    array_done_ns: Ns,
    suspended: Option<(Batch<T>, Ns)>,
    channel: u32,
    /// Background work (host writes' programs and their reads, GC) is held: the die starts
    /// none, keeps a suspended operation suspended, and what it runs of it goes to the
    /// channel first (an NVM set entering or in a PLM deterministic window).
    held: bool,
}

/// Time each die spent on each use ([`DIE_USES`]), kept only when asked
/// ([`FlashArray::track_die_usage`]): a diagnostic of what a read waited behind.
#[derive(Clone, Debug)]
struct DieUsage {
    spent_ns: Vec<[Ns; DIE_USES]>,
    /// When each die's current use began.
    since_ns: Vec<Ns>,
}

#[derive(Clone, Copy, Debug)]
struct Waiter {
    /// Rank, then commands before data-outs, then arrival: `rank << 62 | data_out << 61 |
    /// seq`, the lowest served first (data-outs first: `!data_out << 63 | rank << 61 | seq`).
    rank: u64,
    die: u32,
    data_out: bool,
    duration_ns: Ns,
}

#[derive(Clone, Debug, Default)]
struct Channel {
    busy_until: Ns,
    waiters: Vec<Waiter>,
    wake_pending: bool,
    /// The current holder is a data-out, whose own end event hands the channel on (no
    /// separate wake-up needed).
    held_by_data_out: bool,
    /// A data-out just ended and its event will hand the channel on once the die has queued
    /// its next request: requests wait for that choice.
    handing_over: bool,
}

/// Counters of the array.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlashStats {
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub multiplane_commands: u64,
    pub suspensions: u64,
    /// Sum over channels of the time they were held.
    pub channel_busy_ns: u64,
}

pub struct FlashArray<T> {
    dies: Vec<Die<T>>,
    channels: Vec<Channel>,
    /// Every die's queues: `die * CLASSES * planes_per_die + rank * planes_per_die + plane`.
    queues: Vec<Queue<T>>,
    /// Per plane (array-wide numbering).
    gc_reads: Vec<GcReads<T>>,
    seq: u64,
    per_plane: Divisor,
    per_die: Divisor,
    per_block: Divisor,
    /// Page types of a block (the length of `Timing::read_ns`).
    per_cell: Divisor,
    planes_per_die: u32,
    /// A die's queue bits of one plane each: `planes_per_die` ones.
    plane_bits: u64,
    /// A die's queue bits of the classes that may run while an erase or program is
    /// suspended (mapping and host reads).
    read_queues: u64,
    /// The rank of each class (the die priority plug-in's choice).
    ranks: [u8; CLASSES],
    /// Operations finished since the owner last drained them.
    pub done: Vec<FlashOp<T>>,
    /// Owners of programs whose command went out since the owner last drained them.
    pub programs_started: Vec<T>,
    /// Held dies whose background operation ended since the owner last drained them.
    pub quiet: Vec<u32>,
    pub stats: FlashStats,
    cfg: Timing,
    /// Dies of each chip that are not idle (chip-exclusive scheduling).
    chip_busy: Vec<u32>,
    usage: Option<DieUsage>,
}

/// The part of the configuration the array needs, copied for locality.
#[derive(Clone, Debug)]
struct Timing {
    read_ns: Vec<Ns>,
    program_ns: Vec<Ns>,
    erase_ns: Ns,
    read_cmd_ns: Ns,
    read_cmd_per_plane_ns: Ns,
    program_cmd_ns: Ns,
    program_cmd_per_plane_ns: Ns,
    erase_cmd_ns: Ns,
    erase_cmd_per_plane_ns: Ns,
    multiplane: usize,
    erase_suspend: bool,
    program_suspend: bool,
    suspend_erase_ns: Ns,
    suspend_program_ns: Ns,
    suspend_min_remaining_ns: Ns,
    channel_rate: f64,
    /// The channel time of a whole page, the size nearly every transfer has.
    page_bytes: u32,
    page_transfer_ns: Ns,
    chip_exclusive: bool,
    /// The flash scheduling's rules (`chip_serial`: one die of a chip at a time).
    rules: Rules,
    dies_per_chip: u32,
}

/// Channel time of `bytes` at `rate` bytes per ns.
fn channel_ns(bytes: u32, rate: f64) -> Ns {
    (f64::from(bytes) / rate).round() as Ns
}

impl<T: Copy + Default> FlashArray<T> {
    pub fn new(cfg: &SsdConfig) -> Self {
        let g = &cfg.geo;
        assert!(
            g.planes_per_die <= MAX_PLANES_PER_DIE,
            "at most {MAX_PLANES_PER_DIE} planes per die"
        );
        let dies = (0..g.dies())
            .map(|d| Die {
                nonempty: 0,
                state: DieState::Idle,
                batch: Batch {
                    ops: [FlashOp {
                        kind: OpKind::Read,
                        class: OpClass::Mapping,
                        ppa: 0,
                        bytes: 0,
                        owner: T::default(),
                    }; MAX_MULTIPLANE],
                    len: 0,
                    out: 0,
                },
                generation: 0,
                array_done_ns: 0,
                suspended: None,
                channel: g.channel_of_die(d),
                held: false,
            })
            .collect();
        FlashArray {
            dies,
            channels: vec![Channel::default(); g.channels as usize],
            queues: (0..(g.dies() * g.planes_per_die) as usize * CLASSES)
                .map(|_| Queue {
                    ops: VecDeque::new(),
                    reads_left: 0,
                    reads_seq: 0,
                })
                .collect(),
            gc_reads: (0..g.planes())
                .map(|_| GcReads {
                    reads: Vec::new(),
                    next: 0,
                    bytes: 0,
                })
                .collect(),
            seq: 0,
            per_plane: g.per_plane,
            per_die: g.per_die,
            per_block: g.per_block,
            per_cell: Divisor::new(cfg.cell.read_ns.len() as u32),
            planes_per_die: g.planes_per_die,
            plane_bits: (1u64 << g.planes_per_die) - 1,
            read_queues: [OpClass::Mapping, OpClass::HostRead]
                .iter()
                .map(|&c| {
                    ((1u64 << g.planes_per_die) - 1)
                        << (cfg.die_ranks[c as usize] as u32 * g.planes_per_die)
                })
                .fold(0, |a, b| a | b),
            ranks: cfg.die_ranks,
            done: Vec::new(),
            programs_started: Vec::new(),
            quiet: Vec::new(),
            stats: FlashStats::default(),
            chip_busy: vec![0; (g.channels * g.chips_per_channel) as usize],
            usage: None,
            cfg: Timing {
                read_ns: cfg.cell.read_ns.clone(),
                program_ns: cfg.cell.program_ns.clone(),
                erase_ns: cfg.erase_ns,
                read_cmd_ns: cfg.read_cmd_ns,
                read_cmd_per_plane_ns: cfg.read_cmd_per_plane_ns,
                program_cmd_ns: cfg.program_cmd_ns,
                program_cmd_per_plane_ns: cfg.program_cmd_per_plane_ns,
                erase_cmd_ns: cfg.erase_cmd_ns,
                erase_cmd_per_plane_ns: cfg.erase_cmd_per_plane_ns,
                multiplane: if cfg.multiplane {
                    (g.planes_per_die as usize).min(MAX_MULTIPLANE)
                } else {
                    1
                },
                erase_suspend: cfg.erase_suspend,
                program_suspend: cfg.program_suspend,
                suspend_erase_ns: cfg.suspend_erase_ns,
                suspend_program_ns: cfg.suspend_program_ns,
                suspend_min_remaining_ns: cfg.suspend_min_remaining_ns,
                channel_rate: cfg.channel_rate,
                page_bytes: g.page_bytes,
                page_transfer_ns: channel_ns(g.page_bytes, cfg.channel_rate),
                chip_exclusive: cfg.chip_exclusive,
                rules: cfg.scheduling,
                dies_per_chip: g.dies_per_chip,
            },
        }
    }

    #[inline]
    fn die_of(&self, ppa: u32) -> u32 {
        self.per_die.quot(self.per_plane.quot(ppa))
    }

    /// Starts keeping the time each die spends on each use (off by default: it costs a
    /// little at every change of a die's work).
    pub fn track_die_usage(&mut self) {
        let dies = self.dies.len();
        self.usage = Some(DieUsage {
            spent_ns: vec![[0; DIE_USES]; dies],
            since_ns: vec![0; dies],
        });
    }

    /// What die `d` is doing: the class and kind of its batch, or idle.
    fn current_use(&self, d: u32) -> usize {
        let die = &self.dies[d as usize];
        if die.state == DieState::Idle {
            DIE_IDLE
        } else {
            let op = &die.batch.ops[0];
            die_use(op.class, op.kind)
        }
    }

    /// Closes die `d`'s current use at `now` (before its work changes).
    #[inline]
    fn account(&mut self, d: u32, now: Ns) {
        if self.usage.is_none() {
            return;
        }
        let cur = self.current_use(d);
        let u = self.usage.as_mut().expect("checked");
        u.spent_ns[d as usize][cur] += now - u.since_ns[d as usize];
        u.since_ns[d as usize] = now;
    }

    /// The time the die of page `ppa` has spent on each use up to `now` (all zero unless
    /// [`FlashArray::track_die_usage`] was called): the difference of two readings says what
    /// the die did between them.
    pub fn die_usage(&self, ppa: u32, now: Ns) -> [Ns; DIE_USES] {
        let d = self.die_of(ppa);
        let Some(u) = &self.usage else {
            return [0; DIE_USES];
        };
        let mut spent = u.spent_ns[d as usize];
        spent[self.current_use(d)] += now - u.since_ns[d as usize];
        spent
    }

    /// [`FlashArray::die_usage`] of die `d`.
    pub fn die_usage_of(&self, d: u32, now: Ns) -> [Ns; DIE_USES] {
        let Some(u) = &self.usage else {
            return [0; DIE_USES];
        };
        let mut spent = u.spent_ns[d as usize];
        spent[self.current_use(d)] += now - u.since_ns[d as usize];
        spent
    }

    /// Whether die `d` runs background work now: a batch of host writes' or GC's operations
    /// between its command and its end (a suspended one does not run).
    pub fn background_running(&self, d: u32) -> bool {
        let die = &self.dies[d as usize];
        die.state != DieState::Idle && die.batch.ops[0].class >= OpClass::HostWrite
    }

    /// Holds die `d`'s background work (or lets it go): a held die starts none and keeps a
    /// suspended erase or program suspended; the background batch it runs already goes to the
    /// channel ahead of everything else, so that it ends soon.
    pub fn hold(&mut self, d: u32, held: bool, ctx: &mut impl StageCtx<SsdEvent>) {
        let die = &mut self.dies[d as usize];
        if die.held == held {
            return;
        }
        die.held = held;
        if held {
            if self.background_running(d) {
                let ch = self.dies[d as usize].channel as usize;
                let urgent = self.urgent_key();
                for w in &mut self.channels[ch].waiters {
                    if w.die == d {
                        w.rank &= urgent;
                    }
                }
            }
        } else if self.dies[d as usize].state == DieState::Idle {
            self.start(d, ctx);
        }
    }

    /// The mask that clears the rank bits of a channel waiter's key (rank 0: most urgent).
    fn urgent_key(&self) -> u64 {
        if self.cfg.rules.data_out_first {
            !(0b11 << 61)
        } else {
            !(0b11 << 62)
        }
    }

    #[inline]
    fn plane_of(&self, ppa: u32) -> u32 {
        self.per_plane.quot(ppa)
    }

    #[inline]
    fn transfer_ns(&self, bytes: u32) -> Ns {
        if bytes == self.cfg.page_bytes {
            self.cfg.page_transfer_ns
        } else {
            channel_ns(bytes, self.cfg.channel_rate)
        }
    }

    #[inline]
    fn rank(&self, class: OpClass) -> usize {
        self.ranks[class as usize] as usize
    }

    #[inline]
    fn queue_index(&self, d: u32, q: usize) -> usize {
        d as usize * CLASSES * self.planes_per_die as usize + q
    }

    /// Queues `op` on its die.
    pub fn submit(&mut self, op: FlashOp<T>, ctx: &mut impl StageCtx<SsdEvent>) {
        self.seq += 1;
        let d = self.die_of(op.ppa);
        let plane = self.per_die.modulo(self.plane_of(op.ppa));
        let q = self.rank(op.class) * self.planes_per_die as usize + plane as usize;
        let qi = self.queue_index(d, q);
        self.queues[qi].ops.push_back((self.seq, op));
        self.dies[d as usize].nonempty |= 1 << q;
        self.kick(d, op.class, ctx);
    }

    /// Queues GC reads of `bytes` of the pages of `reads` (page, owner; all in one plane), as
    /// if each were submitted in turn. The plane's GC queue must be empty: the reads of a
    /// victim come before the copies and the erase that follow them.
    pub fn submit_gc_reads(
        &mut self,
        reads: &[(u32, T)],
        bytes: u32,
        ctx: &mut impl StageCtx<SsdEvent>,
    ) {
        let Some(&(first, _)) = reads.first() else {
            return;
        };
        let d = self.die_of(first);
        let plane = self.plane_of(first);
        let q = self.rank(OpClass::Gc) * self.planes_per_die as usize
            + self.per_die.modulo(plane) as usize;
        let qi = self.queue_index(d, q);
        let queue = &mut self.queues[qi];
        assert!(
            queue.is_empty(),
            "GC reads queued behind other GC work of plane {plane}"
        );
        queue.reads_left = reads.len() as u32;
        queue.reads_seq = self.seq + 1;
        let queued = &mut self.gc_reads[plane as usize];
        queued.reads.clear();
        queued.reads.extend_from_slice(reads);
        queued.next = 0;
        queued.bytes = bytes;
        self.seq += reads.len() as u64;
        self.dies[d as usize].nonempty |= 1 << q;
        self.kick(d, OpClass::Gc, ctx);
    }

    /// Drops the GC reads of `plane` not started yet; returns how many.
    pub fn drop_gc_reads(&mut self, plane: u32) -> u32 {
        let d = self.per_die.quot(plane);
        let q = self.rank(OpClass::Gc) * self.planes_per_die as usize
            + self.per_die.modulo(plane) as usize;
        let qi = self.queue_index(d, q);
        let queue = &mut self.queues[qi];
        let dropped = queue.reads_left;
        queue.reads_left = 0;
        if queue.is_empty() {
            self.dies[d as usize].nonempty &= !(1 << q);
        }
        dropped
    }

    /// A die got new work of `class`: start it if idle, or suspend what it runs for a read.
    fn kick(&mut self, d: u32, class: OpClass, ctx: &mut impl StageCtx<SsdEvent>) {
        let now = ctx.now_ns();
        let die = &self.dies[d as usize];
        match die.state {
            DieState::Idle => self.start(d, ctx),
            DieState::Array
                if class <= OpClass::HostRead
                    && die.suspended.is_none()
                    && !self.cfg.chip_exclusive
                    && self.cfg.rules.suspension =>
            {
                let kind = die.batch.ops[0].kind;
                let allowed = match kind {
                    OpKind::Erase => self.cfg.erase_suspend,
                    OpKind::Program => self.cfg.program_suspend,
                    OpKind::Read => false,
                };
                if allowed && die.array_done_ns >= now + self.cfg.suspend_min_remaining_ns {
                    self.suspend(d, kind, ctx);
                }
            }
            _ => {}
        }
    }

    fn suspend(&mut self, d: u32, kind: OpKind, ctx: &mut impl StageCtx<SsdEvent>) {
        let now = ctx.now_ns();
        let cost = if kind == OpKind::Erase {
            self.cfg.suspend_erase_ns
        } else {
            self.cfg.suspend_program_ns
        };
        let die = &mut self.dies[d as usize];
        die.suspended = Some((die.batch, die.array_done_ns - now));
        die.generation = die.generation.wrapping_add(1);
        die.state = DieState::Suspending;
        self.stats.suspensions += 1;
        ctx.schedule(
            now + cost,
            SsdEvent::DieReady {
                die: d,
                generation: die.generation,
            },
        );
    }

    /// Lets idle die `d` take work. Serial chips take one die's command at a time; with
    /// chip-exclusive scheduling a chip takes new commands only when all its dies are idle, and
    /// then starts every die of the chip that has work at once (die interleaving).
    fn start(&mut self, d: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.cfg.rules.chip_serial {
            self.start_chip(d / self.cfg.dies_per_chip, ctx);
            return;
        }
        if !self.cfg.chip_exclusive {
            self.start_batch(d, ctx);
            return;
        }
        let chip = d / self.cfg.dies_per_chip;
        if self.chip_busy[chip as usize] > 0 {
            return;
        }
        for die in chip * self.cfg.dies_per_chip..(chip + 1) * self.cfg.dies_per_chip {
            if self.dies[die as usize].state == DieState::Idle {
                self.start_batch(die, ctx);
                if self.dies[die as usize].state != DieState::Idle {
                    self.chip_busy[chip as usize] += 1;
                }
            }
        }
    }

    /// Serial chips: an idle chip starts the one die whose most urgent waiting operation is
    /// the oldest, and stays busy until that die is idle again.
    fn start_chip(&mut self, chip: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.chip_busy[chip as usize] > 0 {
            return;
        }
        let ppd = self.planes_per_die as usize;
        let mut best: Option<(usize, u64, u32)> = None;
        for die in chip * self.cfg.dies_per_chip..(chip + 1) * self.cfg.dies_per_chip {
            let die_state = &self.dies[die as usize];
            let allowed = if die_state.held {
                self.read_queues
            } else {
                u64::MAX
            };
            let waiting = die_state.nonempty & allowed;
            if waiting == 0 {
                continue;
            }
            let class_bit = self.per_die.quot(waiting.trailing_zeros()) as usize * ppd;
            let mut planes = (waiting >> class_bit) & self.plane_bits;
            let base = self.queue_index(die, class_bit);
            while planes != 0 {
                let p = planes.trailing_zeros() as usize;
                planes &= planes - 1;
                let key = (class_bit, self.head(base + p).0, die);
                if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                    best = Some(key);
                }
            }
        }
        if let Some((_, _, die)) = best {
            self.start_batch(die, ctx);
            if self.dies[die as usize].state != DieState::Idle {
                self.chip_busy[chip as usize] = 1;
            }
        }
    }

    /// Die `d` finished its batch.
    fn became_idle(&mut self, d: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let die = &self.dies[d as usize];
        if die.held && die.batch.ops[0].class >= OpClass::HostWrite {
            self.quiet.push(d);
        }
        if self.cfg.chip_exclusive || self.cfg.rules.chip_serial {
            let chip = (d / self.cfg.dies_per_chip) as usize;
            self.chip_busy[chip] -= 1;
        }
        self.start(d, ctx);
    }

    /// Arrival order and kind of the head of queue `qi` (an index into `queues`), which must
    /// not be empty.
    #[inline]
    fn head(&self, qi: usize) -> (u64, OpKind) {
        let q = &self.queues[qi];
        if q.reads_left > 0 {
            (q.reads_seq, OpKind::Read)
        } else {
            let (seq, op) = q.ops.front().expect("a non-empty queue");
            (*seq, op.kind)
        }
    }

    /// Target page of the head of queue `qi` (plane `plane` of die `d`), which must not be
    /// empty.
    fn head_ppa(&self, d: u32, qi: usize, plane: usize) -> u32 {
        let q = &self.queues[qi];
        if q.reads_left > 0 {
            let reads = &self.gc_reads[(d * self.planes_per_die) as usize + plane];
            reads.reads[reads.next].0
        } else {
            q.ops.front().expect("a non-empty queue").1.ppa
        }
    }

    /// Takes the head of queue `qi`, bit `q` of die `d` (on plane `plane` of the die), which
    /// must not be empty.
    fn pop_head(&mut self, d: u32, qi: usize, q: usize, plane: usize) -> FlashOp<T> {
        let queue = &mut self.queues[qi];
        let op = if queue.reads_left > 0 {
            let reads = &mut self.gc_reads[(d * self.planes_per_die) as usize + plane];
            let (ppa, owner) = reads.reads[reads.next];
            reads.next += 1;
            if let Some(ahead) = reads.reads.get(reads.next + 4) {
                prefetch(ahead);
            }
            queue.reads_left -= 1;
            queue.reads_seq += 1;
            FlashOp {
                kind: OpKind::Read,
                class: OpClass::Gc,
                ppa,
                bytes: reads.bytes,
                owner,
            }
        } else {
            let (_, op) = queue.ops.pop_front().expect("a non-empty queue");
            // The next head is looked at when the die next chooses, and taken after: the line
            // is wanted then, well after it was queued.
            if let Some(next) = queue.ops.front() {
                prefetch(next);
            }
            op
        };
        if queue.is_empty() {
            self.dies[d as usize].nonempty &= !(1 << q);
        }
        op
    }

    /// Takes the next batch off an idle die's queues (or resumes a suspended operation).
    fn start_batch(&mut self, d: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        self.account(d, ctx.now_ns());
        let die = &mut self.dies[d as usize];
        debug_assert_eq!(die.state, DieState::Idle);
        // While an erase or program is suspended, or background work is held, only reads may
        // run; a held die keeps its suspended operation suspended.
        let allowed = if die.suspended.is_some() || die.held {
            self.read_queues
        } else {
            u64::MAX
        };
        let waiting = die.nonempty & allowed;
        if waiting == 0 {
            if die.held {
                return;
            }
            if let Some((batch, remaining)) = die.suspended.take() {
                die.batch = batch;
                die.state = DieState::Array;
                die.array_done_ns = ctx.now_ns() + remaining;
                ctx.schedule(
                    die.array_done_ns,
                    SsdEvent::DieReady {
                        die: d,
                        generation: die.generation,
                    },
                );
            }
            return;
        }
        let ppd = self.planes_per_die as usize;
        let class_bit = self.per_die.quot(waiting.trailing_zeros()) as usize * ppd;
        let planes = (waiting >> class_bit) & self.plane_bits;
        // Queue index of the rank's plane 0 on this die.
        let base = self.queue_index(d, class_bit);
        // The oldest head among the class's plane queues goes first; heads of the same kind on
        // the die's other planes may join it in one multi-plane command.
        let mut lead = 0;
        let mut lead_seq = u64::MAX;
        let mut rest = planes;
        while rest != 0 {
            let p = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let (seq, _) = self.head(base + p);
            if seq < lead_seq {
                lead = p;
                lead_seq = seq;
            }
        }
        let first = self.pop_head(d, base + lead, class_bit + lead, lead);
        let kind = first.kind;
        // The batch is built in place: operations carry their continuations and are too big
        // to copy about.
        let mut len = 1;
        let mut data_ns = self.transfer_ns(first.bytes);
        self.dies[d as usize].batch.ops[0] = first;
        let mut others = planes & !(1 << lead);
        while others != 0 && len < self.cfg.multiplane {
            let p = others.trailing_zeros() as usize;
            others &= others - 1;
            if self.head(base + p).1 == kind
                && (!self.cfg.rules.multiplane_same_page
                    || self.per_block.modulo(self.head_ppa(d, base + p, p))
                        == self.per_block.modulo(first.ppa))
            {
                let op = self.pop_head(d, base + p, class_bit + p, p);
                data_ns += self.transfer_ns(op.bytes);
                self.dies[d as usize].batch.ops[len] = op;
                len += 1;
            }
        }
        if len > 1 {
            self.stats.multiplane_commands += 1;
        }
        let extra = (len - 1) as Ns;
        let command_ns = match kind {
            OpKind::Read => {
                self.stats.reads += len as u64;
                self.cfg.read_cmd_ns + extra * self.cfg.read_cmd_per_plane_ns
            }
            OpKind::Program => {
                self.stats.programs += len as u64;
                self.cfg.program_cmd_ns + extra * self.cfg.program_cmd_per_plane_ns + data_ns
            }
            OpKind::Erase => {
                self.stats.erases += len as u64;
                self.cfg.erase_cmd_ns + extra * self.cfg.erase_cmd_per_plane_ns
            }
        };
        let die = &mut self.dies[d as usize];
        die.batch.len = len as u8;
        die.batch.out = 0;
        die.state = DieState::WaitCommand;
        let class = first.class;
        self.request_channel(d, false, class, command_ns, ctx);
    }

    /// Array time of the die's batch: the slowest of its planes.
    fn array_ns(&self, batch: &Batch<T>) -> Ns {
        batch
            .ops()
            .iter()
            .map(|op| {
                // The page's type (LSB, CSB, ...): its place in the block, modulo the types.
                let page_type = self.per_cell.modulo(self.per_block.modulo(op.ppa)) as usize;
                match op.kind {
                    OpKind::Read => self.cfg.read_ns[page_type],
                    OpKind::Program => self.cfg.program_ns[page_type],
                    OpKind::Erase => self.cfg.erase_ns,
                }
            })
            .max()
            .unwrap_or(0)
    }

    fn request_channel(
        &mut self,
        d: u32,
        data_out: bool,
        class: OpClass,
        duration_ns: Ns,
        ctx: &mut impl StageCtx<SsdEvent>,
    ) {
        let now = ctx.now_ns();
        let held = self.dies[d as usize].held && class >= OpClass::HostWrite;
        let rank = if held { 0 } else { self.rank(class) as u64 };
        let ch = self.dies[d as usize].channel;
        let channel = &mut self.channels[ch as usize];
        if !channel.handing_over && channel.waiters.is_empty() && channel.busy_until <= now {
            self.grant(d, data_out, duration_ns, ctx);
            return;
        }
        self.seq += 1;
        debug_assert!(self.seq < 1 << 61);
        let key = if self.cfg.rules.data_out_first {
            u64::from(!data_out) << 63 | rank << 61 | self.seq
        } else {
            rank << 62 | u64::from(data_out) << 61 | self.seq
        };
        channel.waiters.push(Waiter {
            rank: key,
            die: d,
            data_out,
            duration_ns,
        });
        if channel.handing_over || (channel.busy_until > now && channel.held_by_data_out) {
            return;
        }
        if !channel.wake_pending {
            channel.wake_pending = true;
            ctx.schedule(channel.busy_until.max(now), SsdEvent::ChannelFree(ch));
        }
    }

    /// Hands a free channel to its most urgent waiter: data-outs and commands by class, a
    /// command before a data-out of the same class (it sets another die working).
    fn arbitrate(&mut self, ch: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let now = ctx.now_ns();
        let channel = &mut self.channels[ch as usize];
        if channel.busy_until > now {
            // Granted meanwhile to a request that found it free (at this same instant, before
            // the data-out that calls this ended): its waiters are served when that grant ends.
            if !channel.waiters.is_empty() && !channel.held_by_data_out && !channel.wake_pending {
                channel.wake_pending = true;
                ctx.schedule(channel.busy_until, SsdEvent::ChannelFree(ch));
            }
            return;
        }
        let Some(best) = (0..channel.waiters.len()).min_by_key(|&i| channel.waiters[i].rank) else {
            return;
        };
        let w = channel.waiters.swap_remove(best);
        self.grant(w.die, w.data_out, w.duration_ns, ctx);
        let channel = &mut self.channels[ch as usize];
        if !channel.waiters.is_empty() && !channel.held_by_data_out && !channel.wake_pending {
            channel.wake_pending = true;
            ctx.schedule(channel.busy_until, SsdEvent::ChannelFree(ch));
        }
    }

    fn grant(
        &mut self,
        d: u32,
        data_out: bool,
        duration_ns: Ns,
        ctx: &mut impl StageCtx<SsdEvent>,
    ) {
        let now = ctx.now_ns();
        let end = now + duration_ns;
        let ch = self.dies[d as usize].channel;
        self.channels[ch as usize].busy_until = end;
        self.channels[ch as usize].held_by_data_out = data_out;
        self.stats.channel_busy_ns += duration_ns;
        if data_out {
            let die = &self.dies[d as usize];
            ctx.schedule(
                end,
                SsdEvent::DataOut {
                    die: d,
                    generation: die.generation,
                },
            );
        } else {
            let batch = &self.dies[d as usize].batch;
            if batch.ops[0].kind == OpKind::Program {
                self.programs_started
                    .extend(batch.ops().iter().map(|op| op.owner));
            }
            let array = self.array_ns(&self.dies[d as usize].batch);
            let die = &mut self.dies[d as usize];
            die.state = DieState::Array;
            die.array_done_ns = end + array;
            ctx.schedule(
                die.array_done_ns,
                SsdEvent::DieReady {
                    die: d,
                    generation: die.generation,
                },
            );
            if self.dies[d as usize].nonempty & self.read_queues != 0 {
                // A read queued while this erase (or program) waited for the channel: it
                // finds it running now, as a read arriving now would.
                self.kick(d, OpClass::HostRead, ctx);
            }
        }
    }

    /// `ChannelFree(ch)`: hand the channel to the most urgent waiter.
    pub fn on_channel_free(&mut self, ch: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let now = ctx.now_ns();
        let channel = &mut self.channels[ch as usize];
        channel.wake_pending = false;
        if channel.busy_until > now {
            // Granted at once to a request that found it free after this wake-up was set.
            if !channel.waiters.is_empty() && !channel.held_by_data_out {
                channel.wake_pending = true;
                ctx.schedule(channel.busy_until, SsdEvent::ChannelFree(ch));
            }
            return;
        }
        self.arbitrate(ch, ctx);
    }

    /// `DieReady`: the array finished (or a suspension took effect).
    pub fn on_die_ready(&mut self, d: u32, generation: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let die = &mut self.dies[d as usize];
        if die.generation != generation {
            return;
        }
        match die.state {
            DieState::Suspending => {
                self.account(d, ctx.now_ns());
                let die = &mut self.dies[d as usize];
                die.state = DieState::Idle;
                if die.held {
                    self.quiet.push(d);
                }
                self.start_batch(d, ctx);
            }
            DieState::Array => {
                let first = die.batch.ops[0];
                if first.kind == OpKind::Read {
                    die.state = DieState::DataOut;
                    let bytes = first.bytes;
                    let duration = self.transfer_ns(bytes);
                    self.request_channel(d, true, first.class, duration, ctx);
                } else {
                    self.account(d, ctx.now_ns());
                    let die = &mut self.dies[d as usize];
                    die.state = DieState::Idle;
                    self.done.extend_from_slice(die.batch.ops());
                    self.became_idle(d, ctx);
                }
            }
            other => unreachable!("die {d} ready in state {other:?}"),
        }
    }

    /// `DataOut`: one read's data has left the die.
    pub fn on_data_out(&mut self, d: u32, generation: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        let ch = self.dies[d as usize].channel;
        self.channels[ch as usize].handing_over = true;
        self.data_out_done(d, generation, ctx);
        self.channels[ch as usize].handing_over = false;
        self.arbitrate(ch, ctx);
    }

    fn data_out_done(&mut self, d: u32, generation: u32, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.dies[d as usize].batch.out + 1 == self.dies[d as usize].batch.len {
            self.account(d, ctx.now_ns());
        }
        let die = &mut self.dies[d as usize];
        debug_assert_eq!(die.generation, generation);
        debug_assert_eq!(die.state, DieState::DataOut);
        let op = die.batch.ops[die.batch.out as usize];
        die.batch.out += 1;
        let more = die.batch.out < die.batch.len;
        let next = die.batch.ops[die.batch.out.min(die.batch.len - 1) as usize];
        if !more {
            die.state = DieState::Idle;
        }
        self.done.push(op);
        if more {
            let duration = self.transfer_ns(next.bytes);
            self.request_channel(d, true, next.class, duration, ctx);
        } else {
            self.became_idle(d, ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssd::tests::ssd_config;
    use qoslab_engine::{Harness, Op, ReqId, Request, Stage};

    /// The array alone, one plane per die and dies sharing one channel: a read request reads
    /// die 0, a write programs a page of die 1, a trim erases a block of die 0.
    struct Dies {
        flash: FlashArray<ReqId>,
        pages_per_plane: u32,
    }

    impl Stage for Dies {
        type Event = SsdEvent;
        fn name(&self) -> &'static str {
            "dies"
        }
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<SsdEvent>) {
            let (kind, class, ppa, bytes) = match ctx.reqs()[id].op {
                Op::Read => (OpKind::Read, OpClass::HostRead, 1, 4096),
                Op::Write => (
                    OpKind::Program,
                    OpClass::HostWrite,
                    self.pages_per_plane,
                    8192,
                ),
                _ => (OpKind::Erase, OpClass::Gc, 0, 0),
            };
            let op = FlashOp {
                kind,
                class,
                ppa,
                bytes,
                owner: id,
            };
            self.flash.submit(op, ctx);
            self.drain(ctx);
        }
        fn on_event(&mut self, ev: SsdEvent, ctx: &mut impl StageCtx<SsdEvent>) {
            match ev {
                SsdEvent::ChannelFree(ch) => self.flash.on_channel_free(ch, ctx),
                SsdEvent::DieReady { die, generation } => {
                    self.flash.on_die_ready(die, generation, ctx)
                }
                SsdEvent::DataOut { die, generation } => {
                    self.flash.on_data_out(die, generation, ctx)
                }
                _ => {}
            }
            self.drain(ctx);
        }
    }

    impl Dies {
        fn drain(&mut self, ctx: &mut impl StageCtx<SsdEvent>) {
            self.flash.programs_started.clear();
            for op in self.flash.done.drain(..) {
                ctx.complete(op.owner);
            }
        }
    }

    fn two_dies_on_one_channel() -> Harness<Dies> {
        let cfg = ssd_config(&[
            ("channels", "1"),
            ("chips_per_channel", "2"),
            ("dies_per_chip", "1"),
            ("planes_per_die", "1"),
            ("blocks_per_plane", "256"),
            ("pages_per_block", "64"),
        ]);
        let mut flash = FlashArray::new(&cfg);
        flash.track_die_usage();
        Harness::new(Dies {
            flash,
            pages_per_plane: cfg.geo.pages_per_plane(),
        })
    }

    #[test]
    fn a_read_queued_while_an_erase_waits_for_the_channel_suspends_it_once_it_runs() {
        let mut h = two_dies_on_one_channel();
        // Die 1's program holds the channel for its command and 8 KiB of data until
        // 361 + 8192 x 3 = 24,937 ns; die 0's erase, queued at 1 us, waits for it to send its
        // command (220 ns) and the read, queued at 2 us, waits behind the erase.
        h.submit_at(0, Request::new(Op::Write, 0, 8192, 0, 0));
        h.submit_at(1_000, Request::new(Op::Trim, 0, 8192, 0, 1_000));
        let read = h.submit_at(2_000, Request::new(Op::Read, 0, 4096, 0, 2_000));
        h.run_until(1_000_000);
        let done = |id: ReqId| h.completed.iter().find(|c| c.0 == id).unwrap().1;
        // The die runs the erase from 24,937 ns, when its command takes the channel, with 3.8 ms
        // to go: the read suspends it (700 us), then is read (290 ns command, tR 75 us, 4096 B
        // out at 3 ns/B): done at 812,515 ns, not after the whole erase (3.83 ms).
        let erase_runs = 361 + 8192 * 3;
        assert_eq!(done(read), erase_runs + 700_000 + 290 + 75_000 + 4096 * 3);
        assert_eq!(done(read), 812_515);
        // What the die did until 1 ms, as the slow-read diagnostic reads it: idle until the
        // erase was queued, the erase (waiting for the channel, being suspended, then resumed
        // once the read was out), the read.
        let usage = h.stage.flash.die_usage(1, 1_000_000);
        assert_eq!(
            usage[die_use(OpClass::Gc, OpKind::Erase)],
            erase_runs + 700_000 - 1_000 + (1_000_000 - done(read))
        );
        assert_eq!(
            usage[die_use(OpClass::HostRead, OpKind::Read)],
            290 + 75_000 + 4096 * 3
        );
        assert_eq!(usage[DIE_IDLE], 1_000);
    }

    #[test]
    fn a_command_that_waits_behind_a_grant_made_as_a_data_out_ends_gets_the_channel_after_it() {
        let mut h = two_dies_on_one_channel();
        // Die 0 reads twice: the first read's data leaves at 290 + 75,000 + 4096 x 3 = 87,578
        // ns, when the second's command asks for the channel. Die 1's program asks at that same
        // instant, first, finds the channel free and takes it for its command and data
        // (361 + 8192 x 3 = 24,937 ns): the second read's command waits for it to end.
        let first = h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        let second = h.submit_at(1, Request::new(Op::Read, 0, 4096, 0, 1));
        let out = 290 + 75_000 + 4096 * 3;
        h.submit_at(out, Request::new(Op::Write, 0, 8192, 0, out));
        h.run_all();
        let done = |id: ReqId| h.completed.iter().find(|c| c.0 == id).map(|c| c.1);
        assert_eq!(done(first), Some(out));
        assert_eq!(done(second), Some(out + 361 + 8192 * 3 + out));
    }
}
