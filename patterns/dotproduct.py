"""Dot product: sum(a[i] * b[i]), the streaming reduction of Spatial's suite."""

import numpy as np

import hwgen as hw
from hwgen import int32

N = 16384


@hw.kernel(tile={"i": 1024}, par={"i": 8})
def dotproduct(a: hw.Array[int32, N], b: hw.Array[int32, N]) -> int32:
    return hw.sum(N, lambda i: a[i] * b[i])


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, N, dtype=np.int32)
    b = rng.integers(-1000, 1000, N, dtype=np.int32)
    return a, b


def reference(a, b):
    """Plain numpy, written independently of hwgen: int32 products, int32 wrap-around sum."""
    total = int(np.sum(a.astype(np.int64) * b.astype(np.int64)))
    return np.int64(total).astype(np.int32)
