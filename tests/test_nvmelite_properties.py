"""Property tests: random workloads and parameters against a small model written here from
the specification's text (sections 3-9), and the invariants the spec states.

The Python model is deliberately naive (lists, no reuse) and shares no code with the Rust
core; hypothesis drives both with edge-case workloads (len 0, lba beyond the storage and
wrapping past 2^64, pattern 2^32-1, fences), every policy, fault, small submit windows and
seeds over the whole u64 range.
"""

from __future__ import annotations

import hashlib
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qoslab import nvmelite

MASK64 = 2**64 - 1


def splitmix64(seed: int):
    state = seed
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


def spec_model(workload, policy, k, fault, sw, seed, version="v1.0", commit=""):
    """The step loop of spec section 5, returning (log text, number of draws)."""
    cmds = workload["commands"]
    n = len(cmds)
    rng = splitmix64(seed)
    draws = 0
    host = [0] * 1024
    dev = [0] * 1024
    pending: list[int] = []
    nxt = step_count = burst = fence_id = peak = 0
    injected = stop = False
    run_id = f"{workload['seed_id']}_{policy}_{k}_{seed}_{fault}"
    lines = [
        f"RUN_HEADER(run_id={run_id}, seed_id={workload['seed_id']}, schedule_seed={seed}, "
        f"policy={policy}, bound_k={k}, fault_mode={fault}, n_cmds={n}, submit_window={sw}, "
        f"scheduler_version={version}, git_commit={commit})"
    ]
    while True:
        m = len(pending)
        can_submit = (sw == "inf" or m < int(sw)) and nxt < n and not stop
        can_complete = m > 0
        if not can_submit and not can_complete:
            break
        if policy == "BATCHED" and burst > 0:
            complete = True
        elif can_submit and can_complete:
            draws += 1
            complete = next(rng) & 1 == 1
        else:
            complete = can_complete
        if not complete:
            pending.append(nxt)
            lines.append(f"SUBMIT(cmd_id={nxt}, cmd_type={cmds[nxt]['type']})")
            if cmds[nxt]["type"] == "FENCE":
                lines.append(f"FENCE(fence_id={fence_id})")
                fence_id += 1
            nxt += 1
            peak = max(peak, len(pending))
            continue
        if fault != "NONE" and not injected and step_count >= n // 2:
            injected = True
            if fault == "TIMEOUT":
                victim = pending.pop(0)
                lines.append(f"COMPLETE(cmd_id={victim}, status=TIMEOUT, out=0)")
                stop = True
                step_count += 1
                continue
            lines.append(f"RESET(reason=INJECTED, pending_before={m})")
            pending = []
            break
        if policy == "BATCHED" and burst == 0:
            burst = min(4, m)
        c = m if k == "inf" else min(int(k), m - 1) + 1
        if policy in ("RANDOM", "BATCHED"):
            draws += 1
            j = next(rng) % c
        else:
            j = 0 if policy == "FIFO" else c - 1
        cid = pending.pop(j)
        cmd = cmds[cid]
        status, out = "OK", 0
        if cmd["type"] != "FENCE":
            end = (cmd["lba"] + cmd["len"]) & MASK64
            if end > 1024:
                status = "ERR"
            else:
                rng_idx = range(cmd["lba"], end) if cmd["lba"] < end else range(0)
                for i in rng_idx:
                    if cmd["type"] == "WRITE":
                        host[i] = cmd["pattern"]
                    elif cmd["type"] == "WRITE_VISIBLE":
                        dev[i] = host[i]
                    else:
                        out = (out * 31 + dev[i]) & 0xFFFFFFFF
        lines.append(f"COMPLETE(cmd_id={cid}, status={status}, out={out})")
        if burst > 0:
            burst -= 1
        step_count += 1
    lines.append(f"RUN_END(pending_left={len(pending)}, pending_peak={peak})")
    return "".join(line + "\n" for line in lines), draws


EVENT = re.compile(r"^(SUBMIT|COMPLETE|FENCE|RESET)\((.*)\)$")


def spec_metrics(log: str, n_cmds: int) -> list[str]:
    """Section 9 computed from the log text: the runs.csv fields after run_id, before sha."""
    body = log.splitlines()[1:-1]
    kinds: dict[int, str] = {}
    submit_at: dict[int, int] = {}
    done_at: dict[int, int] = {}
    order: list[int] = []
    status_count = {"OK": 0, "ERR": 0, "TIMEOUT": 0}
    fences: list[int] = []
    area = q = 0
    last_submit = None
    for idx, line in enumerate(body):
        kind, inside = EVENT.match(line).groups()
        fields = dict(part.split("=", 1) for part in inside.split(", "))
        if kind == "SUBMIT":
            c = int(fields["cmd_id"])
            kinds[c] = fields["cmd_type"]
            submit_at[c] = idx
            last_submit = c
            if kinds[c] != "FENCE":
                q += 1
                area += q
        elif kind == "FENCE":
            fences.append(last_submit)
        elif kind == "COMPLETE":
            c = int(fields["cmd_id"])
            done_at[c] = idx
            order.append(c)
            status_count[fields["status"]] += 1
            if kinds[c] != "FENCE":
                q = max(0, q - 1)
                area += q
    lat = sorted(done_at[c] - submit_at[c] for c in done_at if kinds[c] != "FENCE")
    if lat:
        p95 = float(lat[int(0.95 * (len(lat) - 1))])
        mean = sum(lat) / len(lat)
        mx = float(lat[-1])
    else:
        p95 = mean = mx = 0.0
    m = len(order)
    inv = sum(1 for i in range(m) for j in range(i + 1, m) if order[i] > order[j])
    rd = inv / (m * (m - 1) / 2) if m >= 2 else 0.0
    pos = {c: i for i, c in enumerate(order)}
    total = sat = 0
    for f in fences:
        before = [x for x in submit_at if x < f and kinds[x] != "FENCE"]
        after = [y for y in submit_at if y > f and kinds[y] != "FENCE"]
        total += len(before) * len(after)
        for x in before:
            for y in after:
                if x in pos and pos[x] < pos.get(y, float("inf")):
                    sat += 1
    fe = sat / total if total else 1.0
    peak = int(re.search(r"pending_peak=(\d+)", log.splitlines()[-1]).group(1))
    rate = status_count["OK"] / n_cmds if n_cmds else 1.0
    reals = [f"{v:.6f}" for v in (p95, mean, mx, rd, fe)]
    counts = [str(v) for v in (peak, area, *status_count.values())]
    return [*reals, *counts, f"{rate:.6f}"]


BIG = 2**64 - 1
lbas = st.one_of(st.integers(0, 1030), st.sampled_from([BIG, BIG - 1, BIG - 1023]))
lens = st.one_of(st.integers(0, 9), st.sampled_from([2**32 - 1]))
patterns = st.one_of(st.integers(0, 9), st.just(2**32 - 1))
commands = st.one_of(
    st.builds(
        lambda a, b, c: {"type": "WRITE", "lba": a, "len": b, "pattern": c}, lbas, lens, patterns
    ),
    st.builds(lambda a, b: {"type": "WRITE_VISIBLE", "lba": a, "len": b}, lbas, lens),
    st.builds(lambda a, b: {"type": "READ", "lba": a, "len": b}, lbas, lens),
    st.just({"type": "FENCE"}),
)
# Small storage ranges make writes visible to reads often enough to matter.
dense = st.builds(
    lambda t, a, b, c: {"type": t, "lba": a, "len": b, "pattern": c},
    st.sampled_from(["WRITE", "WRITE_VISIBLE", "READ"]),
    st.integers(0, 6),
    st.integers(0, 4),
    patterns,
)
workloads = st.builds(
    lambda seed_id, cmds: {"seed_id": seed_id, "commands": cmds},
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=6),
    st.lists(st.one_of(commands, dense), max_size=16),
)
params = st.fixed_dictionaries(
    {
        "policy": st.sampled_from(["FIFO", "RANDOM", "BATCHED", "ADVERSARIAL"]),
        "k": st.sampled_from(["0", "1", "2", "4", "inf", "4294967295"]),
        "fault": st.sampled_from(["NONE", "TIMEOUT", "RESET"]),
        "sw": st.sampled_from(["0", "1", "2", "3", "inf"]),
        "seed": st.one_of(st.integers(0, 50), st.integers(0, BIG), st.integers(BIG - 5, BIG)),
    }
)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_both(workload, p):
    w = nvmelite.Workload.from_json(json.dumps(workload).encode())
    result = nvmelite.run(
        w,
        policy=p["policy"],
        bound_k=p["k"],
        fault_mode=p["fault"],
        schedule_seed=p["seed"],
        submit_window=p["sw"],
        schedule=True,
        reference_schedule=True,
    )
    expected_log, draws = spec_model(workload, p["policy"], p["k"], p["fault"], p["sw"], p["seed"])
    return w, result, expected_log, draws


@SETTINGS
@given(workloads, params)
def test_log_metrics_and_draws_match_the_spec_model(workload, p):
    _, result, expected_log, draws = run_both(workload, p)
    assert result.log.decode() == expected_log
    assert result.log_sha256 == hashlib.sha256(result.log).hexdigest()
    fields = result.row.rsplit(",", 12)
    assert fields[1:-1] == spec_metrics(expected_log, len(workload["commands"]))
    assert fields[-1] == result.log_sha256
    assert result.rng_draws == draws  # spec section 5.7


@SETTINGS
@given(workloads, params)
def test_every_run_drains_and_faults_fire_as_specified(workload, p):
    _, result, _, _ = run_both(workload, p)
    lines = result.log.decode().splitlines()
    assert re.fullmatch(r"RUN_END\(pending_left=0, pending_peak=\d+\)", lines[-1])
    n = len(workload["commands"])
    resets = [line for line in lines if line.startswith("RESET(")]
    timeouts = [line for line in lines if "status=TIMEOUT" in line]
    fires = p["fault"] != "NONE" and n > 0 and p["sw"] != "0"
    assert len(resets) == (fires and p["fault"] == "RESET")
    assert len(timeouts) == (fires and p["fault"] == "TIMEOUT")
    if resets:
        assert lines[-2] == resets[0]  # RESET ends the run at once


@SETTINGS
@given(workloads, params)
def test_a_written_schedule_replays_to_the_identical_log(workload, p):
    w, result, _, _ = run_both(workload, p)
    again = nvmelite.replay(w, result.schedule, strict=True, reference_schedule=True)
    assert again.log == result.log
    assert again.row == result.row
    assert again.schedule == result.schedule
    assert again.reference_schedule == result.reference_schedule
    lenient = nvmelite.replay(w, result.schedule, strict=False)
    assert lenient.log == result.log and lenient.schedule == result.schedule


STEP_LINES = st.sampled_from(
    ["submit", "complete", "complete draw=0", "complete draw=7", "timeout", "reset", ""]
)


@SETTINGS
@given(workloads, params, st.data())
def test_lenient_replay_repairs_any_edit_into_a_strictly_replayable_schedule(workload, p, data):
    w, result, _, _ = run_both(workload, p)
    text = result.schedule
    head, steps = text.split("steps\n", 1)
    steps = steps.splitlines()[:-1]  # without "end"
    for _ in range(data.draw(st.integers(0, 4))):
        action = data.draw(st.sampled_from(["drop", "insert", "replace", "truncate"]))
        at = data.draw(st.integers(0, len(steps)))
        if action == "drop" and steps:
            del steps[min(at, len(steps) - 1)]
        elif action == "insert":
            steps.insert(at, data.draw(STEP_LINES))
        elif action == "replace" and steps:
            steps[min(at, len(steps) - 1)] = data.draw(STEP_LINES)
        elif action == "truncate":
            steps = steps[:at]
    edited = head + "steps\n" + "".join(s + "\n" for s in steps if s)
    repaired = nvmelite.replay(w, edited, strict=False)
    strict = nvmelite.replay(w, repaired.schedule, strict=True)
    assert strict.log == repaired.log
    assert repaired.log.decode().splitlines()[-1].startswith("RUN_END(pending_left=0")


def test_schedule_header_values_survive_line_breaks_and_backslashes():
    workload = {"seed_id": "two\nlines \\ and\ttab", "commands": [{"type": "FENCE"}]}
    w = nvmelite.Workload.from_json(json.dumps(workload).encode())
    result = nvmelite.run(
        w, policy="FIFO", bound_k="0", schedule_seed=1, git_commit="x=y#z", schedule=True
    )
    assert "seed_id=two\\x0alines \\\\ and\\x09tab\n" in result.schedule
    assert "git_commit=x=y#z\n" in result.schedule
    again = nvmelite.replay(w, result.schedule)
    assert again.log == result.log
