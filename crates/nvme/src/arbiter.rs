//! Submission-queue arbitration (NVMe 2.0 base specification, 3.4.4): which SQ the controller
//! fetches from next, and how many commands (at most the arbitration burst).
//!
//! An arbiter is one implementation of [`Arbiter`]; [`AnyArbiter`] is the registry that maps a
//! configured name to it.

use crate::config::{Arbitration, NvmeConfig, SqClass};

/// What an arbiter sees of one SQ.
#[derive(Clone, Copy, Debug)]
pub struct SqView {
    pub class: SqClass,
    /// Commands the controller could fetch from it now.
    pub available: u32,
}

/// The arbitration hook: pick an SQ with `available > 0` and a command count, or `None`.
pub trait Arbiter {
    fn pick(&mut self, sqs: &[SqView]) -> Option<(usize, u32)>;
}

/// Round robin over every SQ with commands, `burst` commands per turn.
#[derive(Clone, Debug)]
pub struct RoundRobin {
    burst: u32,
    next: usize,
}

impl RoundRobin {
    pub fn new(burst: u32) -> Self {
        RoundRobin { burst, next: 0 }
    }
}

/// Round robin among the SQs of one class; starts after the last SQ served.
fn rr_pick(next: &mut usize, sqs: &[SqView], eligible: impl Fn(&SqView) -> bool) -> Option<usize> {
    let n = sqs.len();
    for step in 0..n {
        let i = (*next + step) % n;
        if sqs[i].available > 0 && eligible(&sqs[i]) {
            *next = (i + 1) % n;
            return Some(i);
        }
    }
    None
}

impl Arbiter for RoundRobin {
    fn pick(&mut self, sqs: &[SqView]) -> Option<(usize, u32)> {
        let i = rr_pick(&mut self.next, sqs, |_| true)?;
        Some((i, sqs[i].available.min(self.burst)))
    }
}

/// Weighted round robin with an urgent class: urgent SQs are served first, strictly (round
/// robin among themselves); then the high, medium and low classes share the fetches in the
/// ratio of their weights. Each class gets `weight` commands per round; a class with nothing
/// to fetch is skipped and a new round starts when every class that has commands has used its
/// credit. Within a class, SQs take turns.
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
    fn pick(&mut self, sqs: &[SqView]) -> Option<(usize, u32)> {
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

/// The registry of arbiters: one variant per policy, chosen by the configured name.
#[derive(Clone, Debug)]
pub enum AnyArbiter {
    RoundRobin(RoundRobin),
    WeightedRoundRobin(WeightedRoundRobin),
}

impl AnyArbiter {
    pub fn from_config(cfg: &NvmeConfig) -> Self {
        match cfg.arbitration {
            Arbitration::RoundRobin => AnyArbiter::RoundRobin(RoundRobin::new(cfg.burst)),
            Arbitration::WeightedRoundRobin => {
                AnyArbiter::WeightedRoundRobin(WeightedRoundRobin::new(cfg.burst, cfg.wrr_weights))
            }
        }
    }
}

impl Arbiter for AnyArbiter {
    #[inline]
    fn pick(&mut self, sqs: &[SqView]) -> Option<(usize, u32)> {
        match self {
            AnyArbiter::RoundRobin(a) => a.pick(sqs),
            AnyArbiter::WeightedRoundRobin(a) => a.pick(sqs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saturated(classes: &[SqClass]) -> Vec<SqView> {
        classes
            .iter()
            .map(|&class| SqView {
                class,
                available: u32::MAX,
            })
            .collect()
    }

    #[test]
    fn round_robin_takes_turns_with_the_burst() {
        let mut rr = RoundRobin::new(2);
        let sqs = saturated(&[SqClass::Medium; 3]);
        let picks: Vec<_> = (0..4).map(|_| rr.pick(&sqs).unwrap()).collect();
        assert_eq!(picks, vec![(0, 2), (1, 2), (2, 2), (0, 2)]);
    }

    #[test]
    fn round_robin_skips_empty_queues_and_caps_at_what_is_available() {
        let mut rr = RoundRobin::new(8);
        let mut sqs = saturated(&[SqClass::Medium; 3]);
        sqs[1].available = 0;
        sqs[2].available = 3;
        assert_eq!(rr.pick(&sqs), Some((0, 8)));
        assert_eq!(rr.pick(&sqs), Some((2, 3)));
        for s in &mut sqs {
            s.available = 0;
        }
        assert_eq!(rr.pick(&sqs), None);
    }

    #[test]
    fn weighted_round_robin_gives_each_class_its_weight_per_round() {
        let mut wrr = WeightedRoundRobin::new(1, [8, 4, 1]);
        let sqs = saturated(&[SqClass::High, SqClass::Medium, SqClass::Low]);
        let mut count = [0; 3];
        for _ in 0..13 * 100 {
            count[wrr.pick(&sqs).unwrap().0] += 1;
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
            let (i, _) = wrr.pick(&sqs).unwrap();
            assert_eq!(sqs[i].class, SqClass::Urgent);
        }
        sqs[1].available = 0;
        sqs[3].available = 0;
        assert_ne!(sqs[wrr.pick(&sqs).unwrap().0].class, SqClass::Urgent);
    }

    #[test]
    fn an_idle_class_does_not_hold_back_the_others() {
        let mut wrr = WeightedRoundRobin::new(1, [8, 4, 1]);
        let sqs = saturated(&[SqClass::Medium, SqClass::Low]);
        let mut count = [0; 2];
        for _ in 0..500 {
            count[wrr.pick(&sqs).unwrap().0] += 1;
        }
        assert_eq!(count, [400, 100]);
    }
}
