//! The host block layer (Linux's blk-mq) as a stage above the device driver.
//!
//! Requests from the jobs enter one software queue per host and CPU (blk-mq's hardware
//! context). The block layer offers the head of a queue to the driver below; when the driver
//! has no room (no free command id), the request stays here, with everything behind it, until
//! the driver reports room again. So requests beyond the driver's queue depth wait where a
//! scheduler can see them.
//!
//! This is the pass-through block layer: first in, first out per queue, no merging, no
//! reordering (blk-mq with the `none` scheduler).

pub mod flush;

use std::collections::VecDeque;

use qoslab_engine::{Admission, ReqId, Stage, StageCtx};

pub use flush::WriteCache;

/// The block layer of every host on the path.
#[derive(Debug, Default)]
pub struct BlockLayer {
    /// Software queues by (host, core), created on first use; `index` maps a key to its slot.
    queues: Vec<VecDeque<ReqId>>,
    index: Vec<((u16, u16), usize)>,
    held: usize,
    write_cache: WriteCache,
    pub stats: BlockStats,
}

/// Counters of the block layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Requests from the jobs.
    pub ios: u64,
    /// Requests that had to wait here for room below.
    pub waited: u64,
    /// The most requests held here at once.
    pub max_held: u64,
    /// Flushes completed here because the device has no volatile write cache.
    pub flushes_not_sent: u64,
}

impl BlockLayer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells the block layer what the device's write cache is.
    pub fn with_write_cache(mut self, write_cache: WriteCache) -> Self {
        self.write_cache = write_cache;
        self
    }

    /// Requests held now.
    pub fn held(&self) -> usize {
        self.held
    }

    fn queue_of(&mut self, host: u16, core: u16) -> usize {
        let key = (host, core);
        if let Some(&(_, i)) = self.index.iter().find(|(k, _)| *k == key) {
            return i;
        }
        self.queues.push(VecDeque::new());
        self.index.push((key, self.queues.len() - 1));
        self.queues.len() - 1
    }

    /// Offers queue `q`'s requests in order until the driver is busy.
    fn run_queue(&mut self, q: usize, ctx: &mut impl StageCtx<()>) {
        while let Some(&id) = self.queues[q].front() {
            if ctx.dispatch(id) == Admission::Busy {
                return;
            }
            self.queues[q].pop_front();
            self.held -= 1;
        }
    }
}

impl Stage for BlockLayer {
    type Event = ();

    const FORWARDS_UP: bool = true;

    fn name(&self) -> &'static str {
        "block"
    }

    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<()>) {
        self.stats.ios += 1;
        if !self.write_cache.prepare(&mut ctx.reqs_mut()[id]) {
            self.stats.flushes_not_sent += 1;
            let now = ctx.now_ns();
            let t = &mut ctx.reqs_mut()[id].t;
            t.dispatched_ns = now;
            t.completed_ns = now;
            ctx.complete(id);
            return;
        }
        let req = &ctx.reqs()[id];
        let q = self.queue_of(req.host, req.core);
        if self.queues[q].is_empty() && ctx.dispatch(id) == Admission::Accepted {
            return;
        }
        self.stats.waited += 1;
        self.queues[q].push_back(id);
        self.held += 1;
        self.stats.max_held = self.stats.max_held.max(self.held as u64);
    }

    fn on_event(&mut self, _: (), _: &mut impl StageCtx<()>) {}

    fn pull(&mut self, ctx: &mut impl StageCtx<()>) {
        for q in 0..self.queues.len() {
            self.run_queue(q, ctx);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("ios".into(), self.stats.ios as f64),
            ("waited".into(), self.stats.waited as f64),
            ("max_held".into(), self.stats.max_held as f64),
            (
                "flushes_not_sent".into(),
                self.stats.flushes_not_sent as f64,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::{Chain, Harness, Null, Op, Request, Requests};

    /// A driver with `slots` command ids: refuses beyond them, says when one frees.
    struct Slots {
        free: u32,
        refused: bool,
        delay_ns: u64,
        order: Vec<u64>,
    }

    impl Stage for Slots {
        type Event = ReqId;
        fn name(&self) -> &'static str {
            "slots"
        }
        fn admit(&mut self, _: ReqId, _: &mut Requests) -> Admission {
            if self.free == 0 {
                self.refused = true;
                return Admission::Busy;
            }
            self.free -= 1;
            Admission::Accepted
        }
        fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
            self.order.push(ctx.reqs()[id].offset_bytes);
            let at = ctx.now_ns() + self.delay_ns;
            ctx.schedule(at, id);
        }
        fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
            self.free += 1;
            if self.refused {
                self.refused = false;
                ctx.room_above();
            }
            ctx.complete(id);
        }
    }

    #[test]
    fn requests_beyond_the_drivers_room_wait_here_in_order() {
        let slots = Slots {
            free: 2,
            refused: false,
            delay_ns: 100,
            order: Vec::new(),
        };
        let mut h = Harness::new(Chain::new(
            BlockLayer::new(),
            Chain::new(slots, Null::new(0)),
        ));
        for k in 0..6u64 {
            h.submit_at(0, Request::new(Op::Read, k * 4096, 4096, 0, 0));
        }
        h.run_until(0);
        assert_eq!(h.stage.upper.held(), 4);
        h.run_all();
        assert_eq!(h.stage.upper.stats.max_held, 4);
        assert_eq!(h.stage.upper.stats.waited, 4);
        let order: Vec<u64> = h.stage.lower.upper.order.iter().map(|o| o / 4096).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4, 5]);
        let times: Vec<u64> = h.completed.iter().map(|&(_, t)| t).collect();
        assert_eq!(times, vec![100, 100, 200, 200, 300, 300]);
    }
}
