//! Completion order: which finished command of an SQ may post its CQ entry next.
//!
//! The NVMe-lite policies (docs/nvmelite.md) decide, in steps, which pending command completes;
//! here they act in time. Per SQ the controller keeps its commands in fetch order. A command
//! is *eligible* when the media has finished it and at most `k` older commands of the same SQ
//! are still outstanding (k = 0: strictly in order). Among the eligible:
//! - `device` posts each entry as soon as its command is done (no buffer at all),
//! - `fifo` posts the oldest first,
//! - `adversarial` the newest first,
//! - `random` a uniformly drawn one,
//! - `batched` waits until min(4, outstanding) are eligible, then posts them in random order
//!   (a burst; NVMe-lite's BATCHED opens bursts of min(4, pending)).
//!
//! A completion order is a plug-in: an [`OrderOps`] value (a `data` kind of
//! `qoslab_engine::plugin_ops!`) and one line in [`ORDERS`].

use std::collections::VecDeque;

use qoslab_engine::{ConfigError, ReqId, RngStream, STAGE_API_VERSION};

qoslab_engine::plugin_ops! {
    /// One completion order, as the registry knows it.
    #[derive(Debug)]
    pub struct OrderOps: "completion order", data {
        /// Whether entries wait in a per-SQ buffer (false: each posts as its command finishes).
        pub buffered: bool,
        /// Whether each pick takes one uniform draw below the number of eligible entries.
        pub draws: bool,
        /// Index, among the `eligible` entries (oldest first), of the one to post; `draw` is the
        /// pick's draw when `draws`, else 0.
        pub pick: fn(eligible: usize, draw: usize) -> usize,
        /// Entries that must be eligible before a burst opens, given the outstanding count (0:
        /// no bursts).
        pub burst: fn(outstanding: usize) -> usize,
    }
}

fn oldest(_: usize, _: usize) -> usize {
    0
}

fn newest(eligible: usize, _: usize) -> usize {
    eligible - 1
}

fn drawn(_: usize, draw: usize) -> usize {
    draw
}

fn no_burst(_: usize) -> usize {
    0
}

fn burst_of_four(outstanding: usize) -> usize {
    outstanding.min(4)
}

pub static DEVICE: OrderOps = OrderOps {
    name: "device",
    help: "post each entry as soon as its command is done",
    api_version: STAGE_API_VERSION,
    buffered: false,
    draws: false,
    pick: oldest,
    burst: no_burst,
};

pub static FIFO: OrderOps = OrderOps {
    name: "fifo",
    help: "post the oldest eligible entry first",
    api_version: STAGE_API_VERSION,
    buffered: true,
    draws: false,
    pick: oldest,
    burst: no_burst,
};

pub static RANDOM: OrderOps = OrderOps {
    name: "random",
    help: "post a uniformly drawn eligible entry",
    api_version: STAGE_API_VERSION,
    buffered: true,
    draws: true,
    pick: drawn,
    burst: no_burst,
};

pub static ADVERSARIAL: OrderOps = OrderOps {
    name: "adversarial",
    help: "post the newest eligible entry first, holding old commands as long as k allows",
    api_version: STAGE_API_VERSION,
    buffered: true,
    draws: false,
    pick: newest,
    burst: no_burst,
};

pub static BATCHED: OrderOps = OrderOps {
    name: "batched",
    help: "wait for min(4, outstanding) eligible entries, then post them in random order",
    api_version: STAGE_API_VERSION,
    buffered: true,
    draws: true,
    pick: drawn,
    burst: burst_of_four,
};

/// Every completion order a device file can name.
pub static ORDERS: &[&OrderOps] = &[&DEVICE, &FIFO, &RANDOM, &ADVERSARIAL, &BATCHED];

/// The completion order called `name`, checked against the stage contract.
pub fn lookup(name: &str) -> Result<&'static OrderOps, ConfigError> {
    qoslab_engine::lookup(ORDERS, "controller.completion_order", name)
}

/// One SQ's outstanding commands in fetch order, with "the media has finished it".
#[derive(Debug, Default)]
pub struct OrderBuffer {
    entries: VecDeque<(ReqId, bool)>,
    burst_left: u32,
}

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
    pub fn next(&mut self, ops: &OrderOps, k: u32, rng: &mut RngStream) -> Option<ReqId> {
        let window = self.entries.len().min(k as usize + 1);
        let eligible: Vec<usize> = (0..window).filter(|&i| self.entries[i].1).collect();
        let n = eligible.len();
        let burst = (ops.burst)(self.entries.len());
        if burst > 0 && self.burst_left == 0 {
            if n < burst {
                return None;
            }
            self.burst_left = burst as u32;
        }
        if n == 0 {
            return None;
        }
        if burst > 0 {
            self.burst_left -= 1;
        }
        let draw = if ops.draws {
            rng.below(n as u64) as usize
        } else {
            0
        };
        let pick = eligible[(ops.pick)(n, draw)];
        self.entries.remove(pick).map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    qoslab_engine::registry_contract_test!(data OrderOps, FIFO, ORDERS, "controller.completion_order");

    fn buffer(ids: &[u32]) -> OrderBuffer {
        let mut b = OrderBuffer::default();
        for &i in ids {
            b.fetched(ReqId(i));
        }
        b
    }

    fn drain(b: &mut OrderBuffer, p: &OrderOps, k: u32) -> Vec<u32> {
        let mut rng = RngStream::new(1, "t");
        std::iter::from_fn(|| b.next(p, k, &mut rng).map(|r| r.0)).collect()
    }

    #[test]
    fn in_order_completion_holds_a_finished_command_behind_an_older_one() {
        let mut b = buffer(&[0, 1, 2]);
        b.finished(ReqId(1));
        b.finished(ReqId(2));
        assert!(drain(&mut b, &FIFO, 0).is_empty());
        b.finished(ReqId(0));
        assert_eq!(drain(&mut b, &FIFO, 0), vec![0, 1, 2]);
    }

    #[test]
    fn bound_k_lets_a_command_pass_at_most_k_older_ones() {
        let mut b = buffer(&[0, 1, 2, 3]);
        b.finished(ReqId(2));
        b.finished(ReqId(3));
        // 3 has three older outstanding commands, 2 has two: only 2 may go; once it has, 3
        // has two older ones left and follows.
        assert_eq!(drain(&mut b, &FIFO, 2), vec![2, 3]);
        let mut b = buffer(&[0, 1, 2, 3]);
        b.finished(ReqId(3));
        assert!(drain(&mut b, &FIFO, 2).is_empty());
    }

    #[test]
    fn adversarial_posts_the_newest_eligible_first() {
        let mut b = buffer(&[0, 1, 2]);
        for i in 0..3 {
            b.finished(ReqId(i));
        }
        assert_eq!(drain(&mut b, &ADVERSARIAL, u32::MAX), vec![2, 1, 0]);
    }

    #[test]
    fn batched_waits_for_a_burst_of_four() {
        let mut b = buffer(&[0, 1, 2, 3, 4]);
        for i in 0..3 {
            b.finished(ReqId(i));
        }
        assert!(drain(&mut b, &BATCHED, u32::MAX).is_empty());
        b.finished(ReqId(4));
        let mut burst = drain(&mut b, &BATCHED, u32::MAX);
        burst.sort();
        assert_eq!(burst, vec![0, 1, 2, 4]);
        // One left outstanding: a burst of min(4, 1) = 1 once it finishes.
        b.finished(ReqId(3));
        assert_eq!(drain(&mut b, &BATCHED, u32::MAX), vec![3]);
    }

    #[test]
    fn every_registered_order_is_found_and_unknown_names_list_them() {
        for o in ORDERS {
            assert_eq!(lookup(o.name).unwrap().name, o.name);
        }
        let e = lookup("lifo").unwrap_err().to_string();
        assert!(e.contains("expected one of device, fifo, random"), "{e}");
    }
}
