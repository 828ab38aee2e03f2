"""hw.exp, hw.log, hw.sqrt, hw.sigmoid, hw.abs on fixed-point values.

Each function is written here in integer operations on the raw value (int64 inside) and reads
of small constant tables (ir.Table), so this code *is* the definition the golden model runs and
the hardware builds: bit-exact by construction. The method is the same for all: reduce the
argument to a fixed interval with shifts, read two neighbouring table entries (64 steps per
octave, 30 fractional bits) and interpolate linearly, then scale back with shifts. Results are
rounded down and saturate at the type's limits. Measured errors against float64 are in the
README (and tests/test_mathfuncs.py bounds them).

    exp(x)      2 ** (x * log2 e): integer part by shift, fractional part from a table
    log(x)      natural log; x <= 0 gives the most negative value
    sqrt(x)     x <= 0 gives 0
    sigmoid(x)  1 / (1 + exp(-x)), from a table over [0, 16) and symmetry
    abs(x)      |x|, wrapping at the most negative value like numpy
"""

from __future__ import annotations

import math

import numpy as np

from .. import ir
from ..errors import TypeMismatchError
from .arrays import ArrayVal, elementwise
from .dtypes import int64
from .fixedpoint import Fixed, tag
from .scalars import Val, binary, cast, unary, where

G = 30  # fractional bits of table entries
T = 6  # table steps per octave: 2**T


def _i(v: int) -> np.int64:
    return np.int64(v)


def _raw(x: Val) -> Val:
    return cast(Val(x.expr), int64)


def _table(values, index: Val) -> Val:
    return Val(ir.Table(tuple(int(v) for v in values), index.expr, int64))


def _interp(table, index: Val, rem: Val, bits: int) -> Val:
    """table[index] + (table[index + 1] - table[index]) * rem / 2**bits, rounded down. The
    tables are increasing, so the differences (a table of their own) are non-negative and the
    product is a narrow one."""
    lo = _table(table[:-1], index)
    step = _table([b - a for a, b in zip(table, table[1:])], index)
    return lo + binary("shr", step * rem, _i(bits))


def _low(v: Val, bits: int) -> Val:
    """The low `bits` bits of a non-negative value."""
    return v & _i((1 << bits) - 1)


def _shift(value: Val, amount: Val) -> Val:
    """value * 2**amount for a signed amount, rounded down (shifts by 64 or more give 0).
    The amounts are maxima with 0, so that their ranges (hwgen/ranges.py) start at 0 and the
    shifters are only as deep as the amounts need."""
    left = binary("max", amount, _i(0))
    right = binary("max", -amount, _i(0))
    return binary("shr", binary("shl", value, left), right)


def _msb(x: Val) -> Val:
    """floor(log2(x)) for 0 < x < 2**63: a binary search in six steps."""
    p = Val(ir.Const(0, int64))
    v = x
    for step in (32, 16, 8, 4, 2, 1):
        big = v >= _i(1 << step)
        v = where(big, binary("shr", v, _i(step)), v)
        p = where(big, p + _i(step), p)
    return p


def _saturate(raw: Val, fx: Fixed) -> Val:
    clipped = where(raw > _i(fx.max), _i(fx.max), where(raw < _i(fx.min), _i(fx.min), raw))
    return tag(cast(clipped, fx.storage), fx)


def _fixed_arg(x, name: str):
    if isinstance(x, ArrayVal):
        return None
    if not isinstance(x, Val) or not isinstance(x.fx, Fixed):
        raise TypeMismatchError(f"hw.{name} takes fixed-point values (hw.fixed); convert with .astype(hw.fixed(...))")
    if x.fx.bits > 32:
        raise TypeMismatchError(f"hw.{name} supports fixed types of at most 32 bits, got {x.fx.name}")
    return x.fx


_EXP2 = [round(2 ** (j / 2**T) * 2**G) for j in range(2**T + 1)]
_LOG2 = [round(math.log2(1 + j / 2**T) * 2**G) for j in range(2**T + 1)]
_SQRT = [round(math.sqrt(1 + j / 2**T) * 2**G) for j in range(3 * 2**T + 1)]
_SIG_STEPS = 8  # 256 steps over [0, 16)
_SIGMOID = [round(2**G / (1 + math.exp(-16 * j / 2**_SIG_STEPS))) for j in range(2**_SIG_STEPS + 1)]
_LOG2E = round(math.log2(math.e) * 2**G)
_LN2_24 = round(math.log(2) * 2**24)


def exp(x):
    """e ** x, saturating at the type's maximum."""
    fx = _fixed_arg(x, "exp")
    if fx is None:
        return elementwise(exp, x)
    f = fx.frac
    y = binary("shr", _raw(x) * _i(_LOG2E), _i(G))  # x * log2(e), f fractional bits
    n = binary("shr", y, _i(f))  # integer part (floor)
    r = _low(y, f)  # fractional part, 0 <= r < 2**f
    steps = min(T, f)
    j = binary("shr", r, _i(f - steps)) if f > steps else r
    rem = _low(r, f - steps)
    table = _EXP2 if steps == T else [round(2 ** (k / 2**steps) * 2**G) for k in range(2**steps + 1)]
    mantissa = _interp(table, j, rem, f - steps)  # 2**frac(y), G fractional bits
    value = _shift(mantissa, n + _i(f - G))
    return _saturate(where(n >= _i(fx.int_bits - 1), _i(fx.max), value), fx)


def log(x):
    """Natural logarithm; x <= 0 gives the most negative value."""
    fx = _fixed_arg(x, "log")
    if fx is None:
        return elementwise(log, x)
    f = fx.frac
    raw = _raw(x)
    positive = raw > _i(0)
    safe = where(positive, raw, _i(1))
    p = _msb(safe)
    mantissa = _shift(safe, _i(G) - p)  # in [2**G, 2**(G+1))
    u = _low(mantissa, G)
    j = binary("shr", u, _i(G - T))
    rem = _low(u, G - T)
    l2 = _interp(_LOG2, j, rem, G - T)  # log2 of the mantissa, G fractional bits
    log2_x = binary("shl", p - _i(f), _i(G)) + l2
    ln_24 = binary("shr", binary("shr", log2_x, _i(G - 24)) * _i(_LN2_24), _i(24))
    value = _shift(ln_24, _i(f - 24))
    return _saturate(where(positive, value, _i(fx.min)), fx)


def sqrt(x):
    """Square root; x <= 0 gives 0."""
    fx = _fixed_arg(x, "sqrt")
    if fx is None:
        return elementwise(sqrt, x)
    f = fx.frac
    raw = _raw(x)
    positive = raw > _i(0)
    safe = where(positive, raw, _i(1))
    p = _msb(safe)
    e = p - ((p + _i(f)) & _i(1))  # e + f even, m = x / 2**e in [1, 4)
    mantissa = _shift(safe, _i(G) - e)  # in [2**G, 2**(G+2))
    u = _low(mantissa - _i(1 << G), G + 2)
    j = binary("shr", u, _i(G - T))
    rem = _low(u, G - T)
    root = _interp(_SQRT, j, rem, G - T)  # sqrt of the mantissa, G fractional bits
    half = binary("shr", e + _i(f), _i(1))
    return _saturate(where(positive, _shift(root, half - _i(G)), _i(0)), fx)


def sigmoid(x):
    """The logistic function 1 / (1 + exp(-x))."""
    fx = _fixed_arg(x, "sigmoid")
    if fx is None:
        return elementwise(sigmoid, x)
    f = fx.frac
    raw = _raw(x)
    limit = _i(16 * (1 << f) - 1)
    ax = where(raw < _i(0), -raw, raw)
    ax = where(ax > limit, limit, ax)  # sigmoid is flat (to 1e-7) past 16
    steps = min(_SIG_STEPS, f + 4)
    shift = f + 4 - steps
    j = binary("shr", ax, _i(shift))
    rem = _low(ax, shift)
    table = (
        _SIGMOID
        if steps == _SIG_STEPS
        else [round(2**G / (1 + math.exp(-16 * k / 2**steps))) for k in range(2**steps + 1)]
    )
    s = _interp(table, j, rem, shift)  # sigmoid(|x|), G fractional bits
    value = _shift(s, _i(f - G))
    return _saturate(where(raw < _i(0), _i(1 << f) - value, value), fx)


def abs_(x):
    """|x| (numpy's abs: the most negative value stays itself)."""
    if isinstance(x, ArrayVal):
        return elementwise(abs_, x)
    return unary("abs", x)
