"""The top: processing elements (hw/pe.py) wired to their DRAM channels, as Verilog ports.

`Top(compiled, dram, pes=1)` instantiates `pes` copies of one PE design (instances `pe0`,
`pe1`, ...), each with its own DRAM channel. It turns each PE's typed DRAM streams into the
flat channel ports a testbench or a user's design connects to (memchannel.channel).

Members with one PE (Verilog port names in brackets; what the README documents):
    start: In(1)            pulse for one cycle while idle to run the kernel once
    done: Out(1)            high from the end of a run until the next start
    busy: Out(1)            high while running
    cycles: Out(64)         cycles the last run took (counted while busy)
    arg_<p>: In             scalar parameter p (sampled at start)
    base_<a>: In(addr)      word address of array a in DRAM (sampled at start)
    res_<r>: Out            scalar result r (valid while done)
    overflow_<g>: Out(1)    group-by g saw more distinct keys than its max_keys (valid while done)
    range_<m>: Out(1)       a multifold's subscript from data left its accumulator m (valid while done)
    mem: Out(channel)       the DRAM channel [mem__rd_req__valid, mem__rd_req__addr, ...]

With several PEs, `start`, `arg_<p>` and `base_<a>` go to every PE (each PE's arrays sit at
the same addresses of its own DRAM); `done` is high when every PE is done, `busy` while any
PE is busy, `cycles` counts from `start` until every PE is done; PE k's channel is
`mem_<k>`, its results `res_<r>_<k>`, `overflow_<g>_<k>` and `range_<m>_<k>`.

A mesh kernel's top wraps one PE whose program has collectives (pe.py) and also has its
collectives' DRAM channel `cmem` (cmem__rd_req__valid, ...) and its members of
phases.members (coordinates, phase results' bases, links): the module a mesh top
(mesh_top.py) instantiates once per PE.

Timing: the PEs' own (pe.py); with several PEs, `done` and `cycles` are combined one cycle
later than the last PE's.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..dram import DramConfig
from ..loops import checked_mems
from . import memchannel, phases
from .datapath import dtype_shape
from .pe import PE


class Top(wiring.Component):
    """`pes` PEs of a compiled kernel (passes.Compiled) on `dram` channels; see the module doc."""

    def __init__(self, compiled, dram: DramConfig, pes: int = 1):
        if pes < 1:
            raise ValueError("a top holds at least one PE")
        self.compiled, self.dram = compiled, dram
        self.pes = [PE(compiled, dram) for _ in range(pes)]
        first = self.pes[0]
        self.rings = tuple(first.rings)
        if self.rings and pes != 1:
            raise ValueError("a PE with collectives is wrapped one to a top (hw/mesh_top.py)")
        self.plans, self.word_bits, self.unit_names = first.plans, first.word_bits, first.unit_names
        self.tag_bits = first.tag_bits
        prog = compiled.program
        members = {"start": In(1), "done": Out(1), "busy": Out(1), "cycles": Out(64)}
        for p in prog.params:
            members[f"arg_{p.name}"] = In(dtype_shape(p.dtype))
        for d in prog.drams:
            members[f"base_{d.name}"] = In(dram.addr_bits)
        channel = memchannel.channel(dram.addr_bits, first.word_bits, dram.words_per_cycle, first.tag_bits)
        for k in range(pes):
            suffix = "" if pes == 1 else f"_{k}"
            for s in prog.scalar_outs:
                members[f"res_{s.name}{suffix}"] = Out(dtype_shape(s.mem.dtype))
            for g in prog.groups:
                members[f"overflow_{g.name}{suffix}"] = Out(1)
            for mem in checked_mems(prog):
                members[f"range_{mem.name}{suffix}"] = Out(1)
            members[f"mem{suffix}"] = Out(channel)
        if self.rings:
            members["cmem"] = Out(channel)
        extra = phases.members(self.rings, dram.addr_bits) if self.rings else {}
        self.extra = [name for name in extra if name not in members]  # not the program's arrays
        for name in self.extra:
            members[name] = first.signature.members[name]
        super().__init__(members)

    def sources(self) -> dict:
        """Instance path -> the user's lines each PE unit implements (hw/sources.py)."""
        return {f"pe{k}.{path}": text for k, pe in enumerate(self.pes) for path, text in pe.sources().items()}

    @property
    def pe(self) -> PE:
        """The first (with one PE, the only) PE."""
        return self.pes[0]

    def elaborate(self, platform):
        m = Module()
        prog = self.compiled.program
        single = len(self.pes) == 1
        for k, pe in enumerate(self.pes):
            m.submodules[f"pe{k}"] = pe
            suffix = "" if single else f"_{k}"
            m.d.comb += pe.start.eq(self.start)
            for p in prog.params:
                m.d.comb += getattr(pe, f"arg_{p.name}").eq(getattr(self, f"arg_{p.name}"))
            for d in prog.drams:
                m.d.comb += getattr(pe, f"base_{d.name}").eq(getattr(self, f"base_{d.name}"))
            for s in prog.scalar_outs:
                m.d.comb += getattr(self, f"res_{s.name}{suffix}").eq(getattr(pe, f"res_{s.name}"))
            for g in prog.groups:
                m.d.comb += getattr(self, f"overflow_{g.name}{suffix}").eq(getattr(pe, f"overflow_{g.name}"))
            for mem in checked_mems(prog):
                m.d.comb += getattr(self, f"range_{mem.name}{suffix}").eq(getattr(pe, f"range_{mem.name}"))
            memchannel.connect_flat(m, pe.mem, getattr(self, f"mem{suffix}"))
        if self.rings:
            memchannel.connect_flat(m, self.pe.cmem, self.cmem)
        for name in self.extra:  # a mesh PE's coordinates, phase bases and links: passed through
            member = self.signature.members[name]
            if member.is_port:
                if member.flow == In:
                    m.d.comb += getattr(self.pe, name).eq(getattr(self, name))
            elif member.flow == Out:
                wiring.connect(m, getattr(self.pe, name), wiring.flipped(getattr(self, name)))
            else:
                wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(self.pe, name))
        if single:
            m.d.comb += [self.done.eq(self.pe.done), self.busy.eq(self.pe.busy), self.cycles.eq(self.pe.cycles)]
            return m
        all_done = Signal()
        m.d.comb += all_done.eq(_all(pe.done for pe in self.pes))
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(0)]
        with m.Elif(self.busy & all_done):
            m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m


def _all(values):
    out = 1
    for v in values:
        out = out & v
    return out
