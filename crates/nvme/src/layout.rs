//! How the I/O queues of every host are numbered, so that the host stage and the controller
//! agree: each host has one completion queue (and interrupt vector) per core and one
//! submission queue per core, or one per core and [`SqClass`] when the arbiter wants queues
//! by priority. Queues are numbered across hosts, host by host.

use qoslab_engine::IoPrio;

use crate::config::SqClass;

/// One host's share of the numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostQueues {
    pub cores: u32,
    pub first_sq: u16,
    pub first_cq: u16,
}

/// One submission queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqInfo {
    pub host: u16,
    pub class: SqClass,
    /// Its completion queue.
    pub cq: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueLayout {
    pub hosts: Vec<HostQueues>,
    /// 1, or one per [`SqClass`].
    pub sqs_per_core: u16,
    pub sqs: Vec<SqInfo>,
    /// The host of each completion queue.
    pub cq_host: Vec<u16>,
}

impl QueueLayout {
    /// `cores[h]` is host h's core count.
    pub fn new(cores: &[u32], sq_per_class: bool) -> Self {
        let sqs_per_core: u16 = if sq_per_class {
            SqClass::ALL.len() as u16
        } else {
            1
        };
        let mut hosts = Vec::new();
        let mut sqs = Vec::new();
        let mut cq_host = Vec::new();
        for (h, &n) in cores.iter().enumerate() {
            let n = n.max(1);
            hosts.push(HostQueues {
                cores: n,
                first_sq: sqs.len() as u16,
                first_cq: cq_host.len() as u16,
            });
            for _core in 0..n {
                let cq = cq_host.len() as u16;
                cq_host.push(h as u16);
                for k in 0..sqs_per_core {
                    let class = if sqs_per_core == 1 {
                        SqClass::Medium
                    } else {
                        SqClass::ALL[k as usize]
                    };
                    sqs.push(SqInfo {
                        host: h as u16,
                        class,
                        cq,
                    });
                }
            }
        }
        QueueLayout {
            hosts,
            sqs_per_core,
            sqs,
            cq_host,
        }
    }

    /// The SQ (numbered across hosts) an I/O of `host` on `core` with `prio` goes to.
    pub fn sq_of(&self, host: u16, core: u16, prio: IoPrio) -> u16 {
        let h = &self.hosts[host as usize];
        let core = if u32::from(core) < h.cores {
            u32::from(core)
        } else {
            u32::from(core) % h.cores
        };
        let slot = if self.sqs_per_core == 1 {
            0
        } else {
            SqClass::of(prio) as u32
        };
        h.first_sq + (core * self.sqs_per_core as u32 + slot) as u16
    }

    /// The SQ numbered across hosts of `host`'s queue `hwq`.
    pub fn global_sq(&self, host: u16, hwq: u16) -> u16 {
        self.hosts[host as usize].first_sq + hwq
    }

    /// `host`'s own number for the SQ `sq` numbered across hosts.
    pub fn local_sq(&self, host: u16, sq: u16) -> u16 {
        sq - self.hosts[host as usize].first_sq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qoslab_engine::IoPrioClass;

    #[test]
    fn queues_are_numbered_host_by_host() {
        let l = QueueLayout::new(&[2, 1], true);
        assert_eq!(l.sqs.len(), 12);
        assert_eq!(l.cq_host, vec![0, 0, 1]);
        let rt = IoPrio {
            class: IoPrioClass::RealTime,
            level: 0,
        };
        assert_eq!(l.sq_of(0, 1, rt), 4);
        assert_eq!(l.sq_of(1, 7, IoPrio::default()), 8 + SqClass::Medium as u16);
        assert_eq!(l.sqs[10].cq, 2);
        assert_eq!(l.local_sq(1, 10), 2);
        assert_eq!(l.global_sq(1, 2), 10);
    }
}
