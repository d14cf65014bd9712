//! Round robin over every SQ with commands, `burst` commands per turn (NVMe 2.0, 3.4.4.1).

use super::{Arbiter, ArbiterOps, SqView, rr_pick};
use qoslab_engine::Ns;

qoslab_engine::plugin! {
    pub static OPS: ArbiterOps = "rr", "round robin over every SQ with commands, arbitration_burst commands per turn", sq_per_class: false;
    build |s| Box::new(RoundRobin::new(s.burst))
}

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

impl Arbiter for RoundRobin {
    fn pick(&mut self, _now_ns: Ns, sqs: &[SqView]) -> Option<(usize, u32)> {
        let i = rr_pick(&mut self.next, sqs, |_| true)?;
        Some((i, sqs[i].available.min(self.burst)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::saturated;
    use super::*;
    use crate::config::SqClass;

    #[test]
    fn round_robin_takes_turns_with_the_burst() {
        let mut rr = RoundRobin::new(2);
        let sqs = saturated(&[SqClass::Medium; 3]);
        let picks: Vec<_> = (0..4).map(|_| rr.pick(0, &sqs).unwrap()).collect();
        assert_eq!(picks, vec![(0, 2), (1, 2), (2, 2), (0, 2)]);
    }

    #[test]
    fn round_robin_skips_empty_queues_and_caps_at_what_is_available() {
        let mut rr = RoundRobin::new(8);
        let mut sqs = saturated(&[SqClass::Medium; 3]);
        sqs[1].available = 0;
        sqs[2].available = 3;
        assert_eq!(rr.pick(0, &sqs), Some((0, 8)));
        assert_eq!(rr.pick(0, &sqs), Some((2, 3)));
        for s in &mut sqs {
            s.available = 0;
        }
        assert_eq!(rr.pick(0, &sqs), None);
    }
}
