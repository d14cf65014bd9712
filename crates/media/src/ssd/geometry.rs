//! Where things are on the flash array: channels, chips (ways), dies, planes, blocks, pages,
//! and how consecutive logical pages are striped over them.
//!
//! Physical page numbers are `u32`, laid out plane by plane
//! (`((plane * blocks_per_plane) + block) * pages_per_block + page`), so a page's plane, die
//! and channel follow from integer division and the mapping table stays four bytes an entry.

use qoslab_engine::Divisor;

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
#[derive(Clone, Debug)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    /// Byte offsets into logical pages.
    pub page_bytes_div: Divisor,
    order: [Level; 4],
    /// The plane of each position in one round of the striping order (`lpa % planes`), so
    /// `stripe` costs one division (or shift) instead of two per level.
    plane_of_slot: Vec<u32>,
    pub per_block: Divisor,
    pub per_plane: Divisor,
    pub per_die: Divisor,
    blocks_per_plane_div: Divisor,
    planes_div: Divisor,
    /// NVM sets: each a group of dies with its own slice of the logical pages (one namespace),
    /// striped over the set's planes only. One set is the whole array.
    sets: NvmSets,
}

/// How the array is split into NVM sets (see [`Geometry::with_sets`]).
#[derive(Clone, Debug)]
struct NvmSets {
    count: u32,
    /// Logical pages of each set (`u32::MAX` until the drive's logical size is known).
    logical: u32,
    logical_div: Divisor,
    set_of_plane: Vec<u16>,
    /// Each set's planes in the striping order.
    slot_planes: Vec<Vec<u32>>,
    planes_per_set: Divisor,
}

/// Which dies form an NVM set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetGrouping {
    /// Whole channels: set s has the channels s x channels / sets onwards.
    Channel,
    /// The dies of every channel dealt out to the sets in turn (each set on every channel).
    Die,
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
            page_bytes_div: Divisor::new(page_bytes),
            order: parse_order("cwdp"),
            plane_of_slot: Vec::new(),
            per_block: Divisor::new(pages_per_block),
            per_plane: Divisor::new(pages_per_block * blocks_per_plane),
            per_die: Divisor::new(planes_per_die),
            blocks_per_plane_div: Divisor::new(blocks_per_plane),
            planes_div: Divisor::new(channels * chips_per_channel * dies_per_chip * planes_per_die),
            sets: NvmSets {
                count: 1,
                logical: u32::MAX,
                logical_div: Divisor::new(u32::MAX),
                set_of_plane: Vec::new(),
                slot_planes: Vec::new(),
                planes_per_set: Divisor::new(1),
            },
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
        let count = self.sets.count;
        let logical = self.sets.logical;
        self.split(count, SetGrouping::Channel, logical)
            .expect("one set always fits")
    }

    /// The same array split into `count` NVM sets of `logical_per_set` logical pages each, the
    /// dies grouped by `grouping`; the logical pages of set s are `s x logical_per_set`
    /// onwards, striped over the set's planes in the allocation order. Errors say why the
    /// array cannot be split so.
    pub fn with_sets(
        self,
        count: u32,
        grouping: SetGrouping,
        logical_per_set: u32,
    ) -> Result<Self, String> {
        self.split(count, grouping, logical_per_set)
    }

    fn split(mut self, count: u32, grouping: SetGrouping, logical: u32) -> Result<Self, String> {
        let planes = self.planes();
        let set_of_plane: Vec<u16> = match grouping {
            SetGrouping::Channel => {
                if !self.channels.is_multiple_of(count) {
                    return Err(format!(
                        "{count} NVM sets by channel need a multiple of {count} channels, got {}",
                        self.channels
                    ));
                }
                let per_set = self.channels / count;
                (0..planes)
                    .map(|p| (self.channel_of_die(self.die_of_plane(p)) / per_set) as u16)
                    .collect()
            }
            SetGrouping::Die => {
                if !self.dies_per_channel().is_multiple_of(count) {
                    return Err(format!(
                        "{count} NVM sets by die need a multiple of {count} dies per channel, got {}",
                        self.dies_per_channel()
                    ));
                }
                (0..planes)
                    .map(|p| (self.die_of_plane(p) % self.dies_per_channel() % count) as u16)
                    .collect()
            }
        };
        let slot_planes: Vec<Vec<u32>> = (0..count)
            .map(|s| {
                self.plane_of_slot
                    .iter()
                    .copied()
                    .filter(|&p| u32::from(set_of_plane[p as usize]) == s)
                    .collect()
            })
            .collect();
        self.sets = NvmSets {
            count,
            logical,
            logical_div: Divisor::new(logical.max(1)),
            set_of_plane,
            planes_per_set: Divisor::new(planes / count),
            slot_planes,
        };
        Ok(self)
    }

    /// NVM sets of the array.
    pub fn sets(&self) -> u32 {
        self.sets.count
    }

    /// The NVM set (0-based) plane `plane` belongs to.
    #[inline]
    pub fn set_of_plane(&self, plane: u32) -> u16 {
        self.sets.set_of_plane[plane as usize]
    }

    /// The planes of NVM set `set`, in the striping order.
    pub fn set_planes(&self, set: u16) -> &[u32] {
        &self.sets.slot_planes[set as usize]
    }

    /// Logical pages of each NVM set.
    pub fn set_logical_pages(&self) -> u32 {
        self.sets.logical
    }

    /// The NVM set (0-based) logical page `lpa` belongs to.
    #[inline]
    pub fn set_of_lpa(&self, lpa: u32) -> u16 {
        if self.sets.count == 1 {
            0
        } else {
            self.sets.logical_div.quot(lpa) as u16
        }
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
        if self.sets.count == 1 {
            let slot = self.planes_div.modulo(lpa);
            return (self.plane_of_slot[slot as usize], self.planes_div.quot(lpa));
        }
        let set = self.sets.logical_div.quot(lpa);
        let local = self.sets.logical_div.modulo(lpa);
        self.stripe_in_set(set as u16, local)
    }

    /// The plane page `n` of NVM set `set`'s own numbering (logical or translation pages) is
    /// striped to, and its index among that plane's pages.
    #[inline]
    pub fn stripe_in_set(&self, set: u16, n: u32) -> (u32, u32) {
        let per = self.sets.planes_per_set;
        (
            self.sets.slot_planes[set as usize][per.modulo(n) as usize],
            per.quot(n),
        )
    }

    /// The first `count` logical pages striped to `plane` (those a fill of `mapped` pages of
    /// each set writes there), in order.
    pub fn plane_lpas(&self, plane: u32, mapped: u32) -> impl Iterator<Item = u32> + use<> {
        let set = self.set_of_plane(plane);
        let slots = &self.sets.slot_planes[set as usize];
        let slot = slots
            .iter()
            .position(|&p| p == plane)
            .expect("a plane of its set") as u32;
        let step = slots.len() as u32;
        let base = u32::from(set)
            * if self.sets.count == 1 {
                0
            } else {
                self.sets.logical
            };
        let count = if mapped > slot {
            (mapped - slot).div_ceil(step)
        } else {
            0
        };
        (0..count).map(move |k| base + slot + k * step)
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

    #[test]
    fn sets_by_channel_take_whole_channels_and_their_pages_stay_on_them() {
        let g = Geometry::new(4, 2, 2, 2, 8, 4, 4096)
            .with_sets(2, SetGrouping::Channel, 100)
            .unwrap();
        assert_eq!(g.sets(), 2);
        for p in 0..g.planes() {
            let channel = g.channel_of_die(g.die_of_plane(p));
            assert_eq!(u32::from(g.set_of_plane(p)), channel / 2, "plane {p}");
        }
        let mut all: Vec<u32> = g
            .set_planes(0)
            .iter()
            .chain(g.set_planes(1))
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..g.planes()).collect::<Vec<_>>());
        for lpa in 0..200 {
            let (plane, _) = g.stripe(lpa);
            assert_eq!(g.set_of_plane(plane), (lpa / 100) as u16, "lpa {lpa}");
            assert_eq!(g.set_of_lpa(lpa), (lpa / 100) as u16);
        }
        // Within a set, consecutive pages move along its channels first (cwdp).
        let (p0, p1) = (g.stripe(100).0, g.stripe(101).0);
        assert_eq!(g.channel_of_die(g.die_of_plane(p0)), 2);
        assert_eq!(g.channel_of_die(g.die_of_plane(p1)), 3);
    }

    #[test]
    fn sets_by_die_put_every_set_on_every_channel() {
        let g = Geometry::new(2, 2, 2, 1, 8, 4, 4096)
            .with_sets(2, SetGrouping::Die, 64)
            .unwrap();
        for set in 0..2 {
            let channels: std::collections::BTreeSet<u32> = g
                .set_planes(set)
                .iter()
                .map(|&p| g.channel_of_die(g.die_of_plane(p)))
                .collect();
            assert_eq!(channels.len(), 2, "set {set}");
            assert_eq!(g.set_planes(set).len(), 4);
        }
        let e = Geometry::new(3, 1, 1, 1, 8, 4, 4096)
            .with_sets(2, SetGrouping::Channel, 10)
            .unwrap_err();
        assert!(e.contains("multiple of 2 channels"), "{e}");
    }

    #[test]
    fn each_planes_logical_pages_are_those_striped_to_it() {
        for sets in [1, 2] {
            let g = Geometry::new(2, 2, 1, 2, 8, 4, 4096)
                .with_sets(sets, SetGrouping::Channel, 40 / sets)
                .unwrap();
            let mapped = 40 / sets - 3;
            let mut seen = 0;
            for p in 0..g.planes() {
                for lpa in g.plane_lpas(p, mapped) {
                    assert_eq!(g.stripe(lpa).0, p);
                    assert!(lpa % (40 / sets) < mapped);
                    seen += 1;
                }
            }
            assert_eq!(seen, mapped * sets);
        }
    }
}
