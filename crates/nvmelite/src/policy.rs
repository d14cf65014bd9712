//! Completion policies: which pending command the device completes next.
//!
//! A policy is a small table of hooks (as Linux's `elevator_mq_ops`): the step loop asks it
//! for the pick among the `c` candidates the bound k allows, and whether a completion opens a
//! burst. Adding a policy means writing one `PolicyOps` value and listing it in [`REGISTRY`];
//! the step loop, the schedule file, the CLI and the tables find it there by name.

/// The hooks of one completion policy.
#[derive(Debug)]
pub struct PolicyOps {
    /// Canonical (upper-case) name, as printed in logs and run ids.
    pub name: &'static str,
    pub help: &'static str,
    /// Whether every pick consumes one random draw (also when only one candidate exists).
    pub pick_draws: bool,
    /// Index in `[0, candidates)` of the command to complete; `draw` is the pick's random
    /// draw when `pick_draws`, else 0.
    pub pick: fn(candidates: usize, draw: u64) -> usize,
    /// Completions forced back-to-back when a completion iteration starts with no burst
    /// running (0: no bursts). The opening completion counts as the first of the burst.
    pub burst: fn(pending: usize) -> usize,
}

impl PartialEq for PolicyOps {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for PolicyOps {}

fn oldest(_candidates: usize, _draw: u64) -> usize {
    0
}

fn newest(candidates: usize, _draw: u64) -> usize {
    candidates - 1
}

/// Plain modulo of the full 64-bit draw, no rejection sampling (spec §4).
fn uniform(candidates: usize, draw: u64) -> usize {
    (draw % candidates as u64) as usize
}

fn no_burst(_pending: usize) -> usize {
    0
}

/// Interrupt-coalescing stand-in: up to four completions in a row.
fn burst_of_four(pending: usize) -> usize {
    pending.min(4)
}

pub static FIFO: PolicyOps = PolicyOps {
    name: "FIFO",
    help: "complete the oldest pending command (no reordering at any k)",
    pick_draws: false,
    pick: oldest,
    burst: no_burst,
};

pub static RANDOM: PolicyOps = PolicyOps {
    name: "RANDOM",
    help: "complete a uniformly drawn candidate among the k+1 oldest",
    pick_draws: true,
    pick: uniform,
    burst: no_burst,
};

pub static BATCHED: PolicyOps = PolicyOps {
    name: "BATCHED",
    help: "bursts of min(4, pending) completions, each a random candidate",
    pick_draws: true,
    pick: uniform,
    burst: burst_of_four,
};

pub static ADVERSARIAL: PolicyOps = PolicyOps {
    name: "ADVERSARIAL",
    help: "complete the newest candidate, keeping old commands pending as long as k allows",
    pick_draws: false,
    pick: newest,
    burst: no_burst,
};

/// Every policy qoslab knows, in the order the CLI help lists them.
pub static REGISTRY: &[&PolicyOps] = &[&FIFO, &RANDOM, &BATCHED, &ADVERSARIAL];

/// A policy by name, case-insensitively (spec §2).
pub fn lookup(name: &str) -> Option<&'static PolicyOps> {
    REGISTRY
        .iter()
        .copied()
        .find(|p| p.name.eq_ignore_ascii_case(name))
}

/// The names for error messages: `FIFO, RANDOM, BATCHED or ADVERSARIAL`.
pub fn names() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|p| p.name).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_upper_case_and_found_case_insensitively() {
        for (i, p) in REGISTRY.iter().enumerate() {
            assert_eq!(p.name, p.name.to_ascii_uppercase());
            assert!(REGISTRY[..i].iter().all(|q| q.name != p.name));
            assert_eq!(lookup(&p.name.to_ascii_lowercase()), Some(*p));
        }
        assert_eq!(lookup("LIFO"), None);
    }

    #[test]
    fn picks_follow_section_5_4() {
        assert_eq!((FIFO.pick)(3, 0), 0);
        assert_eq!((ADVERSARIAL.pick)(3, 0), 2);
        assert_eq!((RANDOM.pick)(3, 0x7de4eb0c26f3f89e), 0);
        assert_eq!((BATCHED.pick)(1, u64::MAX), 0);
        assert_eq!((BATCHED.burst)(7), 4);
        assert_eq!((BATCHED.burst)(2), 2);
        assert_eq!((RANDOM.burst)(7), 0);
    }
}
