//! Where things are on the flash array: channels, chips (ways), dies, planes, blocks, pages,
//! and how consecutive logical pages are striped over them.
//!
//! Physical page numbers are `u32`, laid out plane by plane
//! (`((plane * blocks_per_plane) + block) * pages_per_block + page`), so a page's plane, die
//! and channel follow from integer division and the mapping table stays four bytes an entry.

/// One level of the array's hierarchy, as named in an allocation order such as `CWDP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Channel,
    Way,
    Die,
    Plane,
}

qoslab_engine::choice! {
    /// The allocation orders a preset may name: which level consecutive logical pages move
    /// along first (MQSim's `Plane_Allocation_Scheme`, e.g. `CWDP` = channel first, then way,
    /// die, plane).
    pub enum AllocationOrder {
        Cwdp = "cwdp", Cwpd = "cwpd", Cdwp = "cdwp", Cdpw = "cdpw", Cpwd = "cpwd", Cpdw = "cpdw",
        Wcdp = "wcdp", Wcpd = "wcpd", Wdcp = "wdcp", Wdpc = "wdpc", Wpcd = "wpcd", Wpdc = "wpdc",
        Dcwp = "dcwp", Dcpw = "dcpw", Dwcp = "dwcp", Dwpc = "dwpc", Dpcw = "dpcw", Dpwc = "dpwc",
        Pcwd = "pcwd", Pcdw = "pcdw", Pwcd = "pwcd", Pwdc = "pwdc", Pdcw = "pdcw", Pdwc = "pdwc",
    }
}

/// Every allocation order's name.
pub const ALLOCATION_ORDERS: &[&str] = <AllocationOrder as qoslab_engine::tunable::Choice>::NAMES;

fn parse_order(order: &str) -> [Level; 4] {
    let mut levels = [Level::Channel; 4];
    for (i, c) in order.chars().enumerate() {
        levels[i] = match c.to_ascii_lowercase() {
            'c' => Level::Channel,
            'w' => Level::Way,
            'd' => Level::Die,
            'p' => Level::Plane,
            other => panic!(
                "allocation order letter '{other}' (the config table lists the valid orders)"
            ),
        };
    }
    levels
}

/// The shape of the flash array.
/// Division by one of the geometry's sizes: a shift when the size is a power of two, as it
/// nearly always is, else a divide. The model splits page numbers on every flash operation.
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
}

#[derive(Clone, Debug)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    order: [Level; 4],
    /// The plane of each position in one round of the striping order (`lpa % planes`), so
    /// `stripe` costs one division (or shift) instead of two per level.
    plane_of_slot: Vec<u32>,
    pub per_block: Divisor,
    pub per_plane: Divisor,
    pub per_die: Divisor,
    blocks_per_plane_div: Divisor,
    planes_div: Divisor,
}

impl Geometry {
    /// An array striped channel first (`cwdp`; see [`Geometry::with_order`]).
    ///
    /// # Panics
    /// When the array has more than 2^32 - 1 pages (the config validates this first).
    pub fn new(
        channels: u32,
        chips_per_channel: u32,
        dies_per_chip: u32,
        planes_per_die: u32,
        blocks_per_plane: u32,
        pages_per_block: u32,
        page_bytes: u32,
    ) -> Self {
        let g = Geometry {
            channels,
            chips_per_channel,
            dies_per_chip,
            planes_per_die,
            blocks_per_plane,
            pages_per_block,
            page_bytes,
            order: parse_order("cwdp"),
            plane_of_slot: Vec::new(),
            per_block: Divisor::new(pages_per_block),
            per_plane: Divisor::new(pages_per_block * blocks_per_plane),
            per_die: Divisor::new(planes_per_die),
            blocks_per_plane_div: Divisor::new(blocks_per_plane),
            planes_div: Divisor::new(channels * chips_per_channel * dies_per_chip * planes_per_die),
        };
        assert!(
            g.physical_pages() < u64::from(u32::MAX),
            "more pages than a u32 can number"
        );
        g.with_order("cwdp")
    }

    /// The same array striped in `allocation_order` (one of [`ALLOCATION_ORDERS`]).
    pub fn with_order(mut self, allocation_order: &str) -> Self {
        self.order = parse_order(allocation_order);
        self.plane_of_slot = (0..self.planes())
            .map(|slot| self.stripe_by_levels(slot).0)
            .collect();
        self
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }

    pub fn planes(&self) -> u32 {
        self.dies() * self.planes_per_die
    }

    pub fn dies_per_channel(&self) -> u32 {
        self.chips_per_channel * self.dies_per_chip
    }

    pub fn pages_per_plane(&self) -> u32 {
        self.blocks_per_plane * self.pages_per_block
    }

    pub fn blocks(&self) -> u32 {
        self.planes() * self.blocks_per_plane
    }

    pub fn physical_pages(&self) -> u64 {
        u64::from(self.planes()) * u64::from(self.pages_per_plane())
    }

    /// Plane number from its coordinates (channel-major).
    pub fn plane_index(&self, channel: u32, way: u32, die: u32, plane: u32) -> u32 {
        ((channel * self.chips_per_channel + way) * self.dies_per_chip + die) * self.planes_per_die
            + plane
    }

    #[inline]
    pub fn die_of_plane(&self, plane: u32) -> u32 {
        self.per_die.quot(plane)
    }

    #[inline]
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die / self.dies_per_channel()
    }

    #[inline]
    pub fn plane_of_ppa(&self, ppa: u32) -> u32 {
        self.per_plane.quot(ppa)
    }

    /// The plane a block belongs to.
    #[inline]
    pub fn plane_of_block(&self, block: u32) -> u32 {
        self.blocks_per_plane_div.quot(block)
    }

    /// Global block number of a physical page.
    #[inline]
    pub fn block_of_ppa(&self, ppa: u32) -> u32 {
        self.per_block.quot(ppa)
    }

    #[inline]
    pub fn page_in_block(&self, ppa: u32) -> u32 {
        self.per_block.modulo(ppa)
    }

    /// First page of global block `block`.
    #[inline]
    pub fn first_ppa(&self, block: u32) -> u32 {
        block * self.pages_per_block
    }

    /// Global block number of block `local` of `plane`.
    #[inline]
    pub fn block_index(&self, plane: u32, local: u32) -> u32 {
        plane * self.blocks_per_plane + local
    }

    /// The plane a logical page is statically striped to, and its index among that plane's
    /// logical pages.
    #[inline]
    pub fn stripe(&self, lpa: u32) -> (u32, u32) {
        let slot = self.planes_div.modulo(lpa);
        (self.plane_of_slot[slot as usize], self.planes_div.quot(lpa))
    }

    /// `stripe` worked out level by level, in the allocation order.
    fn stripe_by_levels(&self, lpa: u32) -> (u32, u32) {
        let mut rest = lpa;
        let (mut channel, mut way, mut die, mut plane) = (0, 0, 0, 0);
        for level in self.order {
            let n = match level {
                Level::Channel => self.channels,
                Level::Way => self.chips_per_channel,
                Level::Die => self.dies_per_chip,
                Level::Plane => self.planes_per_die,
            };
            let coord = rest % n;
            rest /= n;
            match level {
                Level::Channel => channel = coord,
                Level::Way => way = coord,
                Level::Die => die = coord,
                Level::Plane => plane = coord,
            }
        }
        (self.plane_index(channel, way, die, plane), rest)
    }

    /// The logical pages striped to each plane when `logical_pages` pages are exported.
    pub fn logical_pages_per_plane(&self, logical_pages: u32) -> Vec<u32> {
        let planes = self.planes();
        let base = logical_pages / planes;
        let extra = logical_pages % planes;
        let mut counts = vec![base; planes as usize];
        // The first `extra` positions of the striping order get one page more.
        for lpa in 0..extra {
            counts[self.stripe(lpa).0 as usize] += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqsim() -> Geometry {
        Geometry::new(8, 4, 2, 2, 2048, 256, 8192)
    }

    #[test]
    fn mqsim_default_has_2_to_the_26_pages_in_128_planes() {
        let g = mqsim();
        assert_eq!(g.planes(), 128);
        assert_eq!(g.dies(), 64);
        assert_eq!(g.physical_pages(), 1 << 26);
        assert_eq!(g.physical_pages() * 8192, 512 << 30);
    }

    #[test]
    fn cwdp_moves_along_channels_first_then_ways_dies_planes() {
        let g = mqsim();
        let plane = |lpa| g.stripe(lpa).0;
        assert_eq!(plane(0), g.plane_index(0, 0, 0, 0));
        assert_eq!(plane(1), g.plane_index(1, 0, 0, 0));
        assert_eq!(plane(8), g.plane_index(0, 1, 0, 0));
        assert_eq!(plane(32), g.plane_index(0, 0, 1, 0));
        assert_eq!(plane(64), g.plane_index(0, 0, 0, 1));
        assert_eq!(g.stripe(128), (0, 1));
        let pdwc = Geometry::new(8, 4, 2, 2, 2048, 256, 8192).with_order("pdwc");
        assert_eq!(pdwc.stripe(1).0, pdwc.plane_index(0, 0, 0, 1));
        assert_eq!(pdwc.stripe(2).0, pdwc.plane_index(0, 0, 1, 0));
    }

    #[test]
    fn divisors_agree_with_division_for_powers_of_two_and_others() {
        for n in [1, 2, 3, 4, 7, 256, 2304, 1 << 19, 504 * 2304] {
            let d = Divisor::new(n);
            for x in [0, 1, n - 1, n, n + 1, 12_345_678, u32::MAX - 1, u32::MAX] {
                assert_eq!((d.quot(x), d.modulo(x)), (x / n, x % n), "{x} by {n}");
            }
        }
    }

    #[test]
    fn the_striping_table_agrees_with_the_level_by_level_decomposition() {
        for order in ALLOCATION_ORDERS {
            let g = Geometry::new(3, 2, 2, 2, 8, 4, 4096).with_order(order);
            for lpa in 0..500 {
                assert_eq!(g.stripe(lpa), g.stripe_by_levels(lpa), "{order} at {lpa}");
            }
        }
    }

    #[test]
    fn every_logical_page_lands_on_exactly_one_plane_slot() {
        let g = Geometry::new(2, 2, 1, 2, 8, 4, 4096);
        let logical = 50;
        let counts = g.logical_pages_per_plane(logical);
        assert_eq!(counts.iter().sum::<u32>(), logical);
        let mut seen = vec![vec![false; 8]; g.planes() as usize];
        for lpa in 0..logical {
            let (p, i) = g.stripe(lpa);
            assert!(i < counts[p as usize]);
            assert!(!seen[p as usize][i as usize]);
            seen[p as usize][i as usize] = true;
        }
    }

    #[test]
    fn page_numbers_decompose_into_plane_block_and_page() {
        let g = mqsim();
        let block = g.block_index(77, 1000);
        let ppa = g.first_ppa(block) + 13;
        assert_eq!(g.plane_of_ppa(ppa), 77);
        assert_eq!(g.block_of_ppa(ppa), block);
        assert_eq!(g.page_in_block(ppa), 13);
        assert_eq!(g.channel_of_die(g.die_of_plane(77)), 77 / 16);
    }
}
