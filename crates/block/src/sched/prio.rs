//! `prio`: the study's priority scheduler. Three FIFOs, HIGH, NORMAL and LOW, filled from the
//! I/O priority by the study's mapping (RT and best effort 0-2 HIGH, best effort 3-5 and no
//! class NORMAL, best effort 6-7 and IDLE LOW); strict priority, except that a NORMAL or LOW
//! request that waited `aging_expire` goes first (the oldest such). A request inserted at the
//! head (a requeue) goes to a dispatch list served before all of them (Listings 3 and 4). The
//! kernel module of the same name is `kernel/prio-iosched.c`.

use std::collections::VecDeque;

use qoslab_engine::{IoPrio, IoPrioClass, Ns, ReqId};

use crate::elevator::{Elevator, SchedCtx, SchedOps};

qoslab_engine::plugin! {
    pub static OPS: SchedOps = "prio", "the study's scheduler: HIGH, NORMAL and LOW FIFOs from the I/O priority, strict priority with aging", elevator: true, merges_requests: false;
    /// `[block.prio]`.
    tunables struct PrioConfig in PRIO_TUNABLES {
        aging_expire: u64 = ms(500, "aging_expire: a NORMAL or LOW request that waited this long goes before higher levels, ms (the study gives no value: 500, mq-deadline's read_expire, bounds a starved request as mq-deadline bounds a read)"),
    }
    build |_, cfg| build(cfg)
}

fn build(cfg: PrioConfig) -> Option<Box<dyn Elevator>> {
    Some(Box::new(Prio {
        aging_expire_ns: cfg.aging_expire * 1_000_000,
        fifo: Default::default(),
        head: Default::default(),
        dispatched: [0; LEVELS],
        aged: 0,
        head_dispatched: 0,
    }))
}

/// HIGH, NORMAL, LOW.
pub const LEVELS: usize = 3;
pub const LEVEL_NAMES: [&str; LEVELS] = ["high", "normal", "low"];

/// The counters both priority schedulers report: each level's dispatches, then their own.
pub fn level_counters(dispatched: [u64; LEVELS], own: &[(&str, u64)]) -> Vec<(String, f64)> {
    let levels = LEVEL_NAMES
        .iter()
        .zip(dispatched)
        .map(|(n, d)| (format!("{n}_dispatched"), d as f64));
    let own = own.iter().map(|&(n, v)| (n.to_string(), v as f64));
    levels.chain(own).collect()
}

/// The study's mapping of an I/O priority to HIGH (0), NORMAL (1) or LOW (2).
pub fn level_of(prio: IoPrio) -> usize {
    match prio.class {
        IoPrioClass::RealTime => 0,
        IoPrioClass::Idle => 2,
        IoPrioClass::None => 1,
        IoPrioClass::BestEffort => match prio.level {
            0..=2 => 0,
            3..=5 => 1,
            _ => 2,
        },
    }
}

pub struct Prio {
    aging_expire_ns: Ns,
    fifo: [VecDeque<(Ns, ReqId)>; LEVELS],
    /// Requests inserted at the head, served first (the study's `dispatch` list).
    head: VecDeque<ReqId>,
    dispatched: [u64; LEVELS],
    aged: u64,
    head_dispatched: u64,
}

impl Elevator for Prio {
    fn insert(&mut self, rq: ReqId, at_head: bool, cx: &mut SchedCtx<'_>) {
        cx.list_ops(1);
        if at_head {
            self.head.push_front(rq);
            return;
        }
        let l = level_of(cx.req(rq).prio);
        self.fifo[l].push_back((cx.now_ns(), rq));
    }

    fn dispatch(&mut self, cx: &mut SchedCtx<'_>) -> Option<ReqId> {
        if let Some(id) = self.head.pop_front() {
            cx.list_ops(1);
            self.head_dispatched += 1;
            return Some(id);
        }
        let now = cx.now_ns();
        let aged = (1..LEVELS)
            .filter_map(|l| self.fifo[l].front().map(|&(t, _)| (t, l)))
            .filter(|&(t, _)| t + self.aging_expire_ns <= now)
            .min();
        let l = match aged {
            Some((_, l)) => {
                self.aged += 1;
                l
            }
            None => (0..LEVELS).find(|&l| !self.fifo[l].is_empty())?,
        };
        cx.list_ops(1);
        self.dispatched[l] += 1;
        self.fifo[l].pop_front().map(|(_, id)| id)
    }

    fn has_work(&self) -> bool {
        !self.head.is_empty() || self.fifo.iter().any(|f| !f.is_empty())
    }

    fn counters(&self) -> Vec<(String, f64)> {
        level_counters(
            self.dispatched,
            &[
                ("aged_dispatches", self.aged),
                ("head_dispatches", self.head_dispatched),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::*;
    use qoslab_engine::Op;

    #[test]
    fn the_studys_mapping_of_priorities_to_levels() {
        let levels: Vec<usize> = (0..8).map(|l| level_of(be(l))).collect();
        assert_eq!(levels, vec![0, 0, 0, 1, 1, 1, 2, 2]);
        assert_eq!(level_of(RT0), 0);
        assert_eq!(level_of(IoPrio::default()), 1);
        let idle = IoPrio {
            class: IoPrioClass::Idle,
            level: 0,
        };
        assert_eq!(level_of(idle), 2);
    }

    #[test]
    fn strict_priority_then_fifo_within_a_level() {
        let mut h = rig("prio", &["block.nr_requests=64"], 1, MS);
        h.submit_at(0, io(Op::Read, 0, 4 * KIB, be(4)));
        for (k, l) in [(1, 7), (2, 4), (3, 1), (4, 7), (5, 0), (6, 4)] {
            h.submit_at(0, io(Op::Read, k * MIB, 4 * KIB, be(l)));
        }
        h.run_all();
        let offs: Vec<u64> = served(&h).iter().map(|s| s.offset_bytes / MIB).collect();
        assert_eq!(offs, vec![0, 3, 5, 2, 6, 1, 4]);
    }

    #[test]
    fn a_request_inserted_at_the_head_goes_before_every_level() {
        // Listings 3 and 4: the dispatch list comes before aging and before HIGH.
        let mut reqs = qoslab_engine::Requests::with_capacity(4);
        let low = reqs.alloc(io(Op::Read, 0, 4 * KIB, be(7)));
        let high = reqs.alloc(io(Op::Read, MIB, 4 * KIB, be(0)));
        let again = reqs.alloc(io(Op::Read, 2 * MIB, 4 * KIB, be(7)));
        let mut s = build_sched("prio", &[]);
        with_sched_ctx(&reqs, 0, |cx| {
            s.insert(low, false, cx);
            s.insert(high, false, cx);
            s.insert(again, true, cx);
        });
        // Even with the LOW request long past aging_expire.
        let order: Vec<ReqId> = with_sched_ctx(&reqs, 10_000 * MS, |cx| {
            std::iter::from_fn(|| s.dispatch(cx)).collect()
        });
        assert_eq!(order, vec![again, low, high]);
    }

    #[test]
    fn a_low_request_that_waited_aging_expire_goes_before_high_ones() {
        // HIGH reads every 0.5 ms keep a 1 ms disk busy; one LOW read at 1 ms.
        let run = |aging_ms: u64| {
            let set = format!("block.prio.aging_expire={aging_ms}");
            let mut h = rig("prio", &[&set, "block.nr_requests=4096"], 1, MS);
            for k in 0..2000 {
                h.submit_at(k * MS / 2, io(Op::Read, k * MIB, 4 * KIB, be(1)));
            }
            h.submit_at(MS, io(Op::Read, 5000 * MIB, 4 * KIB, be(7)));
            h.run_all();
            served_at(&h, 5000 * MIB)
        };
        let t = run(100);
        assert!(((1 + 100) * MS..=(1 + 100 + 1) * MS).contains(&t), "{t}");
        assert!(run(5000) >= 1999 * MS);
    }
}
