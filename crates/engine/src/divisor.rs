//! Division by a size fixed when a model is built (a flash geometry's, a PCIe TLP's): a shift
//! when the size is a power of two, as it nearly always is, else a divide. Models split
//! addresses and byte counts on every I/O, and a 64-bit `div` costs tens of cycles.
//! (Hand-written: a shift and a mask, less than a dependency's worth.)

#[derive(Clone, Copy, Debug)]
pub struct Divisor {
    n: u32,
    /// log2(n), or `u32::MAX` when n is not a power of two.
    shift: u32,
}

impl Divisor {
    pub fn new(n: u32) -> Self {
        assert!(n > 0, "division by zero");
        Divisor {
            n,
            shift: if n.is_power_of_two() {
                n.trailing_zeros()
            } else {
                u32::MAX
            },
        }
    }

    #[inline]
    pub fn quot(self, x: u32) -> u32 {
        if self.shift != u32::MAX {
            x >> self.shift
        } else {
            x / self.n
        }
    }

    #[inline]
    pub fn modulo(self, x: u32) -> u32 {
        if self.shift != u32::MAX {
            x & (self.n - 1)
        } else {
            x % self.n
        }
    }

    /// `x / n` for a 64-bit `x`.
    #[inline]
    pub fn quot_u64(self, x: u64) -> u64 {
        if self.shift != u32::MAX {
            x >> self.shift
        } else {
            x / u64::from(self.n)
        }
    }

    /// `x.div_ceil(n)` for a 64-bit `x`: how many pieces of at most n hold x.
    #[inline]
    pub fn div_ceil(self, x: u64) -> u64 {
        if self.shift != u32::MAX {
            (x >> self.shift) + u64::from(x & u64::from(self.n - 1) != 0)
        } else {
            x.div_ceil(u64::from(self.n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_agree_with_division_for_powers_of_two_and_others() {
        for n in [1, 2, 3, 4, 7, 128, 256, 2304, 1 << 19, 504 * 2304] {
            let d = Divisor::new(n);
            for x in [0, 1, n - 1, n, n + 1, 12_345_678, u32::MAX - 1, u32::MAX] {
                assert_eq!((d.quot(x), d.modulo(x)), (x / n, x % n), "{x} by {n}");
            }
            let n64 = u64::from(n);
            for x in [
                0,
                1,
                n64 - 1,
                n64,
                n64 + 1,
                4096,
                1 << 40,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(d.quot_u64(x), x / n64, "{x} by {n}");
                assert_eq!(d.div_ceil(x), x.div_ceil(n64), "{x} in pieces of {n}");
            }
        }
    }
}
