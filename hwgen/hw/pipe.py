"""The inner-pipeline controller: one iteration (of every lane) per cycle through a
fixed-latency datapath.

Lanes: a counter with `par` P advances by P per cycle and its P lanes run side by side; a pipe
with several such counters runs the product of their lanes. Each memory access gets a port
with one lane per combination of the par counters its index uses. A write that accumulates
over lanes its index does not use (a reduction over a par counter) first combines those lanes
with a tree, then updates the accumulator once: one accumulator update per cycle, whatever the
adder latency.

Timing (checked by the cycle model and the tests): `go` in cycle t0 issues iteration k in
cycle t0 + 1 + k; its writes happen `latency` cycles later; `done` pulses in the cycle after
the last write. So the pipe takes `iterations + latency + 1` cycles from go to done.

Members:
    go: In(1), done: Out(1)
    ctr_<name>: In   value of a counter of an enclosing loop (holds still while running)
    arg_<name>: In   a scalar kernel parameter
    r<k>: Out(read port), w<k>: Out(write port)  to the memories in `read_ports` / `write_ports`
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import ir
from ..affine import to_affine
from ..passes.memplan import BANK_FANOUT, affine_parts
from ..errors import ScheduleError
from ..loops import AppendWrite, GroupWrite, Pipe, write_exprs
from . import timing as tm
from .counters import all_at_end, next_values
from .datapath import FANOUT, Datapath, dtype_shape
from .device import KEEP
from .groupmem import update_port
from .onchip import congruent_banks, one_of, read_port, write_port

SELECT_SLICE = 8  # data bits that one forwarding select flip-flop drives


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
        out += write_exprs(w)
    return out


@dataclass
class PortSpec:
    """A memory port of the pipe: its memory, the par counters its lanes run over, the lanes
    (tuples of (counter, offset)), and each lane's reach (the banks it can address; None: any)."""

    mem: object
    counters: tuple
    lanes: list
    reach: list | None


def _lanes(names, par: dict) -> list:
    return [tuple(zip(names, combo)) for combo in itertools.product(*(range(par[n]) for n in names))]


def _par_used(idx, par: dict) -> tuple:
    used = set()
    for a in affine_parts(idx, par):
        for n, c in a.terms:
            if n in par and c:
                used.add(n)
    return tuple(sorted(used))


def reuse_distance(counters, idx) -> int | None:
    """The fewest issues between two writes of one run of a pipe to the same element through
    `idx` (None: no element is written twice in a run). Exact for an index whose every
    dimension is a constant or a constant plus a multiple of a counter of its own; any other
    index may write one element on consecutive issues (1). Two issues write the same element
    only if every indexing counter is equal, so a run of innermost counters that all index
    separates them by the product of their issue counts."""
    names = {c.name for c in counters}
    own = set()
    for e in idx:
        aff = to_affine(e)
        if aff is None or len(aff.names()) > 1:
            return 1
        for n in aff.names():
            if n in own or n not in names:
                return 1
            own.add(n)
    distance = 1
    for c in reversed(counters):
        if c.name not in own:
            return distance
        distance *= -(-c.extent // c.par)
    return None


def _reach_banks(idx, lanes, par: dict, plan) -> list | None:
    """Each lane's reach: the banks it can address over the whole pipe, as a tuple of bank
    tuples (one bank: a constant wire). None: any bank (registers, or a data-dependent
    subscript along a banked dimension). Along a dimension of B banks, an affine subscript
    moves in multiples of g = gcd(B, every counter's step), so a lane stays in the banks
    congruent to its starting one modulo g."""
    if plan.kind != "sram":
        return None
    if any(to_affine(e) is None and b > 1 for e, b in zip(idx, plan.banks)):
        return None
    affs = affine_parts(idx, par)
    grains = []
    for a, b in zip(affs, plan.banks):
        g = b
        for n, c in a.terms:
            g = math.gcd(g, c * par[n] if n in par else c)
        grains.append(g)
    out = []
    for lane in lanes:
        value = dict(lane)
        starts = [(a.const + sum(c * value.get(n, 0) for n, c in a.terms if n in par)) % g
                  for a, g in zip(affs, grains)]
        out.append(congruent_banks(starts, grains, plan.banks))
    return out


def par_deps(par: dict):
    """deps(node): the par counters (names in `par`) that `node`'s value depends on."""
    memo = {}

    def deps(node):
        found = memo.get(node)
        if found is None:
            if isinstance(node, ir.Index):
                found = frozenset([node.name]) & frozenset(par)
            else:
                found = frozenset().union(*[deps(c) for c in ir.children(node)]) if ir.children(node) else frozenset()
            memo[node] = found
        return found

    return deps


def broadcast(par: dict, fanout: int = FANOUT):
    """spread(node, operand): `operand` is shared by more than `fanout` lanes of `node` (it
    does not depend on par counters that `node` does). Such an operand of a multiplier reaches
    the DSP blocks of its lanes through two registers: copies for groups of FANOUT lanes,
    then one copy for each lane beside its blocks. Such an index of a read (with `fanout`
    BANK_FANOUT) reaches the banks' address registers through copies for groups of FANOUT
    lanes, a stage after it is made (timing.schedule, Datapath.at)."""
    deps = par_deps(par)

    def spread(node, operand) -> bool:
        lanes = 1
        for name in deps(node) - deps(operand):
            lanes *= par[name]
        return lanes > fanout

    return spread


def analyse(pipe: Pipe, plans: dict):
    """Timing, write plans and ports of a pipe (pure; the cycle model uses it too)."""
    par = {c.name: c.par for c in pipe.counters if c.par > 1}
    many = broadcast(par, BANK_FANOUT)
    own = {c.name for c in pipe.counters}

    def spread_index(read, index) -> bool:  # a RAM's index that moves during the pipe
        moves = any(isinstance(n, ir.Index) and n.name in own for n in ir.walk(index))
        return plans[read.mem.name].kind == "sram" and moves and many(read, index)

    def far(product) -> bool:  # an operand shared by more lanes than a bank group
        return any(many(product, operand) for operand in ir.children(product))

    timing = tm.schedule(pipe_exprs(pipe), lambda mem: tm.read_timing(plans[mem.name]), broadcast(par),
                         spread_index, far)
    reads, read_nodes = [], []
    for e in pipe_exprs(pipe):
        for n in ir.walk(e):
            if isinstance(n, ir.MemRead) and n not in read_nodes:
                read_nodes.append(n)
    read_nodes.sort(key=lambda n: (n.mem.name, repr(n.idx)))
    for n in read_nodes:
        names = _par_used(n.idx, par)
        lanes = _lanes(names, par)
        reads.append(PortSpec(n.mem, names, lanes, _reach_banks(n.idx, lanes, par, plans[n.mem.name])))
    writes, acc_reads, wplans = [], [], []
    for w in pipe.writes:
        if isinstance(w, (GroupWrite, AppendWrite)):
            if par:
                raise ScheduleError("a group-by or filter pipe takes one element per cycle; remove par")
            if isinstance(w, AppendWrite):
                one = PortSpec(w.count, (), [()], None)
                acc_reads.append(one)
                writes.append(one)
                writes.append(PortSpec(w.values, (), [(("item", k),) for k in range(len(w.items))], None))
            exprs = write_exprs(w)
            stage, _ = tm.place_at([timing.ready(e) for e in exprs], 2 + len(exprs) // 2)
            wplans.append(tm.WritePlan([], stage))
            continue
        names = _par_used(w.idx, par)
        lanes = _lanes(names, par)
        reduce_lanes = 1
        for n in par:
            if n not in names:
                reduce_lanes *= par[n]
        if w.op is None and reduce_lanes > 1:
            raise ScheduleError(f"the lanes of a parallel write to {w.mem.label or w.mem.name} collide")
        spec = PortSpec(w.mem, names, lanes, _reach_banks(w.idx, lanes, par, plans[w.mem.name]))
        writes.append(spec)
        if w.op is not None:
            acc_reads.append(spec)
        wplans.append(tm.write_plan(timing, w, reduce_lanes, tm.read_timing(plans[w.mem.name])))
    stage = max((p.stage for p in wplans), default=0)
    return par, timing, reads, read_nodes, writes, acc_reads, wplans, stage


def identity(op: ir.Combiner, dtype):
    """The value x with op(x, v) == v for every v, for the builtin ops (None for custom ones)."""
    if op.expr is not None:
        return None
    if dtype.is_bool:
        return {"and": 1, "or": 0, "xor": 0, "max": 0, "min": 1}.get(op.op)
    return {"add": 0, "or": 0, "xor": 0, "mul": 1, "and": dtype.wrap(-1),
            "max": dtype.min, "min": dtype.max}.get(op.op)


def pipe_latency(pipe: Pipe, plans: dict) -> int:
    return analyse(pipe, plans)[-1]


class PipeUnit(wiring.Component):
    """Hardware for one loops.Pipe. `outer`: name -> extent of enclosing counters;
    `params`: name -> dtype; `plans`: memory name -> passes.memplan.MemPlan."""

    def __init__(self, pipe: Pipe, outer: dict, params: dict, plans: dict):
        self.pipe = pipe
        self.plans = plans
        (self.par, self.timing, reads, self.read_nodes, writes, acc_reads,
         self.write_plans, self.latency) = analyse(pipe, plans)
        self.read_ports = reads + acc_reads  # the old values of accumulators come last
        self.write_ports = writes
        idx_names, param_names = used_names(pipe_exprs(pipe))
        own = {c.name for c in pipe.counters}
        self.outer_used = tuple(n for n in idx_names if n not in own)
        self.params_used = param_names
        self.extents = {**outer, **{c.name: c.extent for c in pipe.counters}}
        members = {"go": In(1), "done": Out(1)}
        for n in self.outer_used:
            members[f"ctr_{port_name(n)}"] = In(range(max(2, outer[n])))
        for n in self.params_used:
            members[f"arg_{port_name(n)}"] = In(dtype_shape(params[n]))
        for k, p in enumerate(self.read_ports):
            members[f"r{k}"] = Out(read_port(p.mem.shape, p.mem.dtype, len(p.lanes)))
        for k, p in enumerate(self.write_ports):
            members[f"w{k}"] = Out(write_port(p.mem.shape, p.mem.dtype, len(p.lanes)))
        self.group_writes = [w for w in pipe.writes if isinstance(w, GroupWrite)]
        for k, w in enumerate(self.group_writes):
            members[f"g{k}"] = Out(update_port(w.group))
        super().__init__(members)

    @property
    def iterations(self) -> int:
        return self.pipe.iterations

    def elaborate(self, platform):
        m = Module()
        counters = self.pipe.counters
        groups = {c.name: c.extent // c.par for c in counters}
        regs = {c.name: Signal(range(max(2, groups[c.name])), name=port_name(c.name)) for c in counters}
        running, last = Signal(), Signal()
        chain = [(regs[c.name], groups[c.name]) for c in counters]
        m.d.comb += last.eq(all_at_end(chain))
        with m.If(self.go):
            m.d.sync += running.eq(1)
            m.d.sync += [r.eq(0) for r in regs.values()]
        with m.Elif(running):
            m.d.sync += [r.eq(v) for (r, _), v in zip(chain, next_values(chain))]
            with m.If(last):
                m.d.sync += running.eq(0)
        L = self.latency
        valid = [running] + [Signal(name=f"valid_s{s}") for s in range(1, L + 1)]
        is_last = [running & last] + [Signal(name=f"last_s{s}") for s in range(1, L + 1)]
        for s in range(1, L + 1):
            m.d.sync += [valid[s].eq(valid[s - 1]), is_last[s].eq(is_last[s - 1])]
        m.d.sync += self.done.eq(is_last[L])
        copies = {}

        def valid_for(stage, pos, lanes):
            """valid[stage] for lane `pos` of a port of `lanes` lanes. A port of more than
            BANK_FANOUT lanes gives each group of FANOUT lanes its own copy (kept), made from
            valid[stage - 1]: the same value, from a flip-flop near the group's banks rather
            than one that drives every bank's write enable and forwarding logic."""
            group = pos // FANOUT
            if lanes <= BANK_FANOUT or stage == 0 or group == 0:
                return valid[stage]
            found = copies.get((stage, group))
            if found is None:
                found = Signal(name=f"valid_s{stage}_g{group}", attrs=KEEP)
                m.d.sync += found.eq(valid[stage - 1])
                copies[(stage, group)] = found
            return found

        def leaf(node, lane):
            if isinstance(node, ir.Param):
                return getattr(self, f"arg_{port_name(node.name)}")
            if node.name not in regs:
                return getattr(self, f"ctr_{port_name(node.name)}")
            p = self.par.get(node.name, 1)
            if p == 1:
                return regs[node.name]
            offset = dict(lane)[node.name]
            if p & (p - 1) == 0:
                return Cat(Const(offset, p.bit_length() - 1), regs[node.name])
            return regs[node.name] * p + offset

        def static(node):
            return isinstance(node, ir.Param) or node.name not in regs

        read_ports = {n: (getattr(self, f"r{k}"), self.read_ports[k]) for k, n in enumerate(self.read_nodes)}

        def read(node, idx, stage, lane):
            port, spec = read_ports[node]
            pos = spec.lanes.index(tuple(sorted((n, v) for n, v in lane if n in spec.counters)))
            for d, value in enumerate(idx):
                m.d.comb += getattr(port, f"i{pos}_{d}").eq(value)
            return getattr(port, f"d{pos}")

        dp = Datapath(m, self.timing, self.extents, leaf, static, read,
                      lambda mem: self.plans[mem.name].latency, par_deps(self.par), name="n",
                      spread=broadcast(self.par))
        acc_port, k, group = len(self.read_nodes), 0, 0
        for w, plan in zip(self.pipe.writes, self.write_plans):
            if isinstance(w, GroupWrite):
                self._group(m, dp, w, getattr(self, f"g{group}"), valid[L], L)
                group += 1
                continue
            if isinstance(w, AppendWrite):
                ports = (getattr(self, f"r{acc_port}"), getattr(self, f"w{k}"), getattr(self, f"w{k + 1}"))
                self._append(m, dp, w, *ports, valid[L], L)
                acc_port, k = acc_port + 1, k + 2
                continue
            spec, port = self.write_ports[k], getattr(self, f"w{k}")
            k += 1
            old_port = None
            if w.op is not None:
                old_port = getattr(self, f"r{acc_port}")
                acc_port += 1
            reduce_names = [n for n in self.par if n not in spec.counters]
            for pos, lane in enumerate(spec.lanes):
                value = self._tree(dp, w, plan, lane, reduce_names, L)
                idx = [dp.at(i, L, lane) for i in w.idx] or [Const(0, 1)]
                if w.op is not None:
                    latency = self.plans[w.mem.name].latency
                    behind = self.plans[w.mem.name].unseen_writes  # recent writes the read misses
                    distance = reuse_distance(self.pipe.counters, w.idx)
                    if L >= behind and (distance is None or distance > behind):
                        behind = 0  # none of them (nor the last run's) wrote this element
                    read_idx = [dp.at(i, L - latency, lane) for i in w.idx] or [Const(0, 1)]
                    for d, v in enumerate(read_idx):
                        m.d.comb += getattr(old_port, f"i{pos}_{d}").eq(v)
                    old = getattr(old_port, f"d{pos}")
                    new = Signal(dtype_shape(w.mem.dtype), name=f"acc_w{k}l{pos}")
                    first_lane = lane + tuple((n, 0) for n in reduce_names)
                    unit = identity(w.op, w.mem.dtype)
                    cleared = False  # the forwarding gives the identity 0 on the first update
                    if latency:
                        def ready(node, stage):
                            return dp.static(node) or self.timing.stage[node] <= stage

                        early = [dp.at(i, L - 1, lane) for i in w.idx] or [Const(0, 1)]
                        earlier = None  # the index two stages early: compare then
                        if all(ready(i, L - 2) for i in w.idx):
                            earlier = [dp.at(i, L - 2, lane) for i in w.idx] or [Const(0, 1)]
                        clear = None
                        if unit == 0 and ready(w.first, L - 1):
                            clear, cleared = dp.at(w.first, L - 1, first_lane), True
                        old = self._forward(m, old, new, idx, early, earlier, valid_for(L - 1, pos, len(spec.lanes)),
                                            valid_for(L, pos, len(spec.lanes)),
                                            f"w{k}l{pos}", behind, clear)
                    if cleared:
                        m.d.comb += new.eq(dp.combine(w.op, old, value, w.mem.dtype))
                    elif unit is None or w.op.op in ("min", "max"):  # choose after combining
                        if self._bounded(w):  # compare at the width of the values written
                            shape = dp.shape(w.value)
                            old, value = self._narrow(m, old, shape, f"acc_w{k}l{pos}_o"), \
                                self._narrow(m, value, shape, f"acc_w{k}l{pos}_v")
                        first = dp.at(w.first, L, first_lane)
                        m.d.comb += new.eq(Mux(first, value, dp.combine(w.op, old, value, w.mem.dtype)))
                    else:  # the first update combines with the identity: one mux before the op
                        start = Signal(dtype_shape(w.mem.dtype), name=f"acc_w{k}l{pos}_old")
                        m.d.comb += start.eq(Mux(dp.at(w.first, L, first_lane), unit, old))
                        m.d.comb += new.eq(dp.combine(w.op, start, value, w.mem.dtype))
                    value = new
                m.d.comb += getattr(port, f"en{pos}").eq(valid_for(L, pos, len(spec.lanes)))
                for d, v in enumerate(idx):
                    m.d.comb += getattr(port, f"i{pos}_{d}").eq(v)
                m.d.comb += getattr(port, f"d{pos}").eq(value)
        return m

    def _bounded(self, w) -> bool:
        """A min or max accumulator that only this write of this pipe ever writes: whenever an
        update reads it (not its first), it holds a value this write stored, so it lies in the
        range of the values written and can be compared at their width. This rests on the
        lowering's contract (passes/lower.py) that an accumulator's first update in each run has
        `first` set, or that its starting value is written by another access (then there is
        another writer and this is False): no memory starts from a value nobody wrote."""
        plan = self.plans[w.mem.name]
        writers = [a for a in plan.accesses if a.write]
        mine = [x for x in self.pipe.writes if getattr(x, "mem", None) == w.mem]
        return all(a.ctrl is self.pipe for a in writers) and len(mine) == 1

    @staticmethod
    def _narrow(m, value, shape, name):
        """`value` as a signal of `shape` (its low bits: exact when it lies in the shape)."""
        narrow = Signal(shape, name=name)
        m.d.comb += narrow.eq(value)
        return narrow

    @staticmethod
    def _group(m, dp: Datapath, w: GroupWrite, port, valid, L):
        """Send each element's key and values to the group-by's memory (groupmem.py)."""
        m.d.comb += [port.en.eq(valid), port.first.eq(dp.at(w.first, L)), port.key.eq(dp.at(w.key, L))]
        m.d.comb += [getattr(port, f"v{c}").eq(dp.at(v, L)) for c, v in enumerate(w.values)]

    @staticmethod
    def _append(m, dp: Datapath, w: AppendWrite, count_r, count_w, values_w, valid, L):
        """Compaction: the kept items of an element go to consecutive places from the count
        (0 at the first element), and the count moves past them, in the same cycle."""
        m.d.comb += count_r.i0_0.eq(0)
        position = Mux(dp.at(w.first, L), 0, count_r.d0)
        for k, (cond, item) in enumerate(zip(w.conds, w.items)):
            keep = dp.at(cond, L)
            m.d.comb += [getattr(values_w, f"en{k}").eq(valid & keep),
                         getattr(values_w, f"i{k}_0").eq(position),
                         getattr(values_w, f"d{k}").eq(dp.at(item, L))]
            position = position + keep
        m.d.comb += [count_w.en0.eq(valid), count_w.i0_0.eq(0), count_w.d0.eq(position)]

    @staticmethod
    def _forward(m, old, new, idx, early_idx, earlier_idx, coming, writing, name, depth: int, clear=None):
        """A RAM read misses the writes of the last `depth` iterations (MemPlan.unseen_writes):
        writes of the last `depth` iterations to the same
        element are forwarded instead, the newest first (so an accumulator takes one update per
        cycle even when every cycle updates the same element). `clear` (this iteration's
        `first`, one stage before the write, or None) makes the result 0 instead.

        The indices are compared two stages before the write (`earlier_idx`; one stage,
        `early_idx`, when the index is not ready that early), the newest match is picked one
        stage before it into one-hot registered selects, so the update sees one AND-OR of the
        candidates: the accumulator's loop is a flip-flop, the AND-OR and the combiner.
        `coming`/`writing`: the valid flags one stage before the write and of the write.
        The selects are alike in every lane; they are marked `keep` so that synthesis keeps
        each lane's own flip-flops (hwgen/synth.py) instead of merging them into one that
        drives every lane across the chip, and each lane has one for every SELECT_SLICE bits
        of the word, so that the accumulator's loop starts from a flip-flop of small fanout."""
        history = []  # the writes of the last `depth` cycles, newest first
        prev_idx, prev_data, prev_valid = idx, new, writing
        for h in range(depth):
            h_idx = [Signal(len(v), name=f"fw_{name}_{h}_i{d}", reset_less=True) for d, v in enumerate(idx)]
            h_data = Signal.like(new, name=f"fw_{name}_{h}_d", reset_less=True)
            h_valid = Signal(name=f"fw_{name}_{h}_v")
            m.d.sync += [a.eq(b) for a, b in zip(h_idx, prev_idx)]
            m.d.sync += [h_data.eq(prev_data), h_valid.eq(prev_valid)]
            history.append((h_idx, h_data, h_valid))
            prev_idx, prev_data, prev_valid = h_idx, h_data, h_valid

        def same(w_idx, w_valid, this_idx):
            out = w_valid
            for a, b in zip(w_idx, this_idx):
                out = out & (a == b)
            return out

        older = [(h_idx, h_valid) for h_idx, _, h_valid in history]
        if depth == 0:  # the RAM's data is current: only `clear` picks
            sames = []
        elif earlier_idx is not None and depth >= 2:
            # two stages early, this iteration is two writes behind: the iteration one stage
            # behind the write, the write happening now, then the history but its two oldest
            sames = []
            for j, (w_idx, w_valid) in enumerate([(early_idx, coming), (idx, writing)] + older[:depth - 2]):
                r = Signal(name=f"fw_{name}_same{j}")
                m.d.sync += r.eq(same(w_idx, w_valid, earlier_idx))
                sames.append(r)
        else:  # one stage early, one write behind: the write happening now, then the history
            sames = [same(w_idx, w_valid, early_idx) for w_idx, w_valid in [(idx, writing)] + older[:depth - 1]]
        width = len(new)
        slices = [slice(lo, min(lo + SELECT_SLICE, width)) for lo in range(0, width, SELECT_SLICE)]

        def pick(hit, value, label):
            """value where the registered `hit`, else 0: each slice of SELECT_SLICE bits has
            its own select flip-flop, so none drives the whole word."""
            parts = []
            for n, bits in enumerate(slices):
                sel = Signal(name=f"fw_{name}_sel{label}_{n}", attrs=KEEP)
                m.d.sync += sel.eq(hit)
                parts.append(Mux(sel, value[bits], 0))
            return Cat(*parts)

        taken = Const(0, 1) if clear is None else clear
        picks = []
        for j, hit in enumerate(sames):  # newest first: the first match wins
            picks.append(pick(hit & ~taken, history[j][1], j))
            taken = taken | hit
        picks.append(pick(~taken, old, "_ram"))
        result = Signal.like(new, name=f"fw_{name}_old")
        m.d.comb += result.eq(one_of(picks))
        return result

    def _tree(self, dp: Datapath, w, plan, lane, reduce_names, L):
        """The write's value for `lane`, combined over the reduce lanes, at stage L."""
        value_stage = self.timing.stage[w.value]
        if not reduce_names:
            return dp.at(w.value, L, lane)
        combos = _lanes(reduce_names, self.par)
        shape = dtype_shape(w.mem.dtype)
        level = [(dp.at(w.value, value_stage, lane + c), value_stage) for c in combos]
        for depth, (stage, _) in enumerate(plan.tree):
            nxt = []
            for j in range(0, len(level), 2):
                if j + 1 == len(level):
                    nxt.append(level[j])
                    continue
                a = dp.delay(level[j][0], level[j][1], stage, ("tree", id(w), depth, j, lane), shape)
                b = dp.delay(level[j + 1][0], level[j + 1][1], stage, ("tree", id(w), depth, j + 1, lane), shape)
                nxt.append((dp.combine(w.op, a, b, w.mem.dtype), stage))
            level = nxt
        (value, stage), = level
        return dp.delay(value, stage, L, ("tree-out", id(w), lane), shape)
