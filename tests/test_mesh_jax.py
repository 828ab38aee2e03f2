"""The mesh golden model against JAX (the optional `jax` extra) bit for bit: every collective
and argument form runs through hwgen's kernel(*arrays) and through jax.shard_map(...,
check_vma=False) under jax.jit on 16 CPU devices.

A case is one body written once against `ops`, which is `hwgen` or `jax.lax` (the collectives
have the same names and arguments in both)."""

import os

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:  # before jax is first imported
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=16").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax = pytest.importorskip("jax")
from jax.sharding import Mesh as JaxMesh  # noqa: E402
from jax.sharding import PartitionSpec as JaxP

import hwgen as hw  # noqa: E402

MESHES = {
    "2x4": ((2, 4), ("x", "y")),
    "4x4": ((4, 4), ("x", "y")),
    "ring2": ((2,), ("r",)),
    "ring4": ((4,), ("r",)),
    "ring8": ((8,), ("r",)),
}
DTYPES = {"int32": (hw.int32, np.int32), "int8": (hw.int8, np.int8)}


FULL = ("2x4", "ring4")  # every form; the other meshes get a representative subset


def groups(mesh, names):
    """(axis_name form, every form?) pairs to try on a mesh with these axes."""
    full = mesh in FULL
    if len(names) == 1:
        return [(names[0], full), ((names[0],), False)] if full else [(names[0], False)]
    if full:
        return [(names[1], True), (names[0], True), (tuple(names), True), (tuple(reversed(names)), True)]
    return [(names[1], False), (tuple(names), False)]


def size(mesh, axes):
    shape, names = MESHES[mesh]
    axes = (axes,) if isinstance(axes, str) else axes
    return int(np.prod([shape[names.index(a)] for a in axes]))


def spec_for(names, rank):
    """A spec placing every PE's distinct block: the mesh axes over the leading dims."""
    if rank == 0:
        return ()
    if len(names) == 1 or rank == 1:
        return (tuple(names),) + (None,) * (rank - 1)
    return (names[0], names[1]) + (None,) * (rank - 2)


class Case:
    def __init__(self, mesh, local, body, out_rank, dtype="int32", out_spec=None, jax_body=None, tag=""):
        self.mesh, self.local, self.body, self.dtype = mesh, tuple(local), body, dtype
        names = MESHES[mesh][1]
        self.in_spec = spec_for(names, len(local))
        self.out_spec = spec_for(names, out_rank) if out_spec is None else out_spec
        self.jax_body = jax_body or body
        self.id = f"{mesh}-{dtype}-{tag}"


def cases():
    out = []
    for mesh, (shape, names) in MESHES.items():
        for g, every in groups(mesh, names):
            out += forms(mesh, g, every)
        out += whole_mesh_forms(mesh, names)
    return out


def forms(mesh, g, full):
    """Every collective over the group `g` (fewer forms when not `full`)."""
    out = []
    n = size(mesh, g)
    t = repr(g).replace("'", "").replace(" ", "")
    for op in ("psum", "pmax", "pmin") if full else ("psum", "pmin"):
        out.append(Case(mesh, (2, 3), lambda o, b, op=op: getattr(o, op)(b, g), 2, tag=f"{op}{t}"))
    out.append(Case(mesh, (2, 3), lambda o, b: o.psum(b, g), 2, "int8", tag=f"psum{t}"))
    for axis in (0, 1, 2, -1) if full else (1,):
        out.append(
            Case(mesh, (2, 3), lambda o, b, a=axis: o.all_gather(b, g, axis=a), 3, tag=f"all_gather{t}axis{axis}")
        )
    for axis in (0, 1, -1) if full else (0,):
        out.append(
            Case(
                mesh,
                (2, 3),
                lambda o, b, a=axis: o.all_gather(b, g, axis=a, tiled=True),
                2,
                tag=f"all_gather{t}axis{axis}tiled",
            )
        )
    for d in (0, 1) if full else (1,):
        local = [3, 3]
        local[d] = 2 * n
        out.append(
            Case(
                mesh,
                local,
                lambda o, b, d=d: o.psum_scatter(b, g, scatter_dimension=d, tiled=True),
                2,
                tag=f"psum_scatter{t}dim{d}tiled",
            )
        )
        local[d] = n
        out.append(
            Case(
                mesh,
                local,
                lambda o, b, d=d: o.psum_scatter(b, g, scatter_dimension=d),
                1,
                tag=f"psum_scatter{t}dim{d}",
            )
        )
    perms = {
        "shift": [(k, (k + 1) % n) for k in range(n)],
        "reverse": [(k, n - 1 - k) for k in range(n)],
        "partial": [(k, k + 1) for k in range(n - 1)],
    }
    for pname in perms if full else ("shift", "partial"):
        out.append(Case(mesh, (2, 3), lambda o, b, p=perms[pname]: o.ppermute(b, g, p), 2, tag=f"ppermute{t}{pname}"))
    for s, c in ((0, 1), (1, 0), (0, 0)) if full else ((0, 1),):
        local = [3, 3]
        local[s] = 2 * n
        out.append(
            Case(
                mesh,
                local,
                lambda o, b, s=s, c=c: o.all_to_all(b, g, s, c, tiled=True),
                2,
                tag=f"all_to_all{t}split{s}concat{c}tiled",
            )
        )
        local[s] = n
        out.append(
            Case(mesh, local, lambda o, b, s=s, c=c: o.all_to_all(b, g, s, c), 2, tag=f"all_to_all{t}split{s}concat{c}")
        )
    out.append(Case(mesh, (2, 3), lambda o, b: b * 100 + o.axis_index(g), 2, tag=f"axis_index{t}"))
    return out


def whole_mesh_forms(mesh, names):
    """out_specs leaving mesh axes out, and scalar operands, over every axis of the mesh."""
    every = tuple(names)
    n = size(mesh, every)
    return [
        # out_specs that leave mesh axes out: the PEs with index 0 on them
        Case(mesh, (2, 3), lambda o, b: b * 100 + o.axis_index(every), 2, out_spec=(), tag="out_P()"),
        Case(
            mesh,
            (2, 3),
            lambda o, b: b * 100 + o.axis_index(every),
            2,
            out_spec=(None, names[-1]),
            tag="out_last_axis_only",
        ),
        # scalar operands
        Case(
            mesh,
            (2, 3),
            lambda o, b: o.psum(hw.sum(2, lambda i: hw.sum(3, lambda j: b[i, j])), every),
            0,
            out_spec=(),
            jax_body=lambda o, b: o.psum(b.sum(dtype=b.dtype), every),
            tag="psum_scalar",
        ),
        Case(
            mesh,
            (2, 3),
            lambda o, b: o.all_gather(hw.max(2, lambda i: b[i, 0]), every),
            1,
            out_spec=(),
            jax_body=lambda o, b: o.all_gather(b[:, 0].max(), every),
            tag="all_gather_scalar",
        ),
        Case(
            mesh,
            (2, 3),
            lambda o, b: o.ppermute(b[1, 2], every, [(k, (k + 3) % n) for k in range(n)]) + b,
            2,
            tag="ppermute_scalar",
        ),
        Case(
            mesh, (2, 3), lambda o, b: o.pmin(b[0, 1], every) + o.pmax(b[1, 1], names[0]) * b, 2, tag="pmin_pmax_scalar"
        ),
    ]


def spec_forms():
    """In and out specs beyond one axis per dimension: tuples in either order, replication,
    axes left out of the result."""
    out = []
    specs = [
        ((("y", "x"),), (("y", "x"),)),
        ((None, "x"), (None, "x")),
        (("y",), ("y", "x")),
        ((), ("x",)),
        ((("x", "y"), None), (None, ("y", "x"))),
        (("y", "x"), ()),
        ((None, ("x", "y")), ("x",)),
    ]
    for mesh in ("2x4", "4x4"):
        for k, (ins, outs) in enumerate(specs):
            c = Case(mesh, (2, 3), lambda o, b: b * 3 + o.axis_index(("x", "y")), 2, out_spec=outs, tag=f"specs{k}")
            c.in_spec = ins
            c.local = None  # the global shape is fixed below
            out.append(c)
    return out


CASES = cases() + spec_forms()


@pytest.fixture(scope="module")
def devices():
    devs = jax.devices()
    assert len(devs) >= 16, (
        "jax was imported before this module set XLA_FLAGS; run with "
        "XLA_FLAGS=--xla_force_host_platform_device_count=16"
    )
    return devs


def run_hwgen(case, x):
    shape, names = MESHES[case.mesh]
    mesh = hw.Mesh(shape, names, topology="ring" if case.mesh.startswith("ring") else "torus")
    dtype = DTYPES[case.dtype][0]

    @hw.kernel(mesh=mesh)
    def k(a: hw.Array[(dtype, *x.shape)]):
        return hw.shard_map(
            lambda b: case.body(hw, b), mesh=mesh, in_specs=hw.P(*case.in_spec), out_specs=hw.P(*case.out_spec)
        )(a)

    return np.asarray(k(x))


def run_jax(case, x, devices):
    shape, names = MESHES[case.mesh]
    mesh = JaxMesh(np.array(devices[: int(np.prod(shape))]).reshape(shape), names)
    f = jax.shard_map(
        lambda b: case.jax_body(jax.lax, b),
        mesh=mesh,
        in_specs=JaxP(*case.in_spec),
        out_specs=JaxP(*case.out_spec),
        check_vma=False,
    )
    return np.asarray(jax.jit(f)(x))


def global_shape(case):
    if case.local is None:
        return (16, 48)  # divisible by every spec of spec_forms
    shape, names = MESHES[case.mesh]
    g = list(case.local)
    for d, entry in enumerate(case.in_spec):
        for a in (entry,) if isinstance(entry, str) else entry or ():
            g[d] *= shape[names.index(a)]
    return tuple(g)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_matches_jax(case, devices):
    info = np.iinfo(DTYPES[case.dtype][1])
    rng = np.random.default_rng(len(case.id))
    x = rng.integers(info.min, info.max, global_shape(case), dtype=DTYPES[case.dtype][1], endpoint=True)
    got, want = run_hwgen(case, x), run_jax(case, x, devices)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_wraparound_cases_really_wrap(devices):
    """int8 and int32 sums that overflow: both sides wrap the same way."""
    case = Case("2x4", (1, 1), lambda o, b: o.psum(b, ("x", "y")), 2, "int8", out_spec=())
    x = np.full((2, 4), 100, np.int8)
    assert run_hwgen(case, x)[0, 0] == run_jax(case, x, devices)[0, 0] == 32
    case = Case("2x4", (1, 1), lambda o, b: o.psum(b, ("x", "y")), 2, out_spec=())
    x = np.full((2, 4), 2**30 + 1, np.int32)
    assert run_hwgen(case, x)[0, 0] == run_jax(case, x, devices)[0, 0] == 8
