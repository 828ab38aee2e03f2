"""Fixed point: `hw.fixed(int_bits, frac_bits)`, signed two's complement, like `ap_fixed`.

A fixed value is carried as its raw integer (value * 2**frac_bits) in a plain integer IR: every
fixed operation below is spelled out as integer operations, so the golden model and the hardware
agree bit for bit by construction. Total widths are 8, 16, 32 or 64 bits.

Rules (documented in the README):
- Operands of one operation have the same fixed type; an integer operand (or a Python int or
  float constant) is converted to it first (constants are rounded down to the fixed grid and
  must fit). Mixing two fixed types needs `.astype(hw.fixed(...))`.
- + - max min where: exact, wrapping on overflow. `*`: the exact product rounded down (toward
  minus infinity) to the type's grid, wrapping. `/`: the quotient rounded down; x / 0 is 0.
  `//` and `%` are numpy's floor division and remainder of the values. Comparisons give bool_.
- `.astype(fixed)` rounds down and wraps; `.astype(int)` rounds down (floor) and wraps.
- At the kernel's boundary fixed arrays are numpy floats: inputs are rounded down to the grid
  (and wrap), outputs come back as floats holding the exact fixed values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import TypeMismatchError
from .dtypes import DType, bool_, int8, int16, int32, int64, uint64

_STORAGE = {8: int8, 16: int16, 32: int32, 64: int64}


@dataclass(frozen=True, repr=False)
class Fixed(DType):
    """fixed(int_bits, frac_bits): `bits` = int_bits + frac_bits, `frac` fractional bits."""

    frac: int = 0

    @property
    def int_bits(self) -> int:
        return self.bits - self.frac

    @property
    def storage(self) -> DType:
        """The integer dtype of the raw value."""
        return _STORAGE[self.bits]

    @property
    def np(self) -> np.dtype:
        return self.storage.np

    @property
    def scale(self) -> int:
        return 1 << self.frac

    def quantize(self, values) -> np.ndarray:
        """Floats (or ints) to raw values: rounded down to the grid, wrapped to the width."""
        raw = np.floor(np.asarray(values, dtype=np.float64) * self.scale)
        if not np.all(np.isfinite(raw)):
            raise TypeMismatchError(f"{self.name} values must be finite numbers")
        if self.bits < 64 and np.all(np.abs(raw) < 2.0**62):
            return raw.astype(np.int64).astype(self.storage.np)  # numpy's cast wraps
        flat = [self.storage.wrap(int(v)) for v in np.ravel(raw)]
        return np.array(flat, dtype=self.storage.np).reshape(raw.shape)

    def to_float(self, raw) -> np.ndarray:
        return np.asarray(raw).astype(np.float64) / self.scale

    def __repr__(self) -> str:
        return self.name


def fixed(int_bits: int, frac_bits: int) -> Fixed:
    """The signed fixed-point type with `int_bits` integer bits (sign included) and
    `frac_bits` fractional bits; their sum must be 8, 16, 32 or 64."""
    for name, v in (("int_bits", int_bits), ("frac_bits", frac_bits)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TypeMismatchError(f"hw.fixed {name} must be a non-negative int, got {v!r}")
    if int_bits < 1:
        raise TypeMismatchError("hw.fixed needs at least 1 integer bit (the sign)")
    if int_bits + frac_bits not in _STORAGE:
        raise TypeMismatchError(
            f"hw.fixed({int_bits}, {frac_bits}) is {int_bits + frac_bits} bits wide; fixed "
            f"types are 8, 16, 32 or 64 bits wide in all"
        )
    return Fixed(f"fixed({int_bits},{frac_bits})", int_bits + frac_bits, True, frac_bits)


def is_fixed(v) -> bool:
    return isinstance(getattr(v, "dtype", None), Fixed)


# ------------------------------------------------------------------ traced operations
# (scalars.py is imported late: it imports this module)


def _tr():
    from . import scalars

    return scalars


def raw_of(v, fx: Fixed):
    """The raw value of `v` in fixed type `fx`, as a traced integer Val of fx's storage."""
    tr = _tr()
    if isinstance(v, tr.Val) and isinstance(v.fx, Fixed):
        if v.fx != fx:
            raise TypeMismatchError(f"mixing {v.fx.name} and {fx.name}: convert one side with .astype(hw.{fx.name})")
        return tr.Val(v.expr)
    if isinstance(v, (float, np.floating)) or (isinstance(v, (int, np.integer)) and not isinstance(v, bool)):
        raw = math.floor(float(v) * fx.scale) if isinstance(v, (float, np.floating)) else int(v) * fx.scale
        if not fx.storage.fits(raw):
            raise TypeMismatchError(
                f"the constant {v} does not fit {fx.name} (range [{fx.min / fx.scale}, {fx.max / fx.scale}])"
            )
        return tr.const(np.array(raw, dtype=fx.storage.np)[()])
    v = tr.const(v)
    return int_to_fixed(v, fx)


def int_to_fixed(v, fx: Fixed):
    """An integer (or bool) traced value as the raw value of `fx` (shifted, wrapped)."""
    tr = _tr()
    wide = tr.cast(v, fx.storage)
    return tr.binary("shl", wide, np.array(fx.frac, dtype=fx.storage.np)[()]) if fx.frac else wide


def wrap(v, fx: Fixed):
    """A wider raw value wrapped to fx's width, tagged as fx."""
    tr = _tr()
    return tag(tr.cast(v, fx.storage), fx)


def tag(v, fx: Fixed):
    """The raw integer Val `v` viewed as a value of type fx."""
    tr = _tr()
    return tr.Val(v.expr, fx=fx)


def _wide(fx: Fixed):
    if fx.bits > 32:
        raise TypeMismatchError(
            f"dividing {fx.name} values is not supported: '/' on fixed types needs a double-width "
            f"quotient and is limited to fixed types of at most 32 bits; convert with "
            f".astype(hw.fixed(...)) to a 32-bit fixed type first, or divide the integers with '//'"
        )
    return int64


def _mul64(ra, rb, fx: Fixed):
    """The product of two 64-bit raw values, floor-shifted by fx.frac and wrapped to 64 bits:
    bits [frac, frac + 63] of the exact 128-bit product, built from four 32 x 32-bit products
    of the halves (all in uint64, which wraps like the 128-bit sum's words), with the
    two's-complement corrections for negative operands in the high word."""
    tr = _tr()
    mask, half = np.uint64(0xFFFFFFFF), np.uint64(32)
    ua, ub = tr.cast(ra, uint64), tr.cast(rb, uint64)
    a0, a1 = ua & mask, ua >> half
    b0, b1 = ub & mask, ub >> half
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> half) + (p01 & mask) + (p10 & mask)
    lo = (p00 & mask) | (mid << half)
    hi = p11 + (p01 >> half) + (p10 >> half) + (mid >> half)
    zero = np.uint64(0)
    hi = hi - tr.where(ra < np.int64(0), ub, zero) - tr.where(rb < np.int64(0), ua, zero)
    f = fx.frac
    out = lo if f == 0 else (lo >> np.uint64(f)) | (hi << np.uint64(64 - f))
    return wrap(tr.cast(out, int64), fx)


def binary(op: str, a, b):
    tr = _tr()
    fx = a.fx if is_fixed(a) and isinstance(a, tr.Val) else b.fx
    ra, rb = raw_of(a, fx), raw_of(b, fx)
    if op in tr.ir.COMPARE:
        return tr.binary(op, ra, rb)
    if op in ("add", "sub", "max", "min", "and", "or", "xor", "mod"):
        return wrap(tr.binary(op, ra, rb), fx)
    if op == "mul":
        if fx.bits == 64:
            return _mul64(ra, rb, fx)
        w = _wide(fx)
        product = tr.binary("mul", tr.cast(ra, w), tr.cast(rb, w))
        return wrap(tr.binary("shr", product, np.int64(fx.frac)), fx)
    if op == "truediv":
        w = _wide(fx)
        num = tr.binary("shl", tr.cast(ra, w), np.int64(fx.frac))
        return wrap(tr.binary("floordiv", num, tr.cast(rb, w)), fx)
    if op == "floordiv":
        q = tr.binary("floordiv", ra, rb)  # floor of the values' quotient, as an integer
        return wrap(int_to_fixed(q, fx), fx)
    raise TypeMismatchError(f"'{tr._SYMBOL.get(op, op)}' is not defined on fixed-point values")


def unary(op: str, a):
    tr = _tr()
    fx = a.fx
    if op in ("neg", "abs"):
        return wrap(tr.unary(op, tr.Val(a.expr)), fx)
    raise TypeMismatchError("'~' is not defined on fixed-point values")


def cast(v, target: DType):
    """`v.astype(target)` where `v` or `target` is fixed point."""
    tr = _tr()
    if isinstance(target, Fixed):
        if is_fixed(v) and isinstance(v, tr.Val):
            src = v.fx
            raw = tr.Val(v.expr)
            if target.frac >= src.frac:
                w = tr.cast(raw, int64)
                moved = tr.binary("shl", w, np.int64(target.frac - src.frac))
            else:
                moved = tr.binary("shr", tr.cast(raw, int64), np.int64(src.frac - target.frac))
            return wrap(moved, target)
        return tag(raw_of(v, target), target)
    # fixed -> integer or bool
    raw = tr.Val(v.expr)
    if target == bool_:
        return tr.binary("ne", raw, 0)
    floor = tr.binary("shr", raw, np.array(v.fx.frac, dtype=v.fx.storage.np)[()]) if v.fx.frac else raw
    return tr.cast(floor, target)


def where(cond, a, b):
    tr = _tr()
    fx = a.fx if is_fixed(a) and isinstance(a, tr.Val) else b.fx
    return tag(tr.where(cond, raw_of(a, fx), raw_of(b, fx)), fx)
