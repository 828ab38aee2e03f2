"""Traced arrays: `ArrayVal`, indexing, broadcasting and constant arrays.

An `ArrayVal` is either backed by an IR array node (Input, Map, a part of a Collect) or is a
lazy view (a slice, a transpose, an elementwise expression, a broadcast, hw.zeros / hw.full)
whose elements are computed on demand from other arrays' elements; `materialize` turns a view
into a Map where the array is needed whole (a kernel result, a fold's init). `read` checks that
every subscript is an affine expression of index variables and stays in bounds over the whole
domain. Elements are scalars.py's `Val`s; arithmetic on arrays goes through the same operators.
numpy's methods `.sum .max .min` (reduces over fresh indices, numpy's result dtypes), `.argmax
.argmin` (1-D) and `.reshape` (splitting axes only, so subscripts stay affine) are here too, and
`TableVal` (`hw.table`), a constant table that data may index, read through ir.Table.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import ir
from ..affine import to_affine
from ..errors import TraceError, TypeMismatchError, UnsupportedError, user_loc
from . import fixedpoint
from .context import current
from .dtypes import DType, int64
from .scalars import Val, _meet, _Operators, binary, cast, const


def _norm_shape(shape, what: str) -> tuple:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, tuple) or not shape:
        raise TraceError(f"{what} must be a positive int or a tuple of positive ints, got {shape!r}")
    out = []
    for s in shape:
        if isinstance(s, Val):
            raise TraceError(f"{what} must be concrete ints known at build time, got a traced value")
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or int(s) <= 0:
            raise TraceError(f"{what} must be a positive int or a tuple of positive ints, got {shape!r}")
        out.append(int(s))
    return tuple(out)


def _broadcast(shapes: list, loc=None) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise TypeMismatchError(
            "arrays of shapes " + ", ".join(str(s) for s in shapes) + " cannot be broadcast together", loc
        ) from None


def label(node) -> str:
    """How messages name the array `node`."""
    if not isinstance(node, ir.Input):
        return "the array"
    if node.name.startswith("%shard"):  # mesh/shard.py: %shard<number>.<argument>
        return f"the local block of shard_map argument {node.name.split('.')[-1]}"
    if node.name.startswith("%pipe"):  # mesh/pipeline.py: %pipe<number>.<stage>
        return f"the micro-batch input of hw.pipeline stage {node.name.split('.')[-1]}"
    return f"'{node.name}'"


class ArrayVal(_Operators):
    """A traced array: `node` (Input or Map) backs it, or `elem_fn` computes elements lazily."""

    __array_ufunc__ = None
    __hash__ = None

    def __init__(self, shape: tuple, dtype: DType, node: ir.ArrayNode | None = None, elem_fn=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.node = node
        self._elem_fn = elem_fn

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def label(self) -> str:
        """How messages name this array."""
        return label(self.node)

    def __len__(self):
        return self.shape[0]

    def elem(self, idx: tuple) -> Val:
        """The element at `idx`, a tuple of Vals (weak index expressions)."""
        assert len(idx) == self.ndim
        if isinstance(self.node, ir.Roll) and not isinstance(self.node.x, (ir.Input, ir.Collective)):
            raise UnsupportedError(
                "the result of hw.roll can only be returned (by the kernel, or by a shard_map body), "
                "or read when it rolls an argument or a collective's result: compute on the parts before "
                "joining them",
                user_loc(),
            )
        if self.node is not None:
            fx = self.dtype if isinstance(self.dtype, fixedpoint.Fixed) else None
            return Val(read(self.node, tuple(v.expr for v in idx)), fx=fx)
        return self._elem_fn(idx)

    def materialize(self) -> ir.ArrayNode:
        """An IR array node with this array's elements (a Map for lazy views)."""
        if self.node is not None:
            return self.node
        trace = current("an array expression")
        dims = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(self.shape))  # named by axis
        body = self.elem(tuple(_index_val(d) for d in dims))
        body_expr = _strong(body, self.dtype)
        self.node = ir.Map(dims, body_expr, loc=user_loc())
        return self.node

    def astype(self, dtype) -> "ArrayVal":
        return cast(self, dtype)

    @property
    def T(self) -> "ArrayVal":
        return ArrayVal(self.shape[::-1], self.dtype, elem_fn=lambda idx: self.elem(tuple(reversed(idx))))

    def __getitem__(self, key) -> "Val | ArrayVal":
        return subscript(self, key)

    # '@' is a pattern (a map of sums): patterns.py builds on this module, so it is imported
    # when '@' is used rather than at the top
    def __matmul__(self, other):
        from .patterns import matmul

        return matmul(self, other)

    def __rmatmul__(self, other):
        from .patterns import matmul

        return matmul(other, self)

    def __truediv__(self, o):
        raise TraceError("true division '/' gives floats in numpy; hwgen has integer types only: use '//'")

    def __bool__(self):
        raise TraceError("an array has no Python truth value inside a kernel; use hw.where")

    def __iter__(self):
        raise TraceError("a traced array cannot be iterated in Python; use hw.map over its indices")

    def __setitem__(self, key, value):
        raise TraceError(
            "arrays are immutable values inside a kernel; item assignment is not supported: build "
            "a new array instead, e.g. hw.map(n, lambda i: hw.where(i == 0, 5, x[i])) (or "
            "hw.multifold to accumulate into one)"
        )

    # numpy's array methods that are patterns
    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return _reduce_method(self, "sum", axis, dtype, out, keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return _reduce_method(self, "max", axis, None, out, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return _reduce_method(self, "min", axis, None, out, keepdims)

    def argmax(self, axis=None, out=None, keepdims=False):
        return _arg_method(self, "argmax", axis, out, keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return _arg_method(self, "argmin", axis, out, keepdims)

    def reshape(self, *shape, order="C"):
        return reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape, order)

    def __repr__(self):
        return f"<traced {self.dtype.name} array of shape {self.shape}>"

    def __getattr__(self, name):
        if name.startswith("__") or name in ("node", "_elem_fn", "shape", "dtype", "raw"):
            raise AttributeError(name)
        raise TraceError(
            f"a traced array has no attribute '{name}'; arrays support .shape, .dtype, .ndim, .T, "
            f".astype, .sum, .max, .min, .argmax, .argmin, .reshape, indexing and Python's operators; "
            f"other operations are hwgen's patterns (hw.map, hw.sum, ...)"
        )


def _index_val(dim: ir.Dim) -> Val:
    return Val(ir.Index(dim.name), weak=True, lo=0, hi=dim.extent - 1)


def _strong(v, dtype: DType | None = None) -> ir.Expr:
    """The expression of a result value; weak values become int64 (or bool_) like numpy arrays;
    a fixed-point value gives its raw integer."""
    if isinstance(dtype, fixedpoint.Fixed):
        return fixedpoint.raw_of(v, dtype).expr
    if isinstance(v, Val) and v.fx is not None:
        return v.expr
    v = const(v)
    if dtype is not None and v.dtype != dtype:
        return _meet(v, dtype, "an array element")
    return v.expr


def elementwise(fn: Callable, *operands) -> ArrayVal:
    """Apply the scalar function `fn` elementwise over broadcast array/scalar operands."""
    loc = user_loc()
    shapes = [o.shape for o in operands if isinstance(o, ArrayVal)]
    shape = _broadcast(shapes, loc)

    def pick(o, idx):
        if not isinstance(o, ArrayVal):
            return o
        off = len(shape) - o.ndim
        sub = tuple(const(0) if o.shape[k] == 1 and shape[k + off] != 1 else idx[k + off] for k in range(o.ndim))
        return o.elem(sub)

    probe_idx = tuple(Val(ir.Index(f"%probe{k}"), weak=True, lo=0, hi=n - 1) for k, n in enumerate(shape))
    probe = fn(*[pick(o, probe_idx) for o in operands])
    dtype = const(probe).dtype
    return ArrayVal(shape, dtype, elem_fn=lambda idx: fn(*[pick(o, idx) for o in operands]))


def read(src: ir.ArrayNode, idx: tuple) -> ir.Read:
    """`src[idx]`, checking each subscript is affine and in bounds for the whole domain."""
    loc = user_loc()
    trace = current("indexing an array")
    affs = [to_affine(e) for e in idx]
    text = ""
    if isinstance(src, ir.Input) and all(a is not None for a in affs):
        text = f"{src.name}[{', '.join(str(a) for a in affs)}]"
    for axis, (e, n) in enumerate(zip(idx, src.shape)):
        aff = to_affine(e)
        name = label(src)
        if aff is None:
            raise TraceError(
                f"subscript {axis} of {name} must be an affine expression of index variables "
                f"(like i, 2 * i + 1, i + k); data-dependent or non-linear subscripts are not "
                f"supported",
                loc,
            )
        unknown = [m for m in aff.names() if m not in trace.extents]
        if unknown:
            continue  # a probe index of an elementwise view; checked when materialised
        lo, hi = aff.value_range(trace.extents)
        if lo < 0 or hi >= n:
            raise TraceError(
                f"subscript {axis} of {name}, {aff}, ranges over [{lo}, {hi}] but axis {axis} "
                f"has extent {n} (valid 0 .. {n - 1}); the access is out of bounds",
                loc,
            )
    return ir.Read(src, tuple(idx), loc=loc, text=text)


def subscript(arr: ArrayVal, key) -> "Val | ArrayVal":
    """numpy-style indexing with index expressions, ints and constant slices."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (arr.ndim - len(key) + 1) + key[at + 1 :]
    if len(key) > arr.ndim:
        raise TraceError(f"too many subscripts: {len(key)} for an array of {arr.ndim} dimensions")
    key = key + (slice(None),) * (arr.ndim - len(key))
    picks = []  # per axis: ("at", Val) or ("slice", start, step, length)
    for axis, k in enumerate(key):
        n = arr.shape[axis]
        if isinstance(k, slice):
            picks.append(_slice(k, n, axis))
        elif isinstance(k, ArrayVal):
            raise TraceError("indexing with an array (gather) is not supported; subscripts must be affine")
        else:
            v = const(k)
            if isinstance(v.expr, ir.Const) and v.weak:
                i = v.lo + n if v.lo < 0 else v.lo
                if not 0 <= i < n:
                    raise TraceError(f"index {v.lo} is out of bounds for axis {axis} with extent {n}")
                v = const(i)
            elif not v.weak:
                raise TraceError(
                    f"subscript {axis} of {arr.label} is a data value ({v.dtype.name}); "
                    f"subscripts must be affine expressions of index variables"
                )
            picks.append(("at", v))
    out_shape = tuple(p[3] for p in picks if p[0] == "slice")

    def elem(idx):
        it = iter(idx)
        full = []
        for p in picks:
            if p[0] == "at":
                full.append(p[1])
            else:
                full.append(binary("add", p[1], binary("mul", next(it), p[2])))
        return arr.elem(tuple(full))

    if not out_shape:
        return elem(())
    return ArrayVal(out_shape, arr.dtype, elem_fn=elem)


def _slice(k: slice, n: int, axis: int) -> tuple:
    for bound in (k.start, k.stop, k.step):
        if bound is not None and not isinstance(bound, (Val, int, np.integer)):
            raise TraceError(
                f"the slice of axis {axis} has a bound {bound!r}; slice bounds must be ints or index expressions"
            )
    if any(isinstance(x, Val) for x in (k.start, k.stop, k.step)):
        if k.step is not None or k.start is None or k.stop is None:
            raise TraceError("a slice with traced bounds must be start:stop with a constant length")
        start, stop = const(k.start), const(k.stop)
        length = None
        if start.weak and stop.weak:
            # both bounds may move with the indices (x[i:i + 4]): the length is the constant
            # difference of their affine forms
            a, b = to_affine(_meet(start, int64, "a slice")), to_affine(_meet(stop, int64, "a slice"))
            if a is not None and b is not None:
                diff = b + a.scale(-1)
                length = diff.const if not diff.terms else None
        if length is None or length <= 0:
            raise TraceError(
                f"the slice of axis {axis} has traced bounds; they must be affine in index variables "
                f"with a constant positive length stop - start, like x[i:i + 4]"
            )
        return ("slice", start, const(1), length)
    start, stop, step = k.indices(n)
    length = len(range(start, stop, step))
    if length == 0:
        raise TraceError(f"the slice {k.start}:{k.stop}:{k.step} of axis {axis} is empty")
    return ("slice", const(start), const(step), length)


def zeros(shape, dtype) -> ArrayVal:
    """An on-chip constant array of zeros."""
    return full(shape, 0, dtype)


def full(shape, value, dtype) -> ArrayVal:
    """An on-chip constant array filled with `value`."""
    shape = _norm_shape(shape, "the shape")
    v = cast(value, dtype)
    return ArrayVal(shape, v.dtype, elem_fn=lambda idx: v)


def concatenate(arrays, axis=0) -> ArrayVal:
    """numpy's `concatenate(arrays, axis)`: the arrays joined along `axis` (same dtype, the
    same shape but along `axis`). Returned, or read inside a shard_map body on a mesh (each PE
    stores it in its DRAM first: mesh/hardware.py); a single PE refuses reads (passes/lower.py)."""
    loc = user_loc()
    if isinstance(arrays, ArrayVal) or not isinstance(arrays, (list, tuple)) or not arrays:
        raise TraceError("hw.concatenate takes a non-empty list or tuple of arrays", loc)
    if any(not isinstance(a, ArrayVal) for a in arrays):
        raise TraceError("hw.concatenate joins arrays; a part is a scalar or not traced", loc)
    first = arrays[0]
    if not isinstance(axis, int) or isinstance(axis, bool) or not -first.ndim <= axis < first.ndim:
        raise TraceError(f"hw.concatenate: axis {axis!r} is not an axis of {first.ndim}-D arrays", loc)
    axis %= first.ndim
    for k, a in enumerate(arrays):
        if a.dtype != first.dtype:
            raise TypeMismatchError(
                f"hw.concatenate: part {k} is {a.dtype.name} and part 0 {first.dtype.name}; convert with .astype",
                loc,
            )
        if a.ndim != first.ndim or any(n != m for d, (n, m) in enumerate(zip(a.shape, first.shape)) if d != axis):
            raise TraceError(
                f"hw.concatenate: part {k} has shape {a.shape} and part 0 {first.shape}; they may differ "
                f"along axis {axis} only",
                loc,
            )
    parts = tuple(a.materialize() for a in arrays)
    node = ir.Concat(parts, axis, loc=loc)
    return ArrayVal(node.shape, first.dtype, node=node)


def roll(a, shift, axis=None) -> ArrayVal:
    """numpy's `roll(a, shift, axis)` along axis 0 (axis None: a 1-D array only, as numpy
    flattens): element i of the result is a[(i - shift) mod n]; the shift may be a traced int
    scalar (hw.axis_index on a mesh). It can only be returned, or read when it rolls an
    argument or a collective's result (a shard_map body's block, or a gathered array: the
    PE's rows of it, mesh/slices.py)."""
    loc = user_loc()
    if not isinstance(a, ArrayVal):
        raise TraceError("hw.roll rolls an array", loc)
    if axis is None and a.ndim > 1:
        raise UnsupportedError(
            f"hw.roll of a {a.ndim}-D array needs axis=0 (without an axis numpy rolls the flattened array)", loc
        )
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int) or axis % max(a.ndim, 1) != 0):
        raise UnsupportedError("hw.roll rolls along axis 0 only", loc)
    if isinstance(shift, (bool, float)) or not isinstance(shift, (int, np.integer, Val)):
        raise TypeMismatchError(f"hw.roll: the shift must be an integer, not {shift!r}", loc)
    v = const(shift)
    if v.dtype.is_bool or v.fx is not None:
        raise TypeMismatchError(f"hw.roll: the shift must be an integer, not {v.dtype.name}", loc)
    node = ir.Roll(a.materialize(), _strong(v, int64), loc=loc)
    return ArrayVal(node.shape, a.dtype, node=node)


def _axes(arr: ArrayVal, axis, method: str) -> tuple:
    """numpy's `axis` argument (None, an int or a tuple of ints) as sorted axis numbers."""
    if axis is None:
        return tuple(range(arr.ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -arr.ndim <= a < arr.ndim:
            raise TraceError(
                f"x.{method}(axis={axis!r}): axis must be an int (or a tuple of ints) from "
                f"{-arr.ndim} to {arr.ndim - 1} for an array of {arr.ndim} dimension(s)"
            )
        out.append(int(a) % arr.ndim)
    if len(set(out)) != len(out):
        raise TraceError(f"x.{method}(axis={axis!r}): an axis is repeated")
    return tuple(sorted(out))


def _no_extras(method: str, out, keepdims) -> None:
    if out is not None:
        raise TraceError(f"x.{method}(out=...) is not supported inside a kernel; use its result")
    if keepdims:
        raise TraceError(
            f"x.{method}(keepdims=True) is not supported; reduce, then index or hw.map "
            f"the result into the shape you need"
        )


def _reduce_method(arr: ArrayVal, method: str, axis, dtype, out, keepdims):
    """numpy's x.sum() / x.max() / x.min() as a reduce over fresh (unnamed) indices, with
    numpy's result dtype: a sum of a signed integer (or bool_) array accumulates in int64, of an
    unsigned one in uint64 (np.sum's rule; hw.sum accumulates in the values' dtype instead)."""
    from .patterns import _combiner

    _no_extras(method, out, keepdims)
    axes = _axes(arr, axis, method)
    src = arr
    if method == "sum":
        if isinstance(arr.dtype, fixedpoint.Fixed):
            raise TypeMismatchError(
                f"x.sum() of {arr.dtype.name} values is not supported (numpy sums the floats in "
                f"float64); use hw.sum(...), which accumulates in {arr.dtype.name} and wraps"
            )
        if dtype is None:
            from .dtypes import uint64

            dtype = int64 if arr.dtype.signed or arr.dtype.is_bool else uint64
        src = cast(arr, dtype)
        op = "add"
    else:
        if dtype is not None:
            raise TraceError(f"x.{method}() takes no dtype")
        op = method if not arr.dtype.is_bool else ("or" if method == "max" else "and")
    trace = current(f"x.{method}()")
    loc = user_loc()
    keep = [k for k in range(arr.ndim) if k not in axes]

    def reduced(outer_idx):
        dims = tuple(trace.op_dim(f"@r{j}", arr.shape[k]) for j, k in enumerate(axes))
        it_outer, it_inner = iter(outer_idx), iter(dims)
        idx = tuple(next(it_inner) if k in axes else None for k in range(arr.ndim))
        full = tuple(_index_val(d) if isinstance(d, ir.Dim) else next(it_outer) for d in idx)
        elem = src.elem(full)
        expr = _strong(elem, src.dtype)
        comb = _combiner("+", src.dtype) if op == "add" else ir.Combiner(op)
        fx = src.dtype if isinstance(src.dtype, fixedpoint.Fixed) else None
        return Val(ir.Reduce(dims, expr, comb, loc=loc), fx=fx)

    if not keep:
        return reduced(())
    shape = tuple(arr.shape[k] for k in keep)
    dims = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(shape))
    body = reduced(tuple(_index_val(d) for d in dims))
    node = ir.Map(dims, body.expr, loc=loc)
    return ArrayVal(shape, src.dtype, node=node)


def _arg_method(arr: ArrayVal, method: str, axis, out, keepdims):
    from .patterns import argmax, argmin

    _no_extras(method, out, keepdims)
    if arr.ndim != 1 or axis not in (None, 0, -1):
        raise TraceError(
            f"x.{method}() is supported on 1-D arrays; for rows of a 2-D array write "
            f"hw.map(rows, lambda r: hw.{method}(x[r, :]))"
        )
    return (argmax if method == "argmax" else argmin)(arr)


def reshape(arr: ArrayVal, shape, order="C") -> ArrayVal:
    """numpy's x.reshape for a static shape that splits axes (or adds and drops axes of 1):
    each old subscript is then affine in the new ones. Merging axes is not affine."""
    if order != "C":
        raise TraceError("x.reshape(order=...) supports only order='C' (row-major)")
    items = list(shape) if isinstance(shape, (tuple, list)) else [shape]
    size = int(np.prod(arr.shape))
    if any(isinstance(s, Val) for s in items):
        raise TraceError("x.reshape needs a shape of ints known at build time, got a traced value")
    if items.count(-1) == 1:
        known = int(np.prod([s for s in items if s != -1])) if len(items) > 1 else 1
        if known <= 0 or size % known:
            raise TypeMismatchError(f"cannot reshape an array of shape {arr.shape} into {tuple(shape)}")
        items[items.index(-1)] = size // known
    new = _norm_shape(tuple(items), "the shape given to x.reshape")
    if int(np.prod(new)) != size:
        raise TypeMismatchError(
            f"cannot reshape an array of shape {arr.shape} (size {size}) into {new} (size {int(np.prod(new))})"
        )
    groups, k = [], 0  # the new axes that make up each old axis
    for n in arr.shape:
        group, prod = [], 1
        while k < len(new) and (prod < n or (new[k] == 1 and n == 1 and not group)):
            group.append(k)
            prod *= new[k]
            k += 1
        if prod != n:
            raise TraceError(
                f"x.reshape{new} of an array of shape {arr.shape} merges axes: subscripts of the "
                f"original would not be affine in the new indices; keep the original axes and "
                f"index them (x[r, c]), or reshape only by splitting axes (x.reshape(2, 4) of 8)"
            )
        groups.append(group)
    # any new axes left are trailing axes of 1: always 0

    def elem_fn(idx):
        old = []
        for group in groups:
            flat = const(0)
            for a in group:
                flat = binary("add", binary("mul", flat, new[a]), idx[a])
            old.append(flat)
        return arr.elem(tuple(old))

    return ArrayVal(new, arr.dtype, elem_fn=elem_fn)


TABLE_MAX = 4096  # entries of a constant table (a multiplexer, or a ROM from timing.ROM_MIN up)


class TableVal(ArrayVal):
    """A constant table (`hw.table(values)`): unlike a kernel argument it may be read at a
    data-dependent subscript (`t[x[i] & 15]`), which must provably stay in range; the hardware
    reads it as a multiplexer or, when large, a ROM."""

    def __init__(self, raw: np.ndarray, dtype: DType):
        self.raw = raw
        super().__init__(raw.shape, dtype, elem_fn=self._read)

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if len(items) == self.ndim and not any(
            isinstance(k, slice) or k is Ellipsis or isinstance(k, ArrayVal) for k in items
        ):
            return self._read(items)
        return subscript(self, key)

    def _read(self, idx) -> Val:
        from ..ranges import value_range

        trace = current("reading a hw.table")
        fx = self.dtype if isinstance(self.dtype, fixedpoint.Fixed) else None
        flat = const(0)
        for axis, (k, n) in enumerate(zip(idx, self.shape)):
            v = const(k)
            if v.fx is not None or v.dtype.is_bool:
                raise TypeMismatchError(f"subscript {axis} of a hw.table is {v.dtype.name}; it must be an integer")
            if v.weak and isinstance(v.expr, ir.Const):
                at = v.lo + n if v.lo < 0 else v.lo
                if not 0 <= at < n:
                    raise TraceError(f"index {v.lo} is out of bounds for axis {axis} of a hw.table with extent {n}")
                v = const(at)
            wide = cast(v, int64) if not v.weak else Val(_meet(v, int64, "a subscript"))
            if any(name not in trace.extents for name in _index_names(wide.expr)):
                lo, hi = 0, 0  # a probe index of an elementwise view; checked when materialised
            else:
                lo, hi = value_range(wide.expr, trace.extents)
            if lo < 0 or hi >= n:
                raise TraceError(
                    f"subscript {axis} of a hw.table may take values in [{lo}, {hi}], outside its axis of "
                    f"{n} (valid 0 .. {n - 1}); keep it in range (x & {n - 1 if n & (n - 1) == 0 else 'mask'}, "
                    f"hw.minimum / hw.maximum, or a narrower dtype)"
                )
            flat = binary("add", binary("mul", flat, np.int64(n)), wide)
        values = tuple(int(v) for v in self.raw.ravel())
        raw_dtype = fx.storage if fx is not None else self.dtype
        if isinstance(flat.expr, ir.Const):
            return Val(ir.Const(values[flat.expr.value], raw_dtype), fx=fx)
        return Val(ir.Table(values, _meet(flat, int64, "a subscript") if flat.weak else flat.expr, raw_dtype), fx=fx)

    def __repr__(self):
        return f"<hw.table of {self.dtype.name}, shape {self.shape}>"


def _index_names(e) -> set:
    if isinstance(e, ir.Index):
        return {e.name}
    out = set()
    for c in ir.children(e):
        if isinstance(c, ir.Expr):
            out |= _index_names(c)
    return out


def table(values, dtype=None) -> TableVal:
    """A constant table from a numpy array (or nested lists) of ints or bools; with
    `dtype=hw.fixed(...)`, of numbers rounded down to that type. It may be indexed by data."""
    from .dtypes import as_dtype, from_numpy

    if isinstance(values, (ArrayVal, Val)):
        raise TraceError(
            "hw.table takes constant values (a numpy array or a list), not a traced value; "
            "index the traced array directly"
        )
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError):
        raise TypeMismatchError("hw.table takes a rectangular numpy array or nested lists of numbers") from None
    if arr.size == 0 or arr.ndim == 0:
        raise TypeMismatchError(f"hw.table needs a non-empty array, got shape {arr.shape}")
    if arr.size > TABLE_MAX:
        raise UnsupportedError(f"hw.table holds at most {TABLE_MAX} entries on chip, got {arr.size}")
    if dtype is not None:
        dt = dtype if isinstance(dtype, fixedpoint.Fixed) else as_dtype(dtype)
        if dt is None:
            raise TypeMismatchError(f"hw.table: unknown dtype {dtype!r}")
    else:
        dt = from_numpy(arr.dtype) if arr.dtype.kind in "iub" else None
        if dt is None:
            raise TypeMismatchError(
                f"hw.table of {arr.dtype} values needs dtype=...: an integer dtype, or hw.fixed(...) for "
                f"fractional numbers"
            )
    if isinstance(dt, fixedpoint.Fixed):
        if arr.dtype.kind not in "iuf":
            raise TypeMismatchError(f"hw.table of {dt.name} needs numbers, got {arr.dtype}")
        floor = np.floor(arr.astype(np.float64) * dt.scale)
        if not np.all(np.isfinite(floor)) or floor.min() < dt.storage.min or floor.max() > dt.storage.max:
            raise TypeMismatchError(
                f"hw.table: a value does not fit {dt.name} (range [{dt.min / dt.scale}, {dt.max / dt.scale}])"
            )
        return TableVal(dt.quantize(arr).astype(object), dt)
    if arr.dtype.kind not in "iub":
        raise TypeMismatchError(f"hw.table of {dt.name}: the values must be integers, got {arr.dtype}")
    ints = np.vectorize(int, otypes=[object])(arr)
    bad = [v for v in ints.ravel() if not dt.fits(v)]
    if bad:
        raise TypeMismatchError(f"hw.table: the value {bad[0]} does not fit {dt.name}")
    return TableVal(ints, dt)
