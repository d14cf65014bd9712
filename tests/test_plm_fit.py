"""The generator's burstiness is fitted to the document's Fig. 6 by the documented procedure
(qoslab.plm.fit), and the study uses the fit's result.

Cost: about 10 s (the coordinator alone over 15 minutes of demand, three seeds, at three
points of the grid)."""

from __future__ import annotations

import math

import pytest

from conftest import ROOT
from qoslab.plm import fit, study

RECORD = ROOT / "configs" / "plm" / "burst-fit.csv"


def test_the_study_draws_with_the_sigma_the_fit_record_chose():
    best, scores = fit.read(RECORD)
    assert [s for s, _ in scores] == list(fit.GRID)
    # The record's choice is its least objective, and the study's constant.
    assert best == min(scores, key=lambda x: x[1])[0]
    assert best == study.BURST_SIGMA
    assert study.Workload().burst_sigma == best


def test_the_code_reproduces_the_record_around_its_minimum():
    best, scores = fit.read(RECORD)
    recorded = dict(scores)
    i = fit.GRID.index(best)
    for sigma in fit.GRID[max(0, i - 1) : i + 2]:
        assert fit.objective(sigma) == pytest.approx(recorded[sigma], abs=1e-6), sigma


def test_the_objective_is_the_squared_distance_from_every_cell_of_fig6():
    # The document's own numbers score 0; moving one cell by 0.1 scores 0.01.
    doc = fit.Cells({k: tuple(map(list, v)) for k, v in fit.DOC_FIG6.items()})
    assert doc.error() == 0
    moved = {k: tuple(list(x) for x in v) for k, v in fit.DOC_FIG6.items()}
    moved[(4, "fr")][2][1] += 0.1
    assert math.isclose(fit.Cells(moved).error(), 0.01)
    assert sum(3 * 3 for _ in fit.DOC_FIG6) == 36
