"""Collective matmul for partitioned programs: an all-gather feeding a contraction, rewritten
into ring steps (Wang et al., ASPLOS'23; XLA's windowed einsum).

The partitioner (partition.py) gives a result map M that reads `all_gather(x, a)` (tiled,
along dimension 0, over one mesh axis a of p PEs) by its first index i. `windowed(node, mesh)`
returns M as p partial maps instead, part s over the rows of the block the PE holds at step s,
that block passed on to the previous PE by a ppermute between steps, and the parts joined in
their rows by a roll of their concatenation by the PE's coordinate (mesh/hardware.py places
each part in the result without moving data; passes/overlap.py runs each permute beside the
partial map of its step):

    chunk_0 = x;  chunk_{s+1} = ppermute(chunk_s, a, j -> j - 1)       (block (x + s) mod p)
    M' = roll(concatenate([M over chunk_s for s < p]), axis_index(a) * rows)

It returns None when M does not have this form (then the plain all-gather stays).
"""

from __future__ import annotations

from .. import ir
from ..lang.dtypes import int32, int64
from .collectives import axis_param


def gathered_rows(node, mesh):
    """(the all-gather, its axis) when `node` is a map that reads a row all-gather over one
    axis by its first index and uses that index nowhere else; else None."""
    if not isinstance(node, ir.Map) or not node.dims:
        return None
    i = node.dims[0]
    gathers = {
        r.src
        for r in ir.walk(node.body)
        if isinstance(r, ir.Read) and isinstance(r.src, ir.Collective) and r.src.kind == "all_gather"
    }
    if len(gathers) != 1:
        return None
    (g,) = gathers
    if len(g.axes) != 1 or dict(g.params) != {"axis": 0, "tiled": True} or g.shape[0] != i.extent:
        return None
    uses = _count(node.body, lambda e: isinstance(e, ir.Index) and e.name == i.name)
    rows = [r for r in ir.walk(node.body) if isinstance(r, ir.Read) and r.src is g]
    if any(r.idx[0] != ir.Index(i.name) for r in rows) or uses != 1 or len(rows) != 1:
        return None
    if any(isinstance(r, ir.Read) and r.src is not g and ir.Index(i.name) in r.idx for r in ir.walk(node.body)):
        return None
    return g, g.axes[0]


def windowed(node, mesh):
    """`node` as collective matmul (see the module doc), or None when it has no such form."""
    found = gathered_rows(node, mesh)
    if found is None:
        return None
    g, axis = found
    p, x = mesh.shape[axis], g.operand
    rows = x.shape[0]
    perm = tuple((j, (j - 1) % p) for j in range(p))
    first = ir.Dim(node.dims[0].name, rows)
    chunk, parts = x, []
    for s in range(p):
        body = ir.transform(
            node.body, lambda e, c=chunk: ir.Read(c, e.idx, loc=e.loc, text=e.text) if _reads(e, g) else None
        )
        parts.append(ir.Map((first, *node.dims[1:]), body, loc=node.loc))
        if s + 1 < p:
            chunk = ir.Collective("ppermute", (axis,), (("perm", perm),), chunk, x.shape, loc=g.loc)
    coordinate = ir.Cast(ir.Param(axis_param(axis), int32), int64)
    shift = ir.Binary("mul", coordinate, ir.Const(rows, int64), int64)
    return ir.Roll(ir.Concat(tuple(parts), 0, loc=node.loc), shift, loc=node.loc)


def _reads(e, g) -> bool:
    return isinstance(e, ir.Read) and e.src == g


def _count(e, hit) -> int:
    """How many times `hit` holds in expression tree `e`, every occurrence counted (ir.walk
    visits structurally equal nodes once)."""
    return int(hit(e)) + sum(_count(c, hit) for c in ir.children(e))
