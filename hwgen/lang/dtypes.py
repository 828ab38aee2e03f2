"""Integer dtypes with numpy's meaning: promotion, value ranges, wrap-around.

`int8 ... uint64` and `bool_` are `DType` objects. Calling one converts: `int32(x)` is
`x.astype(int32)` for a traced value and a typed constant for a Python int.
`promote(a, b)` is `np.result_type(a, b)` restricted to integers: a pair numpy would promote
to a float (int64 with uint64) is a `TypeMismatchError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TypeMismatchError


@dataclass(frozen=True)
class DType:
    """An integer or boolean element type of `bits` bits."""

    name: str
    bits: int
    signed: bool

    @property
    def is_bool(self) -> bool:
        return self.name == "bool_"

    @property
    def np(self) -> np.dtype:
        return np.dtype(np.bool_ if self.is_bool else self.name)

    @property
    def min(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    def fits(self, value: int) -> bool:
        return self.min <= int(value) <= self.max

    def wrap(self, value: int) -> int:
        """`value` reduced into this type's range with two's-complement wrap-around."""
        value = int(value) & ((1 << self.bits) - 1)
        if self.is_bool:
            return value
        if self.signed and value >= 1 << (self.bits - 1):
            value -= 1 << self.bits
        return value

    def __call__(self, value):
        from .scalars import cast

        return cast(value, self)

    def __repr__(self) -> str:
        return self.name


int8 = DType("int8", 8, True)
int16 = DType("int16", 16, True)
int32 = DType("int32", 32, True)
int64 = DType("int64", 64, True)
uint8 = DType("uint8", 8, False)
uint16 = DType("uint16", 16, False)
uint32 = DType("uint32", 32, False)
uint64 = DType("uint64", 64, False)
bool_ = DType("bool_", 1, False)

ALL = (int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["bool"] = bool_


def from_numpy(dt) -> DType | None:
    """The DType for a numpy dtype (or scalar type), or None if hwgen has no such type."""
    try:
        dt = np.dtype(dt)
    except TypeError:
        return None
    if dt == np.bool_:
        return bool_
    return _BY_NAME.get(dt.name)


def as_dtype(x) -> DType | None:
    """Accept a DType, a numpy dtype or scalar type; None if it is not one hwgen knows."""
    if isinstance(x, DType):
        return x
    if x is bool:
        return bool_
    if x is int:
        return None
    return from_numpy(x)


def promote(a: DType, b: DType) -> DType:
    """numpy's result type of two integer/bool dtypes."""
    if a == b:
        return a
    result = np.result_type(a.np, b.np)
    found = from_numpy(result)
    if found is None:
        raise TypeMismatchError(
            f"mixing {a.name} and {b.name} promotes to {result} in numpy, which hwgen does not "
            f"support; convert one side explicitly with .astype(...)"
        )
    return found


def weak_result(strong: DType, weak_is_bool: bool) -> DType:
    """The dtype of `strong <op> weak` for a Python int or bool `weak` (numpy's NEP 50 rules):
    the strong dtype, except that a bool array meeting a Python int becomes int64."""
    if strong.is_bool and not weak_is_bool:
        return int64
    return strong


def smallest_holding(lo: int, hi: int) -> DType | None:
    """The narrowest signed dtype holding every value in [lo, hi] (unsigned if lo >= 0 fails)."""
    for dt in (int8, int16, int32, int64):
        if dt.min <= lo and hi <= dt.max:
            return dt
    if lo >= 0 and hi <= uint64.max:
        return uint64
    return None
