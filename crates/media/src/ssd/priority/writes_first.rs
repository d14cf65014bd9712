//! Writes first: translation-page reads, then host writes (they free the write cache sooner),
//! host reads, and garbage collection last.

use super::{DiePriority, PriorityOps};
use crate::ssd::flash::CLASSES;

qoslab_engine::plugin! {
    pub static OPS: PriorityOps = "writes_first", "mapping reads, host writes, host reads, then GC";
    build |_| Box::new(WritesFirst)
}

pub struct WritesFirst;

impl DiePriority for WritesFirst {
    fn ranks(&self) -> [u8; CLASSES] {
        [0, 2, 1, 3]
    }
}
