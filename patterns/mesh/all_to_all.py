"""All-to-all on a ring of 4 PEs: a distributed transpose. PE i holds row-block i of a 4x4
grid of blocks; hw.all_to_all sends its block j to PE j, which keeps it as its block i, so
PE j ends with column-block j (the exchange of expert or sequence parallelism)."""

import numpy as np

import hwgen as hw
from hwgen import int32

P, B = 4, 32  # PEs, words per block (each PE holds P blocks)
mesh = hw.Mesh((P,), ("x",), topology="ring")


@hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8), tile={"i": 128})
def all_to_all(a: hw.Array[int32, P * P * B]):
    def body(local):
        return hw.all_to_all(hw.map(P * B, lambda i: local[i] ^ 0x55), "x", 0, 0, tiled=True)

    return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-(2**31), 2**31, P * P * B, dtype=np.int64).astype(np.int32),)


def reference(a):
    """Plain numpy: the (PE, block, word) grid xor 0x55, its two block axes swapped."""
    grid = (a ^ 0x55).reshape(P, P, B)
    return grid.transpose(1, 0, 2).reshape(-1)
