//! Completion order: which finished command of an SQ may post its CQ entry next.
//!
//! The NVMe-lite policies (docs/nvmelite.md) decide, in steps, which pending command completes;
//! here they act in time. Per SQ the controller keeps its commands in fetch order. A command
//! is *eligible* when the media has finished it and at most `k` older commands of the same SQ
//! are still outstanding (k = 0: strictly in order). Among the eligible:
//! - `fifo` posts the oldest first,
//! - `adversarial` the newest first,
//! - `random` a uniformly drawn one,
//! - `batched` waits until min(4, outstanding) are eligible, then posts them in random order
//!   (a burst; NVMe-lite's BATCHED opens bursts of min(4, pending)).

use std::collections::VecDeque;

use qoslab_engine::{ReqId, RngStream};

use crate::config::CompletionOrder;

#[derive(Debug, Default)]
pub struct OrderBuffer {
    /// Outstanding commands in fetch order, with "the media has finished it".
    entries: VecDeque<(ReqId, bool)>,
    burst_left: u32,
}

const BURST: usize = 4;

impl OrderBuffer {
    pub fn fetched(&mut self, id: ReqId) {
        self.entries.push_back((id, false));
    }

    pub fn finished(&mut self, id: ReqId) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == id) {
            e.1 = true;
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.burst_left = 0;
    }

    /// The next command that may post, removed from the buffer, or `None` (wait).
    pub fn next(&mut self, policy: CompletionOrder, k: u32, rng: &mut RngStream) -> Option<ReqId> {
        let window = self.entries.len().min(k as usize + 1);
        let eligible = || (0..window).filter(|&i| self.entries[i].1);
        let pick = match policy {
            CompletionOrder::Device | CompletionOrder::Fifo => eligible().next()?,
            CompletionOrder::Adversarial => eligible().next_back()?,
            CompletionOrder::Random => {
                let n = eligible().count();
                if n == 0 {
                    return None;
                }
                eligible().nth(rng.below(n as u64) as usize)?
            }
            CompletionOrder::Batched => {
                let n = eligible().count();
                if self.burst_left == 0 {
                    let need = self.entries.len().min(BURST);
                    if n < need {
                        return None;
                    }
                    self.burst_left = need as u32;
                }
                if n == 0 {
                    return None;
                }
                self.burst_left -= 1;
                eligible().nth(rng.below(n as u64) as usize)?
            }
        };
        self.entries.remove(pick).map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(ids: &[u32]) -> OrderBuffer {
        let mut b = OrderBuffer::default();
        for &i in ids {
            b.fetched(ReqId(i));
        }
        b
    }

    fn drain(b: &mut OrderBuffer, p: CompletionOrder, k: u32) -> Vec<u32> {
        let mut rng = RngStream::new(1, "t");
        std::iter::from_fn(|| b.next(p, k, &mut rng).map(|r| r.0)).collect()
    }

    #[test]
    fn in_order_completion_holds_a_finished_command_behind_an_older_one() {
        let mut b = buffer(&[0, 1, 2]);
        b.finished(ReqId(1));
        b.finished(ReqId(2));
        assert!(drain(&mut b, CompletionOrder::Fifo, 0).is_empty());
        b.finished(ReqId(0));
        assert_eq!(drain(&mut b, CompletionOrder::Fifo, 0), vec![0, 1, 2]);
    }

    #[test]
    fn bound_k_lets_a_command_pass_at_most_k_older_ones() {
        let mut b = buffer(&[0, 1, 2, 3]);
        b.finished(ReqId(2));
        b.finished(ReqId(3));
        // 3 has three older outstanding commands, 2 has two: only 2 may go; once it has, 3
        // has two older ones left and follows.
        assert_eq!(drain(&mut b, CompletionOrder::Fifo, 2), vec![2, 3]);
        let mut b = buffer(&[0, 1, 2, 3]);
        b.finished(ReqId(3));
        assert!(drain(&mut b, CompletionOrder::Fifo, 2).is_empty());
    }

    #[test]
    fn adversarial_posts_the_newest_eligible_first() {
        let mut b = buffer(&[0, 1, 2]);
        for i in 0..3 {
            b.finished(ReqId(i));
        }
        assert_eq!(
            drain(&mut b, CompletionOrder::Adversarial, u32::MAX),
            vec![2, 1, 0]
        );
    }

    #[test]
    fn batched_waits_for_a_burst_of_four() {
        let mut b = buffer(&[0, 1, 2, 3, 4]);
        for i in 0..3 {
            b.finished(ReqId(i));
        }
        assert!(drain(&mut b, CompletionOrder::Batched, u32::MAX).is_empty());
        b.finished(ReqId(4));
        let mut burst = drain(&mut b, CompletionOrder::Batched, u32::MAX);
        burst.sort();
        assert_eq!(burst, vec![0, 1, 2, 4]);
        // One left outstanding: a burst of min(4, 1) = 1 once it finishes.
        b.finished(ReqId(3));
        assert_eq!(drain(&mut b, CompletionOrder::Batched, u32::MAX), vec![3]);
    }
}
