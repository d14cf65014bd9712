//! The event kernel of qoslab's timed simulator.
//!
//! Kept deliberately small: simulated time, a deterministic event queue, named random streams,
//! the request every stage shares, the hooks a stage implements, the plug-in idiom, statistics,
//! and tunable tables. Models (queues, devices, schedulers) live in their own crates and only use these.

pub mod chain;
pub mod control;
pub mod divisor;
pub mod error;
pub mod fanout;
pub mod harness;
pub mod order;
pub mod plugin;
pub mod queue;
pub mod request;
pub mod rng;
pub mod series;
pub mod stage;
pub mod stats;
pub mod time;
pub mod tunable;
pub mod units;

pub use chain::{Chain, Handoff, Link};
pub use control::{Command, Control, ControlStatus, Dma, LostWrite, Notice, Payload, Transfer};
pub use divisor::Divisor;
pub use error::InputError;
pub use fanout::{Fanout, FanoutEvent, Stripe};
pub use harness::{Done, Harness, Null, OverNull};
pub use order::{OrderAttr, OrderMsg, OrderOp};
pub use plugin::{Plugin, PluginInfo, check_plugin, lookup};
pub use queue::EventQueue;
pub use request::{
    Call, IoPrio, IoPrioClass, IoStatus, Op, ReqFlags, ReqId, ReqTable, Request, Requests, Stamps,
};
pub use rng::RngStream;
pub use series::{IntervalRow, IntervalSeries};
pub use stage::{Admission, STAGE_API_VERSION, Stage, StageCtx, StageReport};
pub use stats::{LatencyHist, Moments};
pub use time::Ns;
pub use tunable::{ConfigDoc, ConfigError, RawValue, Settings, Tunable, Unit, Value};
