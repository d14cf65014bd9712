//! `none`: plain NVMe-oF writes, no ordering (the upper bound of Rio's Figures 10-12): merged
//! in the plug, sent at once, a FLUSH flag where the job asks for one, acknowledged as they
//! complete.

use qoslab_engine::order::PlanRules;

use super::{Ordering, OrderingOps, OrderingSetup};

pub static OPS: OrderingOps = OrderingOps {
    name: "none",
    help: "orderless: writes merged and sent at once, acknowledged as they complete",
    api_version: qoslab_engine::STAGE_API_VERSION,
    needs_target: false,
    tunables: &[],
    build: Some(build),
};

fn build(_: &OrderingSetup<'_>) -> Box<dyn Ordering> {
    Box::new(Orderless)
}

struct Orderless;

impl Ordering for Orderless {
    fn rules(&self) -> PlanRules {
        PlanRules {
            merge: true,
            flush_every_request: false,
            separate_flush: false,
            flush_every_target: false,
        }
    }

    fn in_order_ack(&self) -> bool {
        false
    }

    fn flush_covers_prefix(&self) -> bool {
        false
    }
}
