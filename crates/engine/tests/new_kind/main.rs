//! A new kind of plug-in is one trait, one registry and one line in the path builder:
//! `cable.rs` is the kind (the same text docs/architecture.md shows), `path` below the path
//! builder with its line added. A device file's name then picks the plug-in, and the
//! registry's checks apply to it.

mod cable;

use cable::{CABLES, Cable, CableOps, CableSetup, FIXED};
use qoslab_engine::{Chain, ConfigError, Harness, Null, Op, Request, Settings};

/// The path builder: a cable over a device taking 10 us per command, the cable's delay the
/// plug-in the device file names in `cable.delay`.
fn path(delay: &str) -> Result<Harness<Chain<Cable, Null>>, ConfigError> {
    let ops = cable::lookup(delay)?;
    let settings = Settings::defaults(&format!("cable.{}", ops.name), ops.tunables);
    let cable = Cable {
        delay: (ops.build.unwrap())(&CableSetup {
            settings: &settings,
        }),
    };
    Ok(Harness::new(Chain::new(cable, Null::new(10_000))))
}

#[test]
fn the_device_files_name_picks_the_plugin_of_the_new_kind() {
    let mut h = path("fixed").unwrap();
    let id = h.submit_at(1_000, Request::new(Op::Read, 0, 4096, 0, 1_000));
    h.run_all();
    assert_eq!(h.completed, vec![(id, 1_000 + 500 + 10_000)]);
    assert!(!FIXED.per_byte);
}

#[test]
fn the_plugins_sub_table_sets_its_tunables() {
    let mut settings = Settings::defaults("cable.fixed", FIXED.tunables);
    qoslab_engine::tunable::apply_override("cable.fixed.delay_ns=2us", &mut [&mut settings])
        .unwrap();
    let delay = (FIXED.build.unwrap())(&CableSetup {
        settings: &settings,
    });
    let req = Request::new(Op::Read, 0, 4096, 0, 0);
    assert_eq!(delay.delay_ns(&req), 2_000);
}

#[test]
fn an_unknown_name_lists_the_kinds_plugins() {
    let e = path("coax").err().unwrap().to_string();
    assert_eq!(e, "field 'cable.delay': expected one of fixed, got 'coax'");
}

qoslab_engine::registry_contract_test!(CableOps, FIXED, CABLES, "cable.delay");

#[test]
fn the_architecture_guide_shows_this_file() {
    let guide = include_str!("../../../../docs/architecture.md");
    assert!(guide.contains(include_str!("cable.rs")));
}
