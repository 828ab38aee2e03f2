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

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import ir
from ..loops import AppendWrite, GroupWrite, Pipe
from ..passes.memplan import BANK_FANOUT
from ..passes.pipeplan import PipePlan, broadcast, lane_combos, par_deps, pipe_exprs, reuse_distance
from ..timing import FANOUT
from .counters import all_at_end, next_values, port_name
from .datapath import Datapath, dtype_shape
from .device import KEEP
from .groupmem import update_port
from .onchip import lane_data, lane_en, lane_index, one_of, read_port, write_port

SELECT_SLICE = 8  # data bits that one forwarding select flip-flop drives


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


def identity(op: ir.Combiner, dtype):
    """The value x with op(x, v) == v for every v, for the builtin ops (None for custom ones)."""
    if op.expr is not None:
        return None
    if dtype.is_bool:
        return {"and": 1, "or": 0, "xor": 0, "max": 0, "min": 1}.get(op.op)
    return {"add": 0, "or": 0, "xor": 0, "mul": 1, "and": dtype.wrap(-1), "max": dtype.min, "min": dtype.max}.get(op.op)


class PipeUnit(wiring.Component):
    """Hardware for one loops.Pipe with its `plan` (passes.pipeplan). `outer`: name -> extent
    of enclosing counters; `params`: name -> dtype; `plans`: memory name -> MemPlan."""

    def __init__(self, pipe: Pipe, plan: PipePlan, outer: dict, params: dict, plans: dict):
        self.pipe = pipe
        self.plans = plans
        self.par, self.timing, self.read_nodes = plan.par, plan.timing, plan.read_nodes
        self.write_plans, self.latency = plan.write_plans, plan.latency
        self.read_ports = plan.reads + plan.acc_reads  # the old values of accumulators come last
        self.write_ports = plan.writes
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
        self.checked = sorted({w.mem.name for w in pipe.writes if getattr(w, "checked", ())})
        for name in self.checked:  # a write at a subscript from data fell outside its memory
            members[f"range_{name}"] = Out(1)
        super().__init__(members)

    @property
    def iterations(self) -> int:
        return self.pipe.iterations

    def elaborate(self, platform):
        m = Module()
        regs, running, last = self._issue(m)
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

        dp = self._datapath(m, regs)
        acc_port, k, group = len(self.read_nodes), 0, 0
        faults: dict = {}  # memory name -> the lanes' out-of-range pulses
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
                    value = self._accumulate(
                        m,
                        dp,
                        w,
                        old_port,
                        k,
                        pos,
                        lane,
                        value,
                        idx,
                        reduce_names,
                        lambda stage: valid_for(stage, pos, len(spec.lanes)),
                    )
                en = valid_for(L, pos, len(spec.lanes))
                if getattr(w, "checked", ()):
                    en = self._range_check(m, w, idx, en, f"w{k}l{pos}", faults)
                m.d.comb += lane_en(port, pos).eq(en)
                m.d.comb += [a.eq(v) for a, v in zip(lane_index(port, pos, len(idx)), idx)]
                m.d.comb += lane_data(port, pos).eq(value)
        for name, pulses in faults.items():
            m.d.comb += getattr(self, f"range_{name}").eq(Cat(*pulses).any())
        return m

    @staticmethod
    def _range_check(m, w, idx, en, name, faults):
        """The write enable of a write at subscripts from data: off when a checked subscript
        lies outside the memory, which then pulses `range_<mem>`."""
        inside = Signal(name=f"{name}_inside")
        m.d.comb += inside.eq(1)
        for axis in w.checked:
            v, n = idx[axis], w.mem.shape[axis]
            with m.If((v < 0) | (v >= n)):
                m.d.comb += inside.eq(0)
        faults.setdefault(w.mem.name, []).append(en & ~inside)
        return en & inside

    def _datapath(self, m, regs: dict) -> Datapath:
        """The datapath of the pipe's expressions: counters (`regs`, each lane at its offset),
        enclosing counters and parameters from ports, memory reads through the read ports."""

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
            m.d.comb += [a.eq(v) for a, v in zip(lane_index(port, pos, len(idx)), idx)]
            return lane_data(port, pos)

        return Datapath(
            m,
            self.timing,
            self.extents,
            leaf,
            static,
            read,
            lambda mem: self.plans[mem.name].latency,
            par_deps(self.par),
            name="n",
            spread=broadcast(self.par),
        )

    def _issue(self, m) -> tuple:
        """The pipe's counters, stepping one issue per cycle from `go`: (registers by counter
        name, running, last issue)."""
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
        return regs, running, last

    def _accumulate(self, m, dp, w, old_port, k, pos, lane, value, idx, reduce_names, valid_at):
        """Lane `pos` of accumulating write `w`: the element's old value (read `latency`
        stages early, recent writes forwarded), combined with `value`; the new value.
        `valid_at(stage)`: the lane's valid flag at a stage."""
        L = self.latency
        latency = self.plans[w.mem.name].latency
        behind = self.plans[w.mem.name].unseen_writes  # recent writes the read misses
        distance = reuse_distance(self.pipe.counters, w.idx)
        if L >= behind and (distance is None or distance > behind):
            behind = 0  # none of them (nor the last run's) wrote this element
        read_idx = [dp.at(i, L - latency, lane) for i in w.idx] or [Const(0, 1)]
        m.d.comb += [a.eq(v) for a, v in zip(lane_index(old_port, pos, len(read_idx)), read_idx)]
        old = lane_data(old_port, pos)
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
            old = self._forward(
                m, old, new, idx, early, earlier, valid_at(L - 1), valid_at(L), f"w{k}l{pos}", behind, clear
            )
        if cleared:
            m.d.comb += new.eq(dp.combine(w.op, old, value, w.mem.dtype))
        elif unit is None or w.op.op in ("min", "max"):  # choose after combining
            if self._bounded(w):  # compare at the width of the values written
                shape = dp.shape(w.value)
                old, value = (
                    self._narrow(m, old, shape, f"acc_w{k}l{pos}_o"),
                    self._narrow(m, value, shape, f"acc_w{k}l{pos}_v"),
                )
            first = dp.at(w.first, L, first_lane)
            m.d.comb += new.eq(Mux(first, value, dp.combine(w.op, old, value, w.mem.dtype)))
        else:  # the first update combines with the identity: one mux before the op
            start = Signal(dtype_shape(w.mem.dtype), name=f"acc_w{k}l{pos}_old")
            m.d.comb += start.eq(Mux(dp.at(w.first, L, first_lane), unit, old))
            m.d.comb += new.eq(dp.combine(w.op, start, value, w.mem.dtype))
        return new

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
        m.d.comb += lane_index(count_r, 0, 1)[0].eq(0)
        position = Mux(dp.at(w.first, L), 0, lane_data(count_r, 0))
        for k, (cond, item) in enumerate(zip(w.conds, w.items)):
            keep = dp.at(cond, L)
            m.d.comb += [
                lane_en(values_w, k).eq(valid & keep),
                lane_index(values_w, k, 1)[0].eq(position),
                lane_data(values_w, k).eq(dp.at(item, L)),
            ]
            position = position + keep
        m.d.comb += [lane_en(count_w, 0).eq(valid), lane_data(count_w, 0).eq(position)]
        m.d.comb += lane_index(count_w, 0, 1)[0].eq(0)

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
            for j, (w_idx, w_valid) in enumerate([(early_idx, coming), (idx, writing)] + older[: depth - 2]):
                r = Signal(name=f"fw_{name}_same{j}")
                m.d.sync += r.eq(same(w_idx, w_valid, earlier_idx))
                sames.append(r)
        else:  # one stage early, one write behind: the write happening now, then the history
            sames = [same(w_idx, w_valid, early_idx) for w_idx, w_valid in [(idx, writing)] + older[: depth - 1]]
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
        combos = lane_combos(reduce_names, self.par)
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
        ((value, stage),) = level
        return dp.delay(value, stage, L, ("tree-out", id(w), lane), shape)
