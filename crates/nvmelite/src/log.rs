//! The run log (spec §6) and its SHA-256.
//!
//! Lines are formatted straight into one reused byte buffer. Without `keep`, the buffer is
//! handed to the hasher whenever it passes a few KiB, so a run that only needs `log_sha256`
//! holds a bounded amount of text whatever its length; with `keep`, the whole log stays in
//! the buffer and is hashed once at the end.

use sha2::{Digest, Sha256};

use crate::model::{Observer, Status};
use crate::params::RunParams;
use crate::workload::CmdKind;

const HASH_CHUNK_BYTES: usize = 8 * 1024;

pub struct LogWriter {
    buf: Vec<u8>,
    hasher: Sha256,
    keep: bool,
    itoa: itoa::Buffer,
}

impl Default for LogWriter {
    fn default() -> Self {
        Self {
            buf: Vec::with_capacity(2 * HASH_CHUNK_BYTES),
            hasher: Sha256::new(),
            keep: false,
            itoa: itoa::Buffer::new(),
        }
    }
}

impl LogWriter {
    /// Starts a run's log with its RUN_HEADER line; `keep` keeps the whole text.
    pub fn start(&mut self, run_id: &str, seed_id: &str, n_cmds: usize, p: &RunParams, keep: bool) {
        self.buf.clear();
        self.hasher = Sha256::new();
        self.keep = keep;
        self.put(b"RUN_HEADER(run_id=");
        self.put(run_id.as_bytes());
        self.put(b", seed_id=");
        self.put(seed_id.as_bytes());
        self.put(b", schedule_seed=");
        self.num(p.schedule_seed);
        self.put(b", policy=");
        self.put(p.policy.name.as_bytes());
        self.put(b", bound_k=");
        match p.bound {
            crate::params::Bound::K(k) => self.num(u64::from(k)),
            crate::params::Bound::Inf => self.put(b"inf"),
        }
        self.put(b", fault_mode=");
        self.put(p.fault.name().as_bytes());
        self.put(b", n_cmds=");
        self.num(n_cmds as u64);
        self.put(b", submit_window=");
        match p.submit_window {
            crate::params::SubmitWindow::N(w) => self.num(w),
            crate::params::SubmitWindow::Inf => self.put(b"inf"),
        }
        self.put(b", scheduler_version=");
        self.put(p.scheduler_version.as_bytes());
        self.put(b", git_commit=");
        self.put(p.git_commit.as_bytes());
        self.end_line();
    }

    /// The SHA-256 of everything written since `start`.
    pub fn finish(&mut self) -> [u8; 32] {
        let mut hasher = std::mem::take(&mut self.hasher);
        hasher.update(&self.buf);
        hasher.finalize().into()
    }

    /// The whole log text (only complete when started with `keep`).
    pub fn text(&self) -> &[u8] {
        &self.buf
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    fn num(&mut self, v: u64) {
        let s = self.itoa.format(v);
        self.buf.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn end_line(&mut self) {
        self.buf.extend_from_slice(b")\n");
        self.line_done();
    }

    #[inline]
    fn line_done(&mut self) {
        if !self.keep && self.buf.len() >= HASH_CHUNK_BYTES {
            self.hasher.update(&self.buf);
            self.buf.clear();
        }
    }

    /// Appends a complete, pre-formatted line (with its `\n`).
    #[inline]
    pub(crate) fn line(&mut self, line: &PieceLine) {
        // Copies the whole slot (a constant size: a few vector moves, where a copy of the
        // line's own length calls memmove, 6 % of a matrix run), then drops the padding.
        let len = self.buf.len();
        self.buf.extend_from_slice(&line.bytes);
        self.buf.truncate(len + usize::from(line.len));
        self.line_done();
    }
}

/// Longest line a [`LinePieces`] holds: `SUBMIT(cmd_id=4294967295, cmd_type=WRITE_VISIBLE)`
/// and its `\n` are 50 bytes.
const PIECE_BYTES: usize = 64;

/// One pre-formatted log line, padded to a fixed size.
#[derive(Clone, Copy, Debug)]
pub struct PieceLine {
    bytes: [u8; PIECE_BYTES],
    len: u8,
}

impl PieceLine {
    fn new(text: &[u8]) -> Self {
        let mut bytes = [0; PIECE_BYTES];
        bytes[..text.len()].copy_from_slice(text);
        Self {
            bytes,
            len: text.len() as u8,
        }
    }
}

/// The log lines of a workload that do not depend on the schedule (each command's SUBMIT
/// line and its `status=OK, out=0` COMPLETE line), formatted once and copied into every run's
/// log by the matrix. The bytes are exactly those the [`LogWriter`] hooks would format.
#[derive(Clone, Debug, Default)]
pub struct LinePieces {
    submit: Vec<PieceLine>,
    complete_ok: Vec<PieceLine>,
}

impl LinePieces {
    pub fn new(workload: &crate::workload::Workload) -> Self {
        let mut writer = LogWriter {
            keep: true,
            ..LogWriter::default()
        };
        let mut pieces = LinePieces::default();
        for (i, cmd) in workload.commands.iter().enumerate() {
            writer.buf.clear();
            writer.submit(i as u32, cmd.kind);
            pieces.submit.push(PieceLine::new(&writer.buf));
            writer.buf.clear();
            writer.complete(i as u32, cmd.kind, Status::Ok, 0);
            pieces.complete_ok.push(PieceLine::new(&writer.buf));
        }
        pieces
    }

    #[inline]
    pub(crate) fn submit(&self, cmd: u32) -> &PieceLine {
        &self.submit[cmd as usize]
    }

    #[inline]
    pub(crate) fn complete_ok(&self, cmd: u32) -> &PieceLine {
        &self.complete_ok[cmd as usize]
    }
}

impl Observer for LogWriter {
    #[inline]
    fn submit(&mut self, cmd: u32, kind: CmdKind) {
        self.put(b"SUBMIT(cmd_id=");
        self.num(cmd.into());
        self.put(b", cmd_type=");
        self.put(kind.name().as_bytes());
        self.end_line();
    }

    #[inline]
    fn fence(&mut self, fence_id: u32) {
        self.put(b"FENCE(fence_id=");
        self.num(fence_id.into());
        self.end_line();
    }

    #[inline]
    fn complete(&mut self, cmd: u32, _kind: CmdKind, status: Status, out: u32) {
        self.put(b"COMPLETE(cmd_id=");
        self.num(cmd.into());
        self.put(b", status=");
        self.put(status.name().as_bytes());
        self.put(b", out=");
        self.num(out.into());
        self.end_line();
    }

    fn reset(&mut self, pending_before: usize) {
        self.put(b"RESET(reason=INJECTED, pending_before=");
        self.num(pending_before as u64);
        self.end_line();
    }

    fn end(&mut self, pending_left: usize, pending_peak: usize) {
        self.put(b"RUN_END(pending_left=");
        self.num(pending_left as u64);
        self.put(b", pending_peak=");
        self.num(pending_peak as u64);
        self.end_line();
    }
}

/// Lowercase hex of a digest.
pub fn hex(digest: &[u8; 32]) -> String {
    let mut s = String::with_capacity(64);
    push_hex(&mut s, digest);
    s
}

pub fn push_hex(out: &mut String, digest: &[u8; 32]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 64];
    for (pair, b) in text.chunks_exact_mut(2).zip(digest) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    out.push_str(std::str::from_utf8(&text).expect("hex digits are ASCII"));
}
