//! What every stage of the I/O path agrees on about an I/O: its operation and its priority.

/// The operation of one I/O, as the block layer and NVMe see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read,
    Write,
    /// Discard / deallocate (fio `trim`, NVMe Dataset Management).
    Trim,
    /// Cache flush (Linux REQ_PREFLUSH, NVMe Flush).
    Flush,
}

impl Op {
    /// Index into per-op tables, in fio's reporting order (read, write, trim); flush last.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Linux I/O priority classes (include/uapi/linux/ioprio.h); fio's `prioclass` uses the same
/// numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum IoPrioClass {
    #[default]
    None = 0,
    RealTime = 1,
    BestEffort = 2,
    Idle = 3,
}

/// An I/O priority: class plus level 0 (highest) to 7 (lowest) within the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IoPrio {
    pub class: IoPrioClass,
    pub level: u8,
}
