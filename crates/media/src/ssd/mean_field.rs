//! The mean-field model of garbage collection under uniform random writes (Van Houdt,
//! "A mean field model for a class of garbage collection algorithms in flash-based solid state
//! drives", SIGMETRICS 2013), used to start a drive directly in its steady state.
//!
//! N blocks of b pages hold U = rho N b valid pages. Each host write invalidates a uniformly
//! chosen valid page, so a block with j valid pages loses one at rate j / (rho b) per N host
//! writes; a GC step erases a victim and refills it. With x_j the fraction of blocks holding j
//! valid pages and S_j = sum_{k >= j} x_k, the fixed point of the d-choices policy (victim = the
//! emptiest of d random blocks, MQSim's RGA) balances the flow across every level j >= 1:
//!
//!   j (S_j - S_{j+1}) = rho b r (1 - S_j^d),  with sum_{j>=1} S_j = rho b,
//!
//! where r = 1 / (b - E[valid pages of a victim]) is the GC rate. Greedy is the limit d -> inf
//! (S_j^d is 0 below the victims' level): j x_j = rho b r above it. Write amplification is
//! b / (b - E[victim valid]) = b r.

/// The victim rule whose fixed point to compute.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    Greedy,
    /// Best of d random blocks.
    Choices(u32),
}

/// The steady state: x\[j\] = fraction of blocks with j valid pages, and the write
/// amplification.
#[derive(Clone, Debug)]
pub struct SteadyState {
    pub x: Vec<f64>,
    pub write_amplification: f64,
}

/// Tail sums S_1..S_b for GC rate `c = rho b r`; index j holds S_j (S_0 = 1, S_{b+1} = 0).
fn tails(b: usize, c: f64, rule: Rule) -> Vec<f64> {
    let mut s = vec![0.0; b + 2];
    for j in (1..=b).rev() {
        let above = s[j + 1];
        let jf = j as f64;
        s[j] = match rule {
            Rule::Greedy => (above + c / jf).min(1.0),
            Rule::Choices(d) => {
                // j (s - above) - c (1 - s^d) rises with s, is <= 0 at s = above and >= 0 at 1.
                let f = |x: f64| jf * (x - above) - c * (1.0 - x.powi(d as i32));
                let (mut lo, mut hi) = (above, 1.0);
                for _ in 0..50 {
                    let mid = 0.5 * (lo + hi);
                    if f(mid) < 0.0 {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                hi
            }
        };
    }
    s[0] = 1.0;
    s
}

/// The fixed point for blocks of `b` pages filled to `rho` (valid pages / physical pages of
/// the blocks in circulation).
///
/// # Panics
/// When rho is not in (0, 1).
pub fn steady_state(b: u32, rho: f64, rule: Rule) -> SteadyState {
    assert!(rho > 0.0 && rho < 1.0, "fill {rho} outside (0, 1)");
    let b = b as usize;
    let target = rho * b as f64;
    let mean = |c: f64| tails(b, c, rule)[1..=b].iter().sum::<f64>();
    // The mean valid count rises with the GC rate; bracket, then bisect.
    let (mut lo, mut hi) = (0.0, 1.0);
    while mean(hi) < target {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if mean(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let c = 0.5 * (lo + hi);
    let s = tails(b, c, rule);
    let x: Vec<f64> = (0..=b).map(|j| s[j] - s[j + 1]).collect();
    SteadyState {
        x,
        write_amplification: c / rho,
    }
}

/// The large-block limit shared by greedy and FIFO (Desnoyers, SYSTOR 2012; Hu et al.,
/// SYSTOR 2009): a victim still holds the fraction v of valid pages that solves
/// v = exp(-(1 - v) / rho), and write amplification is 1 / (1 - v).
pub fn write_amplification_limit(rho: f64) -> f64 {
    // v = 1 is always a root. g(v) = v - exp(-(1-v)/rho) is negative at 0 and positive just
    // below 1 (its slope there is 1 - 1/rho < 0), so bisection brackets the other root.
    let g = |v: f64| v - (-(1.0 - v) / rho).exp();
    let (mut lo, mut hi) = (0.0, 1.0 - 1e-6);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    1.0 / (1.0 - 0.5 * (lo + hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distribution_is_normalised_and_holds_rho_b_valid_pages() {
        for rule in [Rule::Greedy, Rule::Choices(11)] {
            let st = steady_state(256, 0.85, rule);
            let total: f64 = st.x.iter().sum();
            let valid: f64 = st.x.iter().enumerate().map(|(j, x)| j as f64 * x).sum();
            assert!((total - 1.0).abs() < 1e-9, "{rule:?}: {total}");
            assert!((valid - 0.85 * 256.0).abs() < 1e-6, "{rule:?}: {valid}");
        }
    }

    #[test]
    fn greedy_approaches_the_large_block_limit_and_choices_approach_greedy() {
        for rho in [0.93, 0.85, 0.72] {
            let greedy = steady_state(4096, rho, Rule::Greedy).write_amplification;
            let limit = write_amplification_limit(rho);
            assert!(
                (greedy / limit - 1.0).abs() < 0.01,
                "rho {rho}: {greedy} vs {limit}"
            );
            let d2 = steady_state(256, rho, Rule::Choices(2)).write_amplification;
            let d50 = steady_state(256, rho, Rule::Choices(50)).write_amplification;
            let g = steady_state(256, rho, Rule::Greedy).write_amplification;
            assert!(d2 > d50 && d50 > g, "rho {rho}: {d2} {d50} {g}");
            assert!((d50 / g - 1.0).abs() < 0.01);
        }
    }

    #[test]
    fn the_large_block_limit_matches_its_defining_equation() {
        // rho = 0.5 has the root v = 0.2032 (v = exp(-2(1-v))).
        let wa = write_amplification_limit(0.5);
        let v = 1.0 - 1.0 / wa;
        assert!((v - (-2.0 * (1.0 - v)).exp()).abs() < 1e-9);
        assert!((v - 0.2032).abs() < 1e-3, "{v}");
    }
}
