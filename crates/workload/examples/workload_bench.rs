//! Throughput of the generators and trace readers, for `make bench` (bench/bench_workload.py).
//! Prints one `name<TAB>items<TAB>seconds` line per case.

use std::io::{BufReader, Read};
use std::path::Path;
use std::time::Instant;

use qoslab_workload::JobGen;
use qoslab_workload::fio::parse_job_str;
use qoslab_workload::trace::TraceReader;

fn bench_job(name: &str, options: &str, n: u64) {
    let text = format!("[j]\n{options}\nsize=1t\ntime_based\nruntime=1h\n");
    let f = parse_job_str(&text, Path::new("bench.fio"), |_| None).unwrap();
    let mut g = JobGen::new(&f.jobs[0], 0, 1).unwrap();
    let start = Instant::now();
    let mut checksum = 0u64;
    for _ in 0..n {
        let io = g.next_io().unwrap();
        checksum = checksum.wrapping_add(io.offset_bytes ^ io.not_before_ns);
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(checksum);
    println!("{name}\t{n}\t{secs:.4}");
}

/// MSR Cambridge lines made on the fly, so the file's size does not matter.
struct SyntheticMsr {
    left: u64,
    t: u64,
    line: Vec<u8>,
    pos: usize,
}

impl Read for SyntheticMsr {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.line.len() {
            if self.left == 0 {
                return Ok(0);
            }
            self.left -= 1;
            self.t += 37;
            self.line = format!(
                "{},web,0,Write,{},4096,1234\n",
                128166372003061629 + self.t,
                self.t * 512
            )
            .into_bytes();
            self.pos = 0;
        }
        let k = out.len().min(self.line.len() - self.pos);
        out[..k].copy_from_slice(&self.line[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

fn main() {
    let n = 20_000_000;
    bench_job(
        "4k randread (every block once per pass)",
        "rw=randread\nbs=4k",
        n,
    );
    bench_job(
        "4k randread norandommap",
        "rw=randread\nbs=4k\nnorandommap",
        n,
    );
    bench_job(
        "randrw 70/30, bssplit, zipf:1.1",
        "rw=randrw\nrwmixread=70\nbssplit=4k/60:16k/30:128k/10\nrandom_distribution=zipf:1.1",
        n,
    );
    bench_job(
        "randread, rate_iops + poisson",
        "rw=randread\nbs=4k\nrate_iops=100k\nrate_process=poisson",
        n,
    );
    bench_job("128k sequential write", "rw=write\nbs=128k", n);

    let records = 5_000_000;
    let input = BufReader::with_capacity(
        1 << 16,
        SyntheticMsr {
            left: records,
            t: 0,
            line: Vec::new(),
            pos: 0,
        },
    );
    let start = Instant::now();
    let reader = TraceReader::new(input, Path::new("synthetic.csv"), None).unwrap();
    let count = reader
        .map(|r| r.unwrap().len_bytes)
        .filter(|&l| l > 0)
        .count() as u64;
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(count, records);
    println!(
        "MSR Cambridge trace reader (synthetic lines, includes making them)\t{count}\t{secs:.4}"
    );
}
