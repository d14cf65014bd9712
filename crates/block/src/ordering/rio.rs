//! `rio`: Rio (EuroSys'23). The ordering attribute of each command travels in its NVMe-oF
//! command (Rio Table 1) and the target logs it to its PMR before the data (Rio 4.3.2); a
//! stream's commands go at once, merged in the plug (Rio 4.5), a FLUSH riding on the request's
//! own command where it can; requests are acknowledged in sequence order (Rio 4.1, step 9);
//! what the application has seen lets each target recycle its log.

use qoslab_engine::ReqId;
use qoslab_engine::order::OrderOp;

use super::{CmdView, Ordering, OrderingOps};

qoslab_engine::plugin! {
    pub static OPS: OrderingOps = "rio", "Rio: ordering attributes logged to the target's PMR, asynchronous merged writes, in-order completion", needs_target: true;
    /// `[block.rio]`.
    tunables struct RioConfig in RIO_TUNABLES {
        in_order_completion: bool = flag(true, "acknowledge requests to the application in sequence order (Rio 4.1, step 9); false only to show the crash checker catches it"),
    }
    build |_, cfg| Box::new(Rio { cfg })
}

struct Rio {
    cfg: RioConfig,
}

impl Ordering for Rio {
    fn before_send(&self, cmd: &CmdView<'_>, out: &mut Vec<OrderOp>) {
        // The command's own id is filled in by the stream when it has one.
        out.push(OrderOp::Attach {
            id: ReqId::NONE,
            attr: *cmd.attr,
        });
    }

    fn in_order_ack(&self) -> bool {
        self.cfg.in_order_completion
    }

    fn after_ack(&self, stream: u32, durable: u64, out: &mut Vec<OrderOp>) {
        out.push(OrderOp::Recycle {
            stream,
            seq: durable,
        });
    }

    fn logs_attributes(&self) -> bool {
        true
    }
}
