"""Tiles and lanes, for the lowering (passes/lower.py): strip-mining an index by its tile size
into an outer counter over tiles and a local counter inside one (with the schedule's lanes),
the tile copies that replace reads of DRAM arrays, and the check that a tiling keeps index
order where a pattern needs it.

Reads of one array whose subscripts differ only in local counters and constants share a tile
(the halo of `x[i]`, `x[i + 1]`), loaded by a Load stage before the pipe that reads it. A
renamed copy of an index (`i.1`, see ir.schedule_name) takes its schedule from `i`.
"""

from __future__ import annotations

from .. import ir
from ..affine import Affine, to_affine
from ..errors import ScheduleError
from ..lang.dtypes import bool_, int64
from ..loops import Counter, Load, Parallel, _expr_str


class Tiles:
    """Mixed into the lowering: needs `tiles`, `par`, `local`, `inputs` and `new_mem`."""

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

    def local_index(self, dims, local) -> tuple:
        names = {c.name for c in local}
        idx = []
        for d in dims:
            name = next((n for n in (d.name, f"{d.name}.l") if n in names), None)
            idx.append(ir.Index(name) if name else ir.Const(0, int64))
        return tuple(idx)

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
                    f"'{name}' by its whole extent ({d.extent}), or leave '{before}' untiled",
                    loc,
                )
            if t > 1 and split_before is None:
                split_before = d

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
            earlier = [
                ld
                for st in stages
                for ld in (st.children if isinstance(st, Parallel) else (st,))
                if isinstance(ld, Load) and ld.dram == dram and ld.origin == origin and ld.mem.shape == shape
            ]
            if earlier:
                mem = earlier[0].mem
            else:
                mem = self.new_mem(f"{name}_tile", dram.dtype, shape, f"the tile of '{name}'", members[0][0].loc)
                loads.append(Load(dram, mem, origin))
            for rd, lp in members:
                text = rd.text or f"{name}[{', '.join(_expr_str(i) for i in rd.idx)}]"
                mapping[rd] = ir.MemRead(
                    mem, tuple((p + Affine.of({}, -lo)).to_expr() for p, lo in zip(lp, lows)), text
                )
        if loads:
            stages.append(loads[0] if len(loads) == 1 else Parallel(tuple(loads)))
        memo: dict = {}
        return [ir.transform(e, lambda n: mapping.get(n) if isinstance(n, ir.Read) else None, memo) for e in exprs]
