"""What `qoslab vm fio --trace` recorded: per request size, how long requests waited between
their insertion into the scheduler and their issue to the driver and how long the driver took;
per process, the time between one bio and its next (the guest's CPU time per I/O while the job
keeps submitting).

The input is ftrace's text of the block tracepoints (`rep-N.trace`), one event a line:
`fio-269 [000] ..... 906.253629: block_rq_insert: 8,0 R 4096 () 984 + 8 [fio]`.

With `--trace-event syscalls/sys_enter_io_submit --trace-event syscalls/sys_exit_io_submit
--trace-event block/block_getrq` (and `sched/sched_switch`), also each `io_submit` call of a
process: from its entry to the request's tag (`block_getrq` fires once the bio has a request,
after any sleep for a tag), from the last tag to the call's return, whether the task slept in
the call (switched out not runnable), and the time from a call's return to the process's next
call (fio's loop: reaping, preparing the next I/O), per size of the I/O the call submitted.

Sizes are kept as the tracepoints give them, in 512-byte sectors (`984 + 8`: 8 sectors,
4 KiB), never rounded to KiB: null_blk splits a 128 KiB read into requests of 255 sectors and
1 sector (127.5 KiB and 512 bytes), and the 1-sector piece is a request of its own.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HEADER = re.compile(
    r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+): (?P<rest>.*)$"
)
BLOCK = re.compile(
    r"^(?P<name>block_\w+): "
    r"\d+,\d+ (?P<rwbs>\S+) (?:\d+ )?(?:\(\S*\) )?(?P<sector>\d+) \+ (?P<sectors>\d+)"
)
# ftrace prints a syscall's entry as `sys_io_submit(ctx_id: ..., nr: 1, ...)` and its exit as
# `sys_io_submit -> 0x1`.
SYSCALL = re.compile(r"^sys_(?P<call>\w+)(?:\((?P<args>.*)\)| -> (?P<ret>\S+))$")
SWITCH = re.compile(r"^sched_switch: .*prev_state=(?P<state>\S+) ==> .*next_pid=(?P<next>\d+)")
# CFS's accounting of a task's time on the CPU (update_curr): the time it ran since the last
# update and its vruntime after it (include/trace/events/sched.h).
RUNTIME = re.compile(
    r"^sched_stat_runtime: comm=.* pid=(?P<pid>\d+) runtime=(?P<rt>\d+) \[ns\] "
    r"vruntime=(?P<vr>\d+) \[ns\]"
)
WAKEUP = re.compile(r"^sched_wakeup: comm=.* pid=(?P<pid>\d+) prio=")
# A job's bios closer than this follow each other in one submission burst; a longer gap is
# the job waiting for completions, not CPU time.
BURST_GAP_S = 200e-6


@dataclass(frozen=True)
class Event:
    """One tracepoint: a block event (`rq_issue`, `getrq`, ... with its sectors), a syscall's
    entry or exit (`enter_io_submit`, `exit_io_submit`), a sched_switch as two: `switch`
    (the process leaving the CPU, `state` its prev_state: R still runnable, D or S asleep)
    and `run` (the process `pid` taking it), `runtime` (CFS charged process `pid` `runtime_ns`,
    its vruntime now `vruntime_ns`) or `wakeup` (process `pid` woken)."""

    ts: float
    comm: str
    pid: int
    name: str
    sector: int = 0
    sectors: int = 0
    state: str = ""
    runtime_ns: int = 0
    vruntime_ns: int = 0


def read_events(path: Path) -> list[Event]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        h = HEADER.match(line)
        if not h:
            continue
        head = (float(h["ts"]), h["comm"], int(h["pid"]))
        rest = h["rest"]
        if m := BLOCK.match(rest):
            events.append(Event(*head, m["name"].removeprefix("block_"), int(m["sector"]),
                                int(m["sectors"])))  # fmt: skip
        elif m := SYSCALL.match(rest):
            events.append(Event(*head, ("enter_" if m["ret"] is None else "exit_") + m["call"]))
        elif m := SWITCH.match(rest):
            events.append(Event(*head, "switch", state=m["state"]))
            events.append(Event(head[0], "", int(m["next"]), "run"))
        elif m := RUNTIME.match(rest):
            events.append(Event(head[0], "", int(m["pid"]), "runtime", runtime_ns=int(m["rt"]),
                                vruntime_ns=int(m["vr"])))  # fmt: skip
        elif m := WAKEUP.match(rest):
            events.append(Event(head[0], "", int(m["pid"]), "wakeup"))
    return events


def _stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values) * 1e3  # ms
    if a.size == 0:
        return {"n": 0, "mean_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
    return {"n": int(a.size), "mean_ms": float(a.mean()),
            "p99_ms": float(np.percentile(a, 99)), "max_ms": float(a.max())}  # fmt: skip


def summary(events: list[Event], skip_s: float = 0.0) -> dict:
    """Waits and device times per request size (sectors at insertion; the device time by the
    sectors completed), bio gaps per process; events in the first `skip_s` seconds (a ramp)
    are left out."""
    start = events[0].ts + skip_s if events else 0.0
    inserted: dict[int, tuple[float, int]] = {}
    issued: dict[int, tuple[float, int]] = {}
    waits: dict[int, list[float]] = {}
    device: dict[int, list[float]] = {}
    last_bio: dict[int, float] = {}
    gaps: dict[str, list[float]] = {}
    for e in events:
        if e.name == "rq_insert":
            inserted[e.sector] = (e.ts, e.sectors)
        elif e.name == "rq_issue":
            t, sectors = inserted.pop(e.sector, (e.ts, e.sectors))
            issued[e.sector] = (e.ts, e.sectors)
            if e.ts >= start:
                waits.setdefault(sectors, []).append(e.ts - t)
        elif e.name == "rq_complete" and e.sector in issued:
            t, _ = issued.pop(e.sector)
            if e.ts >= start:
                device.setdefault(e.sectors, []).append(e.ts - t)
        elif e.name == "bio_queue":
            before = last_bio.get(e.pid)
            last_bio[e.pid] = e.ts
            if before is not None and e.ts >= start and e.ts - before < BURST_GAP_S:
                gaps.setdefault(f"{e.comm}-{e.pid}", []).append(e.ts - before)
    return {
        "wait": {n: _stats(v) for n, v in sorted(waits.items())},
        "device": {n: _stats(v) for n, v in sorted(device.items())},
        "bio_gap_us": {p: float(np.median(v)) * 1e6 for p, v in sorted(gaps.items())},
        "submit": submit_calls(events, start),
        "worker": worker_runs(events, start),
        "first": first_after_completion(events, start),
        "waiting": waiting_at_completion(events, start),
        "on_cpu": on_cpu_per_bio(events, start),
        "cfs": cfs_shares(events, start),
    }


def _turn_after(turns: list[tuple[float, int]], ts: float, at_or_after: bool) -> int | None:
    """The vruntime at the start of the first turn (in time order) starting at `ts`
    (`at_or_after`: that very turn, else none) or after it."""
    i = bisect_right(turns, (ts, -1)) if at_or_after else bisect_right(turns, (ts, 2**63))
    if i == len(turns) or (at_or_after and turns[i][0] != ts):
        return None
    return turns[i][1]


def cfs_shares(events: list[Event], start: float = 0.0) -> dict:
    """What CFS charged each process that queued bios (`sched/sched_stat_runtime`), from
    `start` to its last bio: its time on the CPU per bio and per second. For the two that
    queued most (the jobs), their vruntimes' difference each time CFS updated either (first
    minus second, ms: median, 10th and 90th percentile) and, with `sched/sched_switch` and
    `sched/sched_wakeup`, the times both were woken before either ran (`together`): how often
    the one of lower vruntime ran first (`lower_first`, each one's vruntime at the start of
    its next turn: the value CFS ordered them by, after placing a waking task) and how often
    the one woken first did (`woken_first`). Empty without sched_stat_runtime."""
    if not any(e.name == "runtime" for e in events):
        return {}
    bios: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    for e in events:
        if e.name == "bio_queue":
            bios.setdefault(e.pid, []).append(e.ts)
            names[e.pid] = f"{e.comm}-{e.pid}"
    jobs = sorted(bios, key=lambda p: -len(bios[p]))
    per: dict[str, dict[str, float]] = {}
    for pid in jobs:
        end = bios[pid][-1]
        n = sum(1 for t in bios[pid] if start <= t <= end)
        ran = sum(e.runtime_ns for e in events
                  if e.name == "runtime" and e.pid == pid and start <= e.ts <= end)  # fmt: skip
        if n and end > start:
            per[names[pid]] = {"bios": n, "us_per_bio": ran / 1e3 / n,
                               "ms_per_s": ran / 1e6 / (end - start)}  # fmt: skip
    out: dict = {"per_process": per}
    if len(jobs) < 2:
        return out
    a, b = jobs[0], jobs[1]
    vr: dict[int, int] = {}
    gaps: list[float] = []
    turn_vr: dict[int, list[tuple[float, int]]] = {a: [], b: []}  # (switch-in, vruntime then)
    in_turn: dict[int, float] = {}
    for e in events:
        if e.name == "runtime" and e.pid in (a, b):
            vr[e.pid] = e.vruntime_ns
            if (at := in_turn.pop(e.pid, None)) is not None:
                turn_vr[e.pid].append((at, e.vruntime_ns - e.runtime_ns))
            if e.ts >= start and len(vr) == 2:
                gaps.append((vr[a] - vr[b]) / 1e6)
        elif e.name == "run" and e.pid in (a, b):
            in_turn[e.pid] = e.ts
    woke: dict[int, float] = {}
    together = lower_first = woken_first = 0
    for e in events:
        if e.name == "wakeup" and e.pid in (a, b):
            woke[e.pid] = e.ts
        elif e.name == "run" and e.pid in (a, b):
            other = b if e.pid == a else a
            if e.ts >= start and len(woke) == 2:
                together += 1
                woken_first += woke[e.pid] <= woke[other]
                mine = _turn_after(turn_vr[e.pid], e.ts, at_or_after=True)
                theirs = _turn_after(turn_vr[other], e.ts, at_or_after=False)
                lower_first += mine is not None and theirs is not None and mine <= theirs
            woke.pop(e.pid, None)
    if gaps:
        p10, median, p90 = (float(np.percentile(gaps, q)) for q in (10, 50, 90))
        out["vruntime_gap"] = {"first": names[a], "second": names[b], "median_ms": median,
                               "p10_ms": p10, "p90_ms": p90}  # fmt: skip
    out["together"] = {"n": together, "lower_first": lower_first, "woken_first": woken_first}
    return out


# kblockd's workers (WQ_HIGHPRI: nice -20, `H` in the name), which run the hardware queues
# when the block layer asks for it to be done asynchronously: after a completion, and with a
# scheduler after every insert.
KBLOCKD = re.compile(r"^kworker/\d+:\d+H")


def worker_runs(events: list[Event], start: float = 0.0) -> dict[str, dict]:
    """Each time one of kblockd's workers has the CPU (from sched_switch: the dispatch work
    queued after a completion or an insert), started after `start`: per list of the requests
    it issued in that turn (their sizes in sectors, in order: "8+255"; "-" for none), how many
    turns and their time on the CPU (from being switched in to being switched out); and the
    time from the turn's start to its first issue (the queue run's own cost before the
    driver). A turn in which a request completed (an interrupt inside it) is left out of the
    times, not of the count. Empty without sched_switch."""
    names: dict[int, str] = {}
    for e in events:
        if e.name != "run" and KBLOCKD.match(e.comm):
            names[e.pid] = e.comm
    turn: dict | None = None  # the worker's turn now on the CPU
    rows: dict[str, dict[int, dict[str, list]]] = {}
    for e in events:
        if e.name == "run":
            turn = None
            if e.pid in names and e.ts >= start:
                turn = {"pid": e.pid, "at": e.ts, "issues": [], "irq": False}
        elif turn is None:
            continue
        elif e.name == "rq_issue":
            turn["issues"].append((e.ts, e.sectors))
        elif e.name == "rq_complete":
            turn["irq"] = True
        elif e.name == "switch" and e.pid == turn["pid"]:
            issues = turn["issues"]
            key = "+".join(str(n) for _, n in issues) or "-"
            row = rows.setdefault(names[e.pid], {}).setdefault(
                key, {"turns": [], "whole": [], "to_issue": []}
            )
            row["turns"].append(1)
            if not turn["irq"]:
                row["whole"].append(e.ts - turn["at"])
                if issues:
                    row["to_issue"].append(issues[0][0] - turn["at"])
            turn = None
    return {
        proc: {
            key: {
                "turns": len(r["turns"]),
                "whole": _us(r["whole"]),
                "to_issue": _us(r["to_issue"]),
            }
            for key, r in sorted(by_key.items(), key=lambda kv: -len(kv[1]["turns"]))
        }
        for proc, by_key in sorted(rows.items())
    }


def waiting_at_completion(events: list[Event], start: float = 0.0) -> dict[int, dict]:
    """Per size (sectors, as issued) of a request that completed after `start`: how many
    completed, and per size of request inserted into the scheduler and not yet issued then,
    at what share of those completions one waited and how many on average (whether the
    completion had a queue run to ask for)."""
    issued: dict[int, int] = {}
    waiting: dict[int, int] = {}  # sector -> sectors, inserted and not issued
    rows: dict[int, dict] = {}
    for e in events:
        if e.name == "rq_insert":
            waiting[e.sector] = e.sectors
        elif e.name == "rq_issue":
            waiting.pop(e.sector, None)
            issued[e.sector] = e.sectors
        elif e.name == "rq_complete" and e.ts >= start:
            row = rows.setdefault(issued.get(e.sector, e.sectors), {"n": 0, "waiting": {}})
            row["n"] += 1
            sizes: dict[int, int] = {}
            for sectors in waiting.values():
                sizes[sectors] = sizes.get(sectors, 0) + 1
            for sectors, k in sizes.items():
                w = row["waiting"].setdefault(sectors, {"completions": 0, "requests": 0})
                w["completions"] += 1
                w["requests"] += k
    return {
        n: {
            "n": row["n"],
            "waiting": {
                sectors: {"share": w["completions"] / row["n"], "mean": w["requests"] / row["n"]}
                for sectors, w in sorted(row["waiting"].items())
            },
        }
        for n, row in sorted(rows.items())
    }


def on_cpu_per_bio(events: list[Event], start: float = 0.0) -> dict[str, dict]:
    """Per process that queued bios after `start`: its bios and its time on the CPU from
    sched_switch (switch-in to switch-out, interrupts taken meanwhile included) per bio.
    Empty without sched_switch."""
    names: dict[int, str] = {}
    bios: dict[str, int] = {}
    for e in events:
        if e.name != "run" and e.pid not in names:
            names[e.pid] = f"{e.comm}-{e.pid}"
        if e.name == "bio_queue" and e.ts >= start:
            bios[names[e.pid]] = bios.get(names[e.pid], 0) + 1
    on_cpu: dict[str, float] = {}
    running: tuple[str, float] | None = None
    for e in events:
        if e.name != "run":
            continue
        if running is not None:
            name, since = running
            on_cpu[name] = on_cpu.get(name, 0.0) + max(0.0, e.ts - max(since, start))
        running = (names.get(e.pid, str(e.pid)), e.ts)
    return {
        name: {"bios": n, "us_per_bio": on_cpu.get(name, 0.0) / n * 1e6}
        for name, n in sorted(bios.items())
        if name in on_cpu
    }


def first_after_completion(events: list[Event], start: float = 0.0) -> dict[int, dict[str, int]]:
    """Per size (sectors, as issued) of a request that completed after `start`: which task
    the CPU switched to next (sched_switch), counted by name (a fio process as `fio-PID`,
    kblockd's worker by its name): whether the task the completion woke or the worker that
    runs the queue went first. Empty without sched_switch."""
    names: dict[int, str] = {}
    for e in events:
        if e.name != "run" and e.pid not in names:
            names[e.pid] = e.comm if KBLOCKD.match(e.comm) else f"{e.comm}-{e.pid}"
    issued: dict[int, int] = {}
    counts: dict[int, dict[str, int]] = {}
    pending: int | None = None
    for e in events:
        if e.name == "rq_issue":
            issued[e.sector] = e.sectors
        elif e.name == "rq_complete" and e.ts >= start:
            pending = issued.get(e.sector, e.sectors)
        elif e.name == "run" and pending is not None:
            name = names.get(e.pid, str(e.pid))
            row = counts.setdefault(pending, {})
            row[name] = row.get(name, 0) + 1
            pending = None
    return {
        n: dict(sorted(row.items(), key=lambda kv: -kv[1])) for n, row in sorted(counts.items())
    }


@dataclass
class _Call:
    entered: float
    sectors: int | None = None  # the first bio's size: the I/O the call submitted
    cpu: float = 0.0  # time on the CPU since entry, up to `running_since`
    running_since: float | None = None
    cpu_at_tags: list[float] = field(default_factory=list)  # on-CPU time at each block_getrq
    slept: bool = False
    ahead: bool = False  # took a tag while another process slept for one

    def cpu_now(self, ts: float) -> float:
        return self.cpu + (ts - self.running_since if self.running_since is not None else 0.0)


def _us(values: list[float]) -> dict[str, float]:
    a = np.asarray(values) * 1e6
    if a.size == 0:
        return {"n": 0}
    p10, median, p90 = (float(np.percentile(a, q)) for q in (10, 50, 90))
    return {"n": int(a.size), "median_us": median, "p10_us": p10, "p90_us": p90}


SUBMIT_KEYS = ("to_tag", "after_tag", "whole", "loop")


def submit_calls(events: list[Event], start: float = 0.0) -> dict[str, dict[int, dict]]:
    """Per process and size of the I/O (sectors) its `io_submit` call submitted (calls entered
    after `start`): how many calls, how many slept (left the CPU not runnable: for a tag), how
    many took a tag without sleeping while another process slept in io_submit (`ahead`: a
    tag freed for a sleeper taken by a running task), and the call's time on the CPU from
    entry to its first tag (`to_tag`), from its last tag to the return (`after_tag`) and in
    all (`whole`); and the time from a call's return to the process's next entry when under
    BURST_GAP_S (`loop`: fio's own work between calls, no wait for completions). Time on the
    CPU counts from sched_switch (without it, wall time); a completion's interrupt that
    arrives while the process runs counts in it. Empty when the trace has no io_submit."""
    open_call: dict[int, _Call] = {}
    last_exit: dict[int, float] = {}
    last_size: dict[int, int] = {}  # the size of the process's last call: its loop's I/O
    asleep: set[int] = set()  # processes switched out not runnable inside io_submit
    rows: dict[str, dict[int, dict[str, list]]] = {}
    for e in events:
        call = open_call.get(e.pid)
        if e.name == "run":  # `pid` is the process switched in
            if call is not None:
                call.running_since = e.ts
            asleep.discard(e.pid)
        elif e.name == "enter_io_submit":
            open_call[e.pid] = _Call(e.ts, running_since=e.ts)
            if (before := last_exit.pop(e.pid, None)) is not None and e.ts >= start:
                gap = e.ts - before
                if gap < BURST_GAP_S and (size := last_size.get(e.pid)) is not None:
                    _row(rows, e, size)["loop"].append(gap)
        elif call is None:
            continue
        elif e.name == "bio_queue" and call.sectors is None:
            call.sectors = e.sectors
        elif e.name == "getrq":
            call.cpu_at_tags.append(call.cpu_now(e.ts))
            if not call.slept and asleep - {e.pid}:
                call.ahead = True
        elif e.name == "switch":
            call.cpu = call.cpu_now(e.ts)
            call.running_since = None
            if not e.state.startswith("R"):
                call.slept = True
                asleep.add(e.pid)
        elif e.name == "exit_io_submit":
            del open_call[e.pid]
            last_exit[e.pid] = e.ts
            if call.sectors is None or not call.cpu_at_tags:
                continue
            last_size[e.pid] = call.sectors
            if call.entered < start:
                continue
            row = _row(rows, e, call.sectors)
            row["calls"].append(1)
            row["slept"].append(call.slept)
            row["ahead"].append(call.ahead)
            whole = call.cpu_now(e.ts)
            row["to_tag"].append(call.cpu_at_tags[0])
            row["after_tag"].append(whole - call.cpu_at_tags[-1])
            row["whole"].append(whole)
    return {
        proc: {
            size: {
                "calls": len(r["calls"]),
                "slept": sum(r["slept"]),
                "ahead": sum(r["ahead"]),
                **{k: _us(r[k]) for k in SUBMIT_KEYS},
            }
            for size, r in sorted(by_size.items())
        }
        for proc, by_size in sorted(rows.items())
    }


def _row(rows: dict, e: Event, sectors: int) -> dict[str, list]:
    keys = ("calls", "slept", "ahead", *SUBMIT_KEYS)
    return rows.setdefault(f"{e.comm}-{e.pid}", {}).setdefault(sectors, {k: [] for k in keys})


def size_label(sectors: int) -> str:
    """A size in the tracepoints' 512-byte sectors, with its exact KiB: "255 sectors
    (127.5 KiB)", "1 sector (0.5 KiB)"."""
    kib = f"{sectors // 2}.5" if sectors % 2 else f"{sectors // 2}"
    return f"{sectors} sector{'' if sectors == 1 else 's'} ({kib} KiB)"
