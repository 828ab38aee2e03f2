"""A kernel behind AXI: `wrap="axi"`. The kernel's top (hw/top.py, one PE) with its DRAM
channel turned into an AXI4 master (hw/axi.py) and its control pins into an AXI4-Lite slave
with the registers of hw/axi_regs.py, so it drops into an SoC like an HLS kernel.

Ports (Verilog names; what Vivado's and LiteX's interface inference expects):

    aclk, aresetn                 the clock, and the reset (active low, synchronous)
    s_axi_control_<signal>        AXI4-Lite slave, 32-bit data: awaddr awprot awvalid awready
                                  wdata wstrb wvalid wready bresp bvalid bready araddr arprot
                                  arvalid arready rdata rresp rvalid rready
    m_axi_gmem_<signal>           AXI4 master (hw/axi.py `axi4`), data as wide as a DRAM beat
    irq                           high while GIE, IER[0] and ISR[0] are set

A run: write the arguments and base addresses, write 1 to CTRL; the kernel starts two cycles
after the register write is taken; `done` (CTRL bit 1, ISR bit 0) is set once the kernel is
done and every write it made has been answered. CYCLES counts from the kernel's start to then.

The slave takes a write when both its address and data are valid (one at a time; its awready
and wready are that condition) into registers, answers it OKAY the next cycle and writes the
register it names in that cycle (so a read after the answer sees it). It takes a read
whenever none waits (arready), its address into a register, and answers it the cycle after
that from a register. Both decode registered addresses: the handshake never reaches the
registers' enables or the read multiplexer in the same cycle (these were the wrapped
kernels' critical paths).
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..errors import HwgenError
from . import axi_regs
from .axi import AxiMaster, axi4, axi_addr_bits
from .datapath import dtype_shape
from .top import Top

LITE = (
    ("awaddr", "a"),
    ("awprot", 3),
    ("awvalid", 1),
    ("wdata", 32),
    ("wstrb", 4),
    ("wvalid", 1),
    ("bready", 1),
    ("araddr", "a"),
    ("arprot", 3),
    ("arvalid", 1),
    ("rready", 1),
)
LITE_OUT = (
    ("awready", 1),
    ("wready", 1),
    ("bresp", 2),
    ("bvalid", 1),
    ("arready", 1),
    ("rdata", 32),
    ("rresp", 2),
    ("rvalid", 1),
)


class AxiTop(wiring.Component):
    """`compiled` (passes.Compiled) on `dram` (DramConfig) behind AXI; see the module doc.
    `regs` is the register map (axi_regs.Reg list)."""

    def __init__(self, compiled, dram, flags: list):
        self.top = Top(compiled, dram)
        if self.top.rings:
            raise ValueError("a mesh PE cannot be wrapped in AXI")
        self.word_bytes = self.top.word_bits // 8
        if self.top.word_bits * dram.words_per_cycle > 1024:
            raise HwgenError(
                f"wrap='axi' needs a memory bus of at most 1024 bits (AXI4's widest); {dram.words_per_cycle} words "
                f"of {self.top.word_bits} bits a beat make {self.top.word_bits * dram.words_per_cycle}: lower "
                "DramConfig.words_per_cycle"
            )
        self.bridge = AxiMaster(dram.addr_bits, self.top.word_bits, dram.words_per_cycle, self.top.tag_bits)
        self.addr_bits = axi_addr_bits(dram.addr_bits, self.top.word_bits)
        self.flags = flags
        self.regs = axi_regs.register_map(compiled.program, flags, self.addr_bits, lambda d: dtype_shape(d).width)
        self.lite_bits = axi_regs.lite_addr_bits(self.regs)
        members = {"aclk": In(1), "aresetn": In(1), "irq": Out(1)}
        for name, width in LITE:
            members[f"s_axi_control_{name}"] = In(self.lite_bits if width == "a" else width)
        for name, width in LITE_OUT:
            members[f"s_axi_control_{name}"] = Out(width)
        for name, member in axi4(self.addr_bits, self.bridge.data_bits).members.items():
            members[f"m_axi_gmem_{name}"] = Out(member.shape) if member.flow == Out else In(member.shape)
        super().__init__(members)

    @property
    def data_bits(self) -> int:
        return self.bridge.data_bits

    def sources(self) -> dict:
        """Instance path -> the user's lines each kernel unit implements (hw/sources.py)."""
        return {f"kernel.{path}": text for path, text in self.top.sources().items()}

    @property
    def word_bits(self) -> int:
        return self.top.word_bits

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        m.d.comb += [cd.clk.eq(self.aclk), cd.rst.eq(~self.aresetn)]
        m.submodules.kernel = top = self.top
        m.submodules.bridge = bridge = self.bridge
        wiring.connect(m, top.mem, bridge.mem)
        for name, member in bridge.axi.signature.members.items():
            port = getattr(self, f"m_axi_gmem_{name}")
            inner = getattr(bridge.axi, name)
            m.d.comb += port.eq(inner) if member.flow == Out else inner.eq(port)

        # registers the host writes
        values = {r.name: Signal(r.bits, name=r.name.lower()) for r in self.regs if r.access == "rw"}
        running, kick, done, isr = Signal(), Signal(), Signal(), values["ISR"]
        cycles = Signal(64)
        finished = Signal()
        m.d.comb += finished.eq(running & ~kick & top.done & bridge.idle)
        m.d.comb += [top.start.eq(kick), bridge.clear.eq(kick)]
        for r in self.regs:
            if r.port and r.access == "rw":
                value = values[r.name]
                if r.port.startswith("base_"):  # byte address -> word address
                    value = value[(self.word_bytes - 1).bit_length() :]
                m.d.comb += getattr(top, r.port).eq(value)
        m.d.sync += kick.eq(0)
        with m.If(kick):
            m.d.sync += [running.eq(1), done.eq(0), cycles.eq(0)]
        with m.Elif(finished):
            m.d.sync += [running.eq(0), done.eq(1), isr.eq(1)]
        with m.If(running):
            m.d.sync += cycles.eq(cycles + 1)
        m.d.comb += self.irq.eq(values["GIE"] & values["IER"] & isr)
        self._writes(m, values, running, kick, finished)
        status = Cat(bridge.rd_error, bridge.wr_error, *(getattr(top, f) for f in self.flags))
        read_only = {"CTRL": Cat(kick, done, ~running & ~kick), "STATUS": status, "CYCLES": cycles}
        for r in self.regs:
            if r.access == "ro" and r.port:
                read_only[r.name] = getattr(top, r.port)
        self._reads(m, {**values, **read_only}, done, finished)
        return m

    def _port(self, name: str):
        return getattr(self, f"s_axi_control_{name}")

    def _writes(self, m, values: dict, running, kick, finished) -> None:
        """The write channels: a write with its address and data both valid is taken into
        registers and answered OKAY the next cycle, in which it is written; CTRL bit 0 starts
        an idle kernel, ISR toggles (a run finishing in the same cycle still sets it)."""
        p = self._port
        bvalid = p("bvalid")
        take, pending = Signal(name="lite_wr_take"), Signal(name="lite_wr_pending")
        m.d.comb += take.eq(p("awvalid") & p("wvalid") & ~bvalid)
        m.d.comb += [p("awready").eq(take), p("wready").eq(take), p("bresp").eq(0)]
        data, strb = Signal.like(p("wdata"), name="lite_wdata"), Signal.like(p("wstrb"), name="lite_wstrb")
        word = Signal(len(p("awaddr")) - 2, name="lite_wr_word")
        m.d.sync += pending.eq(take)
        with m.If(take):
            m.d.sync += [bvalid.eq(1), data.eq(p("wdata")), strb.eq(p("wstrb")), word.eq(p("awaddr")[2:])]
        with m.Elif(p("bready")):
            m.d.sync += bvalid.eq(0)
        for r in self.regs:
            if r.access != "rw":
                continue
            value = values[r.name]
            for half in range(0, r.bits, 32):  # the slot's low word, then its high word
                with m.If(pending & (word == (r.offset + half // 8) >> 2)):
                    if r.name == "CTRL":
                        with m.If(strb[0] & data[0] & ~running & ~kick):
                            m.d.sync += kick.eq(1)
                    elif r.name == "ISR":
                        with m.If(strb[0]):
                            m.d.sync += value.eq((value ^ data[0]) | finished)
                    else:
                        for b in range(0, min(32, r.bits - half), 8):
                            with m.If(strb[b // 8]):
                                m.d.sync += value[half + b : half + min(b + 8, r.bits - half)].eq(
                                    data[b : min(b + 8, r.bits - half)]
                                )

    def _reads(self, m, values: dict, done, finished) -> None:
        """The read channels: an address is taken into a register when no read waits, its
        register's word answered the cycle after; reading CTRL clears done (unless a run
        finishes then)."""
        p = self._port
        rvalid, rdata = p("rvalid"), p("rdata")
        take, pending = Signal(name="lite_rd_take"), Signal(name="lite_rd_pending")
        m.d.comb += [take.eq(p("arvalid") & ~rvalid & ~pending), p("arready").eq(take), p("rresp").eq(0)]
        word = Signal(len(p("araddr")) - 2, name="lite_rd_word")
        m.d.sync += pending.eq(take)
        with m.If(take):
            m.d.sync += word.eq(p("araddr")[2:])
        with m.If(pending):
            m.d.sync += [rvalid.eq(1), rdata.eq(0)]
        with m.Elif(p("rready")):
            m.d.sync += rvalid.eq(0)
        for r in self.regs:
            value = values[r.name]
            for half in range(0, max(len(value), 1), 32):
                with m.If(pending & (word == (r.offset + half // 8) >> 2)):
                    m.d.sync += rdata.eq(value[half : half + 32])
                    if r.name == "CTRL":
                        with m.If(~finished):
                            m.d.sync += done.eq(0)
