"""Hoist: a tile load whose origin does not depend on a loop's counters moves out of the loop.

The tile is then loaded once instead of once per iteration (outerprod's row tile of `b`, say),
which saves DRAM bandwidth and a metapipeline stage. A tile memory is written only by its own
load, so moving the load earlier keeps every read's value.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..loops import Load, Loop, LoopProgram, Parallel


def hoist_loads(prog: LoopProgram, schedule=None) -> LoopProgram:
    """`prog` with invariant loads hoisted (loops come out sequential: metapipelining is
    decided afterwards, by passes/metapipeline.py)."""
    return replace(prog, root=_hoist_children(prog.root))


def _hoist_children(loop: Loop) -> Loop:
    stages = []
    for stage in loop.stages:
        if isinstance(stage, Loop):
            inner, hoisted = _hoist_out_of(stage)
            stages.extend(hoisted)
            stages.append(inner)
        else:
            stages.append(stage)
    return Loop(loop.counters, tuple(stages))


def _uses(load: Load, names: set) -> bool:
    return any(isinstance(n, ir.Index) and n.name in names for e in load.origin for n in ir.walk(e))


def _hoist_out_of(loop: Loop) -> tuple:
    """(the loop without its invariant loads, the loads to run before it)."""
    loop = _hoist_children(loop)
    names = {c.name for c in loop.counters}
    keep, out = [], []
    for stage in loop.stages:
        loads = (
            [stage]
            if isinstance(stage, Load)
            else (
                list(stage.children)
                if isinstance(stage, Parallel) and all(isinstance(c, Load) for c in stage.children)
                else None
            )
        )
        if loads is None or not loop.counters:
            keep.append(stage)
            continue
        invariant = [ld for ld in loads if not _uses(ld, names)]
        varying = [ld for ld in loads if _uses(ld, names)]
        out.extend(invariant)
        if varying:
            keep.append(varying[0] if len(varying) == 1 else Parallel(tuple(varying)))
    new = Loop(loop.counters, tuple(keep))
    hoisted = [] if not out else [out[0] if len(out) == 1 else Parallel(tuple(out))]
    return new, hoisted
