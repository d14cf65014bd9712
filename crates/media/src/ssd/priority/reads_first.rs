//! Reads first: translation-page reads (every host request behind a mapping miss waits for
//! one), then host reads, host writes, and garbage collection last.

use super::{API, DiePriority, PriorityOps};
use crate::ssd::flash::CLASSES;

pub static OPS: PriorityOps = PriorityOps {
    name: "reads_first",
    help: "mapping reads, host reads, host writes, then GC",
    api_version: API,
    tunables: &[],
    build: Some(|_| Box::new(ReadsFirst)),
};

pub struct ReadsFirst;

impl DiePriority for ReadsFirst {
    fn ranks(&self) -> [u8; CLASSES] {
        [0, 1, 2, 3]
    }
}
