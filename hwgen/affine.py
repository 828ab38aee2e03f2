"""Affine index expressions: `sum(coef * index) + const`.

Array subscripts must be affine in index variables (`a[i, k]`, `x[2 * i + 1]`); tiling turns
them into tile origins plus local offsets. `to_affine` recognises them in an IR expression;
`value_range` bounds one over the extents of its index variables.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Binary, Cast, Const, Expr, Index, Unary
from .lang.dtypes import int64


@dataclass(frozen=True)
class Affine:
    """`sum(c * Index(n) for n, c in terms) + const`; terms sorted by name, no zero coefs."""

    terms: tuple
    const: int

    @staticmethod
    def of(terms: dict, const: int) -> "Affine":
        return Affine(tuple(sorted((n, c) for n, c in terms.items() if c != 0)), int(const))

    @property
    def coefs(self) -> dict:
        return dict(self.terms)

    def __add__(self, other: "Affine") -> "Affine":
        terms = self.coefs
        for n, c in other.terms:
            terms[n] = terms.get(n, 0) + c
        return Affine.of(terms, self.const + other.const)

    def scale(self, k: int) -> "Affine":
        return Affine.of({n: c * k for n, c in self.terms}, self.const * k)

    def names(self) -> set:
        return {n for n, _ in self.terms}

    def value_range(self, extents: dict) -> tuple:
        """(min, max) over index n in [0, extents[n] - 1]."""
        lo = hi = self.const
        for n, c in self.terms:
            top = c * (extents[n] - 1)
            lo += min(0, top)
            hi += max(0, top)
        return lo, hi

    def to_expr(self) -> Expr:
        """An int64 IR expression computing this affine form."""
        out: Expr | None = None
        for n, c in self.terms:
            term: Expr = Index(n)
            if c != 1:
                term = Binary("mul", Const(c, int64), term, int64)
            out = term if out is None else Binary("add", out, term, int64)
        if out is None:
            return Const(self.const, int64)
        if self.const:
            out = Binary("add", out, Const(self.const, int64), int64)
        return out

    def __str__(self) -> str:
        parts = []
        for n, c in self.terms:
            parts.append(n if c == 1 else f"{c} * {n}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def to_affine(expr: Expr) -> Affine | None:
    """The affine form of an int64 index expression, or None if it is not affine."""
    if isinstance(expr, Const):
        return Affine.of({}, expr.value)
    if isinstance(expr, Index):
        return Affine.of({expr.name: 1}, 0)
    if isinstance(expr, Cast) and expr.dtype == int64:
        return to_affine(expr.a)
    if isinstance(expr, Unary) and expr.op == "neg":
        inner = to_affine(expr.a)
        return None if inner is None else inner.scale(-1)
    if isinstance(expr, Binary) and expr.op in ("add", "sub", "mul"):
        a, b = to_affine(expr.a), to_affine(expr.b)
        if a is None or b is None:
            return None
        if expr.op == "add":
            return a + b
        if expr.op == "sub":
            return a + b.scale(-1)
        if not a.terms:
            return b.scale(a.const)
        if not b.terms:
            return a.scale(b.const)
    return None
