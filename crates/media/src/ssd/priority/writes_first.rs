//! Writes first: translation-page reads, then host writes (they free the write cache sooner),
//! host reads, and garbage collection last.

use super::{API, DiePriority, PriorityOps};
use crate::ssd::flash::CLASSES;

pub static OPS: PriorityOps = PriorityOps {
    name: "writes_first",
    help: "mapping reads, host writes, host reads, then GC",
    api_version: API,
    tunables: &[],
    build: Some(|_| Box::new(WritesFirst)),
};

pub struct WritesFirst;

impl DiePriority for WritesFirst {
    fn ranks(&self) -> [u8; CLASSES] {
        [0, 2, 1, 3]
    }
}
