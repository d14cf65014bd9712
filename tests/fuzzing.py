"""Fuzzing qoslab's parsers: mutate the inputs qoslab ships, run the command that reads them,
and check that every case ends in a clean error or a success, never a traceback, a panic, a
signal or a hang.

A *target* is one parser behind one command: its seed files (the shipped inputs of that kind;
the block traces, of which qoslab ships none, are small files of each format in
tests/data/traces/) and the command line that reads a mutated copy. A case applies one to four
mutations to one seed, as a hypothesis strategy draws them (so a failure shrinks to a small
one): delete, duplicate, swap or truncate lines; replace a number, a `key=value` /
`key = value` / `<Tag>value</Tag>` / JSON value by an interesting one (0, ±1, 2^31, 2^32,
2^63±1, 2^64±1, 1e308, 1e309, 5e-324, nan, inf, sizes and times with units, `${NOPE}`,
unicode, paths that do not exist, ...; never a path a case could write outside its folder, as
a job's `write_lat_log` would); insert a known key (fio options, device tunables, the seed's own
XML tags or JSON members) with such a value; insert junk bytes (NUL, invalid UTF-8, a BOM, a
long run of one character, deep nesting); flip a byte; splice two seeds.

How a case ends:

    clean     exit status 2 and exactly one `qoslab: error:` line (warnings besides allowed)
    success   exit status 0
    long      the run was stopped at its time limit, but the same input read without running
              it (`--parse-only`, or loading the matrix) is fine: a valid input asking for much
              work (a `number_ios` of 2^32), as fio would run it too
    failure   anything else: a traceback or panic text, an internal error (exit status 1), an
              exit status 2 without its one line, another status, a signal, a hang

Cases run in persistent worker processes (`fuzz_worker.py`) that call `qoslab.cli.main` in
process, a few hundred a minute; a worker past its time limit is killed and replaced.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

INTERESTING = [
    "0", "1", "-1", "2147483648", "4294967296", "9223372036854775807", "9223372036854775808",
    "18446744073709551615", "18446744073709551616", "-9223372036854775809",
    "100000000000000000000000000000000", "1e308", "1e309", "-1e308", "5e-324", "nan", "NaN",
    "inf", "-inf", "Infinity", "0x7fffffffffffffff", "0xffffffffffffffffff", "1_000", "1.5",
    "-0", "16e", "9223372036854775807k", "16383p", "1e30s", "99999999999999h", "nan%", "200%",
    "infMB/s", "1e30GB/s", "4KiB", "0.5us", "${NOPE}", "$pagesize", "(1+2)", "é", "日本",
    "no/such/dir/x", "/no-such-dir-qoslab/x", "", " ", '"', "'", "[]", "{}", "true", "null",
]  # fmt: skip
JUNK = [
    b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\xc3\x28", b"A" * 100_000, b"{" * 200,
    b"[" * 300, b"\n" * 1000, b"=" * 50, b"<" * 100, b"\r\n", b"\t",
]  # fmt: skip


# ---- the targets --------------------------------------------------------------------------------

NAMES = (
    "device-toml", "fio-json", "fio-parse", "fio-run", "mqsim-ssdconfig-convert",
    "mqsim-ssdconfig-sim", "mqsim-workload-convert", "mqsim-workload-sim", "nvmelite-matrix-yaml",
    "nvmelite-schedule", "nvmelite-workload", "plm-demands", "sweep-spec", "trace-blkparse",
    "trace-iolog2", "trace-iolog3", "trace-msr", "trace-systor17",
)  # fmt: skip


@dataclass
class Target:
    """One parser behind one command. `argv(input, draw)` is the command line for a mutated
    input at `input` (a path in the case's folder); `check` (optional) reads the same input
    without running it, to tell a long valid run from a hang."""

    name: str
    seeds: list[Path]
    argv: object
    suffix: str = ""
    env: dict[str, str] = field(default_factory=dict)
    check: object = None
    keys: list[str] = field(default_factory=list)
    text_kind: str = "lines"  # lines, toml, xml, json, yaml, csv


def _fio_options() -> list[str]:
    from qoslab._core import fio_options

    return [row[0] for row in fio_options()]


def _tunables() -> list[str]:
    from qoslab.sim import api

    return [f"{section}.{key}" for section, key, *_ in api.tunables()]


def targets(seed_dir: Path) -> dict[str, Target]:
    """Every target, its seeds prepared in `seed_dir` (absolute paths where a file names
    another, so a copy read from a case's folder finds them)."""
    jobs = sorted((ROOT / "configs" / "jobs").glob("*.fio")) + sorted(
        (DATA / "sim-jobs").glob("*.fio")
    )
    jobs += [ROOT / "configs/sched/database-backup.fio", ROOT / "configs/sweeps/randread.fio"]
    fio_keys = _fio_options()
    tunables = _tunables()
    devices = sorted((ROOT / "configs" / "devices").glob("*.toml"))
    ssdconfig = ROOT / "configs/devices/mqsim/ssdconfig.xml"
    workload_xml = ROOT / "configs/devices/mqsim/workload.xml"
    nvme_seeds = sorted((ROOT / "configs" / "nvmelite" / "seeds").glob("*.json"))
    traces = DATA / "traces"
    schedule = seed_dir / "run.sched"
    matrix = seed_dir / "matrix.yaml"
    matrix.write_text(
        "seeds:\n"
        + "".join(f'  - "{p}"\n' for p in nvme_seeds[:2])
        + "policies: [FIFO, RANDOM, ADVERSARIAL]\n"
        'bounds: ["0", "3", "inf"]\nfaults: [NONE, TIMEOUT]\nschedule_seeds: "0-3"\n'
        'scheduler_version: "v1.0"\n'
    )
    main_yaml = seed_dir / "main.yaml"
    main_yaml.write_text(
        (ROOT / "configs/nvmelite/main.yaml")
        .read_text()
        .replace('"seeds/', f'"{ROOT}/configs/nvmelite/seeds/')
    )
    sweeps = []
    for spec in sorted((ROOT / "configs" / "sweeps").glob("*.yaml")):
        copy = seed_dir / spec.name
        text = spec.read_text()
        for name in ("randread.fio", "../nvmelite/seeds/", "seed_001"):
            text = text.replace(f" {name}", f" {spec.parent / name}")
        copy.write_text(text.replace(f"{spec.parent}/../", f"{ROOT}/configs/"))
        sweeps.append(copy)

    def sim_parse_check(argv):
        return [a for a in argv if a not in ("--output", "out.txt")] + ["--parse-only"]

    def pick(draw, options):
        return draw(st.sampled_from(options))

    listing = [
        Target(
            "fio-parse",
            jobs,
            lambda f, d: ["sim", f, "--parse-only", "--output-format", "json"],
            ".fio",
            {"NUMBER_IOS": "2000", "QD": "8"},
            keys=fio_keys,
        ),
        Target(
            "fio-run",
            jobs,
            lambda f, d: [
                "sim",
                f,
                "--device",
                pick(d, ["nvme-analytic", "ideal", "hdd-7200", "mqsim-default"]),
                "--output-format",
                pick(d, ["terse", "json", "json+", "normal"]),
                "--output",
                "out.txt",
            ],
            ".fio",
            {"NUMBER_IOS": "2000", "QD": "8"},
            check=sim_parse_check,
            keys=fio_keys,
        ),
        Target(
            "device-toml",
            devices,
            lambda f, d: [
                "sim",
                "--name=x",
                "--ioengine=libaio",
                "--direct=1",
                f"--rw={pick(d, ['randread', 'randwrite', 'randrw'])}",
                "--bs=4k",
                "--iodepth=8",
                "--number_ios=2000",
                "--device",
                f,
                "--output-format",
                "terse",
                "--output",
                "out.txt",
            ],
            ".toml",
            check=sim_parse_check,
            keys=tunables,
            text_kind="toml",
        ),
        Target(
            "mqsim-ssdconfig-convert",
            [ssdconfig],
            lambda f, d: ["mqsim", "convert", f, "--out", "."],
            ".xml",
            text_kind="xml",
        ),
        Target(
            "mqsim-ssdconfig-sim",
            [ssdconfig],
            lambda f, d: [
                "sim",
                "--name=x",
                "--direct=1",
                "--rw=randrw",
                "--bs=4k",
                "--number_ios=300",
                "--device",
                f,
                "--output-format",
                "terse",
            ],
            ".xml",
            check=sim_parse_check,
            text_kind="xml",
        ),
        Target(
            "mqsim-workload-convert",
            [workload_xml],
            lambda f, d: ["mqsim", "convert", ssdconfig, f, "--out", "."],
            ".xml",
            text_kind="xml",
        ),
        Target(
            "mqsim-workload-sim",
            [workload_xml],
            lambda f, d: ["sim", "--mqsim-workload", f, "--output-format", "terse"],
            ".xml",
            check=sim_parse_check,
            text_kind="xml",
        ),
        Target(
            "nvmelite-workload",
            nvme_seeds,
            lambda f, d: [
                "nvmelite",
                "run",
                f,
                "--policy",
                pick(d, ["FIFO", "RANDOM", "ADVERSARIAL", "BATCHED"]),
                "--bound",
                pick(d, ["0", "3", "inf"]),
                "--fault",
                pick(d, ["NONE", "TIMEOUT", "RESET"]),
                "--seed",
                "4",
                "--log",
                "run.log",
                "--schedule-out",
                "run.sched",
            ],
            ".json",
            text_kind="json",
        ),
        Target(
            "nvmelite-schedule",
            [schedule],
            lambda f, d: ["nvmelite", "replay", nvme_seeds[1], f, "--log", "replay.log"],
            ".sched",
        ),
        Target(
            "nvmelite-matrix-yaml",
            [matrix, main_yaml],
            lambda f, d: [
                "nvmelite",
                "matrix",
                f,
                "--out",
                "m",
                "--no-logs",
                "--exact-nodes",
                pick(d, ["0", "50"]),
            ],
            ".yaml",
            check="matrix",
            text_kind="yaml",
        ),
        Target(
            "sweep-spec",
            sweeps,
            lambda f, d: ["sweep", f, "--store", "store", "--dry-run"],
            ".yaml",
            text_kind="yaml",
        ),
        Target(
            "plm-demands",
            [ROOT / "configs/plm/demands-example.csv"],
            lambda f, d: [
                "plm",
                "coordinate",
                f,
                "--capacity",
                pick(d, ["100", "0", "1"]),
                "--predictor",
                pick(d, ["exact", "ewma"]),
                "--policy",
                pick(d, ["sp", "fr", "proportional", "maxmin"]),
                "--out",
                "alloc.csv",
            ],
            ".csv",
            text_kind="csv",
        ),
        Target(
            "fio-json",
            sorted((DATA / "fio").glob("*.json")),
            lambda f, d: ["lab", "tidy", f, "--out", "tidy.csv"],
            ".json",
            text_kind="json",
        ),
    ]
    for fmt, name in (
        ("msr", "msr.csv"),
        ("systor17", "systor17.csv"),
        ("blkparse", "blkparse.txt"),
        ("iolog2", "iolog2.log"),
        ("iolog3", "iolog3.log"),
    ):
        listing.append(
            Target(
                f"trace-{fmt}",
                [traces / name],
                lambda f, d, fmt=fmt: [
                    "sim",
                    "--trace",
                    f,
                    "--trace-format",
                    pick(d, [fmt, "auto"]),
                    "--device",
                    pick(d, ["nvme-analytic", "hdd-7200"]),
                    "--speed",
                    pick(d, ["1", "0.001", "1000"]),
                    "--output-format",
                    "terse",
                ],
                Path(name).suffix,
                check=sim_parse_check,
                text_kind="csv" if name.endswith(".csv") else "lines",
            )
        )
    assert sorted(t.name for t in listing) == sorted(NAMES)
    return {t.name: t for t in listing}


# ---- mutations ----------------------------------------------------------------------------------

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_VALUE = {
    "lines": re.compile(rb"^([ \t]*[\w.+-]+[ \t]*=[ \t]*)([^\n]*)$", re.M),
    "toml": re.compile(rb"^([ \t]*[\w.\"-]+[ \t]*=[ \t]*)([^\n#]*)", re.M),
    "yaml": re.compile(rb"^([ \t-]*[\w.\"-]+[ \t]*:[ \t]*)([^\n#]*)$", re.M),
    "xml": re.compile(rb"(<(\w+)>)([^<]*)(?=</\2>)"),
    "json": re.compile(rb'("[\w]+"[ \t]*:[ \t]*)("[^"]*"|[^,}\]\s]+)'),
    "csv": re.compile(rb"(^|,)([^,\n]*)", re.M),
}


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


@st.composite
def mutated(draw, target: Target, seed_texts: dict[Path, bytes]) -> tuple[Path, bytes, list]:
    """A seed of `target` and one to four mutations of it: (seed, bytes, what was done)."""
    seed = draw(st.sampled_from(target.seeds))
    data = seed_texts[seed]
    done = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(
                ["value", "value", "number", "number", "insert-key", "delete", "duplicate",
                 "swap", "truncate", "junk", "flip", "splice"]
            )
        )  # fmt: skip
        lines = _lines(data)
        if kind == "value":
            pattern = _VALUE[target.text_kind]
            matches = list(pattern.finditer(data))
            if not matches:
                continue
            m = matches[draw(st.integers(0, len(matches) - 1))]
            value = draw(st.sampled_from(INTERESTING)).encode()
            if target.text_kind == "xml":
                start, end = m.end(1), m.end(3)
            else:
                start, end = m.start(2), m.end(2)
            if target.text_kind in ("json", "toml") and draw(st.booleans()):
                value = json.dumps(value.decode()).encode()
            data = data[:start] + value + data[end:]
        elif kind == "number":
            matches = list(_NUMBER.finditer(data))
            if not matches:
                continue
            m = matches[draw(st.integers(0, len(matches) - 1))]
            value = draw(st.sampled_from(INTERESTING)).encode()
            data = data[: m.start()] + value + data[m.end() :]
        elif kind == "insert-key":
            at = draw(st.integers(0, len(lines)))
            value = draw(st.sampled_from(INTERESTING))
            if target.text_kind == "xml":
                tags = re.findall(rb"<(\w+)>[^<]*</\1>", data) or [b"Tag"]
                tag = draw(st.sampled_from(sorted(set(tags)))).decode()
                new = f"<{tag}>{value}</{tag}>"
            elif target.text_kind == "json":
                keys = re.findall(rb'"(\w+)"\s*:', data) or [b"x"]
                key = draw(st.sampled_from(sorted(set(keys)))).decode()
                new = f'"{key}": {value},'
            elif target.keys:
                key = draw(st.sampled_from(target.keys))
                if target.text_kind == "toml":
                    section, _, name = key.rpartition(".")
                    new = f"[{section}]\n{name} = {json.dumps(value)}"
                else:
                    new = f"{key}={value}"
            else:
                new = value
            lines.insert(at, new.encode())
            data = b"\n".join(lines)
        elif kind == "delete" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
            data = b"\n".join(lines)
        elif kind == "duplicate" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i] = [lines[i]] * draw(st.sampled_from([1, 2, 10, 300]))
            data = b"\n".join(lines)
        elif kind == "swap" and len(lines) > 1:
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif kind == "truncate" and data:
            data = data[: draw(st.integers(0, len(data) - 1))]
        elif kind == "junk":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(st.sampled_from(JUNK)) + data[at:]
        elif kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
        elif kind == "splice":
            other = seed_texts[draw(st.sampled_from(target.seeds))]
            a, b = draw(st.integers(0, len(data))), draw(st.integers(0, len(other)))
            data = data[:a] + other[b:]
        else:
            continue
        done.append(kind)
    return seed, data, done


# ---- running cases ------------------------------------------------------------------------------


class Worker:
    """A persistent `fuzz_worker.py` process; `run` answers a case or None when the worker
    had to be killed (past `timeout`) or died (a signal)."""

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self.proc = None
        self.cases_run = 0

    def _start(self) -> None:
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        env = {**os.environ, "QOSLAB_STATE_DIR": str(self.state_dir), "TERM": "dumb"}
        env.pop("RUST_BACKTRACE", None)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("fuzz_worker.py")),
             str(to_worker_r), str(from_worker_w)],
            pass_fds=(to_worker_r, from_worker_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )  # fmt: skip
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._writer = os.fdopen(self._to_worker, "w")
        self._reader = os.fdopen(self._from_worker, "r")
        self.cases_run = 0

    def run(self, case: dict, timeout: float) -> tuple[dict | None, str]:
        if self.proc is None or self.proc.poll() is not None or self.cases_run >= 300:
            self.stop()
            self._start()
        self.cases_run += 1
        answer: list[str] = []

        def read() -> None:
            answer.append(self._reader.readline())

        try:
            self._writer.write(json.dumps(case) + "\n")
            self._writer.flush()
        except BrokenPipeError:
            pass
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.stop()
            return None, "timeout"
        if not answer or not answer[0]:
            code = self.proc.wait()
            self.proc = None
            return None, f"signal {-code}" if code < 0 else f"died with status {code}"
        return json.loads(answer[0]), ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc is not None:
            for f in (self._writer, self._reader):
                with contextlib.suppress(OSError):
                    f.close()
        self.proc = None


def classify(answer: dict) -> str:
    """clean, success or failure (with why) for a worker's answer."""
    code, err = answer["code"], answer["stderr"]
    if any(s in err for s in ("Traceback", "panicked", "RUST_BACKTRACE", "internal error")):
        return "failure: traceback, panic or internal error"
    if code == 0:
        return "success"
    if code == 2:
        errors = answer["error_lines"]
        if len(errors) == 1 and errors[0].startswith("qoslab: error: "):
            return "clean"
        return "failure: exit status 2 without exactly one error line"
    return f"failure: exit status {code}"


@dataclass
class Fuzzer:
    """Runs the cases of every target and keeps the counts."""

    work: Path
    timeout: float = 20.0
    counts: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    failures: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.worker = Worker(self.work / "state")
        self.n = 0

    def case(self, target: Target, seed: Path, data: bytes, argv_of, mutations) -> str:
        self.n += 1
        folder = self.work / f"case-{self.n}"
        path = folder / f"input{target.suffix or seed.suffix}"
        argv = [str(a) for a in argv_of(path)]  # draws first: a draw may end the example
        folder.mkdir()
        path.write_bytes(data)
        case = {"argv": argv, "cwd": str(folder), "env": target.env}
        answer, why = self.worker.run(case, self.timeout)
        if answer is not None:
            outcome = classify(answer)
        elif why == "timeout" and target.check is not None:
            outcome = self._long_or_hang(target, case)
        else:
            outcome = f"failure: {why}"
        kind = outcome.split(":")[0]
        self.counts[target.name][kind] += 1
        if kind == "failure":
            self.failures.append(
                {"target": target.name, "seed": str(seed), "mutations": mutations,
                 "argv": argv, "outcome": outcome,
                 "stderr": (answer or {}).get("stderr", "")[-3000:],
                 "input": data[:4000].decode("utf-8", "replace")}
            )  # fmt: skip
            with open(self.work / "failures.jsonl", "a") as log:
                log.write(json.dumps(self.failures[-1]) + "\n")
        else:
            shutil.rmtree(folder, ignore_errors=True)
        return outcome

    def _long_or_hang(self, target: Target, case: dict) -> str:
        if target.check == "matrix":
            # Loading the matrix is what could hang; running it is what can be long.
            probe = (
                "from qoslab.nvmelite.config import load_matrix; "
                f"print(load_matrix({case['argv'][2]!r}).runs)"
            )
            try:
                done = subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                      timeout=self.timeout, cwd=case["cwd"])  # fmt: skip
            except subprocess.TimeoutExpired:
                return "failure: timeout (also when only loaded)"
            return "long" if done.returncode == 0 else "failure: timeout"
        answer, why = self.worker.run({**case, "argv": target.check(case["argv"])}, self.timeout)
        if answer is not None and classify(answer) in ("clean", "success"):
            return "long"
        return f"failure: timeout ({why or classify(answer)} when only read)"

    def close(self) -> None:
        self.worker.stop()

    def report(self) -> dict:
        total = collections.Counter()
        for c in self.counts.values():
            total.update(c)
        return {
            "targets": {name: dict(c) for name, c in sorted(self.counts.items())},
            "total": dict(total),
            "failures": self.failures,
        }


def prepare(work: Path) -> tuple[dict[str, Target], dict[Path, bytes]]:
    """The targets with their seeds, and every seed's bytes; a schedule for the replay target
    is made by running the workload once."""
    seed_dir = work / "seeds"
    seed_dir.mkdir(parents=True, exist_ok=True)
    found = targets(seed_dir)
    subprocess.run(
        [sys.executable, "-m", "qoslab", "nvmelite", "run",
         ROOT / "configs/nvmelite/seeds/seed_001.json", "--policy", "RANDOM", "--bound", "3",
         "--fault", "TIMEOUT", "--seed", "4", "--log", seed_dir / "run.log",
         "--schedule-out", seed_dir / "run.sched"],
        check=True, capture_output=True,
    )  # fmt: skip
    texts = {s: s.read_bytes() for t in found.values() for s in t.seeds}
    return found, texts


def new_work_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="qoslab-fuzz-"))


def table(report: dict) -> str:
    """The counts of a report as a Markdown table (for the notes)."""
    kinds = ("clean", "success", "long", "failure")
    rows = ["| target | cases | " + " | ".join(kinds) + " |", "|---|" + "---|" * (len(kinds) + 1)]
    for name, counts in [*report["targets"].items(), ("**total**", report["total"])]:
        cells = [str(counts.get(k, 0)) for k in kinds]
        rows.append(f"| {name} | {sum(counts.values())} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(json.loads(Path(sys.argv[1]).read_text())))
