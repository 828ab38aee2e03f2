"""The kernel's top-level component: controllers, memories and the DRAM channel, wired.

Members (Verilog port names in brackets):
    start: In(1)            pulse for one cycle while idle to run the kernel once
    done: Out(1)            high from the end of a run until the next start
    busy: Out(1)            high while running
    cycles: Out(64)         cycles the last run took (counted while busy)
    arg_<p>: In             scalar parameter p (sampled at start)
    base_<a>: In(addr)      word address of array a in DRAM (sampled at start)
    res_<r>: Out            scalar result r (valid while done)
    mem: Out(channel)       the DRAM channel [mem__rd_req__valid, ...], see memchannel.py

Timing: the root controller starts the cycle after `start`; `done` rises the cycle after the
root reports done; `cycles` = root cycles + 1.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..dram import DramConfig, word_bits
from ..errors import UnsupportedError
from ..loops import Load, Loop, LoopProgram, Parallel, Pipe, Store
from . import memchannel
from .control import Parallel as ParallelUnit
from .control import SeqLoop
from .datapath import dtype_shape
from .pipe import PipeUnit, port_name
from .regfile import RegFile
from .transfer import LoadUnit, StoreUnit

REGFILE_LIMIT = 256


def mem_latency(mem) -> int:
    """Read latency of an on-chip memory (register files read combinationally)."""
    return 0


class _Node:
    """One controller of the tree with its hardware unit and children."""

    def __init__(self, ctrl, unit, children=()):
        self.ctrl, self.unit, self.children = ctrl, unit, list(children)


class KernelTop(wiring.Component):
    """Hardware for a LoopProgram under a DramConfig (see the module doc for the ports)."""

    def __init__(self, prog: LoopProgram, dram: DramConfig):
        self.prog = prog
        self.dram = dram
        self.word_bits = word_bits(d.dtype for d in prog.drams)
        for mem in prog.mems:
            if mem.size > REGFILE_LIMIT:
                raise UnsupportedError(
                    f"on-chip memory {mem.name} of {mem.size} elements is larger than register "
                    f"files allow ({REGFILE_LIMIT}); choose smaller tiles"
                )
        self.loads, self.stores, self.pipes, self.loops = [], [], [], []
        self.tree = self._units(prog.root, {})
        addr = dram.addr_bits
        members = {"start": In(1), "done": Out(1), "busy": Out(1), "cycles": Out(64)}
        for p in prog.params:
            members[f"arg_{p.name}"] = In(dtype_shape(p.dtype))
        for d in prog.drams:
            members[f"base_{d.name}"] = In(addr)
        for s in prog.scalar_outs:
            members[f"res_{s.name}"] = Out(dtype_shape(s.mem.dtype))
        self.tag_bits = memchannel.tag_bits_for(max(1, len(self.loads)))
        members["mem"] = Out(memchannel.channel(addr, self.word_bits, dram.words_per_cycle, self.tag_bits))
        super().__init__(members)

    # ---------------------------------------------------------------- tree of units

    def _units(self, ctrl, outer: dict) -> _Node:
        cfg = self.dram
        if isinstance(ctrl, Loop):
            unit = SeqLoop(ctrl.counters, len(ctrl.stages))
            self.loops.append(unit)
            inner = {**outer, **{c.name: c.extent for c in ctrl.counters}}
            return _Node(ctrl, unit, [self._units(s, inner) for s in ctrl.stages])
        if isinstance(ctrl, Parallel):
            unit = ParallelUnit(len(ctrl.children))
            return _Node(ctrl, unit, [self._units(s, outer) for s in ctrl.children])
        if isinstance(ctrl, Pipe):
            params = {p.name: p.dtype for p in self.prog.params}
            unit = PipeUnit(ctrl, outer, params, mem_latency)
            self.pipes.append(unit)
            return _Node(ctrl, unit)
        if isinstance(ctrl, Load):
            unit = LoadUnit(ctrl, outer, cfg.words_per_cycle, self.word_bits, cfg.addr_bits)
            self.loads.append(unit)
            return _Node(ctrl, unit)
        if isinstance(ctrl, Store):
            unit = StoreUnit(ctrl, outer, cfg.words_per_cycle, self.word_bits, cfg.addr_bits)
            self.stores.append(unit)
            return _Node(ctrl, unit)
        raise TypeError(f"no hardware for {type(ctrl).__name__}")

    # ---------------------------------------------------------------- elaboration

    def elaborate(self, platform):
        m = Module()
        args = {}
        for p in self.prog.params:
            args[p.name] = Signal(dtype_shape(p.dtype), name=f"arg_{p.name}_q")
        bases = {d.name: Signal(self.dram.addr_bits, name=f"base_{d.name}_q") for d in self.prog.drams}
        root_go = Signal()
        with m.If(self.start & ~self.busy):
            m.d.sync += [args[n].eq(getattr(self, f"arg_{n}")) for n in args]
            m.d.sync += [bases[n].eq(getattr(self, f"base_{n}")) for n in bases]
            m.d.sync += [self.busy.eq(1), self.done.eq(0), self.cycles.eq(0), root_go.eq(1)]
        with m.Else():
            m.d.sync += root_go.eq(0)
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        with m.If(self.tree.unit.done):
            m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        m.d.comb += self.tree.unit.go.eq(root_go)

        reads, writes = {}, {}  # mem name -> list of port interfaces (in a fixed order)
        counter = {"loop": 0, "par": 0, "pipe": 0, "load": 0, "store": 0}

        def add(node: _Node, scope: dict):
            unit = node.unit
            kind = {SeqLoop: "loop", ParallelUnit: "par", PipeUnit: "pipe", LoadUnit: "load", StoreUnit: "store"}[type(unit)]
            m.submodules[f"{kind}{counter[kind]}"] = unit
            counter[kind] += 1
            for n in getattr(unit, "outer_used", ()):
                m.d.comb += getattr(unit, f"ctr_{port_name(n)}").eq(scope[n])
            if isinstance(unit, SeqLoop):
                scope = {**scope, **{c.name: getattr(unit, f"ctr_{port_name(c.name)}") for c in unit.counters}}
            if isinstance(unit, PipeUnit):
                for n in unit.params_used:
                    m.d.comb += getattr(unit, f"arg_{port_name(n)}").eq(args[n])
                for k, mem in enumerate(unit.read_mems):
                    reads.setdefault(mem.name, []).append(getattr(unit, f"rd_{k}"))
                for k, mem in enumerate(unit.write_mems):
                    writes.setdefault(mem.name, []).append(getattr(unit, f"wr_{k}"))
            if isinstance(unit, (LoadUnit, StoreUnit)):
                dram = unit.load.dram if isinstance(unit, LoadUnit) else unit.store.dram
                m.d.comb += unit.base.eq(bases[dram.name])
                for k in range(unit.lanes):
                    if isinstance(unit, LoadUnit):
                        writes.setdefault(unit.load.mem.name, []).append(getattr(unit, f"wr_{k}"))
                    else:
                        reads.setdefault(unit.store.mem.name, []).append(getattr(unit, f"rd_{k}"))
            for k, child in enumerate(node.children):
                m.d.comb += child.unit.go.eq(getattr(unit, f"stage_go_{k}"))
                m.d.comb += getattr(unit, f"stage_done_{k}").eq(child.unit.done)
                add(child, scope)

        add(self.tree, {})

        for s in self.prog.scalar_outs:
            reads.setdefault(s.mem.name, []).append(("res", s.name))

        for mem in self.prog.mems:
            rd = reads.get(mem.name, [])
            wr = writes.get(mem.name, [])
            rf = RegFile(mem.size, dtype_shape(mem.dtype), len(rd), len(wr))
            m.submodules[f"mem_{mem.name}"] = rf
            for k, port in enumerate(rd):
                if isinstance(port, tuple):
                    m.d.comb += [getattr(rf, f"rd_{k}").addr.eq(0), getattr(self, f"res_{port[1]}").eq(getattr(rf, f"rd_{k}").data)]
                else:
                    wiring.connect(m, port, getattr(rf, f"rd_{k}"))
            for k, port in enumerate(wr):
                wiring.connect(m, port, getattr(rf, f"wr_{k}"))

        cfg = self.dram
        arb = memchannel.Arbiter(len(self.loads), len(self.stores), cfg.addr_bits, self.word_bits, cfg.words_per_cycle)
        m.submodules.arbiter = arb
        for k, unit in enumerate(self.loads):
            wiring.connect(m, unit.rd_req, getattr(arb, f"rd_req_{k}"))
            wiring.connect(m, unit.rd_resp, getattr(arb, f"rd_resp_{k}"))
        for k, unit in enumerate(self.stores):
            wiring.connect(m, unit.wr, getattr(arb, f"wr_{k}"))
        wiring.connect(m, arb.mem, wiring.flipped(self.mem))
        return m
