"""Kernel-level rules for meshes, applied once a kernel is traced.

- Every hw.shard_map in a kernel must use the kernel's mesh (`@hw.kernel(mesh=...)`).
- A value computed inside a shard_map body cannot be used outside it except as its result.
- `in_shardings` / `out_shardings` place a program written for whole arrays (no shard_map):
  an hw.P per parameter, one for the result, each fitting its array on the mesh.
"""

from __future__ import annotations

from .. import ir
from ..errors import HwgenError, ScheduleError, TraceError
from .mesh import LinkConfig, Mesh, P
from .specs import check_spec


def check_options(mesh, link, loc, collective_matmul="auto", collective_stages=False) -> None:
    """The `mesh=`, `link=`, `collective_matmul=` and `collective_stages=` arguments of `@hw.kernel`."""
    if collective_stages is not True and collective_stages is not False:
        raise ScheduleError(f"collective_stages must be True or False, got {collective_stages!r}", loc)
    if collective_stages and mesh is None:
        why = "collective_stages= runs a mesh kernel's collectives in tile loops; it needs mesh= too"
        raise ScheduleError(why, loc)
    if not any(collective_matmul is v for v in ("auto", True, False)) and collective_matmul != "auto":
        raise ScheduleError(f"collective_matmul must be 'auto', True or False, got {collective_matmul!r}", loc)
    if collective_matmul != "auto" and mesh is None:
        raise ScheduleError("collective_matmul= chooses how a mesh kernel gathers; it needs mesh= too", loc)
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ScheduleError(f"mesh must be an hw.Mesh, got {mesh!r}", loc)
    if link is not None and not isinstance(link, LinkConfig):
        raise ScheduleError(f"link must be an hw.LinkConfig, got {link!r}", loc)
    if link is not None and mesh is None:
        raise ScheduleError("link= describes the links between PEs; it needs mesh= too", loc)


def check_collective_matmul(program, collective_matmul, loc) -> None:
    """`collective_matmul=` True or False only where hwgen partitions: no hw.shard_map."""
    if collective_matmul != "auto" and shard_maps(program):
        raise ScheduleError(
            "collective_matmul= chooses how hwgen partitions a program written for whole arrays; a "
            "hw.shard_map body writes collective matmul itself (see docs/mesh.md)",
            loc,
        )


def check_shardings(program, mesh, shardings, loc) -> tuple:
    """(in_shardings, out_shardings) of a kernel from `shardings`, the pair given to
    @hw.kernel: an hw.P per parameter (default: replicated) and one for the result (None:
    as propagation chooses). Only a global-view mesh kernel (no hw.shard_map) takes them."""
    ins, out = shardings or (None, None)
    replicated = tuple(P() for _ in program.params)
    _check_constraints(program, mesh)
    if ins is None and out is None:
        return replicated, None
    if mesh is None:
        raise ScheduleError("in_shardings and out_shardings place a program on a mesh; they need mesh= too", loc)
    if shard_maps(program):
        raise ScheduleError(
            "in_shardings and out_shardings place a program written for whole arrays; a kernel "
            "that calls hw.shard_map gives in_specs and out_specs to it instead",
            loc,
        )
    given = ins
    if isinstance(ins, P) and len(program.params) == 1:
        ins = (ins,)
    ins = replicated if ins is None else tuple(ins) if isinstance(ins, (tuple, list)) else ins
    if not isinstance(ins, tuple) or len(ins) != len(program.params):
        raise ScheduleError(
            f"in_shardings must be a tuple of one hw.P per parameter ({len(program.params)}), got {given!r}", loc
        )
    try:
        for k, (port, spec) in enumerate(zip(program.params, ins)):
            check_spec(spec, port.shape, mesh, f"in_shardings[{k}] (for '{port.name}')")
        if out is not None:
            if len(program.results) != 1:
                raise ScheduleError("out_shardings is one hw.P: the kernel must return one array")
            port = program.results[0].port
            check_spec(out, port.shape, mesh, "out_shardings")
    except HwgenError as e:
        raise type(e)(e.message, loc) from None
    return ins, out


def _check_constraints(program, mesh) -> None:
    """Every hw.with_sharding_constraint fits its array on the kernel's mesh, in a program
    written for whole arrays."""
    for node, spec, loc in program.constraints:
        if mesh is None:
            raise ScheduleError(
                "hw.with_sharding_constraint places an array on a mesh; declare the kernel with @hw.kernel(mesh=...)",
                loc,
            )
        if shard_maps(program):
            raise ScheduleError(
                "hw.with_sharding_constraint is for programs written for whole arrays, not with hw.shard_map",
                loc,
            )
        try:
            check_spec(spec, node.shape, mesh, "hw.with_sharding_constraint")
        except HwgenError as e:
            raise type(e)(e.message, loc) from None


def check_program(program, mesh) -> None:
    """Every shard_map and pipeline of `program` runs on `mesh`; no body value leaks out of
    its body."""
    from .pipeline import check, check_leaks, pipelines

    for node in pipelines([r.node for r in program.results]):
        check(node, mesh, program.name)
    check_leaks(program)
    for sm in shard_maps(program):
        if mesh is None:
            raise TraceError(
                f"hw.shard_map runs on a mesh, but kernel '{program.name}' has none; "
                f"declare it with @hw.kernel(mesh=...)",
                sm.loc,
            )
        if sm.mesh != mesh:
            raise TraceError(
                f"hw.shard_map uses the mesh {sm.mesh.describe()}, but kernel "
                f"'{program.name}' runs on {mesh.describe()}; use the kernel's mesh",
                sm.loc,
            )
    for node in _outside_bodies(program):
        leaked = (
            (isinstance(node, ir.Input) and node.name.startswith("%shard"))
            or isinstance(node, ir.Collective)
            or (isinstance(node, ir.Param) and node.name.startswith("%axis."))
        )
        if leaked:
            raise TraceError(
                f"kernel '{program.name}' uses a value of a hw.shard_map body outside "
                f"that body; return it from the body instead",
                program.loc,
            )


def shard_maps(program) -> list:
    """The ShardMap nodes of `program`, producers first."""
    return [n for n in _outside_bodies(program) if isinstance(n, ir.ShardMap)]


def _outside_bodies(program):
    """Every node the kernel's results use, looking into shard_map arguments but not bodies."""
    seen, stack, out = set(), [r.node for r in program.results], []
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        out.append(n)
        kids = n.args if isinstance(n, ir.ShardMap) else ir.children(n)
        stack.extend(kids)
    return out[::-1]
