//! Simulated time: unsigned integer nanoseconds, never floats, so event order is exact.

/// A point in simulated time or a duration, in nanoseconds.
pub type Ns = u64;

pub const NS_PER_US: Ns = 1_000;
pub const NS_PER_MS: Ns = 1_000_000;
pub const NS_PER_SEC: Ns = 1_000_000_000;

/// The largest time an input may give (a latency, a period, a run time, a trace's span), and
/// the furthest the clock of a run may go: 2^62 ns, about 146 years. Every reader of a time
/// refuses more with an error naming the field, and a run whose clock passes it stops with an
/// error, so that a sum of a few such times never wraps the u64 clock into a wrong result.
pub const MAX_TIME_NS: Ns = 1 << 62;

/// `MAX_TIME_NS` in words, for error messages.
pub const MAX_TIME_TEXT: &str = "4611686018427387904 ns (2^62 ns, 146 years)";

/// Rounds a non-negative real number of ns to the nearest whole ns (halves up; negative and
/// NaN give 0, anything past `i64::MAX` ns, 292 years, gives that). Inlined, unlike
/// `f64::round`, which matters on the hot path.
#[inline]
pub fn ns_from_f64(x: f64) -> Ns {
    // Through i64: x86-64 converts a double to a signed integer in one instruction, while the
    // conversion to u64 needs a second path for values past 2^63 (a few calls per I/O).
    ((x + 0.5) as i64).max(0) as Ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_ns_round_to_the_nearest_whole_ns_and_never_below_zero() {
        assert_eq!(ns_from_f64(0.0), 0);
        assert_eq!(ns_from_f64(1.49), 1);
        assert_eq!(ns_from_f64(1.5), 2);
        assert_eq!(ns_from_f64(4096.0 / 3.2), 1280);
        assert_eq!(ns_from_f64(-3.0), 0);
        assert_eq!(ns_from_f64(f64::NAN), 0);
        assert_eq!(ns_from_f64(1e30), i64::MAX as Ns);
    }
}
