"""A traced kernel: its parameters, its results as IR nodes, and its index variables.

`trace_program` runs the user's function once on symbolic arguments (see context.py, scalars.py,
arrays.py and patterns.py) and checks the results against the return annotation.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..errors import HwgenError, Loc, TraceError, TypeMismatchError, loc_from_traceback, plain_message
from .arrays import ArrayVal
from .context import Trace, tracing
from .dtypes import DType
from .scalars import Val, _meet, const
from .signature import ArrayType, Port, parse_params, parse_results, raw_dtype, result_names


@dataclass(frozen=True)
class Result:
    """A kernel result: its Port (name, dtype, shape) and the IR node computing it
    (a Map for an array, a scalar Expr otherwise). `then`: loop-IR controllers (a mesh PE's
    loops.Collective) that run once the result is stored, before the next result's. A mesh
    PE's program may have results with no node: `then` alone, on an array its DRAM holds."""

    port: Port
    node: ir.Node
    then: tuple = ()


@dataclass(frozen=True)
class Program:
    name: str
    params: tuple  # Ports
    results: tuple  # Results
    extents: dict  # every index name -> extent (user names and fresh '%n' names)
    loc: Loc | None
    constraints: tuple = ()  # (array node, hw.P, loc) of each hw.with_sharding_constraint

    @property
    def inputs(self) -> dict:
        """Array parameter name -> its ir.Input node."""
        return {p.name: ir.Input(p.name, raw_dtype(p.dtype), p.shape) for p in self.params if p.is_array}


def trace_program(fn, loc: Loc | None) -> Program:
    name = fn.__name__
    params = parse_params(fn, loc)
    declared = parse_results(fn, loc)
    trace = Trace(name)
    symbolic = []
    for p in params:
        fx = p.dtype if raw_dtype(p.dtype) != p.dtype else None
        if p.is_array:
            node = ir.Input(p.name, raw_dtype(p.dtype), p.shape)
            symbolic.append(ArrayVal(p.shape, p.dtype, node=node))
        else:
            symbolic.append(Val(ir.Param(p.name, raw_dtype(p.dtype)), fx=fx))
    with tracing(trace):
        try:
            returned = fn(*symbolic)
        except HwgenError:
            raise
        except RecursionError:
            raise TraceError(f"kernel '{name}' recursed too deeply while tracing", loc) from None
        except Exception as e:
            where = loc_from_traceback(e.__traceback__) or loc
            if "__array_ufunc__" in str(e):
                raise TraceError(
                    "numpy functions cannot take traced values; inside a kernel use Python "
                    "operators and hwgen's functions (hw.where, hw.maximum, hw.sum, ...)",
                    where,
                ) from None
            if isinstance(e, IndexError) and "only integers, slices" in str(e):
                raise TraceError(
                    "a numpy array cannot be indexed by a traced value; make the constant table "
                    "hw.table(values) (a ROM, which data may index), or pass it as a kernel argument",
                    where,
                ) from None
            raise TraceError(f"tracing kernel '{name}' failed: {plain_message(e)}", where) from None
        items = list(returned) if isinstance(returned, tuple) else [returned]
        if returned is None or not items:
            raise TraceError(f"kernel '{name}' returns nothing; return its result(s)", loc)
        if declared is not None and len(declared) != len(items):
            raise TypeMismatchError(
                f"kernel '{name}' returns {len(items)} result(s) but its annotation declares {len(declared)}", loc
            )
        names = result_names(len(items), {p.name for p in params})
        results = []
        for k, item in enumerate(items):
            want = declared[k] if declared is not None else None
            results.append(_result(name, names[k], k, len(items), item, want, trace, loc))
    return Program(name, tuple(params), tuple(results), dict(trace.extents), loc, tuple(trace.constraints))


def _result(kname, rname, k, count, item, want, trace: Trace, loc) -> Result:
    label = "the result" if count == 1 else f"result {k}"
    if isinstance(item, ArrayVal):
        node = item.materialize()
        if isinstance(node, ir.Input):
            dims = tuple(trace.op_dim(f"@{k}", n) for k, n in enumerate(node.shape))
            idx = tuple(ir.Index(d.name) for d in dims)
            node = ir.Map(dims, ir.Read(node, idx), loc=loc)
        port = Port(rname, item.dtype, node.shape)
    else:
        try:
            v = const(item, loc)
        except HwgenError:
            raise TypeMismatchError(
                f"{label} of kernel '{kname}' is {item!r}; a kernel returns arrays and scalars "
                f"computed from its arguments",
                loc,
            ) from None
        if v.weak and isinstance(want, DType) and raw_dtype(want) == want:
            node = _meet(v, want, label)
        else:
            node = v.expr
        port = Port(rname, v.dtype, ())
    if want is not None:
        want_dtype = want.dtype if isinstance(want, ArrayType) else want
        want_shape = want.shape if isinstance(want, ArrayType) else ()
        if (want_dtype, want_shape) != (port.dtype, port.shape):
            expected = Port(rname, want_dtype, want_shape)
            raise TypeMismatchError(
                f"{label} of kernel '{kname}' is {port.describe()}, but the annotation says "
                f"{expected.describe()}" + ("; convert with .astype(...)" if want_shape == port.shape else ""),
                loc,
            )
    return Result(port, node)
