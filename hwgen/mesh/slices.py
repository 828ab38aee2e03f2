"""Local slices: a shard_map body reading its argument block rolled by the PE's coordinates.

GSPMD turns a replicated array read split into a free local slice: each PE reads its own
rows of the copy it holds. The partitioner (partition.py) writes that slice as
`hw.roll(x, -index * rows)` read in its first `rows` rows, `index` computed from
hw.axis_index; a user's body may write the same. No data moves: `rolled_inputs` makes each
such roll an array of the per-PE program that lies inside x at a per-PE place (an alias:
the mesh top gives PE k its base, x's plus its offset; see mesh_top.py).

A roll qualifies when it rolls a kernel argument's block (or a collective's result, which
lies in the PE's DRAM too: the partitioner's slice of a gathered array) along dimension 0 by
a shift computed from hw.axis_index and constants, and on every PE the rows read (the front end
allows affine subscripts in bounds only) lie in the block without wrapping round its end.
The alias is the rows read from the first; its place, whole DRAM beats.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ir
from ..affine import to_affine
from ..lang.dtypes import int32, int64
from .collectives import axis_param


def index_of(axes: tuple, mesh):
    """The IR expression (int64) of this PE's index in its group over `axes` (row-major,
    the first major), as hw.axis_index computes it."""
    expr = ir.Cast(ir.Param(axis_param(axes[0]), int32), int64)
    for a in axes[1:]:
        expr = ir.Binary("mul", expr, ir.Const(mesh.shape[a], int64), int64)
        expr = ir.Binary("add", expr, ir.Cast(ir.Param(axis_param(a), int32), int64), int64)
    return expr


def local_slice(x, axes: tuple, mesh):
    """Block `index` of x's rows over `axes` (x's rows divided among their PEs), as a roll
    of x read in its first rows (see the module doc)."""
    rows = x.shape[0] // math.prod(mesh.shape[a] for a in axes)
    shift = ir.Binary("mul", index_of(axes, mesh), ir.Const(-rows, int64), int64)
    return ir.Roll(x, shift)


def rolled_inputs(out, inputs: dict, mesh, word_beat: int, refuse) -> dict:
    """Every roll of a kernel argument or a collective's result in body `out` that qualifies
    (see the module doc) -> (its rows read, each PE's offset into the array in words);
    `inputs`: the body's argument Inputs, each to its kernel argument's name. A read roll of
    an argument or collective that does not qualify is refused (`refuse(why, loc)`); other
    rolls are left alone."""

    def lies(x) -> bool:  # an array in the PE's DRAM, whose rows a roll can read in place
        return x in inputs or isinstance(x, ir.Collective)

    def named(x) -> str:
        return f"the argument '{inputs[x]}'" if x in inputs else f"the result of hw.{x.kind}"

    reads = [n for n in ir.walk(out) if isinstance(n, ir.Read) and isinstance(n.src, ir.Roll)]
    rolls = list(dict.fromkeys(r.src for r in reads if lies(r.src.x)))
    for n in ir.walk(out):  # read only: a collective or a transpose would move all its rows
        for c in ir.children(n):
            if isinstance(c, ir.Roll) and lies(c.x) and not (isinstance(n, ir.Read) and n.src == c):
                refuse(
                    f"a rolled array may only be read by index (its rows read stay where they lie); "
                    f"pass {named(c.x)} itself to collectives and array operations",
                    c.loc,
                )
    extents = {d.name: d.extent for d in ir.walk(out) if isinstance(d, ir.Dim)}
    found = {}
    for roll in rolls:
        _check_shift(roll, mesh, refuse)
        top = 0
        for r in reads:
            if r.src == roll:
                form = to_affine(r.idx[0])  # the front end allows affine subscripts in bounds only
                if form is None or any(n not in extents for n in form.names()) or form.value_range(extents)[0] < 0:
                    refuse("a rolled array must be read at affine rows of its block, from row 0 on", r.loc or roll.loc)
                top = max(top, form.value_range(extents)[1] + 1)
        n, row_words = roll.x.shape[0], math.prod(roll.x.shape[1:])
        firsts = _first_rows(roll, mesh)
        for k, first in enumerate(firsts):
            if first + top > n:
                refuse(
                    f"the rows of a rolled array read on PE {k} ({first} to {first + top - 1} of {n}) "
                    f"wrap round its end; roll it by whole blocks that the reads stay in",
                    roll.loc,
                )
            if first * row_words % word_beat:
                refuse(
                    f"the rows PE {k} reads of {named(roll.x)} (a hw.roll of it, or its local slice "
                    f"where it is read split and whole) start at word {first * row_words}, which is not a whole "
                    f"DRAM beat ({word_beat} words)",
                    roll.loc,
                )
        found[roll] = ((top,) + tuple(roll.x.shape[1:]), tuple(f * row_words for f in firsts))
    return found


def _check_shift(roll, mesh, refuse) -> None:
    """A roll's shift must be computed from the PE's coordinates and constants."""
    allowed = {axis_param(a) for a in mesh.axis_names}
    for e in ir.walk(roll.shift):
        if not isinstance(e, (ir.Const, ir.Param, ir.Binary, ir.Unary, ir.Cast)) or (
            isinstance(e, ir.Param) and e.name not in allowed
        ):
            refuse("the shift of hw.roll must be computed from hw.axis_index and constants", roll.loc)


def _first_rows(roll, mesh) -> list:
    """On each PE, the row of the rolled array that the roll's row 0 holds."""
    from ..interp import Evaluator, Frame

    firsts = []
    for k in range(mesh.size):
        args = {axis_param(a): np.int32(c) for a, c in zip(mesh.axis_names, mesh.coords(k))}
        shift = int(np.ravel(Evaluator(args).expr(roll.shift, Frame(params=args)))[0])
        firsts.append((-shift) % roll.x.shape[0])
    return firsts
