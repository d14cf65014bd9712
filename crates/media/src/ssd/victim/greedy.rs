//! Greedy: the sealed block with the fewest valid pages (the one that joined its valid-count
//! list last, among equals).

use super::{API, VictimOps, VictimPolicy, VictimSetup};
use crate::ssd::ftl::Sealed;

pub static OPS: VictimOps = VictimOps {
    name: "greedy",
    help: "the sealed block with the fewest valid pages",
    api_version: API,
    tunables: &[],
    valid_lists: true,
    build: Some(|_: &VictimSetup<'_>| Box::new(Greedy)),
};

pub struct Greedy;

impl VictimPolicy for Greedy {
    fn select(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32> {
        sealed.fewest_valid(plane)
    }
}
