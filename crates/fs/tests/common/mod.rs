//! A device that records what reaches it, for the file system's tests.

#![allow(dead_code)]

use qoslab_engine::{
    Call, Chain, Harness, Ns, Op, RawValue, ReqFlags, ReqId, Request, Settings, Stage, StageCtx,
};
use qoslab_fs::{FS_TUNABLES, FsConfig, FsSetup, FsStage, JournalOps};

/// One request as the device saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub flags: ReqFlags,
    pub job: u32,
    pub at: Ns,
    pub done: Ns,
}

/// Completes every request `delay_ns` after it arrives (a FLUSH `flush_ns`), any number at
/// once, and keeps what it saw.
pub struct Disk {
    pub delay_ns: Ns,
    pub flush_ns: Ns,
    pub seen: Vec<Seen>,
    pending: Vec<(ReqId, usize)>,
}

impl Disk {
    pub fn new(delay_ns: Ns) -> Self {
        Disk {
            delay_ns,
            flush_ns: delay_ns,
            seen: Vec::new(),
            pending: Vec::new(),
        }
    }
}

impl Stage for Disk {
    type Event = ReqId;
    fn name(&self) -> &'static str {
        "disk"
    }
    fn submit(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        let now = ctx.now_ns();
        let r = ctx.reqs()[id];
        let d = if r.op == Op::Flush {
            self.flush_ns
        } else {
            self.delay_ns
        };
        self.seen.push(Seen {
            op: r.op,
            offset: r.offset_bytes,
            len: r.len_bytes,
            flags: r.flags,
            job: r.job,
            at: now,
            done: now + d,
        });
        ctx.schedule(now + d, id);
    }
    fn on_event(&mut self, id: ReqId, ctx: &mut impl StageCtx<ReqId>) {
        ctx.complete(id);
    }
}

pub const GIB: u64 = 1 << 30;

/// A value as a configuration file would hold it.
pub fn raw(v: &str) -> RawValue {
    if let Ok(b) = v.parse::<bool>() {
        RawValue::Bool(b)
    } else if let Ok(i) = v.parse::<i64>() {
        RawValue::Int(i)
    } else if let Ok(x) = v.parse::<f64>() {
        RawValue::Real(x)
    } else {
        RawValue::Text(v.to_string())
    }
}

pub fn fs_config(overrides: &[(&str, &str)]) -> FsConfig {
    let mut s = Settings::defaults("fs", FS_TUNABLES);
    for (k, v) in overrides {
        s.set(k, &raw(v)).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    FsConfig::from_settings(&s)
}

pub fn journal(name: &str, overrides: &[(&str, &str)]) -> Box<dyn qoslab_fs::Journal> {
    let ops: &JournalOps = qoslab_fs::journal::lookup(name).unwrap();
    let mut s = Settings::defaults(ops.name, ops.tunables);
    for (k, v) in overrides {
        s.set(k, &raw(v)).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    ops.build.unwrap()(&s)
}

pub type Bench = Harness<Chain<FsStage, Disk>>;

pub fn bench(
    cfg: FsConfig,
    jp: Box<dyn qoslab_fs::Journal>,
    setup: FsSetup,
    delay_ns: Ns,
) -> Bench {
    let fs = FsStage::new(cfg, jp, setup).unwrap();
    Harness::new(Chain::new(fs, Disk::new(delay_ns)))
}

/// A call of `job` on its core `job`.
pub fn call(op: Op, call: Call, file: u32, offset: u64, len: u64, job: u32, now: Ns) -> Request {
    let mut r = Request::new(op, offset, len, job, now);
    r.call = call;
    r.file = file;
    r.core = job as u16;
    r
}

/// Submits `r` and runs until it completes; its completion time.
pub fn sync_call(h: &mut Bench, r: Request) -> Ns {
    let id = h.submit(r).expect("the stage takes every call");
    let mut out = Vec::new();
    loop {
        assert!(h.step(&mut out), "the call never completed");
        if let Some(d) = out.iter().find(|d| d.id == id) {
            assert_eq!(d.status, qoslab_engine::IoStatus::Ok, "{r:?}");
            return d.done_ns;
        }
    }
}
