"""Regressions from the reliability issue, front end: one-column group-by values keep their
axis, comparisons of index values are Python bools, sliding windows, Python ints beyond int64
next to index values, 64-bit fixed-point products, and numpy's array methods."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int8, int32

# ------------------------------------------------------------- one-column group-by values


@hw.kernel
def group_one_column(k: hw.Array[int32, 16], v: hw.Array[int32, 16, 1]):
    return hw.groupby_fold(16, lambda i: (k[i], v[i, :]), max_keys=8)


@hw.kernel
def group_one_tuple(k: hw.Array[int32, 16], v: hw.Array[int32, 16]):
    return hw.groupby_fold(16, lambda g: (k[g], (v[g],)), max_keys=8)


@hw.kernel
def group_scalar(k: hw.Array[int32, 16], v: hw.Array[int32, 16]):
    return hw.groupby_fold(16, lambda s: (k[s], v[s]), max_keys=8)


def group_reference(k, v, columns):
    order = list(dict.fromkeys(int(x) for x in k))
    keys = np.zeros(8, np.int32)
    values = np.zeros((8, columns), np.int32)
    for slot, key in enumerate(order):
        keys[slot] = key
        values[slot] = v[k == key].reshape(-1, columns).sum(axis=0)
    return keys, values, len(order)


def group_inputs():
    rng = np.random.default_rng(3)
    return rng.integers(0, 5, 16, dtype=np.int32) * 3 - 4, rng.integers(-50, 50, 16, dtype=np.int32)


def test_one_column_group_values_keep_their_axis():
    k, v = group_inputs()
    want_keys, want_values, want_count = group_reference(k, v, 1)
    for kernel, arg in ((group_one_column, v.reshape(16, 1)), (group_one_tuple, v)):
        keys, values, count = kernel(k, arg)
        assert values.shape == (8, 1) and values.dtype == np.int32
        np.testing.assert_array_equal(keys, want_keys)
        np.testing.assert_array_equal(values, want_values)
        assert count == want_count
    keys, values, count = group_scalar(k, v)
    assert values.shape == (8,)  # a scalar value gives a 1-D values array, as before
    np.testing.assert_array_equal(values, want_values[:, 0])
    assert [p.shape for p in group_one_column.results] == [(8,), (8, 1), ()]


@pytest.mark.rtl
def test_one_column_group_values_in_hardware():
    k, v = group_inputs()
    r = group_one_column.with_schedule(tile={"i": 8}).verify(k, v.reshape(16, 1))
    assert r.outputs[1].shape == (8, 1)
