"""Fuse: replace every read of a Map by the Map's body at that index.

After this pass the only array nodes left under a result are Inputs: an intermediate Map is
recomputed where it is used instead of being stored (reductions it contains are shared by
structural equality). The golden model's answer is unchanged: reading `m[idx]` means exactly
`m.body` with `m.dims` set to `idx`.
"""

from __future__ import annotations

from .. import ir


def fuse(node: ir.Node) -> ir.Node:
    """`node` with every Read of a Map inlined (recursively)."""
    memo: dict = {}

    def go(n: ir.Node) -> ir.Node:
        found = memo.get(n)
        if found is not None:
            return found
        if isinstance(n, ir.Read) and isinstance(n.src, ir.Map):
            body = go(n.src.body)
            idx = tuple(go(i) for i in n.idx)
            out = go(ir.subst_indices(body, {d.name: i for d, i in zip(n.src.dims, idx)}))
        else:
            out = ir.rebuild(n, go)
        memo[n] = out
        return out

    return go(node)
