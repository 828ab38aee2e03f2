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
for the other and the level takes as long as its slowest child (model.py).

A level of copies only (loads, stores, and pipes that move elements unchanged), next to such
a level, joins its chain of collectives when none of its copies conflicts with that level's
patterns: the level before runs first in the chain (it gathers the collectives' operands),
the level after runs last (it places their results), all beside the level's patterns; they
share the patterns' DRAM channel with them (the model's arbiter). Only copies join: the
chain hides data movement behind the level's work, never runs a second computation beside it
(each pattern has hardware of its own, so two would run at once, a speedup no schedule asked
for). A root with no collective is left as it is.

    collective matmul: ppermute(chunk s) -> chunk s+1 runs beside chunk s @ b
    halo exchange:     the block's edges copied out, four ppermutes of them, the received
                       edges stored into the padded block: one chain beside the copy of the
                       block's inside into it
"""

from __future__ import annotations

import dataclasses

from .. import ir
from ..affine import to_affine
from ..loops import Collective, Load, Loop, LoopProgram, Mem, Parallel, Pipe, Store, Write, children, walk


def overlap(prog: LoopProgram, schedule=None) -> LoopProgram:
    """`prog` with its root's entries grouped into levels (see the module doc)."""
    entries = prog.root.stages
    if not any(isinstance(e, Collective) for e in entries):
        return prog
    if any(not isinstance(e, Collective) and any(isinstance(c, Collective) for c in walk(e)) for e in entries):
        return prog  # a collective stage of a tile loop: no two collectives may share the links at once
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
    groups = []
    for level in sorted(set(levels)):
        mine = [j for j, lv in zip(range(n), levels) if lv == level]
        groups.append(
            {
                "order": mine,
                "copies": [_copies(entries[j]) for j in mine],
                "patterns": [j for j in mine if not isinstance(entries[j], Collective)],
                "collectives": [j for j in mine if isinstance(entries[j], Collective)],
                "before": [],
                "after": [],
            }
        )
    groups = _chain(groups, uses)
    stages = [_level(g, entries) for g in groups]
    return dataclasses.replace(prog, root=Loop((), tuple(stages)))


def _chain(groups: list, uses: list) -> list:
    """Levels of copies only, next to a level with collectives and patterns, none of whose
    copies conflicts with those patterns, join that level's collectives: before them (they
    feed them) or after them (they place their results), all beside the level's patterns."""
    out: list = []
    for k, g in enumerate(groups):
        if g is None:
            continue
        if g["collectives"] and g["patterns"]:
            prev = out[-1] if out else None
            if prev is not None and _alone(prev) and _apart(prev["patterns"], g["patterns"], uses):
                g["before"] = out.pop()["patterns"]
            nxt = groups[k + 1] if k + 1 < len(groups) else None
            if nxt is not None and _alone(nxt) and _apart(nxt["patterns"], g["patterns"], uses):
                g["after"] = nxt["patterns"]
                groups[k + 1] = None
        out.append(g)
    return out


def _alone(g: dict) -> bool:
    """A level of copies only, not yet joined to another's collectives."""
    return not g["collectives"] and not g["before"] and not g["after"] and all(g["copies"])


def _copies(entry) -> bool:
    """Whether `entry` only moves data: its pipes write elements they read (or constants)
    unchanged, with no combining."""
    for c in walk(entry):
        if isinstance(c, Collective):
            return False
        if isinstance(c, Pipe):
            for w in c.writes:
                if not isinstance(w, Write) or w.op is not None or not isinstance(w.value, (ir.MemRead, ir.Const)):
                    return False
    return True


def _apart(some: list, others: list, uses: list) -> bool:
    return not any(_conflict(uses[a], uses[b]) or _conflict(uses[b], uses[a]) for a in some for b in others)


def _level(g: dict, entries: list):
    """A level as one entry: its patterns, and beside them the collectives one after another
    on the collective unit (with the copies that feed them before and those that place their
    results after), where the first collective stood, as a Parallel; or the lone entry."""
    kids = []
    for j in g["order"]:
        if not isinstance(entries[j], Collective):
            kids.append(entries[j])
        elif j == g["collectives"][0]:
            chain = [_together([entries[k] for k in g["before"]])] if g["before"] else []
            chain += [entries[k] for k in g["collectives"]]
            chain += [_together([entries[k] for k in g["after"]])] if g["after"] else []
            kids.append(chain[0] if len(chain) == 1 else Loop((), tuple(chain)))
    return kids[0] if len(kids) == 1 else Parallel(tuple(kids))


def _together(entries: list):
    return entries[0] if len(entries) == 1 else Parallel(tuple(entries))


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
            writes.extend((("dram", name), None) for name in c.within)
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
