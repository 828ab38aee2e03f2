"""Pipe plan: the pure analysis of one loops.Pipe under the memory plans, which the hardware
(hw/pipe.py) builds and the cycle model counts.

    plan_pipe(pipe, plans) -> PipePlan    lanes, the datapath's timing (timing.schedule),
                                          the memory ports with each lane's reach, the write
                                          plans, and the latency (the write stage)

A port gets one lane per combination of the par counters its index uses. A write that
accumulates over lanes its index does not use (a reduction over a par counter) first combines
those lanes with a tree, then updates the accumulator once.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .. import ir
from .. import timing as tm
from ..affine import to_affine
from ..errors import ScheduleError
from ..loops import AppendWrite, GroupWrite, Pipe, write_exprs
from .memplan import BANK_FANOUT, affine_parts, congruent_banks


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


def lane_combos(names, par: dict) -> list:
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
        starts = [
            (a.const + sum(c * value.get(n, 0) for n, c in a.terms if n in par)) % g for a, g in zip(affs, grains)
        ]
        out.append(congruent_banks(starts, grains, plan.banks))
    return out


def par_deps(par: dict):
    """deps(node): the par counters (names in `par`) that `node`'s value depends on."""
    return _ParDeps(frozenset(par))


class _ParDeps:
    """par_deps' function (an object, not a recursive closure: see ir._subst)."""

    def __init__(self, names: frozenset):
        self.names, self.memo = names, {}

    def __call__(self, node) -> frozenset:
        found = self.memo.get(node)
        if found is None:
            if isinstance(node, ir.Index):
                found = frozenset([node.name]) & self.names
            else:
                kids = ir.children(node)
                found = frozenset().union(*[self(c) for c in kids]) if kids else frozenset()
            self.memo[node] = found
        return found


def broadcast(par: dict, fanout: int = tm.FANOUT):
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


@dataclass(frozen=True)
class PipePlan:
    """What the hardware of a pipe is made of: `par` (par counter -> lanes), `timing` (the
    datapath's stage schedule), `reads` / `writes` (memory ports; `acc_reads` read the old
    values of accumulators), `read_nodes` (the MemReads, in port order), `write_plans` (one
    per write) and `latency` (the stage of the last write)."""

    par: dict
    timing: tm.Timing
    reads: list
    read_nodes: list
    writes: list
    acc_reads: list
    write_plans: list
    latency: int


def plan_pipe(pipe: Pipe, plans: dict) -> PipePlan:
    """The PipePlan of `pipe` with memories built as in `plans` (passes.memplan)."""
    par = {c.name: c.par for c in pipe.counters if c.par > 1}
    many = broadcast(par, BANK_FANOUT)
    own = {c.name for c in pipe.counters}

    def spread_index(read, index) -> bool:  # a RAM's index that moves during the pipe
        moves = any(isinstance(n, ir.Index) and n.name in own for n in ir.walk(index))
        return plans[read.mem.name].kind == "sram" and moves and many(read, index)

    def far(product) -> bool:  # an operand shared by more lanes than a bank group
        return any(many(product, operand) for operand in ir.children(product))

    timing = tm.schedule(
        pipe_exprs(pipe), lambda mem: tm.read_timing(plans[mem.name]), broadcast(par), spread_index, far
    )
    reads, read_nodes = [], []
    for e in pipe_exprs(pipe):
        for n in ir.walk(e):
            if isinstance(n, ir.MemRead) and n not in read_nodes:
                read_nodes.append(n)
    read_nodes.sort(key=lambda n: (n.mem.name, repr(n.idx)))
    for n in read_nodes:
        names = _par_used(n.idx, par)
        lanes = lane_combos(names, par)
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
        lanes = lane_combos(names, par)
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
    return PipePlan(par, timing, reads, read_nodes, writes, acc_reads, wplans, stage)
