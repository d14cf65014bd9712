"""`qoslab fs crash-check`: the file systems' crash checker; `qoslab fs study`: fsync-append
on the three file systems in the simulator; `qoslab fs kernel`: the simulator's ext4 against
the guest kernel's (docs/fs.md)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from qoslab._core import fs as _core
from qoslab.errors import InputError, did_you_mean
from qoslab.options import set_options, store_option
from qoslab.outputs import earlier_output, staged_dir, write_files

FS_NAMES = [name for name, _, _ in _core.FILE_SYSTEMS]
FS_HELP = "File system: " + "; ".join(f"{n} ({h})" for n, h, _ in _core.FILE_SYSTEMS) + "."
SET_HELP = (
    "A tunable, KEY=VALUE (repeatable): the file system's own ("
    + "; ".join(
        f"{fs}: " + ", ".join(f"{t[0]} (default {t[2]})" for t in tunables)
        for fs, _, tunables in _core.FILE_SYSTEMS
    )
    + ") or \\[fs]'s as fs.KEY."
)

# The workload options reach the core as 32-bit counts; a million is far past any useful run.
MAX_COUNT = 1_000_000

app = typer.Typer(
    name="fs",
    help="The page cache and the file systems above the block layer (ext4 with JBD2, "
    "HORAEFS, RioFS): their crash checker, the fsync-append study, and the simulator's ext4 "
    "against the guest kernel's.",
    no_args_is_help=True,
)


@app.command("crash-check")
def crash_check(
    fs: str = typer.Option("ext4", "--fs", help=FS_HELP),
    workloads: int = typer.Option(
        50, "--workloads", min=1, max=MAX_COUNT, help="Seeded random workloads to run."
    ),
    seed: int = typer.Option(1, "--seed", min=0, help="Seed of the first workload."),
    threads: int = typer.Option(
        3, "--threads", min=1, max=MAX_COUNT, help="Threads of each workload."
    ),
    calls: int = typer.Option(
        16, "--calls", min=1, max=MAX_COUNT, help="System calls of each thread."
    ),
    names: int = typer.Option(
        5, "--names", min=1, max=MAX_COUNT, help="File names the threads share."
    ),
    sets: list[str] = typer.Option([], "--set", help=SET_HELP, show_default="none"),
    out: Path | None = typer.Option(
        None, "--out", help="Write summary.json and reproducers.", show_default="not written"
    ),
) -> None:
    """Run seeded workloads of racing threads (creates, appends, overwrites, O_SYNC and O_DSYNC
    writes, fsync, fdatasync, unlink, rename) on a file system, cut the power at every point
    a write or FLUSH was sent or completed, recover every device state the block layer's
    contract allows there (the journals replayed), and check the file system (as e2fsck
    would) and every fsync that had returned. Exit status 1 when something is wrong."""
    if fs not in FS_NAMES:
        raise InputError(
            f"--fs: expected one of {', '.join(FS_NAMES)}, got '{fs}'" + did_you_mean(fs, FS_NAMES)
        )
    try:
        text = _core.crash_check(fs, set_options(sets), workloads, seed, threads, calls, names)
    except ValueError as err:
        raise InputError(str(err)) from None
    summary = json.loads(text)
    if out is not None:
        files = {Path("summary.json"): json.dumps(summary, indent=1) + "\n"}
        for i, r in enumerate(summary["reproducers"]):
            files[Path(f"reproducer-{i}.json")] = json.dumps(r, indent=1) + "\n"
        with staged_dir(
            out,
            is_earlier_output=earlier_output("summary.json"),
            refusal="exists, is not empty and holds no summary.json; choose another directory",
        ) as tmp:
            write_files({tmp / name: data for name, data in files.items()})
    print(
        f"{summary['fs']}: {summary['workloads']} workloads, {summary['crash_points']} crash "
        f"points, {summary['states']} states recovered, {summary['violating_states']} "
        f"inconsistent or losing an fsync ({summary['failing_workloads']} workloads)"
    )
    for r in summary["reproducers"]:
        print(
            f"  seed {r['seed']}: power cut at {r['crash_at_ns']} ns: {r['problems'][0]}",
        )
    if summary["violating_states"]:
        raise typer.Exit(1)


@app.command("study")
def study(
    out: Path = typer.Option(
        ...,
        "--out",
        help="Directory for runs.csv, summary.csv, ratios.csv, breakdown.csv (fsync-append), "
        "throughput.png.",
    ),
    workload: str = typer.Option(
        "fsync-append",
        "--workload",
        help="fsync-append (Figure 13, fio's fsync=1 job), varmail (Filebench's Varmail) or "
        "fillsync (RocksDB's db_bench fillsync), Figure 15.",
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="1 and 4 threads, 20 operations per thread (Varmail: 26, two rounds) (seconds).",
    ),
    threads: str = typer.Option(
        "1,4,16,24", "--threads", help="Comma-separated thread counts (the document's 1-24)."
    ),
    writes: int = typer.Option(
        200,
        "--writes",
        min=1,
        max=MAX_COUNT,
        help="Operations per thread: appends (each with its fsync), Varmail's flowops or "
        "fillsync's puts.",
    ),
    devices: str = typer.Option(
        "", "--devices", help="Comma-separated presets.", show_default="rio-flash,rio-optane"
    ),
    seeds: int = typer.Option(3, "--seeds", min=3, max=100, help="Seeds per point."),
    jobs: int = typer.Option(2, "--jobs", min=1, max=64, help="Simulations run at once."),
    sets: list[str] = typer.Option(
        [],
        "--set",
        help="KEY=VALUE of qoslab sim added to every run (repeatable; e.g. fs.syscall_ns=5us; "
        "`qoslab sim --list-tunables` lists them): one cause changed alone.",
        show_default="none",
    ),
    store: Path | None = store_option(),
    quiet: bool = typer.Option(False, "--quiet", help="No progress."),
) -> None:
    """The Rio document's fsync-append (Figure 13), Varmail and fillsync (Figure 15) in the
    simulator, on ext4, HORAEFS and RioFS over Rio's flash and Optane targets (rio-flash,
    rio-optane); throughput against threads, and RioFS's ratios beside the document's."""
    import dataclasses

    from qoslab.fs import study as st
    from qoslab.options import int_list_option

    if workload not in st.WORKLOADS:
        raise InputError(
            f"--workload: expected one of {', '.join(st.WORKLOADS)}, got '{workload}'"
            + did_you_mean(workload, list(st.WORKLOADS))
        )
    if quick:
        plan = st.Plan.quick(workload)
    else:
        plan = st.Plan(
            threads=int_list_option(threads, "--threads"), writes=writes, workload=workload
        )
    plan = dataclasses.replace(plan, seeds=seeds, sets=tuple(sets))
    if devices:
        plan = dataclasses.replace(plan, devices=tuple(d.strip() for d in devices.split(",")))
    table = st.run_study(plan, out, jobs=jobs, quiet=quiet, store=store)
    for r in table.itertuples():
        print(
            f"{r.device} {r.threads:>2} threads: {r.figure} riofs/{r.vs} {r.qoslab:.2f}x "
            f"(document, {r.document_at}: {r.document}x)"
        )
    if workload == "fsync-append":
        print(f"latency breakdown (Figure 14): {out / 'breakdown.csv'}")
    print(f"study: {out / 'summary.csv'}, {out / 'throughput.png'}")


@app.command("kernel")
def kernel(
    out: Path = typer.Option(
        ..., "--out", help="Directory for kernel.csv, sim.csv, compare.csv, compare.png, raw/."
    ),
    device: str = typer.Option(
        "",
        "--device",
        help="A null_blk SPEC with memory_backed=1 (and cache_size for a write cache; docs/vm.md).",
        show_default="null_blk, 4 ms per request, 32 tags, a 64 MiB write cache, 4 GiB",
    ),
    threads: str = typer.Option("1,4,16,24", "--threads", help="Comma-separated thread counts."),
    reps: int = typer.Option(
        3, "--reps", min=3, max=100, help="Repetitions in the guest, seeds in the simulator."
    ),
    appends: int = typer.Option(
        300, "--appends", min=1, max=MAX_COUNT, help="Appends (each with its fsync) per thread."
    ),
    mount_options: str = typer.Option(
        "",
        "--mount-options",
        help="ext4 mount options beyond the kernel's defaults, in the guest and as the twin's "
        "\\[fs.ext4] settings: dioread_nolock, nodioread_nolock, barrier, nobarrier, "
        "journal_async_commit.",
    ),
    accel: str = typer.Option("auto", "--accel", help="auto, kvm or tcg (docs/vm.md)."),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds the guest may take.", show_default="120 s + 90 s per run"
    ),
    trace: bool = typer.Option(
        False,
        "--trace",
        help="Also trace the guest's jbd2 commits, block requests and conversion worker (ftrace): "
        "kernel.csv gains commit_ms, commit_send_us and conversion_us, raw/ the traces.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress messages."),
) -> None:
    """fsync-append on the guest kernel's real ext4 (Linux 6.1 under QEMU, on a null_blk disk
    with a write cache) and on the simulator's ext4 on the disk's twin, side by side: appends
    per second, fsync latency mean and p99, device writes per fsync, per thread count."""
    import dataclasses
    import sys

    from qoslab.fs import kernel as kn
    from qoslab.interrupts import terminable
    from qoslab.options import int_list_option

    plan = kn.Plan(
        threads=int_list_option(threads, "--threads"), reps=reps, appends=appends,
        mount_options=mount_options, trace=trace,
    )  # fmt: skip
    if device:
        plan = dataclasses.replace(plan, device=device)
    spec = kn.check_plan(plan)

    def say(msg: str) -> None:
        if not quiet:
            print(f"qoslab fs kernel: {msg}", file=sys.stderr, flush=True)

    with (
        terminable(),
        staged_dir(
            out,
            is_earlier_output=earlier_output("compare.csv", "meta.json"),
            refusal="exists, is not empty and is not an earlier qoslab fs kernel; choose another",
        ) as tmp,
    ):
        kernel_rows = kn.run_kernel(
            plan, spec, tmp / "raw", accel=accel, timeout_s=timeout, say=say
        )
        say(f"the simulator's twin, {plan.reps} seeds per thread count")
        sim_rows = kn.run_sim(plan, spec)
        guest_meta = json.loads((tmp / "raw" / "guest.json").read_text())
        compared = kn.write_outputs(plan, kernel_rows, sim_rows, tmp, guest_meta)
    for r in compared.itertuples():
        print(
            f"{r.threads:>2} threads {r.metric:<17} kernel {r.kernel_mean:10.3f} "
            f"± {r.kernel_sd:.3f}  sim {r.sim_mean:10.3f}  ({r.sim_over_kernel:.2f}x)"
            f"{'  (not reported)' if r.inside is None else '' if r.inside else '  outside'}"
        )
    if trace:
        for t, k in kernel_rows.groupby("threads", sort=True):
            print(
                f"{t:>2} threads traced: commit {k.commit_ms.mean():.3f} ms, logging to its first "
                f"journal write {k.commit_send_us.mean():.0f} us, a conversion "
                f"{k.conversion_us.mean():.1f} us (guest time)"
            )
    print(f"fs kernel: {out / 'compare.csv'}, {out / 'compare.png'}")
