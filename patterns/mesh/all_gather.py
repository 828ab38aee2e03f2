"""All-gather on a ring of 4 PEs: each PE squares its block, and hw.all_gather (tiled) gives
every PE the four blocks in PE order (gathering a sharded activation before a matmul)."""

import numpy as np

import hwgen as hw
from hwgen import int32

P, N = 4, 256  # PEs, words per PE
mesh = hw.Mesh((P,), ("x",), topology="ring")


@hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile={"i": 64})
def all_gather(a: hw.Array[int32, P * N]):
    def body(local):
        return hw.all_gather(hw.map(N, lambda i: local[i] * local[i]), "x", tiled=True)

    return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P())(a)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-50000, 50000, P * N, dtype=np.int32),)


def reference(a):
    """Plain numpy: every element squared, wrapping in int32, in its original place."""
    return (a.astype(np.int64) ** 2).astype(np.int32)
