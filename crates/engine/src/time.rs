//! Simulated time: unsigned integer nanoseconds, never floats, so event order is exact.

/// A point in simulated time or a duration, in nanoseconds.
pub type Ns = u64;

pub const NS_PER_US: Ns = 1_000;
pub const NS_PER_MS: Ns = 1_000_000;
pub const NS_PER_SEC: Ns = 1_000_000_000;
