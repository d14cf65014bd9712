//! The one list of device models a device file can name.
//!
//! The simulator is generic over the device type, so each model gets its own statically
//! dispatched run loop; this registry maps a name to that type through a visitor. Adding a
//! model means adding one line to `models!` below and nothing elsewhere.

use crate::DeviceModel;

/// Code that is generic over the device type (e.g. "build this model and run a simulation").
pub trait ModelVisitor {
    type Output;
    fn visit<D: DeviceModel>(self) -> Self::Output;
}

macro_rules! models {
    ($($model:ty),* $(,)?) => {
        /// Names of every registered model, in registration order.
        pub fn model_names() -> &'static [&'static str] {
            &[$(<$model as DeviceModel>::NAME),*]
        }

        /// Calls `visitor.visit::<Model>()` for the model called `name`, or returns `None`.
        pub fn visit_model<V: ModelVisitor>(name: &str, visitor: V) -> Option<V::Output> {
            $(
                if name == <$model as DeviceModel>::NAME {
                    return Some(visitor.visit::<$model>());
                }
            )*
            None
        }
    };
}

models!(
    crate::AnalyticDevice,
    crate::EmpiricalDevice,
    crate::Ssd,
    crate::Hdd
);

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
