//! Jobs on files (the device file's `[fs] mount = true`, or `--set fs.mount=true`): they run
//! through the page cache and the file system of `[fs] type` (`crates/fs`), which the path
//! builder puts on top of the path. fio's `directory=` does not decide it: it stays the report
//! field it is for jobs on the device.

use qoslab_block::OrderingOps;
use qoslab_fs::{FileSpec, FsConfig, FsSetup};
use qoslab_workload::fio::JobFile;

use crate::SimError;
use crate::device::DeviceConfig;

/// Whether the jobs of `file` work on files (`[fs] mount`); if they do, the ordering plug-in
/// their file system's transactions go through (`Some(None)`: none, ext4's FLUSH and FUA).
pub fn jobs_on_files(
    file: &JobFile,
    device: &DeviceConfig,
) -> Result<Option<Option<&'static OrderingOps>>, SimError> {
    if !mounted(device) {
        return Ok(None);
    }
    for job in &file.jobs {
        let at = |m: String| SimError::at(&job.location.path, job.location.line, m);
        if job.ordering.is_some() {
            return Err(at(format!(
                "job '{}': ordering= orders a job's writes to the device; on a mounted file system ([fs] mount = true) its file system orders them ([fs] type)",
                job.name
            )));
        }
        if job.sim_host > 0 {
            return Err(at(format!(
                "job '{}': on a mounted file system ([fs] mount = true) every job runs on host 0 (the file system is mounted there)",
                job.name
            )));
        }
    }
    crate::path::fs_ordering(device).map(Some)
}

/// Whether the device file (or `--set fs.mount=true`) mounts its file system.
pub fn mounted(device: &DeviceConfig) -> bool {
    FsConfig::from_settings(&device.fs).mount
}

/// The page cache and file system for `jobs` job clones on `cores` cores of a device of
/// `capacity_bytes`: a job's file (one for all the clones that name it) is new (its writes
/// allocate it) unless it is in `files`, which exist before the run (the files fio lays out
/// for the jobs that read them, an application's).
pub fn setup(capacity_bytes: u64, cores: u32, jobs: usize, files: Vec<FileSpec>) -> FsSetup {
    FsSetup {
        capacity_bytes,
        cores,
        kernel_job: jobs as u32,
        mount: true,
        files,
        dirs: Vec::new(),
    }
}
