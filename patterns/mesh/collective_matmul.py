"""Collective matmul (Wang et al., ASPLOS'23; XLA's windowed einsum): an all-gather followed
by a matmul, decomposed into ring steps so that the communication hides behind the compute.

`a` is split by rows over a ring of 4 PEs and `b` by columns; every PE computes all rows of
its columns of `a @ b`. `gathered` all-gathers `a` first, then multiplies. `collective_matmul`
multiplies the block of `a` it holds while passing that block on to the previous PE
(`hw.ppermute`), p times: each step's permute runs beside that step's partial matmul, on the
PE's collective channel. Step s holds the rows of block (x + s) mod p, so the partial products
come out rotated by the PE's coordinate x; `hw.roll` by x blocks puts them in their rows (the
hardware stores each part straight into its place: no data moves for the roll).

Both give `a @ b`; `hwgen sim patterns/mesh/collective_matmul.py --kernel gathered` shows the
difference in cycles.
"""

import numpy as np

import hwgen as hw
from hwgen import int32

P, M, K, N = 4, 16, 64, 16  # PEs; each PE's rows of a, the contraction, each PE's columns of b
SCHEDULE = {"tile": {"@i": 16, "@j": 16, "@k": 16}, "par": {"@j": 16}}


def build(p, m, k, n, link=hw.LinkConfig(latency=4), **schedule):
    """(collective_matmul, gathered) on a ring of p PEs: a (p*m, k) by rows, b (k, p*n) by
    columns (benchmarks/collective_matmul.py builds other sizes)."""
    mesh = hw.Mesh((p,), ("x",), topology="ring")
    specs = {"mesh": mesh, "in_specs": (hw.P("x", None), hw.P(None, "x")), "out_specs": hw.P(None, "x")}
    to_previous = [(j, (j - 1) % p) for j in range(p)]  # each PE sends its block to the previous one

    @hw.kernel(mesh=mesh, link=link, **schedule)
    def collective_matmul(a: hw.Array[int32, p * m, k], b: hw.Array[int32, k, p * n]):
        def body(al, bl):
            chunk, parts = al, []
            for s in range(p):
                parts.append(chunk @ bl)  # the rows of block (x + s) mod p
                if s + 1 < p:
                    chunk = hw.ppermute(chunk, "x", to_previous)  # runs beside the matmul above
            return hw.roll(hw.concatenate(parts), hw.axis_index("x") * m, axis=0)

        return hw.shard_map(body, **specs)(a, b)

    @hw.kernel(mesh=mesh, link=link, **schedule)
    def gathered(a: hw.Array[int32, p * m, k], b: hw.Array[int32, k, p * n]):
        def body(al, bl):
            return hw.all_gather(al, "x", tiled=True) @ bl

        return hw.shard_map(body, **specs)(a, b)

    return collective_matmul, gathered


collective_matmul, gathered = build(P, M, K, N, **SCHEDULE)
TO_PREVIOUS = [(j, (j - 1) % P) for j in range(P)]


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(-1000, 1000, (P * M, K)).astype(np.int32),
        rng.integers(-1000, 1000, (K, P * N)).astype(np.int32),
    )


def reference(a, b):
    """Plain numpy, in int64 (no product or sum here leaves int32)."""
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
