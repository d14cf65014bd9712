//! Reads first: translation-page reads (every host request behind a mapping miss waits for
//! one), then host reads, host writes, and garbage collection last.

use super::{DiePriority, PriorityOps};
use crate::ssd::flash::CLASSES;

qoslab_engine::plugin! {
    pub static OPS: PriorityOps = "reads_first", "mapping reads, host reads, host writes, then GC";
    build |_| Box::new(ReadsFirst)
}

pub struct ReadsFirst;

impl DiePriority for ReadsFirst {
    fn ranks(&self) -> [u8; CLASSES] {
        [0, 1, 2, 3]
    }
}
