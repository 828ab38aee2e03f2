"""Reduce-scatter over both axes of a 2x2 torus: hw.psum_scatter(tiled=True) sums the four
PEs' vectors and leaves PE (i, j) its block 2i + j of the sum (the first half of a sharded
weight update: each PE then owns one shard of the summed gradient)."""

import numpy as np

import hwgen as hw
from hwgen import int32

N = 512  # words per PE before the scatter
mesh = hw.Mesh((2, 2), ("x", "y"), topology="torus")


@hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=4), tile={"i": 128})
def reduce_scatter(g: hw.Array[int32, 4 * N]):
    def body(local):
        return hw.psum_scatter(hw.map(N, lambda i: local[i] - 5), ("x", "y"), tiled=True)

    return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=hw.P(("x", "y")))(g)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-(2**31), 2**31, 4 * N, dtype=np.int64).astype(np.int32),)


def reference(g):
    """Plain numpy: the four PEs' vectors (row-major PE order) minus 5, summed; PE k keeps
    the k-th quarter, and the global result is the quarters in PE order: the whole sum."""
    total = (g.astype(np.int64).reshape(4, N) - 5).sum(axis=0)
    return total.astype(np.int32)
