//! The GC gate: whether garbage collection and other background work (destaging the write
//! cache) may start on an NVM set now. The SSD asks it before choosing a victim and before
//! destaging a page; a closed gate defers the work until it opens. A gate may also own admin
//! commands (features, log pages) and count host commands, which is how Predictable Latency
//! Mode's windows (`plm`) are one gate.
//!
//! A gate is a plug-in: one file with a [`GcGate`] and its [`GateOps`], one line in [`GATES`];
//! the device file names it in `media.gc.gate` and its tunables are `[media.gc.NAME]`.
//!
//! The SSD keeps one promise whatever the gate: GC runs on a plane whose free blocks fell below
//! `gc.min_free_blocks`, and a full write cache with writes waiting destages; the gate hears of
//! it through [`GcGate::forced`].
//!
//! A gate may also *hold* a set ([`GateAction::Hold`]): its dies then start no background
//! operation (no GC read, program or erase, no destage and no mapping write-back), keep a
//! suspended one suspended, and finish the one they run; what is queued stays queued, page by
//! page, until the gate opens the set again ([`GateAction::Opened`]).

pub mod always;
pub mod plm;

use qoslab_engine::{Control, Notice, Ns, Op, Settings};

/// The gate's hooks. Sets are numbered from 0 (NVM Set Identifier minus 1).
pub trait GcGate {
    /// Whether GC may start work on `set` now. Always, by default.
    fn gc_allowed(&mut self, _set: u16, _now_ns: Ns) -> bool {
        true
    }

    /// Whether the write cache may destage pages of `set` now. Always, by default.
    fn destage_allowed(&mut self, _set: u16, _now_ns: Ns) -> bool {
        true
    }

    /// A host read, write or trim of `len_bytes` on `set` arrives (called only for gates with
    /// the [`GateCaps::COMMANDS`] capability).
    fn command(&mut self, _set: u16, _op: Op, _len_bytes: u64, _io: &mut GateIo<'_>) {}

    /// An admin command reaches the media: answer it if it is the gate's, else leave its status
    /// `Unhandled`.
    fn control(&mut self, _msg: &mut Control, _io: &mut GateIo<'_>) {}

    /// A wake-up the gate asked for ([`GateIo::wake_at`]) is due.
    fn wake(&mut self, _token: u32, _io: &mut GateIo<'_>) {}

    /// Background work had to run on `set` although the gate was closed.
    fn forced(&mut self, _set: u16, _io: &mut GateIo<'_>) {}

    /// Whether the gate waits for `set` to settle (then [`GcGate::settled`] is called when its
    /// background work may have ended).
    fn awaits_settle(&self, _set: u16) -> bool {
        false
    }

    /// `set` settled: no background operation runs on its dies (the set is held, so none
    /// starts either).
    fn settled(&mut self, _set: u16, _io: &mut GateIo<'_>) {}

    /// The window `set` is in now, for diagnostics (a gate without windows: `Off`).
    fn window(&self, _set: u16) -> WindowState {
        WindowState::Off
    }

    /// The gate's own counters for the report.
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// An NVM set's Predictable Latency Mode window, as a diagnostic sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// No windows (the mode is off, or the gate has none).
    Off,
    Deterministic,
    NonDeterministic,
    /// Asked into DTWin, still finishing the work a DTWin cannot carry (reported as NDWin).
    Entering,
}

/// What the gate asks of the SSD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateAction {
    /// Call `wake(token)` at `at_ns`.
    Wake { at_ns: Ns, token: u32 },
    /// Send a notice up (an asynchronous event).
    Notify(Notice),
    /// Hold `set`: its dies start no background work from now on.
    Hold(u16),
    /// The gate opened for `set`: held and deferred work may start.
    Opened(u16),
}

/// What a gate's hooks see and may do.
pub struct GateIo<'a> {
    pub now_ns: Ns,
    /// Whether a set is settled now (see [`GcGate::settled`]).
    pub settled: &'a dyn Fn(u16) -> bool,
    pub(crate) actions: &'a mut Vec<GateAction>,
}

impl GateIo<'_> {
    pub fn wake_at(&mut self, at_ns: Ns, token: u32) {
        self.actions.push(GateAction::Wake { at_ns, token });
    }
    pub fn notify(&mut self, notice: Notice) {
        self.actions.push(GateAction::Notify(notice));
    }
    pub fn opened(&mut self, set: u16) {
        self.actions.push(GateAction::Opened(set));
    }
    pub fn hold(&mut self, set: u16) {
        self.actions.push(GateAction::Hold(set));
    }
}

bitflags::bitflags! {
    /// What a gate does besides answering `gc_allowed`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct GateCaps: u32 {
        /// Wants every host command (`command`).
        const COMMANDS = 1 << 0;
        /// May close: the SSD checks background work against it (a gate that never closes
        /// saves those calls).
        const CLOSES = 1 << 1;
        /// Keeps each set's Predictable Latency Mode windows: the drive then offers
        /// [`DeviceCaps::PREDICTABLE_LATENCY`](crate::DeviceCaps).
        const WINDOWS = 1 << 2;
    }
}

/// What a constructor gets.
pub struct GateSetup<'a> {
    /// NVM sets of the drive.
    pub sets: u16,
    /// The flash page: the drive's optimal write size.
    pub page_bytes: u32,
    /// The longest a set waits, once held, for the background operations its dies run to end
    /// ([`SsdConfig::background_end_bound_ns`](super::config::SsdConfig::background_end_bound_ns)).
    pub entry_bound_ns: Ns,
    /// The gate's own sub-table.
    pub settings: &'a Settings,
}

pub type BuildGate = fn(&GateSetup<'_>) -> Box<dyn GcGate>;

qoslab_engine::plugin_ops! {
    /// One gate, as the registry knows it.
    pub struct GateOps: "GC gate", tunables "[media.gc.NAME]", build BuildGate {
        pub caps: GateCaps,
    }
}

/// Every gate a device file can name.
pub static GATES: &[&GateOps] = &[&always::OPS, &plm::OPS];

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(GateOps, always::OPS, GATES, "media.gc.gate");

    #[test]
    fn the_default_gate_always_lets_gc_run() {
        let s = Settings::defaults("g", always::OPS.tunables);
        let mut g = always::OPS.build.unwrap()(&GateSetup {
            sets: 4,
            page_bytes: 4096,
            entry_bound_ns: 0,
            settings: &s,
        });
        assert!((0..4).all(|set| g.gc_allowed(set, 123) && g.destage_allowed(set, 123)));
        assert!(always::OPS.caps.is_empty());
    }
}
