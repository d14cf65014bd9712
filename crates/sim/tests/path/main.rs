//! Integration tests of the simulated path, built as one binary.

mod common;
mod crash_views;
mod durability;
mod files;
mod fio_loop;
mod folds;
mod jobs;
mod nvme;
mod ordering;
mod queueing;
mod schedulers;
mod stages;
mod timeouts;
