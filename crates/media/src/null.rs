//! The null device (fio's `null` engine plays this role for fio): every command completes a
//! fixed time after it arrives, any number at once, so the rest of the path can be measured
//! and tested without a model underneath.

use qoslab_engine::{ConfigError, Null, ReqId, Settings, Stage, StageCtx, Tunable};

use crate::{BuildCtx, Device, DeviceModel};

qoslab_engine::settings! {
    /// `[media]` with `model = "null"`.
    pub struct NullConfig in NULL_TUNABLES {
        delay_ns: u64 = ns(0, "time from a command's arrival to its completion"),
        capacity_bytes: u64 = bytes(1 << 40, "addressable capacity").range(512.0, 1.8e19),
    }
}

/// The null device: the engine's `Null` stage with a capacity.
pub struct NullDevice {
    inner: Null,
    capacity_bytes: u64,
}

impl NullDevice {
    pub fn new(delay_ns: u64, capacity_bytes: u64) -> Self {
        NullDevice {
            inner: Null::new(delay_ns),
            capacity_bytes,
        }
    }
}

impl Stage for NullDevice {
    type Event = ReqId;

    /// A command only reaches its own completion event: it may run inside the controller's hook.
    const SUBMITS_AT_ONCE: bool = true;

    fn name(&self) -> &'static str {
        <Self as DeviceModel>::NAME
    }

    #[inline]
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        self.inner.submit(id, ctx);
    }

    #[inline]
    fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        self.inner.on_event(id, ctx);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        self.inner.counters()
    }
}

impl Device for NullDevice {
    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }
}

impl DeviceModel for NullDevice {
    const NAME: &'static str = "null";
    const HELP: &'static str =
        "completes every command a fixed time after it arrives (fio's null engine): the path alone";
    const TUNABLES: &'static [Tunable] = NULL_TUNABLES;
    const API_VERSION: u32 = qoslab_engine::STAGE_API_VERSION;

    fn build(settings: &Settings, _ctx: &BuildCtx<'_>) -> Result<Self, ConfigError> {
        let c = NullConfig::from_settings(settings);
        Ok(NullDevice::new(c.delay_ns, c.capacity_bytes))
    }
}
