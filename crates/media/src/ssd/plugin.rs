//! What the SSD's plug-in registries share: each kind (GC victim choice, GC gate, die
//! priority) is an ops table per plug-in (name, help, the stage contract it was written for,
//! its tunables, capability flags, constructor) listed once in its kind's registry, in the
//! idiom of the NVMe arbiters. A plug-in's tunables form its own sub-table, `[media.KEY]`
//! (`[media.gc.rga]`), which [`sub_tables`] lists for the device file.

use qoslab_engine::{ConfigError, PluginInfo, Settings, Tunable};

use crate::SubTable;

/// Declares a plug-in kind's ops table: the fields every kind has (name, help, contract
/// version, tunables, the required constructor), the kind's own capability fields, and its
/// [`Plugin`] impl. A macro rather than a generic struct because each kind's capability fields
/// differ and a plug-in file writes its table as a plain `static` literal.
macro_rules! plugin_ops {
    (
        $(#[$meta:meta])*
        pub struct $ops:ident: $kind:literal, section $section:literal, build $build:ty {
            $($(#[$fmeta:meta])* pub $field:ident: $fty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $ops {
            pub name: &'static str,
            pub help: &'static str,
            /// The stage contract the plug-in was written for.
            pub api_version: u32,
            #[doc = concat!("Its tunables, read from `[media.", $section, ".NAME]`.")]
            pub tunables: &'static [qoslab_engine::Tunable],
            $($(#[$fmeta])* pub $field: $fty,)*
            /// Builds it (required).
            pub build: Option<$build>,
        }

        impl $crate::ssd::plugin::Plugin for $ops {
            fn info(&self) -> qoslab_engine::PluginInfo {
                qoslab_engine::PluginInfo {
                    kind: $kind,
                    name: self.name,
                    api_version: self.api_version,
                    missing_hooks: if self.build.is_none() { &["build"] } else { &[] },
                }
            }
            fn help(&self) -> &'static str {
                self.help
            }
            fn tunables(&self) -> &'static [qoslab_engine::Tunable] {
                self.tunables
            }
        }
    };
}

/// What a registry needs to know of a plug-in to find and check it.
pub trait Plugin: Sync + 'static {
    /// Kind and name for messages (`GC victim policy 'rga'`).
    fn info(&self) -> PluginInfo;
    fn help(&self) -> &'static str;
    fn tunables(&self) -> &'static [Tunable];
}

/// The plug-in of `registry` called `name` (the value of key `field`, e.g. `media.gc.victim`),
/// checked against the stage contract.
pub fn lookup<P: Plugin>(
    registry: &[&'static P],
    field: &str,
    name: &str,
) -> Result<&'static P, ConfigError> {
    let ops = registry
        .iter()
        .find(|p| p.info().name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = registry.iter().map(|p| p.info().name).collect();
            ConfigError::new(format!(
                "field '{field}': expected one of {}, got '{name}'",
                names.join(", ")
            ))
        })?;
    qoslab_engine::check_plugin(&ops.info()).map_err(ConfigError::new)?;
    Ok(ops)
}

/// The sub-tables of every plug-in of `registry` that has tunables, under `[media.PREFIX.NAME]`.
pub fn sub_tables<P: Plugin>(prefix: &str, registry: &[&'static P], out: &mut Vec<SubTable>) {
    for p in registry.iter().filter(|p| !p.tunables().is_empty()) {
        out.push(SubTable {
            key: format!("{prefix}.{}", p.info().name),
            help: p.help(),
            tunables: p.tunables(),
        });
    }
}

/// The settings of the plug-in `chosen` of `registry` (its defaults when the device file gave
/// its sub-table no key). Values given in the sub-table of a plug-in that is not chosen are an
/// error: they would silently do nothing.
pub fn settings_of<P: Plugin>(
    prefix: &str,
    registry: &[&'static P],
    chosen: &'static P,
    sections: &[Settings],
) -> Result<Settings, ConfigError> {
    let mut mine = None;
    for p in registry {
        let key = format!("media.{prefix}.{}", p.info().name);
        let Some(s) = sections.iter().find(|s| s.section() == key) else {
            continue;
        };
        if std::ptr::eq(*p, chosen) {
            mine = Some(s.clone());
        } else if let Some((name, _)) = s
            .iter()
            .zip(s.table())
            .find(|(_, t)| s.is_given(t.name))
            .map(|(kv, _)| kv)
        {
            return Err(ConfigError::new(format!(
                "field '{key}.{name}': the {} is '{}', not '{}' (remove [{key}] or choose '{}')",
                chosen.info().kind,
                chosen.info().name,
                p.info().name,
                p.info().name
            )));
        }
    }
    Ok(mine.unwrap_or_else(|| {
        Settings::defaults(
            &format!("media.{prefix}.{}", chosen.info().name),
            chosen.tunables(),
        )
    }))
}
