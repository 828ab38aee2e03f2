# amaranth: UnusedElaboratable=no
# (units of a design whose building fails part-way are dropped on purpose)
"""A processing element (PE): one compiled kernel's controllers, memories and DRAM arbiter,
wired. A top (hw/top.py) instantiates PEs and gives each its own DRAM channel.

Members:
    start: In(1)            pulse for one cycle while idle to run the kernel once
    done: Out(1)            high from the end of a run until the next start
    busy: Out(1)            high while running
    cycles: Out(64)         cycles the last run took (counted while busy)
    arg_<p>: In             scalar parameter p (sampled at start)
    base_<a>: In(addr)      word address of array a in DRAM (sampled at start)
    res_<r>: Out            scalar result r (valid while done)
    overflow_<g>: Out(1)    group-by g saw more distinct keys than its max_keys (valid while done)
    range_<m>: Out(1)       a multifold's subscript from data left its accumulator m (valid while done)
    mem: Out(dram_port)     the DRAM channel: three typed streams (memchannel.dram_port)
    cmem: Out(dram_port)    with collectives only: the collective units' own channel into the
                            same DRAM (see below)

A mesh kernel's program has collectives (loops.Collective, mesh/hardware.py) in its root
sequence, or as the last stage of a tile loop (a collective stage, whose phases take the
loop's counters to offset their arrays): each a hw/phases.py Stage whose phases
(RingCollective and BlockCopy units) run one after another. The phases are the read and
write clients of an arbiter of their own, on the channel `cmem` into the PE's DRAM (as a
TPU's DMA engines have their own path to HBM): a collective never waits for a tile load or
store, nor they for it, so a collective can run beside patterns that do not depend on it (a
Parallel of the root) and each keeps the cycles it takes alone. Both ports' tags have the
same width. Members then also those of phases.members: pe_<axis>: In (the PE's coordinates),
base_<phase result>: In(addr), and the link pairs of each axis (hw/link.py's wire side: the
PE holds the LinkTx and LinkRx of each).

Timing: the root controller starts the cycle after `start`; `done` rises the cycle after the
root reports done; `cycles` = root cycles + 1.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..dram import DramConfig, word_bits
from ..loops import Collective, Load, Loop, Parallel, Pipe, Store, checked_mems, walk
from ..passes.names import kind_of
from . import memchannel, phases
from .control import MetaLoop, SeqLoop
from .control import Parallel as ParallelUnit
from .counters import check_port_names
from .datapath import dtype_shape
from .groupmem import ROLES, GroupMem
from .onchip import OnChipMem, lane_data, lane_index
from .pipe import PipeUnit, port_name
from .sources import unit_sources
from .transfer import LoadUnit, StoreUnit, reach_banks


class _Node:
    """One controller of the tree with its hardware unit, instance name and children."""

    def __init__(self, ctrl, unit, name, children=()):
        self.ctrl, self.unit, self.name, self.children = ctrl, unit, name, list(children)


class PE(wiring.Component):
    """Hardware for a compiled kernel (passes.Compiled) under a DramConfig (see the module doc
    for the ports)."""

    def __init__(self, compiled, dram: DramConfig):
        prog = compiled.program
        self.rings: list = []  # every collective's phases (RingPlans, CopyPlans), in tree order
        self.colls: list = []  # their units
        self.stages: list = []  # per collective: (its phases.Stage, its phases, their units)
        self.compiled = compiled
        self.prog = prog
        self.dram = dram
        self.word_bits = word_bits(d.dtype for d in prog.drams)
        self.plans = compiled.plans
        self.loads, self.stores, self.pipes, self.loops = [], [], [], []
        self.unit_names: list = []  # instance names of the controllers (load0, pipe1, ...)
        self._depths = {}
        for p in self.plans.values():
            if p.owner is not None:
                self._depths.setdefault(p.owner, set()).add(p.depth)
        check_port_names(c.name for ctrl in walk(prog.root) for c in getattr(ctrl, "counters", ()))
        self.tree = self._units(prog.root, {})
        addr = dram.addr_bits
        members = {"start": In(1), "done": Out(1), "busy": Out(1), "cycles": Out(64)}
        for p in prog.params:
            members[f"arg_{p.name}"] = In(dtype_shape(p.dtype))
        for d in prog.drams:
            members[f"base_{d.name}"] = In(addr)
        for s in prog.scalar_outs:
            members[f"res_{s.name}"] = Out(dtype_shape(s.mem.dtype))
        for g in prog.groups:
            members[f"overflow_{g.name}"] = Out(1)
        for mem in checked_mems(prog):
            members[f"range_{mem.name}"] = Out(1)
        self.tag_bits = memchannel.tag_bits_for(max(1, len(self.loads), len(self.colls)))
        self.unit_names += [f"ring{k}" for k in range(len(self.rings))]
        if self.rings:
            members.update(phases.members(self.rings, addr))
        port = memchannel.dram_port(addr, self.word_bits, dram.words_per_cycle, self.tag_bits)
        members["mem"] = Out(port)
        if self.colls:
            members["cmem"] = Out(port)
        super().__init__(members)

    def sources(self) -> dict:
        """Instance name -> the user's lines each unit implements (hw/sources.py)."""
        return unit_sources(self.prog)

    # ---------------------------------------------------------------- tree of units

    def _node(self, ctrl, unit, children=()) -> _Node:
        assert ctrl.name.startswith(kind_of(ctrl)), "controllers are named by passes/names.py"
        self.unit_names.append(ctrl.name)
        return _Node(ctrl, unit, ctrl.name, children)

    def _units(self, ctrl, outer: dict) -> _Node:
        cfg = self.dram
        if isinstance(ctrl, Loop):
            if ctrl.meta:
                unit = MetaLoop(ctrl.counters, len(ctrl.stages), self._depths.get(ctrl.name, ()))
            else:
                unit = SeqLoop(ctrl.counters, len(ctrl.stages))
            self.loops.append(unit)
            inner = {**outer, **{c.name: c.extent for c in ctrl.counters}}
            node = self._node(ctrl, unit)
            node.children = [self._units(s, inner) for s in ctrl.stages]
            return node
        if isinstance(ctrl, Parallel):
            node = self._node(ctrl, ParallelUnit(len(ctrl.children)))
            node.children = [self._units(s, outer) for s in ctrl.children]
            return node
        if isinstance(ctrl, Pipe):
            params = {p.name: p.dtype for p in self.prog.params}
            unit = PipeUnit(ctrl, self.compiled.pipe_plan(ctrl), outer, params, self.plans)
            self.pipes.append(unit)
            return self._node(ctrl, unit)
        if isinstance(ctrl, Load):
            unit = LoadUnit(ctrl, outer, cfg.words_per_cycle, self.word_bits, cfg.addr_bits)
            self.loads.append(unit)
            return self._node(ctrl, unit)
        if isinstance(ctrl, Store):
            plan = self.plans[ctrl.mem.name]
            unit = StoreUnit(
                ctrl,
                outer,
                cfg.words_per_cycle,
                self.word_bits,
                cfg.addr_bits,
                plan.latency,
                spread=plan.registered_reads,
            )
            self.stores.append(unit)
            return self._node(ctrl, unit)
        if isinstance(ctrl, Collective):
            colls = phases.units(ctrl.phases, cfg, self.word_bits)
            node = self._node(ctrl, phases.Stage(ctrl, outer, cfg.addr_bits))
            self.stages.append((node.unit, ctrl.phases, colls))
            self.rings += ctrl.phases
            self.colls += colls
            return node
        raise TypeError(f"no hardware for {type(ctrl).__name__}")

    def _group_writers(self) -> dict:
        """Each group-by (loops.Group) -> (the pipe unit that fills it, its update port number)."""
        out = {}
        for unit in self.pipes:
            for k, w in enumerate(unit.group_writes):
                out[w.group] = (unit, k)
        return out

    # ---------------------------------------------------------------- elaboration

    def elaborate(self, platform):
        m = Module()
        args, bases = self._control(m)
        ports = {name: {"r": [], "w": []} for name in self.plans}  # mem -> ports (iface, lanes, reach, buf)
        self._add(m, self.tree, {}, {}, ports, args, bases)
        if self.stages:
            phases.elaborate(m, self, self.stages, bases)
        for s in self.prog.scalar_outs:
            ports[s.mem.name]["r"].append((("result", s.name), 1, None, None))
        self._group_memories(m, ports)
        self._memories(m, ports)
        self._arbiter(m)
        self._range_flags(m)
        return m

    def _range_flags(self, m) -> None:
        """`range_<mem>`: sticky from a pipe's pulse (a write at a subscript from data fell
        outside the memory, and was dropped) until the next start."""
        for mem in checked_mems(self.prog):
            flag = getattr(self, f"range_{mem.name}")
            pulses = [getattr(u, f"range_{mem.name}") for u in self.pipes if mem.name in u.checked]
            with m.If(self.start & ~self.busy):
                m.d.sync += flag.eq(0)
            with m.Elif(Cat(*pulses).any()):
                m.d.sync += flag.eq(1)

    def _control(self, m) -> tuple:
        """start / busy / done / cycles, and the registers sampling the scalar parameters and
        the arrays' base addresses at start: (args, bases), name -> register."""
        args = {p.name: Signal(dtype_shape(p.dtype), name=f"arg_{p.name}_q") for p in self.prog.params}
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
        return args, bases

    def _buffer(self, mem, stages: dict):
        """The buffer select of `mem` for a unit in the metapipeline stages `stages` (None: one buffer)."""
        plan = self.plans[mem.name]
        if plan.depth == 1:
            return None
        unit, k = stages[plan.owner]
        return unit.buffer_for(plan.depth, k)

    def _add(self, m, node: _Node, scope: dict, stages: dict, ports: dict, args: dict, bases: dict) -> None:
        """Add the unit of `node` and its children, wire their go/done and counters, and list
        their memory ports in `ports`. `scope`: counter name -> value; `stages`: metapipelined
        loop name -> (its unit, the stage we are in)."""
        unit = node.unit
        m.submodules[node.name] = unit
        for n in getattr(unit, "outer_used", ()):
            m.d.comb += getattr(unit, f"ctr_{port_name(n)}").eq(scope[n])
        if isinstance(unit, PipeUnit):
            for n in unit.params_used:
                m.d.comb += getattr(unit, f"arg_{port_name(n)}").eq(args[n])
            for kind, specs in (("r", unit.read_ports), ("w", unit.write_ports)):
                for k, spec in enumerate(specs):
                    entry = (getattr(unit, f"{kind}{k}"), len(spec.lanes), spec.reach, self._buffer(spec.mem, stages))
                    ports[spec.mem.name][kind].append(entry)
        if isinstance(unit, (LoadUnit, StoreUnit)):
            self._add_transfer(m, node, stages, ports, bases)
        for k, child in enumerate(node.children):
            inner_scope, inner_stages = scope, stages
            if isinstance(unit, (SeqLoop, MetaLoop)):
                inner_scope = {**scope, **{c.name: unit.counter_for(c.name, k) for c in unit.counters}}
                if isinstance(unit, MetaLoop):
                    inner_stages = {**stages, node.ctrl.name: (unit, k)}
            m.d.comb += child.unit.go.eq(getattr(unit, f"stage_go_{k}"))
            m.d.comb += getattr(unit, f"stage_done_{k}").eq(child.unit.done)
            self._add(m, child, inner_scope, inner_stages, ports, args, bases)

    def _add_transfer(self, m, node: _Node, stages: dict, ports: dict, bases: dict) -> None:
        """A tile load's or store's base address and its port on the tile memory."""
        unit, ctrl = node.unit, node.ctrl
        m.d.comb += unit.base.eq(bases[ctrl.dram.name])
        shape = ctrl.mem.shape if isinstance(unit, LoadUnit) else ctrl.shape
        reach = (
            reach_banks(shape, self.dram.words_per_cycle, self.plans[ctrl.mem.name])
            if ctrl.mem.shape == shape
            else None
        )
        entry = (unit.port, unit.lanes, reach, self._buffer(ctrl.mem, stages))
        ports[ctrl.mem.name]["w" if isinstance(unit, LoadUnit) else "r"].append(entry)
        if isinstance(unit, StoreUnit) and ctrl.limit is not None:
            ports[ctrl.limit.mem.name]["r"].append((("limit", unit), 1, None, None))

    def _connect_read(self, m, iface, port, mem) -> None:
        if not isinstance(iface, tuple):
            wiring.connect(m, iface, port)
            return
        # a scalar result, or the limit of a store: element 0
        m.d.comb += [a.eq(0) for a in lane_index(port, 0, len(mem.shape))]
        kind, target = iface
        m.d.comb += (getattr(self, f"res_{target}") if kind == "result" else target.limit).eq(lane_data(port, 0))

    def _group_memories(self, m, ports: dict) -> None:
        """The content-addressed memory of each group-by, with its reads and its pipe's updates."""
        for g, (pipe, k) in self._group_writers().items():
            reads = {role: [lanes for _, lanes, _, _ in ports[getattr(g, role).name]["r"]] for role in ROLES}
            block = GroupMem(g, reads)
            m.submodules[f"mem_{g.name}"] = block
            wiring.connect(m, getattr(pipe, f"g{k}"), block.upd)
            m.d.comb += getattr(self, f"overflow_{g.name}").eq(block.overflow)
            for role in ROLES:
                mem = getattr(g, role)
                for j, (iface, _, _, _) in enumerate(ports[mem.name]["r"]):
                    self._connect_read(m, iface, getattr(block, f"{role}_r{j}"), mem)

    def _memories(self, m, ports: dict) -> None:
        """Every other on-chip memory, as its plan says, with its read and write ports."""
        for mem in self.prog.mems:
            plan = self.plans[mem.name]
            if plan.kind == "group":
                continue
            reads, writes = ports[mem.name]["r"], ports[mem.name]["w"]
            block = OnChipMem(
                plan, [(lanes, st) for _, lanes, st, _ in reads], [(lanes, st) for _, lanes, st, _ in writes]
            )
            m.submodules[f"mem_{mem.name}"] = block
            for k, (iface, _, _, buf) in enumerate(reads):
                self._connect_read(m, iface, getattr(block, f"r{k}"), mem)
                if buf is not None:
                    m.d.comb += getattr(block, f"r{k}_buf").eq(buf)
            for k, (iface, _, _, buf) in enumerate(writes):
                wiring.connect(m, iface, getattr(block, f"w{k}"))
                if buf is not None:
                    m.d.comb += getattr(block, f"w{k}_buf").eq(buf)

    def _arbiter(self, m) -> None:
        """The arbiter sharing the DRAM channel among the tile loads and stores, and the
        collective phases' on `cmem`."""
        _share(m, "arbiter", self.loads, self.stores, self.mem, self.dram, self.word_bits, self.tag_bits)
        if self.colls:  # each collective phase is a read and a write client
            _share(m, "coll_arbiter", self.colls, self.colls, self.cmem, self.dram, self.word_bits, self.tag_bits)


def _share(m, name: str, readers: list, writers: list, port, cfg: DramConfig, word_bits: int, tag: int) -> None:
    """An arbiter `name` giving `port` (a PE's dram_port) to the read clients `readers` and
    the write clients `writers`; with none, the port stays idle."""
    if not readers and not writers:
        m.d.comb += [port.rd_req.valid.eq(0), port.rd_resp.ready.eq(1), port.wr.valid.eq(0)]
        return
    arb = memchannel.Arbiter(len(readers), len(writers), cfg.addr_bits, word_bits, cfg.words_per_cycle, tag)
    m.submodules[name] = arb
    for k, unit in enumerate(readers):
        wiring.connect(m, unit.rd_req, getattr(arb, f"rd_req_{k}"))
        wiring.connect(m, unit.rd_resp, getattr(arb, f"rd_resp_{k}"))
    for k, unit in enumerate(writers):
        wiring.connect(m, unit.wr, getattr(arb, f"wr_{k}"))
        m.d.comb += unit.wr_sent.eq(getattr(arb, f"wr_sent_{k}"))
    wiring.connect(m, arb.mem, wiring.flipped(port))
