//! The one plug-in idiom: every choice a device file makes by name (a block scheduler, an NVMe
//! arbiter, a GC victim policy, ...) is a plug-in of some kind, in the spirit of Linux's
//! `struct elevator_type` and fio's `struct ioengine_ops`:
//! - a kind is an ops table declared once with [`plugin_ops!`](crate::plugin_ops) (name, help,
//!   the stage contract it was written for, its tunables, the kind's capability fields, the
//!   required constructor) and a trait with the kind's hooks, most with defaults;
//! - a plug-in is one file: its hooks and its table, declared with [`plugin!`](crate::plugin)
//!   (name, help, capabilities, its typed tunables and its constructor);
//! - a registry is one line, a `pub static` slice of the kind's ops tables (`ARBITERS`, `GATES`,
//!   ...), searched by [`lookup`], which refuses a plug-in built for another contract or lacking
//!   its constructor ([`check_plugin`]) and names the choices when a name is unknown. Every
//!   registry's own test module runs [`registry_contract_test!`](crate::registry_contract_test)
//!   on it.
//!
//! The path builder asks a plug-in's capability fields, never its name.

use crate::stage::STAGE_API_VERSION;
use crate::tunable::{ConfigError, Tunable};

/// What a registry knows of a plug-in before it accepts it (fio's `check_engine_ops`): the
/// contract it was built for and the hooks it must have.
#[derive(Clone, Copy, Debug)]
pub struct PluginInfo {
    /// Kind of plug-in and its name, for the error (`arbiter 'wrr'`).
    pub kind: &'static str,
    pub name: &'static str,
    /// [`STAGE_API_VERSION`] when the plug-in was written.
    pub api_version: u32,
    /// Required hooks the plug-in does not provide.
    pub missing_hooks: &'static [&'static str],
}

/// Refuses a plug-in built against another contract or lacking a required hook.
pub fn check_plugin(p: &PluginInfo) -> Result<(), String> {
    if p.api_version != STAGE_API_VERSION {
        return Err(format!(
            "{} '{}' was built for stage API version {}, this simulator speaks version {}",
            p.kind, p.name, p.api_version, STAGE_API_VERSION
        ));
    }
    if let Some(h) = p.missing_hooks.first() {
        return Err(format!(
            "{} '{}' lacks the required hook '{h}'",
            p.kind, p.name
        ));
    }
    Ok(())
}

/// What a registry needs to know of a plug-in to find and check it. [`plugin_ops!`] writes it
/// for a kind's ops table.
///
/// [`plugin_ops!`]: crate::plugin_ops
pub trait Plugin: Sync + 'static {
    /// Kind and name for messages (`GC victim policy 'rga'`), contract and missing hooks.
    fn info(&self) -> PluginInfo;
    fn help(&self) -> &'static str;
    /// Its own tunables (its sub-table); none by default.
    fn tunables(&self) -> &'static [Tunable] {
        &[]
    }
}

/// The plug-in of `registry` called `name` (the value of key `field`, e.g.
/// `controller.arbitration`), checked against the stage contract.
pub fn lookup<P: Plugin>(
    registry: &[&'static P],
    field: &str,
    name: &str,
) -> Result<&'static P, ConfigError> {
    let ops = registry
        .iter()
        .find(|p| p.info().name == name)
        .ok_or_else(|| {
            ConfigError::new(format!(
                "field '{field}': expected one of {}, got '{name}'",
                names(registry).join(", ")
            ))
        })?;
    check_plugin(&ops.info()).map_err(ConfigError::new)?;
    Ok(ops)
}

/// The names of `registry`'s plug-ins, in registration order.
pub fn names<P: Plugin>(registry: &[&'static P]) -> Vec<&'static str> {
    registry.iter().map(|p| p.info().name).collect()
}

/// The word a key takes for "no plug-in of this kind" where none is a choice
/// (`[host] replicas`, `[cpu] model`): no stage or layer of the kind on the path.
pub const NONE: &str = "none";

/// [`lookup`] for a key that may also say [`NONE`]: `None` for it, and the choices the
/// error names begin with it.
pub fn lookup_or_none<P: Plugin>(
    registry: &[&'static P],
    field: &str,
    name: &str,
) -> Result<Option<&'static P>, ConfigError> {
    if name == NONE {
        return Ok(None);
    }
    if registry.iter().all(|p| p.info().name != name) {
        return Err(ConfigError::new(format!(
            "field '{field}': expected one of {}, got '{name}'",
            names_or_none(registry).join(", ")
        )));
    }
    lookup(registry, field, name).map(Some)
}

/// [`NONE`], then the names of `registry`'s plug-ins: what a key read by [`lookup_or_none`]
/// accepts.
pub fn names_or_none<P: Plugin>(registry: &[&'static P]) -> Vec<&'static str> {
    std::iter::once(NONE).chain(names(registry)).collect()
}

/// Declares a plug-in kind's ops table: the fields every kind has (name, help, contract
/// version, tunables, the required constructor), the kind's own capability fields, and its
/// [`Plugin`] impl. A macro rather than a generic struct because each kind's capability fields
/// differ and each plug-in's table is a plain `static` ([`plugin!`](crate::plugin) writes it).
/// A kind whose plug-ins are tables of data and plain functions (a completion order, an
/// ordered-write stack's checker rules) says `data` instead of its tunables and constructor.
///
/// ```
/// /// What a cable plug-in builds.
/// pub trait Cable {
///     fn delay_ns(&self) -> u64;
/// }
/// pub type BuildCable = fn(&qoslab_engine::Settings) -> Box<dyn Cable>;
///
/// qoslab_engine::plugin_ops! {
///     /// One cable, as the registry knows it.
///     pub struct CableOps: "cable", tunables "[cable.NAME]", build BuildCable {
///         /// Capability: it carries power too.
///         pub powered: bool,
///     }
/// }
/// ```
#[macro_export]
macro_rules! plugin_ops {
    (
        $(#[$meta:meta])*
        pub struct $ops:ident: $kind:literal, tunables $table:literal, build $build:ty {
            $($(#[$fmeta:meta])* pub $field:ident: $fty:ty,)*
        }
    ) => {
        $crate::plugin_ops!(@declare $(#[$meta])* $ops: $kind {
            #[doc = concat!("Its tunables, read from `", $table, "`.")]
            pub tunables: &'static [$crate::Tunable],
            $($(#[$fmeta])* pub $field: $fty,)*
            /// Builds it (required).
            pub build: Option<$build>,
        } missing(p) if p.build.is_none() { &["build"] } else { &[] }, tunables);
    };
    (
        $(#[$meta:meta])*
        pub struct $ops:ident: $kind:literal, data {
            $($(#[$fmeta:meta])* pub $field:ident: $fty:ty,)*
        }
    ) => {
        $crate::plugin_ops!(@declare $(#[$meta])*
            #[doc = ""]
            #[doc = "A kind whose plug-ins are data and hooks of the table itself: no constructor, no tunables."]
            $ops: $kind {
                $($(#[$fmeta])* pub $field: $fty,)*
            } missing(_p) &[]);
    };
    // The table every form declares and its `Plugin` impl: `missing` lists the required hooks
    // a plug-in lacks; a kind with tunables returns them.
    (
        @declare $(#[$meta:meta])* $ops:ident: $kind:literal {
            $($(#[$fmeta:meta])* pub $field:ident: $fty:ty,)*
        } missing($p:ident) $missing:expr $(, $tunables:ident)?
    ) => {
        $(#[$meta])*
        pub struct $ops {
            pub name: &'static str,
            pub help: &'static str,
            /// The stage contract the plug-in was written for.
            pub api_version: u32,
            $($(#[$fmeta])* pub $field: $fty,)*
        }

        impl $crate::Plugin for $ops {
            fn info(&self) -> $crate::PluginInfo {
                $crate::PluginInfo {
                    kind: $kind,
                    name: self.name,
                    api_version: self.api_version,
                    missing_hooks: {
                        let $p = self;
                        $missing
                    },
                }
            }
            fn help(&self) -> &'static str {
                self.help
            }
            $(
                fn $tunables(&self) -> &'static [$crate::Tunable] {
                    self.$tunables
                }
            )?
        }
    };
}

/// Declares one plug-in of a kind (an ops table of [`plugin_ops!`](crate::plugin_ops) with a
/// constructor) in one place: its `static` ops table (name, help, the kind's capability fields,
/// the stage contract this simulator speaks) and, when it has tunables, its typed tunable table,
/// a [`settings!`](crate::settings) struct read from the kind's sub-table, whose values the
/// constructor gets already read (`|setup, config| ...`). What stays the plug-in's own is what
/// differs: name, help, capabilities, tunables and what it builds. Its registry line is the
/// kind's list (`&rga::OPS`).
///
/// ```
/// pub trait Cable {
///     fn delay_ns(&self) -> u64;
/// }
/// pub struct CableSetup<'a> {
///     pub settings: &'a qoslab_engine::Settings,
/// }
/// pub type BuildCable = fn(&CableSetup<'_>) -> Box<dyn Cable>;
/// qoslab_engine::plugin_ops! {
///     pub struct CableOps: "cable", tunables "[cable.NAME]", build BuildCable {
///         pub powered: bool,
///     }
/// }
/// struct Fixed(u64);
/// impl Cable for Fixed {
///     fn delay_ns(&self) -> u64 {
///         self.0
///     }
/// }
///
/// qoslab_engine::plugin! {
///     pub static FIXED: CableOps = "fixed", "the same delay for every request", powered: false;
///     /// `[cable.fixed]`.
///     tunables struct FixedConfig in FIXED_TUNABLES {
///         delay_ns: u64 = ns(500, "time every request spends on the cable"),
///     }
///     build |_setup, config| Box::new(Fixed(config.delay_ns))
/// }
/// qoslab_engine::plugin! {
///     pub static NONE: CableOps = "none", "no delay", powered: true;
///     build |_setup| Box::new(Fixed(0))
/// }
///
/// let settings = qoslab_engine::Settings::defaults("cable.fixed", FIXED.tunables);
/// let cable = (FIXED.build.unwrap())(&CableSetup { settings: &settings });
/// assert_eq!(cable.delay_ns(), 500);
/// assert_eq!((NONE.tunables.len(), NONE.api_version), (0, qoslab_engine::STAGE_API_VERSION));
/// ```
#[macro_export]
macro_rules! plugin {
    (
        $(#[$meta:meta])*
        $vis:vis static $OPS:ident: $ops:ident = $name:literal, $help:literal
            $(, $cap:ident: $capv:expr)* ;
        $(#[$tmeta:meta])* tunables struct $Config:ident in $TABLE:ident { $($fields:tt)* }
        build |$setup:pat_param, $config:pat_param| $body:expr $(,)?
    ) => {
        $crate::settings! { $(#[$tmeta])* $vis struct $Config in $TABLE { $($fields)* } }

        $crate::plugin!(@ops $(#[$meta])* $vis $OPS $ops $name $help, $TABLE, [$($cap: $capv),*],
            |setup| {
                let $config = $Config::from_settings(setup.settings);
                let $setup = setup;
                $body
            });
    };
    (
        $(#[$meta:meta])*
        $vis:vis static $OPS:ident: $ops:ident = $name:literal, $help:literal
            $(, $cap:ident: $capv:expr)* ;
        build |$setup:pat_param| $body:expr $(,)?
    ) => {
        $crate::plugin!(@ops $(#[$meta])* $vis $OPS $ops $name $help, &[], [$($cap: $capv),*],
            |$setup| $body);
    };
    (
        @ops $(#[$meta:meta])* $vis:vis $OPS:ident $ops:ident $name:literal $help:literal,
        $tunables:expr, [$($cap:ident: $capv:expr),*], $build:expr
    ) => {
        $(#[$meta])*
        $vis static $OPS: $ops = $ops {
            name: $name,
            help: $help,
            api_version: $crate::STAGE_API_VERSION,
            tunables: $tunables,
            $($cap: $capv,)*
            build: Some($build),
        };
    };
}

/// Declares a registry of plug-ins that are types, not tables: the device models and the
/// transports, each a stage type the path is generic over, so that each gets its own statically
/// dispatched run loop. `$bound` is the kind's trait (with `NAME` and `API_VERSION` consts);
/// the macro writes the visitor trait (code generic over the kind's type), the function listing
/// the names, the one mapping a name to `visitor.visit::<T>()` (`None` for an unknown name)
/// and the one refusing a type written for another stage contract ([`check_plugin`]). A
/// plug-in of the kind is its type and one line in the list.
///
/// ```ignore
/// qoslab_engine::type_registry! {
///     /// Code that is generic over the device type.
///     pub trait ModelVisitor for DeviceModel, kind "device model";
///     names model_names, visit visit_model, check check_model;
///     [crate::AnalyticDevice, crate::Ssd]
/// }
/// ```
#[macro_export]
macro_rules! type_registry {
    (
        $(#[$meta:meta])*
        pub trait $visitor:ident for $bound:ident, kind $kind:literal;
        names $names:ident, visit $visit:ident, check $check:ident;
        [$($t:ty),* $(,)?]
    ) => {
        $(#[$meta])*
        pub trait $visitor {
            type Output;
            fn visit<T: $bound>(self) -> Self::Output;
        }

        #[doc = concat!("Names of every registered ", $kind, ", in registration order.")]
        pub fn $names() -> &'static [&'static str] {
            &[$(<$t as $bound>::NAME),*]
        }

        #[doc = concat!("Calls `visitor.visit::<T>()` for the ", $kind, " called `name`, or returns `None`.")]
        pub fn $visit<V: $visitor>(name: &str, visitor: V) -> Option<V::Output> {
            $(
                if name == <$t as $bound>::NAME {
                    return Some(visitor.visit::<$t>());
                }
            )*
            None
        }

        #[doc = concat!("Refuses ", $kind, " `T` if it was written for another version of the stage contract.")]
        pub fn $check<T: $bound>() -> Result<(), String> {
            $crate::check_plugin(&$crate::PluginInfo {
                kind: $kind,
                name: T::NAME,
                api_version: T::API_VERSION,
                missing_hooks: &[],
            })
        }
    };
}

/// The one contract test of a plug-in registry, for the registry's own test module: its
/// lookup refuses a plug-in written for another stage contract and one without its required
/// `build` hook, names the choices when a name is unknown, and accepts every registered
/// plug-in. The bad plug-ins are copies of `$valid`'s table (any registered one) with
/// `api_version` or `build` changed. The lookup is [`lookup`] of key `$field`, [`lookup_or_none`]
/// with `or_none` after the key, or `|reg, name| EXPR` for a registry with its own; a `data`
/// kind (no constructor) says `data` first.
///
/// ```ignore
/// qoslab_engine::registry_contract_test!(ArbiterOps, rr::OPS, ARBITERS, "controller.arbitration");
/// qoslab_engine::registry_contract_test!(CpuOps, ONE, CPUS, "cpu.model", or_none);
/// qoslab_engine::registry_contract_test!(data OrderOps, FIFO, ORDERS, "controller.completion_order");
/// ```
#[macro_export]
macro_rules! registry_contract_test {
    ($ops:ident, $valid:path, $registry:expr, $field:literal) => {
        $crate::registry_contract_test!($ops, $valid, $registry, $field, |reg, name| {
            $crate::plugin::lookup(reg, $field, name)
        });
    };
    ($ops:ident, $valid:path, $registry:expr, $field:literal, or_none) => {
        $crate::registry_contract_test!($ops, $valid, $registry, $field, |reg, name| {
            $crate::plugin::lookup_or_none(reg, $field, name)
        });
    };
    (data $ops:ident, $valid:path, $registry:expr, $field:literal) => {
        #[test]
        fn the_registry_refuses_another_contract_version() {
            $crate::registry_contract_test!(@check $ops, $valid, $registry, $field, [], |reg, name| {
                $crate::plugin::lookup(reg, $field, name)
            });
        }
    };
    ($ops:ident, $valid:path, $registry:expr, $field:literal, |$reg:ident, $name:ident| $lookup:expr) => {
        #[test]
        fn the_registry_refuses_another_contract_version_or_a_missing_hook() {
            static HOOKLESS: $ops = $ops {
                name: "hookless",
                build: None,
                ..$valid
            };
            $crate::registry_contract_test!(@check $ops, $valid, $registry, $field, [HOOKLESS], |$reg, $name| $lookup);
        }
    };
    (@check $ops:ident, $valid:path, $registry:expr, $field:literal, [$($hookless:ident)?], |$reg:ident, $name:ident| $lookup:expr) => {
        static FUTURE: $ops = $ops {
            name: "future",
            api_version: $crate::STAGE_API_VERSION + 1,
            ..$valid
        };
        let find = |$reg: &[&'static $ops], $name: &str| $lookup;
        let reg: &[&'static $ops] = &[&$valid, &FUTURE $(, &$hookless)?];
        assert!(find(reg, $valid.name).is_ok());
        let e = find(reg, "future").err().expect("refused").to_string();
        let version = format!(
            "'future' was built for stage API version {}, this simulator speaks version {}",
            $crate::STAGE_API_VERSION + 1,
            $crate::STAGE_API_VERSION
        );
        assert!(e.ends_with(&version), "{e}");
        $(
            let _ = &$hookless;
            let e = find(reg, "hookless").err().expect("refused").to_string();
            assert!(
                e.ends_with("'hookless' lacks the required hook 'build'"),
                "{e}"
            );
        )?
        let e = find(reg, "nonesuch").err().expect("refused").to_string();
        assert!(
            e.starts_with(concat!("field '", $field, "': expected one of ")),
            "{e}"
        );
        let listed = reg.iter().skip(1).map(|p| p.name).collect::<Vec<_>>().join(", ");
        assert!(e.ends_with(&format!(", {listed}, got 'nonesuch'")), "{e}");
        for p in $registry {
            assert!(find($registry, p.name).is_ok(), "{}", p.name);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::{Plugin, lookup, lookup_or_none, names, names_or_none};

    pub type BuildToy = fn() -> u32;

    crate::plugin_ops! {
        /// A registry of the smallest kind, to check the idiom and the contract test itself.
        pub struct ToyOps: "toy", tunables "[toy.NAME]", build BuildToy {
            /// A capability field.
            pub big: bool,
        }
    }

    static ONE: ToyOps = ToyOps {
        name: "one",
        help: "builds 1",
        api_version: crate::STAGE_API_VERSION,
        tunables: &[],
        big: false,
        build: Some(|| 1),
    };

    static TWO: ToyOps = ToyOps {
        name: "two",
        help: "builds 2",
        big: true,
        build: Some(|| 2),
        ..ONE
    };

    static TOYS: &[&ToyOps] = &[&ONE, &TWO];

    crate::registry_contract_test!(ToyOps, ONE, TOYS, "toy.kind");

    mod or_none {
        use super::{ONE, TOYS, ToyOps};

        crate::registry_contract_test!(ToyOps, ONE, TOYS, "toy.kind", or_none);
    }

    crate::plugin_ops! {
        /// A kind whose plug-ins are data: no constructor, no tunables.
        pub struct RuleOps: "rule", data {
            pub weight: u32,
        }
    }

    static LIGHT: RuleOps = RuleOps {
        name: "light",
        help: "weighs 1",
        api_version: crate::STAGE_API_VERSION,
        weight: 1,
    };

    static RULES: &[&RuleOps] = &[&LIGHT];

    mod data {
        use super::{LIGHT, RULES, RuleOps};

        crate::registry_contract_test!(data RuleOps, LIGHT, RULES, "rule.kind");

        #[test]
        fn a_data_plugin_is_found_by_name_with_its_fields() {
            let light = crate::lookup(RULES, "rule.kind", "light").unwrap();
            assert_eq!(light.weight, 1);
        }
    }

    /// A kind whose plug-ins are types.
    pub trait Shape {
        const NAME: &'static str;
        const API_VERSION: u32;
        fn sides() -> u32;
    }

    struct Triangle;
    impl Shape for Triangle {
        const NAME: &'static str = "triangle";
        const API_VERSION: u32 = crate::STAGE_API_VERSION;
        fn sides() -> u32 {
            3
        }
    }

    struct Square;
    impl Shape for Square {
        const NAME: &'static str = "square";
        const API_VERSION: u32 = crate::STAGE_API_VERSION;
        fn sides() -> u32 {
            4
        }
    }

    struct Ancient;
    impl Shape for Ancient {
        const NAME: &'static str = "ancient";
        const API_VERSION: u32 = 1;
        fn sides() -> u32 {
            0
        }
    }

    crate::type_registry! {
        /// Code generic over the shape.
        pub trait ShapeVisitor for Shape, kind "shape";
        names shape_names, visit visit_shape, check check_shape;
        [Triangle, Square]
    }

    #[test]
    fn a_type_registry_maps_a_name_to_its_type_and_refuses_another_contract() {
        struct Sides;
        impl ShapeVisitor for Sides {
            type Output = u32;
            fn visit<T: Shape>(self) -> u32 {
                T::sides()
            }
        }
        assert_eq!(shape_names(), ["triangle", "square"]);
        assert_eq!(visit_shape("square", Sides), Some(4));
        assert_eq!(visit_shape("triangle", Sides), Some(3));
        assert_eq!(visit_shape("circle", Sides), None);
        assert!(check_shape::<Square>().is_ok());
        assert_eq!(
            check_shape::<Ancient>().unwrap_err(),
            format!(
                "shape 'ancient' was built for stage API version 1, this simulator speaks version {}",
                crate::STAGE_API_VERSION
            )
        );
    }

    #[test]
    fn a_key_that_may_say_none_gets_no_plugin_for_it_and_names_it_first() {
        assert!(lookup_or_none(TOYS, "toy.kind", "none").unwrap().is_none());
        let two = lookup_or_none(TOYS, "toy.kind", "two").unwrap().unwrap();
        assert!(std::ptr::eq(two, &TWO));
        assert_eq!(names_or_none(TOYS), ["none", "one", "two"]);
        assert_eq!(
            lookup_or_none(TOYS, "toy.kind", "three")
                .err()
                .unwrap()
                .to_string(),
            "field 'toy.kind': expected one of none, one, two, got 'three'"
        );
        // Without `or_none` the word is a name like any other.
        assert!(lookup(TOYS, "toy.kind", "none").is_err());
    }

    #[test]
    fn a_registry_finds_a_plugin_by_name_and_the_caller_asks_its_capabilities() {
        let two = lookup(TOYS, "toy.kind", "two").unwrap();
        assert!(std::ptr::eq(two, &TWO));
        assert!(two.big && !ONE.big);
        assert_eq!((two.build.unwrap())(), 2);
        assert_eq!(names(TOYS), ["one", "two"]);
        let info = two.info();
        assert_eq!(
            (info.kind, info.name, two.help()),
            ("toy", "two", "builds 2")
        );
        assert_eq!(
            lookup(TOYS, "toy.kind", "three").err().unwrap().to_string(),
            "field 'toy.kind': expected one of one, two, got 'three'"
        );
    }
}
