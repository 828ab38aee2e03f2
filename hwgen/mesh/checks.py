"""Kernel-level rules for meshes, applied once a kernel is traced, and the refusal to
synthesize a mesh kernel (not implemented yet; build / simulate / verify work for the
programs mesh/hardware.py supports, and the golden model for all).

- Every hw.shard_map in a kernel must use the kernel's mesh (`@hw.kernel(mesh=...)`).
- A value computed inside a shard_map body cannot be used outside it except as its result.
"""

from __future__ import annotations

from .. import ir
from ..errors import ScheduleError, TraceError
from .mesh import LinkConfig, Mesh


def check_options(mesh, link, loc) -> None:
    """The `mesh=` and `link=` arguments of `@hw.kernel`."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ScheduleError(f"mesh must be an hw.Mesh, got {mesh!r}", loc)
    if link is not None and not isinstance(link, LinkConfig):
        raise ScheduleError(f"link must be an hw.LinkConfig, got {link!r}", loc)
    if link is not None and mesh is None:
        raise ScheduleError("link= describes the links between PEs; it needs mesh= too", loc)


def check_program(program, mesh) -> None:
    """Every shard_map of `program` runs on `mesh`; no body value leaks out of its body."""
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
