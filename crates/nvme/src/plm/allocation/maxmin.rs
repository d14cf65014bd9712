//! Max-min fair (an addition to the document): the residual is filled level by level, every
//! host still wanting getting the same number of counts, until it is spent or every host has
//! its want (water filling; the counts an even split cannot divide go one each in priority
//! order). Extra counts go in the order asked.

use super::{API, Allocation, AllocationOps, Ask};

pub static OPS: AllocationOps = AllocationOps {
    name: "maxmin",
    help: "max-min fair: the residual filled evenly, no host beyond its request",
    api_version: API,
    tunables: &[],
    build: Some(|_| Box::new(MaxMin)),
};

pub struct MaxMin;

impl Allocation for MaxMin {
    fn split(&self, asks: &[Ask], residual: u64) -> Vec<u64> {
        let mut out = vec![0u64; asks.len()];
        let mut left = residual;
        loop {
            let open: Vec<usize> = (0..asks.len()).filter(|&i| out[i] < asks[i].want).collect();
            if open.is_empty() || left == 0 {
                return out;
            }
            let n = open.len() as u64;
            // Raise every open host by the same amount: the smallest unmet want, or what the
            // pool allows evenly.
            let step = open
                .iter()
                .map(|&i| asks[i].want - out[i])
                .min()
                .expect("open hosts")
                .min(left / n);
            if step == 0 {
                for &i in open.iter().take(left as usize) {
                    out[i] += 1;
                }
                return out;
            }
            for &i in &open {
                out[i] += step;
            }
            left -= step * n;
        }
    }
}
