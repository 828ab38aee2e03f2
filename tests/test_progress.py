"""Progress of long tool runs: the stages read off nextpnr's log, printed when they change."""

import io

import numpy as np
import pytest

from hwgen import progress, simulate

NEXTPNR = """Info: Packing IOs..
Info: Packing LUTs...
Info: Creating initial analytic placement for 6026 cells, random placement wirelen = 684575.
Info:     at iteration #1, type ALL: wirelen solved = 1423, spread = 123400, legal = 139065; time = 1.72s
Info:     at iteration #2, type ALL: wirelen solved = 4323, spread = 109277, legal = 120763; time = 0.75s
Info: Running simulated annealing placer for refinement.
Info:   at iteration #5: temp = 0.000000, timing cost = 449, wirelen = 63230
Info: Routing 22689 arcs.
Info:       1000 |      372        627 |  372   627 |     22173|       1.45       1.45|
Info: Max frequency for clock '$glbnet$clk': 118.55 MHz (PASS at 100.00 MHz)
"""


def test_stages_of_a_nextpnr_log():
    out = io.StringIO()
    with progress.showing("synth k", out):
        progress.heartbeat("yosys")
        for text in NEXTPNR.splitlines():
            progress.line("nextpnr-ecp5", text)
    shown = [line.split(", ")[0] for line in out.getvalue().splitlines()]
    assert shown == [
        "synth k: yosys: running",
        "synth k: nextpnr-ecp5: packing",
        "synth k: nextpnr-ecp5: placing (analytic)",
        "synth k: nextpnr-ecp5: placing (annealing)",
        "synth k: nextpnr-ecp5: routing",
        "synth k: nextpnr-ecp5: timing report",
    ]


def test_quiet_without_a_report(capsys):
    progress.line("nextpnr-ecp5", "Info: Packing IOs..")
    assert capsys.readouterr() == ("", "")


def test_following_a_progress_file_reports_its_last_line(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0.0)
    track = tmp_path / "progress.txt"
    out = io.StringIO()
    with progress.showing("sim k", out):
        with progress.following("simulation", track):  # no file yet: a heartbeat at the end
            pass
        with progress.following("simulation", track):
            track.write_text("cycle 40000 of about 90000\n")
    shown = [line.rsplit(", ", 1)[0] for line in out.getvalue().splitlines()]
    assert shown == ["sim k: simulation: running", "sim k: simulation: running (cycle 40000 of about 90000)"]


def test_a_quiet_report_says_nothing_at_first(monkeypatch):
    out = io.StringIO()
    with progress.showing("sim k", out, quiet=60.0):
        with progress.following("verilator build"):
            pass
    assert out.getvalue() == ""


@pytest.mark.rtl
def test_a_simulation_reports_the_cycle_it_has_reached(tmp_path, monkeypatch):
    """The testbench rewrites its progress file every PROGRESS_EVERY cycles of the run."""
    from test_waves import scaled

    monkeypatch.setattr(progress, "EVERY", 0.0)
    monkeypatch.setattr(simulate, "PROGRESS_EVERY", 100)
    out = io.StringIO()
    with progress.showing("sim scaled", out):
        sim = scaled.verify(np.arange(256, dtype=np.int32), out_dir=tmp_path)
    last = out.getvalue().splitlines()[-1]
    reached = 100 * (sim.cycles // 100)
    assert last.startswith(f"sim scaled: simulation: running (cycle {reached} of about {sim.predicted_cycles}), ")
