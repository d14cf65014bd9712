//! Crash views (`qoslab_sim::crash_views`), the fast path of the Rio study's power cuts: every
//! cut of a run read during that one run, the run going on. Each must equal a real, destructive
//! cut at the same moment of a fresh run (`--power-fail-at`): the same crash image, so the same
//! `qoslab.recovery` field for field (prefix, acknowledged writes lost, entries read, rebuild
//! and data-recovery time, every stream's outcome and violations).

use qoslab_sim::device::preset_text;

use crate::common::{options, run_json, stage};

/// The Rio study's workload (`qoslab.rio.chain.job_text`): each thread one ordered stream of
/// 4 KiB random writes, no fsync.
fn job(ordering: &str, threads: u32, writes: u32, iodepth: u32) -> String {
    format!(
        "[w]\nbs=4k\nrw=randwrite\nnorandommap=1\niodepth={iodepth}\nnumber_ios={writes}\nnumjobs={threads}\nordering={ordering}\n"
    )
}

/// Cuts `ordering`'s job on `preset` at `n` moments between a fifth and four fifths of its run,
/// both ways, and compares. Returns how many of the cuts found requests in flight (a cut that
/// finds none would compare images with nothing to recover).
fn both_ways(preset: &str, sets: &[&str], job: &str, n: u64) -> usize {
    let device = preset_text(preset).unwrap();
    let mut sets: Vec<&str> = sets.to_vec();
    sets.push("fabric.targets=2");
    let opts = options(job, device, &sets, 1);
    let end = run_json(&opts)["qoslab"]["simulated_ns"].as_u64().unwrap();
    let at: Vec<u64> = (0..n).map(|i| end / 5 + i * (end * 3 / 5) / n).collect();
    let (views, view_run_events) = qoslab_sim::crash_views(&opts, &at).unwrap();
    assert_eq!(views.len(), at.len());
    let mut busy = 0;
    for (t, view) in at.iter().zip(&views) {
        let mut cut = opts.clone();
        cut.power_fail_at_ns = Some(*t);
        let report = run_json(&cut);
        let mut slow = report["qoslab"]["recovery"].clone();
        slow.as_object_mut().unwrap().remove("seed");
        let fast = serde_json::to_value(&view.recovery).unwrap();
        assert_eq!(fast, slow, "{preset} {sets:?}, cut at {t} ns of {end}");
        // The view comes before any event at its moment, as the cut's PowerFail does.
        assert!(view.events < report["qoslab"]["events"].as_u64().unwrap());
        let streams = slow["streams"].as_array().unwrap();
        let acked: u64 = streams
            .iter()
            .map(|s| s["acknowledged"].as_u64().unwrap())
            .sum();
        let requests: u64 = streams
            .iter()
            .map(|s| s["requests"].as_u64().unwrap())
            .sum();
        busy += usize::from(requests > acked);
    }
    // The run stops at its last view.
    assert_eq!(view_run_events, views.last().unwrap().events);
    busy
}

#[test]
fn a_crash_view_recovers_what_a_real_power_cut_at_that_moment_leaves() {
    for ordering in ["rio", "horae", "flush", "none"] {
        // Optane (PLP): the logs recycle as writes complete.
        let busy = both_ways("rio-optane", &[], &job(ordering, 4, 64, 32), 4);
        assert!(
            busy > 0,
            "rio-optane {ordering}: no cut found anything in flight"
        );
        // Flash without PLP: completed writes in the drives' caches, lost at a cut.
        let busy = both_ways("rio-flash", &[], &job(ordering, 4, 64, 32), 4);
        assert!(
            busy > 0,
            "rio-flash {ordering}: no cut found anything in flight"
        );
    }
}

/// The study's setup in little (section 6.5: threads issuing without waiting, no fsync, two
/// flash targets): a small PMR fills, so the cuts find the stack's forced FLUSHes and logs that
/// wrapped.
#[test]
fn crash_views_equal_real_cuts_with_full_logs() {
    let sets = ["fabric.pmr_bytes=64KiB"];
    for ordering in ["rio", "horae"] {
        let job = job(ordering, 8, 1024, 128);
        let device = preset_text("rio-flash").unwrap();
        let end = run_json(&options(
            &job,
            device,
            &[&sets[..], &["fabric.targets=2"]].concat(),
            1,
        ));
        let forced = stage(&end, "block")["ordered_forced_flushes"]
            .as_f64()
            .unwrap();
        assert!(forced > 0.0, "{ordering}: the logs never filled");
        let busy = both_ways("rio-flash", &sets, &job, 5);
        assert!(busy > 0, "{ordering}: no cut found anything in flight");
    }
}

#[test]
fn a_crash_view_is_refused_where_it_cannot_be_read_without_cutting() {
    let device = preset_text("rio-flash").unwrap();
    let opts = options(&job("rio", 1, 8, 4), device, &["fabric.targets=2"], 1);
    let err = |opts: &qoslab_sim::SimOptions, at: &[u64]| {
        qoslab_sim::crash_views(opts, at).unwrap_err().to_string()
    };
    // After the run's end, out of order, none.
    assert!(err(&opts, &[u64::MAX / 4]).contains("the run ended at"));
    assert!(err(&opts, &[2000, 1000]).contains("in increasing order"));
    assert!(err(&opts, &[]).contains("in increasing order"));
    // Together with a real cut.
    let mut cut = opts.clone();
    cut.power_fail_at_ns = Some(1000);
    assert!(err(&cut, &[2000]).contains("leave out --power-fail-at"));
    // No target servers: nothing to recover.
    let plain = options(&job("rio", 1, 8, 4), device, &["fabric.targets=0"], 1);
    assert!(err(&plain, &[1000]).contains("no target servers"));
    // A drive model whose power failure cannot be read in advance (the ssd model).
    let ssd = "description = \"t\"\n[path]\ntransport = \"rdma\"\n[fabric]\ntargets = 2\n[media]\nmodel = \"ssd\"\n";
    let opts = options(&job("rio", 1, 8, 4), ssd, &[], 1);
    assert!(err(&opts, &[1000]).contains("cannot say what a power cut would take"));
}
