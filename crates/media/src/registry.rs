//! The one list of device models a device file can name.
//!
//! The simulator is generic over the device type, so each model gets its own statically
//! dispatched run loop; this registry maps a name to that type through a visitor
//! (`qoslab_engine::type_registry!`, shared with the transports). Adding a model means adding
//! one line to the list below and nothing elsewhere.

use crate::DeviceModel;

qoslab_engine::type_registry! {
    /// Code that is generic over the device type (e.g. "build this model and run a simulation").
    pub trait ModelVisitor for DeviceModel, kind "device model";
    names model_names, visit visit_model, check check_model;
    [
        crate::AnalyticDevice,
        crate::EmpiricalDevice,
        crate::Ssd,
        crate::Hdd,
        crate::NullDevice,
        crate::CachedDrive,
    ]
}

/// (name, help, tunables) of the model called `name`.
pub fn model_info(
    name: &str,
) -> Option<(
    &'static str,
    &'static str,
    &'static [qoslab_engine::Tunable],
)> {
    struct Info;
    impl ModelVisitor for Info {
        type Output = (
            &'static str,
            &'static str,
            &'static [qoslab_engine::Tunable],
        );
        fn visit<D: DeviceModel>(self) -> Self::Output {
            (D::NAME, D::HELP, D::TUNABLES)
        }
    }
    visit_model(name, Info)
}

/// The plug-in sub-tables of the model called `name`.
pub fn model_sub_tables(name: &str) -> Option<Vec<crate::SubTable>> {
    struct Subs;
    impl ModelVisitor for Subs {
        type Output = Vec<crate::SubTable>;
        fn visit<D: DeviceModel>(self) -> Self::Output {
            D::sub_tables()
        }
    }
    visit_model(name, Subs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model written for the previous contract.
    struct Old;
    impl qoslab_engine::Stage for Old {
        type Event = ();
        fn name(&self) -> &'static str {
            "old"
        }
        fn submit(&mut self, _: qoslab_engine::ReqId, _: &mut impl qoslab_engine::StageCtx<()>) {}
        fn on_event(&mut self, _: (), _: &mut impl qoslab_engine::StageCtx<()>) {}
    }
    impl crate::Device for Old {
        fn capacity_bytes(&self) -> u64 {
            0
        }
    }
    impl DeviceModel for Old {
        const NAME: &'static str = "old";
        const HELP: &'static str = "written for version 1";
        const TUNABLES: &'static [qoslab_engine::Tunable] = &[];
        const API_VERSION: u32 = 1;
        fn build(
            _: &qoslab_engine::Settings,
            _: &crate::BuildCtx<'_>,
        ) -> Result<Self, qoslab_engine::ConfigError> {
            Ok(Old)
        }
    }

    #[test]
    fn a_model_written_for_another_contract_is_refused() {
        let e = check_model::<Old>().unwrap_err();
        assert!(
            e.starts_with("device model 'old' was built for stage API version 1"),
            "{e}"
        );
        struct Check;
        impl ModelVisitor for Check {
            type Output = Result<(), String>;
            fn visit<D: DeviceModel>(self) -> Self::Output {
                check_model::<D>()
            }
        }
        for name in model_names() {
            assert!(visit_model(name, Check).unwrap().is_ok(), "{name}");
        }
    }

    #[test]
    fn every_registered_name_resolves_to_its_model() {
        for name in model_names() {
            let (n, help, _) = model_info(name).unwrap();
            assert_eq!(n, *name);
            assert!(!help.is_empty());
        }
        assert!(model_info("no-such-model").is_none());
    }
}
