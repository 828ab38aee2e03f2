"""A `Prog` as runnable Python source: the hwgen kernel, the plain-numpy reference (written
without hwgen: comprehensions over numpy scalars, numpy's own promotion and wrap-around) and
`inputs(seed)`."""

from __future__ import annotations

import numpy as np

from .gen import CUSTOM, FX_FRAC, Ex, Prog

PRELUDE = (
    """\
import operator
import numpy as np
import hwgen as hw

# ---- the reference's helpers: plain numpy, nothing from hwgen
R = {"+": operator.add, "*": operator.mul, "max": np.maximum, "min": np.minimum,
     "&": operator.and_, "|": operator.or_, "^": operator.xor}


def where(c, a, b):
    return np.where(c, a, b)[()]


def fold(op, vals):
    acc = vals[0]
    for v in vals[1:]:
        acc = op(acc, v)
    return acc


def mfold(acc, pairs, op):
    acc = np.array(acc, copy=True)
    for w, v in pairs:
        acc[w] = op(acc[w], v)
    return acc


def compact(pairs, cap):
    dt = np.array([v for _, v in pairs]).dtype
    out = np.zeros(cap, dt)
    n = 0
    for c, v in pairs:
        if c:
            out[n] = v
            n += 1
    return out, np.int64(n)


def groupby(pairs, op, max_keys):
    order, acc = [], {}
    for k, v in pairs:
        if int(k) in acc:
            acc[int(k)] = op(acc[int(k)], v)
        else:
            order.append(k)
            acc[int(k)] = v
    if len(order) > max_keys:
        raise OverflowError("more keys than max_keys")
    kdt = np.array([k for k, _ in pairs]).dtype
    vs = np.array([v for _, v in pairs])
    keys = np.zeros(max_keys, kdt)
    vals = np.zeros((max_keys,) + vs.shape[1:], vs.dtype)
    for n, k in enumerate(order):
        keys[n] = k
        vals[n] = acc[int(k)]
    return keys, vals, np.int64(len(order))


FRAC = %d


def wrap32(v):
    return np.int32(((int(v) + 2**31) %% 2**32) - 2**31)


def fxin(x):  # floats on the grid -> raw int32 (round down, wrap)
    return np.floor(np.asarray(x, np.float64) * 2**FRAC).astype(np.int64).astype(np.int32)


def fxmul(a, b):  # exact product rounded down
    return wrap32((int(a) * int(b)) >> FRAC)


def fxdiv(a, b):  # exact quotient rounded down; x / 0 == 0
    return np.int32(0) if int(b) == 0 else wrap32((int(a) << FRAC) // int(b))


def fxout(raw):
    return np.asarray(raw).astype(np.float64) / 2**FRAC if np.ndim(raw) else np.float64(raw) / 2**FRAC
"""
    % FX_FRAC
)


def hw_dtype(dt: str) -> str:
    if dt == "fx":
        return "hw.fixed(16, 16)"
    return "hw.bool_" if dt == "bool" else f"hw.{dt}"


def np_dtype(dt: str) -> str:
    return "np.bool_" if dt == "bool" else f"np.{dt}"


def _sub(s) -> str:
    v, c, off = s
    if v is None:
        return str(off)
    if c == -1:
        return f"{off} - {v}"
    t = v if c == 1 else f"{c} * {v}"
    return t if off == 0 else f"{t} + {off}"


class Renderer:
    def __init__(self, prog: Prog):
        self.p = prog
        self.ext = {}
        for pat in prog.pats:
            for v, e in pat.dims + pat.inner:
                self.ext[v] = e
            if "rowvar" in pat.extra:
                self.ext[pat.extra["rowvar"]] = pat.extra["shape"][1]
            for e in self._exprs(pat):
                for n in e.walk():
                    if n.op == "argmin":
                        self.ext[n.a[1]] = n.a[2]
        self.shapes = self._shapes()

    # --- shapes of the arrays actually used
    def _uses(self):
        for pat in self.p.pats:
            for e in self._exprs(pat):
                for n in e.walk():
                    yield pat, n

    def _exprs(self, pat):
        x = pat.extra
        out = [pat.body] if isinstance(pat.body, Ex) else []
        if x.get("pred") is not None:
            out.append(x["pred"])
        for v, w in x.get("emits", []):
            out += [v] + ([w] if w is not None else [])
        if "key" in x:
            out.append(x["key"])
        out += x.get("values", [])
        if isinstance(x.get("where"), Ex):
            out.append(x["where"])
        return out

    def _shapes(self):
        need = {}
        used = set()
        for pat, n in self._uses():
            if n.op == "ref" and n.a[0] in self.p.arrays:
                arr = self.p.arrays[n.a[0]]
                used.add(arr.name)
                cur = need.setdefault(arr.name, [1] * arr.ndim)
                for ax, (v, c, off) in enumerate(n.a[1]):
                    hi = off if v is None else (off if c == -1 else c * (self.ext[v] - 1) + off)
                    cur[ax] = max(cur[ax], hi + 1)
            elif n.op == "win":
                used.add(n.a[0])
                cur = need.setdefault(n.a[0], [1])
                cur[0] = max(cur[0], self.ext[n.a[1]] - 1 + n.a[2])
            elif n.op in ("row", "vec", "slice", "tr"):
                used.add(n.a[0])
                if n.op == "row":
                    cur = need.setdefault(n.a[0], [1, 1])
                    cur[0] = max(cur[0], self.ext[n.a[1]])
        for pat in self.p.pats:
            if pat.kind == "matmul":
                used.update([pat.extra["a"], pat.extra["b"]])
            if pat.kind == "multifold" and pat.extra.get("init"):
                used.add(pat.extra["init"])
            if pat.kind == "helper":
                used.add(pat.extra["x"])
        shapes = {}
        for name, arr in self.p.arrays.items():
            if name not in used:
                continue
            fs = arr.fixed_shape
            if fs is None:
                shapes[name] = tuple(n + p for n, p in zip(need[name], arr.pad))
            elif fs[0] == "rows":
                shapes[name] = (need.get(name, [1])[0] + arr.pad[0], fs[1])
            else:
                shapes[name] = tuple(fs)
        return shapes

    def params(self):
        arrs = [a for a in self.p.arrays.values() if a.name in self.shapes]
        used = {n.a[0] for _, n in self._uses() if n.op == "par"}
        return arrs, [s for s in sorted(self.p.scalars) if s in used]

    # --- expressions
    def ex(self, e: Ex, ref: bool) -> str:
        r = lambda k: self.ex(k, ref)  # noqa: E731
        fx = self.p.fixed
        op = e.op
        if op == "ref":
            return f"{e.a[0]}[{', '.join(_sub(s) for s in e.a[1])}]"
        if op in ("idx", "par", "res"):
            return e.a[0]
        if op == "lit":
            if ref and fx:
                return f"np.int32({e.a[0] << FX_FRAC})"
            return str(e.a[0]) if e.a[0] >= 0 else f"({e.a[0]})"
        if op == "flit":
            if ref:
                return f"np.int32({int(np.floor(e.a[0] * 2**FX_FRAC))})"
            return repr(e.a[0]) if e.a[0] >= 0 else f"({e.a[0]!r})"
        if op == "bin":
            o = e.a[0]
            if ref and fx and o == "*":
                return f"fxmul({r(e.kids[0])}, {r(e.kids[1])})"
            if ref and fx and o == "/":
                return f"fxdiv({r(e.kids[0])}, {r(e.kids[1])})"
            return f"({r(e.kids[0])} {o} {r(e.kids[1])})"
        if op == "un":
            o = e.a[0]
            if o == "abs":
                return f"{'np' if ref else 'hw'}.abs({r(e.kids[0])})"
            return f"({o}{r(e.kids[0])})"
        if op == "where":
            return f"{'' if ref else 'hw.'}where({r(e.kids[0])}, {r(e.kids[1])}, {r(e.kids[2])})"
        if op in ("max", "min"):
            return f"{'np' if ref else 'hw'}.{op}imum({r(e.kids[0])}, {r(e.kids[1])})"
        if op == "cast":
            dt = e.a[0]
            return f"{r(e.kids[0])}.astype({np_dtype(dt) if ref else hw_dtype(dt)})"
        if op == "row":
            return f"{e.a[0]}[{e.a[1]}, :]"
        if op == "win":
            return f"{e.a[0]}[{e.a[1]}:{e.a[1]} + {e.a[2]}]"
        if op == "uref":
            return f"{e.a[0]}[{e.a[1]}]"
        if op == "vec":
            return e.a[0]
        if op == "tr":
            return f"{e.a[0]}.T"
        if op == "tuple":
            return "(" + ", ".join(r(k) for k in e.kids) + ")"
        if op == "argmin":
            which, v, n = e.a
            if ref:
                return f"np.int64(np.{which}(np.array([{r(e.kids[0])} for {v} in range({n})])))"
            return f"hw.{which}(hw.map({n}, lambda {v}: {r(e.kids[0])}))"
        if op == "slice":
            _, a, b, s = e.a
            return f"{e.a[0]}[{a}:{b}" + (f":{s}]" if s != 1 else "]")
        raise ValueError(op)

    @staticmethod
    def dom(dims) -> str:
        return str(dims[0][1]) if len(dims) == 1 else "(" + ", ".join(str(e) for _, e in dims) + ")"

    @staticmethod
    def lam(dims) -> str:
        return "lambda " + ", ".join(v for v, _ in dims)

    @staticmethod
    def loops(dims) -> str:
        return " ".join(f"for {v} in range({e})" for v, e in dims)

    def hw_red(self, rop, dims, body):
        d, lam = self.dom(dims), self.lam(dims)
        if rop in ("+", "max", "min"):
            fn = {"+": "sum", "max": "max", "min": "min"}[rop]
            return f"hw.{fn}({d}, {lam}: {body})"
        op = CUSTOM[rop][0] if rop in CUSTOM else repr(rop)
        return f"hw.reduce({d}, {lam}: {body}, {op})"

    def ref_op(self, rop):
        return f"({CUSTOM[rop][1]})" if rop in CUSTOM else f'R["{rop}"]'

    def hw_pat(self, p) -> str:
        x = p.extra
        ex = lambda e: self.ex(e, False)  # noqa: E731
        if p.kind == "map" and x.get("toint"):
            return f"hw.map({self.dom(p.dims)}, {self.lam(p.dims)}: ({ex(p.body)}).astype(hw.int32))"
        if p.kind == "map":
            return f"hw.map({self.dom(p.dims)}, {self.lam(p.dims)}: {ex(p.body)})"
        if p.kind == "reduce":
            return self.hw_red(p.rop, p.dims, ex(p.body))
        if p.kind == "mapreduce":
            return f"hw.map({self.dom(p.dims)}, {self.lam(p.dims)}: {self.hw_red(p.rop, p.inner, ex(p.body))})"
        if p.kind == "rowmap":
            return f"hw.map({self.dom(p.dims)}, {self.lam(p.dims)}: {ex(p.body)})"
        if p.kind == "rowreduce":
            return self.hw_red(p.rop, p.dims, ex(p.body))
        if p.kind in ("slice", "scalar", "bcast"):
            return ex(p.body)
        if p.kind == "matmul":
            return f"{x['a']}{'.T' if x['ta'] else ''} @ {x['b']}"
        if p.kind in ("argmin", "argmax"):
            return f"hw.{p.kind}(hw.map({self.dom(p.dims)}, {self.lam(p.dims)}: {ex(p.body)}))"
        if p.kind == "multifold":
            shape = x["shape"] if len(x["shape"]) > 1 else x["shape"][0]
            init = x["init"] or f"hw.zeros({shape}, {hw_dtype(x['dtype'])})"
            val = ex(p.body)
            if "rowvar" in x:
                val = f"hw.map({x['shape'][1]}, lambda {x['rowvar']}: {val})"
            op = "" if p.rop == "+" else f", {p.rop!r}"
            return f"hw.multifold({self.dom(p.dims)}, {init}, {self.lam(p.dims)}: ({ex(x['where'])}, {val}){op})"
        if p.kind == "filter":
            fn = f", {self.lam(p.dims)}: {ex(p.body)}" if p.body is not None else ""
            return f"hw.filter({self.dom(p.dims)}, {self.lam(p.dims)}: {ex(x['pred'])}{fn})"
        if p.kind == "flatmap":
            es = ", ".join(f"hw.emit({ex(v)}" + (f", when={ex(w)})" if w is not None else ")") for v, w in x["emits"])
            return f"hw.flatmap({self.dom(p.dims)}, {self.lam(p.dims)}: ({es},), max_out={x['max_out']})"
        if p.kind == "groupby":
            vals = x["values"]
            val = ", ".join(ex(v) for v in vals)
            val = val if len(vals) == 1 and not x.get("tuple1") else f"({val},)"
            op = CUSTOM[p.rop][0] if p.rop in CUSTOM else repr(p.rop)
            return (
                f"hw.groupby_fold({self.dom(p.dims)}, {self.lam(p.dims)}: ({ex(x['key'])}, {val}), {op}, "
                f"max_keys={x['max_keys']})"
            )
        raise ValueError(p.kind)

    def ref_pat(self, p) -> str:
        x = p.extra
        ex = lambda e: self.ex(e, True)  # noqa: E731
        fx = self.p.fixed
        out = (lambda s: f"fxout({s})") if fx else (lambda s: s)  # noqa: E731
        shape = ", ".join(str(e) for _, e in p.dims)
        if p.kind == "map" and x.get("toint"):  # fixed to int32: round down
            return f"np.array([np.int32(int({ex(p.body)}) >> FRAC) {self.loops(p.dims)}]).reshape({shape})"
        if p.kind == "map":
            return out(f"np.array([{ex(p.body)} {self.loops(p.dims)}]).reshape({shape})")
        if p.kind == "reduce":
            return out(f"fold({self.ref_op(p.rop)}, [{ex(p.body)} {self.loops(p.dims)}])")
        if p.kind == "mapreduce":
            inner = f"fold({self.ref_op(p.rop)}, [{ex(p.body)} {self.loops(p.inner)}])"
            return out(f"np.array([{inner} {self.loops(p.dims)}]).reshape({shape})")
        if p.kind == "rowmap":
            return f"np.array([{ex(p.body)} {self.loops(p.dims)}])"
        if p.kind == "rowreduce":
            return f"fold({self.ref_op(p.rop)}, [{ex(p.body)} {self.loops(p.dims)}])"
        if p.kind in ("slice", "scalar", "bcast"):
            return ex(p.body)
        if p.kind == "matmul":
            return f"{x['a']}{'.T' if x['ta'] else ''} @ {x['b']}"
        if p.kind in ("argmin", "argmax"):
            return f"np.int64(np.{p.kind}(np.array([{ex(p.body)} {self.loops(p.dims)}])))"
        if p.kind == "multifold":
            init = x["init"] or f"np.zeros({x['shape']}, {np_dtype(x['dtype'])})"
            val = ex(p.body)
            if "rowvar" in x:
                val = f"np.array([{val} for {x['rowvar']} in range({x['shape'][1]})])"
            return f"mfold({init}, [({ex(x['where'])}, {val}) {self.loops(p.dims)}], {self.ref_op(p.rop)})"
        if p.kind == "filter":
            if p.body is not None:
                val = ex(p.body)
            else:
                flat = "0"
                for v, e in p.dims:
                    flat = f"({flat}) * {e} + {v}" if flat != "0" else v
                val = f"np.int64({flat})"
            n = 1
            for _, e in p.dims:
                n *= e
            if fx:
                return f"(lambda v, n: (fxout(v), n))(*compact([({ex(x['pred'])}, {val}) {self.loops(p.dims)}], {n}))"
            return f"compact([({ex(x['pred'])}, {val}) {self.loops(p.dims)}], {n})"
        if p.kind == "flatmap":
            n = x["max_out"]
            for _, e in p.dims:
                n *= e
            pairs = ", ".join(f"({ex(w) if w is not None else 'True'}, {ex(v)})" for v, w in x["emits"])
            return f"compact([pr {self.loops(p.dims)} for pr in ({pairs},)], {n})"
        if p.kind == "groupby":
            vals = x["values"]
            val = ", ".join(ex(v) for v in vals)
            val = val if len(vals) == 1 and not x.get("tuple1") else f"np.array([{val}])"
            return f"groupby([({ex(x['key'])}, {val}) {self.loops(p.dims)}], {self.ref_op(p.rop)}, {x['max_keys']})"
        raise ValueError(p.kind)

    def helper_lines(self, p, ref: bool) -> list[str]:
        """A helper pattern: the function's definition, then the result as nested calls."""
        x = p.extra
        (v, n), body = p.dims[0], self.ex(p.body, ref)
        if x["form"] == "sum":
            k = p.inner[0][0]
            body = f"fold(R['+'], [{body} for {k} in range({n})])" if ref else f"hw.sum({n}, lambda {k}: {body})"
        call = x["x"]
        for _ in range(x["calls"]):
            call = f"h{p.outs[0]}({call})"
        fn = f"np.array([{body} for {v} in range({n})])" if ref else f"hw.map({n}, lambda {v}: {body})"
        return [f"    def h{p.outs[0]}(u):", f"        return {fn}", f"    {p.outs[0]} = {call}"]

    # --- the whole file
    def source(self, schedule=None, input_seed=None, variant=None) -> str:
        arrs, scal = self.params()
        seed = self.p.input_seed if input_seed is None else input_seed
        sig = [f"{a.name}: hw.Array[{hw_dtype(a.dtype)}, {', '.join(map(str, self.shapes[a.name]))}]" for a in arrs]
        sig += [f"{s}: {hw_dtype(self.p.scalars[s])}" for s in scal]
        names = [a.name for a in arrs] + scal
        outs = [o for p in self.p.pats for o in p.outs]
        sched = schedule or {"tile": {}, "par": {}, "metapipeline": False}
        variant, dram = variant or ("plain", {"latency": 20, "words_per_cycle": 4, "jitter": 0})
        lines = [
            PRELUDE,
            "",
            f"SCHEDULE = {sched!r}",
            f"DRAM = {dram!r}  # Verilator's DRAM model",
            f"RUNS = {2 if variant == 'runs2' else 1}  # runs without a reset in between",
            "",
            "",
            "@hw.kernel(tile=SCHEDULE['tile'], par=SCHEDULE['par'], metapipeline=SCHEDULE['metapipeline'])",
            f"def {self.p.name}({', '.join(sig)}):",
        ]
        for p in self.p.pats:
            if p.kind == "helper":
                lines += self.helper_lines(p, False)
                continue
            lines.append(f"    {', '.join(p.outs)} = {self.hw_pat(p)}")
        lines.append(f"    return {', '.join(outs)}")
        lines += [
            "",
            "",
            f"kernel = {self.p.name}",
            "",
            "",
            f"def reference({', '.join(names)}):",
            '    """Plain numpy over numpy scalars (NEP 50), independent of hwgen."""',
        ]
        for a in arrs:
            if a.dtype == "fx":
                lines.append(f"    {a.name} = fxin({a.name})")
        for p in self.p.pats:
            if p.kind == "helper":
                lines += self.helper_lines(p, True)
                continue
            lines.append(f"    {', '.join(p.outs)} = {self.ref_pat(p)}")
        lines.append(f"    return {', '.join(outs)}")
        lines += ["", "", f"def inputs(seed={seed}):", "    rng = np.random.default_rng(seed)"]
        for a in arrs:
            lines.append(f"    {a.name} = {self.rand(a.dtype, a.mode, self.shapes[a.name])}")
        for s in scal:
            lines.append(f"    {s} = {self.rand(self.p.scalars[s], 'small' if s[-1] in '02468' else 'full', ())}[()]")
        lines.append(f"    return ({', '.join(names)}{',' if len(names) == 1 else ''})")
        lines += ["", "", MAIN]
        return "\n".join(lines) + "\n"

    @staticmethod
    def rand(dt, mode, shape):
        if dt == "fx":
            lim = 2**17 if mode == "small" else 2**21
            return f"rng.integers({-lim}, {lim}, {shape!r}) / 2.0**FRAC"
        if dt == "bool":
            return f"rng.integers(0, 1, {shape!r}, endpoint=True).astype(np.bool_)"
        info = np.iinfo(np.dtype(dt))
        lo, hi = (max(info.min, -4), min(info.max, 4)) if mode == "small" else (info.min, info.max)
        return f"rng.integers({lo}, {hi}, {shape!r}, dtype={np_dtype(dt)}, endpoint=True)"


MAIN = """\
if __name__ == "__main__":  # golden model vs reference, then Verilator with `--rtl`
    import sys
    args = inputs()
    with np.errstate(all="ignore"):
        want = reference(*args)
    got = kernel(*args)
    got = got if isinstance(got, tuple) else (got,)
    for k, (g, w) in enumerate(zip(got, want)):
        same = np.asarray(g).dtype == np.asarray(w).dtype and np.array_equal(g, w)
        print(f"result {k}: {'ok' if same else 'MISMATCH'}\\n  golden    {g!r}\\n  reference {w!r}")
    if "--rtl" in sys.argv:
        from hwgen.simulate import simulate
        r = simulate(kernel, args, dram=hw.DramConfig(**DRAM), runs=RUNS)
        sim = r.outputs if isinstance(r.outputs, tuple) else (r.outputs,)
        for k, (g, s) in enumerate(zip(got, sim)):
            print(f"result {k} in Verilator: {'ok' if np.array_equal(g, s) else 'MISMATCH'}\\n  {s!r}")
        print(f"cycles {r.cycles}, predicted {r.predicted_cycles}")"""


def render(prog: Prog, schedule=None, input_seed=None, variant=None) -> str:
    return Renderer(prog).source(schedule, input_seed, variant)
