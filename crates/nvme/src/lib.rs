//! NVMe between the hosts and the media, as three kinds of stage:
//! - [`NvmeHost`]: the host drivers (command ids, SQ writes and doorbells, interrupts,
//!   timeouts, aborts, resets and requeues, MDTS splits), one or several hosts;
//! - a transport ([`transport`]): PCIe today, carrying commands, completions, interrupts and
//!   data between each host and the controller;
//! - [`NvmeController`]: fetch by arbitration, completion order, CQ posting, interrupt
//!   coalescing, reset.
//!
//! The arbiter, the completion order and the transport are plug-ins, each found by name in its
//! registry ([`arbiter::ARBITERS`], [`order::ORDERS`], [`transport::visit_transport`]).
//! Fixed costs (host CPU, doorbell, fetch, controller, CQ post, interrupt) are tunables, folded
//! into as few events as the order of events allows (see [`controller`]): a simulated I/O on
//! the default path costs three timed events.

pub mod arbiter;
pub mod config;
pub mod controller;
pub mod host;
pub mod layout;
pub mod order;
pub mod plm;
pub mod replicas;
pub mod rings;
pub mod transport;

pub use arbiter::{ARBITERS, Arbiter, ArbiterOps, SqView};
pub use config::{CONTROLLER_TUNABLES, ControllerConfig, HOST_TUNABLES, HostConfig, SqClass};
pub use controller::{ControllerEvent, ControllerSetup, NvmeController};
pub use host::{HostEvent, NvmeHost};
pub use layout::QueueLayout;
pub use order::{ORDERS, OrderOps};
pub use transport::pcie::{PCIE_TUNABLES, Pcie, PcieConfig};
pub use transport::{TransportCaps, TransportModel, TransportVisitor, visit_transport};
