"""Spatial partitioning with halo exchange (the TPU-pod MLPerf paper's spatial partitioning of
images over cores): a 5-point stencil over a grid split in blocks over a 2-D torus.

    out[i, j] = 4 a[i, j] - a[i-1, j] - a[i+1, j] - a[i, j-1] - a[i, j+1]   (zero outside the grid)

Each PE holds a block of the grid. It needs one row or column beyond each edge of its block
(its halo), which its neighbours hold: four `hw.ppermute`s along the mesh's axes bring them.
The PEs on the grid's edge receive zeros from nobody (a partial permutation), which is the
zero boundary. The body pads its block with the halos (`hw.concatenate`, stored in the PE's
DRAM) and computes the stencil over the padded block. A column edge is sent as a row
(`.T`): the copy that gathers it and the one that stores the received halo into the padded
block then each move one side a word a DRAM beat and the other whole beats. The exchange
(edges copied out, four permutes one after another on the collective unit, received edges
stored) runs beside the copy of the block into the padded one (passes/overlap.py).

`build(px, py, n)` makes the kernel for a px x py torus and an n x n grid (px = py = 1: one PE,
the halos all zeros, no link); benchmarks/stencil.py measures 1, 4 and 16 PEs.
"""

import numpy as np

import hwgen as hw
from hwgen import int32

PX, PY, N = 2, 2, 64  # the torus, and the grid's side


def build(px, py, n, rows=8, lanes=4, link=hw.LinkConfig(latency=4)):
    """The stencil of an n x n int32 grid on a px x py torus, tiled by `rows` rows of a whole
    block row, with `lanes` lanes along it."""
    mesh = hw.Mesh((px, py), ("x", "y"))
    bn, bm = n // px, n // py  # a block's rows and columns

    def halo(edge, axis, p, down):
        """The neighbour's edge along `axis` (from the PE before it if `down`, else after it);
        zeros on the grid's edge."""
        if p == 1:
            return hw.zeros(edge.shape, int32)
        pairs = [(k, k + 1) for k in range(p - 1)] if down else [(k + 1, k) for k in range(p - 1)]
        return hw.ppermute(edge, axis, pairs)

    def body(block):
        above = halo(block[bn - 1 : bn, :], "x", px, down=True)
        below = halo(block[0:1, :], "x", px, down=False)
        left = halo(block[:, bm - 1 : bm].T, "y", py, down=True).T
        right = halo(block[:, 0:1].T, "y", py, down=False).T
        corner = hw.zeros((1, 1), int32)  # a 5-point stencil never reads the corners
        padded = hw.concatenate(
            [
                hw.concatenate([corner, above, corner], axis=1),
                hw.concatenate([left, block, right], axis=1),
                hw.concatenate([corner, below, corner], axis=1),
            ]
        )
        return hw.map(
            (bn, bm),
            lambda i, j: (
                4 * padded[i + 1, j + 1]
                - padded[i, j + 1]
                - padded[i + 2, j + 1]
                - padded[i + 1, j]
                - padded[i + 1, j + 2]
            ),
        )

    @hw.kernel(mesh=mesh, link=link, tile={"i": rows, "j": bm}, par={"j": lanes})
    def halo_stencil(a: hw.Array[int32, n, n]):
        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x", "y"), out_specs=hw.P("x", "y"))(a)

    return halo_stencil


halo_stencil = build(PX, PY, N)


def inputs(seed=0, n=N):
    rng = np.random.default_rng(seed)
    return (rng.integers(-(2**20), 2**20, (n, n)).astype(np.int32),)


def reference(a):
    """Plain numpy: the grid padded with zeros, in int64 (no sum here leaves int32)."""
    p = np.pad(a.astype(np.int64), 1)
    return (4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]).astype(np.int32)
