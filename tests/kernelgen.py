"""Random kernels and random legal schedules, for property tests.

`random_kernel(draw)` builds one of a few program shapes (elementwise maps with halos, 2-D maps,
scalar reductions, maps of reductions, gemm-like, column reductions) with a random expression
body over random integer dtypes; `random_schedule(draw, kernel)` picks tiles that divide each
extent, lanes that divide each tile, and metapipelining.
"""

import numpy as np
from hypothesis import strategies as st

import hwgen as hw

DTYPES = [hw.int8, hw.int16, hw.int32, hw.uint8, hw.uint16, hw.uint32]
OPS = ["+", "-", "*", "&", "|", "^", "max", "min", "where", ">>"]
REDUCE_OPS = ["+", "max", "min", "^", "custom"]


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def _combine(draw, op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "max":
        return hw.maximum(a, b)
    if op == "min":
        return hw.minimum(a, b)
    if op == "where":
        return hw.where(a < b, a, b + 1)
    return a >> draw(st.integers(0, 3))


def _expr(draw, leaves, depth=2):
    """A random expression over `leaves` (callables returning traced values)."""
    if depth == 0 or draw(st.booleans()):
        v = draw(st.sampled_from(leaves))()
        if draw(st.integers(0, 4)) == 0:
            v = v.astype(draw(st.sampled_from(DTYPES)))
        return v
    op = draw(st.sampled_from(OPS))
    a = _expr(draw, leaves, depth - 1)
    b = _expr(draw, leaves, depth - 1) if op != ">>" else None
    if b is None:
        return _combine(draw, op, a, None)
    try:
        return _combine(draw, op, a, b)
    except hw.HwgenError:  # e.g. int32 with uint32 mixing fine, but some pairs are not
        return a


def _reduce_op(draw):
    op = draw(st.sampled_from(REDUCE_OPS))
    if op == "custom":
        return lambda p, q: hw.where(q > 0, q, p)  # the last positive value: associative, not commutative
    return op


def random_kernel(draw):
    """(kernel, input arrays) for a random program."""
    shape = draw(st.sampled_from(["map1d", "map2d", "reduce1d", "reduce2d", "map_reduce", "gemm", "colsum"]))
    n = draw(st.sampled_from([4, 6, 8, 12, 16]))
    m = draw(st.sampled_from([2, 4, 8]))
    dts = [draw(st.sampled_from(DTYPES)) for _ in range(3)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def arr(dt, *sh):
        return rng.integers(dt.min, dt.max, sh, dtype=dt.np, endpoint=True)

    op = _reduce_op(draw)
    if shape == "map1d":
        h1, h2 = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        X, Y = n + h1, n + h2

        def fn(x: hw.Array[dts[0], X], y: hw.Array[dts[1], Y]):
            return hw.map(n, lambda i: _expr(draw, [lambda: x[i], lambda: x[i + h1], lambda: y[i + h2]]))

        args = (arr(dts[0], X), arr(dts[1], Y))
    elif shape == "map2d":

        def fn(a: hw.Array[dts[0], m, n], x: hw.Array[dts[1], m], y: hw.Array[dts[2], n]):
            return hw.map((m, n), lambda i, j: _expr(draw, [lambda: a[i, j], lambda: x[i], lambda: y[j]]))

        args = (arr(dts[0], m, n), arr(dts[1], m), arr(dts[2], n))
    elif shape == "reduce1d":

        def fn(x: hw.Array[dts[0], n], y: hw.Array[dts[1], n]):
            return hw.reduce(n, lambda i: _expr(draw, [lambda: x[i], lambda: y[i]]), op)

        args = (arr(dts[0], n), arr(dts[1], n))
    elif shape == "reduce2d":

        def fn(a: hw.Array[dts[0], m, n], x: hw.Array[dts[1], n]):
            return hw.reduce((m, n), lambda i, j: _expr(draw, [lambda: a[i, j], lambda: x[j]]), op)

        args = (arr(dts[0], m, n), arr(dts[1], n))
    elif shape == "map_reduce":

        def fn(a: hw.Array[dts[0], m, n], x: hw.Array[dts[1], n]):
            return hw.map(m, lambda i: hw.reduce(n, lambda j: _expr(draw, [lambda: a[i, j], lambda: x[j]]), op))

        args = (arr(dts[0], m, n), arr(dts[1], n))
    elif shape == "gemm":

        def fn(a: hw.Array[dts[0], m, n], b: hw.Array[dts[1], n, m]):
            return hw.map(
                (m, m), lambda i, j: hw.reduce(n, lambda k: _expr(draw, [lambda: a[i, k], lambda: b[k, j]], 1), op)
            )

        args = (arr(dts[0], m, n), arr(dts[1], n, m))
    else:

        def fn(a: hw.Array[dts[0], n, m]):
            return hw.reduce(n, lambda i: a[i, :] * 3, op)

        args = (arr(dts[0], n, m),)
    fn.__name__ = f"rand_{shape}"
    return hw.kernel(metapipeline=False)(fn), args


def random_schedule(draw, kernel) -> dict:
    extents = {k: v for k, v in kernel.program.extents.items() if not k.startswith("%")}
    tile, par = {}, {}
    for name, extent in sorted(extents.items()):
        t = draw(st.sampled_from(_divisors(extent)))
        if t > 1:
            tile[name] = t
            p = draw(st.sampled_from([d for d in _divisors(t) if d <= 8]))
            if p > 1:
                par[name] = p
    return {"tile": tile, "par": par, "metapipeline": draw(st.booleans())}
