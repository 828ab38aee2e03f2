"""The golden model: the meaning of the pattern IR, executed with numpy.

An expression is evaluated in a *frame*: an ordered list of index names, each owning one numpy
axis. Values are arrays with one axis per frame entry (size 1 where they do not depend on it),
so a Map of a Reduce is one broadcast computation. Every operation is computed in the node's
dtype with numpy's own ufuncs, so wrap-around, floor division, shifts and comparisons are
numpy's by construction. Large reductions are evaluated in chunks to bound memory; chunks are
combined in index order, so a custom (associative, not necessarily commutative) op sees its
operands in order.
"""

from __future__ import annotations

import numpy as np

from . import ir
from .errors import CapacityError, IndexRangeError
from .lang.dtypes import DType, bool_, int64

CHUNK_ELEMENTS = 1 << 23

_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shl": np.left_shift,
    "shr": np.right_shift,
    "max": np.maximum,
    "min": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
_UNARY = {"neg": np.negative, "invert": np.invert, "abs": np.abs}


class Frame:
    """Index names owning an axis and their extents; `fixed` index values (scalars, such as
    the counters of enclosing loops); scalar parameters; on-chip memories by name."""

    def __init__(self, names=(), extents=(), params=None, mems=None, fixed=None):
        self.names = tuple(names)
        self.extents = tuple(extents)
        self.params = params or {}
        self.mems = mems or {}
        self.fixed = fixed or {}

    def extend(self, dims) -> "Frame":
        return Frame(
            self.names + tuple(d.name for d in dims),
            self.extents + tuple(d.extent for d in dims),
            self.params,
            self.mems,
            self.fixed,
        )


class Evaluator:
    """Evaluates expressions of one kernel; array nodes without free indices are memoised."""

    def __init__(self, args: dict):
        self.args = args
        self.arrays: dict = {}

    def array(self, node: ir.ArrayNode) -> np.ndarray:
        """The whole value of an Input or a closed Map."""
        if isinstance(node, ir.Input):
            return self.args[node.name]
        found = self.arrays.get(node)
        if found is None:
            frame = Frame(params=self.args)
            if isinstance(node, ir.MultiFold):
                found = self.multifold(node)
            elif isinstance(node, ir.Part):
                found = self.collect(node.collect)[node.part]
            elif isinstance(node, ir.ShardOut):
                found = self.shard_map(node.shard_map)[node.index]
            elif isinstance(node, ir.Pipeline):
                from .mesh.pipeline import run_pipeline

                found = run_pipeline(node, self)
            elif isinstance(node, ir.Collective):
                raise TypeError("interp: a collective is evaluated by its shard_map (mesh/spmd.py)")
            elif isinstance(node, ir.Concat):
                found = np.concatenate([self.array(q) for q in node.parts], axis=node.axis)
            elif isinstance(node, ir.Roll):
                found = np.roll(self.array(node.x), int(np.ravel(self.expr(node.shift, frame))[0]), axis=0)
            else:
                found = self.eval_map(node, frame)
            self.arrays[node] = found
        return found

    def collect(self, node: ir.Collect) -> dict:
        """The parts ("keys", "values", "count") of a group-by or a compaction."""
        found = self.arrays.get(node)
        if found is not None:
            return found
        frame = Frame(params=self.args).extend(node.dims)
        shape = frame.extents
        flat = lambda e: np.broadcast_to(self.expr(e, frame), shape).ravel()  # noqa: E731
        values = [flat(v) for v in node.values]
        if node.kind == "group":
            keys = flat(node.key)
            uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            if len(uniq) > node.capacity:
                raise CapacityError(
                    f"hw.groupby_fold saw more than max_keys={node.capacity} distinct keys; raise max_keys", node.loc
                )
            rank = np.empty(len(uniq), dtype=np.int64)
            rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
            slots = rank[inverse]
            is_first = np.zeros(len(keys), dtype=bool)
            is_first[first] = True
            out_keys = np.zeros(node.capacity, dtype=node.key.dtype.np)
            out_keys[rank] = uniq
            columns = []
            for v in values:
                col = np.zeros(node.capacity, dtype=node.value_dtype.np)
                fold_into(self, col, slots, v, is_first, node.op, node.value_dtype)
                columns.append(col)
            out_values = columns[0] if len(columns) == 1 else np.stack(columns, axis=1)
            found = {"keys": out_keys, "values": out_values, "count": len(uniq)}
        else:
            conds = np.stack([flat(c).astype(bool) for c in node.conds], axis=1).ravel()
            kept = np.stack(values, axis=1).ravel()[conds]
            out = np.zeros(node.capacity, dtype=node.value_dtype.np)
            out[: len(kept)] = kept
            found = {"values": out, "count": len(kept)}
        self.arrays[node] = found
        return found

    def shard_map(self, node: ir.ShardMap) -> list:
        """The global results of a per-PE program: see mesh/spmd.py."""
        found = self.arrays.get(node)
        if found is None:
            from .mesh.spmd import run_shard_map

            found = run_shard_map(node, self)
            self.arrays[node] = found
        return found

    def multifold(self, node: ir.MultiFold) -> np.ndarray:
        """The accumulator after folding every (where, value) in index order; a subscript from
        data outside the accumulator is numpy's IndexError, here hw.IndexRangeError."""
        acc = np.array(self.array(node.init), copy=True)
        frame = Frame(params=self.args).extend(node.dims + node.sdims)
        shape = frame.extents
        idx = [np.broadcast_to(self.expr(i, frame), shape).ravel() for i in node.idx]
        for axis, (i, n) in enumerate(zip(idx, acc.shape)):
            bad = np.nonzero((i < 0) | (i >= n))[0]
            if len(bad):
                raise index_range_error(node, axis, int(i[bad[0]]), np.unravel_index(bad[0], shape), n)
        value = np.broadcast_to(self.expr(node.value, frame), shape).ravel()
        flat = np.ravel_multi_index(idx, acc.shape) if idx else np.zeros(len(value), dtype=np.int64)
        fold_into(self, acc.reshape(-1), flat, value, None, node.op, node.dtype)
        return acc

    def eval_map(self, node: ir.Map, frame: Frame) -> np.ndarray:
        inner = frame.extend(node.dims)
        value = self.expr(node.body, inner)
        return np.broadcast_to(value, inner.extents).copy()

    def expr(self, e: ir.Expr, frame: Frame) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._expr(e, frame, {})

    def _expr(self, e, frame: Frame, memo: dict) -> np.ndarray:
        found = memo.get(e)
        if found is not None:
            return found
        out = self._eval(e, frame, memo)
        memo[e] = out
        return out

    def _eval(self, e, frame: Frame, memo: dict) -> np.ndarray:
        ndim = len(frame.names)
        if isinstance(e, ir.Const):
            return np.full((1,) * ndim, e.value, dtype=e.dtype.np)
        if isinstance(e, ir.Param):
            return np.full((1,) * ndim, frame.params[e.name], dtype=e.dtype.np)
        if isinstance(e, ir.Index):
            return self._index(e, frame)
        if isinstance(e, (ir.Read, ir.MemRead)):
            return self._read(e, frame, memo)
        if isinstance(e, ir.Unary):
            return _UNARY[e.op](self._expr(e.a, frame, memo)).astype(e.dtype.np, copy=False)
        if isinstance(e, ir.Binary):
            a, b = self._expr(e.a, frame, memo), self._expr(e.b, frame, memo)
            if e.dtype == bool_ and e.op in ("and", "or", "xor") and a.dtype == np.bool_:
                return _BINARY[e.op](a, b)
            return _BINARY[e.op](a, b).astype(e.dtype.np, copy=False)
        if isinstance(e, ir.Cast):
            return self._expr(e.a, frame, memo).astype(e.dtype.np)
        if isinstance(e, ir.Select):
            c = self._expr(e.cond, frame, memo)
            return np.where(c, self._expr(e.a, frame, memo), self._expr(e.b, frame, memo)).astype(e.dtype.np)
        if isinstance(e, ir.Count):
            return np.full((1,) * ndim, self.collect(e.collect)["count"], dtype=np.int64)
        if isinstance(e, ir.Table):
            table = np.asarray(e.values, dtype=e.dtype.np)
            return table[self._expr(e.index, frame, memo)]
        if isinstance(e, ir.Reduce):
            return self._reduce(e, frame)
        raise TypeError(f"interp: unknown node {type(e).__name__}")

    @staticmethod
    def _index(e: ir.Index, frame: Frame) -> np.ndarray:
        """An index's values along its axis of the frame (its innermost binding), or its fixed value."""
        ndim = len(frame.names)
        if e.name in frame.fixed:
            return np.full((1,) * ndim, frame.fixed[e.name], dtype=np.int64)
        axis = len(frame.names) - 1 - frame.names[::-1].index(e.name)  # the innermost binding
        shape = [1] * ndim
        shape[axis] = frame.extents[axis]
        return np.arange(frame.extents[axis], dtype=np.int64).reshape(shape)

    def _read(self, e, frame: Frame, memo: dict) -> np.ndarray:
        """An element read of an array (a Read) or of an on-chip memory (a MemRead)."""
        idx = [self._expr(i, frame, memo) for i in e.idx]
        if isinstance(e, ir.MemRead):
            src = frame.mems[e.mem.name]
        elif isinstance(e.src, (ir.Map, ir.MultiFold)) and ir.free_indices(e.src):
            if isinstance(e.src, ir.MultiFold):
                raise NotImplementedError("a multifold inside a pattern that it depends on")
            return self._read_open_map(e, frame, memo)
        else:
            src = self.array(e.src)
        if not idx:
            return np.full((1,) * len(frame.names), src[()], dtype=src.dtype)
        idx = np.broadcast_arrays(*idx)
        return np.asarray(src[tuple(idx)])

    def _read_open_map(self, e: ir.Read, frame: Frame, memo: dict) -> np.ndarray:
        """A Map that uses outer indices is read by substituting its indices (fusion)."""
        mapping = {d.name: i for d, i in zip(e.src.dims, e.idx)}
        return self._expr(ir.subst_indices(e.src.body, mapping), frame, memo)

    def _reduce(self, e: ir.Reduce, frame: Frame) -> np.ndarray:
        inner = frame.extend(e.dims)
        total = int(np.prod(inner.extents, dtype=np.int64))
        first = e.dims[0]
        step = first.extent
        if total > CHUNK_ELEMENTS:
            step = max(1, first.extent * CHUNK_ELEMENTS // total)
        outer = len(frame.names)
        result = None
        for start in range(0, first.extent, step):
            n = min(step, first.extent - start)
            part = frame.extend((ir.Dim(first.name, n),) + tuple(e.dims[1:]))
            body = e.body
            if start:
                shifted = ir.Binary("add", ir.Index(first.name), ir.Const(start, int64), int64)
                body = ir.subst_indices(body, {first.name: shifted})
            value = self._expr(body, part, {})
            value = np.broadcast_to(value, value.shape[:outer] + part.extents[outer:])
            folded = self.fold(e.op, value.reshape(value.shape[:outer] + (-1,)), e.dtype, frame)
            result = folded if result is None else self.combine(e.op, result, folded, e.dtype, frame)
        return result

    def fold(self, op: ir.Combiner, arr: np.ndarray, dtype: DType, frame: Frame) -> np.ndarray:
        """Fold the last axis of `arr` with `op`, in index order."""
        if op.expr is None:
            ufunc = _BINARY[op.op]
            if dtype == bool_ and op.op in ("and", "or", "xor"):
                ufunc = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op.op]
            return ufunc.reduce(arr, axis=-1, dtype=dtype.np)
        while arr.shape[-1] > 1:
            n = arr.shape[-1]
            pairs = self.combine(op, arr[..., 0 : n - 1 : 2], arr[..., 1:n:2], dtype, frame)
            arr = np.concatenate([pairs, arr[..., n - 1 :]], axis=-1) if n % 2 else pairs
        return arr[..., 0]

    def combine(self, op: ir.Combiner, a: np.ndarray, b: np.ndarray, dtype: DType, frame: Frame) -> np.ndarray:
        """`op(a, b)` elementwise."""
        with np.errstate(all="ignore"):
            if op.expr is None:
                return _BINARY[op.op](a, b).astype(dtype.np, copy=False)
            a, b = np.broadcast_arrays(a, b)
            names = tuple(f"%c{k}" for k in range(a.ndim))
            sub = Frame(names, a.shape, {**frame.params, "%a": None, "%b": None}, frame.mems)
            return self._combine_custom(op.expr, a, b, sub)

    def _combine_custom(self, expr: ir.Expr, a, b, frame: Frame) -> np.ndarray:
        ev = _ArrayParams(self.args, {"%a": a, "%b": b})
        out = ev._expr(expr, frame, {})
        return np.broadcast_to(out, a.shape).astype(expr.dtype.np, copy=False)


class _ArrayParams(Evaluator):
    """An evaluator where some Params are bound to whole arrays (a combiner's operands)."""

    def __init__(self, args: dict, arrays: dict):
        super().__init__(args)
        self.bound = arrays

    def _eval(self, e, frame: Frame, memo: dict):
        if isinstance(e, ir.Param) and e.name in self.bound:
            return self.bound[e.name]
        return super()._eval(e, frame, memo)


def fold_into(
    ev: "Evaluator", view: np.ndarray, targets: np.ndarray, values: np.ndarray, first, op: ir.Combiner, dtype: DType
) -> None:
    """view[t] = values if first else op(view[t], values), for each (t, value) in order: round
    r updates, for every element at once, with the r-th update that targets it (the order the
    hardware folds in, for associative ops that do not commute too)."""
    if not len(targets):
        return
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_targets))[0] + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(targets)]))
    occurrence = np.empty(len(targets), dtype=np.int64)
    occurrence[order] = np.arange(len(targets)) - group_start
    for r in range(int(occurrence.max()) + 1):
        sel = np.nonzero(occurrence == r)[0]
        t = targets[sel]
        combined = ev.combine(op, view[t], values[sel], dtype, Frame())
        view[t] = combined if first is None else np.where(first[sel], values[sel], combined)


def run(outputs, args: dict) -> list:
    """Evaluate the kernel `outputs` (Map nodes or scalar Exprs) on `args` (name -> numpy)."""
    ev = Evaluator(args)
    results = []
    for out in outputs:
        if isinstance(out, ir.ArrayNode):
            results.append(ev.array(out).copy())
        else:
            value = ev.expr(out, Frame(params=args))
            results.append(np.asarray(value).reshape(()).astype(out.dtype.np)[()])
    return results


def index_range_error(node: ir.MultiFold, axis: int, value: int, position: tuple, n: int) -> IndexRangeError:
    """The error of a multifold whose subscript `axis` is `value` at `position` (one entry per
    dim and slice dim), outside the accumulator's axis of `n`."""
    names = [ir.schedule_name(d.name) for d in node.dims + node.sdims]
    at = ", ".join(f"{a}={int(p)}" for a, p in zip(names, position))
    return IndexRangeError(
        f"hw.multifold: subscript {axis} of `where` is {value} at {at}, outside the accumulator's axis of {n} "
        f"(valid 0 .. {n - 1}); keep the data in range, or clamp it with hw.minimum / hw.maximum",
        node.loc,
    )
