//! Ordered writes: the vocabulary the block layer's ordering plug-ins, the NVMe-oF target stage
//! and the crash checker share (Rio, EuroSys'23: the ordering attribute of Figure 5 and Table 1;
//! HORAE, OSDI'20: the ordering metadata of its control path).
//!
//! An ordered write belongs to a *stream* (the submitting job): within a stream, writes are
//! grouped (the writes of a group may be reordered among themselves, groups may not), and the
//! storage order is the submission order. A write is ordered when it carries
//! [`ReqFlags::ORDERED`](crate::ReqFlags); [`ReqFlags::GROUP_MORE`](crate::ReqFlags) says the
//! next ordered write of its stream belongs to the same group.

use crate::request::ReqId;
use crate::time::Ns;

/// The ordering attribute carried by a command and logged in the target's PMR (Rio Figure 5
/// and Table 1). Sequence numbers start at 1; 0 means "none".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderAttr {
    pub stream: u32,
    /// The group's sequence number; a merged command spans `seq_start..=seq_end`.
    pub seq_start: u64,
    pub seq_end: u64,
    /// `seq_end` of this stream's previous attribute on the same target (per-server order).
    pub prev: u64,
    /// On the final request of a group: the group's number of requests; on a merged command:
    /// the number of requests compacted into it; 0 otherwise.
    pub num: u32,
    pub merged: bool,
    /// Part of a request divided at the transfer size; `pieces` parts share `orig_lba`.
    pub split: bool,
    pub pieces: u32,
    /// First block of the application's request (identifies the parts of a split request).
    pub orig_lba: u64,
    pub lba: u64,
    pub blocks: u32,
    /// The command carries a FLUSH (or is one).
    pub flush: bool,
    /// Set by the target once the data is durable (Rio 4.3.2).
    pub persist: bool,
}

/// An ordering message from the initiator's block layer to one target server, carried down
/// the path as a [`Command::Ordering`](crate::Command): the stage that keeps the target's
/// ordering state (its PMR) answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderMsg {
    /// The target server it is for (the fan-out stage routes by it).
    pub target: u16,
    pub op: OrderOp,
    /// Filled in by whoever answers: when the answer is back at the initiator (`OrderOp::Meta`).
    pub done_ns: Ns,
}

/// What an ordering message asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderOp {
    /// Rio: command `id`, dispatched next, carries `attr` in the reserved fields of its NVMe-oF
    /// command (Rio Table 1); the target logs it to its PMR before it submits the data.
    Attach { id: ReqId, attr: OrderAttr },
    /// HORAE's control path: persist the ordering metadata of request `seq` of `stream`
    /// (`bytes` of it) to the target's PMR and answer; the data follows only after the answer.
    Meta { stream: u32, seq: u64, bytes: u64 },
}
