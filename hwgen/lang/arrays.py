"""Traced arrays: `ArrayVal`, indexing, broadcasting and constant arrays.

An `ArrayVal` is either backed by an IR array node (Input, Map, a part of a Collect) or is a
lazy view (a slice, a transpose, an elementwise expression, a broadcast, hw.zeros / hw.full)
whose elements are computed on demand from other arrays' elements; `materialize` turns a view
into a Map where the array is needed whole (a kernel result, a fold's init). `read` checks that
every subscript is an affine expression of index variables and stays in bounds over the whole
domain. Elements are scalars.py's `Val`s; arithmetic on arrays goes through the same operators.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import ir
from ..affine import to_affine
from . import fixedpoint
from .dtypes import DType, int64
from ..errors import TraceError, TypeMismatchError, user_loc
from .context import current
from .scalars import Val, _Operators, _meet, binary, cast, const


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
        return f"'{self.node.name}'" if isinstance(self.node, ir.Input) else "the array"

    def __len__(self):
        return self.shape[0]

    def elem(self, idx: tuple) -> Val:
        """The element at `idx`, a tuple of Vals (weak index expressions)."""
        assert len(idx) == self.ndim
        if self.node is not None:
            fx = self.dtype if isinstance(self.dtype, fixedpoint.Fixed) else None
            return Val(read(self.node, tuple(v.expr for v in idx)), fx=fx)
        return self._elem_fn(idx)

    def materialize(self) -> ir.ArrayNode:
        """An IR array node with this array's elements (a Map for lazy views)."""
        if self.node is not None:
            return self.node
        trace = current("an array expression")
        dims = tuple(trace.fresh_dim(n) for n in self.shape)
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

    def __repr__(self):
        return f"ArrayVal({self.dtype.name}{list(self.shape)})"


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
        sub = tuple(const(0) if o.shape[k] == 1 and shape[k + off] != 1 else idx[k + off]
                    for k in range(o.ndim))
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
        name = f"'{src.name}'" if isinstance(src, ir.Input) else "the array"
        if aff is None:
            raise TraceError(
                f"subscript {axis} of {name} must be an affine expression of index variables "
                f"(like i, 2 * i + 1, i + k); data-dependent or non-linear subscripts are not "
                f"supported", loc
            )
        unknown = [m for m in aff.names() if m not in trace.extents]
        if unknown:
            continue  # a probe index of an elementwise view; checked when materialised
        lo, hi = aff.value_range(trace.extents)
        if lo < 0 or hi >= n:
            raise TraceError(
                f"subscript {axis} of {name}, {aff}, ranges over [{lo}, {hi}] but axis {axis} "
                f"has extent {n} (valid 0 .. {n - 1}); the access is out of bounds", loc
            )
    return ir.Read(src, tuple(idx), loc=loc, text=text)


def subscript(arr: ArrayVal, key) -> "Val | ArrayVal":
    """numpy-style indexing with index expressions, ints and constant slices."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (arr.ndim - len(key) + 1) + key[at + 1:]
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
                f"with a constant positive length stop - start, like x[i:i + 4]")
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
