"""Overlap: a mesh PE's collectives run beside the work that neither feeds them nor reads them.

A mesh PE's root sequence (mesh/hardware.py) computes each collective's operand, runs the
collective, and so on. This pass regroups the root's entries into levels: an entry's level is
one past the latest level of the earlier entries it conflicts with (it reads what they write,
writes what they read or write: DRAM arrays by name, on-chip memories by any use), a
collective the first such level that holds no other collective (they share the links and the
collective channel). Each level of
more than one entry becomes a Parallel: a collective runs beside the patterns of its level,
on its own DRAM channel (hw/pe.py `cmem`), so neither waits for the other and the level takes
as long as its slowest entry (model.py). A root with no collective is left as it is.

    collective matmul: ppermute(chunk s) -> chunk s+1 runs beside chunk s @ b
"""

from __future__ import annotations

import dataclasses

from ..loops import Collective, Load, Loop, LoopProgram, Mem, Parallel, Store, walk


def overlap(prog: LoopProgram, schedule=None) -> LoopProgram:
    """`prog` with its root's entries grouped into levels (see the module doc)."""
    entries = prog.root.stages
    if not any(isinstance(e, Collective) for e in entries):
        return prog
    uses = [_uses(e) for e in entries]
    levels: list = []  # per entry
    busy: set = set()  # the levels that hold a collective
    for j, (reads, writes) in enumerate(uses):
        level = 0
        for i in range(j):
            r, w = uses[i]
            if writes & (r | w) or reads & w:
                level = max(level, levels[i] + 1)
        if isinstance(entries[j], Collective):
            while level in busy:
                level += 1
            busy.add(level)
        levels.append(level)
    groups: dict = {}
    for e, level in zip(entries, levels):
        groups.setdefault(level, []).append(e)
    stages = tuple(g[0] if len(g) == 1 else Parallel(tuple(g)) for _, g in sorted(groups.items()))
    return dataclasses.replace(prog, root=Loop((), stages))


def _uses(entry) -> tuple:
    """(names read, names written) by a root entry: DRAM arrays by their loads, stores and
    collective phases; every on-chip memory it touches counts as written."""
    reads, writes = set(), set()
    for c in walk(entry):
        if isinstance(c, Load):
            reads.add(("dram", c.dram.name))
        elif isinstance(c, Store):
            writes.add(("dram", c.dram.name))
        elif isinstance(c, Collective):
            for ph in c.phases:
                reads.add(("dram", ph.src))
                writes.add(("dram", ph.dst))
        writes.update(("mem", m.name) for m in _mems(c))
    return reads, writes


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
