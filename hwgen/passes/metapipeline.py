"""Metapipeline: which loops overlap their stages across iterations. The one place it is decided.

A loop is metapipelined when the schedule asks for it (`metapipeline=True`), it has counters
(the kernel's root and single-iteration blocks run sequentially) and it has more than one
stage (one stage has nothing to overlap with). Runs after hoisting, which changes stage counts.
"""

from __future__ import annotations

from dataclasses import replace

from ..loops import Loop, LoopProgram, Parallel


def metapipeline(prog: LoopProgram, schedule) -> LoopProgram:
    """`prog` with each Loop's `meta` set by the rule above, for `schedule.metapipeline`."""
    wanted = bool(schedule.metapipeline)

    def go(ctrl):
        if isinstance(ctrl, Parallel):  # tile loads, or a mesh PE's root level (passes/overlap.py)
            return replace(ctrl, children=tuple(go(c) for c in ctrl.children))
        if not isinstance(ctrl, Loop):
            return ctrl
        stages = tuple(go(s) for s in ctrl.stages)
        return replace(ctrl, stages=stages, meta=wanted and bool(ctrl.counters) and len(stages) > 1)

    return replace(prog, root=go(prog.root))
