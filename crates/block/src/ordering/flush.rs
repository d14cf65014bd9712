//! `flush`: Linux's ordering over NVMe-oF (Rio 2.2): each ordered write goes only once the
//! previous one is acknowledged, and is followed by a FLUSH to every target (the targets form
//! one volume, and Linux's dm-stripe sends a flush to each of its devices), sent once the
//! write completed; the job's thread sleeps on each command.

use qoslab_engine::order::PlanRules;

use super::{CmdView, Ordering, OrderingOps, StreamView};

qoslab_engine::plugin! {
    pub static OPS: OrderingOps = "flush", "Linux FLUSH ordering: one ordered write in flight, each followed by a FLUSH to every target", needs_target: false;
    build |_| Box::new(FlushOrdering)
}

struct FlushOrdering;

impl Ordering for FlushOrdering {
    fn rules(&self) -> PlanRules {
        PlanRules {
            merge: false,
            flush_every_request: true,
            separate_flush: true,
            // dm-stripe sends the FLUSH to each of the volume's devices (Linux cannot use a
            // second target: the document's 6.2).
            flush_every_target: true,
        }
    }

    /// Synchronous transfer: every request before the command's is acknowledged; the FLUSHes
    /// go once the whole write completed, to every target at once (the file system waits for
    /// the write, then flushes the volume), not only once the write's part on their target did.
    fn may_send(&self, s: &StreamView<'_>, cmd: &CmdView<'_>) -> bool {
        let first = cmd.reqs.iter().copied().min().unwrap_or(s.first);
        let before = first.saturating_sub(s.first) as usize;
        s.requests.iter().take(before).all(|a| a.acked) && (!cmd.flush_only || cmd.stream_done)
    }

    fn sleeps_per_command(&self) -> bool {
        true
    }
}
