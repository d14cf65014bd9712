//! One small trace of each format, written from the formats' public descriptions, replayed
//! with exact counts, bytes and timestamps; and the errors bad traces get.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use qoslab_engine::Op;
use qoslab_workload::trace::{self, ReplaySpeed, TraceFormat, TraceRecord};

fn tmp(name: &str, content: &[u8]) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qoslab-traces-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn read_all(
    path: &Path,
    format: Option<TraceFormat>,
) -> (TraceFormat, Vec<TraceRecord>, Vec<String>, u64) {
    let mut r = trace::open(path, format).unwrap_or_else(|e| panic!("{e}"));
    let fmt = r.format();
    let recs: Vec<TraceRecord> = r
        .by_ref()
        .map(|x| x.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let names = recs
        .iter()
        .map(|x| r.stream_name(x.stream).to_string())
        .collect();
    (fmt, recs, names, r.skipped())
}

fn first_error(path: &Path, format: Option<TraceFormat>) -> String {
    match trace::open(path, format) {
        Err(e) => e.to_string(),
        Ok(r) => r
            .filter_map(Result::err)
            .next()
            .expect("an error")
            .to_string(),
    }
}

type Row = (u64, Op, u64, u64);

fn rows(recs: &[TraceRecord]) -> Vec<Row> {
    recs.iter()
        .map(|r| (r.timestamp_ns, r.op, r.offset_bytes, r.len_bytes))
        .collect()
}

// MSR Cambridge (SNIA IOTTA): Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime with
// times in Windows filetime units (100 ns), offsets and sizes in bytes, no header.
const MSR: &str = "128166372003061629,wdev,0,Read,7014609920,24576,41286\n\
128166372016382155,wdev,0,Write,1317441536,8192,1963\n\
128166372016382155,wdev,0,Write,2436440064,4096,1875\n\
128166372026382245,hm,1,Write,0,512,100\n";

#[test]
fn msr_cambridge() {
    let (fmt, recs, names, skipped) = read_all(&tmp("msr.csv", MSR.as_bytes()), None);
    assert_eq!(fmt, TraceFormat::MsrCambridge);
    assert_eq!(
        rows(&recs),
        vec![
            (0, Op::Read, 7014609920, 24576),
            (1_332_052_600, Op::Write, 1317441536, 8192),
            (1_332_052_600, Op::Write, 2436440064, 4096),
            (2_332_061_600, Op::Write, 0, 512),
        ]
    );
    assert_eq!(recs.iter().map(|r| r.len_bytes).sum::<u64>(), 37376);
    assert_eq!(names, ["wdev,0", "wdev,0", "wdev,0", "hm,1"]);
    assert_eq!(recs[0].response_ns, Some(4_128_600));
    assert_eq!((recs[3].line, skipped), (4, 0));
    // Some copies carry the field names as a first line.
    let with_header = format!("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n{MSR}");
    let (fmt, recs, _, _) = read_all(&tmp("msr-hdr.csv", with_header.as_bytes()), None);
    assert_eq!(
        (fmt, recs.len(), recs[0].line),
        (TraceFormat::MsrCambridge, 4, 2)
    );
}

// SYSTOR '17 (SNIA IOTTA): header Timestamp,Response,IOType,LUN,Offset,Size; Unix seconds with a
// nine-digit fraction; IOType R, W or blank.
const SYSTOR: &str = "Timestamp,Response,IOType,LUN,Offset,Size\n\
1456095145.133076000,0.000806000,R,0,899056122368,131072\n\
1456095145.133180000,0.000115000,W,0,4096,4096\n\
1456095145.200000000,0.001,,0,4096,4096\n\
1456095146.000000001,0.002,W,6,8192,8192\n";

#[test]
fn systor17() {
    let (fmt, recs, names, skipped) = read_all(&tmp("systor.csv", SYSTOR.as_bytes()), None);
    assert_eq!(fmt, TraceFormat::Systor17);
    assert_eq!(
        rows(&recs),
        vec![
            (0, Op::Read, 899056122368, 131072),
            (104_000, Op::Write, 4096, 4096),
            (866_924_001, Op::Write, 8192, 8192),
        ]
    );
    assert_eq!(skipped, 1, "the blank IOType");
    assert_eq!(names, ["0", "0", "6"]);
    assert_eq!(recs[0].response_ns, Some(806_000));
    // Without the header the data lines are recognised too.
    let body: String = SYSTOR.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(
        read_all(&tmp("systor-nohdr.csv", body.as_bytes()), None)
            .1
            .len(),
        3
    );
}

// blkparse(1) default output: "%D %2c %8s %5T.%9t %5p %2a %3d" then "sector + blocks [process]";
// sectors are 512 bytes; RWBS: R read, W write, D discard, F flush; summaries at the end.
const BLKPARSE: &str = "  8,0    3        1     0.000000000   697  Q  WS 223490 + 8 [kjournald]
  8,0    3        2     0.000002339   697  G  WS 223490 + 8 [kjournald]
  8,0    3        3     0.000003978   697  P   N [kjournald]
  8,0    3        4     0.000005676   697  I  WS 223490 + 8 [kjournald]
  8,0    3        5     0.000008283   697  D  WS 223490 + 8 [kjournald]
  8,0    0        1     0.000222126     0  C  WS 223490 + 8 [0]
  8,16   1        6     0.001000000  1001  Q   R 1000 + 256 [fio]
  8,0    1        7     0.001500000  1001  Q  DS 2048 + 2048 [fstrim]
  8,0    1        8     0.002000000  1001  Q FWS [kworker/1:1]
  8,0    1        9     0.002100000  1001  U   N [fio] 1
CPU0 (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
Total (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
";

#[test]
fn blkparse_text() {
    let path = tmp("blk.txt", BLKPARSE.as_bytes());
    let (fmt, recs, names, _) = read_all(&path, None);
    assert_eq!(fmt, TraceFormat::Blkparse);
    assert_eq!(
        rows(&recs),
        vec![
            (0, Op::Write, 223490 * 512, 4096),
            (1_000_000, Op::Read, 512_000, 131072),
            (1_500_000, Op::Trim, 1 << 20, 1 << 20),
            (2_000_000, Op::Flush, 0, 0),
        ]
    );
    assert_eq!(names, ["8,0", "8,16", "8,0", "8,0"]);
    // The issue (D) events only.
    let r = trace::open(&path, None).unwrap().with_blkparse_action("D");
    let d: Vec<TraceRecord> = r.map(Result::unwrap).collect();
    assert_eq!(rows(&d), vec![(0, Op::Write, 223490 * 512, 4096)]);
}

// fio HOWTO, "Trace file format v2": "filename action [offset length]"; wait delays in us,
// "everything below 100 is discarded".
const IOLOG2: &str = "fio version 2 iolog
/dev/sdb add
/dev/sdb open
/dev/sdb write 0 4096
/dev/sdb wait 1000
/dev/sdb read 4096 8192
/dev/sdb wait 50
/dev/sdb trim 8192 4096
/dev/sdb wait 2500
/dev/sdb sync 0 0
/dev/sdb close
";

#[test]
fn fio_iolog_v2() {
    let (fmt, recs, names, _) = read_all(&tmp("v2.log", IOLOG2.as_bytes()), None);
    assert_eq!(fmt, TraceFormat::FioIologV2);
    assert_eq!(
        rows(&recs),
        vec![
            (0, Op::Write, 0, 4096),
            (1_000_000, Op::Read, 4096, 8192),
            (1_000_000, Op::Trim, 8192, 4096),
            (3_500_000, Op::Flush, 0, 0),
        ]
    );
    assert_eq!(names[0], "/dev/sdb");
}

// "Trace file format v3": "timestamp filename action [offset length]", timestamps in us as
// fio 3.33 writes them (see fio_iolog_v3_written_by_fio for the check against fio itself).
const IOLOG3: &str = "fio version 3 iolog
0 /dev/sdb add
10 /dev/sdb open
104 /dev/sdb read 0 4096
10115 /dev/sdb read 4096 4096
20108 /dev/sdb write 8192 4096
20108 /dev/sdb close
";

#[test]
fn fio_iolog_v3() {
    let (fmt, recs, _, _) = read_all(&tmp("v3.log", IOLOG3.as_bytes()), None);
    assert_eq!(fmt, TraceFormat::FioIologV3);
    assert_eq!(
        rows(&recs),
        vec![
            (0, Op::Read, 0, 4096),
            (10_011_000, Op::Read, 4096, 4096),
            (20_004_000, Op::Write, 8192, 4096),
        ]
    );
}

#[test]
fn fio_iolog_v3_written_by_fio() {
    // fio itself writes a v3 log of 5 reads at 100 IOPS: our reader must see gaps of ~10 ms.
    let dir = std::env::temp_dir().join(format!("qoslab-fio-iolog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("fio.log");
    let _ = std::fs::remove_file(&log);
    let out = std::process::Command::new("fio")
        .args([
            "--name=x",
            "--ioengine=null",
            "--rw=read",
            "--bs=4k",
            "--size=20k",
            "--rate_iops=100",
            "--output=/dev/null",
        ])
        .arg(format!("--write_iolog={}", log.display()))
        .output()
        .expect("fio is needed for this test (make tools installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (fmt, recs, _, _) = read_all(&log, None);
    assert_eq!(fmt, TraceFormat::FioIologV3);
    assert_eq!(recs.len(), 5);
    assert_eq!(
        recs.iter().map(|r| r.offset_bytes).collect::<Vec<_>>(),
        vec![0, 4096, 8192, 12288, 16384]
    );
    // Four gaps of 10 ms: the span tells microseconds (40 ms) from milliseconds or
    // nanoseconds (a factor 1000 off), whatever the load on the machine.
    let span_ms = recs[4].timestamp_ns as f64 / 1e6;
    assert!((35.0..200.0).contains(&span_ms), "span {span_ms} ms");
}

#[test]
fn gzip_compressed_traces_are_read_transparently() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(MSR.as_bytes()).unwrap();
    let path = tmp("msr.csv.gz", &gz.finish().unwrap());
    assert_eq!(read_all(&path, None).1.len(), 4);
}

#[test]
fn explicit_format_overrides_detection() {
    let path = tmp("msr2.csv", MSR.as_bytes());
    assert_eq!(read_all(&path, Some(TraceFormat::MsrCambridge)).1.len(), 4);
    let e = first_error(&path, Some(TraceFormat::Systor17));
    assert!(e.ends_with("msr2.csv:1: expected 6 comma-separated fields (Timestamp,Response,IOType,LUN,Offset,Size), got 7"), "{e}");
    assert_eq!(
        TraceFormat::from_name("blkparse"),
        Some(TraceFormat::Blkparse)
    );
    assert_eq!(TraceFormat::Systor17.name(), "systor17");
}

#[test]
fn bad_traces_get_one_line_errors_with_the_line_number() {
    let unsorted =
        "128166372016382155,wdev,0,Write,0,4096,1\n128166372003061629,wdev,0,Read,0,4096,1\n";
    let e = first_error(&tmp("unsorted.csv", unsorted.as_bytes()), None);
    assert!(e.ends_with("unsorted.csv:2: timestamp goes back in time (line 1 is later); sort the trace by time first"), "{e}");

    let garbage = format!("{MSR}this is not a trace line\n");
    let e = first_error(&tmp("garbage.csv", garbage.as_bytes()), None);
    assert!(e.ends_with("garbage.csv:5: expected 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), got 1"), "{e}");

    let bad_num = "128166372003061629,wdev,0,Read,12x,4096,1\n";
    let e = first_error(&tmp("badnum.csv", bad_num.as_bytes()), None);
    assert!(
        e.ends_with("badnum.csv:1: Offset: expected an unsigned integer, got '12x'"),
        "{e}"
    );

    let bad_type =
        "128166372003061629,wdev,0,Read,0,4096,1\n128166372003061630,wdev,0,Flush,0,4096,1\n";
    let e = first_error(&tmp("badtype.csv", bad_type.as_bytes()), None);
    assert!(
        e.ends_with("badtype.csv:2: Type: expected Read or Write, got 'flush'"),
        "{e}"
    );

    let e = first_error(&tmp("unknown.txt", b"\n\nhello world\n"), None);
    assert!(e.ends_with("unknown.txt:3: cannot tell the trace format from this line; name it (msr, systor17, blkparse, iolog2, iolog3)"), "{e}");

    let e = first_error(&tmp("empty.csv", b""), None);
    assert!(e.ends_with("empty.csv: the trace is empty"), "{e}");

    let v3_wait = "fio version 3 iolog\n5 /dev/sdb wait 100\n";
    let e = first_error(&tmp("v3wait.log", v3_wait.as_bytes()), None);
    assert!(
        e.ends_with("v3wait.log:2: 'wait' is not allowed in a version 3 iolog"),
        "{e}"
    );

    let v2_bad = "fio version 2 iolog\n/dev/sdb read 0\n";
    let e = first_error(&tmp("v2bad.log", v2_bad.as_bytes()), None);
    assert!(
        e.ends_with("v2bad.log:2: length: expected an unsigned integer, got ''"),
        "{e}"
    );

    let blk_bad = "  8,0    3        1     0.000000000   697  Q  WS 223490 + 8 [x]\n  8,0    3        2     zero   697  Q  WS 1 + 8 [x]\n";
    let e = first_error(&tmp("blkbad.txt", blk_bad.as_bytes()), None);
    assert!(
        e.ends_with("blkbad.txt:2: time: expected seconds like 12.000345, got 'zero'"),
        "{e}"
    );

    let e = first_error(Path::new("/nonexistent/trace.csv"), None);
    assert!(
        e.starts_with("/nonexistent/trace.csv: cannot read trace"),
        "{e}"
    );
}

#[test]
fn replay_speed_scales_timestamps() {
    let s = ReplaySpeed::new(2.0).unwrap();
    assert_eq!(s.scale(1_000_001), Some(500_001));
    assert_eq!(ReplaySpeed::new(0.5).unwrap().scale(3), Some(6));
    // A slow replay past the clock's range is no time at all, not a saturated one.
    let slow = ReplaySpeed::new(1e-12).unwrap();
    assert!(slow.scale(4_611_686).is_some());
    assert_eq!(slow.scale(4_611_687), None);
    assert!(ReplaySpeed::new(0.0).is_err() && ReplaySpeed::new(f64::NAN).is_err());
}

/// A synthetic MSR trace of `n` lines, produced on the fly: it never exists in memory.
struct SyntheticMsr {
    n: u64,
    i: u64,
    line: Vec<u8>,
    pos: usize,
}

impl Read for SyntheticMsr {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.line.len() {
            if self.i == self.n {
                return Ok(0);
            }
            self.line = format!(
                "{},web,0,Read,{},4096,100\n",
                128166372003061629u64 + self.i * 10,
                self.i * 4096
            )
            .into_bytes();
            self.i += 1;
            self.pos = 0;
        }
        let k = out.len().min(self.line.len() - self.pos);
        out[..k].copy_from_slice(&self.line[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

fn peak_rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn readers_stream_in_constant_memory() {
    // 4 million records (about 230 MB of text): reading them must not hold them.
    let n = 4_000_000u64;
    let before = peak_rss_kb();
    let input = BufReader::new(SyntheticMsr {
        n,
        i: 0,
        line: Vec::new(),
        pos: 0,
    });
    let r = trace::TraceReader::new(input, Path::new("synthetic.csv"), None).unwrap();
    let (mut count, mut bytes, mut last) = (0u64, 0u64, 0u64);
    for rec in r {
        let rec = rec.unwrap();
        count += 1;
        bytes += rec.len_bytes;
        last = rec.timestamp_ns;
    }
    assert_eq!((count, bytes, last), (n, n * 4096, (n - 1) * 10 * 100));
    let grown_mb = (peak_rss_kb().saturating_sub(before)) as f64 / 1024.0;
    assert!(grown_mb < 32.0, "peak RSS grew by {grown_mb} MB");
}
