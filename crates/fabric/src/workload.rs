//! Ordered write streams. Every stream writes out of place (a log per stream, as the document's
//! recovery assumes in 4.4.1), so each block is written once and "durable" is a property of the
//! write that carried it.

use qoslab_engine::RngStream;
use serde::{Deserialize, Serialize};

/// One ordered write request as the application submits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    /// First logical block.
    pub lba: u64,
    pub blocks: u32,
    /// Last request of its group: the next request starts a new sequence number.
    pub group_end: bool,
    /// Carries a FLUSH: once acknowledged, it and everything before it in the stream is
    /// durable (`rio_submit` with a FLUSH then `rio_wait`, document 4.6).
    pub persist: bool,
}

/// The streams of ordered writes; streams are independent of each other (document 4.5).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub streams: Vec<Vec<Write>>,
}

/// The shape of generated workloads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub streams: usize,
    pub writes_per_stream: usize,
    /// Largest write, in blocks (drawn uniformly in 1..=max_blocks).
    pub max_blocks: u32,
    /// Probability that a write ends its group.
    pub group_end_prob: f64,
    /// Probability that a group's last write carries a FLUSH (the stream's last always does).
    pub persist_prob: f64,
    /// Probability of a hole before a write (which stops merging with the previous one).
    pub gap_prob: f64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            streams: 2,
            writes_per_stream: 6,
            max_blocks: 48,
            group_end_prob: 0.7,
            persist_prob: 0.3,
            gap_prob: 0.3,
        }
    }
}

/// Each stream's log starts at its own region, far from the others.
const STREAM_REGION_BLOCKS: u64 = 1 << 32;

impl Workload {
    /// The workload of `seed`: stream i draws from its own named stream.
    pub fn generate(seed: u64, shape: &Shape) -> Self {
        let streams = (0..shape.streams)
            .map(|s| {
                let mut rng = RngStream::new(seed, &format!("fabric/workload/stream{s}"));
                // A random start so that streams do not all begin on a stripe boundary.
                let mut cursor = s as u64 * STREAM_REGION_BLOCKS + rng.below(64);
                let n = shape.writes_per_stream;
                (0..n)
                    .map(|i| {
                        if rng.uniform() < shape.gap_prob {
                            cursor += 1 + rng.below(8);
                        }
                        let blocks = 1 + rng.below(u64::from(shape.max_blocks.max(1))) as u32;
                        let last = i + 1 == n;
                        let group_end = last || rng.uniform() < shape.group_end_prob;
                        let persist = last || (group_end && rng.uniform() < shape.persist_prob);
                        let w = Write {
                            lba: cursor,
                            blocks,
                            group_end,
                            persist,
                        };
                        cursor += u64::from(blocks);
                        w
                    })
                    .collect()
            })
            .collect();
        Workload { streams }
    }

    pub fn writes(&self) -> usize {
        self.streams.iter().map(Vec::len).sum()
    }

    /// Checks what the model relies on: groups end at a stream's end, a FLUSH ends its group,
    /// writes are not empty and no block is written twice.
    pub fn validate(&self) -> Result<(), String> {
        let mut spans: Vec<(u64, u64, usize, usize)> = Vec::new();
        for (s, stream) in self.streams.iter().enumerate() {
            for (i, w) in stream.iter().enumerate() {
                let at = format!("streams[{s}][{i}]");
                if w.blocks == 0 {
                    return Err(format!("{at}.blocks: expected at least 1 block, got 0"));
                }
                if w.persist && !w.group_end {
                    return Err(format!(
                        "{at}.persist: a write with a FLUSH must end its group (group_end true)"
                    ));
                }
                if i + 1 == stream.len() && !w.group_end {
                    return Err(format!(
                        "{at}.group_end: a stream's last write ends its group"
                    ));
                }
                spans.push((w.lba, w.lba + u64::from(w.blocks), s, i));
            }
        }
        spans.sort_unstable();
        for pair in spans.windows(2) {
            if pair[1].0 < pair[0].1 {
                return Err(format!(
                    "streams[{}][{}].lba: overlaps streams[{}][{}] (writes are out of place, each block once)",
                    pair[1].2, pair[1].3, pair[0].2, pair[0].3
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_seeded_and_valid() {
        let shape = Shape {
            streams: 3,
            writes_per_stream: 20,
            ..Shape::default()
        };
        let a = Workload::generate(7, &shape);
        assert_eq!(a, Workload::generate(7, &shape));
        assert_ne!(a, Workload::generate(8, &shape));
        assert_eq!(a.writes(), 60);
        a.validate().unwrap();
        assert!(a.streams.iter().all(|s| s.last().unwrap().persist));
    }

    #[test]
    fn overlapping_writes_are_refused_with_their_place() {
        let w = |lba| Write {
            lba,
            blocks: 4,
            group_end: true,
            persist: false,
        };
        let bad = Workload {
            streams: vec![vec![w(0), w(2)]],
        };
        let err = bad.validate().unwrap_err();
        assert!(err.contains("streams[0][1].lba"), "{err}");
    }
}
