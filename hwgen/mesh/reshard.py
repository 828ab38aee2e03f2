"""Resharding: moving an array split one way (a spec: per dimension, the mesh axes that split
it) to the split a read or a result needs, as GSPMD does. partition.py uses these:

- `moved` / `all_to_all`: the axes splitting one dimension move to another, unsplit one;
- `swapped` / `permute`: one or more dimensions split by other axes into as many blocks each,
  by a permute;
- `sliced`: a split of dimension 0 that the array lacks, read in place (slices.local_slice);
- `regrouped`: dimension 0 split by other axes into another number of blocks: gathered whole
  along it, then each PE's rows read in place (a local slice of the gathered array);
- `plain`: a spec without axes of one PE, which split nothing.
"""

from __future__ import annotations

import math

from .. import ir


def size(axes: tuple, mesh) -> int:
    """The PEs of a group over `axes`."""
    return math.prod(mesh.shape[a] for a in axes)


def moved(spec: tuple, want: tuple, shape: tuple, mesh) -> bool:
    """Whether an array of `shape` (whole, or its block on each PE: the same along the
    dimension that moves) split by `spec` becomes split by `want` by one all-to-all: `want`
    splits another dimension e by the axes `spec` splits dimension d by, and the two agree
    elsewhere (along d over A, wanted along e over A: all_to_all(A, split=e, concat=d))."""
    diff = [d for d, (s, o) in enumerate(zip(spec, want)) if s != o]
    if len(diff) != 2:
        return False
    d, e = diff if spec[diff[0]] else diff[::-1]
    if not spec[d] or spec[e] or want[d] or want[e] != spec[d]:
        return False
    return shape[e] % size(spec[d], mesh) == 0


def all_to_all(node, spec: tuple, want: tuple, mesh, loc) -> tuple:
    """(node, spec) moved to `want` by an all-to-all (the form of _moved)."""
    diff = [d for d, (s, o) in enumerate(zip(spec, want)) if s != o]
    d, e = diff if spec[diff[0]] else diff[::-1]
    axes = spec[d]
    shape = list(node.shape)
    shape[e] //= size(axes, mesh)
    shape[d] *= size(axes, mesh)
    params = (("concat", d), ("split", e), ("tiled", True))
    return ir.Collective("all_to_all", axes, params, node, tuple(shape), loc=loc), tuple(want)


def plain(spec: tuple, mesh) -> tuple:
    """`spec` without the axes of one PE (they split nothing)."""
    return tuple(tuple(a for a in axes if mesh.shape[a] > 1) for axes in spec)


def sliced(spec: tuple, want: tuple) -> bool:
    """Whether an array split by `spec` is read as `want` by taking each PE's rows of its
    block (slices.local_slice): `want` splits dimension 0, which `spec` does not, and
    splits the others as `spec` does (a slice is only read: never gathered or moved)."""
    return not spec[0] and bool(want[0]) and tuple(spec[1:]) == tuple(want[1:])


def regrouped(spec: tuple, want: tuple, mesh) -> bool:
    """Whether `want` splits dimension 0 by other axes than `spec` into another number of
    blocks and agrees elsewhere: an all-gather along dimension 0 over `spec`'s axes, then
    each PE's rows of the gathered array (GSPMD's all-gather and dynamic slice); or, where
    `want`'s axes extend `spec`'s (rows over x read over (x, y)), each PE's rows of its own
    block."""
    a, b = spec[0], want[0]
    return bool(a and b) and size(a, mesh) != size(b, mesh) and tuple(spec[1:]) == tuple(want[1:])


def swapped(spec: tuple, want: tuple, mesh) -> bool:
    """Whether `want` splits one or more dimensions by other axes A' than the axes A `spec`
    splits them by, each into as many blocks, and agrees elsewhere, where no axis of A or A'
    splits anything (a P('x', 'y') wanted as P('y', 'x') on a square mesh): each PE then holds
    a block another PE needs, and one permute moves them (permute)."""
    diff = [d for d, (s, o) in enumerate(zip(spec, want)) if s != o]
    if not diff:
        return False
    moving = {x for d in diff for x in spec[d] + want[d]}
    others = {x for k, axes in enumerate(spec) if k not in diff for x in axes}
    same = all(spec[d] and want[d] and size(spec[d], mesh) == size(want[d], mesh) for d in diff)
    return same and not others & moving


def permute(node, spec: tuple, want: tuple, mesh, loc) -> tuple:
    """(node, spec) moved to `want` by a permute (the form of swapped) over the axes G of
    both splits: along each dimension d that changes, PE c needs the block numbered by its
    coordinates along A'_d (row-major), which every PE whose coordinates along A_d number it
    holds; it takes its block from the one PE that holds it along every such d and whose
    coordinates along G outside every A_d number what c's along G outside every A'_d do, so
    every PE sends one block and receives one. Axes of one PE split nothing and are left out
    (a permute runs over axes of at least 2 PEs); when nothing is left to move, `node` is
    returned as it is."""
    sizes, wanted = mesh.shape, tuple(want)
    spec, want = plain(spec, mesh), plain(want, mesh)
    diff = [d for d, (s, o) in enumerate(zip(spec, want)) if s != o]
    if not diff:
        return node, wanted
    a = [x for d in diff for x in spec[d]]
    b = [x for d in diff for x in want[d]]
    group = tuple(x for x in mesh.axis_names if x in a or x in b)
    rest_a = tuple(x for x in group if x not in a)
    rest_b = tuple(x for x in group if x not in b)

    def number(coords: dict, axes: tuple) -> int:
        n = 0
        for x in axes:
            n = n * sizes[x] + coords[x]
        return n

    def place(n: int, axes: tuple) -> dict:
        out = {}
        for x in reversed(axes):
            n, out[x] = divmod(n, sizes[x])
        return out

    perm = []
    for dst in range(size(group, mesh)):
        c = place(dst, group)
        src = place(number(c, rest_b), rest_a)
        for d in diff:
            src.update(place(number(c, want[d]), spec[d]))
        perm.append((number(src, group), dst))
    node = ir.Collective("ppermute", group, (("perm", tuple(sorted(perm))),), node, node.shape, loc=loc)
    return node, wanted
