"""`qoslab vm`: study 5's real kernel, a Debian guest under QEMU (docs/vm.md).

Only typer is imported here; each command imports its machinery when it runs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import typer

from qoslab.errors import InputError
from qoslab.interrupts import terminable

app = typer.Typer(
    name="vm",
    help="Study 5's real kernel: a pinned Debian 6.1 guest under QEMU with null_blk or "
    "scsi_debug devices, the kernel's schedulers and qoslab's prio and prio-advanced modules.",
    no_args_is_help=True,
)

ACCEL_HELP = "auto (KVM if a probe boot works, else TCG), kvm or tcg."


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

    with terminable():
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

    with terminable():
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
    trace: bool = typer.Option(
        False,
        "--trace",
        help="Record the block layer's tracepoints (bio queued and merged, request inserted, "
        "issued, completed) of each repetition as rep-N.trace (ftrace's text).",
    ),
    trace_event: list[str] = typer.Option(
        [],
        "--trace-event",
        help="With --trace, also this tracepoint of the guest, GROUP/NAME as in tracefs "
        "(e.g. syscalls/sys_enter_io_submit, block/block_getrq, sched/sched_switch; "
        "repeatable; implies --trace).",
        show_default="none",
    ),
    fs: str | None = typer.Option(
        None,
        "--fs",
        help="Make this file system on the device (ext4: the host's mkfs.ext4, mounted with the "
        "kernel's defaults) anew before each repetition and run the job in its root directory.",
        show_default="none: the job runs on the device itself",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress messages."),
) -> None:
    """Run a fio job file in the guest on a SPEC device under a scheduler, N times."""
    from qoslab.guest_devices import parse_spec
    from qoslab.outputs import earlier_output, staged_dir
    from qoslab.vm.packages import fetch
    from qoslab.vm.run import check_fs, check_scheduler, parse_settings, parse_trace_events, run_fio

    spec = parse_spec(device)
    trace_events = parse_trace_events(trace_event)
    check_scheduler(scheduler)
    check_fs(fs, spec)
    settings = parse_settings(sets)
    say = _say(quiet)
    with terminable():
        kernel = fetch(say)
        modules = _modules_for(kernel, scheduler, module, say)
        with staged_dir(
            out,
            is_earlier_output=earlier_output("meta.json"),
            refusal="not empty and not an earlier qoslab vm output; choose another --out",
        ) as staged:
            meta = run_fio(
                kernel, job, spec, scheduler, reps, staged, settings=settings,
                modules=modules, accel=accel, timeout_s=timeout, say=say, trace=trace, fs=fs,
                trace_events=trace_events,
            )  # fmt: skip
    say(f"{reps} repetition(s) in {meta['wall_seconds']:.0f} s under {meta['accel']}: {out}")


@app.command("check")
def check_cmd(
    out: Path | None = typer.Option(
        None, "--out", help="Keep what the guest wrote here.", show_default="not kept"
    ),
    accel: str = typer.Option("auto", "--accel", help=ACCEL_HELP),
    timeout: float = typer.Option(240.0, "--timeout", help="Seconds the guest may take."),
    skip_if_unavailable: bool = typer.Option(
        False,
        "--skip-if-unavailable",
        help="Where no guest can run (no QEMU, no guest kernel packages), say so in one line "
        "and exit 0 (make test).",
    ),
) -> None:
    """The guest kernel test: build and load both modules, switch every scheduler under load,
    check priority separation, no starvation, unloading and a clean dmesg."""
    from qoslab.vm import check, guest, qemu
    from qoslab.vm.packages import fetch

    say = _say(False)
    with terminable():
        try:
            qemu.qemu_binary()
            kernel = fetch(say)
        except InputError as err:
            if not skip_if_unavailable:
                raise
            print(f"vm check: skipped: no guest can run here: {err}")
            print("vm check: 1 test skipped, 0 passed")
            return
        modules = list(own_modules(kernel, say).values())
        with tempfile.TemporaryDirectory(prefix="qoslab-vm-check-") as scratch:
            session = check.session(kernel, modules, Path(scratch))

            def on_line(line: str) -> None:
                if line.startswith("qoslab-step: "):
                    say(line.removeprefix("qoslab-step: "))

            result = guest.run_session(
                session, accel=accel, timeout_s=timeout, say=say, on_line=on_line
            )
            try:
                checks = check.evaluate(result.out)
                if out is not None:
                    if out.exists():
                        shutil.rmtree(out)
                    shutil.copytree(result.out, out)
            finally:
                shutil.rmtree(result.out, ignore_errors=True)
    failed = [c for c in checks if not c.ok]
    for c in checks:
        print(f"vm check: {'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
    print(
        f"vm check: {len(checks) - len(failed)} passed, {len(failed)} failed, 0 skipped "
        f"({result.boot.accel}, {result.boot.seconds:.0f} s)"
    )
    if failed:
        raise typer.Exit(1)


@app.command("study")
def study_cmd(
    out: Path = typer.Option(..., "--out", help="Output directory."),
    devices: str = typer.Option(
        ";".join(__import__("qoslab.vm.study", fromlist=["DEVICES"]).DEVICES),
        "--devices",
        help="Guest device SPECs, separated by ';'.",
    ),
    schedulers: str = typer.Option(
        "none,mq-deadline,kyber,bfq,prio,prio-advanced", "--schedulers", help="Comma list."
    ),
    reps: int = typer.Option(5, "--reps", help="Repetitions in the guest, seeds in the simulator."),
    runtime: float = typer.Option(5.0, "--runtime", help="Seconds per run (after the warm-up)."),
    ramp: float = typer.Option(1.0, "--ramp", help="Warm-up seconds per run, not measured."),
    mailing_list: bool = typer.Option(
        True, "--mailing-list/--no-mailing-list", help="Also the mailing list's mq-deadline test."
    ),
    accel: str = typer.Option("auto", "--accel", help=ACCEL_HELP),
    timeout_s: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds each guest boot may take.",
        show_default="300 s + 8 x the runs' length",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress messages."),
) -> None:
    """The guest kernel beside the simulator: the study's two jobs under every scheduler on
    each device and its twin, and the mailing list's mq-deadline priority test."""
    import json as _json

    import pandas as pd

    from qoslab.outputs import earlier_output, staged_dir
    from qoslab.vm import study
    from qoslab.vm.packages import fetch

    if reps < 3:
        raise InputError("--reps: error bars need at least 3 repetitions (the study uses 5)")
    study.fio_time(runtime, "--runtime")
    study.fio_time(ramp, "--ramp")
    specs, scheds = study.check_inputs(
        [d for d in devices.split(";") if d.strip()], [s for s in schedulers.split(",") if s]
    )
    say = _say(quiet)
    per_run = runtime + ramp + 4.0
    with terminable():
        kernel = fetch(say)
        modules = list(own_modules(kernel, say).values())
        with (
            staged_dir(
                out,
                is_earlier_output=earlier_output("study.json"),
                refusal="not empty and not an earlier qoslab vm study; choose another --out",
            ) as staged,
            tempfile.TemporaryDirectory(prefix="qoslab-vm-study-") as scratch,
        ):
            jobs = {
                "study.fio": study.study_job(runtime, ramp),
                "mailing.fio": study.MAILING_LIST_JOB.format(runtime=study.fio_time(runtime),
                                                             ramp=study.fio_time(ramp)),
            }  # fmt: skip
            inputs = {}
            for name, text in jobs.items():
                (Path(scratch) / name).write_text(text)
                inputs[name] = Path(scratch) / name
            plans = [study.main_plan(s, scheds) for s in specs]
            if mailing_list:
                plans.append(study.mailing_plan())
            kernel_rows, sim_rows = [], []
            accel_used = why = ""
            for plan in plans:
                # Under icount a busy guest runs slower than real time (one instruction per
                # ns on an emulated CPU): runs of many thousand IOPS need several times their
                # length.
                timeout = timeout_s or 300 + reps * len(plan.runs) * per_run * 8
                guest_out = study.run_guest(
                    kernel, plan, reps, inputs, modules, accel=accel, timeout_s=timeout, say=say
                )
                try:
                    kernel_rows.append(study.kernel_table(guest_out, plan, reps))
                    console = (guest_out / "console.log").read_text()
                    study.copy_raw(guest_out, staged / "kernel" / study.slug(plan.spec))
                finally:
                    shutil.rmtree(guest_out, ignore_errors=True)
                accel_used = "kvm" if "under KVM" in console else accel_used or "tcg"
                say(f"simulating the twin of {plan.spec.text}")
                sim_rows.append(study.sim_table(plan.spec, plan.runs, jobs, reps))
            kernel_t = pd.concat(kernel_rows, ignore_index=True)
            sim_t = pd.concat(sim_rows, ignore_index=True)
            kernel_t.to_csv(staged / "kernel.csv", index=False)
            sim_t.to_csv(staged / "sim.csv", index=False)
            compared = study.compare(kernel_t, sim_t)
            compared.to_csv(staged / "compare.csv", index=False)
            from qoslab.vm import qemu

            accel_used, why = qemu.last_choice or (accel_used, "")
            meta = {
                "command": "qoslab vm study",
                "kernel": kernel.release,
                "debian_version": kernel.version,
                "accel": accel_used,
                "accel_why": why,
                "reps": reps,
                "runtime_s": runtime,
                "ramp_s": ramp,
                "devices": [s.text for s in specs],
                "schedulers": list(scheds),
                "jobs": jobs,
            }
            (staged / "study.json").write_text(_json.dumps(meta, indent=1) + "\n")
            study.write_report(staged, compared, meta)
    say(f"report: {out / 'report.html'}")


def _sectors_list(key: str) -> str:
    """A worker's turn's list of request sizes ("8+255", "1", "-") with its unit."""
    return key if key == "-" else f"{key} sector{'' if key == '1' else 's'}"


@app.command("trace")
def trace_cmd(
    out: Path = typer.Argument(..., help="A `qoslab vm fio --trace` output directory."),
    skip: float = typer.Option(
        0.0, "--skip", help="Seconds at the start of each trace to leave out (the job's ramp)."
    ),
) -> None:
    """Per repetition of a traced run: scheduler wait and device time per request size (in the
    tracepoints' 512-byte sectors, with their exact KiB), and each fio process's time between
    one bio and its next in a burst (its CPU time per I/O); with the io_submit and block_getrq
    tracepoints, where in each submission the tag is taken."""
    from qoslab.vm.trace import read_events, size_label, summary

    traces = sorted(out.glob("rep-*.trace"), key=lambda p: int(p.stem.split("-")[1]))
    if not traces:
        raise InputError("no rep-N.trace here: run qoslab vm fio --trace", path=out)
    for path in traces:
        s = summary(read_events(path), skip)
        typer.echo(f"{path.name}:")
        for sectors, w in s["wait"].items():
            d = s["device"].get(sectors, {})
            typer.echo(
                f"  {size_label(sectors)} requests {w['n']:>6}: scheduler wait mean "
                f"{w['mean_ms']:.3f} ms p99 {w['p99_ms']:.3f} max {w['max_ms']:.3f}; "
                f"device mean {d.get('mean_ms', float('nan')):.3f} ms"
            )
        for proc, gap in s["bio_gap_us"].items():
            typer.echo(f"  {proc}: {gap:.1f} us from one bio to the next (median, in a burst)")
        for proc, by_size in s["submit"].items():
            for sectors, r in by_size.items():
                cells = ", ".join(
                    f"{label} {r[k]['median_us']:.1f} ({r[k]['p10_us']:.1f}-{r[k]['p90_us']:.1f})"
                    for k, label in (("to_tag", "entry to tag"), ("after_tag", "tag to return"),
                                     ("whole", "whole call"), ("loop", "return to next call"))
                    if r[k]["n"]
                )  # fmt: skip
                typer.echo(
                    f"  {proc} io_submit of {size_label(sectors)}: {r['calls']} calls, "
                    f"{r['slept']} slept, "
                    f"{r['ahead']} took a tag ahead of a sleeper; us on the CPU, median (p10-p90): "
                    + cells
                )
        for sectors, row in s["first"].items():
            firsts = ", ".join(f"{name} {n}" for name, n in row.items())
            typer.echo(
                f"  after a request of {size_label(sectors)} completed, the task run next: "
                + firsts
            )
        for sectors, row in s["waiting"].items():
            cells = "; ".join(
                f"{size_label(n)} at {100 * w['share']:.1f} % ({w['mean']:.2f} on average)"
                for n, w in row["waiting"].items()
            )
            typer.echo(
                f"  at the {row['n']} completions of {size_label(sectors)}, waiting in the "
                f"scheduler: {cells or 'nothing'}"
            )
        for proc, r in s["on_cpu"].items():
            typer.echo(
                f"  {proc}: on the CPU {r['us_per_bio']:.1f} us per bio ({r['bios']} bios, "
                "sched_switch)"
            )
        cfs = s["cfs"]
        for proc, r in cfs.get("per_process", {}).items():
            typer.echo(
                f"  {proc}: CFS charged {r['us_per_bio']:.1f} us per bio ({r['bios']} bios), "
                f"{r['ms_per_s']:.2f} ms of CPU a second"
            )
        if g := cfs.get("vruntime_gap"):
            t = cfs["together"]
            typer.echo(
                f"  vruntime of {g['first']} minus {g['second']}: median {g['median_ms']:.3f} ms "
                f"({g['p10_ms']:.3f} to {g['p90_ms']:.3f}); both woken before either ran "
                f"{t['n']} time{'' if t['n'] == 1 else 's'}: the lower vruntime ran first "
                f"{t['lower_first']}, "
                f"the first woken {t['woken_first']}"
            )
        for proc, by_key in s["worker"].items():
            for key, r in by_key.items():
                cells = ", ".join(
                    f"{label} {r[k]['median_us']:.1f} ({r[k]['p10_us']:.1f}-{r[k]['p90_us']:.1f})"
                    for k, label in (("whole", "on the CPU"), ("to_issue", "to its first issue"))
                    if r[k]["n"]
                )  # fmt: skip
                typer.echo(
                    f"  {proc} turns issuing {_sectors_list(key)}: "
                    f"{r['turns']}; us, median (p10-p90) of "
                    f"those without a completion inside: {cells or 'none'}"
                )
