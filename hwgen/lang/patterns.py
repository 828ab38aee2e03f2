"""The parallel patterns: hw.map, hw.reduce / sum / max / min, hw.multifold, hw.groupby_fold,
hw.filter, hw.flatmap (with hw.emit), hw.argmin / hw.argmax, and '@' (matmul).

Each pattern binds its lambda's parameters to new index variables of the current trace, named
after the parameters (schedules refer to them), calls the lambda once on those symbolic
indices, and returns a traced value backed by the IR node it records (ir.Map, ir.Reduce,
ir.MultiFold, ir.Collect). Mistakes raise TraceError / TypeMismatchError at the user's line.
Builds on context.py, scalars.py and arrays.py; hwgen re-exports the public names.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from .. import ir
from ..errors import TraceError, TypeMismatchError, user_loc
from ..ranges import value_range
from . import fixedpoint
from .arrays import ArrayVal, _broadcast, _index_val, _norm_shape, _strong
from .context import current
from .dtypes import DType, bool_, int64
from .scalars import Val, _meet, binary, cast, const, maximum, minimum


def _domain(domain, what: str) -> tuple:
    return _norm_shape(domain, f"the domain of {what}")


def _bind(fn, shape: tuple, what: str) -> tuple:
    """Create the index variables of `fn`'s parameters over `shape`; returns (dims, vals)."""
    loc = user_loc()
    if not callable(fn):
        raise TraceError(f"{what} expects a function (lambda) of the indices, got {fn!r}", loc)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise TraceError(f"cannot read the parameters of {fn!r}", loc) from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != len(params) or len(positional) != len(shape):
        names = ", ".join(p.name for p in params)
        raise TraceError(
            f"the function given to {what} takes {len(params)} argument(s) ({names}) but its "
            f"domain {shape if len(shape) > 1 else shape[0]} has {len(shape)} dimension(s); "
            f"give one index parameter per dimension",
            loc,
        )
    trace = current(what)
    code = getattr(fn, "__code__", None)
    dims = tuple(trace.new_dim(p.name, n, loc, code) for p, n in zip(params, shape))
    return dims, tuple(_index_val(d) for d in dims)


def _single(body, what: str, loc):
    """The value a map or reduce body returns: a scalar or an array, never a tuple."""
    if isinstance(body, (tuple, list)):
        raise TraceError(
            f"the function given to {what} returns a {type(body).__name__} of {len(body)} values; it "
            f"must return one scalar or array: write one {what.split()[0]} per value, or return "
            f"an array (hw.map(n, lambda c: ...)) to get a column each",
            loc,
        )
    if body is None:
        raise TraceError(f"the function given to {what} returns None; return the value (lambda i: x[i])", loc)
    return body


def map_(domain, fn):
    """The array of `fn(*idx)` over `domain`; if `fn` returns an array, its dims are appended."""
    shape = _domain(domain, "hw.map")
    dims, idx = _bind(fn, shape, "hw.map")
    loc = user_loc()
    body = _single(fn(*idx), "hw.map", loc)
    if isinstance(body, ArrayVal):
        trace = current("hw.map")
        inner = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(body.shape))  # the body's axes
        expr = _strong(body.elem(tuple(_index_val(d) for d in inner)), body.dtype)
        node = ir.Map(dims + inner, expr, loc=loc)
        dtype = body.dtype
    else:
        node = ir.Map(dims, _strong(body), loc=loc)
        dtype = body.dtype if fixedpoint.is_fixed(body) else node.dtype
    return ArrayVal(node.shape, dtype, node=node)


def _combiner(op, dtype: DType) -> ir.Combiner:
    if isinstance(dtype, fixedpoint.Fixed):
        return _fixed_combiner(op, dtype)
    if isinstance(op, str):
        if op not in ir.REDUCE_OPS:
            raise TraceError(
                f"unknown reduce op {op!r}; expected one of "
                + " ".join(repr(o) for o in ir.REDUCE_OPS)
                + " or an associative callable(a, b)"
            )
        name = ir.REDUCE_OPS[op]
        if dtype == bool_ and name in ("add", "mul"):
            raise TypeMismatchError(
                f"reducing bool_ values with {op!r} is ambiguous (numpy would count them as "
                f"int64, hwgen accumulates in the values' dtype): use .astype(int32) to count, "
                f"or op '|' / '&' for any / all"
            )
        return ir.Combiner(name)
    if callable(op):
        a = Val(ir.Param("%a", dtype))
        b = Val(ir.Param("%b", dtype))
        try:
            inspect.signature(op).bind(a, b)
        except TypeError:
            raise TraceError(
                "the reduce op must be a function of two arguments (a, b), like lambda a, b: hw.maximum(a, b)"
            ) from None
        except ValueError:
            pass  # a builtin without a signature: call it
        out = op(a, b)
        if isinstance(out, ArrayVal):
            raise TraceError("a reduce op must combine two scalars into a scalar")
        out = const(out)
        if out.dtype != dtype:
            out = Val(_meet(out, dtype, "the reduce op")) if out.weak else out
        if out.dtype != dtype:
            raise TypeMismatchError(
                f"the reduce op returns {out.dtype.name} but the values are {dtype.name}; it must return the same dtype"
            )
        return ir.Combiner("custom", out.expr)
    raise TraceError(f"unknown reduce op {op!r}; expected a string or a callable(a, b)")


def _fixed_combiner(op, fx) -> ir.Combiner:
    """Folds of fixed-point values: + max min (on the raw values: exact for these), or a
    callable traced on fixed-point operands."""
    if isinstance(op, str):
        if op not in ("+", "max", "min"):
            raise TypeMismatchError(
                f"reducing {fx.name} values with {op!r} is not supported; use '+', 'max', 'min' or a callable"
            )
        return ir.Combiner(ir.REDUCE_OPS[op])
    a = Val(ir.Param("%a", fx.storage), fx=fx)
    b = Val(ir.Param("%b", fx.storage), fx=fx)
    out = op(a, b)
    if not (isinstance(out, Val) and out.fx == fx):
        raise TypeMismatchError(f"the reduce op must return a {fx.name} value")
    return ir.Combiner("custom", out.expr)


def reduce(domain, fn, op="+"):
    """Fold `fn(*idx)` over `domain` with `op`; elementwise if `fn` returns an array.

    The fold happens in the dtype of `fn`'s values (like `np.add.reduce(x, dtype=x.dtype)`),
    wrapping on overflow; widen with `.astype` first to accumulate wider.
    """
    shape = _domain(domain, "hw.reduce")
    if isinstance(op, str) and op not in ir.REDUCE_OPS:
        _combiner(op, int64)  # raises the unknown-op error before tracing the body
    dims, idx = _bind(fn, shape, "hw.reduce")
    loc = user_loc()
    body = _single(fn(*idx), "hw.reduce (hw.sum, hw.max, hw.min)", loc)
    if isinstance(body, ArrayVal):
        trace = current("hw.reduce")
        inner = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(body.shape))  # the body's axes
        elem = _strong(body.elem(tuple(_index_val(d) for d in inner)), body.dtype)
        comb = _combiner(op, body.dtype)
        node = ir.Map(inner, ir.Reduce(dims, elem, comb, loc=loc), loc=loc)
        return ArrayVal(node.shape, body.dtype, node=node)
    expr = _strong(body)
    fx = body.fx if fixedpoint.is_fixed(body) else None
    return Val(ir.Reduce(dims, expr, _combiner(op, fx or expr.dtype), loc=loc), fx=fx)


def sum_(domain, fn):
    """`hw.reduce(domain, fn, "+")`."""
    return reduce(domain, fn, "+")


def max_(domain, fn):
    """`hw.reduce(domain, fn, "max")`."""
    return reduce(domain, fn, "max")


def min_(domain, fn):
    """`hw.reduce(domain, fn, "min")`."""
    return reduce(domain, fn, "min")


def multifold(domain, init, fn, op="+"):
    """Start from the array `init`; for each index of `domain` in order, `fn(*idx)` returns
    `(where, value)` and `acc[where] = op(acc[where], value)`. `where` is an index, or a tuple
    of indices and slices, into the accumulator (indices may be data, like an argmin or numpy's
    `np.add.at(acc, idx, val)`; one from data that leaves the accumulator raises
    hw.IndexRangeError at run time, in the golden model and in hardware); `value` is a scalar
    or an array the shape of the slice. Returns
    the accumulator, which lives on chip."""
    shape = _domain(domain, "hw.multifold")
    if not isinstance(init, ArrayVal):
        raise TraceError("hw.multifold's init must be an array (an argument, hw.zeros, hw.full, ...)")
    init_node = init.materialize()
    dims, idx = _bind(fn, shape, "hw.multifold")
    loc = user_loc()
    out = fn(*idx)
    if not isinstance(out, tuple) or len(out) != 2:
        raise TraceError("the function given to hw.multifold must return a pair (where, value)", loc)
    where_, value = out
    keys = where_ if isinstance(where_, tuple) else (where_,)
    if len(keys) > init.ndim:
        raise TraceError(f"hw.multifold: {len(keys)} subscripts for an accumulator of {init.ndim} dimensions", loc)
    keys = keys + (slice(None),) * (init.ndim - len(keys))
    trace = current("hw.multifold")
    slice_shape = tuple(len(range(*k.indices(n))) for k, n in zip(keys, init.shape) if isinstance(k, slice))
    if isinstance(value, ArrayVal) and isinstance(value.node, ir.Map) and value.shape == slice_shape:
        sdims = value.node.dims  # the value's own (named) dims walk the slice
        value_at = lambda sidx: value.elem(sidx)  # noqa: E731
    else:
        sdims = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(slice_shape))  # the slice's axes
        if isinstance(value, ArrayVal):
            _broadcast([value.shape, slice_shape], loc)
            value_at = lambda sidx: value.elem(sidx[len(sidx) - value.ndim :] if value.ndim else ())  # noqa: E731
        else:
            value_at = lambda sidx: value  # noqa: E731
    svals = tuple(_index_val(d) for d in sdims)
    targets, s = [], 0
    for axis, (k, n) in enumerate(zip(keys, init.shape)):
        if isinstance(k, slice):
            start, _, step = k.indices(n)
            targets.append(binary("add", const(start), binary("mul", svals[s], const(step))))
            s += 1
        elif isinstance(k, ArrayVal):
            raise TraceError("hw.multifold: a subscript of `where` must be a scalar or a slice", loc)
        else:
            targets.append(const(k))
    checked = []
    for axis, (t, n) in enumerate(zip(targets, init.shape)):
        lo, hi = value_range(cast(t, int64).expr, trace.extents)
        if (lo < 0 or hi >= n) and _from_data(t.expr):
            checked.append(axis)  # numpy's IndexError, at run time: the golden model and the hardware check
        elif lo < 0 or hi >= n:
            raise TraceError(
                f"hw.multifold: subscript {axis} of `where` takes values in [{lo}, {hi}], outside "
                f"the accumulator's axis of {n}; keep it in range",
                loc,
            )
    elem = value_at(svals)
    dt = init.dtype
    expr = (
        _strong(elem, dt)
        if (isinstance(elem, Val) and (elem.weak or elem.dtype == dt)) or not isinstance(elem, Val)
        else None
    )
    if expr is None:
        raise TypeMismatchError(
            f"hw.multifold: the value is {const(elem).dtype.name} but the accumulator is {dt.name}; "
            f"convert with .astype(...)",
            loc,
        )
    comb = _combiner(op, dt)
    idx = tuple(cast(t, int64).expr for t in targets)
    node = ir.MultiFold(dims, sdims, init_node, idx, expr, comb, tuple(checked), loc=loc)
    return ArrayVal(node.shape, dt, node=node)


_INDEX_ONLY = (ir.Index, ir.Const, ir.Unary, ir.Binary, ir.Cast, ir.Select, ir.Table, ir.Dim)


def _from_data(expr) -> bool:
    """Whether an expression reads data (arrays, parameters, reductions), not only indices."""
    return any(not isinstance(n, _INDEX_ONLY) for n in ir.walk(expr))


MAX_KEYS = 256


def groupby_fold(domain, fn, op="+", max_keys=None):
    """For each index of `domain` in order, `fn(*idx)` returns `(key, value)`; values of equal
    keys are folded with `op`. Returns `(keys, values, count)`: the first `count` entries hold
    each distinct key and its folded value, in order of first appearance; the rest are 0.
    `value` may be a tuple of scalars of one dtype or a 1-D array (several folds at once:
    `values` gets a column each). More than
    `max_keys` distinct keys is a CapacityError (raised by the golden model and by simulation)."""
    shape = _domain(domain, "hw.groupby_fold")
    if isinstance(max_keys, bool) or not isinstance(max_keys, int) or not 1 <= max_keys <= MAX_KEYS:
        raise TraceError(
            f"hw.groupby_fold needs max_keys, an int from 1 to {MAX_KEYS} (the hardware "
            f"compares every key each cycle), got {max_keys!r}"
        )
    dims, idx = _bind(fn, shape, "hw.groupby_fold")
    loc = user_loc()
    out = fn(*idx)
    if not isinstance(out, tuple) or len(out) != 2:
        raise TraceError("the function given to hw.groupby_fold must return a pair (key, value)", loc)
    key, value = out
    key = const(key)
    if key.dtype == bool_ or key.fx is not None:
        raise TypeMismatchError(f"hw.groupby_fold keys must be integers, got {key.dtype.name}", loc)
    if isinstance(value, ArrayVal):
        if value.ndim != 1:
            raise TraceError("hw.groupby_fold: a value must be a scalar or a 1-D array", loc)
        elems = [value.elem((const(c),)) for c in range(value.shape[0])]
        dtype = value.dtype
    elif isinstance(value, tuple) and value:
        elems = [const(v) for v in value]
        strong = {e.dtype for e in elems if not e.weak}
        if len(strong) > 1:
            raise TypeMismatchError(
                f"hw.groupby_fold: the values of a tuple must share one dtype, got "
                f"{', '.join(sorted(d.name for d in strong))}; convert with .astype(...)",
                loc,
            )
        dtype = strong.pop() if strong else elems[0].dtype
    else:
        elems, dtype = [value], const(value).dtype
    exprs = tuple(_strong(e, dtype) for e in elems)
    node = ir.Collect("group", dims, _strong(key), exprs, (), _combiner(op, dtype), max_keys, loc=loc)
    keys = ir.Part(node, "keys")
    values = ir.Part(node, "values")
    fx = dtype if isinstance(dtype, fixedpoint.Fixed) else None
    columns = ArrayVal(values.shape, fx or values.dtype, node=values)
    if len(exprs) == 1 and (isinstance(value, ArrayVal) or isinstance(value, tuple)):
        # one column of a 1-D array or 1-tuple value: `values` keeps its axis, (max_keys, 1),
        # like two columns give (max_keys, 2); the IR part itself is 1-D
        flat = columns
        columns = ArrayVal(values.shape + (1,), flat.dtype, elem_fn=lambda idx: flat.elem(idx[:1]))
    return (ArrayVal(keys.shape, keys.dtype, node=keys), columns, Val(ir.Count(node)))


class Emit:
    """One value `hw.flatmap` may produce: kept where `when` holds."""

    def __init__(self, value, when=True):
        self.value, self.when = value, when


def emit(value, when=True) -> Emit:
    """An output of a `hw.flatmap` body, kept where `when` holds."""
    return Emit(value, when)


def filter_(domain, pred, fn=None):
    """Keep `fn(*idx)` (default: the element's row-major index) where `pred(*idx)` holds, in
    index order. Returns `(values, count)`; `values` has the domain's size, 0 past `count`."""
    shape = _domain(domain, "hw.filter")
    dims, idx = _bind(pred, shape, "hw.filter")
    loc = user_loc()
    cond = pred(*idx)
    if fn is None:
        flat = const(0)
        for d, v in zip(dims, idx):
            flat = binary("add", binary("mul", flat, d.extent), v)
        value = cast(flat, int64)
    else:
        value = fn(*idx)
    return _append(dims, [(cond, value)], math.prod(shape), loc)


def flatmap(domain, fn, max_out):
    """`fn(*idx)` returns up to `max_out` `hw.emit(value, when=cond)`; the emitted values are
    concatenated in index order. Returns `(values, count)`; `values` has size(domain) * max_out
    entries, 0 past `count`."""
    shape = _domain(domain, "hw.flatmap")
    if isinstance(max_out, bool) or not isinstance(max_out, int) or max_out < 1:
        raise TraceError(f"hw.flatmap needs max_out, a positive int, got {max_out!r}")
    dims, idx = _bind(fn, shape, "hw.flatmap")
    loc = user_loc()
    out = fn(*idx)
    emits = list(out) if isinstance(out, (tuple, list)) else [out]
    if not all(isinstance(e, Emit) for e in emits):
        raise TraceError(
            "the function given to hw.flatmap must return hw.emit(value, when=...) (or a tuple of them)", loc
        )
    if len(emits) > max_out:
        raise TraceError(f"hw.flatmap: the function emits {len(emits)} values but max_out is {max_out}", loc)
    return _append(dims, [(e.when, e.value) for e in emits], math.prod(shape) * max_out, loc)


def _append(dims, pairs, capacity: int, loc):
    conds, values = [], []
    if any(isinstance(v, ArrayVal) for pair in pairs for v in pair):
        raise TraceError(
            "hw.filter and hw.flatmap conditions and values must be scalars, got an array; "
            "reduce it to one value (hw.sum, .max(), ...) or give each element its own index",
            loc,
        )
    first = const(pairs[0][1])
    dtype = first.dtype if not first.weak or first.dtype == bool_ else int64  # Python bools stay bool_
    for cond, value in pairs:
        c = const(cond)
        conds.append(_strong(c if c.dtype == bool_ else binary("ne", c, 0)))
        values.append(_strong(value, dtype))
    node = ir.Collect("append", dims, None, tuple(values), tuple(conds), None, capacity, loc=loc)
    part = ir.Part(node, "values")
    fx = dtype if isinstance(dtype, fixedpoint.Fixed) else None
    return ArrayVal(part.shape, fx or part.dtype, node=part), Val(ir.Count(node))


def argmin(arr, fn=None) -> Val:
    """Index of the first minimum of a 1-D array (numpy's argmin); `hw.argmin(n, lambda c:
    ...)`, written like `hw.min`, is the argmin of `hw.map(n, fn)`."""
    return _arg(_arg_source(arr, fn, "argmin"), "min")


def argmax(arr, fn=None) -> Val:
    """Index of the first maximum of a 1-D array (numpy's argmax); `hw.argmax(n, lambda c:
    ...)`, written like `hw.max`, is the argmax of `hw.map(n, fn)`."""
    return _arg(_arg_source(arr, fn, "argmax"), "max")


def _arg_source(arr, fn, what: str):
    if fn is None:
        if callable(arr) and not isinstance(arr, (ArrayVal, Val)):
            raise TraceError(
                f"hw.{what} takes a 1-D array, or a length and a function like "
                f"hw.{what}(n, lambda c: x[c]); got only a function"
            )
        return arr
    if isinstance(arr, ArrayVal):
        raise TraceError(f"hw.{what}(x) takes one array; hw.{what}(n, lambda c: ...) takes a length and a function")
    shape = _domain(arr, f"hw.{what}")
    if len(shape) != 1:
        raise TraceError(f"hw.{what}(n, fn) takes a 1-D domain (a length), got {shape}")
    return map_(shape, fn)


def _arg(arr, which: str) -> Val:
    """A min/max over keys (value, index) packed in one int64: the value in the high bits, the
    index (for argmax: its complement) in the low bits, so the first extreme wins ties."""
    if not isinstance(arr, ArrayVal) or arr.ndim != 1:
        got = (
            f"an array of shape {arr.shape}"
            if isinstance(arr, ArrayVal)
            else ("a scalar" if isinstance(arr, Val) else f"{type(arr).__name__}")
        )
        raise TraceError(f"hw.arg{which} takes a 1-D array (or hw.arg{which}(n, lambda c: ...)), got {got}")
    n = arr.shape[0]
    dt = arr.dtype
    bits = max(1, (n - 1).bit_length())
    value_bits = dt.bits + (0 if dt.signed or dt.is_bool else 1)
    if value_bits + bits > 64:
        raise TypeMismatchError(
            f"hw.arg{which} of {dt.name} values over {n} elements needs {value_bits + bits} bits; "
            f"at most 64 are supported"
        )
    trace = current(f"hw.arg{which}")
    own = isinstance(arr.node, ir.Map) and len(arr.node.dims) == 1
    d = arr.node.dims[0] if own else trace.op_dim("@r0", n)  # keep a map's index name: schedules use it
    t = _index_val(d)
    v = arr.elem((t,))
    raw = Val(v.expr) if getattr(v, "fx", None) is not None else v
    low = t if which == "min" else (n - 1) - t
    key = binary("or", binary("shl", cast(raw, int64), np.int64(bits)), cast(low, int64))
    best = Val(ir.Reduce((d,), key.expr, ir.Combiner(ir.REDUCE_OPS[which]), loc=user_loc()))
    index = binary("and", best, np.int64((1 << bits) - 1))
    if which == "max":
        index = binary("sub", np.int64(n - 1), index)
    return maximum(minimum(index, np.int64(n - 1)), np.int64(0))


def matmul(a, b) -> ArrayVal:
    """numpy's `a @ b` for 1-D and 2-D arrays, as a map of sums: over the result's rows '@i'
    and columns '@j' of sums over '@k', the names a schedule uses for every '@' of a kernel."""
    if not isinstance(a, ArrayVal) or not isinstance(b, ArrayVal) or a.ndim > 2 or b.ndim > 2:
        raise TraceError("'@' needs two 1-D or 2-D arrays")
    k = a.shape[-1]
    kb = b.shape[0]
    if k != kb:
        raise TypeMismatchError(f"'@' of shapes {a.shape} and {b.shape}: inner dimensions {k} and {kb} differ")
    trace = current("'@'")
    kd = trace.op_dim("@k", k)
    kv = _index_val(kd)
    loc = user_loc()
    names = ("@i",) * (a.ndim - 1) + ("@j",) * (b.ndim - 1)
    dims = tuple(trace.op_dim(name, n) for name, n in zip(names, a.shape[:-1] + b.shape[1:]))
    iv = [_index_val(d) for d in dims]
    ai = tuple(iv[: a.ndim - 1]) + (kv,)
    bi = (kv,) + tuple(iv[a.ndim - 1 :])
    prod = binary("mul", a.elem(ai), b.elem(bi))
    body = _strong(prod)
    # numpy's bool @ bool is the OR of the ANDs (its add of bools saturates): an OR reduction
    red = ir.Reduce((kd,), body, ir.Combiner("or" if body.dtype.is_bool else "add"), loc=loc)
    fx = prod.fx
    if not dims:
        return Val(red, fx=fx)
    node = ir.Map(dims, red, loc=loc)
    return ArrayVal(node.shape, fx or node.dtype, node=node)
