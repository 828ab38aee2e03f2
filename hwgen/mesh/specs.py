"""PartitionSpecs against a mesh and an array shape: checking them, and the local shape.

A spec entry names the mesh axes a dimension is split over (the first name major), so a
dimension of size N split over axes of sizes s1, s2 has local size N / (s1 * s2) on each PE
and PE (.., i1, .., i2, ..) holds block i1 * s2 + i2. Every error is a TraceError (a
malformed spec) or a TypeMismatchError (a spec that does not fit the array's shape).
"""

from __future__ import annotations

import math

from ..errors import TraceError, TypeMismatchError
from .mesh import Mesh, P


def check_axes(names: tuple, mesh: Mesh, what: str) -> None:
    """Every name is an axis of `mesh`, each at most once."""
    for a in names:
        if a not in mesh.axis_names:
            raise TraceError(f"{what} names mesh axis '{a}', but the mesh has axes {', '.join(mesh.axis_names)}")
    for a in names:
        if names.count(a) > 1:
            raise TraceError(f"{what} uses mesh axis '{a}' twice")


def group_size(names: tuple, mesh: Mesh) -> int:
    """The number of PEs in a group over the axes `names`."""
    return math.prod(mesh.shape[a] for a in names)


def check_spec(spec, shape: tuple, mesh: Mesh, what: str, split: bool = True) -> P:
    """`spec` must be an hw.P fitting an array of `shape` on `mesh` (`split`: a global array
    it splits, so its axes must divide the dimensions; else a block it places)."""
    if not isinstance(spec, P):
        raise TraceError(f"{what} must be an hw.P(...), got {spec!r}")
    check_axes(spec.axes(), mesh, f"{what} {spec!r}")
    if len(spec) > len(shape):
        raise TypeMismatchError(
            f"{what} {spec!r} has {len(spec)} entries but the array has {len(shape)} dimension(s) (shape {shape})"
        )
    for d, entry in enumerate(spec):
        if entry is None or not split:
            continue
        n = group_size(entry, mesh)
        if shape[d] % n:
            axes = " * ".join(f"{a}={mesh.shape[a]}" for a in entry)
            raise TypeMismatchError(
                f"{what} {spec!r} splits dimension {d} of size {shape[d]} over "
                f"{n} PEs ({axes}), which does not divide it"
            )
    return spec


def local_shape(shape: tuple, spec: P, mesh: Mesh) -> tuple:
    """The block of a global array of `shape` that each PE holds."""
    out = list(shape)
    for d, entry in enumerate(spec):
        if entry is not None:
            out[d] //= group_size(entry, mesh)
    return tuple(out)


def global_shape(shape: tuple, spec: P, mesh: Mesh) -> tuple:
    """The global array whose blocks of `shape` are placed by `spec`."""
    out = list(shape)
    for d, entry in enumerate(spec):
        if entry is not None:
            out[d] *= group_size(entry, mesh)
    return tuple(out)
