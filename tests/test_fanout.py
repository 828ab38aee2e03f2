"""Operands that many lanes share (hw/pipe.py `broadcast`, timing.schedule, Datapath.at): a
multiplier operand shared by more than FANOUT lanes is taken two stages after it is made, so
that it can reach each lane's DSP blocks through a group copy and then the lane's own copy.
A read index shared by more than BANK_FANOUT lanes is taken a stage after it is made (a copy
per group of lanes), and such a port's lanes take their valid flags from group copies; a RAM
of more than BANK_FANOUT banks takes its buffer selects through copies and registers each
lane's read address, and a tile store reading it walks its DRAM addresses on a copy of its
beat counters. A product with an operand shared by more than BANK_FANOUT lanes is registered
once more in the fabric (timing.far)."""

import re

import numpy as np
import pytest
from conftest import load_pattern

import hwgen as hw
from hwgen import int16, ir
from hwgen.build import loop_program
from hwgen.hw.datapath import FANOUT
from hwgen.loops import Pipe, walk
from hwgen.passes import memplan
from hwgen.passes.memplan import BANK_FANOUT
from hwgen.passes.pipeplan import broadcast, pipe_exprs, plan_pipe
from hwgen.timing import latency_of, multiplier


def products(app):
    prog = loop_program(getattr(load_pattern(app), app))
    plans = memplan.plan(prog, 4)
    for pipe in (c for c in walk(prog.root) if isinstance(c, Pipe)):
        par = {c.name: c.par for c in pipe.counters if c.par > 1}
        timing = plan_pipe(pipe, plans).timing
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


@hw.kernel(tile={"i": 32, "j": 32, "k": 32})
def wide_gemm(a: hw.Array[int16, 64, 64], b: hw.Array[int16, 64, 64]) -> hw.Array[int16, 64, 64]:
    return hw.map((64, 64), lambda i, j: hw.sum(64, lambda k: a[i, k] * b[k, j]))


def _read_stages(kernel):
    """(index made, read issued) stages of the b[k, j] read, the one whose lanes share k."""
    prog = loop_program(kernel)
    plans = memplan.plan(prog, 4)
    pipe = next(c for c in walk(prog.root) if isinstance(c, Pipe))
    timing = plan_pipe(pipe, plans).timing
    par = {c.name: c.par for c in pipe.counters if c.par > 1}
    for e in pipe_exprs(pipe):
        for n in ir.walk(e):
            if isinstance(n, ir.MemRead) and any(name in par for i in n.idx for name in _names(i)):
                k = n.idx[0]
                return timing.stage[k], timing.stage[n] - plans[n.mem.name].latency
    raise AssertionError("no read over the lanes")


def _names(node):
    return [x.name for x in ir.walk(node) if isinstance(x, ir.Index)]


def test_read_index_of_many_lanes_is_taken_a_stage_later():
    made, issued = _read_stages(wide_gemm.with_schedule(par={"j": 2 * BANK_FANOUT}))
    assert issued == made + 1
    made, issued = _read_stages(wide_gemm.with_schedule(par={"j": BANK_FANOUT}))
    assert issued == made  # BANK_FANOUT banks: the index drives their address registers


def _far_products(kernel):
    prog = loop_program(kernel)
    plans = memplan.plan(prog, 4)
    for pipe in (c for c in walk(prog.root) if isinstance(c, Pipe)):
        timing = plan_pipe(pipe, plans).timing
        yield from ((n, timing) for e in pipe_exprs(pipe) for n in ir.walk(e) if multiplier(n))


def test_a_product_of_many_lanes_is_registered_once_more():
    """Over BANK_FANOUT lanes a product is registered once more in the fabric (its DSP block
    may sit across the chip from the adder it feeds): one more stage, which the model counts;
    at BANK_FANOUT lanes it is not."""
    wide = list(_far_products(wide_gemm.with_schedule(par={"j": 2 * BANK_FANOUT})))
    narrow = list(_far_products(wide_gemm.with_schedule(par={"j": BANK_FANOUT})))
    assert len(wide) == len(narrow) == 1
    (mul, timing), (mul16, timing16) = wide[0], narrow[0]
    assert mul in timing.far and mul16 not in timing16.far
    operands = max(timing.stage[c] for c in ir.children(mul))
    assert timing.stage[mul] >= operands + latency_of(mul) + 1
    assert re.search(r"_pf_\d+\b", wide_gemm.with_schedule(par={"j": 2 * BANK_FANOUT}).elaborate().verilog)


def test_a_store_from_a_spread_memory_walks_its_addresses_on_a_copy():
    """A tile store reading a memory of more than BANK_FANOUT banks steps a kept copy of its
    beat counters (prefix `qa`) for its DRAM addresses and registers each move (`qab_move`)
    before adding it; from BANK_FANOUT banks it does neither."""
    copies = r"\bqa(r\d+|b|b_move)\b"
    wide = wide_gemm.with_schedule(par={"j": 2 * BANK_FANOUT}).elaborate().verilog
    assert re.search(r"\bqar0\b", wide) and re.search(r"\bqab_move\b", wide)
    assert not re.search(copies, wide_gemm.with_schedule(par={"j": BANK_FANOUT}).elaborate().verilog)


@pytest.mark.rtl
def test_gemm_over_32_lanes_in_verilator():
    """32 lanes: the shared k through group copies, each group of lanes with its own valid,
    the 32-bank memories' buffer selects through copies and their read addresses registered
    per lane (one more cycle of read latency, which the model counts), and the tile store's
    DRAM addresses walked on a copy of its counters."""
    kernel = wide_gemm.with_schedule(par={"j": 2 * BANK_FANOUT})
    design = kernel.elaborate()
    assert re.search(r"\bvalid_s\d+_g7\b", design.verilog)  # the last group's copy
    wide = [p for p in design.component.plans.values() if p.registered_reads]
    assert wide and all(p.latency == 6 for p in wide)
    rng = np.random.default_rng(6)
    a = rng.integers(-300, 300, (64, 64)).astype(np.int16)
    b = rng.integers(-300, 300, (64, 64)).astype(np.int16)
    r = kernel.verify(a, b)
    np.testing.assert_array_equal(r.outputs, (a.astype(np.int64) @ b).astype(np.int16))
    assert r.cycles == r.predicted_cycles


def colsum(K: int, lanes: int):
    @hw.kernel(tile={"i": 32, "j": K}, par={"j": lanes})
    def colsum(x: hw.Array[hw.int32, 64, K]) -> hw.Array[hw.int32, K]:
        return hw.map(K, lambda j: hw.sum(64, lambda i: x[i, j]))

    return colsum


@pytest.mark.rtl
@pytest.mark.parametrize("distance", [5, 6])
def test_column_sums_over_32_banks_at_the_forwarding_threshold(distance):
    """An accumulator of 32 banks registers its read addresses once more, so a read is
    sampled a cycle later and misses 5 writes, not 6: each element updated every 6 issues is
    read straight from the RAM, every 5 issues through forwarding; both exact."""
    lanes = 2 * BANK_FANOUT
    kernel = colsum(lanes * distance, lanes)
    plans = kernel.elaborate().component.plans.values()
    sums = [p for p in plans if p.registered_reads and not p.registered_writes]  # not x's tile
    assert len(sums) == 1 and sums[0].unseen_writes == 5
    x = np.random.default_rng(distance).integers(-1000, 1000, (64, lanes * distance), dtype=np.int32)
    r = kernel.verify(x, runs=2)
    np.testing.assert_array_equal(r.outputs, x.sum(axis=0, dtype=np.int32))
    assert r.cycles == r.predicted_cycles


def test_every_bank_keeps_its_own_write_registers():
    """A bank's write enable, address and data registers are marked `keep`: banks that a tile
    load fills with the same beat would otherwise share one (synthesis merges identical
    flip-flops), routed to block RAMs across the chip."""
    from hwgen.build import elaborate

    v = elaborate(getattr(load_pattern("gemm"), "gemm")).verilog
    decls = re.findall(
        r"((?:\(\*[^*]*\*\)\s*)*)(?:wire|reg)\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\w+_(?:wdata|waddr|wen))\s*;", v
    )
    assert len(decls) >= 3 * 16, len(decls)
    assert [name for attrs, name in decls if "keep" not in attrs] == []


def test_a_tile_load_lane_reaches_its_banks_through_group_copies():
    """A tile load into a RAM of more than MUX_GROUP banks registers each lane's address and
    data once per group of MUX_GROUP banks it reaches (kept apart in synthesis), so no
    flip-flop's route spans all of the lane's banks: at 32 lanes, b's tile has 32 banks and a
    beat of 4 words, so each word lane reaches 8 banks, through 2 copies."""
    v = wide_gemm.with_schedule(par={"j": 2 * BANK_FANOUT}).elaborate().verilog
    decls = re.findall(
        r"((?:\(\*[^*]*\*\)\s*)*)reg\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(w\d+_l(\d+)_(?:addr|data)_g(\d+))\s*(?:=[^;]*)?;",
        v,
    )
    assert decls and [name for attrs, name, _, _ in decls if "keep" not in attrs] == []
    groups = {}
    for _, _, lane, group in decls:
        groups.setdefault(int(lane), set()).add(int(group))
    assert groups == {lane: {0, 1} for lane in range(4)}, groups
