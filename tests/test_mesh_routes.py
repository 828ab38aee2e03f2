"""hw.ppermute over several axes: every (source, destination) pair moves by its displacement,
one axis after another (dimension-ordered routes through the neighbours), all pairs of one
displacement together. Bit-exact with the golden model and JAX on tori and meshes, partial
permutations filling zeros, cycles as predicted."""

import os

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:  # before jax is first imported
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=16").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hwgen as hw  # noqa: E402
from hwgen import int32  # noqa: E402
from hwgen.model import mesh_route_bound  # noqa: E402

RNG = np.random.default_rng(23)


def test_route_bounds_count_every_hop_over_every_link():
    shift = [(i, (i + 1) % 8) for i in range(8)]
    # on a 2x4 torus: 6 blocks go one hop, 2 go two (x and y): 10 hops of 64 words over 32 links
    assert mesh_route_bound(shift, (2, 4), 64) == 20
    # on a 2x4 mesh: the 2 row-crossing blocks go 1 + 3 hops straight: 14 hops over 20 links,
    # and a corner PE takes its block over its 2 links in
    assert mesh_route_bound(shift, (2, 4), 64, wraps=False) == 45
    assert mesh_route_bound([(0, 0)], (2, 2), 64) == 0


def kernel(shape, perm, topology="torus", axes=("x", "y"), m=64):
    mesh = hw.Mesh(shape, ("x", "y"), topology=topology)
    p = int(np.prod(shape))

    @hw.kernel(mesh=mesh, link=hw.LinkConfig(latency=3), tile={"i": 16})
    def k(a: hw.Array[int32, m * p]):
        def body(b):
            return hw.ppermute(hw.map(m, lambda i: b[i] * 7), axes, perm)

        return hw.shard_map(body, mesh=mesh, in_specs=hw.P(("x", "y")), out_specs=hw.P(("x", "y")))(a)

    return k


def wide(n):
    return RNG.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)


def moved(a, perm, shape, m=64):
    """numpy: PE (i, j)'s block times 7 at its destination; the group numbers PE (i, j) i * Y
    + j (in the mesh's axis order, whatever the order of the axes the permute names)."""
    X, Y = shape
    with np.errstate(over="ignore"):
        blocks = (a * 7).reshape(X * Y, m)
    out = np.zeros_like(blocks)
    for s, d in perm:
        out[d] = blocks[s]
    return out.reshape(-1)


pytestmark = pytest.mark.rtl


def test_a_shift_over_both_axes_of_a_torus_routes_x_then_y():
    perm = [(i, (i + 1) % 8) for i in range(8)]
    a = wide(64 * 8)
    sim = kernel((2, 4), perm).verify(a)
    np.testing.assert_array_equal(sim.outputs, moved(a, perm, (2, 4)))
    assert sim.predicted_cycles == sim.cycles
    phases = [(ph["kind"], ph["axis"]) for ph in sim.design.report["collective"]["phases"]]
    # displacement (0, 1): along y; (1, 1): along x, then y (blocks crossing to the next row)
    assert phases == [("permute", "y"), ("permute", "x"), ("permute", "y")]
    assert sim.design.report["link_bound_cycles"] == 20


@pytest.mark.parametrize("topology", ["torus", "mesh"])
def test_a_partial_random_permutation_fills_zeros(topology):
    dest = RNG.permutation(8)
    perm = [(i, int(dest[i])) for i in range(2, 8)]  # PEs dest[0], dest[1] receive nothing
    a = wide(64 * 8)
    sim = kernel((2, 4), perm, topology).verify(a)
    want = moved(a, perm, (2, 4))
    np.testing.assert_array_equal(sim.outputs, want)
    assert not want.reshape(8, 64)[dest[0]].any()
    assert sim.predicted_cycles == sim.cycles


def test_a_permutation_over_y_then_x_numbers_the_group_in_the_mesh_axis_order_as_jax_does():
    jax = pytest.importorskip("jax")
    from jax.sharding import Mesh as JaxMesh
    from jax.sharding import PartitionSpec as JaxP

    dest = RNG.permutation(8)
    perm = [(i, int(dest[i])) for i in range(8)]
    a = wide(64 * 8)
    sim = kernel((2, 4), perm, axes=("y", "x")).simulate(a)
    devices = np.array(jax.devices()[:8]).reshape(2, 4)
    spec = JaxP(("x", "y"))
    f = jax.jit(
        jax.shard_map(
            lambda b: jax.lax.ppermute(b * 7, ("y", "x"), perm),
            mesh=JaxMesh(devices, ("x", "y")),
            in_specs=spec,
            out_specs=spec,
            check_vma=False,
        )
    )
    np.testing.assert_array_equal(sim.outputs, np.asarray(f(a)))
    np.testing.assert_array_equal(sim.outputs, moved(a, perm, (2, 4)))
    assert sim.predicted_cycles == sim.cycles


def test_an_empty_permutation_writes_zeros_everywhere():
    a = wide(64 * 8)
    for axes in ("y", ("x", "y")):
        sim = kernel((2, 4), [], axes=axes).verify(a)
        assert not sim.outputs.any() and sim.predicted_cycles == sim.cycles
        assert [ph["unit"] for ph in sim.design.report["collective"]["phases"]] == ["BlockCopy"]


def test_a_masked_phase_must_say_which_pes_its_receivers_number():
    from hwgen.hw.collective import masked
    from hwgen.hw.copy import CopyPlan

    plan = CopyPlan(64, 4, hw.int32, "a", "b", "x", None, None, receivers=0b0101)
    with pytest.raises(ValueError, match="rx_axes"):
        masked(plan)
    assert masked(CopyPlan(64, 4, hw.int32, "a", "b", "x", None, None, receivers=0b0101, rx_axes=(("x", 4),)))
    assert not masked(CopyPlan(64, 4, hw.int32, "a", "b", "x", None, None))
