//! Adding an arbiter is one new file and one registry line: `oldest_head.rs` is the file (the
//! same text docs/architecture.md shows), the slice below the registry with its line added.
//! The controller then fetches by it, and the registry's checks apply to it.

mod oldest_head;

use qoslab_engine::{Chain, Harness, Null, Op, Request, Settings};
use qoslab_nvme::arbiter::{ARBITERS, ArbiterOps, ArbiterSetup, lookup_in, rr};
use qoslab_nvme::{ControllerConfig, ControllerSetup, NvmeController, QueueLayout};

/// The registry with the new line.
fn registry() -> Vec<&'static ArbiterOps> {
    let mut r: Vec<&'static ArbiterOps> = ARBITERS.to_vec();
    r.push(&oldest_head::OPS);
    r
}

/// A controller over two SQs (one core each) that holds one command at a time, over a device
/// taking 10 us per command, with the arbiter called `name`.
fn controller(name: &str) -> Harness<Chain<NvmeController, Null>> {
    let ops = lookup_in(&registry(), name).unwrap();
    let mut cfg = ControllerConfig::defaults();
    cfg.max_outstanding = 1;
    let settings = Settings::defaults("controller.x", ops.tunables);
    let arbiter = (ops.build.unwrap())(&ArbiterSetup {
        burst: 1,
        settings: &settings,
    });
    let ctrl = NvmeController::new(
        cfg,
        ControllerSetup {
            layout: QueueLayout::new(&[2], false),
            cq_depth: 1024,
            arbiter,
            order: qoslab_nvme::order::lookup("device").unwrap(),
            transport_foldable: false,
            seed: 1,
        },
    );
    Harness::new(Chain::new(ctrl, Null::new(10_000)))
}

/// Commands on SQ 1 at 0 and 1 us, on SQ 0 at 2 and 3 us: the order they reach the media.
fn fetch_order(name: &str) -> Vec<u16> {
    let mut h = controller(name);
    for (at, sq) in [(0, 1), (1_000, 1), (2_000, 0), (3_000, 0)] {
        let mut r = Request::new(Op::Read, 0, 4096, 0, at);
        r.hwq = sq;
        r.t.arrived_ns = at;
        h.submit_at(at, r);
    }
    h.run_all();
    let mut done: Vec<_> = h
        .completed
        .iter()
        .map(|&(id, t)| (t, h.reqs[id].hwq))
        .collect();
    done.sort();
    done.into_iter().map(|(_, sq)| sq).collect()
}

#[test]
fn the_controller_fetches_by_the_new_arbiter() {
    // Round robin alternates once both queues have commands; oldest head first serves SQ 1's
    // second command (waiting since 1 us) before SQ 0's first (since 2 us).
    assert_eq!(fetch_order("rr"), vec![1, 0, 1, 0]);
    assert_eq!(fetch_order("oldest-head"), vec![1, 1, 0, 0]);
}

#[test]
fn the_new_arbiter_passes_the_registrys_checks() {
    assert!(lookup_in(&registry(), "oldest-head").is_ok());
    assert!(lookup_in(&[&rr::OPS], "oldest-head").is_err());
}

#[test]
fn the_architecture_guide_shows_this_file() {
    let guide = include_str!("../../../docs/architecture.md");
    assert!(guide.contains(include_str!("oldest_head.rs")));
}
