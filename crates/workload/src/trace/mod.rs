//! Streaming block-trace readers: MSR Cambridge CSV, SYSTOR '17 CSV, blkparse text output,
//! fio iolog v2 and v3. Gzip-compressed files (as the SNIA archives ship them) are read
//! transparently.
//!
//! A [`TraceReader`] holds one line at a time, so memory does not grow with the trace. Each
//! [`TraceRecord`] carries its timestamp relative to the first record, in ns. Timestamps
//! must not go back in time; a line that breaks the format stops the reader with an error
//! naming the file and line.
//!
//! | format | fields used | time unit |
//! |---|---|---|
//! | MSR Cambridge (`Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`) | all | Windows filetime (100 ns) |
//! | SYSTOR '17 (`Timestamp,Response,IOType,LUN,Offset,Size`) | all; a blank IOType is skipped | Unix seconds with fraction |
//! | blkparse default text output | the events of one action (default `Q`, queued) | seconds.nanoseconds |
//! | fio iolog v2 (`fio version 2 iolog`) | read/write/trim/sync/datasync; `wait` advances time | `wait` in us |
//! | fio iolog v3 (`fio version 3 iolog`) | the same, each line timestamped | us (as fio 3.33 writes them) |

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use qoslab_engine::time::{MAX_TIME_NS, MAX_TIME_TEXT};
use qoslab_engine::{Ns, Op};

use crate::WorkloadError;

/// The trace formats qoslab reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    MsrCambridge,
    Systor17,
    Blkparse,
    FioIologV2,
    FioIologV3,
}

impl TraceFormat {
    /// Names accepted by [`TraceFormat::from_name`] (and the CLI's `--format`).
    pub const NAMES: [(&'static str, TraceFormat); 5] = [
        ("msr", TraceFormat::MsrCambridge),
        ("systor17", TraceFormat::Systor17),
        ("blkparse", TraceFormat::Blkparse),
        ("iolog2", TraceFormat::FioIologV2),
        ("iolog3", TraceFormat::FioIologV3),
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, f)| f)
    }

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map(|&(n, _)| n)
            .unwrap()
    }

    /// Guesses the format from the first non-empty line of a file.
    pub fn detect(first_line: &str) -> Option<Self> {
        let t = first_line.trim();
        if t.starts_with("fio version 2 iolog") {
            return Some(TraceFormat::FioIologV2);
        }
        if t.starts_with("fio version 3 iolog") {
            return Some(TraceFormat::FioIologV3);
        }
        if t.eq_ignore_ascii_case(SYSTOR_HEADER) {
            return Some(TraceFormat::Systor17);
        }
        if t.eq_ignore_ascii_case(MSR_HEADER) {
            return Some(TraceFormat::MsrCambridge);
        }
        let fields: Vec<&str> = t.split(',').collect();
        if fields.len() == 7 && ["read", "write"].contains(&fields[3].to_ascii_lowercase().as_str())
        {
            return Some(TraceFormat::MsrCambridge);
        }
        if fields.len() == 6 && fields[0].contains('.') && ["R", "W", ""].contains(&fields[2]) {
            return Some(TraceFormat::Systor17);
        }
        if t.split_whitespace().next().is_some_and(is_dev_number) {
            return Some(TraceFormat::Blkparse);
        }
        None
    }
}

const SYSTOR_HEADER: &str = "Timestamp,Response,IOType,LUN,Offset,Size";
const MSR_HEADER: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";

/// One I/O of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Since the first record of the trace.
    pub timestamp_ns: Ns,
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Which disk, host or file the record belongs to: an index into
    /// [`TraceReader::stream_name`] ("wdev,0" for MSR host and disk, the LUN for SYSTOR, "8,0" for
    /// blkparse, the file name for fio iologs).
    pub stream: u32,
    /// The response time the trace recorded (MSR, SYSTOR), if any.
    pub response_ns: Option<Ns>,
    /// Line of the record in the trace file (1-based).
    pub line: u64,
}

/// Reads a trace record by record.
pub struct TraceReader<R> {
    input: R,
    path: PathBuf,
    format: TraceFormat,
    buf: String,
    line: u64,
    /// The first data line was read during detection and is still to be parsed.
    pending: bool,
    done: bool,
    /// Timestamp of the first record and of the latest, in the format's own unit.
    first_raw: Option<u64>,
    last_raw: u64,
    last_raw_line: u64,
    /// fio iolog v2: time accumulated from `wait` lines, in ns.
    wait_ns: u64,
    streams: Vec<String>,
    skipped: u64,
    blkparse_action: String,
}

/// Opens `path`, uncompressing gzip transparently; `format: None` detects the format.
pub fn open(
    path: impl AsRef<Path>,
    format: Option<TraceFormat>,
) -> Result<TraceReader<Box<dyn BufRead>>, WorkloadError> {
    let path = path.as_ref();
    let io_err =
        |e: std::io::Error| WorkloadError::in_file(path, format!("cannot read trace: {e}"));
    let mut file = File::open(path).map_err(io_err)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(io_err)?;
    let head = std::io::Cursor::new(magic[..n].to_vec());
    let chained = head.chain(file);
    let input: Box<dyn BufRead> = if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(chained),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 16, chained))
    };
    TraceReader::new(input, path, format)
}

fn is_dev_number(tok: &str) -> bool {
    tok.split_once(',').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    })
}

/// `secs.frac` to integer ns without floating point; at most 9 fraction digits count.
fn decimal_seconds_ns(text: &str) -> Result<u64, String> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if int.is_empty()
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return Err(format!("expected seconds like 12.000345, got '{text}'"));
    }
    let secs: u64 = int
        .parse()
        .map_err(|_| format!("seconds '{int}' too large"))?;
    let mut ns = 0u64;
    for (i, c) in frac.bytes().take(9).enumerate() {
        ns += u64::from(c - b'0') * 10u64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(ns))
        .ok_or_else(|| format!("time '{text}' too large"))
}

fn number(text: &str, what: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "{what}: expected an unsigned integer, got '{}'",
            text.trim()
        )
    })
}

/// What one line of a trace holds.
enum Parsed<'a> {
    Io {
        raw_time: u64,
        op: Op,
        offset: u64,
        len: u64,
        stream: &'a str,
        response_ns: Option<Ns>,
    },
    /// A header, file action or another blkparse event: no I/O.
    Nothing,
    /// A record the format allows but qoslab does not replay (blank SYSTOR type, zero length).
    Skip,
    /// blkparse's summary: the events are over.
    End,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads from `input`; `path` names it in messages. `format: None` detects it from the
    /// first non-empty line.
    pub fn new(input: R, path: &Path, format: Option<TraceFormat>) -> Result<Self, WorkloadError> {
        let mut r = Self {
            input,
            path: path.to_path_buf(),
            format: format.unwrap_or(TraceFormat::MsrCambridge),
            buf: String::with_capacity(256),
            line: 0,
            pending: false,
            done: false,
            first_raw: None,
            last_raw: 0,
            last_raw_line: 0,
            wait_ns: 0,
            streams: Vec::new(),
            skipped: 0,
            blkparse_action: "Q".to_string(),
        };
        if !r.read_line()? {
            return Err(WorkloadError::in_file(path, "the trace is empty"));
        }
        let detected = TraceFormat::detect(&r.buf);
        r.format = match (format, detected) {
            (Some(f), _) => f,
            (None, Some(f)) => f,
            (None, None) => {
                return Err(WorkloadError::at(
                    path,
                    r.line,
                    "cannot tell the trace format from this line; name it (msr, systor17, blkparse, iolog2, iolog3)",
                ));
            }
        };
        match r.format {
            TraceFormat::FioIologV2 | TraceFormat::FioIologV3 => {
                let want = if r.format == TraceFormat::FioIologV2 {
                    "fio version 2 iolog"
                } else {
                    "fio version 3 iolog"
                };
                if r.buf.trim() != want {
                    return Err(WorkloadError::at(
                        path,
                        r.line,
                        format!("expected the header '{want}'"),
                    ));
                }
            }
            TraceFormat::Systor17 if r.buf.trim().eq_ignore_ascii_case(SYSTOR_HEADER) => {}
            TraceFormat::MsrCambridge if r.buf.trim().eq_ignore_ascii_case(MSR_HEADER) => {}
            _ => r.pending = true,
        }
        Ok(r)
    }

    /// Replays blkparse events of another action than `Q` (queued), e.g. `D` (issued to the
    /// driver) or `C` (completed).
    pub fn with_blkparse_action(mut self, action: &str) -> Self {
        self.blkparse_action = action.to_string();
        self
    }

    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// The name of stream `id` of a record.
    /// The trace file, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stream_name(&self, id: u32) -> &str {
        &self.streams[id as usize]
    }

    /// Records the format allows but that were not replayed (blank SYSTOR type, zero-length
    /// I/O, blkparse events without a sector range).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Reads the next non-empty line into `buf`; false at the end.
    fn read_line(&mut self) -> Result<bool, WorkloadError> {
        loop {
            self.buf.clear();
            let n = self.input.read_line(&mut self.buf).map_err(|e| {
                WorkloadError::at(&self.path, self.line + 1, format!("cannot read trace: {e}"))
            })?;
            if n == 0 {
                return Ok(false);
            }
            self.line += 1;
            if !self.buf.trim().is_empty() {
                return Ok(true);
            }
        }
    }

    fn stream_id(streams: &mut Vec<String>, name: &str) -> u32 {
        if let Some(i) = streams.iter().rposition(|s| s == name) {
            return i as u32;
        }
        streams.push(name.to_string());
        (streams.len() - 1) as u32
    }

    /// Nanoseconds per unit of the format's raw timestamps.
    fn raw_unit_ns(&self) -> u64 {
        match self.format {
            TraceFormat::MsrCambridge => 100,
            TraceFormat::FioIologV3 => 1_000,
            _ => 1,
        }
    }

    fn next_record(&mut self) -> Result<Option<TraceRecord>, WorkloadError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.pending {
                self.pending = false;
            } else if !self.read_line()? {
                self.done = true;
                return Ok(None);
            }
            let line = self.line;
            let unit = self.raw_unit_ns();
            let t = self.buf.trim();
            let parsed = match self.format {
                TraceFormat::MsrCambridge => parse_msr(t),
                TraceFormat::Systor17 => parse_systor(t),
                TraceFormat::Blkparse => parse_blkparse(t, &self.blkparse_action),
                TraceFormat::FioIologV2 => parse_iolog(t, false, &mut self.wait_ns),
                TraceFormat::FioIologV3 => parse_iolog(t, true, &mut self.wait_ns),
            }
            .map_err(|m| WorkloadError::at(&self.path, line, m))?;
            let (raw_time, op, offset, len, stream, response_ns) = match parsed {
                Parsed::Io {
                    raw_time,
                    op,
                    offset,
                    len,
                    stream,
                    response_ns,
                } => {
                    // Interning here keeps the record free of allocation.
                    (
                        raw_time,
                        op,
                        offset,
                        len,
                        Self::stream_id(&mut self.streams, stream),
                        response_ns,
                    )
                }
                Parsed::Nothing => continue,
                Parsed::Skip => {
                    self.skipped += 1;
                    continue;
                }
                Parsed::End => {
                    self.done = true;
                    return Ok(None);
                }
            };
            let first = *self.first_raw.get_or_insert(raw_time);
            if raw_time < self.last_raw {
                return Err(WorkloadError::at(
                    &self.path,
                    line,
                    format!(
                        "timestamp goes back in time (line {} is later); sort the trace by time first",
                        self.last_raw_line
                    ),
                ));
            }
            self.last_raw = raw_time;
            self.last_raw_line = line;
            let timestamp_ns = (raw_time - first)
                .checked_mul(unit)
                .filter(|&ns| ns <= MAX_TIME_NS)
                .ok_or_else(|| {
                    WorkloadError::at(
                        &self.path,
                        line,
                        format!(
                            "timestamp too large: more than {MAX_TIME_TEXT} after the first record"
                        ),
                    )
                })?;
            return Ok(Some(TraceRecord {
                timestamp_ns,
                op,
                offset_bytes: offset,
                len_bytes: len,
                stream,
                response_ns,
                line,
            }));
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord, WorkloadError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record() {
            Ok(r) => r.map(Ok),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

fn data_io<'a>(
    raw_time: u64,
    op: Op,
    offset: u64,
    len: u64,
    stream: &'a str,
    response_ns: Option<Ns>,
) -> Parsed<'a> {
    if len == 0 && op != Op::Flush {
        Parsed::Skip
    } else {
        Parsed::Io {
            raw_time,
            op,
            offset,
            len,
            stream,
            response_ns,
        }
    }
}

fn parse_msr(t: &str) -> Result<Parsed<'_>, String> {
    let f: Vec<&str> = t.split(',').collect();
    if f.len() != 7 {
        return Err(format!(
            "expected 7 comma-separated fields ({MSR_HEADER}), got {}",
            f.len()
        ));
    }
    let ts = number(f[0], "Timestamp")?;
    let op = match f[3].trim().to_ascii_lowercase().as_str() {
        "read" => Op::Read,
        "write" => Op::Write,
        other => return Err(format!("Type: expected Read or Write, got '{other}'")),
    };
    number(f[2], "DiskNumber")?;
    let response = number(f[6], "ResponseTime")?;
    // The stream is "host,disk": the slice spans fields 1 and 2 of the line itself.
    let host_start = f[0].len() + 1;
    let stream = &t[host_start..host_start + f[1].len() + 1 + f[2].len()];
    Ok(data_io(
        ts,
        op,
        number(f[4], "Offset")?,
        number(f[5], "Size")?,
        stream,
        Some(response.saturating_mul(100)),
    ))
}

fn parse_systor(t: &str) -> Result<Parsed<'_>, String> {
    let f: Vec<&str> = t.split(',').collect();
    if f.len() != 6 {
        return Err(format!(
            "expected 6 comma-separated fields ({SYSTOR_HEADER}), got {}",
            f.len()
        ));
    }
    let ts = decimal_seconds_ns(f[0].trim()).map_err(|m| format!("Timestamp: {m}"))?;
    let response = decimal_seconds_ns(f[1].trim()).map_err(|m| format!("Response: {m}"))?;
    let op = match f[2].trim() {
        "R" => Op::Read,
        "W" => Op::Write,
        "" => return Ok(Parsed::Skip),
        other => return Err(format!("IOType: expected R, W or blank, got '{other}'")),
    };
    number(f[3], "LUN")?;
    let lun_start = f[0].len() + f[1].len() + f[2].len() + 3;
    let stream = &t[lun_start..lun_start + f[3].len()];
    Ok(data_io(
        ts,
        op,
        number(f[4], "Offset")?,
        number(f[5], "Size")?,
        stream,
        Some(response),
    ))
}

/// blkparse's default output: `maj,min cpu seq secs.nsecs pid action rwbs [sector + blocks] [process]`.
fn parse_blkparse<'a>(t: &'a str, action: &str) -> Result<Parsed<'a>, String> {
    let mut tok = t.split_whitespace();
    let dev = tok.next().unwrap_or("");
    if !is_dev_number(dev) {
        // blkparse ends its output with per-CPU and total summaries.
        let summary = [
            "CPU",
            "Total",
            "Throughput",
            "Events",
            "Skips",
            "Reads",
            "Writes",
        ];
        if summary.iter().any(|s| dev.starts_with(s)) {
            return Ok(Parsed::End);
        }
        return Err(format!(
            "expected a blkparse event line starting with a device like 8,0, got '{t}'"
        ));
    }
    let fields: Vec<&str> = tok.take(6).collect();
    if fields.len() < 5 {
        return Err("expected 'maj,min cpu sequence time pid action rwbs ...'".into());
    }
    number(fields[0], "cpu")?;
    number(fields[1], "sequence")?;
    let ts = decimal_seconds_ns(fields[2]).map_err(|m| format!("time: {m}"))?;
    number(fields[3], "pid")?;
    if fields[4] != action {
        return Ok(Parsed::Nothing);
    }
    let rwbs = fields.get(5).copied().unwrap_or("");
    let mut rest = t.split_whitespace().skip(7);
    let sector_range = match (rest.next(), rest.next(), rest.next()) {
        (Some(s), Some("+"), Some(n)) => Some((number(s, "sector")?, number(n, "sector count")?)),
        _ => None,
    };
    let op = if rwbs.contains('D') {
        Op::Trim
    } else if rwbs.contains('W') {
        Op::Write
    } else if rwbs.contains('R') {
        Op::Read
    } else if rwbs.starts_with('F') {
        Op::Flush
    } else {
        return Ok(Parsed::Skip);
    };
    match sector_range {
        Some((sector, count)) if count > 0 => Ok(Parsed::Io {
            raw_time: ts,
            op,
            offset: sector * 512,
            len: count * 512,
            stream: dev,
            response_ns: None,
        }),
        // A flush carries no data; an empty pre-flush write is a flush too.
        _ if rwbs.starts_with('F') => Ok(Parsed::Io {
            raw_time: ts,
            op: Op::Flush,
            offset: 0,
            len: 0,
            stream: dev,
            response_ns: None,
        }),
        _ => Ok(Parsed::Skip),
    }
}

/// fio iolog v2 (`file action [offset length]`) and v3 (`time file action [offset length]`).
fn parse_iolog<'a>(t: &'a str, v3: bool, wait_ns: &mut u64) -> Result<Parsed<'a>, String> {
    let mut tok = t.split_whitespace();
    let raw_time = if v3 {
        number(tok.next().unwrap_or(""), "timestamp")?
    } else {
        0
    };
    let (Some(file), Some(action)) = (tok.next(), tok.next()) else {
        return Err(if v3 {
            "expected 'timestamp filename action [offset length]'"
        } else {
            "expected 'filename action [offset length]'"
        }
        .into());
    };
    let offset = tok.next();
    let length = tok.next();
    if tok.next().is_some() {
        return Err("too many fields".into());
    }
    let op = match action {
        "add" | "open" | "close" => return Ok(Parsed::Nothing),
        "read" => Op::Read,
        "write" => Op::Write,
        "trim" => Op::Trim,
        "sync" | "datasync" => Op::Flush,
        "wait" if !v3 => {
            let us = number(offset.unwrap_or(""), "wait time")?;
            // fio's HOWTO: "Everything below 100 is discarded."
            if us >= 100 {
                *wait_ns += us * 1_000;
            }
            return Ok(Parsed::Nothing);
        }
        "wait" => return Err("'wait' is not allowed in a version 3 iolog".into()),
        other => return Err(format!("unknown action '{other}'")),
    };
    let offset = number(offset.unwrap_or(""), "offset")?;
    let length = match (op, length) {
        (Op::Flush, None) => 0,
        (_, l) => number(l.unwrap_or(""), "length")?,
    };
    let time = if v3 { raw_time } else { *wait_ns };
    Ok(data_io(time, op, offset, length, file, None))
}

/// Open-loop replay speed (`--speed X`): X=2 replays twice as fast.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplaySpeed(f64);

impl ReplaySpeed {
    pub fn new(speed: f64) -> Result<Self, WorkloadError> {
        if speed.is_finite() && speed > 0.0 {
            Ok(Self(speed))
        } else {
            Err(WorkloadError::new(format!(
                "replay speed must be a positive number, got {speed}"
            )))
        }
    }

    /// The submission time of a record stamped `timestamp_ns`, rounded to the nearest ns;
    /// `None` past [`MAX_TIME_NS`] (a slow replay of a long trace), never a saturated time.
    pub fn scale(self, timestamp_ns: Ns) -> Option<Ns> {
        if self.0 == 1.0 {
            return Some(timestamp_ns);
        }
        let ns = (timestamp_ns as f64 / self.0).round();
        (ns <= MAX_TIME_NS as f64).then_some(ns as Ns)
    }

    pub fn get(self) -> f64 {
        self.0
    }
}
