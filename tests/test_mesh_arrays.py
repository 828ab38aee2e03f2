"""Mesh hardware for collectives of arrays of any rank, along any dimension, and all-to-alls
over several axes: every collective built moves blocks along dimension 0, which in a row-major
array are runs of words (other dimensions: between local transposes). Bit-exact with JAX
(jax.shard_map on CPU devices) and plain numpy, cycles as predicted."""

import os

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:  # before jax is first imported
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=16").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hwgen as hw  # noqa: E402
from hwgen import int32  # noqa: E402
from hwgen.model import mesh_route_bound  # noqa: E402

RNG = np.random.default_rng(5)


def wide(*shape):
    return RNG.integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32)


def jax_run(fn, mesh, spec, out_spec, *args):
    """`fn` under jax.shard_map on a JAX mesh shaped like `mesh`."""
    jax = pytest.importorskip("jax")
    from jax.sharding import Mesh as JaxMesh
    from jax.sharding import PartitionSpec as JaxP

    devices = np.array(jax.devices()[: mesh.size]).reshape(mesh.axis_sizes)
    jmesh = JaxMesh(devices, mesh.axis_names)
    f = jax.shard_map(fn, mesh=jmesh, in_specs=JaxP(*spec), out_specs=JaxP(*out_spec), check_vma=False)
    return np.asarray(jax.jit(f)(*args))


def test_the_route_bound_of_an_all_to_all_counts_every_block_into_a_pe():
    pairs = [(s, d) for s in range(4) for d in range(4)]
    # 2x2 torus: 16 hops of 64 words over 16 links; 3 blocks into each PE over its 4 links in
    assert mesh_route_bound(pairs, (2, 2), 64) == 64
    # a line of 4 without wraparound: 20 hops of 64 words over its 6 links
    assert mesh_route_bound(pairs, (1, 4), 64, wraps=False) == 214


@pytest.mark.rtl
def test_two_dimensional_blocks_through_three_collectives_equal_jax():
    """(8, 4) blocks on a ring of 4: psum, all_gather (tiled, to (32, 4)), psum_scatter back."""
    mesh = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=5))
    def rows(a: hw.Array[int32, 32, 4]):
        def body(b):
            s = hw.psum(hw.map((8, 4), lambda i, j: b[i, j] * 3), "x")
            g = hw.all_gather(s, "x", tiled=True)
            r = hw.psum_scatter(g, "x", tiled=True)
            return hw.map((8, 4), lambda u, v: r[u, v] - b[u, v])

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = wide(32, 4)

    def jax_body(b):
        from jax import lax

        g = lax.all_gather(lax.psum(b * 3, "x"), "x", tiled=True)
        return lax.psum_scatter(g, "x", tiled=True) - b

    want = jax_run(jax_body, mesh, ("x",), ("x",), a)
    with np.errstate(over="ignore"):  # numpy: every PE's block of g is the sum, scattered back times 4
        total = (a * 3).reshape(4, 8, 4).sum(axis=0, dtype=np.int32)
        np.testing.assert_array_equal(want, (np.tile(total * 4, (4, 1)) - a))
    sim = rows.verify(a)
    assert sim.outputs.shape == (32, 4)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
    assert [c["kind"] for c in sim.design.report["collectives"]] == ["all_reduce", "all_gather", "reduce_scatter"]


@pytest.mark.rtl
def test_an_all_to_all_over_y_then_x_of_a_mesh_equals_jax():
    """Rows split over (x, y) of a 2x4 mesh; the all-to-all's group over ("y", "x") numbers
    PE (x, y) as 2y + x, as JAX does; each PE sends (2, 4) of its (16, 4) rows to each."""
    mesh = hw.Mesh((2, 4), ("x", "y"), topology="mesh")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=3))
    def swap(a: hw.Array[int32, 128, 4]):
        def body(b):
            return hw.all_to_all(hw.map((16, 4), lambda i, j: b[i, j] ^ 0x5A), ("y", "x"), 0, 0, tiled=True)

        spec = hw.P(("x", "y"))
        return hw.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)(a)

    a = wide(128, 4)

    def jax_body(b):
        from jax import lax

        return lax.all_to_all(b ^ 0x5A, ("y", "x"), 0, 0, tiled=True)

    want = jax_run(jax_body, mesh, (("x", "y"),), (("x", "y"),), a)
    sim = swap.verify(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
    phases = sim.design.report["collective"]["phases"]
    assert phases[0]["unit"] == "BlockCopy" and {ph["axis"] for ph in phases[1:]} == {"x", "y"}


OTHER_DIMS = {  # a collective along a dimension other than 0: hwgen's body, JAX's, the result's spec
    "all_gather axis 1, tiled": (
        lambda b: hw.all_gather(b * 3, "x", axis=1, tiled=True),
        lambda lax, b: lax.all_gather(b * 3, "x", axis=1, tiled=True),
    ),
    "all_gather axis 1": (
        lambda b: hw.all_gather(b + 1, "x", axis=1),
        lambda lax, b: lax.all_gather(b + 1, "x", axis=1),
    ),
    "psum_scatter dimension 1, tiled": (
        lambda b: hw.psum_scatter(b * 5, "x", scatter_dimension=1, tiled=True),
        lambda lax, b: lax.psum_scatter(b * 5, "x", scatter_dimension=1, tiled=True),
    ),
    "psum_scatter dimension 1": (
        lambda b: hw.psum_scatter(hw.map((4, 4, 2), lambda i, j, q: b[i, j * 2 + q]), "x", scatter_dimension=1),
        lambda lax, b: lax.psum_scatter(b.reshape(4, 4, 2), "x", scatter_dimension=1),
    ),
    "all_to_all along axis 1": (
        lambda b: hw.all_to_all(b - 7, "x", 1, 1, tiled=True),
        lambda lax, b: lax.all_to_all(b - 7, "x", 1, 1, tiled=True),
    ),
    "all_to_all from axis 0 to 1": (
        lambda b: hw.all_to_all(b - 7, "x", 0, 1, tiled=True),
        lambda lax, b: lax.all_to_all(b - 7, "x", 0, 1, tiled=True),
    ),
    "all_to_all from axis 1 to 0, then a map": (
        lambda b: _twice(hw.all_to_all(b * 3, "x", 1, 0, tiled=True)),
        lambda lax, b: lax.all_to_all(b * 3, "x", 1, 0, tiled=True) * 2 + 1,
    ),
    "all_to_all from axis 0 to 1, untiled": (
        lambda b: hw.all_to_all(b + 1, "x", 0, 1),
        lambda lax, b: lax.all_to_all(b + 1, "x", 0, 1),
    ),
}


def _twice(y):
    return hw.map(y.shape, lambda i, j: y[i, j] * 2 + 1)


@pytest.mark.rtl
@pytest.mark.parametrize("case", sorted(OTHER_DIMS))
def test_collectives_along_other_dimensions_equal_jax(case):
    """Built as the same collective along dimension 0 between local transposes (mesh/dim0.py)."""
    body, jax_body = OTHER_DIMS[case]
    mesh = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=4))
    def k(a: hw.Array[int32, 16, 8]):
        return hw.shard_map(body, mesh=mesh, in_specs=hw.P("x"), out_specs=hw.P("x"))(a)

    a = wide(16, 8)

    def jax_fn(b):
        from jax import lax

        return jax_body(lax, b)

    want = jax_run(jax_fn, mesh, ("x",), ("x",), a)
    sim = k.verify(a)
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles


@pytest.mark.rtl
def test_a_sharded_matmul_needs_no_collective(tmp_path):
    """Rows of a over x, columns of b over y: each PE computes its block of a @ b alone. The
    mesh has no links then, and no wire modules."""
    from hwgen_sim import runner

    mesh = hw.Mesh((2, 2), ("x", "y"))
    M, K, N = 32, 16, 32

    @hw.kernel(mesh=mesh, tile={"i": 16, "j": 16, "k": 16}, par={"j": 4})
    def mm(a: hw.Array[int32, M, K], b: hw.Array[int32, K, N]):
        def body(al, bl):
            return hw.map((M // 2, N // 2), lambda i, j: hw.sum(K, lambda k: al[i, k] * bl[k, j]))

        specs = (hw.P("x", None), hw.P(None, "y"))
        return hw.shard_map(body, mesh=mesh, in_specs=specs, out_specs=hw.P("x", "y"))(a, b)

    a, b = wide(M, K), wide(K, N)
    sim = mm.verify(a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(sim.outputs, a @ b)
    assert sim.cycles == sim.predicted_cycles
    design = mm.build(out_dir=tmp_path)
    assert design.report["collectives"] == [] and "mm_wire" not in design.verilog
    warnings = runner.lint(design.paths["verilog"], design.paths["waivers"])
    assert "%Warning" not in warnings and "%Error" not in warnings, warnings


@pytest.mark.rtl
def test_out_specs_may_split_a_later_dimension():
    """A stacked all-gather over y, (4, 8) on each PE, joined along dimension 1 over x."""
    mesh = hw.Mesh((2, 4), ("x", "y"))

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=2))
    def stack(a: hw.Array[int32, 64]):
        def body(b):
            return hw.all_gather(hw.map(8, lambda i: b[i] + 1), "y")

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=hw.P(None, "x"))(a)

    a = wide(64)
    sim = stack.verify(a)
    assert sim.outputs.shape == (4, 16) and sim.cycles == sim.predicted_cycles
    with np.errstate(over="ignore"):
        blocks = (a + 1).reshape(2, 4, 8)  # (x, y, words)
    np.testing.assert_array_equal(sim.outputs, np.concatenate([blocks[0], blocks[1]], axis=1))
