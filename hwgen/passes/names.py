"""Names: every controller of the loop program gets its hardware instance name.

Names are the controller's kind and a running number per kind, in tree order, parents first:
`seqloop0`, `metaloop0`, `parallel0`, `pipe0`, `load0`, `store0`, `coll0` (a mesh PE's
collective). They name the Verilog instances, key the memory plans' buffer owners and the
pipe plans, and label the report.
"""

from __future__ import annotations

from dataclasses import replace

from ..loops import Collective, Load, Loop, LoopProgram, Parallel, Pipe, Store


def kind_of(ctrl) -> str:
    """The name stem of a controller's hardware template."""
    if isinstance(ctrl, Loop):
        return "metaloop" if ctrl.meta else "seqloop"
    for cls, stem in ((Parallel, "parallel"), (Pipe, "pipe"), (Load, "load"), (Store, "store"), (Collective, "coll")):
        if isinstance(ctrl, cls):
            return stem
    raise TypeError(f"no hardware for {type(ctrl).__name__}")


def name_units(prog: LoopProgram, schedule=None) -> LoopProgram:
    """`prog` with every controller named (the names of an already named program are redone)."""
    counts: dict = {}

    def go(ctrl):
        stem = kind_of(ctrl)
        name = f"{stem}{counts.get(stem, 0)}"
        counts[stem] = counts.get(stem, 0) + 1
        if isinstance(ctrl, Loop):
            return replace(ctrl, name=name, stages=tuple(go(s) for s in ctrl.stages))
        if isinstance(ctrl, Parallel):
            return replace(ctrl, name=name, children=tuple(go(c) for c in ctrl.children))
        return replace(ctrl, name=name)

    return replace(prog, root=go(prog.root))
