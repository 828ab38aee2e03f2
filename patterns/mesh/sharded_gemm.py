"""A matmul written for whole arrays, placed on a 2x2 torus by shardings and partitioned by
hwgen (GSPMD-style). The contracted dimension is split over both axes, so each PE multiplies
its slice of a's columns by its slice of b's rows, and the partial products are summed and
scattered: PE (x, y) keeps row block 2y + x of c (out_shardings P(("y", "x")) ).

`rows_by_columns` places a's rows over x and b's columns over y: every PE computes its block
of c alone, with no communication. Both give a @ b.
"""

import numpy as np

import hwgen as hw
from hwgen import int32

M, K, N = 64, 64, 64
mesh = hw.Mesh((2, 2), ("x", "y"), topology="torus")
schedule = {"tile": {"@i": 16, "@j": 16, "@k": 16}, "par": {"@j": 4}}


@hw.kernel(
    mesh=mesh,
    in_shardings=(hw.P(None, ("x", "y")), hw.P(("x", "y"), None)),
    out_shardings=hw.P(("y", "x"), None),
    link=hw.LinkConfig(latency=4),
    **schedule,
)
def sharded_gemm(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
    return a @ b


@hw.kernel(mesh=mesh, in_shardings=(hw.P("x", None), hw.P(None, "y")), out_shardings=hw.P("x", "y"), **schedule)
def rows_by_columns(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
    return a @ b


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(-1000, 1000, (M, K)).astype(np.int32),
        rng.integers(-1000, 1000, (K, N)).astype(np.int32),
    )


def reference(a, b):
    """Plain numpy, in int64 (no product or sum here leaves int32)."""
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
