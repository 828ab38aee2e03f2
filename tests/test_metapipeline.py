"""Tiling, metapipelining and parallel lanes, observed in simulation."""

import numpy as np
import pytest
from conftest import load_pattern

import hwgen as hw
from hwgen import int32

pytestmark = pytest.mark.rtl


def test_load_of_next_tile_overlaps_compute_of_this_tile():
    app = load_pattern("dotproduct")
    kernel = app.dotproduct  # tile 1024, par 8, metapipelined: 16 tiles
    r = kernel.simulate(*app.inputs(0), monitor=["parallel0", "pipe0"])
    loads, pipes = r.timeline["parallel0"], r.timeline["pipe0"]
    assert len(loads) == len(pipes) == 16
    for t in range(15):
        load_next, compute = loads[t + 1], pipes[t]
        assert load_next[0] <= compute[0] and compute[1] <= load_next[1], (t, load_next, compute)
    # without metapipelining the same stages never overlap
    r = kernel.with_schedule(metapipeline=False).simulate(*app.inputs(0), monitor=["parallel0", "pipe0"])
    loads, pipes = r.timeline["parallel0"], r.timeline["pipe0"]
    for t in range(15):
        assert loads[t + 1][0] > pipes[t][1]


def test_accumulator_takes_one_update_per_cycle():
    """Spatial issue #73: a par-4 dot product ran at II = 2. Here each pipe run of 64 lanes-
    groups takes iterations + latency + 1 cycles, the latency being a few cycles."""
    n = 256

    @hw.kernel(tile={"i": 256}, par={"i": 4}, metapipeline=False)
    def dot(a: hw.Array[int32, n], b: hw.Array[int32, n]) -> int32:
        return hw.sum(n, lambda i: a[i] * b[i])

    rng = np.random.default_rng(3)
    a, b = rng.integers(-99, 99, n, dtype=np.int32), rng.integers(-99, 99, n, dtype=np.int32)
    dot.verify(a, b)
    r = dot.simulate(a, b, monitor=["pipe0"])
    ((start, end),) = r.timeline["pipe0"]
    pipe = find_unit(r.design.report["controllers"], "pipe0")
    assert pipe["iterations"] == n // 4 and pipe["latency"] <= 12
    assert end - start == n // 4 + pipe["latency"] + 1


def find_unit(tree, name):
    if tree.get("unit") == name:
        return tree
    for child in tree.get("stages", []) + tree.get("parallel", []):
        found = find_unit(child, name)
        if found:
            return found
    return None


@pytest.mark.parametrize("name", ["dotproduct", "sumrows", "outerprod"])
def test_random_dram_latency_changes_cycles_never_results(name):
    app = load_pattern(name)
    kernel = getattr(app, name)
    args = app.inputs(1)
    steady = kernel.verify(*args)
    slight = kernel.verify(*args, dram=hw.DramConfig(jitter=4), seed=7)
    heavy = kernel.verify(*args, dram=hw.DramConfig(jitter=40), seed=8)
    assert steady.cycles < slight.cycles < heavy.cycles


def test_halo_tiles_in_hardware():
    n = 64

    @hw.kernel(tile={"i": 16}, par={"i": 4})
    def smooth(x: hw.Array[int32, n + 2]) -> hw.Array[int32, n]:
        return hw.map(n, lambda i: x[i] + 2 * x[i + 1] + x[i + 2])

    x = np.random.default_rng(0).integers(-1000, 1000, n + 2, dtype=np.int32)
    r = smooth.verify(x)
    np.testing.assert_array_equal(r.outputs, x[:-2] + 2 * x[1:-1] + x[2:])
    assert r.cycles == r.predicted_cycles


def test_accumulator_in_ram_updated_every_cycle():
    """Every lane updates its accumulator element every cycle; the RAM's read latency is
    covered by forwarding the words still being written."""
    rows, cols = 64, 8

    @hw.kernel(tile={"i": 16, "c": 8}, par={"c": 8})
    def colsum(x: hw.Array[int32, rows, cols]) -> hw.Array[int32, cols]:
        return hw.map(cols, lambda c: hw.sum(rows, lambda i: x[i, c]))

    x = np.random.default_rng(5).integers(-1000, 1000, (rows, cols), dtype=np.int32)
    r = colsum.verify(x)
    kinds = {m["holds"]: m["kind"] for m in r.design.report["memories"]}
    assert kinds["the accumulator of a reduction"] == "RAM"
    assert r.cycles == r.predicted_cycles


@pytest.mark.parametrize("groups", [2, 3, 4, 5])
def test_accumulator_element_revisited_within_the_forwarding_window(groups):
    """Each lane comes back to its accumulator element every `groups` cycles, inside and at
    the edge of the window of writes the RAM cannot show yet (read + write latency)."""
    rows, cols = 32, 8 * groups

    @hw.kernel(tile={"i": 16, "c": cols}, par={"c": 8})
    def colsum(x: hw.Array[int32, rows, cols]) -> hw.Array[int32, cols]:
        return hw.map(cols, lambda c: hw.sum(rows, lambda i: x[i, c]))

    x = np.random.default_rng(groups).integers(-1000, 1000, (rows, cols), dtype=np.int32)
    r = colsum.verify(x)
    np.testing.assert_array_equal(r.outputs, x.sum(axis=0, dtype=np.int32))
    assert r.cycles == r.predicted_cycles
