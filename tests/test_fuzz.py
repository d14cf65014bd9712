"""Every parser, fuzzed: mutated copies of the inputs qoslab ships end in a clean error (exit 2,
one line) or a success, never a traceback, a panic, a signal or a hang (tests/fuzzing.py).

`make test` runs a few cases of every target with hypothesis's fixed derandomized draws
(QOSLAB_FUZZ_CASES cases each, 15 by default: under a minute in all); `make fuzz` runs many
more with fresh random draws (QOSLAB_FUZZ_CASES, QOSLAB_FUZZ_SEED) and writes the counts to
QOSLAB_FUZZ_REPORT (JSON). A failure is shrunk by hypothesis to a small input, which the
assertion shows with its command line.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import fuzzing

CASES = int(os.environ.get("QOSLAB_FUZZ_CASES", "15"))
RANDOM = "QOSLAB_FUZZ_SEED" in os.environ
TIMEOUT = float(os.environ.get("QOSLAB_FUZZ_TIMEOUT", "20"))


@pytest.fixture(scope="module")
def fuzzer():
    work = fuzzing.new_work_dir()
    targets, texts = fuzzing.prepare(work)
    run = fuzzing.Fuzzer(work, timeout=TIMEOUT)
    run.targets, run.texts = targets, texts
    yield run
    run.close()
    report = os.environ.get("QOSLAB_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps(run.report(), indent=1) + "\n")
    if not run.failures:
        shutil.rmtree(work, ignore_errors=True)


def _settings(test):
    test = settings(
        max_examples=CASES,
        deadline=None,
        database=None,
        derandomize=not RANDOM,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )(test)
    if RANDOM:
        test = seed(int(os.environ["QOSLAB_FUZZ_SEED"]))(test)
    return test


@pytest.mark.parametrize("name", fuzzing.NAMES)
def test_a_mutated_input_ends_in_a_clean_error_or_a_success(fuzzer, name):
    target = fuzzer.targets[name]

    @_settings
    @given(st.data())
    def one_case(data):
        seed_file, text, mutations = data.draw(fuzzing.mutated(target, fuzzer.texts))
        outcome = fuzzer.case(
            target, seed_file, text, lambda path: target.argv(path, data.draw), mutations
        )
        assert not outcome.startswith("failure"), (
            f"{name}: {outcome}\n{json.dumps(fuzzer.failures[-1], indent=1)}"
        )

    one_case()
    counts = fuzzer.counts[name]
    assert sum(counts.values()) >= CASES, counts
