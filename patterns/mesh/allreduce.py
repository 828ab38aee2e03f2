"""All-reduce on a ring of 4 PEs: each PE scales its block of a vector, and hw.psum adds the
four blocks elementwise; every PE ends with the sum (data parallelism's gradient sum)."""

import numpy as np

import hwgen as hw
from hwgen import int32

P, N = 4, 1024  # PEs, words per PE
mesh = hw.Mesh((P,), ("x",), topology="ring")


@hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile={"i": 256})
def allreduce(g: hw.Array[int32, P * N]):
    def body(local):
        return hw.psum(hw.map(N, lambda i: local[i] * 3 + 1), "x")

    return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P())(g)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-(2**31), 2**31, P * N, dtype=np.int64).astype(np.int32),)


def reference(g):
    """Plain numpy: each PE's block times 3 plus 1, summed over the PEs, wrapping in int32."""
    blocks = g.astype(np.int64).reshape(P, N) * 3 + 1
    return blocks.sum(axis=0).astype(np.int32)
