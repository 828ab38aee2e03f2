"""Matrix multiply C = A B (int32): the paper's headline. Tiling turns it into a MultiFold
over k-tiles: each C tile accumulates on chip while A and B tiles stream in, metapipelined."""

import numpy as np

import hwgen as hw
from hwgen import int32

M, K, N = 128, 128, 128


@hw.kernel(tile={"i": 64, "j": 64, "k": 64}, par={"j": 16})
def gemm(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]) -> hw.Array[int32, M, N]:
    return hw.map((M, N), lambda i, j: hw.sum(K, lambda k: a[i, k] * b[k, j]))


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-1000, 1000, (M, K), dtype=np.int32), rng.integers(-1000, 1000, (K, N), dtype=np.int32))


def reference(a, b):
    """Plain numpy: exact products summed in int64, wrapped to int32."""
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
