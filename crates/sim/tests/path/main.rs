//! Integration tests of the simulated path, built as one binary.

mod common;
mod nvme;
mod queueing;
mod timeouts;
