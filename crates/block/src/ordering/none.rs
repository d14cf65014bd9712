//! `none`: plain NVMe-oF writes, no ordering (the upper bound of Rio's Figures 10-12): merged
//! in the plug, sent at once, a FLUSH flag where the job asks for one, acknowledged as they
//! complete.

use super::{Ordering, OrderingOps};

qoslab_engine::plugin! {
    pub static OPS: OrderingOps = "none", "orderless: writes merged and sent at once, acknowledged as they complete", needs_target: false;
    build |_| Box::new(Orderless)
}

struct Orderless;

impl Ordering for Orderless {
    fn in_order_ack(&self) -> bool {
        false
    }

    fn flush_covers_prefix(&self) -> bool {
        false
    }
}
