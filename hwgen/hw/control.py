"""Outer controllers: the sequential loop and the fork/join.

Every controller is started by a one-cycle pulse on `go` and answers with a one-cycle pulse on
`done`. Child controllers are started through `stage_go_<k>` and report on `stage_done_<k>`.

SeqLoop timing: `go` in cycle t0 starts stage 0 in t0 + 1; when stage k reports done in cycle
t, stage k + 1 (or, after the last stage, stage 0 of the next iteration) starts in t + 1; after
the last stage of the last iteration, `done` pulses in t + 1. So a sequential loop takes
`1 + iterations * sum(stage_cycles + 1)` cycles. Counter values change only between iterations.

Parallel timing: `go` starts every child in the same cycle; `done` pulses in the cycle the
last child reports done, so it takes max(child cycles).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pipe import _advance, _all_at_end, port_name


class SeqLoop(wiring.Component):
    """A sequential loop over `counters` (loops.Counter) with `stages` children.

    Members: go, done, stage_go_<k>: Out(1), stage_done_<k>: In(1), ctr_<name>: Out.
    """

    def __init__(self, counters, stages: int):
        self.counters = tuple(counters)
        self.stages = stages
        members = {"go": In(1), "done": Out(1)}
        for c in self.counters:
            members[f"ctr_{port_name(c.name)}"] = Out(range(max(2, c.extent)))
        for k in range(stages):
            members[f"stage_go_{k}"] = Out(1)
            members[f"stage_done_{k}"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        regs = {c.name: getattr(self, f"ctr_{port_name(c.name)}") for c in self.counters}
        n = self.stages
        current = Signal(range(max(2, n)))
        go = [getattr(self, f"stage_go_{k}") for k in range(n)]
        done = [getattr(self, f"stage_done_{k}") for k in range(n)]
        last_iter = Signal()
        m.d.comb += last_iter.eq(_all_at_end(self.counters, regs))
        m.d.sync += [g.eq(0) for g in go] + [self.done.eq(0)]
        with m.If(self.go):
            m.d.sync += [r.eq(0) for r in regs.values()]
            m.d.sync += [current.eq(0), go[0].eq(1)]
        for k in range(n):
            with m.If(done[k] & (current == k)):
                if k + 1 < n:
                    m.d.sync += [current.eq(k + 1), go[k + 1].eq(1)]
                else:
                    with m.If(last_iter):
                        m.d.sync += self.done.eq(1)
                    with m.Else():
                        _advance(m, self.counters, regs)
                        m.d.sync += [current.eq(0), go[0].eq(1)]
        return m


class Parallel(wiring.Component):
    """Fork/join over `children` controllers. Members: go, done, stage_go_<k>, stage_done_<k>."""

    def __init__(self, children: int):
        self.children = children
        members = {"go": In(1), "done": Out(1)}
        for k in range(children):
            members[f"stage_go_{k}"] = Out(1)
            members[f"stage_done_{k}"] = In(1)
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
        m.d.comb += self.done.eq(finished)
        with m.If(finished):
            m.d.sync += [s.eq(0) for s in seen]
        return m
