"""Group-bys, filters and flatmaps, for the lowering (passes/lower.py): their on-chip state (a
Group in a content-addressed memory, or values and a count), filled by top-level stages once,
one element per cycle, in index order.
"""

from __future__ import annotations

from .. import ir
from ..errors import ScheduleError, UnsupportedError
from ..lang.dtypes import int64
from ..loops import AppendWrite, Group, GroupWrite, Pipe


class Collections:
    """Mixed into the lowering: needs the Tiles and Reductions methods, `top`, `collected`,
    `new_mem` and `loop`."""

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
            raise UnsupportedError(
                "a group-by, filter or flatmap inside another pattern is not supported; make it a separate result",
                node.loc,
            )
        what = "hw.groupby_fold" if node.kind == "group" else "hw.filter / hw.flatmap"
        for d in node.dims:
            if self.lanes(d) > 1:
                raise ScheduleError(
                    f"{what} takes one element per cycle; par on '{ir.schedule_name(d.name)}' is not supported",
                    node.loc,
                )
        if node.capacity > self.FOLD_LIMIT:
            raise UnsupportedError(
                f"{what} keeps its results on chip; {node.capacity} is more than the {self.FOLD_LIMIT} supported",
                node.loc,
            )
        self.check_index_order(
            node.dims,
            "hw.groupby_fold orders its groups by first appearance in index order"
            if node.kind == "group"
            else "hw.filter / hw.flatmap keeps its values in index order",
            node.loc,
        )
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
        exprs = [
            self.extract(ir.subst_indices(e, sub), local, stages) for e in key + list(node.values) + list(node.conds)
        ]
        exprs = self.tile_reads_all(exprs, stages)
        first = self.first_iteration(outer + local)
        n_values = len(node.values)
        if isinstance(state, Group):
            write = GroupWrite(state, exprs[0], tuple(exprs[1 : 1 + n_values]), first)
        else:
            write = AppendWrite(values, count, tuple(exprs[n_values:]), tuple(exprs[:n_values]), first)
        stages.append(Pipe(tuple(local), (write,)))
        self.top.extend([self.loop(outer, stages)] if outer else stages)
        self.collected[node] = state
        return state
