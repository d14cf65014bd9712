"""`qoslab nvmelite diff`: differential testing of an NVMe-lite implementation.

The command sits in the `nvmelite` group, but the group does not know the differential tester
(which depends on the model, never the reverse): `register` adds it there.
"""

from __future__ import annotations

from pathlib import Path

import typer

from qoslab.dut.options import DiffOptions
from qoslab.errors import InputError


def diff(
    target: Path = typer.Argument(
        ...,
        help="Matrix config YAML, or a workload JSON file together with --schedule.",
    ),
    dut: str = typer.Option(
        ...,
        "--dut",
        help="The implementation under test: a command line (see docs/dut-protocol.md), "
        "or builtin:c for qoslab's independent C implementation.",
    ),
    out: Path = typer.Option(..., "--out", help="Output directory (replaced atomically)."),
    dut_batch: bool = typer.Option(
        False, "--dut-batch", help="Use the DUT's batch mode (many runs per process)."
    ),
    jobs: int = typer.Option(1, "--jobs", min=1, help="DUT processes running at once."),
    timeout_s: float = typer.Option(
        10.0, "--timeout-s", help="Seconds a run may take before the DUT is killed."
    ),
    only: str = typer.Option(
        "all", "--only", help="poison: only the top-K poison schedules; all: every run."
    ),
    top_k: int = typer.Option(10, "--top-k", min=0, help="Poison schedules, checked first."),
    submit_window: str = typer.Option(
        "inf", "--submit-window", help="Submit window of the matrix: an integer or inf."
    ),
    schedule: list[Path] = typer.Option(
        [],
        "--schedule",
        help="With a workload: a schedule file to replay (repeatable).",
        show_default="none",
    ),
    minimize: int = typer.Option(
        10, "--minimize", min=0, help="Failing runs that get a minimised reproducer."
    ),
) -> None:
    """Replay the model's schedules on a DUT and report where its logs diverge.

    Exit status 0 when every run matches, 1 when a run diverges or the DUT fails one,
    2 on bad input.
    """
    if only not in ("poison", "all"):
        raise InputError(f"--only: expected poison or all, got '{only}'")
    opts = DiffOptions(
        dut=dut,
        out=out,
        batch=dut_batch,
        jobs=jobs,
        timeout_s=timeout_s,
        only=only,
        top_k=top_k,
        submit_window=submit_window,
        minimize=minimize,
        schedules=list(schedule),
    )
    # Imported here: every `qoslab` command registers `diff`, only this one needs the harness.
    from qoslab.dut.harness import diff as run_diff

    raise typer.Exit(run_diff(target, opts))


def register(nvmelite_app: typer.Typer) -> None:
    nvmelite_app.command(name="diff")(diff)
