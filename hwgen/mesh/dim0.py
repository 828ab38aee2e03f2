"""Collectives along other dimensions, built as collectives along dimension 0 between local
transposes (the hardware's collectives move blocks along dimension 0: runs of words of a
row-major array).

`along_dim0(out, extents)` rewrites a shard_map body's result `out`: each all_gather along
axis a != 0, psum_scatter along dimension d != 0 and all_to_all splitting and concatenating
along one axis s != 0 becomes

    all_gather, tiled      moveaxis(all_gather(moveaxis(x, a, 0), axis=0), 0, a)
    all_gather, untiled    moveaxis(all_gather(x, axis=0), 0, a)
    psum_scatter, tiled    moveaxis(psum_scatter(moveaxis(x, d, 0), dim=0), 0, d)
    psum_scatter, untiled  psum_scatter(moveaxis(x, d, 0), dim=0)
    all_to_all             moveaxis(all_to_all(moveaxis(x, s, 0), 0, 0), 0, s)

each moveaxis a Map (a copy with its indices permuted, numpy's moveaxis) whose index names,
`%dim0_<k>_<d>`, are added to `extents`. An all_to_all splitting along s and concatenating
along c != s becomes all_to_all(moveaxis(x, s, 0), 0, 0), then, untiled, moveaxis(., 0, c),
and tiled, the concatenation along c of its p received blocks (block q: rows q*B .. q*B+B-1,
B = x.shape[s] / p), each a Map. The results are those of the original collective (the
golden model evaluates the original).
"""

from __future__ import annotations

from .. import ir
from ..lang.dtypes import int64


def along_dim0(out: ir.ArrayNode, extents: dict) -> ir.ArrayNode:
    count = [0]

    def moveaxis(x: ir.ArrayNode, src: int, dst: int) -> ir.ArrayNode:
        if src == dst:
            return x
        order = [d for d in range(len(x.shape)) if d != src]
        order.insert(dst, src)  # result axis k is x's axis order[k]
        dims = tuple(ir.Dim(f"%dim0_{count[0]}_{k}", x.shape[a]) for k, a in enumerate(order))
        count[0] += 1
        extents.update((d.name, d.extent) for d in dims)
        idx = [None] * len(order)
        for k, a in enumerate(order):
            idx[a] = ir.Index(dims[k].name)
        return ir.Map(dims, ir.Read(x, tuple(idx)))

    def rewrite(node):
        if not isinstance(node, ir.Collective):
            return None
        params = dict(node.params)
        kind, x = node.kind, node.operand
        if kind == "all_gather" and params["axis"]:
            a = params["axis"]
            operand = moveaxis(x, a, 0) if params["tiled"] else x
        elif kind == "psum_scatter" and params["dim"]:
            a = params["dim"]
            operand = moveaxis(x, a, 0)
        elif kind == "all_to_all" and params["split"] != params["concat"]:
            return between_axes(node, x, params["split"], params["concat"], params["tiled"])
        elif kind == "all_to_all" and params["split"]:
            a = params["split"]
            operand = moveaxis(x, a, 0)
        else:
            return None
        zeroed = {k: 0 if k in ("axis", "dim", "split", "concat") else v for k, v in params.items()}
        shape = list(node.shape)
        moved_back = not (kind == "psum_scatter" and not params["tiled"])
        if moved_back:
            shape.insert(0, shape.pop(a))
        coll = ir.Collective(kind, node.axes, tuple(sorted(zeroed.items())), operand, tuple(shape), loc=node.loc)
        return moveaxis(coll, 0, a) if moved_back else coll

    def between_axes(node, x, split: int, concat: int, tiled: bool):
        """An all_to_all splitting along `split` and concatenating along `concat`: along
        dimension 0 of x with `split` moved first; untiled, the received blocks moved to
        `concat`; tiled, part q of the result along `concat` is the q-th received block."""
        moved = moveaxis(x, split, 0)
        params = (("concat", 0), ("split", 0), ("tiled", tiled))
        coll = ir.Collective("all_to_all", node.axes, params, moved, moved.shape, loc=node.loc)
        if not tiled:
            return moveaxis(coll, 0, concat)
        block, width = node.shape[split], x.shape[concat]  # a received block's rows; c's part
        parts = []
        for q in range(moved.shape[0] // block):
            shape = list(node.shape)
            shape[concat] = width
            dims = tuple(ir.Dim(f"%dim0_{count[0]}_{k}", e) for k, e in enumerate(shape))
            count[0] += 1
            extents.update((d.name, d.extent) for d in dims)
            rows = ir.Binary("add", ir.Index(dims[split].name), ir.Const(q * block, int64), int64)
            rest = tuple(ir.Index(d.name) for k, d in enumerate(dims) if k != split)
            parts.append(ir.Map(dims, ir.Read(coll, (rows,) + rest)))
        return ir.Concat(tuple(parts), concat, loc=node.loc)

    return ir.transform(out, rewrite)
