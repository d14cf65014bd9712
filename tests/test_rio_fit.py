"""The rio presets' fitted CPU costs (docs/rio.md, "Fitted CPU costs"): the targets come from
the document's Figure 2 as typed into qoslab.rio.fit, the presets hold what the procedure
gives, and the presets as shipped keep Figure 2's statements on the simulator."""

from __future__ import annotations

import pytest

from qoslab.rio import fit as f


def test_the_fits_targets_are_figure_2s_numbers_worked_by_hand():
    # The document (3.1, 6.1): 8 KiB then 4 KiB ordered requests, 2.2 GHz; the presets'
    # channels: PM981 2.4 GB/s, 905P 2.2 GB/s (data sheets, kb_base 1000).
    assert f.REQUEST_BYTES == (8192, 4096)
    assert (f.CPU_GHZ, f.HORAE_SHORT_AT, f.MOST_THREADS, f.ORDERLESS_FULL_AT) == (2.2, 8, 12, 1)
    channels = {d: f.channel_bytes_per_s(d) for d in f.DRIVES}
    assert channels == {"rio-flash": 2.4e9, "rio-optane": 2.2e9}
    # One orderless thread fills the faster drive: 6,144 B / 2.4 GB/s = 2,560 ns a request.
    assert f.initiator_budget_ns(channels) == pytest.approx(2560.0)
    # HORAE full above 8 threads and by 12 on both drives: above 8 x 6,144 / 2.2 = 22,341.8 ns
    # (Optane's lower edge) and at most 12 x 6,144 / 2.4 = 30,720 ns (flash's upper edge).
    low, high = f.horae_window_ns(channels)
    assert low == pytest.approx(22341.82, abs=0.01)
    assert high == pytest.approx(30720.0)


def test_the_procedure_solves_for_the_scale_and_the_wait():
    # A stand-in model, linear as the simulator is while one thread is CPU-bound: 100 ns plus
    # 4,000 ns at the assumed cycles for orderless; HORAE 3,000 ns plus its cycles, no wait.
    base = f.assumed_cycles()

    def measure(ordering, device, sets):
        values = dict(s.split("=") for s in sets)
        scale = int(values["rdma.submit_cycles"]) / base["submit_cycles"]
        if ordering == "none":
            return 100 + 4000 * scale
        assert values["fabric.context_switch_ns"] == "0"
        return 3000 + 4000 * scale + (10 if device == "rio-optane" else 0)

    got = f.fit(measure)
    # (2,560 - 100) / 4,000 = 0.615, within the rounding of the cycles at 0.8.
    assert got.scale == pytest.approx(0.615, abs=2e-4)
    assert got.cycles["submit_cycles"] == round(0.615 * base["submit_cycles"])
    # HORAE without the wait: 3,000 + 2,460 (+ 10 on Optane), mean 5,465; the middle of the
    # window (22,341.8 + 30,720) / 2 = 26,530.9; the wait is what is left.
    assert got.horae_target_ns == pytest.approx(26530.91, abs=0.01)
    assert got.context_switch_ns == pytest.approx(26530.91 - 5465, abs=3)


def test_the_rio_presets_hold_what_the_fit_gives():
    got = f.fitted_values(f.fit())
    for device in f.DRIVES:
        assert f.preset_values(device) == got, device


def test_the_presets_keep_figure_2s_statements():
    # On the presets as shipped, seed 1 (the pattern's sizes are drawn): one orderless thread
    # at the channel of each drive; HORAE short of it at 8 threads and at it by 12.
    for device in f.DRIVES:
        channel = f.channel_bytes_per_s(device)
        _, orderless = f.figure2_rates("none", device, 1, seed=1)
        assert orderless >= 0.99 * channel, device
        _, at8 = f.figure2_rates("horae", device, 8, seed=1)
        _, at12 = f.figure2_rates("horae", device, 12, seed=1)
        assert at8 < 0.95 * channel, (device, at8)
        assert at12 >= 0.99 * channel, (device, at12)
