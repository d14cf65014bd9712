"""One progress display (qoslab.progress) for every command that shows progress, `qoslab sim`'s
included: on a terminal a bar with what is done of how much, the time so far and an ETA; nothing
under --quiet or when stderr is not a terminal; fio's --eta, --eta-newline for `qoslab sim`."""

from __future__ import annotations

import ast
import io
import re
import time

from rich.console import Console

from conftest import ROOT
from qoslab.progress import Count, lines_every, progress_bar

PACKAGE = ROOT / "python" / "qoslab"


def _shown(quiet: bool = False, terminal: bool = True) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=120)
    with progress_bar(quiet, console=console) as bar:
        runs = Count(bar, "sched study", total=3)
        runs.advance()
        runs.advance()
        written = bar.add_task("writing t.img", total=4096)
        bar.update(written, completed=1024)
    return out.getvalue()


def test_on_a_terminal_the_bar_shows_runs_done_of_all_a_percentage_and_an_eta():
    shown = _shown()
    assert "sched study" in shown and "2/3" in shown
    assert "writing t.img" in shown and "25%" in shown
    assert "ETA" in shown


def test_nothing_is_drawn_under_quiet_or_when_stderr_is_not_a_terminal():
    assert _shown(quiet=True) == ""
    assert _shown(terminal=False) == ""


def test_a_count_follows_a_total_that_changes():
    out = io.StringIO()
    with progress_bar(console=Console(file=out, force_terminal=True, width=120)) as bar:
        points = Count(bar, "sweep s")
        points(5, 40, description="sweep s  failed 1")
    assert "5/40" in out.getvalue() and "failed 1" in out.getvalue()


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE), ast.parse(path.read_text(encoding="utf-8"))


def _starts_with_cr(arg: ast.expr) -> bool:
    if isinstance(arg, ast.JoinedStr) and arg.values:
        arg = arg.values[0]
    return isinstance(arg, ast.Constant) and str(arg.value).startswith("\r")


def _draws(node: ast.AST) -> bool:
    """A `print(...)` or a `.write(...)` of something."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "print") or (
        isinstance(f, ast.Attribute) and f.attr == "write"
    )


def test_no_module_draws_progress_of_its_own():
    """rich's progress classes only in qoslab/progress.py, and no counter redrawn with `\\r`."""
    own = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "rich.progress":
                own.append(f"{rel}: imports rich.progress")
            if _draws(node) and _starts_with_cr(node.args[0]):
                own.append(f"{rel}:{node.lineno}: a line redrawn with \\r")
    assert own == ["progress.py: imports rich.progress"]


def test_the_rio_study_counts_every_simulator_run_it_makes():
    from qoslab.rio import study

    plan = study.Plan.quick()
    ticks = []
    results = study.run_all(plan, [], lambda: ticks.append("run"), jobs=1)
    # one tick per simulator run: every point at every seed, and for each recovery point the
    # run that times it and the run its cuts are taken in
    assert len(ticks) == study.runs(plan) == results.runs
    assert len(results.points) == 42 * plan.seeds


# A run of a few tenths of a second: 20,000 reads at depth 4 on one 10 us server.
SIM_JOB = ["--name=p", "--direct=1", "--ioengine=libaio", "--iodepth=4", "--rw=randread"]
SIM_JOB += ["--number_ios=20000", "--device=ideal", "--minimal"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_qoslab_sim_draws_this_bar_as_fios_eta_says(qoslab):
    """`qoslab sim`'s bar is this module's: the simulator only says how far its runs are.
    fio's --eta: auto draws on a terminal only (stderr here is a pipe), never and --quiet
    never, always also into a pipe; the bar changes nothing that is written."""
    report = qoslab("sim", *SIM_JOB)
    assert report.returncode == 0 and report.stderr == ""
    for quiet in (["--eta=never"], ["--quiet"], ["--eta=auto"]):
        done = qoslab("sim", *SIM_JOB, *quiet)
        assert (done.stdout, done.stderr) == (report.stdout, ""), quiet
    done = qoslab("sim", *SIM_JOB, "--eta=always")
    assert done.returncode == 0 and done.stdout == report.stdout
    shown = ANSI.sub("", done.stderr)
    assert "sim: " in shown and "20,000 I/Os" in shown and "100%" in shown and "ETA" in shown
    # With --repeat, the runs done of all.
    done = qoslab("sim", *SIM_JOB, "--repeat=3", "--eta=always")
    assert done.returncode == 0 and "3/3 runs" in ANSI.sub("", done.stderr)


def test_eta_newline_prints_the_bar_as_lines_that_stay():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    # Redrawn once in 1000 s: what reaches the file is the lines, the first and last draws.
    with progress_bar(console=console, refresh_s=1000) as bar, lines_every(bar, 0.05):
        Count(bar, "sim", total=4).advance()
        time.sleep(0.5)
    # A line that stays ends with a newline; the bar's redraws start with a carriage return.
    lines = [ANSI.sub("", line).split("\r")[-1] for line in out.getvalue().split("\n")]
    kept = [line for line in lines if line.startswith("sim")]
    assert len(kept) >= 4 and all("1/4" in line for line in kept), lines
    # Nothing is drawn, and no line printed, when the bar is not drawn.
    quiet = io.StringIO()
    with progress_bar(True, Console(file=quiet), refresh_s=1000) as bar, lines_every(bar, 0.01):
        Count(bar, "sim", total=4).advance()
        time.sleep(0.05)
    assert quiet.getvalue() == ""
