"""A permutation on a ring of 8 PEs: hw.ppermute sends PE i's block to PE 7 - i (a reversal,
four distances at once: the hardware runs one phase per distance), and PE 3's to nobody, so
PE 4 receives zeros."""

import numpy as np

import hwgen as hw
from hwgen import int32

P, N = 8, 64  # PEs, words per PE
PERM = [(i, P - 1 - i) for i in range(P) if i != 3]
mesh = hw.Mesh((P,), ("x",), topology="ring")


@hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=2), tile={"i": 64})
def ppermute(a: hw.Array[int32, P * N]):
    def body(local):
        return hw.ppermute(hw.map(N, lambda i: local[i] + 100), "x", PERM)

    return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-(2**31), 2**31, P * N, dtype=np.int64).astype(np.int32),)


def reference(a):
    """Plain numpy: blocks plus 100 (wrapping), in reverse block order, block 4 zero."""
    blocks = (a.astype(np.int64) + 100).astype(np.int32).reshape(P, N)
    out = blocks[::-1].copy()
    out[P - 1 - 3] = 0
    return out.reshape(-1)
