//! Predictable Latency Mode on the host side: the coordinator that shares the NVM sets'
//! deterministic-window counts among hosts ([`coordinator`], its allocation policies in
//! [`allocation`]). The device side (windows, features 13h/14h, log pages 0Ah/0Bh) is the SSD's
//! `plm` GC gate.

pub mod allocation;
pub mod coordinator;
pub mod library;

pub use coordinator::{
    Coordinator, DemandTable, HostWindow, Predictor, QosClass, RatioHist, coordinate,
};
