"""Collectives inside a `hw.shard_map` body, with the meaning of their `jax.lax` namesakes.

`axis_name` is a mesh axis or a tuple of them: the group of a PE is every PE that differs from
it only on those axes, and a PE's index in its group is its linear index over them in tuple
order, the first major (`axis_index(("x", "y")) == ix * size_y + iy`).

    psum / pmax / pmin(x, axis_name)      the sum / max / min over the group, in x's dtype (wraps)
    all_gather(x, axis_name, *, axis=0, tiled=False)
                                          the group's values stacked on a new dimension `axis`
                                          (tiled: concatenated along dimension `axis`)
    psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False)
                                          the sum, split along `scatter_dimension`: member j gets
                                          block j (untiled: that dimension must equal the group
                                          size and member j gets row j, without the dimension)
    ppermute(x, axis_name, perm)          perm: (source, destination) pairs of group indices; a
                                          member that is no destination receives zeros. As in
                                          JAX, ppermute numbers a group over several axes in the
                                          mesh's axis order, whatever the tuple's order
    all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False)
                                          member j gets block j of every member's x along
                                          `split_axis`, in member order along `concat_axis`
                                          (untiled: split_axis must equal the group size and is
                                          removed; a new dimension of that size is inserted)
    axis_index(axis_name)                 the PE's index in its group, an int32 scalar

x may be a scalar where JAX allows it (psum, pmax, pmin, ppermute, untiled all_gather).
Each returns a traced value backed by an ir.Collective (axis_index: int32 arithmetic on the
parameters '%axis.<name>', the PE's coordinates).
"""

from __future__ import annotations

from .. import ir
from ..errors import TraceError, TypeMismatchError, user_loc
from ..lang.arrays import ArrayVal, _strong, read
from ..lang.dtypes import bool_, int32
from ..lang.scalars import Val, const
from ..lang.signature import raw_dtype
from .shard import current_mesh
from .specs import check_axes, group_size


def axis_param(name: str) -> str:
    """The name of the int32 Param holding a PE's coordinate on mesh axis `name`."""
    return f"%axis.{name}"


def _axes(axis_name, what: str):
    """(mesh, axis names as a tuple, group size)."""
    mesh = current_mesh(what)
    if isinstance(axis_name, str):
        names = (axis_name,)
    elif isinstance(axis_name, (tuple, list)) and all(isinstance(a, str) for a in axis_name):
        names = tuple(axis_name)
    else:
        raise TraceError(f"{what}: axis_name must be a mesh axis name or a tuple of them, got {axis_name!r}")
    check_axes(names, mesh, what)
    return mesh, names, group_size(names, mesh)


def _operand(x, what: str, scalar_ok: bool = True):
    """(array node, fixed-point type or None, weak) of a collective's operand; a scalar
    becomes a 0-d Map."""
    if isinstance(x, ArrayVal):
        node = x.materialize()
        fx, weak = (x.dtype if raw_dtype(x.dtype) != x.dtype else None), False
    else:
        v = const(x)
        if not scalar_ok:
            raise TraceError(f"{what} needs an array, got a scalar")
        node, fx, weak = ir.Map((), _strong(v)), v.fx, v.weak
    if ir.free_indices(node):
        raise TraceError(
            f"{what} cannot be used inside the function given to hw.map, hw.sum or "
            f"another pattern; apply it to a whole array"
        )
    return node, fx, weak


def _dim(value, ndim: int, what: str, name: str) -> int:
    """A dimension number in [-ndim, ndim), made non-negative."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{what}: {name} must be an int, got {value!r}")
    if not -ndim <= value < ndim:
        raise TraceError(f"{what}: {name}={value} is out of range (valid: {-ndim} .. {ndim - 1})")
    return value % ndim


def _tiled(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise TraceError(f"{what}: tiled must be True or False, got {value!r}")
    return value


def _result(kind: str, names: tuple, params: dict, node: ir.ArrayNode, shape: tuple, fx, weak):
    c = ir.Collective(kind, names, tuple(sorted(params.items())), node, tuple(shape), loc=user_loc())
    if shape:
        return ArrayVal(c.shape, fx or c.dtype, node=c)
    return Val(read(c, ()), weak=weak, fx=fx)


def _reduction(kind: str, x, axis_name):
    what = f"hw.{kind}"
    _, names, _ = _axes(axis_name, what)
    node, fx, weak = _operand(x, what)
    if kind == "psum" and node.dtype == bool_:
        raise TypeMismatchError(
            "hw.psum of bool_ values is ambiguous (JAX counts them in int32, "
            "hwgen keeps the dtype): use .astype(int32) to count, or hw.pmax for any"
        )
    return _result(kind, names, {}, node, node.shape, fx, weak)


def psum(x, axis_name):
    """The sum of `x` over the group, in x's dtype (wrapping)."""
    return _reduction("psum", x, axis_name)


def pmax(x, axis_name):
    """The elementwise maximum of `x` over the group."""
    return _reduction("pmax", x, axis_name)


def pmin(x, axis_name):
    """The elementwise minimum of `x` over the group."""
    return _reduction("pmin", x, axis_name)


def all_gather(x, axis_name, *, axis=0, tiled=False):
    """Every member's `x`, in member order, stacked on a new dimension `axis` (tiled:
    concatenated along dimension `axis`)."""
    what = "hw.all_gather"
    _, names, n = _axes(axis_name, what)
    tiled = _tiled(tiled, what)
    node, fx, weak = _operand(x, what, scalar_ok=not tiled)
    shape = list(node.shape)
    if tiled:
        a = _dim(axis, len(shape), what, "axis")
        shape[a] *= n
    else:
        a = _dim(axis, len(shape) + 1, what, "axis")
        shape.insert(a, n)
    return _result("all_gather", names, {"axis": a, "tiled": tiled}, node, shape, fx, weak)


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False):
    """The sum over the group, split along `scatter_dimension`: member j gets block j."""
    what = "hw.psum_scatter"
    _, names, n = _axes(axis_name, what)
    tiled = _tiled(tiled, what)
    node, fx, weak = _operand(x, what, scalar_ok=False)
    if node.dtype == bool_:
        raise TypeMismatchError(
            "hw.psum_scatter of bool_ values is ambiguous (JAX counts them in int32, "
            "hwgen keeps the dtype): use .astype(int32) first"
        )
    shape = list(node.shape)
    d = _dim(scatter_dimension, len(shape), what, "scatter_dimension")
    if tiled and shape[d] % n:
        raise TypeMismatchError(
            f"{what}: dimension {d} of the operand has size {shape[d]}, which the "
            f"group of {n} PEs over {_show(names)} does not divide (tiled=True)"
        )
    if not tiled and shape[d] != n:
        raise TypeMismatchError(
            f"{what}: with tiled=False dimension {d} of the operand must have the "
            f"group's size {n} ({_show(names)}), but it has size {shape[d]}"
        )
    if tiled:
        shape[d] //= n
    else:
        del shape[d]
    return _result("psum_scatter", names, {"dim": d, "tiled": tiled}, node, shape, fx, weak)


def ppermute(x, axis_name, perm):
    """Member `dst` receives member `src`'s `x` for each pair (src, dst) of `perm`; members
    that are no destination receive zeros."""
    what = "hw.ppermute"
    _, names, n = _axes(axis_name, what)
    node, fx, weak = _operand(x, what)
    pairs = _perm(perm, n, names, what)
    # JAX numbers ppermute's group members over the named axes in the mesh's axis order,
    # whatever their order in the tuple (unlike axis_index and the other collectives)
    mesh_order = tuple(a for a in current_mesh(what).axis_names if a in names)
    return _result("ppermute", mesh_order, {"perm": pairs}, node, node.shape, fx, weak)


def _perm(perm, n: int, names: tuple, what: str) -> tuple:
    try:
        pairs = tuple((s, d) for s, d in perm)
    except (TypeError, ValueError):
        raise TraceError(f"{what}: perm must be a list of (source, destination) pairs, got {perm!r}") from None
    for s, d in pairs:
        for v in (s, d):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n:
                raise TraceError(
                    f"{what}: perm pair {(s, d)!r} is out of range: indices must be ints from "
                    f"0 to {n - 1} (the group over {_show(names)} has {n} PEs)"
                )
    for k, role in ((0, "source"), (1, "destination")):
        seen = [p[k] for p in pairs]
        dup = next((v for v in seen if seen.count(v) > 1), None)
        if dup is not None:
            raise TraceError(
                f"{what}: perm is not a permutation: {dup} is the {role} of more than one pair in {list(pairs)!r}"
            )
    return pairs


def all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False):
    """Member j receives block j (along `split_axis`) of every member's `x`, placed in member
    order along `concat_axis`."""
    what = "hw.all_to_all"
    _, names, n = _axes(axis_name, what)
    tiled = _tiled(tiled, what)
    node, fx, weak = _operand(x, what, scalar_ok=False)
    shape = list(node.shape)
    s = _dim(split_axis, len(shape), what, "split_axis")
    c = _dim(concat_axis, len(shape), what, "concat_axis")
    if tiled and shape[s] % n:
        raise TypeMismatchError(
            f"{what}: split_axis {s} of the operand has size {shape[s]}, which the "
            f"group of {n} PEs over {_show(names)} does not divide (tiled=True)"
        )
    if not tiled and shape[s] != n:
        raise TypeMismatchError(
            f"{what}: with tiled=False split_axis {s} of the operand must have the "
            f"group's size {n} ({_show(names)}), but it has size {shape[s]}"
        )
    if tiled:
        shape[s] //= n
        shape[c] *= n
    else:
        del shape[s]
        shape.insert(c, n)
    return _result("all_to_all", names, {"split": s, "concat": c, "tiled": tiled}, node, shape, fx, weak)


def axis_index(axis_name) -> Val:
    """This PE's index in its group over `axis_name` (int32): its linear index over the named
    axes in tuple order, the first major."""
    mesh, names, _ = _axes(axis_name, "hw.axis_index")
    if not names:
        return Val(ir.Const(0, int32))
    expr = ir.Param(axis_param(names[0]), int32)
    for a in names[1:]:
        expr = ir.Binary("mul", expr, ir.Const(mesh.shape[a], int32), int32)
        expr = ir.Binary("add", expr, ir.Param(axis_param(a), int32), int32)
    return Val(expr)


def _show(names: tuple) -> str:
    return repr(names[0]) if len(names) == 1 else repr(names)
