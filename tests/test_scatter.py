"""Scatter-add: a multifold whose target subscript comes from data (numpy's `np.add.at`).

An in-range subscript folds like numpy under every schedule, in the golden model, the loop IR
and Verilator. One outside the accumulator is numpy's IndexError: the golden model raises
hw.IndexRangeError naming the subscript, its value and where; the loop IR and the hardware
drop the write and raise a flag, which simulation reports with the golden model's message.
"""

import numpy as np
import pytest
from markers import check_error

import hwgen as hw
from hwgen import int32, uint8
from hwgen.build import loop_program
from hwgen.loop_interp import run as run_loops
from hwgen.simulate import simulate

N, K = 32, 8


@hw.kernel
def scatter_add(x: hw.Array[int32, N], idx: hw.Array[int32, N]):
    return hw.multifold(N, hw.zeros(K, int32), lambda i: (idx[i], x[i]))  # L:scatter


@hw.kernel
def scatter_max(x: hw.Array[int32, N], idx: hw.Array[uint8, N]):
    return hw.multifold(N, hw.full(K, -(2**31), int32), lambda i: (idx[i], x[i]), "max")


@hw.kernel
def scatter_2d(x: hw.Array[int32, N], r: hw.Array[int32, N], c: hw.Array[int32, N]):
    return hw.multifold(N, hw.zeros((4, 4), int32), lambda i: ((r[i], c[i] - 1), x[i]))  # L:scatter2


def data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-100, 100, N, dtype=np.int32), rng.integers(0, K, N, dtype=np.int32)


def add_at(x, idx):
    acc = np.zeros(K, np.int32)
    np.add.at(acc, idx, x)
    return acc


SCHEDULES = [{}, {"tile": {"i": 8}}, {"tile": {"i": 16}, "metapipeline": True}]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_in_range_folds_like_numpy_in_the_golden_model_and_the_loop_ir(schedule):
    x, idx = data()
    k = scatter_add.with_schedule(**schedule)
    np.testing.assert_array_equal(k(x, idx), add_at(x, idx))
    got = run_loops(loop_program(k), {"x": x, "idx": idx})
    np.testing.assert_array_equal(next(iter(got.values())), add_at(x, idx))
    want = np.full(K, -(2**31), np.int32)
    np.maximum.at(want, idx, x)
    np.testing.assert_array_equal(scatter_max(x, idx.astype(np.uint8)), want)


@pytest.mark.parametrize("bad", [K, -1, 1000])
def test_out_of_range_is_an_index_error_naming_value_and_position(bad):
    x, idx = data()
    idx[13] = bad
    with pytest.raises(hw.IndexRangeError) as e:
        scatter_add(x, idx)
    message = (
        f"hw.multifold: subscript 0 of `where` is {bad} at i=13, outside the accumulator's axis of {K} "
        f"(valid 0 .. {K - 1}); keep the data in range, or clamp it with hw.minimum / hw.maximum"
    )
    check_error(e.value, hw.IndexRangeError, message, __file__, "scatter")
    with pytest.raises(hw.IndexRangeError, match="left the accumulator of shape"):
        run_loops(loop_program(scatter_add.with_schedule(tile={"i": 8})), {"x": x, "idx": idx})


def test_two_subscripts_from_data():
    x, r = data(1)
    r = r % 4
    c = (x % 4 + 4) % 4 + 1
    acc = np.zeros((4, 4), np.int32)
    np.add.at(acc, (r, c - 1), x)
    np.testing.assert_array_equal(scatter_2d(x, r, c), acc)
    c[20] = 0  # its subscript c - 1 is -1
    with pytest.raises(hw.IndexRangeError) as e:
        scatter_2d(x, r, c)
    message = (
        "hw.multifold: subscript 1 of `where` is -1 at i=20, outside the accumulator's axis of 4 "
        "(valid 0 .. 3); keep the data in range, or clamp it with hw.minimum / hw.maximum"
    )
    check_error(e.value, hw.IndexRangeError, message, __file__, "scatter2")


def test_a_subscript_of_indices_alone_is_still_checked_when_traced():
    with pytest.raises(hw.TraceError, match=r"takes values in \[0, 31\], outside the accumulator's axis of 8"):

        @hw.kernel
        def bad(x: hw.Array[int32, N]):
            return hw.multifold(N, hw.zeros(K, int32), lambda i: (i, x[i]))


def test_the_hardware_has_a_flag_per_checked_accumulator():
    from hwgen.build import elaborate

    design = elaborate(scatter_add)
    (flag,) = design.flags
    assert flag.startswith("range_") and f"output {flag}" in design.verilog
    assert elaborate(scatter_max).flags == [flag]  # uint8 subscripts may still leave 8 elements

    @hw.kernel
    def masked(x: hw.Array[int32, N], idx: hw.Array[int32, N]):
        return hw.multifold(N, hw.zeros(K, int32), lambda i: (idx[i] & (K - 1), x[i]))

    assert elaborate(masked).flags == []  # provably in range: nothing to check


@pytest.mark.rtl
@pytest.mark.parametrize("schedule", SCHEDULES[:2])
def test_in_verilator_in_range_and_out_of_range(schedule):
    x, idx = data(2)
    k = scatter_add.with_schedule(**schedule)
    r = k.verify(x, idx, runs=2)
    np.testing.assert_array_equal(r.outputs, add_at(x, idx))
    assert r.cycles == r.predicted_cycles
    idx[29] = K + 3
    with pytest.raises(hw.IndexRangeError, match=f"is {K + 3} at i=29, outside the accumulator's axis of {K}"):
        simulate(k, (x, idx))  # the hardware's flag, reported with the golden model's message
