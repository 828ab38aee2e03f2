"""The inner-pipeline controller: one iteration per cycle through a fixed-latency datapath.

Timing (checked by the cycle model and the tests): `go` in cycle t0 issues iteration k in
cycle t0 + 1 + k; its writes happen `latency` cycles later; `done` pulses in the cycle after
the last write. So the pipe takes `iterations + latency + 1` cycles from go to done.

Members:
    go: In(1), done: Out(1)
    ctr_<name>: In   value of a counter of an enclosing loop (holds still while running)
    arg_<name>: In   a scalar kernel parameter
    rd_<k>: Out(read port), wr_<k>: Out(write port)  to the memories in `reads` / `writes`
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import ir
from ..loops import Pipe
from . import timing as tm
from .datapath import Datapath, dtype_shape, flat_address
from .regfile import read_port, write_port


def port_name(name: str) -> str:
    """A counter or parameter name as a Verilog-friendly identifier."""
    return name.replace(".", "_").replace("%", "x")


def used_names(exprs) -> tuple:
    """(index names, param names) used anywhere in `exprs`, sorted."""
    idx, params = set(), set()
    for e in exprs:
        for n in ir.walk(e):
            if isinstance(n, ir.Index):
                idx.add(n.name)
            elif isinstance(n, ir.Param):
                params.add(n.name)
    return tuple(sorted(idx)), tuple(sorted(params))


def pipe_exprs(pipe: Pipe) -> list:
    out = []
    for w in pipe.writes:
        out += [w.value, *w.idx] + ([w.first] if w.first is not None else [])
    return out


def pipe_timing(pipe: Pipe, mem_latency, mem_size) -> tuple:
    """(Timing, write stage) of `pipe`'s datapath."""
    timing = tm.schedule(pipe_exprs(pipe), mem_latency, mem_size)
    return timing, tm.write_stage(timing, pipe.writes)


class PipeUnit(wiring.Component):
    """Hardware for one loops.Pipe. `outer`: name -> extent of enclosing counters;
    `params`: name -> dtype; `mem_latency(mem)`: read latency of each memory."""

    def __init__(self, pipe: Pipe, outer: dict, params: dict, mem_latency, name: str = "pipe"):
        self.pipe = pipe
        self._mem_latency = mem_latency
        self._name = name
        self.timing, self.latency = pipe_timing(pipe, mem_latency, lambda m: m.size)
        exprs = pipe_exprs(pipe)
        idx_names, param_names = used_names(exprs)
        own = {c.name for c in pipe.counters}
        self.outer_used = tuple(n for n in idx_names if n not in own)
        self.params_used = param_names
        self.extents = {**outer, **{c.name: c.extent for c in pipe.counters}}
        # read ports: one per distinct MemRead, plus one per accumulating write (the old value)
        self.reads = []
        for e in exprs:
            for n in ir.walk(e):
                if isinstance(n, ir.MemRead) and n not in self.reads:
                    self.reads.append(n)
        self.reads = sorted(self.reads, key=lambda n: (n.mem.name, repr(n.idx)))
        self.acc_reads = [w for w in pipe.writes if w.op is not None]
        members = {"go": In(1), "done": Out(1)}
        for n in self.outer_used:
            members[f"ctr_{port_name(n)}"] = In(range(max(2, outer[n])))
        for n in self.params_used:
            members[f"arg_{port_name(n)}"] = In(dtype_shape(params[n]))
        self.read_mems = [r.mem for r in self.reads] + [w.mem for w in self.acc_reads]
        for k, mem in enumerate(self.read_mems):
            members[f"rd_{k}"] = Out(read_port(mem.size, dtype_shape(mem.dtype)))
        self.write_mems = [w.mem for w in pipe.writes]
        for k, mem in enumerate(self.write_mems):
            members[f"wr_{k}"] = Out(write_port(mem.size, dtype_shape(mem.dtype)))
        super().__init__(members)

    @property
    def iterations(self) -> int:
        return self.pipe.iterations

    def elaborate(self, platform):
        m = Module()
        counters = self.pipe.counters
        regs = {c.name: Signal(range(max(2, c.extent)), name=port_name(c.name)) for c in counters}
        running = Signal()
        last = Signal()
        # row-major counter chain: the last counter moves fastest
        m.d.comb += last.eq(_all_at_end(counters, regs))
        with m.If(self.go):
            m.d.sync += running.eq(1)
            m.d.sync += [r.eq(0) for r in regs.values()]
        with m.Elif(running):
            _advance(m, counters, regs)
            with m.If(last):
                m.d.sync += running.eq(0)
        L = self.latency
        valid = [running] + [Signal(name=f"valid_s{s}") for s in range(1, L + 1)]
        is_last = [running & last] + [Signal(name=f"last_s{s}") for s in range(1, L + 1)]
        for s in range(1, L + 1):
            m.d.sync += [valid[s].eq(valid[s - 1]), is_last[s].eq(is_last[s - 1])]
        m.d.sync += self.done.eq(is_last[L])

        read_ports = {node: getattr(self, f"rd_{k}") for k, node in enumerate(self.reads)}

        def leaf(node):
            if isinstance(node, ir.Param):
                return getattr(self, f"arg_{port_name(node.name)}")
            if node.name in regs:
                return regs[node.name]
            return getattr(self, f"ctr_{port_name(node.name)}")

        def static(node):
            return isinstance(node, ir.Param) or node.name not in regs

        def read(node, addr, stage):
            port = read_ports[node]
            if addr is not None:
                m.d.comb += port.addr.eq(addr)
            return port.data

        dp = Datapath(m, self.timing, self.extents, leaf, static, read, self._mem_latency, name="n")
        acc_k = len(self.reads)
        for k, w in enumerate(self.pipe.writes):
            port = getattr(self, f"wr_{k}")
            value = dp.at(w.value, L)
            addr = flat_address([dp.at(i, L) for i in w.idx], w.mem.shape) if w.idx else 0
            if w.op is not None:
                old_port = getattr(self, f"rd_{acc_k}")
                acc_k += 1
                m.d.comb += old_port.addr.eq(addr)
                new = dp.combine(w.op, old_port.data, value, w.mem.dtype)
                value = Mux(dp.at(w.first, L), value, new)
            m.d.comb += [port.en.eq(valid[L]), port.addr.eq(addr), port.data.eq(value)]
        return m


def _all_at_end(counters, regs):
    cond = 1
    for c in counters:
        cond = cond & (regs[c.name] == c.extent - 1)
    return cond


def _advance(m, counters, regs):
    """Step a row-major chain of counters by one (wrapping inner counters)."""
    carry = 1
    for c in reversed(counters):
        r = regs[c.name]
        at_end = r == c.extent - 1
        with m.If(carry):
            m.d.sync += r.eq(Mux(at_end, 0, r + 1))
        carry = carry & at_end
