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
    Concat(parts, axis)     numpy's concatenate of array nodes along `axis` (built only as a
                            kernel's or a mesh body's result: each part stored in its place)
    Roll(x, shift)          numpy's roll of `x` by `shift` (a scalar Expr) along axis 0
                            (built only as a mesh body's result, see mesh/hardware.py)

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
    Pipeline(x, params, bodies, microbatches, axis, dtype, shape)
                            hw.pipeline: `x` split along dimension 0 into `microbatches`
                            equal parts, each passed through the stages in turn (stage k's
                            `bodies[k]` reads its input as the Input `params[k]`), the parts'
                            results joined along dimension 0 (golden model: mesh/pipeline.py)

Both operands of a Binary already have the node's operand dtype (comparisons: the promoted
dtype; shifts and arithmetic: the result dtype); the tracer inserts the Casts. Nodes compare
and hash by structure (so equal subtrees are shared); `loc`, the user's source line, does not
take part. Adding a node means adding its rule to interp.py and its lowering in the same change
(mesh nodes: their golden model is hwgen/mesh/spmd.py; they have no lowering yet, and building a
mesh kernel is refused, see hwgen/mesh/checks.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Callable

from .errors import Loc
from .lang.dtypes import DType, bool_, int64

ARITH = ("add", "sub", "mul", "floordiv", "mod", "and", "or", "xor", "shl", "shr", "max", "min")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "invert", "abs")
REDUCE_OPS = {"+": "add", "*": "mul", "max": "max", "min": "min", "&": "and", "|": "or", "^": "xor"}


class Node:
    """Base of all IR nodes: frozen dataclasses with a cached structural hash."""

    __slots__ = ()

    def __post_init__(self):
        key = (type(self).__name__,) + tuple(getattr(self, name) for name in _compared_fields(type(self)))
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if type(self) is not type(other) or self._hash != other._hash:
            return False
        a, b = _representative(self), _representative(other)
        if a is b:
            return True
        if all(getattr(a, name) == getattr(b, name) for name in _compared_fields(type(self))):
            object.__setattr__(b, "_same", a)  # equal for good (nodes are immutable): next time, at once
            return True
        return False


def _representative(node: Node) -> Node:
    """The node that stands for every node found equal to `node` so far (union-find: the
    compilation builds equal trees as distinct objects and compares them again and again)."""
    while True:
        nxt = node.__dict__.get("_same")
        if nxt is None:
            return node
        after = nxt.__dict__.get("_same")
        if after is not None:
            object.__setattr__(node, "_same", after)  # path halving
        node = nxt


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
    checked: tuple = ()  # axes whose subscript comes from data: checked at run time
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
class Concat(ArrayNode):
    parts: tuple
    axis: int
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.parts[0].dtype

    @property
    def shape(self) -> tuple:
        shape = list(self.parts[0].shape)
        shape[self.axis] = sum(q.shape[self.axis] for q in self.parts)
        return tuple(shape)

    def offsets(self) -> tuple:
        """Where each part starts along the axis."""
        out, at = [], 0
        for q in self.parts:
            out.append(at)
            at += q.shape[self.axis]
        return tuple(out)

    @staticmethod
    def used(roots) -> list:
        """The concatenations under `roots` that a node other than a concatenation, a roll or
        a collective uses (a read, a multifold's init): the ones that must exist as arrays."""
        found, seen, stack = {}, set(), list(roots)
        while stack:
            n = stack.pop()
            if id(n) in seen or n is None:
                continue
            seen.add(id(n))
            kids = children(n)
            if not isinstance(n, (Concat, Roll, Collective)):
                found.update((id(c), c) for c in kids if isinstance(c, Concat))
            stack.extend(kids)
        return list(found.values())

    def placed(self) -> tuple:
        """(part, origin) for every part that is not itself a concatenation (nested ones are
        flattened, in order): `origin` is where the part's element 0 sits in the whole."""
        out = []
        for q, at in zip(self.parts, self.offsets()):
            inner = q.placed() if isinstance(q, Concat) else ((q, (0,) * len(q.shape)),)
            for leaf, origin in inner:
                out.append((leaf, tuple(o + at if d == self.axis else o for d, o in enumerate(origin))))
        return tuple(out)


@_node
class Roll(ArrayNode):
    x: ArrayNode
    shift: Expr
    loc: Loc | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> DType:
        return self.x.dtype

    @property
    def shape(self) -> tuple:
        return self.x.shape


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
class Pipeline(ArrayNode):
    """hw.pipeline (see the module docstring): one stage per PE along mesh `axis`."""

    x: ArrayNode
    params: tuple
    bodies: tuple
    microbatches: int
    axis: str
    dtype: DType
    shape: tuple
    loc: Loc | None = field(default=None, compare=False, repr=False)


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


@functools.cache
def _compared_fields(cls) -> tuple:
    """The names of a node class's fields that take part in equality and hashing (sub-nodes
    among them), in field order."""
    return tuple(f.name for f in fields(cls) if f.compare)


def children(node: Node) -> tuple:
    """The direct sub-nodes of `node` (Exprs, Dims, array nodes), in field order (kept on the
    node after the first call: nodes are immutable)."""
    found = node.__dict__.get("_children")
    if found is not None:
        return found
    out = []
    for name in _compared_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, Node))
    out = tuple(out)
    object.__setattr__(node, "_children", out)
    return out


def holds(node: Node, test: Callable[[Node], bool]) -> bool:
    """Whether `test` is true of `node` or of a node below it. Kept on each node per `test`
    (pass the same function object each time: a module-level one): nodes are immutable, and
    the lowering asks of the same trees under every schedule."""
    cache = node.__dict__.get("_holds")
    if cache is None:
        cache = {}
        object.__setattr__(node, "_holds", cache)
    found = cache.get(test)
    if found is None:
        found = test(node) or any(holds(c, test) for c in children(node))
        cache[test] = found
    return found


def rebuild(node: Node, fn: Callable[[Node], Node]) -> Node:
    """A copy of `node` with `fn` applied to each direct sub-node (same object if unchanged)."""
    changes = {}
    for name in _compared_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            new = fn(value)
        elif isinstance(value, tuple):
            new = tuple(fn(v) if isinstance(v, Node) else v for v in value)
        else:
            continue
        if new is not value and new != value:
            changes[name] = new
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
    """Replace the free Index(name) by mapping[name] (an Expr) everywhere in `expr`.

    Capture-avoiding: an index bound inside `expr` (by a Reduce, a Map, a MultiFold or a
    Collect) shadows the mapping, and a bound index whose name occurs free in a substituted
    value is renamed first (see `fresh_name`), so `h[n, i]` inlined into a body that binds its
    own `i` keeps both loops apart."""
    if not mapping:
        return expr

    return _subst(expr, dict(mapping), frozenset(mapping), {})


def _subst(n: Node, sub: dict, names: frozenset, memo: dict) -> Node:
    """subst_indices of `n` (names: sub's keys; memo: the nodes done). A module-level
    function, not a closure: a recursive closure is a reference cycle, which keeps what it
    made alive until the cycle collector runs (the lowering calls this thousands of times)."""
    found = memo.get(n)
    if found is not None:
        return found
    if names.isdisjoint(free_indices(n)):  # nothing to replace below (kept whole)
        out = n
    elif isinstance(n, Index):
        out = sub.get(n.name, n)
    elif isinstance(n, (Reduce, Map, MultiFold, Collect)):
        out = _subst_binder(n, sub)
    else:
        out = rebuild(n, lambda c: _subst(c, sub, names, memo))
    memo[n] = out
    return out


def _binder_dims(n: Node) -> tuple:
    return n.dims + n.sdims if isinstance(n, MultiFold) else n.dims


def _subst_binder(n: Node, sub: dict) -> Node:
    """subst_indices into a node binding its dims: the dims shadow `sub`; a dim captured by a
    value of `sub` is renamed."""
    dims = _binder_dims(n)
    bound = {d.name for d in dims}
    free = (
        free_indices(n)
        if not isinstance(n, MultiFold)
        else frozenset().union(*[free_indices(e) for e in n.idx + (n.value,)]) - bound
    )
    inner = {k: v for k, v in sub.items() if k in free}
    if isinstance(n, MultiFold):  # init is outside the binding
        init = subst_indices(n.init, sub)
    if not inner:
        return n if not isinstance(n, MultiFold) or init is n.init else _replace(n, init=init)
    captured = frozenset().union(*[free_indices(v) for v in inner.values()]) & bound
    if captured:
        taken = set(captured) | names_in(n) | set(inner)
        for v in inner.values():
            taken |= names_in(v)
        rename = {}
        for d in dims:
            if d.name in captured:
                rename[d.name] = fresh_name(d.name, taken)
                taken.add(rename[d.name])
        inner = {**inner, **{k: Index(v) for k, v in rename.items()}}
        dims = tuple(Dim(rename.get(d.name, d.name), d.extent) for d in dims)
    if isinstance(n, MultiFold):
        k = len(n.dims)
        return _replace(
            n,
            dims=dims[:k],
            sdims=dims[k:],
            init=init,
            idx=tuple(subst_indices(i, inner) for i in n.idx),
            value=subst_indices(n.value, inner),
        )
    if isinstance(n, Collect):
        return _replace(
            n,
            dims=dims,
            key=None if n.key is None else subst_indices(n.key, inner),
            values=tuple(subst_indices(v, inner) for v in n.values),
            conds=tuple(subst_indices(c, inner) for c in n.conds),
        )
    return _replace(n, dims=dims, body=subst_indices(n.body, inner))


def _replace(n: Node, **changes) -> Node:
    kwargs = {f.name: getattr(n, f.name) for f in fields(n)}
    kwargs.update(changes)
    new = type(n)(**kwargs)
    return n if new == n else new


def names_in(expr: Node) -> set:
    """Every index name in `expr`, free or bound."""
    out = set()
    for n in walk(expr):
        if isinstance(n, Index):
            out.add(n.name)
        elif isinstance(n, Dim):
            out.add(n.name)
    return out


def fresh_name(name: str, taken: set) -> str:
    """`name` renamed apart from `taken`: 'i' -> 'i.1', 'i.2', ...; 'i.1' -> 'i.1.1', ... The
    schedule still names it by `schedule_name`; a name keeps the extent of the index it came
    from (the lowering sizes counters by name)."""
    k = 1
    while f"{name}.{k}" in taken:
        k += 1
    return f"{name}.{k}"


def schedule_name(name: str) -> str:
    """The index name a schedule uses for `name`: a copy 'i.1' of 'i' (renamed apart, or the same
    lambda traced over another extent) is scheduled as 'i'."""
    return name.split(".", 1)[0]


def unique_binders(expr: Node) -> Node:
    """`expr` with every index bound inside another binding of the same name renamed apart
    (a helper whose reduction nests in its own reduction): the lowering turns each binding
    into a loop counter named after it, so nested loops need distinct names."""
    taken = names_in(expr)
    memo: dict = {}

    def go(n: Node, scope: frozenset) -> Node:
        key = (n, scope)
        found = memo.get(key)
        if found is not None:
            return found
        if isinstance(n, (Reduce, Map, MultiFold, Collect)):
            dims = _binder_dims(n)
            clash = [d for d in dims if d.name in scope]
            if clash:
                rename = {}
                for d in clash:
                    rename[d.name] = fresh_name(d.name, taken)
                    taken.add(rename[d.name])
                new_dims = tuple(Dim(rename.get(d.name, d.name), d.extent) for d in dims)
                values = {k: Index(v) for k, v in rename.items()}
                if isinstance(n, MultiFold):
                    k = len(n.dims)
                    n = _replace(
                        n,
                        dims=new_dims[:k],
                        sdims=new_dims[k:],
                        idx=tuple(subst_indices(i, values) for i in n.idx),
                        value=subst_indices(n.value, values),
                    )
                elif isinstance(n, Collect):
                    n = _replace(
                        n,
                        dims=new_dims,
                        key=None if n.key is None else subst_indices(n.key, values),
                        values=tuple(subst_indices(v, values) for v in n.values),
                        conds=tuple(subst_indices(c, values) for c in n.conds),
                    )
                else:
                    n = _replace(n, dims=new_dims, body=subst_indices(n.body, values))
                dims = new_dims
            inner = scope | {d.name for d in dims}
            if isinstance(n, MultiFold):
                out = _replace(
                    n, init=go(n.init, scope), idx=tuple(go(i, inner) for i in n.idx), value=go(n.value, inner)
                )
            else:
                out = rebuild(n, lambda c: c if isinstance(c, Dim) else go(c, inner))
        else:
            out = rebuild(n, lambda c: go(c, scope))
        memo[key] = out
        return out

    return go(expr, frozenset())


def subst_params(expr: Node, mapping: dict) -> Node:
    """Replace Param(name) by mapping[name] everywhere in `expr`."""
    return transform(expr, lambda n: mapping.get(n.name) if isinstance(n, Param) else None)


def free_indices(expr: Node) -> frozenset:
    """Names of index variables used in `expr` and not bound by a Reduce or Map inside it
    (kept on each node: nodes are immutable, and the lowering asks again and again)."""
    found = expr.__dict__.get("_free")
    if found is not None:
        return found
    go = free_indices  # recursion on the module-level function (no closure: see _subst)
    n = expr
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
    object.__setattr__(n, "_free", out)
    return out


def is_compare(op: str) -> bool:
    return op in COMPARE


def result_is_bool(e: Expr) -> bool:
    return e.dtype == bool_
