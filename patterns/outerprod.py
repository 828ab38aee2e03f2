"""Outer product: out[i, j] = a[i] * b[j]."""

import numpy as np

import hwgen as hw
from hwgen import int32

M, N = 256, 64


@hw.kernel(tile={"i": 16, "j": 64}, par={"j": 16})
def outerprod(a: hw.Array[int32, M], b: hw.Array[int32, N]) -> hw.Array[int32, M, N]:
    return hw.map((M, N), lambda i, j: a[i] * b[j])


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-5000, 5000, M, dtype=np.int32), rng.integers(-5000, 5000, N, dtype=np.int32)


def reference(a, b):
    """Plain numpy outer product in int32."""
    return np.outer(a, b).astype(np.int32)
