//! The I/O schedulers, one file each (see [`crate::elevator`] for the contract and the
//! registry).

pub mod bfq;
pub mod kyber;
pub mod mq_deadline;
pub mod none;
pub mod prio;
pub mod prio_advanced;
