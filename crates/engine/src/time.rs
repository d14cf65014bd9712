//! Simulated time: unsigned integer nanoseconds, never floats, so event order is exact.

/// A point in simulated time or a duration, in nanoseconds.
pub type Ns = u64;

pub const NS_PER_US: Ns = 1_000;
pub const NS_PER_MS: Ns = 1_000_000;
pub const NS_PER_SEC: Ns = 1_000_000_000;

/// Rounds a non-negative real number of ns to the nearest whole ns (halves up; negative and
/// NaN give 0). Inlined, unlike `f64::round`, which matters on the hot path.
#[inline]
pub fn ns_from_f64(x: f64) -> Ns {
    (x + 0.5) as Ns
}
