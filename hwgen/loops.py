"""The loop IR: the kernel as a tree of controllers over on-chip memories, ready for hardware.

Controllers (each runs when started and reports when done):
    Loop(counters, stages, meta)   for each counter value, run `stages` in order
                                   (meta=True: overlapped across iterations, a metapipeline)
    Parallel(children)             start all children together, done when all are done
    Pipe(counters, writes)         an inner loop, one iteration per cycle (II = 1)
    Load(dram, mem, origin)        copy the tile of `dram` at `origin` into `mem`
    Store(mem, dram, origin, shape) copy `mem` (row-major) into the `shape` region of `dram`
                                   at `origin`

Memories: `Mem(name, dtype, shape)` lives on chip (shape () is a scalar register);
`Dram(name, dtype, shape, role)` is an off-chip array (role in / out).
A `Write` in a Pipe sets `mem[idx] = value`, or, with `op`, accumulates:
`mem[idx] = value if first else op(mem[idx], value)`. A `GroupWrite` adds (key, values) to a
`Group` (a group-by's keys, folded values and count, kept in a content-addressed memory); an
`AppendWrite` appends, in order, the items whose conditions hold to `values` and counts them
in `count` (both restart when `first` holds).

Expressions are pattern-IR scalar Exprs over `Index(counter)`, `Param(name)` and
`MemRead(mem, idx)`. A counter's value is 0 .. extent-1; `par` lanes run `par` consecutive
values per cycle. `LoopProgram` is the whole kernel: memories, DRAM arrays, scalar results
and the root controller. Every controller carries a `name` ("pipe0", "load2", ...) once the
naming pass has run: its hardware instance name, and its key in the memory and pipe plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import ir
from .lang.dtypes import DType


@dataclass(frozen=True)
class Mem:
    name: str
    dtype: DType
    shape: tuple
    label: str = field(default="", compare=False)  # how messages name it ("the tile of x")
    loc: object = field(default=None, compare=False)  # the user's line it serves

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Dram:
    name: str
    dtype: DType
    shape: tuple
    role: str  # "in" | "out"

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Counter:
    name: str
    extent: int
    par: int = 1


@dataclass(frozen=True)
class Write:
    mem: Mem
    idx: tuple
    value: ir.Expr
    op: ir.Combiner | None = None
    first: ir.Expr | None = None
    checked: tuple = ()  # axes of idx from data: a write outside mem is dropped and flagged


@dataclass(frozen=True)
class Group:
    """A group-by's state on chip: `keys` (capacity,), `values` (capacity[, width]), `count`."""

    name: str
    keys: Mem
    values: Mem
    count: Mem
    op: ir.Combiner
    capacity: int
    loc: object = field(default=None, compare=False)


@dataclass(frozen=True)
class GroupWrite:
    group: Group
    key: ir.Expr
    values: tuple
    first: ir.Expr


@dataclass(frozen=True)
class AppendWrite:
    values: Mem
    count: Mem
    conds: tuple
    items: tuple
    first: ir.Expr


def write_exprs(w) -> list:
    """Every expression a write of a Pipe evaluates."""
    if isinstance(w, GroupWrite):
        return [w.key, *w.values, w.first]
    if isinstance(w, AppendWrite):
        return [*w.conds, *w.items, w.first]
    return [w.value, *w.idx] + ([w.first] if w.first is not None else [])


@dataclass(frozen=True)
class Pipe:
    counters: tuple
    writes: tuple
    name: str = ""  # the controller's instance name (passes/names.py), e.g. "pipe0"

    @property
    def iterations(self) -> int:
        n = 1
        for c in self.counters:
            n *= c.extent // c.par
        return n


@dataclass(frozen=True)
class Load:
    dram: Dram
    mem: Mem
    origin: tuple  # Exprs over outer counters: the DRAM coordinates of mem[0, ..., 0]
    name: str = ""


@dataclass(frozen=True)
class Store:
    mem: Mem
    dram: Dram
    origin: tuple
    shape: tuple  # the DRAM region; mem.size == its number of elements
    limit: ir.Expr | None = None  # elements at flat positions from `limit` on are stored as 0
    name: str = ""


@dataclass(frozen=True)
class Parallel:
    children: tuple
    name: str = ""


@dataclass(frozen=True)
class Collective:
    """A mesh PE's collective (hw/phases.py): its phases (collective.RingPlans or
    copy.CopyPlans), run one after another, from DRAM array to DRAM array; a leaf of the
    kernel's root sequence (mesh/hardware.py places it). `within`: arrays of the program
    that lie inside its result at a per-PE place (the rows a PE reads of it in place), which
    it writes too. A collective stage (`chunk` > 0) is instead the last stage of the tile
    loop that stores its operand: each iteration it runs its phases on the `chunk` words
    that iteration stored, at word `offset` (an expression of the loop's counters) of its
    arrays (passes/lower.py)."""

    phases: tuple
    name: str = ""
    within: tuple = ()
    chunk: int = 0
    offset: object = None


@dataclass(frozen=True)
class Loop:
    counters: tuple
    stages: tuple
    meta: bool = False  # metapipelined (decided by passes/metapipeline.py)
    name: str = ""

    @property
    def iterations(self) -> int:
        n = 1
        for c in self.counters:
            n *= c.extent
        return n


@dataclass(frozen=True)
class ScalarOut:
    """A scalar kernel result: port `name` shows register `mem` once the kernel is done."""

    name: str
    mem: Mem


@dataclass(frozen=True)
class LoopProgram:
    name: str
    params: tuple  # signature.Port of the scalar parameters
    drams: tuple  # Dram, inputs then outputs, in kernel order
    mems: tuple  # every Mem
    scalar_outs: tuple  # ScalarOut
    root: Loop
    groups: tuple = ()  # Group
    notes: tuple = field(default=())  # lowering decisions worth reporting


def children(ctrl) -> tuple:
    if isinstance(ctrl, Loop):
        return ctrl.stages
    if isinstance(ctrl, Parallel):
        return ctrl.children
    return ()


def walk(ctrl):
    """Every controller in the tree, parents first."""
    yield ctrl
    for c in children(ctrl):
        yield from walk(c)


def checked_mems(prog) -> list:
    """The memories (multifold accumulators) written at subscripts from data, each once: the
    hardware flags a write outside them on `range_<mem>`."""
    found = {}
    for ctrl in walk(prog.root):
        for w in getattr(ctrl, "writes", ()):
            if getattr(w, "checked", ()):
                found[w.mem.name] = w.mem
    return list(found.values())


def show(prog: LoopProgram) -> str:
    """The controller tree as indented text."""
    lines = [f"loop program {prog.name}"]
    for m in prog.mems:
        lines.append(f"  mem {m.name}: {m.dtype.name}{list(m.shape)}")

    def go(c, depth):
        pad = "  " * depth
        lines.append(pad + _head(c))
        if isinstance(c, Pipe):
            lines.extend(f"{pad}  {_write_str(w)}" for w in c.writes)
        for s in children(c):
            go(s, depth + 1)

    go(prog.root, 1)
    for s in prog.scalar_outs:
        lines.append(f"  result {s.name} = {s.mem.name}")
    return "\n".join(lines)


def _counters_str(counters) -> str:
    return ", ".join(f"{k.name}<{k.extent}" + (f" par {k.par}" if k.par > 1 else "") for k in counters)


def _head(c) -> str:
    """One controller's line in `show`."""
    if isinstance(c, Loop):
        return f"{'metapipe' if c.meta else 'sequential'} loop{_named(c)} [{_counters_str(c.counters)}]"
    if isinstance(c, Parallel):
        return f"parallel{_named(c)}"
    if isinstance(c, Pipe):
        return f"pipe{_named(c)} [{_counters_str(c.counters)}]"
    if isinstance(c, Load):
        origin = ", ".join(_expr_str(o) for o in c.origin)
        return f"load{_named(c)} {c.dram.name}[{origin} +{list(c.mem.shape)}] -> {c.mem.name}"
    if isinstance(c, Collective):
        steps = [
            ph.kind if ph.kind == "copy" else f"{ph.kind} along {','.join(ph.axes or (ph.axis,))}{_tours(ph)}"
            for ph in c.phases
        ]
        return f"collective{_named(c)} {c.phases[0].src} -> {c.phases[-1].dst}: {'; '.join(steps)}"
    origin = ", ".join(_expr_str(o) for o in c.origin)
    return f"store{_named(c)} {c.mem.name} -> {c.dram.name}[{origin} +{list(c.shape)}]"


def _write_str(w) -> str:
    """One write of a pipe, in `show`."""
    if isinstance(w, GroupWrite):
        return f"group {w.group.name}: key {_expr_str(w.key)} values {', '.join(_expr_str(v) for v in w.values)}"
    if isinstance(w, AppendWrite):
        items = ", ".join(f"{_expr_str(v)} if {_expr_str(c)}" for c, v in zip(w.conds, w.items))
        return f"append to {w.values.name} (count {w.count.name}): {items}"
    target = f"{w.mem.name}[{', '.join(_expr_str(i) for i in w.idx)}]"
    if w.op is None:
        return f"{target} = {_expr_str(w.value)}"
    return f"{target} {w.op.op}= {_expr_str(w.value)}  (first: {_expr_str(w.first)})"


def _tours(phase) -> str:
    """' (torus tours)' for a phase whose rings are the torus tours of its axes."""
    return " (torus tours)" if getattr(phase, "tour", False) else ""


def _named(c) -> str:
    return f" {c.name}" if c.name else ""


_OPS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "floordiv": "//",
    "mod": "%",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
}


def _expr_str(e) -> str:
    if isinstance(e, ir.Const):
        return str(e.value)
    if isinstance(e, (ir.Index, ir.Param)):
        return e.name
    if isinstance(e, ir.MemRead):
        return f"{e.mem.name}[{', '.join(_expr_str(i) for i in e.idx)}]"
    if isinstance(e, ir.Read):
        return f"{getattr(e.src, 'name', 'map')}[{', '.join(_expr_str(i) for i in e.idx)}]"
    if isinstance(e, ir.Binary):
        if e.op in _OPS:
            return f"({_expr_str(e.a)} {_OPS[e.op]} {_expr_str(e.b)})"
        return f"{e.op}({_expr_str(e.a)}, {_expr_str(e.b)})"
    if isinstance(e, ir.Unary):
        return f"{e.op}({_expr_str(e.a)})"
    if isinstance(e, ir.Cast):
        return f"{e.dtype.name}({_expr_str(e.a)})"
    if isinstance(e, ir.Select):
        return f"where({_expr_str(e.cond)}, {_expr_str(e.a)}, {_expr_str(e.b)})"
    if isinstance(e, ir.Reduce):
        return f"reduce[{','.join(d.name for d in e.dims)}]({_expr_str(e.body)})"
    return type(e).__name__
