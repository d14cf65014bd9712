//! A plain mirror (RAID 1 over namespaces): reads take the copies in turn, whatever the
//! device is doing.

use super::{API, ReplicaIo, ReplicaOps, ReplicaPolicy, ReplicaSetup};

qoslab_engine::settings! {
    /// `[host.mirror]`.
    pub struct MirrorConfig in MIRROR_TUNABLES {
        copies: u32 = count(2, "copies of the data: namespaces 1 to copies, each written by every write").range(1.0, 64.0),
    }
}

pub static OPS: ReplicaOps = ReplicaOps {
    name: "mirror",
    help: "every write to every copy, reads to the copies in turn",
    api_version: API,
    tunables: MIRROR_TUNABLES,
    needs_plm: false,
    build: Some(|s: &ReplicaSetup<'_>| {
        Ok(Box::new(Mirror {
            copies: MirrorConfig::from_settings(s.settings).copies,
            next: 0,
        }))
    }),
};

pub struct Mirror {
    copies: u32,
    next: u32,
}

impl ReplicaPolicy for Mirror {
    fn copies(&self) -> u32 {
        self.copies
    }

    fn route_read(&mut self, _host: u16, _len_bytes: u64, _io: &mut ReplicaIo<'_>) -> u32 {
        self.next = (self.next + 1) % self.copies;
        self.next + 1
    }
}
