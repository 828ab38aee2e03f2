"""Meshes without wraparound (topology="mesh"): each axis' ring is a one-way zigzag through
its PEs whose hops span two links (Mesh.ring_order, Mesh.hop_latency). The collectives on it
are bit-exact with the golden model and with JAX, cycles as predicted, and the mesh top uses
every link of the line once."""

import os
import re

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:  # before jax is first imported
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=16").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hwgen as hw  # noqa: E402
from hwgen import int32  # noqa: E402
from hwgen.dram import DramConfig  # noqa: E402
from hwgen.model import mesh_link_bound  # noqa: E402

RNG = np.random.default_rng(11)


def wide(n):
    return RNG.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)


def _links_of_hops(order):
    """The directed links (c, c +- 1) each hop of the ring in `order` passes, in order."""
    out = []
    for r, c in enumerate(order):
        d = order[(r + 1) % len(order)]
        step = 1 if d > c else -1
        out += [(x, x + step) for x in range(c, d, step)]
    return out


@pytest.mark.parametrize("q", [2, 3, 4, 5, 8])
def test_the_zigzag_ring_uses_every_link_of_a_line_once(q):
    mesh = hw.Mesh((q,), ("x",), topology="mesh")
    order = mesh.ring_order("x")
    assert sorted(order) == list(range(q)) and order[0] == 0
    links = _links_of_hops(order)
    line = [(c, c + 1) for c in range(q - 1)] + [(c + 1, c) for c in range(q - 1)]
    assert sorted(links) == sorted(line)  # every directed link once, none twice
    assert all(abs(order[(r + 1) % q] - c) <= 2 for r, c in enumerate(order))  # hops of 1 or 2 links
    assert mesh.hop_latency("x", 8) == (8 if q == 2 else 17)
    torus = hw.Mesh((q,), ("x",), topology="torus")
    assert torus.ring_order("x") == tuple(range(q)) and torus.hop_latency("x", 8) == 8


def test_mesh_link_bounds_without_wraparound():
    # a corner PE has one link in per axis: twice the torus' all-reduce bound
    assert mesh_link_bound("all_reduce", 1024, 4, 1, wraps=False) == 1536
    assert mesh_link_bound("all_reduce", 1024, 4, 1) == 768
    assert mesh_link_bound("all_reduce", 4096, 16, 2, wraps=False) == 3840
    # a shift by one along a line of 4: the block from PE 3 to PE 0 crosses every left link
    shift = [(s, (s + 1) % 4) for s in range(4)]
    assert mesh_link_bound("permute", 256, 4, 1, 1, shift, wraps=False) == 64
    a2a = [(s, d) for s in range(4) for d in range(4)]
    assert mesh_link_bound("all_to_all", 256, 4, 1, 0, a2a, wraps=False) == 4 * 64  # the middle cut


def line_kernel(kind, q, m, latency):
    mesh = hw.Mesh((q,), ("x",), topology="mesh")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency), tile={"i": 16})
    def k(a: hw.Array[int32, m * q]):
        def body(b):
            v = hw.map(m, lambda i: b[i] * 3 + 1)
            if kind == "psum_scatter":
                return hw.psum_scatter(v, "x", tiled=True)
            if kind == "all_gather":
                return hw.all_gather(v, "x", tiled=True)
            if kind == "ppermute":
                return hw.ppermute(v, "x", [(s, (s + 1) % q) for s in range(q)])
            if kind == "all_to_all":
                return hw.all_to_all(v, "x", 0, 0, tiled=True)
            return getattr(hw, kind)(v, "x")

        out = hw.P() if kind in ("psum", "pmax", "all_gather") else hw.P("x")
        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=out)(a)

    return k


pytestmark = pytest.mark.rtl


@pytest.mark.parametrize(
    "kind, q, m, latency",
    [
        ("psum", 4, 64, 3),
        ("pmax", 3, 96, 8),
        ("psum_scatter", 5, 80, 2),
        ("all_gather", 4, 32, 8),
        ("ppermute", 4, 64, 3),
        ("all_to_all", 3, 48, 1),
    ],
)
def test_collectives_on_a_line_bit_exact_and_cycles_as_predicted(kind, q, m, latency):
    k = line_kernel(kind, q, m, latency)
    a = wide(m * q)
    sim = k.verify(a)  # the golden model, bit for bit
    assert sim.predicted_cycles == sim.cycles
    phases = [ph for c in sim.design.report["collectives"] for ph in c["phases"]]
    assert all(ph.get("directions", 1) == 1 for ph in phases)  # one way round the zigzag
    with np.errstate(over="ignore"):
        v = (a * 3 + 1).reshape(q, m)
    want = {
        "psum": lambda: v.sum(0, dtype=np.int32),
        "pmax": lambda: v.max(0),
        "psum_scatter": lambda: v.sum(0, dtype=np.int32),
        "all_gather": lambda: v.reshape(-1),
        "ppermute": lambda: np.roll(v, 1, axis=0).reshape(-1),
        "all_to_all": lambda: v.reshape(q, q, m // q).transpose(1, 0, 2).reshape(-1),
    }[kind]()
    np.testing.assert_array_equal(sim.outputs, want)


def grid_kernel(kind, shape, m, latency):
    mesh = hw.Mesh(shape, ("x", "y"), topology="mesh")
    p = int(np.prod(shape))

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=latency), tile={"i": 16})
    def k(a: hw.Array[int32, m * p]):
        def body(b):
            v = hw.map(m, lambda i: b[i] - 9)
            if kind == "psum_scatter":
                return hw.psum_scatter(v, ("x", "y"), tiled=True)
            return getattr(hw, kind)(v, ("x", "y"))

        out = hw.P(("x", "y")) if kind == "psum_scatter" else hw.P()
        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=out)(a)

    return k


def test_psum_over_both_axes_of_a_2x4_mesh_and_both_orders_at_once_on_3x3():
    a = wide(64 * 8)
    with np.errstate(over="ignore"):
        want = (a - 9).reshape(8, 64).sum(0, dtype=np.int32)
    sim = grid_kernel("psum", (2, 4), 64, 2).verify(a)
    assert sim.predicted_cycles == sim.cycles
    np.testing.assert_array_equal(sim.outputs, want)
    report = sim.design.report
    bounds = ("link_bound_cycles", "compute_bound_cycles", "memory_bound_cycles")
    assert report["link_bound_cycles"] == 56 and sim.roofline_cycles == max(report[b] for b in bounds)
    b = wide(144 * 9)
    sim = grid_kernel("pmin", (3, 3), 144, 3).verify(b, dram=DramConfig(words_per_cycle=8))
    assert sim.predicted_cycles == sim.cycles
    np.testing.assert_array_equal(sim.outputs, (b - 9).reshape(9, 144).min(0))
    phases = sim.design.report["collective"]["phases"]
    assert [ph.get("axes") for ph in phases] == [["x", "y"], ["y", "x"], ["x", "y"]]  # both orders
    jittery = grid_kernel("pmin", (3, 3), 144, 3).verify(b, dram=DramConfig(words_per_cycle=8, jitter=7), seed=2)
    np.testing.assert_array_equal(jittery.outputs, (b - 9).reshape(9, 144).min(0))


def test_the_mesh_top_wires_each_hop_through_its_two_links():
    design = line_kernel("psum", 4, 64, 3).elaborate()
    v = design.verilog
    assert "module psum_wire2" not in v  # the kernel is named k
    assert "module k_wire2" in v and "module k_wire " not in v  # every hop is two links long
    # PE c's x_next_tx feeds the x_prev_rx of the PE after it in the zigzag 0, 2, 3, 1
    feeds = {}
    for pe, body in re.findall(r"k_pe pe(\d) \((.*?)\);", v, re.S):
        src = re.search(r"\.x_prev_rx__valid\(x_next_tx(\d)_valid_rx\)", body)
        feeds[int(src.group(1))] = int(pe)
    assert feeds == {0: 2, 2: 3, 3: 1, 1: 0}
    assert "x_prev_tx" not in v and "x_next_rx" not in v  # one way round


def test_scatter_and_gather_over_both_axes_of_a_3x3_mesh_run_both_orders_on_zigzag_rings():
    """Spread arrays (collective.spread_addr) on zigzag rings (0, 2, 1): a group's chunk at ring
    position c holds the blocks of coordinate order[c]."""
    wide8 = DramConfig(words_per_cycle=8)
    a = wide(288 * 9)
    with np.errstate(over="ignore"):
        total = (a - 9).reshape(9, 288).sum(0, dtype=np.int32)
    sim = grid_kernel("psum_scatter", (3, 3), 288, 2).verify(a, dram=wide8)
    np.testing.assert_array_equal(sim.outputs, total)
    assert sim.predicted_cycles == sim.cycles
    assert [ph.get("axes") for ph in sim.design.report["collective"]["phases"]] == [["x", "y"], ["y", "x"]]
    b = wide(32 * 9)
    sim = grid_kernel("all_gather", (3, 3), 32, 2).verify(b, dram=wide8)
    np.testing.assert_array_equal(sim.outputs, (b - 9).reshape(9, 32))
    assert sim.predicted_cycles == sim.cycles
    assert [ph.get("axes") for ph in sim.design.report["collective"]["phases"]] == [["y", "x"], ["x", "y"]]


def test_scatter_over_both_axes_of_a_4x4_mesh_numbers_chunks_by_coordinate():
    """The zigzag (0, 2, 3, 1) is not its own inverse: a chunk at ring position c must hold the
    blocks of coordinate order[c], not of the position of coordinate c."""
    a = wide(128 * 16)
    with np.errstate(over="ignore"):
        total = (a - 9).reshape(16, 128).sum(0, dtype=np.int32)
    sim = grid_kernel("psum_scatter", (4, 4), 128, 2).verify(a)
    np.testing.assert_array_equal(sim.outputs, total)
    assert sim.predicted_cycles == sim.cycles
    assert [ph.get("axes") for ph in sim.design.report["collective"]["phases"]] == [["x", "y"], ["y", "x"]]


def test_hardware_on_a_mesh_equals_jax():
    jax = pytest.importorskip("jax")
    from jax.sharding import Mesh as JaxMesh
    from jax.sharding import PartitionSpec as JaxP

    k = grid_kernel("psum_scatter", (2, 4), 64, 8)
    a = wide(64 * 8)
    devices = np.array(jax.devices()[:8]).reshape(2, 4)
    body = lambda b: jax.lax.psum_scatter(b - 9, ("x", "y"), tiled=True)  # noqa: E731
    spec = JaxP(("x", "y"))
    f = jax.jit(jax.shard_map(body, mesh=JaxMesh(devices, ("x", "y")), in_specs=spec, out_specs=spec, check_vma=False))
    want = np.asarray(f(a))
    sim = k.simulate(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.predicted_cycles == sim.cycles
