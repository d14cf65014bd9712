//! The device's write cache as the block layer sees it (Linux `blk_queue_write_cache`: the
//! queue's `QUEUE_FLAG_WC` and `QUEUE_FLAG_FUA`, from NVMe's Volatile Write Cache bit and FUA
//! support). Without a volatile cache nothing can be lost to a power failure, so, as
//! `blk-flush.c` does, the block layer strips `REQ_PREFLUSH` and `REQ_FUA` from writes and
//! completes an empty flush at once instead of sending it.

use qoslab_engine::{Op, ReqFlags, Request};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteCache {
    /// The device has a volatile write cache.
    pub volatile: bool,
    /// It honours Force Unit Access.
    pub fua: bool,
}

impl Default for WriteCache {
    /// Everything passes to the device as it is.
    fn default() -> Self {
        WriteCache {
            volatile: true,
            fua: true,
        }
    }
}

impl WriteCache {
    /// Keeps what of `req`'s cache semantics the device needs; false when the request needs
    /// the device not at all (a flush of a device with no volatile cache).
    pub fn prepare(&self, req: &mut Request) -> bool {
        if self.volatile {
            return true;
        }
        req.flags.remove(ReqFlags::PREFLUSH | ReqFlags::FUA);
        req.op != Op::Flush
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_volatile_cache_flushes_stay_here_and_writes_lose_their_cache_flags() {
        let none = WriteCache {
            volatile: false,
            fua: false,
        };
        let mut flush = Request::new(Op::Flush, 0, 0, 0, 0);
        assert!(!none.prepare(&mut flush));
        let mut w = Request::new(Op::Write, 0, 4096, 0, 0);
        w.flags = ReqFlags::PREFLUSH | ReqFlags::FUA | ReqFlags::SYNC;
        assert!(none.prepare(&mut w));
        assert_eq!(w.flags, ReqFlags::SYNC);
        let mut w2 = Request::new(Op::Write, 0, 4096, 0, 0);
        w2.flags = ReqFlags::FUA;
        assert!(WriteCache::default().prepare(&mut w2));
        assert_eq!(w2.flags, ReqFlags::FUA);
    }
}
