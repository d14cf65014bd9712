//! Proportional to predicted need (an addition to the document): each host gets
//! `floor(residual x want / total want)` of the residual; the counts the floors leave go one
//! each to the hosts with the largest remainders (ties to the higher priority). Extra counts
//! go in the order asked.

use super::{API, Allocation, AllocationOps, Ask};

pub static OPS: AllocationOps = AllocationOps {
    name: "proportional",
    help: "the residual in proportion to each host's request beyond its minimum",
    api_version: API,
    tunables: &[],
    build: Some(|_| Box::new(Proportional)),
};

pub struct Proportional;

impl Allocation for Proportional {
    fn split(&self, asks: &[Ask], residual: u64) -> Vec<u64> {
        let total: u64 = asks.iter().map(|a| a.want).sum();
        if total <= residual {
            return asks.iter().map(|a| a.want).collect();
        }
        // Integer arithmetic: shares and remainders exactly.
        let mut out: Vec<u64> = Vec::with_capacity(asks.len());
        let mut rem: Vec<(u128, usize)> = Vec::with_capacity(asks.len());
        for (i, a) in asks.iter().enumerate() {
            let num = u128::from(residual) * u128::from(a.want);
            out.push((num / u128::from(total)) as u64);
            rem.push((num % u128::from(total), i));
        }
        let mut left = residual - out.iter().sum::<u64>();
        rem.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        for &(_, i) in &rem {
            if left == 0 {
                break;
            }
            if out[i] < asks[i].want {
                out[i] += 1;
                left -= 1;
            }
        }
        out
    }
}
