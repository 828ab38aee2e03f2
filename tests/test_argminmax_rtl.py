"""argmin and argmax in Verilator: the running minimum or maximum of a packed key is compared at
the width of the keys (pipe.PipeUnit._bounded: only its own update writes it), so negative
values, ties (the first index wins) and extreme values of the dtype must all come out right,
and a second run without a reset must not see the first run's keys."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32

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
