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
