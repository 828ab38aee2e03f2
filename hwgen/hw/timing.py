"""Pipeline timing of a Pipe's datapath: at which stage each expression node is computed.

Pure Python (no Amaranth), shared by the datapath builder and the cycle model, so the model
counts exactly the registers the hardware has. Scheduling is as-soon-as-possible with
chaining: a node is computed in the stage of its latest operand unless the combinational
depth in that stage would exceed `BUDGET`, in which case it moves one stage later (its
operands are registered). Multipliers register their result (latency 1); reads of register
memories are combinational; a SRAM read takes one cycle.

Depth units: one 32-bit adder is 2, a LUT level (logic, a 2:1 mux) is 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir

BUDGET = 6

_REGISTERED = {"mul": 1, "floordiv": 1, "mod": 1}  # latency of ops with an output register


def op_cost(node) -> int:
    """Combinational depth added by `node`."""
    wide = getattr(node, "dtype", None) is not None and node.dtype.bits > 32
    if isinstance(node, ir.Binary):
        if node.op in ("add", "sub") or node.op in ir.COMPARE:
            return 3 if wide else 2
        if node.op in ("max", "min"):
            return 4 if wide else 3
        if node.op in ("shl", "shr"):
            return 2
        if node.op in ("and", "or", "xor"):
            return 1
        return 0  # registered ops: their cost is their latency
    if isinstance(node, ir.Unary):
        return 0 if node.op == "invert" else (3 if wide else 2)
    if isinstance(node, ir.Select):
        return 1
    if isinstance(node, ir.Cast):
        return 1 if node.dtype.is_bool and not node.a.dtype.is_bool else 0
    return 0


def mux_cost(size: int) -> int:
    """Depth of reading one of `size` registers by a computed address."""
    if size <= 1:
        return 0
    if size <= 4:
        return 1
    if size <= 16:
        return 2
    return 3


@dataclass
class Timing:
    """`stage[node]`: the cycle after issue in which `node`'s value is produced;
    `depth[node]`: its combinational depth within that stage. Static nodes (constants,
    parameters, counters of enclosing loops) hold still during the pipe: stage 0, depth 0."""

    stage: dict = field(default_factory=dict)
    depth: dict = field(default_factory=dict)

    def ready(self, node) -> tuple:
        return self.stage[node], self.depth[node]


def _operands(node) -> tuple:
    if isinstance(node, ir.MemRead):
        return tuple(node.idx)
    return ir.children(node)


def place(timing: Timing, operands, cost: int, latency: int = 0) -> tuple:
    """(stage, depth) of a node with `operands`, combinational `cost` and output `latency`."""
    return place_at([timing.ready(o) for o in operands], cost, latency)


def place_at(ready, cost: int, latency: int = 0) -> tuple:
    """(stage, depth) of a value computed from inputs ready at `ready` ((stage, depth) pairs)."""
    s, d = 0, 0
    for os_, od in ready:
        if os_ > s:
            s, d = os_, od
        elif os_ == s:
            d = max(d, od)
    if d + cost > BUDGET and d > 0:
        s, d = s + 1, 0
    d += cost
    if latency:
        s, d = s + latency, 0
    return s, d


def schedule(exprs, mem_latency, mem_size) -> Timing:
    """Schedule every node of `exprs`. `mem_latency(mem)` / `mem_size(mem)` describe reads."""
    timing = Timing()

    def visit(node):
        if node in timing.stage:
            return
        for o in _operands(node):
            visit(o)
        if isinstance(node, ir.MemRead):
            lat = mem_latency(node.mem)
            s, d = place(timing, node.idx, mux_cost(mem_size(node.mem)) if lat == 0 else 0, lat)
        elif isinstance(node, ir.Binary) and node.op in _REGISTERED:
            s, d = place(timing, (node.a, node.b), 0, _REGISTERED[node.op])
        else:
            s, d = place(timing, _operands(node), op_cost(node))
        timing.stage[node] = s
        timing.depth[node] = d

    for e in exprs:
        visit(e)
    return timing


def combine_cost(op: ir.Combiner, dtype) -> int:
    """Depth of an accumulator update `first ? v : op(old, v)` within the write stage (it
    must fit one cycle for one update per cycle; a multiplier counts as a whole stage)."""
    if op.expr is None:
        if op.op in _REGISTERED:
            return BUDGET + 1
        probe = ir.Binary(op.op, ir.Param("%a", dtype), ir.Param("%b", dtype), dtype)
        return op_cost(probe) + 1
    total = 1
    for n in ir.walk(op.expr):
        is_slow = isinstance(n, ir.Binary) and n.op in _REGISTERED
        total += BUDGET if is_slow else op_cost(n)
    return total


@dataclass
class WritePlan:
    """Where one write of a pipe happens: `tree` holds (stage, depth) of each level of the
    reduction tree over its lanes; the accumulator update and the write happen in `stage`."""

    tree: list
    stage: int


def write_plan(timing: Timing, w, reduce_lanes: int, mem_latency: int, mem_size: int) -> WritePlan:
    """Plan one loops.Write whose value is combined over `reduce_lanes` lanes by a tree."""
    ready = timing.ready(w.value)
    tree = []
    lanes = reduce_lanes
    cost = combine_cost(w.op, w.mem.dtype) - 1 if w.op is not None else 0
    while lanes > 1:
        ready = place_at([ready], min(cost, BUDGET))
        tree.append(ready)
        lanes = -(-lanes // 2)
    idx = [timing.ready(i) for i in w.idx]
    if w.op is None:
        stage, _ = place_at([ready] + idx, 0)
        return WritePlan(tree, stage)
    first = [timing.ready(w.first)]
    update = min(combine_cost(w.op, w.mem.dtype) + (mux_cost(mem_size) if mem_latency == 0 else 0), BUDGET)
    stage, _ = place_at([ready] + idx + first, update)
    if mem_latency:
        idx_stage = max((s for s, _ in idx), default=0)
        stage = max(stage, idx_stage + mem_latency)
    return WritePlan(tree, stage)
