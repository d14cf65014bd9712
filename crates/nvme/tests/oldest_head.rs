//! Oldest head first: the SQ whose head command has waited longest is served, with the burst.

use qoslab_engine::Ns;
use qoslab_nvme::arbiter::{Arbiter, ArbiterOps, SqView};

qoslab_engine::plugin! {
    pub static OPS: ArbiterOps = "oldest-head", "the SQ whose head command has waited longest, arbitration_burst commands", sq_per_class: false;
    build |setup| Box::new(OldestHead { burst: setup.burst })
}

struct OldestHead {
    burst: u32,
}

impl Arbiter for OldestHead {
    fn pick(&mut self, _now_ns: Ns, sqs: &[SqView]) -> Option<(usize, u32)> {
        let (i, sq) = sqs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.available > 0)
            .max_by_key(|(i, s)| (s.head_age_ns, std::cmp::Reverse(*i)))?;
        Some((i, sq.available.min(self.burst)))
    }
}
