"""Outer controllers: the sequential loop, the metapipeline and the fork/join.

Every controller is started by a one-cycle pulse on `go` and answers with a one-cycle pulse on
`done`. Child controllers are started through `stage_go_<k>` and report on `stage_done_<k>`.

SeqLoop: `go` in cycle t0 starts stage 0 in t0 + 1; when stage k reports done in cycle t,
stage k + 1 (or stage 0 of the next iteration) starts in t + 1; after the last stage of the last
iteration, `done` pulses in t + 1. It takes `1 + iterations * sum(stage_cycles + 1)` cycles.

MetaLoop (metapipeline): iteration i runs stage s in step i + s, so every stage works on a
different iteration at once. A step starts all its stages together and ends when the last of
them reports done; the next step starts the cycle after. It takes
`1 + sum over steps of (longest stage in the step + 1)`, over iterations + stages - 1 steps.
Stage s sees the counter values of its own iteration (`ctr_<name>_s<s>`) and, for a memory
N-buffered over this loop, that iteration's buffer (`buf<N>_s<s>` = iteration mod N).

Parallel: `go` starts every child in the same cycle; `done` pulses the cycle after the last
child reports done (a flip-flop, so the join's logic is not on the parent's path), so it takes
max(child cycles) + 1.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .counters import all_at_end, next_values, port_name


def _stage_ports(members: dict, stages: int) -> None:
    for k in range(stages):
        members[f"stage_go_{k}"] = Out(1)
        members[f"stage_done_{k}"] = In(1)


class SeqLoop(wiring.Component):
    """A sequential loop over `counters` (loops.Counter) with `stages` children.

    Members: go, done, stage_go_<k>, stage_done_<k>, ctr_<name>: Out.
    """

    def __init__(self, counters, stages: int):
        self.counters = tuple(counters)
        self.stages = stages
        members = {"go": In(1), "done": Out(1)}
        for c in self.counters:
            members[f"ctr_{port_name(c.name)}"] = Out(range(max(2, c.extent)))
        _stage_ports(members, stages)
        super().__init__(members)

    def counter_for(self, name: str, stage: int):
        return getattr(self, f"ctr_{port_name(name)}")

    def elaborate(self, platform):
        m = Module()
        chain = [(getattr(self, f"ctr_{port_name(c.name)}"), c.extent) for c in self.counters]
        n = self.stages
        current = Signal(range(max(2, n)))
        go = [getattr(self, f"stage_go_{k}") for k in range(n)]
        done = [getattr(self, f"stage_done_{k}") for k in range(n)]
        m.d.sync += [g.eq(0) for g in go] + [self.done.eq(0)]
        with m.If(self.go):
            m.d.sync += [v.eq(0) for v, _ in chain]
            m.d.sync += [current.eq(0), go[0].eq(1)]
        for k in range(n):
            with m.If(done[k] & (current == k)):
                if k + 1 < n:
                    m.d.sync += [current.eq(k + 1), go[k + 1].eq(1)]
                else:
                    with m.If(all_at_end(chain)):
                        m.d.sync += self.done.eq(1)
                    with m.Else():
                        m.d.sync += [v.eq(x) for (v, _), x in zip(chain, next_values(chain))]
                        m.d.sync += [current.eq(0), go[0].eq(1)]
        return m


class MetaLoop(wiring.Component):
    """A metapipeline over `counters` with `stages` children; `depths`: the buffer counts of
    the memories it rotates.

    Members: go, done, stage_go_<k>, stage_done_<k>, ctr_<name>_s<k>: Out, buf<N>_s<k>: Out.
    """

    def __init__(self, counters, stages: int, depths=()):
        self.counters = tuple(counters)
        self.stages = stages
        self.depths = tuple(sorted(set(depths)))
        members = {"go": In(1), "done": Out(1)}
        for k in range(stages):
            for c in self.counters:
                members[f"ctr_{port_name(c.name)}_s{k}"] = Out(range(max(2, c.extent)))
            for d in self.depths:
                members[f"buf{d}_s{k}"] = Out(range(d))
        _stage_ports(members, stages)
        super().__init__(members)

    def counter_for(self, name: str, stage: int):
        return getattr(self, f"ctr_{port_name(name)}_s{stage}")

    def buffer_for(self, depth: int, stage: int):
        return getattr(self, f"buf{depth}_s{stage}")

    def elaborate(self, platform):
        m = Module()
        S = self.stages
        nxt = [Signal(range(max(2, c.extent)), name=f"next_{port_name(c.name)}") for c in self.counters]
        nxt_buf = {d: Signal(range(d), name=f"next_buf{d}") for d in self.depths}
        more = Signal()
        holding = [Signal(name=f"holds_s{k}") for k in range(S)]
        finished = [Signal(name=f"finished_s{k}") for k in range(S)]
        running = Signal()
        go = [getattr(self, f"stage_go_{k}") for k in range(S)]
        done = [getattr(self, f"stage_done_{k}") for k in range(S)]
        # the step ends when every stage holding an iteration has reported done
        step_over = running
        for k in range(S):
            step_over = step_over & (~holding[k] | finished[k] | done[k])
            with m.If(done[k]):
                m.d.sync += finished[k].eq(1)
        boundary = Signal()
        m.d.comb += boundary.eq(self.go | step_over)
        # what enters stage 0 at this boundary
        enter = Signal()
        enter_ctr = [Signal.like(v, name=f"enter_{port_name(c.name)}") for v, c in zip(nxt, self.counters)]
        enter_buf = {d: Signal(range(d), name=f"enter_buf{d}") for d in self.depths}
        m.d.comb += enter.eq(self.go | more)
        m.d.comb += [e.eq(Mux(self.go, 0, v)) for e, v in zip(enter_ctr, nxt)]
        m.d.comb += [enter_buf[d].eq(Mux(self.go, 0, nxt_buf[d])) for d in self.depths]
        chain = [(e, c.extent) for e, c in zip(enter_ctr, self.counters)]
        m.d.sync += [g.eq(0) for g in go] + [self.done.eq(0)]
        with m.If(boundary):
            new_holding = [enter] + [~self.go & holding[k - 1] for k in range(1, S)]
            m.d.sync += [h.eq(v) for h, v in zip(holding, new_holding)]
            m.d.sync += [f.eq(0) for f in finished]
            m.d.sync += [g.eq(v) for g, v in zip(go, new_holding)]
            any_held = 0
            for v in new_holding:
                any_held = any_held | v
            m.d.sync += running.eq(any_held)
            with m.If(~any_held):
                m.d.sync += self.done.eq(1)
            for k in range(S - 1, 0, -1):
                for c in self.counters:
                    m.d.sync += getattr(self, f"ctr_{port_name(c.name)}_s{k}").eq(
                        getattr(self, f"ctr_{port_name(c.name)}_s{k - 1}")
                    )
                for d in self.depths:
                    m.d.sync += getattr(self, f"buf{d}_s{k}").eq(getattr(self, f"buf{d}_s{k - 1}"))
            for e, c in zip(enter_ctr, self.counters):
                m.d.sync += getattr(self, f"ctr_{port_name(c.name)}_s0").eq(e)
            for d in self.depths:
                m.d.sync += getattr(self, f"buf{d}_s0").eq(enter_buf[d])
            with m.If(enter):
                m.d.sync += [v.eq(x) for v, x in zip(nxt, next_values(chain))]
                m.d.sync += more.eq(~all_at_end(chain))
                for d in self.depths:
                    m.d.sync += nxt_buf[d].eq(Mux(enter_buf[d] == d - 1, 0, enter_buf[d] + 1))
            with m.Else():
                m.d.sync += more.eq(0)
        return m


class Parallel(wiring.Component):
    """Fork/join over `children` controllers. Members: go, done, stage_go_<k>, stage_done_<k>."""

    def __init__(self, children: int):
        self.children = children
        members = {"go": In(1), "done": Out(1)}
        _stage_ports(members, children)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.children
        seen = [Signal(name=f"seen_{k}") for k in range(n)]
        finished = 1
        for k in range(n):
            d = getattr(self, f"stage_done_{k}")
            m.d.comb += getattr(self, f"stage_go_{k}").eq(self.go)
            finished = finished & (seen[k] | d)
            with m.If(d):
                m.d.sync += seen[k].eq(1)
        m.d.sync += self.done.eq(finished)
        with m.If(finished):
            m.d.sync += [s.eq(0) for s in seen]
        return m
