//! What serves a command at the end of the I/O path.
//!
//! A device is a [`Stage`] with no stage below it: the NVMe controller hands it commands
//! through `submit`, it runs its own timed events through `on_event` (a server finishing, a
//! flash program, a channel transfer, garbage collection, a cache drain, a power failure), and
//! it reports each command done with `ctx.complete(id)`, after setting the request's status
//! and its `media_start_ns` / `media_done_ns` stamps. Nothing else in the simulator needs to
//! know how a device works inside.
//!
//! A device that a configuration file can name also implements [`DeviceModel`] (name, help,
//! tunable table, constructor) and is listed once in [`registry`].

pub mod analytic;
pub mod cached;
pub mod empirical;
pub mod hdd;
pub mod null;
pub mod registry;
pub mod service;
pub mod ssd;

use std::path::Path;

pub use analytic::AnalyticDevice;
pub use cached::CachedDrive;
pub use empirical::EmpiricalDevice;
pub use hdd::Hdd;
pub use null::NullDevice;
pub use qoslab_engine::{ConfigError, Settings, Stage, StageCtx, Tunable};
pub use registry::{ModelVisitor, model_names, visit_model};
pub use ssd::Ssd;

bitflags::bitflags! {
    /// What a device can do, as flags (like fio's engine flags), not as a class tree.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct DeviceCaps: u32 {
        /// Has a volatile write cache: FLUSH and FUA change what is durable and when.
        const VOLATILE_WRITE_CACHE = 1 << 0;
        /// Honours FUA on writes.
        const FUA = 1 << 1;
        /// Does something with deallocate (trim) besides completing it.
        const DEALLOCATE = 1 << 2;
        /// Can withdraw a queued command on an NVMe Abort.
        const ABORT_QUEUED = 1 << 3;
        /// Has power-loss protection: a power failure loses nothing acknowledged.
        const POWER_LOSS_PROTECTION = 1 << 4;
        /// A spinning disk: its block queue says `queue/rotational` = 1.
        const ROTATIONAL = 1 << 5;
        /// Keeps NVM sets in Predictable Latency Mode windows (NVMe 1.4, 8.18): a host may
        /// steer reads by them.
        const PREDICTABLE_LATENCY = 1 << 6;
    }
}

pub use qoslab_engine::LostWrite;

/// A device: the last stage of a path.
pub trait Device: Stage {
    /// Bytes the host may address.
    fn capacity_bytes(&self) -> u64;

    fn caps(&self) -> DeviceCaps {
        DeviceCaps::empty()
    }

    /// Writes lost to power failures so far, each failure's in issue order: what a
    /// crash-consistency check compares the host's view against. Devices that lose nothing
    /// keep the default.
    fn lost_writes(&self) -> &[LostWrite] {
        &[]
    }
}

/// What a model's constructor gets besides its settings.
#[derive(Clone, Copy, Debug)]
pub struct BuildCtx<'a> {
    /// The run's seed: derive every random stream from it with a name of your own
    /// (`RngStream::new(ctx.seed, "media/service")`).
    pub seed: u64,
    /// The folder of the device file, to resolve relative paths in it (`None` for presets
    /// given as text).
    pub config_dir: Option<&'a Path>,
    /// The settings of the model's plug-in sub-tables ([`DeviceModel::sub_tables`]), each
    /// under its section `media.KEY`.
    pub sections: &'a [Settings],
}

/// A plug-in's own tunables inside a model's section: read from `[media.KEY]` (`[media.gc.rga]`).
#[derive(Clone, Debug)]
pub struct SubTable {
    /// The key below `media` (`gc.rga`).
    pub key: String,
    /// What the plug-in is.
    pub help: &'static str,
    pub tunables: &'static [Tunable],
}

impl BuildCtx<'_> {
    /// `file` as written in the device file, resolved against that file's folder.
    pub fn resolve(&self, file: &str) -> std::path::PathBuf {
        match self.config_dir {
            Some(dir) if Path::new(file).is_relative() => dir.join(file),
            _ => Path::new(file).to_path_buf(),
        }
    }
}

/// A device model that a device file names in `[media] model = "..."`.
pub trait DeviceModel: Device + Sized {
    /// The name used in device files (`analytic`, `ssd`, ...).
    const NAME: &'static str;
    /// One line for `qoslab sim --list-devices` and the docs.
    const HELP: &'static str;
    /// Every key the model reads from `[media]` (besides `model`).
    const TUNABLES: &'static [Tunable];
    /// The stage contract the model was written for (`qoslab_engine::STAGE_API_VERSION` when
    /// it was); the registry refuses a model written for another.
    const API_VERSION: u32;

    /// The sub-tables of the model's plug-ins (none by default), read before `[media]` so that
    /// their keys are theirs.
    fn sub_tables() -> Vec<SubTable> {
        Vec::new()
    }

    /// Builds the model. Errors name the field (`field 'media.servers': ...`); the caller adds
    /// the file and line.
    fn build(settings: &Settings, ctx: &BuildCtx<'_>) -> Result<Self, ConfigError>;
}
