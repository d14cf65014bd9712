//! fio's I/O engines: which ones the simulator runs, in which class, and why it refuses the
//! others.
//!
//! The simulator models a host issuing block I/O to one device, so an engine runs when it is
//! a way of issuing block I/O that fio itself offers for a block device: the synchronous
//! system calls, the asynchronous interfaces, and `null` (no device at all). Every other
//! engine of fio 3.33 is refused with the reason, in one line naming it: engines that reach
//! no block device (network, object stores, distributed file systems, persistent memory,
//! CPU burners), engines that bypass the block layer (SCSI generic, NVMe passthrough, zoned
//! SCSI through libzbc, MTD flash), and the file-system engines, which need the file system
//! qoslab does not simulate yet.

use super::job::EngineClass;

/// What qoslab does with an engine: run it in a class, or refuse it with a reason.
pub enum EngineUse {
    Run(EngineClass),
    Refuse(&'static str),
}

const NETWORK: &str = "a network engine: qoslab simulates a host's block device, not a network";
const OBJECT: &str =
    "an object-store or distributed file-system client: qoslab simulates a host's block device";
const MEMORY: &str = "a memory (DAX/persistent memory) engine: loads and stores, not block I/O";
const PASSTHROUGH: &str =
    "a passthrough engine: its commands bypass the block layer, which qoslab does not model apart";
const FILESYSTEM: &str =
    "a file-system engine: qoslab has no file system yet (it will come with the page cache)";
const NO_IO: &str = "an engine that does no I/O (it burns CPU or runs a program)";
const PAGE_CACHE: &str = "its I/O goes through the page cache, which qoslab does not simulate yet";
const GPU: &str = "a GPU-direct engine: qoslab simulates no GPU";
const OTHER_OS: &str = "an engine of another operating system";

/// fio 3.33's engines (its `engines/` folder and the built-in ones), by name.
pub const ENGINES: &[(&str, EngineUse)] = &[
    ("psync", EngineUse::Run(EngineClass::Sync)),
    ("sync", EngineUse::Run(EngineClass::Sync)),
    ("pvsync", EngineUse::Run(EngineClass::Sync)),
    ("pvsync2", EngineUse::Run(EngineClass::Sync)),
    ("vsync", EngineUse::Run(EngineClass::Sync)),
    ("libaio", EngineUse::Run(EngineClass::Async)),
    ("io_uring", EngineUse::Run(EngineClass::Async)),
    ("posixaio", EngineUse::Run(EngineClass::Async)),
    ("null", EngineUse::Run(EngineClass::Null)),
    // fio's null engine written in C++ (engines/null.c built as an external engine).
    ("cpp_null", EngineUse::Run(EngineClass::Null)),
    ("net", EngineUse::Refuse(NETWORK)),
    ("netsplice", EngineUse::Refuse(NETWORK)),
    ("rdma", EngineUse::Refuse(NETWORK)),
    ("libiscsi", EngineUse::Refuse(NETWORK)),
    ("nbd", EngineUse::Refuse(NETWORK)),
    ("librpma_apm_client", EngineUse::Refuse(NETWORK)),
    ("librpma_apm_server", EngineUse::Refuse(NETWORK)),
    ("librpma_gpspm_client", EngineUse::Refuse(NETWORK)),
    ("librpma_gpspm_server", EngineUse::Refuse(NETWORK)),
    ("http", EngineUse::Refuse(OBJECT)),
    ("libhdfs", EngineUse::Refuse(OBJECT)),
    ("rados", EngineUse::Refuse(OBJECT)),
    ("rbd", EngineUse::Refuse(OBJECT)),
    ("gfapi", EngineUse::Refuse(OBJECT)),
    ("gfapi_async", EngineUse::Refuse(OBJECT)),
    ("dfs", EngineUse::Refuse(OBJECT)),
    ("nfs", EngineUse::Refuse(OBJECT)),
    ("ime_psync", EngineUse::Refuse(OBJECT)),
    ("ime_psyncv", EngineUse::Refuse(OBJECT)),
    ("ime_aio", EngineUse::Refuse(OBJECT)),
    ("dev-dax", EngineUse::Refuse(MEMORY)),
    ("libpmem", EngineUse::Refuse(MEMORY)),
    ("pmemblk", EngineUse::Refuse(MEMORY)),
    ("sg", EngineUse::Refuse(PASSTHROUGH)),
    ("io_uring_cmd", EngineUse::Refuse(PASSTHROUGH)),
    ("xnvme", EngineUse::Refuse(PASSTHROUGH)),
    ("libzbc", EngineUse::Refuse(PASSTHROUGH)),
    ("mtd", EngineUse::Refuse(PASSTHROUGH)),
    ("libblkio", EngineUse::Refuse(PASSTHROUGH)),
    ("filecreate", EngineUse::Refuse(FILESYSTEM)),
    ("filestat", EngineUse::Refuse(FILESYSTEM)),
    ("filedelete", EngineUse::Refuse(FILESYSTEM)),
    ("dircreate", EngineUse::Refuse(FILESYSTEM)),
    ("dirstat", EngineUse::Refuse(FILESYSTEM)),
    ("dirdelete", EngineUse::Refuse(FILESYSTEM)),
    ("ftruncate", EngineUse::Refuse(FILESYSTEM)),
    ("falloc", EngineUse::Refuse(FILESYSTEM)),
    ("e4defrag", EngineUse::Refuse(FILESYSTEM)),
    ("mmap", EngineUse::Refuse(PAGE_CACHE)),
    ("splice", EngineUse::Refuse(PAGE_CACHE)),
    ("cpuio", EngineUse::Refuse(NO_IO)),
    ("exec", EngineUse::Refuse(NO_IO)),
    ("libcufile", EngineUse::Refuse(GPU)),
    ("libhipfile", EngineUse::Refuse(GPU)),
    ("windowsaio", EngineUse::Refuse(OTHER_OS)),
    ("solarisaio", EngineUse::Refuse(OTHER_OS)),
];

/// The class an engine runs in, or why it does not run (the message names the engine).
pub fn class_of(name: &str) -> Result<EngineClass, String> {
    if name.starts_with("external:") || name.contains('/') {
        return Err(format!(
            "ioengine={name}: an external engine (a shared object qoslab cannot load into a simulation)"
        ));
    }
    match ENGINES.iter().find(|(n, _)| *n == name) {
        Some((_, EngineUse::Run(class))) => Ok(*class),
        Some((_, EngineUse::Refuse(why))) => Err(format!("ioengine={name}: {why}")),
        None => Err(format!(
            "ioengine={name}: no such engine in fio 3.33 (the engines qoslab runs: {})",
            runnable().join(", ")
        )),
    }
}

/// The names of the engines the simulator runs.
pub fn runnable() -> Vec<&'static str> {
    ENGINES
        .iter()
        .filter(|(_, u)| matches!(u, EngineUse::Run(_)))
        .map(|(n, _)| *n)
        .collect()
}

/// The engines table of docs/workload.md.
pub fn engines_markdown() -> String {
    let mut out = String::from("| ioengine | qoslab |\n|---|---|\n");
    for (name, u) in ENGINES {
        let what = match u {
            EngineUse::Run(EngineClass::Sync) => {
                "runs: synchronous (one I/O in flight)".to_string()
            }
            EngineUse::Run(EngineClass::Async) => {
                "runs: asynchronous (`iodepth` in flight)".to_string()
            }
            EngineUse::Run(EngineClass::Null) => {
                "runs: no device, the host's costs only".to_string()
            }
            EngineUse::Refuse(why) => format!("refused: {why}"),
        };
        out.push_str(&format!("| `{name}` | {what} |\n"));
    }
    out
}
