"""The error corpus: user mistakes (kernel API, schedules, dtypes, app files, command-line
arguments, an app's inputs()) run through the command line on small app files. Each must print
exactly one line, `error: FILE:LINE: message` (or `error: FILE: message`, or `error: message`
for a bad argument), with exit status 1: the message is checked whole, the line is the one
marked `# HERE` in the app, no Python exception class or hwgen internal name shows, and nothing
is left in the output folder.

More mistakes, checked the same way through the API, are in tests/test_errors.py, the
command-line ones of tests/test_cli.py (missing file, no kernel, unknown kernel, bad --seed, a
bad schedule, an out-of-bounds subscript) and the messages of tests/test_front_findings.py
(MISTAKES); this corpus does not repeat them.
"""

import re

import pytest

from hwgen import cli
from hwgen.errors import show_path

HEADER = (
    "import numpy as np\nimport hwgen as hw\n"
    "from hwgen import int8, int16, int32, int64, uint8, uint64, bool_\nT = np.arange(8)\n"
)
K = "@hw.kernel\ndef k(x: hw.Array[int32, 8], y: hw.Array[int32, 8, 2], u: hw.Array[uint8, 8]):\n"


def body(line):
    return K + "    " + line + "  # HERE\n"


CASES = [
    # --- kernel API
    ("item-assignment", "build", K + "    x[0] = 5  # HERE\n    return x\n", []),
    ("map-returns-tuple", "build", body("return hw.map(8, lambda i: (x[i], u[i]))"), []),
    ("sum-returns-tuple", "build", body("return hw.sum(8, lambda i: (x[i], x[i]))"), []),
    ("unknown-array-method", "build", body("return x.mean()"), []),
    ("unknown-scalar-method", "build", body("return hw.map(8, lambda i: x[i].item())"), []),
    ("numpy-table-data-index", "build", body("return hw.map(8, lambda i: T[u[i]])"), []),
    ("numpy-table-index-var", "build", body("return hw.map(8, lambda i: T[i] + x[i])"), []),
    ("table-index-out-of-range", "build", body("return hw.map(8, lambda i: hw.table(T)[x[i]])"), []),
    ("table-of-floats", "build", body("return hw.map(8, lambda i: hw.table([0.5, 1.5])[i % 2])"), []),
    ("reshape-merges-axes", "build", body("return y.reshape(16)"), []),
    ("reshape-wrong-size", "build", body("return x.reshape(3, 3)"), []),
    ("argmax-2d", "build", body("return y.argmax()"), []),
    ("argmax-function-only", "build", body("return hw.argmax(lambda c: x[c])"), []),
    ("sum-keepdims", "build", body("return x.sum(keepdims=True)"), []),
    ("sum-bad-axis", "build", body("return y.sum(axis=2)"), []),
    ("true-division", "build", body("return hw.map(8, lambda i: x[i] / 2)"), []),
    ("power", "build", body("return hw.map(8, lambda i: x[i] ** 2)"), []),
    ("len-of-scalar", "build", body("return hw.map(8, lambda i: len(x[i]))"), []),
    ("map-missing-function", "build", body("return hw.map(8)"), []),
    ("map-zero-domain", "build", body("return hw.map(0, lambda i: x[i])"), []),
    ("too-many-subscripts", "build", body("return hw.map(8, lambda i: x[i, 0])"), []),
    ("float-slice-bound", "build", body("return x[0.5:3]"), []),
    ("growing-window", "build", body("return hw.map(4, lambda i: hw.sum(2, lambda k: x[i:2 * i + 2][k]))"), []),
    ("undefined-name", "build", body("return hw.map(8, lambda i: x[i] + zz)"), []),
    ("returns-nothing", "build", K.replace("@hw.kernel", "@hw.kernel  # HERE") + "    hw.map(8, lambda i: x[i])\n", []),
    ("returns-string", "build", K.replace("@hw.kernel", "@hw.kernel  # HERE") + "    return 'x'\n", []),
    ("groupby-no-max-keys", "build", body("return hw.groupby_fold(8, lambda i: (u[i], x[i]))"), []),
    ("groupby-not-pair", "build", body("return hw.groupby_fold(8, lambda i: x[i], max_keys=4)"), []),
    ("groupby-bool-key", "build", body("return hw.groupby_fold(8, lambda i: (x[i] > 0, x[i]), max_keys=4)"), []),
    ("flatmap-without-emit", "build", body("return hw.flatmap(8, lambda i: x[i], max_out=2)"), []),
    ("multifold-init-scalar", "build", body("return hw.multifold(8, 0, lambda i: (u[i] % 4, x[i]))"), []),
    (
        "multifold-where-out-of-range",
        "build",
        body("return hw.multifold(8, hw.zeros(4, int32), lambda i: (i // 2 + 1, x[i]))"),
        [],
    ),
    (
        "multifold-data-out-of-range",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8], u: hw.Array[uint8, 8]):\n"
        "    return hw.multifold(8, hw.zeros(4, int32), lambda i: (u[i], x[i]))  # HERE\n"
        "def inputs(seed):\n    return np.arange(8, dtype=np.int32), np.array([0, 1, 2, 3, 3, 2, 9, 0], np.uint8)\n",
        [],
    ),
    ("index-beyond-int64", "build", body("return hw.map(8, lambda i: hw.where(i + 2**63 > 2**63 + 3, x[i], 0))"), []),
    ("reduce-op-arity", "build", body("return hw.reduce(8, lambda i: x[i], op=lambda a: a)"), []),
    (
        "reduce-op-returns-other-dtype",
        "build",
        body("return hw.reduce(8, lambda i: x[i], op=lambda a, b: (a + b).astype(int8))"),
        [],
    ),
    ("map-not-function", "build", body("return hw.map(8, 5)"), []),
    ("zeros-bad-dtype", "build", body("return hw.zeros(8, float)"), []),
    ("full-float", "build", body("return hw.full(8, 0.5, int32)"), []),
    ("filter-pred-array", "build", body("return hw.filter(8, lambda i: y[i, :] > 0)"), []),
    (
        "flatmap-too-many",
        "build",
        body("return hw.flatmap(8, lambda i: (hw.emit(x[i]), hw.emit(x[i]), hw.emit(x[i])), max_out=2)"),
        [],
    ),
    ("astype-unknown", "build", body("return x.astype(float)"), []),
    ("matmul-shapes", "build", body("return y @ y"), []),
    ("broadcast-shapes", "build", body("return x + y"), []),
    ("argmax-of-scalar", "build", body("return hw.argmax(x[0])"), []),
    ("iterate-array", "build", body("return sum(v for v in x)"), []),
    (
        "fixed-division-64",
        "build",
        "F = hw.fixed(32, 32)\n@hw.kernel\ndef k(a: hw.Array[F, 4]):\n"
        "    return hw.map(4, lambda i: a[i] / a[i])  # HERE\n",
        [],
    ),
    (
        "fixed-sum-method",
        "build",
        "F = hw.fixed(16, 16)\n@hw.kernel\ndef k(a: hw.Array[F, 4]):\n    return a.sum()  # HERE\n",
        [],
    ),
    ("fixed-bad-width", "build", "F = hw.fixed(3, 3)  # HERE\n", []),
    ("exp-of-int", "build", body("return hw.map(8, lambda i: hw.exp(x[i]))"), []),
    ("param-unknown-dtype", "build", "@hw.kernel\ndef k(a: hw.Array[float, 4]):  # HERE\n    return a\n", []),
    ("param-not-annotated-array", "build", "@hw.kernel  # HERE\ndef k(a: list):\n    return a\n", []),
    ("kernel-called-at-import", "build", K + "    return x\nk(np.zeros(3, np.int32), 0, 0)  # HERE\n", []),
    # --- schedules
    (
        "tile-not-dict",
        "build",
        "@hw.kernel(tile='i')  # HERE\ndef k(x: hw.Array[int32, 8]):\n    return hw.map(8, lambda i: x[i])\n",
        [],
    ),
    (
        "par-zero",
        "build",
        "@hw.kernel(tile={'i': 4}, par={'i': 0})  # HERE\ndef k(x: hw.Array[int32, 8]):\n"
        "    return hw.map(8, lambda i: x[i])\n",
        [],
    ),
    (
        "with-schedule-bad",
        "build",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8]):\n    return hw.map(8, lambda i: x[i])\n"
        "k2 = k.with_schedule(par={'i': 3})  # HERE\n",
        [],
    ),
    (
        "groupby-par",
        "build",
        "@hw.kernel(tile={'i': 8}, par={'i': 2})\ndef k(x: hw.Array[int32, 8]):\n"
        "    return hw.groupby_fold(8, lambda i: (x[i], x[i]), max_keys=4)  # HERE\n",
        [],
    ),
    (
        "scatter-par",
        "build",
        "@hw.kernel(tile={'i': 8}, par={'i': 2})\ndef k(x: hw.Array[int32, 8], d: hw.Array[int32, 8]):\n"
        "    return hw.multifold(8, hw.zeros(4, int32), lambda i: (d[i] & 3, x[i]))  # HERE\n",
        [],
    ),
    (
        "groupby-nested",
        "build",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8, 4]):\n"
        "    return hw.map(8, lambda r: hw.groupby_fold(4, lambda c: (x[r, c], x[r, c]), max_keys=4)[2])  # HERE\n",
        [],
    ),
    # --- app files and the command line
    ("app-syntax-error", "build", "def broken(:  # HERE\n", []),
    ("app-raises-at-import", "build", "X = {}['missing']  # HERE\n", []),
    ("app-not-python", "build", None, []),
    ("bad-latency", "sim", K + "    return x\n", ["--latency", "0"]),
    ("bad-jitter", "sim", K + "    return x\n", ["--jitter", "500"]),
    ("bad-target", "sim", K + "    return x\n", ["--target", "ice40"]),
    ("bad-device", "synth", K + "    return x\n", ["--target", "ecp5", "--device", "99k"]),
    ("bad-freq", "synth", K + "    return x\n", ["--target", "ecp5", "--freq", "0"]),
    ("unknown-option", "build", K + "    return x\n", ["--fast"]),
    # --- inputs()
    (
        "inputs-wrong-shape",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8]):\n    return x\n"
        "def inputs(seed):  # HERE\n    return (np.zeros(4, np.int32),)\n",
        [],
    ),
    (
        "inputs-wrong-dtype",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8]):\n    return x\n"
        "def inputs(seed):  # HERE\n    return (np.zeros(8, np.float64),)\n",
        [],
    ),
    (
        "inputs-wrong-count",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8], s: int32):\n    return x\n"
        "def inputs(seed):  # HERE\n    return (np.zeros(8, np.int32),)\n",
        [],
    ),
    (
        "inputs-scalar-out-of-range",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8], s: int8):\n    return x\n"
        "def inputs(seed):  # HERE\n    return (np.zeros(8, np.int32), 300)\n",
        [],
    ),
    (
        "inputs-raises",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8]):\n    return x\n"
        "def inputs(seed):\n    return (np.zeros(8, np.int32)[9],)  # HERE\n",
        [],
    ),
    (
        "inputs-list",
        "sim",
        "@hw.kernel\ndef k(x: hw.Array[int32, 8]):\n    return x\ndef inputs(seed):  # HERE\n    return ([1, 2, 3],)\n",
        [],
    ),
]


# id -> (where the error points: "line" (the # HERE line), "file" or "none"; the message)
EXPECTED = {
    "item-assignment": (
        "line",
        "arrays are immutable values inside a kernel; item assignment is not supported: build a new array instead, e.g. hw.map(n, lambda i: hw.where(i == 0, 5, x[i])) (or hw.multifold to accumulate into one)",
    ),
    "map-returns-tuple": (
        "line",
        "the function given to hw.map returns a tuple of 2 values; it must return one scalar or array: write one hw.map per value, or return an array (hw.map(n, lambda c: ...)) to get a column each",
    ),
    "sum-returns-tuple": (
        "line",
        "the function given to hw.reduce (hw.sum, hw.max, hw.min) returns a tuple of 2 values; it must return one scalar or array: write one hw.reduce per value, or return an array (hw.map(n, lambda c: ...)) to get a column each",
    ),
    "unknown-array-method": (
        "line",
        "a traced array has no attribute 'mean'; arrays support .shape, .dtype, .ndim, .T, .astype, .sum, .max, .min, .argmax, .argmin, .reshape, indexing and Python's operators; other operations are hwgen's patterns (hw.map, hw.sum, ...)",
    ),
    "unknown-scalar-method": (
        "line",
        "a traced scalar has no attribute 'item'; scalars support Python's operators, .astype(...) and .dtype, and hwgen's functions (hw.where, hw.maximum, ...)",
    ),
    "numpy-table-data-index": (
        "line",
        "a numpy array cannot be indexed by a traced value; make the constant table hw.table(values) (a ROM, which data may index), or pass it as a kernel argument",
    ),
    "numpy-table-index-var": (
        "line",
        "a numpy array cannot be indexed by a traced value; make the constant table hw.table(values) (a ROM, which data may index), or pass it as a kernel argument",
    ),
    "table-index-out-of-range": (
        "line",
        "subscript 0 of a hw.table may take values in [-2147483648, 2147483647], outside its axis of 8 (valid 0 .. 7); keep it in range (x & 7, hw.minimum / hw.maximum, or a narrower dtype)",
    ),
    "table-of-floats": (
        "line",
        "hw.table of float64 values needs dtype=...: an integer dtype, or hw.fixed(...) for fractional numbers",
    ),
    "reshape-merges-axes": (
        "line",
        "x.reshape(16,) of an array of shape (8, 2) merges axes: subscripts of the original would not be affine in the new indices; keep the original axes and index them (x[r, c]), or reshape only by splitting axes (x.reshape(2, 4) of 8)",
    ),
    "reshape-wrong-size": ("line", "cannot reshape an array of shape (8,) (size 8) into (3, 3) (size 9)"),
    "argmax-2d": (
        "line",
        "x.argmax() is supported on 1-D arrays; for rows of a 2-D array write hw.map(rows, lambda r: hw.argmax(x[r, :]))",
    ),
    "argmax-function-only": (
        "line",
        "hw.argmax takes a 1-D array, or a length and a function like hw.argmax(n, lambda c: x[c]); got only a function",
    ),
    "sum-keepdims": (
        "line",
        "x.sum(keepdims=True) is not supported; reduce, then index or hw.map the result into the shape you need",
    ),
    "sum-bad-axis": (
        "line",
        "x.sum(axis=2): axis must be an int (or a tuple of ints) from -2 to 1 for an array of 2 dimension(s)",
    ),
    "true-division": (
        "line",
        "true division '/' gives floats in numpy; hwgen has integer types only: use '//' (or fixed point, hw.fixed)",
    ),
    "power": ("line", "'**' is not supported on traced values; multiply explicitly"),
    "len-of-scalar": ("line", "a traced scalar has no length; it is one value"),
    "map-missing-function": (
        "line",
        "tracing kernel 'k' failed: hw.map() missing 1 required positional argument: 'fn'",
    ),
    "map-zero-domain": ("line", "the domain of hw.map must be a positive int or a tuple of positive ints, got (0,)"),
    "too-many-subscripts": ("line", "too many subscripts: 2 for an array of 1 dimensions"),
    "float-slice-bound": (
        "line",
        "the slice of axis 0 has a bound 0.5; slice bounds must be ints or index expressions",
    ),
    "growing-window": (
        "line",
        "the slice of axis 0 has traced bounds; they must be affine in index variables with a constant positive length stop - start, like x[i:i + 4]",
    ),
    "undefined-name": ("line", "tracing kernel 'k' failed: name 'zz' is not defined"),
    "returns-nothing": ("line", "kernel 'k' returns nothing; return its result(s)"),
    "returns-string": (
        "line",
        "the result of kernel 'k' is 'x'; a kernel returns arrays and scalars computed from its arguments",
    ),
    "groupby-no-max-keys": (
        "line",
        "hw.groupby_fold needs max_keys, an int from 1 to 256 (the hardware compares every key each cycle), got None",
    ),
    "groupby-not-pair": ("line", "the function given to hw.groupby_fold must return a pair (key, value)"),
    "groupby-bool-key": ("line", "hw.groupby_fold keys must be integers, got bool_"),
    "flatmap-without-emit": (
        "line",
        "the function given to hw.flatmap must return hw.emit(value, when=...) (or a tuple of them)",
    ),
    "multifold-init-scalar": ("line", "hw.multifold's init must be an array (an argument, hw.zeros, hw.full, ...)"),
    "multifold-where-out-of-range": (
        "line",
        "hw.multifold: subscript 0 of `where` takes values in [1, 4], outside the accumulator's axis of 4; keep it in range",
    ),
    "multifold-data-out-of-range": (
        "line",
        "hw.multifold: subscript 0 of `where` is 9 at i=6, outside the accumulator's axis of 4 (valid 0 .. 3); keep the data in range, or clamp it with hw.minimum / hw.maximum",
    ),
    "index-beyond-int64": (
        "line",
        "'+' on index values gives values in [9223372036854775808, 9223372036854775815], beyond int64: hwgen computes Python-int arithmetic on index values in int64; keep the constants smaller or convert one side with .astype(...) (it then wraps like numpy)",
    ),
    "fixed-division-64": (
        "line",
        "dividing fixed(32,32) values is not supported: '/' on fixed types needs a double-width quotient and is limited to fixed types of at most 32 bits; convert with .astype(hw.fixed(...)) to a 32-bit fixed type first, or divide the integers with '//'",
    ),
    "fixed-sum-method": (
        "line",
        "x.sum() of fixed(16,16) values is not supported (numpy sums the floats in float64); use hw.sum(...), which accumulates in fixed(16,16) and wraps",
    ),
    "fixed-bad-width": ("line", "hw.fixed(3, 3) is 6 bits wide; fixed types are 8, 16, 32 or 64 bits wide in all"),
    "exp-of-int": ("line", "hw.exp takes fixed-point values (hw.fixed); convert with .astype(hw.fixed(...))"),
    "param-unknown-dtype": ("line", "float64 is not supported: hwgen has integer types only (int8 .. uint64, bool_)"),
    "param-not-annotated-array": (
        "line",
        "parameter 'a' is annotated list; expected hw.Array[dtype, *shape] or a dtype such as int32",
    ),
    "kernel-called-at-import": (
        "line",
        "argument 'x' of kernel 'k': expected an int32 array of shape (8,), got an int32 array of shape (3,)",
    ),
    "tile-not-dict": ("line", "tile must be a dict of index name to size, like {'i': 16}, got 'i'"),
    "par-zero": ("line", "par['i'] must be a positive int, got 0"),
    "with-schedule-bad": (
        "line",
        "par 3 for index 'i' needs tiles of a multiple of 3 elements, which do not divide its extent 8; choose lanes that divide 8",
    ),
    "groupby-par": ("line", "hw.groupby_fold takes one element per cycle; par on 'i' is not supported"),
    "scatter-par": (
        "line",
        "a subscript computed from data changes with the parallel lanes of index 'i', so two lanes could use one element at once; drop par on 'i' or parallelise another index",
    ),
    "groupby-nested": (
        "line",
        "a group-by, filter or flatmap inside another pattern is not supported; make it a separate result",
    ),
    "app-syntax-error": ("line", "invalid Python syntax: invalid syntax"),
    "app-raises-at-import": ("line", "loading the app failed: there is no key 'missing'"),
    "app-not-python": ("file", "not a Python file (expected APP.py)"),
    "bad-latency": ("none", "--latency must be from 1 to 200 cycles, got 0"),
    "bad-jitter": ("none", "--jitter must be from 0 to 200 cycles, got 500"),
    "bad-target": ("none", "argument --target: invalid choice: 'ice40' (choose from 'ecp5')"),
    "bad-device": ("none", "unknown ecp5 device '99k'; expected one of 25k, 45k, 85k"),
    "bad-freq": ("none", "--freq must be from 1 to 1000 MHz, got 0.0"),
    "unknown-option": ("none", "unrecognized arguments: --fast"),
    "inputs-wrong-shape": (
        "line",
        "inputs() returned a bad argument: argument 'x' of kernel 'k': expected an int32 array of shape (8,), got an int32 array of shape (4,)",
    ),
    "inputs-wrong-dtype": (
        "line",
        "inputs() returned a bad argument: argument 'x' of kernel 'k': expected an int32 array of shape (8,), got a float64 array of shape (8,)",
    ),
    "inputs-wrong-count": ("line", "inputs() returned a bad argument: kernel 'k' takes 2 argument(s) (x, s), got 1"),
    "inputs-scalar-out-of-range": (
        "line",
        "inputs() returned a bad argument: argument 's' of kernel 'k': 300 is out of range for int8 [-128, 127]",
    ),
    "inputs-raises": ("line", "inputs() failed: index 9 is out of bounds for axis 0 with size 8"),
    "inputs-list": (
        "line",
        "inputs() returned a bad argument: argument 'x' of kernel 'k': expected an int32 array of shape (8,) (numpy), got list",
    ),
    "reduce-op-arity": (
        "line",
        "the reduce op must be a function of two arguments (a, b), like lambda a, b: hw.maximum(a, b)",
    ),
    "reduce-op-returns-other-dtype": (
        "line",
        "the reduce op returns int8 but the values are int32; it must return the same dtype",
    ),
    "map-not-function": ("line", "hw.map expects a function (lambda) of the indices, got 5"),
    "zeros-bad-dtype": ("line", "float64 is not supported: hwgen has integer types only (int8 .. uint64, bool_)"),
    "full-float": ("line", "the float 0.5 cannot be used: hwgen has integer types only"),
    "filter-pred-array": (
        "line",
        "hw.filter and hw.flatmap conditions and values must be scalars, got an array; reduce it to one value (hw.sum, .max(), ...) or give each element its own index",
    ),
    "flatmap-too-many": ("line", "hw.flatmap: the function emits 3 values but max_out is 2"),
    "astype-unknown": ("line", "float64 is not supported: hwgen has integer types only (int8 .. uint64, bool_)"),
    "matmul-shapes": ("line", "'@' of shapes (8, 2) and (8, 2): inner dimensions 2 and 8 differ"),
    "broadcast-shapes": ("line", "arrays of shapes (8,), (8, 2) cannot be broadcast together"),
    "argmax-of-scalar": ("line", "hw.argmax takes a 1-D array (or hw.argmax(n, lambda c: ...)), got a scalar"),
    "iterate-array": ("line", "a traced array cannot be iterated in Python; use hw.map over its indices"),
}

EXCEPTION_NAMES = re.compile(r"\b\w*(Error|Exception|Warning)\b|Traceback")
INTERNAL_NAMES = re.compile(r"Val\(|ArrayVal|TableVal|\bir\.|hwgen/|hwgen\.lang|<class|__\w+__|0x[0-9a-f]{6,}")


def test_the_corpus_is_large_and_consistent():
    assert len(CASES) >= 40
    assert sorted(c[0] for c in CASES) == sorted(EXPECTED)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mistake_prints_one_error_line(case, tmp_path, monkeypatch, capsys):
    cid, command, source, extra = case
    monkeypatch.chdir(tmp_path)
    app = tmp_path / ("app.txt" if cid == "app-not-python" else "app.py")
    text = HEADER + source if source is not None else "x\n"
    app.write_text(text)
    out_dir = tmp_path / "out"
    argv = [command, str(app)] + (["--out", str(out_dir)] if command != "sim" else []) + extra
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("error: "), err
    where, message = EXPECTED[cid]
    path = show_path(str(app))
    if where == "line":
        marked = [n for n, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("# HERE")]
        assert len(marked) == 1
        assert err == f"error: {path}:{marked[0]}: {message}\n"
    elif where == "file":
        assert err == f"error: {path}: {message}\n"
    else:
        assert err == f"error: {message}\n"
    assert not EXCEPTION_NAMES.search(err), err
    assert not INTERNAL_NAMES.search(err), err
    assert "PASS" not in out and "built" not in out
    for folder in (out_dir, tmp_path / "rtl_out"):
        assert not folder.exists() or list(folder.iterdir()) == []
