"""Sum of each row of an R x C matrix."""

import numpy as np

import hwgen as hw
from hwgen import int32

R, C = 256, 96


@hw.kernel(tile={"i": 16, "j": 96}, par={"j": 16})
def sumrows(x: hw.Array[int32, R, C]) -> hw.Array[int32, R]:
    return hw.map(R, lambda i: hw.sum(C, lambda j: x[i, j]))


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-(2**20), 2**20, (R, C), dtype=np.int32),)


def reference(x):
    """Plain numpy: row sums accumulated in int32."""
    return x.sum(axis=1, dtype=np.int32)
