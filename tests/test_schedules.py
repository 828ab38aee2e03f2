"""A schedule never changes results: random kernels under random legal schedules give the
golden model's answer, through the loop IR always, and through Verilator for a sample."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from kernelgen import random_kernel, random_schedule

import hwgen as hw
from hwgen import loop_interp
from hwgen.build import loop_program
from hwgen.lang.signature import check_args
from hwgen_sim import runner


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_schedules_keep_results_in_the_loop_ir(data):
    kernel, args = random_kernel(data.draw)
    kernel = kernel.with_schedule(**random_schedule(data.draw, kernel))
    want = kernel(*args)
    try:
        prog = loop_program(kernel)
    except hw.ScheduleError:
        reject()  # a legal schedule hwgen refuses with a clear error (custom op fold order)
    out = loop_interp.run(prog, check_args(kernel.name, kernel.params, args))
    got = tuple(out[p.name] for p in kernel.results)
    _same(got[0] if len(got) == 1 else got, want)


@pytest.mark.rtl
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_schedules_in_verilator(tmp_path_factory, data):
    kernel, args = random_kernel(data.draw)
    kernel = kernel.with_schedule(**random_schedule(data.draw, kernel))
    try:
        loop_program(kernel)
    except hw.ScheduleError:
        reject()
    r = kernel.verify(*args)
    assert r.cycles == r.predicted_cycles
    design = kernel.build(out_dir=tmp_path_factory.mktemp("rtl"))
    warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings


def test_lanes_the_dram_cannot_feed_are_warned_about_at_the_schedule():
    import warnings

    from hwgen.build import compile_kernel, idle_lanes
    from hwgen.dram import DramConfig
    from hwgen.errors import LanesWarning
    from hwgen.model import predict

    n = 16384

    @hw.kernel(tile={"i": 4096}, par={"i": 1024})  # once 67 s and 1.3 GB to build, no faster than par 4
    def scale(x: hw.Array[hw.int32, n]) -> hw.Array[hw.int32, n]:
        return hw.map(n, lambda i: x[i] * 3 + 1)

    prediction = predict(compile_kernel(scale), DramConfig())
    name, lanes, cycles = idle_lanes(scale, DramConfig(), prediction)
    assert (name, lanes) == ("i", 4) and cycles <= prediction.cycles
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from hwgen.build import warn_idle_lanes

        warn_idle_lanes(scale, DramConfig(), prediction)
    (w,) = caught
    assert w.category is LanesWarning and w.filename == __file__
    assert "par 1024 on 'i' is more than the DRAM can feed: par 4 gives" in str(w.message)
    small = scale.with_schedule(tile={"i": 1024}, par={"i": 4})
    assert idle_lanes(small, DramConfig(), predict(compile_kernel(small), DramConfig())) is None
