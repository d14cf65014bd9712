"""`selftest`: a study that does no storage work, for testing sweeps themselves (as fio's
null engine tests fio). A point's metrics are closed forms of its parameters and seed, so a test
knows every value the store must hold without running anything else; `fail: true` makes a
point fail and `busy_us` makes it take time.
"""

from __future__ import annotations

import time
import zlib

import numpy as np

from qoslab.sweep.kinds import flag, integer, real, text
from qoslab.sweep.study import CONTRACT_VERSION, Detail, Metric, Param, PointResult, Study

# The point's one random draw comes from its own stream of the seed.
U_STREAM = zlib.crc32(b"qoslab.sweep.selftest.u")

PARAMS = (
    Param("x", real(), "", 0.0, "any number"),
    Param("n", integer(0), "", 0, "any integer >= 0"),
    Param("label", text(), "", "", "any string"),
    Param("fail", flag(), "", False, "fail the point (with the error 'failed on purpose')"),
    Param("busy_us", integer(0), "us", 0, "time the point takes"),
)

METRICS = (
    Metric("x_times_n", "float64", "", "x * n"),
    Metric("seed_mod_7", "int64", "", "the seed modulo 7"),
    Metric("u", "float64", "", "a uniform draw in [0, 1) from the seed's stream 'selftest.u'"),
    Metric("label_length", "int64", "characters", "the length of label"),
)


def uniform(seed: int) -> float:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(U_STREAM,))))
    return float(rng.random())


def run_point(params, seed, details) -> PointResult:
    if params["busy_us"]:
        time.sleep(params["busy_us"] / 1e6)
    if params["fail"]:
        raise RuntimeError("failed on purpose")
    metrics = {
        "x_times_n": params["x"] * params["n"],
        "seed_mod_7": seed % 7,
        "u": uniform(seed),
        "label_length": len(params["label"]),
    }
    steps = [{"i": i, "i_times_x": i * params["x"]} for i in range(params["n"])]
    return PointResult(metrics, {"steps": steps} if "steps" in details else {})


STUDY = Study(
    name="selftest",
    help="A point that only computes closed forms of its parameters: for testing sweeps.",
    params=PARAMS,
    metrics=METRICS,
    headline=("x_times_n", "u"),
    version=CONTRACT_VERSION,
    seed_help="the seed of the point's one draw",
    run_point=run_point,
    details=(Detail("steps", "n rows: i and i * x"),),
)
