//! The GC gate: whether garbage collection may start work on an NVM set now. The SSD asks it
//! before choosing a victim; a closed gate defers the work until it opens.
//!
//! A gate is a plug-in: one file with a [`GcGate`] and its [`GateOps`], one line in [`GATES`];
//! the device file names it in `media.gc.gate` and its tunables are `[media.gc.NAME]`.

pub mod always;

use qoslab_engine::{Ns, PluginInfo, STAGE_API_VERSION, Settings, Tunable};

use super::plugin::Plugin;

/// The gate's hooks.
pub trait GcGate {
    /// Whether GC may start work on NVM set `set` (0-based) at `now_ns`. Always, by default.
    fn gc_allowed(&mut self, _set: u16, _now_ns: Ns) -> bool {
        true
    }
}

/// What a constructor gets.
pub struct GateSetup<'a> {
    /// NVM sets of the drive.
    pub sets: u16,
    /// The gate's own sub-table.
    pub settings: &'a Settings,
}

pub type BuildGate = fn(&GateSetup<'_>) -> Box<dyn GcGate>;

/// One gate, as the registry knows it.
pub struct GateOps {
    pub name: &'static str,
    pub help: &'static str,
    pub api_version: u32,
    /// Its tunables, read from `[media.gc.NAME]`.
    pub tunables: &'static [Tunable],
    /// Builds it (required).
    pub build: Option<BuildGate>,
}

impl Plugin for GateOps {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            kind: "GC gate",
            name: self.name,
            api_version: self.api_version,
            missing_hooks: if self.build.is_none() {
                &["build"]
            } else {
                &[]
            },
        }
    }
    fn help(&self) -> &'static str {
        self.help
    }
    fn tunables(&self) -> &'static [Tunable] {
        self.tunables
    }
}

/// Every gate a device file can name.
pub static GATES: &[&GateOps] = &[&always::OPS];

pub(crate) const API: u32 = STAGE_API_VERSION;

#[cfg(test)]
mod tests {
    use super::super::plugin::lookup;
    use super::*;

    static FROM_THE_FUTURE: GateOps = GateOps {
        name: "future",
        help: "written for a later contract",
        api_version: API + 1,
        tunables: &[],
        build: Some(|_| Box::new(always::Always)),
    };

    static HOOKLESS: GateOps = GateOps {
        name: "hookless",
        help: "forgot its constructor",
        api_version: API,
        tunables: &[],
        build: None,
    };

    #[test]
    fn the_registry_refuses_another_contract_version_or_a_missing_hook() {
        let reg: &[&'static GateOps] = &[&always::OPS, &FROM_THE_FUTURE, &HOOKLESS];
        assert!(lookup(reg, "media.gc.gate", "always").is_ok());
        let e = lookup(reg, "media.gc.gate", "future")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("built for stage API version"), "{e}");
        let e = lookup(reg, "media.gc.gate", "hookless")
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "GC gate 'hookless' lacks the required hook 'build'");
    }

    #[test]
    fn the_default_gate_always_lets_gc_run() {
        let s = Settings::defaults("g", always::OPS.tunables);
        let mut g = always::OPS.build.unwrap()(&GateSetup {
            sets: 4,
            settings: &s,
        });
        assert!((0..4).all(|set| g.gc_allowed(set, 123)));
    }
}
