"""hwgen's fast path to RTLIL (hwgen/verilog.py) writes exactly what Amaranth's own
`convert_fragment` writes, byte for byte, for designs that exercise every template: the fast
path restates Amaranth internals, so this is what keeps it honest."""

import pytest
from conftest import load_pattern

from hwgen import verilog
from hwgen.build import compile_kernel
from hwgen.dram import DramConfig
from hwgen.hw.link import Link
from hwgen.hw.top import Top

pytestmark = pytest.mark.skipif(not verilog.FAST, reason="the fast path is off with this Amaranth release")


def both(make, name: str) -> tuple:
    """(fast RTLIL, Amaranth's RTLIL) of two fresh copies of a component."""
    fast, plain = make(), make()
    return (
        verilog.to_rtlil(fast, verilog.ports_of(fast), name, fast=True),
        verilog.to_rtlil(plain, verilog.ports_of(plain), name, fast=False),
    )


@pytest.mark.parametrize("app", ["dotproduct", "tpchq1", "outliers"])
def test_fast_rtlil_of_an_app_is_amaranths(app):
    kernel = getattr(load_pattern(app), app)
    compiled = compile_kernel(kernel)
    fast, plain = both(lambda: Top(compiled, DramConfig()), app)
    assert fast == plain


def test_fast_rtlil_of_links_and_two_pes_is_amaranths():
    assert len(set(both(lambda: Link(word_bits=16, words=2, latency=3, depth=256), "link"))) == 1
    compiled = compile_kernel(load_pattern("saxpy").saxpy)
    assert len(set(both(lambda: Top(compiled, DramConfig(), pes=2), "two"))) == 1


def test_a_combinational_loop_is_still_found():
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Loop(wiring.Component):
        a: In(4)
        y: Out(4)

        def elaborate(self, platform):
            m = Module()
            x = Signal(4)
            m.d.comb += [x.eq(self.a + self.y), self.y.eq(x ^ 1)]
            return m

    class Fine(wiring.Component):  # all inputs to all outputs, yet no loop through the bits
        a: In(4)
        y: Out(4)

        def elaborate(self, platform):
            m = Module()
            x = Signal(4)
            m.d.comb += [x.eq(self.a), self.y.eq(x)]
            m.d.comb += x[2].eq(self.y[1])  # bit 1 feeds bit 2 only
            return m

    loop = Loop()
    with pytest.raises(Exception, match="[Cc]ombinational"):
        verilog.to_rtlil(loop, verilog.ports_of(loop), "loop", fast=True)
    fine = Fine()
    assert verilog.to_rtlil(fine, verilog.ports_of(fine), "fine", fast=True)
