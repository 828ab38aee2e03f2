"""Where a hung kernel is stuck: the controllers that started and never finished.

    stalled(tree, timeline) -> ["load1, loading x into the tile of x (line 7)", ...]

`tree` is the PE's controller tree (hw/pe.py: nodes with `ctrl`, `name` and `children`);
`timeline` maps a controller's instance name to the cycles of its `go` and `done` pulses,
recorded by the testbench up to the timeout. A controller is in flight when it had more `go`
pulses than `done` pulses (the root always: the kernel did not finish, and its first `go` may
come before the recording starts); the stalled ones are those in flight none of whose
children is (a loop waiting on a stuck stage is not itself the culprit).
"""

from __future__ import annotations

from . import ir
from .hw.collective import along
from .loops import Collective, Load, Loop, Parallel, Pipe, Store


def stalled(tree, timeline: dict) -> list:
    """Descriptions of the innermost controllers in flight, in program order."""

    def busy(node) -> bool:
        t = timeline.get(node.name)
        return t is not None and len(t["go"]) > len(t["done"])

    out = []

    def visit(node) -> None:
        if node is not tree and not busy(node):
            return
        inner = [c for c in node.children if busy(c)]
        if not inner:
            out.append(describe(node.ctrl))
        for c in inner:
            visit(c)

    visit(tree)
    return out


def describe(ctrl) -> str:
    """A controller as a user can place it: its instance name, what it does, the user's line."""
    if isinstance(ctrl, Load):
        return f"{ctrl.name}, loading {ctrl.dram.name} into {_mem(ctrl.mem)}"
    if isinstance(ctrl, Store):
        return f"{ctrl.name}, storing {_mem(ctrl.mem)} to {ctrl.dram.name}"
    if isinstance(ctrl, Pipe):
        targets = dict.fromkeys(_mem(m) for w in ctrl.writes for m in _written(w))
        return f"{ctrl.name}, a pipe writing {', '.join(targets)}"
    if isinstance(ctrl, Loop):
        names = ", ".join(dict.fromkeys(ir.schedule_name(c.name) for c in ctrl.counters))
        return f"{ctrl.name}, a {'metapipelined ' if ctrl.meta else ''}loop over {names}"
    if isinstance(ctrl, Parallel):
        return f"{ctrl.name}, parallel stages"
    if isinstance(ctrl, Collective):
        kinds = dict.fromkeys(f"{ph.kind.replace('_', '-')} {along(ph)}" for ph in ctrl.phases)
        return f"{ctrl.name}, a collective ({', '.join(kinds)})"
    return ctrl.name


def _written(w) -> list:
    if hasattr(w, "mem"):
        return [w.mem]
    if hasattr(w, "group"):
        return [w.group.values]
    return [w.values]


def _mem(mem) -> str:
    line = f" (line {mem.loc.line})" if getattr(mem, "loc", None) is not None else ""
    return f"{mem.label or mem.name}{line}"
