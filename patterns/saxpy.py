"""SAXPY on integers: y' = a * x + y, with the scalar a as a port."""

import numpy as np

import hwgen as hw
from hwgen import int32

N = 16384


@hw.kernel(tile={"i": 1024}, par={"i": 8})
def saxpy(a: int32, x: hw.Array[int32, N], y: hw.Array[int32, N]) -> hw.Array[int32, N]:
    return hw.map(N, lambda i: a * x[i] + y[i])


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = np.int32(rng.integers(-100, 100))
    x = rng.integers(-(2**20), 2**20, N, dtype=np.int32)
    y = rng.integers(-(2**20), 2**20, N, dtype=np.int32)
    return a, x, y


def reference(a, x, y):
    """Plain numpy: int32 multiply-add."""
    return (a * x + y).astype(np.int32)
