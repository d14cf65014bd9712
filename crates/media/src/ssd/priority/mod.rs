//! Die op-class priority: in which order a die takes the operations waiting for it, by who
//! wants them (mapping reads, host reads, host writes, garbage collection), and in which
//! order a channel serves the dies waiting for it. Within a rank, operations go in arrival
//! order. The flash array keeps one queue per (rank, plane) and a bit per non-empty queue, so
//! the choice stays a count of trailing zeros.
//!
//! A priority is a plug-in: one file with a [`DiePriority`] and its [`PriorityOps`], one line
//! in [`PRIORITIES`]; the device file names it in `media.nand.priority`.

pub mod reads_first;
pub mod writes_first;

use qoslab_engine::Settings;

use super::flash::{CLASSES, OpClass};

/// The priority hook.
pub trait DiePriority {
    /// The rank of each class (indexed by [`OpClass`]), 0 served first; the ranks of the four
    /// classes are 0, 1, 2 and 3 in some order.
    fn ranks(&self) -> [u8; CLASSES];
}

/// What a constructor gets: the plug-in's own sub-table.
pub struct PrioritySetup<'a> {
    pub settings: &'a Settings,
}

pub type BuildPriority = fn(&PrioritySetup<'_>) -> Box<dyn DiePriority>;

qoslab_engine::plugin_ops! {
    /// One die priority, as the registry knows it.
    pub struct PriorityOps: "die priority", tunables "[media.nand.NAME]", build BuildPriority {
    }
}

/// Every die priority a device file can name.
pub static PRIORITIES: &[&PriorityOps] = &[&reads_first::OPS, &writes_first::OPS];

/// The ranks of `priority`, checked to be a permutation of the classes.
pub fn ranks_of(priority: &dyn DiePriority) -> Result<[u8; CLASSES], String> {
    let ranks = priority.ranks();
    let mut seen = [false; CLASSES];
    for &r in &ranks {
        if (r as usize) >= CLASSES || std::mem::replace(&mut seen[r as usize], true) {
            return Err(format!(
                "a die priority must rank the {CLASSES} operation classes 0 to {} once each, got {ranks:?}",
                CLASSES - 1
            ));
        }
    }
    Ok(ranks)
}

/// The rank of `class` under `ranks`.
#[inline]
pub fn rank(ranks: &[u8; CLASSES], class: OpClass) -> u8 {
    ranks[class as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken;
    impl DiePriority for Broken {
        fn ranks(&self) -> [u8; CLASSES] {
            [0, 0, 1, 2]
        }
    }

    qoslab_engine::registry_contract_test!(
        PriorityOps,
        reads_first::OPS,
        PRIORITIES,
        "media.nand.priority"
    );

    #[test]
    fn ranks_must_be_a_permutation() {
        assert!(ranks_of(&Broken).unwrap_err().contains("once each"));
        for p in PRIORITIES {
            let s = Settings::defaults("p", p.tunables);
            let built = p.build.unwrap()(&PrioritySetup { settings: &s });
            assert!(ranks_of(built.as_ref()).is_ok(), "{}", p.name);
        }
    }
}
