"""Study reports whose own tests need what `make test` cannot give them (a guest kernel for
`qoslab vm study`), opened in headless Chromium from tables of the shape the study makes: no
script or console error, every figure drawn. The other reports are opened by their studies'
tests (nvmelite, sched, plm, sweep, rio, lab study, lab sched, lab calibrate)."""

from __future__ import annotations

import pandas as pd

from chromium import chromium_probe, needs_chromium


def _runs(device: str, scheduler: str, iops: float, reps: int) -> list[dict]:
    """`reps` repetitions of both jobs of the study's job file under `scheduler`."""
    return [
        {"device": device, "run": scheduler, "scheduler": scheduler, "job": job, "rep": r + 1,
         "iops": iops * scale + r, "p99_us": 4000.0 / scale + 10 * r, "lat_mean_us": 900.0,
         "cpu_pct": 1.0}
        for job, scale in (("database_sim", 1.0), ("backup_sim", 0.25))
        for r in range(reps)
    ]  # fmt: skip


@needs_chromium
def test_the_vm_study_report_opens_in_chromium_with_every_figure_drawn(tmp_path):
    from qoslab.vm import study

    device = study.DEVICES[0]
    kernel = pd.DataFrame(
        [row for i, s in enumerate(study.SCHEDULERS) for row in _runs(device, s, 250 + i, 3)]
    )
    sim = pd.DataFrame(
        [row for i, s in enumerate(study.SCHEDULERS) for row in _runs(device, s, 240 + i, 3)]
    )
    meta = {"kernel": "6.1.0", "accel": "tcg", "accel_why": "no KVM", "reps": 3,
            "runtime_s": 5.0, "ramp_s": 1.0}  # fmt: skip
    out = tmp_path / "report"
    out.mkdir()
    study.write_report(out, study.compare(kernel, sim), meta)
    found = chromium_probe(out / "report.html", tmp_path / "profile")
    assert found["errors"] == [] and all(found["images"])
    assert found["svgs"] == [True]
    assert "Schedulers by database_sim p99, lowest first" in found["text"]
