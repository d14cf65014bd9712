"""Reading a sweep spec (YAML) into the list of points it names.

    study: nvmelite run              # a registered study (`qoslab sweep --list-studies`)
    name: cliff                      # the sweep's name in the store (default: the file's stem)
    parameters:                      # cartesian product, first key outermost
      workload: seeds/seed_001.json  # one value (files are relative to this spec)
      policy: [FIFO, RANDOM]         # a list
      bound: {range: [0, 4]}         # range [start, stop) or [start, stop, step]
    zip:                             # groups of lists taken element by element
      - {fault: [NONE, RESET], submit_window: [inf, 4]}
    sample:                          # n random or Latin-hypercube draws, seeded
      method: lhs
      n: 8
      seed: 7
      parameters: {x: {uniform: [0.1, 0.9]}}
    seeds: {range: [0, 100]}         # the study's run seed, innermost
    details: [fio_json]              # optional tables the study stores per point

A point is one combination of every axis (parameters, each zip group, the sample) and one
seed. Every value is checked against the study's parameter table before anything runs; a
problem is an `InputError` naming the spec, the line and the key.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qoslab.errors import InputError
from qoslab.sweep.kinds import KindError, integer
from qoslab.sweep.study import Param, Study
from qoslab.yamlnodes import compose_yaml

TOP_KEYS = ("study", "name", "parameters", "zip", "sample", "seeds", "details")
SAMPLE_METHODS = ("random", "lhs")
DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice")
SEED_MAX = 2**64 - 1
# Most points a sweep names: planning one costs about 0.5 KB of memory (its key, its place in
# the batches), so this many take some 5 GB and minutes before the first point runs.
MAX_POINTS = 10_000_000
# The sample's draws come from their own stream of the spec's seed (a named stream, so a
# later use of the seed for something else cannot shift them).
SAMPLE_STREAM = zlib.crc32(b"qoslab.sweep.sample")


# ---- YAML with lines --------------------------------------------------------------------------


@dataclass
class Node:
    """A YAML value and the line it starts on; mappings and lists hold Nodes."""

    value: Any
    line: int
    keys: dict[str, int] = field(default_factory=dict)  # a mapping's key -> its line


def _read_yaml(path: Path, data: bytes | None = None) -> Node:
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as err:
            raise InputError(f"cannot read the spec: {err.strerror}", path=path) from None
    root = compose_yaml(data, path)
    if root is None:
        raise InputError("empty spec: expected a mapping with 'study' and 'parameters'", path=path)
    try:
        return _node(root, path)
    except RecursionError:
        raise InputError("invalid YAML: nested too deeply", path=path) from None


def _node(n: Any, path: Path) -> Node:
    import yaml

    line = n.start_mark.line + 1
    if isinstance(n, yaml.MappingNode):
        values: dict[str, Node] = {}
        keys: dict[str, int] = {}
        for k, v in n.value:
            kline = k.start_mark.line + 1
            if not isinstance(k, yaml.ScalarNode):
                raise InputError("expected a plain key", path=path, line=kline)
            if k.value in values:
                raise InputError(f"{k.value}: duplicated key", path=path, line=kline)
            values[k.value] = _node(v, path)
            keys[k.value] = kline
        return Node(values, line, keys)
    if isinstance(n, yaml.SequenceNode):
        return Node([_node(v, path) for v in n.value], line)
    loader = yaml.SafeLoader("")
    return Node(loader.construct_object(n), line)


# ---- the spec -----------------------------------------------------------------------------------


@dataclass
class Axis:
    """One dimension of the sweep: `names` set together, one tuple of values per step."""

    names: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass
class Spec:
    path: Path
    name: str
    study: Study
    fixed: dict[str, Any]  # values of parameters that do not vary (given once or defaults)
    axes: list[Axis]
    seeds: list[int] | None  # None: the study takes no seed
    details: frozenset[str]
    names: list[str]  # every parameter, in the order the spec gives them, then defaults
    text: str = ""

    @property
    def n_configs(self) -> int:
        return math.prod(len(a.rows) for a in self.axes)

    @property
    def n_seeds(self) -> int:
        return 1 if self.seeds is None else len(self.seeds)

    def __len__(self) -> int:
        return self.n_configs * self.n_seeds

    def configs(self) -> list[dict[str, Any]]:
        """Every combination of the axes (first axis outermost), fixed values included."""
        out = []
        for combo in itertools.product(*(a.rows for a in self.axes)):
            config = dict(self.fixed)
            for axis, row in zip(self.axes, combo, strict=True):
                config.update(zip(axis.names, row, strict=True))
            out.append({n: config[n] for n in self.names})
        return out

    def varying(self) -> list[str]:
        return [n for a in self.axes for n in a.names if len(a.rows) > 1]


class _Reader:
    def __init__(self, path: Path, registry: dict[str, Study]):
        self.path = path
        self.registry = registry

    def fail(self, line: int | None, key: str, message: str) -> InputError:
        return InputError(f"{key}: {message}" if key else message, path=self.path, line=line)

    # -- values ----------------------------------------------------------------------------------

    def check(self, param: Param, value: Any, line: int, key: str) -> Any:
        if value is None and param.default is None:
            return None  # null: the parameter is not given (its default), e.g. no set.KEY
        try:
            value = param.kind(value)
        except KindError as err:
            raise self.fail(line, key, str(err)) from None
        if param.kind.is_file(value):
            full = Path(value) if Path(value).is_absolute() else self.path.parent / value
            if not full.is_file():
                raise self.fail(line, key, f"file '{value}' not found (looked for {full})")
        return value

    def values(self, param: Param, node: Node, key: str) -> list[Any]:
        """A parameter's values: a scalar, a list, or {range | linspace | geomspace: [...]}."""
        if isinstance(node.value, list):
            if not node.value:
                raise self.fail(node.line, key, "expected at least one value, got an empty list")
            out = []
            for i, item in enumerate(node.value):
                if isinstance(item.value, list | dict):
                    raise self.fail(item.line, f"{key}[{i}]", "expected a single value")
                out.append(self.check(param, item.value, item.line, f"{key}[{i}]"))
            return out
        if isinstance(node.value, dict):
            raw = self.generator(node, key)
            return [self.check(param, v, node.line, key) for v in raw]
        return [self.check(param, node.value, node.line, key)]

    def numbers(self, node: Node, key: str, count: tuple[int, ...]) -> list[float | int]:
        if not isinstance(node.value, list) or len(node.value) not in count:
            n = " or ".join(map(str, count))
            raise self.fail(node.line, key, f"expected a list of {n} numbers")
        out = []
        for item in node.value:
            v = item.value
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise self.fail(item.line, key, f"expected a number, got '{v}'")
            out.append(v)
        return out

    def within_points(self, n: int, line: int, key: str) -> None:
        """Refuses a sweep (or one of its axes) of more than MAX_POINTS points before any of
        them is made."""
        if n > MAX_POINTS:
            raise self.fail(
                line,
                key,
                f"{n:,} points, more than the {MAX_POINTS:,} a sweep holds (about 0.5 KB of "
                "memory each before any runs); split it into several sweeps into one store",
            )

    def generator(self, node: Node, key: str) -> list[Any]:
        if len(node.value) != 1:
            raise self.fail(node.line, key, "expected one of range, linspace or geomspace")
        ((kind, arg),) = node.value.items()
        where = f"{key}.{kind}"
        if kind == "range":
            nums = self.numbers(arg, where, (2, 3))
            start, stop, step = (*nums, 1) if len(nums) == 2 else nums
            if step == 0:
                raise self.fail(arg.line, where, "step must not be 0")
            n = max(0, math.ceil((stop - start) / step))
            if n == 0:
                raise self.fail(
                    arg.line, where, f"range [{start}, {stop}) with step {step} is empty"
                )
            self.within_points(n, arg.line, where)
            if all(isinstance(x, int) for x in (start, stop, step)):
                return list(range(start, stop, step))
            return [start + i * step for i in range(n)]
        if kind in ("linspace", "geomspace"):
            start, stop, num = self.numbers(arg, where, (3,))
            if isinstance(num, float) or num < 1:
                raise self.fail(arg.line, where, f"expected a count of at least 1, got {num}")
            self.within_points(num, arg.line, where)
            if kind == "geomspace" and (start <= 0 or stop <= 0):
                raise self.fail(arg.line, where, "expected start and stop > 0")
            if num == 1:
                return [start]
            if kind == "linspace":
                raw = [start + (stop - start) * i / (num - 1) for i in range(num)]
            else:
                ratio = math.log(stop / start)
                raw = [start * math.exp(ratio * i / (num - 1)) for i in range(num)]
                raw[-1] = stop
            # Whole numbers stay integers (geomspace [1, 256, 9] is 1, 2, 4, ..., 256).
            if all(isinstance(x, int) for x in (start, stop)):
                close = [round(x) for x in raw]
                if all(abs(x - c) < 1e-9 * max(1, abs(c)) for x, c in zip(raw, close, strict=True)):
                    return close
            return raw
        raise self.fail(
            node.keys.get(kind, node.line),
            key,
            f"unknown generator '{kind}' (expected range, linspace or geomspace)",
        )

    # -- the spec ------------------------------------------------------------------------------

    def param(self, study: Study, name: str, line: int, key: str) -> Param:
        p = study.param(name)
        if p is None:
            known = ", ".join(q.name for q in study.params)
            raise self.fail(line, key, f"unknown parameter of '{study.name}' (known: {known})")
        return p

    def read(self, data: bytes | None = None) -> Spec:
        root = _read_yaml(self.path, data)
        if not isinstance(root.value, dict):
            raise self.fail(root.line, "", "expected a mapping with 'study' and 'parameters'")
        top = root.value
        for k, line in root.keys.items():
            if k not in TOP_KEYS:
                raise self.fail(line, k, f"unknown key (expected {', '.join(TOP_KEYS)})")
        if "study" not in top:
            raise self.fail(1, "study", "missing (expected one of " + self.known() + ")")
        study_node = top["study"]
        study = self.registry.get(study_node.value) if isinstance(study_node.value, str) else None
        if study is None:
            raise self.fail(
                study_node.line,
                "study",
                f"unknown study '{study_node.value}' (expected one of {self.known()})",
            )
        name = self.path.stem
        if "name" in top:
            n = top["name"]
            if not isinstance(n.value, str) or not n.value.strip():
                raise self.fail(n.line, "name", "expected a non-empty string")
            name = n.value
        seen: dict[str, int] = {}
        fixed: dict[str, Any] = {}
        axes: list[Axis] = []
        order: list[str] = []

        def claim(pname: str, line: int, key: str) -> Param:
            param = self.param(study, pname, line, key)
            if pname in seen:
                raise self.fail(line, key, f"given twice (first on line {seen[pname]})")
            seen[pname] = line
            order.append(pname)
            return param

        if "parameters" in top:
            node = top["parameters"]
            if not isinstance(node.value, dict):
                raise self.fail(node.line, "parameters", "expected a mapping of parameter: values")
            for pname, vnode in node.value.items():
                key = f"parameters.{pname}"
                param = claim(pname, node.keys[pname], key)
                values = self.values(param, vnode, key)
                if len(values) == 1 and not isinstance(vnode.value, list):
                    fixed[pname] = values[0]
                else:
                    axes.append(Axis((pname,), [(v,) for v in values]))
        if "zip" in top:
            axes.extend(self.zips(top["zip"], claim))
        if "sample" in top:
            axes.append(self.sample(top["sample"], study, claim))
        for p in study.params:
            if p.name not in seen:
                if p.required:
                    raise self.fail(
                        root.keys.get("parameters", 1),
                        f"parameters.{p.name}",
                        f"missing (required by '{study.name}': {p.help})",
                    )
                fixed[p.name] = p.default
                order.append(p.name)
        seeds = self.seeds(top, root, study)
        details = self.details(top, study)
        spec = Spec(self.path, name, study, fixed, axes, seeds, details, order)
        self.within_points(len(spec), root.keys.get("parameters", 1), "parameters")
        if study.check_config is not None:
            self.check_configs(spec, root.keys.get("parameters", 1))
        return spec

    def known(self) -> str:
        return ", ".join(f"'{n}'" for n in self.registry)

    def zips(self, node: Node, claim) -> list[Axis]:
        groups = node.value if isinstance(node.value, list) else [node]
        axes = []
        for gi, group in enumerate(groups):
            where = f"zip[{gi}]" if isinstance(node.value, list) else "zip"
            if not isinstance(group.value, dict) or not group.value:
                raise self.fail(group.line, where, "expected a mapping of parameter: list")
            names, columns = [], []
            for pname, vnode in group.value.items():
                key = f"{where}.{pname}"
                param = claim(pname, group.keys[pname], key)
                if not isinstance(vnode.value, list | dict):
                    raise self.fail(vnode.line, key, "expected a list (or a range) to zip")
                names.append(pname)
                columns.append((self.values(param, vnode, key), vnode.line, key))
            length = len(columns[0][0])
            for values, line, key in columns[1:]:
                if len(values) != length:
                    raise self.fail(
                        line, key, f"has {len(values)} values, {columns[0][2]} has {length}"
                    )
            axes.append(Axis(tuple(names), list(zip(*(c[0] for c in columns), strict=True))))
        return axes

    def sample(self, node: Node, study: Study, claim) -> Axis:
        if not isinstance(node.value, dict):
            raise self.fail(
                node.line, "sample", "expected a mapping with method, n, seed and parameters"
            )
        s = node.value
        for k, line in node.keys.items():
            if k not in ("method", "n", "seed", "parameters"):
                raise self.fail(
                    line, f"sample.{k}", "unknown key (expected method, n, seed, parameters)"
                )
        for k in ("method", "n", "seed", "parameters"):
            if k not in s:
                raise self.fail(node.line, f"sample.{k}", "missing")
        method = s["method"].value
        if method not in SAMPLE_METHODS:
            raise self.fail(
                s["method"].line, "sample.method", f"expected random or lhs, got '{method}'"
            )
        n = s["n"].value
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise self.fail(s["n"].line, "sample.n", f"expected an integer >= 1, got '{n}'")
        self.within_points(n, s["n"].line, "sample.n")
        seed = s["seed"].value
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
            raise self.fail(
                s["seed"].line, "sample.seed", f"expected an integer 0..2^64-1, got '{seed}'"
            )
        pnode = s["parameters"]
        if not isinstance(pnode.value, dict) or not pnode.value:
            raise self.fail(
                pnode.line, "sample.parameters", "expected a mapping of parameter: distribution"
            )
        dists = []
        for pname, dnode in pnode.value.items():
            key = f"sample.parameters.{pname}"
            param = claim(pname, pnode.keys[pname], key)
            dists.append((pname, param, *self.distribution(param, dnode, key)))
        from qoslab.sweep.sampling import draw

        columns = draw(method, n, seed, SAMPLE_STREAM, [(d[2], d[3]) for d in dists])
        names = tuple(d[0] for d in dists)
        checked = []
        for (pname, param, _, _, line), values in zip(dists, columns, strict=True):
            checked.append(
                [self.check(param, v, line, f"sample.parameters.{pname}") for v in values]
            )
        return Axis(names, list(zip(*checked, strict=True)))

    def distribution(self, param: Param, node: Node, key: str) -> tuple[str, list, int]:
        if not isinstance(node.value, dict) or len(node.value) != 1:
            raise self.fail(node.line, key, "expected one of " + ", ".join(DISTRIBUTIONS))
        ((kind, arg),) = node.value.items()
        where = f"{key}.{kind}"
        if kind not in DISTRIBUTIONS:
            raise self.fail(
                node.line,
                key,
                f"unknown distribution '{kind}' (expected " + ", ".join(DISTRIBUTIONS) + ")",
            )
        if kind == "choice":
            return kind, self.values(param, arg, where), arg.line
        lo, hi = self.numbers(arg, where, (2,))
        if kind == "randint":
            if not (isinstance(lo, int) and isinstance(hi, int)) or lo > hi:
                raise self.fail(arg.line, where, f"expected integers lo <= hi, got [{lo}, {hi}]")
        elif not lo < hi:
            raise self.fail(arg.line, where, f"expected lo < hi, got [{lo}, {hi}]")
        if kind == "loguniform" and lo <= 0:
            raise self.fail(arg.line, where, f"expected lo > 0, got {lo}")
        return kind, [lo, hi], arg.line

    def seeds(self, top: dict, root: Node, study: Study) -> list[int] | None:
        if not study.seeded:
            if "seeds" in top:
                raise self.fail(
                    top["seeds"].line,
                    "seeds",
                    f"'{study.name}' takes no seed (its inputs hold their own)",
                )
            return None
        if "seeds" not in top:
            raise self.fail(1, "seeds", "missing (a list or a range of run seeds)")
        seed_param = Param("seeds", integer(0, SEED_MAX))
        seeds = self.values(seed_param, top["seeds"], "seeds")
        if len(set(seeds)) != len(seeds):
            raise self.fail(top["seeds"].line, "seeds", "a seed is listed twice")
        return seeds

    def details(self, top: dict, study: Study) -> frozenset[str]:
        wanted = {d.name for d in study.details if d.default}
        if "details" not in top:
            return frozenset(wanted)
        node = top["details"]
        known = {d.name for d in study.details}
        items = node.value if isinstance(node.value, list) else [node]
        names = set()
        for item in items:
            if item.value not in known:
                have = ", ".join(sorted(known)) or "none"
                raise self.fail(
                    item.line,
                    "details",
                    f"unknown detail '{item.value}' of '{study.name}' (it has: {have})",
                )
            names.add(item.value)
        return frozenset(names)

    def check_configs(self, spec: Spec, line: int) -> None:
        # Rules between parameters hold for every combination the spec makes; an error points
        # at the parameters block, where the combination comes from.
        for config in spec.configs():
            try:
                spec.study.check_config(config)
            except KindError as err:
                raise self.fail(line, "parameters", str(err)) from None


def load_spec(path: str | Path, registry: dict[str, Study] | None = None) -> Spec:
    """Reads and checks a spec; nothing runs. `registry` defaults to the registered studies."""
    if registry is None:
        from qoslab.sweep.studies import STUDIES

        registry = STUDIES
    path = Path(path)
    spec = _Reader(path, registry).read()
    spec.text = path.read_text(encoding="utf-8")
    return spec


def planned_spec(
    study: str,
    name: str,
    configs: list[dict[str, Any]],
    seeds: list[int] | None,
    details: list[str] | None = None,
    folder: Path | str = ".",
) -> Spec:
    """The spec of the points a study command planned: each of `configs` (some of the study's
    parameters; the others take their defaults) with each of `seeds` (innermost), in that
    order. It is written as a spec file would be (the parameters every configuration shares,
    then one zip group of the others) and read back by the same reader, so the values are
    checked as a spec's are, relative file names are taken from `folder`, and its text, kept in
    the store, is a spec `qoslab sweep` runs to the same points (the same keys)."""
    import yaml

    from qoslab.sweep.studies import STUDIES

    def default(name: str) -> Any:
        p = STUDIES[study].param(name)
        return None if p is None or p.required else p.default

    names = list(dict.fromkeys(n for c in configs for n in c))
    columns = {n: [c.get(n, default(n)) for c in configs] for n in names}
    shared = {n: v[0] for n, v in columns.items() if all(x == v[0] for x in v)}
    document: dict[str, Any] = {"study": study, "name": name}
    given = {n: v for n, v in shared.items() if v is not None}
    if given:
        document["parameters"] = given
    varying = {n: v for n, v in columns.items() if n not in shared}
    if len(configs) > 1 and not varying and given:  # one configuration planned several times
        first = next(iter(given))
        varying[first] = columns[first]
        del given[first]
    if varying:
        document["zip"] = [varying]
    if seeds is not None:
        document["seeds"] = list(seeds)
    if details is not None:
        document["details"] = list(details)
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    spec = _Reader(Path(folder) / f"{name}.yaml", STUDIES).read(text.encode())
    spec.text = text
    return spec


def resolve_files(spec: Spec, config: dict[str, Any]) -> dict[str, Any]:
    """The config with file parameters as absolute paths (what a worker opens)."""
    out = dict(config)
    for name, value in config.items():
        p = spec.study.param(name)
        if p is not None and p.kind.is_file(value):
            path = Path(value)
            out[name] = str(path if path.is_absolute() else (spec.path.parent / path).resolve())
    return out


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()
