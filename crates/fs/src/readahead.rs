//! Linux's on-demand readahead (mm/readahead.c, Linux 6.1), on page indices: the window a
//! buffered read brings into the page cache, and the marker page whose first access reads the
//! next window ahead of the reader.
//!
//! A read that misses at the start of a file or right after the previous read starts a window
//! of `init_ra_size` pages (four times the request, rounded up to a power of two, for small
//! requests); reaching the window's marker (`async_size` pages before its end) reads the next
//! window, each twice to four times the last, up to `read_ahead_kb`. A lone read elsewhere reads
//! just what it asked for.

/// The readahead state of one open file (`struct file_ra_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaState {
    /// First page of the current window.
    pub start: u64,
    /// Pages in the window.
    pub size: u64,
    /// Pages of the window left when the next one is read (the marker is at
    /// `start + size - async_size`).
    pub async_size: u64,
    /// The last page the previous read touched (`prev_pos >> PAGE_SHIFT`), or `None` before
    /// any read.
    pub prev_index: Option<u64>,
}

/// A range of pages to read ahead, and the page to mark (`PG_readahead`), if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: u64,
    pub pages: u64,
    pub marker: Option<u64>,
}

/// `get_init_ra_size`: the first window for a request of `req` pages, at most `max`.
pub fn init_ra_size(req: u64, max: u64) -> u64 {
    let size = req.max(1).next_power_of_two();
    if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: the window after one of `cur` pages, at most `max`.
pub fn next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

impl RaState {
    /// `ondemand_readahead`: the window to read for a read of `req` pages at `index`, as a
    /// cache miss there (`hit_marker` false: `page_cache_sync_readahead`) or a hit of the marker
    /// page (`page_cache_async_readahead`); `max` is `read_ahead_kb` in pages. `None` when
    /// readahead is off; a lone random miss gives just the request, leaving the state alone.
    pub fn on_demand(
        &mut self,
        index: u64,
        req: u64,
        max: u64,
        hit_marker: bool,
    ) -> Option<Window> {
        if max == 0 {
            return None;
        }
        let sequential = index == 0
            || (!hit_marker
                && (req > max
                    || self
                        .prev_index
                        .is_some_and(|p| index >= p && index - p <= 1)));
        let expected = self.start + self.size - self.async_size;
        if index != 0 && (index == expected || index == self.start + self.size) && self.size > 0 {
            // The expected marker (or the window's end): ramp up and push the window forward.
            self.start += self.size;
            self.size = next_ra_size(self.size, max);
            self.async_size = self.size;
        } else if hit_marker && index != 0 {
            // A marker without a matching state (another reader of the file moved it): read
            // from here on, ramped from what lies behind it (approximated by the request).
            self.start = index;
            self.size = next_ra_size(req.max(1), max).min(max);
            self.async_size = self.size;
        } else if sequential {
            self.start = index;
            self.size = init_ra_size(req, max);
            self.async_size = if self.size > req {
                self.size - req
            } else {
                self.size
            };
        } else {
            // A standalone small random read: as is, without a marker.
            return Some(Window {
                start: index,
                pages: req.max(1),
                marker: None,
            });
        }
        // Will this read hit the marker it just made? Then merge the next window into this one.
        if index == self.start && self.size == self.async_size {
            let add = next_ra_size(self.size, max);
            if self.size + add <= max {
                self.async_size = add;
                self.size += add;
            } else {
                self.size = max;
                self.async_size = max >> 1;
            }
        }
        Some(Window {
            start: self.start,
            pages: self.size,
            marker: Some(self.start + self.size - self.async_size),
        })
    }

    /// The read of pages `[index, index + pages)` is over.
    pub fn read_done(&mut self, index: u64, pages: u64) {
        self.prev_index = Some(index + pages.max(1) - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// read_ahead_kb = 128: 32 pages.
    const MAX: u64 = 32;

    #[test]
    fn windows_of_a_4k_sequential_reader_grow_16k_32k_64k_then_128k() {
        let mut ra = RaState::default();
        // The first read at page 0 misses: 4 pages, marker at page 1.
        let w = ra.on_demand(0, 1, MAX, false).unwrap();
        assert_eq!(
            w,
            Window {
                start: 0,
                pages: 4,
                marker: Some(1)
            }
        );
        ra.read_done(0, 1);
        // Page 1 carries the marker: the next window, 8 pages from page 4, marked at its start.
        let w = ra.on_demand(1, 1, MAX, true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 4,
                pages: 8,
                marker: Some(4)
            }
        );
        let w = ra.on_demand(4, 1, MAX, true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 12,
                pages: 16,
                marker: Some(12)
            }
        );
        let w = ra.on_demand(12, 1, MAX, true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 28,
                pages: 32,
                marker: Some(28)
            }
        );
        let w = ra.on_demand(28, 1, MAX, true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 60,
                pages: 32,
                marker: Some(60)
            }
        );
    }

    #[test]
    fn the_kernels_size_rules() {
        assert_eq!(init_ra_size(1, 32), 4);
        assert_eq!(init_ra_size(2, 32), 4);
        assert_eq!(init_ra_size(3, 32), 8);
        assert_eq!(init_ra_size(16, 32), 32);
        assert_eq!(init_ra_size(64, 32), 32);
        assert_eq!(next_ra_size(1, 32), 4);
        assert_eq!(next_ra_size(16, 32), 32);
        assert_eq!(next_ra_size(32, 32), 32);
    }

    #[test]
    fn a_lone_random_miss_reads_only_the_request_and_keeps_the_state() {
        let mut ra = RaState::default();
        ra.on_demand(0, 1, MAX, false);
        ra.read_done(0, 1);
        let before = ra;
        let w = ra.on_demand(1000, 2, MAX, false).unwrap();
        assert_eq!(
            w,
            Window {
                start: 1000,
                pages: 2,
                marker: None
            }
        );
        assert_eq!(ra, before);
    }

    #[test]
    fn a_read_after_the_previous_one_starts_a_window_and_readahead_off_reads_nothing() {
        let mut ra = RaState::default();
        ra.read_done(99, 1);
        let w = ra.on_demand(100, 1, MAX, false).unwrap();
        assert_eq!(w.start, 100);
        assert_eq!(w.pages, 4);
        assert_eq!(RaState::default().on_demand(0, 1, 0, false), None);
    }
}
