"""Value ranges of bitwise or (ranges._or_range): every a | b of values in the operands'
ranges lies in the bounds, and an argmin key (value << bits | index) gets the bits it needs,
not the int64 it is computed in (the hardware sizes the argmin's comparator from it)."""

from hypothesis import given, settings
from hypothesis import strategies as st

import hwgen as hw
from hwgen import ir
from hwgen.ranges import _or_range, value_range

FULL = (-(2**63), 2**63 - 1)


def _interval(draw):
    a = draw(st.integers(-(2**40), 2**40))
    b = draw(st.integers(-(2**40), 2**40))
    return min(a, b), max(a, b)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_or_of_values_in_range_stays_in_bounds(data):
    a, b = _interval(data.draw), _interval(data.draw)
    lo, hi = _or_range(a, b, FULL)
    for _ in range(8):
        x = data.draw(st.integers(*a))
        y = data.draw(st.integers(*b))
        assert lo <= x | y <= hi, (a, b, x, y)


def test_argmin_key_is_as_wide_as_its_value_and_index():
    dist = ir.Param("dist", hw.int32)
    key = ir.Binary(
        "or",
        ir.Binary("shl", ir.Cast(dist, hw.int64), ir.Const(3, hw.int64), hw.int64),
        ir.Cast(ir.Index("k"), hw.int64),
        hw.int64,
    )
    assert value_range(key, {"k": 8}) == (-(2**34), 2**34 - 1)
