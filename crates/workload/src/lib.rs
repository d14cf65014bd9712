//! Where I/O comes from: fio job files, per-job I/O generators, and block-trace readers.
//!
//! - [`fio`]: [`fio::parse_job_file`] reads a fio job file (`[global]`, job sections,
//!   `include`, `${ENV}`, fio's size and time suffixes) into typed [`fio::Job`]s. The options
//!   are one table, [`fio::options::OPTIONS`]; an option outside it is an error naming the
//!   option and the line.
//! - [`generator`]: [`JobGen`] turns a job (and a clone index and a run seed) into I/Os:
//!   direction, offset, length, priority, pacing, and end conditions, with no allocation per
//!   I/O.
//! - [`apps`]: applications above a file system (Filebench's Varmail, RocksDB's db_bench
//!   fillsync) as their threads' system calls; a job's `app=` runs one (`crates/sim`).
//! - [`trace`]: streaming readers for MSR Cambridge, SYSTOR '17, blkparse text and fio iolog
//!   v2/v3 traces, with format auto-detection.
//!
//! (`gen` is a reserved word in Rust 2024, hence `generator`.)
//!
//! Every error is a [`WorkloadError`], displayed as `FILE:LINE: message`.
//!
//! This crate depends on `qoslab-engine` only (for `Op`, `IoPrio`, `Ns` and `RngStream`).

pub mod apps;
mod error;
pub mod fio;
pub mod generator;
pub mod trace;

pub use error::WorkloadError;
pub use generator::{GenIo, JobGen};
