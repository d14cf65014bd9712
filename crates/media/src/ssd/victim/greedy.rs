//! Greedy: the sealed block with the fewest valid pages (the one that joined its valid-count
//! list last, among equals).

use super::{VictimOps, VictimPolicy};
use crate::ssd::ftl::Sealed;

qoslab_engine::plugin! {
    pub static OPS: VictimOps = "greedy", "the sealed block with the fewest valid pages", valid_lists: true;
    build |_| Box::new(Greedy)
}

pub struct Greedy;

impl VictimPolicy for Greedy {
    fn select(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32> {
        sealed.fewest_valid(plane)
    }
}
