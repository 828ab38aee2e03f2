"""Overlap: a mesh PE's collectives run beside the work that neither feeds them nor reads them.

A mesh PE's root sequence (mesh/hardware.py) computes each collective's operand, runs the
collective, and so on. This pass regroups the root's entries into levels, so that the entries
of a level are independent: none reads what another writes, nor writes what another reads or
writes (DRAM arrays by the boxes their loads, stores and collectives cover, so the parts of one
hw.concatenate stored in their places are independent; on-chip memories by any use).

- Each entry's earliest level is one past the latest level of the earlier entries it
  conflicts with; its latest, one before the earliest level of the later entries that
  conflict with it.
- A collective goes in its earliest level. A pattern goes in the first level of its range
  that holds a collective (so it runs beside one), else in its earliest (tried from the last
  entry back, each one's range from where the others are by then).

Each level of more than one entry becomes a Parallel: its patterns start together, and its
collectives run one after another beside them (they share the links and the collective
channel), on the PE's own DRAM channel for collectives (hw/pe.py `cmem`), so neither waits
for the other and the level takes as long as its slowest child (model.py). A root with no
collective is left as it is.

    collective matmul: ppermute(chunk s) -> chunk s+1 runs beside chunk s @ b
    halo exchange:     four ppermutes of a block's edges run beside the copy of its inside
                       into the padded block the stencil reads
"""

from __future__ import annotations

import dataclasses

from ..affine import to_affine
from ..loops import Collective, Load, Loop, LoopProgram, Mem, Parallel, Pipe, Store, children


def overlap(prog: LoopProgram, schedule=None) -> LoopProgram:
    """`prog` with its root's entries grouped into levels (see the module doc)."""
    entries = prog.root.stages
    if not any(isinstance(e, Collective) for e in entries):
        return prog
    uses = [_uses(e) for e in entries]
    n = len(entries)
    after = [[i for i in range(j) if _conflict(uses[i], uses[j])] for j in range(n)]  # j after each i
    levels: list = []
    for j in range(n):
        levels.append(max((levels[i] + 1 for i in after[j]), default=0))
    busy = sorted({lv for e, lv in zip(entries, levels) if isinstance(e, Collective)})
    for j in reversed(range(n)):
        if isinstance(entries[j], Collective):
            continue
        latest = min((levels[k] - 1 for k in range(j + 1, n) if j in after[k]), default=max(levels))
        levels[j] = next((lv for lv in busy if levels[j] <= lv <= latest), levels[j])
    stages: list = []
    for level in sorted(set(levels)):
        mine = [e for e, lv in zip(entries, levels) if lv == level]
        colls = [e for e in mine if isinstance(e, Collective)]
        # the collectives one after another on the collective unit, where the first one is
        kids = [(_sequence(colls) if e is colls[0] else None) if isinstance(e, Collective) else e for e in mine]
        kids = [e for e in kids if e is not None]
        stages.append(kids[0] if len(kids) == 1 else Parallel(tuple(kids)))
    return dataclasses.replace(prog, root=Loop((), tuple(stages)))


def _sequence(entries: list):
    """One entry as it is, several as a loop of no counters running them in order."""
    return entries[0] if len(entries) == 1 else Loop((), tuple(entries))


def _conflict(first: tuple, second: tuple) -> bool:
    """Whether two entries' uses (reads, writes) conflict: one writes what the other reads or
    writes."""
    (r1, w1), (r2, w2) = first, second
    return _overlaps(w1, r2 + w2) or _overlaps(r1, w2)


def _overlaps(some: list, others: list) -> bool:
    """Whether a box of `some` meets a box of `others` in the same array."""
    return any(name == other and _meet(box, obox) for name, box in some for other, obox in others)


def _meet(box, other) -> bool:
    if box is None or other is None:
        return True
    return all(lo <= other_hi and other_lo <= hi for (lo, hi), (other_lo, other_hi) in zip(box, other))


def _uses(entry) -> tuple:
    """(reads, writes) of a root entry, each a list of (name, box): DRAM arrays by the box
    (per dimension the first and last index) its loads and stores cover over their loops'
    counters, or None for the whole array (a collective's phases); every on-chip memory it
    touches counts as written, whole."""
    reads, writes = [], []

    def visit(c, extents: dict):
        if isinstance(c, (Loop, Pipe)):
            extents = {**extents, **{k.name: k.extent for k in c.counters}}
        if isinstance(c, Load):
            reads.append((("dram", c.dram.name), _box(c.origin, c.mem.shape, extents)))
        elif isinstance(c, Store):
            writes.append((("dram", c.dram.name), _box(c.origin, c.shape, extents)))
        elif isinstance(c, Collective):
            for ph in c.phases:
                reads.append((("dram", ph.src), None))
                writes.append((("dram", ph.dst), None))
        writes.extend((("mem", m.name), None) for m in _mems(c))
        for k in children(c):
            visit(k, extents)

    visit(entry, {})
    return reads, writes


def _box(origin: tuple, shape: tuple, extents: dict):
    """The indices a transfer of `shape` at `origin` covers over the counters' `extents`, per
    dimension (first, last); None (all of it) where an origin is not affine in them."""
    box = []
    for expr, size in zip(origin, shape):
        aff = to_affine(expr)
        if aff is None or any(name not in extents for name, _ in aff.terms):
            return None
        lo, hi = aff.value_range(extents)
        box.append((lo, hi + size - 1))
    return tuple(box)


def _mems(obj, seen=None) -> list:
    """Every on-chip memory (loops.Mem) reachable from `obj` through dataclass fields and
    tuples, not into child controllers (walk visits those)."""
    seen = set() if seen is None else seen
    found = []
    stack = [obj]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Mem):
            found.append(x)
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            if x is not obj and isinstance(x, (Loop, Parallel, Collective)):
                continue
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return found
