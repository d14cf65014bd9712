"""`qoslab rio run` as a front end of `qoslab sim`: the document's ordered-write workload (one
ordered stream per thread) written as a fio job file and run on the simulator's path, the
rio-flash or rio-optane preset with its target servers, the block layer's ordering plug-in
(`ordering=`), the fan-out and target stages; a cut at `--power-fail-at` (or the crash of one
target) recovered by `qoslab.recovery`."""

from __future__ import annotations

import json
from typing import Any

from qoslab.errors import InputError

# The stacks by their `rio crash-check` names, and the ordering plug-in each is in the block
# layer.
ORDERING = {"orderless": "none", "linux": "flush", "horae": "horae", "rio": "rio"}
STACK_OF = {v: k for k, v in ORDERING.items()}
# The document's setup has two target servers (Rio 6.1); the presets have one.
DEFAULT_SETS = ["fabric.targets=2"]


def job_text(
    stack: str,
    threads: int,
    writes: int,
    size_kib: int,
    batch: int,
    flush_every: int,
    iodepth: int,
) -> str:
    """The workload as a fio job: `threads` jobs (one ordered stream each) of `writes` writes
    of `size_kib`, `batch` consecutive ones from each random offset (fio's `rw=randwrite:N`),
    submitted together (`iodepth_batch_submit`), a FLUSH with every `flush_every`th (fio's
    `fsync=N`), `iodepth` outstanding."""
    lines = [
        "[global]",
        "ioengine=libaio",
        "direct=1",
        f"bs={size_kib}k",
        "rw=randwrite" if batch == 1 else f"rw=randwrite:{batch}",
        # Each job's own random offsets over the whole drive: collisions are negligible on
        # a 1 TB drive, and the random map would cost memory in proportion to it.
        "norandommap=1",
        f"iodepth={iodepth}",
        f"number_ios={writes}",
        f"numjobs={threads}",
        f"ordering={ORDERING[stack]}",
    ]
    if batch > 1:
        # A batch is submitted in one call, as one plug the block layer may merge (Rio
        # Figure 12).
        lines.append(f"iodepth_batch_submit={batch}")
    if flush_every:
        lines.append(f"fsync={flush_every}")
    return "\n".join([*lines, "", f"[{stack}]", ""])


def sim_sets(sets: list[tuple[str, str]]) -> list[str]:
    """`rio run --set` as `qoslab sim --set`: a bare key is a `[fabric]` tunable,
    `recovery.KEY` one of `[fabric.recovery]`, a dotted key any of the device's tunables."""
    out = list(DEFAULT_SETS)
    for key, value in sets:
        if key.startswith("timed."):
            raise InputError(
                f"--set {key}: the fabric's timed model is gone; `rio run` runs qoslab sim's "
                "path (--iodepth for timed.window, --device rio-optane for an Optane drive, "
                "path.transport=tcp, fabric.cores=N, media.KEY for the drive)"
            )
        if key == "plp":
            key = "media.plp"
        elif key.startswith("recovery.") or "." not in key:
            key = "fabric." + key
        out.append(f"{key}={value}")
    return out


def _counter(report: dict[str, Any], stage: str, name: str) -> float:
    """Counter `name` summed over every stage called `stage`, or `stage[i]` below the
    fan-out (one per target server)."""
    return sum(
        s["counters"].get(name, 0)
        for s in report["qoslab"]["stages"]
        if s["stage"].split("[")[0] == stage
    )


def measured(
    stack: str, report: dict[str, Any], background_cycles_per_s: float = 0.0
) -> dict[str, Any]:
    """What `rio run` prints for a run to the end, from `qoslab sim`'s JSON report.
    `background_cycles_per_s`: cycles each server (the initiator, each target) spends per
    second of the run outside the I/O path, added to its cycles (the time-based part of the
    document's `top` utilisation, which the model does not produce; 0 counts the operations'
    cycles alone)."""
    writes = [j["write"] for j in report["jobs"]]
    requests = sum(w["total_ios"] for w in writes)
    elapsed = report["qoslab"]["simulated_ns"]
    stages = report["qoslab"]["stages"]
    targets = sum(1 for s in stages if s["stage"].split("[")[0] == "target")
    background = background_cycles_per_s * elapsed / 1e9
    # The initiator's cycles are the transport's (rdma or tcp); the targets' are their cores'
    # (the target stage books receiving, submitting, answering and the PMR writes).
    initiator = sum(_counter(report, t, "initiator_cycles") for t in ("rdma", "tcp"))
    initiator += background
    target = _counter(report, "target", "target_cycles") + background * targets
    lat = sum(w["lat_ns"]["mean"] * w["total_ios"] for w in writes)
    return {
        "stack": stack,
        "requests": requests,
        "commands": int(_counter(report, "target", "commands")),
        "elapsed_ns": elapsed,
        "requests_per_s": requests / elapsed * 1e9 if elapsed else 0.0,
        "mean_latency_ns": lat / requests if requests else 0.0,
        "initiator_cycles": int(initiator),
        "target_cycles": int(target),
        # Requests per thousand cycles: the document's CPU efficiency, per operation.
        "initiator_requests_per_kcycle": 1e3 * requests / initiator if initiator else 0.0,
        "target_requests_per_kcycle": 1e3 * requests / target if target else 0.0,
        "forced_flushes": int(_counter(report, "block", "ordered_forced_flushes")),
        "events": report["qoslab"]["events"],
    }


def cut(stack: str, report: dict[str, Any]) -> dict[str, Any]:
    """What `rio run --power-fail-at` prints: the cut, each stream's outcome summed, and what
    recovery read and erased and how long it took (`qoslab.recovery`)."""
    return _cut(stack, report["qoslab"]["recovery"], report["qoslab"]["events"])


def _cut(stack: str, rec: dict[str, Any], events: int) -> dict[str, Any]:
    """A cut's row from its recovery (`qoslab.recovery`) and the events the run cost."""
    streams = rec["streams"]
    violations = [v for s in streams for v in s["violations"]]
    out = {
        "stack": stack,
        "prefix_ok": rec["prefix_ok"],
        "acked_lost": rec["acked_lost"],
        # Requests not yet known durable at the cut (the others survive whatever happens).
        "requests": sum(s["requests"] for s in streams),
        "in_flight": sum(s["requests"] - s["acknowledged"] for s in streams),
        "acknowledged": sum(s["acknowledged"] for s in streams),
        "acknowledged_flushes": sum(s["acknowledged_flushes"] for s in streams),
        "survived": sum(s["survived"] for s in streams),
        "violations": violations,
        # The simulator's events of the run (a cut run's, or the events before a view).
        "events": events,
    }
    crash = rec.get("target_crash")
    if crash is not None:
        return {
            **out,
            "crashed_target": crash["target"],
            "crash_at_ns": rec["power_fail_at_ns"],
            "lost_from_cache": crash["lost_from_cache"],
            "replayed": crash["replayed"],
            "lost_for_good": crash["lost_for_good"],
        }
    rebuild = round(rec["order_rebuild_ms"] * 1e6)
    data = round(rec["data_recovery_ms"] * 1e6)
    return {
        **out,
        "power_fail_at_ns": rec["power_fail_at_ns"],
        "recovery": {
            "entries_read": rec["attributes_scanned"],
            "discarded_commands": rec["discarded_commands"],
            "discarded_blocks": rec["discarded_blocks"],
            "rebuild_ns": rebuild,
            "data_recovery_ns": data,
            "recovery_ns": rebuild + data,
        },
    }


def cuts(
    stack: str,
    job: str,
    at_ns: list[int],
    *,
    device: str,
    sets: list[tuple[str, str]],
    seed: int,
) -> tuple[list[dict[str, Any]], int]:
    """`cut`'s rows of power cuts at each of `at_ns` (in order) of one run of `job`, all taken
    during that one run (`qoslab.sim.api.crash_views`: the run reads each crash image without
    disturbing itself), each with the events before it; and the events of that run."""
    from qoslab.sim import api

    views, events = api.crash_views(
        job, at_ns, jobname="rio run", device=device, sets=sim_sets(sets), seed=seed
    )
    return [_cut(stack, v["recovery"], v["events"]) for v in views], events


def run(
    job: str,
    *,
    device: str,
    sets: list[tuple[str, str]],
    seed: int,
    power_fail_at: str | None = None,
    crash_target: int | None = None,
) -> dict[str, Any]:
    """`qoslab sim`'s JSON report of the job text `job` on `device` with `sets` (`rio run
    --set` keys)."""
    from qoslab.sim import api

    result = api.run(
        jobtext=job,
        jobname="rio run",
        device=device,
        sets=sim_sets(sets),
        seed=seed,
        output_format="json",
        power_fail_at=power_fail_at,
        crash_target=crash_target,
    )
    return json.loads(result["text"])
