//! A device fitted from real fio runs: for each operation and queue depth that was measured, the
//! completion-latency distribution fio reported (its percentiles). A command's latency is drawn
//! from the distribution measured at the depth the device sees when the command arrives, so a
//! closed loop at a measured depth reproduces that run's latency distribution and IOPS.
//!
//! The profile is a TOML file (format documented in docs/sim.md, written by
//! `qoslab lab calibrate`):
//!
//! ```toml
//! format = "qoslab-empirical-1"
//! source = "fio-3.33, /dev/nvme0n1, 4 KiB randread, 2026-01-05"
//! capacity_bytes = 1073741824
//!
//! [[point]]
//! op = "read"
//! iodepth = 1
//! bs_bytes = 4096
//! percentiles = [1.0, 50.0, 99.0, 99.9]
//! clat_ns = [70000, 80000, 120000, 300000]
//! ```
//!
//! Between two measured depths the latency at the same quantile is interpolated linearly in
//! the depth; beyond the deepest point the device is taken as saturated (latency grows in
//! proportion to depth, as Little's law gives for a fixed throughput); below the shallowest
//! point the shallowest applies. A profile without writes (or reads) serves them like the
//! other data direction; flush and deallocate complete at once unless profiled.

use std::path::Path;

use qoslab_engine::time::ns_from_f64;
use qoslab_engine::{ConfigError, Op, ReqId, RngStream, Settings, Stage, StageCtx, Tunable};
use serde::Deserialize;

use crate::service::QuantileTable;
use crate::{BuildCtx, Device, DeviceModel};

/// The `format` value of a profile this code reads.
pub const PROFILE_FORMAT: &str = "qoslab-empirical-1";

qoslab_engine::settings! {
    /// `[media]` with `model = "empirical"`.
    pub struct EmpiricalConfig in EMPIRICAL_TUNABLES {
        profile: String = text("", "the profile TOML (relative to the device file), as written by `qoslab lab calibrate`"),
        capacity_bytes: u64 = bytes(0, "addressable capacity; 0 = the profile's capacity_bytes"),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    format: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    capacity_bytes: Option<u64>,
    point: Vec<PointFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PointFile {
    op: String,
    iodepth: u32,
    /// Informative (what the run measured); accepted and not used.
    #[serde(default)]
    #[allow(dead_code)]
    bs_bytes: Option<u64>,
    #[serde(default)]
    #[allow(dead_code)]
    iops: Option<f64>,
    percentiles: Vec<f64>,
    clat_ns: Vec<f64>,
}

/// The measured latency distributions of one operation, by queue depth (increasing).
#[derive(Clone, Debug, Default)]
struct OpProfile {
    depths: Vec<(u32, QuantileTable)>,
}

impl OpProfile {
    fn latency_ns(&self, depth: u32, u: f64) -> f64 {
        let d = &self.depths;
        let i = d.partition_point(|(q, _)| *q <= depth);
        if i == 0 {
            return d[0].1.quantile(u);
        }
        let (q0, t0) = &d[i - 1];
        if *q0 == depth {
            return t0.quantile(u);
        }
        if i == d.len() {
            return t0.quantile(u) * depth as f64 / *q0 as f64;
        }
        let (q1, t1) = &d[i];
        let w = (depth - q0) as f64 / (q1 - q0) as f64;
        t0.quantile(u) * (1.0 - w) + t1.quantile(u) * w
    }
}

/// A fitted profile: per op, the distributions by depth.
#[derive(Clone, Debug)]
pub struct Profile {
    pub source: String,
    pub capacity_bytes: Option<u64>,
    ops: [OpProfile; 4],
}

impl Profile {
    /// Reads a profile file; errors name the file, the line when known and the field.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::in_file(path, format!("cannot read profile: {e}")))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let file: ProfileFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| qoslab_engine::tunable::line_of(text, s.start));
            let msg = e
                .message()
                .lines()
                .next()
                .unwrap_or("invalid profile")
                .to_string();
            ConfigError::located(path, line, msg)
        })?;
        let err = |msg: String| ConfigError::in_file(path, msg);
        if file.format != PROFILE_FORMAT {
            return Err(err(format!(
                "field 'format': expected '{PROFILE_FORMAT}', got '{}'",
                file.format
            )));
        }
        let mut ops: [OpProfile; 4] = Default::default();
        for (n, p) in file.point.iter().enumerate() {
            let op = match p.op.as_str() {
                "read" => Op::Read,
                "write" => Op::Write,
                "trim" => Op::Trim,
                "flush" | "sync" => Op::Flush,
                other => {
                    return Err(err(format!(
                        "point {}: field 'op': expected read, write, trim or flush, got '{other}'",
                        n + 1
                    )));
                }
            };
            if p.iodepth == 0 {
                return Err(err(format!(
                    "point {}: field 'iodepth': expected at least 1",
                    n + 1
                )));
            }
            let table = QuantileTable::new(&p.percentiles, &p.clat_ns).map_err(|e| {
                err(format!(
                    "point {}: fields 'percentiles'/'clat_ns': {e}",
                    n + 1
                ))
            })?;
            let depths = &mut ops[op.index()].depths;
            if depths.iter().any(|(q, _)| *q == p.iodepth) {
                return Err(err(format!(
                    "point {}: a second {} point at iodepth {}",
                    n + 1,
                    p.op,
                    p.iodepth
                )));
            }
            depths.push((p.iodepth, table));
            depths.sort_by_key(|(q, _)| *q);
        }
        if ops[Op::Read.index()].depths.is_empty() && ops[Op::Write.index()].depths.is_empty() {
            return Err(err("the profile has no read or write point".into()));
        }
        Ok(Profile {
            source: file.source,
            capacity_bytes: file.capacity_bytes,
            ops,
        })
    }

    /// The profile of `op`, falling back as the module docs say; `None` = complete at once.
    fn for_op(&self, op: Op) -> Option<&OpProfile> {
        let own = &self.ops[op.index()];
        if !own.depths.is_empty() {
            return Some(own);
        }
        match op {
            Op::Read => Some(&self.ops[Op::Write.index()]),
            Op::Write => Some(&self.ops[Op::Read.index()]),
            Op::Trim | Op::Flush => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Done(pub ReqId);

/// Every command is served independently, with a latency drawn from the profile at the depth
/// it finds.
#[derive(Debug)]
pub struct EmpiricalDevice {
    profile: Profile,
    capacity_bytes: u64,
    in_flight: u32,
    rng: RngStream,
}

impl EmpiricalDevice {
    pub fn new(profile: Profile, capacity_bytes: u64, seed: u64) -> Self {
        EmpiricalDevice {
            profile,
            capacity_bytes,
            in_flight: 0,
            rng: RngStream::new(seed, "media/empirical"),
        }
    }
}

impl Stage for EmpiricalDevice {
    type Event = Done;

    /// A command only reaches a server or the queue: it may run inside the controller's hook.
    const SUBMITS_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        <Self as crate::DeviceModel>::NAME
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<Done>) {
        let now = ctx.now_ns();
        self.in_flight += 1;
        let req = &mut ctx.reqs_mut()[id];
        req.t.media_start_ns = now;
        let op = req.op;
        let u = self.rng.uniform();
        let latency = match self.profile.for_op(op) {
            Some(p) => ns_from_f64(p.latency_ns(self.in_flight, u)),
            None => 0,
        };
        ctx.schedule(now + latency, Done(id));
    }

    fn on_event(&mut self, Done(id): Done, ctx: &mut impl StageCtx<Done>) {
        self.in_flight -= 1;
        let now = ctx.now_ns();
        ctx.reqs_mut()[id].t.media_done_ns = now;
        ctx.complete(id);
    }
}

impl Device for EmpiricalDevice {
    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }
}

impl DeviceModel for EmpiricalDevice {
    const NAME: &'static str = "empirical";
    const HELP: &'static str =
        "latency distributions per op and queue depth, fitted from real fio runs";
    const TUNABLES: &'static [Tunable] = EMPIRICAL_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(s: &Settings, ctx: &BuildCtx<'_>) -> Result<Self, ConfigError> {
        let c = EmpiricalConfig::from_settings(s);
        if c.profile.is_empty() {
            return Err(ConfigError::new(
                "field 'media.profile': expected the path of an empirical profile",
            ));
        }
        let profile = Profile::load(&ctx.resolve(&c.profile))?;
        let capacity = match (c.capacity_bytes, profile.capacity_bytes) {
            (0, Some(c)) => c,
            (0, None) => {
                return Err(ConfigError::new(
                    "field 'media.capacity_bytes': the profile has no capacity_bytes, so give one",
                ));
            }
            (c, _) => c,
        };
        Ok(EmpiricalDevice::new(profile, capacity, ctx.seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::{Harness, Request};

    const PROFILE: &str = r#"
format = "qoslab-empirical-1"
source = "test"
capacity_bytes = 1048576

[[point]]
op = "read"
iodepth = 1
percentiles = [0.0, 100.0]
clat_ns = [1000, 1000]

[[point]]
op = "read"
iodepth = 3
percentiles = [0.0, 100.0]
clat_ns = [3000, 3000]
"#;

    fn profile() -> Profile {
        Profile::parse(Path::new("p.toml"), PROFILE).unwrap()
    }

    #[test]
    fn latency_follows_the_depth_the_command_finds() {
        let mut h = Harness::new(EmpiricalDevice::new(profile(), 1 << 20, 1));
        let a = h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        let b = h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        let c = h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        let d = h.submit_at(0, Request::new(Op::Read, 0, 4096, 0, 0));
        let e = h.submit_at(10_000, Request::new(Op::Write, 0, 4096, 0, 0));
        h.run_all();
        // Depths 1, 2 (interpolated), 3, 4 (saturated: 3000 * 4 / 3); the write, alone,
        // falls back to the read profile at depth 1.
        assert_eq!(
            h.completed,
            vec![(a, 1000), (b, 2000), (c, 3000), (d, 4000), (e, 11_000)]
        );
    }

    #[test]
    fn a_bad_profile_names_the_problem() {
        let bad = PROFILE.replace("clat_ns = [3000, 3000]", "clat_ns = [3000, 2000]");
        let err = Profile::parse(Path::new("p.toml"), &bad)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("point 2") && err.contains("must not decrease"),
            "{err}"
        );
        let bad = PROFILE.replace("iodepth = 3", "io_depth = 3");
        let err = Profile::parse(Path::new("p.toml"), &bad).unwrap_err();
        // The point holding the unknown key.
        assert_eq!(err.line, Some(14), "{err}");
        let bad = PROFILE.replace("qoslab-empirical-1", "other");
        assert!(Profile::parse(Path::new("p.toml"), &bad).is_err());
    }
}
