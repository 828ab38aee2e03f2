"""Block RAM with registered read data: one write port, any number of read ports.

    ram = BlockRam(shape, depth, reads)
    ram.w_en, ram.w_addr, ram.w_data   mem[w_addr] <= w_data at the clock edge when w_en
    ram.r_addr[k] -> ram.r_data[k]     mem[r_addr], as it was before that edge's write,
                                       two cycles later (the RAM's read, then its output register)

The generic form is an Amaranth Memory (Yosys infers block RAM) followed by a register in the
fabric. Built for ECP5 (hw/device.py), each read port gets its own DP16KD blocks (port A writes,
port B reads) with the output register switched on (REGMODE_B "OUTREG"): Yosys cannot put a
register into an ECP5 block RAM, and a block RAM without it takes about 6 ns from clock to
data. Same latency and results in both forms; memories shallower than MIN_BLOCK_DEPTH or
deeper than one block in its narrowest mode keep the generic form.

A read of the entry being written in the same cycle returns the old entry in the generic form
and in the DP16KD model (sim/ecp5_cells.v); the block itself does not promise it. hwgen never
relies on it: such a read only happens in an accumulator's read-modify-write, whose pipeline
forwards its own recent writes over the RAM's data (hw/pipe.py, `_forward`).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Shape, Signal
from amaranth.lib.memory import Memory

from . import device
from .device import KEEP

# DP16KD data width -> (entries, low address bits that are not part of the address)
DP16KD_MODES = {18: (1024, 4), 9: (2048, 3), 4: (4096, 2), 2: (8192, 1), 1: (16384, 0)}
# shallower memories stay generic: Yosys builds them from LUT RAM, which reads quickly
MIN_BLOCK_DEPTH = 128


def dp16kd_mode(depth: int) -> int | None:
    """The widest DP16KD data width that holds `depth` entries (None: the generic form)."""
    if depth < MIN_BLOCK_DEPTH:
        return None
    for width, (entries, _) in DP16KD_MODES.items():
        if depth <= entries:
            return width
    return None


class BlockRam:
    """Signals of a RAM; `elaborate_into(m)` builds it (generic or device form)."""

    def __init__(self, shape: Shape, depth: int, reads: int, name: str):
        self.shape, self.depth, self.name = Shape.cast(shape), depth, name
        abits = max(1, (depth - 1).bit_length())
        # each bank keeps its own address, write-enable and write-data registers (`keep`): banks
        # that lanes address alike, or that a tile load fills with the same beat, would
        # otherwise share one, routed to block RAMs across the chip
        self.w_en = Signal(name=f"{name}_wen", attrs=KEEP)
        self.w_addr = Signal(abits, name=f"{name}_waddr", attrs=KEEP, reset_less=True)
        self.w_data = Signal(self.shape, name=f"{name}_wdata", attrs=KEEP, reset_less=True)
        self.r_addr = [Signal(abits, name=f"{name}_raddr{k}", attrs=KEEP, reset_less=True) for k in range(reads)]
        self.r_data = [Signal(self.shape, name=f"{name}_rdata{k}", reset_less=True) for k in range(reads)]

    def elaborate_into(self, m: Module) -> None:
        mode = dp16kd_mode(self.depth) if device.current() == "ecp5" else None
        if mode is None:
            self._generic(m)
        else:
            for k in range(len(self.r_addr)):
                self._dp16kd(m, k, mode)

    def _generic(self, m):
        # a bank of one entry gets two (the second unused): Amaranth gives a one-entry memory
        # zero-width address wires, which Verilator's lint calls a [-1:0] range
        ram = Memory(shape=self.shape, depth=max(2, self.depth), init=[])
        m.submodules[self.name] = ram
        wp = ram.write_port()
        m.d.comb += [wp.en.eq(self.w_en), wp.addr.eq(self.w_addr), wp.data.eq(self.w_data)]
        for addr, data in zip(self.r_addr, self.r_data):
            rp = ram.read_port(transparent_for=())
            m.d.comb += [rp.en.eq(1), rp.addr.eq(addr)]
            m.d.sync += data.eq(rp.data)  # the RAM's output register

    def _dp16kd(self, m, k: int, width: int):
        """Read port k: enough DP16KD blocks side by side for the data width."""
        _, low = DP16KD_MODES[width]
        total = self.shape.width
        wdata, rdata = self.w_data.as_unsigned(), Signal(total, name=f"{self.name}_q{k}")
        zero, one = Const(0, 1), Const(1, 1)
        for n, base in enumerate(range(0, total, width)):
            bits = min(width, total - base)
            ports = {}
            for i in range(14):  # address bits above `low`; below them, byte enables (x18) or 0
                a = i - low
                ports[f"i_ADA{i}"] = (
                    self.w_addr[a] if 0 <= a < len(self.w_addr) else (one if width == 18 and i < 2 else zero)
                )
                ports[f"i_ADB{i}"] = self.r_addr[k][a] if 0 <= a < len(self.r_addr[k]) else zero
            for i in range(18):
                ports[f"i_DIA{i}"] = wdata[base + i] if i < bits else zero
                ports[f"i_DIB{i}"] = zero
                if i < bits:
                    ports[f"o_DOB{i}"] = rdata[base + i]
            for i in range(3):
                ports[f"i_CSA{i}"] = zero
                ports[f"i_CSB{i}"] = zero
            m.submodules[f"{self.name}_r{k}_{n}"] = Instance(
                "DP16KD",
                p_DATA_WIDTH_A=width,
                p_DATA_WIDTH_B=width,
                p_REGMODE_A="NOREG",
                p_REGMODE_B="OUTREG",
                p_RESETMODE="SYNC",
                p_CSDECODE_A="0b000",
                p_CSDECODE_B="0b000",
                p_WRITEMODE_A="NORMAL",
                p_WRITEMODE_B="NORMAL",
                p_GSR="DISABLED",
                i_CLKA=ClockSignal(),
                i_CEA=one,
                i_OCEA=one,
                i_WEA=self.w_en,
                i_RSTA=zero,
                i_CLKB=ClockSignal(),
                i_CEB=one,
                i_OCEB=one,
                i_WEB=zero,
                i_RSTB=zero,
                **ports,
            )
        m.d.comb += self.r_data[k].eq(rdata)
