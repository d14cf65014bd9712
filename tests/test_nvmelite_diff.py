"""`qoslab nvmelite diff`: the C implementation against the model, mutants, robust harness.

The independent C implementation (dut/nvmelite-c, built by `make setup`) must agree with the
Rust model byte for byte on every run of the paper matrix and of the published expected data;
deliberately broken builds of it must each be caught with a small reproducer; and DUTs that
hang, crash or flood the harness must be reported per run without stopping it.
"""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import QOSLAB, ROOT, run_qoslab

C_SOURCES = [
    ROOT / "dut" / "nvmelite-c" / f"{name}.c"
    for name in ("buf", "params", "sha256", "workload", "model", "metrics", "schedule", "main")
]
SEEDS = ROOT / "configs" / "nvmelite" / "seeds"
PAPER_CONFIG = ROOT / "configs" / "nvmelite" / "main.yaml"
EXPECTED_CONFIG = ROOT / "tests" / "data" / "nvmelite" / "expected" / "config.yaml"

# -D flags of the mutant builds (dut/nvmelite-c/model.c, metrics.c) and what each breaks.
MUTANTS = {
    "FENCE_IGNORED": "no FENCE(fence_id=...) line after a FENCE submit",
    "WINDOW_K_PLUS_1": "k+2 candidates instead of k+1",
    "READ_HOST": "READ hashes host storage instead of device storage",
    "TIMEOUT_NEWEST": "TIMEOUT hits the newest pending command",
    "P95_OFF_BY_ONE": "p95 index one past floor(0.95 (N-1))",
}


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def paper_config(tmp_path: Path) -> Path:
    """The paper matrix over both published workloads (seeds 0-99)."""
    config = tmp_path / "paper.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            seeds: ["{SEEDS / "seed_001_long32.json"}", "{SEEDS / "seed_002.json"}"]
            policies: [FIFO, RANDOM, ADVERSARIAL, BATCHED]
            bounds: ["0", "1", "2", "3", "5", "10", "inf"]
            faults: [NONE, TIMEOUT, RESET]
            schedule_seeds: "0-99"
            scheduler_version: "v1.0"
            git_commit: ""
            """
        )
    )
    return config


def small_config(tmp_path: Path, seeds: str = "0-1") -> Path:
    config = tmp_path / "small.yaml"
    config.write_text(
        f'seeds: ["{SEEDS / "seed_001.json"}"]\npolicies: [RANDOM]\nbounds: ["inf"]\n'
        f'faults: [NONE]\nschedule_seeds: "{seeds}"\nscheduler_version: "v1.0"\n'
    )
    return config


def dut_script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    path.chmod(0o755)
    return path


# ---- the C implementation agrees with the model ------------------------------------------------


@pytest.mark.parametrize("window", ["inf", "2", "4"])
def test_c_implementation_matches_the_model_on_the_paper_matrix(tmp_path, window):
    out = tmp_path / "diff"
    done = run_qoslab(
        "nvmelite", "diff", paper_config(tmp_path), "--dut", "builtin:c", "--dut-batch",
        "--jobs", "2", "--submit-window", window, "--out", out,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    status = read_csv(out / "status.csv")
    assert len(status) == 2 * 4 * 7 * 3 * 100
    assert {r["status"] for r in status} == {"match"}
    assert {r["metrics"] for r in status} == {"yes"}  # the C rows were compared too
    assert read_csv(out / "divergences.csv") == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["statuses"] == {"match": 16800}
    # the poison schedules come first: ADVERSARIAL seeds 10, 18, 53 (p95 64) lead at SW inf
    if window == "inf":
        assert [r["run_id"] for r in status[:3]] == [
            "seed_001_long32_ADVERSARIAL_inf_10_NONE",
            "seed_001_long32_ADVERSARIAL_inf_18_NONE",
            "seed_001_long32_ADVERSARIAL_inf_53_NONE",
        ]
        assert [r["poison"] for r in status[:11]] == ["yes"] * 10 + ["no"]


def test_c_implementation_matches_the_model_on_the_expected_data(tmp_path):
    out = tmp_path / "diff"
    done = run_qoslab(
        "nvmelite", "diff", EXPECTED_CONFIG, "--dut", "builtin:c", "--dut-batch", "--out", out
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r["status"] for r in read_csv(out / "status.csv")} == {"match"}
    # and the C matrix itself reproduces the published runs.csv byte for byte
    import gzip

    cdir = tmp_path / "c"
    c = ROOT / "build" / "dut" / "nvmelite-c"
    subprocess.run([c, "matrix", "--out", cdir, "--schedules", "--seeds", "0-29",
                    SEEDS / "seed_001.json"], check=True)  # fmt: skip
    expected = gzip.decompress((EXPECTED_CONFIG.parent / "runs.csv.gz").read_bytes())
    assert (cdir / "runs.csv").read_bytes() == expected
    # the schedule files the two implementations write are the same too, comments included
    from qoslab import nvmelite

    model = nvmelite.load_matrix(EXPECTED_CONFIG)
    schedules = {r.run_id: r.schedule for r in model.iter_runs(log=False, schedule=True)}
    assert len(schedules) == 2520
    for run_id, text in schedules.items():
        assert (cdir / "schedules" / f"{run_id}.sched").read_text() == text, run_id


def _edge_workloads(tmp_path: Path, count: int) -> list[Path]:
    """Random workloads full of the spec's edge cases (§1.2, §3), with odd seed ids."""
    import random

    rng = random.Random(20261123)
    odd_ids = ["a,b (c)", 'q"x', "back\\slash", "tab\there", "line\nbreak", "ünï cødé", "sp ace"]
    lbas = [0, 1, 4, 1020, 1023, 1024, 1025, 2**64 - 1, 2**64 - 2, 2**63]
    paths = []
    for i in range(count):
        commands = []
        for _ in range(rng.randrange(0, 14)):
            kind = rng.choice(["WRITE", "WRITE", "WRITE_VISIBLE", "READ", "READ", "FENCE"])
            cmd = {"type": kind}
            if kind != "FENCE":
                cmd["lba"] = rng.choice([*lbas, rng.randrange(0, 1030)])
                cmd["len"] = rng.choice([0, 1, 2, 4, 5, 2**32 - 1, rng.randrange(0, 9)])
            if kind == "WRITE":
                cmd["pattern"] = rng.choice([0, 1, 5, 2**32 - 1, rng.randrange(0, 2**32)])
            commands.append(cmd)
        seed_id = f"{odd_ids[i % len(odd_ids)]}#{i}"
        path = tmp_path / f"edge{i}.json"
        path.write_text(json.dumps({"seed_id": seed_id, "commands": commands}))
        paths.append(path)
    return paths


@pytest.mark.parametrize("window", ["0", "1", "3", "inf"])
def test_c_implementation_matches_the_model_on_edge_cases(tmp_path, window):
    seeds = ", ".join(json.dumps(str(p)) for p in _edge_workloads(tmp_path, 12))
    config = tmp_path / "edge.yaml"
    config.write_text(
        f"seeds: [{seeds}]\npolicies: [FIFO, RANDOM, ADVERSARIAL, BATCHED]\n"
        'bounds: ["0", "1", "4", "4294967295", "inf"]\nfaults: [NONE, TIMEOUT, RESET]\n'
        'schedule_seeds: "18446744073709551613-18446744073709551615"\n'
        'scheduler_version: "v 1,0 \\\\ odd"\ngit_commit: "g=it, commit"\n'
    )
    out = tmp_path / "diff"
    done = run_qoslab(
        "nvmelite", "diff", config, "--dut", "builtin:c", "--dut-batch", "--jobs", "2",
        "--submit-window", window, "--out", out,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    status = read_csv(out / "status.csv")
    assert len(status) == 12 * 4 * 5 * 3 * 3
    assert {(r["status"], r["metrics"]) for r in status} == {("match", "yes")}


def test_single_run_mode_with_metrics_side_channel(tmp_path):
    out = tmp_path / "diff"
    done = run_qoslab(
        "nvmelite", "diff", PAPER_CONFIG, "--dut", "builtin:c", "--only", "poison",
        "--out", out,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    status = read_csv(out / "status.csv")
    assert len(status) == 10
    assert {(r["status"], r["metrics"], r["poison"]) for r in status} == {("match", "yes", "yes")}


# ---- mutants are caught, each with a small reproducer -----------------------------------------


@pytest.fixture(scope="module")
def mutants(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("mutants")
    built = {}
    for name in MUTANTS:
        binary = folder / name.lower()
        subprocess.run(
            ["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off",
             "-D_POSIX_C_SOURCE=200809L", f"-DNVMELITE_MUTANT_{name}", "-o", binary,
             *C_SOURCES],
            check=True,
        )  # fmt: skip
        built[name] = binary
    return built


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_is_reported_with_a_minimal_reproducer(tmp_path, mutants, mutant):
    out = tmp_path / "diff"
    done = run_qoslab(
        "nvmelite", "diff", PAPER_CONFIG, "--dut", str(mutants[mutant]), "--dut-batch",
        "--jobs", "2", "--minimize", "1", "--out", out,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    status = read_csv(out / "status.csv")
    assert len(status) == 8400
    diverged = [r for r in status if r["status"] == "diverged"]
    assert diverged and {r["status"] for r in status} <= {"match", "diverged"}
    divergences = read_csv(out / "divergences.csv")
    assert {d["run_id"] for d in divergences} == {r["run_id"] for r in diverged}
    if mutant == "P95_OFF_BY_ONE":  # never visible in a log: only the metrics row shows it
        assert {d["line"] for d in divergences} == {"runs.csv:p95_latency_step"}

    [repro] = list((out / "minimal").iterdir())
    assert repro.name == diverged[0]["run_id"]
    commands = json.loads((repro / "workload.json").read_text())["commands"]
    assert 1 <= len(commands) <= 6, commands
    assert read_csv(repro / "divergences.csv")
    # the one-line command replays the reproducer: the mutant still diverges on it ...
    argv = shlex.split((repro / "command.txt").read_text())
    assert argv[:3] == ["qoslab", "nvmelite", "diff"]
    rerun = subprocess.run([str(QOSLAB), *argv[1:]], capture_output=True, text=True)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr
    assert read_csv(repro / "rerun" / "divergences.csv") == read_csv(repro / "divergences.csv")
    # ... and the correct implementation agrees with the model on it
    argv[argv.index("--dut") + 1] = "builtin:c"
    argv[argv.index("--out") + 1] = str(tmp_path / "rerun-c")
    fixed = subprocess.run([str(QOSLAB), *argv[1:]], capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_results_do_not_depend_on_jobs(tmp_path, mutants):
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        run_qoslab(
            "nvmelite", "diff", EXPECTED_CONFIG, "--dut", str(mutants["TIMEOUT_NEWEST"]),
            "--dut-batch", "--jobs", jobs, "--minimize", "0", "--out", out,
        )  # fmt: skip
        outputs.append(((out / "divergences.csv").read_bytes(), (out / "status.csv").read_bytes()))
    assert outputs[0] == outputs[1]
    assert b"diverged" in outputs[0][1]


# ---- normalisation -------------------------------------------------------------------------------


def test_header_strings_and_line_endings_are_normalised(tmp_path):
    # A DUT that echoes other header strings, ends lines with CRLF, drops the last newline
    # and reports no metrics still matches.
    c = ROOT / "build" / "dut" / "nvmelite-c"
    dut = dut_script(
        tmp_path,
        "crlf-dut",
        f"""#!{sys.executable}
import os, re, subprocess, sys
env = {{k: v for k, v in os.environ.items() if k != "QOSLAB_DUT_METRICS"}}
log = subprocess.run([{str(c)!r}, *sys.argv[1:]], capture_output=True, check=True, env=env).stdout
log = re.sub(rb"scheduler_version=.*\\)$", b"scheduler_version=v9, git_commit=abc)", log,
             count=1, flags=re.M)
sys.stdout.buffer.write(log.replace(b"\\n", b"\\r\\n")[:-2])
""",
    )
    out = tmp_path / "diff"
    done = run_qoslab("nvmelite", "diff", small_config(tmp_path), "--dut", dut, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {(r["status"], r["metrics"]) for r in read_csv(out / "status.csv")} == {("match", "no")}


# ---- robustness of the harness -----------------------------------------------------------------

ROBUST_DUTS = {
    # name: (script body, expected status, expected detail fragment)
    "sleeper": ("#!/bin/sh\nexec sleep 1000\n", "timeout", "no "),
    "segfault": ("#!/bin/sh\nkill -SEGV $$\n", "crash", "SIGSEGV"),
    "junk": (
        f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(bytes(range(256)) * 64)\n",
        "garbage",
        "",
    ),
    "exit3": ("#!/bin/sh\necho 'bad things' >&2\nexit 3\n", "exit", "status 3"),
}


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
@pytest.mark.parametrize("name", list(ROBUST_DUTS))
def test_misbehaving_dut_is_reported_per_run(tmp_path, name, batch):
    body, status, detail = ROBUST_DUTS[name]
    if batch and name == "exit3":
        status = "exit"
    dut = dut_script(tmp_path, name, body)
    out = tmp_path / "diff"
    args = ["--dut-batch"] if batch else []
    done = run_qoslab(
        "nvmelite", "diff", small_config(tmp_path, "0-2"), "--dut", dut, *args,
        "--timeout-s", "1", "--minimize", "1", "--out", out, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    status_rows = read_csv(out / "status.csv")
    assert len(status_rows) == 3  # every run was attempted: the harness went on
    expected = "garbage" if batch and name == "junk" else status
    assert {r["status"] for r in status_rows} == {expected}, status_rows
    assert all(detail in r["detail"] for r in status_rows)
    rows = read_csv(out / "divergences.csv")
    assert all(f"[{expected}]" in r["got"] for r in rows if r["line"] == "")
    if expected != "timeout":
        assert (out / "minimal").is_dir()


def _peak_rss_kib(args: list[str]) -> tuple[int, subprocess.CompletedProcess]:
    """Runs qoslab in a fresh Python whose only children are qoslab and its DUTs."""
    probe = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(done.stdout + done.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(QOSLAB), *args], capture_output=True, text=True
    )
    return int(done.stdout.split()[-1]), done


def test_endless_output_is_cut_at_100_mib_with_flat_memory(tmp_path):
    config = small_config(tmp_path, "0-1")
    yes = dut_script(tmp_path, "flood", "#!/bin/sh\nexec yes RUN_END\n")
    base_rss, _ = _peak_rss_kib(
        ["nvmelite", "diff", str(config), "--dut", "builtin:c", "--out", str(tmp_path / "a")]
    )
    flood_rss, done = _peak_rss_kib(
        ["nvmelite", "diff", str(config), "--dut", str(yes), "--minimize", "0",
         "--out", str(tmp_path / "b")]
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    status = read_csv(tmp_path / "b" / "status.csv")
    assert [r["status"] for r in status] == ["output-limit", "output-limit"]
    assert all("104857600 bytes" in r["detail"] for r in status)
    # 2 x 100 MiB were read; the harness's peak memory grew by far less than one run's output
    assert flood_rss - base_rss < 50 * 1024, (base_rss, flood_rss)


def test_batch_dut_announcing_a_huge_log_is_cut(tmp_path):
    dut = dut_script(
        tmp_path,
        "huge",
        "#!/bin/sh\nwhile read -r line; do printf 'ok 200000000 0\\n'; exec yes; done\n",
    )
    out = tmp_path / "diff"
    done = run_qoslab(
        "nvmelite", "diff", small_config(tmp_path), "--dut", dut, "--dut-batch",
        "--out", out, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert {r["status"] for r in read_csv(out / "status.csv")} == {"output-limit"}


# ---- bad input ----------------------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    config = small_config(tmp_path)
    sched = tmp_path / "bad.sched"
    sched.write_text("qoslab-nvmelite-schedule v1\nseed_id=seed_001\nschedule_seed=x\n")
    not_out = tmp_path / "file"
    not_out.write_text("keep me")
    cases = [
        (["--dut", "no-such-dut-anywhere"], "--dut"),
        (["--dut", "builtin:c", "--only", "some"], "--only"),
        (["--dut", "builtin:c", "--submit-window", "-1"], "--submit-window"),
        (["--dut", "builtin:c", "--timeout-s", "0"], "--timeout-s"),
    ]
    for args, needle in cases:
        done = run_qoslab("nvmelite", "diff", config, *args, "--out", tmp_path / "o")
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and needle in done.stderr, done.stderr
    done = run_qoslab("nvmelite", "diff", tmp_path / "none.yaml", "--dut", "builtin:c",
                      "--out", tmp_path / "o")  # fmt: skip
    assert done.returncode == 2 and "none.yaml" in done.stderr
    done = run_qoslab("nvmelite", "diff", config, "--dut", "builtin:c", "--out", not_out)
    assert done.returncode == 2 and "file" in done.stderr
    assert not_out.read_text() == "keep me"
    done = run_qoslab("nvmelite", "diff", SEEDS / "seed_001.json", "--schedule", sched,
                      "--dut", "builtin:c", "--out", tmp_path / "o")  # fmt: skip
    assert done.returncode == 2 and "bad.sched:" in done.stderr, done.stderr
    done = run_qoslab("nvmelite", "diff", SEEDS / "seed_001.json", "--dut", "builtin:c",
                      "--out", tmp_path / "o")  # fmt: skip
    assert done.returncode == 2 and "--schedule" in done.stderr
    assert not (tmp_path / "o").exists()
    assert not list(tmp_path.glob(".o.*"))  # no half-written output left behind
