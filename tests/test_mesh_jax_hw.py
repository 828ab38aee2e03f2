"""Mesh hardware against JAX directly: each app of patterns/mesh/ runs in Verilator and, as the
same body written with jax.lax, under jax.shard_map on CPU devices; the results are equal bit
for bit (the golden model in between is checked against JAX in test_mesh_jax.py)."""

import os

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:  # before jax is first imported
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=16").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_mesh_patterns import load  # noqa: E402

jax = pytest.importorskip("jax")
from jax.sharding import Mesh as JaxMesh  # noqa: E402
from jax.sharding import PartitionSpec as JaxP  # noqa: E402

pytestmark = pytest.mark.rtl


def jax_body(name, app):
    lax = jax.lax
    return {
        "allreduce": lambda b: lax.psum(b * 3 + 1, "x"),
        "reduce_scatter": lambda b: lax.psum_scatter(b - 5, ("x", "y"), tiled=True),
        "all_gather": lambda b: lax.all_gather(b * b, "x", tiled=True),
        "ppermute": lambda b: lax.ppermute(b + 100, "x", app.PERM),
        "all_to_all": lambda b: lax.all_to_all(b ^ 0x55, "x", 0, 0, tiled=True),
    }[name]


@pytest.mark.parametrize("name", ["allreduce", "reduce_scatter", "all_gather", "ppermute", "all_to_all"])
def test_hardware_equals_jax(name):
    app, kernel = load(name)
    mesh = app.mesh
    devices = np.array(jax.devices()[: mesh.size]).reshape(mesh.axis_sizes)
    jmesh = JaxMesh(devices, mesh.axis_names)
    names = tuple(mesh.axis_names)
    spec = JaxP(names if len(names) > 1 else names[0])
    out = JaxP() if name in ("allreduce", "all_gather") else spec
    (a,) = app.inputs(3)
    f = jax.jit(jax.shard_map(jax_body(name, app), mesh=jmesh, in_specs=spec, out_specs=out, check_vma=False))
    want = np.asarray(f(a))
    sim = kernel.simulate(a)
    assert sim.outputs.dtype == want.dtype
    np.testing.assert_array_equal(sim.outputs, want)


def test_collective_matmul_equals_jax():
    """patterns/mesh/collective_matmul.py against the same ring of permutes and partial
    matmuls written with jax.lax.ppermute, jnp.concatenate and jnp.roll under jax.shard_map."""
    jnp = pytest.importorskip("jax.numpy")
    app, kernel = load("collective_matmul")
    jmesh = JaxMesh(np.array(jax.devices()[: app.P]), ("x",))

    def body(al, bl):
        chunk, parts = al, []
        for s in range(app.P):
            parts.append(chunk @ bl)
            if s + 1 < app.P:
                chunk = jax.lax.ppermute(chunk, "x", app.TO_PREVIOUS)
        return jnp.roll(jnp.concatenate(parts), jax.lax.axis_index("x") * app.M, axis=0)

    specs = {"in_specs": (JaxP("x", None), JaxP(None, "x")), "out_specs": JaxP(None, "x")}
    f = jax.jit(jax.shard_map(body, mesh=jmesh, check_vma=False, **specs))
    a, b = app.inputs(4)
    want = np.asarray(f(a, b))
    sim = kernel.simulate(a, b)
    assert sim.outputs.dtype == want.dtype
    np.testing.assert_array_equal(sim.outputs, want)


def test_halo_stencil_equals_jax():
    """patterns/mesh/halo_stencil.py on its 2x2 torus against the same halo exchange written
    with jax.lax.ppermute and jnp.concatenate under jax.shard_map."""
    jnp = pytest.importorskip("jax.numpy")
    app, kernel = load("halo_stencil")
    jmesh = JaxMesh(np.array(jax.devices()[: app.PX * app.PY]).reshape(app.PX, app.PY), ("x", "y"))
    down = [(k, k + 1) for k in range(app.PX - 1)]  # from the PE before, along x
    up = [(k + 1, k) for k in range(app.PX - 1)]
    right_down = [(k, k + 1) for k in range(app.PY - 1)]  # along y
    right_up = [(k + 1, k) for k in range(app.PY - 1)]

    def body(block):
        above = jax.lax.ppermute(block[-1:, :], "x", down)
        below = jax.lax.ppermute(block[:1, :], "x", up)
        left = jax.lax.ppermute(block[:, -1:], "y", right_down)
        right = jax.lax.ppermute(block[:, :1], "y", right_up)
        corner = jnp.zeros((1, 1), block.dtype)
        p = jnp.concatenate(
            [
                jnp.concatenate([corner, above, corner], axis=1),
                jnp.concatenate([left, block, right], axis=1),
                jnp.concatenate([corner, below, corner], axis=1),
            ]
        )
        return 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]

    spec = JaxP("x", "y")
    f = jax.jit(jax.shard_map(body, mesh=jmesh, in_specs=spec, out_specs=spec, check_vma=False))
    (a,) = app.inputs(5)
    want = np.asarray(f(a))
    sim = kernel.simulate(a)
    assert sim.outputs.dtype == want.dtype
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles


def test_a_global_view_matmul_equals_jax_under_the_same_shardings():
    """patterns/mesh/sharded_gemm.py, partitioned by hwgen, against jax.jit with the same
    in_shardings and out_shardings (XLA's SPMD partitioner) on 4 CPU devices."""
    from jax.sharding import NamedSharding

    app, kernel = load("sharded_gemm")
    devices = np.array(jax.devices()[:4]).reshape(2, 2)
    jmesh = JaxMesh(devices, ("x", "y"))
    ins = (NamedSharding(jmesh, JaxP(None, ("x", "y"))), NamedSharding(jmesh, JaxP(("x", "y"), None)))
    f = jax.jit(lambda a, b: a @ b, in_shardings=ins, out_shardings=NamedSharding(jmesh, JaxP(("y", "x"), None)))
    a, b = app.inputs(2)
    want = np.asarray(f(a, b))
    for k in (kernel, app.rows_by_columns):
        sim = k.simulate(a, b)
        np.testing.assert_array_equal(sim.outputs, want)
        assert sim.cycles == sim.predicted_cycles


def test_a_partitioned_collective_matmul_equals_jax():
    """An all-gather feeding a matmul, partitioned by hwgen into collective matmul (the cycle
    model's choice), against jax.jit(a @ b) with the same shardings on 4 CPU devices."""
    import hwgen as hw
    from hwgen import int32

    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(
        mesh=ring,
        in_shardings=(hw.P("x", None), hw.P(None, "x")),
        out_shardings=hw.P(None, "x"),
        tile={"@i": 16, "@j": 16, "@k": 16},
        par={"@j": 16},
    )
    def mm(a: hw.Array[int32, 64, 32], b: hw.Array[int32, 32, 128]):
        return a @ b

    from jax.sharding import NamedSharding

    jmesh = JaxMesh(np.array(jax.devices()[:4]), ("x",))
    ins = (NamedSharding(jmesh, JaxP("x", None)), NamedSharding(jmesh, JaxP(None, "x")))
    f = jax.jit(lambda a, b: a @ b, in_shardings=ins, out_shardings=NamedSharding(jmesh, JaxP(None, "x")))
    rng = np.random.default_rng(5)
    a = rng.integers(-1000, 1000, (64, 32)).astype(np.int32)
    b = rng.integers(-1000, 1000, (32, 128)).astype(np.int32)
    sim = mm.simulate(a, b)
    assert sim.design.report["collective_matmul"].startswith("collective matmul: ")
    np.testing.assert_array_equal(sim.outputs, np.asarray(f(a, b)))


def test_operands_placed_by_other_splits_are_moved_by_all_to_alls_as_jax_does():
    """Operands split along different dimensions (a's columns, b's rows over x): hwgen moves
    one of them by an all-to-all (GSPMD's resharding) and the result equals jax.jit under the
    same in_shardings, bit for bit."""
    from jax.sharding import NamedSharding

    import hwgen as hw
    from hwgen import int32

    ring = hw.Mesh((4,), ("x",), topology="ring")

    @hw.kernel(mesh=ring, in_shardings=(hw.P(None, "x"), hw.P("x", None)), tile={"i": 4, "r": 4})
    def mixed(a: hw.Array[int32, 16, 32], b: hw.Array[int32, 16, 32]):
        c = hw.map((16, 32), lambda i, j: a[i, j] * 3 - 7)
        return hw.map((16, 32), lambda r, s: (c[r, s] ^ b[r, s]) + a[r, s])

    jmesh = JaxMesh(np.array(jax.devices()[:4]), ("x",))
    ins = (NamedSharding(jmesh, JaxP(None, "x")), NamedSharding(jmesh, JaxP("x", None)))
    f = jax.jit(lambda a, b: ((a * 3 - 7) ^ b) + a, in_shardings=ins)
    rng = np.random.default_rng(7)
    a = rng.integers(-(2**31), 2**31, (16, 32), dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, (16, 32), dtype=np.int64).astype(np.int32)
    sim = mixed.simulate(a, b)
    assert "all_to_all" in [c["kind"] for c in sim.design.report["collectives"]]
    assert sim.design.report["in_specs"] == {"a": "P(None, 'x')", "b": "P('x')"}
    np.testing.assert_array_equal(sim.outputs, np.asarray(f(a, b)))
    assert sim.cycles == sim.predicted_cycles


@pytest.mark.parametrize(
    "shape, first, second, moved",
    [
        ((2, 2), "x", "y", ["permute"]),
        ((2, 2), ("x", "y"), ("y", "x"), ["permute"]),
        ((2, 4), "x", "y", ["all_gather"]),
        ((2, 4), "y", "x", ["all_gather"]),
        ((2, 4), "y", ("x", "y"), ["all_gather"]),
        ((2, 4), ("x", "y"), "x", []),  # b's rows over x read over (x, y): each PE's rows of its block
    ],
)
def test_operands_split_by_other_axes_are_moved_as_jax_does(shape, first, second, moved):
    """a's rows split over `first`, b's over `second`. Into as many blocks (a 2x2 torus):
    hwgen moves one of them by a permute over both axes (each PE takes the block it needs
    from the PE whose coordinates swap its own). Into another number of blocks (a 2x4
    torus): it all-gathers b's rows and each PE reads its rows of the gathered array in
    place (GSPMD's all-gather and dynamic slice). The result equals jax.jit's under the same
    in_shardings."""
    from jax.sharding import NamedSharding

    import hwgen as hw
    from hwgen import int32

    torus = hw.Mesh(shape, ("x", "y"))
    cols = 16 if shape == (2, 2) else 8

    @hw.kernel(mesh=torus, in_shardings=(hw.P(first, None), hw.P(second, None)), tile={"i": 2, "r": 2})
    def mixed(a: hw.Array[int32, 16, cols], b: hw.Array[int32, 16, cols]):
        c = hw.map((16, cols), lambda i, j: a[i, j] * 3)
        return hw.map((16, cols), lambda r, s: c[r, s] - b[r, s])

    jmesh = JaxMesh(np.array(jax.devices()[: torus.size]).reshape(shape), ("x", "y"))
    ins = (NamedSharding(jmesh, JaxP(first, None)), NamedSharding(jmesh, JaxP(second, None)))
    f = jax.jit(lambda a, b: a * 3 - b, in_shardings=ins)
    rng = np.random.default_rng(8)
    a = rng.integers(-(2**31), 2**31, (16, cols), dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, (16, cols), dtype=np.int64).astype(np.int32)
    sim = mixed.simulate(a, b)
    assert [c["kind"] for c in sim.design.report["collectives"]] == moved
    np.testing.assert_array_equal(sim.outputs, np.asarray(f(a, b)))
    assert sim.cycles == sim.predicted_cycles


@pytest.mark.parametrize("shape", [(2, 2), (4, 4)])
def test_blocks_split_along_both_dimensions_by_swapped_axes_move_by_one_permute(shape):
    """b split as P('y', 'x') is read by a map computed as P('x', 'y') (a's split), and the
    result is wanted as P('y', 'x'): both dimensions change their axes, into as many blocks
    each, so one permute over both axes moves the blocks one way (PE (i, j) takes the block
    of PE (j, i)). Equal to jax.jit under the same shardings."""
    from jax.sharding import NamedSharding

    import hwgen as hw
    from hwgen import int32

    torus = hw.Mesh(shape, ("x", "y"))
    xy, yx = hw.P("x", "y"), hw.P("y", "x")

    @hw.kernel(mesh=torus, in_shardings=(xy, yx), out_shardings=yx, tile={"i": 2, "j": 4})
    def swap(a: hw.Array[int32, 16, 16], b: hw.Array[int32, 16, 16]):
        return hw.map((16, 16), lambda i, j: a[i, j] * 5 - b[i, j])

    jmesh = JaxMesh(np.array(jax.devices()[: torus.size]).reshape(shape), ("x", "y"))
    jxy, jyx = NamedSharding(jmesh, JaxP("x", "y")), NamedSharding(jmesh, JaxP("y", "x"))
    f = jax.jit(lambda a, b: a * 5 - b, in_shardings=(jxy, jyx), out_shardings=jyx)
    rng = np.random.default_rng(9)
    a = rng.integers(-(2**31), 2**31, (16, 16), dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, (16, 16), dtype=np.int64).astype(np.int32)
    sim = swap.simulate(a, b)
    kinds = [(c["kind"], c["axes"]) for c in sim.design.report["collectives"]]
    assert kinds == [("permute", ["x", "y"])]  # a read as computed, b moved (or the result)
    np.testing.assert_array_equal(sim.outputs, np.asarray(f(a, b)))
    np.testing.assert_array_equal(sim.outputs, swap(a, b))
    assert sim.cycles == sim.predicted_cycles


def test_pipeline_mlp_equals_a_jax_spmd_pipeline():
    """patterns/mesh/pipeline_mlp.py against GPipe written in JAX: under jax.shard_map each
    device holds its stage's layers, and for M + K - 1 steps computes its stage on what the
    previous device sent (the first device: micro-batch t) and ppermutes the result on."""
    jnp = pytest.importorskip("jax.numpy")
    app, kernel = load("pipeline_mlp")
    K, M = app.STAGES, app.MICROBATCHES
    jmesh = JaxMesh(np.array(jax.devices()[:K]), ("stage",))
    rows = app.BATCH // M

    def stage_fn(w, xs):  # w: this device's layers; xs: every micro-batch
        me = jax.lax.axis_index("stage")
        state = jnp.zeros((rows, app.WIDTH), jnp.int8)
        outs = jnp.zeros((M, rows, app.WIDTH), jnp.int8)
        for t in range(M + K - 1):
            h = jnp.where(me == 0, xs[min(t, M - 1)], state)
            for layer in w:
                acc = jnp.matmul(h.astype(jnp.int32), layer.astype(jnp.int32))
                h = jnp.clip(acc >> app.SHIFT, 0, 127).astype(jnp.int8)
            if t >= K - 1:
                outs = outs.at[t - K + 1].set(h)
            state = jax.lax.ppermute(h, "stage", [(k, k + 1) for k in range(K - 1)])
        return outs[None]

    f = jax.jit(
        jax.shard_map(stage_fn, mesh=jmesh, in_specs=(JaxP("stage"), JaxP()), out_specs=JaxP("stage"), check_vma=False)
    )
    x, w = app.inputs(6)
    want = np.asarray(f(w, x.reshape(M, rows, app.WIDTH)))[-1].reshape(app.BATCH, app.WIDTH)
    assert want.any()
    sim = kernel.simulate(x, w)
    assert sim.outputs.dtype == want.dtype
    np.testing.assert_array_equal(sim.outputs, want)
    assert sim.cycles == sim.predicted_cycles
