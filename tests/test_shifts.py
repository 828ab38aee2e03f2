"""Shifts in the hardware: the value range of a right shift by a constant (which sizes the
signals after it), and the shifter a variable amount gets: only the amount bits its range
needs, the test for a shift past the width only when the amount can get there, and a timing
cost that follows (hw/timing.py shift_bits). Bit-exactness of shifts against the golden model is
checked in tests/test_numpy_semantics.py (random expressions) and tests/test_mathfuncs.py (the
functions built from shifts, in Verilator)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hwgen as hw
from hwgen import ir
from hwgen import timing as tm
from hwgen.interp import Evaluator, Frame
from hwgen.lang import scalars
from hwgen.ranges import value_range

INTS = [hw.int8, hw.int16, hw.int32, hw.int64, hw.uint8, hw.uint16, hw.uint32, hw.uint64]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INTS), st.integers(0, 63), st.integers(0, 2**32))
def test_range_of_a_constant_right_shift_is_exact(dt, by, seed):
    by = by % dt.bits
    x = scalars.Val(ir.Param("x", dt))
    node = (x >> by).expr
    lo, hi = value_range(node, {})
    assert (lo, hi) == (dt.min >> by, dt.max >> by)  # the ends are reached: x = min, x = max
    rng = np.random.default_rng(seed)
    for v in rng.integers(dt.min, dt.max, 32, dtype=dt.np, endpoint=True):
        got = int(Evaluator({"x": v}).expr(node, Frame(params={"x": v})).reshape(()))
        assert lo <= got <= hi


def _shift(op, dt, mask=None):
    x, y = scalars.Val(ir.Param("x", dt)), scalars.Val(ir.Param("y", dt))
    amount = y if mask is None else y & mask
    return (x << amount if op == "<<" else x >> amount).expr


def test_shifter_uses_only_the_amount_bits_its_range_needs():
    assert tm.shift_bits(_shift(">>", hw.int64)) == (6, 1)  # any amount: 6 bits, and >= 64
    assert tm.shift_bits(_shift(">>", hw.int64, 31)) == (5, 0)  # 0..31: 5 bits, never past
    assert tm.shift_bits(_shift("<<", hw.int32, 40)) == (5, 1)  # 0..40 can pass 32: 5 bits and the test
    assert tm.shift_bits(_shift("<<", hw.int32, 3)) == (2, 0)
    x = scalars.Val(ir.Param("x", hw.int64))
    assert tm.shift_bits((x << 3).expr) is None  # a constant amount is wiring


def test_shifter_cost_is_two_amount_bits_a_level():
    assert tm.op_cost(_shift(">>", hw.int64)) == 3 + 1  # three 4:1 levels, then 0 or the sign
    assert tm.op_cost(_shift(">>", hw.int64, 31)) == 3
    assert tm.op_cost(_shift("<<", hw.int32, 3)) == 1
    for case in (_shift(">>", hw.int64), _shift("<<", hw.uint64, 63)):
        assert tm.op_cost(case) <= tm.BUDGET  # every shifter fits one pipeline stage


def test_a_shifter_that_fills_a_stage_is_split_in_two():
    wide = _shift(">>", hw.int64)  # 6 amount bits and the >= 64 test: a whole stage
    assert tm.split_shift(wide) == (2, 1 + 1)  # 4 high bits, register, 2 low bits and the fill
    assert tm.latency_of(wide) == 1
    timing = tm.schedule([wide], reads=None)
    assert timing.ready(wide) == (1, 2)
    assert tm.split_shift(_shift("<<", hw.int32)) == (2, 2)  # 5 bits and the >= 32 test
    for narrow in (_shift(">>", hw.int64, 31), _shift("<<", hw.int32, 3)):
        assert tm.split_shift(narrow) is None and tm.latency_of(narrow) == 0


def test_a_split_shifter_takes_its_operands_from_flipflops():
    """A shift of a split shift's result (mathfuncs._shift: << then >>) does not chain its
    high-bit multiplexers behind the first one's low-bit step: each input bit fans out to
    16 multiplexers, so the value is carried to the next stage first."""
    x, y, z = (scalars.Val(ir.Param(n, hw.int64)) for n in "xyz")
    first = (x << y).expr
    both = ir.Binary("shr", first, z.expr, hw.int64)
    timing = tm.schedule([both], reads=None)
    assert timing.ready(first) == (1, 2)
    assert timing.ready(both) == (3, 2)  # carried to stage 2, high bits, register, low bits
    alone = tm.schedule([(x >> z).expr], reads=None)
    assert alone.ready((x >> z).expr) == (1, 2)  # operands already in flip-flops: no carry


S = 512


@hw.kernel
def variable_shifts(
    a: hw.Array[hw.int64, S], u: hw.Array[hw.uint64, S], w: hw.Array[hw.int32, S], s: hw.Array[hw.int64, S]
):
    return (
        hw.map(S, lambda i: a[i] >> s[i]),
        hw.map(S, lambda j: a[j] << s[j]),
        hw.map(S, lambda k: u[k] >> s[k].astype(hw.uint64)),
        hw.map(S, lambda m: w[m] << s[m].astype(hw.int32)),
        hw.map(S, lambda n: w[n] >> (s[n] & 31).astype(hw.int32)),
    )


def test_split_shifters_in_verilator_are_bit_exact():
    """Amounts from -3 to 80 (negative ones shift by their bits as unsigned: past the width)
    through two-step shifters, every case against the golden model."""
    rng = np.random.default_rng(5)
    a = rng.integers(-(2**63), 2**63 - 1, S, dtype=np.int64, endpoint=True)
    u = rng.integers(0, 2**64 - 1, S, dtype=np.uint64, endpoint=True)
    w = rng.integers(-(2**31), 2**31 - 1, S, dtype=np.int32, endpoint=True)
    s = rng.integers(-3, 80, S, dtype=np.int64, endpoint=True)
    r = variable_shifts.with_schedule(tile={n: 128 for n in "ijkmn"}, par={"i": 2}).verify(a, u, w, s)
    assert r.cycles == r.predicted_cycles
