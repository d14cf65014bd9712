//! The specification's worked examples (§13) and the published expected outputs.

use std::path::PathBuf;

use crate::params::{Bound, FaultMode, RunParams, SubmitWindow, parse_policy};
use crate::run::{RunOptions, replay, run};
use crate::workload::Workload;

pub(crate) fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/nvmelite")
}

pub(crate) fn params(
    seed: u64,
    policy: &str,
    bound: Bound,
    fault: FaultMode,
    sw: SubmitWindow,
) -> RunParams {
    RunParams {
        schedule_seed: seed,
        policy: parse_policy(policy).unwrap(),
        bound,
        fault,
        submit_window: sw,
        scheduler_version: "v1.0".into(),
        git_commit: String::new(),
    }
}

fn ex_a() -> Workload {
    Workload::from_json(
        br#"{"seed_id": "ex_a", "commands": [
            {"type": "WRITE", "lba": 0, "len": 2, "pattern": 5},
            {"type": "WRITE_VISIBLE", "lba": 0, "len": 2},
            {"type": "READ", "lba": 0, "len": 2},
            {"type": "READ", "lba": 1, "len": 1}]}"#,
    )
    .unwrap()
}

fn ex_b() -> Workload {
    Workload::from_json(
        br#"{"seed_id": "ex_b", "commands": [
            {"type": "WRITE", "lba": 4, "len": 1, "pattern": 9},
            {"type": "READ", "lba": 4, "len": 1},
            {"type": "FENCE"},
            {"type": "WRITE", "lba": 1023, "len": 2, "pattern": 1}]}"#,
    )
    .unwrap()
}

const EX_A_LOG: &str = "\
RUN_HEADER(run_id=ex_a_RANDOM_inf_4_NONE, seed_id=ex_a, schedule_seed=4, policy=RANDOM, bound_k=inf, fault_mode=NONE, n_cmds=4, submit_window=inf, scheduler_version=v1.0, git_commit=)
SUBMIT(cmd_id=0, cmd_type=WRITE)
SUBMIT(cmd_id=1, cmd_type=WRITE_VISIBLE)
SUBMIT(cmd_id=2, cmd_type=READ)
COMPLETE(cmd_id=0, status=OK, out=0)
COMPLETE(cmd_id=2, status=OK, out=0)
SUBMIT(cmd_id=3, cmd_type=READ)
COMPLETE(cmd_id=1, status=OK, out=0)
COMPLETE(cmd_id=3, status=OK, out=5)
RUN_END(pending_left=0, pending_peak=3)
";

const EX_B_TIMEOUT_LOG: &str = "\
RUN_HEADER(run_id=ex_b_ADVERSARIAL_1_0_TIMEOUT, seed_id=ex_b, schedule_seed=0, policy=ADVERSARIAL, bound_k=1, fault_mode=TIMEOUT, n_cmds=4, submit_window=inf, scheduler_version=v1.0, git_commit=)
SUBMIT(cmd_id=0, cmd_type=WRITE)
COMPLETE(cmd_id=0, status=OK, out=0)
SUBMIT(cmd_id=1, cmd_type=READ)
SUBMIT(cmd_id=2, cmd_type=FENCE)
FENCE(fence_id=0)
COMPLETE(cmd_id=2, status=OK, out=0)
SUBMIT(cmd_id=3, cmd_type=WRITE)
COMPLETE(cmd_id=1, status=TIMEOUT, out=0)
COMPLETE(cmd_id=3, status=ERR, out=0)
RUN_END(pending_left=0, pending_peak=2)
";

const EX_B_RESET_LOG: &str = "\
RUN_HEADER(run_id=ex_b_BATCHED_inf_3_RESET, seed_id=ex_b, schedule_seed=3, policy=BATCHED, bound_k=inf, fault_mode=RESET, n_cmds=4, submit_window=2, scheduler_version=v1.0, git_commit=)
SUBMIT(cmd_id=0, cmd_type=WRITE)
COMPLETE(cmd_id=0, status=OK, out=0)
SUBMIT(cmd_id=1, cmd_type=READ)
COMPLETE(cmd_id=1, status=OK, out=0)
SUBMIT(cmd_id=2, cmd_type=FENCE)
FENCE(fence_id=0)
SUBMIT(cmd_id=3, cmd_type=WRITE)
RESET(reason=INJECTED, pending_before=2)
RUN_END(pending_left=0, pending_peak=2)
";

const EX_B_RESET_RECORD: &str = r#"{
  "seed_id": "ex_b",
  "schedule_seed": 3,
  "policy": "BATCHED",
  "bound_k": "inf",
  "fault_mode": "RESET",
  "steps": [
    {
      "type": "CompletePick",
      "pick_index": 0
    },
    {
      "type": "CompletePick",
      "pick_index": 0
    },
    {
      "type": "FAULT",
      "fault_type": "RESET",
      "at_step": 2
    }
  ]
}"#;

#[test]
fn example_13_1_random_inf_none_seed_4() {
    let p = params(4, "RANDOM", Bound::Inf, FaultMode::None, SubmitWindow::Inf);
    let out = run(&ex_a(), &p, RunOptions::ALL);
    assert_eq!(
        std::str::from_utf8(out.log.as_ref().unwrap()).unwrap(),
        EX_A_LOG
    );
    assert_eq!(
        out.csv_row(),
        "ex_a_RANDOM_inf_4_NONE,3.000000,3.000000,5.000000,0.166667,1.000000,3,12,4,0,0,1.000000,e372cd33e7b56b04a7dae0e3c9f7a8e0bbca700416947921401c641cf74c3971"
    );
    let record = out.reference_schedule.unwrap();
    let picks: Vec<&str> = record
        .lines()
        .filter(|l| l.contains("pick_index"))
        .collect();
    assert_eq!(
        picks.iter().map(|l| l.trim()).collect::<Vec<_>>(),
        [
            "\"pick_index\": 0",
            "\"pick_index\": 1",
            "\"pick_index\": 0",
            "\"pick_index\": 0"
        ]
    );
    // Five decision bits and four pick draws (§5.7, the table of §13.1).
    assert_eq!(out.rng_draws, 5 + 4);
}

#[test]
fn example_13_1_with_seed_0_reads_160() {
    let p = params(0, "RANDOM", Bound::Inf, FaultMode::None, SubmitWindow::Inf);
    let out = run(&ex_a(), &p, RunOptions::ALL);
    let log = String::from_utf8(out.log.unwrap()).unwrap();
    let completes: Vec<&str> = log.lines().filter(|l| l.starts_with("COMPLETE")).collect();
    assert_eq!(completes[0], "COMPLETE(cmd_id=0, status=OK, out=0)");
    assert_eq!(completes[1], "COMPLETE(cmd_id=1, status=OK, out=0)");
    assert_eq!(completes[2], "COMPLETE(cmd_id=2, status=OK, out=160)");
}

#[test]
fn example_13_2_adversarial_k1_timeout_seed_0() {
    let p = params(
        0,
        "ADVERSARIAL",
        Bound::K(1),
        FaultMode::Timeout,
        SubmitWindow::Inf,
    );
    let out = run(&ex_b(), &p, RunOptions::ALL);
    assert_eq!(
        std::str::from_utf8(out.log.as_ref().unwrap()).unwrap(),
        EX_B_TIMEOUT_LOG
    );
    assert_eq!(
        out.csv_row(),
        "ex_b_ADVERSARIAL_1_0_TIMEOUT,2.000000,2.666667,5.000000,0.166667,1.000000,2,5,2,1,1,0.500000,9cc3a0afd6ea9c5a34ebff31c52cb0de1c66418c7f6cb6d5ccbdb5d65f044261"
    );
    let record = out.reference_schedule.unwrap();
    assert!(record.contains("\"fault_type\": \"TIMEOUT\",\n      \"at_step\": 2"));
    assert_eq!(record.matches("CompletePick").count(), 3);
}

#[test]
fn example_13_3_batched_inf_reset_seed_3_window_2() {
    let p = params(
        3,
        "BATCHED",
        Bound::Inf,
        FaultMode::Reset,
        SubmitWindow::N(2),
    );
    let out = run(&ex_b(), &p, RunOptions::ALL);
    assert_eq!(
        std::str::from_utf8(out.log.as_ref().unwrap()).unwrap(),
        EX_B_RESET_LOG
    );
    assert_eq!(
        out.csv_row(),
        "ex_b_BATCHED_inf_3_RESET,1.000000,1.000000,1.000000,0.000000,1.000000,2,3,2,0,0,0.500000,04b9bfa9a7bf368bcf41f70fa89ac1ea3f0777ab61c269a9410520d469c157f0"
    );
    assert_eq!(out.reference_schedule.unwrap(), EX_B_RESET_RECORD);
}

#[test]
fn schedule_file_of_example_13_1_matches_the_documented_example() {
    let p = params(4, "RANDOM", Bound::Inf, FaultMode::None, SubmitWindow::Inf);
    let out = run(&ex_a(), &p, RunOptions::ALL);
    let text = out.schedule.unwrap();
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/nvmelite-schedule.md"),
    )
    .unwrap();
    let example = doc
        .rsplit("```\nqoslab-nvmelite-schedule v1\n")
        .next()
        .and_then(|rest| rest.split("```").next())
        .map(|body| format!("qoslab-nvmelite-schedule v1\n{body}"))
        .unwrap();
    assert_eq!(text, example);
    let again = replay(&ex_a(), &text, true, RunOptions::ALL).unwrap();
    assert_eq!(again.log, out.log);
    assert_eq!(again.schedule.unwrap(), text);
}

#[test]
fn the_four_published_logs_and_the_published_schedule_record() {
    let dir = data_dir();
    let w = Workload::from_json(&std::fs::read(dir.join("seed_001.json")).unwrap()).unwrap();
    for entry in std::fs::read_dir(dir.join("expected/logs")).unwrap() {
        let path = entry.unwrap().path();
        let expected = std::fs::read(&path).unwrap();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        // seed_001_<POLICY>_<k>_<seed>_<FAULT>
        let parts: Vec<&str> = name.rsplitn(5, '_').collect();
        let (fault, seed, k, policy) = (parts[0], parts[1], parts[2], parts[3]);
        let p = params(
            seed.parse().unwrap(),
            policy,
            Bound::parse(k).unwrap(),
            FaultMode::parse(fault).unwrap(),
            SubmitWindow::Inf,
        );
        let out = run(&w, &p, RunOptions::ALL);
        assert_eq!(out.run_id, name);
        assert_eq!(out.log.as_deref(), Some(&expected[..]), "{name}");
        let sched = dir.join(format!("expected/schedules/{name}.json"));
        if sched.exists() {
            assert_eq!(
                out.reference_schedule.unwrap(),
                std::fs::read_to_string(sched).unwrap()
            );
        }
    }
}
