//! The one builder of a simulated path: from a device file to a chain of stages,
//!
//! ```text
//! jobs -> block layer -> NVMe host(s) -> transport -> NVMe controller -> media   (driver nvme)
//! jobs -> block layer -> media                                        (driver ata or simple)
//! jobs -> block layer -> fan-out -> per target: NVMe host -> transport -> target -> NVMe
//!                                   controller -> media                ([fabric] targets >= 1)
//! ```
//!
//! with the page cache and file system (`crates/fs`, `[fs] type`) on top when the run's jobs
//! work on files (fio's `directory=`): `jobs -> fs -> block layer -> ...`, and the host's CPU
//! (`qoslab_block::cpu`, `[cpu] model`) on top when the device file names a CPU model:
//! `jobs -> cpu -> block layer -> media` (driver ata or simple).
//!
//! each stage a plug-in found in its registry: the scheduler by `[block] scheduler`, the
//! transport by `[path] transport`, the
//! arbiter by `[controller] arbitration`, the completion order by `[controller]
//! completion_order`, the media by `[media] model`. The chain's type is fixed by those choices,
//! so the run loop is compiled once per (transport, media) pair and every hook call is static.

use qoslab_block::cpu::{CpuSetup, CpuStage};
use qoslab_block::ordering::{OrderConfig, OrderedStreams, OrderingOps};
use qoslab_block::{BlockLayer, DriverLimits, QueueSetup, WriteCache};
use qoslab_engine::order::Layout;
use qoslab_engine::{Chain, Fanout, Ns, Stage};
use qoslab_fabric::target::{Target, TargetSetup};
use qoslab_fs::{FsConfig, FsSetup, FsStage};
use qoslab_media::{Device, DeviceCaps};
use qoslab_nvme::transport::nvmeof::FabricCosts;
use qoslab_nvme::transport::{
    FabricModel, FabricVisitor, TransportModel, TransportVisitor, check_transport, visit_fabric,
    visit_transport,
};
use qoslab_nvme::{ControllerSetup, HostConfig, NvmeController, NvmeHost, QueueLayout};

use crate::SimError;
use crate::device::{DeviceConfig, Driver};

/// The default path over transport `T` and media `D`.
pub type NvmePath<T, D> = Chain<BlockLayer, Chain<NvmeHost, Chain<T, Chain<NvmeController, D>>>>;

/// A SATA disk's path, and a simple driver's: the media right below the block layer.
pub type AtaPath<D> = Chain<BlockLayer, D>;

/// One target server of a fabric path: the initiator's NVMe host for it, the transport, the
/// target, its controller and its drive.
pub type TargetPath<T, D> = Chain<NvmeHost, Chain<T, Chain<Target, Chain<NvmeController, D>>>>;

/// The path with target servers: the block layer over a fan-out to each target's path.
pub type FabricPath<T, D> = Chain<BlockLayer, Fanout<TargetPath<T, D>>>;

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
        rotational: caps.contains(DeviceCaps::ROTATIONAL),
        ..limits
    };
    Ok(BlockLayer::new(
        QueueSetup::new(&cfg, &limits, ops),
        ops,
        &device.scheduler,
        hosts,
    )
    .with_write_cache(WriteCache {
        volatile: caps.contains(DeviceCaps::VOLATILE_WRITE_CACHE),
        fua: caps.contains(DeviceCaps::FUA),
    }))
}

/// The ordered streams of the jobs whose writes `plan` orders, if any, on `targets` targets.
fn ordered_streams(
    device: &DeviceConfig,
    plan: &PathPlan,
    caps: DeviceCaps,
    targets: u32,
) -> Result<Option<OrderedStreams>, SimError> {
    if plan.orderings.iter().all(Option::is_none) {
        return Ok(None);
    }
    let t = device.targets_config();
    if targets == 0
        && let Some(o) = plan.orderings.iter().flatten().find(|o| o.needs_target)
    {
        return Err(SimError::new(format!(
            "{}: ordering '{}' needs target servers with a PMR ([fabric] targets = 1 or more, over an NVMe-oF transport)",
            device.source, o.name
        )));
    }
    let cfg = OrderConfig {
        layout: Layout {
            targets: targets.max(1),
            chunk_blocks: (t.stripe_bytes / t.block_bytes).max(1),
            merge_batch: t.merge_batch,
        },
        block_bytes: t.block_bytes,
        plp: caps.contains(DeviceCaps::POWER_LOSS_PROTECTION)
            || !caps.contains(DeviceCaps::VOLATILE_WRITE_CACHE),
        pmr_bytes: t.pmr_bytes,
        attr_bytes: t.attr_bytes,
        context_switch_ns: t.context_switch_ns,
        record: plan.record || plan.trace,
        trace: plan.trace,
    };
    let settings = |o: &'static OrderingOps| device.ordering_settings(o.name);
    Ok(Some(OrderedStreams::new(cfg, &plan.orderings, &settings)))
}

/// What a path is built for besides the device file: the cores each host's jobs need (for
/// `host.cores = 0`), the run's seed, and the ordering of each job's writes.
#[derive(Clone, Debug)]
pub struct PathPlan {
    /// Job clones per host.
    pub jobs_per_host: Vec<u32>,
    pub seed: u64,
    /// Per job (in the run's order), the ordering plug-in of its writes, if they are ordered.
    pub orderings: Vec<Option<&'static OrderingOps>>,
    /// A power cut will be observed: ordered streams keep what its check needs.
    pub record: bool,
    /// Ordered commands are traced step by step (the differential test against the crash
    /// checker).
    pub trace: bool,
    /// The page cache and file system on top of the path, when the jobs work on files.
    pub fs: Option<FsSetup>,
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

    /// The plan over a path of `hosts` hosts (hosts without jobs get none); an error when a
    /// job runs on a host the path does not have.
    fn over_hosts(&self, hosts: u16) -> Result<PathPlan, SimError> {
        if self.jobs_per_host.len() > hosts as usize {
            return Err(SimError::new(format!(
                "a job runs on sim_host {} but the device's path has {hosts} host(s) ([path] hosts)",
                self.jobs_per_host.len() - 1
            )));
        }
        let mut jobs_per_host = self.jobs_per_host.clone();
        jobs_per_host.resize(hosts as usize, 0);
        Ok(PathPlan {
            jobs_per_host,
            ..self.clone()
        })
    }
}

/// Code that runs on a built path (a simulation).
pub trait PathVisitor {
    type Output;
    fn visit<P: Stage>(self, path: P) -> Self::Output;
}

/// Builds the path of `device` over the media `devs` (one per target server when the path has
/// some, else one) and hands it to `visitor`.
pub fn build<D: Device, V: PathVisitor>(
    device: &DeviceConfig,
    mut devs: Vec<D>,
    plan: &PathPlan,
    visitor: V,
) -> Result<V::Output, SimError> {
    let path = device.path_config();
    let targets = device.targets_config().targets;
    let cpu = cpu_stage(device)?;
    if cpu.is_some() && (targets > 0 || path.driver == Driver::Nvme) {
        // The NVMe host driver has CPU costs of its own ([host] submit_ns, complete_ns).
        return Err(SimError::new(format!(
            "{}: field 'cpu.model': a CPU model sits on a path whose driver is ata or simple; an NVMe path has its host's CPU costs ([host] submit_ns, complete_ns)",
            device.source
        )));
    }
    if targets > 0 {
        if path.driver != Driver::Nvme {
            return Err(SimError::new(format!(
                "field 'fabric.targets': target servers are reached over NVMe-oF, not an {} device",
                path.driver.name()
            )));
        }
        if devs.len() != targets as usize {
            return Err(SimError::new(format!(
                "field 'fabric.targets': {targets} targets need a drive each, got {}",
                devs.len()
            )));
        }
        let name = path.transport;
        return visit_fabric(
            &name,
            WithTargets {
                device,
                devs,
                plan,
                visitor,
            },
        )
        .ok_or_else(|| {
            device.locate(qoslab_engine::ConfigError::new(format!(
                "field 'fabric.targets': target servers need an NVMe-oF transport (path.transport = rdma or tcp), got '{name}'"
            )))
        })?;
    }
    let dev = devs.remove(0);
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
        let mut block = block_layer(device, limits, dev.caps(), 1)?;
        if cpu.as_ref().is_some_and(CpuStage::woken_retry) {
            block = block.with_retry_on_cpu();
        }
        if cpu.as_ref().is_some_and(CpuStage::queue_runs_on_cpu) {
            block = block.with_queue_runs_on_cpu();
        }
        if let Some(o) = ordered_streams(device, plan, dev.caps(), 0)? {
            block = block.with_ordered(o);
        }
        let direct: AtaPath<D> = Chain::new(block, dev);
        if let Some(cpu) = cpu {
            if plan.fs.is_some() {
                return Err(SimError::new(format!(
                    "{}: field 'cpu.model': a CPU model does not go with a mounted file system ([fs] mount), which has its own CPU costs",
                    device.source
                )));
            }
            return Ok(visitor.visit(Chain::new(cpu, direct)));
        }
        return visit_path(device, plan, visitor, direct);
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

/// The host CPU stage of `device` (`[cpu] model`), if it names a CPU model.
fn cpu_stage(device: &DeviceConfig) -> Result<Option<CpuStage>, SimError> {
    let Some(ops) =
        qoslab_block::cpu::lookup(device.cpu.str("model")).map_err(|e| device.locate(e))?
    else {
        return Ok(None);
    };
    let settings = device.cpu_model_settings(ops.name);
    let model = ops.build.expect("checked by the registry")(&CpuSetup { settings });
    Ok(Some(CpuStage::new(model)))
}

/// The ordering plug-in the file system of `device` (`[fs] type`) sends its ordered groups
/// through, if it orders them (HORAEFS: horae, RioFS: rio), checked against what the path
/// offers: a plug-in that needs target servers needs a device with some.
pub fn fs_ordering(device: &DeviceConfig) -> Result<Option<&'static OrderingOps>, SimError> {
    let cfg = FsConfig::from_settings(&device.fs);
    let ops = qoslab_fs::journal::lookup(&cfg.fs_type).map_err(|e| device.locate(e))?;
    let journal = ops.build.expect("checked by the registry")(&device.fs_own);
    let Some(name) = journal.ordering() else {
        return Ok(None);
    };
    let ordering = qoslab_block::ordering::lookup(name).map_err(|e| device.locate(e))?;
    if ordering.needs_target && device.targets_config().targets == 0 {
        return Err(SimError::new(format!(
            "{}: fs.type = '{}' sends its transactions as ordered groups through the '{name}' ordering, which needs target servers with a PMR: a device with [fabric] targets = 1 or more over an NVMe-oF transport (rio-flash, rio-optane)",
            device.source, ops.name
        )));
    }
    Ok(Some(ordering))
}

/// Hands `path` to `visitor`, under the page cache and file system when the plan has them.
fn visit_path<P: Stage, V: PathVisitor>(
    device: &DeviceConfig,
    plan: &PathPlan,
    visitor: V,
    path: P,
) -> Result<V::Output, SimError> {
    let Some(setup) = &plan.fs else {
        return Ok(visitor.visit(path));
    };
    let cfg = FsConfig::from_settings(&device.fs);
    let ops = qoslab_fs::journal::lookup(&cfg.fs_type).map_err(|e| device.locate(e))?;
    let journal = ops.build.expect("checked by the registry")(&device.fs_own);
    let fs = FsStage::new(cfg, journal, setup.clone())
        .map_err(|m| SimError::new(format!("{}: the file system: {m}", device.source)))?;
    Ok(visitor.visit(Chain::new(fs, path)))
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
        visit_path(self.device, self.plan, self.visitor, parts.chain())
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

/// Transport `T` for `hosts` hosts, from `device`'s section for it, refused if it was written
/// for another stage contract.
fn build_transport<T: TransportModel>(device: &DeviceConfig, hosts: u16) -> Result<T, SimError> {
    check_transport::<T>().map_err(SimError::new)?;
    T::build(&device.transport, hosts).map_err(|e| device.locate(e))
}

/// Builds the stages of `device`'s path over transport `T` and media `dev`.
pub fn parts<T: TransportModel, D: Device>(
    device: &DeviceConfig,
    dev: D,
    plan: &PathPlan,
) -> Result<PathParts<T, D>, SimError> {
    let hosts = device.path_config().hosts;
    let plan = plan.over_hosts(hosts)?;
    let transport = build_transport::<T>(device, hosts)?;
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
    let mut block = block_layer(device, limits, dev.caps(), hosts)?;
    if let Some(o) = ordered_streams(device, &plan, dev.caps(), 0)? {
        block = block.with_ordered(o);
    }
    let mut host = NvmeHost::new(host_cfg.clone(), layout.clone(), ctrl_cfg.mdts_bytes, early);
    if let Some(ops) =
        qoslab_nvme::replicas::lookup(&host_cfg.replicas).map_err(|e| device.locate(e))?
    {
        if ops.needs_plm && !dev.caps().contains(DeviceCaps::PREDICTABLE_LATENCY) {
            return Err(SimError::new(format!(
                "{}: host.replicas = '{}' needs a device in Predictable Latency Mode (media model 'ssd' with gc.gate = 'plm')",
                device.source, ops.name
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

struct WithTargets<'a, D, V> {
    device: &'a DeviceConfig,
    devs: Vec<D>,
    plan: &'a PathPlan,
    visitor: V,
}

impl<D: Device, V: PathVisitor> FabricVisitor for WithTargets<'_, D, V> {
    type Output = Result<V::Output, SimError>;

    fn visit<T: FabricModel>(self) -> Self::Output {
        let path = fabric_path::<T, D>(self.device, self.devs, self.plan)?;
        visit_path(self.device, self.plan, self.visitor, path)
    }
}

/// Cycles at `ghz`, as time.
fn cycles_ns(cycles: u64, ghz: f64) -> Ns {
    (cycles as f64 / ghz).round() as Ns
}

/// The initiator's host driver over a fabric: each core a serial CPU, and the transport's
/// initiator cycles of a command (submission, its capsule, its doorbell) and of a completion
/// (the response, its handling) added to the host's own times at the cores' clock.
pub fn fabric_host_config(cfg: &HostConfig, c: &FabricCosts, ghz: f64) -> HostConfig {
    HostConfig {
        submit_ns: cfg.submit_ns
            + cycles_ns(c.submit_cycles + c.message_cycles + c.doorbell_cycles, ghz),
        complete_ns: cfg.complete_ns + cycles_ns(c.complete_cycles + c.message_cycles, ghz),
        ..cfg.clone()
    }
}

/// The path of `device` with target servers, over fabric transport `T` and the drives `devs`.
pub fn fabric_path<T: FabricModel, D: Device>(
    device: &DeviceConfig,
    devs: Vec<D>,
    plan: &PathPlan,
) -> Result<FabricPath<T, D>, SimError> {
    let hosts = device.path_config().hosts;
    let plan = plan.over_hosts(hosts)?;
    let t = device.targets_config();
    let host_cfg = device.host_config();
    if host_cfg.replicas != qoslab_nvme::replicas::NONE {
        return Err(SimError::new(format!(
            "{}: host.replicas = '{}' is not supported with target servers ([fabric] targets)",
            device.source, host_cfg.replicas
        )));
    }
    let ctrl_cfg = device.controller_config();
    let order =
        qoslab_nvme::order::lookup(&ctrl_cfg.completion_order).map_err(|e| device.locate(e))?;
    let arbiter_ops =
        qoslab_nvme::arbiter::lookup(&ctrl_cfg.arbitration).map_err(|e| device.locate(e))?;
    let layout = QueueLayout::new(&plan.cores(device), arbiter_ops.sq_per_class);
    let caps = devs[0].caps();
    let mut children = Vec::with_capacity(devs.len());
    for (i, dev) in devs.into_iter().enumerate() {
        let mut transport = build_transport::<T>(device, hosts)?;
        transport.pulled_by_target();
        let costs = transport.costs();
        let foldable = transport.caps().foldable();
        let early = NvmeController::completes_early(&ctrl_cfg, order, foldable);
        if !early {
            return Err(SimError::new(format!(
                "{}: target servers need completions handed up as the drive finishes (no controller.completion_order other than device, no interrupt coalescing)",
                device.source
            )));
        }
        let host = NvmeHost::new(
            fabric_host_config(&host_cfg, &costs, t.cpu_ghz),
            layout.clone(),
            ctrl_cfg.mdts_bytes,
            early,
        )
        .with_serial_cpu();
        let horae = qoslab_block::ordering::horae::HoraeConfig::from_settings(
            device.ordering_settings("horae"),
        );
        let target = Target::new(TargetSetup {
            index: i as u16,
            cores: t.cores,
            cpu_ghz: t.cpu_ghz,
            receive_cycles: costs.message_cycles,
            pull_cycles: costs.message_cycles,
            inline_bytes: costs.inline_data_bytes,
            submit_cycles: costs.submit_cycles,
            respond_cycles: costs.complete_cycles + costs.message_cycles,
            pmr_write_ns: t.pmr_write_ns,
            pmr_slots: t.pmr_slots(),
            attr_bytes: t.attr_bytes,
            meta_bytes: horae.meta_bytes,
            plp: caps.contains(DeviceCaps::POWER_LOSS_PROTECTION),
            trace: plan.trace,
        });
        let arbiter = NvmeController::arbiter_from(&ctrl_cfg, &device.arbiter)
            .map_err(|e| device.locate(e))?;
        let controller = NvmeController::new(
            ctrl_cfg.clone(),
            ControllerSetup {
                layout: layout.clone(),
                cq_depth: host_cfg.cq_depth,
                arbiter,
                order,
                transport_foldable: foldable,
                seed: plan.seed,
            },
        );
        children.push(Chain::new(
            host,
            Chain::new(transport, Chain::new(target, Chain::new(controller, dev))),
        ));
    }
    let sqs_per_core = if arbiter_ops.sq_per_class {
        qoslab_nvme::SqClass::ALL.len() as u32
    } else {
        1
    };
    let limits = DriverLimits {
        queue_per_core: true,
        hw_queue_depth: (host_cfg.sq_depth - 1) * sqs_per_core,
        driver_admits: true,
        max_hw_bytes: ctrl_cfg.mdts_bytes.min(t.stripe_bytes).max(1),
        rotational: false,
    };
    // The initiator's queue has a volatile write cache and FUA whatever the drives: Linux's
    // NVMe-oF target reports a volatile write cache for every namespace
    // (nvmet_execute_identify_ctrl: "XXX: don't report vwc if the underlying device is write
    // through"), and the host sets both from it (nvme_set_queue_limits:
    // blk_queue_write_cache(q, vwc, vwc)). So a FLUSH crosses the network and the target's
    // block layer drops it for a drive without a cache (the target stage). The ordered
    // streams keep the drives' own durability (`plp`).
    let nvmet = caps | DeviceCaps::VOLATILE_WRITE_CACHE | DeviceCaps::FUA;
    let mut block = block_layer(device, limits, nvmet, hosts)?;
    if let Some(o) = ordered_streams(device, &plan, caps, t.targets)? {
        block = block.with_ordered(o);
    }
    Ok(Chain::new(block, Fanout::new(children, t.stripe_bytes)))
}
