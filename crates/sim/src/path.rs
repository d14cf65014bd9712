//! The one builder of a simulated path: from a device file to a chain of stages,
//!
//! ```text
//! jobs -> block layer -> NVMe host(s) -> transport -> NVMe controller -> media   (driver nvme)
//! jobs -> block layer -> media                                        (driver ata or simple)
//! ```
//!
//! each stage a plug-in found in its registry: the scheduler by `[block] scheduler`, the
//! transport by `[path] transport`, the
//! arbiter by `[controller] arbitration`, the completion order by `[controller]
//! completion_order`, the media by `[media] model`. The chain's type is fixed by those choices,
//! so the run loop is compiled once per (transport, media) pair and every hook call is static.

use qoslab_block::{BlockLayer, DriverLimits, QueueSetup, WriteCache};
use qoslab_engine::{Chain, Stage};
use qoslab_media::{Device, DeviceCaps};
use qoslab_nvme::transport::{TransportModel, TransportVisitor, visit_transport};
use qoslab_nvme::{ControllerSetup, NvmeController, NvmeHost, QueueLayout};

use crate::SimError;
use crate::device::{DeviceConfig, Driver};

/// The default path over transport `T` and media `D`.
pub type NvmePath<T, D> = Chain<BlockLayer, Chain<NvmeHost, Chain<T, Chain<NvmeController, D>>>>;

/// A SATA disk's path, and a simple driver's: the media right below the block layer.
pub type AtaPath<D> = Chain<BlockLayer, D>;

/// What libata tells the block layer of a SATA disk: one hardware queue as deep as NCQ
/// (ATA_MAX_QUEUE 32), transfers up to 65535 sectors (max_hw_sectors_kb 32767).
const ATA_LIMITS: DriverLimits = DriverLimits {
    queue_per_core: false,
    hw_queue_depth: 32,
    driver_admits: false,
    max_hw_bytes: 32767 * 1024,
    rotational: false,
};

/// The block layer of `device` over a driver with `limits` and media with `caps`.
fn block_layer(
    device: &DeviceConfig,
    limits: DriverLimits,
    caps: DeviceCaps,
    hosts: u16,
) -> Result<BlockLayer, SimError> {
    let cfg = device.block_config();
    let ops = qoslab_block::lookup(&cfg.scheduler).map_err(|e| device.locate(e))?;
    let limits = DriverLimits {
        rotational: device.model == "hdd",
        ..limits
    };
    Ok(BlockLayer::new(
        QueueSetup::new(&cfg, &limits),
        ops,
        &device.scheduler,
        hosts,
    )
    .with_write_cache(WriteCache {
        volatile: caps.contains(DeviceCaps::VOLATILE_WRITE_CACHE),
        fua: caps.contains(DeviceCaps::FUA),
    }))
}

/// What a path is built for besides the device file: the cores each host's jobs need (for
/// `host.cores = 0`) and the run's seed.
#[derive(Clone, Debug)]
pub struct PathPlan {
    /// Job clones per host.
    pub jobs_per_host: Vec<u32>,
    pub seed: u64,
}

impl PathPlan {
    /// Cores of each host: `host.cores`, or one per job of the host when 0.
    pub fn cores(&self, device: &DeviceConfig) -> Vec<u32> {
        let cfg = device.host_config();
        self.jobs_per_host
            .iter()
            .map(|&n| if cfg.cores == 0 { n.max(1) } else { cfg.cores })
            .collect()
    }
}

/// Code that runs on a built path (a simulation).
pub trait PathVisitor {
    type Output;
    fn visit<P: Stage>(self, path: P) -> Self::Output;
}

/// Builds the path of `device` over media `dev` and hands it to `visitor`.
pub fn build<D: Device, V: PathVisitor>(
    device: &DeviceConfig,
    dev: D,
    plan: &PathPlan,
    visitor: V,
) -> Result<V::Output, SimError> {
    let path = device.path_config();
    if path.driver != Driver::Nvme {
        if plan.jobs_per_host.len() > 1 || path.hosts > 1 {
            return Err(SimError::new(format!(
                "field 'path.driver': an {} device has one host; a job runs on sim_host > 0 or [path] hosts > 1",
                path.driver.name()
            )));
        }
        let limits = match path.driver {
            Driver::Ata => ATA_LIMITS,
            _ => DriverLimits {
                hw_queue_depth: path.hw_queue_depth,
                max_hw_bytes: u64::from(path.max_hw_sectors_kb) * 1024,
                ..ATA_LIMITS
            },
        };
        let block = block_layer(device, limits, dev.caps(), 1)?;
        let direct: AtaPath<D> = Chain::new(block, dev);
        return Ok(visitor.visit(direct));
    }
    let name = path.transport;
    visit_transport(
        &name,
        WithMedia {
            device,
            dev,
            plan,
            visitor,
        },
    )
    .ok_or_else(|| SimError::new(format!("unknown transport '{name}'")))?
}

struct WithMedia<'a, D, V> {
    device: &'a DeviceConfig,
    dev: D,
    plan: &'a PathPlan,
    visitor: V,
}

impl<D: Device, V: PathVisitor> TransportVisitor for WithMedia<'_, D, V> {
    type Output = Result<V::Output, SimError>;

    fn visit<T: TransportModel>(self) -> Self::Output {
        let parts = parts::<T, D>(self.device, self.dev, self.plan)?;
        Ok(self.visitor.visit(parts.chain()))
    }
}

/// The stages of the default path, built and not yet chained.
pub struct PathParts<T, D> {
    pub block: BlockLayer,
    pub host: NvmeHost,
    pub transport: T,
    pub controller: NvmeController,
    pub media: D,
}

impl<T: Stage, D: Stage> PathParts<T, D> {
    /// The chain, top to bottom.
    pub fn chain(self) -> NvmePath<T, D> {
        Chain::new(
            self.block,
            Chain::new(
                self.host,
                Chain::new(self.transport, Chain::new(self.controller, self.media)),
            ),
        )
    }
}

/// Builds the stages of `device`'s path over transport `T` and media `dev`.
pub fn parts<T: TransportModel, D: Device>(
    device: &DeviceConfig,
    dev: D,
    plan: &PathPlan,
) -> Result<PathParts<T, D>, SimError> {
    let hosts = device.path_config().hosts;
    if plan.jobs_per_host.len() > hosts as usize {
        return Err(SimError::new(format!(
            "a job runs on sim_host {} but the device's path has {hosts} host(s) ([path] hosts)",
            plan.jobs_per_host.len() - 1
        )));
    }
    let mut jobs_per_host = plan.jobs_per_host.clone();
    jobs_per_host.resize(hosts as usize, 0);
    let plan = PathPlan {
        jobs_per_host,
        seed: plan.seed,
    };
    let transport = T::build(&device.transport, hosts).map_err(|e| device.locate(e))?;
    let foldable = transport.caps().foldable();
    let ctrl_cfg = device.controller_config();
    let order =
        qoslab_nvme::order::lookup(&ctrl_cfg.completion_order).map_err(|e| device.locate(e))?;
    let arbiter_ops =
        qoslab_nvme::arbiter::lookup(&ctrl_cfg.arbitration).map_err(|e| device.locate(e))?;
    let layout = QueueLayout::new(&plan.cores(device), arbiter_ops.sq_per_class);
    let host_cfg = device.host_config();
    let early = NvmeController::completes_early(&ctrl_cfg, order, foldable);
    let sqs_per_core = if arbiter_ops.sq_per_class {
        qoslab_nvme::SqClass::ALL.len() as u32
    } else {
        1
    };
    let limits = DriverLimits {
        queue_per_core: true,
        hw_queue_depth: (host_cfg.sq_depth - 1) * sqs_per_core,
        driver_admits: true,
        max_hw_bytes: ctrl_cfg.mdts_bytes,
        rotational: false,
    };
    let block = block_layer(device, limits, dev.caps(), hosts)?;
    let mut host = NvmeHost::new(host_cfg.clone(), layout.clone(), ctrl_cfg.mdts_bytes, early);
    if let Some(ops) =
        qoslab_nvme::replicas::lookup(&host_cfg.replicas).map_err(|e| device.locate(e))?
    {
        let plm_drive = device.model == "ssd"
            && qoslab_media::ssd::config::SsdSettings::from_settings(&device.media).gc_gate
                == "plm";
        if ops.name == "plm" && !plm_drive {
            return Err(SimError::new(format!(
                "{}: host.replicas = 'plm' needs a device in Predictable Latency Mode (media model 'ssd' with gc.gate = 'plm')",
                device.source
            )));
        }
        let policy =
            ops.build.expect("checked by the registry")(&qoslab_nvme::replicas::ReplicaSetup {
                hosts,
                settings: &device.replicas,
                config_dir: device.dir.as_deref(),
            })
            .map_err(|e| device.locate(e))?;
        host = host.with_replicas(policy);
    }
    let arbiter =
        NvmeController::arbiter_from(&ctrl_cfg, &device.arbiter).map_err(|e| device.locate(e))?;
    let controller = NvmeController::new(
        ctrl_cfg,
        ControllerSetup {
            layout,
            cq_depth: host_cfg.cq_depth,
            arbiter,
            order,
            transport_foldable: foldable,
            seed: plan.seed,
        },
    );
    Ok(PathParts {
        block,
        host,
        transport,
        controller,
        media: dev,
    })
}
