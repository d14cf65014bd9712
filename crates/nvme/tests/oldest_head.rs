//! Oldest head first: the SQ whose head command has waited longest is served, with the burst.

use qoslab_engine::Ns;
use qoslab_nvme::arbiter::{Arbiter, ArbiterOps, ArbiterSetup, SqView};

pub static OPS: ArbiterOps = ArbiterOps {
    name: "oldest-head",
    help: "the SQ whose head command has waited longest, arbitration_burst commands",
    api_version: qoslab_engine::STAGE_API_VERSION,
    tunables: &[],
    sq_per_class: false,
    build: Some(build),
};

fn build(setup: &ArbiterSetup<'_>) -> Box<dyn Arbiter> {
    Box::new(OldestHead { burst: setup.burst })
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
