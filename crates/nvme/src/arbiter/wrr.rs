//! Weighted round robin with an urgent class (NVMe 2.0, 3.4.4.2): urgent SQs are served first,
//! strictly (round robin among themselves); then the high, medium and low classes share the
//! fetches in the ratio of their weights. Each class gets `weight` commands per round; a class
//! with nothing to fetch is skipped and a new round starts when every class that has commands
//! has used its credit. Within a class, SQs take turns.

use super::{Arbiter, ArbiterOps, SqView, rr_pick};
use crate::config::SqClass;
use qoslab_engine::Ns;

qoslab_engine::plugin! {
    pub static OPS: ArbiterOps = "wrr", "weighted round robin with an urgent class; each core has an SQ per class", sq_per_class: true;
    /// `[controller.wrr]`: the class weights.
    tunables struct WrrConfig in WRR_TUNABLES {
        high_weight: u32 = count(1, "commands of the high class per round").range(1.0, 256.0),
        medium_weight: u32 = count(1, "commands of the medium class per round").range(1.0, 256.0),
        low_weight: u32 = count(1, "commands of the low class per round").range(1.0, 256.0),
    }
    build |s, c| Box::new(WeightedRoundRobin::new(s.burst, [c.high_weight, c.medium_weight, c.low_weight]))
}

#[derive(Clone, Debug)]
pub struct WeightedRoundRobin {
    burst: u32,
    weights: [u32; 3],
    credit: [u32; 3],
    /// Round-robin position per class (urgent, high, medium, low).
    next: [usize; 4],
}

impl WeightedRoundRobin {
    pub fn new(burst: u32, weights: [u32; 3]) -> Self {
        WeightedRoundRobin {
            burst,
            weights,
            credit: weights,
            next: [0; 4],
        }
    }
}

impl Arbiter for WeightedRoundRobin {
    fn pick(&mut self, _now_ns: Ns, sqs: &[SqView]) -> Option<(usize, u32)> {
        if let Some(i) = rr_pick(&mut self.next[0], sqs, |s| s.class == SqClass::Urgent) {
            return Some((i, sqs[i].available.min(self.burst)));
        }
        let has_work = |c: SqClass| sqs.iter().any(|s| s.class == c && s.available > 0);
        let weighted = [SqClass::High, SqClass::Medium, SqClass::Low];
        if !weighted.iter().any(|&c| has_work(c)) {
            return None;
        }
        for _round in 0..2 {
            for (k, &class) in weighted.iter().enumerate() {
                if self.credit[k] == 0 || !has_work(class) {
                    continue;
                }
                let i = rr_pick(&mut self.next[class as usize], sqs, |s| s.class == class)
                    .expect("the class has work");
                let n = sqs[i].available.min(self.burst).min(self.credit[k]);
                self.credit[k] -= n;
                return Some((i, n));
            }
            // Every class with work has spent its credit: a new round.
            self.credit = self.weights;
        }
        unreachable!("a fresh round always has credit for a class with work")
    }
}

#[cfg(test)]
mod tests {
    use super::super::saturated;
    use super::*;

    #[test]
    fn weighted_round_robin_gives_each_class_its_weight_per_round() {
        let mut wrr = WeightedRoundRobin::new(1, [8, 4, 1]);
        let sqs = saturated(&[SqClass::High, SqClass::Medium, SqClass::Low]);
        let mut count = [0; 3];
        for _ in 0..13 * 100 {
            count[wrr.pick(0, &sqs).unwrap().0] += 1;
        }
        assert_eq!(count, [800, 400, 100]);
    }

    #[test]
    fn urgent_queues_are_always_served_first() {
        let mut wrr = WeightedRoundRobin::new(1, [8, 4, 1]);
        let mut sqs = saturated(&[
            SqClass::High,
            SqClass::Urgent,
            SqClass::Low,
            SqClass::Urgent,
        ]);
        for _ in 0..10 {
            let (i, _) = wrr.pick(0, &sqs).unwrap();
            assert_eq!(sqs[i].class, SqClass::Urgent);
        }
        sqs[1].available = 0;
        sqs[3].available = 0;
        assert_ne!(sqs[wrr.pick(0, &sqs).unwrap().0].class, SqClass::Urgent);
    }

    #[test]
    fn an_idle_class_does_not_hold_back_the_others() {
        let mut wrr = WeightedRoundRobin::new(1, [8, 4, 1]);
        let sqs = saturated(&[SqClass::Medium, SqClass::Low]);
        let mut count = [0; 2];
        for _ in 0..500 {
            count[wrr.pick(0, &sqs).unwrap().0] += 1;
        }
        assert_eq!(count, [400, 100]);
    }
}
