"""Loops written without a lambda are named by rule ('@i', '@j', '@k' for '@'; '@0', '@1', ...
for array arithmetic; '@r0', ... for reduction methods), so a schedule can tile them."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int32
from hwgen.build import elaborate


@hw.kernel
def mm(a: hw.Array[int32, 64, 32], b: hw.Array[int32, 32, 48]):
    return a @ b


@hw.kernel
def chain(a: hw.Array[int32, 16, 16], b: hw.Array[int32, 16, 16], c: hw.Array[int32, 16, 8]):
    return (a @ b) @ c + 1


@hw.kernel
def rows(a: hw.Array[int32, 32, 16], x: hw.Array[int32, 16]):
    return (a * x).sum(axis=1)


def args(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-9, 9, s).astype(np.int32) for s in shapes)


def test_the_rule_names_the_loops():
    assert {"@i", "@j", "@k"} <= set(mm.program.extents)
    assert {"@r0", "@0"} <= set(rows.program.extents)


def test_a_schedule_tiles_and_lanes_the_named_loops():
    k = mm.with_schedule(tile={"@i": 16, "@j": 16, "@k": 32}, par={"@k": 4})
    d = elaborate(k)
    assert d.report["predicted_cycles"] < elaborate(mm).report["predicted_cycles"] / 100
    with pytest.raises(hw.ScheduleError):
        mm.with_schedule(tile={"@k": 5}).build()  # 5 does not divide 32


@pytest.mark.rtl
def test_named_loops_in_verilator():
    a, b = args((64, 32), (32, 48))
    r = mm.with_schedule(tile={"@i": 16, "@j": 16, "@k": 32}, par={"@k": 4}).verify(a, b)
    np.testing.assert_array_equal(r.outputs, a @ b)
    assert r.cycles == r.predicted_cycles and r.cycles < 1.05 * r.roofline_cycles
    A, B, C = args((16, 16), (16, 16), (16, 8), seed=1)
    r = chain.with_schedule(tile={"@i": 8, "@j": 8, "@k": 8, "@0": 8, "@1": 8}, par={"@k": 2}).verify(A, B, C)
    np.testing.assert_array_equal(r.outputs, (A @ B) @ C + 1)
    assert r.cycles == r.predicted_cycles
    a2, x = args((32, 16), (16,), seed=2)
    r = rows.with_schedule(tile={"@0": 8, "@r0": 16}, par={"@r0": 4}).verify(a2, x)
    np.testing.assert_array_equal(r.outputs, (a2 * x).sum(axis=1).astype(np.int32))
    assert r.cycles == r.predicted_cycles


def test_an_array_valued_body_and_a_schedule_error_name_the_rule():
    @hw.kernel(tile={"@0": 2})
    def rows(x: hw.Array[int32, 8], y: hw.Array[int32, 4]):
        return hw.map(8, lambda i: x[i] + y)  # its body's axis is '@0'

    assert set(rows.program.extents) == {"i", "@0"}
    with pytest.raises(hw.ScheduleError, match="loops without a lambda are named by rule"):
        mm.with_schedule(tile={"k": 4})


def test_a_user_index_whose_verilog_name_clashes_with_a_rule_name_is_refused():
    @hw.kernel(tile={"op_k": 2, "@k": 4})
    def k(a: hw.Array[int32, 4, 8], b: hw.Array[int32, 8, 4]):
        return hw.map(4, lambda op_k: a[op_k] @ b)

    with pytest.raises(hw.UnsupportedError, match="give the same Verilog name"):
        k.elaborate()
