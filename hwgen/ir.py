"""The pattern IR: immutable nodes, one screen.

Scalar expressions (each has a `dtype`):
    Const(value)            a typed constant
    Param(name)             a scalar kernel argument (also `%a`/`%b`, the operands of a combiner)
    Index(name)             the value of an index variable (int64)
    Read(src, idx)          element `src[idx]` of an array node (Input or Map); idx are Exprs
    MemRead(mem, idx)       element of an on-chip memory (only after lowering; see loops.py)
    Unary(op, a)            neg | invert | abs
    Binary(op, a, b)        add sub mul floordiv mod and or xor shl shr | eq ne lt le gt ge | max min
    Cast(a)                 numpy astype: wrap, sign/zero-extend, `!= 0` to bool
    Select(cond, a, b)      hw.where
    Table(values, index)    a constant table read at a computed index (0 <= index < len)
    Reduce(dims, body, op)  fold `body` over `dims` with `op` (a Combiner), in `body`'s dtype

Array nodes (each has a `dtype` and a `shape`):
    Input(name)             an array argument (lives in DRAM)
    Map(dims, body)         the array of `body` over `dims`
    MultiFold(dims, sdims, init, idx, value, op)
                            start from `init`; for each point of `dims` (in order) and each
                            point of the slice `sdims`, acc[idx] = op(acc[idx], value)
    Collect(dims, kind, ...) a group-by fold (kind "group": key, values, op, max_keys) or a
                            compaction (kind "append": values kept where their conditions
                            hold); its parts are read through Part(collect, "keys" | "values"
                            | "count") (arrays, and a scalar Expr for "count")

Mesh nodes (a kernel on a mesh of processing elements, PEs; see hwgen/mesh/):
    ShardMap(mesh, in_specs, out_specs, args, params, body)
                            a per-PE program: global `args` are split by `in_specs` into the
                            local Inputs `params`; every PE evaluates the `body` nodes; the
                            local results are joined by `out_specs`. Not an array itself; read
                            through ShardOut(shard_map, index) (a global array, 0-d for a scalar)
    Collective(kind, axes, params, operand, shape)
                            inside a body only: psum | pmax | pmin | all_gather | psum_scatter
                            | ppermute | all_to_all of the PE's `operand` (an array node, 0-d for
                            a scalar) over the PEs that differ only on mesh `axes` (major first)
    Param("%axis.<name>")   inside a body: the PE's int32 coordinate on mesh axis <name>

Both operands of a Binary already have the node's operand dtype (comparisons: the promoted
dtype; shifts and arithmetic: the result dtype); the tracer inserts the Casts. Nodes compare
and hash by structure (so equal subtrees are shared); `loc`, the user's source line, does not
take part. Adding a node means adding its rule to interp.py and its lowering in the same change
(mesh nodes: their golden model is hwgen/mesh/spmd.py; they have no lowering yet, and building a
mesh kernel is refused, see hwgen/mesh/checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable

from .dtypes import DType, bool_, int64
from .errors import Loc

ARITH = ("add", "sub", "mul", "floordiv", "mod", "and", "or", "xor", "shl", "shr", "max", "min")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "invert", "abs")
REDUCE_OPS = {"+": "add", "*": "mul", "max": "max", "min": "min", "&": "and", "|": "or", "^": "xor"}


class Node:
    """Base of all IR nodes: frozen dataclasses with a cached structural hash."""

    __slots__ = ()

    def __post_init__(self):
        key = (type(self).__name__,) + tuple(getattr(self, f.name) for f in fields(self) if f.compare)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if type(self) is not type(other) or self._hash != other._hash:
            return False
        return all(
            getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.compare
        )


def _node(cls):
    return dataclass(frozen=True, eq=False)(cls)


@_node
class Dim(Node):
    """An index variable and its extent: iterates 0 .. extent-1."""

    name: str
    extent: int


class Expr(Node):
    """A scalar-valued node."""


@_node
class Const(Expr):
    value: int
    dtype: DType


@_node
class Param(Expr):
    name: str
    dtype: DType


@_node
class Index(Expr):
    name: str
    dtype: DType = int64


@_node
class Read(Expr):
    src: "ArrayNode"
    idx: tuple
    loc: Loc | None = field(default=None, compare=False, repr=False)
    text: str = field(default="", compare=False, repr=False)  # as the user wrote it: x[i + 1]

    @property
    def dtype(self) -> DType:
        return self.src.dtype


@_node
class MemRead(Expr):
    mem: object  # loops.Mem
    idx: tuple
    source: str = field(default="", compare=False, repr=False)  # the user's read it replaces

    @property
    def dtype(self) -> DType:
        return self.mem.dtype


@_node
class Unary(Expr):
    op: str
    a: Expr
    dtype: DType


@_node
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType


@_node
class Cast(Expr):
    a: Expr
    dtype: DType


@_node
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType


@_node
class Table(Expr):
    values: tuple
    index: Expr
    dtype: DType


@_node
class Combiner(Node):
    """A reduction operator: a builtin `op` name (see REDUCE_OPS), or `expr`, a traced
    associative function of Param('%a') and Param('%b')."""

    op: str
    expr: Expr | None = None

    def apply(self, a: Expr, b: Expr) -> Expr:
        if self.expr is None:
            return Binary(self.op, a, b, a.dtype)
        return subst_params(self.expr, {"%a": a, "%b": b})


@_node
class Reduce(Expr):
    dims: tuple
    body: Expr
    op: Combiner
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.body.dtype


class ArrayNode(Node):
    """An array-valued node."""


@_node
class Input(ArrayNode):
    name: str
    dtype: DType
    shape: tuple


@_node
class Map(ArrayNode):
    dims: tuple
    body: Expr
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.body.dtype

    @property
    def shape(self) -> tuple:
        return tuple(d.extent for d in self.dims)


@_node
class MultiFold(ArrayNode):
    dims: tuple
    sdims: tuple
    init: ArrayNode
    idx: tuple
    value: Expr
    op: Combiner
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.init.dtype

    @property
    def shape(self) -> tuple:
        return self.init.shape


@_node
class Collect(Node):
    """kind "group": for each point of `dims` in order, the pair (key, values) joins the group
    of its key (groups in order of first appearance, at most `max_keys`), values folded with
    `op`. kind "append": for each point in order, each (cond, value) pair of `conds`/`values`
    appends value where cond holds (at most `capacity` values)."""

    kind: str
    dims: tuple
    key: Expr | None
    values: tuple
    conds: tuple
    op: Combiner | None
    capacity: int
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def value_dtype(self) -> DType:
        return self.values[0].dtype


@_node
class Part(ArrayNode):
    """An array part of a Collect: "keys" (capacity,), or "values" (capacity[, width])."""

    collect: Collect
    part: str

    @property
    def dtype(self) -> DType:
        return self.collect.key.dtype if self.part == "keys" else self.collect.value_dtype

    @property
    def shape(self) -> tuple:
        width = len(self.collect.values) if self.collect.kind == "group" and self.part == "values" else 1
        return (self.collect.capacity,) if width == 1 else (self.collect.capacity, width)


@_node
class Count(Expr):
    """How many groups (or appended values) a Collect holds: an int64 scalar."""

    collect: Collect
    dtype: DType = int64


@_node
class ShardMap(Node):
    """A per-PE program (see the module docstring). `mesh` is an hw.Mesh, `in_specs` and
    `out_specs` tuples of hw.P (one per arg / body result), `params` the body's local Inputs."""

    mesh: object
    in_specs: tuple
    out_specs: tuple
    args: tuple
    params: tuple
    body: tuple
    loc: Loc | None = field(default=None, compare=False, repr=False)


@_node
class ShardOut(ArrayNode):
    """Result `index` of a ShardMap, as a global array."""

    shard_map: ShardMap
    index: int
    dtype: DType
    shape: tuple


@_node
class Collective(ArrayNode):
    """A collective over mesh `axes` inside a ShardMap body; `params` holds its static
    arguments as sorted (name, value) pairs; `shape` is the PE's result shape."""

    kind: str
    axes: tuple
    params: tuple
    operand: ArrayNode
    shape: tuple
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.operand.dtype

    def param(self, name: str):
        return dict(self.params)[name]


# ---------------------------------------------------------------- generic traversal


def children(node: Node) -> tuple:
    """The direct sub-nodes of `node` (Exprs, Dims, array nodes), in field order."""
    out = []
    for f in fields(node):
        if not f.compare:
            continue
        value = getattr(node, f.name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, Node))
    return tuple(out)


def rebuild(node: Node, fn: Callable[[Node], Node]) -> Node:
    """A copy of `node` with `fn` applied to each direct sub-node (same object if unchanged)."""
    changes = {}
    for f in fields(node):
        if not f.compare:
            continue
        value = getattr(node, f.name)
        if isinstance(value, Node):
            new = fn(value)
        elif isinstance(value, tuple):
            new = tuple(fn(v) if isinstance(v, Node) else v for v in value)
        else:
            continue
        if new is not value and new != value:
            changes[f.name] = new
    if not changes:
        return node
    kwargs = {f.name: getattr(node, f.name) for f in fields(node)}
    kwargs.update(changes)
    return type(node)(**kwargs)


def transform(node: Node, fn: Callable[[Node], Node | None], memo: dict | None = None) -> Node:
    """Bottom-up rewrite: children first, then `fn(node)` (None keeps the node)."""
    memo = {} if memo is None else memo
    found = memo.get(node)
    if found is not None:
        return found
    new = rebuild(node, lambda c: transform(c, fn, memo))
    result = fn(new)
    result = new if result is None else result
    memo[node] = result
    return result


def walk(node: Node, seen: set | None = None):
    """Every node reachable from `node`, each once, parents before children."""
    seen = set() if seen is None else seen
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        yield n
        stack.extend(reversed(children(n)))


def subst_indices(expr: Node, mapping: dict) -> Node:
    """Replace Index(name) by mapping[name] (an Expr) everywhere in `expr`."""
    if not mapping:
        return expr
    return transform(expr, lambda n: mapping.get(n.name) if isinstance(n, Index) else None)


def subst_params(expr: Node, mapping: dict) -> Node:
    """Replace Param(name) by mapping[name] everywhere in `expr`."""
    return transform(expr, lambda n: mapping.get(n.name) if isinstance(n, Param) else None)


def free_indices(expr: Node) -> frozenset:
    """Names of index variables used in `expr` and not bound by a Reduce or Map inside it."""
    memo: dict = {}

    def go(n: Node) -> frozenset:
        if n in memo:
            return memo[n]
        if isinstance(n, Index):
            out = frozenset([n.name])
        elif isinstance(n, (Reduce, Map)):
            out = go(n.body) - {d.name for d in n.dims}
        elif isinstance(n, MultiFold):
            inner = frozenset().union(go(n.value), *[go(i) for i in n.idx])
            out = go(n.init) | (inner - {d.name for d in n.dims + n.sdims})
        elif isinstance(n, Collect):
            parts = [n.key] if n.key is not None else []
            inner = frozenset().union(*[go(e) for e in parts + list(n.values) + list(n.conds)])
            out = inner - {d.name for d in n.dims}
        else:
            out = frozenset().union(*[go(c) for c in children(n)]) if children(n) else frozenset()
        memo[n] = out
        return out

    return go(expr)


def is_compare(op: str) -> bool:
    return op in COMPARE


def result_is_bool(e: Expr) -> bool:
    return e.dtype == bool_
