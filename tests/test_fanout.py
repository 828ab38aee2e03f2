"""Operands that many lanes share (hw/pipe.py `broadcast`, timing.schedule, Datapath.at): a
multiplier operand shared by more than FANOUT lanes is taken two stages after it is made, so
that it can reach each lane's DSP blocks through a group copy and then the lane's own copy."""

from conftest import load_pattern
from hwgen import ir
from hwgen.build import loop_program
from hwgen.hw.datapath import FANOUT
from hwgen.hw.pipe import analyse, broadcast, pipe_exprs
from hwgen.hw.timing import latency_of, multiplier
from hwgen.loops import Pipe, walk
from hwgen.passes import memplan


def products(app):
    prog = loop_program(getattr(load_pattern(app), app))
    plans = memplan.plan(prog, 4)
    for pipe in (c for c in walk(prog.root) if isinstance(c, Pipe)):
        par = {c.name: c.par for c in pipe.counters if c.par > 1}
        timing = analyse(pipe, plans)[1]
        for e in pipe_exprs(pipe):
            for n in ir.walk(e):
                if multiplier(n):
                    yield n, par, timing


def test_shared_multiplier_operand_gets_two_registers():
    """gemm at par 16 over j: a[i, k] goes to 16 lanes (spread), b[k, j] is each lane's own."""
    seen = 0
    for mul, par, timing in products("gemm"):
        spread = broadcast(par)
        a, b = ir.children(mul)
        shared = [c for c in (a, b) if spread(mul, c)]
        assert len(shared) == 1 and max(par.values()) > FANOUT
        made = timing.stage[shared[0]]
        assert timing.stage[mul] - latency_of(mul) >= made + 2
        seen += 1
    assert seen == 1


def test_operand_of_few_lanes_is_not_spread():
    spread = broadcast({"j": FANOUT})
    for mul, par, timing in products("gemm"):
        for c in ir.children(mul):
            assert not spread(mul, c)  # FANOUT lanes: one group copy reaches them all
