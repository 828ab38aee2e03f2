"""The pattern-level dataflow graph: which pattern produces and consumes which array.

Nodes are kernel inputs, patterns (each Map and Reduce) and results; an edge a -> b means b
uses a's value. The graph orders the patterns (producers first) and is printed by
`hwgen build --show-ir` and `kernel.show_ir()`.
"""

from __future__ import annotations

import networkx as nx

from . import ir
from .loops import _expr_str


def _direct_uses(expr):
    """Inputs and patterns that `expr` uses, without looking inside those patterns."""
    seen, stack = set(), list(ir.children(expr)) if isinstance(expr, (ir.Map, ir.Reduce)) else [expr]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if isinstance(n, (ir.Map, ir.Reduce, ir.Input)):
            yield n
            continue
        if isinstance(n, ir.Read):
            stack.append(n.src)
        stack.extend(c for c in ir.children(n) if not isinstance(c, ir.ArrayNode))


def dataflow(program) -> nx.DiGraph:
    g = nx.DiGraph()
    names: dict = {}

    def label(node) -> str:
        if node not in names:
            if isinstance(node, ir.Input):
                names[node] = f"input {node.name}"
            else:
                kind = "map" if isinstance(node, ir.Map) else "reduce"
                dims = ", ".join(f"{d.name}<{d.extent}" for d in node.dims)
                names[node] = f"{kind}{sum(1 for v in names.values() if not v.startswith('input'))}[{dims}]"
            g.add_node(names[node], kind=type(node).__name__.lower())
            if isinstance(node, (ir.Map, ir.Reduce)):
                for u in _direct_uses(node):
                    g.add_edge(label(u), names[node])
        return names[node]

    for r in program.results:
        out = f"result {r.port.name}"
        g.add_node(out, kind="result")
        uses = [r.node] if isinstance(r.node, (ir.Map, ir.Reduce)) else list(_direct_uses(r.node))
        for u in uses:
            g.add_edge(label(u), out)
    return g


def show(program) -> str:
    """The kernel's results, their pattern expressions and the dataflow graph, as text."""
    g = dataflow(program)
    lines = [f"kernel {program.name}"]
    for p in program.params:
        lines.append(f"  param {p.name}: {p.describe()}")
    for r in program.results:
        lines.append(f"  result {r.port.name}: {r.port.describe()}")
        if isinstance(r.node, ir.Map):
            dims = ", ".join(f"{d.name}<{d.extent}" for d in r.node.dims)
            lines.append(f"    = map[{dims}] {_expr_str(r.node.body)}")
        else:
            lines.append(f"    = {_expr_str(r.node)}")
    lines.append("  dataflow (producer -> consumer), producers first:")
    for n in nx.topological_sort(g):
        for succ in sorted(g.successors(n)):
            lines.append(f"    {n} -> {succ}")
    return "\n".join(lines)
