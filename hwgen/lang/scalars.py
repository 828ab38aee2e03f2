"""Traced scalars: `Val` and numpy's arithmetic on it.

`Val` is a traced scalar: an IR Expr plus numpy's "weak" flag for Python ints and index
variables (NEP 50), with a value range for weak values. `_Operators` (shared with arrays),
`const`, `binary`, `unary`, `cast`, `where`, `maximum` and `minimum` follow numpy:
`np.result_type` promotion, weak Python ints, wrap-around; comparisons give bool_.
Fixed-point operands are handed to fixedpoint.py, array operands to arrays.elementwise, which
applies the same scalar operation to each element.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import ir
from ..errors import TraceError, TypeMismatchError
from . import fixedpoint
from .dtypes import DType, as_dtype, bool_, int64, promote, smallest_holding, weak_result

# Arrays are built from scalars: arrays.py imports this module. The few functions here that
# also accept an array operand (`const` rejects one; `binary`, `unary`, `cast` and `where`
# apply themselves elementwise over it) import arrays.py when called, not at the top. Modules
# then load in one direction (scalars, arrays, patterns) with no cycle, and each function
# shows in its own body where array operands go; a hook installed by arrays.py would hide
# that, and one module for both would undo the split.


class _Operators:
    """numpy's operators on traced values (scalars and arrays alike)."""

    def __add__(self, o):
        return binary("add", self, o)

    def __radd__(self, o):
        return binary("add", o, self)

    def __sub__(self, o):
        return binary("sub", self, o)

    def __rsub__(self, o):
        return binary("sub", o, self)

    def __mul__(self, o):
        return binary("mul", self, o)

    def __rmul__(self, o):
        return binary("mul", o, self)

    def __floordiv__(self, o):
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o):
        return binary("floordiv", o, self)

    def __mod__(self, o):
        return binary("mod", self, o)

    def __rmod__(self, o):
        return binary("mod", o, self)

    def __and__(self, o):
        return binary("and", self, o)

    def __rand__(self, o):
        return binary("and", o, self)

    def __or__(self, o):
        return binary("or", self, o)

    def __ror__(self, o):
        return binary("or", o, self)

    def __xor__(self, o):
        return binary("xor", self, o)

    def __rxor__(self, o):
        return binary("xor", o, self)

    def __lshift__(self, o):
        return binary("shl", self, o)

    def __rlshift__(self, o):
        return binary("shl", o, self)

    def __rshift__(self, o):
        return binary("shr", self, o)

    def __rrshift__(self, o):
        return binary("shr", o, self)

    def __eq__(self, o):
        return binary("eq", self, o)

    def __ne__(self, o):
        return binary("ne", self, o)

    def __lt__(self, o):
        return binary("lt", self, o)

    def __le__(self, o):
        return binary("le", self, o)

    def __gt__(self, o):
        return binary("gt", self, o)

    def __ge__(self, o):
        return binary("ge", self, o)

    def __neg__(self):
        return unary("neg", self)

    def __invert__(self):
        return unary("invert", self)

    def __abs__(self):
        return unary("abs", self)

    def __pos__(self):
        return unary("pos", self)


class Val(_Operators):
    """A traced scalar. `weak` marks Python ints and index values (numpy's weak scalars);
    `lo`/`hi` bound a weak value so it can be checked against the dtype it meets."""

    __array_ufunc__ = None  # numpy scalars on the left defer to our reflected operators
    __hash__ = None

    def __init__(self, expr: ir.Expr, weak: bool = False, lo: int | None = None, hi: int | None = None, fx=None):
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
        raise TraceError(
            "true division '/' gives floats in numpy; hwgen has integer types only: use '//' (or fixed point, hw.fixed)"
        )

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
        return f"<traced {self.dtype.name} scalar>"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise TraceError(
            f"a traced scalar has no attribute '{name}'; scalars support Python's operators, "
            f".astype(...) and .dtype, and hwgen's functions (hw.where, hw.maximum, ...)"
        )

    def __len__(self):
        raise TraceError("a traced scalar has no length; it is one value")


def const(value, loc=None) -> Val:
    """A traced constant for a Python or numpy int/bool (weak for Python values)."""
    from .arrays import ArrayVal

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
        raise TypeMismatchError(f"the float {value!r} cannot be used: hwgen has integer types only", loc)
    if isinstance(value, (tuple, list)):
        raise TypeMismatchError(
            f"cannot use a {type(value).__name__} of {len(value)} values here: expected a scalar", loc
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
    "add": "+",
    "sub": "-",
    "mul": "*",
    "floordiv": "//",
    "mod": "%",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "max": "hw.maximum",
    "min": "hw.minimum",
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
    if op in ("shl", "shr") and b.lo >= 0 and b.hi < 1 << 16:  # monotonic in each operand
        corners = [x << y if op == "shl" else x >> y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        return min(corners), max(corners)
    return None, None


def binary(op: str, a, b) -> Val:
    """`a <op> b` with numpy's promotion; arrays broadcast elementwise."""
    from .arrays import ArrayVal, elementwise

    if isinstance(a, ArrayVal) or isinstance(b, ArrayVal):
        return elementwise(lambda x, y: binary(op, x, y), a, b)
    if fixedpoint.is_fixed(a) or fixedpoint.is_fixed(b):
        return fixedpoint.binary(op, a, b)
    what = f"'{_SYMBOL[op]}'"
    compare = op in ir.COMPARE
    if compare and (_huge(a) or _huge(b)):
        return _compare_huge(op, a, b, what)
    a, b = const(a), const(b)
    if a.weak and b.weak:
        return _python_binary(op, a, b, what)
    if a.weak or b.weak:
        strong, weak = (b, a) if a.weak else (a, b)
        dt = weak_result(strong.dtype, weak.dtype == bool_)
        if compare and isinstance(weak.expr, ir.Const) and not dt.fits(weak.lo):
            # every value of dt lies on one side of the constant: the answer is known (numpy
            # compares Python ints exactly)
            side = dt.min if weak.lo < dt.min else dt.max
            x, y = (side, weak.lo) if weak is b else (weak.lo, side)
            return const(
                np.bool_({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[op])
            )
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


_PY_COMPARE = {
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
}


def _decided(op: str, a: Val, b: Val):
    """The Python bool `a <op> b` when the operands' ranges decide it, else None."""
    if a.lo is None or b.lo is None:
        return None
    if op in ("eq", "ne"):
        if a.lo == a.hi == b.lo == b.hi:
            return _PY_COMPARE[op](a.lo, b.lo)
        if a.hi < b.lo or b.hi < a.lo:
            return op == "ne"
        return None
    test = _PY_COMPARE[op]
    corners = {test(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)}
    return corners.pop() if len(corners) == 1 else None


def _huge(v) -> bool:
    """A Python int beyond every 64-bit type."""
    return isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < (1 << 64)


def _compare_huge(op: str, a, b, what: str) -> Val:
    """A comparison with a Python int beyond 64 bits: Python and numpy compare exactly, so
    the answer is known from the other side's range (a weak value's, or its dtype's)."""
    if _huge(a) and _huge(b):
        return const(bool(_PY_COMPARE[op](a, b)))
    big, other = (a, b) if _huge(a) else (b, a)
    other = const(other)
    lo, hi = (other.lo, other.hi) if other.weak else (other.dtype.min, other.dtype.max)  # (fixed goes to fixedpoint.py)
    if lo is not None:
        side = Val(ir.Const(0, int64), weak=True, lo=big, hi=big)
        x, y = (side, Val(ir.Const(0, int64), weak=True, lo=lo, hi=hi))
        if big is b:
            x, y = y, x
        known = _decided(op, x, y)
        if known is not None:
            return const(bool(known)) if other.weak else const(np.bool_(known))
    raise TypeMismatchError(
        f"the Python integer {big} in {what} is beyond 64 bits and the other side's "
        f"values are not known at build time; use a smaller constant"
    )


def _python_binary(op: str, a: Val, b: Val, what: str) -> Val:
    """`a <op> b` on two weak values: Python ints, Python bools and index values, which behave
    like Python ints (so comparisons of them are Python bools). Python's rules: bool & | ^ bool
    stays a bool, other arithmetic on bools is int arithmetic (True + True == 2); results are
    exact, computed in int64 in hardware, so a result that may leave int64 is an error."""
    if op in ir.COMPARE:
        known = _decided(op, a, b)
        if known is not None:
            return const(bool(known))  # the answer is the same for every value of the index
        for v in (a, b):
            if v.lo is not None and not (int64.fits(v.lo) and int64.fits(v.hi)):
                raise TypeMismatchError(_beyond_int64(v, what))
        dt = bool_ if a.dtype == bool_ and b.dtype == bool_ else int64
        return Val(ir.Binary(op, _meet(a, dt, what), _meet(b, dt, what), bool_), weak=True, lo=0, hi=1)
    if a.dtype == bool_ and b.dtype == bool_ and op in ("and", "or", "xor", "max", "min"):
        return _bool_binary(op, a.expr, b.expr, weak=True)
    if isinstance(a.expr, ir.Const) and isinstance(b.expr, ir.Const):
        return const(_fold(op, a.expr.value, b.expr.value))
    lo, hi = _weak_range(op, a, b)
    if lo is not None and not (int64.fits(lo) and int64.fits(hi)):
        raise TypeMismatchError(
            f"{what} on index values gives values in [{lo}, {hi}], beyond int64: hwgen computes "
            f"Python-int arithmetic on index values in int64; keep the constants smaller or "
            f"convert one side with .astype(...) (it then wraps like numpy)"
        )
    for v in (a, b):
        # + - * are exact modulo 2**64, so an operand beyond int64 is fine when the result fits
        if (
            (lo is None or op not in ("add", "sub", "mul"))
            and v.lo is not None
            and not (int64.fits(v.lo) and int64.fits(v.hi))
        ):
            raise TypeMismatchError(_beyond_int64(v, what))
    expr = ir.Binary(op, _meet(a, int64, what), _meet(b, int64, what), int64)
    return Val(expr, weak=True, lo=lo, hi=hi)


def _beyond_int64(v: Val, what: str) -> str:
    shown = v.lo if v.lo == v.hi else f"in [{v.lo}, {v.hi}]"
    return (
        f"the Python integer {shown} in {what} next to an index value is beyond int64, where hwgen "
        f"computes index values; here the result depends on the index, so keep the constant "
        f"within int64 or convert one side with .astype(...)"
    )


def _fold(op: str, a: int, b: int) -> int:
    """`a <op> b` on two Python ints, exactly as Python computes it."""
    if op in ("floordiv", "mod") and b == 0:
        raise TraceError(f"integer division or modulo by zero in constants {a} and {b}")
    if op in ("shl", "shr") and b < 0:
        raise TraceError(f"negative shift count {b}")
    return {
        "add": lambda: a + b,
        "sub": lambda: a - b,
        "mul": lambda: a * b,
        "floordiv": lambda: a // b,
        "mod": lambda: a % b,
        "and": lambda: a & b,
        "or": lambda: a | b,
        "xor": lambda: a ^ b,
        "shl": lambda: a << b,
        "shr": lambda: a >> b,
        "max": lambda: builtins.max(a, b),
        "min": lambda: builtins.min(a, b),
    }[op]()


def _bool_binary(op: str, a: ir.Expr, b: ir.Expr, weak: bool) -> Val:
    """numpy on two bools: + is or, * is and; - is an error; comparisons and logic as usual."""
    mapped = {"add": "or", "mul": "and", "max": "or", "min": "and"}.get(op, op)
    if mapped in ("and", "or", "xor") or mapped in ir.COMPARE:
        if weak and isinstance(a, ir.Const) and isinstance(b, ir.Const):
            return const(
                bool(_fold(mapped, a.value, b.value))
                if mapped not in ir.COMPARE
                else bool(_PY_COMPARE[mapped](a.value, b.value))
            )
        return Val(ir.Binary(mapped, a, b, bool_), weak=weak, lo=0 if weak else None, hi=1 if weak else None)
    raise TypeMismatchError(
        f"'{_SYMBOL[op]}' on two bool_ values is not supported (numpy: boolean {op} is an error "
        f"or changes type); use .astype(...) first, or ^ | & for logic"
    )


def unary(op: str, a) -> Val:
    from .arrays import ArrayVal, elementwise

    if isinstance(a, ArrayVal):
        return elementwise(lambda x: unary(op, x), a)
    if op == "pos":  # +x is x, except that +True is the int 1 in Python
        return a if not (isinstance(a, Val) and a.weak and a.dtype == bool_) else unary("abs", a)
    if fixedpoint.is_fixed(a):
        return fixedpoint.unary(op, a)
    a = const(a)
    if a.dtype == bool_ and a.weak:
        # a Python bool (an index comparison): -, ~ and abs() give ints, ~True == -2
        a = (
            Val(_meet(a, int64, "an index comparison"), weak=True, lo=a.lo, hi=a.hi)
            if not isinstance(a.expr, ir.Const)
            else const(int(a.lo))
        )
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
    from .arrays import ArrayVal, elementwise

    dt = as_dtype(dtype)
    if dt is None:
        from .signature import unknown_dtype

        raise TypeMismatchError(
            unknown_dtype(
                dtype, "unknown dtype; expected one of int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_"
            )
        )
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
    from .arrays import ArrayVal, elementwise

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
        return Val(ir.Select(c.expr, _meet(a, dt, "hw.where"), _meet(b, dt, "hw.where"), dt), weak=True, lo=lo, hi=hi)
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
