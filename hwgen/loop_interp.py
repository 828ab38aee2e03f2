"""The loop IR executed with numpy: checks the lowering against the golden model.

Controllers run one after another in program order (the hardware may overlap them; a correct
schedule gives the same memory contents). A Pipe is evaluated for all its iterations at once;
accumulating writes fold in iteration order (counters row-major), as the hardware does.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import ir
from .interp import Evaluator, Frame
from .loops import Load, Loop, LoopProgram, Parallel, Pipe, Store, Write


def run(prog: LoopProgram, args: dict) -> dict:
    """Execute `prog` on `args` (name -> numpy); returns result name -> numpy value."""
    drams = {}
    for d in prog.drams:
        drams[d.name] = np.array(args[d.name]) if d.role == "in" else np.zeros(d.shape, d.dtype.np)
    mems = {m.name: np.zeros(m.shape, m.dtype.np) for m in prog.mems}
    ev = Evaluator(args)
    _Runner(ev, drams, mems, args).run(prog.root, {})
    out = {d.name: drams[d.name] for d in prog.drams if d.role == "out"}
    for s in prog.scalar_outs:
        out[s.name] = mems[s.mem.name][()]
    return out


class _Runner:
    def __init__(self, ev: Evaluator, drams: dict, mems: dict, params: dict):
        self.ev, self.drams, self.mems, self.params = ev, drams, mems, params

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
            self.drams[c.dram.name][region] = self.mems[c.mem.name].reshape(c.shape)
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
        for w, (idx, value, first) in zip(p.writes, results):
            self.apply(w, idx, value, first)

    def evaluate(self, w: Write, frame: Frame):
        shape = frame.extents
        idx = tuple(np.broadcast_to(self.ev.expr(i, frame), shape).ravel() for i in w.idx)
        value = np.broadcast_to(self.ev.expr(w.value, frame), shape).ravel()
        first = None
        if w.op is not None:
            first = np.broadcast_to(self.ev.expr(w.first, frame), shape).ravel().astype(bool)
        return idx, value, first

    def apply(self, w: Write, idx, value, first) -> None:
        mem = self.mems[w.mem.name]
        if w.op is None:
            mem[idx] = value
            return
        flat = np.ravel_multi_index(idx, mem.shape) if idx else np.zeros(len(value), dtype=np.int64)
        view = mem.reshape(-1)
        # fold in iteration order, exactly as the hardware does: round r updates, for every
        # element at once, with the r-th iteration that targets it
        order = np.argsort(flat, kind="stable")
        sorted_targets = flat[order]
        starts = np.r_[0, np.nonzero(np.diff(sorted_targets))[0] + 1]
        group_start = np.repeat(starts, np.diff(np.r_[starts, len(flat)]))
        occurrence = np.empty(len(flat), dtype=np.int64)
        occurrence[order] = np.arange(len(flat)) - group_start
        for r in range(int(occurrence.max()) + 1 if len(flat) else 0):
            sel = np.nonzero(occurrence == r)[0]
            t = flat[sel]
            new = value[sel]
            old = view[t]
            combined = self.ev.combine(w.op, old, new, w.mem.dtype, Frame())
            view[t] = np.where(first[sel], new, combined)
