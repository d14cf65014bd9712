"""A point's key: what makes two points the same point.

    key = sha256(canonical JSON of {study, params, seed, qoslab: {version, commit}})[:32 hex]

The canonical JSON has sorted keys, no spaces and ASCII escapes (`json.dumps(...,
sort_keys=True, separators=(",", ":"))`); floats are written as Python's shortest repr. A file
parameter enters as the SHA-256 of the file's content, not its path, so a moved input keeps
its points and an edited one gets new ones. 128 bits of the digest are kept: a sweep of 2^32
points collides with probability below 2^-64.

`point_key` is the definition; `keys_for` computes the same keys for a million points
without a `json.dumps` per point (each configuration's text is built once, and only the seed
changes inside it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

KEY_HEX_DIGITS = 32


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def point_key(
    study: str, key_params: dict[str, Any], seed: int | None, version: str, commit: str
) -> str:
    """The key of one point (the reference definition)."""
    doc = {
        "study": study,
        "params": key_params,
        "seed": seed,
        "qoslab": {"version": version, "commit": commit},
    }
    return hashlib.sha256(_dumps(doc).encode()).hexdigest()[:KEY_HEX_DIGITS]


def keys_for(
    study: str,
    key_params: Sequence[dict[str, Any]],
    seeds: Sequence[int | None],
    version: str,
    commit: str,
):
    """The keys of every (configuration, seed) pair, configurations outermost, as an Arrow
    string array (built from one buffer: a million keys make no Python string each)."""
    import numpy as np
    import pyarrow as pa

    # Sorted keys put "params" < "qoslab" < "seed" < "study": the seed sits between a head and
    # a tail that are the same for every seed of a configuration.
    qoslab = _dumps({"version": version, "commit": commit})
    tail = f',"study":{_dumps(study)}}}'.encode()
    seed_texts = [_dumps(s).encode() + tail for s in seeds]
    digests = bytearray()
    size = KEY_HEX_DIGITS // 2
    for params in key_params:
        head = hashlib.sha256(f'{{"params":{_dumps(params)},"qoslab":{qoslab},"seed":'.encode())
        for seed_text in seed_texts:
            h = head.copy()
            h.update(seed_text)
            digests += h.digest()[:size]
    data = digests.hex().encode("ascii")
    n = len(digests) // size
    offsets = np.arange(0, KEY_HEX_DIGITS * (n + 1), KEY_HEX_DIGITS, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
