"""`hw.shard_map(body, mesh=, in_specs=, out_specs=)(*args)`: a per-PE program, as in JAX.

Inside an `@hw.kernel(mesh=mesh)` function, the call splits each global argument by its spec
in `in_specs` (an hw.P per argument, or one hw.P for all of them), traces `body` once on one
PE's blocks (local arrays; scalars stay scalars and need the spec P()), and joins the body's
results by `out_specs` (an hw.P per result, or one for all) into global arrays. A mesh axis a
result's spec leaves out takes the value of the PE with index 0 on that axis (JAX with
check_vma=False). The body may use collectives (collectives.py) and read the kernel's arrays
directly (every PE sees them whole). The result is an ir.ShardMap read through ir.ShardOut.
"""

from __future__ import annotations

import weakref

from .. import ir
from ..errors import HwgenError, TraceError, user_loc
from ..lang.arrays import ArrayVal, _strong, read
from ..lang.context import current
from ..lang.scalars import Val, const
from ..lang.signature import raw_dtype
from .mesh import Mesh, P
from .specs import check_spec, global_shape, local_shape

_bodies: list = []  # the meshes of the shard_map bodies being traced (at most one)
_counts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # trace -> shard_maps so far


def current_mesh(what: str) -> Mesh:
    """The mesh of the shard_map body being traced (collectives need one)."""
    if not _bodies:
        raise TraceError(f"{what} can only be used inside the body of hw.shard_map")
    return _bodies[-1]


def shard_map(body, *, mesh, in_specs, out_specs):
    """The per-PE function `body` as a function of global arrays; see the module docstring."""
    if not isinstance(mesh, Mesh):
        raise TraceError(f"hw.shard_map needs mesh=, an hw.Mesh, got {mesh!r}")
    if not callable(body):
        raise TraceError(f"hw.shard_map needs a function (the per-PE body), got {body!r}")

    def call(*args):
        return _trace(body, mesh, in_specs, out_specs, args)

    return call


def _trace(body, mesh: Mesh, in_specs, out_specs, args):
    loc = user_loc()
    trace = current("hw.shard_map")
    if _bodies:
        raise TraceError("hw.shard_map cannot be nested inside another hw.shard_map body", loc)
    specs = _specs(in_specs, len(args), "in_specs", "argument(s)")
    number = _counts.get(trace, 0)
    _counts[trace] = number + 1
    nodes, params, local_vals = [], [], []
    for k, (a, spec) in enumerate(zip(args, specs)):
        node, fx = _global(a)
        check_spec(spec, node.shape, mesh, f"in_specs[{k}]")
        inp = ir.Input(f"%shard{number}.{k}", node.dtype, local_shape(node.shape, spec, mesh))
        nodes.append(node)
        params.append(inp)
        local_vals.append(ArrayVal(inp.shape, fx or inp.dtype, node=inp) if inp.shape else Val(read(inp, ()), fx=fx))
    _bodies.append(mesh)
    try:
        returned = body(*local_vals)
        items = list(returned) if isinstance(returned, tuple) else [returned]
        outs = [_local_result(v, k, len(items)) for k, v in enumerate(items)]
    finally:
        _bodies.pop()
    if not items:
        raise TraceError("the body of hw.shard_map returns nothing; return its result(s)", loc)
    ospecs = _specs(out_specs, len(items), "out_specs", "result(s)", single=not isinstance(returned, tuple))
    gshapes = []
    for k, ((node, _), spec) in enumerate(zip(outs, ospecs)):
        check_spec(spec, node.shape, mesh, f"out_specs[{k}]" if len(items) > 1 else "out_specs", split=False)
        gshapes.append(global_shape(node.shape, spec, mesh))
    sm = ir.ShardMap(mesh, specs, ospecs, tuple(nodes), tuple(params), tuple(n for n, _ in outs), loc=loc)
    if ir.free_indices(sm):
        raise TraceError(
            "hw.shard_map cannot be used inside the function given to hw.map, hw.sum or "
            "another pattern; call it on whole arrays",
            loc,
        )
    results = []
    for k, ((node, fx), shape) in enumerate(zip(outs, gshapes)):
        out = ir.ShardOut(sm, k, node.dtype, shape)
        results.append(ArrayVal(shape, fx or out.dtype, node=out) if shape else Val(read(out, ()), fx=fx))
    return tuple(results) if isinstance(returned, tuple) else results[0]


def _specs(specs, count: int, what: str, things: str, single: bool = False) -> tuple:
    """One hw.P per argument or result: a tuple of them, or one hw.P for all."""
    if isinstance(specs, P):
        return (specs,) * count
    if isinstance(specs, list):
        specs = tuple(specs)
    if not isinstance(specs, tuple):
        raise TraceError(f"hw.shard_map {what} must be an hw.P or a tuple of them, got {specs!r}")
    if single:
        raise TraceError(
            f"hw.shard_map has {len(specs)} {what} for a single result; give one hw.P (the body returns no tuple)"
        )
    if len(specs) != count:
        raise TraceError(
            f"hw.shard_map has {len(specs)} {what} for {count} {things}; give one hw.P per "
            f"{things.split('(')[0]} (or one hw.P for all)"
        )
    return specs


def _global(a):
    """The IR node of an argument (a global array, or a 0-d Map for a scalar), and its
    fixed-point type if any."""
    if isinstance(a, ArrayVal):
        fx = a.dtype if raw_dtype(a.dtype) != a.dtype else None
        return a.materialize(), fx
    v = const(a)
    return ir.Map((), _strong(v)), v.fx


def _local_result(v, k: int, count: int):
    """A body result as an array node (0-d Map for a scalar) and its fixed-point type."""
    label = "the result" if count == 1 else f"result {k}"
    if isinstance(v, ArrayVal):
        fx = v.dtype if raw_dtype(v.dtype) != v.dtype else None
        return v.materialize(), fx
    try:
        s = const(v)
    except HwgenError:
        raise TraceError(f"{label} of the hw.shard_map body is {v!r}; a body returns arrays and scalars") from None
    return ir.Map((), _strong(s)), s.fx


def with_sharding_constraint(x, spec):
    """`x`, placed by `spec` (an hw.P) in a program written for whole arrays on a mesh: the
    partitioner computes it split that way (mesh/partition.py). The golden model is the
    identity. Checked against the kernel's mesh when the kernel is made."""
    loc = user_loc()
    trace = current("hw.with_sharding_constraint")
    if _bodies:
        raise TraceError(
            "hw.with_sharding_constraint places an array of a program written for whole arrays; "
            "inside a hw.shard_map body each PE's block is already placed",
            loc,
        )
    if not isinstance(x, ArrayVal):
        raise TraceError(f"hw.with_sharding_constraint needs an array, got {x!r}", loc)
    if not isinstance(spec, P):
        raise TraceError(f"hw.with_sharding_constraint needs an hw.P(...), got {spec!r}", loc)
    node = x.materialize()
    if not isinstance(node, ir.Map):  # an argument (or another array): a copy carries the constraint
        dims = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(node.shape))
        node = ir.Map(dims, ir.Read(node, tuple(ir.Index(d.name) for d in dims)), loc=loc)
    trace.constraints.append((node, spec, loc))
    return ArrayVal(x.shape, x.dtype, node=node)
