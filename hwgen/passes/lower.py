"""Lower: the fused pattern IR and a schedule become the loop IR (loops.py).

For each result, and for each reduction nested in it:
1. strip-mine every index `d` by its tile size T: an outer counter over tiles (`d` or `d.t`)
   and a local counter inside the tile (`d` or `d.l`); `d` becomes `outer * T + local`;
2. a reduction nested in a body becomes its own loop, run as an earlier stage, that folds into
   an accumulator memory indexed by the enclosing local counters it depends on; a reduction
   that depends on no index at all is computed once, before everything that uses it;
3. every array read becomes a read of a tile copy: reads of one array whose subscripts differ
   only in local counters and constants share a tile (the halo of `x[i]`, `x[i + 1]`), loaded
   by a Load stage before the pipe that reads it;
4. the body becomes a Pipe over the local counters writing a result tile, stored by a Store.

Untiled indices have T = 1: the paper's baseline is the same structure with one-element tiles.
"""

from __future__ import annotations

import itertools
import math

from .. import ir
from ..affine import Affine, to_affine
from ..lang.dtypes import bool_, int64
from ..errors import ScheduleError, UnsupportedError
from ..loops import (AppendWrite, Counter, Dram, Group, GroupWrite, Load, Loop, LoopProgram, Mem, Parallel,
                     Pipe, ScalarOut, Store, Write, _expr_str)
from ..lang.program import Program
from ..lang.signature import raw_dtype
from .fuse import fuse


def lower(program: Program, tiles: dict, par: dict | None = None) -> LoopProgram:
    """The loop program of `program` with `tiles` (index name -> tile size; default 1) and
    `par` (index name -> lanes of its in-tile counter). Loops come out sequential
    (passes/metapipeline.py decides which overlap)."""
    return _Lowerer(program, tiles, par or {}).run()


class _Lowerer:
    def __init__(self, program: Program, tiles: dict, par: dict):
        self.program = program
        self.tiles = tiles
        self.par = par
        self.extents = program.extents
        self.mems: list[Mem] = []
        self.top: list = []
        self.hoisted: dict = {}
        self.collected: dict = {}  # Collect -> Group, or (values, count) mems of a compaction
        self.local: dict[str, int] = {}  # local (in-tile) counter name -> extent
        self._ids = itertools.count()
        self.inputs = {p.name: Dram(p.name, raw_dtype(p.dtype), p.shape, "in") for p in program.params if p.is_array}

    def run(self) -> LoopProgram:
        drams = list(self.inputs.values())
        scalar_outs = []
        for result in self.program.results:
            node = ir.unique_binders(fuse(result.node))
            if isinstance(node, ir.Map):
                dram = Dram(result.port.name, node.dtype, node.shape, "out")
                drams.append(dram)
                self.top.append(self.lower_map(dram, node))
            elif isinstance(node, ir.MultiFold):
                dram = Dram(result.port.name, node.dtype, node.shape, "out")
                drams.append(dram)
                acc = self.fold(node)
                self.top.append(Store(acc, dram, tuple(ir.Const(0, int64) for _ in node.shape), node.shape))
            elif isinstance(node, ir.Part):
                dram = Dram(result.port.name, node.dtype, node.shape, "out")
                drams.append(dram)
                mem, count = self.collect_part(node)
                limit = ir.MemRead(count, ()) if node.collect.kind == "append" else None
                self.top.append(Store(mem, dram, tuple(ir.Const(0, int64) for _ in node.shape), node.shape, limit))
            else:
                scalar_outs.append(ScalarOut(result.port.name, self.lower_scalar(node)))
        root = Loop((), tuple(self.top))
        params = tuple(p for p in self.program.params if not p.is_array)
        groups = tuple(g for g in self.collected.values() if isinstance(g, Group))
        return LoopProgram(self.program.name, params, tuple(drams), tuple(self.mems), tuple(scalar_outs), root,
                           groups)

    # -------------------------------------------------------------- helpers

    def new_mem(self, stem: str, dtype, shape, label: str = "", loc=None) -> Mem:
        mem = Mem(f"{stem}{next(self._ids)}", dtype, tuple(shape), label or stem, loc)
        self.mems.append(mem)
        return mem

    def tile(self, d: ir.Dim, default: int = 1) -> int:
        """The schedule's tile size of `d` (a renamed copy of an index shares its schedule)."""
        return self.tiles.get(ir.schedule_name(d.name), default)

    def lanes(self, d: ir.Dim) -> int:
        return self.par.get(ir.schedule_name(d.name), 1)

    def split(self, dims, whole: bool = False) -> tuple:
        """Strip-mine `dims`: (outer counters, local counters, name -> global index Expr).
        Untiled dims have tiles of 1, or of their whole extent when `whole`."""
        outer, local, sub = [], [], {}
        for d in dims:
            t = self.tile(d, d.extent if whole else 1)
            tiles = d.extent // t
            o = Counter(d.name if t == 1 else f"{d.name}.t", tiles) if tiles > 1 else None
            li = Counter(d.name if tiles == 1 else f"{d.name}.l", t, self.lanes(d)) if t > 1 else None
            terms = {}
            if o is not None:
                outer.append(o)
                terms[o.name] = t
            if li is not None:
                local.append(li)
                self.local[li.name] = t
                terms[li.name] = 1
            sub[d.name] = Affine.of(terms, 0).to_expr()
        return outer, local, sub

    @staticmethod
    def first_iteration(counters) -> ir.Expr:
        """True in the first iteration of `counters` (all zero)."""
        cond: ir.Expr = ir.Const(1, bool_)
        for c in counters:
            test = ir.Binary("eq", ir.Index(c.name), ir.Const(0, int64), bool_)
            cond = test if isinstance(cond, ir.Const) else ir.Binary("and", cond, test, bool_)
        return cond

    # -------------------------------------------------------------- results

    def lower_map(self, dram: Dram, node: ir.Map) -> Loop:
        outer, local, sub = self.split(node.dims)
        stages: list = []
        expr = self.extract(ir.subst_indices(node.body, sub), local, stages)
        expr = self.tile_reads(expr, stages)
        tile_shape = tuple(self.tile(d) for d in node.dims)
        local_idx = self.local_index(node.dims, local)
        squeezed = tuple(i for i in local_idx if isinstance(i, ir.Index))
        if (isinstance(expr, ir.MemRead) and expr.idx == squeezed
                and expr.mem.shape == tuple(t for t in tile_shape if t > 1)):
            out = expr.mem  # the body is exactly an accumulator: store it directly
        else:
            out = self.new_mem(f"{dram.name}_tile", node.dtype, tile_shape, f"the result tile of '{dram.name}'", node.loc)
            stages.append(Pipe(tuple(local), (Write(out, local_idx, expr),)))
        origin = []
        for d in node.dims:
            t = self.tile(d)
            o = next((c for c in outer if c.name in (d.name, f"{d.name}.t")), None)
            origin.append(Affine.of({o.name: t}, 0).to_expr() if o else ir.Const(0, int64))
        stages.append(Store(out, dram, tuple(origin), tile_shape))
        return self.loop(outer, stages)

    @staticmethod
    def loop(counters, stages) -> Loop:
        """A (sequential) loop over `counters` running `stages`."""
        return Loop(tuple(counters), tuple(stages))

    def local_index(self, dims, local) -> tuple:
        names = {c.name for c in local}
        idx = []
        for d in dims:
            name = next((n for n in (d.name, f"{d.name}.l") if n in names), None)
            idx.append(ir.Index(name) if name else ir.Const(0, int64))
        return tuple(idx)

    def lower_scalar(self, expr: ir.Expr) -> Mem:
        stages: list = []
        expr = self.extract(expr, [], stages)
        expr = self.tile_reads(expr, stages)
        if isinstance(expr, ir.MemRead) and expr.mem.shape == ():
            self.top.extend(stages)
            return expr.mem
        mem = self.new_mem("res", expr.dtype, (), "a scalar result")
        stages.append(Pipe((), (Write(mem, (), expr),)))
        self.top.extend(stages)
        return mem

    # -------------------------------------------------------------- reductions

    def extract(self, expr: ir.Expr, ctx_local: list, stages: list) -> ir.Expr:
        """`expr` with each outermost Reduce replaced by a read of its accumulator; the loops
        computing them are appended to `stages` (or hoisted to the top when closed)."""
        memo: dict = {}

        def go(e):
            found = memo.get(e)
            if found is not None:
                return found
            if isinstance(e, ir.Reduce):
                out = self.lower_reduce(e, ctx_local, stages)
            elif isinstance(e, ir.Read) and isinstance(e.src, ir.MultiFold):
                acc = self.fold(e.src)  # computed once, before everything that reads it
                out = ir.MemRead(acc, tuple(go(i) for i in e.idx), e.text)
            elif isinstance(e, ir.Read) and isinstance(e.src, ir.Part):
                mem, _ = self.collect_part(e.src)
                out = ir.MemRead(mem, tuple(go(i) for i in e.idx), e.text)
            elif isinstance(e, ir.Count):
                out = ir.MemRead(self.collect_part(ir.Part(e.collect, "values"))[1], ())
            else:
                out = ir.rebuild(e, go)
            memo[e] = out
            return out

        return go(expr)

    FOLD_LIMIT = 1 << 16

    def fold(self, node: ir.MultiFold) -> Mem:
        """The on-chip accumulator of a multifold, computed by top-level stages (once)."""
        found = self.hoisted.get(node)
        if found is not None:
            return found
        if ir.free_indices(node):
            raise UnsupportedError("a multifold that depends on an enclosing index is not supported; "
                                   "make it a separate result", node.loc)
        size = math.prod(node.shape)
        if size > self.FOLD_LIMIT:
            raise UnsupportedError(
                f"a multifold accumulator lives on chip; {size} elements is more than the "
                f"{self.FOLD_LIMIT} supported", node.loc)
        acc = self.new_mem("fold", node.dtype, node.shape, "the accumulator of a multifold", node.loc)
        self.init_fold(acc, node.init)
        outer, local, sub = self.split(node.dims)
        for d in node.sdims:  # a slice is walked inside the pipe, whole
            if self.tile(d, d.extent) != d.extent:
                raise ScheduleError(
                    f"index '{ir.schedule_name(d.name)}' walks a slice of a multifold's accumulator "
                    f"inside one pipe; "
                    f"tile it by its whole extent ({d.extent}) or leave it out of the schedule", node.loc)
        if node.op.expr is not None:
            self.check_index_order(node.dims, "the custom multifold op folds in index order", node.loc)
        _, slices, ssub = self.split(node.sdims, whole=True)
        sub = {**sub, **ssub}
        stages: list = []
        counters = local + slices
        exprs = [self.extract(ir.subst_indices(e, sub), counters, stages) for e in node.idx + (node.value,)]
        *idx, value = self.tile_reads_all(exprs, stages)
        write = Write(acc, tuple(idx), value, node.op, ir.Const(0, bool_))
        stages.append(Pipe(tuple(counters), (write,)))
        self.top.extend([self.loop(outer, stages)] if outer else stages)
        self.hoisted[node] = acc
        return acc

    def collect_part(self, part: ir.Part) -> tuple:
        """(the memory holding `part`, the count memory) of a group-by or compaction."""
        state = self.collect(part.collect)
        if isinstance(state, Group):
            return (state.keys if part.part == "keys" else state.values), state.count
        return state

    def collect(self, node: ir.Collect):
        """The on-chip state of a group-by (a Group) or a compaction ((values, count) mems),
        filled by top-level stages, once."""
        found = self.collected.get(node)
        if found is not None:
            return found
        if ir.free_indices(node):
            raise UnsupportedError("a group-by, filter or flatmap inside another pattern is not supported; "
                                   "make it a separate result", node.loc)
        what = "hw.groupby_fold" if node.kind == "group" else "hw.filter / hw.flatmap"
        for d in node.dims:
            if self.lanes(d) > 1:
                raise ScheduleError(f"{what} takes one element per cycle; par on "
                                    f"'{ir.schedule_name(d.name)}' is not supported", node.loc)
        if node.capacity > self.FOLD_LIMIT:
            raise UnsupportedError(f"{what} keeps its results on chip; {node.capacity} is more than "
                                   f"the {self.FOLD_LIMIT} supported", node.loc)
        self.check_index_order(node.dims, "hw.groupby_fold orders its groups by first appearance in index order"
                               if node.kind == "group" else "hw.filter / hw.flatmap keeps its values in index order",
                               node.loc)
        count = self.new_mem("count", int64, (), "a count", node.loc)
        if node.kind == "group":
            part = ir.Part(node, "values")
            keys = self.new_mem("keys", node.key.dtype, (node.capacity,), "the keys of a group-by", node.loc)
            values = self.new_mem("groups", node.value_dtype, part.shape, "the values of a group-by", node.loc)
            state = Group(f"group{len(self.collected)}", keys, values, count, node.op, node.capacity, node.loc)
        else:
            values = self.new_mem("kept", node.value_dtype, (node.capacity,), "the values kept by a filter", node.loc)
            state = (values, count)
        outer, local, sub = self.split(node.dims)
        stages: list = []
        key = [node.key] if node.key is not None else []
        exprs = [self.extract(ir.subst_indices(e, sub), local, stages)
                 for e in key + list(node.values) + list(node.conds)]
        exprs = self.tile_reads_all(exprs, stages)
        first = self.first_iteration(outer + local)
        n_values = len(node.values)
        if isinstance(state, Group):
            write = GroupWrite(state, exprs[0], tuple(exprs[1:1 + n_values]), first)
        else:
            write = AppendWrite(values, count, tuple(exprs[n_values:]), tuple(exprs[:n_values]), first)
        stages.append(Pipe(tuple(local), (write,)))
        self.top.extend([self.loop(outer, stages)] if outer else stages)
        self.collected[node] = state
        return state

    def init_fold(self, acc: Mem, init: ir.ArrayNode) -> None:
        """Fill the accumulator with the multifold's starting array."""
        if isinstance(init, ir.Input):
            self.top.append(Load(self.inputs[init.name], acc, tuple(ir.Const(0, int64) for _ in init.shape)))
            return
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

    def check_index_order(self, dims, what: str, loc) -> None:
        """Tiles visit a multi-dimensional domain tile by tile, which is its row-major order
        only if no dimension after a split one is itself split into several tiles. `what` (a
        pattern that needs index order: a custom fold op, a filter's values, a group-by's keys)
        gets a ScheduleError otherwise."""
        split_before = None
        for d in dims:
            t = self.tile(d)
            if split_before is not None and d.extent // t > 1:
                before, name = ir.schedule_name(split_before.name), ir.schedule_name(d.name)
                raise ScheduleError(
                    f"{what}, but tiling '{before}' by {self.tile(split_before)} and also "
                    f"splitting '{name}' into tiles would visit the indices tile by tile; tile "
                    f"'{name}' by its whole extent ({d.extent}), or leave '{before}' untiled", loc
                )
            if t > 1 and split_before is None:
                split_before = d

    # -------------------------------------------------------------- tiles

    def tile_reads(self, expr: ir.Expr, stages: list) -> ir.Expr:
        """Replace reads of DRAM arrays by reads of tile copies; append their Load stage."""
        return self.tile_reads_all([expr], stages)[0]

    def tile_reads_all(self, exprs: list, stages: list) -> list:
        """tile_reads for several expressions of one pipe (they share tiles)."""
        groups: dict = {}
        seen: set = set()
        reads = [n for e in exprs for n in ir.walk(e, seen) if isinstance(n, ir.Read)]
        for rd in reads:
            outer_parts, local_parts = [], []
            for e in rd.idx:
                aff = to_affine(e)
                assert aff is not None, "subscripts were checked affine when traced"
                outer_parts.append(Affine.of({n: c for n, c in aff.terms if n not in self.local}, 0))
                local_parts.append(Affine.of({n: c for n, c in aff.terms if n in self.local}, aff.const))
            key = (rd.src.name, tuple(outer_parts))
            groups.setdefault(key, []).append((rd, local_parts))
        if not groups:
            return list(exprs)
        loads, mapping = [], {}
        for (name, outer_parts), members in groups.items():
            lows, highs = [], []
            for axis in range(len(outer_parts)):
                ranges = [lp[axis].value_range(self.local) for _, lp in members]
                lows.append(min(lo for lo, _ in ranges))
                highs.append(max(hi for _, hi in ranges))
            dram = self.inputs[name]
            # an earlier stage of this loop body that loaded the same tile shares it (N-buffered)
            origin = tuple((op + Affine.of({}, lo)).to_expr() for op, lo in zip(outer_parts, lows))
            shape = tuple(h - lo + 1 for lo, h in zip(lows, highs))
            earlier = [ld for st in stages for ld in (st.children if isinstance(st, Parallel) else (st,))
                       if isinstance(ld, Load) and ld.dram == dram and ld.origin == origin and ld.mem.shape == shape]
            if earlier:
                mem = earlier[0].mem
            else:
                mem = self.new_mem(f"{name}_tile", dram.dtype, shape, f"the tile of '{name}'", members[0][0].loc)
                loads.append(Load(dram, mem, origin))
            for rd, lp in members:
                text = rd.text or f"{name}[{', '.join(_expr_str(i) for i in rd.idx)}]"
                mapping[rd] = ir.MemRead(mem, tuple((p + Affine.of({}, -lo)).to_expr() for p, lo in zip(lp, lows)), text)
        if loads:
            stages.append(loads[0] if len(loads) == 1 else Parallel(tuple(loads)))
        memo: dict = {}
        return [ir.transform(e, lambda n: mapping.get(n) if isinstance(n, ir.Read) else None, memo) for e in exprs]
