"""Sweep specs: the points a spec names, and the one-line error of a bad spec.

The `selftest` study (a point is closed forms of its parameters) keeps these tests about the spec
itself; studies' own parameter tables are checked where the errors name them.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT, run_qoslab
from qoslab.errors import InputError
from qoslab.sweep.spec import load_spec

WORKLOAD = ROOT / "configs" / "nvmelite" / "seeds" / "seed_001_long32.json"


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def combos(spec, *names):
    return [tuple(c[n] for n in names) for c in spec.configs()]


def test_parameters_are_a_cartesian_product_with_the_first_key_outermost(tmp_path):
    spec = load_spec(
        spec_file(
            tmp_path,
            """
            study: selftest
            parameters:
              x: [1.5, 2.5]
              n: [3, 4, 5]
              label: fixed
            seeds: [7, 8]
            """,
        )
    )
    assert combos(spec, "x", "n") == [(1.5, 3), (1.5, 4), (1.5, 5), (2.5, 3), (2.5, 4), (2.5, 5)]
    assert {c["label"] for c in spec.configs()} == {"fixed"}
    # Parameters the spec leaves out take the study's defaults.
    assert {(c["fail"], c["busy_us"]) for c in spec.configs()} == {(False, 0)}
    assert spec.seeds == [7, 8]
    assert len(spec) == 12
    assert spec.varying() == ["x", "n"]
    assert spec.name == "spec"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ("{range: [0, 10, 3]}", [0, 3, 6, 9]),
        ("{range: [5, 0, -2]}", [5, 3, 1]),
        ("{range: [0.5, 1.0, 0.25]}", [0.5, 0.75]),
        ("{linspace: [0, 1, 5]}", [0, 0.25, 0.5, 0.75, 1]),
        ("{geomspace: [1, 256, 9]}", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
        ("{linspace: [2, 2, 1]}", [2]),
    ],
)
def test_ranges_are_pythons_and_spaces_are_numpys(tmp_path, values, expected):
    spec = load_spec(
        spec_file(tmp_path, f"study: selftest\nparameters:\n  x: {values}\nseeds: [1]\n")
    )
    assert combos(spec, "x") == [(v,) for v in expected]


def test_zip_takes_lists_element_by_element_inside_the_product(tmp_path):
    spec = load_spec(
        spec_file(
            tmp_path,
            """
            study: selftest
            parameters:
              n: [0, 1]
            zip:
              - {x: [1, 2, 3], label: [a, bb, ccc]}
            seeds: {range: [0, 3]}
            """,
        )
    )
    assert combos(spec, "n", "x", "label") == [
        (n, x, label) for n in (0, 1) for x, label in ((1, "a"), (2, "bb"), (3, "ccc"))
    ]
    assert spec.seeds == [0, 1, 2]


def _sample(tmp_path, method: str, seed: int, n: int = 20):
    return load_spec(
        spec_file(
            tmp_path,
            f"""
            study: selftest
            sample:
              method: {method}
              n: {n}
              seed: {seed}
              parameters:
                x: {{uniform: [0, 10]}}
                n: {{randint: [0, 19]}}
                label: {{choice: [a, b, c, d]}}
            seeds: [1]
            """,
        )
    )


def test_a_latin_hypercube_sample_has_one_draw_in_every_stratum_of_every_parameter(tmp_path):
    spec = _sample(tmp_path, "lhs", seed=11)
    xs, ns, labels = zip(*combos(spec, "x", "n", "label"), strict=True)
    # 20 draws: each twentieth of [0, 10) holds exactly one x, each of the 20 integers 0..19
    # comes once, each of 4 choices 5 times.
    assert sorted(int(x // 0.5) for x in xs) == list(range(20))
    assert sorted(ns) == list(range(20))
    assert Counter(labels) == {"a": 5, "b": 5, "c": 5, "d": 5}


def test_a_loguniform_hypercube_has_one_draw_in_every_stratum_of_the_log(tmp_path):
    spec = load_spec(
        spec_file(
            tmp_path,
            """
            study: selftest
            sample: {method: lhs, n: 30, seed: 5, parameters: {x: {loguniform: [1, 1000]}}}
            seeds: [1]
            """,
        )
    )
    # log10 of [1, 1000) is [0, 3): 30 strata of a tenth of a decade each.
    assert sorted(int(math.log10(x) / 0.1) for (x,) in combos(spec, "x")) == list(range(30))


def test_a_sample_is_the_same_for_the_same_seed_and_differs_for_another(tmp_path):
    first = combos(_sample(tmp_path, "random", seed=3), "x", "n", "label")
    again = combos(_sample(tmp_path, "random", seed=3), "x", "n", "label")
    other = combos(_sample(tmp_path, "random", seed=4), "x", "n", "label")
    assert first == again
    assert first != other
    assert all(0 <= x < 10 and 0 <= n <= 19 for x, n, _ in first)


def test_the_nvmelite_study_takes_its_commands_spellings(tmp_path):
    spec = load_spec(
        spec_file(
            tmp_path,
            f"""
            study: nvmelite run
            parameters:
              workload: {WORKLOAD}
              policy: [FIFO, RANDOM]
              bound: [0, 5, inf]
              submit_window: 4
            seeds: {{range: [0, 100]}}
            """,
        )
    )
    assert combos(spec, "policy", "bound")[:3] == [("FIFO", "0"), ("FIFO", "5"), ("FIFO", "inf")]
    assert {(c["fault"], c["submit_window"]) for c in spec.configs()} == {("NONE", "4")}
    assert len(spec) == 600


# ---- bad specs --------------------------------------------------------------------------------

BAD_SPECS = [
    # (spec text, line, key, what the message says)
    ("study: nosuch\nseeds: [1]\n", 1, "study", "unknown study 'nosuch'"),
    ("study: selftest\nparameters:\n  x: 1\n  speed: 2\nseeds: [1]\n", 4, "parameters.speed",
     "unknown parameter of 'selftest'"),
    ("study: selftest\nparameters:\n  n: {range: [5, 5]}\nseeds: [1]\n", 3, "parameters.n.range",
     "is empty"),
    ("study: selftest\nparameters:\n  n: [1, two]\nseeds: [1]\n", 3, "parameters.n[1]",
     "expected an integer >= 0, got 'two'"),
    ("study: selftest\nparameters:\n  x: [1, 2]\n  n: -1\nseeds: [1]\n", 4, "parameters.n",
     "expected an integer >= 0, got -1"),
    ("study: selftest\nzip:\n  - x: [1, 2]\n    n: [1, 2, 3]\nseeds: [1]\n", 4, "zip[0].n",
     "has 3 values"),
    ("study: selftest\nparameters:\n  x: 1\n", 1, "seeds", "missing"),
    ("study: selftest\nseeds: [1, 2, 1]\n", 2, "seeds", "listed twice"),
    ("study: selftest\nseeds: {range: [0, 10, 0]}\n", 2, "seeds.range", "step must not be 0"),
    ("study: selftest\nparameters:\n  x: 1\n  x: 2\nseeds: [1]\n", 4, "x", "duplicated key"),
    ("study: selftest\nparameters:\n  x: 1\nzip: [{x: [1, 2]}]\nseeds: [1]\n", 4, "zip[0].x",
     "given twice (first on line 3)"),
    ("study: selftest\nsample:\n  method: sobol\n  n: 4\n  seed: 1\n"
     "  parameters: {x: {uniform: [0, 1]}}\nseeds: [1]\n", 3, "sample.method",
     "expected random or lhs"),
    ("study: selftest\nsample:\n  method: lhs\n  n: 4\n  seed: 1\n  parameters:\n"
     "    x: {uniform: [1, 0]}\nseeds: [1]\n", 7, "sample.parameters.x.uniform",
     "expected lo < hi"),
    ("study: selftest\nseeds: [1]\nrepeat: 3\n", 3, "repeat", "unknown key"),
    ("study: selftest\nparameters: [x]\nseeds: [1]\n", 2, "parameters", "expected a mapping"),
    ("study: selftest\nseeds: [1]\ndetails: [everything]\n", 3, "details", "unknown detail"),
    (f"study: nvmelite run\nparameters:\n  workload: {WORKLOAD}\n  policy: FIFO\n  bound: x\n"
     "seeds: [0]\n", 5, "parameters.bound", "expected an integer >= 0 or inf, got 'x'"),
    (f"study: nvmelite run\nparameters:\n  workload: {WORKLOAD}\n  policy: [FIFO, LIFO]\n"
     "  bound: 1\nseeds: [0]\n", 4, "parameters.policy[1]", "expected one of FIFO"),
    ("study: nvmelite run\nparameters:\n  workload: nosuch.json\n  policy: FIFO\n  bound: 1\n"
     "seeds: [0]\n", 3, "parameters.workload", "file 'nosuch.json' not found"),
    (f"study: nvmelite run\nparameters:\n  workload: {WORKLOAD}\n  bound: 1\nseeds: [0]\n", 2,
     "parameters.policy", "missing"),
    ("study: nvmelite matrix\nparameters:\n  config: x.yaml\nseeds: [1]\n", 3,
     "parameters.config", "not found"),
    ("study: sim\nparameters:\n  set.media.nosuch: 3\nseeds: [1]\n", 3,
     "parameters.set.media.nosuch", "unknown parameter of 'sim'"),
    ("study: sim\nparameters:\n  device: ideal\nseeds: [1]\n", 2, "parameters",
     "give either job or trace"),
    ("study: selftest\nparameters:\n  x: [1\nseeds: [1]\n", 4, "", "invalid YAML"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "key", "message"), BAD_SPECS)
def test_a_bad_spec_stops_before_anything_runs_with_one_line(tmp_path, text, line, key, message):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    with pytest.raises(InputError) as err:
        load_spec(spec)
    where = f"{spec}:{line}: " + (f"{key}: " if key else "")
    assert str(err.value).startswith(where), str(err.value)
    assert message in str(err.value)


def test_the_command_prints_the_one_line_exits_2_and_creates_no_store(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("study: selftest\nparameters:\n  n: [1, two]\nseeds: [1]\n")
    store = tmp_path / "store"
    done = run_qoslab("sweep", spec, "--store", store)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"qoslab: error: {spec}:3: parameters.n[1]: expected an integer >= 0, got 'two'\n"
    )
    assert not store.exists()


def test_a_spec_that_is_not_there_is_one_line_too(tmp_path):
    done = run_qoslab("sweep", tmp_path / "nosuch.yaml", "--store", tmp_path / "store")
    assert done.returncode == 2
    assert done.stderr.startswith(f"qoslab: error: {tmp_path / 'nosuch.yaml'}: cannot read")
    assert done.stderr.count("\n") == 1
