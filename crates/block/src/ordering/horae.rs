//! `horae`: HORAE (OSDI'20) over NVMe-oF as Rio 6.1 builds it: before a request's data, a
//! synchronous control path sends its ordering metadata to the target's PMR (an RDMA SEND, a
//! persistent MMIO write, an answer) while the job's thread sleeps; the data then goes
//! asynchronously, FLUSHes are commands of their own after the writes they cover, and requests
//! are acknowledged in order.

use qoslab_engine::order::{OrderOp, PlanRules};

use super::{CmdView, Ordering, OrderingOps, StreamView};

qoslab_engine::plugin! {
    pub static OPS: OrderingOps = "horae", "HORAE: a synchronous control path persists each request's ordering metadata to the target's PMR before its data", needs_target: true;
    /// `[block.horae]`.
    tunables struct HoraeConfig in HORAE_TUNABLES {
        meta_bytes: u64 = bytes(16, "ordering metadata of one request on the control path and in the PMR (model assumption: Rio 6.5 says only that it is smaller than Rio's 32 B attribute)").range(1.0, 4096.0),
    }
    build |_, cfg| Box::new(Horae { cfg })
}

struct Horae {
    cfg: HoraeConfig,
}

impl Ordering for Horae {
    fn rules(&self) -> PlanRules {
        PlanRules {
            merge: false,
            flush_every_request: false,
            separate_flush: true,
            flush_every_target: false,
        }
    }

    /// The data of a request goes once its metadata is persisted; a FLUSH once the writes it
    /// covers completed.
    fn may_send(&self, s: &StreamView<'_>, cmd: &CmdView<'_>) -> bool {
        let meta = cmd
            .reqs
            .iter()
            .all(|&r| r < s.first || s.requests[(r - s.first) as usize].meta_ok);
        meta && (!cmd.flush_only || cmd.lane_done)
    }

    fn control_path(&self) -> Option<u64> {
        Some(self.cfg.meta_bytes)
    }

    /// The metadata of requests known durable is not needed for recovery any more: each
    /// target drops it from its PMR log (HORAE's log is circular, as Rio's).
    fn after_ack(&self, stream: u32, durable: u64, out: &mut Vec<OrderOp>) {
        out.push(OrderOp::Recycle {
            stream,
            seq: durable,
        });
    }
}
