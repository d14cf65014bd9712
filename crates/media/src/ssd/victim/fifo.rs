//! FIFO: the block sealed longest ago. A block with nothing to gain (every page valid) stays
//! first in line and the emptiest block goes instead.

use std::collections::VecDeque;

use super::{VictimOps, VictimPolicy};
use crate::ssd::ftl::Sealed;

qoslab_engine::plugin! {
    pub static OPS: VictimOps = "fifo", "the block sealed longest ago", valid_lists: true;
    build |s| Box::new(Fifo { order: vec![VecDeque::new(); s.planes as usize] })
}

/// Per plane, its blocks in sealing order (a block may appear after it stopped being sealed:
/// it is skipped when it comes up).
pub struct Fifo {
    order: Vec<VecDeque<u32>>,
}

impl VictimPolicy for Fifo {
    fn sealed(&mut self, plane: u32, block: u32) {
        self.order[plane as usize].push_back(block);
    }

    fn select(&mut self, plane: u32, sealed: &Sealed<'_>) -> Option<u32> {
        let order = &mut self.order[plane as usize];
        let mut found = None;
        while let Some(b) = order.pop_front() {
            if sealed.is_sealed(b) {
                found = Some(b);
                break;
            }
        }
        match found {
            Some(b) if sealed.valid(b) < sealed.pages_per_block() => Some(b),
            Some(b) => {
                order.push_front(b);
                sealed.fewest_valid(plane)
            }
            None => None,
        }
    }
}
