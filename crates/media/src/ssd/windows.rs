//! The SSD's GC gate and its windows (Predictable Latency Mode): running a gate hook and doing
//! what it asks (wake-ups, notices, holding or releasing a set's dies, deferred GC and
//! destages when it opens), "settled" (no background work on a set's dies), and the diagnostic
//! of background work inside deterministic windows.

use qoslab_engine::{Ns, StageCtx};

use super::flash::{self, FlashArray, OpClass, OpKind};
use super::gate::{self, GateAction, GateCaps, GateIo, GcGate};
use super::{Cont, DtwinAudit, Ssd, SsdEvent};

impl Ssd {
    // ---- the GC gate -------------------------------------------------------------------------

    pub(super) fn set_of_die(&self, d: u32) -> u16 {
        let planes = self.cfg.geo.planes_per_die;
        self.cfg.geo.set_of_plane(d * planes)
    }

    /// Whether NVM set `set` may start a window without background work: no background
    /// operation (a host write's program or its read, a mapping write-back, GC) runs on its
    /// dies. What is queued stays queued while the set is held.
    pub(super) fn settled(flash: &FlashArray<Cont>, dies: &[u32]) -> bool {
        dies.iter().all(|&d| !flash.background_running(d))
    }

    /// Runs gate hook `f`, then does what it asked.
    pub(super) fn gate_hook(
        &mut self,
        ctx: &mut impl StageCtx<SsdEvent>,
        f: impl FnOnce(&mut dyn GcGate, &mut GateIo<'_>),
    ) {
        let mut actions = std::mem::take(&mut self.gate_actions);
        {
            let (flash, set_dies) = (&self.flash, &self.set_dies);
            let settled = |set: u16| Self::settled(flash, &set_dies[set as usize]);
            let mut io = GateIo {
                now_ns: ctx.now_ns(),
                settled: &settled,
                actions: &mut actions,
            };
            f(self.gate.as_mut(), &mut io);
        }
        for a in actions.drain(..) {
            match a {
                GateAction::Wake { at_ns, token } => ctx.schedule(at_ns, SsdEvent::GateWake(token)),
                GateAction::Notify(n) => ctx.notify_above(n),
                GateAction::Hold(set) => {
                    for i in 0..self.set_dies[set as usize].len() {
                        let d = self.set_dies[set as usize][i];
                        self.flash.hold(d, true, ctx);
                    }
                }
                GateAction::Opened(set) => {
                    for i in 0..self.set_dies[set as usize].len() {
                        let d = self.set_dies[set as usize][i];
                        self.flash.hold(d, false, ctx);
                    }
                    for i in 0..self.cfg.geo.set_planes(set).len() {
                        let p = self.cfg.geo.set_planes(set)[i];
                        if self.gc[p as usize].deferred {
                            self.maybe_gc(p, ctx);
                        }
                    }
                    self.pump_all(ctx);
                }
            }
        }
        if self.gate_actions.capacity() < actions.capacity() {
            self.gate_actions = actions;
        }
        if self.dtwin_audit.is_some() {
            self.audit_dtwin(ctx.now_ns());
        }
    }

    /// Tells a gate waiting for `set` to settle that it has.
    pub(super) fn check_settled(&mut self, set: u16, ctx: &mut impl StageCtx<SsdEvent>) {
        if self.gate_caps.contains(GateCaps::CLOSES)
            && self.gate.awaits_settle(set)
            && Self::settled(&self.flash, &self.set_dies[set as usize])
        {
            self.gate_hook(ctx, |g, io| g.settled(set, io));
        }
    }

    /// Starts the diagnostic of background work in DTWin: the flash array tracks its dies'
    /// usage, and each DTWin of a set adds the background time of the set's dies during it.
    pub fn audit_dtwin_background(&mut self) {
        self.flash.track_die_usage();
        let sets = self.set_dies.len();
        self.dtwin_audit = Some(DtwinAudit {
            inside: vec![false; sets],
            at_entry_ns: vec![0; sets],
            background_ns: vec![0; sets],
        });
    }

    /// Background time (host writes' and GC's reads, programs and erases) of `set`'s dies up to
    /// `now`, from the flash array's usage tracking.
    pub(super) fn background_ns(&self, set: u16, now: Ns) -> Ns {
        use flash::die_use;
        let mut total = 0;
        for &d in &self.set_dies[set as usize] {
            let usage = self.flash.die_usage_of(d, now);
            for class in [OpClass::HostWrite, OpClass::Gc] {
                for kind in [OpKind::Read, OpKind::Program, OpKind::Erase] {
                    total += usage[die_use(class, kind)];
                }
            }
        }
        total
    }

    /// After a gate hook: a set that entered DTWin notes its dies' background time so far, one
    /// that left adds what ran meanwhile.
    pub(super) fn audit_dtwin(&mut self, now: Ns) {
        for set in 0..self.set_dies.len() as u16 {
            let inside = self.gate.window(set) == gate::WindowState::Deterministic;
            let audit = self.dtwin_audit.as_ref().expect("checked");
            if inside == audit.inside[set as usize] {
                continue;
            }
            let spent = self.background_ns(set, now);
            let audit = self.dtwin_audit.as_mut().expect("checked");
            let s = set as usize;
            audit.inside[s] = inside;
            if inside {
                audit.at_entry_ns[s] = spent;
            } else {
                audit.background_ns[s] += spent - audit.at_entry_ns[s];
            }
        }
    }
}
