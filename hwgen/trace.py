"""Tracing: run the user's kernel on symbolic values and record pattern IR.

`Val` is a traced scalar (an IR Expr plus numpy's "weak" flag for Python ints and index
variables); `ArrayVal` is a traced array, either backed by an IR array node (Input, Map) or a
lazy view (slice, elementwise expression, broadcast) that is materialised as a Map when used as
a result. The pattern functions (`map`, `reduce`, `where`, ...) live here and are re-exported by
`hwgen`. Arithmetic follows numpy: `np.result_type` promotion, NEP 50 weak Python ints,
wrap-around; comparisons give bool_.
"""

from __future__ import annotations

import builtins
import inspect
import itertools
import math
from typing import Callable

import numpy as np

from . import ir
from .affine import to_affine
from . import fixedpoint
from .dtypes import DType, as_dtype, bool_, int64, promote, smallest_holding, weak_result
from .ranges import value_range
from .errors import TraceError, TypeMismatchError, user_loc

# ------------------------------------------------------------------ trace context


class Trace:
    """The state of one kernel trace: index names in use, fresh-name counter."""

    def __init__(self, kernel_name: str):
        self.kernel_name = kernel_name
        self.extents: dict[str, int] = {}
        self.locs: dict = {}
        self.codes: dict = {}
        self._fresh = itertools.count()

    def new_dim(self, name: str, extent: int, loc, code=None) -> ir.Dim:
        """A new index variable. A name may come back only from the same lambda (a helper
        function traced twice): its uses share a schedule (over another extent, as the copy
        'i.n4' of 'i')."""
        if name in self.extents and code is not None and self.codes.get(name) is code:
            if self.extents[name] != extent:  # over another extent: a copy, scheduled as `name`
                name = f"{name}.n{extent}"
                self.extents.setdefault(name, extent)
            return ir.Dim(name, extent)
        if name in self.extents:
            raise TraceError(
                f"index name '{name}' is used twice in kernel '{self.kernel_name}' "
                f"(first at line {getattr(self.locs[name], 'line', '?')}); give each lambda "
                f"parameter its own name, schedules refer to indices by name",
                loc,
            )
        self.extents[name] = extent
        self.locs[name] = loc
        self.codes[name] = code
        return ir.Dim(name, extent)

    def fresh_dim(self, extent: int) -> ir.Dim:
        name = f"%{next(self._fresh)}"
        self.extents[name] = extent
        return ir.Dim(name, extent)


_stack: list[Trace] = []


def current(what: str) -> Trace:
    if not _stack:
        raise TraceError(f"{what} can only be used inside an @hw.kernel function")
    return _stack[-1]


class tracing:
    """Context manager making `trace` the current trace."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        _stack.append(self.trace)
        return self.trace

    def __exit__(self, *exc):
        _stack.pop()


# ------------------------------------------------------------------ scalars


class _Operators:
    """numpy's operators on traced values (scalars and arrays alike)."""

    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("mod", self, o)
    def __rmod__(self, o): return binary("mod", o, self)
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __xor__(self, o): return binary("xor", self, o)
    def __rxor__(self, o): return binary("xor", o, self)
    def __lshift__(self, o): return binary("shl", self, o)
    def __rlshift__(self, o): return binary("shl", o, self)
    def __rshift__(self, o): return binary("shr", self, o)
    def __rrshift__(self, o): return binary("shr", o, self)
    def __eq__(self, o): return binary("eq", self, o)
    def __ne__(self, o): return binary("ne", self, o)
    def __lt__(self, o): return binary("lt", self, o)
    def __le__(self, o): return binary("le", self, o)
    def __gt__(self, o): return binary("gt", self, o)
    def __ge__(self, o): return binary("ge", self, o)
    def __neg__(self): return unary("neg", self)
    def __invert__(self): return unary("invert", self)
    def __abs__(self): return unary("abs", self)
    def __pos__(self): return self


class Val(_Operators):
    """A traced scalar. `weak` marks Python ints and index values (numpy's weak scalars);
    `lo`/`hi` bound a weak value so it can be checked against the dtype it meets."""

    __array_ufunc__ = None  # numpy scalars on the left defer to our reflected operators
    __hash__ = None

    def __init__(self, expr: ir.Expr, weak: bool = False, lo: int | None = None, hi: int | None = None,
                 fx=None):
        self.expr = expr
        self.weak = weak
        self.lo = lo
        self.hi = hi
        self.fx = fx  # a fixedpoint.Fixed when this is a fixed-point value (expr is its raw int)

    @property
    def dtype(self) -> DType:
        return self.fx if self.fx is not None else self.expr.dtype

    def astype(self, dtype) -> "Val":
        return cast(self, dtype)

    def __truediv__(self, o):
        if fixedpoint.is_fixed(self) or fixedpoint.is_fixed(o):
            return fixedpoint.binary("truediv", self, o)
        raise TraceError("true division '/' gives floats in numpy; hwgen has integer types only: use "
                         "'//' (or fixed point, hw.fixed)")

    def __rtruediv__(self, o):
        if fixedpoint.is_fixed(self):
            return fixedpoint.binary("truediv", o, self)
        return self.__truediv__(o)

    def __pow__(self, o):
        raise TraceError("'**' is not supported on traced values; multiply explicitly")

    __rpow__ = __pow__

    def __matmul__(self, o):
        raise TraceError("'@' needs 2-D or 1-D arrays; this operand is a scalar")

    def __bool__(self):
        raise TraceError(
            "a traced value has no Python truth value (it is known only in hardware): "
            "use hw.where(cond, a, b) instead of if/and/or/not, and & | ~ to combine conditions"
        )

    def __index__(self):
        raise TraceError(
            "a traced value cannot be used as a Python int (for range(), len() or to index a "
            "numpy array): pass the array as a kernel argument and index it inside the kernel"
        )

    __int__ = __index__

    def __float__(self):
        raise TraceError("hwgen has integer types only; a traced value cannot become a float")

    def __iter__(self):
        raise TraceError("a traced scalar cannot be iterated")

    def __repr__(self):
        return f"Val({self.expr!r})"


def const(value, loc=None) -> Val:
    """A traced constant for a Python or numpy int/bool (weak for Python values)."""
    if isinstance(value, Val):
        return value
    if isinstance(value, (bool, np.bool_)) and not isinstance(value, np.integer):
        strong = isinstance(value, np.bool_)
        v = int(bool(value))
        return Val(ir.Const(v, bool_), weak=not strong, lo=v, hi=v)
    if isinstance(value, np.integer):
        dt = as_dtype(value.dtype)
        return Val(ir.Const(int(value), dt))
    if isinstance(value, int):
        if not int64.fits(value) and not (0 <= value <= (1 << 64) - 1):
            raise TypeMismatchError(f"the integer {value} does not fit in 64 bits", loc)
        dt = int64 if int64.fits(value) else as_dtype(np.uint64)
        return Val(ir.Const(value, dt), weak=True, lo=value, hi=value)
    if isinstance(value, ArrayVal):
        raise TraceError("expected a scalar here, got an array", loc)
    if isinstance(value, (float, np.floating)):
        raise TypeMismatchError(
            f"the float {value!r} cannot be used: hwgen has integer types only", loc
        )
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    raise TypeMismatchError(f"cannot use {text} (a {type(value).__name__}) here: expected a scalar", loc)


def _meet(v: Val, dt: DType, what: str, compare: bool = False) -> ir.Expr:
    """The expression of `v` converted to `dt` where a weak `v` meets a strong type."""
    if v.dtype == dt:
        return v.expr
    if v.weak and v.lo is not None and not compare and not (dt.fits(v.lo) and dt.fits(v.hi)):
        shown = v.lo if v.lo == v.hi else f"in [{v.lo}, {v.hi}]"
        raise TypeMismatchError(
            f"the Python integer {shown} is out of bounds for {dt.name} in {what} "
            f"(numpy raises OverflowError); convert explicitly with .astype(...)"
        )
    if isinstance(v.expr, ir.Const):
        return ir.Const(dt.wrap(v.expr.value), dt)
    return ir.Cast(v.expr, dt)


_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "and": "&", "or": "|",
    "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
    "gt": ">", "ge": ">=", "max": "hw.maximum", "min": "hw.minimum",
}


def _weak_range(op: str, a: Val, b: Val):
    if a.lo is None or b.lo is None:
        return None, None
    if op == "add":
        return a.lo + b.lo, a.hi + b.hi
    if op == "sub":
        return a.lo - b.hi, a.hi - b.lo
    if op == "mul":
        products = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
        return min(products), max(products)
    if op in ("floordiv", "mod") and b.lo == b.hi and b.lo > 0:
        if op == "floordiv":
            return a.lo // b.lo, a.hi // b.lo
        return (a.lo % b.lo, a.hi % b.lo) if a.lo // b.lo == a.hi // b.lo else (0, b.lo - 1)
    if op in ("max", "min"):
        f = max if op == "max" else min
        return f(a.lo, b.lo), f(a.hi, b.hi)
    return None, None


def binary(op: str, a, b) -> Val:
    """`a <op> b` with numpy's promotion; arrays broadcast elementwise."""
    if isinstance(a, ArrayVal) or isinstance(b, ArrayVal):
        return elementwise(lambda x, y: binary(op, x, y), a, b)
    if fixedpoint.is_fixed(a) or fixedpoint.is_fixed(b):
        return fixedpoint.binary(op, a, b)
    a, b = const(a), const(b)
    what = f"'{_SYMBOL[op]}'"
    compare = op in ir.COMPARE
    if a.weak and b.weak:
        if a.dtype == bool_ and b.dtype == bool_:
            dt = bool_
        else:
            dt = int64
        lo, hi = _weak_range(op, a, b)
        if compare:
            return Val(ir.Binary(op, _meet(a, dt, what), _meet(b, dt, what), bool_))
        if dt == bool_:
            return _bool_binary(op, a.expr, b.expr, weak=True)
        if isinstance(a.expr, ir.Const) and isinstance(b.expr, ir.Const):
            return const(_fold(op, a.expr.value, b.expr.value))
        expr = ir.Binary(op, _meet(a, int64, what), _meet(b, int64, what), int64)
        return Val(expr, weak=True, lo=lo, hi=hi)
    if a.weak or b.weak:
        strong, weak = (b, a) if a.weak else (a, b)
        dt = weak_result(strong.dtype, weak.dtype == bool_)
        if compare and isinstance(weak.expr, ir.Const) and not dt.fits(weak.lo):
            # every value of dt lies on one side of the constant: the answer is known (numpy
            # compares Python ints exactly)
            side = dt.min if weak.lo < dt.min else dt.max
            x, y = (side, weak.lo) if weak is b else (weak.lo, side)
            return const(np.bool_({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y,
                                   "gt": x > y, "ge": x >= y}[op]))
        if compare and weak.lo is not None and not (dt.fits(weak.lo) and dt.fits(weak.hi)):
            wide = smallest_holding(min(dt.min, weak.lo), max(dt.max, weak.hi))
            if wide is None:
                raise TypeMismatchError(
                    f"cannot compare {strong.dtype.name} with the Python integer {weak.lo} "
                    f"exactly in 64 bits; convert explicitly"
                )
            dt = wide
    else:
        dt = promote(a.dtype, b.dtype)
    if dt == bool_ and not compare:
        return _bool_binary(op, _meet(a, dt, what), _meet(b, dt, what), weak=False)
    if op in ("floordiv", "mod") and (a.dtype == bool_ and b.dtype == bool_):
        raise TypeMismatchError(f"{what} on two bool_ values is not supported; use .astype(...) first")
    ea, eb = _meet(a, dt, what, compare), _meet(b, dt, what, compare)
    return Val(ir.Binary(op, ea, eb, bool_ if compare else dt))


def _fold(op: str, a: int, b: int) -> int:
    """`a <op> b` on two Python ints, exactly as Python computes it."""
    if op in ("floordiv", "mod") and b == 0:
        raise TraceError(f"integer division or modulo by zero in constants {a} and {b}")
    if op in ("shl", "shr") and b < 0:
        raise TraceError(f"negative shift count {b}")
    return {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "floordiv": lambda: a // b, "mod": lambda: a % b, "and": lambda: a & b,
        "or": lambda: a | b, "xor": lambda: a ^ b, "shl": lambda: a << b, "shr": lambda: a >> b,
        "max": lambda: builtins.max(a, b), "min": lambda: builtins.min(a, b),
    }[op]()


def _bool_binary(op: str, a: ir.Expr, b: ir.Expr, weak: bool) -> Val:
    """numpy on two bools: + is or, * is and; - is an error; comparisons and logic as usual."""
    mapped = {"add": "or", "mul": "and", "max": "or", "min": "and"}.get(op, op)
    if mapped in ("and", "or", "xor") or mapped in ir.COMPARE:
        return Val(ir.Binary(mapped, a, b, bool_), weak=weak)
    raise TypeMismatchError(
        f"'{_SYMBOL[op]}' on two bool_ values is not supported (numpy: boolean {op} is an error "
        f"or changes type); use .astype(...) first, or ^ | & for logic"
    )


def unary(op: str, a) -> Val:
    if isinstance(a, ArrayVal):
        return elementwise(lambda x: unary(op, x), a)
    if fixedpoint.is_fixed(a):
        return fixedpoint.unary(op, a)
    a = const(a)
    if a.dtype == bool_:
        if op == "neg":
            raise TypeMismatchError(
                "unary '-' on a bool_ value is not supported (numpy: boolean negative is an "
                "error); use ~ for logical not"
            )
        if op == "abs":
            return a
        return Val(ir.Unary("invert", a.expr, bool_), weak=a.weak)
    if a.weak and isinstance(a.expr, ir.Const):
        value = {"neg": -a.lo, "invert": ~a.lo, "abs": abs(a.lo)}[op]
        return const(value)
    lo = hi = None
    if a.weak and a.lo is not None:
        if op == "neg":
            lo, hi = -a.hi, -a.lo
        elif op == "invert":
            lo, hi = ~a.hi, ~a.lo
        else:
            lo, hi = (0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))), max(abs(a.lo), abs(a.hi))
    return Val(ir.Unary(op, a.expr, a.dtype), weak=a.weak, lo=lo, hi=hi)


def cast(x, dtype) -> Val:
    """numpy's `x.astype(dtype)`: wrap-around, sign/zero extension, nonzero-to-bool."""
    dt = as_dtype(dtype)
    if dt is None:
        from .signature import unknown_dtype

        raise TypeMismatchError(unknown_dtype(
            dtype, "unknown dtype; expected one of int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_"))
    if isinstance(x, ArrayVal):
        return elementwise(lambda v: cast(v, dt), x)
    if isinstance(dt, fixedpoint.Fixed) or fixedpoint.is_fixed(x):
        return fixedpoint.cast(x, dt)
    v = const(x)
    if isinstance(v.expr, ir.Const):
        value = int(v.expr.value != 0) if dt == bool_ else dt.wrap(v.expr.value)
        return Val(ir.Const(value, dt))
    if v.dtype == dt:
        return Val(v.expr)
    return Val(ir.Cast(v.expr, dt))


def where(cond, a, b):
    """numpy's `where(cond, a, b)`, elementwise over arrays."""
    if any(isinstance(v, ArrayVal) for v in (cond, a, b)):
        return elementwise(where, cond, a, b)
    if fixedpoint.is_fixed(a) or fixedpoint.is_fixed(b):
        return fixedpoint.where(cond, a, b)
    c = const(cond)
    if c.dtype != bool_:
        c = binary("ne", c, 0)
    a, b = const(a), const(b)
    if a.weak and b.weak:
        dt = bool_ if (a.dtype == bool_ and b.dtype == bool_) else int64
        lo = None if a.lo is None or b.lo is None else min(a.lo, b.lo)
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return Val(ir.Select(c.expr, _meet(a, dt, "hw.where"), _meet(b, dt, "hw.where"), dt),
                   weak=True, lo=lo, hi=hi)
    if a.weak or b.weak:
        strong = b if a.weak else a
        dt = strong.dtype
        if dt == bool_ and (a.dtype != bool_ or b.dtype != bool_):
            dt = int64
    else:
        dt = promote(a.dtype, b.dtype)
    return Val(ir.Select(c.expr, _meet(a, dt, "hw.where"), _meet(b, dt, "hw.where"), dt))


def maximum(a, b):
    """numpy's `maximum`, elementwise."""
    return binary("max", a, b)


def minimum(a, b):
    """numpy's `minimum`, elementwise."""
    return binary("min", a, b)


# ------------------------------------------------------------------ arrays


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

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
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
        diff = binary("sub", stop, start)
        length = diff.lo if diff.lo is not None and diff.lo == diff.hi else None
        if length is None or length <= 0:
            raise TraceError("a slice with traced bounds must have a constant positive length, like x[i:i + 4]")
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


# ------------------------------------------------------------------ patterns


def _domain(domain, what: str) -> tuple:
    return _norm_shape(domain, f"the domain of {what}")


def _bind(fn, shape: tuple, what: str) -> tuple:
    """Create the index variables of `fn`'s parameters over `shape`; returns (dims, vals)."""
    loc = user_loc()
    if not callable(fn):
        raise TraceError(f"{what} expects a function (lambda) of the indices, got {fn!r}", loc)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise TraceError(f"cannot read the parameters of {fn!r}", loc) from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != len(params) or len(positional) != len(shape):
        names = ", ".join(p.name for p in params)
        raise TraceError(
            f"the function given to {what} takes {len(params)} argument(s) ({names}) but its "
            f"domain {shape if len(shape) > 1 else shape[0]} has {len(shape)} dimension(s); "
            f"give one index parameter per dimension", loc
        )
    trace = current(what)
    code = getattr(fn, "__code__", None)
    dims = tuple(trace.new_dim(p.name, n, loc, code) for p, n in zip(params, shape))
    return dims, tuple(_index_val(d) for d in dims)


def map_(domain, fn):
    """The array of `fn(*idx)` over `domain`; if `fn` returns an array, its dims are appended."""
    shape = _domain(domain, "hw.map")
    dims, idx = _bind(fn, shape, "hw.map")
    loc = user_loc()
    body = fn(*idx)
    if isinstance(body, ArrayVal):
        trace = current("hw.map")
        inner = tuple(trace.fresh_dim(n) for n in body.shape)
        expr = _strong(body.elem(tuple(_index_val(d) for d in inner)), body.dtype)
        node = ir.Map(dims + inner, expr, loc=loc)
        dtype = body.dtype
    else:
        node = ir.Map(dims, _strong(body), loc=loc)
        dtype = body.dtype if fixedpoint.is_fixed(body) else node.dtype
    return ArrayVal(node.shape, dtype, node=node)


def _combiner(op, dtype: DType) -> ir.Combiner:
    if isinstance(dtype, fixedpoint.Fixed):
        return _fixed_combiner(op, dtype)
    if isinstance(op, str):
        if op not in ir.REDUCE_OPS:
            raise TraceError(
                f"unknown reduce op {op!r}; expected one of "
                + " ".join(repr(o) for o in ir.REDUCE_OPS) + " or an associative callable(a, b)"
            )
        name = ir.REDUCE_OPS[op]
        if dtype == bool_ and name in ("add", "mul"):
            raise TypeMismatchError(
                f"reducing bool_ values with {op!r} is ambiguous (numpy would count them as "
                f"int64, hwgen accumulates in the values' dtype): use .astype(int32) to count, "
                f"or op '|' / '&' for any / all"
            )
        return ir.Combiner(name)
    if callable(op):
        a = Val(ir.Param("%a", dtype))
        b = Val(ir.Param("%b", dtype))
        try:
            out = op(a, b)
        except TypeError as e:
            raise TraceError(f"the reduce op {op!r} must take two arguments (a, b): {e}") from None
        if isinstance(out, ArrayVal):
            raise TraceError("a reduce op must combine two scalars into a scalar")
        out = const(out)
        if out.dtype != dtype:
            out = Val(_meet(out, dtype, "the reduce op")) if out.weak else out
        if out.dtype != dtype:
            raise TypeMismatchError(
                f"the reduce op returns {out.dtype.name} but the values are {dtype.name}; it "
                f"must return the same dtype"
            )
        return ir.Combiner("custom", out.expr)
    raise TraceError(f"unknown reduce op {op!r}; expected a string or a callable(a, b)")


def _fixed_combiner(op, fx) -> ir.Combiner:
    """Folds of fixed-point values: + max min (on the raw values: exact for these), or a
    callable traced on fixed-point operands."""
    if isinstance(op, str):
        if op not in ("+", "max", "min"):
            raise TypeMismatchError(
                f"reducing {fx.name} values with {op!r} is not supported; use '+', 'max', 'min' "
                f"or a callable"
            )
        return ir.Combiner(ir.REDUCE_OPS[op])
    a = Val(ir.Param("%a", fx.storage), fx=fx)
    b = Val(ir.Param("%b", fx.storage), fx=fx)
    out = op(a, b)
    if not (isinstance(out, Val) and out.fx == fx):
        raise TypeMismatchError(f"the reduce op must return a {fx.name} value")
    return ir.Combiner("custom", out.expr)


def reduce(domain, fn, op="+"):
    """Fold `fn(*idx)` over `domain` with `op`; elementwise if `fn` returns an array.

    The fold happens in the dtype of `fn`'s values (like `np.add.reduce(x, dtype=x.dtype)`),
    wrapping on overflow; widen with `.astype` first to accumulate wider.
    """
    shape = _domain(domain, "hw.reduce")
    if isinstance(op, str) and op not in ir.REDUCE_OPS:
        _combiner(op, int64)  # raises the unknown-op error before tracing the body
    dims, idx = _bind(fn, shape, "hw.reduce")
    loc = user_loc()
    body = fn(*idx)
    if isinstance(body, ArrayVal):
        trace = current("hw.reduce")
        inner = tuple(trace.fresh_dim(n) for n in body.shape)
        elem = _strong(body.elem(tuple(_index_val(d) for d in inner)), body.dtype)
        comb = _combiner(op, body.dtype)
        node = ir.Map(inner, ir.Reduce(dims, elem, comb, loc=loc), loc=loc)
        return ArrayVal(node.shape, body.dtype, node=node)
    expr = _strong(body)
    fx = body.fx if fixedpoint.is_fixed(body) else None
    return Val(ir.Reduce(dims, expr, _combiner(op, fx or expr.dtype), loc=loc), fx=fx)


def sum_(domain, fn):
    """`hw.reduce(domain, fn, "+")`."""
    return reduce(domain, fn, "+")


def max_(domain, fn):
    """`hw.reduce(domain, fn, "max")`."""
    return reduce(domain, fn, "max")


def min_(domain, fn):
    """`hw.reduce(domain, fn, "min")`."""
    return reduce(domain, fn, "min")


def multifold(domain, init, fn, op="+"):
    """Start from the array `init`; for each index of `domain` in order, `fn(*idx)` returns
    `(where, value)` and `acc[where] = op(acc[where], value)`. `where` is an index, or a tuple
    of indices and slices, into the accumulator (indices may be data, like an argmin; they must
    provably stay in range); `value` is a scalar or an array the shape of the slice. Returns
    the accumulator, which lives on chip."""
    shape = _domain(domain, "hw.multifold")
    if not isinstance(init, ArrayVal):
        raise TraceError("hw.multifold's init must be an array (an argument, hw.zeros, hw.full, ...)")
    init_node = init.materialize()
    dims, idx = _bind(fn, shape, "hw.multifold")
    loc = user_loc()
    out = fn(*idx)
    if not isinstance(out, tuple) or len(out) != 2:
        raise TraceError("the function given to hw.multifold must return a pair (where, value)", loc)
    where_, value = out
    keys = where_ if isinstance(where_, tuple) else (where_,)
    if len(keys) > init.ndim:
        raise TraceError(f"hw.multifold: {len(keys)} subscripts for an accumulator of {init.ndim} dimensions", loc)
    keys = keys + (slice(None),) * (init.ndim - len(keys))
    trace = current("hw.multifold")
    slice_shape = tuple(len(range(*k.indices(n))) for k, n in zip(keys, init.shape) if isinstance(k, slice))
    if isinstance(value, ArrayVal) and isinstance(value.node, ir.Map) and value.shape == slice_shape:
        sdims = value.node.dims  # the value's own (named) dims walk the slice
        value_at = lambda sidx: value.elem(sidx)  # noqa: E731
    else:
        sdims = tuple(trace.fresh_dim(n) for n in slice_shape)
        if isinstance(value, ArrayVal):
            _broadcast([value.shape, slice_shape], loc)
            value_at = lambda sidx: value.elem(sidx[len(sidx) - value.ndim:] if value.ndim else ())  # noqa: E731
        else:
            value_at = lambda sidx: value  # noqa: E731
    svals = tuple(_index_val(d) for d in sdims)
    targets, s = [], 0
    for axis, (k, n) in enumerate(zip(keys, init.shape)):
        if isinstance(k, slice):
            start, _, step = k.indices(n)
            targets.append(binary("add", const(start), binary("mul", svals[s], const(step))))
            s += 1
        elif isinstance(k, ArrayVal):
            raise TraceError("hw.multifold: a subscript of `where` must be a scalar or a slice", loc)
        else:
            targets.append(const(k))
    for axis, (t, n) in enumerate(zip(targets, init.shape)):
        lo, hi = value_range(cast(t, int64).expr, trace.extents)
        if lo < 0 or hi >= n:
            raise TraceError(
                f"hw.multifold: subscript {axis} of `where` may take values in [{lo}, {hi}], outside "
                f"the accumulator's axis of {n}; keep it in range (hw.minimum / hw.maximum, or a "
                f"narrower expression)", loc
            )
    elem = value_at(svals)
    dt = init.dtype
    expr = _strong(elem, dt) if (isinstance(elem, Val) and (elem.weak or elem.dtype == dt)) or \
        not isinstance(elem, Val) else None
    if expr is None:
        raise TypeMismatchError(
            f"hw.multifold: the value is {const(elem).dtype.name} but the accumulator is {dt.name}; "
            f"convert with .astype(...)", loc
        )
    comb = _combiner(op, dt)
    node = ir.MultiFold(dims, sdims, init_node, tuple(cast(t, int64).expr for t in targets), expr, comb, loc=loc)
    return ArrayVal(node.shape, dt, node=node)


MAX_KEYS = 256


def groupby_fold(domain, fn, op="+", max_keys=None):
    """For each index of `domain` in order, `fn(*idx)` returns `(key, value)`; values of equal
    keys are folded with `op`. Returns `(keys, values, count)`: the first `count` entries hold
    each distinct key and its folded value, in order of first appearance; the rest are 0.
    `value` may be a tuple of scalars of one dtype or a 1-D array (several folds at once:
    `values` gets a column each). More than
    `max_keys` distinct keys is a CapacityError (raised by the golden model and by simulation)."""
    shape = _domain(domain, "hw.groupby_fold")
    if isinstance(max_keys, bool) or not isinstance(max_keys, int) or not 1 <= max_keys <= MAX_KEYS:
        raise TraceError(f"hw.groupby_fold needs max_keys, an int from 1 to {MAX_KEYS} (the hardware "
                         f"compares every key each cycle), got {max_keys!r}")
    dims, idx = _bind(fn, shape, "hw.groupby_fold")
    loc = user_loc()
    out = fn(*idx)
    if not isinstance(out, tuple) or len(out) != 2:
        raise TraceError("the function given to hw.groupby_fold must return a pair (key, value)", loc)
    key, value = out
    key = const(key)
    if key.dtype == bool_ or key.fx is not None:
        raise TypeMismatchError(f"hw.groupby_fold keys must be integers, got {key.dtype.name}", loc)
    if isinstance(value, ArrayVal):
        if value.ndim != 1:
            raise TraceError("hw.groupby_fold: a value must be a scalar or a 1-D array", loc)
        elems = [value.elem((const(c),)) for c in range(value.shape[0])]
        dtype = value.dtype
    elif isinstance(value, tuple) and value:
        elems = [const(v) for v in value]
        strong = {e.dtype for e in elems if not e.weak}
        if len(strong) > 1:
            raise TypeMismatchError(f"hw.groupby_fold: the values of a tuple must share one dtype, got "
                                    f"{', '.join(sorted(d.name for d in strong))}; convert with .astype(...)", loc)
        dtype = strong.pop() if strong else elems[0].dtype
    else:
        elems, dtype = [value], const(value).dtype
    exprs = tuple(_strong(e, dtype) for e in elems)
    node = ir.Collect("group", dims, _strong(key), exprs, (), _combiner(op, dtype), max_keys, loc=loc)
    keys = ir.Part(node, "keys")
    values = ir.Part(node, "values")
    fx = dtype if isinstance(dtype, fixedpoint.Fixed) else None
    return (ArrayVal(keys.shape, keys.dtype, node=keys), ArrayVal(values.shape, fx or values.dtype, node=values),
            Val(ir.Count(node)))


class Emit:
    """One value `hw.flatmap` may produce: kept where `when` holds."""

    def __init__(self, value, when=True):
        self.value, self.when = value, when


def emit(value, when=True) -> Emit:
    """An output of a `hw.flatmap` body, kept where `when` holds."""
    return Emit(value, when)


def filter_(domain, pred, fn=None):
    """Keep `fn(*idx)` (default: the element's row-major index) where `pred(*idx)` holds, in
    index order. Returns `(values, count)`; `values` has the domain's size, 0 past `count`."""
    shape = _domain(domain, "hw.filter")
    dims, idx = _bind(pred, shape, "hw.filter")
    loc = user_loc()
    cond = pred(*idx)
    if fn is None:
        flat = const(0)
        for d, v in zip(dims, idx):
            flat = binary("add", binary("mul", flat, d.extent), v)
        value = cast(flat, int64)
    else:
        value = fn(*idx)
    return _append(dims, [(cond, value)], math.prod(shape), loc)


def flatmap(domain, fn, max_out):
    """`fn(*idx)` returns up to `max_out` `hw.emit(value, when=cond)`; the emitted values are
    concatenated in index order. Returns `(values, count)`; `values` has size(domain) * max_out
    entries, 0 past `count`."""
    shape = _domain(domain, "hw.flatmap")
    if isinstance(max_out, bool) or not isinstance(max_out, int) or max_out < 1:
        raise TraceError(f"hw.flatmap needs max_out, a positive int, got {max_out!r}")
    dims, idx = _bind(fn, shape, "hw.flatmap")
    loc = user_loc()
    out = fn(*idx)
    emits = list(out) if isinstance(out, (tuple, list)) else [out]
    if not all(isinstance(e, Emit) for e in emits):
        raise TraceError("the function given to hw.flatmap must return hw.emit(value, when=...) (or a tuple of them)", loc)
    if len(emits) > max_out:
        raise TraceError(f"hw.flatmap: the function emits {len(emits)} values but max_out is {max_out}", loc)
    return _append(dims, [(e.when, e.value) for e in emits], math.prod(shape) * max_out, loc)


def _append(dims, pairs, capacity: int, loc):
    conds, values = [], []
    first = const(pairs[0][1])
    dtype = first.dtype if not first.weak else int64
    for cond, value in pairs:
        c = const(cond)
        if isinstance(cond, ArrayVal) or isinstance(value, ArrayVal):
            raise TraceError("filter and flatmap conditions and values must be scalars", loc)
        conds.append(_strong(c if c.dtype == bool_ else binary("ne", c, 0)))
        values.append(_strong(value, dtype))
    node = ir.Collect("append", dims, None, tuple(values), tuple(conds), None, capacity, loc=loc)
    part = ir.Part(node, "values")
    fx = dtype if isinstance(dtype, fixedpoint.Fixed) else None
    return ArrayVal(part.shape, fx or part.dtype, node=part), Val(ir.Count(node))


def argmin(arr) -> Val:
    """Index of the first minimum of a 1-D array (numpy's argmin)."""
    return _arg(arr, "min")


def argmax(arr) -> Val:
    """Index of the first maximum of a 1-D array (numpy's argmax)."""
    return _arg(arr, "max")


def _arg(arr, which: str) -> Val:
    """A min/max over keys (value, index) packed in one int64: the value in the high bits, the
    index (for argmax: its complement) in the low bits, so the first extreme wins ties."""
    if not isinstance(arr, ArrayVal) or arr.ndim != 1:
        raise TraceError(f"hw.arg{which} takes a 1-D array, got {arr!r}")
    n = arr.shape[0]
    dt = arr.dtype
    bits = max(1, (n - 1).bit_length())
    value_bits = dt.bits + (0 if dt.signed or dt.is_bool else 1)
    if value_bits + bits > 64:
        raise TypeMismatchError(
            f"hw.arg{which} of {dt.name} values over {n} elements needs {value_bits + bits} bits; "
            f"at most 64 are supported"
        )
    trace = current(f"hw.arg{which}")
    own = isinstance(arr.node, ir.Map) and len(arr.node.dims) == 1
    d = arr.node.dims[0] if own else trace.fresh_dim(n)  # keep a map's index name: schedules use it
    t = _index_val(d)
    v = arr.elem((t,))
    raw = Val(v.expr) if getattr(v, "fx", None) is not None else v
    low = t if which == "min" else (n - 1) - t
    key = binary("or", binary("shl", cast(raw, int64), np.int64(bits)), cast(low, int64))
    best = Val(ir.Reduce((d,), key.expr, ir.Combiner(ir.REDUCE_OPS[which]), loc=user_loc()))
    index = binary("and", best, np.int64((1 << bits) - 1))
    if which == "max":
        index = binary("sub", np.int64(n - 1), index)
    return maximum(minimum(index, np.int64(n - 1)), np.int64(0))


def matmul(a, b) -> ArrayVal:
    """numpy's `a @ b` for 1-D and 2-D arrays, as a map of sums."""
    if not isinstance(a, ArrayVal) or not isinstance(b, ArrayVal) or a.ndim > 2 or b.ndim > 2:
        raise TraceError("'@' needs two 1-D or 2-D arrays")
    k = a.shape[-1]
    kb = b.shape[0]
    if k != kb:
        raise TypeMismatchError(f"'@' of shapes {a.shape} and {b.shape}: inner dimensions {k} and {kb} differ")
    trace = current("'@'")
    kd = trace.fresh_dim(k)
    kv = _index_val(kd)
    loc = user_loc()
    out_shape = a.shape[:-1] + b.shape[1:]
    dims = tuple(trace.fresh_dim(n) for n in out_shape)
    iv = [_index_val(d) for d in dims]
    ai = tuple(iv[: a.ndim - 1]) + (kv,)
    bi = (kv,) + tuple(iv[a.ndim - 1:])
    prod = binary("mul", a.elem(ai), b.elem(bi))
    red = ir.Reduce((kd,), _strong(prod), ir.Combiner("add"), loc=loc)
    fx = prod.fx
    if not dims:
        return Val(red, fx=fx)
    node = ir.Map(dims, red, loc=loc)
    return ArrayVal(node.shape, fx or node.dtype, node=node)
