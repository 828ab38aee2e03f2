"""Reductions, for the lowering (passes/lower.py): a reduction nested in a body becomes its own
loop, run as an earlier stage, that folds into an accumulator memory indexed by the enclosing
local counters it depends on; a reduction that depends on no index at all, and a multifold, is
computed once, by top-level stages, before everything that uses it. Independent multifolds
over the same loops (k-means' sums and counts) share one loop, and the reductions their bodies
have in common (the nearest centroid) are computed once for all of them.
"""

from __future__ import annotations

import math

from .. import ir
from ..errors import ScheduleError, UnsupportedError
from ..lang.dtypes import bool_, int64
from ..loops import Load, Mem, Pipe, Write
from .fuse import fuse


def _extracted(e: ir.Node) -> bool:
    """Whether `Reductions.extract` replaces node `e` (not only its sub-nodes)."""
    return isinstance(e, (ir.Reduce, ir.Count)) or (
        isinstance(e, ir.Read) and isinstance(e.src, (ir.MultiFold, ir.Map, ir.Part))
    )


class Reductions:
    """Mixed into the lowering: needs the Tiles methods, `top`, `hoisted`, `inputs`, `new_mem`,
    `loop`, `local_index` and `collect_part`."""

    def extract(self, expr: ir.Expr, ctx_local: list, stages: list, memo: dict | None = None) -> ir.Expr:
        """`expr` with each outermost Reduce replaced by a read of its accumulator; the loops
        computing them are appended to `stages` (or hoisted to the top when closed). `memo`
        shares the lowered reductions between calls (expressions of one loop body)."""
        return self._extract(expr, ctx_local, stages, {} if memo is None else memo)

    def _extract(self, e: ir.Expr, ctx_local: list, stages: list, memo: dict) -> ir.Expr:
        """extract, node by node (a method, not a recursive closure: see ir._subst)."""
        found = memo.get(e)
        if found is not None:
            return found

        def go(c):
            return self._extract(c, ctx_local, stages, memo)

        if not ir.holds(e, _extracted):  # nothing below to replace: kept whole
            out = e
        elif isinstance(e, ir.Reduce):
            out = self.lower_reduce(e, ctx_local, stages)
        elif isinstance(e, ir.Read) and isinstance(e.src, ir.MultiFold):
            acc = self.fold(e.src)  # computed once, before everything that reads it
            out = ir.MemRead(acc, tuple(go(i) for i in e.idx), e.text)
        elif isinstance(e, ir.Read) and isinstance(e.src, ir.Map):  # kept by passes/fuse.py
            out = ir.MemRead(self.materialize(e.src), tuple(go(i) for i in e.idx), e.text)
        elif isinstance(e, ir.Read) and isinstance(e.src, ir.Part):
            mem, _ = self.collect_part(e.src)
            out = ir.MemRead(mem, tuple(go(i) for i in e.idx), e.text)
        elif isinstance(e, ir.Count):
            out = ir.MemRead(self.collect_part(ir.Part(e.collect, "values"))[1], ())
        else:
            out = ir.rebuild(e, go)
        memo[e] = out
        return out

    FOLD_LIMIT = 1 << 16

    def fold(self, node: ir.MultiFold) -> Mem:
        """The on-chip accumulator of a multifold, computed by top-level stages (once)."""
        found = self.hoisted.get(node)
        if found is not None:
            return found
        if ir.free_indices(node):
            raise UnsupportedError(
                "a multifold that depends on an enclosing index is not supported; make it a separate result", node.loc
            )
        size = math.prod(node.shape)
        if size > self.FOLD_LIMIT:
            raise UnsupportedError(
                f"a multifold accumulator lives on chip; {size} elements is more than the {self.FOLD_LIMIT} supported",
                node.loc,
            )
        acc = self.new_mem("fold", node.dtype, node.shape, "the accumulator of a multifold", node.loc)
        self.init_fold(acc, node.init)
        outer, local, sub = self.split(node.dims)
        for d in node.sdims:  # a slice is walked inside the pipe, whole
            if self.tile(d, d.extent) != d.extent:
                raise ScheduleError(
                    f"index '{ir.schedule_name(d.name)}' walks a slice of a multifold's accumulator "
                    f"inside one pipe; "
                    f"tile it by its whole extent ({d.extent}) or leave it out of the schedule",
                    node.loc,
                )
        if node.op.expr is not None:
            self.check_index_order(node.dims, "the custom multifold op folds in index order", node.loc)
        self.hoisted[node] = acc
        members = [(node, acc, {})]
        for other in self.fold_partners(node):  # folds over the same loops: one loop for all
            if other in self.hoisted:  # lowered meanwhile (by a partner's init)
                continue
            other_acc = self.new_mem("fold", other.dtype, other.shape, "the accumulator of a multifold", other.loc)
            self.init_fold(other_acc, other.init)
            self.hoisted[other] = other_acc
            members.append((other, other_acc, {o.name: ir.Index(d.name) for o, d in zip(other.dims, node.dims)}))
        stages: list = []
        memo: dict = {}  # reductions the folds share (k-means' nearest centroid) are computed once
        lowered = []
        for m, m_acc, rename in members:
            _, slices, ssub = self.split(m.sdims, whole=True)
            counters = local + slices
            exprs = [
                self.extract(ir.subst_indices(ir.subst_indices(e, rename), {**sub, **ssub}), counters, stages, memo)
                for e in m.idx + (m.value,)
            ]
            lowered.append((m, m_acc, counters, exprs))
        tiled = self.tile_reads_all([e for *_, exprs in lowered for e in exprs], stages)
        for m, m_acc, counters, exprs in lowered:
            *idx, value = tiled[: len(exprs)]
            tiled = tiled[len(exprs) :]
            write = Write(m_acc, tuple(idx), value, m.op, ir.Const(0, bool_), m.checked)
            stages.append(Pipe(tuple(counters), (write,)))
        self.top.extend([self.loop(outer, stages)] if outer else stages)
        return acc

    def fold_partners(self, node: ir.MultiFold) -> list:
        """The program's other multifolds that can share `node`'s loop: not lowered yet, closed,
        independent of it (neither reads the other, nor starts from it), over dims of the same
        extents, tiles and lanes, with builtin ops (each slice of a value is walked inside its
        own pipe)."""
        out: list = []
        if node.op.expr is not None:
            return out
        for other in getattr(self, "multifolds", ()):
            if other is node or other in self.hoisted or ir.free_indices(other) or other.op.expr is not None:
                continue
            if len(other.dims) != len(node.dims) or math.prod(other.shape) > self.FOLD_LIMIT:
                continue
            same = all(
                (o.extent, self.tile(o), self.lanes(o)) == (d.extent, self.tile(d), self.lanes(d))
                for o, d in zip(other.dims, node.dims)
            )
            whole = all(self.tile(d, d.extent) == d.extent for d in other.sdims)  # else: its own error
            # neither reads the other (in its body or its init), nor any partner chosen before
            independent = all(f not in set(ir.walk(other)) and other not in set(ir.walk(f)) for f in [node, *out])
            if same and whole and independent:
                out.append(other)
        return out

    def materialize(self, node: ir.Map) -> Mem:
        """An intermediate Map stored whole on chip (passes/fuse.py decides which), computed
        once, by top-level stages, before everything that reads it."""
        found = self.hoisted.get(node)
        if found is not None:
            return found
        mem = self.new_mem("map", node.dtype, node.shape, "an intermediate array", node.loc)
        outer, local, sub = self.split(node.dims)  # tiled and laned as the schedule says
        stages: list = []
        body = self.extract(ir.subst_indices(node.body, sub), local, stages)
        body = self.tile_reads(body, stages)
        stages.append(Pipe(tuple(local), (Write(mem, tuple(sub[d.name] for d in node.dims), body),)))
        self.top.extend([self.loop(outer, stages)] if outer else stages)
        self.hoisted[node] = mem
        return mem

    def init_fold(self, acc: Mem, init: ir.ArrayNode) -> None:
        """Fill the accumulator with the multifold's starting array."""
        if isinstance(init, ir.Input):
            self.top.append(Load(self.inputs[init.name], acc, tuple(ir.Const(0, int64) for _ in init.shape)))
            return
        if isinstance(init, ir.MultiFold):  # another multifold's result: copied element by element
            dims = tuple(ir.Dim(f"%init{k}", n) for k, n in enumerate(init.shape))
            init = ir.Map(dims, ir.Read(init, tuple(ir.Index(d.name) for d in dims)), loc=init.loc)
        init = ir.unique_binders(fuse(init))
        outer, local, sub = self.split(init.dims, whole=True)
        stages: list = []
        body = self.extract(ir.subst_indices(init.body, sub), local, stages)
        body = self.tile_reads(body, stages)
        stages.append(Pipe(tuple(local), (Write(acc, self.local_index(init.dims, local), body),)))
        self.top.extend(stages)

    def lower_reduce(self, r: ir.Reduce, ctx_local: list, stages: list) -> ir.Expr:
        free = ir.free_indices(r)
        if not free:
            return self.hoist(r)
        dep = [c for c in ctx_local if c.name in free]
        acc, inner = self.reduce_loop(r, dep, "acc")
        stages.extend(inner)
        return ir.MemRead(acc, tuple(ir.Index(c.name) for c in dep))

    def hoist(self, r: ir.Reduce) -> ir.Expr:
        found = self.hoisted.get(r)
        if found is None:
            acc, loop = self.reduce_loop(r, [], "acc")
            self.top.extend(loop)
            found = self.hoisted[r] = ir.MemRead(acc, ())
        return found

    def reduce_loop(self, r: ir.Reduce, dep: list, stem: str):
        """The stages folding `r` into a new accumulator indexed by the counters `dep`:
        one Loop over the tile counters, or the bare stages when there is no tile counter."""
        self.check_fold_order(r)
        outer, local, sub = self.split(r.dims)
        stages: list = []
        # the reduction's own counters run outermost, so consecutive iterations update
        # different accumulator elements (no read-modify-write hazard in the pipe)
        counters = local + list(dep)
        expr = self.extract(ir.subst_indices(r.body, sub), counters, stages)
        expr = self.tile_reads(expr, stages)
        acc = self.new_mem(stem, r.dtype, tuple(c.extent for c in dep), "the accumulator of a reduction", r.loc)
        first = self.first_iteration(outer + local)
        idx = tuple(ir.Index(c.name) for c in dep)
        stages.append(Pipe(tuple(counters), (Write(acc, idx, expr, r.op, first),)))
        if not outer:
            return acc, stages
        return acc, [self.loop(outer, stages)]

    def check_fold_order(self, r: ir.Reduce) -> None:
        """Builtin ops do not care about the order of a fold (they commute); a custom op is
        only promised associativity."""
        if r.op.expr is not None:
            self.check_index_order(r.dims, "the custom reduce op folds in index order", r.loc)
