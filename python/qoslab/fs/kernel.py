"""`qoslab fs kernel`: the simulator's ext4 against the real ext4 of the guest kernel.

The document's fsync-append (Figure 13: threads appending 4 KiB each to a file of their own, an
fsync after each append) runs twice on the same disk:

- in the guest kernel (`qoslab vm`, docs/vm.md): ext4 made by the host's `mkfs.ext4` on a
  null_blk disk with a volatile write cache (`cache_size`: the kernel sends FLUSHes, each taking
  a request's time), mounted with the kernel's defaults (`data=ordered`, barriers on), a new file
  system for every repetition; one boot runs every thread count, repetition after repetition;
- in the simulator's ext4 on the disk's twin (`qoslab sim --device SPEC --set fs.mount=true`),
  a seed per repetition.

Per thread count the comparison gives the kernel's mean, standard deviation and 95 % t-interval
over its repetitions, the simulator's mean over its seeds, and whether that lies within the
kernel's mean ± 1 standard deviation, for the appends per second, the fsync latency's mean,
99th percentile and largest (fio's `sync` latency, in both JSONs), and the
device's writes and FLUSHes per fsync (the kernel's from `/proc/diskstats`, the simulator's from
its block layer's counters).

With `trace` the guest also records jbd2's commits, the block layer's issues and the workqueue's
executions (ftrace) in every run, and the kernel's rows gain where its time goes: the commits'
length, the commit thread's time from its logging phase to sending the journal's first write,
and the time one `ext4-rsv-conversion` execution takes (`trace_summary`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from qoslab.errors import InputError
from qoslab.guest_devices import DeviceSpec, parse_spec, twin_toml

# 4 ms per request, as the vm study's disks: the guest's CPU time per append and fsync (tens of
# microseconds under TCG, docs/vm.md) stays small beside the device's. 32 tags: more than the
# threads' writes in flight. 4 GiB: mkfs.ext4's default geometry and a 64 MiB journal.
DEVICE = (
    "null_blk:completion_nsec=4000000,hw_queue_depth=32,irqmode=2,memory_backed=1,"
    "cache_size=64,gb=4"
)
THREADS = (1, 4, 16, 24)
METRICS = {
    "appends_per_s": "appends+fsyncs per second (all threads)",
    "fsync_mean_ms": "fsync latency, mean (ms)",
    "fsync_p99_ms": "fsync latency, 99th percentile (ms)",
    "fsync_max_ms": "fsync latency, largest (ms)",
    "writes_per_fsync": "device writes per fsync",
    "flushes_per_fsync": "device FLUSHes per fsync",
}


# ext4 mount options the simulator's ext4 has too, as its `[fs.ext4]` settings: the guest mounts
# with the option, the twin runs with the setting. Linux 6.1 mounts a 4 KiB-block ext4 with
# dioread_nolock (fs/ext4/super.c, ext4_set_def_opts) and barriers.
MOUNT_OPTIONS = {
    "dioread_nolock": "dioread_nolock=true",
    "nodioread_nolock": "dioread_nolock=false",
    "dioread_lock": "dioread_nolock=false",
    "barrier": "barrier=true",
    "nobarrier": "barrier=false",
    "journal_async_commit": "journal_async_commit=true",
}


@dataclass(frozen=True)
class Plan:
    device: str = DEVICE
    threads: tuple[int, ...] = THREADS
    reps: int = 3
    appends: int = 300  # per thread; about 5 s of the guest's time at every thread count
    # ext4's mount options beyond the kernel's defaults (comma-separated, MOUNT_OPTIONS' names).
    mount_options: str = ""
    trace: bool = False  # the guest's commits and conversions traced (TRACE_EVENTS)

    def options(self) -> list[str]:
        return [o for o in self.mount_options.split(",") if o.strip()]

    def sim_sets(self) -> list[str]:
        """The twin's settings: ext4 mounted as in the guest."""
        return ["fs.mount=true", "fs.type=ext4"] + [
            f"fs.ext4.{MOUNT_OPTIONS[o.strip()]}" for o in self.options()
        ]


def job_text(threads: int, appends: int) -> str:
    """fio's fsync-append: a new file per thread (`fallocate=none`: its appends allocate it, as in
    the simulator), `appends` 4 KiB writes each followed by fsync(2); one report for all."""
    return (
        "[global]\nrw=write\nbs=4k\nsize=64m\nfsync=1\nfallocate=none\ngroup_reporting=1\n"
        f"number_ios={appends}\n\n[fsync-append]\nnumjobs={threads}\n"
    )


def check_plan(plan: Plan) -> DeviceSpec:
    spec = parse_spec(plan.device, option="--device")
    if spec.module != "null_blk" or not spec.value("memory_backed"):
        raise InputError(
            "--device: expected a null_blk disk that keeps data (memory_backed=1; with "
            f"cache_size=MB a volatile write cache), got {plan.device!r}"
        )
    from qoslab.vm.image import check_mke2fs

    check_mke2fs()
    if plan.reps < 3:
        raise InputError(f"--reps: at least 3 (a mean and a spread), got {plan.reps}")
    for o in plan.options():
        if o.strip() not in MOUNT_OPTIONS:
            raise InputError(
                f"--mount-options: expected some of {', '.join(MOUNT_OPTIONS)} (options the "
                f"simulator's ext4 has too), got {o.strip()!r}"
            )
    return spec


def fio_metrics(report: dict) -> dict:
    """One run's figures from fio's JSON (one group-reported job)."""
    (job,) = report["jobs"]
    sync = job["sync"]
    lat = sync["lat_ns"]
    fsyncs = max(int(sync["total_ios"]), 1)
    disk = report.get("disk_util") or [{}]
    return {
        "appends_per_s": float(job["write"]["iops"]),
        "fsync_mean_ms": float(lat["mean"]) / 1e6,
        # fio's `sync` latency percentiles (qoslab sim's JSON has them too); empty if absent.
        "fsync_p99_ms": float(lat.get("percentile", {}).get("99.000000", np.nan)) / 1e6,
        "fsync_max_ms": float(lat["max"]) / 1e6,
        "writes_per_fsync": float(disk[0].get("write_ios", np.nan)) / fsyncs,
        "fsyncs": int(sync["total_ios"]),
    }


def device_writes(before: str, after: str) -> int:
    """Write requests the device completed between two of its `/proc/diskstats` lines (the 5th
    statistic, "writes completed"). fio's own `disk_util` samples the same counters only every
    250 ms while the job runs, so it misses the last commits (2.86 writes per fsync where the
    device did 3.00 in 300 appends, 1.42 in 20)."""
    return int(after.split()[7]) - int(before.split()[7])


def device_flushes(before: str, after: str) -> int:
    """FLUSH requests the device completed between two of its `/proc/diskstats` lines (the
    16th statistic, "flushes completed", after the major, minor and name)."""
    return int(after.split()[18]) - int(before.split()[18])


# What `trace` records in the guest: jbd2's commit phases, the requests the block layer sends
# the driver, and the workqueue's executions (among them ext4-rsv-conversion's,
# ext4_end_io_rsv_work: one per converted io_end, Linux 6.1's fs/ext4/page-io.c).
TRACE_EVENTS = (
    "jbd2/jbd2_start_commit", "jbd2/jbd2_commit_logging", "jbd2/jbd2_end_commit",
    "block/block_rq_issue", "workqueue/workqueue_execute_start", "workqueue/workqueue_execute_end",
)  # fmt: skip
TRACEFS = "/sys/kernel/tracing"


def trace_steps() -> list[str]:
    """tracefs mounted and TRACE_EVENTS enabled, tracing off until a run starts. ext4's and
    jbd2's events exist once their modules are in."""
    return [
        "load crc32c_generic",
        "load ext4",
        f"mount -t tracefs nodev {TRACEFS} 2>/dev/null; [ -d {TRACEFS}/events/jbd2 ] "
        "|| fail 'the guest kernel has no jbd2 tracepoints in tracefs'",
        f"echo 0 > {TRACEFS}/tracing_on",
        f"echo 65536 > {TRACEFS}/buffer_size_kb",
        *[f"echo 1 > {TRACEFS}/events/{e}/enable" for e in TRACE_EVENTS],
    ]


def guest_steps(plan: Plan) -> list[str]:
    steps = trace_steps() if plan.trace else []
    for rep in range(1, plan.reps + 1):
        for t in plan.threads:
            base = f"$OUT/t{t}-rep-{rep}"
            steps += [
                f"say '{t} threads, repetition {rep} of {plan.reps}'",
                f"make_fs ext4 {','.join(o.strip() for o in plan.options())}".rstrip(),
            ]
            if plan.trace:
                steps += [f"echo > {TRACEFS}/trace", f"echo 1 > {TRACEFS}/tracing_on"]
            steps.append(f"fio_rep {base} $IN/append-{t}.fio {rep}")
            if plan.trace:
                # The events in order, and the buffer's statistics (overrun: events lost).
                steps += [
                    f"echo 0 > {TRACEFS}/tracing_on",
                    f"cat {TRACEFS}/trace > {base}.trace",
                    f"cat {TRACEFS}/per_cpu/cpu0/stats > {base}.trace-stats",
                ]
    return steps


# One event of ftrace's text: `jbd2/nullb0-8-304 [000] ..... 21.214629: jbd2_commit_logging: ...`
TRACE_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+): "
    r"(?P<event>\w+): (?P<rest>.*)$"
)


def trace_summary(text: str) -> dict[str, float]:
    """A run's trace summed up: `commit_ms`, `commit_send_us`, `conversion_us`. Every commit
    but the run's first (which also commits its files' creation) counts: its start to its end,
    and its logging phase to the first metadata write (the journal's descriptor and copies: `M`
    in the request's flags) the block layer sends after it, the commit thread's own work
    (building the descriptor, copying and checksumming each block) plus whatever else the CPU
    ran meanwhile. A conversion is one execution of ext4_end_io_rsv_work, start to end on its
    worker."""
    commits: list[float] = []
    sends: list[float] = []
    conversions: list[float] = []
    started: dict[int, float] = {}  # conversion worker pid -> execution start
    commit: dict[str, float] | None = None
    first = True
    for line in text.splitlines():
        m = TRACE_LINE.match(line)
        if m is None:
            continue
        ts, event, rest = float(m["ts"]) * 1e6, m["event"], m["rest"]  # us
        if event == "workqueue_execute_start" and "function ext4_end_io_rsv_work" in rest:
            started[int(m["pid"])] = ts
        elif event == "workqueue_execute_end" and int(m["pid"]) in started:
            conversions.append(ts - started.pop(int(m["pid"])))
        elif event == "jbd2_start_commit":
            commit = {"start": ts}
        elif commit is None:
            continue
        elif event == "jbd2_commit_logging":
            commit["logging"] = ts
        elif event == "block_rq_issue" and "logging" in commit and "sent" not in commit:
            if "W" in rest.split()[1] and "M" in rest.split()[1]:
                commit["sent"] = ts
        elif event == "jbd2_end_commit":
            if not first and "sent" in commit:
                commits.append(ts - commit["start"])
                sends.append(commit["sent"] - commit["logging"])
            first, commit = False, None
    nan = float("nan")
    return {
        "commit_ms": float(np.mean(commits)) / 1e3 if commits else nan,
        "commit_send_us": float(np.mean(sends)) if sends else nan,
        "conversion_us": float(np.median(conversions)) if conversions else nan,
    }


def run_kernel(
    plan: Plan, spec: DeviceSpec, raw: Path, *, accel: str, timeout_s: float | None,
    say: Callable[[str], None],
) -> pd.DataFrame:  # fmt: skip
    """One boot of the guest; its files go to `raw`, a row per (threads, repetition)."""
    import shutil
    import tempfile

    from qoslab.vm import guest, qemu
    from qoslab.vm.packages import fetch

    kernel = fetch(say)
    with tempfile.TemporaryDirectory(prefix="qoslab-fs-kernel-") as tmp:
        inputs = {}
        for t in plan.threads:
            job = Path(tmp) / f"append-{t}.fio"
            job.write_text(job_text(t, plan.appends))
            inputs[job.name] = job
        session = guest.Session(kernel, spec, steps=guest_steps(plan), inputs=inputs)
        if timeout_s is None:
            timeout_s = 120.0 + 90.0 * plan.reps * len(plan.threads)

        def on_line(line: str) -> None:
            if line.startswith("qoslab-step: "):
                say(line.removeprefix("qoslab-step: "))

        result = guest.run_session(
            session, accel=accel, timeout_s=timeout_s, say=say, on_line=on_line
        )
        shutil.copytree(result.out, raw)
        shutil.rmtree(result.out, ignore_errors=True)
    rows = []
    for rep in range(1, plan.reps + 1):
        for t in plan.threads:
            path = raw / f"t{t}-rep-{rep}.json"
            if not path.exists():
                raise InputError(f"the guest wrote no fio output for {t} threads, repetition {rep}")
            row = {"threads": t, "rep": rep, **fio_metrics(json.loads(path.read_text()))}
            base = raw / f"t{t}-rep-{rep}"
            stats = (
                Path(f"{base}.diskstats-before").read_text(),
                Path(f"{base}.diskstats-after").read_text(),
            )
            fsyncs = max(row["fsyncs"], 1)
            row |= {
                "writes_per_fsync": device_writes(*stats) / fsyncs,
                "flushes_per_fsync": device_flushes(*stats) / fsyncs,
            }
            if plan.trace:
                lost = re.search(r"^overrun: (\d+)", Path(f"{base}.trace-stats").read_text(), re.M)
                if lost is None or int(lost[1]):
                    raise InputError(
                        f"the guest's trace of {t} threads, repetition {rep} lost events "
                        f"({Path(f'{base}.trace-stats').name}): trace fewer --appends"
                    )
                row |= trace_summary(Path(f"{base}.trace").read_text(errors="replace"))
            rows.append(row)
    # Under TCG the guest's clock counts its instructions (QOSLAB_VM_ICOUNT, docs/vm.md).
    icount = qemu.icount() if result.boot.accel == "tcg" else None
    meta = {"kernel": kernel.release, "accel": result.boot.accel, "accel_why": result.accel_why,
            "icount": icount, "wall_seconds": round(result.boot.seconds, 1)}  # fmt: skip
    (raw / "guest.json").write_text(json.dumps(meta, indent=1) + "\n")
    return pd.DataFrame(rows)


def run_sim(plan: Plan, spec: DeviceSpec) -> pd.DataFrame:
    """The same jobs in the simulator's ext4 on the twin, a seed per repetition."""
    from qoslab.sim import api

    twin = twin_toml(spec)
    rows = []
    for rep in range(1, plan.reps + 1):
        for t in plan.threads:
            result = api.run(
                jobtext=job_text(t, plan.appends), jobname=f"append-{t}.fio", device=spec.text,
                device_text=twin, sets=plan.sim_sets(), seed=rep,
            )  # fmt: skip
            report = json.loads(result["text"])
            row = {"threads": t, "rep": rep, **fio_metrics(report)}
            flushes = api.stage_counters(report, "block")["flush_ios"]
            rows.append({**row, "flushes_per_fsync": flushes / max(row["fsyncs"], 1)})
    return pd.DataFrame(rows)


def compare(kernel: pd.DataFrame, sim: pd.DataFrame) -> pd.DataFrame:
    """Per thread count and figure: the kernel's mean, deviation and 95 % t-interval, the
    simulator's mean, and whether it lies within the kernel's mean ± 1 standard deviation."""
    from qoslab.vm.study import t95

    rows = []
    for t, k in kernel.groupby("threads", sort=True):
        s = sim[sim.threads == t]
        for metric in METRICS:
            values = k[metric].to_numpy(dtype=float)
            mean, sd = float(values.mean()), float(values.std(ddof=1))
            sim_mean = float(s[metric].mean())
            rows.append(
                {
                    "threads": int(t),
                    "metric": metric,
                    "kernel_mean": mean,
                    "kernel_sd": sd,
                    "kernel_t95": t95(sd, len(values)),
                    "kernel_min": float(values.min()),
                    "kernel_max": float(values.max()),
                    "reps": len(values),
                    "sim_mean": sim_mean,
                    "sim_over_kernel": sim_mean / mean if mean else np.nan,
                    # Empty where a side does not report the figure.
                    "inside": None if np.isnan(sim_mean) else bool(abs(sim_mean - mean) <= sd),
                }
            )
    return pd.DataFrame(rows)


def plot(compared: pd.DataFrame, path: Path, device: str) -> None:
    """Each figure against threads: the kernel's mean with its ± 1 standard deviation, the
    simulator's mean."""
    from qoslab.report.figures import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.4), squeeze=False)
    for ax, (metric, label) in zip(axes[0], METRICS.items(), strict=True):
        c = compared[compared.metric == metric]
        ax.errorbar(c.threads, c.kernel_mean, yerr=c.kernel_sd, marker="o", capsize=3,
                    label="Linux 6.1 ext4 (guest)")  # fmt: skip
        ax.plot(c.threads, c.sim_mean, marker="s", linestyle="--", label="qoslab ext4 (twin)")
        ax.set_xlabel("threads")
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"fsync-append on ext4, {device}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(
    plan: Plan, kernel: pd.DataFrame, sim: pd.DataFrame, tmp: Path, meta: dict
) -> pd.DataFrame:
    """kernel.csv, sim.csv, compare.csv, compare.png and meta.json into `tmp`."""
    compared = compare(kernel, sim)
    kernel.to_csv(tmp / "kernel.csv", index=False, float_format="%.6g")
    sim.to_csv(tmp / "sim.csv", index=False, float_format="%.6g")
    compared.to_csv(tmp / "compare.csv", index=False, float_format="%.6g")
    plot(compared, tmp / "compare.png", plan.device)
    (tmp / "meta.json").write_text(
        json.dumps({"command": sys.argv, "plan": asdict(plan), **meta}, indent=1) + "\n"
    )
    return compared
