//! NVMe-lite: the exact step model of qoslab's first study (completion reordering under a
//! bound k, after Bicanic, "When Legal Completion Reordering Breaks QoS").
//!
//! A run is a workload ([`Workload`]) plus [`RunParams`]; [`run::Runner`] executes it and
//! yields the byte-exact log, its SHA-256, the metrics and, on request, schedule records.
//! [`matrix`] runs a whole study matrix in parallel with deterministic output. Policies are
//! hook tables in [`policy`]. The model stands alone: it does not use the timed engine.
//!
//! `spec §N` in this crate's comments is section N of the NVMe-lite specification, copied in
//! `docs/nvme-lite-spec.md`.

pub mod log;
pub mod matrix;
pub mod metrics;
pub mod model;
pub mod params;
pub mod policy;
pub mod rng;
pub mod run;
pub mod sampling;
pub mod schedule;
pub mod search;
pub mod workload;

pub use metrics::{Metrics, RUNS_CSV_HEADER};
pub use model::StepError;
pub use params::{Bound, FaultMode, RunParams, SubmitWindow};
pub use policy::PolicyOps;
pub use run::{LogUse, RunOptions, RunOutput, Runner, replay, run};
pub use workload::{CmdKind, Command, Workload, WorkloadError};

#[cfg(test)]
mod properties;
#[cfg(test)]
mod spec_examples;
