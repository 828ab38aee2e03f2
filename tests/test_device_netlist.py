"""The netlist built for ECP5 synthesis (hw/device.py: multipliers as MULT18X18D blocks and
block RAMs as DP16KD blocks, each with its registers inside the block) runs in Verilator on
models of the primitives (sim/ecp5_cells.v): bit-exact with the golden model, in the same
cycles as the generic design."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator
from conftest import load_pattern

import hwgen as hw
from hwgen import int8, int16, int32, int64, uint8, uint16, uint32
from hwgen.build import elaborate
from hwgen.hw.dsp import constant_product

pytestmark = pytest.mark.rtl

N = 256
DEEP = 16384


@hw.kernel(tile={"i": 64}, par={"i": 4})
def narrow(a: hw.Array[int8, N], b: hw.Array[int16, N], c: hw.Array[uint8, N]) -> hw.Array[int16, N]:
    # int8 * int16 and uint8 * int16 in int16: signs extend before the 16-bit wrap-around
    return hw.map(N, lambda i: a[i] * b[i] + c[i] * b[i])


@hw.kernel(tile={"i": 8192})
def deep(x: hw.Array[int16, DEEP], y: hw.Array[int16, DEEP]) -> hw.Array[int16, DEEP]:
    # tiles of 8192 in 4 banks (one per DRAM word a cycle), double-buffered: 4096 entries
    # per bank, in DP16KD blocks 4 bits wide
    return hw.map(DEEP, lambda i: x[i] - y[i])


@hw.kernel(tile={"i": 64, "j": 64, "k": 64, "l": 64}, par={"i": 2, "j": 2, "k": 2, "l": 2})
def wide(
    a: hw.Array[int32, N], b: hw.Array[int32, N], c: hw.Array[uint32, N], d: hw.Array[int16, N], e: hw.Array[uint16, N]
) -> tuple[hw.Array[int64, N], hw.Array[int64, N], hw.Array[int32, N], hw.Array[int32, N]]:
    # products wider than one block, from 16-bit chunks (the top one signed when negative)
    return (
        hw.map(N, lambda i: a[i].astype(int64) * b[i].astype(int64)),
        hw.map(N, lambda j: c[j].astype(int64) * a[j].astype(int64)),
        hw.map(N, lambda k: d[k].astype(int32) * e[k].astype(int32)),
        hw.map(N, lambda l: a[l] * b[l]),  # noqa: E741
    )


def inputs(kernel):
    rng = np.random.default_rng(3)
    if kernel is wide:
        big = np.array([-(2**31), 2**31 - 1, -1, 0, 1, -(2**15), 2**16], np.int64)
        a = rng.integers(-(2**31), 2**31, N)
        a[: len(big)] = big
        b = rng.integers(-(2**31), 2**31, N)
        b[: len(big)] = big[::-1]
        return (
            a.astype(np.int32),
            b.astype(np.int32),
            rng.integers(0, 2**32, N).astype(np.uint32),
            rng.integers(-(2**15), 2**15, N).astype(np.int16),
            rng.integers(0, 2**16, N).astype(np.uint16),
        )
    if kernel is deep:
        return tuple(rng.integers(-32768, 32768, DEEP).astype(np.int16) for _ in range(2))
    return (
        rng.integers(-128, 128, N).astype(np.int8),
        rng.integers(-32768, 32768, N).astype(np.int16),
        rng.integers(0, 256, N).astype(np.uint8),
    )


def test_ecp5_netlist_instantiates_device_blocks():
    generic = elaborate(narrow).verilog
    ecp5 = elaborate(narrow, target="ecp5").verilog
    assert "MULT18X18D" not in generic and "DP16KD" not in generic
    assert ecp5.count("MULT18X18D ") == 8  # two products in each of four lanes
    assert '.REG_OUTPUT_CLK("CLK0")' in ecp5
    assert "DP16KD " not in ecp5  # tiles of 64 in four banks: LUT RAM, left to Yosys
    # int32 x int32 -> int64: 4 partial products (not 10), uint32 x int32 -> int64: 4,
    # int16 x uint16 -> int32: 1, int32 x int32 -> int32: 3 (the fourth is above bit 31); two lanes
    assert elaborate(wide, target="ecp5").verilog.count("MULT18X18D ") == 2 * (4 + 4 + 1 + 3)
    blocks = elaborate(deep, target="ecp5").verilog
    # x, y and the result tile, 4 banks each, 4096 x 16 bits a bank: 4 blocks 4 bits wide
    assert blocks.count("DP16KD ") == 3 * 4 * 4
    assert ".DATA_WIDTH_B(32'd4)" in blocks and '.REGMODE_B("OUTREG")' in blocks


@pytest.mark.parametrize("case", ["narrow", "wide", "deep", "dotproduct", "gemm", "tpchq1"])
def test_ecp5_netlist_matches_golden_model(case):
    if case in ("narrow", "wide", "deep"):
        kernel = {"narrow": narrow, "wide": wide, "deep": deep}[case]
        args = inputs(kernel)
    else:
        app = load_pattern(case)
        kernel, args = getattr(app, case), app.inputs(0)
    generic = kernel.verify(*args)
    r = kernel.verify(*args, target="ecp5")
    assert r.cycles == generic.cycles == r.predicted_cycles


def test_unknown_simulation_target():
    with pytest.raises(hw.HwgenError) as e:
        narrow.simulate(*inputs(narrow), target="ice40")
    assert e.value.message == "unknown simulation target 'ice40'; expected one of ecp5"


@hw.kernel(tile={"i": 96})
def strided(x: hw.Array[int16, 384]) -> hw.Array[int16, 384]:
    return hw.map(384, lambda i: x[i] + 1)  # tile origins i * 96: no product in the datapath


def test_address_products_use_no_dsp_block():
    assert "MULT18X18D" not in elaborate(strided, target="ecp5").verilog


@pytest.mark.parametrize("c", [0, 1, -1, 3, 5, 7, 96, 3840, -3840, 12345, 2**20 - 1, -(2**19 + 3)])
def test_constant_product_matches_multiplication(c):
    x, y = Signal(signed(12)), Signal(signed(40))  # signed operand
    u, z = Signal(12), Signal(signed(40))  # unsigned operand (a counter)
    m = Module()
    m.d.comb += [y.eq(constant_product(x, c)), z.eq(constant_product(u, c))]
    seen = []

    async def bench(ctx):
        for v in (-2048, -1, 0, 1, 7, 1000, 2047):
            ctx.set(x, v)
            ctx.set(u, v % 4096)
            seen.append((ctx.get(y), ctx.get(z)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [(v * c, (v % 4096) * c) for v in (-2048, -1, 0, 1, 7, 1000, 2047)]
