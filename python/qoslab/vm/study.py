"""`qoslab vm study`: the kernel as ground truth for the simulator's block layer (study 5).

For each guest device (a SPEC) one boot runs the study's two jobs (database_sim, backup_sim:
`configs/sched/database-backup.fio`) under every scheduler, repetition after repetition
(repetition 1 on every scheduler, then 2, ...: drift of the host falls on all alike); the
simulator runs the same job file on the device's twin with as many seeds. The report puts each
simulated figure beside the kernel's: IOPS, p99 and mean total latency and fio's CPU use per job,
the kernel's mean with its standard deviation and 95 % t-interval over repetitions, the
simulator's mean over seeds, and whether the simulated mean lies inside the kernel's error bar.
It also reproduces the kernel mailing list's test of mq-deadline's I/O priorities (see
`MAILING_LIST`), in the guest and in the simulator.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from qoslab.errors import InputError
from qoslab.guest_devices import DeviceSpec, parse_spec, twin_toml
from qoslab.vm import guest

SCHEDULERS = ("none", "mq-deadline", "kyber", "bfq", "prio", "prio-advanced")
DEVICES = (
    "null_blk:completion_nsec=4000000,hw_queue_depth=2,irqmode=2",
    "scsi_debug:delay=1,max_queue=16",
)
JOB_FILE = Path(__file__).resolve().parents[3] / "configs" / "sched" / "database-backup.fio"

# The test of Bart Van Assche's mq-deadline I/O priority patch (linux-block, 2021; the commit
# message of "block/mq-deadline: Prioritize high-priority requests"): scsi_debug with a 1 ms
# delay and 16 commands, two 4 KiB sequential readers at depth 32, one RT and one BE, under
# mq-deadline. With prio_aging_expire at 100 s: about 11,000 against 40 IOPS; at 0: about
# 6,700 each.
MAILING_LIST = {
    "device": "scsi_debug:ndelay=1000000,max_queue=16",
    "scheduler": "mq-deadline",
    "aging": (100_000, 0),  # prio_aging_expire, ms
    "expected": {100_000: (11_000, 40), 0: (6_712, 6_796)},
}
MAILING_LIST_JOB = """; two 4 KiB sequential readers at depth 32, one RT and one BE (the mailing
; list's test of mq-deadline's I/O priorities)
[global]
ioengine=libaio
direct=1
lat_percentiles=1
rw=read
bs=4k
iodepth=32
time_based=1
runtime={runtime}
ramp_time={ramp}

[rt]
prioclass=1
prio=4

[be]
prioclass=2
prio=4
"""


def fio_time(seconds: float, what: str = "time") -> str:
    """A time as fio 3.33 reads it: whole milliseconds (it truncates `0.5s` to 0)."""
    ms = round(seconds * 1000)
    if ms < 0 or abs(ms - seconds * 1000) > 1e-6:
        raise InputError(f"{what}: expected seconds in whole milliseconds, got {seconds:g}")
    return f"{ms}ms"


def study_job(runtime_s: float, ramp_s: float) -> str:
    """The study's job file with the run's length; `size` left out (the whole device)."""
    lines = []
    for line in JOB_FILE.read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        if key in ("size", "runtime"):
            continue
        lines.append(line)
        if line.strip() == "time_based=1":
            lines += [f"runtime={fio_time(runtime_s)}", f"ramp_time={fio_time(ramp_s)}"]
    return "\n".join(lines) + "\n"


def slug(spec: DeviceSpec) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", spec.text).strip("-")


@dataclass
class Plan:
    """What one guest boot runs: (label, scheduler, settings, job name) per repetition."""

    spec: DeviceSpec
    runs: list[tuple[str, str, list[str], str]] = field(default_factory=list)

    def steps(self, reps: int) -> list[str]:
        out = []
        for rep in range(1, reps + 1):
            for label, sched, settings, job in self.runs:
                out.append(f"say '{label} repetition {rep} of {reps}'")
                out.append(f"scheduler {sched}")
                out += [f"setting {path} {value}" for path, value in settings]
                out.append(f"fio_rep $OUT/{label}-rep-{rep} $IN/{job} {rep}")
        return out


def run_guest(
    kernel,
    plan: Plan,
    reps: int,
    inputs: dict[str, Path],
    modules: list[Path],
    *,
    accel: str,
    timeout_s: float,
    say: Callable[[str], None],
) -> Path:
    session = guest.Session(
        kernel, plan.spec, steps=plan.steps(reps), inputs=inputs, modules=modules
    )

    def on_line(line: str) -> None:
        if line.startswith("qoslab-step: "):
            say(line.removeprefix("qoslab-step: "))

    return guest.run_session(
        session, accel=accel, timeout_s=timeout_s, say=say, on_line=on_line
    ).out


def fio_rows(path: Path) -> list[dict]:
    """A row per job of one fio JSON: IOPS, latency (total) and CPU."""
    data = json.loads(path.read_text())
    rows = []
    for j in data["jobs"]:
        r = j["read"]
        lat = r["lat_ns"]
        pct = lat.get("percentile", {})
        rows.append(
            {
                "job": j["jobname"],
                "iops": float(r["iops"]),
                "lat_mean_us": float(lat["mean"]) / 1e3,
                "p50_us": float(pct.get("50.000000", np.nan)) / 1e3,
                "p99_us": float(pct.get("99.000000", np.nan)) / 1e3,
                "cpu_pct": float(j.get("usr_cpu", 0.0)) + float(j.get("sys_cpu", 0.0)),
                "ios": int(r["total_ios"]),
            }
        )
    return rows


def kernel_table(out: Path, plan: Plan, reps: int) -> pd.DataFrame:
    rows = []
    for label, sched, _settings, _job in plan.runs:
        for rep in range(1, reps + 1):
            for row in fio_rows(out / f"{label}-rep-{rep}.json"):
                rows.append({"device": plan.spec.text, "run": label, "scheduler": sched,
                             "rep": rep, **row})  # fmt: skip
    return pd.DataFrame(rows)


def sim_table(
    spec: DeviceSpec, runs: list[tuple[str, str, list[str], str]], jobs: dict[str, str],
    seeds: int,
) -> pd.DataFrame:  # fmt: skip
    """The same runs on the twin, a seed per repetition."""
    from qoslab.sim import api

    twin = twin_toml(spec)
    rows = []
    for label, sched, _settings, job in runs:
        sets = [f"block.scheduler={sched}", *sim_settings(label)]
        for seed in range(1, seeds + 1):
            result = api.run(
                jobtext=jobs[job], jobname=job, device=spec.text, device_text=twin,
                sets=sets, seed=seed,
            )  # fmt: skip
            with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
                f.write(result["text"])
                f.flush()
                for row in fio_rows(Path(f.name)):
                    rows.append({"device": spec.text, "run": label, "scheduler": sched,
                                 "rep": seed, **row})  # fmt: skip
    return pd.DataFrame(rows)


def sim_settings(label: str) -> list[str]:
    """The simulator's settings of a run the label names (the mailing list's aging)."""
    m = re.match(r"mq-deadline-aging-(\d+)$", label)
    return [f"block.mq-deadline.prio_aging_expire={m.group(1)}"] if m else []


def t95(sd: float, n: int) -> float:
    """Half-width of the 95 % t-interval of a mean of `n` values with deviation `sd`."""
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")


METRICS = ("iops", "p99_us", "lat_mean_us", "cpu_pct")


def compare(kernel: pd.DataFrame, sim: pd.DataFrame) -> pd.DataFrame:
    """Per device, run and job: each metric's kernel mean, sd and t-interval, the simulator's
    mean and sd, and whether the simulated mean is inside the kernel's error bar (mean ± 1 sd
    over repetitions, as the report draws it)."""
    keys = ["device", "run", "scheduler", "job"]
    rows = []
    for key, k in kernel.groupby(keys, sort=False):
        s = sim.set_index(keys).loc[key] if key in sim.set_index(keys).index else None
        row = dict(zip(keys, key, strict=True))
        row["reps"] = len(k)
        for m in METRICS:
            mean, sd = float(k[m].mean()), float(k[m].std(ddof=1))
            row[f"{m}_kernel"] = mean
            row[f"{m}_kernel_sd"] = sd
            row[f"{m}_kernel_t95"] = t95(sd, len(k))
            if s is not None and m != "cpu_pct":
                sm = float(np.mean(s[m]))
                row[f"{m}_sim"] = sm
                row[f"{m}_sim_sd"] = float(np.std(s[m], ddof=1)) if len(s) > 1 else 0.0
                row[f"{m}_inside"] = bool(abs(sm - mean) <= sd)
                row[f"{m}_ratio"] = sm / mean if mean else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def rank(compare_rows: pd.DataFrame, device: str, job: str = "database_sim") -> dict:
    """The schedulers ordered by `job`'s p99, in the kernel and in the simulator."""
    d = compare_rows[(compare_rows.device == device) & (compare_rows.job == job)]
    d = d[d.run.isin(SCHEDULERS)]
    kernel = list(d.sort_values("p99_us_kernel").scheduler)
    sim = list(d.sort_values("p99_us_sim", kind="stable").scheduler)
    return {"kernel": kernel, "sim": sim}


def main_plan(spec: DeviceSpec, schedulers: tuple[str, ...]) -> Plan:
    return Plan(spec, [(s, s, [], "study.fio") for s in schedulers])


def mailing_plan() -> Plan:
    spec = parse_spec(MAILING_LIST["device"])
    runs = [
        (
            f"mq-deadline-aging-{a}",
            "mq-deadline",
            [("queue/iosched/prio_aging_expire", str(a))],
            "mailing.fio",
        )
        for a in MAILING_LIST["aging"]
    ]
    return Plan(spec, runs)


def copy_raw(out: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():
        if f.name not in ("plan.status",):
            shutil.move(str(f), into / f.name)


def check_inputs(devices: list[str], schedulers: list[str]) -> tuple[list[DeviceSpec], tuple]:
    specs = [parse_spec(d, "--devices") for d in devices]
    bad = [s for s in schedulers if s not in SCHEDULERS]
    if bad:
        raise InputError(f"--schedulers: unknown {bad[0]!r} (known: {', '.join(SCHEDULERS)})")
    if not specs and not schedulers:
        raise InputError("nothing to run")
    return specs, tuple(schedulers)


# ---- the report ------------------------------------------------------------------------------


def _fmt(mean: float, sd: float, t: float) -> str:
    return f"{mean:,.0f} ± {sd:,.0f} [±{t:,.0f}]"


def device_table(c: pd.DataFrame):
    from qoslab.report import Table

    rows = []
    for _, r in c.iterrows():
        rows.append(
            [
                r.run,
                r.job,
                _fmt(r.iops_kernel, r.iops_kernel_sd, r.iops_kernel_t95),
                f"{r.iops_sim:,.0f}",
                "yes" if r.iops_inside else "no",
                _fmt(r.p99_us_kernel / 1e3, r.p99_us_kernel_sd / 1e3, r.p99_us_kernel_t95 / 1e3),
                f"{r.p99_us_sim / 1e3:,.1f}",
                "yes" if r.p99_us_inside else "no",
                f"{r.cpu_pct_kernel:.1f}",
            ]
        )
    return Table(
        columns=[
            "run", "job", "kernel IOPS", "sim IOPS", "inside", "kernel p99 ms", "sim p99 ms",
            "inside", "fio CPU %",
        ],
        rows=rows,
        caption="kernel: mean ± standard deviation [± half-width of the 95 % t-interval] over "
        "repetitions; sim: mean over seeds; inside: the simulated mean lies within the "
        "kernel's mean ± 1 standard deviation.",
    )  # fmt: skip


def device_figure(c: pd.DataFrame, figures: Path, stem: str, title: str):
    from qoslab.report.figures import PALETTE, pyplot, save_figure

    plt = pyplot()
    jobs = list(dict.fromkeys(c.job))
    runs = list(dict.fromkeys(c.run))
    fig, axes = plt.subplots(len(jobs), 2, figsize=(11, 3.2 * len(jobs)), squeeze=False)
    x = np.arange(len(runs))
    for i, job in enumerate(jobs):
        d = c[c.job == job].set_index("run").loc[runs]
        for k, (metric, label, scale) in enumerate(
            (("iops", "IOPS", 1.0), ("p99_us", "p99 total latency (ms)", 1e-3))
        ):
            ax = axes[i][k]
            for side, dx, color, name in (
                ("kernel", -0.2, PALETTE[0], "kernel (guest), ± 1 sd"),
                ("sim", 0.2, PALETTE[1], "simulator (twin)"),
            ):
                ax.bar(
                    x + dx,
                    d[f"{metric}_{side}"] * scale,
                    0.4,
                    yerr=d[f"{metric}_{side}_sd"] * scale,
                    capsize=3,
                    color=color,
                    label=name,
                )
            ax.set_xticks(x, runs, rotation=20, ha="right", fontsize=8)
            ax.set_title(f"{job}: {label}", fontsize=10)
            if i == 0 and k == 0:
                ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, figures, stem, title=title, link_prefix="figures/")


def write_report(out: Path, compared: pd.DataFrame, meta: dict) -> Path:
    from qoslab.report import Section, Text
    from qoslab.report import write_report as write_html

    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    sections = [
        Section(
            "Setup",
            [
                Text(
                    f"Guest: Linux {meta['kernel']} under {meta['accel'].upper()} "
                    f"({meta['accel_why']}), one vCPU; fio {meta.get('fio', '')}. "
                    f"{meta['reps']} repetitions of {meta['runtime_s']:g} s after "
                    f"{meta['ramp_s']:g} s of warm-up per run, interleaved across schedulers; "
                    f"the simulator ran each run's job file on the device's twin with "
                    f"{meta['reps']} seeds. Latency is fio's total latency (lat_percentiles=1)."
                )
            ],
        )
    ]
    for device, c in compared.groupby("device", sort=False):
        items = [device_table(c)]
        main = c[c.run.isin(SCHEDULERS)]
        if not main.empty:
            items.append(device_figure(main, figures, slug(parse_spec(device)), device))
            order = rank(compared, device)
            items.append(
                Text(
                    "Schedulers by database_sim p99, lowest first. Kernel: "
                    f"{', '.join(order['kernel'])}. Simulator: {', '.join(order['sim'])}."
                )
            )
        ml = c[~c.run.isin(SCHEDULERS)]
        if not ml.empty:
            items.append(Text(mailing_text(ml)))
        sections.append(Section(device, items))
    return write_html(
        out / "report.html", "Study 5: the guest kernel beside the simulator", sections
    )


def mailing_text(ml: pd.DataFrame) -> str:
    parts = []
    for a in MAILING_LIST["aging"]:
        d = ml[ml.run == f"mq-deadline-aging-{a}"].set_index("job")
        exp = MAILING_LIST["expected"][a]
        parts.append(
            f"prio_aging_expire {a} ms: mailing list RT {exp[0]:,} / BE {exp[1]:,} IOPS; "
            f"kernel RT {d.loc['rt', 'iops_kernel']:,.0f} / BE {d.loc['be', 'iops_kernel']:,.0f}; "
            f"simulator RT {d.loc['rt', 'iops_sim']:,.0f} / BE {d.loc['be', 'iops_sim']:,.0f}."
        )
    return "The mailing list's mq-deadline priority test. " + " ".join(parts)
