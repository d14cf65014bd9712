//! Which requests a bio may join: the block layer's rules (`blk_rq_merge_ok`,
//! `ll_back_merge_fn`) and the hash of queued requests by where they start and end (Linux's
//! `elv_rqhash`, which keys by end sector, plus the sort trees' front lookup).

use qoslab_engine::{Op, ReqFlags, ReqId, Request, Requests};
use rustc_hash::FxHashMap;

use crate::config::QueueSetup;
use crate::elevator::{RqMeta, same_prio};

/// Whether `bio` may join `rq` (at either end): same host, operation and I/O priority, no
/// ordering flag on either, and the result within max_sectors_kb and max_segments.
pub fn mergeable(
    rq: &Request,
    rq_segments: u32,
    bio: &Request,
    bio_segments: u32,
    setup: &QueueSetup,
) -> bool {
    let no_merge = ReqFlags::FUA | ReqFlags::PREFLUSH;
    matches!(rq.op, Op::Read | Op::Write)
        && rq.op == bio.op
        && rq.host == bio.host
        && same_prio(rq.prio, bio.prio)
        && !rq.flags.intersects(no_merge)
        && !bio.flags.intersects(no_merge)
        && rq.len_bytes + bio.len_bytes <= setup.merge_bytes
        && rq_segments + bio_segments <= setup.max_segments
}

/// Queued requests of one host by (operation, first byte) and (operation, end byte).
#[derive(Debug, Default)]
pub struct MergeIndex {
    by_start: FxHashMap<(Op, u64), ReqId>,
    by_end: FxHashMap<(Op, u64), ReqId>,
}

impl MergeIndex {
    /// Makes queued request `id` findable (with its current extent).
    pub fn add(&mut self, req: &Request, id: ReqId) {
        self.by_start.insert((req.op, req.offset_bytes), id);
        self.by_end
            .insert((req.op, req.offset_bytes + req.len_bytes), id);
    }

    /// Forgets `id` (call before its extent changes).
    pub fn remove(&mut self, req: &Request, id: ReqId) {
        let start = (req.op, req.offset_bytes);
        if self.by_start.get(&start) == Some(&id) {
            self.by_start.remove(&start);
        }
        let end = (req.op, req.offset_bytes + req.len_bytes);
        if self.by_end.get(&end) == Some(&id) {
            self.by_end.remove(&end);
        }
    }

    /// A queued request ending where `bio` starts that may take it.
    pub fn back_candidate(
        &self,
        reqs: &Requests,
        meta: &[RqMeta],
        bio: ReqId,
        setup: &QueueSetup,
    ) -> Option<ReqId> {
        let b = &reqs[bio];
        let rq = *self.by_end.get(&(b.op, b.offset_bytes))?;
        let ok = rq != bio
            && mergeable(
                &reqs[rq],
                meta[rq.index()].segments,
                b,
                meta[bio.index()].segments,
                setup,
            );
        ok.then_some(rq)
    }

    /// A queued request starting where `bio` ends that may take it.
    pub fn front_candidate(
        &self,
        reqs: &Requests,
        meta: &[RqMeta],
        bio: ReqId,
        setup: &QueueSetup,
    ) -> Option<ReqId> {
        let b = &reqs[bio];
        let rq = *self.by_start.get(&(b.op, b.offset_bytes + b.len_bytes))?;
        let ok = rq != bio
            && mergeable(
                &reqs[rq],
                meta[rq.index()].segments,
                b,
                meta[bio.index()].segments,
                setup,
            );
        ok.then_some(rq)
    }
}
