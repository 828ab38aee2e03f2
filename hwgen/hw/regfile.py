"""On-chip memory built from registers: combinational reads, synchronous writes.

Used for scalars, accumulators and small tiles. Port signatures, as seen by the user of the
port (a controller):

    read port   addr: Out(address), data: In(element)      data = mem[addr], same cycle
    write port  en, addr, data: Out                          mem[addr] <= data at the clock edge
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


def address_bits(size: int) -> int:
    return max(1, (size - 1).bit_length())


def read_port(size: int, shape) -> wiring.Signature:
    return wiring.Signature({"addr": Out(address_bits(size)), "data": In(shape)})


def write_port(size: int, shape) -> wiring.Signature:
    return wiring.Signature({"en": Out(1), "addr": Out(address_bits(size)), "data": Out(shape)})


class RegFile(wiring.Component):
    """`size` registers of `shape` with `reads` read ports `rd_<k>` and `writes` write ports
    `wr_<k>`; when several write ports write one register in a cycle, the highest k wins.
    Registers start at zero."""

    def __init__(self, size: int, shape, reads: int, writes: int):
        self._size, self._shape = size, Shape.cast(shape)
        members = {}
        for k in range(reads):
            members[f"rd_{k}"] = In(read_port(size, shape))
        for k in range(writes):
            members[f"wr_{k}"] = In(write_port(size, shape))
        self._reads, self._writes = reads, writes
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        regs = [Signal(self._shape, name=f"r{k}") for k in range(self._size)]
        table = Array(regs)
        for k in range(self._reads):
            port = getattr(self, f"rd_{k}")
            if self._size == 1:
                m.d.comb += port.data.eq(regs[0])
            else:
                m.d.comb += port.data.eq(table[port.addr])
        for k in range(self._writes):
            port = getattr(self, f"wr_{k}")
            with m.If(port.en):
                if self._size == 1:
                    m.d.sync += regs[0].eq(port.data)
                else:
                    with m.Switch(port.addr):
                        for r in range(self._size):
                            with m.Case(r):
                                m.d.sync += regs[r].eq(port.data)
        return m
