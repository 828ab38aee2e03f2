"""The loop IR executed with numpy: checks the lowering against the golden model.

Controllers run one after another in program order (the hardware may overlap them; a correct
schedule gives the same memory contents). A Pipe is evaluated for all its iterations at once;
accumulating writes fold in iteration order (counters row-major), as the hardware does.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import ir
from .errors import CapacityError, IndexRangeError
from .interp import Evaluator, Frame, fold_into
from .loops import (
    AppendWrite,
    GroupWrite,
    Load,
    Loop,
    LoopProgram,
    Parallel,
    Pipe,
    Store,
    Write,
    checked_mems,
    write_exprs,
)


def run(prog: LoopProgram, args: dict) -> dict:
    """Execute `prog` on `args` (name -> numpy); returns result name -> numpy value."""
    drams = {}
    for d in prog.drams:
        drams[d.name] = np.array(args[d.name]) if d.role == "in" else np.zeros(d.shape, d.dtype.np)
    mems = {m.name: np.zeros(m.shape, m.dtype.np) for m in prog.mems}
    ev = Evaluator(args)
    runner = _Runner(ev, drams, mems, args)
    runner.run(prog.root, {})
    for g in prog.groups:
        if runner.overflow.get(g.name):
            raise overflow_error(g)
    for mem in checked_mems(prog):
        if runner.out_of_range.get(mem.name):
            raise range_error(mem)
    out = {d.name: drams[d.name] for d in prog.drams if d.role == "out"}
    for s in prog.scalar_outs:
        out[s.name] = mems[s.mem.name][()]
    return out


def overflow_error(group) -> CapacityError:
    """The error of a group-by that met more distinct keys than it can hold."""
    return CapacityError(
        f"hw.groupby_fold saw more than max_keys={group.capacity} distinct keys; raise max_keys", group.loc
    )


def range_error(mem) -> IndexRangeError:
    """The error of a multifold whose subscript from data left its accumulator."""
    return IndexRangeError(
        f"hw.multifold: a subscript of `where` computed from data left the accumulator of shape "
        f"{tuple(mem.shape)} at run time; keep the data in range, or clamp it with hw.minimum / hw.maximum",
        mem.loc,
    )


class _Runner:
    def __init__(self, ev: Evaluator, drams: dict, mems: dict, params: dict):
        self.ev, self.drams, self.mems, self.params = ev, drams, mems, params
        self.overflow: dict = {}
        self.out_of_range: dict = {}  # memory name -> a checked write was dropped

    def scalar(self, e: ir.Expr, env: dict) -> int:
        frame = Frame(params=self.params, mems=self.mems, fixed=env)
        return int(np.asarray(self.ev.expr(e, frame)).reshape(()))

    def run(self, c, env: dict) -> None:
        if isinstance(c, Loop):
            ranges = [range(k.extent) for k in c.counters]
            for values in itertools.product(*ranges):
                inner = {**env, **{k.name: v for k, v in zip(c.counters, values)}}
                for s in c.stages:
                    self.run(s, inner)
        elif isinstance(c, Parallel):
            for s in c.children:
                self.run(s, env)
        elif isinstance(c, Load):
            region = self.region(c.origin, c.mem.shape, env)
            self.mems[c.mem.name][...] = self.drams[c.dram.name][region]
        elif isinstance(c, Store):
            region = self.region(c.origin, c.shape, env)
            data = self.mems[c.mem.name].reshape(c.shape).copy()
            if c.limit is not None:  # positions from the limit on are stored as zeros
                data.reshape(-1)[self.scalar(c.limit, env) :] = 0
            self.drams[c.dram.name][region] = data
        elif isinstance(c, Pipe):
            self.pipe(c, env)
        else:
            raise TypeError(f"loop_interp: unknown controller {type(c).__name__}")

    def region(self, origin, shape, env) -> tuple:
        return tuple(slice(o, o + n) for o, n in zip((self.scalar(e, env) for e in origin), shape))

    def pipe(self, p: Pipe, env: dict) -> None:
        names = tuple(k.name for k in p.counters)
        extents = tuple(k.extent for k in p.counters)
        frame = Frame(names, extents, self.params, self.mems, env)
        # every write sees memory as it was before the pipe (writes land at the end)
        results = [self.evaluate(w, frame) for w in p.writes]
        for w, result in zip(p.writes, results):
            if isinstance(w, GroupWrite):
                self.group(w, *result)
            elif isinstance(w, AppendWrite):
                self.append(w, *result)
            else:
                self.apply(w, *result)

    def evaluate(self, w, frame: Frame):
        shape = frame.extents
        if isinstance(w, (GroupWrite, AppendWrite)):
            return [np.broadcast_to(self.ev.expr(e, frame), shape).ravel() for e in write_exprs(w)], None, None
        idx = tuple(np.broadcast_to(self.ev.expr(i, frame), shape).ravel() for i in w.idx)
        value = np.broadcast_to(self.ev.expr(w.value, frame), shape).ravel()
        first = None
        if w.op is not None:
            first = np.broadcast_to(self.ev.expr(w.first, frame), shape).ravel().astype(bool)
        return idx, value, first

    def group(self, w: GroupWrite, values, _a, _b) -> None:
        """Add each iteration's (key, values) to the group-by, in order."""
        g = w.group
        keys, vals, count = self.mems[g.keys.name], self.mems[g.values.name], self.mems[g.count.name]
        table = vals.reshape(g.capacity, -1)
        key, *items, first = values
        for k in range(len(key)):
            if first[k]:
                keys[...] = 0
                table[...] = 0
                count[()] = 0
                self.overflow[g.name] = False
            hit = np.nonzero(keys[: count[()]] == key[k])[0]
            if len(hit):
                slot = hit[0]
                for c, item in enumerate(items):
                    table[slot, c] = self.ev.combine(
                        g.op, table[slot : slot + 1, c], item[k : k + 1], g.values.dtype, Frame()
                    )[0]
            elif count[()] < g.capacity:
                slot = count[()]
                keys[slot] = key[k]
                table[slot] = [item[k] for item in items]
                count[()] += 1
            else:
                self.overflow[g.name] = True

    def append(self, w: AppendWrite, values, _a, _b) -> None:
        """Append each iteration's kept items, in order."""
        n = len(w.conds)
        conds, items, first = values[:n], values[n : 2 * n], values[-1]
        out, count = self.mems[w.values.name], self.mems[w.count.name]
        for k in range(len(first)):
            if first[k]:
                count[()] = 0
            for cond, item in zip(conds, items):
                if cond[k]:
                    out[count[()]] = item[k]
                    count[()] += 1

    def apply(self, w: Write, idx, value, first) -> None:
        mem = self.mems[w.mem.name]
        if w.checked:  # as the hardware: a write outside the memory is dropped and flagged
            keep = np.ones(len(value), dtype=bool)
            for axis in w.checked:
                keep &= (idx[axis] >= 0) & (idx[axis] < mem.shape[axis])
            if not keep.all():
                self.out_of_range[w.mem.name] = True
                idx, value = tuple(i[keep] for i in idx), value[keep]
                first = None if first is None else first[keep]
        if w.op is None:
            if idx:
                mem[idx] = value
            else:  # a scalar register: the last iteration's value
                mem[()] = value[-1]
            return
        flat = np.ravel_multi_index(idx, mem.shape) if idx else np.zeros(len(value), dtype=np.int64)
        fold_into(self.ev, mem.reshape(-1), flat, value, first, w.op, w.mem.dtype)
