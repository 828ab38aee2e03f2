"""The torus tours (hw/collective.py tour_position, engine_ports): an all-reduce over both axes
of a k x k torus as one ring phase of two rings through every PE, on all four links of each.
The tours' shape and wiring are checked in Python; the hardware in Verilator (rtl tests)."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int32
from hwgen.dram import DramConfig
from hwgen.hw.collective import RingPlan, engine_ports, tour_block, tour_position
from hwgen.loops import show
from hwgen.mesh.hardware import _ring_phases
from hwgen.model import phase_cycles

RNG = np.random.default_rng(11)


def tours(k):
    """Each tour's PEs (ca, cb) by position: tour 0 along (x, y), tour 1 along (y, x)."""
    out = []
    for g in range(2):
        at = {}
        for i in range(k):
            for j in range(k):
                ca, cb = (i, j) if g == 0 else (j, i)
                at[tour_position(ca, cb, k)] = (i, j)
        out.append([at[t] for t in range(k * k)])
    return out


@pytest.mark.parametrize("k", range(2, 9))
def test_each_tour_is_a_ring_through_every_pe_and_the_two_share_no_link(k):
    links = []
    for ring in tours(k):
        assert sorted(ring) == [(i, j) for i in range(k) for j in range(k)]
        hops = []
        for t, (i, j) in enumerate(ring):
            ni, nj = ring[(t + 1) % len(ring)]
            step = ((ni - i) % k, (nj - j) % k)
            assert step in ((1, 0), (0, 1)), (k, t, step)  # one link, going +1 along x or y
            hops.append(((i, j), step))
        links.append(set(hops))
    assert not links[0] & links[1]  # every +1 link of the torus carries one tour (each way)
    assert len(links[0] | links[1]) == 2 * k * k


def _neighbour(pe, port, k):
    """The PE a port of `pe` (x, y) links to: `<a>_next_*` is +1 along a, `<a>_prev_*` -1."""
    axis, way, _ = port.rsplit("_", 2)
    d = 1 if way == "next" else -1
    i, j = pe
    return ((i + d) % k, j) if axis == "x" else (i, (j + d) % k)


def _used(ports, pe, k):
    """The one port of `ports` (LinkPorts) an engine uses on PE `pe` of a k x k torus."""
    chosen = [q.name for q in ports if q.diag is None or (((pe[0] + pe[1]) % k == q.diag) == q.on)]
    assert len(chosen) == 1, chosen
    return chosen[0]


def _arrives_on(tx):
    """The port a link sent on `tx` arrives on: `<a>_next_tx` at the next PE's `<a>_prev_rx`."""
    axis, way, _ = tx.rsplit("_", 2)
    return f"{axis}_{'prev' if way == 'next' else 'next'}_rx"


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_every_engine_sends_to_its_next_pe_in_the_tour_and_receives_from_its_previous(k):
    """Way +1 sends to the PE one position on and receives from the one before (on the port
    that PE's link arrives on); way -1 the other way. On every PE the four engines use four
    different links out and four in."""
    plan = RingPlan(16 * k * k * 4, k * k, 16, 64, 8, "add", int32, "a", "b", dirs=2, axes=("x", "y"), tour=True)
    rings = tours(k)
    for i in range(k):
        for j in range(k):
            pe, outs, ins = (i, j), set(), set()
            for h in range(plan.engines):
                ring, way = rings[h // 2], plan.ways[h]
                t = ring.index(pe)
                sends, receives = engine_ports(plan, h)
                tx, rx = _used(sends, pe, k), _used(receives, pe, k)
                assert _neighbour(pe, tx, k) == ring[(t + way) % (k * k)]
                sender = ring[(t - way) % (k * k)]
                assert _neighbour(pe, rx, k) == sender
                assert _arrives_on(_used(sends, sender, k)) == rx
                outs.add(tx)
                ins.add(rx)
            assert len(outs) == 4 and len(ins) == 4


def torus_reduce(op, shape, names, axes, m):
    mesh = hw.Mesh(shape, names, topology="torus")
    P = int(np.prod(shape))

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=6))
    def k(a: hw.Array[int32, m * P]):
        def body(b):
            return getattr(hw, op)(hw.map(m, lambda i: b[i] - 3), axes)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(names), out_specs=hw.P(names))(a)

    return k


def _expected(op, a, shape, names, axes, m):
    """Each PE's result, in the global array's order: op over the PEs that differ on `axes`."""
    with np.errstate(over="ignore"):
        v = (a - np.int32(3)).reshape(*shape, m)
        keep = tuple(names.index(x) for x in axes)
        red = {"psum": lambda x, d: x.sum(d, dtype=np.int32), "pmax": np.max, "pmin": np.min}[op]
        out = red(v, keep)
        for d in sorted(keep):
            out = np.expand_dims(out, d)
    return np.broadcast_to(out, v.shape).reshape(-1)


@pytest.mark.rtl
def test_psum_over_a_4x4_torus_runs_as_one_phase_of_two_tours_faster_than_three_phases():
    m, wide8 = 512, DramConfig(words_per_cycle=8)
    k = torus_reduce("psum", (4, 4), ("x", "y"), ("x", "y"), m)
    a = RNG.integers(-(2**31), 2**31, size=m * 16, dtype=np.int64).astype(np.int32)
    sim = k.verify(a, dram=wide8)
    np.testing.assert_array_equal(sim.outputs, _expected("psum", a, (4, 4), ("x", "y"), ("x", "y"), m))
    assert sim.predicted_cycles == sim.cycles
    (ph,) = sim.design.report["collective"]["phases"]
    assert ph["tours"] and ph["pes"] == 16 and ph["directions"] == 2 and ph["axes"] == ["x", "y"]
    ring = sim.design.plan.rings[0]
    names = ({"a"}, ring.dst, ring.src)
    three = _ring_phases("all_reduce", "add", [("x", "y"), ("y", "x")], m, k.mesh, k.link, int32, names, wide8)
    assert phase_cycles(ring, wide8) < sum(phase_cycles(r, wide8) for r in three)
    assert "all_reduce along x,y (torus tours)" in show(sim.design.program)


@pytest.mark.rtl
def test_tours_on_a_3x3_torus_and_on_two_axes_of_a_2x2x2_torus_with_jittery_dram():
    """An odd torus (the diagonal turns fall on other PEs), pmax; and a psum over two of three
    axes: one pair of tours per z plane, each ring apart. DRAM latency and jitter change the
    timing, never the results."""
    m = 144
    k = torus_reduce("pmax", (3, 3), ("x", "y"), ("y", "x"), m)
    a = RNG.integers(-(2**31), 2**31, size=m * 9, dtype=np.int64).astype(np.int32)
    sim = k.verify(a, dram=DramConfig(words_per_cycle=8))
    np.testing.assert_array_equal(sim.outputs, _expected("pmax", a, (3, 3), ("x", "y"), ("y", "x"), m))
    assert sim.predicted_cycles == sim.cycles
    assert [ph.get("tours") for ph in sim.design.report["collective"]["phases"]] == [True]
    jittery = k.verify(a, dram=DramConfig(words_per_cycle=8, latency=31, jitter=9), seed=5)
    np.testing.assert_array_equal(jittery.outputs, sim.outputs)
    m = 64
    k = torus_reduce("psum", (2, 2, 2), ("x", "y", "z"), ("x", "z"), m)
    a = RNG.integers(-(2**31), 2**31, size=m * 8, dtype=np.int64).astype(np.int32)
    sim = k.verify(a, dram=DramConfig(words_per_cycle=8))
    np.testing.assert_array_equal(sim.outputs, _expected("psum", a, (2, 2, 2), ("x", "y", "z"), ("x", "z"), m))
    assert sim.predicted_cycles == sim.cycles
    assert [ph.get("tours") for ph in sim.design.report["collective"]["phases"]] == [True]


def test_a_tours_chunk_is_the_block_of_the_pe_at_its_position_in_jax_order():
    """tour_block numbers blocks over the plan's axes in their order (the first major), as
    JAX numbers a group over a tuple of axes."""
    for k in (2, 3, 4):
        for axes in (("x", "y"), ("y", "x")):
            plan = RingPlan(
                4 * k**4, k * k, 1, 64, 8, "add", int32, "a", "b", 2, "reduce_scatter", axes=axes, tour=True
            )
            for g, ring in enumerate(tours(k) if axes == ("x", "y") else tours(k)[::-1]):
                for c, (i, j) in enumerate(ring):
                    coord = {"x": i, "y": j}
                    assert tour_block(plan, g, c) == coord[axes[0]] * k + coord[axes[1]]


@pytest.mark.rtl
def test_reduce_scatter_and_all_gather_over_both_axes_run_on_the_tours_in_jax_block_order():
    """A reduce-scatter over (y, x) of a 3x3 torus: PE (i, j) keeps block j * 3 + i of the
    sum; an all-gather over (x, y) of a 4x4 torus with beats of 4 words (each tour one way)."""
    m, shape = 288, (3, 3)
    mesh = hw.Mesh(shape, ("x", "y"), topology="torus")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=5))
    def scatter(a: hw.Array[int32, m * 9]):
        def body(b):
            return hw.psum_scatter(hw.map(m, lambda i: b[i] * 3), ("y", "x"), tiled=True)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=hw.P(("y", "x")))(a)

    a = RNG.integers(-(2**31), 2**31, size=m * 9, dtype=np.int64).astype(np.int32)
    sim = scatter.verify(a, dram=DramConfig(words_per_cycle=8))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, (a * np.int32(3)).reshape(9, m).sum(0, dtype=np.int32))
    assert sim.predicted_cycles == sim.cycles
    assert [ph.get("tours") for ph in sim.design.report["collective"]["phases"]] == [True]

    m, mesh = 32, hw.Mesh((4, 4), ("x", "y"), topology="torus")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=8))
    def gather(a: hw.Array[int32, m * 16]):
        def body(b):
            return hw.all_gather(hw.map(m, lambda i: b[i] + 1), ("x", "y"), tiled=True)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=hw.P())(a)

    a = RNG.integers(-(2**31), 2**31, size=m * 16, dtype=np.int64).astype(np.int32)
    sim = gather.verify(a)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, a + np.int32(1))
    assert sim.predicted_cycles == sim.cycles
    phases = sim.design.report["collective"]["phases"]
    assert [(ph.get("tours"), ph["directions"]) for ph in phases] == [(True, 1)]
