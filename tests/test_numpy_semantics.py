# amaranth: UnusedElaboratable=no
# (hypothesis may stop an example after its module is made; nothing is lost)
"""The golden model follows numpy exactly: promotion, weak Python ints, wrap-around, floor
division, shifts, comparisons, where, astype; and the hardware datapath follows the golden
model bit for bit (checked in Amaranth's simulator on random expressions)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hwgen as hw
from hwgen import ir
from hwgen.interp import Evaluator, Frame
from hwgen.lang import dtypes, scalars

INTS = [hw.int8, hw.int16, hw.int32, hw.int64, hw.uint8, hw.uint16, hw.uint32, hw.uint64]
BINOPS = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "//": np.floor_divide,
    "%": np.remainder,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
    "<<": np.left_shift,
    ">>": np.right_shift,
    "<": np.less,
    "<=": np.less_equal,
    "==": np.equal,
    "!=": np.not_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
N = 64


def apply(op, a, b):
    return {
        "+": lambda: a + b,
        "-": lambda: a - b,
        "*": lambda: a * b,
        "//": lambda: a // b,
        "%": lambda: a % b,
        "&": lambda: a & b,
        "|": lambda: a | b,
        "^": lambda: a ^ b,
        "<<": lambda: a << b,
        ">>": lambda: a >> b,
        "<": lambda: a < b,
        "<=": lambda: a <= b,
        "==": lambda: a == b,
        "!=": lambda: a != b,
        ">": lambda: a > b,
        ">=": lambda: a >= b,
    }[op]()


def rand(rng, dt, n=N):
    return rng.integers(dt.min, dt.max, n, dtype=dt.np, endpoint=True)


def compatible(a, b):
    return np.result_type(a.np, b.np).kind in "iub"  # numpy mixes int64 and uint64 into float64


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(INTS), st.sampled_from(INTS), st.sampled_from(sorted(BINOPS)), st.integers(0, 2**32))
def test_binary_ops_match_numpy(da, db, op, seed):
    if not compatible(da, db):
        return
    rng = np.random.default_rng(seed)
    a, b = rand(rng, da), rand(rng, db)
    if op in ("<<", ">>"):
        # shift counts up to twice the width (past it numpy's result is still defined: 0 or -1)
        b = (b.astype(np.int64) % min(2 * max(da.bits, db.bits), db.max + 1)).astype(db.np)

    @hw.kernel
    def k(x: hw.Array[da, N], y: hw.Array[db, N]):
        return hw.map(N, lambda i: apply(op, x[i], y[i]))

    with np.errstate(all="ignore"):
        want = BINOPS[op](a, b)
    got = k(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(INTS),
    st.sampled_from(["+", "-", "*", "//", "%", "&", "<", "=="]),
    st.integers(-200, 200),
    st.booleans(),
    st.integers(0, 2**32),
)
def test_weak_python_ints_match_numpy(dt, op, value, left, seed):
    a = rand(np.random.default_rng(seed), dt)
    if not dt.fits(value) and op not in ("<", "=="):
        return  # numpy raises OverflowError; hwgen raises TypeMismatchError (tested elsewhere)

    @hw.kernel
    def k(x: hw.Array[dt, N]):
        return hw.map(N, lambda i: apply(op, value, x[i]) if left else apply(op, x[i], value))

    with np.errstate(all="ignore"):
        want = apply(op, value, a) if left else apply(op, a, value)
    got = k(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INTS + [hw.bool_]), st.sampled_from(INTS + [hw.bool_]), st.integers(0, 2**32))
def test_astype_where_unary(d1, d2, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, N).astype(bool) if d1 == hw.bool_ else rand(rng, d1)

    @hw.kernel
    def k(x: hw.Array[d1, N]):
        cast = hw.map(N, lambda i: x[i].astype(d2))
        inv = hw.map(N, lambda j: ~x[j])
        pick = hw.map(N, lambda k_: hw.where(x[k_].astype(hw.bool_), x[k_], hw.zeros(1, d1)[0]))
        return cast, inv, pick

    cast, inv, pick = k(a)
    np.testing.assert_array_equal(cast, a.astype(d2.np))
    np.testing.assert_array_equal(inv, ~a)
    np.testing.assert_array_equal(pick, np.where(a.astype(bool), a, np.zeros(1, d1.np)[0]))
    if d1 != hw.bool_:

        @hw.kernel
        def k2(x: hw.Array[d1, N]):
            return hw.map(N, lambda i: -x[i]), hw.map(N, lambda j: abs(x[j]))

        neg, ab = k2(a)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(neg, -a)
            np.testing.assert_array_equal(ab, np.abs(a))


def test_reductions_accumulate_in_the_values_dtype():
    a = np.array([100, 100, 100], np.int8)

    @hw.kernel
    def k(x: hw.Array[hw.int8, 3]):
        return (
            hw.sum(3, lambda i: x[i]),
            hw.sum(3, lambda j: x[j].astype(hw.int32)),
            hw.reduce(3, lambda k_: x[k_], "*"),
            hw.max(3, lambda m: x[m] - m),
        )

    s8, s32, prod, mx = k(a)
    assert s8.dtype == np.int8 and s8 == np.add.reduce(a, dtype=np.int8)
    assert s32.dtype == np.int32 and s32 == 300
    assert prod == np.multiply.reduce(a, dtype=np.int8)
    assert mx == 100


def test_array_expressions_slices_matmul_and_custom_ops():
    rng = np.random.default_rng(1)
    A = rng.integers(-50, 50, (6, 5), dtype=np.int32)
    B = rng.integers(-50, 50, (5, 4), dtype=np.int32)
    v = rng.integers(-50, 50, 5, dtype=np.int32)

    @hw.kernel
    def k(a: hw.Array[hw.int32, 6, 5], b: hw.Array[hw.int32, 5, 4], x: hw.Array[hw.int32, 5]):
        colsum = hw.sum(6, lambda i: a[i, :])  # elementwise reduce over rows
        rows = hw.map(6, lambda r: a[r, 1:4] * 2)  # slices gain dimensions
        prod = a @ b
        mv = a @ x
        rev = hw.map(5, lambda c: x[4 - c])
        first_neg = hw.reduce(5, lambda t: x[t], lambda p, q: hw.where(p < 0, p, q))
        return colsum, rows, prod, mv, rev, first_neg, a.T[1, ::2], hw.maximum(x, 0)

    colsum, rows, prod, mv, rev, first_neg, tcol, relu = k(A, B, v)
    np.testing.assert_array_equal(colsum, A.sum(axis=0, dtype=np.int32))
    np.testing.assert_array_equal(rows, A[:, 1:4] * 2)
    np.testing.assert_array_equal(prod, A @ B)
    np.testing.assert_array_equal(mv, A @ v)
    np.testing.assert_array_equal(rev, v[::-1])
    negs = v[v < 0]
    assert first_neg == (negs[0] if len(negs) else v[-1])
    np.testing.assert_array_equal(tcol, A.T[1, ::2])
    np.testing.assert_array_equal(relu, np.maximum(v, 0))


# ------------------------------------------------------------------ hardware datapath


def _random_expression(draw, params):
    """A random traced expression over the Vals in `params` (numpy typing rules apply)."""
    vals = list(params)
    for _ in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["bin", "bin", "bin", "cast", "where", "unary", "const", "shift"]))
        a = draw(st.sampled_from(vals))
        b = draw(st.sampled_from(vals))
        try:
            if kind == "bin":
                op = draw(st.sampled_from(sorted(BINOPS) + ["max", "min"]))
                v = scalars.binary(op, a, b) if op in ("max", "min") else apply(op, a, b)
            elif kind == "cast":
                v = a.astype(draw(st.sampled_from(INTS + [hw.bool_])))
            elif kind == "where":
                v = hw.where(a.astype(hw.bool_), a, b)
            elif kind == "unary":
                v = draw(st.sampled_from([lambda x: -x, lambda x: ~x, abs]))(a)
            elif kind == "shift":  # an amount of known range: the shifter uses only its bits
                v = apply(draw(st.sampled_from(["<<", ">>"])), a, b & draw(st.integers(0, 70)))
            else:
                v = apply(draw(st.sampled_from(["+", "*", "&", ">>"])), a, draw(st.integers(0, 5)))
        except hw.HwgenError:
            continue
        vals.append(v)
    return vals[-1]


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_datapath_matches_golden_model(data):
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from hwgen.hw.datapath import build_comb, dtype_shape

    types = data.draw(st.lists(st.sampled_from(INTS), min_size=2, max_size=3))
    names = [f"p{k}" for k in range(len(types))]
    params = [scalars.Val(ir.Param(n, t)) for n, t in zip(names, types)]
    expr = scalars.const(_random_expression(data.draw, params)).expr
    m = Module()
    sigs = {n: Signal(dtype_shape(t), name=n) for n, t in zip(names, types)}
    count = [0]

    def new_signal(shape, hint):
        count[0] += 1
        return Signal(shape, name=f"{hint}{count[0]}")

    out = build_comb(m, expr, lambda node: sigs[node.name], {}, new_signal)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    vectors = [{n: rand(rng, t, 1)[0] for n, t in zip(names, types)} for _ in range(24)]
    got = []

    async def bench(ctx):
        for vec in vectors:
            for n, v in vec.items():
                ctx.set(sigs[n], int(v))
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for vec, g in zip(vectors, got):
        want = Evaluator(vec).expr(expr, Frame(params=vec)).reshape(())
        assert dtypes.DType.wrap(expr.dtype, g) == int(want), (vec, expr)
