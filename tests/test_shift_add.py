"""Products by a constant as pipelined shift-and-add trees (dsp.pipelined_product): exact
modulo the output width, one new operand per cycle, and exactly shift_add_levels(c) cycles
late, the latency timing.schedule and the cycle model count."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

import hwgen as hw
from hwgen import ir, timing, uint8, uint16
from hwgen.hw import dsp
from hwgen.lang.dtypes import int64


def test_signed_digits_rebuild_the_constant():
    for c in [3, 7, 3840, -3, -87180, 1549082005, 2**40 - 1, -(2**33) + 5]:
        terms = timing.csd_terms(c)
        assert sum((1 if p else -1) << k for p, k in terms) == c
        shifts = [k for _, k in terms]
        assert all(b - a >= 2 for a, b in zip(shifts, shifts[1:]))  # no adjacent digits


def test_levels():
    assert timing.shift_add_levels(0) == 0
    assert timing.shift_add_levels(1024) == 0  # a shift
    assert timing.shift_add_levels(-32768) == 0
    assert timing.shift_add_levels(3840) == 1  # 4096 - 256: one subtractor
    assert timing.shift_add_levels(5) == 1
    assert timing.shift_add_levels(-5) == 2  # -(4 + 1): the sum is negated
    assert timing.shift_add_levels(1549082005) == 4  # 13 digits


def test_timing_counts_the_levels_and_takes_the_operand_from_a_flipflop():
    x = ir.Param("x", int64)
    product = ir.Binary("mul", ir.Binary("add", x, x, int64), ir.Const(1549082005, int64), int64)
    shift = ir.Binary("mul", x, ir.Const(1024, int64), int64)
    assert timing.shift_add(product) and not timing.shift_add(shift)
    assert timing.latency_of(product) == 4 and timing.latency_of(shift) == 1
    t = timing.schedule([product], lambda mem: (0, 0, 0))
    assert t.stage[product] == 1 + 4  # the sum is registered first, then four adder levels


def _run(c: int, in_shape, out_width: int, values: list) -> list:
    m = Module()
    count = [0]

    def new_signal(shape, hint):
        count[0] += 1
        return Signal(shape, name=f"{hint}{count[0]}")

    x = Signal(in_shape)
    out = Signal(signed(out_width))
    dsp.pipelined_product(m, x, c, out, new_signal)
    levels = timing.shift_add_levels(c)
    got = []

    async def bench(ctx):
        for v in values + [0] * levels:
            ctx.set(x, v)
            await ctx.delay(1e-9)
            got.append(ctx.get(out))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got[levels : levels + len(values)]


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_pipelined_product_is_exact_modulo_the_output_width(data):
    c = data.draw(st.integers(-(2**40), 2**40).filter(lambda c: timing.shift_add_levels(c) > 0))
    is_signed = data.draw(st.booleans())
    width = data.draw(st.integers(2, 40))
    out_width = data.draw(st.integers(8, 72))
    lo, hi = (-(2 ** (width - 1)), 2 ** (width - 1) - 1) if is_signed else (0, 2**width - 1)
    values = data.draw(st.lists(st.integers(lo, hi), min_size=1, max_size=8))
    got = _run(c, signed(width) if is_signed else unsigned(width), out_width, values)
    for v, g in zip(values, got):
        want = (v * c) % 2**out_width
        want -= 2**out_width if want >= 2 ** (out_width - 1) else 0
        assert g == want, (c, v, width, out_width)


N = 64
fx = hw.fixed(16, 16)


@hw.kernel(tile={"i": 32, "j": 32, "k": 32})
def scaled(
    x: hw.Array[uint8, N], f: hw.Array[fx, N]
) -> tuple[hw.Array[uint8, N], hw.Array[uint16, N], hw.Array[fx, N]]:
    return (
        hw.map(N, lambda i: x[i] * 109),  # 128 - 16 - 4 + 1: wraps modulo 2**8
        hw.map(N, lambda j: x[j].astype(uint16) * 3840),  # 4096 - 256: wraps modulo 2**16
        hw.map(N, lambda k: f[k] * -0.2316419),
    )  # a fixed-point coefficient, negative


def test_the_kernel_uses_shift_add_products():
    products = {n for r in scaled.program.results for n in ir.walk(r.node) if timing.shift_add(n)}
    assert len(products) == 3


@pytest.mark.rtl
def test_unsigned_and_fixed_products_by_constants_in_verilator():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, N).astype(np.uint8)
    x[:2] = [255, 0]
    f = rng.uniform(-3000, 3000, N)
    r = scaled.verify(x, f)
    small, wide, fixed = r.outputs
    np.testing.assert_array_equal(small, (x.astype(np.int64) * 109 % 256).astype(np.uint8))
    np.testing.assert_array_equal(wide, (x.astype(np.int64) * 3840 % 65536).astype(np.uint16))
    # the coefficient and the operands at 16 fractional bits; the product back to 16 bits
    coefficient, operand = round(-0.2316419 * 65536), np.floor(f * 65536).astype(np.int64)
    np.testing.assert_allclose(fixed * 65536, operand * coefficient / 65536, atol=1)
    assert r.cycles == r.predicted_cycles
