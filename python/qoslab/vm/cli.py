"""`qoslab vm`: study 5's real kernel, a Debian guest under QEMU (docs/vm.md).

Only typer is imported here; each command imports its machinery when it runs.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path

import typer

from qoslab.errors import InputError

app = typer.Typer(
    name="vm",
    help="Study 5's real kernel: a pinned Debian 6.1 guest under QEMU with null_blk or "
    "scsi_debug devices, the kernel's schedulers and qoslab's prio and prio-advanced modules.",
    no_args_is_help=True,
)

ACCEL_HELP = "auto (KVM if a probe boot works, else TCG), kvm or tcg."


@contextlib.contextmanager
def _terminable():
    """SIGTERM behaves like Ctrl-C, so QEMU is killed and scratch folders go."""

    def _raise(_sig, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _say(quiet: bool):
    def say(msg: str) -> None:
        if not quiet:
            print(f"qoslab vm: {msg}", file=sys.stderr, flush=True)

    return say


def repo_kernel_dir() -> Path:
    """qoslab's own modules (kernel/ of the checkout this package runs from)."""
    return Path(__file__).resolve().parents[3] / "kernel"


def own_modules(kernel, say) -> dict[str, Path]:
    """prio and prio-advanced, built (once per change) into build/kernel of the checkout."""
    from qoslab.vm.kbuild import build_modules

    src = repo_kernel_dir()
    if not src.is_dir():
        raise InputError(f"qoslab's module sources are not at {src}")
    out = src.parent / "build" / "kernel" / kernel.release
    kos = {"prio": out / "prio-iosched.ko", "prio-advanced": out / "prio-advanced-iosched.ko"}
    newest = max(f.stat().st_mtime for f in src.iterdir() if f.is_file())
    if not all(k.exists() and k.stat().st_mtime >= newest for k in kos.values()):
        say(f"building prio and prio-advanced for {kernel.release}")
        build_modules(kernel, src, out)
    return kos


def _modules_for(kernel, scheduler: str, extra: list[Path], say) -> list[Path]:
    for m in extra:
        if not m.is_file() or m.suffix != ".ko":
            raise InputError("--module: expected a .ko file built for the guest kernel", path=m)
    mods = list(extra)
    if scheduler in ("prio", "prio-advanced") and not any(
        m.name.startswith(f"{scheduler}-iosched") for m in extra
    ):
        mods.insert(0, own_modules(kernel, say)[scheduler])
    return mods


@app.command("fetch")
def fetch_cmd(quiet: bool = typer.Option(False, "--quiet", help="Say nothing.")) -> None:
    """Download and unpack the pinned guest kernel and busybox (cached); print where they are."""
    from qoslab.vm.packages import fetch

    with _terminable():
        kernel = fetch(_say(quiet))
    typer.echo(f"{kernel.release} ({kernel.version}) {kernel.root}")


@app.command("build")
def build_cmd(
    src: Path = typer.Argument(..., help="Directory of a module's sources with its Kbuild."),
    out: Path = typer.Option(..., "--out", help="Build directory (the .ko files land here)."),
    checkpatch: bool = typer.Option(
        False, "--checkpatch", help="Also run the kernel's checkpatch.pl on the sources."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="Say nothing but the .ko paths."),
) -> None:
    """Build out-of-tree modules against the guest kernel (W=1, warnings are errors)."""
    from qoslab.vm import kbuild
    from qoslab.vm.packages import fetch

    with _terminable():
        kernel = fetch(_say(quiet))
        kos = kbuild.build_modules(kernel, src, out)
        if checkpatch:
            files = sorted(p for p in src.iterdir() if p.suffix in (".c", ".h"))
            problems = kbuild.checkpatch(kernel, files)
            if problems:
                raise InputError(f"checkpatch: {problems[0]} ({len(problems)} in all)")
    for ko in kos:
        typer.echo(str(ko))


@app.command("fio")
def fio_cmd(
    job: Path = typer.Argument(..., help="fio job file (without filename=: the guest gives it)."),
    device: str = typer.Option(
        ...,
        "--device",
        help="SPEC: a kernel module and its parameters, e.g. "
        "null_blk:completion_nsec=4000000,hw_queue_depth=2,irqmode=2 or "
        "scsi_debug:ndelay=1000000,max_queue=16 (docs/vm.md).",
    ),
    scheduler: str = typer.Option(
        "none", "--scheduler", help="none, mq-deadline, kyber, bfq, prio or prio-advanced."
    ),
    reps: int = typer.Option(1, "--reps", help="Repetitions (rep-1.json ... rep-N.json)."),
    out: Path = typer.Option(..., "--out", help="Output directory."),
    sets: list[str] = typer.Option(
        [],
        "--set",
        help="A sysfs setting of the device: iosched.NAME=VALUE or queue.NAME=VALUE (repeatable).",
        show_default="none",
    ),
    module: list[Path] = typer.Option(
        [],
        "--module",
        help="Insert this .ko first (repeatable; build it with qoslab vm build).",
        show_default="none",
    ),
    accel: str = typer.Option("auto", "--accel", help=ACCEL_HELP),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds the whole guest run may take.",
        show_default="90 s + 1.5 x each repetition's runtime + 20 s",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress messages."),
) -> None:
    """Run a fio job file in the guest on a SPEC device under a scheduler, N times."""
    from qoslab.outputs import staged_dir
    from qoslab.vm.devices import parse_spec
    from qoslab.vm.packages import fetch
    from qoslab.vm.run import check_scheduler, parse_settings, run_fio

    spec = parse_spec(device)
    check_scheduler(scheduler)
    settings = parse_settings(sets)
    say = _say(quiet)
    with _terminable():
        kernel = fetch(say)
        modules = _modules_for(kernel, scheduler, module, say)
        with staged_dir(
            out,
            is_earlier_output=lambda p: (p / "meta.json").exists(),
            refusal="not empty and not an earlier qoslab vm output; choose another --out",
        ) as staged:
            meta = run_fio(
                kernel, job, spec, scheduler, reps, staged, settings=settings,
                modules=modules, accel=accel, timeout_s=timeout, say=say,
            )  # fmt: skip
    say(f"{reps} repetition(s) in {meta['wall_seconds']:.0f} s under {meta['accel']}: {out}")
