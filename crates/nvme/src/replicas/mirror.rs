//! A plain mirror (RAID 1 over namespaces): reads take the copies in turn, whatever the
//! device is doing.

use super::{ReplicaIo, ReplicaOps, ReplicaPolicy, Route};

qoslab_engine::plugin! {
    pub static OPS: ReplicaOps = "mirror", "every write to every copy, reads to the copies in turn", needs_plm: false;
    /// `[host.mirror]`.
    tunables struct MirrorConfig in MIRROR_TUNABLES {
        copies: u32 = count(2, "copies of the data: namespaces 1 to copies, each written by every write").range(1.0, 64.0),
    }
    build |_, c| Ok(Box::new(Mirror { copies: c.copies, next: 0 }))
}

pub struct Mirror {
    copies: u32,
    next: u32,
}

impl ReplicaPolicy for Mirror {
    fn copies(&self) -> u32 {
        self.copies
    }

    fn route_read(&mut self, _host: u16, _len_bytes: u64, _io: &mut ReplicaIo<'_>) -> Route {
        self.next = (self.next + 1) % self.copies;
        Route::To(self.next + 1)
    }
}
