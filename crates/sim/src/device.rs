//! Device files: one TOML file describes the whole path below the jobs (the block layer, the
//! NVMe hosts, the transport, the controller and the media), so a preset can describe a whole
//! drive in its system.
//!
//! ```toml
//! description = "what this device is and where its numbers come from"
//!
//! [path]            # PATH_TUNABLES: how many hosts, which driver and transport
//! transport = "pcie"
//!
//! [block]           # qoslab_block::BLOCK_TUNABLES (/sys/block/DEV/queue)
//! scheduler = "mq-deadline"
//!
//! [block.mq-deadline]  # the chosen scheduler's own tunables (queue/iosched)
//! fifo_batch = 8
//!
//! [host]            # qoslab_nvme::HOST_TUNABLES
//! submit_ns = 1500
//!
//! [controller]      # qoslab_nvme::CONTROLLER_TUNABLES
//! arbitration = "wrr"
//!
//! [controller.wrr]  # the chosen arbiter's own tunables
//! high_weight = 8
//!
//! [link]            # the chosen transport's tunables (pcie: qoslab_nvme::PCIE_TUNABLES)
//! lane_rate = 1.0
//!
//! [media]
//! model = "analytic"   # a name from qoslab_media::registry; the other keys are its tunables
//! servers = 4
//!
//! [cpu]             # qoslab_block::cpu::CPU_TUNABLES: the CPU submissions and completions take
//! model = "one"
//!
//! [cpu.one]         # a CPU model's own tunables (read whichever model is chosen)
//! submit_ns = "11us"
//!
//! [fs]              # qoslab_fs::FS_TUNABLES: the page cache and the file system above
//! type = "ext4"
//!
//! [fs.ext4]         # the chosen file system's own tunables (its mount options)
//! barrier = true
//! ```
//!
//! Every section is optional (its tunables keep their defaults); every key is checked against
//! its table, so a misspelt key or a value in the wrong unit stops with the file, line and
//! field. `--set section.key=value` overrides any of them afterwards. A key that chooses a
//! plug-in (`path.transport`, `block.scheduler`, `controller.arbitration`, `media.model`)
//! decides which table the
//! plug-in's section is read with, so it is read first (from the file, then `--set`).

use std::path::{Path, PathBuf};

use qoslab_block::{BLOCK_TUNABLES, BlockConfig, SCHEDULERS};
use qoslab_engine::tunable::apply_override;
use qoslab_engine::{ConfigDoc, ConfigError, Plugin, RawValue, Settings, Tunable};
use qoslab_fabric::cut::RECOVERY_TUNABLES;
use qoslab_fabric::target::{TARGETS_TUNABLES, TargetsConfig};
use qoslab_media::registry::{model_info, model_sub_tables};
use qoslab_media::{BuildCtx, DeviceModel, model_names};
use qoslab_nvme::transport::{transport_info, transport_names};
use qoslab_nvme::{ARBITERS, CONTROLLER_TUNABLES, ControllerConfig, HOST_TUNABLES, HostConfig};

qoslab_engine::choice! {
    /// The driver below the block layer.
    pub enum Driver { Nvme = "nvme", Ata = "ata", Simple = "simple" }
}

qoslab_engine::settings! {
    /// `[path]`: the shape of the path below the jobs: block layer, NVMe hosts, transport, NVMe
    /// controller, media.
    pub struct PathConfig in PATH_TUNABLES {
        hosts: u16 = count(1, "NVMe hosts sharing the controller, each with its own block layer queues, driver, queue pairs and link; a job picks its host with sim_host").range(1.0, 64.0),
        transport: String = text("pcie", "how commands, completions and data cross between the hosts and the controller: a transport's name; its tunables are its own section"),
        driver: Driver = choice(Driver::Nvme, "what is below the block layer: nvme (NVMe host, transport, controller, then the media), ata (a SATA disk: the media right below the block layer, one hardware queue of NCQ depth 32) or simple (a driver like null_blk or scsi_debug: the media right below the block layer, one hardware queue of path.hw_queue_depth tags); with ata and simple, [host], [controller] and the transport are not used"),
        hw_queue_depth: u32 = count(64, "driver simple: tags of its one hardware queue, all of which may be out at the media at once (null_blk hw_queue_depth, default 64; scsi_debug max_queue)").range(1.0, 65536.0),
        max_hw_sectors_kb: u32 = count(0, "driver simple: the largest request it takes, KiB (queue/max_hw_sectors_kb; null_blk's default is 127); 0 = no limit").range(0.0, 4194304.0),
    }
}

include!(concat!(env!("OUT_DIR"), "/presets.rs"));

/// The model used when a device file has no `[media] model`.
pub const DEFAULT_MODEL: &str = "analytic";

/// A device file read and checked, with overrides applied.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// The preset name or the file path, for reports.
    pub source: String,
    pub description: String,
    pub path: Settings,
    pub host: Settings,
    pub controller: Settings,
    /// The block layer, `[block]`.
    pub block: Settings,
    /// The chosen scheduler's sub-table, `[block.NAME]`.
    pub scheduler: Settings,
    /// The chosen arbiter's sub-table, `[controller.NAME]`.
    pub arbiter: Settings,
    /// The chosen replica policy's sub-table, `[host.NAME]` (empty for `none`).
    pub replicas: Settings,
    /// The chosen transport's section.
    pub transport: Settings,
    /// Target servers behind the transport, `[fabric]`.
    pub fabric: Settings,
    /// What recovery after a cut costs, `[fabric.recovery]`.
    pub recovery: Settings,
    /// Every ordering plug-in's sub-table, `[block.NAME]`, in the registry's order.
    pub orderings: Vec<Settings>,
    pub model: String,
    pub media: Settings,
    /// The media model's plug-in sub-tables (`[media.gc.rga]`), every one the model has.
    pub media_subs: Vec<Settings>,
    /// The page cache and file system, `[fs]`, and the chosen file system's table,
    /// `[fs.NAME]`: used when a job reads or writes through them (`crates/fs`).
    pub fs: Settings,
    pub fs_own: Settings,
    /// The host CPU, `[cpu]`.
    pub cpu: Settings,
    /// Every CPU model's table, `[cpu.NAME]`, in the registry's order: the chosen model's is
    /// used ([`DeviceConfig::cpu_model_settings`]), the others are kept unused.
    pub cpu_models: Vec<Settings>,
    /// Folder of the device file (relative paths in it are resolved there).
    pub dir: Option<PathBuf>,
}

/// Names of the embedded presets.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The text of preset `name`.
pub fn preset_text(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

fn media_table(model: &str) -> Option<&'static [Tunable]> {
    model_info(model).map(|(_, _, t)| t)
}

impl DeviceConfig {
    /// `spec` is a preset name or the path of a TOML file; `overrides` are `section.key=value`.
    pub fn load(spec: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        let path = Path::new(spec);
        let looks_like_file = spec.ends_with(".toml") || spec.contains('/') || path.exists();
        let (doc, source, dir) = if looks_like_file {
            let doc = ConfigDoc::load(path)?;
            let dir = path.parent().map(|d| {
                if d.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    d.to_path_buf()
                }
            });
            (doc, spec.to_string(), dir)
        } else {
            let text = preset_text(spec).ok_or_else(|| {
                ConfigError::new(format!(
                    "--device {spec}: no such preset or file (presets: {})",
                    preset_names().join(", ")
                ))
            })?;
            let name = format!("preset '{spec}'");
            (
                ConfigDoc::parse(Path::new(&name), text)?,
                spec.to_string(),
                None,
            )
        };
        Self::from_doc(doc, source, dir, overrides)
    }

    /// A device from TOML text (tests, the Python API).
    pub fn from_text(text: &str, name: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        let doc = ConfigDoc::parse(Path::new(name), text)?;
        Self::from_doc(doc, name.to_string(), None, overrides)
    }

    fn from_doc(
        mut doc: ConfigDoc,
        source: String,
        dir: Option<PathBuf>,
        overrides: &[String],
    ) -> Result<Self, ConfigError> {
        let path = doc.path().to_path_buf();
        let description = doc.take_text("description")?.unwrap_or_default();
        let model = choose(
            &mut doc,
            overrides,
            "media.model",
            DEFAULT_MODEL,
            model_names(),
            |m| media_table(m).is_some(),
        )?;
        let transport_name = choose(
            &mut doc,
            overrides,
            "path.transport",
            "pcie",
            transport_names(),
            |t| transport_info(t).is_some(),
        )?;
        let arbiter_names: Vec<&str> = ARBITERS.iter().map(|a| a.name).collect();
        let arbiter_name = choose(
            &mut doc,
            overrides,
            "controller.arbitration",
            "rr",
            &arbiter_names,
            |a| qoslab_nvme::arbiter::lookup(a).is_ok(),
        )?;
        let sched_names = qoslab_block::scheduler_names();
        let sched_name = choose(
            &mut doc,
            overrides,
            "block.scheduler",
            "none",
            &sched_names,
            |s| qoslab_block::lookup(s).is_ok(),
        )?;
        let replica_names = qoslab_nvme::replicas::names();
        let replicas_name = choose(
            &mut doc,
            overrides,
            "host.replicas",
            qoslab_nvme::replicas::NONE,
            &replica_names,
            |r| qoslab_nvme::replicas::lookup(r).is_ok(),
        )?;
        let fs_names = qoslab_fs::journal::names();
        let fs_name = choose(&mut doc, overrides, "fs.type", "ext4", &fs_names, |f| {
            qoslab_fs::journal::lookup(f).is_ok()
        })?;
        let cpu_names = qoslab_block::cpu::names();
        let cpu_name = choose(
            &mut doc,
            overrides,
            "cpu.model",
            qoslab_block::cpu::NONE,
            &cpu_names,
            |c| qoslab_block::cpu::lookup(c).is_ok(),
        )?;
        let r_table = qoslab_nvme::replicas::lookup(&replicas_name)
            .expect("registered")
            .map_or(&[][..], |r| r.tunables);
        let table = media_table(&model).expect("chosen from the registry");
        let (_, _, t_section, t_table) = transport_info(&transport_name).expect("registered");
        let a_table = qoslab_nvme::arbiter::lookup(&arbiter_name)
            .expect("registered")
            .tunables;
        let mut path_s = doc.section("path", PATH_TUNABLES)?;
        let mut arbiter = doc.section(&format!("controller.{arbiter_name}"), a_table)?;
        let s_table = qoslab_block::lookup(&sched_name)
            .expect("registered")
            .tunables;
        let mut scheduler = doc.section(&format!("block.{sched_name}"), s_table)?;
        let mut orderings = qoslab_block::ORDERINGS
            .iter()
            .map(|o| doc.section(&format!("block.{}", o.name), o.tunables))
            .collect::<Result<Vec<_>, _>>()?;
        let mut block = doc.section("block", BLOCK_TUNABLES)?;
        let mut recovery = doc.section("fabric.recovery", RECOVERY_TUNABLES)?;
        let mut fabric = doc.section("fabric", TARGETS_TUNABLES)?;
        let mut replicas = doc.section(&format!("host.{replicas_name}"), r_table)?;
        let mut host = doc.section("host", HOST_TUNABLES)?;
        let mut controller = doc.section("controller", CONTROLLER_TUNABLES)?;
        let mut transport = doc.section(t_section, t_table)?;
        let mut media_subs = model_sub_tables(&model)
            .expect("chosen from the registry")
            .iter()
            .map(|t| doc.section(&format!("media.{}", t.key), t.tunables))
            .collect::<Result<Vec<_>, _>>()?;
        let mut media = doc.section("media", table)?;
        let fs_table = qoslab_fs::journal::lookup(&fs_name)
            .expect("chosen from the registry")
            .tunables;
        let mut fs_own = doc.section(&format!("fs.{fs_name}"), fs_table)?;
        let mut fs = doc.section("fs", qoslab_fs::FS_TUNABLES)?;
        // Every CPU model's table is read, not only the chosen one's: its costs (a guest
        // device's measured CPU per I/O, which its twin carries) describe the machine the
        // device runs on, not a run's choice of model, so a file with `[cpu.one]` loads while
        // `cpu.model` is `none` and `--set cpu.model=one` runs with those costs. A table of a
        // model not chosen is still checked key by key (a misspelt key stays an error) and
        // kept unused (not reported), as every ordering's table is.
        let mut cpu_models = qoslab_block::cpu::CPUS
            .iter()
            .map(|c| doc.section(&format!("cpu.{}", c.name), c.tunables))
            .collect::<Result<Vec<_>, _>>()?;
        let mut cpu = doc.section("cpu", qoslab_block::cpu::CPU_TUNABLES)?;
        doc.finish()?;
        // The choices were read first; their sections record them for the report.
        path_s
            .set("transport", &RawValue::Text(transport_name))
            .expect("a text tunable");
        controller
            .set("arbitration", &RawValue::Text(arbiter_name))
            .expect("a text tunable");
        block
            .set("scheduler", &RawValue::Text(sched_name))
            .expect("a text tunable");
        host.set("replicas", &RawValue::Text(replicas_name))
            .expect("a text tunable");
        fs.set("type", &RawValue::Text(fs_name))
            .expect("a text tunable");
        cpu.set("model", &RawValue::Text(cpu_name))
            .expect("a text tunable");
        for o in overrides {
            if is_choice(o) {
                continue;
            }
            let mut targets: Vec<&mut Settings> = vec![
                &mut path_s,
                &mut host,
                &mut replicas,
                &mut controller,
                &mut arbiter,
                &mut block,
                &mut scheduler,
                &mut transport,
                &mut media,
                &mut fs,
                &mut fs_own,
                &mut cpu,
            ];
            targets.push(&mut fabric);
            targets.push(&mut recovery);
            targets.extend(media_subs.iter_mut());
            targets.extend(orderings.iter_mut());
            targets.extend(cpu_models.iter_mut());
            apply_override(o, &mut targets)?;
        }
        let cfg = ControllerConfig::from_settings(&controller);
        cfg.validate().map_err(|m| ConfigError::in_file(&path, m))?;
        qoslab_nvme::order::lookup(&cfg.completion_order)
            .map_err(|e| ConfigError::in_file(&path, e.message))?;
        qoslab_block::ordering::lookup(block.str("ordering"))
            .map_err(|e| ConfigError::in_file(&path, e.message))?;
        Ok(DeviceConfig {
            source,
            description,
            path: path_s,
            host,
            controller,
            block,
            scheduler,
            arbiter,
            replicas,
            transport,
            fabric,
            recovery,
            orderings,
            model,
            media,
            media_subs,
            fs,
            fs_own,
            cpu,
            cpu_models,
            dir,
        })
    }

    /// The path's shape.
    pub fn path_config(&self) -> PathConfig {
        PathConfig::from_settings(&self.path)
    }

    /// The NVMe host driver's settings.
    pub fn host_config(&self) -> HostConfig {
        HostConfig::from_settings(&self.host)
    }

    /// The block layer's settings.
    pub fn block_config(&self) -> BlockConfig {
        BlockConfig::from_settings(&self.block)
    }

    /// The controller's settings.
    pub fn controller_config(&self) -> ControllerConfig {
        ControllerConfig::from_settings(&self.controller)
    }

    /// The target servers, `[fabric]`.
    pub fn targets_config(&self) -> TargetsConfig {
        TargetsConfig::from_settings(&self.fabric)
    }

    /// The settings of ordering plug-in `name`, `[block.NAME]`.
    pub fn ordering_settings(&self, name: &str) -> &Settings {
        let i = qoslab_block::ORDERINGS
            .iter()
            .position(|o| o.name == name)
            .expect("a registered ordering");
        &self.orderings[i]
    }

    /// The table of CPU model `name`, `[cpu.NAME]`.
    pub fn cpu_model_settings(&self, name: &str) -> &Settings {
        let i = qoslab_block::cpu::CPUS
            .iter()
            .position(|c| c.name == name)
            .expect("a registered CPU model");
        &self.cpu_models[i]
    }

    /// Builds the media model `D` (the caller chose `D` from `self.model`).
    pub fn build_media<D: DeviceModel>(&self, seed: u64) -> Result<D, ConfigError> {
        let ctx = BuildCtx {
            seed,
            config_dir: self.dir.as_deref(),
            sections: &self.media_subs,
        };
        D::build(&self.media, &ctx).map_err(|e| self.locate(e))
    }

    /// Adds the device file to an error that names only a field.
    pub(crate) fn locate(&self, mut e: ConfigError) -> ConfigError {
        if e.path.is_none() {
            e.path = Some(PathBuf::from(&self.source));
        }
        e
    }

    /// Every setting as (section.key, value), for the report's "device" block.
    pub fn settings(&self) -> Vec<(String, String)> {
        let mut out = vec![("media.model".to_string(), self.model.clone())];
        let fixed = [
            &self.path,
            &self.block,
            &self.scheduler,
            &self.host,
            &self.replicas,
            &self.controller,
            &self.arbiter,
            &self.transport,
            &self.fabric,
            &self.recovery,
            &self.media,
        ];
        // The CPU's tables only when a model is chosen, and of the models' tables only the
        // chosen one's: reports without one stay as they were.
        let model = self.cpu.str("model");
        let cpu: Vec<&Settings> = if model == qoslab_block::cpu::NONE {
            vec![]
        } else {
            vec![&self.cpu, self.cpu_model_settings(model)]
        };
        for s in fixed.into_iter().chain(&self.media_subs).chain(cpu) {
            for (k, v) in s.iter() {
                out.push((format!("{}.{k}", s.section()), v.to_string()));
            }
        }
        out
    }
}

/// Whether `--set` override `o` chooses a plug-in (read before the sections).
fn is_choice(o: &str) -> bool {
    let key = o.split('=').next().unwrap_or("").trim();
    matches!(
        key,
        "media.model"
            | "path.transport"
            | "controller.arbitration"
            | "block.scheduler"
            | "host.replicas"
            | "fs.type"
            | "cpu.model"
    )
}

/// Reads the plug-in choice `key` (a dotted key): from the file, then from `--set`, checked
/// against the registry's `names`.
fn choose(
    doc: &mut ConfigDoc,
    overrides: &[String],
    key: &str,
    default: &str,
    names: &[&str],
    known: impl Fn(&str) -> bool,
) -> Result<String, ConfigError> {
    let path = doc.path().to_path_buf();
    let line = doc.take(key);
    let mut value = match &line {
        None => default.to_string(),
        Some((RawValue::Text(m), _)) => m.clone(),
        Some((other, line)) => {
            return Err(ConfigError::at(
                &path,
                *line,
                format!("field '{key}': expected a name, got {other}"),
            ));
        }
    };
    for o in overrides {
        if let Some((k, v)) = o.split_once('=')
            && k.trim() == key
        {
            value = v.trim().trim_matches('"').to_string();
        }
    }
    if known(&value) {
        return Ok(value);
    }
    let msg = format!(
        "field '{key}': expected one of {}, got '{value}'",
        names.join(", ")
    );
    Err(match &line {
        Some((_, line)) => ConfigError::at(&path, *line, msg),
        None => ConfigError::new(msg),
    })
}

/// One table of a device file, for help and docs.
pub struct TableDoc {
    /// The section heading, with the choice that selects it for a plug-in's table
    /// (`media (model = "ssd")`).
    pub heading: String,
    /// The prefix of its keys (`media`, `controller.wrr`).
    pub section: String,
    /// What the plug-in is, for plug-in tables.
    pub help: Option<&'static str>,
    pub table: &'static [Tunable],
}

/// The tunable tables of a device file: the path's sections, each arbiter's and transport's
/// table, then the media models named in `models` (all registered models for `None`).
pub fn table_docs(models: Option<&[&str]>) -> Vec<TableDoc> {
    let plain = |section: &str, table| TableDoc {
        heading: section.to_string(),
        section: section.to_string(),
        help: None,
        table,
    };
    let mut out = vec![plain("path", PATH_TUNABLES), plain("block", BLOCK_TUNABLES)];
    plugin_tables("block", "scheduler", SCHEDULERS, &mut out);
    plugin_tables("block", "ordering", qoslab_block::ORDERINGS, &mut out);
    out.push(plain("host", HOST_TUNABLES));
    plugin_tables(
        "host",
        "replicas",
        qoslab_nvme::replicas::REPLICAS,
        &mut out,
    );
    out.push(plain("controller", CONTROLLER_TUNABLES));
    plugin_tables("controller", "arbitration", ARBITERS, &mut out);
    out.push(plain("fabric", TARGETS_TUNABLES));
    out.push(plain("fabric.recovery", RECOVERY_TUNABLES));
    for name in transport_names() {
        let (_, help, section, table) = transport_info(name).expect("registered");
        out.push(TableDoc {
            heading: format!("{section} (transport = \"{name}\")"),
            section: section.to_string(),
            help: Some(help),
            table,
        });
    }
    out.push(plain("cpu", qoslab_block::cpu::CPU_TUNABLES));
    plugin_tables("cpu", "model", qoslab_block::cpu::CPUS, &mut out);
    out.push(plain("fs", qoslab_fs::FS_TUNABLES));
    plugin_tables("fs", "type", qoslab_fs::JOURNALS, &mut out);
    for name in model_names() {
        if models.is_some_and(|m| !m.contains(name)) {
            continue;
        }
        let (_, help, table) = model_info(name).expect("registered");
        out.push(TableDoc {
            heading: format!("media (model = \"{name}\")"),
            section: "media".into(),
            help: Some(help),
            table,
        });
        for sub in model_sub_tables(name).expect("registered") {
            out.push(TableDoc {
                heading: format!("media.{} (model = \"{name}\")", sub.key),
                section: format!("media.{}", sub.key),
                help: Some(sub.help),
                table: sub.tunables,
            });
        }
    }
    out
}

/// The sub-table `[SECTION.NAME]` of every plug-in of `registry` that has tunables, for the
/// plug-in chosen by `SECTION.KEY = "NAME"`.
fn plugin_tables<P: Plugin>(
    section: &str,
    key: &str,
    registry: &[&'static P],
    out: &mut Vec<TableDoc>,
) {
    for p in registry.iter().filter(|p| !p.tunables().is_empty()) {
        let name = p.info().name;
        out.push(TableDoc {
            heading: format!("{section}.{name} ({key} = \"{name}\")"),
            section: format!("{section}.{name}"),
            help: Some(p.help()),
            table: p.tunables(),
        });
    }
}

/// Every table (all registered models), as (heading, tunables).
pub fn all_tables() -> Vec<(String, &'static [Tunable])> {
    table_docs(None)
        .into_iter()
        .map(|d| (d.heading, d.table))
        .collect()
}

/// The reference of the device-file tunables as Markdown, for the models in `models` (all
/// for `None`).
pub fn tunables_markdown_for(models: Option<&[&str]>) -> String {
    let mut out = String::new();
    for d in table_docs(models) {
        out.push_str(&format!("### `[{}]`\n\n", d.heading));
        if let Some(help) = d.help {
            out.push_str(&format!("{help}.\n\n"));
        }
        out.push_str(&qoslab_engine::tunable::markdown_table(&d.section, d.table));
        out.push('\n');
    }
    out
}

/// The reference of every device-file tunable, as Markdown.
pub fn tunables_markdown() -> String {
    tunables_markdown_for(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_file_sets_each_section_and_defaults_fill_the_rest() {
        let text = "description = \"t\"\n[host]\nsubmit_ns = \"1.5us\"\n[controller]\narbitration = \"wrr\"\n[media]\nmodel = \"analytic\"\nservers = 4\n";
        let d = DeviceConfig::from_text(text, "t.toml", &[]).unwrap();
        assert_eq!(d.host.u64("submit_ns"), 1500);
        assert_eq!(d.controller.str("arbitration"), "wrr");
        assert_eq!(d.media.u64("servers"), 4);
        assert_eq!(d.transport.u64("lanes"), 4);
    }

    #[test]
    fn a_cpu_models_costs_load_while_no_model_is_chosen_and_apply_when_one_is() {
        // A guest device's twin carries its CPU costs per I/O (docs/vm.md, finding 13) in
        // `[cpu.one]`; the run chooses the model. Under `none` the table is kept, unused and
        // unreported; `--set cpu.model=one` runs with the file's costs, the rest defaults.
        let text = "[path]\ndriver = \"simple\"\n[cpu.one]\nsubmit_ns = 15300\nper_kib_ns = 109\n";
        let none = DeviceConfig::from_text(text, "twin.toml", &[]).unwrap();
        assert_eq!(none.cpu.str("model"), "none");
        assert!(!none.settings().iter().any(|(k, _)| k.starts_with("cpu.")));
        let one = DeviceConfig::from_text(text, "twin.toml", &["cpu.model=one".into()]).unwrap();
        let costs = one.cpu_model_settings("one");
        let got = ["submit_ns", "per_kib_ns", "complete_ns"].map(|k| costs.u64(k));
        assert_eq!(got, [15_300, 109, 5_000]);
        let reported: Vec<String> = one.settings().into_iter().map(|(k, _)| k).collect();
        assert!(
            reported.contains(&"cpu.one.per_kib_ns".to_string()),
            "{reported:?}"
        );
        // A `--set` of a model's cost is taken whichever model is chosen, and wins.
        let set = ["cpu.one.submit_ns=20us".into(), "cpu.model=one".into()];
        let one = DeviceConfig::from_text(text, "twin.toml", &set).unwrap();
        assert_eq!(one.cpu_model_settings("one").u64("submit_ns"), 20_000);
        // A misspelt key is still the one-line error naming it, in the file or in `--set`;
        // a model the registry does not have is no table: its keys are unknown keys of [cpu].
        let error = |text: &str, set: &[String]| {
            let e = DeviceConfig::from_text(text, "twin.toml", set).unwrap_err();
            e.to_string()
        };
        let cases = [
            (
                "[cpu.one]\nsubmit_nss = 1\n",
                vec![],
                "twin.toml:2: unknown key 'cpu.one.submit_nss' (known: submit_ns,",
            ),
            (
                "",
                vec!["cpu.one.submit_nss=1".into()],
                "--set cpu.one.submit_nss=1: unknown key 'cpu.one.submit_nss'",
            ),
            (
                "[cpu.two]\nsubmit_ns = 1\n",
                vec![],
                "twin.toml:2: unknown key 'cpu.two.submit_ns'",
            ),
        ];
        for (text, set, start) in cases {
            let err = error(text, &set);
            assert!(err.starts_with(start) && !err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn overrides_win_and_can_switch_the_model() {
        let text = "[media]\nmodel = \"analytic\"\nservers = 4\n";
        let d = DeviceConfig::from_text(
            text,
            "t.toml",
            &["media.servers=8".into(), "host.irq_ns=2us".into()],
        )
        .unwrap();
        assert_eq!(d.media.u64("servers"), 8);
        assert_eq!(d.host.u64("irq_ns"), 2000);
        let err = DeviceConfig::from_text(text, "t.toml", &["media.model=empirical".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key 'media.servers'"), "{err}");
    }

    #[test]
    fn wrong_units_unknown_keys_and_models_name_file_line_and_field() {
        let err = DeviceConfig::from_text("[host]\nsubmit_ns = \"4KiB\"\n", "d.toml", &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "d.toml:2: field 'host.submit_ns': expected a time like 250ns, 1.5us or 2ms, got '4KiB'"
        );
        let err = DeviceConfig::from_text("[hots]\nsubmit_ns = 1\n", "d.toml", &[])
            .unwrap_err()
            .to_string();
        assert_eq!(err, "d.toml:2: unknown key 'hots.submit_ns'");
        let err = DeviceConfig::from_text("[media]\nmodel = \"tape\"\n", "d.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("d.toml:2: field 'media.model': expected one of"),
            "{err}"
        );
    }

    #[test]
    fn every_preset_loads() {
        assert!(!PRESETS.is_empty());
        for name in preset_names() {
            let d = DeviceConfig::load(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                !d.description.is_empty(),
                "preset {name} has no description"
            );
        }
    }

    #[test]
    fn the_tunables_reference_covers_every_table() {
        let md = tunables_markdown();
        for (_, table) in all_tables() {
            for t in table {
                assert!(
                    md.contains(&format!(".{}` |", t.name)),
                    "{} missing",
                    t.name
                );
            }
        }
    }
}
