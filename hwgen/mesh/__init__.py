"""Meshes of processing elements (docs/mesh.md): the mesh and its specs (mesh.py, specs.py),
per-PE programs (shard.py), collectives (collectives.py), their golden model (spmd.py), the
kernel-level rules (checks.py) and their text for show_ir (show.py); hardware for the programs
it supports, an all-reduce over a ring (hardware.py: the per-PE program, the ring plan, the
Verilog of the mesh), and their simulation (simulate.py). Other mesh programs raise
UnsupportedError when built."""

from .collectives import all_gather, all_to_all, axis_index, pmax, pmin, ppermute, psum, psum_scatter
from .mesh import LinkConfig, Mesh, P
from .pipeline import pipeline
from .shard import shard_map, with_sharding_constraint

__all__ = [
    "LinkConfig",
    "Mesh",
    "P",
    "all_gather",
    "all_to_all",
    "axis_index",
    "pmax",
    "pipeline",
    "pmin",
    "ppermute",
    "psum",
    "psum_scatter",
    "shard_map",
    "with_sharding_constraint",
]
