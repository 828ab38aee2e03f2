"""Regressions from the reliability issue, front end: one-column group-by values keep their
axis, comparisons of index values are Python bools, sliding windows, Python ints beyond int64
next to index values, 64-bit fixed-point products, and numpy's array methods."""

import numpy as np
import pytest

import hwgen as hw
from hwgen import int8, int32

# ------------------------------------------------------------- one-column group-by values


@hw.kernel
def group_one_column(k: hw.Array[int32, 16], v: hw.Array[int32, 16, 1]):
    return hw.groupby_fold(16, lambda i: (k[i], v[i, :]), max_keys=8)


@hw.kernel
def group_one_tuple(k: hw.Array[int32, 16], v: hw.Array[int32, 16]):
    return hw.groupby_fold(16, lambda g: (k[g], (v[g],)), max_keys=8)


@hw.kernel
def group_scalar(k: hw.Array[int32, 16], v: hw.Array[int32, 16]):
    return hw.groupby_fold(16, lambda s: (k[s], v[s]), max_keys=8)


def group_reference(k, v, columns):
    order = list(dict.fromkeys(int(x) for x in k))
    keys = np.zeros(8, np.int32)
    values = np.zeros((8, columns), np.int32)
    for slot, key in enumerate(order):
        keys[slot] = key
        values[slot] = v[k == key].reshape(-1, columns).sum(axis=0)
    return keys, values, len(order)


def group_inputs():
    rng = np.random.default_rng(3)
    return rng.integers(0, 5, 16, dtype=np.int32) * 3 - 4, rng.integers(-50, 50, 16, dtype=np.int32)


def test_one_column_group_values_keep_their_axis():
    k, v = group_inputs()
    want_keys, want_values, want_count = group_reference(k, v, 1)
    for kernel, arg in ((group_one_column, v.reshape(16, 1)), (group_one_tuple, v)):
        keys, values, count = kernel(k, arg)
        assert values.shape == (8, 1) and values.dtype == np.int32
        np.testing.assert_array_equal(keys, want_keys)
        np.testing.assert_array_equal(values, want_values)
        assert count == want_count
    keys, values, count = group_scalar(k, v)
    assert values.shape == (8,)  # a scalar value gives a 1-D values array, as before
    np.testing.assert_array_equal(values, want_values[:, 0])
    assert [p.shape for p in group_one_column.results] == [(8,), (8, 1), ()]


@pytest.mark.rtl
def test_one_column_group_values_in_hardware():
    k, v = group_inputs()
    r = group_one_column.with_schedule(tile={"i": 8}).verify(k, v.reshape(16, 1))
    assert r.outputs[1].shape == (8, 1)


# ------------------------------------------- comparisons of index values are Python bools

# each body is evaluated by plain Python/numpy with i a Python int and x[i] an np.int8
BOOL_BODIES = [
    "(i < 2) + (i < 3) + x[i]",
    "~(i < 2) + x[i]",
    "(i < 2) * 3 + x[i]",
    "(i < 2) - (i < 5) + x[i]",
    "-(i < 3) + x[i]",
    "+(i < 3) + x[i]",
    "abs(i >= 4) + x[i]",
    "((i < 2) & (i > 0)) + x[i]",
    "((i < 2) | (i > 5)) ^ (i == 3)",
    "(i < 4) + (i < 6)",
    "~(i < 4)",
    "(i < 3) * (i < 5)",
    "(i < 3) + True",
    "((i < 3) == (i < 5)) + 0",
    "(i < 2) << 2",
    "hw.where((i < 4) + (i < 6) == 2, x[i], 7)",
    "hw.maximum(i < 4, i < 2)",
]


def _python_value(body, i, x):
    return eval(body, {"hw": _NumpyHw, "i": i, "x": x})


class _NumpyHw:
    where = staticmethod(np.where)
    maximum = staticmethod(max)


@pytest.mark.parametrize("body", BOOL_BODIES)
def test_index_comparisons_behave_like_python_bools(body):
    x = np.arange(-4, 4, dtype=np.int8)
    fn = eval(f"lambda x: hw.map(8, lambda i: {body})", {"hw": hw})
    got = hw.kernel(_annotated(fn))(x)
    want = np.array([_python_value(body, i, x) for i in range(8)])
    assert got.dtype == want.dtype, (body, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def _annotated(fn):
    def bools(x: hw.Array[int8, 8]):
        return fn(x)

    return bools


def test_index_comparisons_fold_when_the_range_decides():
    # Python ints beyond int64 next to index values: Python compares exactly, and over the
    # index's range the answer is known
    @hw.kernel
    def wide(x: hw.Array[int32, 8]):
        return (
            hw.map(8, lambda i: hw.where(i <= 2**63, x[i], 0)),
            hw.map(8, lambda j: hw.where(j > -(2**70), 1, 0) + (j == 2**64) + (j < 4)),
        )

    x = np.arange(8, dtype=np.int32)
    a, b = wide(x)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, [int(True) + False + (j < 4) for j in range(8)])


def test_index_arithmetic_beyond_int64_is_a_clear_error():
    with pytest.raises(hw.TypeMismatchError) as e:

        @hw.kernel
        def wide(x: hw.Array[int32, 8]):
            return hw.map(8, lambda i: hw.where(i + 2**63 > 2**63 + 3, x[i], 0))  # noqa

    assert (
        "'+' on index values gives values in [9223372036854775808, 9223372036854775815], beyond int64"
        in e.value.message
    )
    assert e.value.file == __file__ and "OverflowError" not in e.value.message
    with pytest.raises(hw.TypeMismatchError) as e:

        @hw.kernel
        def shifted(x: hw.Array[int32, 8]):
            return hw.map(8, lambda i: hw.where((i << 62) > 3, x[i], 0))  # noqa

    assert e.value.message.startswith("'<<' on index values gives values in [0, 32281802128991715328], beyond int64")

    @hw.kernel
    def in_range(x: hw.Array[hw.int64, 8]):
        return hw.map(8, lambda i: (i << 60) + (i >> 1) + x[i])

    np.testing.assert_array_equal(in_range(np.zeros(8, np.int64)), [(i << 60) + (i >> 1) for i in range(8)])


@pytest.mark.rtl
def test_index_comparisons_in_hardware():
    @hw.kernel
    def bools(x: hw.Array[int8, 16]):
        return (hw.map(16, lambda i: (i < 2) + (i < 9) + x[i]), hw.map(16, lambda j: ~(j < 5) * 3 - (j < 11) + x[j]))

    x = np.arange(-8, 8, dtype=np.int8)
    r = bools.verify(x)
    np.testing.assert_array_equal(r.outputs[0], [(i < 2) + (i < 9) + x[i] for i in range(16)])
    assert r.outputs[1].dtype == np.int8


# ------------------------------------------------------------------------ sliding windows

NX, W = 32, 4


@hw.kernel
def fir(x: hw.Array[int32, NX], c: hw.Array[int32, W]):
    return hw.map(NX - W + 1, lambda i: hw.sum(W, lambda k: x[i : i + W][k] * c[k]))


@hw.kernel
def windows(x: hw.Array[int32, NX]):
    return hw.map(NX - W + 1, lambda w: x[w : w + W])


@hw.kernel
def box(img: hw.Array[int32, 8, 8]):
    return hw.map(
        (6, 6), lambda r, s: hw.sum(3, lambda u: hw.sum(3, lambda v: img[r : r + 3, s + 1 - 1 : s + 3][u, v]))
    )


def fir_inputs():
    rng = np.random.default_rng(5)
    return rng.integers(-1000, 1000, NX, dtype=np.int32), rng.integers(-9, 9, W, dtype=np.int32)


def test_sliding_windows():
    x, c = fir_inputs()
    want = np.lib.stride_tricks.sliding_window_view(x, W)
    np.testing.assert_array_equal(windows(x), want)
    got = fir(x, c)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, (want * c).sum(axis=1))
    np.testing.assert_array_equal(got, np.correlate(x, c, mode="valid"))
    img = np.arange(64, dtype=np.int32).reshape(8, 8) ** 2 % 17
    np.testing.assert_array_equal(box(img), np.lib.stride_tricks.sliding_window_view(img, (3, 3)).sum(axis=(2, 3)))


def test_window_lengths_must_be_constant():
    with pytest.raises(hw.TraceError) as e:

        @hw.kernel
        def growing(x: hw.Array[int32, NX]):
            return hw.map(8, lambda i: hw.sum(2, lambda k: x[i : 2 * i + 2][k]))

    assert e.value.message == (
        "the slice of axis 0 has traced bounds; they must be affine in index "
        "variables with a constant positive length stop - start, like x[i:i + 4]"
    )
    assert e.value.file == __file__


@pytest.mark.rtl
def test_sliding_windows_in_hardware():
    x, c = fir_inputs()
    r = fir.with_schedule(tile={"i": 29}).verify(x, c)
    assert r.cycles == r.predicted_cycles
    windows.verify(x)


# ------------------------------------------------------------ 64-bit fixed-point products

F32_32, F48_16 = hw.fixed(32, 32), hw.fixed(48, 16)


def _fixed_product_kernel(fx):
    def product(x: hw.Array[fx, 16], y: hw.Array[fx, 16]):
        return hw.map(16, lambda i: x[i] * y[i]), hw.map(16, lambda j: x[j] * 3 * y[j] + x[j])

    return hw.kernel(product)


def _wrap64(v):
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


@pytest.mark.parametrize("fx", [F32_32, F48_16], ids=["fixed32_32", "fixed48_16"])
def test_64_bit_fixed_products_are_exact(fx):
    from hwgen import interp

    kernel = _fixed_product_kernel(fx)
    rng = np.random.default_rng(11)
    edge = [-(1 << 63), (1 << 63) - 1, -1, 0, 1, 1 << fx.frac, -(1 << fx.frac), 3 << 40]
    a = np.concatenate([rng.integers(-(1 << 63), (1 << 63) - 1, 8, dtype=np.int64), edge]).astype(np.int64)
    b = np.concatenate([edge[::-1], rng.integers(-(1 << 40), 1 << 40, 8, dtype=np.int64)]).astype(np.int64)
    got, got2 = interp.run([r.node for r in kernel.program.results], {"x": a, "y": b})
    f = fx.frac
    for k in range(16):
        x, y = int(a[k]), int(b[k])
        assert int(got[k]) == _wrap64((x * y) >> f), (k, x, y)
        t = _wrap64((x * _wrap64(3 << f)) >> f)
        assert int(got2[k]) == _wrap64(_wrap64((t * y) >> f) + x), k
    # at the boundary: floats in, floats out
    xs, ys = np.linspace(-1000, 1000, 16), np.linspace(3, -7, 16)
    np.testing.assert_allclose(
        kernel(xs, ys)[0], fx.to_float(fx.quantize(xs)) * fx.to_float(fx.quantize(ys)), rtol=0, atol=2.0**-fx.frac * 2
    )


def test_64_bit_fixed_division_is_a_clear_error():
    with pytest.raises(hw.TypeMismatchError) as e:

        @hw.kernel
        def quotient(x: hw.Array[F32_32, 4], y: hw.Array[F32_32, 4]):
            return hw.map(4, lambda i: x[i] / y[i])

    assert e.value.message.startswith("dividing fixed(32,32) values is not supported: '/' on fixed types")
    assert e.value.file == __file__


@pytest.mark.rtl
def test_64_bit_fixed_products_in_hardware():
    rng = np.random.default_rng(2)
    kernel = _fixed_product_kernel(F48_16)
    kernel.verify(rng.uniform(-(2.0**40), 2.0**40, 16), rng.uniform(-(2.0**20), 2.0**20, 16))
    _fixed_product_kernel(F32_32).verify(rng.uniform(-3e4, 3e4, 16), rng.uniform(-2.0, 2.0, 16))


# ------------------------------------------ numpy's array methods, constant tables, mistakes

from hwgen import bool_, uint8, uint16  # noqa: E402

SQUARES = (np.arange(40) ** 2 % 97).astype(np.int16)  # 40 entries: a ROM (timing.ROM_MIN)
STEPS = np.array([-5, -2, 1, 4, 7, 10, 13, 16], dtype=np.int32)  # 8 entries: a multiplexer


@hw.kernel
def methods(a: hw.Array[int8, 6, 4], u: hw.Array[uint16, 8], f: hw.Array[bool_, 8], x: hw.Array[uint8, 16]):
    squares, steps = hw.table(SQUARES), hw.table(STEPS)
    return (
        a.sum(),
        u.sum(),
        a.max(axis=1),
        a.min(axis=0),
        a.sum(axis=(0, 1)),
        hw.map(6, lambda r: a[r, :].sum()),
        f.max(),
        f.min(),
        u.argmax(),
        u.argmin(),
        hw.argmax(16, lambda c: x[c] % 11),
        u.reshape(2, 4),
        a[:, 1].reshape(2, 3, 1),
        hw.map(16, lambda t: squares[hw.minimum(x[t], 39)] + steps[x[t] & 7] + steps[t % 8]),
    )


def methods_inputs():
    rng = np.random.default_rng(8)
    return (
        rng.integers(-128, 128, (6, 4), dtype=np.int8),
        rng.integers(0, 1 << 16, 8, dtype=np.uint16),
        rng.integers(0, 2, 8).astype(bool),
        rng.integers(0, 256, 16, dtype=np.uint8),
    )


def methods_reference(a, u, f, x):
    t = np.arange(16)
    return (
        a.sum(),
        u.sum(),
        a.max(axis=1),
        a.min(axis=0),
        a.sum(axis=(0, 1)),
        a.sum(axis=1),
        f.max(),
        f.min(),
        u.argmax(),
        u.argmin(),
        np.argmax(x % 11),
        u.reshape(2, 4),
        a[:, 1].reshape(2, 3, 1),
        SQUARES[np.minimum(x, 39)] + STEPS[x & 7] + STEPS[t % 8],
    )


def test_array_methods_and_tables_follow_numpy():
    args = methods_inputs()
    for k, (got, want) in enumerate(zip(methods(*args), methods_reference(*args))):
        want = np.asarray(want)
        assert np.asarray(got).dtype == want.dtype, (k, np.asarray(got).dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=str(k))


@pytest.mark.rtl
def test_array_methods_and_tables_in_hardware():
    methods.verify(*methods_inputs())


def _trace_error(body: str, *params):
    """The error tracing `body` (one kernel line) raises, with the line it names."""
    import linecache
    import os
    import tempfile

    text = (
        "import numpy as np\nimport hwgen as hw\nfrom hwgen import int32\nT = np.arange(8)\n"
        "@hw.kernel\ndef k(x: hw.Array[int32, 8], y: hw.Array[int32, 8, 2]):\n    " + body + "\n"
    )
    fd, path = tempfile.mkstemp(suffix=".py")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    try:
        with pytest.raises(hw.HwgenError) as e:
            exec(compile(text, path, "exec"), {})
        return e.value, path
    finally:
        linecache.clearcache()
        os.unlink(path)


MISTAKES = [
    (
        "x[0] = 5\n    return x",
        hw.TraceError,
        "arrays are immutable values inside a kernel; item assignment is not supported: build a new array "
        "instead, e.g. hw.map(n, lambda i: hw.where(i == 0, 5, x[i])) (or hw.multifold to accumulate into one)",
    ),
    (
        "return hw.map(8, lambda i: (x[i], x[i] + 1))",
        hw.TraceError,
        "the function given to hw.map returns a tuple of 2 values; it must return one scalar or array: write "
        "one hw.map per value, or return an array (hw.map(n, lambda c: ...)) to get a column each",
    ),
    (
        "return hw.sum(8, lambda i: (x[i], x[i]))",
        hw.TraceError,
        "the function given to hw.reduce (hw.sum, hw.max, hw.min) returns a tuple of 2 values; it must return "
        "one scalar or array: write one hw.reduce per value, or return an array (hw.map(n, lambda c: ...)) to "
        "get a column each",
    ),
    (
        "return hw.map(8, lambda i: T[x[i]])",
        hw.TraceError,
        "a numpy array cannot be indexed by a traced value; make the constant table hw.table(values) (a ROM, "
        "which data may index), or pass it as a kernel argument",
    ),
    (
        "return hw.map(8, lambda i: hw.table(T)[x[i]])",
        hw.TraceError,
        "subscript 0 of a hw.table may take values in [-2147483648, 2147483647], outside its axis of 8 (valid "
        "0 .. 7); keep it in range (x & 7, hw.minimum / hw.maximum, or a narrower dtype)",
    ),
    (
        "return y.reshape(16)",
        hw.TraceError,
        "x.reshape(16,) of an array of shape (8, 2) merges axes: subscripts of the original would not be affine "
        "in the new indices; keep the original axes and index them (x[r, c]), or reshape only by splitting axes "
        "(x.reshape(2, 4) of 8)",
    ),
    (
        "return x.reshape(3, 3)",
        hw.TypeMismatchError,
        "cannot reshape an array of shape (8,) (size 8) into (3, 3) (size 9)",
    ),
    (
        "return y.argmax()",
        hw.TraceError,
        "x.argmax() is supported on 1-D arrays; for rows of a 2-D array write hw.map(rows, lambda r: "
        "hw.argmax(x[r, :]))",
    ),
    (
        "return x.mean()",
        hw.TraceError,
        "a traced array has no attribute 'mean'; arrays support .shape, .dtype, .ndim, .T, .astype, .sum, .max, "
        ".min, .argmax, .argmin, .reshape, indexing and Python's operators; other operations are hwgen's "
        "patterns (hw.map, hw.sum, ...)",
    ),
    (
        "return hw.map(8, lambda i: x[i].item())",
        hw.TraceError,
        "a traced scalar has no attribute 'item'; scalars support Python's operators, .astype(...) and .dtype, "
        "and hwgen's functions (hw.where, hw.maximum, ...)",
    ),
    (
        "return x.sum(keepdims=True)",
        hw.TraceError,
        "x.sum(keepdims=True) is not supported; reduce, then index or hw.map the result into the shape you need",
    ),
    (
        "return hw.argmax(lambda c: x[c])",
        hw.TraceError,
        "hw.argmax takes a 1-D array, or a length and a function like hw.argmax(n, lambda c: x[c]); got only a "
        "function",
    ),
]


@pytest.mark.parametrize("body,kind,message", MISTAKES, ids=[m[0].split("(")[0][:20] for m in MISTAKES])
def test_mistakes_name_the_fix(body, kind, message):
    err, path = _trace_error(body)
    assert type(err) is kind and err.message == message, err.message
    assert err.file == path and err.line == 7


def test_unwritable_out_folder_is_one_error_line(capsys, tmp_path):
    from hwgen import cli

    app = tmp_path / "app.py"
    app.write_text(
        "import hwgen as hw\nfrom hwgen import int16\n\n@hw.kernel(metapipeline=False)\n"
        "def double(x: hw.Array[int16, 8]):\n    return hw.map(8, lambda i: x[i] * 2)\n"
    )
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    code = cli.main(["build", str(app), "--out", str(blocker / "x")])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == f"error: cannot write the output folder '{blocker / 'x'}': Not a directory\n"
    assert blocker.read_text() == "not a folder\n"


def test_data_compared_with_ints_beyond_64_bits():
    @hw.kernel
    def huge(x: hw.Array[int32, 4], v: hw.Array[hw.uint64, 4]):
        return (
            hw.map(4, lambda i: x[i] < 2**70),
            hw.map(4, lambda j: v[j] != -(2**64)),
            hw.map(4, lambda k: hw.where(2**80 > x[k], 1, 2)),
        )

    x = np.array([-5, 0, 7, 2**31 - 1], np.int32)
    v = np.array([0, 1, 2**63, 2**64 - 1], np.uint64)
    a, b, c = huge(x, v)
    assert a.dtype == np.bool_ and a.all() and b.dtype == np.bool_ and b.all()
    np.testing.assert_array_equal(c, [1, 1, 1, 1])


@pytest.mark.rtl
def test_tables_under_parallel_lanes_in_hardware():
    rom = (np.arange(64) * 37 % 251 - 120).astype(np.int16)

    @hw.kernel(tile={"p": 16}, par={"p": 4})
    def lookup(x: hw.Array[uint8, 32]):
        t, s = hw.table(rom), hw.table(STEPS)
        return hw.map(32, lambda p: t[x[p] & 63] + s[p % 8])

    x = np.random.default_rng(4).integers(0, 256, 32, dtype=np.uint8)
    want = rom[x & 63] + STEPS[np.arange(32) % 8]
    np.testing.assert_array_equal(lookup(x), want)
    r = lookup.verify(x)
    assert r.cycles == r.predicted_cycles
