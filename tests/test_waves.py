"""FST waves: the whole run, or a window of clock cycles counted as the kernel's `cycles` counts
them, on one PE and on a mesh; read back with pywellen. Bad `waves=` values are refused."""

import subprocess

import numpy as np
import pytest
import pywellen
from markers import check_error

import hwgen as hw
from hwgen import int32
from hwgen.errors import HwgenError
from hwgen.waves import asked, env, window
from hwgen_sim import lz4
from hwgen_sim.testbench import PERIOD_NS

PS = 1000  # the simulators' time steps per ns (timescale 1ns/1ps)


@hw.kernel(tile={"i": 16})
def scaled(x: hw.Array[int32, 256]) -> hw.Array[int32, 256]:
    return hw.map(256, lambda i: x[i] * 3 + 1)


def changes(path, name):
    """(time in ps, value) of every change of signal `name` in the FST file at `path`."""
    return [(int(t), int(v)) for t, v in pywellen.Waveform(path)[name].tv]


def last_time(path) -> int:
    """The time of the file's last change of any signal."""
    w = pywellen.Waveform(path)
    return max(int(t) for v in w.all_vars() for t, _ in v.tv)


def check_window(path, first, end, cycles_signal="hwgen_tb.cycles"):
    """The file holds clock cycles first <= c < end: the kernel's cycle counter reads c during
    cycle c, one change a clock period, and nothing is recorded after the window."""
    seen = changes(path, cycles_signal)
    assert [v for _, v in seen] == list(range(first, end))
    times = [t for t, _ in seen]
    assert all(b - a == PERIOD_NS * PS for a, b in zip(times, times[1:]))
    assert last_time(path) < times[0] + (end - first) * PERIOD_NS * PS


def test_bad_waves_are_refused_at_the_users_line():
    for bad in ((5, 5), (7, 3), (-1, 4), (1.5, 3), (True, 3), "yes", (1, 2, 3), 3):
        with pytest.raises(HwgenError) as e:
            window(bad, hw.errors.user_loc())  # L:bad
        check_error(
            e.value,
            HwgenError,
            "waves must be True (every cycle), False, or a window of clock cycles (first, end) with "
            f"0 <= first < end (end None: to the last cycle); got {bad!r}",
            __file__,
            "bad",
        )
    assert window(True, None) is None and window((0, 1), None) == (0, 1) and window([4, None], None) == (4, None)
    assert window((np.int64(2), np.int32(5)), None) == (2, 5)
    assert asked(False, None) is False and asked(None, None) is False and asked(0, None) is False
    assert env(True) == {} and env((4, None)) == {"HWGEN_WAVES_FROM": "4", "HWGEN_WAVES_PERIOD_NS": str(PERIOD_NS)}
    assert env((4, 9))["HWGEN_WAVES_TO"] == "9"


def test_simulate_refuses_bad_waves_before_building():
    x = np.arange(256, dtype=np.int32)
    with pytest.raises(HwgenError) as e:
        scaled.simulate(x, waves=(9, 2))  # L:sim
    assert e.value.line is not None and "got (9, 2)" in e.value.message
    check_error(e.value, HwgenError, e.value.message, __file__, "sim")


def test_lz4_that_cannot_be_fetched_or_built_is_a_clear_error(tmp_path, monkeypatch):
    """pip failing (no network, no such version) and no C compiler: an Lz4Error saying which
    step failed, and nothing left in the cache."""
    monkeypatch.setenv("HWGEN_CACHE", str(tmp_path))
    monkeypatch.setattr(lz4, "VERSION", "0.0.0")
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found for lz4==0.0.0\n")
    monkeypatch.setattr(lz4.subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(lz4.Lz4Error) as e:
        lz4.library()
    assert str(e.value) == (
        "downloading the lz4 0.0.0 sources from PyPI failed: ERROR: No matching distribution found for lz4==0.0.0"
    )

    def missing(*a, **k):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(lz4.subprocess, "run", missing)
    with pytest.raises(lz4.Lz4Error) as e:
        lz4._run(["cc", "-c", "lz4.c"], "compiling lz4.c")
    assert str(e.value) == "compiling lz4.c failed: No such file or directory: cc"
    assert [p.name for p in tmp_path.iterdir()] == ["lz4-0.0.0.lock"]


@pytest.mark.rtl
def test_one_pe_waves_whole_and_windowed(tmp_path):
    x = np.arange(256, dtype=np.int32)
    whole = scaled.verify(x, waves=True, out_dir=tmp_path)
    assert whole.waves == str(tmp_path / "scaled" / "scaled.fst")
    seen = changes(whole.waves, "hwgen_tb.cycles")
    assert seen[0][0] == 0 and seen[-1][1] == whole.cycles  # from reset to after done
    part = scaled.verify(x, waves=(40, 60), out_dir=tmp_path)
    assert part.waves == whole.waves and part.cycles == whole.cycles
    check_window(part.waves, 40, 60)
    # with runs=2 the window is the measured (second) run's
    again = scaled.verify(x, waves=(3, 9), runs=2, out_dir=tmp_path)
    check_window(again.waves, 3, 9)
    assert changes(again.waves, "hwgen_tb.cycles")[0][0] > seen[-1][0] - 10 * PERIOD_NS * PS
    tail = scaled.verify(x, waves=(whole.cycles - 5, None), out_dir=tmp_path)
    assert [v for _, v in changes(tail.waves, "hwgen_tb.cycles")] == list(range(whole.cycles - 5, whole.cycles + 1))
    with pytest.raises(HwgenError) as e:
        scaled.verify(x, waves=(whole.cycles + 10, None), out_dir=tmp_path)  # L:late
    check_error(
        e.value,
        HwgenError,
        f"the waves of kernel 'scaled' start at cycle {whole.cycles + 10}, after its last ({whole.cycles}): the "
        f"window recorded nothing; give --waves-from (waves=(first, end)) a cycle up to {whole.cycles}",
        __file__,
        "late",
    )


@pytest.mark.rtl
def test_mesh_waves_window(tmp_path):
    mesh = hw.Mesh((2,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, tile={"i": 16})
    def total(a: hw.Array[int32, 128]):
        return hw.shard_map(
            lambda al: hw.psum(hw.map(64, lambda i: al[i] + 1), "x"), mesh=mesh, in_specs=(hw.P("x"),), out_specs=hw.P()
        )(a)

    a = np.arange(128, dtype=np.int32)
    sim = total.verify(a, waves=(10, 30), out_dir=tmp_path)
    assert sim.waves == str(tmp_path / "total" / "total.fst") and sim.cycles == sim.predicted_cycles
    check_window(sim.waves, 10, 30)
    w = pywellen.Waveform(sim.waves)
    assert any(str(v).startswith("Var(hwgen_tb.dut.pe1.") for v in w.all_vars())  # every PE is recorded


@pytest.mark.rtl
def test_pipeline_waves_window(tmp_path):
    ring = hw.Mesh((2,), ("stage",), topology="ring")

    @hw.kernel(mesh=ring)
    def twice(x: hw.Array[int32, 8, 4]) -> hw.Array[int32, 8, 4]:
        add = lambda h: hw.map(h.shape, lambda r, c: h[r, c] + 1)  # noqa: E731
        double = lambda h: hw.map(h.shape, lambda s, d: h[s, d] * 2)  # noqa: E731
        return hw.pipeline([add, double], x, axis="stage", microbatches=2)

    x = np.arange(32, dtype=np.int32).reshape(8, 4)
    sim = twice.verify(x, waves=(0, 12), out_dir=tmp_path)
    np.testing.assert_array_equal(sim.outputs, (x + 1) * 2)
    check_window(sim.waves, 0, 12)
