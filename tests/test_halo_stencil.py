"""Spatial partitioning with halo exchange (patterns/mesh/halo_stencil.py) and what it needs:
a hw.concatenate that a mesh body reads (stored in each PE's DRAM first), the four halo
permutes run one after another beside the copy of the block (passes/overlap.py, with
conflicts by the boxes of DRAM arrays that loads and stores cover), copies tiled on their own
(passes/lower.py copy_schedule), and a 1x1 mesh."""

import markers
import numpy as np
import pytest
from test_mesh_patterns import load

import hwgen as hw
from hwgen import int32, ir
from hwgen.loops import Collective, Load, Loop, Parallel, Store, walk
from hwgen.passes.lower import copy_schedule
from hwgen.passes.overlap import _conflict, _uses


def root_levels(kernel) -> list:
    return list(kernel.elaborate().program.root.stages)


def _chain(level):
    """The child of a level that runs its collectives (with what feeds them and reads them)."""
    for c in level.children:
        if isinstance(c, Loop) and not c.counters and any(isinstance(s, Collective) for s in c.stages):
            return c
    return None


def root_entries(levels) -> list:
    """The root's entries before overlap grouped them: levels, their children, and a chain's
    parts (the patterns before and after its collectives)."""
    out = []
    for lv in levels:
        for c in lv.children if isinstance(lv, Parallel) else (lv,):
            chain = _chain(lv) if isinstance(lv, Parallel) else None
            if c is chain:
                for s in c.stages:
                    out += list(s.children) if isinstance(s, Parallel) else [s]
            else:
                out.append(c)
    return out


def test_the_halo_exchange_runs_beside_the_copy_of_the_block():
    """The edges copied out, the four permutes one after another, and the received edges
    stored into the padded block: one chain beside the copy of the block's inside."""
    app, kernel = load("halo_stencil")
    levels = root_levels(kernel)
    beside = [lv for lv in levels if isinstance(lv, Parallel) and _chain(lv) is not None]
    assert len(beside) == 1
    chain = _chain(beside[0])
    before, *colls, after = chain.stages
    assert len(colls) == 4 and all(isinstance(c, Collective) for c in colls)  # above, below, left, right
    assert isinstance(before, Parallel) and len(before.children) == 4  # the four edges, copied out
    assert isinstance(after, Parallel) and len(after.children) == 4  # the received edges, stored
    for part in after.children:
        assert {s.dram.name for s in walk(part) if isinstance(s, Store)} == {"joined0"}
    kids = [c for c in beside[0].children if c is not chain]
    copy = [c for c in kids if any(isinstance(s, Load) and s.dram.name == "a" for s in walk(c))]
    assert len(copy) == 1  # the block's copy into the padded block runs beside them
    assert {s.dram.name for s in walk(copy[0]) if isinstance(s, Store)} == {"joined0"}
    assert isinstance(levels[-1], Loop) and not isinstance(levels[-1], Parallel)  # then the stencil


def test_parts_of_one_concatenation_do_not_conflict_but_a_read_of_their_place_does():
    app, kernel = load("halo_stencil")
    entries = root_entries(root_levels(kernel))
    uses = {e.name: _uses(e) for e in entries}
    writers = [n for n, (r, w) in uses.items() if any(name == ("dram", "joined0") for name, _ in w)]
    readers = [n for n, (r, w) in uses.items() if any(name == ("dram", "joined0") for name, _ in r)]
    assert len(writers) == 9 and len(readers) == 1  # 3x3 parts, and the stencil
    assert not any(_conflict(uses[a], uses[b]) for a in writers for b in writers if a != b)
    assert all(_conflict(uses[w], uses[readers[0]]) for w in writers)
    n, m = app.N // app.PX, app.N // app.PY
    for _, box in uses[readers[0]][0]:
        if box is not None:
            assert all(0 <= lo <= hi < size for (lo, hi), size in zip(box, (n + 2, m + 2)))


def test_a_copy_gets_tiles_and_lanes_of_its_own_unless_the_schedule_tiles_it():
    a = ir.Input("a", int32, (64, 8))
    dims = (ir.Dim("%c0", 64), ir.Dim("%c1", 8))
    copy = ir.Map(dims, ir.Read(a, (ir.Index("%c0"), ir.Index("%c1"))))
    assert copy_schedule(copy, {}) == ({"%c0": 64, "%c1": 8}, {"%c1": 4})
    big = ir.Map(
        (ir.Dim("r", 3000), ir.Dim("c", 6)), ir.Read(ir.Input("b", int32, (3000, 6)), (ir.Index("r"), ir.Index("c")))
    )
    assert copy_schedule(big, {}) == ({"r": 150, "c": 6}, {"c": 2})  # at most 1024 elements a tile
    assert copy_schedule(big, {"r": 4}) == ({}, {})  # the user's schedule wins
    work = ir.Map(dims, ir.Binary("add", ir.Read(a, (ir.Index("%c0"), ir.Index("%c1"))), ir.Const(1, int32), int32))
    assert copy_schedule(work, {}) == ({}, {})  # not a copy


@pytest.mark.rtl
def test_one_pe_pads_with_zeros_and_keeps_the_predicted_cycles():
    app, _ = load("halo_stencil")
    kernel = app.build(1, 1, 16)
    (a,) = app.inputs(2, 16)
    sim = kernel.verify(a)
    np.testing.assert_array_equal(sim.outputs, app.reference(a))
    assert sim.cycles == sim.predicted_cycles
    assert not any(isinstance(c, Collective) for c in walk(sim.design.program.root))


@pytest.mark.rtl
def test_a_body_reads_a_concatenation_of_collective_results_under_jitter():
    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=ring, link=hw.LinkConfig(latency=3), tile={"i": 8})
    def k(a: hw.Array[int32, 64]):
        def body(al):
            nxt = hw.ppermute(al, "x", [(j, (j + 1) % 4) for j in range(4)])
            both = hw.concatenate([al, nxt])
            return hw.map(16, lambda i: both[i] * 3 - both[i + 16])

        return hw.shard_map(body, mesh=ring, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = np.random.default_rng(3).integers(-1000, 1000, 64).astype(np.int32)
    blocks = a.reshape(4, 16)
    want = (blocks * 3 - np.roll(blocks, 1, axis=0)).reshape(-1)
    np.testing.assert_array_equal(k(a), want)
    sim = k.verify(a)
    assert sim.cycles == sim.predicted_cycles
    sim = k.verify(a, dram=hw.DramConfig(latency=13, jitter=6), seed=4)  # results only


RING2 = hw.Mesh((2,), ("x",), topology="ring")


def on_ring2(body, **schedule):
    @hw.kernel(mesh=RING2, **schedule)
    def k(a: hw.Array[int32, 32]):
        return hw.shard_map(body, mesh=RING2, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    return k


@pytest.mark.rtl
def test_a_multifold_reading_a_joined_array_runs_after_its_stores():
    """Review finding: two multifolds of one shape share a loop unless something they read is
    made between them; a joined array is (its stores run between the two)."""

    def body(al):
        twice = hw.multifold(16, hw.zeros((16,), int32), lambda i: (i, al[i] * 2))
        both = hw.concatenate([twice, al])
        return hw.multifold(16, hw.zeros((16,), int32), lambda k: (k, both[k] + both[k + 16]))

    k = on_ring2(body)
    a = np.arange(32, dtype=np.int32) + 1
    np.testing.assert_array_equal(k(a), a * 3)
    sim = k.verify(a)
    assert sim.cycles == sim.predicted_cycles


def test_a_multifold_starting_from_a_concatenation_is_joined_on_a_mesh_and_refused_on_one_pe():
    def body(al):
        start = hw.concatenate([al[8:], al[:8]])
        return hw.multifold(16, start, lambda i: (i, al[i]))

    k = on_ring2(body)
    a = np.arange(32, dtype=np.int32)
    blocks = a.reshape(2, 16)
    np.testing.assert_array_equal(k(a), (np.roll(blocks, 8, axis=1) + blocks).reshape(-1))
    assert "joined0" in {d.name for d in k.elaborate().program.drams}

    @hw.kernel
    def one(a: hw.Array[int32, 16]):
        return hw.multifold(16, hw.concatenate([a[8:], a[:8]]), lambda i: (i, a[i]))  # L:one

    with pytest.raises(hw.HwgenError) as e:
        one.elaborate()
    markers.check_error(
        e.value,
        hw.UnsupportedError,
        "the result of hw.concatenate is read here: on one PE it can only be returned; read its parts instead "
        "(inside a shard_map body on a mesh, each PE stores it first)",
        __file__,
        "one",
    )


@pytest.mark.rtl
def test_a_parameter_named_out_keeps_its_own_array():
    """Review finding: the result took the name 'out' of a parameter and shared its array."""

    @hw.kernel(tile={"i": 4})
    def k(out: hw.Array[int32, 8]):
        return hw.map(8, lambda i: out[7 - i] + 1)

    a = np.arange(8, dtype=np.int32)
    assert [d.name for d in k.elaborate().program.drams] == ["out", "out_"]
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, a[::-1] + 1)


def test_only_copies_join_a_chain_of_collectives():
    """Collective matmul's last partial product reads the last permute's result but is not a
    copy: it stays a level of its own after the ring, not beside the product before it."""
    from hwgen.passes.overlap import _copies

    app, kernel = load("collective_matmul")
    levels = root_levels(kernel)
    for lv in levels:
        chain = _chain(lv) if isinstance(lv, Parallel) else None
        if chain is not None:
            assert all(_copies(s) for s in chain.stages if not isinstance(s, Collective))
    last = levels[-1]
    assert not isinstance(last, Parallel) and not any(isinstance(c, Collective) for c in walk(last))
