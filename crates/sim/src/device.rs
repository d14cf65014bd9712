//! Device files: one TOML file describes the host driver, the controller, the PCIe link and
//! the media, so a preset can describe a whole drive.
//!
//! ```toml
//! description = "what this device is and where its numbers come from"
//!
//! [host]            # qoslab_nvme::HOST_TUNABLES
//! submit_ns = 1500
//!
//! [controller]      # qoslab_nvme::CONTROLLER_TUNABLES
//! arbitration = "wrr"
//!
//! [link]            # qoslab_nvme::LINK_TUNABLES
//! lane_rate = 1.0
//!
//! [media]
//! model = "analytic"   # a name from qoslab_media::registry; the other keys are its tunables
//! servers = 4
//! ```
//!
//! Every section is optional (its tunables keep their defaults); every key is checked against
//! its table, so a misspelt key or a value in the wrong unit stops with the file, line and
//! field. `--set section.key=value` overrides any of them afterwards.

use std::path::{Path, PathBuf};

use qoslab_engine::tunable::apply_override;
use qoslab_engine::{ConfigDoc, ConfigError, RawValue, Settings, Tunable};
use qoslab_media::registry::model_info;
use qoslab_media::{BuildCtx, DeviceModel, model_names};
use qoslab_nvme::{CONTROLLER_TUNABLES, HOST_TUNABLES, LINK_TUNABLES, NvmeConfig};

include!(concat!(env!("OUT_DIR"), "/presets.rs"));

/// The model used when a device file has no `[media] model`.
pub const DEFAULT_MODEL: &str = "analytic";

/// A device file read and checked, with overrides applied.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// The preset name or the file path, for reports.
    pub source: String,
    pub description: String,
    pub host: Settings,
    pub controller: Settings,
    pub link: Settings,
    pub model: String,
    pub media: Settings,
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
        let model_line = doc.take("media.model");
        let mut model = match &model_line {
            None => DEFAULT_MODEL.to_string(),
            Some((RawValue::Text(m), _)) => m.clone(),
            Some((other, line)) => {
                return Err(ConfigError::at(
                    &path,
                    Some(*line),
                    format!("field 'media.model': expected a model name, got {other}"),
                ));
            }
        };
        // `--set media.model=...` chooses the table the other media keys are read with.
        for o in overrides {
            if let Some(m) = o.trim().strip_prefix("media.model=") {
                model = m.trim().trim_matches('"').to_string();
            }
        }
        let table = media_table(&model).ok_or_else(|| {
            let msg = format!(
                "field 'media.model': expected one of {}, got '{model}'",
                model_names().join(", ")
            );
            match &model_line {
                Some((_, line)) => ConfigError::at(&path, Some(*line), msg),
                None => ConfigError::new(msg),
            }
        })?;
        let mut host = doc.section("host", HOST_TUNABLES)?;
        let mut controller = doc.section("controller", CONTROLLER_TUNABLES)?;
        let mut link = doc.section("link", LINK_TUNABLES)?;
        let mut media = doc.section("media", table)?;
        doc.finish()?;
        for o in overrides {
            if o.trim().starts_with("media.model=") {
                continue;
            }
            apply_override(o, &mut [&mut host, &mut controller, &mut link, &mut media])?;
        }
        Ok(DeviceConfig {
            source,
            description,
            host,
            controller,
            link,
            model,
            media,
            dir,
        })
    }

    /// The NVMe stage's configuration; `jobs` resolves `host.cores = 0`.
    pub fn nvme_config(&self, jobs: u32) -> Result<NvmeConfig, ConfigError> {
        NvmeConfig::from_settings(&self.host, &self.controller, &self.link, jobs)
            .map_err(|e| self.locate(e))
    }

    /// Builds the media model `D` (the caller chose `D` from `self.model`).
    pub fn build_media<D: DeviceModel>(&self, seed: u64) -> Result<D, ConfigError> {
        let ctx = BuildCtx {
            seed,
            config_dir: self.dir.as_deref(),
        };
        D::build(&self.media, &ctx).map_err(|e| self.locate(e))
    }

    /// Adds the device file to an error that names only a field.
    fn locate(&self, mut e: ConfigError) -> ConfigError {
        if e.path.is_none() {
            e.path = Some(PathBuf::from(&self.source));
        }
        e
    }

    /// Every setting as (section.key, value), for the report's "device" block.
    pub fn settings(&self) -> Vec<(String, String)> {
        let mut out = vec![("media.model".to_string(), self.model.clone())];
        for s in [&self.host, &self.controller, &self.link, &self.media] {
            for (k, v) in s.iter() {
                out.push((format!("{}.{k}", s.section()), v.to_string()));
            }
        }
        out
    }
}

/// The tunable tables of a device file, as (section, tunables): the path's sections, then the
/// media models named in `models` (all registered models for `None`) as
/// `media (model = "NAME")`.
pub fn tables_for(models: Option<&[&str]>) -> Vec<(String, &'static [Tunable])> {
    let mut out = vec![
        ("host".to_string(), HOST_TUNABLES),
        ("controller".to_string(), CONTROLLER_TUNABLES),
        ("link".to_string(), LINK_TUNABLES),
    ];
    for name in model_names() {
        if models.is_some_and(|m| !m.contains(name)) {
            continue;
        }
        let (_, _, t) = model_info(name).expect("registered");
        out.push((format!("media (model = \"{name}\")"), t));
    }
    out
}

/// Every table (all registered models).
pub fn all_tables() -> Vec<(String, &'static [Tunable])> {
    tables_for(None)
}

/// The reference of the device-file tunables as Markdown, for the models in `models` (all
/// for `None`).
pub fn tunables_markdown_for(models: Option<&[&str]>) -> String {
    let mut out = String::new();
    for (section, table) in tables_for(models) {
        let key_prefix = section.split(' ').next().unwrap_or(&section).to_string();
        out.push_str(&format!("### `[{section}]`\n\n"));
        if let Some(name) = section.split('"').nth(1) {
            let (_, help, _) = model_info(name).expect("registered");
            out.push_str(&format!("{help}.\n\n"));
        }
        out.push_str(&qoslab_engine::tunable::markdown_table(&key_prefix, table));
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
        assert_eq!(d.link.u64("lanes"), 4);
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
