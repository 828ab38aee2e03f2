"""Lane reach (hw/onchip.py): the banks a lane of a tile transfer or of a parallel pipe access
can ever address. The hardware wires each lane only to the banks in its reach, so a reach
that misses a bank the lane does address would be wrong hardware; these tests enumerate the
banks actually addressed and compare."""

import itertools
import math

import pytest
from conftest import load_pattern

import hwgen as hw
from hwgen.build import loop_program
from hwgen.hw.transfer import beats_of, lanes_of, reach_banks
from hwgen.loops import Pipe, walk
from hwgen.passes import memplan
from hwgen.passes.memplan import MemPlan, congruent_banks
from hwgen.passes.pipeplan import plan_pipe


def plan_of(shape, banks):
    class Mem:  # the fields reach_banks reads
        pass

    mem = Mem()
    mem.shape = shape
    return MemPlan(mem, "sram", banks, 1)


@pytest.mark.parametrize(
    "shape,banks,words",
    [
        ((64, 32), (1, 16), 4),
        ((64, 32), (1, 4), 4),
        ((48,), (6,), 4),
        ((10, 12), (2, 8), 4),
        ((7,), (1,), 4),
        ((3, 40), (1, 16), 8),
        ((16,), (16,), 2),
    ],
)
def test_transfer_reach_is_exactly_the_banks_addressed(shape, banks, words):
    reach = reach_banks(shape, words, plan_of(shape, banks))
    per_row = -(-shape[-1] // words)
    rows = list(itertools.product(*(range(n) for n in shape[:-1])))
    assert len(rows) * per_row == beats_of(shape, words)
    for k in range(lanes_of(shape, words)):
        hit = set()
        for row, beat in itertools.product(rows, range(per_row)):
            col = beat * words + k
            if col < shape[-1]:
                hit.add(tuple(i % b for i, b in zip(row + (col,), banks)))
        assert hit <= set(reach[k]), f"lane {k} addresses banks outside its reach"
        # the reach is tight up to the rows that a small tile does not fill
        if all(n >= b for n, b in zip(shape[:-1], banks[:-1])) and shape[-1] >= words * banks[-1]:
            assert hit == set(reach[k])
    if words % banks[-1] == 0 and all(b == 1 for b in banks[:-1]):
        assert all(len(r) == 1 for r in reach)  # a plain wire from each word to its bank


def test_congruent_banks():
    assert congruent_banks([1], [4], [16]) == ((1,), (5,), (9,), (13,))
    assert congruent_banks([0, 3], [1, 4], [2, 8]) == ((0, 3), (0, 7), (1, 3), (1, 7))
    assert congruent_banks([5], [1], [3]) == ((0,), (1,), (2,))


def test_pipe_reach_of_gda_lanes():
    """gda at par 16 over b: lane l of mu[b] and of x[r, b] stays in bank l; mu[a] and
    x[r, a] (one lane, a stepping by 1) reach all 16 banks."""
    prog = loop_program(load_pattern("gda").gda)
    plans = memplan.plan(prog, 4)
    pipe = next(c for c in walk(prog.root) if isinstance(c, Pipe))
    reads = plan_pipe(pipe, plans).reads
    seen = set()
    for port in reads:
        banks = plans[port.mem.name].banks
        if len(port.lanes) == 16:
            lane_banks = [((0,) * (len(banks) - 1)) + (l,) for l in range(16)]  # noqa: E741
            assert port.reach == [(b,) for b in lane_banks], port.mem.name
            seen.add("parallel")
        elif math.prod(banks) == 16:
            assert len(port.reach) == 1 and len(port.reach[0]) == 16, port.mem.name
            seen.add("broadcast")
    assert seen == {"parallel", "broadcast"}


@pytest.mark.rtl
def test_ram_banks_of_one_entry_lint_clean(tmp_path):
    """8 lanes over a tile of 8: banks of one entry each (their Verilog had [-1:0] addresses)."""
    from hwgen_sim import runner

    @hw.kernel(tile={"i": 4, "j": 8}, par={"i": 4, "j": 8}, metapipeline=False)
    def lanes(a: hw.Array[hw.int8, 8, 8], x: hw.Array[hw.int8, 8]):
        return hw.map(8, lambda i: hw.sum(8, lambda j: a[i, j] * x[j]))

    design = lanes.build(out_dir=tmp_path)
    warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings
