"""The AXI4-Lite control slave of a kernel behind AXI (hw/axi_top.py), in Amaranth's
simulator on a kernel with scalars only (no memory traffic): CTRL starts it only with its
write strobe, a run that finishes while ISR is being written still raises the interrupt, and
the register map refuses names that differ only in case and buses wider than AXI allows."""

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

import hwgen as hw
from hwgen import int32
from hwgen.build import compile_kernel, flag_ports
from hwgen.dram import DramConfig
from hwgen.errors import HwgenError
from hwgen.hw.axi_top import AxiTop


@hw.kernel
def twice(a: int32) -> int32:
    return a * 2


def _top(kernel, dram=None):
    c = compile_kernel(kernel)
    return AxiTop(c, dram or DramConfig(), flag_ports(c.program))


def _simulate(bench):
    top = _top(twice)
    m = Module()
    m.submodules.top = top
    drive = ClockDomain("drive")  # the test's clock, driving aclk
    m.domains.drive = drive
    m.d.comb += top.aclk.eq(drive.clk)
    sim = Simulator(m)
    sim.add_clock(1e-8, domain="drive")

    async def run(ctx):
        ctx.set(top.aresetn, 0)
        await ctx.tick("drive").repeat(2)
        ctx.set(top.aresetn, 1)
        await bench(ctx, top)

    sim.add_testbench(run)
    sim.run()


async def _write(ctx, top, addr, data, strb=0xF):
    p = lambda name: getattr(top, f"s_axi_control_{name}")  # noqa: E731
    ctx.set(p("awaddr"), addr)
    ctx.set(p("wdata"), data)
    ctx.set(p("wstrb"), strb)
    ctx.set(p("awvalid"), 1)
    ctx.set(p("wvalid"), 1)
    ctx.set(p("bready"), 1)
    await ctx.tick("drive").until(p("awready"))
    ctx.set(p("awvalid"), 0)
    ctx.set(p("wvalid"), 0)
    await ctx.tick("drive")


def test_ctrl_starts_only_with_its_write_strobe():
    async def bench(ctx, top):
        await _write(ctx, top, 0x20, 21)
        await _write(ctx, top, 0x00, 1, strb=0b0010)  # byte 0 not written: no start
        await ctx.tick("drive").repeat(20)
        assert not ctx.get(top.top.busy) and not ctx.get(top.top.done)
        await _write(ctx, top, 0x00, 1)
        await ctx.tick("drive").repeat(40)
        assert ctx.get(top.top.done) and ctx.get(top.top.res_out) == 42

    _simulate(bench)


def test_a_run_finishing_during_an_isr_write_still_raises_the_interrupt():
    async def bench(ctx, top):
        await _write(ctx, top, 0x04, 1)  # GIE
        await _write(ctx, top, 0x08, 1)  # IER
        await _write(ctx, top, 0x00, 1)  # start
        for _ in range(30):  # ISR written (with 0: toggles nothing) every other cycle, over the finish
            await _write(ctx, top, 0x0C, 0)
        assert ctx.get(top.top.done) and ctx.get(top.irq)

    _simulate(bench)


def test_names_that_differ_only_in_case_are_refused():
    @hw.kernel
    def cased(n: int32, N: int32) -> int32:
        return n + N

    with pytest.raises(HwgenError) as e:
        _top(cased)
    assert e.value.message == (
        "wrap='axi' names a register after each argument, array and result in upper case: "
        "'arg_n' and 'arg_N' both give ARG_N; rename one"
    )


def test_a_bus_wider_than_axi_allows_is_refused():
    @hw.kernel(tile={"i": 64})
    def copy(x: hw.Array[int32, 64]) -> hw.Array[int32, 64]:
        return hw.map(64, lambda i: x[i])

    with pytest.raises(HwgenError) as e:
        _top(copy, DramConfig(words_per_cycle=64))
    assert e.value.message.startswith("wrap='axi' needs a memory bus of at most 1024 bits (AXI4's widest)")
