"""Random programs as data (a small AST), rendered twice: as the Python source of an hwgen kernel
and as an independent plain-numpy reference (loops and comprehensions over numpy scalars, so
numpy itself decides promotion, NEP 50 weak Python ints and wrap-around).

A `Prog` is a list of patterns (one or more results of one kernel) over arrays and scalar
parameters; `generate(rng)` draws one; `render(prog)` gives the runnable source text, which
holds `kernel`, `reference`, `inputs(seed)` and a `__main__` block. Everything is drawn from
one `random.Random`, so a program is reproducible from its seed.
"""

from __future__ import annotations

import operator
import random
from dataclasses import dataclass, field

import numpy as np

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES = INTS + ["bool"]
EXTENTS = [4, 4, 6, 8, 8, 12, 16, 24, 32]
FX_FRAC = 16  # hw.fixed(16, 16)

# Known open bugs: forms the generator does not produce (or schedules it skips) unless the
# exclusion is lifted with --include-known. Each entry names one open finding; see docs/fuzzing.md.
# Every finding so far is fixed, and its form is generated again.
KNOWN_BUGS: dict[str, str] = {}


# ----------------------------------------------------------------------------- expressions


@dataclass
class Ex:
    """An expression node. op: ref idx lit flit par res bin un where max min cast
    row vec slice (array-valued leaves for row and slice patterns)."""

    op: str
    kids: tuple = ()
    a: tuple = ()
    t: object = None  # the type while generating: np.dtype, ("w", lo, hi) or "fx"

    def walk(self):
        yield self
        for k in self.kids:
            yield from k.walk()


def is_weak(t):
    return isinstance(t, tuple)


def sample(t):
    if is_weak(t) and t[0] == "wb":
        return True  # a comparison of index values: a Python bool
    if is_weak(t):
        return t[1] if t[1] == t[2] else 1
    return np.ones((), t)[()]


_PYOP = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}
ARITH = ["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>"]
COMPARE = ["<", "<=", "==", "!=", ">", ">="]


def fits(t, dt):
    info = np.iinfo(dt) if dt.kind in "iu" else None
    if info is None:
        return t[1] in (0, 1) and t[2] in (0, 1)
    return info.min <= t[1] and t[2] <= info.max


def numpy_type(fn, *ts):
    """The numpy type of fn over samples of the types, or None if numpy refuses or floats."""
    for t in ts:
        for u in ts:
            if is_weak(t) and not is_weak(u) and not fits(t, u):
                return None
            if not is_weak(t) and not is_weak(u) and np.result_type(t, u).kind not in "iub":
                return None  # numpy compares int64 with uint64 exactly, but promotes them to float64
    try:
        with np.errstate(all="ignore"):
            r = fn(*[sample(t) for t in ts])
    except (TypeError, OverflowError, ValueError):
        return None
    if isinstance(r, (bool, int)):
        return None
    dt = np.asarray(r).dtype
    return dt if dt.kind in "iub" else None


def weak_range(op, a, b):
    vals = [_PYOP[op](x, y) for x in (a[1], a[2]) for y in (b[1], b[2])]
    return ("w", min(vals), max(vals))


# ----------------------------------------------------------------------------- program


@dataclass
class Arr:
    name: str
    dtype: str  # numpy name, or "fx" for hw.fixed(16, 16)
    ndim: int
    fixed_shape: tuple | None = None  # exact shape (whole-array uses); None: grown from subscripts
    pad: tuple = (0, 0)
    mode: str = "full"  # input values: full dtype range, or small (collisions, zeros, ties)


@dataclass
class Pat:
    """One pattern, giving one or more results. kind and its fields:
    map: dims, body | reduce: dims, body, rop | mapreduce: dims(outer), inner dims, body, rop
    rowmap/rowreduce: dims, body (array-valued), rop | slice: body | matmul: a, b, transA
    multifold: dims, init, where (tuple of Ex), body, rop, rowdim | filter: dims, pred, body
    flatmap: dims, emits [(value, when)] | groupby: dims, key, values, rop, max_keys
    argmin/argmax: dims, body"""

    kind: str
    dims: list = field(default_factory=list)  # [(var, extent)]
    inner: list = field(default_factory=list)
    body: object = None
    rop: str = "+"
    extra: dict = field(default_factory=dict)
    outs: list = field(default_factory=list)  # result variable names


@dataclass
class Prog:
    name: str
    arrays: dict
    scalars: dict  # name -> dtype
    pats: list
    fixed: bool = False
    input_seed: int = 0


REDUCE_OPS = ["+", "+", "*", "max", "min", "&", "|", "^", "custom"]
CUSTOM = {  # associative combiners (hw text, reference text)
    "lastpos": ("lambda p, q: hw.where(q > 0, q, p)", "lambda p, q: where(q > 0, q, p)"),
    "firstnz": ("lambda p, q: hw.where(p != 0, p, q)", "lambda p, q: where(p != 0, p, q)"),
    "cmax": ("lambda p, q: hw.maximum(p, q)", "lambda p, q: np.maximum(p, q)"),
    "cadd": ("lambda p, q: p + q", "lambda p, q: p + q"),
    "cxor": ("lambda p, q: p ^ q", "lambda p, q: p ^ q"),
    "last": ("lambda p, q: q", "lambda p, q: q"),
}
FX_CUSTOM = ["cmax", "cadd"]


class Gen:
    def __init__(self, rng: random.Random, fixed=False, excluded=frozenset(KNOWN_BUGS)):
        self.r = rng
        self.fixed = fixed
        self.excluded = excluded
        self.arrays: dict = {}
        self.scalars: dict = {}
        self.ext: dict = {}
        self.nvar = 0
        self.results: list = []  # (name, type) scalar results usable later
        self.res_arrays: list = []  # (name, dtype, shape) array results usable later
        self.palette = self._palette()

    def _palette(self):
        if self.fixed:
            return ["fx"]
        k = self.r.choice([1, 1, 2, 2, 3])
        pal = [self.r.choice(INTS + ["bool"] if self.r.random() < 0.1 else INTS) for _ in range(k)]
        return pal

    def var(self, extent):
        v = f"i{self.nvar}"
        self.nvar += 1
        self.ext[v] = extent
        return v

    def extent(self, nd=1):
        return self.r.choice(EXTENTS if nd == 1 else EXTENTS[:-2])

    # --- leaves
    def new_array(self, ndim, dtype=None, fixed_shape=None):
        name = f"{'a' if ndim == 2 else 'x'}{len(self.arrays)}"
        dt = dtype or self.r.choice(self.palette)
        pad = tuple(self.r.choice([0, 0, 1, 3]) for _ in range(ndim))
        mode = self.r.choice(["full", "full", "small"])
        self.arrays[name] = Arr(name, dt, ndim, fixed_shape, pad, mode)
        return self.arrays[name]

    def sub(self, vars_):
        r = self.r
        if not vars_ or r.random() < 0.06:
            return (None, 0, r.randint(0, 3))
        v = r.choice(vars_)
        coef = r.choice([1, 1, 1, 1, 2, 3, -1])
        if coef == -1:
            return (v, -1, self.ext[v] - 1 + r.choice([0, 0, 1]))
        return (v, coef, r.choice([0, 0, 0, 1, 1, 2, 3]))

    def ref(self, vars_):
        r = self.r
        cands = [a for a in self.arrays.values() if a.fixed_shape is None and (a.dtype == "fx") == self.fixed]
        ndim = (
            2
            if (len(vars_) >= 2 and r.random() < 0.5)
            else (r.choice([1, 2]) if len(vars_) == 1 and r.random() < 0.2 else 1)
        )
        same = [a for a in cands if a.ndim == ndim]
        if same and (r.random() < 0.8 or len(self.arrays) >= 5):
            arr = r.choice(same)
        else:
            arr = self.new_array(ndim)
        if ndim == 2 and len(vars_) >= 2 and r.random() < 0.8:
            vs = r.sample(vars_, 2)
            subs = tuple((v, 1, r.choice([0, 0, 0, 1])) for v in vs)
        else:
            subs = tuple(self.sub(vars_) for _ in range(ndim))
        return Ex("ref", (), (arr.name, subs), "fx" if arr.dtype == "fx" else np.dtype(arr.dtype))

    def leaf(self, vars_):
        r = self.r
        x = r.random()
        if self.fixed:
            if x < 0.75:
                return self.ref(vars_)
            if r.random() < 0.3:
                c = r.choice([-3, -1, 2, 3, 10])
                return Ex("lit", (), (c,), "fx")  # a Python int meeting a fixed value converts to it
            return Ex("flit", (), (r.choice([-2.0, -1.5, -0.25, 0.5, 0.75, 1.0, 1.25, 3.0, 7.5]),), "fx")
        if x < 0.6:
            return self.ref(vars_)
        if x < 0.7 and vars_:
            v = r.choice(vars_)
            return Ex("idx", (), (v,), ("w", 0, self.ext[v] - 1))
        if x < 0.78:
            if self.scalars and r.random() < 0.5:
                name = r.choice(sorted(self.scalars))
            else:
                name = f"s{len(self.scalars)}"
                self.scalars[name] = r.choice(self.palette if "bool" not in self.palette else INTS)
            return Ex("par", (), (name,), np.dtype(self.scalars[name]))
        if (x < 0.83 or not vars_) and self.results:
            name, t = r.choice(self.results)
            return Ex("res", (), (name,), t)
        if x < 0.86 and self.res_arrays and vars_:
            name, dt, shape = r.choice(self.res_arrays)
            subs = []
            for n in shape:
                ok = [v for v in vars_ if self.ext[v] <= n]
                subs.append((r.choice(ok), 1, 0) if ok and r.random() < 0.9 else (None, 0, r.randrange(n)))
            return Ex("ref", (), (name, tuple(subs)), np.dtype(dt))
        c = r.choice([0, 1, 2, 3, 5, 7, -1, -3, 100, 127, -128, 255, 1000])
        return Ex("lit", (), (c,), ("w", c, c))

    # --- expressions
    def expr(self, vars_, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            return self.leaf(vars_)
        for _ in range(12):
            e = self.fx_node(vars_, depth) if self.fixed else self.node(vars_, depth)
            if e is not None:
                return e
        return self.leaf(vars_)

    def strong(self, vars_, depth):
        for _ in range(20):
            e = self.expr(vars_, depth)
            if not is_weak(e.t) and (not self.fixed or any(n.op == "ref" for n in e.walk())):
                return e
        return self.ref(vars_)

    def node(self, vars_, depth):
        r = self.r
        kind = r.choices(["bin", "cmpwhere", "maxmin", "un", "cast", "shift", "icmp"], [10, 2, 2, 1, 2, 1, 1])[0]
        if kind == "icmp":  # (i < 3): a Python bool, used as 0 or 1 in arithmetic
            if not vars_:
                return None
            v = r.choice(vars_)
            c = r.randint(0, self.ext[v])
            i = Ex("idx", (), (v,), ("w", 0, self.ext[v] - 1))
            return Ex("bin", (i, Ex("lit", (), (c,), ("w", c, c))), (r.choice(COMPARE),), ("wb", 0, 1))
        if kind == "bin":
            op = r.choice(["+", "-", "*", "//", "%", "&", "|", "^", "+", "-", "*"])
            a, b = self.expr(vars_, depth - 1), self.expr(vars_, depth - 1)
            if op in ("//", "%") and r.random() < 0.5:
                c = r.choice([1, 2, 3, 4, 7, 8, -2, -5, 16])
                b = Ex("lit", (), (c,), ("w", c, c))
            if op in ("//", "%") and a.t == np.dtype(bool) and b.t == np.dtype(bool):
                return None  # hwgen refuses (numpy gives int8)
            if is_weak(a.t) and is_weak(b.t):
                if op not in ("+", "-", "*"):
                    return None
                return Ex("bin", (a, b), (op,), weak_range(op, a.t, b.t))
            t = numpy_type(_PYOP[op], a.t, b.t)
            return None if t is None else Ex("bin", (a, b), (op,), t)
        if kind == "shift":
            a = self.strong(vars_, depth - 1)
            bits = 8 if a.t == np.dtype(bool) else a.t.itemsize * 8
            c = r.randrange(bits)
            op = r.choice(["<<", ">>"])
            b = Ex("lit", (), (c,), ("w", c, c))
            t = numpy_type(_PYOP[op], a.t, b.t)
            return None if t is None else Ex("bin", (a, b), (op,), t)
        if kind == "cmpwhere":
            c = self.cmp(vars_, depth - 1)
            if c is None:
                return None
            a, b = self.expr(vars_, depth - 1), self.expr(vars_, depth - 1)
            if is_weak(a.t) and is_weak(b.t):
                return None
            t = numpy_type(lambda x, y: np.where(True, x, y)[()], a.t, b.t)
            return None if t is None else Ex("where", (c, a, b), (), t)
        if kind == "maxmin":
            a, b = self.expr(vars_, depth - 1), self.expr(vars_, depth - 1)
            if is_weak(a.t) and is_weak(b.t):
                return None
            op = r.choice(["max", "min"])
            t = numpy_type(np.maximum, a.t, b.t)
            return None if t is None else Ex(op, (a, b), (), t)
        if kind == "un":
            a = self.strong(vars_, depth - 1)
            op = r.choice(["-", "~", "abs"])
            fn = {"-": operator.neg, "~": operator.invert, "abs": np.abs}[op]
            t = numpy_type(fn, a.t)
            return None if t is None else Ex("un", (a,), (op,), t)
        a = self.strong(vars_, depth - 1)
        dt = np.dtype(r.choice(INTS + ["bool"]))
        return Ex("cast", (a,), (dt.name,), dt)

    def cmp(self, vars_, depth):
        a, b = self.expr(vars_, depth), self.expr(vars_, depth)
        if is_weak(a.t) and is_weak(b.t):
            if self.fixed or self.r.random() < 0.5:
                return None
            # index values compare to a Python bool, which arithmetic treats as 0 or 1
            return Ex("bin", (a, b), (self.r.choice(COMPARE),), ("wb", 0, 1))
        op = self.r.choice(COMPARE)
        if self.fixed and a.op in ("flit", "lit") and b.op in ("flit", "lit"):
            return None
        if self.fixed:
            return Ex("bin", (a, b), (op,), np.dtype(bool))
        if not is_weak(a.t) and a.t != np.dtype(bool) and self.r.random() < 0.2:
            # numpy compares Python ints exactly, also out of the strong type's range
            info = np.iinfo(a.t)
            if self.r.random() < 0.5 and a.t.itemsize < 8:
                v = self.r.choice(self.ext and list(self.ext) or [None])
                if v in vars_:  # an index expression partly out of range: hwgen compares wider
                    lo = info.min - 3 if info.min < 0 else -5
                    w = Ex(
                        "bin",
                        (Ex("idx", (), (v,), ("w", 0, self.ext[v] - 1)), Ex("lit", (), (lo,), ("w", lo, lo))),
                        ("+",),
                        ("w", lo, lo + self.ext[v] - 1),
                    )
                    return Ex("bin", (a, w) if self.r.random() < 0.5 else (w, a), (op,), np.dtype(bool))
            c = self.r.choice([info.max + 1, info.min - 1, info.max + 1000, -1 if info.min == 0 else info.min - 7])
            c = min(max(c, -(2**63)), 2**64 - 1)  # hwgen takes Python ints that fit in 64 bits
            b = Ex("lit", (), (c,), ("w", c, c))
            return Ex("bin", (a, b) if self.r.random() < 0.5 else (b, a), (op,), np.dtype(bool))
        t = numpy_type(_PYOP[op], a.t, b.t)
        return None if t is None else Ex("bin", (a, b), (op,), t)

    def fx_node(self, vars_, depth):
        r = self.r
        kind = r.choices(["bin", "where", "maxmin"], [8, 2, 2])[0]
        if kind == "bin":
            op = r.choice(["+", "-", "*", "+", "-", "*", "/"])
            a, b = self.expr(vars_, depth - 1), self.expr(vars_, depth - 1)
            if a.op in ("flit", "lit") and b.op in ("flit", "lit"):
                return None
            return Ex("bin", (a, b), (op,), "fx")
        if kind == "where":
            c = self.cmp(vars_, depth - 1)
            a, b = self.expr(vars_, depth - 1), self.expr(vars_, depth - 1)
            if c is None or (a.op in ("flit", "lit") and b.op in ("flit", "lit")):
                return None
            return Ex("where", (c, a, b), (), "fx")
        a, b = self.expr(vars_, depth - 1), self.expr(vars_, depth - 1)
        if a.op in ("flit", "lit") and b.op in ("flit", "lit"):
            return None
        return Ex(r.choice(["max", "min"]), (a, b), (), "fx")

    def rop(self, t=None):
        op = self.r.choice(REDUCE_OPS)
        if t == np.dtype(bool) and op in ("*", "+"):
            op = {"*": "&", "+": "|"}[op]  # hwgen refuses '+' and '*' over bool_ as ambiguous
        if self.fixed:
            op = self.r.choice(["+", "max", "min", "custom"])
        if op == "custom":
            return self.r.choice(FX_CUSTOM if self.fixed else sorted(CUSTOM))
        return op

    # --- patterns
    def pattern(self, kind):
        r = self.r
        p = Pat(kind)
        if kind in ("map", "reduce", "argmin", "argmax"):
            nd = 2 if (kind in ("map", "reduce") and r.random() < 0.4) else 1
            p.dims = [(self.var(e), e) for e in [self.extent(nd) for _ in range(nd)]]
            p.body = self.strong([v for v, _ in p.dims], r.randint(1, 3))
            p.rop = self.rop(p.body.t)
            if kind == "map" and self.fixed and r.random() < 0.25:
                p.extra["toint"] = True  # .astype(hw.int32): rounds down
            if kind in ("argmin", "argmax") and p.body.t != "fx" and p.body.t.itemsize == 8:
                p.body = Ex("cast", (p.body,), ("int32",), np.dtype("int32"))
        elif kind == "scalar":
            if not self.results:
                return self.pattern("reduce")
            p.body = None
            for _ in range(10):
                e = self.expr([], 2)
                if not is_weak(e.t) and any(n.op == "res" for n in e.walk()):
                    p.body = e
                    break
            if p.body is None:
                name, t = r.choice(self.results)
                p.body = Ex("bin", (Ex("res", (), (name,), t), Ex("lit", (), (2,), ("w", 2, 2))), ("*",), t)
                if numpy_type(operator.mul, t, ("w", 2, 2)) is None:
                    p.body = Ex("res", (), (name,), t)
        elif kind == "mapreduce":
            p.dims = [(self.var(self.extent()), 0)]
            p.dims = [(p.dims[0][0], self.ext[p.dims[0][0]])]
            if r.random() < 0.3:
                v = self.var(self.extent())
                p.dims.append((v, self.ext[v]))
            v = self.var(self.extent())
            p.inner = [(v, self.ext[v])]
            p.body = self.strong([d for d, _ in p.dims + p.inner], r.randint(1, 3))
            p.rop = self.rop(p.body.t)
        elif kind in ("rowmap", "rowreduce"):
            p.dims = [(self.var(self.extent()), 0)]
            p.dims = [(p.dims[0][0], self.ext[p.dims[0][0]])]
            cols = r.choice([2, 4, 8])
            p.extra["cols"] = cols
            p.body = self.rowexpr(p.dims[0][0], cols, 2)
            while is_weak(p.body.t):
                p.body = self.rowexpr(p.dims[0][0], cols, 2)
            p.rop = r.choice(["+", "max", "min", "^"])
        elif kind == "slice":
            n = r.choice([3, 4, 6, 8])
            p.extra["n"] = n
            p.body = self.sliceexpr(n, 2)
            while is_weak(p.body.t):
                p.body = self.sliceexpr(n, 2)
        elif kind == "bcast":
            m, n = r.choice([2, 3, 4, 8]), r.choice([2, 4, 5, 8])
            p.extra.update(m=m, n=n)
            p.body = self.bcastexpr(m, n, 2)
            while is_weak(p.body.t):
                p.body = self.bcastexpr(m, n, 2)
        elif kind == "matmul":
            m, k, n = (r.choice([2, 3, 4, 8]) for _ in range(3))
            dt = r.choice(self.palette)
            ta = r.random() < 0.3
            a = self.new_array(2, dt, (k, m) if ta else (m, k))
            b = self.new_array(2, r.choice(self.palette), (k, n))
            if numpy_type(operator.mul, np.dtype(a.dtype), np.dtype(b.dtype)) is None:
                b.dtype = a.dtype
            p.extra.update(a=a.name, b=b.name, ta=ta)
        elif kind == "multifold":
            self.multifold(p)
        elif kind == "helper":
            self.helper(p)
        elif kind in ("filter", "flatmap", "groupby"):
            nd = 2 if r.random() < 0.25 else 1
            p.dims = [(self.var(e), e) for e in [self.extent(nd) for _ in range(nd)]]
            vs = [v for v, _ in p.dims]
            if kind == "filter" and self.fixed:
                p.extra["pred"] = (
                    self.cmp(vs, 1)
                    or self.cmp(vs, 0)
                    or Ex("bin", (self.ref(vs), Ex("flit", (), (0.5,), "fx")), (">",), np.dtype(bool))
                )
                p.body = self.strong(vs, 2)
            elif kind == "filter":
                p.extra["pred"] = self.cmp(vs, 1) or self.strong(vs, 1)
                p.body = self.expr(vs, 2) if r.random() < 0.6 else None
            elif kind == "flatmap":
                k = r.choice([1, 2, 2, 3])
                first = self.strong(vs, 2)
                emits = []
                for j in range(k):
                    v = first if j == 0 else self.strong(vs, 2)
                    if v.t != first.t:
                        v = Ex("cast", (v,), (first.t.name,), first.t)
                    w = self.cmp(vs, 1) if r.random() < 0.8 else None
                    emits.append([v, w])
                p.extra["emits"] = emits
                p.extra["max_out"] = k + r.choice([0, 0, 1])
            else:
                n = 1
                for _, e in p.dims:
                    n *= e
                key = self.strong(vs, 1)
                if key.t == np.dtype(bool):
                    key = Ex("cast", (key,), ("int16",), np.dtype("int16"))
                if r.random() < 0.6:
                    c = r.choice([2, 3, 4, 5, 8])
                    key = Ex("bin", (key, Ex("lit", (), (c,), ("w", c, c))), (r.choice(["%", "&", "//"]),), key.t)
                    if numpy_type(_PYOP[key.a[0]], key.kids[0].t, key.kids[1].t) is None:
                        key = key.kids[0]
                p.extra["key"] = key
                ncol = r.choice([1, 1, 2, 3])
                p.extra["tuple1"] = ncol == 1 and r.random() < 0.3  # (key, (value,)): values keep an axis
                vals = [self.strong(vs, 2) for _ in range(ncol)]
                vals = [vals[0]] + [
                    v if v.t == vals[0].t else Ex("cast", (v,), (vals[0].t.name,), vals[0].t) for v in vals[1:]
                ]
                p.extra["values"] = vals
                p.rop = self.r.choice(["+", "max", "min", "^", "|", "custom"])
                if p.rop == "custom":
                    p.rop = r.choice(sorted(CUSTOM))
                p.extra["max_keys"] = min(256, n + r.choice([0, 1, 5]))
        return p

    def rowexpr(self, v, cols, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.3:
            x = r.random()
            if x < 0.2:  # a sliding window x[i:i + cols]
                cand = [a for a in self.arrays.values() if a.ndim == 1 and a.fixed_shape is None and a.dtype != "fx"]
                arr = r.choice(cand) if cand and r.random() < 0.5 else self.new_array(1)
                return Ex("win", (), (arr.name, v, cols), np.dtype(arr.dtype))
            if x < 0.6:
                cand = [a for a in self.arrays.values() if a.ndim == 2 and a.fixed_shape == ("rows", cols)]
                arr = r.choice(cand) if cand and r.random() < 0.5 else self.new_array(2, None, ("rows", cols))
                return Ex("row", (), (arr.name, v), np.dtype(arr.dtype))
            if x < 0.8:
                cand = [a for a in self.arrays.values() if a.ndim == 1 and a.fixed_shape == (cols,)]
                arr = r.choice(cand) if cand and r.random() < 0.5 else self.new_array(1, None, (cols,))
                return Ex("vec", (), (arr.name,), np.dtype(arr.dtype))
            c = r.choice([1, 2, 3, -1])
            return Ex("lit", (), (c,), ("w", c, c))
        for _ in range(8):
            op = r.choice(["+", "-", "*", "&", "^", "max", "min"])
            a, b = self.rowexpr(v, cols, depth - 1), self.rowexpr(v, cols, depth - 1)
            if is_weak(a.t) and is_weak(b.t):
                continue
            fn = np.maximum if op in ("max", "min") else _PYOP[op]
            t = numpy_type(fn, a.t, b.t)
            if t is not None:
                return Ex(op if op in ("max", "min") else "bin", (a, b), () if op in ("max", "min") else (op,), t)
        arr = self.new_array(2, None, ("rows", cols))
        return Ex("row", (), (arr.name, v), np.dtype(arr.dtype))

    def sliceexpr(self, n, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.3:
            if r.random() < 0.85:
                step = r.choice([1, 1, 2, 3])
                start = r.choice([0, 0, 1, 2])
                stop = start + step * (n - 1) + 1
                size = stop + r.choice([0, 0, 2])
                arr = self.new_array(1, None, (size,))
                return Ex("slice", (), (arr.name, start, stop, step), np.dtype(arr.dtype))
            c = r.choice([1, 2, 5, -1])
            return Ex("lit", (), (c,), ("w", c, c))
        for _ in range(8):
            op = r.choice(["+", "-", "*", "&", "|", "max", "min"])
            a, b = self.sliceexpr(n, depth - 1), self.sliceexpr(n, depth - 1)
            if is_weak(a.t) and is_weak(b.t):
                continue
            fn = np.maximum if op in ("max", "min") else _PYOP[op]
            t = numpy_type(fn, a.t, b.t)
            if t is not None:
                return Ex(op if op in ("max", "min") else "bin", (a, b), () if op in ("max", "min") else (op,), t)
        return self.sliceexpr(n, 0)

    def bcastexpr(self, m, n, depth):
        """Array arithmetic with numpy broadcasting: (m, n) arrays, (n, m) arrays transposed,
        (n,) vectors, Python ints."""
        r = self.r
        if depth <= 0 or r.random() < 0.3:
            x = r.random()
            if x < 0.4:
                arr = self.new_array(2, None, (m, n))
                return Ex("vec", (), (arr.name,), np.dtype(arr.dtype))
            if x < 0.6:
                arr = self.new_array(2, None, (n, m))
                return Ex("tr", (), (arr.name,), np.dtype(arr.dtype))
            if x < 0.85:
                arr = self.new_array(1, None, (n,))
                return Ex("vec", (), (arr.name,), np.dtype(arr.dtype))
            c = r.choice([1, 2, 3, -1])
            return Ex("lit", (), (c,), ("w", c, c))
        for _ in range(8):
            op = r.choice(["+", "-", "*", "&", "^", "max", "min"])
            a, b = self.bcastexpr(m, n, depth - 1), self.bcastexpr(m, n, depth - 1)
            if is_weak(a.t) and is_weak(b.t):
                continue
            fn = np.maximum if op in ("max", "min") else _PYOP[op]
            t = numpy_type(fn, a.t, b.t)
            if t is not None:
                return Ex(op if op in ("max", "min") else "bin", (a, b), () if op in ("max", "min") else (op,), t)
        arr = self.new_array(2, None, (m, n))
        return Ex("vec", (), (arr.name,), np.dtype(arr.dtype))

    def helper(self, p):
        """A helper function called on its own result (`h(h(x))`, as stacked layers are written):
        `hw.map(n, lambda i: u[i] OP e)` or `hw.map(n, lambda i: hw.sum(n, lambda k: u[k] OP e))`,
        with e over i (and k) and the other arrays; the element type is the same for every call."""
        r = self.r
        n = self.extent()
        v = self.var(n)
        p.dims = [(v, n)]
        form = r.choice(["map", "sum"])
        if form == "sum":
            k = self.var(n)
            p.inner = [(k, n)]
        at = v if form == "map" else k
        for _ in range(10):
            dt = np.dtype(r.choice(INTS))
            op = r.choice(["+", "-", "*", "^", "&", "|", "max", "min"])
            e = self.strong([d for d, _ in p.dims + p.inner], r.randint(0, 2))
            fn = np.maximum if op in ("max", "min") else _PYOP[op]
            if numpy_type(fn, dt, e.t) == dt:
                break
        else:
            dt, op, e = np.dtype("int32"), "+", Ex("lit", (), (1,), ("w", 1, 1))
        u = Ex("uref", (), ("u", at), dt)
        p.body = Ex(op, (u, e), (), dt) if op in ("max", "min") else Ex("bin", (u, e), (op,), dt)
        p.rop = "+"
        p.extra["x"] = self.new_array(1, dt.name, (n,)).name
        p.extra["calls"] = r.choice([2, 2, 3])
        p.extra["form"] = form

    def multifold(self, p):
        r = self.r
        nd = 2 if r.random() < 0.25 else 1
        p.dims = [(self.var(e), e) for e in [self.extent(nd) for _ in range(nd)]]
        vs = [v for v, _ in p.dims]
        K = r.choice([2, 4, 5, 8])
        dt = np.dtype(r.choice(self.palette if "bool" not in self.palette else INTS))
        rowd = r.random() < 0.3
        shape = (K, r.choice([2, 4])) if rowd else (K,)
        if r.random() < 0.3:
            init = self.new_array(len(shape), dt.name, shape).name
        else:
            init = None
        # the target row: provably in [0, K)
        x = r.random()
        v = r.choice(vs)
        if x < 0.3:
            w = Ex(
                "bin",
                (Ex("idx", (), (v,), ("w", 0, self.ext[v] - 1)), Ex("lit", (), (K,), ("w", K, K))),
                ("%",),
                ("w", 0, K - 1),
            )
        elif x < 0.45:
            c = -(-self.ext[v] // K)
            w = Ex(
                "bin",
                (Ex("idx", (), (v,), ("w", 0, self.ext[v] - 1)), Ex("lit", (), (c,), ("w", c, c))),
                ("//",),
                ("w", 0, K - 1),
            )
        else:
            d = self.strong(vs, 1)
            if d.t == np.dtype(bool):
                d = Ex("cast", (d,), ("int8",), np.dtype("int8"))
            kind = r.choice(["mod", "and", "clamp"]) if K & (K - 1) == 0 else r.choice(["mod", "clamp"])
            lit = lambda c: Ex("lit", (), (c,), ("w", c, c))  # noqa: E731
            if kind == "mod":
                w = Ex("bin", (d, lit(K)), ("%",), d.t)
            elif kind == "and":
                w = Ex("bin", (d, lit(K - 1)), ("&",), d.t)
            else:
                w = Ex("min", (Ex("max", (d, lit(0)), (), d.t), lit(K - 1)), (), d.t)
        if x > 0.85:  # the nearest of K candidates, as in k-means
            e = self.var(K)
            body = self.strong(vs + [e], 2)
            if body.t.itemsize == 8 or body.t == np.dtype(bool):
                body = Ex("cast", (body,), ("int32",), np.dtype("int32"))
            w = Ex("argmin", (body,), (r.choice(["argmin", "argmax"]), e, K), np.dtype("int64"))
        if not rowd and r.random() < 0.25:  # a 2-D accumulator, one element per point
            K2 = r.choice([2, 3, 4])
            shape = (K, K2)
            v2 = r.choice(vs)
            w2 = Ex(
                "bin",
                (Ex("idx", (), (v2,), ("w", 0, self.ext[v2] - 1)), Ex("lit", (), (K2,), ("w", K2, K2))),
                ("%",),
                ("w", 0, K2 - 1),
            )
            w = Ex("tuple", (w, w2), (), None)
            if init is not None:
                self.arrays[init].fixed_shape = shape
                self.arrays[init].ndim = 2
        p.extra.update(K=K, shape=shape, dtype=dt.name, init=init, where=w)
        if rowd:
            e = self.var(shape[1])
            p.extra["rowvar"] = e
            body = self.strong(vs + [e], 2)
        else:
            body = self.strong(vs, 2) if r.random() < 0.85 else Ex("lit", (), (1,), ("w", 1, 1))
        if not is_weak(body.t) and body.t != dt:
            body = Ex("cast", (body,), (dt.name,), dt)
        p.body = body
        p.rop = r.choice(["+", "+", "max", "min", "^", "|"])


KINDS = {  # pattern kind -> weight
    "bcast": 1,
    "map": 6,
    "reduce": 4,
    "mapreduce": 3,
    "rowmap": 1,
    "rowreduce": 1,
    "slice": 1,
    "matmul": 1,
    "multifold": 2,
    "filter": 2,
    "flatmap": 2,
    "groupby": 2,
    "argmin": 1,
    "argmax": 1,
    "scalar": 1,
    "helper": 1,
}
FX_KINDS = {"map": 4, "reduce": 2, "mapreduce": 2, "argmax": 1, "argmin": 1, "filter": 1}


def generate(seed: int, index: int, excluded=frozenset(KNOWN_BUGS), kinds=None) -> Prog:
    """Program number `index` of campaign `seed`: reproducible from the pair."""
    r = random.Random(seed * 1_000_003 + index)
    fixed = r.random() < 0.12 and not kinds
    g = Gen(r, fixed=fixed, excluded=excluded)
    table = FX_KINDS if fixed else (kinds or KINDS)
    n = r.choices([1, 1, 1, 2, 2, 3])[0]
    pats = []
    for j in range(n):
        kind = r.choices(list(table), list(table.values()))[0]
        p = g.pattern(kind)
        kind = p.kind
        vt = p.extra["values"][0].t if kind == "groupby" else getattr(p.body, "t", None)
        if vt == np.dtype(bool) and p.rop in ("+", "*"):
            p.rop = "|"  # hwgen refuses '+' and '*' reductions of bool_ as ambiguous
        pats.append(p)
        base = f"o{j}"
        if kind in ("filter", "flatmap"):
            p.outs = [f"{base}v", f"{base}n"]
            g.results.append((p.outs[1], np.dtype("int64")))
        elif kind == "groupby":
            p.outs = [f"{base}k", f"{base}v", f"{base}n"]
            g.results.append((p.outs[2], np.dtype("int64")))
        else:
            p.outs = [base]
            if kind in ("reduce", "scalar") and not fixed:
                g.results.append((base, p.body.t if p.rop in ("+", "*", "max", "min", "&", "|", "^") else p.body.t))
            elif kind in ("argmin", "argmax"):
                g.results.append((base, np.dtype("int64")))
            elif kind in ("map", "helper") and not fixed and len(p.dims) == 1:
                g.res_arrays.append((base, p.body.t.name, (p.dims[0][1],)))
    return Prog(f"fz{seed}_{index}", g.arrays, g.scalars, pats, fixed, r.randrange(2**31))
