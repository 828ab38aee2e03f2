"""The pipelined divider in Verilator against numpy's floor division and remainder: negative
operands on either side, exact and inexact quotients, a zero divisor (0 for both), the dtype's
extremes (INT_MIN // -1 among them), and the cycle model's count of its stages."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int16, int32

N = 64


@hw.kernel(tile={"i": 32, "j": 32})
def divide(x: hw.Array[int32, N], y: hw.Array[int16, N]) -> tuple[hw.Array[int32, N], hw.Array[int32, N]]:
    return hw.map(N, lambda i: x[i] // y[i]), hw.map(N, lambda j: x[j] % y[j])


@pytest.mark.rtl
def test_floor_division_and_remainder_match_numpy():
    rng = np.random.default_rng(5)
    x = rng.integers(-1000, 1000, N).astype(np.int32)
    y = rng.integers(-40, 40, N).astype(np.int16)
    x[:8] = [2**31 - 1, -(2**31), 12, -12, 0, -(2**31), -(2**31), -(2**31)]
    y[:8] = [7, -3, 0, 4, 0, -1, 1, -(2**15)]  # INT_MIN // -1 wraps to INT_MIN, as in numpy
    r = divide.verify(x, y)
    q, m = r.outputs
    with np.errstate(divide="ignore"):
        want_q = np.where(y == 0, 0, np.floor_divide(x.astype(np.int64), np.where(y == 0, 1, y)))
        want_m = np.where(y == 0, 0, np.remainder(x.astype(np.int64), np.where(y == 0, 1, y)))
    np.testing.assert_array_equal(q, want_q.astype(np.int32))
    np.testing.assert_array_equal(m, want_m.astype(np.int32))
    assert r.cycles == r.predicted_cycles
