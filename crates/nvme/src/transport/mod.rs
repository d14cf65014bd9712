//! Transports: how commands, completions, interrupts and data cross between the NVMe hosts
//! and the controller. PCIe ([`pcie`]) and NVMe over fabrics ([`rdma`], [`tcp`], sharing
//! [`nvmeof`]). A transport is a stage between the host stage and the controller stage: it
//! carries commands down and completions and notices up, and moves data for the controller
//! through its `dma` hook.
//!
//! A transport declares what it guarantees as [`TransportCaps`]. With a fixed latency and in
//! order delivery, the time a command reaches the controller is known when it is sent, so the
//! transport stamps it (`arrived_ns`) and hands the command down at once; the controller may
//! then book its fetch early, and the host may compute a completion's handling time when the
//! controller finishes it. Those are the two speed folds; each has a differential test.
//!
//! A transport is a plug-in: a type implementing [`TransportModel`] and one line in the
//! `qoslab_engine::type_registry!` list below (the device models' idiom); the device file's
//! `[path] transport` names it.

pub mod link;
pub mod nvmeof;
pub mod pcie;
pub mod rdma;
pub mod tcp;

use qoslab_engine::{ConfigError, Settings, Stage, Tunable};

bitflags::bitflags! {
    /// What a transport guarantees (like fio's engine flags).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct TransportCaps: u32 {
        /// Every message takes a latency known when it is sent.
        const FIXED_LATENCY = 1 << 0;
        /// Messages between one host and the controller arrive in the order they were sent.
        const IN_ORDER = 1 << 1;
    }
}

impl TransportCaps {
    /// Whether arrival times may be computed at sending time (the speed folds).
    pub fn foldable(self) -> bool {
        self.contains(TransportCaps::FIXED_LATENCY | TransportCaps::IN_ORDER)
    }
}

/// A transport that a device file can name.
pub trait TransportModel: Stage + Sized {
    /// The name in `[path] transport = "..."`.
    const NAME: &'static str;
    const HELP: &'static str;
    /// The section its tunables are read from.
    const SECTION: &'static str;
    const TUNABLES: &'static [Tunable];
    /// The stage contract it was written for ([`qoslab_engine::STAGE_API_VERSION`]).
    const API_VERSION: u32;
    /// Builds the transport for `hosts` hosts.
    fn build(settings: &Settings, hosts: u16) -> Result<Self, ConfigError>;
    fn caps(&self) -> TransportCaps;
}

qoslab_engine::type_registry! {
    /// Code that is generic over the transport type.
    pub trait TransportVisitor for TransportModel, kind "transport";
    names transport_names, visit visit_transport, check check_transport;
    [pcie::Pcie, rdma::Rdma, tcp::Tcp]
}

/// A transport between hosts and target servers over a network (NVMe over fabrics): what its
/// operations cost, for the target servers' stages and recovery's messages.
pub trait FabricModel: TransportModel {
    fn costs(&self) -> nvmeof::FabricCosts;
    /// A target server stage below pulls write data itself (`Payload::TargetPull`) before
    /// the controller sees the command.
    fn pulled_by_target(&mut self);
}

/// Code that is generic over a fabric transport.
pub trait FabricVisitor {
    type Output;
    fn visit<T: FabricModel>(self) -> Self::Output;
}

/// Calls `visitor.visit::<T>()` for the fabric transport called `name`, or returns `None` (no
/// such transport, or one that is not a fabric).
pub fn visit_fabric<V: FabricVisitor>(name: &str, visitor: V) -> Option<V::Output> {
    macro_rules! fabrics {
        ($($t:ty),*) => {
            $(
                if name == <$t as TransportModel>::NAME {
                    return Some(visitor.visit::<$t>());
                }
            )*
        };
    }
    fabrics!(rdma::Rdma, tcp::Tcp);
    None
}

/// (name, help, section, tunables) of the transport called `name`.
pub fn transport_info(
    name: &str,
) -> Option<(&'static str, &'static str, &'static str, &'static [Tunable])> {
    struct Info;
    impl TransportVisitor for Info {
        type Output = (&'static str, &'static str, &'static str, &'static [Tunable]);
        fn visit<T: TransportModel>(self) -> Self::Output {
            (T::NAME, T::HELP, T::SECTION, T::TUNABLES)
        }
    }
    visit_transport(name, Info)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check itself (a type written for another contract refused) is the engine's
    /// `type_registry!` test; here every registered transport passes it.
    #[test]
    fn every_registered_transport_speaks_this_stage_contract() {
        struct Check;
        impl TransportVisitor for Check {
            type Output = Result<(), String>;
            fn visit<T: TransportModel>(self) -> Self::Output {
                check_transport::<T>()
            }
        }
        for name in transport_names() {
            assert_eq!(visit_transport(name, Check), Some(Ok(())), "{name}");
        }
        assert!(visit_transport("pcie-9", Check).is_none());
    }
}
