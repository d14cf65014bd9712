//! The event kernel of qoslab's timed simulator.
//!
//! Kept deliberately small: simulated time, a deterministic event queue and named random
//! streams. Models (queues, devices, schedulers) live in their own crates and only use these.

pub mod queue;
pub mod request;
pub mod rng;
pub mod time;

pub use queue::EventQueue;
pub use request::{IoPrio, IoPrioClass, Op};
pub use rng::RngStream;
pub use time::Ns;
