//! Job files as fio users write them, parsed end to end.

use std::path::{Path, PathBuf};

use qoslab_engine::{IoPrioClass, Op};
use qoslab_workload::fio::{
    Distribution, EngineClass, ExitWhat, FileService, RateProcess, RwPattern, SizeSpec,
    SteadyState, SubmitMode, ThinkBlocksType, Zone, ZoneExtent, parse_job_file,
    parse_job_file_after, parse_job_str,
};

fn no_env(_: &str) -> Option<String> {
    None
}

fn parse(text: &str) -> qoslab_workload::fio::JobFile {
    parse_job_str(text, Path::new("t.fio"), no_env).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(text: &str) -> String {
    parse_job_str(text, Path::new("t.fio"), no_env)
        .unwrap_err()
        .to_string()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qoslab-workload-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn global_options_apply_to_every_job_and_jobs_override_them() {
    let f = parse(
        "; a comment\n[global]\nbs=8k\niodepth=4\nsize=1g\n\n[a]\nrw=randread\n# another\n[b]\nrw=write\nbs=64k\niodepth=1 ; trailing\n",
    );
    assert_eq!(f.jobs.len(), 2);
    let (a, b) = (&f.jobs[0], &f.jobs[1]);
    assert_eq!(
        (a.name.as_str(), a.rw, a.bs, a.iodepth),
        ("a", RwPattern::RandRead, [8192; 3], 4)
    );
    assert_eq!(
        (b.name.as_str(), b.rw, b.bs, b.iodepth),
        ("b", RwPattern::Write, [65536; 3], 1)
    );
    assert_eq!(a.size, Some(SizeSpec::Bytes(1 << 30)));
    assert_eq!(
        f.global_options,
        vec![
            ("bs".to_string(), "8k".to_string()),
            ("iodepth".to_string(), "4".to_string()),
            ("size".to_string(), "1g".to_string()),
        ]
    );
    assert_eq!(
        b.options,
        vec![
            ("rw".to_string(), "write".to_string()),
            ("bs".to_string(), "64k".to_string()),
            ("iodepth".to_string(), "1".to_string()),
        ]
    );
    assert_eq!((a.index, b.index), (0, 1));
    assert_eq!(b.location.line, 10);
}

#[test]
fn every_listed_option_is_typed() {
    let f = parse(
        "[j]\nname=custom\nrw=randrw:8\nrwmixwrite=30\nbs=4k,16k\nbsrange=1k-4k\nbssplit=4k/50:1k/:32k/\nblockalign=8k\n\
         size=10%\noffset=1m\nfilesize=2g\nio_size=4g\nnumber_ios=1000\nruntime=2m\ntime_based\nramp_time=500ms\n\
         iodepth=32\niodepth_batch_submit=8\nnumjobs=4\nthinktime=10\nthinktime_blocks=4\nthinktime_blocks_type=issue\n\
         rate=1m,2m\nrate_iops=100\nrate_process=poisson\nrandom_distribution=zipf:1.2\nrandseed=42\n\
         prio=3\nprioclass=2\ncmdprio_percentage=10,20\nstonewall\nnew_group\ngroup_reporting\n\
         percentile_list=99.9:50:99\ndirect=1\nioengine=io_uring\nfilename=/dev/nvme0n1\nnorandommap\n",
    );
    let j = &f.jobs[0];
    assert_eq!(j.name, "custom");
    assert_eq!((j.rw, j.rw_modifier), (RwPattern::RandRw, Some(8)));
    assert_eq!(j.rwmixread, 70.0);
    assert_eq!(j.bs, [4096, 16384, 16384]);
    assert_eq!(j.bsrange, [Some((1024, 4096)); 3]);
    assert_eq!(
        j.bssplit[0],
        vec![(4096, 50.0), (1024, 25.0), (32768, 25.0)]
    );
    assert_eq!(j.blockalign, [Some(8192); 3]);
    assert_eq!(j.size, Some(SizeSpec::Percent(10.0)));
    assert_eq!(j.offset, SizeSpec::Bytes(1 << 20));
    assert_eq!(
        (j.filesize, j.io_size, j.number_ios),
        (Some(2 << 30), Some(4 << 30), Some(1000))
    );
    assert_eq!(
        (j.runtime_ns, j.time_based, j.ramp_time_ns),
        (Some(120_000_000_000), true, 500_000_000)
    );
    assert_eq!((j.iodepth, j.iodepth_batch_submit, j.numjobs), (32, 8, 4));
    assert_eq!(
        (j.thinktime_ns, j.thinktime_blocks, j.thinktime_blocks_type),
        (10_000, 4, ThinkBlocksType::Issue)
    );
    assert_eq!(
        j.rate_bytes_per_s,
        [Some(1 << 20), Some(2 << 20), Some(2 << 20)]
    );
    assert_eq!(j.rate_iops, [Some(100); 3]);
    assert_eq!(j.rate_process, RateProcess::Poisson);
    assert_eq!(
        j.random_distribution[0],
        Distribution::Zipf {
            theta: 1.2,
            center: None
        }
    );
    assert_eq!(j.randseed, Some(42));
    assert_eq!(
        (j.prio, j.prioclass),
        (Some(3), Some(IoPrioClass::BestEffort))
    );
    assert_eq!(j.cmdprio_percentage, [10.0, 20.0, 20.0]);
    assert!(j.stonewall && j.new_group && j.group_reporting && j.direct && j.norandommap);
    assert_eq!(j.percentile_list, vec![50.0, 99.0, 99.9]);
    assert_eq!(
        (j.ioengine.as_str(), j.filename.as_deref()),
        ("io_uring", Some("/dev/nvme0n1"))
    );
}

#[test]
fn zoned_distributions_keep_their_zones() {
    let f = parse(
        "[j]\nrw=randread\nsize=1g\nrandom_distribution=zoned:60/10:30/20:8/30:2/40\n[k]\nrw=randread\nsize=1g\nrandom_distribution=zoned_abs=60/20G:40/100G\n",
    );
    let Distribution::Zoned(z) = &f.jobs[0].random_distribution[0] else {
        panic!()
    };
    assert_eq!(
        z[0],
        Zone {
            access_pct: 60.0,
            extent: ZoneExtent::Percent(10.0)
        }
    );
    assert_eq!(z.len(), 4);
    let Distribution::Zoned(z) = &f.jobs[1].random_distribution[1] else {
        panic!()
    };
    assert_eq!(
        z[1],
        Zone {
            access_pct: 40.0,
            extent: ZoneExtent::Bytes(100 << 30)
        }
    );
}

#[test]
fn stonewall_and_new_group_start_reporting_groups_but_only_stonewall_waits() {
    let f = parse("[a]\n[b]\n[c]\nstonewall\n[d]\n[e]\nnew_group\n");
    let groups: Vec<u32> = f.jobs.iter().map(|j| j.group_id).collect();
    assert_eq!(groups, vec![0, 0, 1, 1, 2]);
    let run_groups: Vec<u32> = f.jobs.iter().map(|j| j.run_group).collect();
    assert_eq!(run_groups, vec![0, 0, 1, 1, 1]);
}

#[test]
fn environment_variables_expand_and_missing_ones_read_as_nothing_as_in_fio() {
    let env = |n: &str| match n {
        "SIZE" => Some("64m".to_string()),
        "NUMJOBS" => Some("4".to_string()),
        _ => None,
    };
    let f = parse_job_str(
        "[w]\nrw=randwrite\nsize=${SIZE}\nnumjobs=${NUMJOBS}\n",
        Path::new("t.fio"),
        env,
    )
    .unwrap();
    assert_eq!(
        (f.jobs[0].size, f.jobs[0].numjobs),
        (Some(SizeSpec::Bytes(64 << 20)), 4)
    );
    // fio 3.33 (options.c, fio_option_dup_subs) replaces an unset variable by nothing; the
    // file lists each one with its line, for the run's warning.
    let f = parse_job_str(
        "[w]\nrw=randread\ndescription=at ${NOPE}x\n",
        Path::new("t.fio"),
        env,
    )
    .unwrap();
    assert!(
        f.jobs[0]
            .options
            .contains(&("description".into(), "at x".into()))
    );
    let unset: Vec<(&str, u64)> = f
        .unset_env
        .iter()
        .map(|(n, l)| (n.as_str(), l.line))
        .collect();
    assert_eq!(unset, vec![("NOPE", 3)]);
    // An option the empty value leaves bad says why it is empty.
    let e = parse_job_str("[w]\nsize=${NOPE}\n", Path::new("t.fio"), env).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("t.fio:2: option 'size': "), "{text}");
    assert!(
        text.ends_with(" (environment variable 'NOPE' is not set: fio reads it as nothing)"),
        "{text}"
    );
}

#[test]
fn includes_pull_options_into_the_including_section() {
    let d = tmpdir("include");
    std::fs::write(d.join("glob-include.fio"), "thread=1\ngroup_reporting=1\n").unwrap();
    std::fs::write(d.join("test-include.fio"), "ioengine=libaio\niodepth=4\n").unwrap();
    std::fs::write(
        d.join("including.fio"),
        "[global]\nfilename=/tmp/test\nfilesize=1m\ninclude glob-include.fio\n\n[test]\nrw=randread\nbs=4k\ntime_based=1\nruntime=10\ninclude test-include.fio\n",
    )
    .unwrap();
    let f = parse_job_file(d.join("including.fio"), no_env).unwrap();
    let j = &f.jobs[0];
    assert!(j.group_reporting);
    assert_eq!(
        (j.ioengine.as_str(), j.iodepth, j.filesize),
        ("libaio", 4, Some(1 << 20))
    );
    assert_eq!(j.ignored.len(), 1, "thread is accepted and ignored");
    assert_eq!(j.ignored[0].0, "thread");

    std::fs::write(d.join("bad-include.fio"), "iodepth=x\n").unwrap();
    std::fs::write(d.join("outer.fio"), "[j]\ninclude bad-include.fio\n").unwrap();
    let e = parse_job_file(d.join("outer.fio"), no_env)
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("bad-include.fio:1: option 'iodepth': expected an integer between 1 and 65535, got 'x' (no number)"), "{e}");

    std::fs::write(d.join("loop.fio"), "[j]\ninclude loop2.fio\n").unwrap();
    std::fs::write(d.join("loop2.fio"), "include loop2.fio\n").unwrap();
    let e = parse_job_file(d.join("loop.fio"), no_env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("includes itself"), "{e}");
}

#[test]
fn bad_input_names_file_line_and_what_was_expected() {
    assert_eq!(
        parse_err("[j]\nbs=x\n"),
        "t.fio:2: option 'bs': expected a size like 4k, or read,write,trim sizes like 4k,8k, got 'x' (no number)"
    );
    assert_eq!(
        parse_err("[j]\nsize=4q\n"),
        "t.fio:2: option 'size': expected a size like 4k or a percentage like 20%, got '4q' (unknown unit 'q')"
    );
    assert_eq!(
        parse_err("[j]\n\niodepth=-1\n"),
        "t.fio:3: option 'iodepth': expected an integer between 1 and 65535, got '-1' (negative values are not allowed)"
    );
    assert_eq!(
        parse_err("[j]\nfoo=1\n"),
        "t.fio:2: unknown option 'foo' (see docs/workload.md for the options qoslab models)"
    );
    assert_eq!(
        parse_err("[j]\nzonemode=zbd\n"),
        "t.fio:2: option 'zonemode': 'zbd' is not simulated (zoned I/O: strided zones or a zoned block device)"
    );
    assert_eq!(
        parse_err("bs=4k\n[j]\n"),
        "t.fio:1: option 'bs' outside of a [section]"
    );
    assert_eq!(
        parse_err("[j]\nrw=randfoo\n").split(" (").last().unwrap(),
        "unknown pattern 'randfoo')"
    );
    assert_eq!(
        parse_err("[j]\nruntime=5sec\n"),
        "t.fio:2: option 'runtime': expected a time like 10s (us, ms, s, m, h, d; default unit s), got '5sec' (unit 'sec' is ambiguous: fio 3.33 reads it as microseconds; write s or m)"
    );
    assert_eq!(
        parse_err("[j]\nsize=1.5g\n"),
        "t.fio:2: option 'size': expected a size like 4k or a percentage like 20%, got '1.5g' (fractional values are not accepted (fio 3.33 would silently truncate them))"
    );
    assert_eq!(
        parse_err("[j]\ntime_based\n"),
        "t.fio:1: job 'j': time_based needs a runtime"
    );
    assert_eq!(
        parse_err("[j]\nrandom_distribution=zoned:60/10:30/90\n")
            .split(" (")
            .last()
            .unwrap(),
        "zone access percentages add up to 90, not 100)"
    );
    assert_eq!(
        parse_err("[j]\nbssplit=4k/60:8k/60\n")
            .split(" (")
            .last()
            .unwrap(),
        "percentages add up to 120, above 100)"
    );
    assert_eq!(
        parse_err("[global]\nprio=9\n"),
        "t.fio:2: option 'prio': expected an integer between 0 and 7, got '9'"
    );
    assert_eq!(
        parse_err("[global]\n"),
        "t.fio: no job sections (only [global] or nothing)"
    );
    assert_eq!(
        parse_err("[j\n"),
        "t.fio:1: section header '[j' lacks its closing ']'"
    );
    assert!(
        parse_job_file("/nonexistent/x.fio", no_env)
            .unwrap_err()
            .to_string()
            .starts_with("/nonexistent/x.fio: cannot read job file")
    );
    // The same line when command-line options come before the file.
    let after = parse_job_file_after(
        "[j]\n",
        Path::new("<cmdline>"),
        "/nonexistent/x.fio",
        no_env,
    );
    assert!(
        after
            .unwrap_err()
            .to_string()
            .starts_with("/nonexistent/x.fio: cannot read job file")
    );
}

#[test]
fn len_bounds_reflect_bs_bsrange_and_bssplit() {
    let f = parse("[a]\nbs=4k,64k\n[b]\nbsrange=1k-16k\n[c]\nbssplit=4k/50:128k/50\n");
    assert_eq!(f.jobs[0].len_bounds(Op::Write), (65536, 65536));
    assert_eq!(f.jobs[1].len_bounds(Op::Read), (1024, 16384));
    assert_eq!(f.jobs[2].len_bounds(Op::Read), (4096, 131072));
}

#[test]
fn a_mistyped_option_names_the_option_meant() {
    assert_eq!(
        parse_err("[j]\niodpeth=4\n"),
        "t.fio:2: unknown option 'iodpeth' (did you mean 'iodepth'? see docs/workload.md for the options qoslab models)"
    );
    assert_eq!(
        parse_err("[j]\nblocksze=4k\n"),
        "t.fio:2: unknown option 'blocksze' (did you mean 'blocksize'? see docs/workload.md for the options qoslab models)"
    );
}

#[test]
fn kb_base_is_read_first_wherever_the_section_writes_it() {
    let f = parse("[j]\nsize=1m\nbs=4k\nkb_base=1000\n[k]\nsize=1m\n");
    assert_eq!(f.jobs[0].size, Some(SizeSpec::Bytes(1_000_000)));
    assert_eq!(f.jobs[0].bs, [4000; 3]);
    assert_eq!(f.jobs[1].size, Some(SizeSpec::Bytes(1 << 20)));
    // The options are echoed as written.
    assert_eq!(f.jobs[0].options[2].0, "kb_base");
}

#[test]
fn sections_can_be_picked_and_their_groups_are_numbered_again() {
    let text = "[global]\nbs=8k\n[a]\n[b]\nstonewall\n[c]\nstonewall\n[d]\nnew_group\n";
    let f = parse(text)
        .only_sections(&["c".into(), "d".into()])
        .unwrap();
    let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["c", "d"]);
    assert_eq!((f.jobs[0].run_group, f.jobs[0].group_id), (0, 0));
    assert_eq!((f.jobs[1].run_group, f.jobs[1].group_id), (0, 1));
    assert_eq!(f.jobs[0].bs, [8192; 3], "[global] still applies");
    assert_eq!(
        f.jobs[0].index, 0,
        "numbered again, as fio numbers the jobs it runs"
    );
    let e = parse(text).only_sections(&["e".into()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.fio: --section: no job section 'e' (sections: a, b, c, d)"
    );
}

#[test]
fn log_options_name_their_prefix_or_default_to_the_job() {
    let f = parse("[j]\nwrite_lat_log=lat\nwrite_bw_log\nlog_avg_msec=100\n");
    let logs = &f.jobs[0].logs;
    assert_eq!(logs.lat.as_deref(), Some("lat"));
    assert_eq!(logs.bw.as_deref(), Some(""));
    assert_eq!(logs.iops, None);
    assert!(f.jobs[0].ignored.is_empty());
    assert!(!logs.offset && !logs.prio);
    let f = parse("[j]\nwrite_lat_log=lat\nlog_offset=1\nlog_prio=1\n");
    assert!(f.jobs[0].logs.offset && f.jobs[0].logs.prio);
    assert!(f.jobs[0].ignored.is_empty());
}

#[test]
fn engines_fall_in_fios_classes_and_the_others_are_refused_by_name() {
    let f = parse(
        "[a]\n[b]\nioengine=libaio\n[c]\nioengine=pvsync2\n[d]\nioengine=null\n[e]\nioengine=io_uring\n",
    );
    let classes: Vec<EngineClass> = f.jobs.iter().map(|j| j.engine).collect();
    // fio's default engine is psync: synchronous.
    assert_eq!(
        classes,
        [
            EngineClass::Sync,
            EngineClass::Async,
            EngineClass::Sync,
            EngineClass::Null,
            EngineClass::Async
        ]
    );
    // A refused engine is named, at its line, before its own options are looked at.
    assert_eq!(
        parse_err("[j]\nport=8888\nioengine=net\n"),
        "t.fio:3: ioengine=net: a network engine: qoslab simulates a host's block device, not a network"
    );
    assert_eq!(
        parse_err("[global]\nioengine=filecreate\n[j]\nnrfiles=4\n"),
        "t.fio:2: ioengine=filecreate: a file-system engine: qoslab has no file system yet (it will come with the page cache)"
    );
    assert!(parse_err("[j]\nioengine=nosuch\n").starts_with(
        "t.fio:2: ioengine=nosuch: no such engine in fio 3.33 (the engines qoslab runs: psync, sync,"
    ));
}

#[test]
fn fios_queue_options_are_read() {
    let j = &parse(
        "[j]\nioengine=libaio\niodepth=32\niodepth_batch_submit=8\niodepth_batch_complete_min=4\n\
         iodepth_batch_complete_max=16\niodepth_low=16\nio_submit_mode=offload\n",
    )
    .jobs[0];
    assert_eq!(
        (
            j.iodepth_batch_submit,
            j.iodepth_batch_complete_min,
            j.iodepth_batch_complete_max,
            j.iodepth_low,
            j.submit_mode
        ),
        (8, 4, 16, 16, SubmitMode::Offload)
    );
}

#[test]
fn run_control_options_are_read() {
    let f = parse(
        "[w]\nexitall\nexit_what=stonewall\nexitall_on_error=1\n[r]\nwait_for=w\nstartdelay=1s-3s\n\
         flow=8\nflow_id=2\nflow_sleep=1000\nrate_iops_min=100\nrate_cycle=500\nmax_latency=2ms\n\
         latency_target=500\nlatency_window=1s\nlatency_percentile=99.9\n\
         ss=iops:10%\nss_dur=30s\nss_ramp=10s\nthinktime_iotime=2\nrate_ignore_thinktime=1\n\
         bwavgtime=250\n",
    );
    let (w, r) = (&f.jobs[0], &f.jobs[1]);
    assert!(w.exitall && w.exitall_on_error && w.exit_what == ExitWhat::Stonewall);
    assert_eq!(r.wait_for.as_deref(), Some("w"));
    assert_eq!(r.startdelay_ns, (1_000_000_000, 3_000_000_000));
    assert_eq!((r.flow, r.flow_id, r.flow_sleep_ns), (8, 2, 1_000_000));
    assert_eq!(r.rate_iops_min, [Some(100), Some(100), Some(100)]);
    assert_eq!(r.rate_cycle_ns, 500_000_000);
    assert_eq!(r.max_latency_ns, [Some(2_000_000); 3]);
    // latency_target is in microseconds without a unit.
    assert_eq!(
        (
            r.latency_target_ns,
            r.latency_window_ns,
            r.latency_percentile
        ),
        (Some(500_000), 1_000_000_000, 99.9)
    );
    assert_eq!(
        r.steadystate,
        Some(SteadyState {
            iops: true,
            slope: false,
            limit: 10.0,
            percent: true
        })
    );
    assert_eq!(
        (r.ss_dur_ns, r.ss_ramp_ns),
        (30_000_000_000, 10_000_000_000)
    );
    assert_eq!(r.thinktime_iotime_ns, 2_000_000_000);
    assert!(r.rate_ignore_thinktime);
    assert_eq!(r.bw_avg_ns, Some(250_000_000));
    assert_eq!(
        parse_err("[r]\nwait_for=w\n[w]\n"),
        "t.fio:1: job 'r': wait_for=w names no earlier job (fio waits only for a job defined before)"
    );
}

#[test]
fn host_only_options_are_accepted_and_listed_and_those_that_change_the_io_are_refused() {
    let j = &parse(
        "[j]\nverify=crc32c\nlog_compression=1\nthreads=1\nio_submit_mode=inline\nzonemode=none\n",
    )
    .jobs[0];
    let ignored: Vec<&str> = j.ignored.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(ignored, ["verify", "log_compression", "threads"]);
    assert!(
        parse_err("[j]\nserialize_overlap=1\n").contains("waiting for overlapping I/O in flight")
    );
}

#[test]
fn verify_is_ignored_only_where_fio_reads_nothing_back() {
    // fio 3.33, randwrite 1 MiB with verify=crc32c: 256 writes and then 256 reads of them.
    assert_eq!(
        parse_err("[j]\nrw=randwrite\nverify=crc32c\n"),
        "t.fio:3: job 'j': verify on a job that writes: fio then reads back every block it \
         wrote (its verify phase), I/O that qoslab does not simulate; set do_verify=0 to run \
         the writes alone"
    );
    assert!(parse_err("[global]\nverify=md5\n[j]\nrw=randrw\n").contains("t.fio:2: job 'j'"));
    // A read job checks what it reads (the same I/O), and do_verify=0 or verify=0 read
    // nothing back.
    for ok in [
        "[j]\nrw=randread\nverify=crc32c\n",
        "[j]\nrw=write\nverify=meta\ndo_verify=0\n",
        "[j]\nrw=write\nverify=0\n",
    ] {
        let j = &parse(ok).jobs[0];
        assert!(j.ignored.iter().any(|(k, _)| k == "verify"), "{ok}");
    }
}

#[test]
fn fio_syntax_that_used_to_be_refused_is_read() {
    // A backwards skip, a last zone that takes the rest, fio's file-name keywords.
    let f = parse(
        "[j]\nrw=read:-8k\nfilename_format=f.$jobnum.$filenum\n[k]\nrw=randread\n\
         random_distribution=zoned:50/5:30/15:20/\n",
    );
    assert_eq!(
        (f.jobs[0].rw_modifier, f.jobs[0].rw_backward),
        (Some(8192), true)
    );
    assert_eq!(
        f.jobs[0].filename_format.as_deref(),
        Some("f.$jobnum.$filenum")
    );
    let Distribution::Zoned(z) = &f.jobs[1].random_distribution[0] else {
        panic!()
    };
    assert_eq!(z[2].extent, ZoneExtent::Percent(80.0));
}

#[test]
fn files_are_read() {
    let j =
        &parse("[j]\nnrfiles=4\nfile_service_type=sequential\ndirectory=/data\nsync=1\n").jobs[0];
    assert_eq!((j.nrfiles, j.file_service), (4, FileService::Sequential));
    assert_eq!(j.directory.as_deref(), Some("/data"));
    assert!(j.fua, "sync=1 writes O_SYNC: FUA on a block device");
}
