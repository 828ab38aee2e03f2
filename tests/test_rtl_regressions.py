"""Programs the hardware once got wrong, through Verilator: bit-exact with the golden model."""

import numpy as np
import pytest
from test_lower import mlp, mlp_args, mlp_numpy, order_kernels

import hwgen as hw

pytestmark = pytest.mark.rtl


@pytest.mark.parametrize(
    "schedule",
    [
        dict(metapipeline=False),  # the untiled baseline
        dict(tile={"n": 4, "o": 4, "i": 4}, par={"i": 2}),
        dict(tile={"n": 8, "o": 8, "i": 8}, par={"o": 2, "i": 4}, metapipeline=True),
    ],
)
def test_helper_called_twice_in_verilator(schedule):
    kernel = mlp(3).with_schedule(**schedule)  # layers 1 and 2 stored on chip, read by the next
    x, w = mlp_args(3)
    r = kernel.verify(x, w)
    np.testing.assert_array_equal(r.outputs, mlp_numpy(x, w))
    assert r.cycles == r.predicted_cycles


@pytest.mark.parametrize("k", range(4))
def test_index_order_patterns_in_verilator(k):
    kernel, args = order_kernels()[k]
    with pytest.raises(hw.ScheduleError):  # once wrong hardware: the domain visited tile by tile
        kernel.with_schedule(tile={"i": 4, "j": 2}).verify(*args)
    r = kernel.with_schedule(tile={"i": 4, "j": 6}).verify(*args)  # the inner index whole: index order
    for g, w in zip(r.outputs, kernel(*args)):
        np.testing.assert_array_equal(g, w)


def test_helper_over_two_extents_in_verilator():
    from test_lower import two_sizes_kernel

    kernel, args, want = two_sizes_kernel()
    np.testing.assert_array_equal(kernel.with_schedule(tile={"i": 2, "r": 4}).verify(*args).outputs, want)


def test_par_without_a_tile_in_verilator():
    @hw.kernel(par={"i": 4})  # no tile for 'i': tiles of 4, the smallest its lanes need
    def row_max(x: hw.Array[hw.int32, 8, 12]) -> hw.Array[hw.int32, 8]:
        return hw.map(8, lambda r: hw.max(12, lambda i: x[r, i]))

    x = np.random.default_rng(3).integers(-1000, 1000, (8, 12)).astype(np.int32)
    r = row_max.verify(x)
    np.testing.assert_array_equal(r.outputs, x.max(axis=1))
    assert r.cycles == r.predicted_cycles


def test_bool_matmul_in_verilator():
    @hw.kernel(metapipeline=False)  # fuzzer finding F2: the hardware once summed the products modulo 2
    def both(a0: hw.Array[hw.bool_, 2, 3], a1: hw.Array[hw.bool_, 3, 2]):
        return a0 @ a1

    a0 = np.array([[1, 1, 0], [1, 0, 0]], dtype=bool)
    a1 = np.array([[1, 0], [1, 1], [0, 0]], dtype=bool)
    np.testing.assert_array_equal(both(a0, a1), a0 @ a1)
    np.testing.assert_array_equal(both.verify(a0, a1).outputs, a0 @ a1)
