"""Random and Latin-hypercube samples of a sweep's parameters, from a seeded stream.

Both methods draw points u in [0, 1)^d and map each coordinate through the inverse CDF of its
parameter's distribution, so a Latin-hypercube sample keeps its one-draw-per-stratum property
in every parameter: uniform [lo, hi), loguniform [lo, hi) (uniform in log), randint [lo, hi]
(integers, both ends included) and choice (equally likely values). The Latin hypercube is
scipy's (`scipy.stats.qmc.LatinHypercube`, McKay et al. 1979): each point lies at random within
its stratum.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _stream(seed: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(stream,))))


def unit_points(method: str, n: int, d: int, seed: int, stream: int) -> np.ndarray:
    """n points in [0, 1)^d: independent uniforms ("random") or a Latin hypercube ("lhs")."""
    rng = _stream(seed, stream)
    if method == "random":
        return rng.random((n, d))
    from scipy.stats import qmc

    return qmc.LatinHypercube(d=d, rng=rng).random(n)


def from_unit(u: np.ndarray, kind: str, arg: list[Any]) -> list[Any]:
    """Maps uniforms in [0, 1) through the inverse CDF of one distribution."""
    if kind == "uniform":
        lo, hi = arg
        return [lo + x * (hi - lo) for x in u.tolist()]
    if kind == "loguniform":
        lo, hi = math.log(arg[0]), math.log(arg[1])
        return [math.exp(lo + x * (hi - lo)) for x in u.tolist()]
    if kind == "randint":
        lo, hi = arg
        width = hi - lo + 1
        return [lo + min(int(x * width), width - 1) for x in u.tolist()]
    if kind == "choice":
        k = len(arg)
        return [arg[min(int(x * k), k - 1)] for x in u.tolist()]
    raise ValueError(f"unknown distribution {kind}")


def draw(
    method: str, n: int, seed: int, stream: int, dists: list[tuple[str, list[Any]]]
) -> list[list[Any]]:
    """One column of n values per (distribution, argument) in `dists`."""
    u = unit_points(method, n, len(dists), seed, stream)
    return [from_unit(u[:, j], kind, arg) for j, (kind, arg) in enumerate(dists)]
