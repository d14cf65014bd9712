//! Filebench's Varmail personality (workloads/varmail.f, Filebench 1.5), a mail server:
//! each of `nthreads` threads loops over thirteen flowops on one fileset of `nfiles` files of
//! `meanfilesize` bytes, 80 % of which exist when the run starts (`prealloc=80`):
//!
//! ```text
//! deletefile    a random existing file (not when another thread has it open)
//! createfile    a random file that does not exist, kept open          (fd 1)
//! appendfilerand  a uniform random size in [0, meanappendsize) at its end
//! fsync
//! closefile
//! openfile      a random existing file                                 (fd 1)
//! readwholefile iosize at a time to its end (a last read finds the end)
//! appendfilerand, fsync, closefile
//! openfile, readwholefile, closefile
//! ```
//!
//! Every flowop is one operation of Filebench's "IO Summary" (ops/s), whether it made a
//! system call or not (a zero-byte append, a delete that finds the file open elsewhere).
//! Defaults: nfiles 1000, meanfilesize 16 KiB, nthreads 16, iosize 1 MiB, meanappendsize
//! 16 KiB, one directory (meandirwidth 1,000,000).

use std::cell::RefCell;
use std::rc::Rc;

use qoslab_engine::{Call, Op, RngStream};

use super::{App, AppCall, Next, PreFile};

/// Varmail's variables (`set $...` in the personality), Filebench's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarmailSpec {
    pub nfiles: u32,
    pub meanfilesize: u64,
    pub nthreads: u32,
    pub iosize: u64,
    pub meanappendsize: u64,
    /// Percent of the files that exist when the run starts (`prealloc`).
    pub prealloc: u32,
    /// The name of the fileset's first file (`Request::file`).
    pub first_name: u32,
}

impl Default for VarmailSpec {
    fn default() -> Self {
        VarmailSpec {
            nfiles: 1000,
            meanfilesize: 16 << 10,
            nthreads: 16,
            iosize: 1 << 20,
            meanappendsize: 16 << 10,
            prealloc: 80,
            first_name: 1,
        }
    }
}

pub const FLOWOPS: &[&str] = &[
    "deletefile1",
    "createfile2",
    "appendfilerand2",
    "fsyncfile2",
    "closefile2",
    "openfile3",
    "readfile3",
    "appendfilerand3",
    "fsyncfile3",
    "closefile3",
    "openfile4",
    "readfile4",
    "closefile4",
];

/// The fileset the threads share: which entries exist, their sizes, who has them open.
#[derive(Debug)]
pub struct FileSet {
    spec: VarmailSpec,
    exists: Vec<bool>,
    size: Vec<u64>,
    open: Vec<u32>,
    rng: RngStream,
}

impl FileSet {
    /// The fileset as Filebench populates it: each entry exists with probability `prealloc`
    /// percent, at `meanfilesize` bytes.
    pub fn new(spec: VarmailSpec, seed: u64) -> Rc<RefCell<FileSet>> {
        let mut rng = RngStream::new(seed, "varmail-fileset");
        let exists: Vec<bool> = (0..spec.nfiles)
            .map(|_| rng.below(100) < u64::from(spec.prealloc))
            .collect();
        let size = exists
            .iter()
            .map(|&e| if e { spec.meanfilesize } else { 0 })
            .collect();
        Rc::new(RefCell::new(FileSet {
            open: vec![0; spec.nfiles as usize],
            spec,
            exists,
            size,
            rng,
        }))
    }

    /// The files that exist before the run.
    pub fn preallocated(&self) -> Vec<PreFile> {
        (0..self.spec.nfiles)
            .filter(|&i| self.exists[i as usize])
            .map(|i| PreFile {
                name: self.spec.first_name + i,
                size: self.size[i as usize],
            })
            .collect()
    }

    /// A random entry that exists (or not), as `fileset_pick` draws one.
    fn pick(&mut self, exists: bool) -> Option<usize> {
        let n = self.exists.len();
        let candidates = self.exists.iter().filter(|&&e| e == exists).count();
        if candidates == 0 {
            return None;
        }
        let k = self.rng.below(candidates as u64) as usize;
        (0..n).filter(|&i| self.exists[i] == exists).nth(k)
    }
}

/// One Varmail thread.
pub struct Varmail {
    set: Rc<RefCell<FileSet>>,
    rng: RngStream,
    step: usize,
    /// The entry open on fd 1.
    fd: Option<usize>,
    /// readwholefile: the next offset, or `None` once the read at the end is given.
    read_at: Option<u64>,
    /// What the call given does to the fileset when it returns.
    effect: Effect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    None,
    Deleted(usize),
    Created(usize),
    Appended(usize, u64),
    Closed(usize),
}

impl Varmail {
    pub fn new(set: Rc<RefCell<FileSet>>, seed: u64, thread: u32) -> Self {
        Varmail {
            set,
            rng: RngStream::new(seed, &format!("varmail-thread-{thread}")),
            step: 0,
            fd: None,
            read_at: None,
            effect: Effect::None,
        }
    }

    fn name(&self, entry: usize) -> u32 {
        self.set.borrow().spec.first_name + entry as u32
    }

    fn advance(&mut self) {
        self.step = (self.step + 1) % FLOWOPS.len();
    }

    fn append(&mut self, op: u8) -> Next {
        let spec = self.set.borrow().spec;
        let Some(e) = self.fd else {
            self.advance();
            return Next::Counted(op);
        };
        let len = self.rng.below(spec.meanappendsize.max(1));
        self.advance();
        if len == 0 {
            return Next::Counted(op);
        }
        let mut c = AppCall::new(Call::Io, Op::Write, self.name(e), op);
        c.offset = self.set.borrow().size[e];
        c.len = len;
        self.effect = Effect::Appended(e, len);
        Next::Call(c)
    }
}

impl App for Varmail {
    fn operations(&self) -> &'static [&'static str] {
        FLOWOPS
    }

    fn next(&mut self) -> Next {
        let op = self.step as u8;
        self.effect = Effect::None;
        match self.step {
            0 => {
                self.advance();
                let picked = self.set.borrow_mut().pick(true);
                match picked {
                    // Filebench does not delete a file another thread has open.
                    Some(e) if self.set.borrow().open[e] == 0 => {
                        self.effect = Effect::Deleted(e);
                        Next::Call(AppCall::new(Call::Unlink, Op::Write, self.name(e), op))
                    }
                    _ => Next::Counted(op),
                }
            }
            1 => {
                self.advance();
                let picked = self.set.borrow_mut().pick(false);
                let Some(e) = picked else {
                    return Next::Counted(op);
                };
                self.fd = Some(e);
                self.set.borrow_mut().open[e] += 1;
                self.effect = Effect::Created(e);
                Next::Call(AppCall::new(Call::Create, Op::Write, self.name(e), op))
            }
            2 | 7 => self.append(op),
            3 | 8 => {
                self.advance();
                match self.fd {
                    Some(e) => Next::Call(AppCall::new(Call::Io, Op::Flush, self.name(e), op)),
                    None => Next::Counted(op),
                }
            }
            4 | 9 | 12 => {
                self.advance();
                match self.fd.take() {
                    Some(e) => {
                        self.effect = Effect::Closed(e);
                        Next::Call(AppCall::new(Call::Close, Op::Read, self.name(e), op))
                    }
                    None => Next::Counted(op),
                }
            }
            5 | 10 => {
                self.advance();
                let picked = self.set.borrow_mut().pick(true);
                let Some(e) = picked else {
                    return Next::Counted(op);
                };
                self.fd = Some(e);
                self.set.borrow_mut().open[e] += 1;
                Next::Call(AppCall::new(Call::Open, Op::Read, self.name(e), op))
            }
            _ => {
                // readwholefile: iosize at a time from the start, then a read at the end.
                let Some(e) = self.fd else {
                    self.advance();
                    return Next::Counted(op);
                };
                let (size, iosize) = {
                    let s = self.set.borrow();
                    (s.size[e], s.spec.iosize)
                };
                let at = self.read_at.unwrap_or(0);
                let mut c = AppCall::new(Call::Io, Op::Read, self.name(e), op);
                c.offset = at;
                c.len = iosize.min(size.saturating_sub(at));
                if c.len == 0 {
                    // The read that finds the end: the flowop is done.
                    c.len = iosize;
                    self.read_at = None;
                    self.advance();
                } else {
                    self.read_at = Some(at + c.len);
                    c.last = false;
                }
                Next::Call(c)
            }
        }
    }

    fn done(&mut self, ok: bool) {
        let mut set = self.set.borrow_mut();
        match self.effect {
            Effect::Deleted(e) if ok => {
                set.exists[e] = false;
                set.size[e] = 0;
            }
            Effect::Created(e) if ok => {
                set.exists[e] = true;
                set.size[e] = 0;
            }
            Effect::Appended(e, len) if ok => set.size[e] += len,
            Effect::Closed(e) => set.open[e] -= 1,
            _ => {}
        }
        self.effect = Effect::None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_loops_over_the_thirteen_flowops_and_reads_whole_files() {
        let spec = VarmailSpec {
            nfiles: 20,
            ..VarmailSpec::default()
        };
        let set = FileSet::new(spec, 7);
        let pre = set.borrow().preallocated();
        assert!(
            (10..=20).contains(&pre.len()),
            "about 80 % of 20: {}",
            pre.len()
        );
        assert!(pre.iter().all(|f| f.size == 16 << 10));
        let mut t = Varmail::new(set.clone(), 7, 0);
        let mut ops = Vec::new();
        let mut calls = Vec::new();
        while ops.len() < 2 * FLOWOPS.len() {
            match t.next() {
                Next::Call(c) => {
                    calls.push(c);
                    if c.last {
                        ops.push(c.operation);
                    }
                    t.done(true);
                }
                Next::Counted(op) => ops.push(op),
                Next::Wait | Next::Done => unreachable!(),
            }
        }
        let expected: Vec<u8> = (0..FLOWOPS.len() as u8)
            .chain(0..FLOWOPS.len() as u8)
            .collect();
        assert_eq!(ops, expected);
        // The whole-file read of a 16 KiB file: one read of 16 KiB, one at the end.
        let reads: Vec<&AppCall> = calls
            .iter()
            .filter(|c| c.op == Op::Read && c.call == Call::Io)
            .collect();
        assert!(reads.iter().any(|c| c.len == 16 << 10 && !c.last));
        // Appends go to the end of the file created just before.
        let created = calls.iter().find(|c| c.call == Call::Create).unwrap().file;
        let first_append = calls
            .iter()
            .find(|c| c.op == Op::Write && c.call == Call::Io);
        if let Some(a) = first_append.filter(|a| a.file == created) {
            assert_eq!(a.offset, 0);
            assert!(a.len < 16 << 10);
        }
    }
}
