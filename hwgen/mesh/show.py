"""The per-PE programs of a mesh kernel as text (for `kernel.show_ir()` and `--show-ir`):
each shard_map's mesh and specs, its local inputs, its collectives in evaluation order, and
its results."""

from __future__ import annotations

from .. import ir
from ..loops import _expr_str
from .checks import shard_maps
from .spmd import collectives_in_order


def show_shard_maps(program) -> str:
    """One block of lines per shard_map of `program` ('' when it has none)."""
    lines = []
    for k, sm in enumerate(shard_maps(program)):
        lines.append(f"  shard_map{k} on {sm.mesh.describe()}" + (f" at line {sm.loc.line}" if sm.loc else ""))
        for inp, spec, arg in zip(sm.params, sm.in_specs, sm.args):
            lines.append(f"    local {inp.name}: {inp.dtype.name}{list(inp.shape)} = {_array(arg)} split by {spec!r}")
        names = {}
        for c in collectives_in_order(sm.body):
            names[c] = f"%c{len(names)}"
            params = ", ".join(f"{n}={v!r}" for n, v in c.params)
            lines.append(
                f"    {names[c]} = {c.kind}({_array(c.operand, names)}, {c.axes!r}"
                f"{', ' + params if params else ''}): {c.dtype.name}{list(c.shape)}"
            )
        for j, (node, spec) in enumerate(zip(sm.body, sm.out_specs)):
            lines.append(
                f"    result {j}: {node.dtype.name}{list(node.shape)} = {_array(node, names)} joined by {spec!r}"
            )
    return "\n".join(lines)


def _array(node, names=None) -> str:
    names = names or {}
    if node in names:
        return names[node]
    if isinstance(node, ir.Input):
        return node.name
    if isinstance(node, ir.ShardOut):
        return f"shard_map result {node.index}"
    if isinstance(node, ir.Map):
        dims = ", ".join(f"{d.name}<{d.extent}" for d in node.dims)
        return f"map[{dims}] {_body(node.body, names)}"
    if isinstance(node, ir.Concat):
        parts = ",\n        ".join(_array(q, names) for q in node.parts)
        return f"concatenate([\n        {parts}], axis={node.axis})"
    if isinstance(node, ir.Roll):
        return f"roll({_array(node.x, names)}, {_expr_str(node.shift)})"
    return type(node).__name__.lower()


def _body(expr, names) -> str:
    """The expression, with reads of collectives printed by the collectives' names."""

    def named(n):  # top-down: a collective whose operand is another is named as it is
        if n in names:
            return ir.Input(names[n], n.dtype, n.shape)
        return ir.rebuild(n, named)

    return _expr_str(named(expr))


def show_pipeline(kernel) -> str:
    """A pipeline kernel's stages (hw.pipeline): each stage's program for one micro-batch, as
    its PE runs it (mesh/pipeline_hw.py), or why its hardware is not built."""
    from ..dram import DramConfig
    from ..errors import HwgenError
    from ..graph import show
    from .pipeline_hw import plan

    try:
        pp = plan(kernel, "show", DramConfig())
    except HwgenError as e:
        return f"pipeline not built: {e.message}"
    lines = [f"pipeline of {len(pp.stages)} stages on {pp.mesh.describe()}, {pp.stages[0].microbatches} micro-batches:"]
    for s, prog in zip(pp.stages, pp.programs):
        lines.append(f"  stage {s.index} on PE {s.index}: {s.src} -> {s.dst} (one micro-batch)")
        lines.append(show(prog))
    return "\n".join(lines)
