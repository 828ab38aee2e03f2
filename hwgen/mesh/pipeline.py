"""`hw.pipeline(stages, x, axis, microbatches=M)`: pipeline parallelism (GPipe), and its golden model.

Inside an `@hw.kernel(mesh=mesh)` function, the call means `stages[-1](...stages[0](x))`
computed per micro-batch: `x` is split along dimension 0 into M equal micro-batches, each goes
through the stages in turn, and the result is the micro-batches' results joined along
dimension 0. Stage k runs on the PE with index k along mesh `axis` (one stage per PE), so the
axis must have len(stages) PEs; that is checked when the kernel is made (checks.py). Each stage
is a function of one array (its micro-batch's input) returning an array, traced once on an
array of the micro-batch's shape; it may read the kernel's arguments. The result is an
ir.Pipeline node. Hardware: mesh/pipeline_hw.py.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import ir
from ..errors import TraceError, user_loc
from ..lang.arrays import ArrayVal
from ..lang.context import current
from ..lang.signature import raw_dtype

_counts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # trace -> pipelines so far


def pipeline(stages, x, axis, microbatches=1):
    """The pipeline's result (an array); see the module docstring."""
    from .shard import _bodies

    loc = user_loc()
    trace = current("hw.pipeline")
    if _bodies:
        raise TraceError("hw.pipeline places its stages on the mesh itself; call it outside hw.shard_map", loc)
    if isinstance(stages, tuple):
        stages = list(stages)
    if not isinstance(stages, list) or not stages or not all(callable(s) for s in stages):
        raise TraceError(f"hw.pipeline needs a list of stages, each a function of one array, got {stages!r}", loc)
    if not isinstance(axis, str):
        raise TraceError(f"hw.pipeline needs axis=, the name of a mesh axis, got {axis!r}", loc)
    if isinstance(microbatches, np.integer):
        microbatches = int(microbatches)
    if isinstance(microbatches, bool) or not isinstance(microbatches, int) or microbatches < 1:
        raise TraceError(f"hw.pipeline needs microbatches=, a positive int, got {microbatches!r}", loc)
    if not isinstance(x, ArrayVal) or not x.shape:
        raise TraceError(f"hw.pipeline needs an array x to split into micro-batches, got {x!r}", loc)
    rows = x.shape[0]
    if rows % microbatches:
        raise TraceError(
            f"hw.pipeline cannot split dimension 0 of x ({rows} rows) into {microbatches} equal "
            f"micro-batches; give microbatches= a divisor of {rows}",
            loc,
        )
    node = x.materialize()
    if ir.free_indices(node):
        raise _in_pattern(loc)
    number = _counts.get(trace, 0)
    _counts[trace] = number + 1
    fx = x.dtype if raw_dtype(x.dtype) != x.dtype else None
    shape, dtype = (rows // microbatches,) + tuple(x.shape[1:]), node.dtype
    params, bodies = [], []
    for k, stage in enumerate(stages):
        inp = ir.Input(f"%pipe{number}.{k}", dtype, shape)
        out = stage(ArrayVal(shape, fx or dtype, node=inp))
        if not isinstance(out, ArrayVal) or not out.shape:
            raise TraceError(
                f"stage {k} of hw.pipeline returned {out!r}; a stage returns an array (its "
                f"micro-batch's activations, dimension 0 its rows)",
                loc,
            )
        body = out.materialize()
        if ir.free_indices(body):
            raise _in_pattern(loc)
        params.append(inp)
        bodies.append(body)
        fx = out.dtype if raw_dtype(out.dtype) != out.dtype else None
        shape, dtype = tuple(out.shape), body.dtype
    for k, body in enumerate(bodies):
        others = [n for n in ir.walk(body) if isinstance(n, ir.Input) and n in params and n is not params[k]]
        if others:
            raise TraceError(
                f"stage {k} of hw.pipeline reads stage {params.index(others[0])}'s input; a stage reads "
                f"only its own argument and the kernel's arrays",
                loc,
            )
    result = (microbatches * shape[0],) + shape[1:]
    pl = ir.Pipeline(node, tuple(params), tuple(bodies), microbatches, axis, dtype, result, loc=loc)
    return ArrayVal(result, fx or dtype, node=pl)


def _in_pattern(loc) -> TraceError:
    return TraceError("hw.pipeline cannot be used inside the function given to hw.map, hw.sum or another pattern", loc)


def check_leaks(program) -> None:
    """No value of a stage is used outside that stage: a stage's input (an Input named
    %pipe<n>.<k>) is read only inside stage k's body of pipeline n."""
    roots = [r.node for r in program.results]
    own = {}
    for node in pipelines(roots):
        for inp, body in zip(node.params, node.bodies):
            for n in ir.walk(body):
                if _is_stage_input(n) and n != inp and not _nested(n, body):
                    raise _leak(program, node.loc)
            own[inp] = node
    seen: set = set()
    stack = list(roots)
    while stack:  # outside every stage body
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if _is_stage_input(n):
            raise _leak(program, program.loc)
        stack.extend([n.x] if isinstance(n, ir.Pipeline) else ir.children(n))


def _is_stage_input(n) -> bool:
    return isinstance(n, ir.Input) and n.name.startswith("%pipe")


def _nested(inp, body) -> bool:
    """Whether `inp` is the input of a stage of a pipeline nested in `body`."""
    return any(inp in p.params for p in pipelines([body]))


def _leak(program, loc):
    return TraceError(
        f"kernel '{program.name}' uses a value computed inside a hw.pipeline stage outside that stage; "
        f"a stage's values reach the rest of the kernel only through the pipeline's result",
        loc,
    )


def pipelines(roots) -> list:
    """The Pipeline nodes `roots` use."""
    seen: set = set()
    return [n for r in roots for n in ir.walk(r, seen) if isinstance(n, ir.Pipeline)]


def check(node: ir.Pipeline, mesh, kernel: str) -> None:
    """The pipeline fits the kernel's mesh: its axis is one of the mesh's, with one PE per stage."""
    if mesh is None:
        raise TraceError(
            f"hw.pipeline runs on a mesh, but kernel '{kernel}' has none; declare it with @hw.kernel(mesh=...)",
            node.loc,
        )
    if node.axis not in mesh.axis_names:
        raise TraceError(
            f"hw.pipeline axis {node.axis!r} is not an axis of the kernel's mesh {mesh.describe()}", node.loc
        )
    if len(node.params) != mesh.shape[node.axis]:
        raise TraceError(
            f"hw.pipeline has {len(node.params)} stage(s) but mesh axis '{node.axis}' has "
            f"{mesh.shape[node.axis]} PEs; give one stage per PE along the axis",
            node.loc,
        )


def run_pipeline(node: ir.Pipeline, ev) -> np.ndarray:
    """The golden model: every micro-batch through every stage (interp.Evaluator each), joined."""
    from ..interp import Evaluator

    x = ev.array(node.x)
    rows = x.shape[0] // node.microbatches
    outs = []
    for m in range(node.microbatches):
        h = np.ascontiguousarray(x[m * rows : (m + 1) * rows])
        for inp, body in zip(node.params, node.bodies):
            stage = Evaluator({**ev.args, inp.name: h})
            stage.arrays = dict(ev.arrays)  # the global arrays computed so far
            h = stage.array(body)
        outs.append(h)
    return np.concatenate(outs, axis=0)
