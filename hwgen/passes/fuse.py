"""Fuse: replace reads of a Map by the Map's body at that index, unless recomputing would
repeat work that storing the Map once saves.

A read `m[idx]` is inlined (`m.body` with `m.dims` set to `idx`): the intermediate Map is
recomputed where it is used instead of being stored (reductions it contains that depend on no
index are shared by structural equality). A read is kept, and the Map stored whole on chip
(passes/reductions.py `materialize`), when all of these hold:

- the Map contains a reduction (its elements are expensive to recompute);
- the read sits inside a binding (a map, reduction or fold) whose index it does not use, so
  recomputing would compute each element once per value of that index (a layer applied to
  the previous layer's output, `h(h(x))`, reads `h[k]` inside `sum over k` inside `map over i`);
- the Map depends on no enclosing index and has at most STORE_LIMIT elements.

After this pass the array nodes left under a result are Inputs and the stored Maps (whose own
bodies are fused the same way). The golden model's answer is unchanged: reading `m[idx]`
means exactly `m.body` with `m.dims` set to `idx`, computed once or many times.
"""

from __future__ import annotations

import dataclasses
import math

from .. import ir

STORE_LIMIT = 1 << 16  # elements of a stored intermediate Map (an on-chip memory)


def fuse(node: ir.Node) -> ir.Node:
    """`node` with every Read of a Map inlined (recursively), or kept where storing pays."""
    memo: dict = {}

    def go(n: ir.Node, bound: frozenset) -> ir.Node:
        key = (n, bound)
        found = memo.get(key)
        if found is not None:
            return found
        if isinstance(n, ir.Read) and isinstance(n.src, ir.Map):
            idx = tuple(go(i, bound) for i in n.idx)
            if worth_storing(n.src, idx, bound):
                src = ir.rebuild(n.src, lambda c: go(c, frozenset(d.name for d in n.src.dims)))
                out = dataclasses.replace(n, src=src, idx=idx)
            else:
                out = go(ir.subst_indices(n.src.body, {d.name: i for d, i in zip(n.src.dims, idx)}), bound)
        elif isinstance(n, ir.MultiFold):  # init is outside the binding
            inner = bound | {d.name for d in n.dims + n.sdims}
            out = ir.rebuild(n, lambda c: go(c, bound if c is n.init else inner))
        elif isinstance(n, (ir.Map, ir.Reduce, ir.Collect)):
            inner = bound | {d.name for d in n.dims}
            out = ir.rebuild(n, lambda c: go(c, inner))
        else:
            out = ir.rebuild(n, lambda c: go(c, bound))
        memo[key] = out
        return out

    return go(node, frozenset())


def worth_storing(m: ir.Map, idx: tuple, bound: frozenset) -> bool:
    """Whether a read `m[idx]` under the bound indices `bound` should read a stored `m`."""
    if math.prod(m.shape) > STORE_LIMIT or ir.free_indices(m):
        return False
    if not any(isinstance(x, ir.Reduce) for x in ir.walk(m.body)):
        return False
    used = frozenset().union(*[ir.free_indices(i) for i in idx])
    return bool(bound - used)
