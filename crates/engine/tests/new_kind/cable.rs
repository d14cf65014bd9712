//! A new kind of plug-in: how a cable delays a request. The kind is one trait (its hooks), one
//! ops table declared with `plugin_ops!` and one registry; the stage that uses it calls the
//! chosen plug-in's hooks and asks its capabilities, never its name.

use qoslab_engine::{Admission, ConfigError, Ns, ReqId, Request, Settings, Stage, StageCtx};

/// The kind's hooks.
pub trait CableDelay {
    /// How long `req` spends on the cable.
    fn delay_ns(&self, req: &Request) -> Ns;
}

/// What a constructor gets: the plug-in's own sub-table, `[cable.NAME]`.
pub struct CableSetup<'a> {
    pub settings: &'a Settings,
}

pub type BuildCable = fn(&CableSetup<'_>) -> Box<dyn CableDelay>;

qoslab_engine::plugin_ops! {
    /// One cable delay, as the registry knows it.
    pub struct CableOps: "cable delay", tunables "[cable.NAME]", build BuildCable {
        /// Capability: the delay grows with the request's size.
        pub per_byte: bool,
    }
}

/// Every cable delay a device file can name.
pub static CABLES: &[&CableOps] = &[&FIXED];

/// The cable delay called `name` (key `cable.delay`), checked against the stage contract.
pub fn lookup(name: &str) -> Result<&'static CableOps, ConfigError> {
    qoslab_engine::lookup(CABLES, "cable.delay", name)
}

// The first plug-in of the kind, declared whole with `plugin!` (a plug-in of an existing kind
// is a file of its own).

qoslab_engine::plugin! {
    pub static FIXED: CableOps = "fixed", "every request spends the same time on the cable", per_byte: false;
    /// `[cable.fixed]`.
    tunables struct FixedConfig in FIXED_TUNABLES {
        delay_ns: Ns = ns(500, "time every request spends on the cable"),
    }
    build |_setup, config| Box::new(Fixed(config.delay_ns))
}

struct Fixed(Ns);

impl CableDelay for Fixed {
    fn delay_ns(&self, _req: &Request) -> Ns {
        self.0
    }
}

/// The stage that uses the kind: the cable of the previous example, its delay a plug-in.
pub struct Cable {
    pub delay: Box<dyn CableDelay>,
}

impl Stage for Cable {
    type Event = ReqId;

    fn name(&self) -> &'static str {
        "cable"
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        let at = ctx.now_ns() + self.delay.delay_ns(&ctx.reqs()[id]);
        ctx.schedule(at, id);
    }

    fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        assert_eq!(ctx.dispatch(id), Admission::Accepted);
    }
}
