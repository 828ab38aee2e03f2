"""Value ranges: exact bounds of an integer expression's value, by interval arithmetic.

A node whose numpy result cannot wrap gets the bounds of its exact value; any other gets its
dtype's range. The hardware sizes its signals from these bounds, and the tracer uses them to
prove data-dependent indices stay inside an accumulator.
"""

from __future__ import annotations

from . import ir


def value_range(node, extents: dict, memo: dict | None = None) -> tuple:
    """Exact bounds (lo, hi) of `node`'s value; `extents`: counter name -> extent (an index
    missing from it may take any value of its dtype)."""
    memo = {} if memo is None else memo
    found = memo.get(node)
    if found is not None:
        return found
    out = _range(node, extents, memo)
    memo[node] = out
    return out


def _range(node, extents, memo):
    dt = node.dtype
    full = (dt.min, dt.max)
    if isinstance(node, ir.Const):
        return node.value, node.value
    if isinstance(node, ir.Index):
        return (0, extents[node.name] - 1) if node.name in extents else full
    if isinstance(node, ir.Binary):
        return _binary_range(node, extents, memo, full)
    if isinstance(node, ir.Cast):
        if dt.is_bool:
            return 0, 1
        return _fit(value_range(node.a, extents, memo), dt, full)
    if isinstance(node, ir.Select):
        a, b = value_range(node.a, extents, memo), value_range(node.b, extents, memo)
        return min(a[0], b[0]), max(a[1], b[1])
    if isinstance(node, ir.Table):
        return min(node.values), max(node.values)
    if isinstance(node, ir.Unary) and node.op in ("neg", "abs"):
        lo, hi = value_range(node.a, extents, memo)
        if node.op == "neg":
            lo, hi = -hi, -lo
        else:
            lo, hi = (0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
        return _fit((lo, hi), dt, full)
    return full


def _fit(bounds: tuple, dt, full: tuple) -> tuple:
    """`bounds` if the dtype holds both, else the dtype's whole range (the value wraps)."""
    return bounds if dt.fits(bounds[0]) and dt.fits(bounds[1]) else full


def _binary_range(node, extents, memo, full: tuple) -> tuple:
    dt, op, b = node.dtype, node.op, node.b
    if op in ir.COMPARE:
        return 0, 1
    if op == "shl" and isinstance(b, ir.Const) and 0 <= b.value < 64:
        lo, hi = value_range(node.a, extents, memo)
        return _fit((lo << b.value, hi << b.value), dt, full)
    if op == "shr" and isinstance(b, ir.Const) and 0 <= b.value < dt.bits:  # floor division by 2**k
        lo, hi = value_range(node.a, extents, memo)
        return lo >> b.value, hi >> b.value
    if op in ("floordiv", "mod") and isinstance(b, ir.Const) and b.value > 0:
        lo, hi = value_range(node.a, extents, memo)
        c = b.value
        if op == "mod":  # floor remainder: from 0 to c - 1, or less when a's range is narrow
            return (lo % c, hi % c) if lo // c == hi // c else (0, c - 1)
        return lo // c, hi // c
    if op == "and":
        (alo, ahi), (blo, bhi) = value_range(node.a, extents, memo), value_range(b, extents, memo)
        if alo >= 0 and blo >= 0:  # masking with a non-negative value bounds the result
            return 0, min(ahi, bhi)
        if blo >= 0 or alo >= 0:
            return 0, bhi if blo >= 0 else ahi
        return full
    if op == "or" and not dt.is_bool:
        return _or_range(value_range(node.a, extents, memo), value_range(b, extents, memo), full)
    if op in _ARITH:
        return _fit(_ARITH[op](value_range(node.a, extents, memo), value_range(b, extents, memo)), dt, full)
    return full


def _products(a: tuple, b: tuple) -> tuple:
    p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(p), max(p)


_ARITH = {  # bounds of the exact result from the operands' bounds
    "add": lambda a, b: (a[0] + b[0], a[1] + b[1]),
    "sub": lambda a, b: (a[0] - b[1], a[1] - b[0]),
    "mul": _products,
    "max": lambda a, b: (max(a[0], b[0]), max(a[1], b[1])),
    "min": lambda a, b: (min(a[0], b[0]), min(a[1], b[1])),
}


def _or_range(a: tuple, b: tuple, full: tuple) -> tuple:
    """Bounds of a | b. With b >= 0, a | b = a + (b & ~a) lies in [a, a + b] (and the same with
    the roles swapped); two negative values give a negative value at least the larger one."""
    (alo, ahi), (blo, bhi) = a, b
    if blo < 0 and alo < 0:
        return (max(alo, blo), -1) if ahi < 0 and bhi < 0 else full
    if blo < 0:
        (alo, ahi), (blo, bhi) = b, a
    lo, hi = alo if alo < 0 else max(alo, blo), ahi + bhi
    if alo >= 0:  # no bit above the wider operand's top bit
        hi = min(hi, (1 << max(ahi.bit_length(), bhi.bit_length())) - 1)
    return (lo, hi) if full[0] <= lo and hi <= full[1] else full
