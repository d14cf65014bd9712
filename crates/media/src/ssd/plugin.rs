//! What the SSD's plug-in registries share beyond the engine's plug-in idiom
//! ([`qoslab_engine::plugin`]: each kind (flash scheduling, GC victim choice, GC gate, die
//! priority) is an ops table declared with `qoslab_engine::plugin_ops!`, one registry line
//! per plug-in, found by `qoslab_engine::lookup`): a plug-in's tunables form its own
//! sub-table, `[media.KEY]` (`[media.gc.rga]`), which [`sub_tables`] lists for the device file
//! and [`settings_of`] reads.

use qoslab_engine::{ConfigError, Plugin, Settings};

use crate::SubTable;

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
