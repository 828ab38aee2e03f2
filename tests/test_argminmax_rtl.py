"""argmin and argmax in Verilator: the running minimum or maximum of a packed key is compared at
the width of the keys (pipe.PipeUnit._bounded: only its own update writes it), so negative
values, ties (the first index wins) and extreme values of the dtype must all come out right,
and a second run without a reset must not see the first run's keys."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32, uint16

R, C = 16, 12


@hw.kernel(tile={"i": 8, "r": 8})
def extremes(x: hw.Array[int16, R, C]) -> tuple[hw.Array[int32, R], hw.Array[int32, R]]:
    lo = hw.map(R, lambda i: hw.argmin(hw.map(C, lambda j: x[i, j])).astype(int32))
    hi = hw.map(R, lambda r: hw.argmax(hw.map(C, lambda c: x[r, c])).astype(int32))
    return lo, hi


@pytest.mark.rtl
def test_argmin_and_argmax_with_ties_and_dtype_extremes():
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, (R, C)).astype(np.int16)  # many ties
    x[0, :] = -(2**15)
    x[1, 5] = 2**15 - 1
    x[2, 7] = -(2**15)
    x[3, :] = 2**15 - 1
    r = extremes.verify(x, runs=2)
    lo, hi = r.outputs
    np.testing.assert_array_equal(lo, np.argmin(x, axis=1))
    np.testing.assert_array_equal(hi, np.argmax(x, axis=1))
    assert r.cycles == r.predicted_cycles


@hw.kernel(tile={"i": 8, "r": 8, "j": 12, "c": 12}, par={"j": 4, "c": 4})
def lane_extremes(x: hw.Array[uint16, R, C]) -> tuple[hw.Array[uint16, R], hw.Array[int32, R]]:
    lo = hw.map(R, lambda i: hw.min(C, lambda j: x[i, j] >> 4))  # 12-bit values
    hi = hw.map(R, lambda r: hw.argmax(hw.map(C, lambda c: x[r, c])).astype(int32))
    return lo, hi


@pytest.mark.rtl
def test_narrowed_min_and_argmax_over_lanes_of_unsigned_values():
    """Four lanes combined by a tree before the narrowed update (12-bit values for the min,
    20-bit keys for the argmax), on uint16 values whose top bit is set: a signed compare at
    the narrowed width would get them wrong (checked by making it one)."""
    rng = np.random.default_rng(4)
    x = rng.integers(2**15 - 3, 2**15 + 3, (R, C)).astype(np.uint16)  # ties around the top bit
    x[0, :] = 2**16 - 1
    x[1, 9] = 0
    x[2, :] = 0
    r = lane_extremes.verify(x, runs=2)
    lo, hi = r.outputs
    np.testing.assert_array_equal(lo, (x >> 4).min(axis=1))
    np.testing.assert_array_equal(hi, np.argmax(x, axis=1))
    assert r.cycles == r.predicted_cycles
